//! How a pass ends: the close with `Ready` and the status patch, a running
//! Job's close, the Job start, and the two deletion ends (Retain, and
//! release after the destroy).

use std::time::{Duration, SystemTime};

use captf_api::names::{annotations, conditions, events};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use serde_json::Value;

use super::announcements::{force_unlock_warning, plan_start_announcements};
use super::effect::Effect;
use super::effects;
use super::job_start::{StartOutcome, StartRequest, StartSettings, execute_start, plan_start};
use super::leaving::{Leaving, leaving_effects};
use super::open_pass::{Closing, Measured, OpenPass};
use super::pass;
use super::pass_conditions::set_ready;
use super::slots::SlotAnswer;
use super::status::Draft;
use super::workload::Workload;
use super::{Context, Error};
use crate::engine::decide::{ACTIVE_JOB_REQUEUE, Decision, Op};
use crate::engine::history::last_success;
use crate::engine::history::{JobRecord, Outcome};
use crate::engine::job_conditions::ConditionValue;

/// How soon a pass that found the run lease held by a Job it did not list
/// looks again.
const RACE_REQUEUE: Duration = pass::START_DEFERRED_REQUEUE;

/// The Job holding the run lease although the pass listed none running (see
/// `pass::run_lease_holder`); no read when this pass gave the lease back
/// itself.
async fn racing_holder<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &OpenPass,
) -> Result<Option<String>, Error> {
    if p.booked.run_lease_released {
        return Ok(None);
    }
    let holder = pass::run_lease_holder(ctx, obj).await?;
    if let Some(job) = &holder {
        tracing::info!(namespace = %obj.namespace().unwrap_or_default(), name = %obj.name_any(), job = %job, "the run lease is held by a Job this pass did not list; block-move and the finalizer stay");
    }
    Ok(holder)
}

/// Ends a pass that starts nothing: Ready, the patch, the marks.
pub async fn close<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &mut Closing,
    requeue: Option<Duration>,
) -> Result<Action, Error> {
    let requeue = match (requeue, p.retry_after) {
        (Some(r), Some(retry)) => Some(r.min(retry)),
        (r, retry) => r.or(retry),
    };
    let mut requeue = requeue;
    if p.pass.active.is_none() && p.pass.block_move {
        // No Job runs: block-move goes, unless a start racing this pass
        // holds the run lease (its Job is about to exist).
        match racing_holder(ctx, obj, &p.pass).await? {
            Some(_) => requeue = Some(requeue.map_or(RACE_REQUEUE, |r| r.min(RACE_REQUEUE))),
            None => pass::set_block_move(ctx, obj, &mut p.pass.block_move, false).await?,
        }
    }
    let provisioned = p.status.stamps().provisioned.unwrap_or(obj.provisioned());
    set_ready::<K>(&mut p.status, provisioned);
    super::status_patch::write_status(ctx, obj, &p.status, &p.pass.booked.marks).await?;
    export_gauges(ctx, obj, p);
    if p.pass.active.is_none() && !p.pass.deleting() {
        // Nothing runs: the resyncs until `requeue` may stand on this pass.
        super::quiet::settle(ctx, obj, requeue, p.pass.credentials.clone());
    }
    let after = requeue
        .unwrap_or(ctx.config.sync_period)
        .min(ctx.config.sync_period);
    Ok(Action::requeue(after.max(Duration::from_millis(200))))
}

/// The per-object gauges from the conditions this pass wrote and the
/// sizes it measured.
fn export_gauges<K: Workload>(ctx: &Context, obj: &K, p: &Closing) {
    use crate::metrics::{ConditionValue as Tri, ObjectGauges};
    let status = |t: &str| Tri::from_status(p.status.get(t).map(|c| c.status.as_str()));
    let mut successes = Vec::new();
    for op in scheduled_success_ops(&p.pass) {
        if let Some(t) = last_success(&p.pass.loaded.records(), op) {
            let secs = t
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0);
            successes.push((op.as_str().to_owned(), secs));
        }
    }
    let unhealthy_samples = match p.status.stamps().unhealthy_samples {
        Some(set) => Some(u64::from(set.unwrap_or(0))),
        None => obj.unhealthy_samples().map(u64::from),
    };
    ctx.metrics.object(
        K::KIND.kind(),
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
        &ObjectGauges {
            ready: status(conditions::READY),
            infrastructure_healthy: Some(status(conditions::INFRASTRUCTURE_HEALTHY)),
            drift_detected: p.status.is_true(conditions::DRIFT_DETECTED),
            state: p.measured.state,
            inputs_bytes: p.measured.inputs_bytes,
            unhealthy_samples,
            last_success: successes,
        },
    );
}

/// The operations whose newest success is exported: applies always, and
/// drift checks and refreshes only while they are scheduled (so
/// `CAPTFNoRecentSuccess` never fires for checks nobody asked for).
fn scheduled_success_ops(p: &OpenPass) -> Vec<Op> {
    if p.deleting() {
        return Vec::new();
    }
    let mut ops = vec![Op::Apply];
    if !p.shared.paused {
        if p.shared.drift_interval.is_some() {
            ops.push(Op::Drift);
        }
        if p.shared.health_interval.is_some() {
            ops.push(Op::Refresh);
        }
    }
    ops
}

/// Counts a pass's decision (`captf_reconcile_op_decisions_total`).
pub fn count_decision<K: Workload>(ctx: &Context, _obj: &K, d: &Decision) {
    let op = match d.op_label() {
        "none" => None,
        op => Some(op),
    };
    ctx.metrics.decided(K::KIND.kind(), op, &d.reason_label());
}

/// Counts `OutputsValid` turning False (a transition, not every pass).
pub fn count_outputs_invalid<K: Workload>(ctx: &Context, obj: &K, v: &ConditionValue) {
    let before = obj.condition(conditions::OUTPUTS_VALID);
    let again = before.is_some_and(|c| c.status == "False" && c.reason == v.reason);
    if v.status == "False" && !again {
        ctx.metrics.outputs_invalid(K::KIND.kind(), v.reason);
    }
}

/// A Job runs: delete it if it can never start, else keep waiting.
pub async fn close_active<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &mut Closing,
    now: SystemTime,
) -> Result<Action, Error> {
    let active = p.pass.active.clone().expect("an active Job");
    let replaced = super::pull_fallback::check(ctx, obj, p, &active, now).await?;
    if replaced || pass::delete_if_stuck(ctx, obj, &active, now).await? {
        p.status.field("activeJob", Value::Null);
        return close(ctx, obj, p, Some(Duration::from_secs(1))).await;
    }
    pass::set_block_move(ctx, obj, &mut p.pass.block_move, true).await?;
    p.status.field(
        "activeJob",
        captf_api::common::ActiveJob {
            name: active.name.clone(),
            operation: active.op,
            attempt: active.attempt as i32,
            start_time: Some(super::status::time(active.created)),
        },
    );
    close(ctx, obj, p, Some(ACTIVE_JOB_REQUEUE)).await
}

/// Starts the decided Job and closes the pass.
pub async fn start_job<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &mut Closing,
    req: StartRequest,
    decision: &Decision,
    now: SystemTime,
) -> Result<Action, Error> {
    let op = req.op;
    if let Some(v) = crate::engine::job_conditions::job_policy_invalid(&req.jobs, op) {
        p.status.set(conditions::APPLY_JOB_SUCCEEDED, &v);
        let requeue = crate::engine::job_conditions::JOB_POLICY_REQUEUE;
        return close(ctx, obj, p, Some(requeue)).await;
    }
    // Slots come before any event of the start and before any lease. The
    // reservation frees itself on every path that creates no Job.
    let slot = match super::slots::wait_for_slot(ctx, obj, p, op).await? {
        SlotAnswer::Admitted(slot) => slot,
        SlotAnswer::Wait(requeue) => return close(ctx, obj, p, Some(requeue)).await,
    };
    let mut req = req;
    let (id, version) = stale_lock(ctx, obj, &mut p.status).await?;
    req.force_unlock = id;
    if op == Op::Apply {
        // Lock evidence: if this apply fails with neither a pod nor a
        // result, an unchanged lock proves its runtime never ran.
        req.annotations
            .insert(annotations::STATE_LOCK_VERSION.to_owned(), version);
    }
    let records = p.pass.loaded.records();
    let (announcements, drift) = plan_start_announcements(decision.reason, op, &records);
    if let Some(v) = &drift {
        p.status.set(conditions::DRIFT_DETECTED, v);
    }
    effects::apply(ctx, obj, &announcements).await?;
    let config = StartSettings {
        runner_image: &ctx.config.runner_image,
        runner_events: ctx.config.runner_events,
        cluster_gate: ctx.config.cluster_operation_gate,
    };
    let planned_unlock = req.force_unlock.clone();
    let planned = plan_start(obj, &records, req, &config);
    let outcome = execute_start(
        ctx,
        obj,
        &planned,
        &mut p.status,
        &mut p.pass.block_move,
        now,
    )
    .await?;
    let requeue = match outcome {
        StartOutcome::Started { job } => {
            let ns = obj.namespace().unwrap_or_default();
            slot.started(&ns, &job, &p.pass.shared.cluster_name);
            if let Some(id) = &planned_unlock {
                effects::apply(ctx, obj, &[force_unlock_warning(&job, id, op)]).await?;
            }
            p.pass.active = Some(JobRecord {
                name: job,
                op,
                attempt: 0,
                outcome: Outcome::Running,
                created: now,
                finished: None,
                remediation: false,
            });
            ACTIVE_JOB_REQUEUE
        }
        StartOutcome::Waiting { requeue } => {
            // The slot is free again before the pass closes.
            drop(slot);
            requeue
        }
    };
    close(ctx, obj, p, Some(requeue)).await
}

/// The state lock's ID when one of the object's own runner pods left it
/// behind (gone or finished): the Job about to start releases it. A lock
/// held by anyone else is never touched: `StateReadable=False/StateLocked`
/// says who holds it, and the Job waits for it up to its lock timeout. One
/// GET of the lock Lease per start (and of its holder's pod only when that
/// is ours); the Lease's version comes with it, for lock evidence.
async fn stale_lock<K: Workload>(
    ctx: &Context,
    obj: &K,
    draft: &mut super::status::Draft,
) -> Result<(Option<String>, String), Error> {
    let lock = super::stored::read_lock(ctx, obj).await?;
    if let Some(v) = super::stored::locked_by_other(obj, &lock.verdict) {
        report_locked(ctx, obj, draft, &v).await;
    }
    let id = match lock.verdict {
        crate::leases::LockVerdict::Stale { id } => Some(id),
        _ => None,
    };
    Ok((id, lock.version))
}

/// Sets `StateReadable=False/StateLocked`; the event and the metric go once
/// per transition into it.
pub async fn report_locked<K: Workload>(
    ctx: &Context,
    obj: &K,
    draft: &mut super::status::Draft,
    v: &ConditionValue,
) {
    let before = obj.condition(conditions::STATE_READABLE);
    if !before.is_some_and(|c| c.status == "False" && c.reason == v.reason) {
        ctx.metrics.state_read_failed(K::KIND.kind(), "locked");
        pass::event(
            ctx,
            obj,
            true,
            events::STATE_LOCKED,
            "Reconcile",
            v.message.clone(),
        )
        .await;
    }
    draft.set(conditions::STATE_READABLE, v);
}

/// Deletion under Retain: nothing is destroyed; state, backups and records
/// stay, unowned and labeled; then the finalizer goes.
pub async fn retain_and_release<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &mut Closing,
) -> Result<Action, Error> {
    if racing_holder(ctx, obj, &p.pass).await?.is_some() {
        return close(ctx, obj, p, Some(RACE_REQUEUE)).await;
    }
    super::status_patch::write_status(ctx, obj, &p.status, &p.pass.booked.marks).await?;
    effects::apply(ctx, obj, &leaving_effects(&Leaving::Retained)).await?;
    Ok(Action::await_change())
}

/// Deletion ends: everything the object made goes, then its finalizer.
pub async fn release_after_destroy<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &mut Closing,
) -> Result<Action, Error> {
    if !p.pass.deleting() {
        return close(ctx, obj, p, None).await;
    }
    if racing_holder(ctx, obj, &p.pass).await?.is_some() {
        return close(ctx, obj, p, Some(RACE_REQUEUE)).await;
    }
    // The status goes first so the bookkept marks land; the object may be
    // gone right after the finalizer.
    super::status_patch::write_status(ctx, obj, &p.status, &p.pass.booked.marks).await?;
    let by = p
        .pass
        .loaded
        .records()
        .into_iter()
        .filter(|r| r.op == Op::Destroy && r.outcome == Outcome::Succeeded)
        .max_by_key(|r| r.finished)
        .map(|r| r.name);
    effects::apply(ctx, obj, &leaving_effects(&Leaving::Destroyed { by })).await?;
    Ok(Action::await_change())
}

/// What a kind's plan made of its snapshot: the status, what it measured,
/// the writes in order, the decision, and how the pass ends.
#[derive(Debug)]
pub struct PassPlan {
    pub status: Draft,
    pub measured: Measured,
    pub effects: Vec<Effect>,
    pub decision: Option<Decision>,
    pub ending: PassEnding,
}

impl PassPlan {
    /// A plan that ends the pass before any decision.
    pub fn undecided(
        status: Draft,
        measured: Measured,
        effects: Vec<Effect>,
        ending: PassEnding,
    ) -> Self {
        PassPlan {
            status,
            measured,
            effects,
            decision: None,
            ending,
        }
    }
}

/// The execute stage of every kind: the plan's effects in order, then
/// the ending as planned.
pub async fn execute<K: Workload>(
    ctx: &Context,
    obj: &K,
    pass: OpenPass,
    plan: PassPlan,
    now: SystemTime,
) -> Result<Action, Error> {
    let mut closing = Closing::new(pass, plan.status, plan.measured);
    make_effects(ctx, obj, &mut closing, &plan.effects).await?;
    close_as_planned(ctx, obj, &mut closing, plan.ending, plan.decision, now).await
}

/// Makes a plan's effects in order; how a backup among them went goes into
/// the status.
pub async fn make_effects<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &mut Closing,
    writes: &[Effect],
) -> Result<(), Error> {
    let applied = effects::apply(ctx, obj, writes).await?;
    super::backups::record_backup(p, applied.backup.as_ref());
    Ok(())
}

/// How a pass planned to end, once its effects are made.
#[derive(Debug, Clone)]
pub enum PassEnding {
    /// Nothing starts: the status, and a look again after the requeue.
    Close(Option<Duration>),
    /// The decided Job starts.
    Start(Box<StartRequest>),
    /// Deletion under Retain.
    Retain,
    /// The destroy succeeded: release and drop the finalizer.
    Release,
}

/// Ends a planned pass: its decision logged and counted, then the ending.
pub async fn close_as_planned<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &mut Closing,
    ending: PassEnding,
    decision: Option<Decision>,
    now: SystemTime,
) -> Result<Action, Error> {
    if let Some(d) = &decision {
        // A decision that starts a Job is news; one that waits repeats on
        // every pass of a converged object and stays at debug.
        let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
        if matches!(d.action, crate::engine::decide::Action::Start { .. }) {
            tracing::info!(namespace = %ns, name = %name, reason = %d.reason_label(), op = d.op_label(), "decided");
        } else {
            tracing::debug!(namespace = %ns, name = %name, reason = %d.reason_label(), op = d.op_label(), "decided");
        }
        count_decision(ctx, obj, d);
    }
    match (ending, decision) {
        (PassEnding::Start(req), Some(d)) => start_job(ctx, obj, p, *req, &d, now).await,
        (PassEnding::Retain, _) => retain_and_release(ctx, obj, p).await,
        (PassEnding::Release, _) => release_after_destroy(ctx, obj, p).await,
        (PassEnding::Close(requeue), _) => close(ctx, obj, p, requeue).await,
        (PassEnding::Start(_), None) => unreachable!("a start is always decided"),
    }
}
