//! Which operation runs next for one object: a pure function over a
//! snapshot of the object, its state, its Jobs and the clock. The first
//! matching rule wins; see `docs/architecture.md` for the table.

use std::time::{Duration, SystemTime};

use super::backoff::{
    MEMBERSHIP_CONVERGING_INTERVAL, RETRY_MAX, jitter, pending_refresh_delay, retry_delay,
};

/// Requeue while a Job runs (its watch usually wakes us sooner).
pub const ACTIVE_JOB_REQUEUE: Duration = Duration::from_secs(60);
/// Requeue while state is lost or unreadable.
pub const STATE_REQUEUE: Duration = Duration::from_secs(60);

/// The operations a Job can run (the API's `status.activeJob.operation`).
pub use captf_api::common::Operation as Op;

/// Why a decision was taken (the `reason` label of the decisions metric; a
/// backed-off decision appends `Backoff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    JobActive,
    RestoreRequested,
    DeletionPolicyRetain,
    DeletionHeld,
    DeletingWithoutState,
    Deleting,
    StateHeld,
    NoState,
    StateWithoutInputsHash,
    InputsChanged,
    LastApplyFailed,
    UnconfirmedApply,
    DriftRemediation,
    PlanAwaitingApproval,
    DestructivePlanBlocked,
    RefreshAfterApply,
    MembershipConverging,
    HealthPending,
    MembershipRefreshDue,
    HealthCheckDue,
    DriftDue,
    UpToDate,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::JobActive => "JobActive",
            Reason::RestoreRequested => "RestoreRequested",
            Reason::DeletionPolicyRetain => "DeletionPolicyRetain",
            Reason::DeletionHeld => "DeletionHeld",
            Reason::DeletingWithoutState => "DeletingWithoutState",
            Reason::Deleting => "Deleting",
            Reason::StateHeld => "StateHeld",
            Reason::NoState => "NoState",
            Reason::StateWithoutInputsHash => "StateWithoutInputsHash",
            Reason::InputsChanged => "InputsChanged",
            Reason::LastApplyFailed => "LastApplyFailed",
            Reason::UnconfirmedApply => "UnconfirmedApply",
            Reason::DriftRemediation => "DriftRemediation",
            Reason::PlanAwaitingApproval => "PlanAwaitingApproval",
            Reason::DestructivePlanBlocked => "DestructivePlanBlocked",
            Reason::RefreshAfterApply => "RefreshAfterApply",
            Reason::MembershipConverging => "MembershipConverging",
            Reason::HealthPending => "HealthPending",
            Reason::MembershipRefreshDue => "MembershipRefreshDue",
            Reason::HealthCheckDue => "HealthCheckDue",
            Reason::DriftDue => "DriftDue",
            Reason::UpToDate => "UpToDate",
        }
    }
}

/// How the state Secrets read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateView {
    pub exists: bool,
    /// Lost, unreadable, or an apply whose outcome is unknown: nothing but a
    /// restore (or Retain on deletion) may touch it.
    pub held: bool,
    /// The inputs hash recorded with the state by its last apply.
    pub inputs_hash: Option<String>,
}

/// Consecutive failures of one op since its last success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failures {
    pub count: u32,
    /// When the newest of them finished.
    pub last_finished: SystemTime,
}

/// Per-op failure history, indexed by [`Op`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    failures: [Option<Failures>; Op::ALL.len()],
}

impl History {
    pub fn with(mut self, op: Op, failures: Failures) -> Self {
        self.failures[op as usize] = Some(failures);
        self
    }

    pub fn get(&self, op: Op) -> Option<Failures> {
        self.failures[op as usize]
    }
}

/// An approved plan to bind an apply to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// The exact plan (`--expect-plan`): TerraformPlan approvals, empty plans.
    ExpectPlan(String),
    /// Deletes allowed for this approval hash (`--allow-deletes-hash`): pools.
    AllowDeletes(String),
}

/// A TerraformPlan of the current inputs under `applyPolicy: Manual`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManualPlan {
    pub plan_hash: String,
    /// No resource, output, import or move change: applies without approval.
    pub empty: bool,
    pub approved: bool,
}

/// What stands between a due apply and its Job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ApplyGate {
    /// Nothing: the apply runs (guarded or not, as the kind requires).
    #[default]
    Open,
    /// `applyPolicy: Manual`; the live plan of the current inputs, if any.
    Manual(Option<ManualPlan>),
    /// The newest attempt for the current inputs was blocked before a
    /// destructive plan; the approval that names it, if any.
    Blocked(Option<Approval>),
}

/// Drift settings and findings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriftView {
    /// `None` when drift detection is off.
    pub interval: Option<Duration>,
    pub last_check: Option<SystemTime>,
    /// `DriftDetected=True`.
    pub detected: bool,
    /// The drift action is `Remediate` (and the kind is mutable).
    pub remediate: bool,
    /// Failed applies since the last successful drift check (remediation cap).
    pub remediation_failures: u32,
}

/// Refresh-schedule inputs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefreshView {
    /// Own last successful refresh.
    pub last: Option<SystemTime>,
    /// A successful apply has not been followed by a refresh yet.
    pub after_apply_due: bool,
    /// Health reads `pending`.
    pub health_pending: bool,
    /// Refreshes already run while pending (drives the doubling delay).
    pub pending_refreshes: u32,
    /// Periodic health check (machines with remediation on), when provisioned.
    pub health_interval: Option<Duration>,
}

/// Pool membership (absent for other kinds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// `len(spec.providerIDList) != status.replicas`.
    pub converging: bool,
    pub interval: Duration,
}

/// Everything [`decide`] looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecideInput {
    pub now: SystemTime,
    pub uid: String,
    pub created: SystemTime,
    /// Spec changes re-apply (cluster, pool); machines are immutable.
    pub mutable: bool,
    pub deleting: bool,
    /// `deletionPolicy: Retain` is in effect for this deletion.
    pub retain: bool,
    pub job_active: bool,
    /// `captf.io/restore-state` names a complete backup not yet restored.
    pub restore_requested: bool,
    pub state: StateView,
    /// Inputs hash of the current inputs (mutable kinds; `None` when they
    /// cannot be built yet).
    pub current_hash: Option<String>,
    /// An apply whose outcome was never confirmed (vanished Job, no result).
    pub unconfirmed_apply: bool,
    /// Newest apply failed (not blocked, not plan-changed, not a remediation).
    pub last_apply_failed: bool,
    pub last_apply_success: Option<SystemTime>,
    pub failed_limit: u32,
    pub history: History,
    pub gate: ApplyGate,
    pub drift: DriftView,
    pub refresh: RefreshView,
    pub membership: Option<Membership>,
}

/// What to do this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start a Job of this op, bound to an approval when one applies.
    Start {
        op: Op,
        approval: Option<Approval>,
        remediation: bool,
    },
    /// Remove the finalizer: there is nothing to destroy.
    DropFinalizer,
    /// Keep the infrastructure and release the object.
    Retain,
    /// Start nothing; look again after `requeue`.
    Wait,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    pub reason: Reason,
    /// The due op is waiting out its retry delay.
    pub backoff: bool,
    /// When to look again (also after starting a Job, as a fallback).
    pub requeue: Option<Duration>,
}

impl Decision {
    fn wait(reason: Reason, requeue: Duration) -> Self {
        Decision {
            action: Action::Wait,
            reason,
            backoff: false,
            requeue: Some(requeue),
        }
    }

    fn start(op: Op, reason: Reason) -> Self {
        Decision {
            action: Action::Start {
                op,
                approval: None,
                remediation: reason == Reason::DriftRemediation,
            },
            reason,
            backoff: false,
            requeue: Some(ACTIVE_JOB_REQUEUE),
        }
    }

    /// The metric label: the reason, with `Backoff` when backed off.
    pub fn reason_label(&self) -> String {
        if self.backoff {
            format!("{}Backoff", self.reason.as_str())
        } else {
            self.reason.as_str().to_owned()
        }
    }

    /// The op label of the decisions metric (`none` when nothing starts).
    pub fn op_label(&self) -> &'static str {
        match &self.action {
            Action::Start { op, .. } => op.as_str(),
            _ => "none",
        }
    }
}

fn elapsed(now: SystemTime, since: SystemTime) -> Duration {
    now.duration_since(since).unwrap_or(Duration::ZERO)
}

/// Time left in `op`'s retry delay, if it is backed off.
fn backoff_left(input: &DecideInput, op: Op) -> Option<Duration> {
    let f = input.history.get(op)?;
    let delay = retry_delay(f.count, input.failed_limit);
    let passed = elapsed(input.now, f.last_finished);
    (passed < delay).then(|| delay - passed)
}

/// Starts `op` for `reason`, or waits out its retry delay.
fn start_or_backoff(input: &DecideInput, op: Op, reason: Reason) -> Decision {
    match backoff_left(input, op) {
        Some(left) => Decision {
            backoff: true,
            ..Decision::wait(reason, left)
        },
        None => Decision::start(op, reason),
    }
}

/// The apply reason of rules 5–9, if an apply is due.
fn apply_reason(input: &DecideInput) -> Option<Reason> {
    if !input.state.exists {
        return Some(Reason::NoState);
    }
    let Some(state_hash) = &input.state.inputs_hash else {
        return Some(Reason::StateWithoutInputsHash);
    };
    if input.mutable {
        if input.current_hash.as_ref().is_some_and(|h| h != state_hash) {
            return Some(Reason::InputsChanged);
        }
        if input.last_apply_failed {
            return Some(Reason::LastApplyFailed);
        }
        if input.unconfirmed_apply {
            return Some(Reason::UnconfirmedApply);
        }
        let d = &input.drift;
        if d.remediate && d.detected && d.remediation_failures < input.failed_limit.max(1) {
            return Some(Reason::DriftRemediation);
        }
    }
    None
}

/// Decides the next operation.
pub fn decide(input: &DecideInput) -> Decision {
    if input.job_active {
        return Decision::wait(Reason::JobActive, ACTIVE_JOB_REQUEUE);
    }
    if input.deleting && input.retain {
        return Decision {
            action: Action::Retain,
            reason: Reason::DeletionPolicyRetain,
            backoff: false,
            requeue: None,
        };
    }
    if input.restore_requested && (!input.deleting || input.state.held) {
        // A restore never backs off: each backup serial is tried once.
        return Decision::start(Op::Restore, Reason::RestoreRequested);
    }
    if input.deleting {
        if input.state.held {
            return Decision::wait(Reason::DeletionHeld, STATE_REQUEUE);
        }
        if !input.state.exists {
            return Decision {
                action: Action::DropFinalizer,
                reason: Reason::DeletingWithoutState,
                backoff: false,
                requeue: None,
            };
        }
        return start_or_backoff(input, Op::Destroy, Reason::Deleting);
    }
    if input.state.held {
        return Decision::wait(Reason::StateHeld, STATE_REQUEUE);
    }

    // An apply waiting for approval caps the requeue; if it waits on an
    // input change it also pauses the schedule (a refresh would render the
    // unapplied inputs), while a waiting remediation lets it run.
    let mut approval_wait: Option<Decision> = None;
    if let Some(reason) = apply_reason(input) {
        let waiting = |r| Decision::wait(r, RETRY_MAX);
        let decision = match (&input.gate, reason) {
            (_, Reason::NoState) | (ApplyGate::Open, _) => {
                start_or_backoff(input, Op::Apply, reason)
            }
            (ApplyGate::Manual(None), _) => start_or_backoff(input, Op::Plan, reason),
            (ApplyGate::Manual(Some(plan)), _) if plan.empty || plan.approved => {
                let mut d = start_or_backoff(input, Op::Apply, reason);
                if let Action::Start { approval, .. } = &mut d.action {
                    *approval = Some(Approval::ExpectPlan(plan.plan_hash.clone()));
                }
                d
            }
            (ApplyGate::Manual(Some(_)), _) => waiting(Reason::PlanAwaitingApproval),
            (ApplyGate::Blocked(Some(a)), _) => {
                let mut d = start_or_backoff(input, Op::Apply, reason);
                if let Action::Start { approval, .. } = &mut d.action {
                    *approval = Some(a.clone());
                }
                d
            }
            (ApplyGate::Blocked(None), _) => waiting(Reason::DestructivePlanBlocked),
        };
        let is_approval_wait = matches!(
            decision.reason,
            Reason::PlanAwaitingApproval | Reason::DestructivePlanBlocked
        );
        if !is_approval_wait || reason != Reason::DriftRemediation {
            return decision;
        }
        approval_wait = Some(decision);
    }
    schedule(input, approval_wait)
}

/// A periodic check: due at `base + interval + jitter`.
struct Check {
    op: Op,
    reason: Reason,
    due_at: SystemTime,
}

fn periodic(
    input: &DecideInput,
    op: Op,
    reason: Reason,
    own_last: Option<SystemTime>,
    interval: Duration,
) -> Check {
    let base = own_last
        .or(input.last_apply_success)
        .unwrap_or(input.created);
    Check {
        op,
        reason,
        due_at: base + interval + jitter(&input.uid, interval),
    }
}

/// Rules 11–17: refreshes and drift checks when no apply is due.
fn schedule(input: &DecideInput, approval_wait: Option<Decision>) -> Decision {
    let r = &input.refresh;
    let mut checks = Vec::new();
    if r.after_apply_due {
        checks.push(Check {
            op: Op::Refresh,
            reason: Reason::RefreshAfterApply,
            due_at: input.now,
        });
    }
    // Converging membership and pending health share one spacing on pools:
    // every 30s, or the membership interval when that is shorter.
    let pool_spacing = input
        .membership
        .as_ref()
        .map(|m| m.interval.min(MEMBERSHIP_CONVERGING_INTERVAL));
    if let (Some(m), Some(spacing)) = (&input.membership, pool_spacing)
        && m.converging
    {
        checks.push(periodic(
            input,
            Op::Refresh,
            Reason::MembershipConverging,
            r.last,
            spacing,
        ));
    } else if r.health_pending {
        let spacing = pool_spacing.unwrap_or_else(|| pending_refresh_delay(r.pending_refreshes));
        checks.push(periodic(
            input,
            Op::Refresh,
            Reason::HealthPending,
            r.last,
            spacing,
        ));
    }
    if let Some(m) = &input.membership {
        checks.push(periodic(
            input,
            Op::Refresh,
            Reason::MembershipRefreshDue,
            r.last,
            m.interval,
        ));
    }
    if let Some(interval) = r.health_interval {
        checks.push(periodic(
            input,
            Op::Refresh,
            Reason::HealthCheckDue,
            r.last,
            interval,
        ));
    }
    if let Some(interval) = input.drift.interval {
        checks.push(periodic(
            input,
            Op::Drift,
            Reason::DriftDue,
            input.drift.last_check,
            interval,
        ));
    }

    // The first due check whose op is not backed off starts; a backed-off
    // one only pauses its own op.
    let mut first_backoff: Option<Decision> = None;
    let mut next: Option<Duration> = approval_wait.as_ref().and_then(|d| d.requeue);
    let mut soonest = |d: Duration| next = Some(next.map_or(d, |n| n.min(d)));
    for check in &checks {
        if check.due_at > input.now {
            soonest(elapsed(check.due_at, input.now));
            continue;
        }
        match backoff_left(input, check.op) {
            None => return Decision::start(check.op, check.reason),
            Some(left) => {
                soonest(left);
                first_backoff.get_or_insert(Decision {
                    backoff: true,
                    ..Decision::wait(check.reason, left)
                });
            }
        }
    }
    let base = approval_wait.or(first_backoff).unwrap_or(Decision {
        action: Action::Wait,
        reason: Reason::UpToDate,
        backoff: false,
        requeue: None,
    });
    Decision {
        requeue: next,
        ..base
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
