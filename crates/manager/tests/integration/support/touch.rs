//! Waking one object's full pass from outside the manager: an annotation on
//! its state Secret routes to that object alone, and its pass then finds
//! whatever is due (for a converged object: nothing).

use std::collections::BTreeMap;
use std::time::Duration;

use captf_manager::names::{WorkloadKind, state_suffix};
use captf_testenv::{TestNamespace, eventually};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::Manager;

/// Annotates the state Secret of `name`, waits for the pass it wakes and
/// `settle` more: the objects reconciled meanwhile, with their pass counts.
pub async fn touch_state(
    ns: &TestNamespace,
    manager: &Manager,
    kind: WorkloadKind,
    name: &str,
    settle: Duration,
) -> BTreeMap<String, u64> {
    let before = manager.passes.snapshot();
    let suffix = state_suffix(kind, ns.name(), name);
    ns.api::<Secret>()
        .patch(
            &format!("tfstate-default-{suffix}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"example.com/touched": "1"}}})),
        )
        .await
        .unwrap();
    let key = format!("{}/{}/{name}", kind.kind(), ns.name());
    let since = before.get(&key).copied().unwrap_or(0);
    wait_for_passes(manager, &key, since, 1).await;
    tokio::time::sleep(settle).await;
    manager
        .passes
        .snapshot()
        .into_iter()
        .filter(|(k, n)| before.get(k) != Some(n))
        .map(|(k, n)| {
            let was = before.get(&k).copied().unwrap_or(0);
            (k, n - was)
        })
        .collect()
}

/// Wakes the pass of the TerraformCluster `name` through its state Secret
/// and returns once it ran: what a test asserts next is what that pass did
/// (for a converged or waiting cluster: start nothing).
pub async fn touch_cluster_state(ns: &TestNamespace, manager: &Manager, name: &str) {
    touch_state(ns, manager, WorkloadKind::Cluster, name, Duration::ZERO).await;
}

/// Annotates the TerraformCluster `name` itself (for one with no state
/// Secret to touch) and waits for the pass it wakes.
#[allow(dead_code)]
pub async fn touch_cluster(ns: &TestNamespace, manager: &Manager, name: &str) {
    let key = format!("TerraformCluster/{}/{name}", ns.name());
    let since = passes_of(manager, &key);
    ns.api::<captf_api::TerraformCluster>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"example.com/touched": "1"}}})),
        )
        .await
        .unwrap();
    wait_for_passes(manager, &key, since, 1).await;
}

/// Full passes of the object `key` (`Kind/namespace/name`) so far.
pub fn passes_of(manager: &Manager, key: &str) -> u64 {
    manager.passes.snapshot().get(key).copied().unwrap_or(0)
}

/// Returns once `count` passes of `key` began after the `since`th: what a
/// test asserts next is what those passes did (a timeout, never a sleep).
pub async fn wait_for_passes(manager: &Manager, key: &str, since: u64, count: u64) {
    eventually(&format!("{count} more passes of {key}"), 60, || async {
        (passes_of(manager, key) >= since + count).then_some(())
    })
    .await;
}
