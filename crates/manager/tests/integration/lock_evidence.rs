//! Lock evidence (`internals.md` §4 scenario 15): a first apply Job killed
//! at its deadline with neither a pod nor a result. The namespace's
//! ResourceQuota admits no pod (as an exhausted quota does), so the Jobs
//! never get one. Each apply Job records the state lock Lease's version at
//! its creation (`captf.io/state-lock-version`); bookkeeping reads the
//! Lease again (one GET, only for such a Job) and compares:
//!
//! - untouched (no Lease then, none now): the runtime never locked the
//!   state, so it never ran; the object is not held and its next apply
//!   starts once pods are admitted;
//! - changed (the Lease appeared meanwhile, as a runtime's lock writes
//!   it): the apply may have run, so the object is held with
//!   `StateReadable=False/ApplyOutcomeUnknown` naming the Job and no second
//!   apply starts until the operator confirms.
//!
//! Controllers in this process, the real control plane, Cluster API's
//! controllers, the real node, the real runner and OpenTofu.

use crate::support;

use captf_api::TerraformCluster;
use captf_manager::names::{WorkloadKind, state_lock_lease, state_suffix};
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::clusters::{condition, create_cluster_with_spec, is_ready, with_cluster_module};
use support::*;

const LOCK_VERSION: &str = "captf.io/state-lock-version";

/// The apply Jobs of `name`, oldest first.
async fn applies(ns: &TestNamespace, name: &str) -> Vec<Job> {
    let selector = format!("captf.infrastructure.cluster.x-k8s.io/owner-name={name}");
    let mut jobs: Vec<Job> = ns
        .api::<Job>()
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|j| job_op(j) == "apply")
        .collect();
    jobs.sort_by_key(|j| j.metadata.creation_timestamp.clone().map(|t| t.0));
    jobs
}

fn annotation<'a>(job: &'a Job, key: &str) -> Option<&'a str> {
    job.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn deadline_exceeded(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "Failed"
                    && c.status == "True"
                    && c.reason.as_deref() == Some("DeadlineExceeded")
            })
        })
}

/// The first apply Job of `name`, once it exists.
async fn first_apply(ns: &TestNamespace, name: &str) -> Job {
    eventually("the first apply Job", 120, || async {
        applies(ns, name).await.into_iter().next()
    })
    .await
}

/// Waits until `name`'s first apply was killed at its deadline and
/// bookkept, and returns the object as that bookkeeping left it.
async fn after_the_deadline(ns: &TestNamespace, name: &str, job: &str) -> TerraformCluster {
    let tcs = ns.api::<TerraformCluster>();
    eventually("the deadline-killed apply bookkept", 120, || async {
        let j = ns.api::<Job>().get(job).await.ok()?;
        let bookkept = annotation(&j, "captf.io/bookkept").is_some();
        let tc = tcs.get(name).await.ok()?;
        let reported =
            condition(&tc, "ApplyJobSucceeded").is_some_and(|(_, r)| r == "JobDeadlineExceeded");
        (deadline_exceeded(&j) && bookkept && reported).then_some(tc)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_killed_apply_without_a_pod_is_held_only_when_the_lock_changed() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    with_cluster_module(env, &ns, tmp.path()).await;
    let module = module_ref("cluster", ns.name());
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}},
    }))
    .unwrap();
    let quotas = ns.api::<ResourceQuota>();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    // The harness runs no quota controller: the status it would compute is
    // written here, which is what quota admission checks.
    quotas
        .patch_status(
            "no-pods",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"hard": {"pods": "0"}, "used": {"pods": "0"}}})),
        )
        .await
        .unwrap();
    let _manager = start_manager(ns.client(), ns.name());
    let tcs = ns.api::<TerraformCluster>();
    let short = json!({"jobs": {"activeDeadlineSeconds": 20, "lockTimeoutSeconds": 5}});
    create_cluster_with_spec(&ns, "untouched", &module, short.clone()).await;
    create_cluster_with_spec(&ns, "touched", &module, short).await;

    // Both first applies start with no lock Lease: they record `absent`.
    let untouched = first_apply(&ns, "untouched").await;
    let touched = first_apply(&ns, "touched").await;
    for job in [&untouched, &touched] {
        assert_eq!(annotation(job, LOCK_VERSION), Some("absent"), "{job:?}");
    }
    // touched's lock is written while its Job is active, as a runtime's
    // lock would write it (then released: no holder).
    let lock = state_lock_lease(&state_suffix(WorkloadKind::Cluster, ns.name(), "touched"));
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": lock}})).unwrap();
    ns.api::<Lease>()
        .create(&PostParams::default(), &lease)
        .await
        .unwrap();

    let untouched_job = untouched.metadata.name.clone().unwrap();
    let touched_job = touched.metadata.name.clone().unwrap();
    let tc = after_the_deadline(&ns, "untouched", &untouched_job).await;
    assert_ne!(
        condition(&tc, "StateReadable").map(|(_, r)| r),
        Some("ApplyOutcomeUnknown".into()),
        "an untouched lock proves the apply never ran"
    );
    let tc = after_the_deadline(&ns, "touched", &touched_job).await;
    let readable = tc
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "StateReadable").cloned())
        .unwrap();
    assert_eq!(
        (readable.status.as_str(), readable.reason.as_str()),
        ("False", "ApplyOutcomeUnknown")
    );
    assert!(
        readable.message.contains(&touched_job),
        "{}",
        readable.message
    );

    // Pods are admitted again: untouched applies and becomes Ready; touched
    // stays held with its one apply.
    ns.api::<ResourceQuota>()
        .delete("no-pods", &DeleteParams::default())
        .await
        .unwrap();
    eventually("untouched Ready after a second apply", 300, || async {
        tcs.get("untouched").await.ok().filter(is_ready).map(drop)
    })
    .await;
    assert_eq!(applies(&ns, "untouched").await.len(), 2);
    let touched_applies = applies(&ns, "touched").await;
    assert_eq!(
        touched_applies.len(),
        1,
        "no second apply while the outcome is unknown"
    );
    let tc = tcs.get("touched").await.unwrap();
    assert_eq!(
        condition(&tc, "StateReadable"),
        Some(("False".into(), "ApplyOutcomeUnknown".into()))
    );

    // The operator confirms it created nothing: the hold ends and it applies.
    tcs.patch(
        "touched",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
            "captf.io/confirm-no-resources": touched_job}}})),
    )
    .await
    .unwrap();
    eventually("touched Ready after the confirmation", 300, || async {
        tcs.get("touched").await.ok().filter(is_ready).map(drop)
    })
    .await;
}
