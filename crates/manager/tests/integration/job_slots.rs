//! Job slots on the real control plane: 30 pools of one cluster under
//! `--cluster-max-active-jobs=5`, with the controllers in this process, the
//! real node and the real runner and OpenTofu. A watch of the apiserver
//! counts the cluster's unfinished Jobs after every change: never more
//! than 5, and every pool converges. The check costs no
//! request: the count comes from the Job watch the manager already has.

use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use captf_api::TerraformMachinePool;
use captf_testenv::{TestEnv, eventually};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use support::many_pools::{add_pool, bring_up_cluster};
use support::*;

const POOLS: usize = 30;
const LIMIT: i32 = 5;

fn unfinished(job: &Job) -> bool {
    !job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

fn converged(p: &TerraformMachinePool) -> bool {
    let status = p.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    ready
        && status
            .is_some_and(|s| s.workspace.active_job.is_none() && s.workspace.last_refresh.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_pools_of_one_cluster_never_run_more_jobs_than_its_limit_and_all_converge() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    insert_manager(env, ns.name()).await;
    for role in ["cluster", "machinepool"] {
        insert_module(
            env,
            &module_ref(role, ns.name()),
            module_image(tmp.path(), role, "v1", &[]),
        )
        .await;
    }
    install_runner_role(&ns.client()).await;
    let _manager = start_manager_with(ns.client(), ns.name(), |c| {
        c.defaults.cluster_max_active_jobs = LIMIT;
    });

    // The apiserver's view of the cluster's unfinished Jobs, all along: a
    // watch sees every change of every Job in order, so the count after
    // each is the count the cluster had then (no overshoot between samples).
    let most = Arc::new(AtomicUsize::new(0));
    let seen: Arc<Mutex<BTreeMap<String, bool>>> = Arc::default();
    let jobs: Api<Job> = ns.api();
    let watch = {
        let (most, seen) = (most.clone(), seen.clone());
        let config = watcher::Config::default().labels("cluster.x-k8s.io/cluster-name=prod");
        let mut stream = watcher(jobs, config).boxed();
        tokio::spawn(async move {
            while let Some(event) = stream.next().await {
                let mut seen = seen.lock().unwrap();
                match event {
                    Ok(watcher::Event::Apply(j) | watcher::Event::InitApply(j)) => {
                        let name = j.metadata.name.clone().unwrap_or_default();
                        seen.insert(name, unfinished(&j));
                    }
                    // A Job gone is no longer running (history pruning
                    // removes finished ones; they stay counted as seen).
                    Ok(watcher::Event::Delete(j)) => {
                        let name = j.metadata.name.clone().unwrap_or_default();
                        seen.insert(name, false);
                    }
                    _ => continue,
                }
                let running = seen.values().filter(|u| **u).count();
                most.fetch_max(running, Ordering::Relaxed);
            }
        })
    };

    bring_up_cluster(&ns).await;
    for i in 0..POOLS {
        add_pool(&ns, i, 86400).await;
    }
    let pools = ns.api::<TerraformMachinePool>();
    eventually("every pool converged", 900, || async {
        let listed = pools.list(&ListParams::default()).await.ok()?.items;
        (listed.len() == POOLS && listed.iter().all(converged)).then_some(())
    })
    .await;
    watch.abort();
    let jobs_seen = seen.lock().unwrap().len();

    let most = most.load(Ordering::Relaxed);
    assert!(
        most <= LIMIT as usize,
        "{most} Jobs of the cluster ran at once"
    );
    // Whether the limit itself is reached depends on timing (refreshes stop
    // at 80% of it); that the limit held back starts is what the events
    // below show.
    assert!(most > 1, "Jobs of the cluster ran side by side: {most}");
    // The cluster's apply, and each pool's apply and refresh after it.
    assert!(jobs_seen > 2 * POOLS, "{jobs_seen} Jobs");
    // Those that waited were told so, once per wait.
    let events: Api<Event> = ns.api();
    let waits = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("WaitingForJobSlot"))
        .count();
    assert!(waits > 0, "no object waited for a slot");
}
