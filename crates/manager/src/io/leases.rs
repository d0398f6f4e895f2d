//! Taking and giving back run and cluster leases against the apiserver.
//! Every decision is `crate::leases::lease_verdict`; this module only reads
//! live (never from a cache), creates first (an absent lease is the usual
//! case and a create is atomic), replaces with the resourceVersion it read,
//! and treats a conflict as a lost race.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use captf_api::names::{annotations, labels};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, Preconditions};

use crate::engine::decide::Op;
use crate::jobs::observe::job_finished;
use crate::leases::{HolderJob, LeaseVerdict, LeaseView, lease_verdict};

/// Which lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseKind {
    Run,
    Cluster,
}

impl LeaseKind {
    fn label(self) -> &'static str {
        match self {
            LeaseKind::Run => "run",
            LeaseKind::Cluster => "cluster",
        }
    }
}

/// A lease to take for a Job about to be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRequest {
    pub kind: LeaseKind,
    pub name: String,
    pub namespace: String,
    /// The Job's (deterministic) name: the lease's holder.
    pub job: String,
    pub op: Op,
    /// Owner and cluster labels, as the object's other records carry them.
    pub labels: BTreeMap<String, String>,
    /// The backstop after which the lease is free whatever its holder.
    pub duration: Duration,
}

/// The outcome of an attempt to take a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// Taken; `version` is the lease's resourceVersion as written.
    Acquired { version: String },
    /// Another live Job holds it.
    Held { holder: String },
    /// Another writer got there between our read and our write.
    LostRace,
}

fn timestamp(t: SystemTime) -> Timestamp {
    Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn view(lease: &Lease) -> LeaseView {
    let spec = lease.spec.as_ref();
    let acquired = lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::LEASE_ACQUIRED_AT))
        .and_then(|v| v.parse::<Timestamp>().ok())
        .or_else(|| spec.and_then(|s| s.acquire_time.as_ref()).map(|t| t.0))
        .map_or(SystemTime::UNIX_EPOCH, SystemTime::from);
    LeaseView {
        holder: spec.and_then(|s| s.holder_identity.clone()),
        acquired_at: acquired,
        duration: Duration::from_secs(
            spec.and_then(|s| s.lease_duration_seconds)
                .unwrap_or(0)
                .max(0) as u64,
        ),
    }
}

/// The live state of a holder Job.
async fn holder_job(jobs: &Api<Job>, name: &str) -> Result<HolderJob, kube::Error> {
    let Some(job) = jobs.get_opt(name).await? else {
        return Ok(HolderJob::Absent);
    };
    Ok(if job_finished(&job) {
        HolderJob::Finished
    } else {
        HolderJob::Running
    })
}

fn desired(req: &LeaseRequest, now: SystemTime, existing: Option<&Lease>) -> Lease {
    let mut labels = req.labels.clone();
    labels.insert(labels::LEASE.to_owned(), req.kind.label().to_owned());
    labels.insert(labels::MANAGED.to_owned(), "true".to_owned());
    let at = timestamp(now);
    Lease {
        metadata: ObjectMeta {
            name: Some(req.name.clone()),
            namespace: Some(req.namespace.clone()),
            resource_version: existing.and_then(|l| l.metadata.resource_version.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                (annotations::LEASE_OP.to_owned(), req.op.as_str().to_owned()),
                (annotations::LEASE_ACQUIRED_AT.to_owned(), at.to_string()),
            ])),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(req.job.clone()),
            acquire_time: Some(MicroTime(at)),
            renew_time: Some(MicroTime(at)),
            lease_duration_seconds: Some(req.duration.as_secs().min(i32::MAX as u64) as i32),
            ..Default::default()
        }),
    }
}

fn acquired(lease: &Lease) -> Acquire {
    Acquire::Acquired {
        version: lease.metadata.resource_version.clone().unwrap_or_default(),
    }
}

fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Takes (or refreshes) the lease for `req.job`.
pub async fn acquire(
    client: &kube::Client,
    req: &LeaseRequest,
    now: SystemTime,
) -> Result<Acquire, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &req.namespace);
    let jobs: Api<Job> = Api::namespaced(client.clone(), &req.namespace);
    // A lease is given back when its Job is bookkept, so a start usually
    // finds none: the create comes first, the same write `lease_verdict`
    // asks of an absent lease, and only a lease that exists is read.
    match leases
        .create(&PostParams::default(), &desired(req, now, None))
        .await
    {
        Ok(lease) => return Ok(acquired(&lease)),
        Err(e) if conflict(&e) => {}
        Err(e) => return Err(e),
    }
    let existing = leases.get_opt(&req.name).await?;
    let current = existing.as_ref().map(view);
    let holder_state = match current.as_ref().and_then(|v| v.holder.as_deref()) {
        Some(holder) if holder != req.job => holder_job(&jobs, holder).await?,
        _ => HolderJob::Absent,
    };
    let write = match lease_verdict(current.as_ref(), &req.job, holder_state, now) {
        LeaseVerdict::Held { holder } => return Ok(Acquire::Held { holder }),
        LeaseVerdict::Create => {
            leases
                .create(&PostParams::default(), &desired(req, now, None))
                .await
        }
        LeaseVerdict::Refresh | LeaseVerdict::TakeOver => {
            leases
                .replace(
                    &req.name,
                    &PostParams::default(),
                    &desired(req, now, existing.as_ref()),
                )
                .await
        }
    };
    match write {
        Ok(lease) => Ok(acquired(&lease)),
        Err(e) if conflict(&e) => Ok(Acquire::LostRace),
        Err(e) => Err(e),
    }
}

/// Gives the lease back if `job` still holds it; a lease another Job took
/// meanwhile survives (the delete is conditioned on what was read). With
/// `version`, the resourceVersion the lease had when `job`'s start took it,
/// the delete is conditioned on that alone and nothing is read unless the
/// lease was written since.
pub async fn release_if_held(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    job: &str,
    version: Option<&str>,
) -> Result<bool, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    if let Some(version) = version.filter(|v| !v.is_empty()) {
        match delete_at(&leases, name, None, Some(version)).await? {
            Deleted::Yes => return Ok(true),
            Deleted::Gone => return Ok(false),
            Deleted::Changed => {}
        }
    }
    let Some(lease) = leases.get_opt(name).await? else {
        return Ok(false);
    };
    if view(&lease).holder.as_deref() != Some(job) {
        return Ok(false);
    }
    let uid = lease.metadata.uid.as_deref();
    let read = lease.metadata.resource_version.as_deref();
    Ok(delete_at(&leases, name, uid, read).await? == Deleted::Yes)
}

#[derive(Debug, PartialEq, Eq)]
enum Deleted {
    Yes,
    Gone,
    /// The preconditions no longer hold.
    Changed,
}

async fn delete_at(
    leases: &Api<Lease>,
    name: &str,
    uid: Option<&str>,
    version: Option<&str>,
) -> Result<Deleted, kube::Error> {
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: uid.map(str::to_owned),
            resource_version: version.map(str::to_owned),
        }),
        ..Default::default()
    };
    match leases.delete(name, &dp).await {
        Ok(_) => Ok(Deleted::Yes),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Deleted::Gone),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Deleted::Changed),
        Err(e) => Err(e),
    }
}

/// The Job holding lease `name` while it is live (not free by the rules of
/// `lease_verdict`): one GET of the lease, and one of its holder Job.
pub async fn live_holder(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    now: SystemTime,
) -> Result<Option<String>, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    let Some(lease) = leases.get_opt(name).await? else {
        return Ok(None);
    };
    live(&jobs, &lease, now).await
}

async fn live(
    jobs: &Api<Job>,
    lease: &Lease,
    now: SystemTime,
) -> Result<Option<String>, kube::Error> {
    let current = view(lease);
    let Some(holder) = current.holder.clone() else {
        return Ok(None);
    };
    let state = holder_job(jobs, &holder).await?;
    // Asked as nobody: any live holder holds it.
    Ok(match lease_verdict(Some(&current), "", state, now) {
        LeaseVerdict::Held { holder } => Some(holder),
        _ => None,
    })
}

/// The live run leases of a cluster's machines and pools taken for a
/// mutating op (apply, destroy, restore): one LIST by label, and one GET of
/// each holder Job.
pub async fn live_member_operations(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    now: SystemTime,
) -> Result<Vec<String>, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{}=run,{}={cluster}", labels::LEASE, labels::CLUSTER_NAME);
    let listed = leases
        .list(&kube::api::ListParams::default().labels(&selector))
        .await?;
    let mut holders = Vec::new();
    for lease in &listed.items {
        let meta = &lease.metadata;
        let kind = meta.labels.as_ref().and_then(|l| l.get(labels::OWNER_KIND));
        let op = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(annotations::LEASE_OP));
        let member = kind.is_some_and(|k| k != captf_api::names::kinds::TERRAFORM_CLUSTER);
        let mutating = op.is_some_and(|o| matches!(o.as_str(), "apply" | "destroy" | "restore"));
        if member
            && mutating
            && let Some(holder) = live(&jobs, lease, now).await?
        {
            holders.push(holder);
        }
    }
    holders.sort();
    Ok(holders)
}
