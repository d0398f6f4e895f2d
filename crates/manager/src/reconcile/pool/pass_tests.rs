//! Whole passes of a pool as tables: a snapshot in, the status draft, the
//! effects and the ending out. No client, no cluster.

use std::time::{Duration, SystemTime};

use captf_api::effective::{self, ManagerDefaults};
use captf_api::{TerraformCluster, TerraformMachinePool};
use serde_json::{Value, json};

use super::*;
use crate::adapters::OwnerDecision;
use crate::adapters::pool::BootstrapSecret;
use crate::capi;
use crate::engine::decide::{Membership, Reason};
use crate::engine::preamble::OwnerLookup;
use crate::reconcile::job_start::StartRequest;
use crate::reconcile::pass::Loaded;
use crate::reconcile::settings::PassSettings;
use crate::reconcile::status::Draft;
use crate::reconcile::stored::ReadReport;

const NS: &str = "team-a";

fn pool(edit: impl FnOnce(&mut Value)) -> TerraformMachinePool {
    let mut v = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
        "metadata": {"name": "workers", "namespace": NS, "uid": "uid-pool", "generation": 1,
            "labels": {"cluster.x-k8s.io/cluster-name": "prod"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
                "name": "workers", "uid": "uid-mp"}]},
        "spec": {"source": {"image": "registry.example/pool:1"}, "membershipRefreshIntervalSeconds": 3600},
    });
    edit(&mut v);
    serde_json::from_value(v).unwrap()
}

fn machine_pool(annotations: Value) -> capi::MachinePool {
    serde_json::from_value(json!({
        "metadata": {"name": "workers", "namespace": NS, "uid": "uid-mp", "annotations": annotations},
        "spec": {"clusterName": "prod", "replicas": 2, "template": {"spec": {
            "clusterName": "prod",
            "bootstrap": {"dataSecretName": "workers-boot"},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachinePool", "name": "workers"},
            "version": "v1.33.1"}}},
    }))
    .unwrap()
}

fn deps(tc: bool, mp_annotations: Value) -> PoolDependencies {
    let cluster: capi::Cluster = serde_json::from_value(json!({
        "metadata": {"name": "prod", "namespace": NS, "uid": "uid-prod"},
        "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": "prod"}},
    }))
    .unwrap();
    let tc: Option<TerraformCluster> = tc.then(|| {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
            "metadata": {"name": "prod", "namespace": NS, "uid": "uid-tc"},
            "spec": {"source": {"image": "registry.example/cluster:1"}},
            "status": {"initialization": {"provisioned": true}},
        }))
        .unwrap()
    });
    PoolDependencies {
        mp: Some(machine_pool(mp_annotations)),
        cluster: Some(cluster),
        tc,
        bootstrap: Some(BootstrapSecret {
            value: Some(b"#cloud-config\n".to_vec()),
            format: Some("cloud-config".into()),
        }),
    }
}

fn summary(outputs: Value, inputs_hash: Option<&str>) -> StateSummary {
    StateSummary::with_outputs(outputs, inputs_hash)
}

fn healthy() -> Value {
    json!({"state": "running", "healthy": true, "message": null, "reasons": []})
}

/// The TerraformCluster's state: provisioned, with exports.
fn cluster_state() -> StateSummary {
    summary(
        json!({
            "control_plane_endpoint": {"host": "api.prod.example", "port": 6443},
            "failure_domains": [{"name": "fd1", "control_plane": true}],
            "exports": {"subnet": "s-1"},
            "health": healthy(),
        }),
        Some("h2:cluster"),
    )
}

/// A pool state holding `ids`, applied from inputs `hash`.
fn pool_state(ids: &[&str], hash: &str) -> StateSummary {
    summary(
        json!({
            "provider_id": "noop-group:///team-a/workers",
            "provider_id_list": ids,
            "replicas": ids.len(),
            "instances": ids.iter().map(|i| json!({"provider_id": i, "state": "running"})).collect::<Vec<_>>(),
            "health": healthy(),
        }),
        Some(hash),
    )
}

fn snapshot(read: Result<StateSummary, StateError>, sources: VariableSources) -> PoolSnapshot {
    PoolSnapshot {
        stored: Stored {
            ever_applied: read.is_ok(),
            report: ReadReport::for_plan_tests(&read, read.is_ok()),
            read,
            applied: None,
            attempt: None,
            unconfirmed_apply: None,
            origin_unknown: false,
            restore: None,
            effects: Vec::new(),
        },
        cluster_state: Some(Ok(cluster_state())),
        sources,
    }
}

fn open_pass(obj: &TerraformMachinePool, deps: &PoolDependencies) -> OpenPass {
    let eff = effective::machine_pool(
        &obj.spec,
        deps.tc.as_ref().map(|t| &t.spec),
        &ManagerDefaults::default(),
    );
    let shared = PassSettings {
        owner: OwnerDecision {
            lookup: OwnerLookup::Found,
            condition: None,
        },
        paused: false,
        cluster_name: "prod".into(),
        jobs: eff.jobs.clone(),
        drift_interval: Some(Duration::from_secs(1800)),
        drift_remediate: false,
        identity: None,
        mutable: true,
        membership: Some(Membership {
            converging: false,
            interval: Duration::from_secs(3600),
        }),
        after_apply_refresh: true,
        health_interval: None,
        retain: false,
        cluster_max_active_jobs: 20,
    };
    let loaded = Loaded {
        jobs: Vec::new(),
        observed: Vec::new(),
    };
    OpenPass::for_plan_tests(loaded, shared, false)
}

/// One whole pass: the plan and the draft it left.
fn run(
    obj: &TerraformMachinePool,
    deps: &PoolDependencies,
    snap: &PoolSnapshot,
) -> (PassPlan, Draft) {
    let now = SystemTime::now();
    let p = open_pass(obj, deps);
    let plan = plan(obj, &p, Draft::new(&[], 1, now), deps, snap, now).expect("the plan");
    let status = plan.status.clone();
    (plan, status)
}

fn reason_of(draft: &Draft, t: &str) -> Option<String> {
    draft.get(t).map(|c| format!("{}/{}", c.status, c.reason))
}

fn started(plan: &PassPlan) -> Option<(Op, &StartRequest)> {
    match &plan.ending {
        PassEnding::Start(req) => Some((req.op, req)),
        _ => None,
    }
}

/// The inputs hash an apply of the current inputs records (what a
/// converged state carries).
fn current_hash(obj: &TerraformMachinePool, deps: &PoolDependencies) -> String {
    // The first pass of the same spec (its status plays no part in inputs).
    let mut first = obj.clone();
    first.status = None;
    let (plan, _) = run(
        &first,
        deps,
        &snapshot(Err(StateError::NotFound), Vec::new()),
    );
    let (op, req) = started(&plan).expect("a first pass applies");
    assert_eq!(op, Op::Apply);
    req.inputs_hash.clone()
}

#[test]
fn a_pool_without_its_terraform_cluster_waits_and_writes_nothing() {
    let obj = pool(|_| {});
    let deps = deps(false, json!({}));
    let (plan, draft) = run(
        &obj,
        &deps,
        &snapshot(Err(StateError::NotFound), Vec::new()),
    );
    assert!(plan.effects.is_empty(), "{:?}", plan.effects);
    assert!(plan.decision.is_none());
    assert!(matches!(
        plan.ending,
        PassEnding::Close(Some(DEPENDENCIES_REQUEUE))
    ));
    assert_eq!(
        reason_of(&draft, conditions::DEPENDENCIES_READY).as_deref(),
        Some("Unknown/WaitingForClusterInfrastructure")
    );
}

#[test]
fn a_missing_variables_source_holds_the_pool() {
    let obj = pool(|v| {
        v["spec"]["variablesFrom"] = json!([{"configMapRef": {"name": "sizes"}}]);
    });
    let deps = deps(true, json!({}));
    let source = obj.spec.workspace.variables_from.clone().unwrap()[0].clone();
    let snap = snapshot(Err(StateError::NotFound), vec![(source, None)]);
    let (plan, draft) = run(&obj, &deps, &snap);
    assert!(matches!(
        plan.ending,
        PassEnding::Close(Some(DEPENDENCIES_REQUEUE))
    ));
    assert_eq!(
        reason_of(&draft, conditions::DEPENDENCIES_READY).as_deref(),
        Some("False/VariablesSourceNotFound")
    );
}

#[test]
fn the_first_pass_with_everything_there_applies() {
    let obj = pool(|_| {});
    let deps = deps(true, json!({}));
    let (plan, draft) = run(
        &obj,
        &deps,
        &snapshot(Err(StateError::NotFound), Vec::new()),
    );
    let (op, req) = started(&plan).expect("an apply starts");
    assert_eq!(op, Op::Apply);
    assert!(req.inputs_hash.starts_with("h2:"), "{}", req.inputs_hash);
    assert_eq!(plan.decision.as_ref().unwrap().reason, Reason::NoState);
    assert!(plan.effects.is_empty(), "{:?}", plan.effects);
    assert_eq!(
        reason_of(&draft, conditions::DEPENDENCIES_READY).as_deref(),
        Some("True/DependenciesReady")
    );
}

#[test]
fn a_converged_pool_starts_no_apply_and_writes_nothing_but_its_status() {
    let ids = ["noop:///team-a/workers-0", "noop:///team-a/workers-1"];
    let obj = pool(|v| {
        v["spec"]["providerID"] = json!("noop-group:///team-a/workers");
        v["spec"]["providerIDList"] = json!(ids);
        v["status"] = json!({"initialization": {"provisioned": true}, "replicas": 2});
    });
    let deps = deps(true, json!({}));
    let hash = current_hash(&obj, &deps);
    let (plan, draft) = run(
        &obj,
        &deps,
        &snapshot(Ok(pool_state(&ids, &hash)), Vec::new()),
    );
    assert!(plan.effects.is_empty(), "{:?}", plan.effects);
    let reason = plan.decision.as_ref().unwrap().reason;
    assert!(
        !matches!(reason, Reason::InputsChanged | Reason::NoState),
        "{reason:?}"
    );
    assert!(started(&plan).is_none_or(|(op, _)| op != Op::Apply));
    assert_eq!(draft.field_value("replicas"), Some(json!(2)));
    assert_eq!(
        reason_of(&draft, conditions::OUTPUTS_VALID).map(|r| r.starts_with("True/")),
        Some(true)
    );
}

#[test]
fn new_provider_ids_go_to_the_spec_before_anything_else() {
    let ids = ["noop:///team-a/workers-0", "noop:///team-a/workers-1"];
    let obj = pool(|v| v["spec"]["providerIDList"] = json!(["noop:///team-a/workers-0"]));
    let deps = deps(true, json!({}));
    let hash = current_hash(&obj, &deps);
    let (plan, _) = run(
        &obj,
        &deps,
        &snapshot(Ok(pool_state(&ids, &hash)), Vec::new()),
    );
    match plan.effects.first() {
        Some(Effect::PatchSpec(patch)) => {
            assert_eq!(patch["spec"]["providerIDList"], json!(ids), "{patch}");
        }
        other => panic!("the spec patch comes first: {other:?}"),
    }
}

#[test]
fn changed_inputs_apply() {
    let ids = ["noop:///team-a/workers-0", "noop:///team-a/workers-1"];
    let obj = pool(|v| v["spec"]["providerIDList"] = json!(ids));
    let deps = deps(true, json!({}));
    let (plan, _) = run(
        &obj,
        &deps,
        &snapshot(Ok(pool_state(&ids, "h2:old")), Vec::new()),
    );
    assert_eq!(
        plan.decision.as_ref().unwrap().reason,
        Reason::InputsChanged
    );
    let (op, req) = started(&plan).expect("an apply starts");
    assert_eq!(op, Op::Apply);
    assert_ne!(req.inputs_hash, "h2:old");
}

#[test]
fn an_autoscaled_pool_writes_its_count_back_to_the_machine_pool() {
    let ids = [
        "noop:///team-a/workers-0",
        "noop:///team-a/workers-1",
        "noop:///team-a/workers-2",
    ];
    let obj = pool(|v| v["spec"]["providerIDList"] = json!(ids));
    let autoscaled = json!({
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5",
    });
    let deps = deps(true, autoscaled);
    let hash = current_hash(&obj, &deps);
    let (plan, draft) = run(
        &obj,
        &deps,
        &snapshot(Ok(pool_state(&ids, &hash)), Vec::new()),
    );
    let patch = plan.effects.iter().find_map(|e| match e {
        Effect::PatchOwner { name, patch } => Some((name.clone(), patch.clone())),
        _ => None,
    });
    let (name, patch) = patch.expect("the MachinePool is patched");
    assert_eq!(name, "workers");
    assert_eq!(patch["spec"]["replicas"], json!(3), "{patch}");
    assert!(
        plan.effects.iter().any(|e| matches!(
            e,
            Effect::Event { reason, .. } if *reason == events::REPLICAS_WRITTEN_BACK
        )),
        "{:?}",
        plan.effects
    );
    assert_eq!(
        reason_of(&draft, conditions::AUTOSCALING_ACTIVE).map(|r| r.starts_with("True/")),
        Some(true)
    );
}
