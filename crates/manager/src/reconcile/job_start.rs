//! Starting a Job: a pure plan (the Job's name and attempt, the whole Job
//! object, its run lease, its per-run inputs and attempt record) and the
//! crash-safe execution of it: block-move, the pause handshake, the run
//! lease, the Job (adopted when it already runs), its per-run Secret, the
//! attempt record; `status.activeJob` goes in the end-of-pass patch.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use captf_api::common::ActiveJob;
use captf_api::names::{annotations, conditions, events, labels, reasons};
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::Api;

use super::pass::{START_DEFERRED_REQUEUE, event, set_block_move};
use super::start_gates::{GatedStart, Wait, cluster_gate, lease_wait};
use super::status::{Draft, time};
use super::workload::Workload;
use super::{Context, Error};
use crate::engine::decide::{Approval, Op};
use crate::engine::history::{self, JobRecord};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::io::leases::{Acquire, LeaseKind, LeaseRequest, acquire, release_if_held};
use crate::io::records::write_record;
use crate::io::start::{Started, create_job, ensure_run_secret};
use crate::jobs::args::{Guard, RunnerArgs, RunnerEvents};
use crate::jobs::build::{JobBlueprint, RestoreChunk, build};
use crate::leases::{
    backstop, cluster_lease_name, run_lease_name, takes_cluster_lease, waits_on_cluster_lease,
};
use crate::names::{job_name, state_suffix};
use crate::records::{InputsRecord, attempt_record_name, record_labels};

/// Everything a Job start needs beyond the object.
#[derive(Debug, Clone)]
pub struct StartRequest {
    pub op: Op,
    pub approval: Option<Approval>,
    pub remediation: bool,
    /// Rendered `main.tf.json` and `terraform.tfvars.json`.
    pub files: (String, String),
    /// The inputs hash the Job name binds and the Job carries.
    pub inputs_hash: String,
    pub tick: String,
    /// The module image this Job runs.
    pub image: String,
    /// The attempt record to write (apply only).
    pub attempt_record: Option<InputsRecord>,
    pub guard: Option<Guard>,
    pub plan_key_secret: Option<String>,
    pub cluster_name: String,
    pub jobs: captf_api::effective::EffectiveJobPolicy,
    pub credentials_secret: Option<String>,
    pub annotations: BTreeMap<String, String>,
    /// A stale state lock left by one of the object's own dead runner pods:
    /// the Job releases it (`--force-unlock`) before its work.
    pub force_unlock: Option<String>,
    /// Restore: the backup the Job pushes.
    pub restore: Option<crate::state::backups::RestoreTarget>,
    /// Warning events (reason, note) the start announces with its Job.
    pub warnings: Vec<(&'static str, String)>,
}

/// How a start went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartOutcome {
    Started {
        job: String,
    },
    /// Nothing started; look again after the delay.
    Waiting {
        requeue: Duration,
    },
}

/// A planned start: what to write, in the order [`execute_start`] writes it.
#[derive(Debug, Clone)]
pub struct PlannedStart {
    pub op: Op,
    pub job_name: String,
    pub attempt: u32,
    pub cluster_name: String,
    pub lease: LeaseRequest,
    pub job: Job,
    /// The per-run inputs Secret's files.
    pub files: (String, String),
    /// The attempt record (apply only), naming the Job.
    pub attempt_record: Option<InputsRecord>,
    /// User env names the Job builder dropped as reserved (the webhook
    /// refuses them; an object admitted before it did may still have them).
    pub dropped_env: Vec<String>,
    /// The cluster write lease a TerraformCluster's apply, destroy or
    /// restore takes after its run lease (the cluster operation gate).
    pub cluster_lease: Option<LeaseRequest>,
    /// The cluster write lease a machine's or pool's Job waits behind.
    pub gated_by: Option<String>,
    /// The approval this apply carries out, for its `PlanApproved` event.
    pub approved: Option<String>,
    /// Warning events (reason, note) announced with the Job.
    pub warnings: Vec<(&'static str, String)>,
}

/// What of the manager's configuration a start depends on.
#[derive(Debug, Clone)]
pub struct StartSettings<'a> {
    pub runner_image: &'a str,
    pub runner_events: RunnerEvents,
    /// `--cluster-operation-gate`.
    pub cluster_gate: bool,
}

/// Plans the start of `req` for `obj` (no client here).
pub fn plan_start<K: Workload>(
    obj: &K,
    records: &[JobRecord],
    req: StartRequest,
    config: &StartSettings<'_>,
) -> PlannedStart {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let attempt = history::next_attempt(records, req.op);
    let job = job_name(K::KIND, &name, req.op, attempt, &req.inputs_hash, &req.tick);
    let suffix = state_suffix(K::KIND, &ns, &name);
    let deadline = Duration::from_secs(req.jobs.active_deadline_seconds.max(1) as u64);
    let mut lease_labels = record_labels(K::KIND, &name);
    lease_labels.insert(labels::CLUSTER_NAME.to_owned(), req.cluster_name.clone());
    let lease = LeaseRequest {
        kind: LeaseKind::Run,
        name: run_lease_name(&suffix),
        namespace: ns.clone(),
        job: job.clone(),
        op: req.op,
        labels: lease_labels,
        duration: backstop(deadline),
    };
    let gate = config.cluster_gate && !req.cluster_name.is_empty();
    let cluster_lease_name = cluster_lease_name(&ns, &req.cluster_name);
    let cluster_lease =
        (gate && takes_cluster_lease(K::KIND, req.op, true)).then(|| LeaseRequest {
            kind: LeaseKind::Cluster,
            name: cluster_lease_name.clone(),
            ..lease.clone()
        });
    let gated_by = waits_on_cluster_lease(K::KIND, req.op, gate).then_some(cluster_lease_name);
    let request = job_request(obj, &req, &job, attempt, config);
    let built = build(&request);
    let approved = approval_note(&req, &job);
    let attempt_record = req.attempt_record.clone().map(|mut r| {
        r.meta.job = Some(job.clone());
        r
    });
    PlannedStart {
        op: req.op,
        job_name: job,
        attempt,
        cluster_name: req.cluster_name,
        lease,
        job: built.job,
        files: req.files,
        attempt_record,
        dropped_env: built.dropped_env,
        cluster_lease,
        gated_by,
        approved,
        warnings: req.warnings.clone(),
    }
}

/// What an approved apply says when it starts: the approved plan (and its
/// TerraformPlan) or the approved deletes, and the Job carrying it out.
fn approval_note(req: &StartRequest, job: &str) -> Option<String> {
    match req.approval.as_ref()? {
        Approval::ExpectPlan(plan) => {
            let object = req
                .annotations
                .get(annotations::APPROVED_PLAN)
                .map(|n| format!(" (TerraformPlan {n})"))
                .unwrap_or_default();
            Some(format!(
                "Job {job} applies the approved plan {plan}{object}"
            ))
        }
        Approval::AllowDeletes(hash) => Some(format!(
            "Job {job} applies the deletes approved by {}={hash}",
            annotations::APPROVE_DESTRUCTIVE_PLAN
        )),
    }
}

/// The whole Job of a start.
fn job_request<K: Workload>(
    obj: &K,
    req: &StartRequest,
    job: &str,
    attempt: u32,
    config: &StartSettings<'_>,
) -> JobBlueprint {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let mut job_annotations = req.annotations.clone();
    if req.remediation {
        job_annotations.insert(annotations::DRIFT_REMEDIATION.to_owned(), "true".to_owned());
    }
    let jobs = &req.jobs;
    JobBlueprint {
        kind: K::KIND,
        owner: obj.owner_reference(),
        namespace: ns.clone(),
        cluster_name: req.cluster_name.clone(),
        job_name: job.to_owned(),
        attempt,
        runner: runner_args(obj, req, job, config),
        runner_image: config.runner_image.to_owned(),
        image_pull_policy: obj.workspace().source.image_pull_policy.and_then(|p| {
            serde_json::to_value(p)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
        }),
        inputs_hash: Some(req.inputs_hash.clone()),
        restore: req.restore.as_ref().map(|t| {
            let chunks = t
                .chunk_names
                .iter()
                .map(|c| RestoreChunk { secret: c.clone() });
            (t.serial, chunks.collect())
        }),
        annotations: job_annotations,
        active_deadline_seconds: jobs.active_deadline_seconds,
        service_account: jobs
            .service_account_name
            .clone()
            .unwrap_or_else(|| crate::rbac::object_runner_name(&state_suffix(K::KIND, &ns, &name))),
        image_pull_secrets: jobs
            .image_pull_secrets
            .iter()
            .map(|s| s.name.clone())
            .collect(),
        resources: jobs.resources.clone(),
        env: jobs.env.clone(),
        security_context: jobs.security_context.clone(),
        pod_security_context: jobs.pod_security_context.clone(),
        credentials_secret: req.credentials_secret.clone(),
        plan_key_secret: req.plan_key_secret.clone(),
    }
}

/// What the runner is told: its op, image, state and the guards it keeps.
fn runner_args<K: Workload>(
    obj: &K,
    req: &StartRequest,
    job: &str,
    config: &StartSettings<'_>,
) -> RunnerArgs {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let state_labels = crate::names::state_labels(K::KIND, &name, &req.cluster_name);
    let quiet_events = config.runner_events.quiet_for(req.op);
    let event_object = quiet_events.map(|_| {
        (
            format!(
                "{}/{}/{}/{}/{}",
                K::api_version(&()),
                K::kind(&()),
                ns,
                name,
                obj.uid().unwrap_or_default()
            ),
            job.to_owned(),
        )
    });
    let jobs = &req.jobs;
    RunnerArgs {
        op: req.op,
        image: req.image.clone(),
        namespace: ns.clone(),
        state_suffix: state_suffix(K::KIND, &ns, &name),
        state_labels,
        lock_timeout: Duration::from_secs(jobs.lock_timeout_seconds.max(1) as u64),
        // The runner interrupts the runtime within the pod's grace period,
        // keeping 30 s for writing the state and releasing the lock.
        stop_timeout: Duration::from_secs(
            crate::jobs::build::TERMINATION_GRACE_SECONDS as u64 - 30,
        ),
        force_unlock: req.force_unlock.clone(),
        guard_deletes: req.guard.is_some(),
        guard: req.guard.clone(),
        restore: req
            .restore
            .as_ref()
            .map(|t| (t.chunk_names.len() as u32, t.resources)),
        plan_key: req.plan_key_secret.is_some(),
        event_object,
        quiet_events: quiet_events.unwrap_or(false),
    }
}

/// Executes a planned start in the crash-safe order. A lease held by
/// another Job, a pause seen in the handshake or an old namesake Job that
/// is still going away end it with `Waiting`.
pub async fn execute_start<K: Workload>(
    ctx: &Context,
    obj: &K,
    start: &PlannedStart,
    draft: &mut Draft,
    block_move: &mut bool,
    now: SystemTime,
) -> Result<StartOutcome, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let job = &start.job_name;
    set_block_move(ctx, obj, block_move, true).await?;
    // The pause handshake: `clusterctl move` pauses, then reads block-move.
    // With block-move now visible, a pause set meanwhile must stop the
    // start: the object is read after that write, not from its answer (a
    // pause landing right after the write is what the re-read is for).
    if live_gate(ctx, obj, &start.cluster_name).await? != LiveGate::Open {
        return Ok(StartOutcome::Waiting {
            requeue: START_DEFERRED_REQUEUE,
        });
    }
    let lease_version = match acquire(&ctx.client, &start.lease, now).await? {
        Acquire::Acquired { version } => version,
        Acquire::Held { holder } => {
            let message = format!("Job {holder} holds the run lease of this object");
            let requeue = lease_wait::<K>(ctx, draft, start.op, Wait::RunLease, message);
            return Ok(StartOutcome::Waiting { requeue });
        }
        Acquire::LostRace => {
            return Ok(StartOutcome::Waiting {
                requeue: START_DEFERRED_REQUEUE,
            });
        }
    };
    let gated = GatedStart {
        op: start.op,
        job,
        run_lease: &start.lease.name,
        run_lease_version: &lease_version,
        cluster_name: &start.cluster_name,
        cluster_lease: start.cluster_lease.as_ref(),
        gated_by: start.gated_by.as_deref(),
    };
    if let Some(requeue) = cluster_gate(ctx, obj, &gated, draft, now).await? {
        return Ok(StartOutcome::Waiting { requeue });
    }
    let job_object = with_lease_version(&start.job, &lease_version);
    let job_uid = match create_job(&ctx.client, &job_object, &obj.uid().unwrap_or_default()).await {
        Ok(Started::Created { uid }) => {
            announce_created(ctx, obj, start).await;
            uid
        }
        Ok(Started::Adopted { uid }) => uid,
        Ok(Started::Deferred { reason }) => {
            tracing::info!(job, reason, "Job start deferred");
            return Ok(StartOutcome::Waiting {
                requeue: START_DEFERRED_REQUEUE,
            });
        }
        Err(kube::Error::Api(s)) if s.code >= 400 && s.code < 500 => {
            // A rejected create proves no Job exists: the leases go at once.
            let version = Some(lease_version.as_str());
            release_if_held(&ctx.client, &ns, &start.lease.name, job, version).await?;
            if let Some(cluster) = &start.cluster_lease {
                release_if_held(&ctx.client, &ns, &cluster.name, job, None).await?;
            }
            return Err(Error::Invalid(format!(
                "Job {job} was rejected: {}",
                s.message
            )));
        }
        Err(e) => return Err(e.into()),
    };
    write_run_inputs(ctx, obj, start, &job_uid).await?;
    record_running(draft, start, now);
    Ok(StartOutcome::Started { job: job.clone() })
}

/// `job` carrying the run lease's resourceVersion as its start took it
/// (`captf.io/run-lease-version`), for bookkeeping's one-request release.
fn with_lease_version(job: &Job, version: &str) -> Job {
    let mut job = job.clone();
    if !version.is_empty() {
        job.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                annotations::RUN_LEASE_VERSION.to_owned(),
                version.to_owned(),
            );
    }
    job
}

/// The events of a Job this pass created: its creation, an approval it
/// carries out, the start's warnings and any reserved env it dropped.
async fn announce_created<K: Workload>(ctx: &Context, obj: &K, start: &PlannedStart) {
    let (job, op) = (&start.job_name, start.op.as_str());
    if ctx.config.runner_events.announces_creation(start.op) {
        let note = format!("Job {job} created for {op}");
        event(ctx, obj, false, events::JOB_CREATED, op, note).await;
    }
    if let Some(note) = &start.approved {
        event(ctx, obj, false, events::PLAN_APPROVED, op, note.clone()).await;
        // An approved plan (or approved deletes) is carried out.
        ctx.metrics.plan_transition(K::KIND.kind(), "approved");
    }
    for (reason, note) in &start.warnings {
        event(ctx, obj, true, reason, op, note.clone()).await;
    }
    if !start.dropped_env.is_empty() {
        let note = format!(
            "Job {job} runs without the reserved env names {} of spec.jobs.env",
            start.dropped_env.join(", ")
        );
        event(ctx, obj, true, events::RESERVED_ENV_DROPPED, op, note).await;
    }
}

/// The Job's per-run inputs Secret (owned by the Job, so written once it
/// exists) and, for an apply, its attempt record.
async fn write_run_inputs<K: Workload>(
    ctx: &Context,
    obj: &K,
    start: &PlannedStart,
    job_uid: &str,
) -> Result<(), Error> {
    let files = [
        (crate::records::MAIN_FILE, start.files.0.as_str()),
        (crate::records::VALUES_FILE, start.files.1.as_str()),
    ];
    let ns = obj.namespace().unwrap_or_default();
    // An apply's per-run Secret reads back as its attempt record, for a
    // promotion after a crash before the record below was written.
    let record_annotations = start
        .attempt_record
        .as_ref()
        .map(InputsRecord::run_annotations)
        .unwrap_or_default();
    ensure_run_secret(
        &ctx.client,
        &ns,
        &start.job_name,
        job_uid,
        &files,
        record_annotations,
    )
    .await?;
    if let Some(record) = &start.attempt_record {
        let name = obj.name_any();
        write_record(
            &ctx.client,
            &obj.namespace().unwrap_or_default(),
            &attempt_record_name(K::KIND, &name),
            record,
            &obj.owner_reference(),
            record_labels(K::KIND, &name),
        )
        .await?;
    }
    Ok(())
}

/// The status of a started Job: `activeJob`, and `ApplyJobSucceeded`
/// saying it runs (keeping True once an apply succeeded).
fn record_running(draft: &mut Draft, start: &PlannedStart, now: SystemTime) {
    draft.field(
        "activeJob",
        ActiveJob {
            name: start.job_name.clone(),
            operation: start.op,
            attempt: start.attempt as i32,
            start_time: Some(time(now)),
        },
    );
    if matches!(start.op, Op::Apply | Op::Plan | Op::Destroy) {
        let applied = draft
            .get(conditions::APPLY_JOB_SUCCEEDED)
            .is_some_and(|c| c.status == "True");
        let v = ConditionValue {
            status: if applied {
                ConditionStatus::True
            } else {
                ConditionStatus::Unknown
            },
            reason: if applied {
                reasons::APPLY_SUCCEEDED
            } else {
                reasons::NO_APPLY_YET
            },
            message: format!("Job {} is running", start.job_name),
        };
        draft.set(conditions::APPLY_JOB_SUCCEEDED, &v);
    }
}

/// What the live read of the object and its Cluster says of a start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LiveGate {
    Open,
    /// The object or its Cluster is paused now.
    Paused,
    /// The pass read a cached object older than the manager's own last
    /// status write (see [`trails_live`]).
    Stale,
}

/// Reads the object and its Cluster live, after the block-move write: is
/// either paused now, and did the pass decide on an object that trails?
async fn live_gate<K: Workload>(ctx: &Context, obj: &K, cluster: &str) -> Result<LiveGate, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    let live = api.get(&obj.name_any()).await?;
    if live.annotations().contains_key(annotations::PAUSED) {
        return Ok(LiveGate::Paused);
    }
    let active = |o: &K| {
        o.workspace_status()?
            .active_job
            .as_ref()
            .map(|a| a.name.clone())
    };
    if let Some(job) = trails_live(active(obj).as_deref(), active(&live).as_deref()) {
        tracing::info!(
            job,
            "the cached object trails the live one, which names a running Job; the start waits for the newer object"
        );
        return Ok(LiveGate::Stale);
    }
    let clusters: Api<kube::api::DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &ns, &crate::capi::cluster_resource());
    let paused = clusters
        .get_opt(cluster)
        .await?
        .and_then(|c| crate::capi::Cluster::from_dynamic(&c).ok())
        .is_some_and(|c| c.paused());
    Ok(if paused {
        LiveGate::Paused
    } else {
        LiveGate::Open
    })
}

/// The running Job the live object names that the cached one the pass
/// decided on does not: a start the manager made and recorded, seen by a
/// pass whose cache has not caught up with that status write. Starting
/// again would re-create that Job's name if it was deleted meanwhile (it
/// vanished: the newer object's pass records that) or start a second Job
/// beside it. A pass that bookkept that Job sees it named in both: it is
/// not stale.
fn trails_live<'a>(cached: Option<&str>, live: Option<&'a str>) -> Option<&'a str> {
    live.filter(|l| cached != Some(*l))
}

#[cfg(test)]
#[path = "job_start_tests.rs"]
mod tests;
