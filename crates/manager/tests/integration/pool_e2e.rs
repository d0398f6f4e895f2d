//! A TerraformMachinePool end to end on the noop modules: the controllers
//! in this process, the real control plane, the real node running the
//! real runner and OpenTofu, and Cluster API's own controllers (owner
//! references, labels, the MachinePool's provider IDs and node matching,
//! the deletion cascade). `pool_orphaned.rs` has the one state Cluster API
//! would not make.

use crate::support;

use std::time::Duration;

use captf_api::{TerraformCluster, TerraformMachinePool};
use captf_manager::capi;
use captf_testenv::{TestEnv, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::pools::*;

#[tokio::test]
async fn a_pool_scales_rotates_and_goes_away_cleanly() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let manager = setup(env, &ns, tmp.path(), Driver::ClusterApi).await;
    // No refresh on the interval within the test: each one seen follows an
    // apply.
    let log = support::job_log::JobLog::start(&ns);
    let one_refresh_per_apply = || async {
        eventually("the refresh after the apply", 120, || async {
            let ops = log.ops_of("captf-mp-pool-a-");
            let count = |op: &str| ops.iter().filter(|o| *o == op).count();
            (count("refresh") == count("apply")).then_some(())
        })
        .await;
    };
    bring_up_with(
        &ns,
        3,
        json!({}),
        json!({"membershipRefreshIntervalSeconds": 3600}),
    )
    .await;

    let p = wait_pool(&ns, "a pool of 3 to be Ready", 300, |p| {
        is(p, "Ready", "True") && ids(p).len() == 3
    })
    .await;
    one_refresh_per_apply().await;
    let list = ids(&p);
    let mut sorted = list.clone();
    sorted.sort();
    assert_eq!(list, sorted, "provider IDs are sorted");
    let status = p.status.clone().unwrap();
    assert_eq!(status.replicas, Some(3));
    assert_eq!(status.instances.map(|i| i.len()), Some(3));
    assert_eq!(status.ready, Some(true));
    // The metrics say the same.
    let body = eventually("the metrics to show the pool Ready", 30, || async {
        let body = manager.metrics.encode();
        body.contains(&format!(
            "captf_ready{{kind=\"TerraformMachinePool\",namespace=\"{}\",name=\"pool-a\"}} 1",
            ns.name()
        ))
        .then_some(body)
    })
    .await;
    assert!(
        body.contains(
            "captf_jobs_total{kind=\"TerraformMachinePool\",op=\"apply\",result=\"succeeded\"}"
        ),
        "the apply is counted: {body}"
    );
    assert!(body.contains("captf_reconcile_op_decisions_total{kind=\"TerraformMachinePool\",op=\"apply\",reason=\"NoState\"}"));

    // Scale to 2, then to 0: re-applies; zero stays provisioned.
    scale(&ns, 2).await;
    wait_pool(&ns, "the pool to shrink to 2", 240, |p| {
        ids(p).len() == 2 && p.status.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await;
    one_refresh_per_apply().await;
    scale(&ns, 0).await;
    let p = wait_pool(&ns, "the pool to shrink to 0", 240, |p| {
        ids(p).is_empty() && p.status.as_ref().and_then(|s| s.replicas) == Some(0)
    })
    .await;
    assert_eq!(
        p.status
            .unwrap()
            .workspace
            .initialization
            .and_then(|i| i.provisioned),
        Some(true)
    );
    one_refresh_per_apply().await;

    // A bootstrap data rotation re-applies without any approval.
    let jobs: Api<Job> = ns.api();
    // (History pruning keeps the count of apply Jobs at 3: look for a new name.)
    let before = names(
        &jobs.list(&ListParams::default()).await.unwrap().items,
        "apply",
    );
    ns.api::<Secret>()
        .patch(
            "pool-bootstrap",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"value": "#cloud-config\nruncmd: [true]\n"}})),
        )
        .await
        .unwrap();
    eventually("a rotation apply to succeed", 240, || async {
        let all = jobs.list(&ListParams::default()).await.ok()?.items;
        let p = ns.api::<TerraformMachinePool>().get("pool-a").await.ok()?;
        let new = names(&all, "apply")
            .into_iter()
            .any(|n| !before.contains(&n));
        (new && is(&p, "ApplyJobSucceeded", "True")
            && p.status.as_ref()?.workspace.active_job.is_none())
        .then_some(())
    })
    .await;

    // Exactly one membership refresh after every apply, each right after
    // its apply (the interval would start none within the test).
    one_refresh_per_apply().await;
    let sequence: Vec<String> = log
        .ops_of("captf-mp-pool-a-")
        .into_iter()
        .filter(|o| o == "apply" || o == "refresh")
        .collect();
    let alternating: Vec<&str> = (0..sequence.len())
        .map(|i| if i % 2 == 0 { "apply" } else { "refresh" })
        .collect();
    assert_eq!(sequence, alternating, "one refresh after each apply");
    assert!(sequence.len() >= 8, "four applies at least: {sequence:?}");

    // Deleting the MachinePool and the Cluster leaves nothing behind.
    let mps: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi::machine_pool_resource());
    mps.delete("pool-a", &DeleteParams::background())
        .await
        .unwrap();
    eventually("the pool to be gone", 300, || async {
        ns.api::<TerraformMachinePool>()
            .get_opt("pool-a")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi::cluster_resource());
    clusters
        .delete("prod", &DeleteParams::background())
        .await
        .unwrap();
    eventually("everything to be gone", 300, || async {
        let (left_jobs, secrets, leases) = leftovers(&ns).await?;
        let tcs = ns
            .api::<TerraformCluster>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .len();
        (left_jobs == 0 && secrets.is_empty() && leases == 0 && tcs == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn autoscaling_writes_the_module_count_back() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), Driver::ClusterApi).await;
    // The MachinePool asks for 1 within autoscaler bounds of 2 to 5; the
    // module reports the group at 4 (the cloud's own scaling moved it), not
    // the 2 a clamp of the request would give: 4 goes back to the
    // MachinePool, which the manager marks as its own to write.
    bring_up_with(
        &ns,
        1,
        json!({
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "2",
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5",
        }),
        json!({"variables": {"noop_group_size": 4}}),
    )
    .await;
    let p = wait_pool(&ns, "autoscaling to be active", 300, |p| {
        is(p, "AutoscalingActive", "True") && is(p, "Ready", "True")
    })
    .await;
    assert_eq!(p.status.unwrap().replicas, Some(4), "the module's count");
    let mps: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi::machine_pool_resource());
    let mp = eventually("the count to be written back", 60, || async {
        let mp = mps.get("pool-a").await.ok()?;
        (mp.data["spec"]["replicas"].as_i64()? == 4).then_some(mp)
    })
    .await;
    assert_eq!(
        mp.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("cluster.x-k8s.io/replicas-managed-by"))
            .map(String::as_str),
        Some("captf"),
        "the manager claims the replicas it writes"
    );
}

#[tokio::test]
async fn a_failed_reapply_turns_ready_false_naming_the_job() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), Driver::ClusterApi).await;
    bring_up(&ns, 2, json!({})).await;
    wait_pool(&ns, "a pool of 2 to be Ready", 300, |p| {
        is(p, "Ready", "True") && ids(p).len() == 2
    })
    .await;

    // The module fails its next apply (after creating what it creates).
    ns.api::<TerraformMachinePool>()
        .patch(
            "pool-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"variables": {"noop_fail_apply": true}}})),
        )
        .await
        .unwrap();
    let p = wait_pool(&ns, "Ready to turn False on the failed apply", 240, |p| {
        is(p, "Ready", "False")
            && condition(p, "ApplyJobSucceeded").is_some_and(|c| c.reason == "ApplyFailed")
    })
    .await;
    let failed = condition(&p, "ApplyJobSucceeded").unwrap().message.clone();
    let ready = condition(&p, "Ready").unwrap().message.clone();
    assert!(
        failed.contains("captf-mp-pool-a-apply-"),
        "the condition names the Job: {failed}"
    );
    assert!(
        ready.contains("ApplyJobSucceeded"),
        "Ready says why: {ready}"
    );
    // Still provisioned: a failed re-apply does not undo what exists.
    assert_eq!(
        p.status
            .unwrap()
            .workspace
            .initialization
            .and_then(|i| i.provisioned),
        Some(true)
    );
}

/// The pool's apply Jobs with an annotation, by name.
fn annotated(jobs: &[Job], key: &str) -> Vec<(String, String)> {
    jobs.iter()
        .filter(|j| ops(std::slice::from_ref(j), "apply") == 1)
        .filter_map(|j| {
            let v = j.metadata.annotations.as_ref()?.get(key)?;
            Some((j.metadata.name.clone()?, v.clone()))
        })
        .collect()
}

fn succeeded(j: &Job) -> bool {
    j.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0) > 0
}

fn record_annotation(s: &Secret, key: &str) -> Option<String> {
    s.metadata.annotations.as_ref()?.get(key).cloned()
}

#[tokio::test]
async fn an_exports_change_that_replaces_the_group_waits_for_its_approval_hash() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), Driver::ClusterApi).await;
    bring_up(&ns, 2, json!({})).await;
    let p = wait_pool(&ns, "a pool of 2 to be Ready", 300, |p| {
        is(p, "Ready", "True") && ids(p).len() == 2
    })
    .await;
    let ids_before = ids(&p);
    let jobs: Api<Job> = ns.api();
    let secrets = ns.api::<Secret>();
    let applied_hash = eventually("the applied exports to be recorded", 60, || async {
        let r = secrets.get("captf-inputs-mp-pool-a").await.ok()?;
        record_annotation(&r, "captf.io/applied-cluster-outputs-hash")
    })
    .await;

    // The cluster's exports change (nothing of the cluster is replaced); the
    // noop group is bound to them, so the pool's plan would replace it.
    ns.api::<TerraformCluster>()
        .patch(
            "prod",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"variables": {"noop_exports_extra": {"zone": "b"}}}})),
        )
        .await
        .unwrap();
    let p = wait_pool(&ns, "the exports change to be blocked", 300, |p| {
        is(p, "Ready", "False")
            && condition(p, "ApplyJobSucceeded")
                .is_some_and(|c| c.reason == "DestructivePlanBlocked" && c.status == "False")
    })
    .await;
    let message = condition(&p, "ApplyJobSucceeded").unwrap().message.clone();
    let approval = message
        .split("captf.io/approve-destructive-plan=")
        .nth(1)
        .expect("the message names the approval command")
        .trim()
        .to_owned();
    assert!(approval.starts_with("h2:"), "{message}");
    assert_eq!(ids(&p), ids_before, "nothing was replaced");
    let all = jobs.list(&ListParams::default()).await.unwrap().items;
    let guarded = annotated(&all, "captf.io/approval-hash");
    assert!(
        guarded.iter().any(|(_, h)| *h == approval),
        "the blocked Job ran guarded by the approval hash: {guarded:?}"
    );
    let (blocked_job, _) = guarded
        .iter()
        .find(|(_, h)| *h == approval)
        .unwrap()
        .clone();
    assert!(message.contains(&blocked_job), "{message}");
    let rendered = annotated(&all, "captf.io/cluster-outputs-hash");
    let new_exports = rendered
        .iter()
        .find(|(n, _)| *n == blocked_job)
        .map(|(_, h)| h.clone())
        .unwrap();
    assert_ne!(new_exports, applied_hash);
    let record = secrets.get("captf-inputs-mp-pool-a").await.unwrap();
    assert!(
        record_annotation(&record, "captf.io/pending-cluster-outputs")
            .is_some_and(|v| v.contains("\"zone\":\"b\"")),
        "the waiting change is recorded"
    );
    let events = ns
        .api::<k8s_openapi::api::events::v1::Event>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("DestructivePlanBlocked")
                && e.type_.as_deref() == Some("Warning")),
        "one Warning for the blocked Job"
    );

    // A bootstrap rotation applies at once, with the exports last applied.
    secrets
        .patch(
            "pool-bootstrap",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"value": "#cloud-config\nruncmd: [true]\n"}})),
        )
        .await
        .unwrap();
    let held = eventually("a held rotation apply to succeed", 240, || async {
        let all = jobs.list(&ListParams::default()).await.ok()?.items;
        let held = annotated(&all, "captf.io/held-cluster-outputs");
        let (name, _) = held.first()?.clone();
        let job = all
            .iter()
            .find(|j| j.metadata.name.as_deref() == Some(&name))?;
        let p = ns.api::<TerraformMachinePool>().get("pool-a").await.ok()?;
        (succeeded(job)
            && p.status.as_ref()?.workspace.active_job.is_none()
            && condition(&p, "ApplyJobSucceeded")?.reason == "DestructivePlanBlocked")
            .then_some(job.clone())
    })
    .await;
    let held_annotations = held.metadata.annotations.clone().unwrap();
    assert_eq!(
        held_annotations.get("captf.io/cluster-outputs-hash"),
        Some(&applied_hash),
        "the rotation rendered the exports last applied"
    );
    assert!(!held_annotations.contains_key("captf.io/approval-hash"));

    // An approval naming another hash is ignored, and named once in the
    // waiting condition, before the command, which stays its end.
    let pools = ns.api::<TerraformMachinePool>();
    pools
        .patch(
            "pool-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"captf.io/approve-destructive-plan": "h2:not-this-one"}}})),
        )
        .await
        .unwrap();
    let p = wait_pool(&ns, "the wrong approval to be named", 120, |p| {
        condition(p, "ApplyJobSucceeded").is_some_and(|c| {
            c.reason == "DestructivePlanBlocked" && c.message.contains("\"h2:not-this-one\"")
        })
    })
    .await;
    let named = condition(&p, "ApplyJobSucceeded").unwrap().message.clone();
    assert_eq!(named.matches("h2:not-this-one").count(), 1, "{named}");
    assert!(
        named.ends_with(&format!("captf.io/approve-destructive-plan={approval}")),
        "{named}"
    );
    let all = jobs.list(&ListParams::default()).await.unwrap().items;
    assert!(
        !all.iter().any(|j| j
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("captf.io/approval-hash"))
            == Some(&approval)
            && j.metadata.name.as_deref() != Some(blocked_job.as_str())),
        "no apply started under the wrong approval"
    );

    // Approving the approval hash applies the change, which consumes the
    // approval and records the new exports.
    ns.api::<TerraformMachinePool>()
        .patch(
            "pool-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"captf.io/approve-destructive-plan": approval}}})),
        )
        .await
        .unwrap();
    let p = wait_pool(&ns, "the approved change to apply", 300, |p| {
        is(p, "Ready", "True")
            && is(p, "ApplyJobSucceeded", "True")
            && !p
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key("captf.io/approve-destructive-plan"))
    })
    .await;
    assert_eq!(ids(&p).len(), 2);
    let record = secrets.get("captf-inputs-mp-pool-a").await.unwrap();
    assert_eq!(
        record_annotation(&record, "captf.io/applied-cluster-outputs-hash"),
        Some(new_exports),
        "the applied exports are the approved ones"
    );
    assert_eq!(
        record_annotation(&record, "captf.io/pending-cluster-outputs"),
        None
    );
    let all = jobs.list(&ListParams::default()).await.unwrap().items;
    assert!(
        all.iter().any(|j| succeeded(j)
            && j.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("captf.io/approval-hash"))
                == Some(&approval)),
        "the approved apply ran under the approval hash"
    );
    // Scenario 25: the approved apply started once and said so once,
    // naming the approval hash, the Job and the annotation.
    let approved_jobs: Vec<String> = all
        .iter()
        .filter(|j| {
            j.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("captf.io/approval-hash"))
                == Some(&approval)
                && j.spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref())
                    .is_some_and(|s| {
                        s.containers
                            .iter()
                            .chain(s.init_containers.iter().flatten())
                            .flat_map(|c| c.args.iter().flatten())
                            .any(|a| a.starts_with("--allow-deletes-hash"))
                    })
        })
        .filter_map(|j| j.metadata.name.clone())
        .collect();
    assert_eq!(approved_jobs.len(), 1, "{approved_jobs:?}");
    let notes = support::event_notes(&ns, "PlanApproved").await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains(&approved_jobs[0])
            && notes[0].contains(&approval)
            && notes[0].contains("captf.io/approve-destructive-plan"),
        "{}",
        notes[0]
    );
    // And once more when it succeeded, on the pool.
    let applied = support::event_notes(&ns, "PlanApplied").await;
    assert_eq!(applied.len(), 1, "{applied:?}");
    assert!(
        applied[0].contains(&approved_jobs[0]) && applied[0].contains(&approval),
        "{}",
        applied[0]
    );
}

/// Creation and completion of each refresh Job seen, by name.
async fn watch_refreshes(
    jobs: &Api<Job>,
    seen: &mut std::collections::BTreeMap<String, (i64, Option<i64>)>,
) {
    for j in jobs.list(&ListParams::default()).await.unwrap().items {
        if ops(std::slice::from_ref(&j), "refresh") != 1 {
            continue;
        }
        let name = j.metadata.name.clone().unwrap();
        let created = j
            .metadata
            .creation_timestamp
            .as_ref()
            .unwrap()
            .0
            .as_second();
        let done = j
            .status
            .as_ref()
            .and_then(|s| s.completion_time.as_ref())
            .map(|t| t.0.as_second());
        let entry = seen.entry(name).or_insert((created, None));
        if entry.1.is_none() {
            entry.1 = done;
        }
    }
}

/// Seconds from each refresh's completion to the next refresh's creation,
/// for refreshes created after `since`.
fn refresh_gaps(
    seen: &std::collections::BTreeMap<String, (i64, Option<i64>)>,
    since: i64,
) -> Vec<i64> {
    let mut runs: Vec<(i64, Option<i64>)> = seen
        .values()
        .copied()
        .filter(|(c, _)| *c >= since)
        .collect();
    runs.sort();
    runs.windows(2)
        .filter_map(|w| Some(w[1].0 - w[0].1?))
        .collect()
}

/// Watches refresh Jobs from now until `want` gaps are seen (failing after
/// `limit` seconds) and returns them.
async fn next_refresh_gaps(
    jobs: &Api<Job>,
    seen: &mut std::collections::BTreeMap<String, (i64, Option<i64>)>,
    want: usize,
    limit: i64,
) -> Vec<i64> {
    let since = k8s_openapi::jiff::Timestamp::now().as_second();
    loop {
        watch_refreshes(jobs, seen).await;
        let gaps = refresh_gaps(seen, since);
        if gaps.len() >= want {
            return gaps;
        }
        assert!(
            k8s_openapi::jiff::Timestamp::now().as_second() - since < limit,
            "too few refreshes: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn membership_refreshes_run_on_the_interval_and_faster_while_converging() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), Driver::ClusterApi).await;
    bring_up_with(
        &ns,
        2,
        json!({}),
        json!({"membershipRefreshIntervalSeconds": 15}),
    )
    .await;
    wait_pool(&ns, "a pool of 2 to be Ready", 300, |p| {
        is(p, "Ready", "True") && ids(p).len() == 2
    })
    .await;
    let jobs: Api<Job> = ns.api();
    let mut seen = Default::default();

    // Converged: every 15 s (the minimum interval) after the last refresh.
    let gaps = next_refresh_gaps(&jobs, &mut seen, 2, 120).await;
    for g in &gaps {
        assert!(
            (14..=24).contains(g),
            "refreshes 15 s apart (plus jitter): {gaps:?}"
        );
    }

    // Not converged (fewer members than replicas) with a 60 s interval:
    // every 30 s.
    ns.api::<TerraformMachinePool>()
        .patch(
            "pool-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"membershipRefreshIntervalSeconds": 60, "variables": {"noop_missing_members": 1}}})),
        )
        .await
        .unwrap();
    wait_pool(&ns, "the pool to report 1 of 2 members", 240, |p| {
        ids(p).len() == 1 && p.status.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await;
    let gaps = next_refresh_gaps(&jobs, &mut seen, 1, 150).await;
    for g in &gaps {
        assert!(
            (29..=42).contains(g),
            "refreshes 30 s apart while converging: {gaps:?}"
        );
    }
}

#[tokio::test]
async fn a_retained_pool_keeps_its_state_and_a_new_pool_adopts_it() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), Driver::ClusterApi).await;
    bring_up_with(&ns, 2, json!({}), json!({"deletionPolicy": "Retain"})).await;
    let p = wait_pool(&ns, "a pool of 2 to be Ready", 300, |p| {
        is(p, "Ready", "True") && ids(p).len() == 2
    })
    .await;
    let uid = p.metadata.uid.clone().unwrap();
    let pools = ns.api::<TerraformMachinePool>();
    let secrets = ns.api::<Secret>();
    let jobs: Api<Job> = ns.api();

    // Deleting under Retain destroys nothing and keeps the state and records.
    pools
        .delete("pool-a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the retained pool to be gone", 120, || async {
        pools.get_opt("pool-a").await.ok()?.is_none().then_some(())
    })
    .await;
    let all = jobs.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(ops(&all, "destroy"), 0, "Retain runs no destroy");
    let retained = secrets
        .list(&ListParams::default().labels(&format!("captf.io/retained-from-uid={uid}")))
        .await
        .unwrap()
        .items;
    let names: Vec<String> = retained
        .iter()
        .filter_map(|s| s.metadata.name.clone())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("tfstate-"))
            && names.contains(&"captf-inputs-mp-pool-a".to_owned())
            && names.contains(&"captf-applied-mp-pool-a".to_owned()),
        "state and both records are kept: {names:?}"
    );
    assert!(
        retained.iter().all(|s| s
            .metadata
            .owner_references
            .iter()
            .flatten()
            .all(|r| r.uid != uid)),
        "nothing kept is owned by the deleted pool"
    );
    let events = ns
        .api::<k8s_openapi::api::events::v1::Event>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("InfrastructureRetained")),
        "the retain is announced"
    );

    // A new pool of the same name finds the retained state and holds.
    let mut again = p.clone();
    again.metadata = kube::api::ObjectMeta {
        name: p.metadata.name.clone(),
        labels: p.metadata.labels.clone(),
        owner_references: p.metadata.owner_references.clone(),
        ..Default::default()
    };
    again.status = None;
    again.spec.workspace.deletion_policy = None;
    pools.create(&PostParams::default(), &again).await.unwrap();
    let held = wait_pool(
        &ns,
        "the new pool to hold on the retained state",
        120,
        |p| condition(p, "StateReadable").is_some_and(|c| c.reason == "RetainedStateFound"),
    )
    .await;
    assert!(!is(&held, "Ready", "True"));
    let new_uid = held.metadata.uid.clone().unwrap();
    let new_jobs = jobs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|j| {
            j.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == new_uid)
        })
        .count();
    assert_eq!(new_jobs, 0, "no Job runs while the retained state is held");

    // Adopting it: the labels go and the pool becomes Ready on that state.
    pools
        .patch(
            "pool-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"adoptRetainedState": true}})),
        )
        .await
        .unwrap();
    wait_pool(&ns, "the adopting pool to be Ready", 300, |p| {
        is(p, "Ready", "True") && ids(p).len() == 2
    })
    .await;
    let still = secrets
        .list(&ListParams::default().labels("captf.io/retained-from-uid"))
        .await
        .unwrap()
        .items
        .len();
    assert_eq!(still, 0, "nothing is left labeled as retained");
    let adopted = support::expect_event(
        &ns,
        "RetainedStateAdopted",
        "Normal",
        "TerraformMachinePool",
        "pool-a",
    )
    .await;
    assert!(!adopted.is_empty());
}

/// The group's `desired` in the pool's state, as the last apply or a check
/// left it.
async fn group_size_in_state(ns: &captf_testenv::TestNamespace) -> Option<i64> {
    use std::io::Read;
    let suffix = captf_manager::names::state_suffix(
        captf_manager::names::WorkloadKind::MachinePool,
        ns.name(),
        "pool-a",
    );
    let secret = ns
        .api::<Secret>()
        .get(&captf_manager::names::state_secret(&suffix))
        .await
        .ok()?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(&secret.data?["tfstate"].0[..])
        .read_to_string(&mut text)
        .ok()?;
    let state: serde_json::Value = serde_json::from_str(&text).ok()?;
    state["resources"]
        .as_array()?
        .iter()
        .find(|r| r["name"] == "group")?["instances"][0]["attributes"]["input"]["value"]["desired"]
        .as_i64()
}

/// Drift on a pool, end to end: the group resized elsewhere (its state, as
/// the drift Job's refresh would read it, holds another size) is reported
/// by the next check and nothing is applied; with `Remediate` an apply puts
/// the group back to the pool's own size.
#[tokio::test]
async fn a_pool_reports_then_remediates_its_group_resized_elsewhere() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), Driver::ClusterApi).await;
    bring_up_with(
        &ns,
        2,
        json!({}),
        json!({"drift": {"intervalSeconds": 5, "action": "Report"},
               "membershipRefreshIntervalSeconds": 3600}),
    )
    .await;
    wait_pool(&ns, "a drift check to find no drift", 300, |p| {
        is(p, "Ready", "True")
            && condition(p, "DriftDetected").is_some_and(|c| c.reason == "NoDrift")
    })
    .await;
    assert_eq!(group_size_in_state(&ns).await, Some(2));

    support::tamper_with_resource(
        &ns,
        captf_manager::names::WorkloadKind::MachinePool,
        "pool-a",
        "group",
        |attributes| attributes["input"]["value"]["desired"] = json!(5),
    )
    .await;
    wait_pool(&ns, "the resize to be reported as drift", 300, |p| {
        condition(p, "DriftDetected")
            .is_some_and(|c| c.status == "True" && c.reason == "DriftReported")
    })
    .await;
    support::expect_event(
        &ns,
        "DriftDetected",
        "Warning",
        "TerraformMachinePool",
        "pool-a",
    )
    .await;
    assert_eq!(
        group_size_in_state(&ns).await,
        Some(5),
        "Report applies nothing"
    );

    ns.api::<TerraformMachinePool>()
        .patch(
            "pool-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"drift": {"action": "Remediate"}}})),
        )
        .await
        .unwrap();
    wait_pool(&ns, "the drift to be remediated", 300, |p| {
        is(p, "Ready", "True") && condition(p, "DriftDetected").is_some_and(|c| c.status == "False")
    })
    .await;
    for reason in ["DriftRemediationStarted", "DriftResolved"] {
        support::expect_event(&ns, reason, "Normal", "TerraformMachinePool", "pool-a").await;
    }
    assert_eq!(
        group_size_in_state(&ns).await,
        Some(2),
        "the group is back to the pool's size"
    );
}
