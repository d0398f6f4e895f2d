//! What the opening of a pass decides, as plain data: how a preamble that
//! ends the pass ends, what an apply Job gone while it ran writes, and what
//! Secrets retained by an earlier object of this name ask for. Pure;
//! `opening.rs` reads what these need and makes what they return.

use std::time::Duration;

use captf_api::names::{events, labels, reasons};
use kube::runtime::controller::Action;

use super::effect::Effect;
use super::leaving::{Leaving, leaving_effects};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::engine::preamble::Preamble;

/// How a preamble that ends the pass ends.
#[derive(Debug, Clone, PartialEq)]
pub enum PreambleEnd {
    /// These writes, then this action.
    Writes(Vec<Effect>, Action),
    /// Deleting an object that made nothing: it leaves
    /// ([`Leaving::NothingMade`]) unless a start racing this pass holds
    /// the run lease, whose Job would outlive the object.
    LeaveUnlessRacing,
    /// The owner is missing or may not be used: the status says so, and
    /// the pass looks again after [`OWNER_REQUEUE`].
    ReportOwner,
}

/// How long a pass waiting for its owner waits before it looks again.
pub const OWNER_REQUEUE: Duration = Duration::from_secs(30);

/// The end a preamble asks for; `None` when the pass goes on (paused or
/// proceeding).
pub fn preamble_end(pre: Preamble) -> Option<PreambleEnd> {
    Some(match pre {
        Preamble::Skip => PreambleEnd::Writes(Vec::new(), Action::await_change()),
        Preamble::ReleaseExternallyManaged => PreambleEnd::Writes(
            leaving_effects(&Leaving::ExternallyManaged),
            Action::await_change(),
        ),
        // The finalizer's update wakes the next pass.
        Preamble::AddFinalizer => PreambleEnd::Writes(
            vec![Effect::AddFinalizer],
            Action::requeue(Duration::from_millis(100)),
        ),
        Preamble::DropFinalizer => PreambleEnd::LeaveUnlessRacing,
        Preamble::WaitForOwner | Preamble::OwnerGated(_) => PreambleEnd::ReportOwner,
        Preamble::Paused | Preamble::Proceed => return None,
    })
}

/// What an apply Job gone while it ran writes once the live object still
/// names it: its outcome is unknown, so the attempt record marks it (an
/// apply of the current inputs stays due), `ApplyJobSucceeded` turns False
/// and a warning says why.
pub fn vanished_apply_writes(job: &str) -> (Vec<Effect>, ConditionValue) {
    let message = format!(
        "apply Job {job} disappeared while it ran; it may have partly applied, so an apply of the current inputs stays due"
    );
    let effects = vec![
        Effect::RecordUnconfirmed { job: job.into() },
        Effect::Event {
            warning: true,
            reason: events::JOB_INTERRUPTED,
            action: "Apply",
            note: message.clone(),
        },
    ];
    let condition = ConditionValue {
        status: ConditionStatus::False,
        reason: reasons::APPLY_FAILED,
        message,
    };
    (effects, condition)
}

/// What an object does about Secrets retained by an earlier object `uid`
/// of its name.
#[derive(Debug, Clone, PartialEq)]
pub enum RetainedFound {
    /// Adopt them (`spec.adoptRetainedState: true`) and look again soon,
    /// reading them as this object's own.
    Adopt(Vec<Effect>, Action),
    /// A deleting object leaves without touching them.
    Leave(Vec<Effect>),
    /// A live object holds: `StateReadable` says what to do, announced
    /// once (when the condition was not already saying it).
    Hold(Vec<Effect>, ConditionValue),
}

/// What to do about Secrets the object `uid` retained. `adopt` is the
/// spec's consent; `already_holding` whether `StateReadable` says so
/// already.
pub fn retained_found(
    uid: &str,
    adopt: bool,
    deleting: bool,
    already_holding: bool,
) -> RetainedFound {
    if adopt {
        return RetainedFound::Adopt(
            vec![Effect::AdoptRetained { uid: uid.into() }],
            Action::requeue(Duration::from_millis(200)),
        );
    }
    if deleting {
        return RetainedFound::Leave(leaving_effects(&Leaving::ForeignRetained {
            uid: uid.into(),
        }));
    }
    let message = format!(
        "found state and inputs retained by an earlier object (UID {uid}); set spec.adoptRetainedState: true to adopt them, or delete the Secrets labeled {}={uid}",
        labels::RETAINED_FROM_UID
    );
    let effects = if already_holding {
        Vec::new()
    } else {
        vec![Effect::Event {
            warning: true,
            reason: events::RETAINED_STATE_FOUND,
            action: "Adopt",
            note: message.clone(),
        }]
    };
    let condition = ConditionValue {
        status: ConditionStatus::False,
        reason: reasons::RETAINED_STATE_FOUND,
        message,
    };
    RetainedFound::Hold(effects, condition)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_preamble_ends_the_pass_its_own_way_or_goes_on() {
        let table = [
            (
                Preamble::Skip,
                Some(PreambleEnd::Writes(vec![], Action::await_change())),
            ),
            (
                Preamble::AddFinalizer,
                Some(PreambleEnd::Writes(
                    vec![Effect::AddFinalizer],
                    Action::requeue(Duration::from_millis(100)),
                )),
            ),
            (
                Preamble::DropFinalizer,
                Some(PreambleEnd::LeaveUnlessRacing),
            ),
            (Preamble::WaitForOwner, Some(PreambleEnd::ReportOwner)),
            (
                Preamble::OwnerGated(reasons::CLUSTER_NOT_TERRAFORM),
                Some(PreambleEnd::ReportOwner),
            ),
            (Preamble::Paused, None),
            (Preamble::Proceed, None),
        ];
        for (pre, want) in table {
            assert_eq!(preamble_end(pre), want, "{pre:?}");
        }
        let Some(PreambleEnd::Writes(effects, action)) =
            preamble_end(Preamble::ReleaseExternallyManaged)
        else {
            panic!("an externally managed object leaves with writes");
        };
        assert_eq!(effects, leaving_effects(&Leaving::ExternallyManaged));
        assert_eq!(action, Action::await_change());
    }

    #[test]
    fn a_vanished_apply_is_marked_before_it_is_announced() {
        let (effects, condition) = vanished_apply_writes("apply-3");
        assert_eq!(
            effects[0],
            Effect::RecordUnconfirmed {
                job: "apply-3".into()
            }
        );
        assert!(matches!(
            &effects[1],
            Effect::Event { warning: true, reason, note, .. }
                if *reason == events::JOB_INTERRUPTED && note.contains("apply-3")
        ));
        assert_eq!(condition.status, ConditionStatus::False);
        assert_eq!(condition.reason, reasons::APPLY_FAILED);
    }

    #[test]
    fn retained_secrets_are_adopted_left_or_held_and_announced_once() {
        assert!(matches!(
            retained_found("u-1", true, true, false),
            RetainedFound::Adopt(e, _) if e == vec![Effect::AdoptRetained { uid: "u-1".into() }]
        ));
        assert_eq!(
            retained_found("u-1", false, true, false),
            RetainedFound::Leave(leaving_effects(&Leaving::ForeignRetained {
                uid: "u-1".into()
            }))
        );
        let RetainedFound::Hold(first, condition) = retained_found("u-1", false, false, false)
        else {
            panic!("a live object holds");
        };
        assert!(
            matches!(&first[..], [Effect::Event { warning: true, reason, .. }] if *reason == events::RETAINED_STATE_FOUND)
        );
        assert_eq!(condition.reason, reasons::RETAINED_STATE_FOUND);
        assert!(condition.message.contains("UID u-1"));
        let RetainedFound::Hold(again, _) = retained_found("u-1", false, false, true) else {
            panic!("a live object holds");
        };
        assert!(again.is_empty(), "a held object is not announced again");
    }
}
