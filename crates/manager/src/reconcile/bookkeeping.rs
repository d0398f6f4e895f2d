//! Bookkeeping of finished Jobs, as a pure plan: `lastRun`, the Job
//! conditions, drift and refresh times, the marks and events that follow
//! the status patch, and the writes it needs (`Effect`s, which `effects.rs`
//! makes). No client here.

use std::time::Duration;

use captf_api::common::{DriftSummary, LastRun, RunError, RunStep};
use captf_api::names::{annotations, conditions, events, reasons};

use super::effect::Effect;
use super::pass::Loaded;
use super::status::Draft;
use crate::engine::decide::Op;
use crate::engine::history::{self, JobRecord, Outcome};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue, FinishedRun};
use crate::jobs::observe::ObservedJob;

/// What bookkeeping follows from the object's spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookkeepingPolicy {
    /// Finished Jobs kept: (successful, failed).
    pub history_limits: (u32, u32),
    pub drift_enabled: bool,
    pub drift_remediate: bool,
}

/// The plan: what the pass learned, and the writes that go before the
/// status patch.
#[derive(Debug)]
pub struct BookkeepingPlan {
    pub booked: Bookkept,
    pub effects: Vec<Effect>,
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
    /// How a restore ended, for `captf_state_restores_total`.
    pub restore_result: Option<&'static str>,
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
    /// What the runner reported beyond the outcome.
    pub report: crate::metrics::JobReport,
}

impl CountedJob {
    fn of(o: &ObservedJob, records: &[JobRecord]) -> Option<CountedJob> {
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
            report: super::job_report::job_report(o, records),
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
pub struct Bookkept {
    pub marks: Vec<Mark>,
    /// Finished Jobs read for the first time, oldest first.
    pub newly: Vec<ObservedJob>,
    pub active: Option<JobRecord>,
    /// This pass gave the run lease back itself (its finished Job held it):
    /// the lease is known free, with no read to ask again.
    pub run_lease_released: bool,
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

/// Bookkeeping of every finished Job not yet bookkept: `lastRun`, the Job
/// conditions, promotion of the attempt record and adoption of the state
/// after a successful apply, the per-run Secret and run lease released,
/// drift and refresh times; then history pruning.
pub fn plan_bookkeeping(
    loaded: &Loaded,
    draft: &mut Draft,
    policy: &BookkeepingPolicy,
) -> BookkeepingPlan {
    let newly = unbookkept(loaded);
    let mut effects = Vec::new();
    let records = loaded.records();
    let marks = newly
        .iter()
        .map(|o| book_job(loaded, o, &records, draft, policy, &mut effects))
        .collect();
    set_job_conditions(loaded, &newly, draft, policy);
    let (successful, failed) = policy.history_limits;
    for name in history::prune(&records, successful, failed) {
        effects.push(Effect::DeleteJob { name });
    }
    BookkeepingPlan {
        booked: Bookkept {
            marks,
            newly,
            active: history::active(&records).cloned(),
            run_lease_released: false,
        },
        effects,
    }
}

/// Every finished Job not bookkept yet, oldest first; one whose pod is
/// gone (no result, no error) is still counted once, from its Job
/// conditions.
fn unbookkept(loaded: &Loaded) -> Vec<ObservedJob> {
    let mut newly: Vec<ObservedJob> = loaded
        .observed
        .iter()
        .filter(|o| o.record.finished.is_some())
        .filter(|o| {
            loaded
                .annotation(&o.record.name, annotations::BOOKKEPT)
                .is_none()
        })
        .cloned()
        .collect();
    newly.sort_by(|a, b| {
        (a.record.finished, &a.record.name).cmp(&(b.record.finished, &b.record.name))
    });
    newly
}

/// One finished Job: `lastRun`, what its op and outcome change, its writes,
/// and the mark (with its events) that follows the status patch.
fn book_job(
    loaded: &Loaded,
    o: &ObservedJob,
    records: &[JobRecord],
    draft: &mut Draft,
    policy: &BookkeepingPolicy,
    effects: &mut Vec<Effect>,
) -> Mark {
    let job = &o.record.name;
    draft.field("lastRun", last_run(o));
    let mut evs = Vec::new();
    let remediation = loaded.annotation(job, annotations::DRIFT_REMEDIATION) == Some("true");
    match (o.record.op, o.record.outcome) {
        (Op::Apply, Outcome::Succeeded) => {
            let inputs_hash = loaded
                .annotation(job, annotations::INPUTS_HASH)
                .map(str::to_owned);
            apply_succeeded(o, inputs_hash, remediation, draft, effects, &mut evs);
        }
        (Op::Drift, Outcome::Succeeded) => drift_checked(o, draft, policy, &mut evs),
        (Op::Refresh, Outcome::Succeeded) => {
            draft.set_last_refresh(o.record.finished);
        }
        (Op::Restore, outcome) => {
            restore_bookkeeping(loaded, o, outcome, draft, effects, &mut evs);
        }
        (op, outcome) => evs.push(outcome_event(job, op, outcome, o)),
    }
    if o.record.op == Op::Apply && o.record.outcome != Outcome::Succeeded && remediation {
        draft.set(
            conditions::DRIFT_DETECTED,
            &ConditionValue {
                status: ConditionStatus::True,
                reason: reasons::DRIFT_PENDING,
                message: format!(
                    "remediation Job {job} did not succeed; it is retried under backoff"
                ),
            },
        );
    }
    if o.outcome_unknown() {
        // It may have changed infrastructure no state records.
        effects.push(Effect::RecordUnconfirmed { job: job.clone() });
    }
    // The run is over: its per-run Secret and run lease go.
    effects.push(Effect::DeleteRunSecret { job: job.clone() });
    effects.push(Effect::ReleaseRunLease {
        job: job.clone(),
        version: loaded
            .annotation(job, annotations::RUN_LEASE_VERSION)
            .map(str::to_owned),
    });
    Mark {
        job: job.clone(),
        outcome: o.record.outcome,
        plan_hash: o
            .result
            .as_ref()
            .and_then(|r| r.plan.as_ref())
            .map(|p| p.hash.clone()),
        events: evs,
        counted: CountedJob::of(o, records),
        restore_result: (o.record.op == Op::Restore).then_some(
            if o.record.outcome == Outcome::Succeeded {
                "succeeded"
            } else {
                "failed"
            },
        ),
    }
}

/// A successful apply: its attempt record is promoted, the state adopted,
/// and the drift it remediated resolved.
fn apply_succeeded(
    o: &ObservedJob,
    inputs_hash: Option<String>,
    remediation: bool,
    draft: &mut Draft,
    effects: &mut Vec<Effect>,
    evs: &mut Vec<PendingEvent>,
) {
    let job = &o.record.name;
    if remediation {
        // The drift the check found is applied away.
        let v = ConditionValue {
            status: ConditionStatus::False,
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
    effects.push(Effect::PromoteRecord {
        job: job.clone(),
        inputs_hash: inputs_hash.clone(),
        image_id: o.image_id.clone(),
    });
    effects.push(Effect::AdoptState { inputs_hash });
    evs.push(PendingEvent::new(
        false,
        events::JOB_SUCCEEDED,
        "Apply",
        format!("Job {job} succeeded"),
    ));
}

/// A successful drift check: its time, `DriftDetected`, and an event when
/// the verdict changed.
fn drift_checked(
    o: &ObservedJob,
    draft: &mut Draft,
    policy: &BookkeepingPolicy,
    evs: &mut Vec<PendingEvent>,
) {
    let job = &o.record.name;
    draft.set_last_drift_check(o.record.finished);
    let detected = o
        .result
        .as_ref()
        .and_then(|r| r.drift.as_ref())
        .is_some_and(|d| d.detected);
    let was = draft.is_true(conditions::DRIFT_DETECTED);
    let (status, reason, message) = match (detected, policy.drift_remediate) {
        (true, true) => (
            ConditionStatus::True,
            reasons::DRIFT_PENDING,
            format!("Job {job} found drift; a remediation apply follows"),
        ),
        (true, false) => (
            ConditionStatus::True,
            reasons::DRIFT_REPORTED,
            format!("Job {job} found drift"),
        ),
        (false, _) => (
            ConditionStatus::False,
            reasons::NO_DRIFT,
            format!("Job {job} found no drift"),
        ),
    };
    let v = ConditionValue {
        status,
        reason,
        message,
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
}

/// The event of a finished Job that needs no more than one: a success of
/// an op with nothing to adopt, or a failure by its kind.
fn outcome_event(job: &str, op: Op, outcome: Outcome, o: &ObservedJob) -> PendingEvent {
    let op_name = op.as_str();
    match outcome {
        Outcome::Succeeded => PendingEvent::new(
            false,
            events::JOB_SUCCEEDED,
            op_name,
            format!("Job {job} succeeded"),
        ),
        Outcome::Blocked => PendingEvent::new(
            true,
            events::DESTRUCTIVE_PLAN_BLOCKED,
            "Apply",
            format!(
                "Job {job} stopped before a plan that deletes or replaces resources; nothing was applied"
            ),
        ),
        Outcome::Interrupted => PendingEvent::new(
            true,
            events::JOB_INTERRUPTED,
            op_name,
            format!("Job {job} was interrupted"),
        ),
        Outcome::DeadlineExceeded => PendingEvent::new(
            true,
            events::JOB_DEADLINE_EXCEEDED,
            op_name,
            format!("Job {job} exceeded its deadline"),
        ),
        _ => {
            let step = o
                .result
                .as_ref()
                .and_then(|r| r.error.as_ref())
                .and_then(|e| e.step.clone())
                .map(|s| format!(" in step {s}"))
                .unwrap_or_default();
            PendingEvent::new(
                true,
                events::JOB_FAILED,
                op_name,
                format!("Job {job} failed{step}"),
            )
        }
    }
}

/// The Job conditions follow the newest finished Job of their ops, when a
/// new one was read (a bookkept Job keeps the condition it gave).
fn set_job_conditions(
    loaded: &Loaded,
    newly: &[ObservedJob],
    draft: &mut Draft,
    policy: &BookkeepingPolicy,
) {
    use crate::engine::job_conditions::{apply_job_succeeded, drift_job_succeeded};
    let apply_ops = [Op::Apply, Op::Plan, Op::Destroy];
    if let Some(n) = newly
        .iter()
        .rev()
        .find(|o| apply_ops.contains(&o.record.op))
    {
        let newest = loaded.newest_finished(&apply_ops);
        if newest.map(|x| &x.record.name) == Some(&n.record.name) {
            let v = apply_job_succeeded(Some(&finished_run(n)));
            draft.set(conditions::APPLY_JOB_SUCCEEDED, &v);
        }
    } else if draft.get(conditions::APPLY_JOB_SUCCEEDED).is_none() {
        draft.set(conditions::APPLY_JOB_SUCCEEDED, &apply_job_succeeded(None));
    }
    let drift_ops = [Op::Refresh, Op::Drift];
    if let Some(n) = newly
        .iter()
        .rev()
        .find(|o| drift_ops.contains(&o.record.op))
    {
        let v = drift_job_succeeded(Some(&finished_run(n)), policy.drift_enabled);
        draft.set(conditions::DRIFT_JOB_SUCCEEDED, &v);
    } else if draft.get(conditions::DRIFT_JOB_SUCCEEDED).is_none() {
        let v = drift_job_succeeded(None, policy.drift_enabled);
        draft.set(conditions::DRIFT_JOB_SUCCEEDED, &v);
    }
}

/// A finished restore: its serial is consumed either way; a success adopts
/// the state with the backup's inputs hash (none when the backup had none),
/// ends the request and, when it is newer than every apply, the hold of an
/// apply of unknown outcome. A failure keeps the request (never retried for
/// that serial) and costs no backoff.
fn restore_bookkeeping(
    loaded: &Loaded,
    o: &ObservedJob,
    outcome: Outcome,
    draft: &mut Draft,
    effects: &mut Vec<Effect>,
    evs: &mut Vec<PendingEvent>,
) {
    let job = &o.record.name;
    let serial = loaded
        .annotation(job, annotations::RESTORE_SERIAL)
        .and_then(|s| s.parse::<u64>().ok());
    if let Some(serial) = serial {
        draft.set_last_restored_serial(serial);
    }
    let serial_text = serial.map_or_else(|| "?".to_owned(), |s| s.to_string());
    if outcome == Outcome::Succeeded {
        let hash = loaded
            .annotation(job, annotations::INPUTS_HASH)
            .filter(|h| !h.is_empty());
        effects.push(Effect::AdoptState {
            inputs_hash: hash.map(str::to_owned),
        });
        let newest_apply = loaded
            .observed
            .iter()
            .filter(|a| a.record.op == Op::Apply)
            .map(|a| a.record.created)
            .max();
        if newest_apply.is_none_or(|a| o.record.finished.is_some_and(|f| f > a)) {
            effects.push(Effect::ClearUnconfirmed);
        }
        effects.push(Effect::RemoveAnnotation(annotations::RESTORE_STATE));
        let message = format!("Job {job} restored the backup of state serial {serial_text}");
        draft.set(
            conditions::RESTORE_JOB_SUCCEEDED,
            &ConditionValue {
                status: ConditionStatus::True,
                reason: reasons::STATE_RESTORED,
                message: message.clone(),
            },
        );
        evs.push(PendingEvent::new(
            false,
            events::STATE_RESTORED,
            "Restore",
            message,
        ));
    } else {
        let message = format!(
            "Job {job} could not restore the backup of state serial {serial_text}; it is not tried again. \
             To retry, remove {}, then set it again",
            annotations::RESTORE_STATE
        );
        draft.set(
            conditions::RESTORE_JOB_SUCCEEDED,
            &ConditionValue {
                status: ConditionStatus::False,
                reason: reasons::RESTORE_FAILED,
                message: message.clone(),
            },
        );
        evs.push(PendingEvent::new(
            true,
            events::STATE_RESTORE_FAILED,
            "Restore",
            message,
        ));
    }
}

#[cfg(test)]
#[path = "bookkeeping_tests.rs"]
mod tests;
