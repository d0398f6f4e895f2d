//! The pause handshake (`internals.md` §4 scenario 8): `clusterctl move`
//! pauses, then reads block-move. A TerraformCluster is paused in the exact
//! window after the manager decided an apply from its cache and wrote
//! block-move, before the Job: the live re-read stops the start. No Job,
//! no run lease taken, block-move cleared again; once unpaused, exactly one
//! apply runs, under block-move. The pause lands through a hook in the
//! manager's client that writes it the moment the block-move write is
//! answered. Controllers in this process, the real control plane, Cluster
//! API's controllers, the real node, the real runner and OpenTofu.

use crate::support;

use captf_api::TerraformCluster;
use captf_api::names::annotations::{BLOCK_MOVE, PAUSED};
use captf_manager::leases::run_lease_name;
use captf_manager::names::{WorkloadKind, state_suffix};
use captf_testenv::{TestEnv, eventually};
use http::Method;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use support::clusters::{create_cluster, is_ready as ready, with_cluster_module};
use support::faults::{Faults, Hook};
use support::*;

fn applies(jobs: &[Job]) -> Vec<String> {
    jobs.iter()
        .filter(|j| job_op(j) == "apply")
        .filter_map(|j| j.metadata.name.clone())
        .collect()
}

/// A hook on the manager's next metadata write of prod that pauses prod
/// once that write set block-move. A write without it (under load, Cluster
/// API's owner reference can land after Ready, and the manager answers it)
/// arms the hook again: the manager waits for the hook before its next
/// request, so none slips by.
fn pause_after_block_move(
    faults: Faults,
    tcs: kube::Api<TerraformCluster>,
    seen: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Hook {
    Hook {
        method: Method::PATCH,
        path_end: "/terraformclusters/prod".into(),
        action: Box::pin(async move {
            let written = tcs.get("prod").await.unwrap();
            if !written.annotations().contains_key(BLOCK_MOVE) {
                faults.arm(pause_after_block_move(faults.clone(), tcs, seen));
                return;
            }
            let pause = json!({"metadata": {"annotations": {PAUSED: "true"}}});
            tcs.patch("prod", &PatchParams::default(), &Patch::Merge(&pause))
                .await
                .unwrap();
            seen.store(true, std::sync::atomic::Ordering::SeqCst);
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_that_lands_after_block_move_stops_the_start() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    with_cluster_module(env, &ns, tmp.path()).await;
    let faults = Faults::new(Vec::new());
    let manager = start_manager(faults.client(env.config()), ns.name());
    let tcs = ns.api::<TerraformCluster>();
    let jobs = ns.api::<Job>();
    create_cluster(&ns, "prod", &module_ref("cluster", ns.name())).await;
    // Ready and done with its apply: the apply's bookkeeping drops
    // block-move after its status write, and that drop must not be taken
    // for the next apply's block-move below.
    eventually("prod Ready with its apply bookkept", 240, || async {
        let tc = tcs.get("prod").await.ok().filter(ready)?;
        let idle = tc.status.as_ref()?.workspace.active_job.is_none();
        (idle && !tc.annotations().contains_key(BLOCK_MOVE)).then_some(())
    })
    .await;
    let before = applies(&jobs.list(&ListParams::default()).await.unwrap().items);

    // The manager's block-move write of the apply the change below brings;
    // the pause lands right after it.
    let after_block_move = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    faults.arm(pause_after_block_move(
        faults.clone(),
        tcs.clone(),
        after_block_move.clone(),
    ));
    tcs.patch(
        "prod",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"variables": {"noop_exports_extra": {"zone": "b"}}}})),
    )
    .await
    .unwrap();
    // The flag, not the hook's slot (empty while a hook that saw another
    // write runs and arms itself again): set once the pause landed right
    // after the block-move write.
    eventually("the pause to land right after block-move", 120, || async {
        after_block_move
            .load(std::sync::atomic::Ordering::SeqCst)
            .then_some(())
    })
    .await;
    eventually("block-move cleared while paused", 60, || async {
        let tc = tcs.get("prod").await.ok()?;
        let paused = tc
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Paused" && c.status == "True");
        (paused && !tc.annotations().contains_key(BLOCK_MOVE)).then_some(())
    })
    .await;
    // A pass woken now, paused, starts nothing.
    support::touch::touch_cluster_state(&ns, &manager, "prod").await;
    assert_eq!(
        applies(&jobs.list(&ListParams::default()).await.unwrap().items),
        before,
        "no Job starts once paused"
    );
    let lease = ns
        .api::<Lease>()
        .get_opt(&run_lease_name(&state_suffix(
            WorkloadKind::Cluster,
            ns.name(),
            "prod",
        )))
        .await
        .unwrap();
    let holder = lease.and_then(|l| l.spec).and_then(|s| s.holder_identity);
    assert!(
        holder.as_ref().is_none_or(|h| before.contains(h)),
        "no run lease for a new Job: {holder:?}"
    );

    // Unpaused: one apply, and block-move while it runs.
    tcs.patch(
        "prod",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {PAUSED: null}}})),
    )
    .await
    .unwrap();
    let saw_block_move = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    eventually("the change applied", 240, || {
        let (tcs, jobs) = (tcs.clone(), jobs.clone());
        let saw = saw_block_move.clone();
        async move {
            let tc = tcs.get("prod").await.ok()?;
            let listed = jobs.list(&ListParams::default()).await.ok()?.items;
            let running = listed.iter().any(|j| {
                job_op(j) == "apply" && j.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0
            });
            if running && tc.annotations().contains_key(BLOCK_MOVE) {
                saw.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            let zone = tc.status.as_ref()?.exports.as_ref()?["zone"].as_str() == Some("b");
            (zone && ready(&tc)).then_some(())
        }
    })
    .await;
    let after = applies(&jobs.list(&ListParams::default()).await.unwrap().items);
    assert_eq!(after.len(), before.len() + 1, "{before:?} then {after:?}");
    assert!(
        saw_block_move.load(std::sync::atomic::Ordering::SeqCst),
        "the apply ran under block-move"
    );
}
