//! The conditions that report Job outcomes: `ApplyJobSucceeded` from the
//! newest apply, plan or destroy Job, and `DriftJobSucceeded` from the
//! newest refresh or drift Job. Pure over what bookkeeping learned.

use captf_api::names::reasons;

use super::decide::Op;
use super::history::Outcome;

/// A condition's status, as Kubernetes spells it: the contract's own type,
/// so a module's health verdict needs no translation.
pub use captf_contract::health::ConditionStatus;

/// A condition's status, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionValue {
    pub status: ConditionStatus,
    pub reason: &'static str,
    pub message: String,
}

impl ConditionValue {
    fn new(status: ConditionStatus, reason: &'static str, message: impl Into<String>) -> Self {
        ConditionValue {
            status,
            reason,
            message: message.into(),
        }
    }
}

/// What bookkeeping learned about one finished Job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinishedRun<'a> {
    pub job: &'a str,
    pub op: Op,
    pub outcome: Outcome,
    /// `error.kind` of the result document.
    pub error_kind: Option<&'a str>,
    /// The step that failed, from the result document.
    pub failed_step: Option<&'a str>,
    /// The first resource the failure names.
    pub first_resource: Option<&'a str>,
    /// The pod's source container could not pull its image.
    pub image_pull_failed: bool,
}

fn failure_message(run: &FinishedRun<'_>) -> String {
    match (run.failed_step, run.first_resource) {
        (Some(step), Some(resource)) => format!("Job {}: step {step} failed: {resource}", run.job),
        (Some(step), None) => format!("Job {}: step {step} failed", run.job),
        _ => format!("Job {}", run.job),
    }
}

/// `ApplyJobSucceeded` from the newest finished apply, plan or destroy Job
/// (a plan stands for the apply it plans). `None`: nothing finished yet.
/// Default requeue of a start refused for its merged Job policy.
pub const JOB_POLICY_REQUEUE: std::time::Duration = std::time::Duration::from_secs(600);

/// `ApplyJobSucceeded=False/JobPolicyInvalid` when the merged policy lets
/// the lock wait outlast the Job's deadline (whatever op is due); destroy
/// and restore are exempt, so a deletion or a recovery never waits on it.
pub fn job_policy_invalid(
    jobs: &captf_api::effective::EffectiveJobPolicy,
    op: Op,
) -> Option<ConditionValue> {
    if matches!(op, Op::Destroy | Op::Restore) || jobs.lock_timeout_within_deadline() {
        return None;
    }
    Some(ConditionValue {
        status: ConditionStatus::False,
        reason: reasons::JOB_POLICY_INVALID,
        message: format!(
            "the merged Job policy waits up to lockTimeoutSeconds {} for the state lock, not below its activeDeadlineSeconds {}: \
             lower spec.jobs.lockTimeoutSeconds or raise activeDeadlineSeconds (the object's own, or the cluster's spec.defaults.jobs)",
            jobs.lock_timeout_seconds, jobs.active_deadline_seconds
        ),
    })
}

pub fn apply_job_succeeded(newest: Option<&FinishedRun<'_>>) -> ConditionValue {
    let Some(run) = newest else {
        return ConditionValue::new(
            ConditionStatus::Unknown,
            reasons::NO_APPLY_YET,
            "no apply has completed yet",
        );
    };
    let destroy = run.op == Op::Destroy;
    match run.outcome {
        Outcome::Running => ConditionValue::new(
            ConditionStatus::Unknown,
            reasons::NO_APPLY_YET,
            "no apply has completed yet",
        ),
        Outcome::Succeeded if destroy => ConditionValue::new(
            ConditionStatus::True,
            reasons::DESTROY_SUCCEEDED,
            format!("Job {}", run.job),
        ),
        Outcome::Succeeded => ConditionValue::new(
            ConditionStatus::True,
            reasons::APPLY_SUCCEEDED,
            format!("Job {}", run.job),
        ),
        Outcome::Blocked => ConditionValue::new(
            ConditionStatus::False,
            reasons::DESTRUCTIVE_PLAN_BLOCKED,
            format!(
                "Job {} stopped before a plan that deletes or replaces resources",
                run.job
            ),
        ),
        Outcome::PlanChanged => ConditionValue::new(
            ConditionStatus::Unknown,
            reasons::PLAN_CHANGED,
            format!(
                "Job {} planned other changes than the approved plan and changed nothing",
                run.job
            ),
        ),
        // An image that cannot be pulled is named before the deadline it caused.
        _ if run.image_pull_failed => ConditionValue::new(
            ConditionStatus::False,
            reasons::IMAGE_PULL_FAILED,
            format!("Job {}: the module image could not be pulled", run.job),
        ),
        Outcome::DeadlineExceeded => ConditionValue::new(
            ConditionStatus::False,
            reasons::JOB_DEADLINE_EXCEEDED,
            format!("Job {} exceeded activeDeadlineSeconds", run.job),
        ),
        _ if run.error_kind == Some("image-layout") => ConditionValue::new(
            ConditionStatus::False,
            reasons::IMAGE_INVALID,
            format!(
                "Job {}: the image does not follow the image contract",
                run.job
            ),
        ),
        _ if destroy => ConditionValue::new(
            ConditionStatus::False,
            reasons::DESTROY_FAILED,
            failure_message(run),
        ),
        _ => ConditionValue::new(
            ConditionStatus::False,
            reasons::APPLY_FAILED,
            failure_message(run),
        ),
    }
}

/// `DriftJobSucceeded` from the newest refresh or drift Job.
pub fn drift_job_succeeded(
    newest: Option<&FinishedRun<'_>>,
    drift_enabled: bool,
) -> ConditionValue {
    let not_checked = || {
        let why = if drift_enabled {
            "no refresh or drift check has completed yet"
        } else {
            "drift detection is off"
        };
        ConditionValue::new(ConditionStatus::Unknown, reasons::DRIFT_NOT_CHECKED, why)
    };
    let Some(run) = newest else {
        return not_checked();
    };
    match run.outcome {
        Outcome::Running => ConditionValue::new(
            ConditionStatus::Unknown,
            reasons::DRIFT_JOB_RUNNING,
            format!("Job {} is running", run.job),
        ),
        Outcome::Succeeded => ConditionValue::new(
            ConditionStatus::True,
            reasons::DRIFT_CHECKED,
            format!("Job {}", run.job),
        ),
        Outcome::DeadlineExceeded => ConditionValue::new(
            ConditionStatus::False,
            reasons::DRIFT_JOB_DEADLINE_EXCEEDED,
            format!("Job {} exceeded activeDeadlineSeconds", run.job),
        ),
        _ => ConditionValue::new(
            ConditionStatus::False,
            reasons::DRIFT_JOB_FAILED,
            failure_message(run),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(op: Op, outcome: Outcome) -> FinishedRun<'static> {
        FinishedRun {
            job: "captf-c-prod-apply-a3-abcdef",
            op,
            outcome,
            error_kind: None,
            failed_step: None,
            first_resource: None,
            image_pull_failed: false,
        }
    }

    #[test]
    fn apply_job_succeeded_table() {
        let failed_step = FinishedRun {
            error_kind: Some("step"),
            failed_step: Some("apply"),
            first_resource: Some("oci_core_instance_pool.this"),
            ..run(Op::Apply, Outcome::Failed)
        };
        let layout = FinishedRun {
            error_kind: Some("image-layout"),
            ..run(Op::Apply, Outcome::Failed)
        };
        let pull_then_deadline = FinishedRun {
            image_pull_failed: true,
            ..run(Op::Apply, Outcome::DeadlineExceeded)
        };
        let cases: Vec<(Option<FinishedRun>, &str, &str, &str)> = vec![
            (None, "Unknown", "NoApplyYet", "no apply has completed yet"),
            (
                Some(run(Op::Apply, Outcome::Succeeded)),
                "True",
                "ApplySucceeded",
                "Job captf-c-prod-apply-a3-abcdef",
            ),
            (
                Some(run(Op::Plan, Outcome::Succeeded)),
                "True",
                "ApplySucceeded",
                "Job captf-c-prod-apply-a3-abcdef",
            ),
            (
                Some(run(Op::Destroy, Outcome::Succeeded)),
                "True",
                "DestroySucceeded",
                "Job captf-c-prod-apply-a3-abcdef",
            ),
            (
                Some(failed_step),
                "False",
                "ApplyFailed",
                "Job captf-c-prod-apply-a3-abcdef: step apply failed: oci_core_instance_pool.this",
            ),
            (
                Some(run(Op::Destroy, Outcome::Failed)),
                "False",
                "DestroyFailed",
                "Job captf-c-prod-apply-a3-abcdef",
            ),
            (
                Some(run(Op::Apply, Outcome::Interrupted)),
                "False",
                "ApplyFailed",
                "Job captf-c-prod-apply-a3-abcdef",
            ),
            (
                Some(layout),
                "False",
                "ImageInvalid",
                "Job captf-c-prod-apply-a3-abcdef: the image does not follow the image contract",
            ),
            (
                Some(pull_then_deadline),
                "False",
                "ImagePullFailed",
                "Job captf-c-prod-apply-a3-abcdef: the module image could not be pulled",
            ),
            (
                Some(run(Op::Apply, Outcome::DeadlineExceeded)),
                "False",
                "JobDeadlineExceeded",
                "Job captf-c-prod-apply-a3-abcdef exceeded activeDeadlineSeconds",
            ),
            (
                Some(run(Op::Apply, Outcome::Blocked)),
                "False",
                "DestructivePlanBlocked",
                "Job captf-c-prod-apply-a3-abcdef stopped before a plan that deletes or replaces resources",
            ),
            (
                Some(run(Op::Apply, Outcome::PlanChanged)),
                "Unknown",
                "PlanChanged",
                "Job captf-c-prod-apply-a3-abcdef planned other changes than the approved plan and changed nothing",
            ),
        ];
        for (input, status, reason, message) in cases {
            let c = apply_job_succeeded(input.as_ref());
            assert_eq!(
                (c.status.as_str(), c.reason, c.message.as_str()),
                (status, reason, message),
                "{input:?}"
            );
        }
    }

    #[test]
    fn drift_job_succeeded_table() {
        let cases: Vec<(Option<FinishedRun>, bool, &str, &str)> = vec![
            (None, true, "Unknown", "DriftNotChecked"),
            (None, false, "Unknown", "DriftNotChecked"),
            (
                Some(run(Op::Drift, Outcome::Running)),
                true,
                "Unknown",
                "DriftJobRunning",
            ),
            (
                Some(run(Op::Refresh, Outcome::Succeeded)),
                true,
                "True",
                "DriftChecked",
            ),
            (
                Some(run(Op::Drift, Outcome::DeadlineExceeded)),
                true,
                "False",
                "DriftJobDeadlineExceeded",
            ),
            (
                Some(run(Op::Drift, Outcome::Failed)),
                true,
                "False",
                "DriftJobFailed",
            ),
        ];
        for (input, enabled, status, reason) in cases {
            let c = drift_job_succeeded(input.as_ref(), enabled);
            assert_eq!((c.status.as_str(), c.reason), (status, reason), "{input:?}");
        }
        assert_eq!(
            drift_job_succeeded(None, false).message,
            "drift detection is off"
        );
    }

    #[test]
    fn a_lock_wait_that_outlasts_the_deadline_refuses_every_op_but_destroy_and_restore() {
        let mut jobs = captf_api::effective::job_policy(None, None);
        assert_eq!(
            job_policy_invalid(&jobs, Op::Apply),
            None,
            "the defaults fit"
        );
        jobs.lock_timeout_seconds = 600;
        jobs.active_deadline_seconds = 600;
        for op in Op::ALL {
            let refused = job_policy_invalid(&jobs, op);
            let exempt = matches!(op, Op::Destroy | Op::Restore);
            assert_eq!(refused.is_none(), exempt, "{op:?}");
            if let Some(v) = refused {
                assert_eq!(v.reason, "JobPolicyInvalid");
                assert!(v.message.contains("600"), "{}", v.message);
            }
        }
    }
}
