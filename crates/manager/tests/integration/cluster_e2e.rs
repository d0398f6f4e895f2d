//! A TerraformCluster end to end: the controllers in this process, the real
//! control plane, the real node running the real runner and OpenTofu on
//! the noop cluster module, and Cluster API's own controllers owning the
//! clusters.

use crate::support;

use std::io::Read;

use captf_api::TerraformCluster;
use captf_api::plan::TerraformPlan;
use captf_manager::capi;
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::*;

/// A resource replaced whenever `generation` changes: a destructive plan.
const REPLACEABLE: &str = r#"
variable "generation" {
  type    = number
  default = 1
}

resource "terraform_data" "replaceable" {
  triggers_replace = var.generation
}
"#;

async fn create_cluster(
    ns: &TestNamespace,
    name: &str,
    variables: Value,
    drift: Value,
) -> TerraformCluster {
    create_cluster_with(
        ns,
        name,
        variables,
        drift,
        json!({"kind": "Secret", "name": format!("{name}-creds")}),
    )
    .await
}

async fn create_cluster_with(
    ns: &TestNamespace,
    name: &str,
    variables: Value,
    drift: Value,
    identity: Value,
) -> TerraformCluster {
    create_capi_cluster(ns, name).await;
    let creds = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{name}-creds")),
            ..Default::default()
        },
        string_data: Some([("token".to_owned(), "not-a-real-token".to_owned())].into()),
        ..Default::default()
    };
    let _ = ns
        .api::<Secret>()
        .create(&PostParams::default(), &creds)
        .await;
    let tc: TerraformCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "TerraformCluster",
        "metadata": {"name": name},
        "spec": {
            "source": {"image": module_ref("cluster", ns.name())},
            "identityRef": identity,
            "variables": variables,
            "drift": drift,
        },
    }))
    .unwrap();
    ns.api::<TerraformCluster>()
        .create(&PostParams::default(), &tc)
        .await
        .unwrap()
}

fn condition<'a>(
    tc: &'a TerraformCluster,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    tc.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn has(tc: &TerraformCluster, type_: &str, status: &str, reason: &str) -> bool {
    condition(tc, type_).is_some_and(|c| c.status == status && c.reason == reason)
}

async fn wait_for(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    secs: u64,
    check: impl Fn(&TerraformCluster) -> bool,
) -> TerraformCluster {
    let api = ns.api::<TerraformCluster>();
    let last = std::sync::Mutex::new(String::new());
    eventually(what, secs, || async {
        let tc = api.get(name).await.ok()?;
        let seen = format!(
            "{:?} activeJob={:?}",
            tc.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .map(|cs| cs
                    .iter()
                    .map(|c| format!("{}={}/{}: {}", c.type_, c.status, c.reason, c.message))
                    .collect::<Vec<_>>()),
            tc.status
                .as_ref()
                .and_then(|s| s.workspace.active_job.as_ref())
                .map(|j| j.name.clone())
        ) + &format!(
            " lastRun={:?}",
            tc.status
                .as_ref()
                .and_then(|s| s.workspace.last_run.as_ref())
                .and_then(|r| r.error.as_ref())
        );
        let mut l = last.lock().unwrap();
        if *l != seen {
            eprintln!("{name}: {seen}");
            *l = seen;
        }
        check(&tc).then_some(tc)
    })
    .await
}

fn applies(jobs: &[Job]) -> usize {
    jobs.iter()
        .filter(|j| {
            j.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("captf.infrastructure.cluster.x-k8s.io/op"))
                .map(String::as_str)
                == Some("apply")
        })
        .count()
}

async fn set_variables(ns: &TestNamespace, name: &str, variables: Value) {
    ns.api::<TerraformCluster>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"variables": variables}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_cluster_provisions_reapplies_guards_and_destroys() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    insert_manager(env, ns.name()).await;
    insert_module(
        env,
        &module_ref("cluster", ns.name()),
        module_image(
            tmp.path(),
            "cluster",
            "v1",
            &[("replaceable.tf", REPLACEABLE)],
        ),
    )
    .await;
    install_runner_role(&ns.client()).await;
    let manager = start_manager(ns.client(), ns.name());

    create_cluster(
        &ns,
        "prod",
        json!({"generation": 1}),
        json!({"intervalSeconds": 0}),
    )
    .await;
    let tc = wait_for(&ns, "prod", "the cluster to become Ready", 240, |tc| {
        has(tc, "Ready", "True", "Ready")
    })
    .await;
    let status = tc.status.clone().unwrap();
    assert_eq!(
        status.workspace.initialization.and_then(|i| i.provisioned),
        Some(true)
    );
    let ep = tc
        .spec
        .control_plane_endpoint
        .clone()
        .expect("the module's endpoint");
    assert_eq!(ep.host.as_deref(), Some("noop-prod.invalid"));
    assert_eq!(ep.port, Some(6443));
    assert_eq!(status.failure_domains.unwrap()[0].name, "fd1");
    assert!(
        status.exports.unwrap()["backend_id"]
            .as_str()
            .unwrap()
            .starts_with("noop-backend-")
    );
    assert!(has(&tc, "EndpointAvailable", "True", "EndpointAvailable"));
    // What the manager and the runner said about it.
    for (reason, type_) in [
        ("JobCreated", "Normal"),
        ("ControlPlaneEndpointSet", "Normal"),
        ("RunStarted", "Normal"),
        ("ResourcesChanged", "Normal"),
        ("RunFinished", "Normal"),
        ("StateAdopted", "Normal"),
    ] {
        expect_event(&ns, reason, type_, "TerraformCluster", "prod").await;
    }
    let jobs: Api<Job> = ns.api();
    let first_applies = applies(&jobs.list(&ListParams::default()).await.unwrap().items);
    assert!(first_applies >= 1);

    // A chunk planted by another subject with the state's labels, after a
    // gap, is no part of the state: it holds nothing and is never adopted.
    let suffix = captf_manager::names::state_suffix(
        captf_manager::names::WorkloadKind::Cluster,
        ns.name(),
        "prod",
    );
    let planted = format!("{}-part-3", captf_manager::names::state_secret(&suffix));
    let secrets: Api<Secret> = ns.api();
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": planted, "labels": {"tfstate": "true",
                    "tfstateSecretSuffix": suffix, "tfstateWorkspace": "default"}},
                "data": {"tfstate": "bm90IHN0YXRl"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();

    // A variable change re-applies (health stays running).
    set_variables(
        &ns,
        "prod",
        json!({"generation": 1, "noop_health_state": "running"}),
    )
    .await;
    eventually("a second apply to succeed", 240, || async {
        let tc = ns.api::<TerraformCluster>().get("prod").await.ok()?;
        let all = jobs.list(&ListParams::default()).await.ok()?.items;
        if std::env::var("CAPTF_E2E_DEBUG").is_ok() {
            let pods = ns
                .api::<k8s_openapi::api::core::v1::Pod>()
                .list(&ListParams::default())
                .await
                .ok()?
                .items;
            for p in pods {
                eprintln!(
                    "pod {:?} {:?}",
                    p.metadata.name,
                    p.status.map(|s| (
                        s.phase,
                        s.container_statuses.map(|cs| cs
                            .into_iter()
                            .map(|c| (c.name, c.state))
                            .collect::<Vec<_>>())
                    ))
                );
            }
            let secrets: Vec<String> = ns
                .api::<Secret>()
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter_map(|s| s.metadata.name)
                .collect();
            eprintln!("secrets {secrets:?}");
            for j in &all {
                eprintln!(
                    "job {:?} {:?}",
                    j.metadata.name,
                    j.status.as_ref().map(|s| (s.active, s.succeeded, s.failed))
                );
            }
            tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        }
        (applies(&all) > first_applies
            && has(&tc, "ApplyJobSucceeded", "True", "ApplySucceeded")
            && tc.status.as_ref()?.workspace.active_job.is_none())
        .then_some(())
    })
    .await;

    let tc = ns.api::<TerraformCluster>().get("prod").await.unwrap();
    assert!(has(&tc, "StateReadable", "True", "StateRead"));
    let planted = secrets.get(&planted).await.unwrap();
    assert_eq!(planted.metadata.owner_references, None, "not adopted");

    // A change that replaces a resource is blocked until its plan is approved.
    set_variables(
        &ns,
        "prod",
        json!({"generation": 2, "noop_health_state": "running"}),
    )
    .await;
    let tc = wait_for(
        &ns,
        "prod",
        "the destructive plan to be blocked",
        240,
        |tc| {
            has(tc, "ApplyJobSucceeded", "False", "DestructivePlanBlocked")
                && tc
                    .status
                    .as_ref()
                    .and_then(|s| s.pending_plan_ref.as_ref())
                    .is_some()
        },
    )
    .await;
    let plan_name = tc.status.unwrap().pending_plan_ref.unwrap().name;
    // The runner planned before it stopped, and said what the plan holds.
    expect_event_noting(
        &ns,
        "PlanSummary",
        "Normal",
        "TerraformCluster",
        "prod",
        "replace 1",
    )
    .await;
    let plans: Api<TerraformPlan> = ns.api();
    let plan = plans.get(&plan_name).await.unwrap();
    assert!(
        plan.spec.plan_hash.starts_with("p2:"),
        "{}",
        plan.spec.plan_hash
    );
    assert_eq!(plan.spec.summary.replace, Some(1));
    // Nothing runs while the plan waits: a pass woken now starts nothing.
    support::touch::touch_cluster_state(&ns, &manager, "prod").await;
    let tc = ns.api::<TerraformCluster>().get("prod").await.unwrap();
    assert!(tc.status.unwrap().workspace.active_job.is_none());
    plans
        .patch(
            &plan_name,
            &PatchParams::default(),
            // Approved by the harness's admin in its own name: once a test of
            // the binary serves the provider's webhooks, they refuse another's.
            &Patch::Merge(
                json!({"spec": {"approved": true, "approvedBy": captf_testenv::pki::ADMIN_USER}}),
            ),
        )
        .await
        .unwrap();
    eventually("the approved plan to be applied", 240, || async {
        let p = plans.get(&plan_name).await.ok()?;
        let tc = ns.api::<TerraformCluster>().get("prod").await.ok()?;
        (p.metadata.labels.as_ref()?.get("captf.io/plan-phase")? == "Applied"
            && has(&tc, "ApplyJobSucceeded", "True", "ApplySucceeded"))
        .then_some(())
    })
    .await;
    // The approved apply said once which plan it carries out.
    let approved = event_notes(&ns, "PlanApproved").await;
    assert_eq!(approved.len(), 1, "{approved:?}");
    assert!(
        approved[0].contains(&plan.spec.plan_hash) && approved[0].contains(&plan_name),
        "{}",
        approved[0]
    );

    // Deleting the Cluster destroys and leaves nothing behind.
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi::cluster_resource());
    clusters
        .delete("prod", &DeleteParams::background())
        .await
        .unwrap();
    eventually("the TerraformCluster to be gone", 300, || async {
        ns.api::<TerraformCluster>()
            .get_opt("prod")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    for reason in ["DeletionStarted", "FinalizerRemoved"] {
        expect_event(&ns, reason, "Normal", "TerraformCluster", "prod").await;
    }
    eventually(
        "every Job, Secret, Lease and record to be gone",
        120,
        || async {
            let jobs = jobs.list(&ListParams::default()).await.ok()?.items;
            let secrets: Vec<String> = ns
                .api::<Secret>()
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter_map(|s| s.metadata.name)
                .filter(|n| n.starts_with("captf-") || n.starts_with("tfstate-"))
                .collect();
            let leases: Vec<String> = ns
                .api::<Lease>()
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter_map(|l| l.metadata.name)
                .collect();
            // The runner's namespace RBAC goes with the last object.
            let runner_sa = ns
                .api::<k8s_openapi::api::core::v1::ServiceAccount>()
                .get_opt("captf-runner")
                .await
                .ok()?;
            (jobs.is_empty() && secrets.is_empty() && leases.is_empty() && runner_sa.is_none())
                .then_some(())
        },
    )
    .await;
}

fn gunzip(b: &[u8]) -> Value {
    let mut s = String::new();
    flate2::read::GzDecoder::new(b)
        .read_to_string(&mut s)
        .unwrap();
    serde_json::from_str(&s).unwrap()
}

#[tokio::test]
async fn drift_is_reported_after_the_state_changes() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    insert_manager(env, ns.name()).await;
    insert_module(
        env,
        &module_ref("cluster", ns.name()),
        module_image(tmp.path(), "cluster", "v1", &[]),
    )
    .await;
    install_runner_role(&ns.client()).await;
    let _manager = start_manager(ns.client(), ns.name());

    create_cluster(
        &ns,
        "drifty",
        json!({"noop_health_state": "running"}),
        json!({"intervalSeconds": 5, "action": "Report"}),
    )
    .await;
    wait_for(&ns, "drifty", "a drift check to find no drift", 300, |tc| {
        has(tc, "DriftDetected", "False", "NoDrift")
    })
    .await;

    // Change the state behind the manager's back.
    let name = support::clusters::tamper_with_state(&ns, "drifty").await;
    let secrets: Api<Secret> = ns.api();

    let tc = wait_for(&ns, "drifty", "drift to be reported", 300, |tc| {
        has(tc, "DriftDetected", "True", "DriftReported")
    })
    .await;
    let drift = tc.status.unwrap().workspace.last_run.unwrap();
    assert_eq!(drift.operation.as_str(), "drift");

    // Remediate: the drift is applied away, and the next check finds none.
    ns.api::<TerraformCluster>()
        .patch(
            "drifty",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"drift": {"action": "Remediate"}}})),
        )
        .await
        .unwrap();
    wait_for(&ns, "drifty", "the drift to be remediated", 300, |tc| {
        has(tc, "DriftDetected", "False", "NoDrift") && has(tc, "Ready", "True", "Ready")
    })
    .await;
    for reason in ["DriftRemediationStarted", "DriftResolved"] {
        expect_event(&ns, reason, "Normal", "TerraformCluster", "drifty").await;
    }
    let jobs = ns
        .api::<Job>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(
        jobs.iter().any(|j| j
            .metadata
            .annotations
            .as_ref()
            .is_some_and(
                |a| a.get("captf.io/drift-remediation").map(String::as_str) == Some("true")
            )
            && j.status.as_ref().and_then(|s| s.succeeded) == Some(1)),
        "a remediation apply ran"
    );
    let state_secret = secrets.get(&name).await.unwrap();
    let state = gunzip(&state_secret.data.as_ref().unwrap()["tfstate"].0);
    let lb = state["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "load_balancer")
        .unwrap();
    assert_ne!(
        lb["instances"][0]["attributes"]["input"]["value"]["name"],
        json!("changed-elsewhere"),
        "the change made elsewhere is gone"
    );
}

#[tokio::test]
async fn a_paused_cluster_starts_nothing_until_unpaused() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    insert_manager(env, ns.name()).await;
    insert_module(
        env,
        &module_ref("cluster", ns.name()),
        module_image(tmp.path(), "cluster", "v1", &[]),
    )
    .await;
    install_runner_role(&ns.client()).await;
    let _manager = start_manager(ns.client(), ns.name());
    create_cluster(
        &ns,
        "calm",
        json!({"noop_exports_extra": {"zone": "a"}}),
        json!({"intervalSeconds": 0}),
    )
    .await;
    wait_for(&ns, "calm", "the cluster to be Ready", 300, |tc| {
        has(tc, "Ready", "True", "Ready")
    })
    .await;
    let jobs: Api<Job> = ns.api();
    let before = applies(&jobs.list(&ListParams::default()).await.unwrap().items);

    // Paused, a change waits: bookkeeping only, no Job.
    let tcs = ns.api::<TerraformCluster>();
    tcs.patch(
        "calm",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": "true"}}})),
    )
    .await
    .unwrap();
    wait_for(&ns, "calm", "Paused to be reported", 60, |tc| {
        has(tc, "Paused", "True", "Paused")
    })
    .await;
    set_variables(&ns, "calm", json!({"noop_exports_extra": {"zone": "b"}})).await;
    support::clusters::generation_seen(&ns, "calm").await;
    let during = applies(&jobs.list(&ListParams::default()).await.unwrap().items);
    assert_eq!(during, before, "no apply starts while paused");

    // Unpaused, the change applies.
    tcs.patch(
        "calm",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": null}}})),
    )
    .await
    .unwrap();
    wait_for(
        &ns,
        "calm",
        "the change to apply once unpaused",
        300,
        |tc| {
            has(tc, "Paused", "False", "NotPaused")
                && has(tc, "ApplyJobSucceeded", "True", "ApplySucceeded")
        },
    )
    .await;
    eventually("a new apply Job", 60, || async {
        let now = applies(&jobs.list(&ListParams::default()).await.ok()?.items);
        (now > before).then_some(())
    })
    .await;
    // One event for each transition, however many passes the pause saw.
    // Events are written after the pass that decided them: wait for the
    // Resumed one to be stored, then count both.
    let counts = eventually("the Resumed event", 60, || async {
        let events = ns
            .api::<k8s_openapi::api::events::v1::Event>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items;
        let count = |reason: &str| {
            events
                .iter()
                .filter(|e| e.reason.as_deref() == Some(reason))
                .map(|e| e.series.as_ref().map_or(1, |s| s.count))
                .sum::<i32>()
        };
        let counts = (count("Paused"), count("Resumed"));
        (counts.1 > 0).then_some(counts)
    })
    .await;
    assert_eq!(counts, (1, 1));
}

#[tokio::test]
async fn an_identity_holds_the_cluster_until_it_allows_the_namespace() {
    // Its cluster-scoped identities reach every running manager.
    let _identities = captf_testenv::gate::creating_identities().await;
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    insert_manager(env, ns.name()).await;
    insert_module(
        env,
        &module_ref("cluster", ns.name()),
        module_image(tmp.path(), "cluster", "v1", &[]),
    )
    .await;
    install_runner_role(&ns.client()).await;
    let _manager = start_manager(ns.client(), ns.name());

    // The identity's Secret lives in the test namespace; the identity allows
    // only another namespace.
    let source = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("cloud".into()),
            ..Default::default()
        },
        string_data: Some([("token".to_owned(), "not-a-real-token".to_owned())].into()),
        ..Default::default()
    };
    ns.api::<Secret>()
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    let identity_name = format!("{}-id", ns.name());
    let identities: Api<captf_api::TerraformClusterIdentity> = Api::all(ns.client());
    let identity: captf_api::TerraformClusterIdentity = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "TerraformClusterIdentity",
        "metadata": {"name": identity_name},
        "spec": {
            "secretRef": {"name": "cloud", "namespace": ns.name()},
            "allowedNamespaces": {"list": ["somewhere-else"]},
        },
    }))
    .unwrap();
    identities
        .create(&PostParams::default(), &identity)
        .await
        .unwrap();

    create_cluster_with(
        &ns,
        "held",
        json!({"noop_health_state": "running"}),
        json!({"intervalSeconds": 0}),
        json!({"name": identity_name}),
    )
    .await;
    wait_for(&ns, "held", "IdentityAllowed=False", 60, |tc| {
        condition(tc, "IdentityAllowed").is_some_and(|c| c.status == "False")
    })
    .await;
    // The status is a pass's last write: the pass that wrote this one
    // created no Job before it, or the Job would be listed now.
    let jobs: Api<Job> = ns.api();
    assert!(
        jobs.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "no Job while the identity does not allow the namespace"
    );

    identities
        .patch(
            &identity_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"allowedNamespaces": {"list": [ns.name()]}}})),
        )
        .await
        .unwrap();
    let tc = wait_for(&ns, "held", "the cluster to become Ready", 240, |tc| {
        has(tc, "Ready", "True", "Ready")
    })
    .await;
    assert!(has(&tc, "CredentialsMirrored", "True", "Mirrored"));
    let mirror = ns
        .api::<Secret>()
        .get(&format!("captf-creds-{identity_name}"))
        .await
        .unwrap();
    assert_eq!(mirror.data.unwrap()["token"].0, b"not-a-real-token");
    identities
        .delete(&identity_name, &DeleteParams::default())
        .await
        .ok();
}

#[tokio::test]
async fn a_manual_cluster_plans_and_applies_only_the_approved_plan() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    insert_manager(env, ns.name()).await;
    insert_module(
        env,
        &module_ref("cluster", ns.name()),
        module_image(tmp.path(), "cluster", "v1", &[]),
    )
    .await;
    install_runner_role(&ns.client()).await;
    let _manager = start_manager(ns.client(), ns.name());
    create_cluster(
        &ns,
        "careful",
        json!({"noop_exports_extra": {"zone": "a"}}),
        json!({"intervalSeconds": 0}),
    )
    .await;
    // The first apply (no state) is never gated.
    wait_for(&ns, "careful", "the cluster to be Ready", 300, |tc| {
        has(tc, "Ready", "True", "Ready")
    })
    .await;
    let tcs = ns.api::<TerraformCluster>();
    tcs.patch(
        "careful",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"applyPolicy": "Manual"}})),
    )
    .await
    .unwrap();

    // A change is planned, not applied.
    set_variables(&ns, "careful", json!({"noop_exports_extra": {"zone": "b"}})).await;
    let tc = wait_for(&ns, "careful", "the plan to wait for approval", 300, |tc| {
        has(tc, "ApplyJobSucceeded", "Unknown", "PlanAwaitingApproval")
    })
    .await;
    let plan_name = tc
        .status
        .as_ref()
        .and_then(|s| s.pending_plan_ref.as_ref())
        .map(|r| r.name.clone())
        .expect("the pending plan is referenced");
    let plans = ns.api::<TerraformPlan>();
    let plan = plans.get(&plan_name).await.unwrap();
    assert_eq!(plan.spec.reason, captf_api::plan::PlanReason::Manual);
    let ready = expect_event(&ns, "PlanReady", "Normal", "TerraformCluster", "careful").await;
    assert!(ready.contains(&plan_name), "{ready}");
    assert_eq!(
        plan.spec.summary.output_changes,
        Some(1),
        "{:?}",
        plan.spec.summary
    );
    let jobs: Api<Job> = ns.api();
    assert_eq!(
        applies(&jobs.list(&ListParams::default()).await.unwrap().items),
        1,
        "nothing applied but the first apply"
    );

    // Approved, exactly that plan applies and the plan ends Applied.
    plans
        .patch(
            &plan_name,
            &PatchParams::default(),
            // Approved by the harness's admin in its own name: once a test of
            // the binary serves the provider's webhooks, they refuse another's.
            &Patch::Merge(
                json!({"spec": {"approved": true, "approvedBy": captf_testenv::pki::ADMIN_USER}}),
            ),
        )
        .await
        .unwrap();
    wait_for(&ns, "careful", "the approved plan to apply", 300, |tc| {
        has(tc, "ApplyJobSucceeded", "True", "ApplySucceeded") && has(tc, "Ready", "True", "Ready")
    })
    .await;
    eventually("the plan to be Applied", 60, || async {
        let p = plans.get(&plan_name).await.ok()?;
        (p.status?.phase? == captf_api::plan::PlanPhase::Applied).then_some(())
    })
    .await;
    let all = jobs.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(applies(&all), 2);
    assert!(
        all.iter().any(|j| j
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.get("captf.io/approved-plan") == Some(&plan_name))),
        "the apply ran bound to the approved plan"
    );
    let applied = expect_event(&ns, "PlanApplied", "Normal", "TerraformCluster", "careful").await;
    assert!(applied.contains(&plan_name), "{applied}");

    // A plan left waiting is superseded when the policy goes back to
    // Automatic, and the change applies without it.
    set_variables(&ns, "careful", json!({"noop_exports_extra": {"zone": "c"}})).await;
    let tc = wait_for(&ns, "careful", "a new plan to wait", 300, |tc| {
        has(tc, "ApplyJobSucceeded", "Unknown", "PlanAwaitingApproval")
            && tc
                .status
                .as_ref()
                .and_then(|s| s.pending_plan_ref.as_ref())
                .is_some_and(|r| r.name != plan_name)
    })
    .await;
    let waiting = tc.status.unwrap().pending_plan_ref.unwrap().name;
    tcs.patch(
        "careful",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"applyPolicy": "Automatic"}})),
    )
    .await
    .unwrap();
    let superseded = expect_event(
        &ns,
        "PlanSuperseded",
        "Normal",
        "TerraformCluster",
        "careful",
    )
    .await;
    assert!(superseded.contains(&waiting), "{superseded}");
    wait_for(&ns, "careful", "the change to apply", 300, |tc| {
        support::clusters::zone(tc).as_deref() == Some("c") && has(tc, "Ready", "True", "Ready")
    })
    .await;
}

#[tokio::test]
async fn variables_come_from_labeled_sources_and_changes_apply() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    insert_manager(env, ns.name()).await;
    insert_module(
        env,
        &module_ref("cluster", ns.name()),
        module_image(tmp.path(), "cluster", "v1", &[]),
    )
    .await;
    install_runner_role(&ns.client()).await;
    let _manager = start_manager(ns.client(), ns.name());
    create_cluster(
        &ns,
        "fed",
        json!({"noop_health_state": "running"}),
        json!({"intervalSeconds": 0}),
    )
    .await;
    wait_for(&ns, "fed", "the cluster to be Ready", 300, |tc| {
        has(tc, "Ready", "True", "Ready")
    })
    .await;

    // A required source that is not there holds the inputs.
    ns.api::<TerraformCluster>()
        .patch(
            "fed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"variablesFrom": [{"configMapRef": {"name": "extra"}, "format": "JSON"}]}})),
        )
        .await
        .unwrap();
    wait_for(&ns, "fed", "the missing source to be named", 120, |tc| {
        condition(tc, "DependenciesReady").is_some_and(|c| {
            c.reason == "VariablesSourceNotFound" && c.message.contains("ConfigMap extra")
        })
    })
    .await;

    // Unlabeled, it still does not count; labeled, its variables apply.
    let config_maps = ns.api::<k8s_openapi::api::core::v1::ConfigMap>();
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "extra"},
        "data": {"noop_exports_extra": "{\"zone\":\"c\"}"},
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    // A new generation makes a pass that reads the sources after the
    // ConfigMap exists: it still names the source missing.
    let tc = ns
        .api::<TerraformCluster>()
        .patch(
            "fed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"drift": {"intervalSeconds": 86400}}})),
        )
        .await
        .unwrap();
    let generation = tc.metadata.generation;
    wait_for(&ns, "fed", "a pass of the new generation", 60, |tc| {
        condition(tc, "DependenciesReady").is_some_and(|c| {
            c.observed_generation == generation && c.reason == "VariablesSourceNotFound"
        })
    })
    .await;
    config_maps
        .patch(
            "extra",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"captf.io/variables": "true"}}})),
        )
        .await
        .unwrap();
    let secrets: Api<Secret> = ns.api();
    eventually("the sourced variable to reach the state", 300, || async {
        let s = secrets
            .list(&ListParams::default().labels("tfstate=true"))
            .await
            .ok()?
            .items
            .into_iter()
            .next()?;
        let state = gunzip(&s.data.as_ref()?["tfstate"].0);
        (state["outputs"]["exports"]["value"]["zone"] == json!("c")).then_some(())
    })
    .await;
    wait_for(&ns, "fed", "the cluster to be Ready again", 120, |tc| {
        has(tc, "Ready", "True", "Ready")
            && has(tc, "DependenciesReady", "True", "DependenciesReady")
    })
    .await;
}
