//! `InputsApplied`: whether the last successful apply used the current
//! inputs and nothing is pending, for kstatus, Flux and Argo readers. Pure;
//! each kind's plan sets it once per pass after its decision, and leaves
//! it as it was while deleting or paused.

use captf_api::names::{conditions, reasons};

use super::open_pass::OpenPass;
use super::rendered::Rendered;
use super::status::Draft;
use crate::engine::decide::{Action, Decision, Op, Reason};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::state::reader::{StateError, StateSummary};

/// What the condition is decided from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputsView<'a> {
    /// The inputs hash on the state (of its last successful apply).
    pub applied: Option<&'a str>,
    /// The current inputs' hash (`None`: they cannot be built). Immutable
    /// kinds compare nothing: their applied inputs are fixed.
    pub current: Option<&'a str>,
    pub mutable: bool,
    /// The newest apply failed and none succeeded since.
    pub last_apply_failed: bool,
}

fn value(status: ConditionStatus, reason: &'static str, message: &str) -> ConditionValue {
    ConditionValue {
        status,
        reason,
        message: message.to_owned(),
    }
}

/// The condition after `decision`.
pub fn inputs_applied(v: &InputsView<'_>, decision: &Decision) -> ConditionValue {
    if matches!(decision.action, Action::Start { op: Op::Apply, .. }) {
        return value(
            ConditionStatus::False,
            reasons::APPLY_RUNNING,
            "an apply Job runs the current inputs",
        );
    }
    if matches!(
        decision.reason,
        Reason::PlanAwaitingApproval | Reason::DestructivePlanBlocked
    ) {
        return value(
            ConditionStatus::False,
            reasons::AWAITING_APPROVAL,
            "a plan of the current inputs awaits approval",
        );
    }
    let failed = || {
        value(
            ConditionStatus::False,
            reasons::INPUTS_APPLY_FAILED,
            "the last apply failed and none succeeded since",
        )
    };
    let pending = || {
        value(
            ConditionStatus::False,
            reasons::APPLY_PENDING,
            "the current inputs are not applied yet",
        )
    };
    let applied = || {
        value(
            ConditionStatus::True,
            reasons::INPUTS_APPLIED,
            "the current inputs are applied",
        )
    };
    if !v.mutable {
        return match (v.applied, v.last_apply_failed) {
            (Some(_), _) => applied(),
            (None, true) => failed(),
            (None, false) if v.current.is_none() => unavailable(),
            (None, false) => pending(),
        };
    }
    match (v.current, v.applied) {
        (None, _) => unavailable(),
        (Some(_), _) if v.last_apply_failed => failed(),
        (Some(c), Some(a)) if c == a => applied(),
        _ => pending(),
    }
}

/// `Unknown/InputsUnavailable`: the current inputs cannot be built.
pub fn unavailable() -> ConditionValue {
    value(
        ConditionStatus::Unknown,
        reasons::INPUTS_UNAVAILABLE,
        "the current inputs cannot be built yet",
    )
}

/// The view of a pass: the state it read, the current inputs it built and
/// its kind's mutability.
pub fn view<'a>(
    p: &OpenPass,
    read: &'a Result<StateSummary, StateError>,
    current: Option<&'a Rendered>,
) -> InputsView<'a> {
    InputsView {
        applied: read.as_ref().ok().and_then(|s| s.inputs_hash.as_deref()),
        current: current.map(|c| c.hash.as_str()),
        mutable: p.shared.mutable,
        last_apply_failed: crate::engine::history::last_apply_failed(&p.loaded.records()),
    }
}

/// Sets the condition in the status, except while deleting or paused.
pub fn set(p: &OpenPass, status: &mut Draft, v: &InputsView<'_>, decision: Option<&Decision>) {
    if p.deleting() || p.shared.paused {
        return;
    }
    let c = match decision {
        Some(d) => inputs_applied(v, d),
        None if v.mutable || v.applied.is_none() => unavailable(),
        None => return,
    };
    status.set(conditions::INPUTS_APPLIED, &c);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn decision(action: Action, reason: Reason) -> Decision {
        Decision {
            action,
            reason,
            backoff: false,
            requeue: Some(Duration::from_secs(60)),
        }
    }

    #[test]
    fn inputs_applied_table() {
        let apply = decision(
            Action::Start {
                op: Op::Apply,
                approval: None,
                remediation: false,
            },
            Reason::InputsChanged,
        );
        let refresh = decision(
            Action::Start {
                op: Op::Refresh,
                approval: None,
                remediation: false,
            },
            Reason::RefreshAfterApply,
        );
        let idle = decision(Action::Wait, Reason::UpToDate);
        let awaiting = decision(Action::Wait, Reason::PlanAwaitingApproval);
        let blocked = decision(Action::Wait, Reason::DestructivePlanBlocked);
        let view = |applied, current, mutable, failed| InputsView {
            applied,
            current,
            mutable,
            last_apply_failed: failed,
        };
        let cases = [
            (
                "mutable, equal",
                view(Some("h2:a"), Some("h2:a"), true, false),
                &idle,
                reasons::INPUTS_APPLIED,
            ),
            (
                "mutable, equal, refresh starts",
                view(Some("h2:a"), Some("h2:a"), true, false),
                &refresh,
                reasons::INPUTS_APPLIED,
            ),
            (
                "mutable, changed, apply starts",
                view(Some("h2:a"), Some("h2:b"), true, false),
                &apply,
                reasons::APPLY_RUNNING,
            ),
            (
                "mutable, changed, backing off",
                view(Some("h2:a"), Some("h2:b"), true, false),
                &idle,
                reasons::APPLY_PENDING,
            ),
            (
                "mutable, nothing applied",
                view(None, Some("h2:b"), true, false),
                &idle,
                reasons::APPLY_PENDING,
            ),
            (
                "mutable, failed",
                view(Some("h2:a"), Some("h2:b"), true, true),
                &idle,
                reasons::INPUTS_APPLY_FAILED,
            ),
            (
                "mutable, failed with equal hashes",
                view(Some("h2:a"), Some("h2:a"), true, true),
                &idle,
                reasons::INPUTS_APPLY_FAILED,
            ),
            (
                "mutable, awaiting a plan approval",
                view(Some("h2:a"), Some("h2:b"), true, false),
                &awaiting,
                reasons::AWAITING_APPROVAL,
            ),
            (
                "mutable, destructive plan blocked",
                view(Some("h2:a"), Some("h2:b"), true, false),
                &blocked,
                reasons::AWAITING_APPROVAL,
            ),
            (
                "mutable, inputs not buildable",
                view(Some("h2:a"), None, true, false),
                &idle,
                reasons::INPUTS_UNAVAILABLE,
            ),
            (
                "immutable, applied: fixed",
                view(Some("h2:a"), None, false, false),
                &idle,
                reasons::INPUTS_APPLIED,
            ),
            (
                "immutable, first apply starts",
                view(None, Some("h2:a"), false, false),
                &apply,
                reasons::APPLY_RUNNING,
            ),
            (
                "immutable, first apply failed",
                view(None, Some("h2:a"), false, true),
                &idle,
                reasons::INPUTS_APPLY_FAILED,
            ),
            (
                "immutable, waiting for inputs",
                view(None, None, false, false),
                &idle,
                reasons::INPUTS_UNAVAILABLE,
            ),
        ];
        for (what, v, d, reason) in cases {
            assert_eq!(inputs_applied(&v, d).reason, reason, "{what}");
        }
    }
}
