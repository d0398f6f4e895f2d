//! A stale state lock: the backend's lock Lease names, as its holder, a
//! runner pod of this object that is gone (what a runner killed mid-apply
//! leaves). The next Job of the object releases it with `--force-unlock`
//! before its work, announces it (`ForceUnlocked`), and the apply goes
//! through; nobody had to step in. The check costs one GET of the lock
//! Lease per Job start (and one of its holder's pod when that is ours). Controllers in this process, the real
//! control plane, Cluster API's controllers, the real node, the real
//! runner and OpenTofu.

use crate::support;

use captf_api::TerraformCluster;
use captf_manager::names::{WorkloadKind, state_lock_lease, state_suffix};
use captf_testenv::{TestEnv, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use support::clusters::{create_cluster, with_cluster_module};
use support::*;

fn ready(tc: &TerraformCluster) -> bool {
    tc.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_left_by_a_dead_runner_of_the_object_is_released_by_its_next_job() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    with_cluster_module(env, &ns, tmp.path()).await;
    let module = module_ref("cluster", ns.name());
    let _manager = start_manager(ns.client(), ns.name());
    let tcs = ns.api::<TerraformCluster>();

    create_cluster(&ns, "prod", &module).await;
    eventually("prod Ready", 240, || async {
        tcs.get("prod").await.ok().filter(ready).map(drop)
    })
    .await;

    // The lock as the backend writes it, held by a pod of one of prod's
    // apply Jobs that no longer exists.
    let leases = ns.api::<Lease>();
    let lock = state_lock_lease(&state_suffix(WorkloadKind::Cluster, ns.name(), "prod"));
    let info = json!({"ID": "3f1c2d4e-stale", "Operation": "OperationTypeApply",
        "Who": "runner@captf-c-prod-apply-a7-abcdef-x9k2q", "Version": "1.10.10",
        "Created": "2026-12-01T10:00:00Z", "Path": "", "Info": ""});
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": lock, "annotations": {"app.terraform.io/lock-info": info.to_string()}},
        "spec": {"holderIdentity": "3f1c2d4e-stale"},
    });
    leases
        .patch(
            &lock,
            &PatchParams::apply("the-dead-runner").force(),
            &Patch::Apply(&lease),
        )
        .await
        .unwrap();

    // A spec change starts an apply; it releases the lock first.
    let before: Vec<String> = ns
        .api::<Job>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|j| j.metadata.name)
        .collect();
    tcs.patch(
        "prod",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"variables": {"noop_exports_extra": {"zone": "b"}}}})),
    )
    .await
    .unwrap();
    let job = eventually("the apply after the change succeeded", 240, || async {
        let jobs = ns
            .api::<Job>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items;
        let new = jobs.into_iter().find(|j| {
            j.metadata
                .name
                .as_ref()
                .is_some_and(|n| !before.contains(n))
        })?;
        let done = new.status.as_ref()?.succeeded.unwrap_or(0) > 0;
        let tc = tcs.get("prod").await.ok()?;
        let zone = tc.status.as_ref()?.exports.as_ref()?["zone"].as_str() == Some("b");
        (done && zone).then_some(new)
    })
    .await;
    let args = job_args(&job);
    assert!(
        args.iter().any(|a| a == "--force-unlock=3f1c2d4e-stale"),
        "{args:?}"
    );
    let released = leases.get(&lock).await.unwrap();
    assert_ne!(
        released.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("3f1c2d4e-stale"),
        "the stale lock is gone"
    );
    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .unwrap();
    let note = events
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("ForceUnlocked"))
        .and_then(|e| e.note.clone())
        .expect("a ForceUnlocked event");
    assert!(note.contains("3f1c2d4e-stale"), "{note}");
}

fn state_readable(tc: &TerraformCluster) -> Option<(String, String, String)> {
    let c = tc
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "StateReadable")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// A lock held by someone else (a workstation's `tofu apply`) is never
/// forced: `StateReadable=False/StateLocked` names the holder and the way to
/// release it, the Job starts without `--force-unlock` and waits; once the
/// holder lets go the apply goes through and the condition clears. The
/// check costs the start's one lock GET, and one more per pass only while
/// the condition says locked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_by_someone_else_is_reported_and_waited_for_never_forced() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    with_cluster_module(env, &ns, tmp.path()).await;
    let module = module_ref("cluster", ns.name());
    let _manager = start_manager(ns.client(), ns.name());
    let tcs = ns.api::<TerraformCluster>();

    create_cluster(&ns, "shared", &module).await;
    eventually("shared Ready", 240, || async {
        tcs.get("shared").await.ok().filter(ready).map(drop)
    })
    .await;

    let leases = ns.api::<Lease>();
    let lock = state_lock_lease(&state_suffix(WorkloadKind::Cluster, ns.name(), "shared"));
    let info = json!({"ID": "9d8e-alice", "Operation": "OperationTypeApply",
        "Who": "alice@workstation", "Version": "1.10.10",
        "Created": "2026-12-01T10:00:00Z", "Path": "", "Info": ""});
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": lock, "annotations": {"app.terraform.io/lock-info": info.to_string()}},
        "spec": {"holderIdentity": "9d8e-alice"},
    });
    leases
        .patch(
            &lock,
            &PatchParams::apply("alice").force(),
            &Patch::Apply(&lease),
        )
        .await
        .unwrap();
    tcs.patch(
        "shared",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"variables": {"noop_exports_extra": {"zone": "b"}}}})),
    )
    .await
    .unwrap();
    let (_, _, message) = eventually("StateLocked naming alice", 120, || async {
        let tc = tcs.get("shared").await.ok()?;
        state_readable(&tc).filter(|(s, r, _)| s == "False" && r == "StateLocked")
    })
    .await;
    assert!(message.contains("alice@workstation"), "{message}");
    assert!(
        message.contains(&format!("kubectl delete lease -n {} {lock}", ns.name())),
        "{message}"
    );
    let jobs = ns
        .api::<Job>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let waiting = jobs
        .iter()
        .filter(|j| job_op(j) == "apply")
        .max_by_key(|j| j.metadata.creation_timestamp.clone())
        .expect("the apply started and waits for the lock");
    assert!(
        !job_args(waiting)
            .iter()
            .any(|a| a.starts_with("--force-unlock")),
        "a foreign lock is never forced"
    );
    assert_eq!(
        leases
            .get(&lock)
            .await
            .unwrap()
            .spec
            .and_then(|s| s.holder_identity)
            .as_deref(),
        Some("9d8e-alice")
    );
    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        events
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("StateLocked"))
    );

    // Alice is done: the waiting apply takes the lock and succeeds.
    leases.delete(&lock, &Default::default()).await.unwrap();
    eventually(
        "the apply through and the state readable again",
        240,
        || async {
            let tc = tcs.get("shared").await.ok()?;
            let zone = tc.status.as_ref()?.exports.as_ref()?["zone"].as_str() == Some("b");
            let readable = state_readable(&tc).is_some_and(|(s, _, _)| s == "True");
            (zone && readable).then_some(())
        },
    )
    .await;
}
