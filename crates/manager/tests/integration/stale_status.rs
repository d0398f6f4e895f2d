//! The status patch that ends a pass is conditional, on the real
//! apiserver: a pass that began on a cached object older than the
//! manager's own last status write is refused instead of writing back the
//! conditions it read stale.

use std::time::SystemTime;

use captf_api::TerraformMachinePool;
use captf_manager::engine::job_conditions::ConditionValue;
use captf_manager::reconcile::status::Draft;
use captf_manager::reconcile::{Config, Context, pass, status_patch};
use captf_testenv::TestEnv;
use kube::api::PostParams;
use serde_json::json;

fn ready(status: &'static str) -> Draft {
    let mut d = Draft::new(&[], 1, SystemTime::now());
    d.set(
        "Ready",
        &ConditionValue {
            status: status.parse().unwrap(),
            reason: if status == "True" {
                "Ready"
            } else {
                "NotReady"
            },
            message: String::new(),
        },
    );
    d
}

fn ready_status(p: &TerraformMachinePool) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

#[tokio::test]
async fn a_status_computed_from_a_stale_object_is_refused() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let api = ns.api::<TerraformMachinePool>();
    let pool: TerraformMachinePool = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
        "metadata": {"name": "workers"},
        "spec": {"source": {"image": "registry.example/pool:1"}},
    }))
    .unwrap();
    let seen = api.create(&PostParams::default(), &pool).await.unwrap();
    let ctx = Context::new(ns.client(), Config::new("registry.example/manager:1"));

    // A pass on the object as read writes its status; its own write moves
    // the object on.
    pass::begin_writes(&ctx, &seen);
    status_patch::write_status(&ctx, &seen, &ready("True"), &[])
        .await
        .unwrap();

    // The next pass began on a cache that has not seen that write yet.
    pass::begin_writes(&ctx, &seen);
    let err = status_patch::write_status(&ctx, &seen, &ready("False"), &[])
        .await
        .expect_err("a status from the stale object is refused");
    assert!(err.is_conflict(), "{err}");
    let live = api.get("workers").await.unwrap();
    assert_eq!(ready_status(&live).as_deref(), Some("True"));

    // On the current object the pass writes.
    pass::begin_writes(&ctx, &live);
    status_patch::write_status(&ctx, &live, &ready("False"), &[])
        .await
        .unwrap();
    let live = api.get("workers").await.unwrap();
    assert_eq!(ready_status(&live).as_deref(), Some("False"));
}
