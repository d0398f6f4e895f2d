//! The stages every Job-running kind shares: loading its Jobs, bookkeeping
//! of the finished ones, reading state, the crash-safe Job start, and the
//! end-of-pass status patch followed by the bookkept marks.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use captf_api::common::{ActiveJob, DriftSummary, LastRun, RunError, RunStep};
use captf_api::names::{annotations, conditions, events, labels, reasons};
use captf_contract::Role;
use captf_contract::outputs::{RoleOutputs, RootOutputs, decode};
use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::status::{Draft, time};
use super::workload::Workload;
use super::{Context, Error};
use crate::engine::decide::{Approval, Op};
use crate::engine::history::{self, JobRecord, Outcome};
use crate::engine::job_conditions::{ConditionValue, FinishedRun};
use crate::io::jobs::{jobs_selector, mark_bookkept, observe_jobs};
use crate::io::leases::{Acquire, LeaseKind, LeaseRequest, acquire, release};
use crate::io::records::{read_record, write_record};
use crate::io::start::{Started, create_job, ensure_run_secret};
use crate::io::state::{adopt, read_state};
use crate::jobs::args::{Guard, RunnerArgs};
use crate::jobs::build::{JobRequest, build};
use crate::jobs::observe::ObservedJob;
use crate::jobs::recovery::{STUCK_AFTER, is_stuck};
use crate::leases::{backstop, run_lease_name};
use crate::names::{job_name, state_suffix};
use crate::records::{
    InputsRecord, applied_record_name, attempt_record_name, record_labels, run_secret_name,
};
use crate::state::reader::{StateError, StateSummary};

/// Requeue when a start was deferred (an old namesake Job goes away).
pub const START_DEFERRED_REQUEUE: Duration = Duration::from_secs(5);
/// Requeue while a lease is held by another Job.
pub const LEASE_REQUEUE: Duration = Duration::from_secs(15);

/// The object's Jobs, as controlled by it.
pub struct Loaded {
    pub jobs: Vec<Job>,
    pub observed: Vec<ObservedJob>,
}

impl Loaded {
    pub fn job(&self, name: &str) -> Option<&Job> {
        self.jobs
            .iter()
            .find(|j| j.metadata.name.as_deref() == Some(name))
    }

    pub fn annotation(&self, job: &str, key: &str) -> Option<&str> {
        self.job(job)?
            .metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    pub fn records(&self) -> Vec<JobRecord> {
        self.observed.iter().map(|o| o.record.clone()).collect()
    }

    /// The newest finished Job among `ops`.
    pub fn newest_finished(&self, ops: &[Op]) -> Option<&ObservedJob> {
        self.observed
            .iter()
            .filter(|o| ops.contains(&o.record.op) && o.record.finished.is_some())
            .max_by_key(|o| (o.record.finished, o.record.created))
    }

    /// The newest apply Job for `inputs_hash` (running or finished).
    pub fn newest_apply_for(&self, inputs_hash: &str) -> Option<&ObservedJob> {
        self.observed
            .iter()
            .filter(|o| o.record.op == Op::Apply)
            .filter(|o| {
                self.annotation(&o.record.name, annotations::INPUTS_HASH) == Some(inputs_hash)
            })
            .max_by_key(|o| o.record.created)
    }
}

/// Lists the object's Jobs (those it controls by UID) and observes them.
pub async fn load_jobs<K: Workload>(ctx: &Context, obj: &K) -> Result<Loaded, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let uid = obj.uid().unwrap_or_default();
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let lp = ListParams::default().labels(&jobs_selector(K::KIND, &obj.name_any()));
    let jobs: Vec<Job> = api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|j| {
            j.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.controller == Some(true) && r.uid == uid)
        })
        .collect();
    let observed = observe_jobs(&jobs, &ctx.client, &ns).await?;
    Ok(Loaded { jobs, observed })
}

/// A Job to mark bookkept once the status patch landed, with the events
/// its bookkeeping announces (published only after the patch, so a lost
/// patch does not announce them twice).
#[derive(Debug, Clone)]
pub struct Mark {
    pub job: String,
    pub outcome: Outcome,
    pub plan_hash: Option<String>,
    pub events: Vec<PendingEvent>,
    pub counted: Option<CountedJob>,
}

/// What `captf_jobs_total` and friends count of a finished Job (counted
/// with its mark, once the status patch landed).
#[derive(Debug, Clone)]
pub struct CountedJob {
    pub op: &'static str,
    pub result: &'static str,
    pub duration: Duration,
    /// Runner error class and failed step, when the runner reported one.
    pub error: Option<(&'static str, Option<String>)>,
}

impl CountedJob {
    fn of(o: &ObservedJob) -> Option<CountedJob> {
        let result = match o.record.outcome {
            Outcome::Running => return None,
            Outcome::Succeeded => "succeeded",
            Outcome::Failed | Outcome::PlanUnreadable => "failed",
            Outcome::DeadlineExceeded => "deadline",
            Outcome::Interrupted => "interrupted",
            Outcome::Blocked => "blocked",
            Outcome::PlanChanged => "plan_changed",
        };
        let error = o.result.as_ref().and_then(|r| r.error.as_ref());
        Some(CountedJob {
            op: o.record.op.as_str(),
            result,
            duration: o
                .record
                .finished
                .and_then(|f| f.duration_since(o.record.created).ok())
                .unwrap_or_default(),
            error: error.map(|e| {
                (
                    crate::jobs::observe::error_kind_name(&e.kind),
                    e.step.clone(),
                )
            }),
        })
    }
}

/// An event to publish later.
#[derive(Debug, Clone)]
pub struct PendingEvent {
    pub warning: bool,
    pub reason: String,
    pub action: String,
    pub note: String,
}

impl PendingEvent {
    fn new(warning: bool, reason: &str, action: &str, note: String) -> Self {
        PendingEvent {
            warning,
            reason: reason.to_owned(),
            action: action.to_owned(),
            note,
        }
    }
}

/// What bookkeeping learned in this pass.
#[derive(Debug, Default)]
pub struct Booked {
    pub marks: Vec<Mark>,
    /// Finished Jobs read for the first time, oldest first.
    pub newly: Vec<ObservedJob>,
    pub active: Option<JobRecord>,
}

fn finished_run(o: &ObservedJob) -> FinishedRun<'_> {
    let error = o.result.as_ref().and_then(|r| r.error.as_ref());
    FinishedRun {
        job: &o.record.name,
        op: o.record.op,
        outcome: o.record.outcome,
        error_kind: error.map(|e| crate::jobs::observe::error_kind_name(&e.kind)),
        failed_step: error.and_then(|e| e.step.as_deref()),
        first_resource: None,
        image_pull_failed: o.image_pull_failed,
    }
}

fn last_run(o: &ObservedJob) -> LastRun {
    let r = o.result.as_ref();
    LastRun {
        job: o.record.name.clone(),
        operation: o.record.op,
        steps: r.map(|r| {
            r.steps
                .iter()
                .map(|s| RunStep {
                    name: s.name.clone(),
                    exit_code: s.exit,
                    duration_milliseconds: Some((s.seconds * 1000.0) as i64),
                })
                .collect()
        }),
        error: r.and_then(|r| r.error.as_ref()).map(|e| RunError {
            kind: serde_json::from_value(serde_json::to_value(e.kind).unwrap_or_default())
                .unwrap_or(captf_api::common::RunErrorKind::Step),
            step: e.step.clone(),
            summary: Some(
                e.tail
                    .chars()
                    .rev()
                    .take(1024)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect(),
            ),
            resources: None,
        }),
        drift: r.and_then(|r| r.drift.as_ref()).map(|d| DriftSummary {
            create: Some(d.create as i32),
            update: Some(d.update as i32),
            replace: Some(d.replace as i32),
            delete: Some(d.delete as i32),
            resources: (!d.resources.is_empty()).then(|| d.resources.clone()),
        }),
    }
}

/// `ApplyJobSucceeded` from the newest finished apply, plan or destroy Job
/// that was not blocked: the real outcome once a blocked change is gone.
pub fn apply_condition_past_blocks(loaded: &Loaded) -> ConditionValue {
    let newest = loaded
        .observed
        .iter()
        .filter(|o| matches!(o.record.op, Op::Apply | Op::Plan | Op::Destroy))
        .filter(|o| o.record.finished.is_some() && o.record.outcome != Outcome::Blocked)
        .max_by_key(|o| (o.record.finished, o.record.created));
    crate::engine::job_conditions::apply_job_succeeded(newest.map(finished_run).as_ref())
}

/// Emits an event on the object (failures are logged, never fatal).
pub async fn event<K: Workload>(
    ctx: &Context,
    obj: &K,
    warning: bool,
    reason: &str,
    action: &str,
    note: String,
) {
    let ev = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &obj.object_ref(&())).await {
        tracing::warn!(error = %e, reason, "could not publish an event");
    }
}

/// Bookkeeping of every finished Job not yet bookkept: `lastRun`, the Job
/// conditions, promotion of the attempt record and adoption of the state
/// after a successful apply, the per-run Secret and run lease released,
/// drift and refresh times; then history pruning.
pub async fn bookkeep<K: Workload>(
    ctx: &Context,
    obj: &K,
    loaded: &Loaded,
    draft: &mut Draft,
    job_limits: (u32, u32),
    drift_enabled: bool,
    drift_remediate: bool,
) -> Result<Booked, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let mut newly: Vec<ObservedJob> = loaded
        .observed
        .iter()
        .filter(|o| o.record.finished.is_some() && o.result.is_some() || o.result_error.is_some())
        .filter(|o| o.record.finished.is_some())
        .filter(|o| {
            loaded
                .annotation(&o.record.name, annotations::BOOKKEPT)
                .is_none()
        })
        .cloned()
        .collect();
    // A finished Job whose pod is gone has neither result nor error: it
    // is still counted (once), from its Job conditions.
    for o in &loaded.observed {
        if o.record.finished.is_some()
            && loaded
                .annotation(&o.record.name, annotations::BOOKKEPT)
                .is_none()
            && !newly.iter().any(|n| n.record.name == o.record.name)
        {
            newly.push(o.clone());
        }
    }
    newly.sort_by_key(|o| o.record.finished);
    let mut marks = Vec::new();
    for o in &newly {
        let job = &o.record.name;
        let inputs_hash = loaded
            .annotation(job, annotations::INPUTS_HASH)
            .map(str::to_owned);
        draft.field("lastRun", last_run(o));
        let mut evs = Vec::new();
        let plan_hash = o
            .result
            .as_ref()
            .and_then(|r| r.plan.as_ref())
            .map(|p| p.hash.clone());
        match (o.record.op, o.record.outcome) {
            (Op::Apply, Outcome::Succeeded) => {
                if loaded.annotation(job, annotations::DRIFT_REMEDIATION) == Some("true") {
                    // The drift the check found is applied away.
                    let v = ConditionValue {
                        status: "False",
                        reason: reasons::NO_DRIFT,
                        message: format!("Job {job} remediated the drift"),
                    };
                    draft.set(conditions::DRIFT_DETECTED, &v);
                    evs.push(PendingEvent::new(
                        false,
                        events::DRIFT_RESOLVED,
                        "Drift",
                        v.message,
                    ));
                }
                promote(ctx, obj, job, inputs_hash.as_deref(), o.image_id.as_deref()).await?;
                let suffix = state_suffix(K::KIND, &ns, &name);
                adopt(
                    &ctx.client,
                    &ns,
                    &suffix,
                    &obj.owner_reference(),
                    inputs_hash.as_deref(),
                )
                .await?;
                evs.push(PendingEvent::new(
                    false,
                    events::JOB_SUCCEEDED,
                    "Apply",
                    format!("Job {job} succeeded"),
                ));
            }
            (Op::Drift | Op::Refresh, Outcome::Succeeded) => {
                let at = o.record.finished.map(time);
                if o.record.op == Op::Drift {
                    draft.field("lastDriftCheck", &at);
                    let detected = o
                        .result
                        .as_ref()
                        .and_then(|r| r.drift.as_ref())
                        .is_some_and(|d| d.detected);
                    let was = draft.is_true(conditions::DRIFT_DETECTED);
                    let v = if detected && drift_remediate {
                        ConditionValue {
                            status: "True",
                            reason: reasons::DRIFT_PENDING,
                            message: format!("Job {job} found drift; a remediation apply follows"),
                        }
                    } else if detected {
                        ConditionValue {
                            status: "True",
                            reason: reasons::DRIFT_REPORTED,
                            message: format!("Job {job} found drift"),
                        }
                    } else {
                        ConditionValue {
                            status: "False",
                            reason: reasons::NO_DRIFT,
                            message: format!("Job {job} found no drift"),
                        }
                    };
                    draft.set(conditions::DRIFT_DETECTED, &v);
                    if detected && !was {
                        evs.push(PendingEvent::new(
                            true,
                            events::DRIFT_DETECTED,
                            "Drift",
                            v.message,
                        ));
                    } else if !detected && was {
                        evs.push(PendingEvent::new(
                            false,
                            events::DRIFT_RESOLVED,
                            "Drift",
                            v.message,
                        ));
                    }
                } else {
                    draft.field("lastRefresh", &at);
                }
            }
            (_, Outcome::Succeeded) => {
                evs.push(PendingEvent::new(
                    false,
                    events::JOB_SUCCEEDED,
                    o.record.op.as_str(),
                    format!("Job {job} succeeded"),
                ));
            }
            (_, Outcome::Blocked) => {
                evs.push(PendingEvent::new(true, events::DESTRUCTIVE_PLAN_BLOCKED, "Apply", format!("Job {job} stopped before a plan that deletes or replaces resources; nothing was applied")));
            }
            (_, Outcome::Interrupted) => {
                evs.push(PendingEvent::new(
                    true,
                    events::JOB_INTERRUPTED,
                    o.record.op.as_str(),
                    format!("Job {job} was interrupted"),
                ));
            }
            (_, Outcome::DeadlineExceeded) => {
                evs.push(PendingEvent::new(
                    true,
                    events::JOB_DEADLINE_EXCEEDED,
                    o.record.op.as_str(),
                    format!("Job {job} exceeded its deadline"),
                ));
            }
            _ => {
                let step = o
                    .result
                    .as_ref()
                    .and_then(|r| r.error.as_ref())
                    .and_then(|e| e.step.clone())
                    .map(|s| format!(" in step {s}"))
                    .unwrap_or_default();
                evs.push(PendingEvent::new(
                    true,
                    events::JOB_FAILED,
                    o.record.op.as_str(),
                    format!("Job {job} failed{step}"),
                ));
            }
        }
        if o.record.op == Op::Apply
            && o.record.outcome != Outcome::Succeeded
            && loaded.annotation(job, annotations::DRIFT_REMEDIATION) == Some("true")
        {
            draft.set(
                conditions::DRIFT_DETECTED,
                &ConditionValue {
                    status: "True",
                    reason: reasons::DRIFT_PENDING,
                    message: format!(
                        "remediation Job {job} did not succeed; it is retried under backoff"
                    ),
                },
            );
        }
        // The run is over: its per-run Secret and run lease go.
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
        match secrets
            .delete(&run_secret_name(job), &DeleteParams::default())
            .await
        {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => return Err(e.into()),
        }
        let suffix = state_suffix(K::KIND, &ns, &name);
        release(&ctx.client, &ns, &run_lease_name(&suffix), job).await?;
        marks.push(Mark {
            job: job.clone(),
            outcome: o.record.outcome,
            plan_hash,
            events: evs,
            counted: CountedJob::of(o),
        });
    }
    // Job conditions follow the newest finished Job of their ops, when a
    // new one was read (a bookkept Job keeps the condition it gave).
    let apply_ops = [Op::Apply, Op::Plan, Op::Destroy];
    if let Some(n) = newly
        .iter()
        .rev()
        .find(|o| apply_ops.contains(&o.record.op))
    {
        let newest = loaded.newest_finished(&apply_ops);
        if newest.map(|x| &x.record.name) == Some(&n.record.name) {
            let v = crate::engine::job_conditions::apply_job_succeeded(Some(&finished_run(n)));
            draft.set(conditions::APPLY_JOB_SUCCEEDED, &v);
        }
    } else if draft.get(conditions::APPLY_JOB_SUCCEEDED).is_none() {
        let v = crate::engine::job_conditions::apply_job_succeeded(None);
        draft.set(conditions::APPLY_JOB_SUCCEEDED, &v);
    }
    let drift_ops = [Op::Refresh, Op::Drift];
    if let Some(n) = newly
        .iter()
        .rev()
        .find(|o| drift_ops.contains(&o.record.op))
    {
        let v = crate::engine::job_conditions::drift_job_succeeded(
            Some(&finished_run(n)),
            drift_enabled,
        );
        draft.set(conditions::DRIFT_JOB_SUCCEEDED, &v);
    } else if draft.get(conditions::DRIFT_JOB_SUCCEEDED).is_none() {
        let v = crate::engine::job_conditions::drift_job_succeeded(None, drift_enabled);
        draft.set(conditions::DRIFT_JOB_SUCCEEDED, &v);
    }

    let records = loaded.records();
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    for doomed in history::prune(&records, job_limits.0, job_limits.1) {
        match api.delete(&doomed, &DeleteParams::background()).await {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Booked {
        marks,
        newly,
        active: history::active(&records).cloned(),
    })
}

/// Promotes the attempt record written for `job` into the applied record,
/// pinning the digest its pod ran.
async fn promote<K: Workload>(
    ctx: &Context,
    obj: &K,
    job: &str,
    inputs_hash: Option<&str>,
    image_id: Option<&str>,
) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let Some(Ok(attempt)) =
        read_record(&ctx.client, &ns, &attempt_record_name(K::KIND, &name)).await?
    else {
        return Ok(());
    };
    if inputs_hash.is_some_and(|h| h != attempt.meta.inputs_hash) {
        // The attempt record moved on to a newer apply already.
        return Ok(());
    }
    let applied_name = applied_record_name(K::KIND, &name);
    let previous = read_record(&ctx.client, &ns, &applied_name)
        .await?
        .and_then(Result::ok);
    let digest = image_id.and_then(|id| id.split_once('@')).map(|(_, d)| d);
    let applied = attempt.promote(job, digest, previous.as_ref());
    let labels = record_labels(K::KIND, &name);
    write_record(
        &ctx.client,
        &ns,
        &applied_name,
        &applied,
        &obj.owner_reference(),
        labels,
    )
    .await?;
    Ok(())
}

/// Reads the state; `Err(StateError)` when it is missing or unusable.
pub async fn state<K: Workload>(
    ctx: &Context,
    obj: &K,
) -> Result<Result<StateSummary, StateError>, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let suffix = state_suffix(K::KIND, &ns, &obj.name_any());
    Ok(read_state(&ctx.client, &ns, &suffix).await?)
}

/// Decodes the outputs of `state` for `role`.
pub fn decode_outputs(role: Role, state: &StateSummary) -> RoleOutputs {
    let map: serde_json::Map<String, serde_json::Value> = state
        .outputs
        .iter()
        .map(|(k, o)| (k.clone(), json!({ "value": o.value })))
        .collect();
    let root = RootOutputs::from_output_json(&serde_json::Value::Object(map))
        .unwrap_or_else(|_| RootOutputs::declared(Vec::new()));
    decode(role, &root)
}

/// The `StateReadable` condition of a read.
pub fn state_readable(
    read: &Result<StateSummary, StateError>,
    ever_applied: bool,
) -> ConditionValue {
    match read {
        Ok(s) => ConditionValue {
            status: "True",
            reason: reasons::STATE_READ,
            message: format!(
                "serial {}, {} managed resources",
                s.serial, s.managed_resources
            ),
        },
        Err(StateError::NotFound) if ever_applied => ConditionValue {
            status: "False",
            reason: reasons::STATE_LOST,
            message: "the state Secret is gone although the object applied before".into(),
        },
        Err(StateError::NotFound) => ConditionValue {
            status: "Unknown",
            reason: reasons::STATE_NOT_FOUND,
            message: "no state yet".into(),
        },
        Err(e) => ConditionValue {
            status: "False",
            reason: e.reason(),
            message: e.to_string(),
        },
    }
}

/// Sets or clears the block-move annotation (written at once, not in the
/// status patch: `clusterctl move` reads it before anything else).
/// Sets or removes the block-move annotation. `present` is what this pass
/// knows of it (the object read at its start, then this pass's own
/// writes), so a removal and a re-add in one pass both land.
pub async fn set_block_move<K: Workload>(
    ctx: &Context,
    obj: &K,
    present: &mut bool,
    on: bool,
) -> Result<(), Error> {
    if *present == on {
        return Ok(());
    }
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let value = if on {
        json!("true")
    } else {
        serde_json::Value::Null
    };
    let patch = json!({"metadata": {"annotations": {annotations::BLOCK_MOVE: value}}});
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    *present = on;
    Ok(())
}

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

/// Starts a Job in the crash-safe order: block-move annotation, run lease,
/// the Job (adopted when it already runs), its per-run Secret, the attempt
/// record; `status.activeJob` goes in the end-of-pass patch.
pub async fn start<K: Workload>(
    ctx: &Context,
    obj: &K,
    records: &[JobRecord],
    req: StartRequest,
    draft: &mut Draft,
    block_move: &mut bool,
    now: SystemTime,
) -> Result<StartOutcome, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let attempt = history::next_attempt(records, req.op);
    let job = job_name(K::KIND, &name, req.op, attempt, &req.inputs_hash, &req.tick);
    let suffix = state_suffix(K::KIND, &ns, &name);
    let deadline = Duration::from_secs(req.jobs.active_deadline_seconds.max(1) as u64);

    set_block_move(ctx, obj, block_move, true).await?;
    // The pause handshake: `clusterctl move` pauses, then reads block-move.
    // With block-move now visible, a pause set meanwhile must stop the start.
    if paused_now(ctx, obj, &req.cluster_name).await? {
        return Ok(StartOutcome::Waiting {
            requeue: START_DEFERRED_REQUEUE,
        });
    }

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
    match acquire(&ctx.client, &lease, now).await? {
        Acquire::Acquired => {}
        Acquire::Held { holder } => {
            let waiting_already = draft
                .get(op_condition(req.op))
                .is_some_and(|c| c.reason == reasons::WAITING_FOR_RUN_LEASE);
            if !waiting_already {
                ctx.metrics.lease_wait_started(K::KIND.kind(), "run_lease");
            }
            let v = ConditionValue {
                status: "Unknown",
                reason: reasons::WAITING_FOR_RUN_LEASE,
                message: format!("Job {holder} holds the run lease of this object"),
            };
            draft.set(op_condition(req.op), &v);
            return Ok(StartOutcome::Waiting {
                requeue: LEASE_REQUEUE,
            });
        }
        Acquire::LostRace => {
            return Ok(StartOutcome::Waiting {
                requeue: START_DEFERRED_REQUEUE,
            });
        }
    }

    let mut job_annotations = req.annotations.clone();
    if req.remediation {
        job_annotations.insert(annotations::DRIFT_REMEDIATION.to_owned(), "true".to_owned());
    }
    let state_labels = BTreeMap::from([
        (labels::MANAGED.to_owned(), "true".to_owned()),
        (labels::CLUSTER_NAME.to_owned(), req.cluster_name.clone()),
    ]);
    let event_object = ctx.config.runner_events.then(|| {
        (
            format!(
                "{}/{}/{}/{}/{}",
                K::api_version(&()),
                K::kind(&()),
                ns,
                name,
                obj.uid().unwrap_or_default()
            ),
            job.clone(),
        )
    });
    let request = JobRequest {
        kind: K::KIND,
        owner: obj.owner_reference(),
        namespace: ns.clone(),
        cluster_name: req.cluster_name.clone(),
        job_name: job.clone(),
        attempt,
        runner: RunnerArgs {
            op: req.op,
            image: req.image.clone(),
            namespace: ns.clone(),
            state_suffix: suffix.clone(),
            state_labels,
            lock_timeout: Duration::from_secs(req.jobs.lock_timeout_seconds.max(1) as u64),
            stop_timeout: Duration::from_secs(20),
            force_unlock: None,
            guard_deletes: req.guard.is_some(),
            guard: req.guard.clone(),
            restore: None,
            plan_key: req.plan_key_secret.is_some(),
            event_object,
        },
        runner_image: ctx.config.runner_image.clone(),
        image_pull_policy: obj.workspace().source.image_pull_policy.and_then(|p| {
            serde_json::to_value(p)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
        }),
        inputs_hash: Some(req.inputs_hash.clone()),
        restore: None,
        annotations: job_annotations,
        active_deadline_seconds: req.jobs.active_deadline_seconds,
        service_account: req
            .jobs
            .service_account_name
            .clone()
            .unwrap_or_else(|| crate::rbac::RUNNER.to_owned()),
        image_pull_secrets: req
            .jobs
            .image_pull_secrets
            .iter()
            .map(|s| s.name.clone())
            .collect(),
        resources: req.jobs.resources.clone(),
        env: req.jobs.env.clone(),
        security_context: req.jobs.security_context.clone(),
        pod_security_context: req.jobs.pod_security_context.clone(),
        credentials_secret: req.credentials_secret.clone(),
        plan_key_secret: req.plan_key_secret.clone(),
    };
    let built = build(&request);
    match create_job(&ctx.client, &built.job, &obj.uid().unwrap_or_default()).await {
        Ok(Started::Created) => {
            event(
                ctx,
                obj,
                false,
                events::JOB_CREATED,
                req.op.as_str(),
                format!("Job {job} created for {}", req.op.as_str()),
            )
            .await;
        }
        Ok(Started::Adopted) => {}
        Ok(Started::Deferred { reason }) => {
            tracing::info!(job, reason, "Job start deferred");
            return Ok(StartOutcome::Waiting {
                requeue: START_DEFERRED_REQUEUE,
            });
        }
        Err(kube::Error::Api(s)) if s.code >= 400 && s.code < 500 => {
            // A rejected create proves no Job exists: the lease goes at once.
            release(&ctx.client, &ns, &lease.name, &job).await?;
            return Err(Error::Invalid(format!(
                "Job {job} was rejected: {}",
                s.message
            )));
        }
        Err(e) => return Err(e.into()),
    }
    let files = [
        (crate::records::MAIN_FILE, req.files.0.as_str()),
        (crate::records::VALUES_FILE, req.files.1.as_str()),
    ];
    ensure_run_secret(&ctx.client, &built.job, &files, BTreeMap::new()).await?;
    if let Some(mut record) = req.attempt_record.clone() {
        record.meta.job = Some(job.clone());
        write_record(
            &ctx.client,
            &ns,
            &attempt_record_name(K::KIND, &name),
            &record,
            &obj.owner_reference(),
            record_labels(K::KIND, &name),
        )
        .await?;
    }
    draft.field(
        "activeJob",
        ActiveJob {
            name: job.clone(),
            operation: req.op,
            attempt: attempt as i32,
            start_time: Some(time(now)),
        },
    );
    if matches!(req.op, Op::Apply | Op::Plan | Op::Destroy) {
        draft.set(
            conditions::APPLY_JOB_SUCCEEDED,
            &ConditionValue {
                status: draft
                    .get(conditions::APPLY_JOB_SUCCEEDED)
                    .map(|c| {
                        if c.status == "True" {
                            "True"
                        } else {
                            "Unknown"
                        }
                    })
                    .unwrap_or("Unknown"),
                reason: draft
                    .get(conditions::APPLY_JOB_SUCCEEDED)
                    .filter(|c| c.status == "True")
                    .map(|_| reasons::APPLY_SUCCEEDED)
                    .unwrap_or(reasons::NO_APPLY_YET),
                message: format!("Job {job} is running"),
            },
        );
    }
    Ok(StartOutcome::Started { job })
}

/// The condition a waiting op reports on.
pub fn op_condition(op: Op) -> &'static str {
    match op {
        Op::Refresh | Op::Drift => conditions::DRIFT_JOB_SUCCEEDED,
        Op::Restore => conditions::RESTORE_JOB_SUCCEEDED,
        _ => conditions::APPLY_JOB_SUCCEEDED,
    }
}

/// Deletes an active Job that can never start (its per-run Secret is gone
/// and no pod left `Pending` for a minute). True when it was deleted.
pub async fn delete_if_stuck<K: Workload>(
    ctx: &Context,
    obj: &K,
    active: &JobRecord,
    now: SystemTime,
) -> Result<bool, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let age = now.duration_since(active.created).unwrap_or_default();
    if age < STUCK_AFTER {
        return Ok(false);
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let secret_exists = secrets
        .get_opt(&run_secret_name(&active.name))
        .await?
        .is_some();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let phases: Vec<String> = pods
        .list(
            &ListParams::default().labels(&format!("batch.kubernetes.io/job-name={}", active.name)),
        )
        .await?
        .items
        .into_iter()
        .map(|p| {
            p.status
                .and_then(|s| s.phase)
                .unwrap_or_else(|| "Pending".into())
        })
        .collect();
    let phases: Vec<&str> = phases.iter().map(String::as_str).collect();
    if !is_stuck(age, secret_exists, &phases) {
        return Ok(false);
    }
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    match jobs.delete(&active.name, &DeleteParams::background()).await {
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(e) => return Err(e.into()),
    }
    let suffix = state_suffix(K::KIND, &ns, &obj.name_any());
    release(&ctx.client, &ns, &run_lease_name(&suffix), &active.name).await?;
    event(
        ctx,
        obj,
        true,
        events::STUCK_JOB_DELETED,
        active.op.as_str(),
        format!(
            "Job {} never started: its per-run Secret is missing",
            active.name
        ),
    )
    .await;
    Ok(true)
}

/// Writes the status, then marks the Jobs it accounted for as bookkept.
pub async fn finish<K: Workload>(
    ctx: &Context,
    obj: &K,
    draft: &Draft,
    marks: &[Mark],
) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let current = serde_json::to_value(obj)
        .ok()
        .and_then(|mut v| v.get_mut("status").map(serde_json::Value::take))
        .unwrap_or(serde_json::Value::Null);
    // A quiet pass writes nothing: the patch goes only when it changes
    // something.
    if !draft.unchanged_from(&current) {
        let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
        api.patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&draft.patch()),
        )
        .await?;
    }
    for m in marks {
        for e in &m.events {
            event(ctx, obj, e.warning, &e.reason, &e.action, e.note.clone()).await;
        }
        if let Some(c) = &m.counted {
            let error = c
                .error
                .as_ref()
                .map(|(kind, step)| crate::metrics::JobError {
                    kind,
                    step: step.as_deref(),
                });
            ctx.metrics
                .job_finished(K::KIND.kind(), c.op, c.result, c.duration, error);
        }
        if let Err(e) =
            mark_bookkept(&ctx.client, &ns, &m.job, m.outcome, m.plan_hash.as_deref()).await
        {
            tracing::warn!(job = m.job, error = %e, "could not mark a Job bookkept; it is read again next pass");
        }
    }
    Ok(())
}

/// Makes sure the object carries its finalizer (ends the pass when added).
pub async fn add_finalizer<K: Workload>(ctx: &Context, obj: &K) -> Result<(), Error> {
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(K::FINALIZER.to_owned());
    let patch =
        json!({"metadata": {"finalizers": finalizers, "resourceVersion": obj.resource_version()}});
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// Removes the object's finalizer (bound to the version read).
pub async fn remove_finalizer<K: Workload>(ctx: &Context, obj: &K) -> Result<(), Error> {
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let finalizers: Vec<&String> = obj
        .finalizers()
        .iter()
        .filter(|f| *f != K::FINALIZER)
        .collect();
    let patch = json!({"metadata": {"finalizers": finalizers}});
    match api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The plan key Secret of an object, created the first time it is needed.
pub async fn ensure_plan_key<K: Workload>(ctx: &Context, obj: &K) -> Result<String, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let secret_name = plan_key_name(K::KIND, &name);
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    if api.get_opt(&secret_name).await?.is_some() {
        return Ok(secret_name);
    }
    let mut key = [0u8; 32];
    getrandom(&mut key);
    let mut owner = obj.owner_reference();
    owner.controller = None;
    owner.block_owner_deletion = None;
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(secret_name.clone()),
            namespace: Some(ns),
            labels: Some(record_labels(K::KIND, &name)),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "key".to_owned(),
            ByteString(key.to_vec()),
        )])),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(secret_name),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(secret_name),
        Err(e) => Err(e.into()),
    }
}

/// `captf-plankey-<ks>-<name>`.
pub fn plan_key_name(kind: crate::names::WorkloadKind, name: &str) -> String {
    format!("captf-plankey-{}-{name}", kind.short())
}

/// 32 bytes from the kernel's random source.
fn getrandom(buf: &mut [u8]) {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .expect("reading /dev/urandom");
}

/// Whether the newest finished Job of `op` succeeded after `since`.
pub fn succeeded_since(loaded: &Loaded, op: Op, since: Option<SystemTime>) -> bool {
    loaded.newest_finished(&[op]).is_some_and(|o| {
        o.record.outcome == Outcome::Succeeded
            && since.is_none_or(|s| o.record.finished.is_some_and(|f| f >= s))
    })
}

/// `K::api_version` as `Resource` spells it (for owner checks in tests).
pub fn api_version<K: Resource<DynamicType = ()>>() -> String {
    K::api_version(&()).into_owned()
}

/// Reads the object and its Cluster live: is either paused now?
async fn paused_now<K: Workload>(ctx: &Context, obj: &K, cluster: &str) -> Result<bool, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    let live = api.get(&obj.name_any()).await?;
    if live.annotations().contains_key(annotations::PAUSED) {
        return Ok(true);
    }
    let clusters: Api<kube::api::DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &ns, &crate::capi::cluster_resource());
    Ok(clusters
        .get_opt(cluster)
        .await?
        .and_then(|c| crate::capi::Cluster::from_dynamic(&c).ok())
        .is_some_and(|c| c.paused()))
}
