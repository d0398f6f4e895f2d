use std::time::{Duration, SystemTime};

use super::*;

const MIN: u64 = 60;

fn t(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs)
}

fn s(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

/// A provisioned mutable object, up to date, drift checked 10 minutes ago
/// with an hourly interval; now is t(10_000).
fn base() -> DecideInput {
    DecideInput {
        now: t(10_000),
        uid: String::new(),
        created: t(0),
        mutable: true,
        deleting: false,
        retain: false,
        job_active: false,
        restore_requested: false,
        state: StateView {
            exists: true,
            held: false,
            inputs_hash: Some("h2:a".into()),
        },
        current_hash: Some("h2:a".into()),
        unconfirmed_apply: false,
        last_apply_failed: false,
        last_apply_success: Some(t(1_000)),
        failed_limit: 3,
        history: History::default(),
        gate: ApplyGate::Open,
        drift: DriftView {
            interval: Some(s(60 * MIN)),
            last_check: Some(t(10_000 - 10 * MIN)),
            detected: false,
            remediate: false,
            remediation_failures: 0,
        },
        refresh: RefreshView::default(),
        membership: None,
    }
}

fn start(op: Op) -> Action {
    Action::Start {
        op,
        approval: None,
        remediation: false,
    }
}

fn failures(count: u32, ago: u64) -> Failures {
    Failures {
        count,
        last_finished: t(10_000 - ago),
    }
}

#[track_caller]
fn check(name: &str, input: DecideInput, action: Action, label: &str, requeue: Option<Duration>) {
    let d = decide(&input);
    assert_eq!(d.action, action, "{name}: {d:?}");
    assert_eq!(d.reason_label(), label, "{name}: {d:?}");
    assert_eq!(
        d.requeue.filter(|_| requeue.is_some()),
        requeue,
        "{name}: {d:?}"
    );
}

#[test]
fn priority_table() {
    type Case = (
        &'static str,
        fn(&mut DecideInput),
        Action,
        &'static str,
        Option<Duration>,
    );
    let cases: Vec<Case> = vec![
        (
            "job active wins over everything",
            |i| {
                i.job_active = true;
                i.deleting = true;
                i.restore_requested = true;
            },
            Action::Wait,
            "JobActive",
            Some(s(60)),
        ),
        (
            "retain on deletion",
            |i| {
                i.deleting = true;
                i.retain = true;
                i.state.held = true;
            },
            Action::Retain,
            "DeletionPolicyRetain",
            None,
        ),
        (
            "restore when not deleting",
            |i| {
                i.restore_requested = true;
                i.state.held = true;
            },
            start(Op::Restore),
            "RestoreRequested",
            None,
        ),
        (
            "restore releases a held deletion",
            |i| {
                i.restore_requested = true;
                i.deleting = true;
                i.state.held = true;
            },
            start(Op::Restore),
            "RestoreRequested",
            None,
        ),
        (
            "no restore while deleting unheld",
            |i| {
                i.restore_requested = true;
                i.deleting = true;
            },
            start(Op::Destroy),
            "Deleting",
            None,
        ),
        (
            "restore ignores backoff",
            |i| {
                i.restore_requested = true;
                i.history = History::default().with(Op::Restore, failures(2, 1));
            },
            start(Op::Restore),
            "RestoreRequested",
            None,
        ),
        (
            "deleting with held state waits",
            |i| {
                i.deleting = true;
                i.state.held = true;
            },
            Action::Wait,
            "DeletionHeld",
            Some(s(60)),
        ),
        (
            "deleting without state drops the finalizer",
            |i| {
                i.deleting = true;
                i.state = StateView::default();
            },
            Action::DropFinalizer,
            "DeletingWithoutState",
            None,
        ),
        (
            "deleting destroys",
            |i| i.deleting = true,
            start(Op::Destroy),
            "Deleting",
            None,
        ),
        (
            "destroy backs off",
            |i| {
                i.deleting = true;
                i.history = History::default().with(Op::Destroy, failures(1, 20));
            },
            Action::Wait,
            "DeletingBackoff",
            Some(s(40)),
        ),
        (
            "destroy retries after the delay",
            |i| {
                i.deleting = true;
                i.history = History::default().with(Op::Destroy, failures(2, 121));
            },
            start(Op::Destroy),
            "Deleting",
            None,
        ),
        (
            "held state blocks applies",
            |i| {
                i.state.held = true;
                i.current_hash = Some("h2:b".into());
            },
            Action::Wait,
            "StateHeld",
            Some(s(60)),
        ),
        (
            "no state applies",
            |i| i.state = StateView::default(),
            start(Op::Apply),
            "NoState",
            None,
        ),
        (
            "no state is never gated by Manual",
            |i| {
                i.state = StateView::default();
                i.gate = ApplyGate::Manual(None);
            },
            start(Op::Apply),
            "NoState",
            None,
        ),
        (
            "state without inputs hash",
            |i| i.state.inputs_hash = None,
            start(Op::Apply),
            "StateWithoutInputsHash",
            None,
        ),
        (
            "state without inputs hash, immutable too",
            |i| {
                i.state.inputs_hash = None;
                i.mutable = false;
            },
            start(Op::Apply),
            "StateWithoutInputsHash",
            None,
        ),
        (
            "changed inputs",
            |i| i.current_hash = Some("h2:b".into()),
            start(Op::Apply),
            "InputsChanged",
            None,
        ),
        (
            "an older hash scheme counts as changed",
            |i| i.state.inputs_hash = Some("h1:a".into()),
            start(Op::Apply),
            "InputsChanged",
            None,
        ),
        (
            "immutable kinds ignore changed inputs",
            |i| {
                i.mutable = false;
                i.current_hash = Some("h2:b".into());
            },
            Action::Wait,
            "UpToDate",
            None,
        ),
        (
            "ungated inputs cannot change",
            |i| i.current_hash = None,
            Action::Wait,
            "UpToDate",
            None,
        ),
        (
            "failed apply retries",
            |i| i.last_apply_failed = true,
            start(Op::Apply),
            "LastApplyFailed",
            None,
        ),
        (
            "failed apply backs off",
            |i| {
                i.last_apply_failed = true;
                i.history = History::default().with(Op::Apply, failures(2, 30));
            },
            Action::Wait,
            "LastApplyFailedBackoff",
            Some(s(90)),
        ),
        (
            "immutable kinds do not retry on their own",
            |i| {
                i.mutable = false;
                i.last_apply_failed = true;
            },
            Action::Wait,
            "UpToDate",
            None,
        ),
        (
            "unconfirmed apply stays due",
            |i| i.unconfirmed_apply = true,
            start(Op::Apply),
            "UnconfirmedApply",
            None,
        ),
        (
            "drift remediation",
            |i| {
                i.drift.detected = true;
                i.drift.remediate = true;
            },
            Action::Start {
                op: Op::Apply,
                approval: None,
                remediation: true,
            },
            "DriftRemediation",
            None,
        ),
        (
            "reported drift does not apply",
            |i| i.drift.detected = true,
            Action::Wait,
            "UpToDate",
            None,
        ),
        (
            "remediation stops at the cap",
            |i| {
                i.drift.detected = true;
                i.drift.remediate = true;
                i.drift.remediation_failures = 3;
            },
            Action::Wait,
            "UpToDate",
            None,
        ),
        (
            "a cap of 0 counts as 1",
            |i| {
                i.failed_limit = 0;
                i.drift.detected = true;
                i.drift.remediate = true;
                i.drift.remediation_failures = 1;
            },
            Action::Wait,
            "UpToDate",
            None,
        ),
        (
            "manual without a plan plans",
            |i| {
                i.current_hash = Some("h2:b".into());
                i.gate = ApplyGate::Manual(None);
            },
            start(Op::Plan),
            "InputsChanged",
            None,
        ),
        (
            "manual plan backs off",
            |i| {
                i.current_hash = Some("h2:b".into());
                i.gate = ApplyGate::Manual(None);
                i.history = History::default().with(Op::Plan, failures(1, 10));
            },
            Action::Wait,
            "InputsChangedBackoff",
            Some(s(50)),
        ),
        (
            "manual pending plan waits",
            |i| {
                i.current_hash = Some("h2:b".into());
                i.gate = ApplyGate::Manual(Some(ManualPlan {
                    plan_hash: "p2:x".into(),
                    empty: false,
                    approved: false,
                }));
            },
            Action::Wait,
            "PlanAwaitingApproval",
            Some(s(600)),
        ),
        (
            "manual approved plan applies it",
            |i| {
                i.current_hash = Some("h2:b".into());
                i.gate = ApplyGate::Manual(Some(ManualPlan {
                    plan_hash: "p2:x".into(),
                    empty: false,
                    approved: true,
                }));
            },
            Action::Start {
                op: Op::Apply,
                approval: Some(Approval::ExpectPlan("p2:x".into())),
                remediation: false,
            },
            "InputsChanged",
            None,
        ),
        (
            "manual empty plan applies without approval",
            |i| {
                i.last_apply_failed = true;
                i.gate = ApplyGate::Manual(Some(ManualPlan {
                    plan_hash: "p2:empty".into(),
                    empty: true,
                    approved: false,
                }));
            },
            Action::Start {
                op: Op::Apply,
                approval: Some(Approval::ExpectPlan("p2:empty".into())),
                remediation: false,
            },
            "LastApplyFailed",
            None,
        ),
        (
            "blocked apply waits",
            |i| {
                i.current_hash = Some("h2:b".into());
                i.gate = ApplyGate::Blocked(None);
            },
            Action::Wait,
            "DestructivePlanBlocked",
            Some(s(600)),
        ),
        (
            "approved blocked apply runs bound",
            |i| {
                i.current_hash = Some("h2:b".into());
                i.gate = ApplyGate::Blocked(Some(Approval::AllowDeletes("h2:ap".into())));
            },
            Action::Start {
                op: Op::Apply,
                approval: Some(Approval::AllowDeletes("h2:ap".into())),
                remediation: false,
            },
            "InputsChanged",
            None,
        ),
    ];
    for (name, edit, action, label, requeue) in cases {
        let mut input = base();
        edit(&mut input);
        check(name, input, action, label, requeue);
    }
}

#[test]
fn a_waiting_input_change_pauses_the_schedule_but_a_waiting_remediation_does_not() {
    let mut input = base();
    input.refresh.after_apply_due = true;
    input.current_hash = Some("h2:b".into());
    input.gate = ApplyGate::Blocked(None);
    check(
        "blocked change",
        input.clone(),
        Action::Wait,
        "DestructivePlanBlocked",
        Some(s(600)),
    );

    input.current_hash = Some("h2:a".into());
    input.drift.detected = true;
    input.drift.remediate = true;
    check(
        "blocked remediation",
        input.clone(),
        start(Op::Refresh),
        "RefreshAfterApply",
        None,
    );

    input.refresh.after_apply_due = false;
    let d = decide(&input);
    assert_eq!(
        (d.action.clone(), d.reason),
        (Action::Wait, Reason::DestructivePlanBlocked)
    );
    // The drift check comes in 50 minutes; the approval wait caps at 10.
    assert_eq!(d.requeue, Some(s(600)));
}

#[test]
fn schedule_order_and_bases() {
    // Refresh after apply comes first.
    let mut i = base();
    i.refresh.after_apply_due = true;
    i.drift.last_check = Some(t(0));
    check(
        "after apply",
        i,
        start(Op::Refresh),
        "RefreshAfterApply",
        None,
    );

    // Drift is due one interval after its last check.
    let mut i = base();
    i.drift.last_check = Some(t(10_000 - 60 * MIN));
    check("drift due", i, start(Op::Drift), "DriftDue", None);

    // Never checked: one interval after the last successful apply...
    let mut i = base();
    i.drift.last_check = None;
    i.last_apply_success = Some(t(10_000 - 59 * MIN));
    check(
        "drift from apply",
        i,
        Action::Wait,
        "UpToDate",
        Some(s(MIN)),
    );

    // ...else after creation.
    let mut i = base();
    i.drift.last_check = None;
    i.last_apply_success = None;
    i.created = t(10_000 - 61 * MIN);
    check("drift from creation", i, start(Op::Drift), "DriftDue", None);

    // Health checks (machines with remediation on).
    let mut i = base();
    i.refresh.health_interval = Some(s(5 * MIN));
    i.refresh.last = Some(t(10_000 - 5 * MIN));
    check("health due", i, start(Op::Refresh), "HealthCheckDue", None);

    // Health pending doubles: after 2 pending refreshes the delay is 2m.
    let mut i = base();
    i.refresh.health_pending = true;
    i.refresh.pending_refreshes = 2;
    i.refresh.last = Some(t(10_000 - MIN));
    check(
        "pending not yet",
        i.clone(),
        Action::Wait,
        "UpToDate",
        Some(s(MIN)),
    );
    i.refresh.last = Some(t(10_000 - 2 * MIN));
    check("pending due", i, start(Op::Refresh), "HealthPending", None);
}

#[test]
fn pool_membership_schedule() {
    let mut i = base();
    i.membership = Some(Membership {
        converging: true,
        interval: s(MIN),
    });
    i.refresh.last = Some(t(10_000 - 29));
    check(
        "converging, 29s",
        i.clone(),
        Action::Wait,
        "UpToDate",
        Some(s(1)),
    );
    i.refresh.last = Some(t(10_000 - 30));
    check(
        "converging, 30s",
        i.clone(),
        start(Op::Refresh),
        "MembershipConverging",
        None,
    );

    // A configured interval shorter than 30s sets the converging spacing.
    i.membership = Some(Membership {
        converging: true,
        interval: s(15),
    });
    i.refresh.last = Some(t(10_000 - 15));
    check(
        "converging, short interval",
        i.clone(),
        start(Op::Refresh),
        "MembershipConverging",
        None,
    );

    // A pool's pending health uses the same spacing, not the doubling.
    i.membership = Some(Membership {
        converging: false,
        interval: s(MIN),
    });
    i.refresh.health_pending = true;
    i.refresh.pending_refreshes = 5;
    i.refresh.last = Some(t(10_000 - 30));
    check(
        "pool pending",
        i.clone(),
        start(Op::Refresh),
        "HealthPending",
        None,
    );

    // Converged: the membership interval.
    i.refresh.health_pending = false;
    check(
        "converged, 30s",
        i.clone(),
        Action::Wait,
        "UpToDate",
        Some(s(30)),
    );
    i.refresh.last = Some(t(10_000 - MIN));
    check(
        "membership due",
        i,
        start(Op::Refresh),
        "MembershipRefreshDue",
        None,
    );
}

#[test]
fn a_backed_off_op_pauses_only_itself() {
    let mut i = base();
    i.refresh.after_apply_due = true;
    i.history = History::default().with(Op::Refresh, failures(1, 10));
    check(
        "only refresh due",
        i.clone(),
        Action::Wait,
        "RefreshAfterApplyBackoff",
        Some(s(50)),
    );

    i.drift.last_check = Some(t(0));
    check("drift still runs", i, start(Op::Drift), "DriftDue", None);
}

#[test]
fn up_to_date_requeues_at_the_soonest_deadline_with_jitter() {
    let mut i = base();
    i.uid = "6f1c2c1e-5a4b-4b8e-9f57-1d2e3f4a5b6c".into();
    let d = decide(&i);
    let j = super::super::backoff::jitter(&i.uid, s(60 * MIN));
    assert!(j > Duration::ZERO);
    assert_eq!(
        (d.action.clone(), d.reason),
        (Action::Wait, Reason::UpToDate)
    );
    assert_eq!(d.requeue, Some(s(50 * MIN) + j));

    // Nothing periodic at all: no requeue.
    i.drift.interval = None;
    assert_eq!(decide(&i).requeue, None);
}

#[test]
fn labels() {
    let d = decide(&base());
    assert_eq!(
        (d.op_label(), d.reason_label().as_str()),
        ("none", "UpToDate")
    );
    let mut i = base();
    i.deleting = true;
    assert_eq!(decide(&i).op_label(), "destroy");
    let names: std::collections::BTreeSet<&str> = Op::ALL.iter().map(|o| o.as_str()).collect();
    assert_eq!(names.len(), 6);
}
