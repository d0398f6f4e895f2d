//! The conditions every kind sets the same way: `OutputsValid`,
//! `InfrastructureHealthy` before and after a state read, `Paused`,
//! `Deleting` and the `Ready` summary.

use captf_api::names::{conditions, reasons};

use super::open_pass::OpenPass;
use super::status::Draft;
use super::workload::Workload;
use crate::engine::decide::Op;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::engine::ready::{SummaryInput, summarize};

/// `OutputsValid` from a decoder's verdict.
pub fn outputs_valid(v: &captf_contract::outputs::OutputsVerdict) -> ConditionValue {
    ConditionValue {
        status: v.status(),
        reason: v.reason().as_str(),
        message: v.message(),
    }
}

/// `InfrastructureHealthy` from the module's health once state was read;
/// true when health reads `pending`.
pub fn record_health(
    status: &mut Draft,
    provisioned: bool,
    health: Option<&captf_contract::health::Health>,
) -> bool {
    let phase = if provisioned {
        crate::adapters::Provisioning::Provisioned
    } else {
        crate::adapters::Provisioning::InProgress
    };
    status.set(
        conditions::INFRASTRUCTURE_HEALTHY,
        &crate::adapters::infrastructure_healthy(phase, health),
    );
    health.is_some_and(|h| h.state == captf_contract::health::HealthState::Pending)
}

/// `InfrastructureHealthy` before any state was read: waiting for the first
/// apply, or provisioning once one ran.
pub fn not_yet_healthy(p: &OpenPass) -> ConditionValue {
    let phase = if p.loaded.observed.iter().any(|o| o.record.op == Op::Apply) {
        crate::adapters::Provisioning::InProgress
    } else {
        crate::adapters::Provisioning::NotStarted
    };
    crate::adapters::infrastructure_healthy(phase, None)
}

/// The note a deleting object's `Deleting` message carries when it asks for
/// the old way out of a stuck deletion, which this manager does not honour.
pub const ABANDON_IGNORED: &str = "the captf.io/abandon-infrastructure annotation is ignored: \
     set spec.deletionPolicy: Retain to keep the infrastructure";

/// `Deleting`; `abandon_requested` when the object carries the
/// `captf.io/abandon-infrastructure` annotation, which is ignored, and said
/// so, rather than acted on.
pub(super) fn deleting_condition(
    deleting: bool,
    paused: bool,
    abandon_requested: bool,
) -> ConditionValue {
    let mut value = match (deleting, paused) {
        (false, _) => ConditionValue {
            status: ConditionStatus::False,
            reason: reasons::NOT_DELETING,
            message: String::new(),
        },
        (true, true) => ConditionValue {
            status: ConditionStatus::True,
            reason: reasons::DELETING,
            message: "deletion waits until the object is unpaused".into(),
        },
        (true, false) => ConditionValue {
            status: ConditionStatus::True,
            reason: reasons::DELETING,
            message: "destroying the infrastructure".into(),
        },
    };
    if deleting && abandon_requested {
        value.message = format!("{}; {ABANDON_IGNORED}", value.message);
    }
    value
}

/// `Deleting` while the state holds the deletion (lost, unreadable, or an
/// apply of unknown outcome): the finalizer stays and nothing is
/// destroyed, which the condition says instead of "destroying".
pub(super) fn explain_held_deletion(
    status: &mut Draft,
    decision: &crate::engine::decide::Decision,
) {
    if decision.reason != crate::engine::decide::Reason::DeletionHeld {
        return;
    }
    let held_by = status
        .get(conditions::STATE_READABLE)
        .map(|c| c.reason.clone())
        .unwrap_or_default();
    let mut value = ConditionValue {
        status: ConditionStatus::True,
        reason: reasons::DELETING,
        message: format!(
            "the deletion waits, keeping the finalizer: StateReadable={held_by} holds it (see that condition for the way out, or set spec.deletionPolicy: Retain)"
        ),
    };
    if let Some(c) = status.get(conditions::DELETING)
        && c.message.contains(ABANDON_IGNORED)
    {
        value.message = format!("{}; {ABANDON_IGNORED}", value.message);
    }
    status.set(conditions::DELETING, &value);
}

pub(super) fn paused_condition(paused: bool) -> ConditionValue {
    if paused {
        ConditionValue {
            status: ConditionStatus::True,
            reason: reasons::PAUSED,
            message: "paused: bookkeeping only, no new Job".into(),
        }
    } else {
        ConditionValue {
            status: ConditionStatus::False,
            reason: reasons::NOT_PAUSED,
            message: String::new(),
        }
    }
}

/// `Ready` from the kind's inputs: before provisioning, the nine conditions
/// of the summary table (InfrastructureHealthy among them, so an apply that
/// succeeded with its health still pending is not Ready); after it, the
/// infrastructure's health and Deleting (and a pool's last apply).
pub fn set_ready<K: Workload>(draft: &mut Draft, provisioned: bool) {
    let i = |type_, negative, optional| SummaryInput {
        type_,
        negative,
        optional,
    };
    let inputs: Vec<SummaryInput<'_>> = if provisioned {
        let mut v = vec![
            i(conditions::INFRASTRUCTURE_HEALTHY, false, false),
            i(conditions::DELETING, true, true),
        ];
        if K::READY_READS_APPLY_ONCE_PROVISIONED {
            v.push(i(conditions::APPLY_JOB_SUCCEEDED, false, false));
        }
        v
    } else {
        vec![
            i(conditions::DEPENDENCIES_READY, false, false),
            i(conditions::IDENTITY_ALLOWED, false, true),
            i(conditions::CREDENTIALS_MIRRORED, false, true),
            i(conditions::RUNNER_RBAC_READY, false, true),
            i(conditions::APPLY_JOB_SUCCEEDED, false, false),
            i(conditions::STATE_READABLE, false, false),
            i(conditions::OUTPUTS_VALID, false, true),
            i(conditions::INFRASTRUCTURE_HEALTHY, false, false),
            i(conditions::DELETING, true, true),
        ]
    };
    let s = summarize(&inputs, &draft.views());
    draft.set(
        conditions::READY,
        &ConditionValue {
            status: s.status,
            reason: s.reason,
            message: s.message,
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use captf_api::TerraformMachinePool;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            observed_generation: Some(1),
        }
    }

    /// Every input of the pre-provisioning summary good, and the
    /// infrastructure's health as given.
    fn ready_with_health(health: Option<(&str, &str)>, provisioned: bool) -> (String, String) {
        let mut current = vec![
            condition(conditions::DEPENDENCIES_READY, "True", "DependenciesReady"),
            condition(conditions::APPLY_JOB_SUCCEEDED, "True", "ApplySucceeded"),
            condition(conditions::STATE_READABLE, "True", "StateReadable"),
            condition(conditions::OUTPUTS_VALID, "True", "OutputsValid"),
        ];
        if let Some((status, reason)) = health {
            current.push(condition(
                conditions::INFRASTRUCTURE_HEALTHY,
                status,
                reason,
            ));
        }
        let mut draft = Draft::new(&current, 1, std::time::SystemTime::UNIX_EPOCH);
        set_ready::<TerraformMachinePool>(&mut draft, provisioned);
        let ready = draft.get(conditions::READY).unwrap();
        (ready.status.clone(), ready.message.clone())
    }

    #[test]
    fn a_deletion_asking_to_abandon_says_the_annotation_is_ignored() {
        for (deleting, paused, abandon, noted) in [
            (true, false, true, true),
            (true, true, true, true),
            (true, false, false, false),
            (false, false, true, false),
        ] {
            let c = deleting_condition(deleting, paused, abandon);
            assert_eq!(
                c.message.contains(ABANDON_IGNORED),
                noted,
                "{deleting} {paused} {abandon}: {}",
                c.message
            );
            let want = if deleting {
                reasons::DELETING
            } else {
                reasons::NOT_DELETING
            };
            assert_eq!(c.reason, want);
        }
    }

    #[test]
    fn before_provisioning_ready_waits_for_the_infrastructure_s_health() {
        let table = [
            (Some(("Unknown", "HealthPending")), "Unknown"),
            (None, "Unknown"),
            (Some(("False", "Unhealthy")), "False"),
            (Some(("True", "Healthy")), "True"),
        ];
        for (health, want) in table {
            let (status, message) = ready_with_health(health, false);
            assert_eq!(status, want, "health {health:?}: {message}");
            if want != "True" {
                assert!(message.contains("InfrastructureHealthy"), "{message}");
            }
        }
    }

    #[test]
    fn a_held_deletion_says_it_waits_and_what_holds_it() {
        use crate::engine::decide::{Action, Decision, Reason};
        let decision = |reason| Decision {
            action: Action::Wait,
            reason,
            backoff: false,
            requeue: None,
        };
        let cases = [
            (
                Reason::DeletionHeld,
                false,
                Some("StateReadable=StateLost holds it"),
            ),
            (
                Reason::DeletionHeld,
                true,
                Some("StateReadable=StateLost holds it"),
            ),
            (Reason::Deleting, false, None),
            (Reason::StateHeld, false, None),
        ];
        for (reason, abandon, wanted) in cases {
            let mut draft = Draft::new(&[], 1, std::time::SystemTime::UNIX_EPOCH);
            let lost = ConditionValue {
                status: ConditionStatus::False,
                reason: reasons::STATE_LOST,
                message: String::new(),
            };
            draft.set(conditions::STATE_READABLE, &lost);
            let before = deleting_condition(true, false, abandon);
            draft.set(conditions::DELETING, &before);
            explain_held_deletion(&mut draft, &decision(reason));
            let after = draft.get(conditions::DELETING).unwrap();
            assert_eq!(
                (after.status.as_str(), after.reason.as_str()),
                ("True", reasons::DELETING)
            );
            match wanted {
                Some(text) => {
                    assert!(
                        after.message.contains(text),
                        "{reason:?}: {}",
                        after.message
                    );
                    assert!(after.message.contains("keeping the finalizer"));
                    assert_eq!(after.message.contains(ABANDON_IGNORED), abandon);
                }
                None => assert_eq!(after.message, before.message, "{reason:?}"),
            }
        }
    }
}
