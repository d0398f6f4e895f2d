//! Per-kind tables: for each rule, an object that passes and one that
//! fails; and a property that no message ever carries a submitted value.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::identity::TerraformClusterIdentity;
use crate::plan::TerraformPlan;
use crate::{
    TerraformCluster, TerraformClusterTemplate, TerraformMachine, TerraformMachinePool,
    TerraformMachinePoolTemplate, TerraformMachineTemplate,
};

fn obj<K: serde::de::DeserializeOwned>(kind: &str, spec: Value) -> K {
    serde_json::from_value(json!({
        "apiVersion": crate::API_VERSION, "kind": kind,
        "metadata": {"name": "x", "namespace": "ns"},
        "spec": spec,
    }))
    .unwrap_or_else(|e| panic!("{kind}: {e}"))
}

fn fields(verdict: &Verdict) -> Vec<&str> {
    verdict
        .violations
        .iter()
        .map(|v| v.field.as_str())
        .collect()
}

const IMAGE: &str = "ghcr.io/captf-io/aws-machinepool:v0.1.0-opentofu";

fn pool(spec: Value) -> TerraformMachinePool {
    obj("TerraformMachinePool", spec)
}

fn machine(spec: Value) -> TerraformMachine {
    obj("TerraformMachine", spec)
}

fn cluster(spec: Value) -> TerraformCluster {
    obj("TerraformCluster", spec)
}

fn create() -> Request {
    Request::create("alice")
}

fn update() -> Request {
    Request::update("alice")
}

#[test]
fn pool_rules_one_passing_and_one_failing_object_each() {
    let cases: &[(&str, Value, &[&str])] = &[
        ("image ok", json!({"source": {"image": IMAGE}}), &[]),
        (
            "image bad",
            json!({"source": {"image": "not a reference"}}),
            &["spec.source.image"],
        ),
        (
            "image empty",
            json!({"source": {"image": ""}}),
            &["spec.source.image"],
        ),
        (
            "variables ok",
            json!({"source": {"image": IMAGE}, "variables": {"instance_type": "m6i.large"}}),
            &[],
        ),
        (
            "variables empty",
            json!({"source": {"image": IMAGE}, "variables": {}}),
            &["spec.variables"],
        ),
        (
            "reserved prefix",
            json!({"source": {"image": IMAGE}, "variables": {"captf_tags": {}}}),
            &["spec.variables[captf_tags]"],
        ),
        (
            "contract input",
            json!({"source": {"image": IMAGE}, "variables": {"replicas": 3}}),
            &["spec.variables[replicas]"],
        ),
        (
            "meta-argument",
            json!({"source": {"image": IMAGE}, "variables": {"depends_on": []}}),
            &["spec.variables[depends_on]"],
        ),
        (
            "identifier",
            json!({"source": {"image": IMAGE}, "variables": {"a.b": 1}}),
            &["spec.variables[a.b]"],
        ),
        (
            "sources ok",
            json!({"source": {"image": IMAGE}, "variablesFrom": [{"secretRef": {"name": "s"}}]}),
            &[],
        ),
        (
            "sources both",
            json!({"source": {"image": IMAGE}, "variablesFrom": [{"secretRef": {"name": "s"}, "configMapRef": {"name": "c"}}]}),
            &["spec.variablesFrom[0]"],
        ),
        (
            "sources none",
            json!({"source": {"image": IMAGE}, "variablesFrom": [{"optional": true}]}),
            &["spec.variablesFrom[0]"],
        ),
        (
            "jobs ok",
            json!({"source": {"image": IMAGE}, "jobs": {"activeDeadlineSeconds": 3600, "lockTimeoutSeconds": 300}}),
            &[],
        ),
        (
            "jobs lock",
            json!({"source": {"image": IMAGE}, "jobs": {"lockTimeoutSeconds": 4000}}),
            &["spec.jobs.lockTimeoutSeconds"],
        ),
        (
            "jobs privileged",
            json!({"source": {"image": IMAGE}, "jobs": {"securityContext": {"privileged": true}}}),
            &["spec.jobs.securityContext.privileged"],
        ),
        (
            "jobs pod root",
            json!({"source": {"image": IMAGE}, "jobs": {"podSecurityContext": {"runAsUser": 0}}}),
            &["spec.jobs.podSecurityContext.runAsUser"],
        ),
        (
            "jobs env",
            json!({"source": {"image": IMAGE}, "jobs": {"env": [{"name": "TF_LOG", "value": "x"}]}}),
            &["spec.jobs.env[0].name"],
        ),
        (
            "drift zero",
            json!({"source": {"image": IMAGE}, "drift": {"intervalSeconds": 0}}),
            &["spec.drift.intervalSeconds"],
        ),
        (
            "drift ok",
            json!({"source": {"image": IMAGE}, "drift": {"intervalSeconds": 1, "action": "Report"}}),
            &[],
        ),
    ];
    for (name, spec, want) in cases {
        let verdict = terraform_machine_pool(&create(), &pool(spec.clone()), None);
        assert_eq!(fields(&verdict), *want, "{name}");
    }
}

#[test]
fn pool_reports_every_violation_at_once() {
    let bad = pool(json!({
        "source": {"image": "registry/UPPER:case"},
        "variables": {"captf_x": 1, "machinepool_name": "n", "count": 2, "ok": 3},
        "variablesFrom": [{"configMapRef": {"name": "a"}, "secretRef": {"name": "b"}}],
        "jobs": {
            "activeDeadlineSeconds": 100, "lockTimeoutSeconds": 200,
            "env": [{"name": "HOME", "value": "/"}],
            "securityContext": {"allowPrivilegeEscalation": true, "readOnlyRootFilesystem": false},
        },
    }));
    let verdict = terraform_machine_pool(&create(), &bad, None);
    assert_eq!(verdict.violations.len(), 9, "{:#?}", verdict.violations);
}

#[test]
fn job_policy_is_checked_only_when_it_changes_and_never_while_deleting() {
    let bad_jobs =
        json!({"source": {"image": IMAGE}, "jobs": {"securityContext": {"privileged": true}}});
    let stored = pool(bad_jobs.clone());
    let mut relabelled = stored.clone();
    relabelled.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    assert!(terraform_machine_pool(&update(), &relabelled, Some(&stored)).allowed());

    let mut deleting = stored.clone();
    deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    deleting.metadata.finalizers = Some(vec![]);
    assert!(terraform_machine_pool(&create(), &deleting, None).allowed());

    let old = pool(json!({"source": {"image": IMAGE}}));
    assert!(!terraform_machine_pool(&update(), &stored, Some(&old)).allowed());
}

#[test]
fn delete_is_always_allowed() {
    let bad = pool(json!({"source": {"image": ""}}));
    let req = Request {
        operation: Operation::Delete,
        ..create()
    };
    assert!(terraform_machine_pool(&req, &bad, None).allowed());
}

#[test]
fn cluster_rules() {
    let id = json!({"name": "aws"});
    let ok = cluster(json!({"source": {"image": IMAGE}, "identityRef": id}));
    assert!(terraform_cluster(&create(), &ok, None).allowed());

    let no_identity = cluster(json!({"source": {"image": IMAGE}, "defaults": {"identityRef": id}}));
    assert_eq!(
        fields(&terraform_cluster(&create(), &no_identity, None)),
        ["spec.identityRef"]
    );

    let role = cluster(
        json!({"source": {"image": IMAGE}, "identityRef": id, "variables": {"control_plane_endpoint": 1, "machine_name": "ok"}}),
    );
    assert_eq!(
        fields(&terraform_cluster(&create(), &role, None)),
        ["spec.variables[control_plane_endpoint]"]
    );

    let defaults_jobs = cluster(
        json!({"source": {"image": IMAGE}, "identityRef": id, "defaults": {"jobs": {"podSecurityContext": {"seccompProfile": {"type": "Unconfined"}}}}}),
    );
    assert_eq!(
        fields(&terraform_cluster(&create(), &defaults_jobs, None)),
        ["spec.defaults.jobs.podSecurityContext.seccompProfile.type"]
    );

    let half = cluster(
        json!({"source": {"image": IMAGE}, "identityRef": id, "controlPlaneEndpoint": {"host": "h"}}),
    );
    assert_eq!(
        fields(&terraform_cluster(&create(), &half, None)),
        ["spec.controlPlaneEndpoint"]
    );

    let set = cluster(
        json!({"source": {"image": IMAGE}, "identityRef": id, "controlPlaneEndpoint": {"host": "h", "port": 6443}}),
    );
    let moved = cluster(
        json!({"source": {"image": IMAGE}, "identityRef": id, "controlPlaneEndpoint": {"host": "h2", "port": 6443}}),
    );
    let completing = cluster(
        json!({"source": {"image": IMAGE}, "identityRef": id, "controlPlaneEndpoint": {"host": "h"}}),
    );
    assert!(terraform_cluster(&update(), &set, Some(&completing)).allowed());
    assert_eq!(
        fields(&terraform_cluster(&update(), &moved, Some(&set))),
        ["spec.controlPlaneEndpoint"]
    );
    assert_eq!(
        fields(&terraform_cluster(&update(), &ok, Some(&set))),
        ["spec.controlPlaneEndpoint"]
    );
}

#[test]
fn machine_rules() {
    let base = json!({"source": {"image": IMAGE}, "variables": {"size": "m"}});
    let stored = machine(base.clone());
    assert!(terraform_machine(&create(), &stored, None).allowed());
    let role = machine(
        json!({"source": {"image": IMAGE}, "variables": {"machine_name": "x", "replicas": 1}}),
    );
    assert_eq!(
        fields(&terraform_machine(&create(), &role, None)),
        ["spec.variables[machine_name]"]
    );

    // Definition fields are immutable; policy fields are not.
    let changed = machine(
        json!({"source": {"image": "ghcr.io/x/y:v2"}, "identityRef": {"name": "i"}, "variables": {"size": "l"}, "variablesFrom": [{"configMapRef": {"name": "c"}}]}),
    );
    assert_eq!(
        fields(&terraform_machine(&update(), &changed, Some(&stored))),
        [
            "spec.source",
            "spec.identityRef",
            "spec.variables",
            "spec.variablesFrom"
        ]
    );
    let policy = machine(
        json!({"source": {"image": IMAGE}, "variables": {"size": "m"}, "drift": {"intervalSeconds": 0}, "remediation": {"annotateMachine": true}}),
    );
    assert!(terraform_machine(&update(), &policy, Some(&stored)).allowed());

    // providerID: set once, and only by the manager.
    let with_id = machine(
        json!({"source": {"image": IMAGE}, "variables": {"size": "m"}, "providerID": "aws:///a/i-1"}),
    );
    let other_id = machine(
        json!({"source": {"image": IMAGE}, "variables": {"size": "m"}, "providerID": "aws:///a/i-2"}),
    );
    assert_eq!(
        fields(&terraform_machine(&update(), &with_id, Some(&stored))),
        ["spec.providerID"]
    );
    let by_manager = Request {
        manager_username: Some("system:serviceaccount:captf-system:captf-manager".into()),
        ..Request::update("system:serviceaccount:captf-system:captf-manager")
    };
    assert!(terraform_machine(&by_manager, &with_id, Some(&stored)).allowed());
    assert_eq!(
        fields(&terraform_machine(&by_manager, &other_id, Some(&with_id))),
        ["spec.providerID"]
    );
    // A create may carry a value (clusterctl move).
    assert!(terraform_machine(&create(), &with_id, None).allowed());
    // Metadata-only changes pass even over a stored policy that would not.
    let bad_stored = machine(
        json!({"source": {"image": IMAGE}, "jobs": {"securityContext": {"privileged": true}}}),
    );
    assert!(terraform_machine(&update(), &bad_stored, Some(&bad_stored)).allowed());
}

#[test]
fn template_rules() {
    let tmpl = |spec: Value, meta: Value| -> TerraformMachineTemplate {
        obj(
            "TerraformMachineTemplate",
            json!({"template": {"metadata": meta, "spec": spec}}),
        )
    };
    let ok = tmpl(
        json!({"source": {"image": IMAGE}}),
        json!({"labels": {"a": "b"}}),
    );
    assert!(terraform_machine_template(&create(), &ok, None).allowed());
    let with_id = tmpl(
        json!({"source": {"image": IMAGE}, "providerID": "p"}),
        json!({}),
    );
    assert_eq!(
        fields(&terraform_machine_template(&create(), &with_id, None)),
        ["spec.template.spec.providerID"]
    );
    let bad_label = tmpl(
        json!({"source": {"image": IMAGE}}),
        json!({"labels": {"a": "not valid"}, "annotations": {"-bad": "x"}}),
    );
    assert_eq!(
        fields(&terraform_machine_template(&create(), &bad_label, None)),
        [
            "spec.template.metadata.labels[a]",
            "spec.template.metadata.annotations"
        ]
    );
    let changed = tmpl(
        json!({"source": {"image": "ghcr.io/x/y:v2"}}),
        json!({"labels": {"a": "b"}}),
    );
    assert_eq!(
        fields(&terraform_machine_template(&update(), &changed, Some(&ok))),
        ["spec.template.spec"]
    );
    let relabelled = tmpl(
        json!({"source": {"image": IMAGE}}),
        json!({"labels": {"a": "c"}}),
    );
    assert!(terraform_machine_template(&update(), &relabelled, Some(&ok)).allowed());
    let dry_run = Request {
        topology_dry_run: true,
        ..update()
    };
    assert!(terraform_machine_template(&dry_run, &changed, Some(&ok)).allowed());

    let pool_tmpl = |spec: Value| -> TerraformMachinePoolTemplate {
        obj(
            "TerraformMachinePoolTemplate",
            json!({"template": {"spec": spec}}),
        )
    };
    let ok = pool_tmpl(json!({"source": {"image": IMAGE}}));
    let bad = pool_tmpl(json!({"source": {"image": IMAGE}, "variables": {"node_labels": {}}}));
    assert!(terraform_machine_pool_template(&create(), &ok, None).allowed());
    assert_eq!(
        fields(&terraform_machine_pool_template(&create(), &bad, None)),
        ["spec.template.spec.variables[node_labels]"]
    );
    assert_eq!(
        fields(&terraform_machine_pool_template(&update(), &bad, Some(&ok))),
        [
            "spec.template.spec.variables[node_labels]",
            "spec.template.spec"
        ]
    );

    let cluster_tmpl = |spec: Value| -> TerraformClusterTemplate {
        obj(
            "TerraformClusterTemplate",
            json!({"template": {"spec": spec}}),
        )
    };
    let no_identity = terraform_cluster_template(
        &create(),
        &cluster_tmpl(json!({"source": {"image": IMAGE}})),
        None,
    );
    assert!(no_identity.allowed());
    assert_eq!(no_identity.warnings.len(), 1);
    let with_identity =
        cluster_tmpl(json!({"source": {"image": IMAGE}, "identityRef": {"name": "i"}}));
    let verdict = terraform_cluster_template(&create(), &with_identity, None);
    assert!(verdict.allowed() && verdict.warnings.is_empty());
    assert_eq!(
        fields(&terraform_cluster_template(
            &update(),
            &with_identity,
            Some(&cluster_tmpl(json!({"source": {"image": IMAGE}})))
        )),
        ["spec.template.spec"]
    );
}

#[test]
fn identity_rules() {
    let id = |spec: Value| -> TerraformClusterIdentity { obj("TerraformClusterIdentity", spec) };
    let ok = id(
        json!({"secretRef": {"name": "s", "namespace": "n"}, "allowedNamespaces": {"selector": {}}}),
    );
    assert!(terraform_cluster_identity(&create(), &ok, None).allowed());
    let cases: &[(Value, &[&str])] = &[
        (json!({"type": "Secret"}), &["spec.secretRef"]),
        (
            json!({"secretRef": {"name": "", "namespace": ""}}),
            &["spec.secretRef.name", "spec.secretRef.namespace"],
        ),
        (
            json!({"secretRef": {"name": "s", "namespace": "n"}, "allowedNamespaces": {}}),
            &["spec.allowedNamespaces"],
        ),
        (
            json!({"secretRef": {"name": "s", "namespace": "n"}, "allowedNamespaces": {"list": ["ok", "Not_OK"]}}),
            &["spec.allowedNamespaces.list[1]"],
        ),
        (
            json!({"secretRef": {"name": "s", "namespace": "n"}, "allowedNamespaces": {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}}),
            &["spec.allowedNamespaces.selector.matchExpressions[0].values"],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(
            fields(&terraform_cluster_identity(
                &create(),
                &id(spec.clone()),
                None
            )),
            *want,
            "{spec}"
        );
    }
}

fn plan(approved: Option<(bool, &str)>, phase: Option<&str>) -> TerraformPlan {
    let mut spec = json!({
        "targetRef": {"kind": "TerraformCluster", "name": "c"},
        "planHash": "p2:a", "inputsHash": "h2:b", "reason": "Manual", "summary": {"create": 1},
    });
    if let Some((approved, by)) = approved {
        spec["approved"] = json!(approved);
        if !by.is_empty() {
            spec["approvedBy"] = json!(by);
        }
    }
    let mut p: TerraformPlan = obj("TerraformPlan", spec);
    if let Some(phase) = phase {
        p.metadata.labels = Some(
            [(
                crate::names::labels::PLAN_PHASE.to_string(),
                phase.to_string(),
            )]
            .into(),
        );
    }
    p
}

#[test]
fn plan_create_rules() {
    let cases: &[(&str, TerraformPlan, &[&str])] = &[
        ("pending", plan(None, Some("Pending")), &[]),
        (
            "self approved",
            plan(Some((true, "alice")), Some("Approved")),
            &[],
        ),
        (
            "approved without approver",
            plan(Some((true, "")), None),
            &["spec.approvedBy"],
        ),
        (
            "approver without approval",
            plan(Some((false, "alice")), None),
            &["spec.approvedBy"],
        ),
        (
            "approved for someone else",
            plan(Some((true, "bob")), None),
            &["spec.approvedBy"],
        ),
        (
            "moved finished plan",
            plan(Some((true, "bob")), Some("Applied")),
            &[],
        ),
        (
            "approved phase unapproved",
            plan(None, Some("Approved")),
            &["metadata.labels[captf.io/plan-phase]"],
        ),
        (
            "unknown phase",
            plan(None, Some("Whatever")),
            &["metadata.labels[captf.io/plan-phase]"],
        ),
    ];
    for (name, p, want) in cases {
        assert_eq!(fields(&terraform_plan(&create(), p, None)), *want, "{name}");
    }
}

#[test]
fn plan_update_rules() {
    let live = plan(None, Some("Pending"));
    assert!(
        terraform_plan(
            &update(),
            &plan(Some((true, "alice")), Some("Pending")),
            Some(&live)
        )
        .allowed()
    );
    assert_eq!(
        fields(&terraform_plan(
            &update(),
            &plan(Some((true, "bob")), Some("Pending")),
            Some(&live)
        )),
        ["spec.approvedBy"]
    );
    let finished = plan(None, Some("Superseded"));
    assert_eq!(
        fields(&terraform_plan(
            &update(),
            &plan(Some((true, "alice")), Some("Superseded")),
            Some(&finished)
        )),
        ["spec.approved"]
    );
    let approved = plan(Some((true, "alice")), Some("Approved"));
    assert_eq!(
        fields(&terraform_plan(
            &update(),
            &plan(Some((false, "")), Some("Approved")),
            Some(&approved)
        )),
        ["spec.approved"]
    );
    let mut retargeted = live.clone();
    retargeted.spec.plan_hash = "p2:other".into();
    assert_eq!(
        fields(&terraform_plan(&update(), &retargeted, Some(&live))),
        ["spec.planHash"]
    );
    let relabelled = plan(None, Some("Applied"));
    assert_eq!(
        fields(&terraform_plan(&update(), &relabelled, Some(&live))),
        ["metadata.labels[captf.io/plan-phase]"]
    );
    let manager = Request {
        manager_username: Some("m".into()),
        ..Request::update("m")
    };
    assert!(terraform_plan(&manager, &relabelled, Some(&live)).allowed());
}

fn identifier() -> impl Strategy<Value = String> {
    "[a-zA-Z_][a-zA-Z0-9_-]{0,20}|captf_[a-z]{1,8}|[0-9.][a-z.]{0,8}|count|replicas|machinepool_name"
}

proptest! {
    /// Values are marked so they cannot be mistaken for a key or a fixed
    /// message text; none may appear anywhere in a verdict.
    #[test]
    fn no_message_contains_a_value(
        entries in prop::collection::btree_map(identifier(), "[a-z0-9]{6,16}", 0..300),
        image in "[ -~]{0,40}",
    ) {
        let values: Vec<String> = entries.values().map(|v| format!("VALUE-{v}")).collect();
        let variables: serde_json::Map<String, Value> = entries
            .keys()
            .zip(&values)
            .map(|(k, v)| (k.clone(), json!({"nested": [v.clone()], "plain": v.clone()})))
            .collect();
        let image_value = format!("VALUE-{image}");
        let spec = json!({
            "source": {"image": image_value},
            "variables": variables,
            "jobs": {"env": [{"name": "TF_X", "value": values.first().cloned().unwrap_or_default()}]},
        });
        let mut verdicts = vec![
            terraform_machine_pool(&create(), &pool(spec.clone()), None),
            terraform_machine(&create(), &machine(spec.clone()), None),
        ];
        let mut cluster_spec = spec.clone();
        cluster_spec["identityRef"] = json!({"name": "i"});
        verdicts.push(terraform_cluster(&create(), &cluster(cluster_spec), None));
        // On update every definition field of a machine changed as well.
        let stored = machine(json!({"source": {"image": "ghcr.io/a/b:v1"}, "variables": {"k": "VALUE-old"}}));
        verdicts.push(terraform_machine(&update(), &machine(spec), Some(&stored)));
        for verdict in &verdicts {
            for violation in &verdict.violations {
                let text = violation.to_string();
                prop_assert!(!text.contains("VALUE-"), "{}", text);
            }
        }
    }
}
