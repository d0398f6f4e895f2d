//! The events a change of conditions announces (`api.md` §15.1): pausing
//! and resuming, health turning good or bad, outputs breaking the contract,
//! a state that cannot be read, an identity that stops allowing the object,
//! and, for the conditions no other event speaks for, `ConditionChanged`.
//! Pure over the conditions a pass read and the ones it writes; the shell
//! emits them once the status holding the change is written, so each goes
//! out once per transition.

use captf_api::names::{conditions, events, reasons};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// One event to emit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionEvent {
    pub reason: &'static str,
    pub warning: bool,
    pub note: String,
}

/// Conditions whose changes other events announce (Job, plan, drift,
/// deletion and capacity events) or that only summarise others (`Ready`).
const SPOKEN_FOR: &[&str] = &[
    conditions::READY,
    conditions::APPLY_JOB_SUCCEEDED,
    conditions::DRIFT_JOB_SUCCEEDED,
    conditions::RESTORE_JOB_SUCCEEDED,
    conditions::DRIFT_DETECTED,
    conditions::DELETING,
    conditions::CAPACITY_RESOLVED,
    conditions::APPROVED,
];

/// Waits of a start on a lease, announced when one begins (a wait for a
/// Job slot has its own event, with its queue place).
const LEASE_WAITS: &[&str] = &[
    events::WAITING_FOR_RUN_LEASE,
    events::WAITING_FOR_CLUSTER_OPERATION,
    events::WAITING_FOR_MACHINE_OPERATIONS,
];

/// `StateReadable` reasons that have no event of their own.
const UNREADABLE: &[&str] = &[
    reasons::STATE_CORRUPT,
    reasons::STATE_ENCRYPTED,
    reasons::STATE_INCONSISTENT,
];

fn same(a: Option<&Condition>, b: &Condition) -> bool {
    a.is_some_and(|a| a.status == b.status && a.reason == b.reason)
}

fn is(c: Option<&Condition>, status: &str) -> bool {
    c.is_some_and(|c| c.status == status)
}

/// The events of going from `before` to `after`, in `after`'s order.
pub fn transition_events<'a>(
    before: impl Fn(&str) -> Option<&'a Condition>,
    after: &[&Condition],
) -> Vec<TransitionEvent> {
    let mut out = Vec::new();
    let event = |reason, warning, note: String| TransitionEvent {
        reason,
        warning,
        note,
    };
    for c in after {
        let was = before(&c.type_);
        if same(was, c) {
            continue;
        }
        let detail = |what: &str| {
            if c.message.is_empty() {
                format!("{what} ({})", c.reason)
            } else {
                format!("{what} ({}): {}", c.reason, c.message)
            }
        };
        let into = c.status.as_str();
        let e = match c.type_.as_str() {
            conditions::PAUSED if into == "True" && !is(was, "True") => {
                Some(event(events::PAUSED, false, detail("paused")))
            }
            conditions::PAUSED if into != "True" && is(was, "True") => {
                Some(event(events::RESUMED, false, "no longer paused".into()))
            }
            conditions::PAUSED => None,
            conditions::INFRASTRUCTURE_HEALTHY if into == "True" && !is(was, "True") => {
                Some(event(events::INSTANCE_HEALTHY, false, detail("healthy")))
            }
            conditions::INFRASTRUCTURE_HEALTHY if into == "False" => {
                Some(event(events::INSTANCE_UNHEALTHY, true, detail("unhealthy")))
            }
            conditions::INFRASTRUCTURE_HEALTHY => None,
            conditions::OUTPUTS_VALID if into == "False" => Some(event(
                events::OUTPUTS_INVALID,
                true,
                detail("the outputs break the contract"),
            )),
            conditions::OUTPUTS_VALID => None,
            conditions::STATE_READABLE
                if into == "False" && UNREADABLE.contains(&c.reason.as_str()) =>
            {
                Some(event(
                    events::STATE_UNREADABLE,
                    true,
                    detail("the state cannot be read"),
                ))
            }
            conditions::STATE_READABLE => None,
            conditions::IDENTITY_ALLOWED if into == "False" => Some(event(
                events::IDENTITY_NOT_ALLOWED,
                true,
                detail("the identity does not allow this object"),
            )),
            conditions::IDENTITY_ALLOWED => None,
            conditions::AUTOSCALING_ACTIVE if c.reason == reasons::REPLICAS_MANAGED_EXTERNALLY => {
                Some(event(
                    events::REPLICAS_MANAGED_EXTERNALLY,
                    true,
                    detail("replicas are not written back"),
                ))
            }
            conditions::APPLY_JOB_SUCCEEDED
            | conditions::DRIFT_JOB_SUCCEEDED
            | conditions::RESTORE_JOB_SUCCEEDED => LEASE_WAITS
                .iter()
                .find(|w| **w == c.reason)
                .map(|w| event(w, false, c.message.clone())),
            t if SPOKEN_FOR.contains(&t) => None,
            // A condition appearing for the first time is no change.
            _ if was.is_none() => None,
            t => Some(event(
                events::CONDITION_CHANGED,
                into == "False",
                detail(&format!("{t} is {into}")),
            )),
        };
        out.extend(e);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            last_transition_time: crate::reconcile::status::time(std::time::SystemTime::UNIX_EPOCH),
            observed_generation: None,
        }
    }

    fn events_of(before: &[Condition], after: &[Condition]) -> Vec<(&'static str, bool)> {
        let after: Vec<&Condition> = after.iter().collect();
        transition_events(|t| before.iter().find(|c| c.type_ == t), &after)
            .into_iter()
            .map(|e| (e.reason, e.warning))
            .collect()
    }

    #[test]
    fn each_transition_is_announced_once() {
        let paused = c("Paused", "True", "Paused");
        let running = c("Paused", "False", "NotPaused");
        let healthy = c("InfrastructureHealthy", "True", "Running");
        let degraded = c("InfrastructureHealthy", "False", "Degraded");
        let stopped = c("InfrastructureHealthy", "False", "Stopped");
        let pending = c("InfrastructureHealthy", "Unknown", "Provisioning");
        // (conditions read, conditions written, events)
        type Case = (Vec<Condition>, Vec<Condition>, Vec<(&'static str, bool)>);
        let cases: Vec<Case> = vec![
            // Pausing and resuming, and nothing while it lasts.
            (
                vec![running.clone()],
                vec![paused.clone()],
                vec![("Paused", false)],
            ),
            (vec![], vec![paused.clone()], vec![("Paused", false)]),
            (vec![paused.clone()], vec![paused.clone()], vec![]),
            (
                vec![paused.clone()],
                vec![running.clone()],
                vec![("Resumed", false)],
            ),
            (vec![], vec![running.clone()], vec![]),
            // Health: good once, bad on each new bad reason, nothing for
            // a reading that is not yet known.
            (
                vec![pending.clone()],
                vec![healthy.clone()],
                vec![("InstanceHealthy", false)],
            ),
            (
                vec![healthy.clone()],
                vec![degraded.clone()],
                vec![("InstanceUnhealthy", true)],
            ),
            (
                vec![degraded.clone()],
                vec![stopped.clone()],
                vec![("InstanceUnhealthy", true)],
            ),
            (vec![degraded.clone()], vec![degraded.clone()], vec![]),
            (vec![healthy.clone()], vec![pending.clone()], vec![]),
            // Outputs and state.
            (
                vec![c("OutputsValid", "True", "OutputsValid")],
                vec![c("OutputsValid", "False", "OutputsInvalid")],
                vec![("OutputsInvalid", true)],
            ),
            (
                vec![c("StateReadable", "True", "StateRead")],
                vec![c("StateReadable", "False", "StateCorrupt")],
                vec![("StateUnreadable", true)],
            ),
            // StateLocked and StateLost have events of their own.
            (
                vec![c("StateReadable", "True", "StateRead")],
                vec![c("StateReadable", "False", "StateLocked")],
                vec![],
            ),
            (
                vec![c("IdentityAllowed", "True", "Allowed")],
                vec![c("IdentityAllowed", "False", "NamespaceNotAllowed")],
                vec![("IdentityNotAllowed", true)],
            ),
            // Another manager owns the MachinePool's replicas, from the
            // first pass that sees it.
            (
                vec![],
                vec![c("AutoscalingActive", "False", "ReplicasManagedExternally")],
                vec![("ReplicasManagedExternally", true)],
            ),
            // Conditions no other event speaks for.
            (
                vec![c("RunnerRBACReady", "True", "RBACReady")],
                vec![c("RunnerRBACReady", "False", "RBACFailed")],
                vec![("ConditionChanged", true)],
            ),
            (
                vec![c("DependenciesReady", "False", "WaitingForCluster")],
                vec![c("DependenciesReady", "True", "DependenciesReady")],
                vec![("ConditionChanged", false)],
            ),
            (
                vec![],
                vec![c("RunnerRBACReady", "True", "RBACReady")],
                vec![],
            ),
            // Summaries and Job conditions are left to their own events.
            (
                vec![c("Ready", "True", "Ready")],
                vec![c("Ready", "False", "NotReady")],
                vec![],
            ),
            (
                vec![c("ApplyJobSucceeded", "True", "ApplySucceeded")],
                vec![c("ApplyJobSucceeded", "False", "ApplyFailed")],
                vec![],
            ),
            // A wait on a lease, once when it begins.
            (
                vec![c("ApplyJobSucceeded", "True", "ApplySucceeded")],
                vec![c("ApplyJobSucceeded", "Unknown", "WaitingForRunLease")],
                vec![("WaitingForRunLease", false)],
            ),
            (
                vec![c("ApplyJobSucceeded", "Unknown", "WaitingForRunLease")],
                vec![c(
                    "ApplyJobSucceeded",
                    "Unknown",
                    "WaitingForClusterOperation",
                )],
                vec![("WaitingForClusterOperation", false)],
            ),
            (
                vec![c(
                    "DriftJobSucceeded",
                    "Unknown",
                    "WaitingForMachineOperations",
                )],
                vec![c(
                    "DriftJobSucceeded",
                    "Unknown",
                    "WaitingForMachineOperations",
                )],
                vec![],
            ),
            (
                vec![c("ApplyJobSucceeded", "True", "ApplySucceeded")],
                vec![c("ApplyJobSucceeded", "Unknown", "WaitingForJobSlot")],
                vec![],
            ),
        ];
        for (before, after, want) in cases {
            assert_eq!(events_of(&before, &after), want, "{before:?} -> {after:?}");
        }
    }

    #[test]
    fn notes_name_the_reason_and_message() {
        let mut after = c("InfrastructureHealthy", "False", "Degraded");
        after.message = "2 of 3 instances are degraded".into();
        let out = transition_events(|_| None, &[&after]);
        assert_eq!(
            out[0].note,
            "unhealthy (Degraded): 2 of 3 instances are degraded"
        );
    }
}
