//! What a start announces, as plain data: the events (and `DriftDetected`)
//! that go before its Job, by the decision's reason, the warning a Job
//! that force-unlocks the state earns, and what a start refused a slot
//! says. Pure; `ending.rs` makes them.

use captf_api::names::{events, reasons};

use super::effect::Effect;
use crate::engine::decide::{Op, Reason};
use crate::engine::history::JobRecord;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::engine::slots::{SlotScope, is_background};

/// The writes before a start of `op` decided for `reason`, and the
/// `DriftDetected` it sets (a drift remediation). `records` is the
/// object's Job history: only its first destroy announces the deletion.
pub fn plan_start_announcements(
    reason: Reason,
    op: Op,
    records: &[JobRecord],
) -> (Vec<Effect>, Option<ConditionValue>) {
    let mut effects = Vec::new();
    let mut drift = None;
    if reason == Reason::InputsChanged {
        effects.push(Effect::CountInputsChanged);
        effects.push(event(
            events::INPUTS_CHANGED,
            "Apply",
            "the inputs changed; applying them",
        ));
    }
    if reason == Reason::DriftRemediation {
        drift = Some(ConditionValue {
            status: ConditionStatus::True,
            reason: reasons::DRIFT_REMEDIATING,
            message: "an apply removes the drift".into(),
        });
        effects.push(event(
            events::DRIFT_REMEDIATION_STARTED,
            "Apply",
            "re-applying to remove drift",
        ));
    }
    if op == Op::Destroy && !records.iter().any(|r| r.op == Op::Destroy) {
        effects.push(event(
            events::DELETION_STARTED,
            "Delete",
            "destroying the infrastructure",
        ));
    }
    (effects, drift)
}

/// The warning of a started Job `job` that releases the state lock `id`
/// its object's gone runner pod left.
pub fn force_unlock_warning(job: &str, id: &str, op: Op) -> Effect {
    Effect::Event {
        warning: true,
        reason: events::FORCE_UNLOCKED,
        action: op.as_str(),
        note: format!(
            "Job {job} force-unlocks the state lock {id}, left by a runner pod of this object that is gone"
        ),
    }
}

/// What a start refused a slot writes: the op's condition says it waits,
/// and when it begins to wait (the condition did not say so already) the
/// wait metric and an event. No live count in the message: a wait that
/// goes on writes nothing.
pub fn plan_slot_wait(
    op: Op,
    scope: SlotScope,
    limit: u32,
    cluster_name: &str,
    waiting_already: bool,
) -> (ConditionValue, Vec<Effect>) {
    let whose = match scope {
        SlotScope::Manager => "the manager".to_owned(),
        SlotScope::Cluster => format!("cluster {cluster_name}"),
    };
    let share = if is_background(op) {
        " (drift checks and refreshes start below 80% of it)"
    } else {
        ""
    };
    let message = format!(
        "{whose} runs as many Jobs as its limit of {limit} allows{share}; waiting for a slot"
    );
    let effects = if waiting_already {
        Vec::new()
    } else {
        vec![
            Effect::CountLeaseWait("job_slot"),
            Effect::Event {
                warning: false,
                reason: events::WAITING_FOR_JOB_SLOT,
                action: op.as_str(),
                note: message.clone(),
            },
        ]
    };
    let condition = ConditionValue {
        status: ConditionStatus::Unknown,
        reason: reasons::WAITING_FOR_JOB_SLOT,
        message,
    };
    (condition, effects)
}

fn event(reason: &'static str, action: &'static str, note: &str) -> Effect {
    Effect::Event {
        warning: false,
        reason,
        action,
        note: note.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::history::Outcome;

    fn reasons_of(effects: &[Effect]) -> Vec<String> {
        effects
            .iter()
            .map(|e| match e {
                Effect::Event { reason, .. } => reason.to_string(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn destroyed_before() -> Vec<JobRecord> {
        vec![JobRecord {
            name: "destroy-1".into(),
            op: Op::Destroy,
            attempt: 1,
            outcome: Outcome::Failed,
            created: std::time::UNIX_EPOCH,
            finished: Some(std::time::UNIX_EPOCH),
            remediation: false,
        }]
    }

    #[test]
    fn a_start_announces_what_its_reason_and_history_call_for() {
        // (reason, op, history, the writes, whether DriftDetected is set)
        type Row = (Reason, Op, Vec<JobRecord>, Vec<&'static str>, bool);
        let table: Vec<Row> = vec![
            (
                Reason::InputsChanged,
                Op::Apply,
                vec![],
                vec!["CountInputsChanged", events::INPUTS_CHANGED],
                false,
            ),
            (
                Reason::DriftRemediation,
                Op::Apply,
                vec![],
                vec![events::DRIFT_REMEDIATION_STARTED],
                true,
            ),
            (
                Reason::Deleting,
                Op::Destroy,
                vec![],
                vec![events::DELETION_STARTED],
                false,
            ),
            (
                Reason::Deleting,
                Op::Destroy,
                destroyed_before(),
                vec![],
                false,
            ),
            (
                Reason::MembershipRefreshDue,
                Op::Refresh,
                vec![],
                vec![],
                false,
            ),
        ];
        for (reason, op, records, want, drift) in table {
            let (effects, condition) = plan_start_announcements(reason, op, &records);
            assert_eq!(reasons_of(&effects), want, "{reason:?} {op:?}");
            assert_eq!(condition.is_some(), drift, "{reason:?}");
        }
    }

    #[test]
    fn a_force_unlock_is_a_warning_naming_the_job_and_the_lock() {
        let Effect::Event { warning, note, .. } =
            force_unlock_warning("apply-2", "lock-9", Op::Apply)
        else {
            panic!("an event");
        };
        assert!(warning);
        assert!(
            note.contains("apply-2") && note.contains("lock-9"),
            "{note}"
        );
    }

    #[test]
    fn a_refused_start_says_whose_limit_and_announces_only_its_first_wait() {
        let (condition, first) = plan_slot_wait(Op::Refresh, SlotScope::Cluster, 3, "prod", false);
        assert_eq!(condition.reason, reasons::WAITING_FOR_JOB_SLOT);
        assert_eq!(condition.status, ConditionStatus::Unknown);
        assert!(
            condition
                .message
                .starts_with("cluster prod runs as many Jobs as its limit of 3")
        );
        assert!(
            condition.message.contains("below 80%"),
            "a refresh is background"
        );
        assert!(matches!(
            &first[..],
            [Effect::CountLeaseWait("job_slot"), Effect::Event { reason, action: "refresh", .. }]
                if *reason == events::WAITING_FOR_JOB_SLOT
        ));
        let (apply, again) = plan_slot_wait(Op::Apply, SlotScope::Manager, 9, "prod", true);
        assert!(apply.message.starts_with("the manager runs"));
        assert!(!apply.message.contains("80%"));
        assert!(again.is_empty(), "a wait that goes on writes nothing new");
    }
}
