//! An object's Job history: how each finished Job is classified, what it
//! means for retries (failures per op, a failed last apply, the remediation
//! cap, the next attempt number), and which Jobs pruning removes.

use std::time::SystemTime;

use captf_api::names::annotations;

use super::decide::{Failures, History, Op};

/// How a Job ended, as bookkeeping classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Running,
    Succeeded,
    /// A step failed, the image broke the contract or could not be pulled.
    Failed,
    /// Killed by `activeDeadlineSeconds` (even if the runner said interrupted).
    DeadlineExceeded,
    /// Stopped from outside (drain, eviction, deletion): retried at once.
    Interrupted,
    /// An apply stopped before a destructive plan nobody approved.
    Blocked,
    /// An approved apply whose plan no longer matched.
    PlanChanged,
    /// A plan Job that succeeded without a readable plan.
    PlanUnreadable,
}

impl Outcome {
    /// Whether the outcome delays the next run of its op.
    pub fn counts_as_failure(self) -> bool {
        matches!(
            self,
            Outcome::Failed | Outcome::DeadlineExceeded | Outcome::PlanUnreadable
        )
    }

    /// Job annotation recording a classification that needs one.
    pub fn annotation(self) -> Option<&'static str> {
        match self {
            Outcome::Interrupted => Some(annotations::INTERRUPTED),
            Outcome::Blocked => Some(annotations::DESTRUCTIVE_PLAN_BLOCKED),
            Outcome::PlanChanged => Some(annotations::PLAN_CHANGED),
            Outcome::PlanUnreadable => Some(annotations::PLAN_UNREADABLE),
            _ => None,
        }
    }
}

/// What bookkeeping knows about a finished (or running) Job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSignals<'a> {
    pub op: Op,
    /// The Job has a `Complete` condition.
    pub complete: bool,
    /// The Job has a `Failed` condition.
    pub failed: bool,
    /// The `Failed` condition's reason is `DeadlineExceeded`.
    pub deadline_exceeded: bool,
    /// `error.kind` of the runner's result document, if one was read.
    pub error_kind: Option<&'a str>,
    /// A plan Job reported a plan hash.
    pub plan_reported: bool,
}

/// Classifies a Job from its conditions and its result document.
pub fn classify(s: JobSignals<'_>) -> Outcome {
    if s.complete {
        if s.op == Op::Plan && !s.plan_reported {
            return Outcome::PlanUnreadable;
        }
        return Outcome::Succeeded;
    }
    if !s.failed {
        return Outcome::Running;
    }
    if s.deadline_exceeded {
        return Outcome::DeadlineExceeded;
    }
    match (s.op, s.error_kind) {
        (_, Some("interrupted")) => Outcome::Interrupted,
        (Op::Apply, Some("blocked")) => Outcome::Blocked,
        (Op::Apply, Some("plan-changed")) => Outcome::PlanChanged,
        _ => Outcome::Failed,
    }
}

/// One Job of the object, as retained in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    pub name: String,
    pub op: Op,
    pub attempt: u32,
    pub outcome: Outcome,
    /// Creation time (orders running Jobs).
    pub created: SystemTime,
    /// Completion or failure time; `None` while running.
    pub finished: Option<SystemTime>,
    /// Carries `captf.io/drift-remediation`.
    pub remediation: bool,
}

/// Finished Jobs of `op`, newest first.
fn finished_newest_first(jobs: &[JobRecord], op: Op) -> Vec<&JobRecord> {
    let mut out: Vec<&JobRecord> = jobs
        .iter()
        .filter(|j| j.op == op && j.finished.is_some())
        .collect();
    out.sort_by(|a, b| b.finished.cmp(&a.finished).then(b.attempt.cmp(&a.attempt)));
    out
}

/// Consecutive failures of `op` since its last success.
pub fn failures(jobs: &[JobRecord], op: Op) -> Option<Failures> {
    let mut count = 0;
    let mut last_finished = None;
    for j in finished_newest_first(jobs, op) {
        match j.outcome {
            Outcome::Succeeded => break,
            o if o.counts_as_failure() => {
                count += 1;
                last_finished.get_or_insert(j.finished.expect("finished"));
            }
            _ => {}
        }
    }
    last_finished.map(|last_finished| Failures {
        count,
        last_finished,
    })
}

/// The per-op failure history [`super::decide::decide`] needs.
pub fn history(jobs: &[JobRecord]) -> History {
    Op::ALL
        .into_iter()
        .fold(History::default(), |h, op| match failures(jobs, op) {
            Some(f) => h.with(op, f),
            None => h,
        })
}

/// When the newest successful Job of `op` finished.
pub fn last_success(jobs: &[JobRecord], op: Op) -> Option<SystemTime> {
    jobs.iter()
        .filter(|r| r.op == op && r.outcome == Outcome::Succeeded)
        .filter_map(|r| r.finished)
        .max()
}

/// The newest apply (remediations aside) did not succeed and is not waiting
/// on an approval: the same inputs are applied again.
pub fn last_apply_failed(jobs: &[JobRecord]) -> bool {
    finished_newest_first(jobs, Op::Apply)
        .into_iter()
        .find(|j| !j.remediation)
        .is_some_and(|j| {
            matches!(
                j.outcome,
                Outcome::Failed | Outcome::DeadlineExceeded | Outcome::Interrupted
            )
        })
}

/// Failed applies since the last successful drift check, stopping at the
/// newest successful apply: the remediation cap counts these.
pub fn remediation_failures(jobs: &[JobRecord], last_drift_check: Option<SystemTime>) -> u32 {
    let mut count = 0;
    for j in finished_newest_first(jobs, Op::Apply) {
        if j.outcome == Outcome::Succeeded
            || last_drift_check.is_some_and(|t| j.finished.is_some_and(|f| f <= t))
        {
            break;
        }
        if j.outcome.counts_as_failure() {
            count += 1;
        }
    }
    count
}

/// The attempt number of the next Job of `op`: one above every retained one,
/// so a name is never reused while its namesake exists.
pub fn next_attempt(jobs: &[JobRecord], op: Op) -> u32 {
    jobs.iter()
        .filter(|j| j.op == op)
        .map(|j| j.attempt)
        .max()
        .unwrap_or(0)
        + 1
}

/// The newest Job still running, if any.
pub fn active(jobs: &[JobRecord]) -> Option<&JobRecord> {
    jobs.iter()
        .filter(|j| j.finished.is_none())
        .max_by_key(|j| j.created)
}

/// Finished Jobs to delete: per op, beyond `successful_limit` successes and
/// `failed_limit` other outcomes, oldest first. Each op always keeps its
/// newest success, and its newest failure while no success is newer; running
/// Jobs are never touched.
pub fn prune(jobs: &[JobRecord], successful_limit: u32, failed_limit: u32) -> Vec<String> {
    let mut doomed = Vec::new();
    for op in Op::ALL {
        let (mut successes, mut others) = (0u32, 0u32);
        let mut seen_success = false;
        for j in finished_newest_first(jobs, op) {
            let keep = if j.outcome == Outcome::Succeeded {
                successes += 1;
                let newest = !seen_success;
                seen_success = true;
                newest || successes <= successful_limit
            } else {
                others += 1;
                (others == 1 && !seen_success) || others <= failed_limit
            };
            if !keep {
                doomed.push(j.name.clone());
            }
        }
    }
    doomed
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn job(op: Op, attempt: u32, outcome: Outcome, finished: u64) -> JobRecord {
        JobRecord {
            name: format!("{}-a{attempt}", op.as_str()),
            op,
            attempt,
            outcome,
            created: t(finished.saturating_sub(10)),
            finished: (outcome != Outcome::Running).then(|| t(finished)),
            remediation: false,
        }
    }

    #[test]
    fn classification() {
        let s = |op, complete, failed, deadline, kind, plan| JobSignals {
            op,
            complete,
            failed,
            deadline_exceeded: deadline,
            error_kind: kind,
            plan_reported: plan,
        };
        let cases = [
            (
                s(Op::Apply, false, false, false, None, false),
                Outcome::Running,
            ),
            (
                s(Op::Apply, true, false, false, None, false),
                Outcome::Succeeded,
            ),
            (
                s(Op::Plan, true, false, false, None, true),
                Outcome::Succeeded,
            ),
            (
                s(Op::Plan, true, false, false, None, false),
                Outcome::PlanUnreadable,
            ),
            (
                s(Op::Apply, false, true, false, Some("step"), false),
                Outcome::Failed,
            ),
            (
                s(Op::Apply, false, true, false, None, false),
                Outcome::Failed,
            ),
            (
                s(Op::Apply, false, true, true, Some("interrupted"), false),
                Outcome::DeadlineExceeded,
            ),
            (
                s(Op::Destroy, false, true, false, Some("interrupted"), false),
                Outcome::Interrupted,
            ),
            (
                s(Op::Apply, false, true, false, Some("blocked"), false),
                Outcome::Blocked,
            ),
            (
                s(Op::Apply, false, true, false, Some("plan-changed"), false),
                Outcome::PlanChanged,
            ),
            (
                s(Op::Refresh, false, true, false, Some("blocked"), false),
                Outcome::Failed,
            ),
            (
                s(Op::Apply, false, true, false, Some("image-layout"), false),
                Outcome::Failed,
            ),
        ];
        for (signals, want) in cases {
            assert_eq!(classify(signals), want, "{signals:?}");
        }
    }

    #[test]
    fn failures_count_back_to_the_last_success_skipping_neutral_outcomes() {
        let jobs = vec![
            job(Op::Apply, 1, Outcome::Failed, 100),
            job(Op::Apply, 2, Outcome::Succeeded, 200),
            job(Op::Apply, 3, Outcome::Failed, 300),
            job(Op::Apply, 4, Outcome::Blocked, 400),
            job(Op::Apply, 5, Outcome::DeadlineExceeded, 500),
            job(Op::Apply, 6, Outcome::Interrupted, 600),
            job(Op::Refresh, 1, Outcome::Failed, 700),
        ];
        assert_eq!(
            failures(&jobs, Op::Apply),
            Some(Failures {
                count: 2,
                last_finished: t(500)
            })
        );
        assert_eq!(failures(&jobs, Op::Destroy), None);
        let h = history(&jobs);
        assert_eq!(h.get(Op::Refresh).map(|f| f.count), Some(1));
        assert_eq!(h.get(Op::Drift), None);
    }

    #[test]
    fn last_apply_failed_ignores_remediations_and_approval_waits() {
        let mut jobs = vec![job(Op::Apply, 1, Outcome::Failed, 100)];
        assert!(last_apply_failed(&jobs));
        jobs.push(job(Op::Apply, 2, Outcome::Succeeded, 200));
        assert!(!last_apply_failed(&jobs));
        let mut remediation = job(Op::Apply, 3, Outcome::Failed, 300);
        remediation.remediation = true;
        jobs.push(remediation);
        assert!(!last_apply_failed(&jobs));
        jobs.push(job(Op::Apply, 4, Outcome::Blocked, 400));
        assert!(!last_apply_failed(&jobs));
        jobs.push(job(Op::Apply, 5, Outcome::Interrupted, 500));
        assert!(last_apply_failed(&jobs));
        jobs.push(job(Op::Apply, 6, Outcome::Running, 600));
        assert!(last_apply_failed(&jobs), "running Jobs are not finished");
    }

    #[test]
    fn remediation_failures_count_since_the_drift_check_and_the_last_success() {
        let jobs = vec![
            job(Op::Apply, 1, Outcome::Succeeded, 100),
            job(Op::Apply, 2, Outcome::Failed, 200),
            job(Op::Apply, 3, Outcome::Failed, 300),
            job(Op::Apply, 4, Outcome::PlanChanged, 400),
            job(Op::Apply, 5, Outcome::DeadlineExceeded, 500),
        ];
        assert_eq!(remediation_failures(&jobs, None), 3);
        assert_eq!(remediation_failures(&jobs, Some(t(250))), 2);
        assert_eq!(remediation_failures(&jobs, Some(t(500))), 0);
    }

    #[test]
    fn attempts_never_reuse_a_retained_name() {
        let jobs = vec![
            job(Op::Apply, 3, Outcome::Failed, 100),
            job(Op::Apply, 7, Outcome::Running, 200),
            job(Op::Drift, 9, Outcome::Succeeded, 300),
        ];
        assert_eq!(next_attempt(&jobs, Op::Apply), 8);
        assert_eq!(next_attempt(&jobs, Op::Destroy), 1);
        assert_eq!(active(&jobs).map(|j| j.attempt), Some(7));
    }

    #[test]
    fn pruning_keeps_limits_and_the_newest_of_each_kind() {
        let jobs = vec![
            job(Op::Apply, 1, Outcome::Succeeded, 100),
            job(Op::Apply, 2, Outcome::Succeeded, 200),
            job(Op::Apply, 3, Outcome::Failed, 300),
            job(Op::Apply, 4, Outcome::Failed, 400),
            job(Op::Apply, 5, Outcome::Succeeded, 500),
            job(Op::Apply, 6, Outcome::Running, 600),
            job(Op::Drift, 1, Outcome::Succeeded, 150),
            job(Op::Drift, 2, Outcome::Succeeded, 250),
        ];
        let mut doomed = prune(&jobs, 2, 1);
        doomed.sort();
        assert_eq!(doomed, ["apply-a1", "apply-a3"]);
        // Limits of 0 still keep the newest success and a failure newer than it.
        let jobs = vec![
            job(Op::Destroy, 1, Outcome::Succeeded, 100),
            job(Op::Destroy, 2, Outcome::Failed, 200),
            job(Op::Destroy, 3, Outcome::Failed, 300),
        ];
        let mut doomed = prune(&jobs, 0, 0);
        doomed.sort();
        assert_eq!(doomed, ["destroy-a2"]);
    }
}
