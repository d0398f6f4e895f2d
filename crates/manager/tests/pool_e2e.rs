//! A TerraformMachinePool end to end on the noop modules: the controllers
//! in this process, the real control plane, the local executor running the
//! real runner and OpenTofu. The test plays the Cluster API controllers
//! (owner references, the bootstrap data Secret).

mod support;

use std::time::Duration;

use captf_api::{TerraformCluster, TerraformMachinePool};
use captf_manager::capi;
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::*;

fn dynamic(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

async fn create(ns: &TestNamespace, ar: &kube::api::ApiResource, obj: Value) -> DynamicObject {
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), ar);
    api.create(&PostParams::default(), &dynamic(obj))
        .await
        .unwrap()
}

fn plain_secret(name: &str, data: &[(&str, &str)], labels: Value) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "stringData": data.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect::<serde_json::Map<_, _>>(),
    }))
    .unwrap()
}

/// A provisioned cluster and a MachinePool of `replicas` with its pool.
async fn bring_up(ns: &TestNamespace, replicas: i32, mp_annotations: Value) {
    bring_up_with(ns, replicas, mp_annotations, json!({})).await;
}

/// [`bring_up`] with more fields in the pool's spec.
async fn bring_up_with(ns: &TestNamespace, replicas: i32, mp_annotations: Value, pool_spec: Value) {
    let secrets = ns.api::<Secret>();
    secrets
        .create(
            &PostParams::default(),
            &plain_secret("creds", &[("token", "x")], json!({})),
        )
        .await
        .unwrap();
    secrets
        .create(
            &PostParams::default(),
            &plain_secret(
                "pool-bootstrap",
                &[("value", "#cloud-config\n"), ("format", "cloud-config")],
                json!({"cluster.x-k8s.io/cluster-name": "prod"}),
            ),
        )
        .await
        .unwrap();
    let cluster = create(ns, &capi::cluster_resource(), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "prod"},
        "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": "prod"}},
    }))
    .await;
    let tc: TerraformCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "metadata": {"name": "prod", "labels": {"cluster.x-k8s.io/cluster-name": "prod"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "prod", "uid": cluster.metadata.uid.clone().unwrap()}]},
        "spec": {"source": {"image": module_ref("cluster", ns.name())}, "identityRef": {"kind": "Secret", "name": "creds"}, "drift": {"intervalSeconds": 0}},
    }))
    .unwrap();
    ns.api::<TerraformCluster>()
        .create(&PostParams::default(), &tc)
        .await
        .unwrap();
    let mp = create(ns, &capi::machine_pool_resource(), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": "pool-a", "labels": {"cluster.x-k8s.io/cluster-name": "prod"}, "annotations": mp_annotations},
        "spec": {
            "clusterName": "prod",
            "replicas": replicas,
            "template": {"spec": {
                "clusterName": "prod",
                "bootstrap": {"dataSecretName": "pool-bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachinePool", "name": "pool-a"},
                "version": "v1.37.2",
            }},
        },
    }))
    .await;
    let mut spec = json!({"source": {"image": module_ref("machinepool", ns.name())}, "identityRef": {"kind": "Secret", "name": "creds"}, "membershipRefreshIntervalSeconds": 15});
    for (k, v) in pool_spec.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    let pool: TerraformMachinePool = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
        "metadata": {"name": "pool-a", "labels": {"cluster.x-k8s.io/cluster-name": "prod"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "pool-a", "uid": mp.metadata.uid.clone().unwrap()}]},
        "spec": spec,
    }))
    .unwrap();
    ns.api::<TerraformMachinePool>()
        .create(&PostParams::default(), &pool)
        .await
        .unwrap();
}

fn condition<'a>(p: &'a TerraformMachinePool, type_: &str) -> Option<&'a Condition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn is(p: &TerraformMachinePool, type_: &str, status: &str) -> bool {
    condition(p, type_).is_some_and(|c| c.status == status)
}

async fn wait_pool(
    ns: &TestNamespace,
    what: &str,
    secs: u64,
    check: impl Fn(&TerraformMachinePool) -> bool,
) -> TerraformMachinePool {
    let api = ns.api::<TerraformMachinePool>();
    let last = std::sync::Mutex::new(String::new());
    eventually(what, secs, || async {
        let p = api.get("pool-a").await.ok()?;
        let seen = format!(
            "{:?} ids={:?} replicas={:?}",
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .map(|cs| cs
                    .iter()
                    .map(|c| format!("{}={}/{}: {}", c.type_, c.status, c.reason, c.message))
                    .collect::<Vec<_>>()),
            p.spec.provider_id_list,
            p.status.as_ref().and_then(|s| s.replicas)
        );
        let mut l = last.lock().unwrap();
        if *l != seen {
            eprintln!("pool-a: {seen}");
            *l = seen;
        }
        check(&p).then_some(p)
    })
    .await
}

fn ops(jobs: &[Job], op: &str) -> usize {
    jobs.iter()
        .filter(|j| {
            j.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("captf.infrastructure.cluster.x-k8s.io/op"))
                .map(String::as_str)
                == Some(op)
        })
        .filter(|j| {
            j.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("captf.infrastructure.cluster.x-k8s.io/owner-kind"))
                .map(String::as_str)
                == Some("TerraformMachinePool")
        })
        .count()
}

fn names(jobs: &[Job], op: &str) -> Vec<String> {
    jobs.iter()
        .filter(|j| ops(std::slice::from_ref(j), op) == 1)
        .filter_map(|j| j.metadata.name.clone())
        .collect()
}

async fn scale(ns: &TestNamespace, replicas: i32) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi::machine_pool_resource());
    api.patch(
        "pool-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap();
}

fn ids(p: &TerraformMachinePool) -> Vec<String> {
    p.spec.provider_id_list.clone().unwrap_or_default()
}

async fn setup(env: &'static TestEnv, ns: &TestNamespace, tmp: &std::path::Path) -> Manager {
    env.executor()
        .insert(manager_ref(ns.name()), manager_image(tmp));
    insert_module(
        env,
        &module_ref("cluster", ns.name()),
        module_image(tmp, "cluster", "v1", &[]),
    );
    insert_module(
        env,
        &module_ref("machinepool", ns.name()),
        module_image(tmp, "machinepool", "v1", &[]),
    );
    install_runner_role(&ns.client()).await;
    start_manager(ns.client(), ns.name())
}

#[tokio::test]
async fn a_pool_scales_rotates_and_goes_away_cleanly() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let manager = setup(env, &ns, tmp.path()).await;
    bring_up(&ns, 3, json!({})).await;

    let p = wait_pool(&ns, "a pool of 3 to be Ready", 300, |p| {
        is(p, "Ready", "True") && ids(p).len() == 3
    })
    .await;
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

    // Membership refresh Jobs run (after every apply, then on the interval).
    let refreshes = ops(
        &jobs.list(&ListParams::default()).await.unwrap().items,
        "refresh",
    );
    assert!(refreshes >= 1, "a refresh follows the applies");

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
    let _manager = setup(env, &ns, tmp.path()).await;
    // The MachinePool asks for 1 but the autoscaler bounds say at least 2:
    // the module clamps and the count it reports goes back to the MachinePool.
    bring_up(
        &ns,
        1,
        json!({
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "2",
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5",
        }),
    )
    .await;
    let p = wait_pool(&ns, "autoscaling to be active", 300, |p| {
        is(p, "AutoscalingActive", "True") && is(p, "Ready", "True")
    })
    .await;
    let observed = p.status.unwrap().replicas.unwrap();
    let mps: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi::machine_pool_resource());
    eventually("the count to be written back", 60, || async {
        let mp = mps.get("pool-a").await.ok()?;
        (mp.data["spec"]["replicas"].as_i64()? == i64::from(observed)).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(10)).await;
}

#[tokio::test]
async fn a_failed_reapply_turns_ready_false_naming_the_job() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path()).await;
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
    let _manager = setup(env, &ns, tmp.path()).await;
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
    let _manager = setup(env, &ns, tmp.path()).await;
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
    let _manager = setup(env, &ns, tmp.path()).await;
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
}

/// Secrets, Leases and Jobs the provider made that are still in `ns`.
async fn leftovers(ns: &TestNamespace) -> Option<(usize, Vec<String>, usize)> {
    let jobs = ns
        .api::<Job>()
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .len();
    let secrets: Vec<String> = ns
        .api::<Secret>()
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .filter(|n| n.starts_with("captf-") || n.starts_with("tfstate-"))
        .collect();
    let leases = ns
        .api::<Lease>()
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .len();
    Some((jobs, secrets, leases))
}

#[tokio::test]
async fn a_cluster_deleted_first_waits_for_its_pool_which_destroys_without_the_cluster() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path()).await;
    bring_up(&ns, 1, json!({})).await;
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
    let jobs: Api<Job> = ns.api();
    let destroys = jobs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|j| {
            j.metadata.labels.as_ref().is_some_and(|l| {
                l.get("captf.infrastructure.cluster.x-k8s.io/op")
                    .map(String::as_str)
                    == Some("destroy")
            })
        })
        .count();
    assert_eq!(destroys, 0, "nothing is destroyed while the pool exists");
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
