//! The cluster operation gate: a cluster's apply and its pools' applies
//! never run at once; refreshes and drift checks take the run lease alone
//! (concepts §8.2). The other side of each wait is a Lease written by the
//! test as a manager would write it for a Job about to be created (fresh,
//! its Job not created yet, so live for the lease's one-minute grace), which
//! makes each wait deterministic: a pool's apply waits behind the cluster
//! write lease (`WaitingForClusterOperation`, its run lease given back)
//! while its refreshes go on; a cluster's apply takes the write lease and
//! waits behind a pool's mutating run lease (`WaitingForMachineOperations`),
//! keeping both leases so the pool's next apply waits too; each runs once
//! the other side is done. The controllers in this process, the real control
//! plane, Cluster API's controllers, the real node with the real runner and
//! OpenTofu.
//!
//! Cost: a member's apply, destroy or restore reads the cluster write lease
//! (one GET, plus its holder Job); a cluster's mutating start writes the
//! write lease and lists the cluster's run leases (one LIST, plus a GET per
//! member holder).

use crate::support;

use captf_api::{TerraformCluster, TerraformMachinePool};
use captf_manager::leases::{cluster_lease_name, run_lease_name};
use captf_manager::names::{WorkloadKind, state_suffix};
use captf_testenv::{TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use support::pools::*;

/// A Lease as a manager writes it right before creating `holder`.
async fn fresh_lease(ns: &TestNamespace, name: &str, kind: &str, owner_kind: &str, holder: &str) {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name,
            "labels": {"captf.io/lease": kind, "captf.io/managed": "true",
                       "cluster.x-k8s.io/cluster-name": "prod",
                       "captf.infrastructure.cluster.x-k8s.io/owner-kind": owner_kind},
            "annotations": {"captf.io/lease-op": "apply", "captf.io/lease-acquired-at": now}},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 3600},
    });
    ns.api::<Lease>()
        .patch(
            name,
            &PatchParams::apply("another-manager").force(),
            &Patch::Apply(&lease),
        )
        .await
        .unwrap();
}

fn reason_of(
    conditions: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
    type_: &str,
) -> Option<(String, String)> {
    let c = conditions?.iter().find(|c| c.type_ == type_)?;
    Some((c.reason.clone(), c.message.clone()))
}

fn cluster_reason(tc: &TerraformCluster, type_: &str) -> Option<(String, String)> {
    reason_of(tc.status.as_ref()?.conditions.as_ref(), type_)
}

fn pool_reason(p: &TerraformMachinePool, type_: &str) -> Option<(String, String)> {
    reason_of(p.status.as_ref()?.conditions.as_ref(), type_)
}

#[tokio::test]
async fn a_cluster_apply_and_its_pools_jobs_wait_for_each_other() {
    let env = captf_testenv::TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), Driver::ClusterApi).await;
    bring_up(&ns, 2, json!({})).await;
    wait_pool(&ns, "the pool Ready", 300, |p| is(p, "Ready", "True")).await;
    let leases = ns.api::<Lease>();
    let write_lease = cluster_lease_name(ns.name(), "prod");
    let pool_run = run_lease_name(&state_suffix(
        WorkloadKind::MachinePool,
        ns.name(),
        "pool-a",
    ));

    // The cluster is about to change: the pool's refreshes go on (a Job
    // created after the lease was written), its apply of a new size waits
    // and gives its run lease back.
    let written = k8s_openapi::jiff::Timestamp::now();
    fresh_lease(
        &ns,
        &write_lease,
        "cluster",
        "TerraformCluster",
        "captf-c-prod-apply-zz-000001",
    )
    .await;
    eventually("a refresh while the cluster changes", 60, || async {
        let jobs = ns.api::<Job>().list(&Default::default()).await.ok()?.items;
        jobs.iter()
            .any(|j| {
                let name = j.metadata.name.as_deref().unwrap_or_default();
                let created = j.metadata.creation_timestamp.as_ref();
                name.starts_with("captf-mp-pool-a-refresh-")
                    && created.is_some_and(|t| t.0 > written)
            })
            .then_some(())
    })
    .await;
    assert!(
        leases.get_opt(&write_lease).await.unwrap().is_some(),
        "the refresh ran under the write lease"
    );
    scale(&ns, 3).await;
    let p = wait_pool(&ns, "the apply waiting for the cluster", 60, |p| {
        pool_reason(p, "ApplyJobSucceeded").is_some_and(|(r, _)| r == "WaitingForClusterOperation")
    })
    .await;
    let (_, message) = pool_reason(&p, "ApplyJobSucceeded").unwrap();
    assert!(
        message.contains("captf-c-prod-apply-zz-000001"),
        "{message}"
    );
    assert!(
        leases.get_opt(&pool_run).await.unwrap().is_none(),
        "the waiting pool holds no run lease"
    );
    leases
        .delete(&write_lease, &DeleteParams::default())
        .await
        .unwrap();
    wait_pool(
        &ns,
        "the apply through once the cluster is done",
        180,
        |p| p.status.as_ref().and_then(|s| s.replicas) == Some(3),
    )
    .await;

    // A pool's apply is about to run: the cluster's apply takes the write
    // lease and waits for it.
    let other_pool = run_lease_name(&state_suffix(
        WorkloadKind::MachinePool,
        ns.name(),
        "pool-b",
    ));
    fresh_lease(
        &ns,
        &other_pool,
        "run",
        "TerraformMachinePool",
        "captf-mp-pool-b-apply-a1-000001",
    )
    .await;
    let tcs = ns.api::<TerraformCluster>();
    tcs.patch(
        "prod",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"variables": {"noop_exports_extra": {"zone": "b"}}}})),
    )
    .await
    .unwrap();
    let tc = eventually("the cluster apply waiting for the pool", 60, || async {
        let tc = tcs.get("prod").await.ok()?;
        cluster_reason(&tc, "ApplyJobSucceeded")
            .filter(|(r, _)| r == "WaitingForMachineOperations")
            .map(|_| tc)
    })
    .await;
    let (_, message) = cluster_reason(&tc, "ApplyJobSucceeded").unwrap();
    assert!(
        message.contains("captf-mp-pool-b-apply-a1-000001"),
        "{message}"
    );
    let held = leases.get(&write_lease).await.unwrap();
    let holder = held
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(
        holder.starts_with("captf-c-prod-apply-"),
        "the waiting cluster keeps the write lease: {holder}"
    );
    // Writer preference: the pool's next apply waits behind it.
    scale(&ns, 2).await;
    wait_pool(
        &ns,
        "the pool's apply waiting behind the waiting cluster",
        60,
        |p| {
            pool_reason(p, "ApplyJobSucceeded")
                .is_some_and(|(r, _)| r == "WaitingForClusterOperation")
        },
    )
    .await;

    leases
        .delete(&other_pool, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the cluster apply through, the write lease given back",
        240,
        || async {
            let tc = tcs.get("prod").await.ok()?;
            let zone = tc.status.as_ref()?.exports.as_ref()?["zone"].as_str() == Some("b");
            let released = leases.get_opt(&write_lease).await.ok()?.is_none();
            (zone && released).then_some(())
        },
    )
    .await;
    wait_pool(
        &ns,
        "the pool's apply through after the cluster's",
        180,
        |p| p.status.as_ref().and_then(|s| s.replicas) == Some(2),
    )
    .await;
}
