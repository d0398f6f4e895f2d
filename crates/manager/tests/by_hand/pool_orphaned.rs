//! A state Cluster API would not make: the Cluster object gone while its
//! TerraformCluster and a pool still exist. The TerraformCluster waits for
//! the pool, which destroys from its stored inputs without the Cluster, or
//! keeps its state when the TerraformCluster says Retain. The test plays Cluster API's part by hand, in a binary of its own so that no
//! Cluster API controller (they watch every namespace) reacts to it.

use crate::support;

use captf_api::{TerraformCluster, TerraformMachinePool};
use captf_manager::capi;
use captf_testenv::{TestEnv, eventually};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use serde_json::json;
use support::pools::*;

#[tokio::test]
async fn a_cluster_deleted_first_waits_for_its_pool_which_destroys_without_the_cluster() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), Driver::ByHand).await;
    bring_up_driven(&ns, 1, json!({}), json!({}), Driver::ByHand).await;
    wait_pool(&ns, "a pool of 1 to be Ready", 300, |p| {
        is(p, "Ready", "True") && ids(p).len() == 1
    })
    .await;

    // The Cluster goes first: its TerraformCluster waits for the pool.
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi::cluster_resource());
    clusters
        .delete("prod", &DeleteParams::background())
        .await
        .unwrap();
    let tcs = ns.api::<TerraformCluster>();
    eventually("the TerraformCluster to wait for its pool", 120, || async {
        let tc = tcs.get("prod").await.ok()?;
        let blocked = tc.status.as_ref()?.conditions.as_ref()?.iter().any(|c| {
            c.type_ == "DeletionBlocked" && c.status == "True" && c.reason == "DependentsExist"
        });
        (tc.metadata.deletion_timestamp.is_some() && blocked).then_some(())
    })
    .await;
    let destroys = destroy_jobs(&ns).await;
    assert!(
        destroys.is_empty(),
        "nothing is destroyed while the pool exists: {destroys:?}"
    );
    eventually("the Cluster object to be gone", 60, || async {
        clusters.get_opt("prod").await.ok()?.is_none().then_some(())
    })
    .await;

    // The pool's deletion destroys from its stored inputs although the
    // Cluster is gone; then the TerraformCluster destroys and goes.
    let mps: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi::machine_pool_resource());
    mps.delete("pool-a", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the pool and the cluster to be gone, leaving nothing",
        300,
        || async {
            let pools = ns
                .api::<TerraformMachinePool>()
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .len();
            let tcs = tcs.list(&ListParams::default()).await.ok()?.items.len();
            let (jobs, secrets, leases) = leftovers(&ns).await?;
            (pools == 0 && tcs == 0 && jobs == 0 && secrets.is_empty() && leases == 0).then_some(())
        },
    )
    .await;
    let events = ns
        .api::<k8s_openapi::api::events::v1::Event>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let destroyed = |kind: &str| {
        events.iter().any(|e| {
            e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some(kind)
                && e.reason.as_deref() == Some("JobSucceeded")
                && e.note.as_deref().is_some_and(|n| n.contains("-destroy-"))
        })
    };
    assert!(
        destroyed("TerraformMachinePool"),
        "the pool ran its destroy"
    );
    assert!(
        destroyed("TerraformCluster"),
        "then the cluster ran its own"
    );
}

/// An orphan keeps what it inherits: with the Cluster gone, the pool still
/// finds its TerraformCluster (by the cluster-name label both carry), whose
/// `Retain` it inherits, so its deletion destroys nothing and keeps its
/// state, as the cluster's own deletion does.
#[tokio::test]
async fn an_orphaned_pool_keeps_the_retain_it_inherits_from_its_terraform_cluster() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), Driver::ByHand).await;
    bring_up_driven(&ns, 1, json!({}), json!({}), Driver::ByHand).await;
    let pool = wait_pool(&ns, "a pool of 1 to be Ready", 300, |p| {
        is(p, "Ready", "True") && ids(p).len() == 1
    })
    .await;
    let pool_uid = pool.metadata.uid.clone().unwrap();
    let tcs = ns.api::<TerraformCluster>();
    tcs.patch(
        "prod",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"spec": {"deletionPolicy": "Retain"}})),
    )
    .await
    .unwrap();

    // The Cluster goes first; its TerraformCluster waits for the pool.
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi::cluster_resource());
    clusters
        .delete("prod", &DeleteParams::background())
        .await
        .unwrap();
    eventually("the Cluster object to be gone", 120, || async {
        clusters.get_opt("prod").await.ok()?.is_none().then_some(())
    })
    .await;

    // The orphaned pool is deleted: it retains, as its cluster says.
    let mps: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi::machine_pool_resource());
    mps.delete("pool-a", &DeleteParams::background())
        .await
        .unwrap();
    let pools = ns.api::<TerraformMachinePool>();
    eventually("the orphaned pool to be gone", 180, || async {
        pools.get_opt("pool-a").await.ok()?.is_none().then_some(())
    })
    .await;
    let events = ns
        .api::<k8s_openapi::api::events::v1::Event>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(
        events.iter().any(|e| {
            e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(pool_uid.as_str())
                && e.reason.as_deref() == Some("InfrastructureRetained")
        }),
        "the pool announces the retain it inherited"
    );
    let destroys = destroy_jobs(&ns).await;
    assert!(destroys.is_empty(), "Retain destroys nothing: {destroys:?}");
    let kept = ns
        .api::<k8s_openapi::api::core::v1::Secret>()
        .list(&ListParams::default().labels(&format!("captf.io/retained-from-uid={pool_uid}")))
        .await
        .unwrap()
        .items;
    assert!(
        kept.iter().any(|s| s
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("tfstate-"))),
        "the pool's state is kept"
    );
}

/// The names of the namespace's destroy Jobs.
async fn destroy_jobs(ns: &captf_testenv::TestNamespace) -> Vec<String> {
    let jobs: Api<Job> = ns.api();
    jobs.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|j| support::job_op(j) == "destroy")
        .filter_map(|j| j.metadata.name)
        .collect()
}
