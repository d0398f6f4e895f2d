//! The opening stages of a pass every Job-running kind follows: the
//! preamble with its early exits, credentials and the runner's RBAC,
//! bookkeeping, a vanished apply, and retained state of an earlier object.

use std::time::{Duration, SystemTime};

use captf_api::names::{annotations, conditions, reasons};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use serde_json::Value;

use super::bookkeeping::{BookkeepingPolicy, Bookkept, plan_bookkeeping};
use super::credentials::CredentialsVerdict;
use super::effects;
use super::leaving::{Leaving, leaving_effects};
use super::open_pass::{Closing, EarlyReads, OpenPass, Opened, Opening, Records};
use super::opening_plan::{
    OWNER_REQUEUE, PreambleEnd, RetainedFound, preamble_end, retained_found, vanished_apply_writes,
};
use super::pass::{self, Loaded};
use super::pass_conditions::{deleting_condition, paused_condition, set_ready};
use super::runner_access::ensure_runner;
use super::settings::{PassSettings, bookkeeping_policy};
use super::status::Draft;
use super::workload::Workload;
use super::{Context, Error};
use crate::adapters::dependencies_ready;
use crate::engine::decide::Op;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::engine::preamble::{Preamble, PreambleInput, preamble};
use crate::records::InputsRecord;
use crate::state::reader::{StateError, StateSummary};

/// How the pass of a machine or a pool begins: the quiet resync, the pass
/// counted, the opening stages, and the end of a pass whose Job still
/// runs. `Continue` hands the rest to the kind's fetch. (The cluster's
/// driver orders the same pieces around its owner read and its plans.)
pub async fn begin<K: Workload>(
    ctx: &Context,
    obj: &K,
    settings: &PassSettings,
    now: SystemTime,
) -> Result<Opening, Error> {
    if let Some(action) = super::quiet::resync(ctx, obj, settings.identity.as_ref()).await? {
        return Ok(Opening::Done(action));
    }
    super::quiet::unsettle(ctx, obj);
    let ns = obj.namespace().unwrap_or_default();
    ctx.passes.count(K::KIND.kind(), &ns, &obj.name_any());
    let opened = match open(ctx, obj, settings, now).await? {
        Opening::Done(action) => return Ok(Opening::Done(action)),
        Opening::Continue(opened) => opened,
    };
    if opened.pass.active.is_some() {
        let mut closing = Closing::opened(*opened);
        let action = super::ending::close_active(ctx, obj, &mut closing, now).await?;
        return Ok(Opening::Done(action));
    }
    Ok(Opening::Continue(opened))
}

/// The preamble and the opening stages. `Done` ends the pass.
pub async fn open<K: Workload>(
    ctx: &Context,
    obj: &K,
    shared: &PassSettings,
    now: SystemTime,
) -> Result<Opening, Error> {
    let deleting = obj.meta().deletion_timestamp.is_some();
    let generation = obj.meta().generation.unwrap_or(0);
    let mut draft = Draft::new(obj.conditions(), generation, now);
    let loaded = pass::load_jobs(ctx, obj).await?;
    let early = read_for_deletion(ctx, obj, &loaded, deleting).await?;
    let pre = preamble(&PreambleInput {
        externally_managed: obj.annotations().contains_key(annotations::MANAGED_BY),
        deleting,
        has_finalizer: obj.has_finalizer(),
        owner: shared.owner.lookup,
        paused: shared.paused,
        nothing_to_clean_up: early.nothing_to_clean_up,
    });
    if let Some(action) = end_in_preamble(ctx, obj, shared, pre, &mut draft, deleting).await? {
        return Ok(Opening::Done(action));
    }
    let paused = pre == Preamble::Paused;
    // Retained Secrets of an earlier namesake can only be there before this
    // object's first Job: once it ran one, they would be its own.
    let before_first_job = loaded.jobs.is_empty() && !obj.provisioned();
    if !paused
        && before_first_job
        && let Some(done) = retained_elsewhere(ctx, obj, &mut draft, deleting).await?
    {
        return Ok(Opening::Done(done));
    }
    draft.set(conditions::PAUSED, &paused_condition(paused));
    let abandon = abandon_requested(obj);
    if deleting && abandon {
        tracing::warn!(namespace = %obj.namespace().unwrap_or_default(), name = %obj.name_any(), "{}", super::pass_conditions::ABANDON_IGNORED);
    }
    draft.set(
        conditions::DELETING,
        &deleting_condition(deleting, paused, abandon),
    );
    if shared.owner.condition.is_none() {
        draft.set(conditions::DEPENDENCIES_READY, &dependencies_ready());
    }
    // A deletion under Retain, or of an object with nothing to destroy,
    // runs no Job: it needs no credentials (a missing identity must not
    // keep such an object forever).
    let runs_no_job = paused || (deleting && (shared.retain || early.nothing_to_destroy));
    let credentials = if runs_no_job {
        None
    } else {
        match check_runner(ctx, obj, shared, &loaded, &mut draft).await? {
            Ok(verdict) => Some(verdict),
            Err(action) => return Ok(Opening::Done(action)),
        }
    };
    let booked = bookkeep(ctx, obj, &loaded, &mut draft, &bookkeeping_policy(shared)).await?;
    let opened = opened(obj, shared, draft, loaded, booked, credentials, early);
    after_bookkeeping(ctx, obj, opened, paused, now).await
}

/// What a deleting object's opening read (is there anything to clean up?),
/// kept for the pass so it reads nothing twice.
struct DeletionRead {
    state: Option<Result<StateSummary, StateError>>,
    records: Option<Records>,
    nothing_to_destroy: bool,
    nothing_to_clean_up: bool,
}

async fn read_for_deletion<K: Workload>(
    ctx: &Context,
    obj: &K,
    loaded: &Loaded,
    deleting: bool,
) -> Result<DeletionRead, Error> {
    if !deleting {
        return Ok(DeletionRead {
            state: None,
            records: None,
            nothing_to_destroy: false,
            nothing_to_clean_up: false,
        });
    }
    let read = pass::state(ctx, obj).await?;
    let records = super::stored::read_records(ctx, obj).await?;
    let left = crate::engine::leftovers::Leftovers {
        jobs: !loaded.jobs.is_empty(),
        state: !matches!(read, Err(StateError::NotFound)),
        provisioned: obj.provisioned(),
        applied_record: InputsRecord::ever_applied(
            records.applied.as_ref(),
            records.attempt.as_ref(),
        ),
        unconfirmed_apply: InputsRecord::unconfirmed_in_force(
            records.attempt.as_ref(),
            records.applied.as_ref(),
        )
        .is_some(),
        vanished_apply: vanished_apply(obj, loaded).is_some(),
    };
    Ok(DeletionRead {
        nothing_to_destroy: left.nothing_to_destroy(),
        nothing_to_clean_up: left.nothing_to_clean_up(),
        state: Some(read),
        records: Some(records),
    })
}

/// Makes the end a preamble asks for (`opening_plan::preamble_end`);
/// `None` when the pass goes on (paused or proceeding).
async fn end_in_preamble<K: Workload>(
    ctx: &Context,
    obj: &K,
    shared: &PassSettings,
    pre: Preamble,
    draft: &mut Draft,
    deleting: bool,
) -> Result<Option<Action>, Error> {
    let action = match preamble_end(pre) {
        None => return Ok(None),
        Some(PreambleEnd::Writes(writes, action)) => {
            effects::apply(ctx, obj, &writes).await?;
            action
        }
        Some(PreambleEnd::LeaveUnlessRacing) => {
            // The probe: only the apiserver knows whether a start racing
            // this pass holds the run lease.
            if let Some(job) = pass::run_lease_holder(ctx, obj).await? {
                tracing::info!(namespace = %obj.namespace().unwrap_or_default(), name = %obj.name_any(), job = %job, "the run lease is held; the finalizer stays");
                return Ok(Some(Action::requeue(pass::START_DEFERRED_REQUEUE)));
            }
            effects::apply(ctx, obj, &leaving_effects(&Leaving::NothingMade)).await?;
            Action::await_change()
        }
        Some(PreambleEnd::ReportOwner) => {
            if let Some(c) = &shared.owner.condition {
                draft.set(conditions::DEPENDENCIES_READY, c);
            }
            draft.set(
                conditions::DELETING,
                &deleting_condition(deleting, false, abandon_requested(obj)),
            );
            set_ready::<K>(draft, obj.provisioned());
            super::status_patch::write_status(ctx, obj, draft, &[]).await?;
            Action::requeue(OWNER_REQUEUE)
        }
    };
    Ok(Some(action))
}

/// Credentials and the runner's RBAC, every pass of a live object that may
/// run a Job. `Err` ends the pass: no Job can run, what finished is still
/// bookkept.
async fn check_runner<K: Workload>(
    ctx: &Context,
    obj: &K,
    shared: &PassSettings,
    loaded: &Loaded,
    draft: &mut Draft,
) -> Result<Result<CredentialsVerdict, Action>, Error> {
    let (verdict, writes) =
        super::credentials::check(ctx, obj, shared.identity.as_ref(), draft).await?;
    effects::apply(ctx, obj, &writes).await?;
    if verdict == CredentialsVerdict::Blocked {
        let action = Action::requeue(Duration::from_secs(15));
        return Ok(Err(
            end_blocked(ctx, obj, shared, loaded, draft, action).await?
        ));
    }
    match ensure_runner(ctx, obj, &shared.jobs).await {
        Ok(account) => draft.set(
            conditions::RUNNER_RBAC_READY,
            &ConditionValue {
                status: ConditionStatus::True,
                reason: reasons::RBAC_READY,
                message: format!("ServiceAccount {account} can run Jobs"),
            },
        ),
        Err(blocked) => {
            // No Job can run as a missing or unconsenting account.
            draft.set(conditions::RUNNER_RBAC_READY, &blocked);
            let action = Action::requeue(Duration::from_secs(30));
            return Ok(Err(
                end_blocked(ctx, obj, shared, loaded, draft, action).await?
            ));
        }
    }
    Ok(Ok(verdict))
}

/// Ends a pass whose runner cannot run: bookkeeping, `Ready`, the status.
async fn end_blocked<K: Workload>(
    ctx: &Context,
    obj: &K,
    shared: &PassSettings,
    loaded: &Loaded,
    draft: &mut Draft,
    action: Action,
) -> Result<Action, Error> {
    let booked = bookkeep(ctx, obj, loaded, draft, &bookkeeping_policy(shared)).await?;
    set_ready::<K>(draft, obj.provisioned());
    super::status_patch::write_status(ctx, obj, draft, &booked.marks).await?;
    Ok(action)
}

/// The pass past its opening, with what bookkeeping made stale dropped.
fn opened<K: Workload>(
    obj: &K,
    shared: &PassSettings,
    draft: Draft,
    loaded: Loaded,
    booked: Bookkept,
    credentials: Option<CredentialsVerdict>,
    early: DeletionRead,
) -> Opened {
    // Bookkeeping that adopted the state of an apply makes the early state
    // read stale; one that bookkept anything may have written the records.
    let adopted = booked.newly.iter().any(|o| o.record.op == Op::Apply);
    let wrote_records = !booked.newly.is_empty();
    let credentials_secret = match &credentials {
        Some(CredentialsVerdict::Ready(secret)) => secret.clone(),
        _ => None,
    };
    let pass = OpenPass {
        loaded,
        active: booked.active.clone(),
        booked,
        shared: shared.clone(),
        credentials_secret,
        credentials,
        block_move: obj.annotations().contains_key(annotations::BLOCK_MOVE),
        deleting: obj.meta().deletion_timestamp.is_some(),
    };
    let early = EarlyReads {
        state: early.state.filter(|_| !adopted),
        records: early.records.filter(|_| !wrote_records),
    };
    Opened {
        pass,
        status: draft,
        early,
    }
}

/// A vanished apply is recorded and `activeJob` goes when no Job runs; a
/// paused object's pass ends here.
async fn after_bookkeeping<K: Workload>(
    ctx: &Context,
    obj: &K,
    mut opened: Opened,
    paused: bool,
    now: SystemTime,
) -> Result<Opening, Error> {
    if opened.pass.active.is_none() {
        if let Some(job) = vanished_apply(obj, &opened.pass.loaded) {
            record_vanished(ctx, obj, &mut opened.status, &job).await?;
            // It may have marked the attempt record.
            opened.early.records = None;
        }
        // No Job runs: activeJob goes, and block-move when the pass ends
        // without starting one.
        opened.status.field("activeJob", Value::Null);
    }
    if paused {
        let active = opened.pass.active.is_some();
        let mut closing = Closing::opened(opened);
        let action = if active {
            super::ending::close_active(ctx, obj, &mut closing, now).await?
        } else {
            super::ending::close(ctx, obj, &mut closing, Some(ctx.config.sync_period)).await?
        };
        return Ok(Opening::Done(action));
    }
    Ok(Opening::Continue(Box::new(opened)))
}

/// The apply Job `status.activeJob` names that the apiserver no longer
/// lists (the pass lists Jobs live): a candidate for a Job deleted while
/// it ran.
fn vanished_apply<K: Workload>(obj: &K, loaded: &Loaded) -> Option<String> {
    let active = obj.workspace_status()?.active_job.as_ref()?;
    let listed = loaded
        .jobs
        .iter()
        .any(|j| j.metadata.name.as_deref() == Some(active.name.as_str()));
    (active.operation == Op::Apply && !listed).then(|| active.name.clone())
}

/// An apply Job gone while it ran, confirmed by the live object still
/// naming it (a cached object can trail the pass that cleared it, as after
/// a stuck Job's deletion, which records nothing): its outcome is unknown.
/// The probe is one GET, only when a Job named as running is not listed;
/// the writes are `opening_plan::vanished_apply_writes`.
async fn record_vanished<K: Workload>(
    ctx: &Context,
    obj: &K,
    draft: &mut Draft,
    job: &str,
) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let api: kube::Api<K> = kube::Api::namespaced(ctx.client.clone(), &ns);
    let live = api.get_opt(&obj.name_any()).await?;
    let still_named = live.as_ref().and_then(|l| {
        l.workspace_status()?
            .active_job
            .as_ref()
            .map(|a| a.name.clone())
    });
    if still_named.as_deref() != Some(job) {
        return Ok(());
    }
    let (writes, condition) = vanished_apply_writes(job);
    effects::apply(ctx, obj, &writes).await?;
    draft.set(conditions::APPLY_JOB_SUCCEEDED, &condition);
    Ok(())
}

/// Secrets retained by an earlier object of this name
/// (`opening_plan::retained_found`): adopted when the spec says so; else a
/// deleting object lets go without touching them and a live one holds
/// (`StateReadable=False/RetainedStateFound`). `Some` ends the pass.
async fn retained_elsewhere<K: Workload>(
    ctx: &Context,
    obj: &K,
    draft: &mut Draft,
    deleting: bool,
) -> Result<Option<Action>, Error> {
    let Some(uid) = super::retain::foreign(ctx, obj).await? else {
        return Ok(None);
    };
    let adopt = obj.workspace().adopt_retained_state == Some(true);
    let holding = obj
        .condition(conditions::STATE_READABLE)
        .is_some_and(|c| c.reason == reasons::RETAINED_STATE_FOUND);
    let action = match retained_found(&uid, adopt, deleting, holding) {
        RetainedFound::Adopt(writes, action) => {
            effects::apply(ctx, obj, &writes).await?;
            action
        }
        RetainedFound::Leave(writes) => {
            effects::apply(ctx, obj, &writes).await?;
            Action::await_change()
        }
        RetainedFound::Hold(writes, condition) => {
            effects::apply(ctx, obj, &writes).await?;
            draft.set(conditions::STATE_READABLE, &condition);
            draft.set(
                conditions::DELETING,
                &deleting_condition(false, false, false),
            );
            set_ready::<K>(draft, obj.provisioned());
            super::status_patch::write_status(ctx, obj, draft, &[]).await?;
            Action::requeue(Duration::from_secs(60))
        }
    };
    Ok(Some(action))
}

/// Bookkeeping of every finished Job not yet bookkept: the plan, then its
/// writes.
async fn bookkeep<K: Workload>(
    ctx: &Context,
    obj: &K,
    loaded: &Loaded,
    draft: &mut Draft,
    policy: &BookkeepingPolicy,
) -> Result<Bookkept, Error> {
    let mut plan = plan_bookkeeping(loaded, draft, policy);
    let applied = effects::apply(ctx, obj, &plan.effects).await?;
    plan.booked.run_lease_released = applied.run_lease_released;
    Ok(plan.booked)
}

/// Whether the object carries the old `captf.io/abandon-infrastructure`
/// annotation (ignored: `spec.deletionPolicy: Retain` replaces it).
fn abandon_requested<K: Workload>(obj: &K) -> bool {
    obj.annotations()
        .contains_key(annotations::ABANDON_INFRASTRUCTURE)
}
