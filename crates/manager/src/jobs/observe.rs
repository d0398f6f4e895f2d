//! What a Job and its Pod say about a run: the op, attempt, outcome and the
//! runner's result document, read from the Job's labels, conditions and
//! annotations and the `source` container's termination message. Pure over
//! the objects the caller fetched.

use std::time::SystemTime;

use captf_api::names::{annotations, labels};
use captf_contract::result::{ErrorKind, MAX_RESULT_BYTES, ResultDoc};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use crate::engine::decide::Op;
use crate::engine::history::{JobRecord, JobSignals, Outcome, classify};

/// Why a finished Job's result could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultError {
    #[error("the runner left no result")]
    NoResult,
    #[error("the result was cut at {MAX_RESULT_BYTES} bytes")]
    Truncated,
    #[error("the result is not a version 1 result document")]
    Invalid,
}

/// Parses a termination message as a result document.
pub fn parse_result(message: Option<&str>) -> Result<ResultDoc, ResultError> {
    let text = message
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .ok_or(ResultError::NoResult)?;
    match serde_json::from_str::<ResultDoc>(text) {
        Ok(doc) if doc.version == 1 => Ok(doc),
        Ok(_) => Err(ResultError::Invalid),
        Err(_) if text.len() >= MAX_RESULT_BYTES => Err(ResultError::Truncated),
        Err(_) => Err(ResultError::Invalid),
    }
}

pub(crate) fn error_kind_name(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ImageLayout => "image-layout",
        ErrorKind::Step => "step",
        ErrorKind::Interrupted => "interrupted",
        ErrorKind::Blocked => "blocked",
        ErrorKind::PlanChanged => "plan-changed",
    }
}

/// The `source` container's termination message, and whether it could not
/// pull its image.
pub fn source_container(pod: &Pod) -> (Option<String>, bool) {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    let Some(source) = statuses.and_then(|cs| cs.iter().find(|c| c.name == "source")) else {
        return (None, false);
    };
    let state = source.state.as_ref();
    let message = state
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.message.clone());
    let pull_failed = state
        .and_then(|s| s.waiting.as_ref())
        .and_then(|w| w.reason.as_deref())
        .is_some_and(|r| matches!(r, "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName"));
    (message, pull_failed)
}

/// Whether the `source` container ever ran (its entrypoint is the runner):
/// it runs, or it terminated.
pub fn runner_started(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == "source"))
        .and_then(|c| c.state.as_ref())
        .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
}

/// When the `source` container (the runner) started, if it did.
pub fn runner_started_at(pod: &Pod) -> Option<SystemTime> {
    let state = pod
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == "source")?
        .state
        .as_ref()?;
    let at = state
        .running
        .as_ref()
        .and_then(|r| r.started_at.as_ref())
        .or_else(|| {
            state
                .terminated
                .as_ref()
                .and_then(|t| t.started_at.as_ref())
        })?;
    Some(SystemTime::from(at.0))
}

/// The `source` container's `imageID`, when the runtime reported one.
pub fn source_image_id(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == "source")
        .map(|c| c.image_id.clone())
        .filter(|id| !id.is_empty())
}

/// A Job has a true `Complete` or `Failed` condition.
pub fn job_finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

fn op_of(job: &Job) -> Option<Op> {
    let label = job.metadata.labels.as_ref()?.get(labels::JOB_OP)?;
    Op::ALL.into_iter().find(|op| op.as_str() == label)
}

/// A Job of ours, as bookkeeping sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedJob {
    pub record: JobRecord,
    /// The result document, when one was read.
    pub result: Option<ResultDoc>,
    pub result_error: Option<ResultError>,
    pub image_pull_failed: bool,
    /// The `source` container's `imageID` (`repo@sha256:...`), when its pod
    /// was read: the digest an apply pins.
    pub image_id: Option<String>,
    /// A finished Job's pod was read (`false`: it is gone, or the Job was
    /// bookkept and its pod is never read again).
    pub pod_seen: bool,
    /// Its runner started (the `source` container ran).
    pub runner_started: bool,
    /// When its runner started, when the pod said so.
    pub runner_started_at: Option<SystemTime>,
    /// Lock evidence (a failed apply with neither pod nor result): the state
    /// lock Lease is as it was when the Job was created, so the runtime
    /// never locked the state and never ran. Set by the caller that read
    /// the Lease (see [`needs_lock_evidence`]).
    pub lock_untouched: bool,
}

/// The lock version an observed Job was created with, when only lock
/// evidence can tell whether it ran: a failed apply with no pod and no
/// result that recorded the version.
pub fn needs_lock_evidence<'a>(o: &ObservedJob, job: &'a Job) -> Option<&'a str> {
    let failed = matches!(
        o.record.outcome,
        Outcome::Failed | Outcome::DeadlineExceeded | Outcome::Interrupted
    );
    if o.record.op != Op::Apply || !failed || o.pod_seen || o.result.is_some() {
        return None;
    }
    job.metadata
        .annotations
        .as_ref()?
        .get(annotations::STATE_LOCK_VERSION)
        .map(String::as_str)
}

impl ObservedJob {
    /// An apply that failed without telling what it did: no readable result
    /// although its runner started, or its pod is gone (an OOM kill, a lost
    /// node) and the state lock changed since the Job was created; or one
    /// that failed in its apply step, where the runtime may have created
    /// resources before it could save them. It may have changed
    /// infrastructure that no state records (the object is held only when
    /// no state exists). An apply whose image never pulled, or whose lock
    /// was never touched, ran nothing.
    pub fn outcome_unknown(&self) -> bool {
        let failed = matches!(
            self.record.outcome,
            Outcome::Failed | Outcome::DeadlineExceeded | Outcome::Interrupted
        );
        if self.record.op != Op::Apply || !failed {
            return false;
        }
        let Some(result) = &self.result else {
            return !self.image_pull_failed
                && (self.runner_started || (!self.pod_seen && !self.lock_untouched));
        };
        result
            .error
            .as_ref()
            .is_some_and(|e| e.step.as_deref() == Some("apply"))
    }
}

/// Observes `job` and, when it finished and was not bookkept yet, its newest
/// `pod`. `None` for a Job without a valid op label (not ours to count).
pub fn observe(job: &Job, pod: Option<&Pod>) -> Option<ObservedJob> {
    let op = op_of(job)?;
    let meta = &job.metadata;
    let ann = meta.annotations.clone().unwrap_or_default();
    let attempt = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::JOB_ATTEMPT))
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let status = job.status.as_ref();
    let condition = |type_: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_ && c.status == "True"))
    };
    let complete = condition("Complete");
    let failed = condition("Failed");
    let finished: Option<SystemTime> = complete
        .and_then(|_| status.and_then(|s| s.completion_time.as_ref()))
        .or_else(|| complete.and_then(|c| c.last_transition_time.as_ref()))
        .or_else(|| failed.and_then(|c| c.last_transition_time.as_ref()))
        .map(|t| SystemTime::from(t.0));
    let created = meta
        .creation_timestamp
        .as_ref()
        .map_or(SystemTime::UNIX_EPOCH, |t| SystemTime::from(t.0));

    let (message, image_pull_failed) = pod.map(source_container).unwrap_or((None, false));
    let (result, result_error) = match (finished.is_some(), pod) {
        (true, Some(_)) => match parse_result(message.as_deref()) {
            Ok(doc) => (Some(doc), None),
            Err(e) => (None, Some(e)),
        },
        _ => (None, None),
    };

    // A bookkept Job's classification lives in its annotations: its pod is
    // never read again.
    let bookkept = ann.contains_key(annotations::BOOKKEPT);
    let outcome = if bookkept && failed.is_some() {
        [
            (annotations::INTERRUPTED, Outcome::Interrupted),
            (annotations::DESTRUCTIVE_PLAN_BLOCKED, Outcome::Blocked),
            (annotations::PLAN_CHANGED, Outcome::PlanChanged),
        ]
        .into_iter()
        .find(|(key, _)| ann.contains_key(*key))
        .map(|(_, o)| o)
        .unwrap_or(
            if failed.and_then(|c| c.reason.as_deref()) == Some("DeadlineExceeded") {
                Outcome::DeadlineExceeded
            } else {
                Outcome::Failed
            },
        )
    } else if bookkept && complete.is_some() && ann.contains_key(annotations::PLAN_UNREADABLE) {
        Outcome::PlanUnreadable
    } else {
        let error_kind = result
            .as_ref()
            .and_then(|r| r.error.as_ref())
            .map(|e| error_kind_name(&e.kind));
        classify(JobSignals {
            op,
            complete: complete.is_some(),
            failed: failed.is_some(),
            deadline_exceeded: failed.and_then(|c| c.reason.as_deref()) == Some("DeadlineExceeded"),
            error_kind,
            plan_reported: bookkept || result.as_ref().is_some_and(|r| r.plan.is_some()),
        })
    };
    Some(ObservedJob {
        record: JobRecord {
            name: meta.name.clone().unwrap_or_default(),
            op,
            attempt,
            outcome,
            created,
            finished,
            remediation: ann.contains_key(annotations::DRIFT_REMEDIATION),
        },
        result,
        result_error,
        image_pull_failed,
        image_id: pod.and_then(source_image_id),
        pod_seen: pod.is_some(),
        runner_started: pod.is_some_and(runner_started),
        runner_started_at: pod.and_then(runner_started_at),
        lock_untouched: false,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job(op: &str, conditions: serde_json::Value, annotations: serde_json::Value) -> Job {
        serde_json::from_value(json!({
            "metadata": {
                "name": format!("captf-c-prod-{op}-a2-abcdef"),
                "creationTimestamp": "2026-11-29T10:00:00Z",
                "labels": {
                    "captf.infrastructure.cluster.x-k8s.io/op": op,
                    "captf.infrastructure.cluster.x-k8s.io/attempt": "2"
                },
                "annotations": annotations
            },
            "status": {"conditions": conditions}
        }))
        .unwrap()
    }

    fn pod(message: Option<&str>, waiting: Option<&str>) -> Pod {
        let state = match (message, waiting) {
            (_, Some(reason)) => json!({"waiting": {"reason": reason}}),
            (m, None) => json!({"terminated": {"exitCode": 1, "message": m}}),
        };
        serde_json::from_value(json!({
            "status": {"containerStatuses": [
                {"name": "source", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": state}
            ]}
        }))
        .unwrap()
    }

    fn failed(reason: &str) -> serde_json::Value {
        json!([{"type": "Failed", "status": "True", "reason": reason, "lastTransitionTime": "2026-11-29T10:05:00Z"}])
    }

    fn complete() -> serde_json::Value {
        json!([{"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-29T10:04:00Z"}])
    }

    fn result(kind: Option<&str>) -> String {
        let error = kind.map(|k| json!({"kind": k, "step": null, "tail": ""}));
        json!({"version": 1, "op": "apply", "steps": [], "drift": null, "error": error}).to_string()
    }

    #[test]
    fn results_parse_or_say_why_not() {
        assert_eq!(parse_result(None), Err(ResultError::NoResult));
        assert_eq!(parse_result(Some("  ")), Err(ResultError::NoResult));
        assert_eq!(
            parse_result(Some("{\"version\":2}")),
            Err(ResultError::Invalid)
        );
        assert_eq!(parse_result(Some("not json")), Err(ResultError::Invalid));
        let cut = format!("{{\"version\":1,\"op\":\"{}", "x".repeat(MAX_RESULT_BYTES));
        assert_eq!(parse_result(Some(&cut)), Err(ResultError::Truncated));
        assert_eq!(parse_result(Some(&result(None))).unwrap().op, "apply");
    }

    #[test]
    fn outcomes_come_from_conditions_results_and_marks() {
        let cases: Vec<(Job, Option<Pod>, Outcome)> = vec![
            (job("apply", json!([]), json!({})), None, Outcome::Running),
            (
                job("apply", complete(), json!({})),
                Some(pod(Some(&result(None)), None)),
                Outcome::Succeeded,
            ),
            (
                job("apply", failed("BackoffLimitExceeded"), json!({})),
                Some(pod(Some(&result(Some("blocked"))), None)),
                Outcome::Blocked,
            ),
            (
                job("apply", failed("BackoffLimitExceeded"), json!({})),
                Some(pod(Some(&result(Some("plan-changed"))), None)),
                Outcome::PlanChanged,
            ),
            (
                job("destroy", failed("BackoffLimitExceeded"), json!({})),
                Some(pod(Some(&result(Some("interrupted"))), None)),
                Outcome::Interrupted,
            ),
            (
                job("destroy", failed("DeadlineExceeded"), json!({})),
                Some(pod(Some(&result(Some("interrupted"))), None)),
                Outcome::DeadlineExceeded,
            ),
            (
                job("apply", failed("BackoffLimitExceeded"), json!({})),
                Some(pod(None, None)),
                Outcome::Failed,
            ),
            (
                job("plan", complete(), json!({})),
                Some(pod(Some(&result(None)), None)),
                Outcome::PlanUnreadable,
            ),
            // Bookkept Jobs keep their classification without their pod.
            (
                job(
                    "apply",
                    failed("BackoffLimitExceeded"),
                    json!({"captf.io/bookkept": "true", "captf.io/destructive-plan-blocked": "true"}),
                ),
                None,
                Outcome::Blocked,
            ),
            (
                job(
                    "apply",
                    failed("DeadlineExceeded"),
                    json!({"captf.io/bookkept": "true"}),
                ),
                None,
                Outcome::DeadlineExceeded,
            ),
            (
                job("plan", complete(), json!({"captf.io/bookkept": "true"})),
                None,
                Outcome::Succeeded,
            ),
            (
                job(
                    "plan",
                    complete(),
                    json!({"captf.io/bookkept": "true", "captf.io/plan-unreadable": "true"}),
                ),
                None,
                Outcome::PlanUnreadable,
            ),
        ];
        for (j, p, want) in cases {
            let o = observe(&j, p.as_ref()).unwrap();
            assert_eq!(
                o.record.outcome, want,
                "{:?} {:?}",
                j.metadata.annotations, j.status
            );
            assert_eq!(
                (o.record.op.as_str(), o.record.attempt),
                (
                    j.metadata.labels.unwrap()["captf.infrastructure.cluster.x-k8s.io/op"].as_str(),
                    2
                )
            );
        }
    }

    #[test]
    fn finish_time_remediation_and_pull_failures() {
        let j = job(
            "apply",
            failed("DeadlineExceeded"),
            json!({"captf.io/drift-remediation": "true"}),
        );
        let o = observe(&j, Some(&pod(None, Some("ImagePullBackOff")))).unwrap();
        assert!(o.record.remediation);
        assert!(o.image_pull_failed);
        assert_eq!(o.result_error, Some(ResultError::NoResult));
        let t: k8s_openapi::jiff::Timestamp = "2026-11-29T10:05:00Z".parse().unwrap();
        assert_eq!(o.record.finished, Some(SystemTime::from(t)));
        let mut foreign = j.clone();
        foreign.metadata.labels = None;
        assert_eq!(observe(&foreign, None), None);
    }

    #[test]
    fn an_apply_that_failed_without_a_result_after_its_runner_started_is_of_unknown_outcome() {
        let killed = pod(None, None); // terminated, no message: no result
        let reported = pod(Some(&result(None)), None);
        let pulling = pod(None, Some("ErrImagePull"));
        let step_failed = |step: &str| {
            let doc = json!({"version": 1, "op": "apply", "steps": [],
                "error": {"kind": "step", "step": step, "tail": ""}});
            pod(Some(&doc.to_string()), None)
        };
        let (in_apply, in_plan) = (step_failed("apply"), step_failed("plan"));
        let cases = [
            // (op, conditions, pod, unknown)
            ("apply", failed("BackoffLimitExceeded"), Some(&killed), true),
            ("apply", failed("DeadlineExceeded"), Some(&killed), true),
            // The pod is gone (a lost node): nothing says it did not apply.
            ("apply", failed("BackoffLimitExceeded"), None, true),
            // A result tells what happened.
            (
                "apply",
                failed("BackoffLimitExceeded"),
                Some(&reported),
                false,
            ),
            // The image never pulled: the runner never ran.
            ("apply", failed("DeadlineExceeded"), Some(&pulling), false),
            // The apply step failed: it may have created what it could not
            // save (held only when no state exists). A plan step did not.
            (
                "apply",
                failed("BackoffLimitExceeded"),
                Some(&in_apply),
                true,
            ),
            (
                "apply",
                failed("BackoffLimitExceeded"),
                Some(&in_plan),
                false,
            ),
            (
                "refresh",
                failed("BackoffLimitExceeded"),
                Some(&in_apply),
                false,
            ),
            ("apply", complete(), Some(&reported), false),
            // Only an apply changes infrastructure it may not record.
            (
                "refresh",
                failed("BackoffLimitExceeded"),
                Some(&killed),
                false,
            ),
            (
                "destroy",
                failed("BackoffLimitExceeded"),
                Some(&killed),
                false,
            ),
        ];
        for (op, conditions, pod, want) in cases {
            let o = observe(&job(op, conditions.clone(), json!({})), pod).unwrap();
            assert_eq!(o.outcome_unknown(), want, "{op} {conditions} {pod:?}");
        }
    }

    #[test]
    fn lock_evidence_is_asked_for_failed_applies_with_neither_pod_nor_result() {
        let recorded = json!({"captf.io/state-lock-version": "absent"});
        let killed = pod(None, None);
        let cases = [
            // (op, conditions, annotations, pod, asked)
            ("apply", failed("DeadlineExceeded"), &recorded, None, true),
            // Started before the version was recorded: nothing to compare.
            ("apply", failed("DeadlineExceeded"), &json!({}), None, false),
            // A pod was read: it tells whether the runner started.
            (
                "apply",
                failed("DeadlineExceeded"),
                &recorded,
                Some(&killed),
                false,
            ),
            ("apply", complete(), &recorded, None, false),
            (
                "refresh",
                failed("DeadlineExceeded"),
                &recorded,
                None,
                false,
            ),
        ];
        for (op, conditions, ann, pod, asked) in cases {
            let j = job(op, conditions.clone(), ann.clone());
            let o = observe(&j, pod).unwrap();
            assert_eq!(
                needs_lock_evidence(&o, &j),
                asked.then_some("absent"),
                "{op} {conditions} {ann} {pod:?}"
            );
        }
        // An untouched lock clears the doubt; a changed one (the default,
        // also for a failed read) keeps it.
        let j = job("apply", failed("DeadlineExceeded"), recorded.clone());
        let mut o = observe(&j, None).unwrap();
        assert!(o.outcome_unknown());
        o.lock_untouched = true;
        assert!(!o.outcome_unknown());
    }
}
