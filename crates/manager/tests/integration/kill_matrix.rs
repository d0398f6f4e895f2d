//! The manager SIGKILLed while each operation runs: apply, destroy, refresh,
//! drift and restore of a TerraformCluster. The manager is the real binary
//! in its own process; it is killed the moment the operation's Job exists
//! (its status patch, its bookkeeping, everything after the create, may not
//! have happened), and a new manager process takes over
//! (`support::kill_run`). Each case ends with exactly one Job for that
//! operation, its result recorded (`status.lastRun` names it), the same or
//! the next state serial, and no run lease, cluster lease or state lock
//! left held. The real control plane, Cluster API's controllers, the real
//! node, the real runner and OpenTofu.

use crate::support;

use captf_manager::names::WorkloadKind;
use captf_testenv::eventually;
use kube::api::DynamicObject;
use serde_json::{Value, json};
use support::clusters::create_cluster_with_variables;
use support::kill_run::{Run, condition};
use support::module_ref;

const NAME: &str = "prod";

/// The cluster `prod` created with `variables` and `drift` under a manager
/// the test kills, once its first apply succeeded.
async fn cluster_case(variables: Value, drift: Value) -> Run {
    let run = Run::start(WorkloadKind::Cluster, NAME, &["cluster"]).await;
    let module = module_ref("cluster", run.ns.name());
    create_cluster_with_variables(&run.ns, NAME, &module, variables).await;
    if !drift.is_null() {
        run.patch(json!({"spec": {"drift": drift}})).await;
    }
    // With its health held pending an applied cluster is not Ready
    // (before provisioning Ready waits for the infrastructure's health):
    // then its first apply's success is what a case starts on.
    eventually(
        "prod Ready, or applied with its health pending",
        240,
        || async {
            let tc = run.get().await?;
            let status = &tc.data["status"];
            let is = |type_: &str, want: &str, reason: Option<&str>| {
                condition(status, type_)
                    .is_some_and(|(s, r)| s == want && reason.is_none_or(|want| r == want))
            };
            let pending = is("ApplyJobSucceeded", "True", None)
                && is("InfrastructureHealthy", "False", Some("Provisioning"))
                && !is("Ready", "True", None);
            (is("Ready", "True", None) || pending).then_some(())
        },
    )
    .await;
    run
}

/// `status.exports.zone`, which the noop module's `noop_exports_extra` sets.
fn zone(tc: &DynamicObject) -> Option<&str> {
    tc.data["status"]["exports"]["zone"].as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_an_apply() {
    let mut run = cluster_case(Value::Null, Value::Null).await;
    let s0 = run.serial().await;
    let before = run.jobs_of("apply").len();
    run.patch(json!({"spec": {"variables": {"noop_exports_extra": {"zone": "b"}}}}))
        .await;
    let job = run.kill_when_started("apply", before).await;
    run.recorded(&job).await;
    eventually("zone b applied", 120, || async {
        let tc = run.get().await?;
        (zone(&tc) == Some("b")).then_some(())
    })
    .await;
    assert_eq!(run.serial().await, s0 + 1, "the next state serial");
    run.only_job("apply", before, &job).await;
    run.nothing_held().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_a_refresh() {
    // Health reading pending after an apply brings a refresh 30 s later.
    let mut run = cluster_case(json!({"noop_health_state": "pending"}), Value::Null).await;
    let job = run.kill_when_started("refresh", 0).await;
    // Read while the Job runs: no other Job of the object writes now.
    let s0 = run.serial().await;
    let tc = run.recorded(&job).await;
    assert!(tc.data["status"]["lastRefresh"].is_string());
    let s1 = run.serial().await;
    assert!(s1 == s0 || s1 == s0 + 1, "{s0} then {s1}");
    run.only_job("refresh", 0, &job).await;
    run.nothing_held().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_a_drift_check() {
    let mut run = cluster_case(
        Value::Null,
        json!({"intervalSeconds": 20, "action": "Report"}),
    )
    .await;
    let job = run.kill_when_started("drift", 0).await;
    // Read while the Job runs: no other Job of the object writes now.
    let s0 = run.serial().await;
    let tc = run.recorded(&job).await;
    let status = &tc.data["status"];
    assert!(status["lastDriftCheck"].is_string());
    assert_eq!(
        condition(status, "DriftJobSucceeded"),
        Some(("True", "DriftChecked"))
    );
    let s1 = run.serial().await;
    assert!(s1 == s0 || s1 == s0 + 1, "{s0} then {s1}");
    run.only_job("drift", 0, &job).await;
    run.nothing_held().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_a_restore() {
    let mut run = cluster_case(Value::Null, Value::Null).await;
    let s1 = eventually("the first backup", 60, || async {
        run.backups().await.into_iter().min()
    })
    .await;
    run.patch(json!({"spec": {"variables": {"noop_exports_extra": {"zone": "b"}}}}))
        .await;
    eventually("zone b applied and backed up", 240, || async {
        let tc = run.get().await?;
        let newer = run.backups().await.iter().any(|&s| s > s1);
        (zone(&tc) == Some("b") && newer).then_some(())
    })
    .await;
    run.restore_killed(s1).await;
    // The restored inputs are older than the spec: one apply brings zone b
    // back, after which nothing is held.
    eventually("zone b again", 300, || async {
        let tc = run.get().await?;
        let ready = condition(&tc.data["status"], "Ready").is_some_and(|(s, _)| s == "True");
        (zone(&tc) == Some("b") && ready).then_some(())
    })
    .await;
    run.nothing_held().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_a_destroy() {
    let mut run = cluster_case(Value::Null, Value::Null).await;
    let clusters = run.api();
    run.destroy_killed(clusters).await;
}
