//! What runs next: the decision input built from what the pass read, the
//! decision itself (with the deletion end), and the start request of the
//! decided op (which inputs, image, tick and records each op uses). No
//! client here.

use std::collections::BTreeMap;
use std::time::SystemTime;

use captf_api::names::{annotations, conditions, events, reasons};
use kube::ResourceExt;

use super::job_start::StartRequest;
use super::open_pass::OpenPass;
use super::rendered::Rendered;
use super::status::{Draft, system_time};
use super::stored::Stored;
use super::workload::Workload;
use crate::engine::decide::{
    self, Action as Decided, ApplyGate, DecideInput, Decision, DriftView, Op, Reason, RefreshView,
    StateView,
};
use crate::engine::history::{self, last_success};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::records::{InputsRecord, RecordMeta};
use crate::state::backups::RestoreTarget;
use crate::state::reader::{StateError, StateSummary};

/// Which of the two scheduled-check times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CheckTime {
    LastRefresh,
    LastDriftCheck,
}

/// A check's last time: as this pass's bookkeeping set it, else as the
/// object holds it.
fn status_time<K: Workload>(obj: &K, draft: &Draft, which: CheckTime) -> Option<SystemTime> {
    let stamps = draft.stamps();
    let set = match which {
        CheckTime::LastRefresh => stamps.last_refresh,
        CheckTime::LastDriftCheck => stamps.last_drift_check,
    };
    if let Some(t) = set {
        return t;
    }
    let s = obj.workspace_status()?;
    let t = match which {
        CheckTime::LastRefresh => s.last_refresh.as_ref(),
        CheckTime::LastDriftCheck => s.last_drift_check.as_ref(),
    };
    t.map(system_time)
}

/// `ApplyJobSucceeded` of an object that has no apply of its own yet but
/// whose state (adopted after a Retain, or moved with it) was applied from
/// exactly the inputs it has now (`current_hash`: the rendered inputs, or a
/// provisioned machine's pinned ones): nothing is due, so say it is applied.
pub fn settle_adopted_state(
    p: &OpenPass,
    status: &mut Draft,
    read: &Result<StateSummary, StateError>,
    current_hash: Option<&str>,
) {
    let no_apply_yet = status
        .get(conditions::APPLY_JOB_SUCCEEDED)
        .is_none_or(|c| c.reason == reasons::NO_APPLY_YET);
    let no_jobs = !p
        .loaded
        .observed
        .iter()
        .any(|o| matches!(o.record.op, Op::Apply | Op::Plan | Op::Destroy));
    let state_hash = read.as_ref().ok().and_then(|s| s.inputs_hash.as_deref());
    if no_apply_yet && no_jobs && current_hash.is_some() && current_hash == state_hash {
        status.set(
            conditions::APPLY_JOB_SUCCEEDED,
            &ConditionValue {
                status: ConditionStatus::True,
                reason: reasons::APPLY_SUCCEEDED,
                message: "the state was applied from the current inputs; no Job was needed".into(),
            },
        );
    }
}

/// What the outputs told the decision.
#[derive(Debug, Clone, Copy, Default)]
pub struct OutputsSeen {
    pub provisioned: bool,
    /// The module's health reads `pending`.
    pub health_pending: bool,
    /// The apply's own outputs gave a definite health reading: no refresh
    /// after it is owed.
    pub definite: bool,
}

/// The decision of this pass, with the deletion end: a deleting object
/// whose destroy succeeded (after its last apply) is released.
#[allow(clippy::too_many_arguments)]
pub fn decide_op<K: Workload>(
    obj: &K,
    p: &OpenPass,
    status: &Draft,
    stored: &Stored,
    current: Option<&Rendered>,
    gate: ApplyGate,
    seen: OutputsSeen,
    now: SystemTime,
) -> Decision {
    let OutputsSeen {
        provisioned,
        health_pending,
        definite,
    } = seen;
    let records = p.loaded.records();
    let destroyed = last_success(&records, Op::Destroy);
    if p.deleting() && destroyed.is_some() && destroyed >= last_success(&records, Op::Apply) {
        return Decision {
            action: Decided::DropFinalizer,
            reason: Reason::Deleting,
            backoff: false,
            requeue: None,
        };
    }
    let ever_applied = provisioned || last_success(&records, Op::Apply).is_some();
    let unconfirmed_apply = stored.unconfirmed_apply.is_some();
    let mut state = state_view(&stored.read, ever_applied, unconfirmed_apply);
    state.held |= stored.origin_unknown;
    let last_check = status_time(obj, status, CheckTime::LastDriftCheck);
    let last_refresh = status_time(obj, status, CheckTime::LastRefresh);
    let last_apply_success = last_success(&records, Op::Apply);
    let input = DecideInput {
        now,
        uid: obj.uid().unwrap_or_default(),
        created: obj
            .meta()
            .creation_timestamp
            .as_ref()
            .map_or(now, system_time),
        mutable: p.shared.mutable,
        deleting: p.deleting(),
        retain: p.shared.retain,
        job_active: false,
        restore_requested: stored.restore.is_some(),
        state,
        current_hash: current.map(|c| c.hash.clone()),
        unconfirmed_apply,
        last_apply_failed: history::last_apply_failed(&records),
        last_apply_success,
        failed_limit: p.shared.jobs.failed_jobs_history_limit.max(1) as u32,
        history: history::history(&records),
        gate,
        drift: DriftView {
            interval: p.shared.drift_interval,
            last_check,
            detected: status.is_true(conditions::DRIFT_DETECTED),
            remediate: p.shared.drift_remediate,
            remediation_failures: history::remediation_failures(&records, last_check),
        },
        refresh: RefreshView {
            last: last_refresh,
            after_apply_due: p.shared.after_apply_refresh
                && !definite
                && last_apply_success.is_some_and(|a| last_refresh.is_none_or(|r| r < a)),
            health_pending,
            pending_refreshes: obj
                .workspace_status()
                .and_then(|s| s.pending_refreshes)
                .unwrap_or(0)
                .max(0) as u32,
            health_interval: p.shared.health_interval,
        },
        membership: p.shared.membership.clone(),
    };
    decide::decide(&input)
}

/// What the decision sees of the state: whether it exists, whether it is
/// held (lost, unreadable, or possibly missing what an apply of unknown
/// outcome made), and the inputs hash it was applied from.
fn state_view(
    read: &Result<StateSummary, StateError>,
    ever_applied: bool,
    unconfirmed_apply: bool,
) -> StateView {
    match read {
        // The empty state the backend writes at `init` records nothing an
        // apply of unknown outcome did: held as if there were none.
        Ok(s) => StateView {
            exists: true,
            held: s.records_nothing() && !ever_applied && unconfirmed_apply,
            inputs_hash: s.inputs_hash.clone(),
        },
        // No state after an apply of unknown outcome: held like a lost
        // state (ApplyOutcomeUnknown), never applied again blindly.
        Err(StateError::NotFound) => StateView {
            exists: false,
            held: ever_applied || unconfirmed_apply,
            inputs_hash: None,
        },
        Err(_) => StateView {
            exists: true,
            held: true,
            inputs_hash: None,
        },
    }
}

/// How a decision ends the pass of a machine or a pool.
#[derive(Debug)]
pub enum DecidedEnding {
    /// The pass ends this way (close with the requeue, release, retain).
    Ends(super::ending::PassEnding),
    /// Start this Job.
    Start(Box<StartRequest>),
    /// `op` is due but its inputs are missing (no current inputs, no record).
    Unstartable(Op),
}

/// What `decision` makes of the pass: the Job it starts (with its request
/// built from the current inputs or the records), or how it ends.
/// `inputs_wait` is the requeue of an apply waiting for its inputs.
pub fn decided_ending<K: Workload>(
    obj: &K,
    p: &OpenPass,
    status: &Draft,
    stored: &Stored,
    decision: &Decision,
    current: Option<&Rendered>,
    inputs_wait: std::time::Duration,
) -> DecidedEnding {
    use super::ending::PassEnding;
    let (op, remediation) = match decision.action {
        Decided::Start {
            op, remediation, ..
        } => (op, remediation),
        Decided::DropFinalizer => return DecidedEnding::Ends(PassEnding::Release),
        Decided::Retain => return DecidedEnding::Ends(PassEnding::Retain),
        Decided::Wait => return DecidedEnding::Ends(PassEnding::Close(decision.requeue)),
    };
    if op == Op::Apply && current.is_none() {
        return DecidedEnding::Ends(PassEnding::Close(Some(inputs_wait)));
    }
    match start_request(obj, p, status, stored, op, remediation, current) {
        Some(req) => DecidedEnding::Start(Box::new(req)),
        None => DecidedEnding::Unstartable(op),
    }
}

fn rfc3339(t: Option<SystemTime>) -> String {
    t.map(|t| super::status::time(t).0.to_string())
        .unwrap_or_default()
}

/// What a Job of one operation renders and runs.
struct RunInputs {
    files: (String, String),
    hash: String,
    image: String,
    tick: String,
    /// The attempt record an apply writes before its Job.
    record: Option<InputsRecord>,
}

/// The request for starting `op`, or `None` when its inputs are missing.
pub fn start_request<K: Workload>(
    obj: &K,
    p: &OpenPass,
    status: &Draft,
    stored: &Stored,
    op: Op,
    remediation: bool,
    current: Option<&Rendered>,
) -> Option<StartRequest> {
    let (applied, attempt) = (stored.applied.as_ref(), stored.attempt.as_ref());
    let state_hash = stored
        .read
        .as_ref()
        .ok()
        .and_then(|s| s.inputs_hash.clone());
    let recorded = applied.or(attempt);
    // What a destroy, refresh or drift check renders when it does not
    // render the current inputs.
    let described = InputsRecord::describing_state(applied, attempt, state_hash.as_deref());
    let mut warnings = Vec::new();
    let run = match op {
        Op::Apply | Op::Plan => {
            let tick = if remediation {
                format!(
                    "remediate/{}",
                    rfc3339(status_time(obj, status, CheckTime::LastDriftCheck))
                )
            } else {
                String::new()
            };
            apply_inputs(p, op, current?, tick, applied, attempt)
        }
        Op::Refresh | Op::Drift => {
            let key = if op == Op::Refresh {
                CheckTime::LastRefresh
            } else {
                CheckTime::LastDriftCheck
            };
            let tick = rfc3339(status_time(obj, status, key));
            refresh_inputs(p, current, described, state_hash, tick)?
        }
        Op::Destroy => {
            let (run, mismatch) = destroy_inputs(current, described, state_hash)?;
            warnings.extend(mismatch);
            run
        }
        Op::Restore => restore_inputs(stored.restore.as_ref()?, current, recorded)?,
    };
    let source = if op == Op::Restore {
        recorded
    } else {
        described
    };
    let (image, fallbacks) = pull_candidates(op, run.image, source, current, attempt);
    Some(StartRequest {
        op,
        approval: None,
        remediation,
        files: run.files,
        inputs_hash: run.hash,
        tick: run.tick,
        image,
        attempt_record: run.record,
        guard: None,
        plan_key_secret: None,
        cluster_name: p.shared.cluster_name.clone(),
        jobs: p.shared.jobs.clone(),
        credentials_secret: p.credentials_secret.clone(),
        annotations: start_annotations(stored.unconfirmed_apply.as_deref(), op, &fallbacks),
        force_unlock: None,
        restore: (op == Op::Restore)
            .then(|| stored.restore.clone())
            .flatten(),
        warnings,
    })
}

/// An apply or plan renders the current inputs; an apply records them as
/// its attempt first.
fn apply_inputs(
    p: &OpenPass,
    op: Op,
    cur: &Rendered,
    tick: String,
    applied: Option<&InputsRecord>,
    attempt: Option<&InputsRecord>,
) -> RunInputs {
    let identity = p.shared.identity.as_ref();
    let record = (op == Op::Apply).then(|| InputsRecord {
        main_tf_json: cur.files.0.clone(),
        tfvars_json: cur.files.1.clone(),
        meta: RecordMeta {
            inputs_hash: cur.hash.clone(),
            image: cur.image.clone(),
            image_digest: None,
            identity: identity.map(|i| i.name.clone()),
            identity_kind: identity.and_then(|i| i.kind).map(|k| {
                serde_json::to_value(k)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            }),
            job: None,
            // An unknown outcome stays on record until this apply (or a
            // later one) succeeds.
            unconfirmed_apply: InputsRecord::unconfirmed_in_force(attempt, applied),
            // A new apply starts a new list: its success pins a digest
            // again.
            unpullable_images: Vec::new(),
        },
        exports: Default::default(),
    });
    RunInputs {
        files: cur.files.clone(),
        hash: cur.hash.clone(),
        image: cur.image.clone(),
        tick,
        record,
    }
}

/// A refresh or drift check renders the current inputs when they may
/// change under the state (`mutable`), else the inputs the state was
/// applied from.
fn refresh_inputs(
    p: &OpenPass,
    current: Option<&Rendered>,
    described: Option<&InputsRecord>,
    state_hash: Option<String>,
    tick: String,
) -> Option<RunInputs> {
    let (files, image) = match (current, described) {
        (Some(cur), rec) if p.shared.mutable => (
            cur.files.clone(),
            rec.map(InputsRecord::pinned_image)
                .unwrap_or_else(|| cur.image.clone()),
        ),
        (_, Some(r)) => (
            (r.main_tf_json.clone(), r.tfvars_json.clone()),
            r.pinned_image(),
        ),
        (Some(cur), None) => (cur.files.clone(), cur.image.clone()),
        (None, None) => return None,
    };
    let hash = state_hash
        .or_else(|| current.map(|c| c.hash.clone()))
        .unwrap_or_default();
    Some(RunInputs {
        files,
        hash,
        image,
        tick,
        record: None,
    })
}

/// A destroy renders the inputs the state was applied from (the current
/// ones when none are on record), with a warning when those differ from
/// the state's own.
fn destroy_inputs(
    current: Option<&Rendered>,
    described: Option<&InputsRecord>,
    state_hash: Option<String>,
) -> Option<(RunInputs, Option<(&'static str, String)>)> {
    let (files, image, rec_hash) = match (described, current) {
        (Some(r), _) => (
            (r.main_tf_json.clone(), r.tfvars_json.clone()),
            r.pinned_image(),
            r.meta.inputs_hash.clone(),
        ),
        (None, Some(cur)) => (cur.files.clone(), cur.image.clone(), cur.hash.clone()),
        (None, None) => return None,
    };
    let mismatch = state_hash.as_ref().filter(|h| **h != rec_hash).map(|state| {
        let source = match described.and_then(|r| r.meta.job.as_deref()) {
            Some(job) => format!("the inputs of Job {job}"),
            None => "the current inputs".to_owned(),
        };
        (
            events::DESTROY_INPUTS_MISMATCH,
            format!(
                "the state was applied from inputs {state}; the destroy renders {source}, inputs {rec_hash}"
            ),
        )
    });
    let run = RunInputs {
        files,
        hash: state_hash.unwrap_or(rec_hash),
        image,
        tick: String::new(),
        record: None,
    };
    Some((run, mismatch))
}

/// A restore renders the backend alone, with the module image the state
/// was applied with (its runtime).
fn restore_inputs(
    target: &RestoreTarget,
    current: Option<&Rendered>,
    recorded: Option<&InputsRecord>,
) -> Option<RunInputs> {
    let image = recorded
        .map(InputsRecord::pinned_image)
        .or_else(|| current.map(|c| c.image.clone()))?;
    let root = captf_contract::render_backend_root();
    Some(RunInputs {
        files: (root.main_tf_json, root.tfvars_json),
        hash: target.inputs_hash.clone(),
        image,
        tick: format!("restore/{}", target.set),
        record: None,
    })
}

/// The Job's annotations: the interrupted apply an apply follows, and the
/// images left to try when the first cannot be pulled.
fn start_annotations(
    unconfirmed_apply: Option<&str>,
    op: Op,
    fallbacks: &[String],
) -> BTreeMap<String, String> {
    let mut annotations = match (unconfirmed_apply, op) {
        (Some(job), Op::Apply) => BTreeMap::from([(
            annotations::AFTER_INTERRUPTED_APPLY.to_owned(),
            job.to_owned(),
        )]),
        _ => BTreeMap::new(),
    };
    if !fallbacks.is_empty() {
        annotations.insert(
            annotations::IMAGE_FALLBACKS.to_owned(),
            serde_json::to_string(fallbacks).expect("strings serialize"),
        );
    }
    annotations
}

/// The image a Job of `op` runs and the images left to try after it. Apply
/// and plan run the spec's image as written; the other ops run the first
/// of the pinned digest, the recorded tag and the spec's reference that the
/// attempt record does not list as unpullable.
fn pull_candidates(
    op: Op,
    image: String,
    recorded: Option<&InputsRecord>,
    current: Option<&Rendered>,
    attempt: Option<&InputsRecord>,
) -> (String, Vec<String>) {
    use crate::jobs::recovery::{candidates, image_choice};
    if matches!(op, Op::Apply | Op::Plan) {
        return (image, Vec::new());
    }
    let pinned = recorded
        .filter(|r| r.meta.image_digest.is_some())
        .map(InputsRecord::pinned_image);
    let spec = current.map_or(image.as_str(), |c| c.image.as_str());
    let candidates = candidates(
        pinned.as_deref(),
        recorded.map(|r| r.meta.image.as_str()),
        spec,
    );
    let unpullable = attempt.map_or(&[][..], |a| a.meta.unpullable_images.as_slice());
    image_choice(&candidates, unpullable).unwrap_or((image, Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(resources: usize) -> Result<StateSummary, StateError> {
        Ok(StateSummary {
            serial: 1,
            lineage: "l".into(),
            runtime_version: "1.9.0".into(),
            outputs: Default::default(),
            managed_resources: resources,
            compressed_bytes: 10,
            inputs_hash: Some("h".into()),
        })
    }

    #[test]
    fn the_state_is_held_when_lost_unreadable_or_empty_after_an_unknown_apply() {
        let missing = Err(StateError::NotFound);
        let corrupt = Err(StateError::Corrupt("x".into()));
        // (read, ever applied, unconfirmed apply) -> (exists, held)
        let cases = [
            (state(0), false, false, true, false),
            (state(0), false, true, true, true),
            (state(0), true, true, true, false),
            (state(3), false, true, true, false),
            (missing.clone(), false, false, false, false),
            (missing.clone(), true, false, false, true),
            (missing, false, true, false, true),
            (corrupt, false, false, true, true),
        ];
        for (read, ever_applied, unconfirmed, exists, held) in cases {
            let v = state_view(&read, ever_applied, unconfirmed);
            assert_eq!(
                (v.exists, v.held),
                (exists, held),
                "{read:?} ever_applied={ever_applied} unconfirmed={unconfirmed}"
            );
        }
    }
}
