//! The manager SIGKILLed while each operation of a TerraformMachinePool and
//! of a TerraformMachine runs: apply, refresh, drift, restore and destroy,
//! one object taken through all of them in turn (one bring-up per kind).
//! As in `kill_matrix.rs`, the manager is the real binary in its own
//! process, killed the moment the operation's Job exists, and a new one
//! takes over (`support::kill_run`). Each operation ends with exactly one
//! Job of its own (any later one of the same operation created after it
//! finished), that Job succeeded and bookkept by the new manager, and no
//! run lease, cluster lease or state lock still held by it (after the
//! destroy, none held at all). The real control plane, Cluster API's
//! controllers, the real node, the real runner and OpenTofu.

use crate::support;

use captf_manager::capi;
use captf_manager::names::WorkloadKind;
use captf_testenv::eventually;
use kube::api::Api;
use serde_json::json;
use support::kill_run::{Run, condition};
use support::machines::{cluster, machine_pair, machines};
use support::pools::{bring_up_with, scale};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_each_operation_of_a_pool() {
    let mut run = Run::start(
        WorkloadKind::MachinePool,
        "pool-a",
        &["cluster", "machinepool"],
    )
    .await;
    // Membership refreshes only right after an apply: every refresh Job of
    // the test is one the test is waiting for.
    bring_up_with(
        &run.ns,
        2,
        json!({}),
        json!({"membershipRefreshIntervalSeconds": 3600}),
    )
    .await;

    run.first_apply_and_refresh_killed().await;

    let before = run.jobs_of("drift").len();
    run.patch(json!({"spec": {"drift": {"intervalSeconds": 20, "action": "Report"}}}))
        .await;
    let drift = run.killed_once("drift", before).await;
    let pool = run.get().await.unwrap();
    assert!(pool.data["status"]["lastDriftCheck"].is_string(), "{drift}");
    assert_eq!(
        condition(&pool.data["status"], "DriftDetected"),
        Some(("False", "NoDrift"))
    );
    // Drift every day from here on: the restore below is the next Job.
    run.patch(json!({"spec": {"drift": {"intervalSeconds": 86400}}}))
        .await;

    // A second serial to go back from: the pool scaled to 3.
    let first = run.backups().await.into_iter().min().expect("a backup");
    scale(&run.ns, 3).await;
    eventually("3 members applied and backed up", 240, || async {
        let pool = run.get().await?;
        let ids = pool.data["spec"]["providerIDList"].as_array()?.len();
        (ids == 3 && run.backups().await.iter().any(|&s| s > first)).then_some(())
    })
    .await;
    run.restore_killed(first).await;
    // The restored inputs are older than the spec: an apply brings the
    // third member back.
    eventually("3 members again", 300, || async {
        let pool = run.get().await?;
        let ids = pool.data["spec"]["providerIDList"].as_array()?.len();
        (ids == 3 && condition(&pool.data["status"], "Ready").is_some_and(|(s, _)| s == "True"))
            .then_some(())
    })
    .await;

    let machine_pools = Api::namespaced_with(
        run.ns.client(),
        run.ns.name(),
        &capi::machine_pool_resource(),
    );
    run.destroy_killed(machine_pools).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_each_operation_of_a_machine() {
    let mut run = Run::start(WorkloadKind::Machine, "m-0", &["cluster", "machine"]).await;
    cluster(&run.ns).await;
    // Health reading pending: a refresh follows the apply 30 s later.
    machine_pair(
        &run.ns,
        "m-0",
        false,
        json!({"variables": {"noop_health_state": "pending"}}),
    )
    .await;

    run.first_apply_and_refresh_killed().await;

    let before = run.jobs_of("drift").len();
    run.patch(json!({"spec": {"drift": {"intervalSeconds": 20}}}))
        .await;
    run.killed_once("drift", before).await;
    let machine = run.get().await.unwrap();
    assert!(machine.data["status"]["lastDriftCheck"].is_string());
    run.patch(json!({"spec": {"drift": {"intervalSeconds": 0}}}))
        .await;

    // A machine's inputs are immutable, so no apply makes an older serial;
    // the newest backup is restored (a state push of it all the same).
    let newest = run.backups().await.into_iter().max().expect("a backup");
    run.restore_killed(newest).await;

    run.destroy_killed(machines(&run.ns)).await;
}
