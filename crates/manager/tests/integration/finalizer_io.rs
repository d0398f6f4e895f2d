//! The finalizer is dropped only from the version a pass read
//! (`internals.md` §4 scenario 39, the finalizer half): a pass holding an
//! older copy of the object is refused with a conflict instead of writing
//! back a finalizer another controller removed meanwhile. The real
//! apiserver; no controllers run.

use captf_api::TerraformCluster;
use captf_manager::reconcile::{Config, Context, pass};
use captf_testenv::TestEnv;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

const OURS: &str = captf_api::names::finalizers::TERRAFORM_CLUSTER;
const THEIRS: &str = "example.com/keep-until-backed-up";

#[tokio::test]
async fn a_stale_copy_cannot_drop_the_finalizer_nor_bring_another_back() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let api = ns.api::<TerraformCluster>();
    let tc: TerraformCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "metadata": {"name": "held", "finalizers": [OURS, THEIRS]},
        "spec": {"source": {"image": "registry.example/m:v1"},
                 "identityRef": {"kind": "Secret", "name": "creds"}},
    }))
    .unwrap();
    let stale = api.create(&PostParams::default(), &tc).await.unwrap();
    assert_eq!(
        stale.metadata.finalizers.as_deref().unwrap_or_default(),
        [OURS, THEIRS]
    );

    // The other controller is done and removes its own finalizer.
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": [OURS]}})),
    )
    .await
    .unwrap();

    let ctx = Context::new(ns.client(), Config::new("registry.example/manager:v1"));
    let refused = pass::remove_finalizer(&ctx, &stale).await.unwrap_err();
    assert!(refused.is_conflict(), "{refused}");
    let now = api.get("held").await.unwrap();
    assert_eq!(
        now.metadata.finalizers.as_deref().unwrap_or_default(),
        [OURS],
        "the other finalizer stays removed, ours stays"
    );

    // The pass runs again on the current version and drops ours.
    pass::remove_finalizer(&ctx, &now).await.unwrap();
    let after = api.get("held").await.unwrap();
    assert!(after.metadata.finalizers.unwrap_or_default().is_empty());
}
