//! A runner pod killed mid-apply: its processes (the runner, OpenTofu and
//! the provisioner OpenTofu runs), seen first running as the Job's security
//! context says, are SIGKILLed through the container runtime while OpenTofu
//! holds the state lock, as an OOM kill would. The lock stays
//! behind, naming the dead pod. The failed apply is retried after its
//! backoff; that next Job of the same object finds the lock held by its own
//! dead runner, releases it with `--force-unlock` before its work
//! (`ForceUnlocked`), and the apply goes through. Nobody steps in after the
//! spec change. Controllers in this process, the real control plane,
//! Cluster API's controllers, the real node, the real runner and
//! OpenTofu.

use crate::support;

use captf_api::TerraformCluster;
use captf_manager::names::{WorkloadKind, state_lock_lease, state_suffix};
use captf_testenv::{TestEnv, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::clusters::{
    create_cluster_with_variables, is_ready as ready, with_slow_cluster_module, zone,
};
use support::*;

fn job_names(jobs: &[Job]) -> Vec<String> {
    jobs.iter()
        .filter_map(|j| j.metadata.name.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_killed_mid_apply_leaves_a_lock_its_next_job_releases() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let module = with_slow_cluster_module(env, &ns, tmp.path()).await;
    let _manager = start_manager(ns.client(), ns.name());
    let tcs = ns.api::<TerraformCluster>();
    let jobs = ns.api::<Job>();

    create_cluster_with_variables(&ns, "prod", &module, json!({"noop_apply_seconds": 20})).await;
    eventually("prod Ready", 240, || async {
        tcs.get("prod").await.ok().filter(ready).map(drop)
    })
    .await;
    let before = job_names(&jobs.list(&ListParams::default()).await.unwrap().items);

    // The change adds a slow resource: its apply sleeps 20 s under the
    // lock.
    tcs.patch(
        "prod",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"variables": {"noop_exports_extra": {"zone": "b"}}}})),
    )
    .await
    .unwrap();
    let leases = ns.api::<Lease>();
    let lock = state_lock_lease(&state_suffix(WorkloadKind::Cluster, ns.name(), "prod"));
    let (pod, lock_id) = eventually("the apply step holding the lock", 120, || async {
        let lease = leases.get_opt(&lock).await.ok()??;
        let info: Value = serde_json::from_str(
            lease
                .metadata
                .annotations?
                .get("app.terraform.io/lock-info")?,
        )
        .ok()?;
        if info["Operation"] != "OperationTypeApply" {
            return None;
        }
        let pod = info["Who"].as_str()?.rsplit('@').next()?.to_owned();
        Some((pod, info["ID"].as_str()?.to_owned()))
    })
    .await;
    // The runner and OpenTofu run as the Job's security context says, on
    // the real runtime: user and group 65532, a read-only root, the Job's
    // 2 GiB memory limit on their cgroup.
    let node = env.real_node().await;
    let running = node.pod_processes(ns.name(), &pod);
    let commands: Vec<&str> = running.iter().map(|p| p.command.as_str()).collect();
    assert!(
        commands.contains(&"runner") && commands.contains(&"runtime"),
        "the runner and OpenTofu (/captf/runtime) run: {running:?}"
    );
    for p in &running {
        assert_eq!((p.uid, p.gid), (65532, 65532), "{p:?}");
        assert!(p.read_only_root, "{p:?}");
        assert_eq!(p.memory_limit, Some(2 << 30), "{p:?}");
    }
    let killed = node.kill_pod(ns.name(), &pod);
    assert!(
        killed >= 2,
        "the runner and OpenTofu are killed, not {killed} processes"
    );

    // The kill shows as a kubelet reports it, and the Job fails.
    let pods = ns.api::<Pod>();
    let code = eventually("the pod reports the kill", 60, || async {
        let p = pods.get(&pod).await.ok()?;
        let statuses = p.status?.container_statuses?;
        let source = statuses.into_iter().find(|c| c.name == "source")?;
        Some(source.state?.terminated?.exit_code)
    })
    .await;
    assert_eq!(code, 137);
    let killed_job = pod.rsplit_once('-').unwrap().0.to_owned();
    eventually("the killed apply Job failed", 60, || async {
        let j = jobs.get(&killed_job).await.ok()?;
        (j.status?.failed.unwrap_or(0) > 0).then_some(())
    })
    .await;
    let held = leases.get(&lock).await.unwrap();
    assert_eq!(
        held.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(lock_id.as_str()),
        "the dead runner's lock is still there"
    );

    // Its retry, after the backoff, releases the lock and applies.
    let retry = eventually("an apply after the kill succeeded", 300, || async {
        let listed = jobs.list(&ListParams::default()).await.ok()?.items;
        let done = listed.into_iter().find(|j| {
            let name = j.metadata.name.clone().unwrap_or_default();
            !before.contains(&name)
                && name != killed_job
                && j.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0) > 0
        })?;
        let tc = tcs.get("prod").await.ok()?;
        (zone(&tc).as_deref() == Some("b") && ready(&tc)).then_some(done)
    })
    .await;
    let args = job_args(&retry);
    assert!(
        args.iter()
            .any(|a| *a == format!("--force-unlock={lock_id}")),
        "{args:?}"
    );
    let after = leases.get(&lock).await.unwrap();
    assert_ne!(
        after.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(lock_id.as_str())
    );
    let unlocked = event_notes(&ns, "ForceUnlocked").await;
    assert_eq!(unlocked.len(), 1, "{unlocked:?}");
    assert!(unlocked[0].contains(&lock_id), "{}", unlocked[0]);
}
