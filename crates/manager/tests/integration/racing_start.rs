//! A start racing the pass (`internals.md` §4 scenario 11): another
//! manager (a stale cache, a leader hand-over) has taken the object's run
//! lease for a Job it is about to create. The pass lists Jobs live and
//! sees none, but the lease says one is coming:
//!
//! - a deleting object with no state keeps its finalizer while the lease is
//!   held, and lets go once it is free (the Job would otherwise outlive the
//!   object and its infrastructure nobody's); its missing identity does
//!   not hold it, since there is nothing to destroy;
//! - a paused object keeps block-move while the lease is held, so
//!   `clusterctl move` does not start under a Job, and clears it once the
//!   lease is free.
//!
//! The lease is taken with the manager's own lease code, as the racing
//! manager would. The check costs one GET of the run lease (and of its
//! holder Job) only while block-move is set or the object is deleting and
//! the pass did not give the lease back itself. Controllers in this
//! process, the real control plane, Cluster API's controllers.

use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use captf_api::TerraformCluster;
use captf_manager::engine::decide::Op;
use captf_manager::io::leases::{Acquire, LeaseKind, LeaseRequest, acquire};
use captf_manager::leases::run_lease_name;
use captf_manager::names::{WorkloadKind, state_suffix};
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::touch::{passes_of, wait_for_passes};
use support::*;

const BLOCK_MOVE: &str = "clusterctl.cluster.x-k8s.io/block-move";
const FINALIZER: &str = captf_api::names::finalizers::TERRAFORM_CLUSTER;

/// A TerraformCluster owned by its Cluster whose identity Secret does not
/// exist: it gets its finalizer, but no Job ever starts and no state
/// exists.
async fn create_waiting_cluster(ns: &TestNamespace, name: &str) {
    create_capi_cluster(ns, name).await;
    let tc: TerraformCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "metadata": {"name": name},
        "spec": {"source": {"image": module_ref("cluster", ns.name())},
                 "identityRef": {"kind": "Secret", "name": format!("{name}-missing")},
                 "drift": {"intervalSeconds": 0}},
    }))
    .unwrap();
    ns.api::<TerraformCluster>()
        .create(&PostParams::default(), &tc)
        .await
        .unwrap();
    eventually("the finalizer", 120, || async {
        let tc = ns.api::<TerraformCluster>().get(name).await.ok()?;
        tc.finalizers().iter().any(|f| f == FINALIZER).then_some(())
    })
    .await;
}

/// The run lease of `name`, taken for a Job that does not exist yet.
async fn race_for(ns: &TestNamespace, name: &str) -> String {
    let suffix = state_suffix(WorkloadKind::Cluster, ns.name(), name);
    let req = LeaseRequest {
        kind: LeaseKind::Run,
        name: run_lease_name(&suffix),
        namespace: ns.name().to_owned(),
        job: format!("captf-c-{name}-apply-a1-racing"),
        op: Op::Apply,
        labels: BTreeMap::new(),
        duration: Duration::from_secs(3600),
    };
    let got = acquire(&ns.client(), &req, SystemTime::now())
        .await
        .unwrap();
    assert!(matches!(got, Acquire::Acquired { .. }), "{got:?}");
    req.name
}

/// Returns once `count` more full passes of the TerraformCluster `name`
/// began: the first may have read the object just before the change the
/// test made, the later ones decided on it (each such pass requeues itself
/// within seconds while the lease is held).
async fn passes_since_now(manager: &Manager, ns: &TestNamespace, name: &str, count: u64) {
    let key = format!("TerraformCluster/{}/{name}", ns.name());
    wait_for_passes(manager, &key, passes_of(manager, &key), count).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_lease_held_by_a_job_not_yet_created_keeps_the_finalizer_and_block_move() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let manager = start_manager(ns.client(), ns.name());
    let tcs = ns.api::<TerraformCluster>();
    let leases = ns.api::<Lease>();
    create_waiting_cluster(&ns, "deleting").await;
    create_waiting_cluster(&ns, "paused").await;

    // Deletion without state, the run lease held: the finalizer stays.
    let lease = race_for(&ns, "deleting").await;
    tcs.delete("deleting", &DeleteParams::default())
        .await
        .unwrap();
    passes_since_now(&manager, &ns, "deleting", 2).await;
    let tc = tcs.get("deleting").await.expect("still there");
    assert!(tc.finalizers().iter().any(|f| f == FINALIZER));
    leases
        .delete(&lease, &DeleteParams::default())
        .await
        .unwrap();
    eventually("deleting gone once the lease is free", 60, || async {
        tcs.get_opt("deleting")
            .await
            .ok()
            .and_then(|o| o.is_none().then_some(()))
    })
    .await;

    // Paused, block-move left on, the run lease held: block-move stays.
    let lease = race_for(&ns, "paused").await;
    tcs.patch(
        "paused",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
            "cluster.x-k8s.io/paused": "", BLOCK_MOVE: ""}}})),
    )
    .await
    .unwrap();
    eventually("the pass saw the pause", 60, || async {
        let tc = tcs.get("paused").await.ok()?;
        support::clusters::condition(&tc, "Paused")
            .is_some_and(|(s, _)| s == "True")
            .then_some(())
    })
    .await;
    passes_since_now(&manager, &ns, "paused", 2).await;
    let tc = tcs.get("paused").await.unwrap();
    assert!(
        tc.annotations().contains_key(BLOCK_MOVE),
        "block-move stays while the lease is held"
    );
    leases
        .delete(&lease, &DeleteParams::default())
        .await
        .unwrap();
    eventually("block-move cleared once the lease is free", 60, || async {
        let tc = tcs.get("paused").await.ok()?;
        (!tc.annotations().contains_key(BLOCK_MOVE)).then_some(())
    })
    .await;
    // Nothing of this started a Job.
    let jobs = ns.api::<Job>().list(&ListParams::default()).await.unwrap();
    assert!(jobs.items.is_empty(), "{:?}", jobs.items);
}
