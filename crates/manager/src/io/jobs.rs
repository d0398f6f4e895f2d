//! Reading an object's Jobs and the pods of those that finished, and
//! marking a Job bookkept once its outcome is recorded.

use std::collections::BTreeMap;

use captf_api::names::{annotations, labels};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};

use crate::engine::history::Outcome;
use crate::jobs::observe::{ObservedJob, job_finished, needs_lock_evidence, observe};
use crate::names::{WorkloadKind, name_label};

/// The label selector of an object's Jobs.
pub fn jobs_selector(kind: WorkloadKind, name: &str) -> String {
    format!(
        "{}={},{}={}",
        labels::OWNER_KIND,
        kind.kind(),
        labels::OWNER_NAME,
        name_label(name)
    )
}

/// The newest pod of a Job (read live: pods are never cached).
pub async fn newest_pod(
    client: &kube::Client,
    namespace: &str,
    job: &str,
) -> Result<Option<Pod>, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    Ok(pods
        .list(&lp)
        .await?
        .items
        .into_iter()
        .max_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0)))
}

fn bookkept(job: &Job) -> bool {
    job.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(annotations::BOOKKEPT))
}

/// Observes every Job of the object (its state under `state_suffix`); pods
/// are read only for finished Jobs not bookkept yet (a bookkept Job costs no
/// API call), and the state lock only for a failed apply that left neither
/// pod nor result (lock evidence, `internals.md` §1.17).
pub async fn observe_jobs(
    jobs: &[Job],
    client: &kube::Client,
    namespace: &str,
    state_suffix: &str,
) -> Result<Vec<ObservedJob>, kube::Error> {
    let mut out = Vec::new();
    for job in jobs {
        let fresh = job_finished(job) && !bookkept(job);
        let pod = if fresh {
            newest_pod(
                client,
                namespace,
                job.metadata.name.as_deref().unwrap_or_default(),
            )
            .await?
        } else {
            None
        };
        let Some(mut o) = observe(job, pod.as_ref()) else {
            continue;
        };
        if let Some(created_with) = needs_lock_evidence(&o, job).filter(|_| fresh) {
            // A failed read proves nothing: the doubt stays.
            let now = crate::io::locks::lock_version(client, namespace, state_suffix).await;
            o.lock_untouched = now.is_ok_and(|v| v == created_with);
        }
        out.push(o);
    }
    Ok(out)
}

/// Marks a Job bookkept, recording the classification its pod told.
pub async fn mark_bookkept(
    client: &kube::Client,
    namespace: &str,
    job: &str,
    outcome: Outcome,
    plan_hash: Option<&str>,
) -> Result<(), kube::Error> {
    let api: Api<Job> = Api::namespaced(client.clone(), namespace);
    let mut marks = BTreeMap::from([(annotations::BOOKKEPT.to_owned(), "true".to_owned())]);
    if let Some(key) = outcome.annotation() {
        marks.insert(key.to_owned(), "true".to_owned());
    }
    if let Some(h) = plan_hash {
        marks.insert(annotations::PLAN_HASH.to_owned(), h.to_owned());
    }
    let patch = serde_json::json!({"metadata": {"annotations": marks}});
    api.patch(job, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}
