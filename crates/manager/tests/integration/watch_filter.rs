//! `--watch-filter`: the manager reconciles only objects labeled
//! `cluster.x-k8s.io/watch-filter=<value>`, as every Cluster API
//! controller does, so two managers can split one namespace. An unlabeled
//! TerraformCluster gets no finalizer, no status and no Job while a
//! labeled one beside it comes up; labeled later, it is taken up.
//! Controllers in this process, the real control plane, Cluster API's
//! controllers, the real node, the real runner and OpenTofu.

use crate::support;

use captf_api::TerraformCluster;
use captf_testenv::{TestEnv, eventually};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use support::clusters::{create_cluster_with_spec, is_ready, with_cluster_module};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_outside_the_watch_filter_is_left_alone() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    with_cluster_module(env, &ns, tmp.path()).await;
    let _manager = start_manager_with(ns.client(), ns.name(), |c| {
        c.watch_filter = Some("team-a".to_owned());
    });
    let module = module_ref("cluster", ns.name());
    create_cluster_with_spec(&ns, "theirs", &module, json!({})).await;
    create_cluster_with_spec(&ns, "ours", &module, json!({})).await;
    let tcs = ns.api::<TerraformCluster>();
    tcs.patch(
        "ours",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"cluster.x-k8s.io/watch-filter": "team-a"}}})),
    )
    .await
    .unwrap();

    eventually("the labeled cluster Ready", 300, || async {
        is_ready(&tcs.get("ours").await.ok()?).then_some(())
    })
    .await;
    // By the time the labeled one is up, the other would have had its
    // finalizer, status and first Job long ago.
    let theirs = tcs.get("theirs").await.unwrap();
    assert!(theirs.metadata.finalizers.unwrap_or_default().is_empty());
    assert!(theirs.status.is_none(), "{:?}", theirs.status);
    let jobs = ns.api::<Job>().list(&ListParams::default()).await.unwrap();
    let names: Vec<String> = jobs
        .items
        .iter()
        .filter_map(|j| j.metadata.name.clone())
        .collect();
    assert!(names.iter().all(|n| !n.contains("theirs")), "{names:?}");

    // Labeled, it is the manager's.
    tcs.patch(
        "theirs",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"cluster.x-k8s.io/watch-filter": "team-a"}}})),
    )
    .await
    .unwrap();
    eventually("the newly labeled cluster Ready", 300, || async {
        is_ready(&tcs.get("theirs").await.ok()?).then_some(())
    })
    .await;
}
