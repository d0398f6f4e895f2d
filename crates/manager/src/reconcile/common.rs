//! The pass skeleton every Job-running kind follows: the preamble with its
//! early exits, credentials and RBAC, bookkeeping, the decision input, the
//! start request per op, Ready, and the closing status patch.

use std::time::{Duration, SystemTime};

use captf_api::common::IdentityReference;
use captf_api::effective::EffectiveJobPolicy;
use captf_api::names::{annotations, conditions, events, reasons};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use serde_json::Value;

use super::bookkeeping::{Booked, BookkeepingPolicy, bookkeep};
use super::job_start::{StartConfig, StartOutcome, StartRequest, execute_start, plan_start};
use super::pass::{self, Loaded};
use super::status::{Draft, system_time};
use super::workload::Workload;
use super::{Context, Error};
use crate::adapters::{OwnerDecision, dependencies_ready};
use crate::engine::decide::{
    self, ACTIVE_JOB_REQUEUE, Action as Decided, ApplyGate, DecideInput, Decision, DriftView,
    Membership, Op, Reason, RefreshView, StateView,
};
use crate::engine::history::{self, JobRecord, Outcome};
use crate::engine::job_conditions::ConditionValue;
use crate::engine::preamble::{Preamble, PreambleInput, preamble};
use crate::engine::ready::{SummaryInput, summarize};
use crate::io::records::{ensure_runner_rbac, read_record};
use crate::records::{InputsRecord, RecordMeta, applied_record_name, attempt_record_name};
use crate::state::reader::{StateError, StateSummary};

/// What a kind resolved before the shared flow.
#[derive(Debug, Clone)]
pub struct Shared {
    pub owner: OwnerDecision,
    pub paused: bool,
    pub cluster_name: String,
    pub jobs: EffectiveJobPolicy,
    pub drift_interval: Option<Duration>,
    pub drift_remediate: bool,
    pub identity: Option<IdentityReference>,
    pub mutable: bool,
    pub membership: Option<Membership>,
    /// A refresh follows every successful apply (pools).
    pub after_apply_refresh: bool,
    /// `deletionPolicy: Retain` is in effect.
    pub retain: bool,
}

/// Current inputs, rendered.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub files: (String, String),
    pub hash: String,
    pub image: String,
}

/// A pass past the preamble.
pub struct Pass {
    pub draft: Draft,
    pub loaded: Loaded,
    pub booked: Booked,
    pub active: Option<JobRecord>,
    pub shared: Shared,
    pub credentials_secret: Option<String>,
    /// The state as read at the opening of a deleting object's pass.
    early_state: Option<Result<StateSummary, StateError>>,
    /// Whether the object carries the block-move annotation now.
    pub block_move: bool,
    deleting: bool,
    pool: bool,
}

impl Pass {
    pub fn deleting(&self) -> bool {
        self.deleting
    }
}

pub enum Opened {
    Done(Action),
    Pass(Box<Pass>),
}

fn policy(shared: &Shared) -> BookkeepingPolicy {
    BookkeepingPolicy {
        history_limits: (
            shared.jobs.successful_jobs_history_limit.max(0) as u32,
            shared.jobs.failed_jobs_history_limit.max(0) as u32,
        ),
        drift_enabled: shared.drift_interval.is_some(),
        drift_remediate: shared.drift_remediate,
    }
}

pub async fn applied_record<K: Workload>(
    ctx: &Context,
    obj: &K,
) -> Result<Option<InputsRecord>, Error> {
    let ns = obj.namespace().unwrap_or_default();
    Ok(read_record(
        &ctx.client,
        &ns,
        &applied_record_name(K::KIND, &obj.name_any()),
    )
    .await?
    .and_then(Result::ok))
}

pub async fn attempt_record<K: Workload>(
    ctx: &Context,
    obj: &K,
) -> Result<Option<InputsRecord>, Error> {
    let ns = obj.namespace().unwrap_or_default();
    Ok(read_record(
        &ctx.client,
        &ns,
        &attempt_record_name(K::KIND, &obj.name_any()),
    )
    .await?
    .and_then(Result::ok))
}

/// What a pass reads of the object's state and durable inputs.
pub struct Stored {
    pub read: Result<StateSummary, StateError>,
    pub applied: Option<InputsRecord>,
    pub attempt: Option<InputsRecord>,
    pub ever_applied: bool,
}

/// Reads the state and the records, and reports `StateReadable`.
pub async fn read_stored<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &mut Pass,
) -> Result<Stored, Error> {
    let read = match p.early_state.take() {
        Some(read) => read,
        None => pass::state(ctx, obj).await?,
    };
    let applied = applied_record(ctx, obj).await?;
    let attempt = attempt_record(ctx, obj).await?;
    let ever_applied = obj.provisioned() || applied.is_some();
    let readable = pass::state_readable(&read, ever_applied);
    let before = obj.condition(conditions::STATE_READABLE);
    let again = before.is_some_and(|c| c.status == "False" && c.reason == readable.reason);
    if readable.status == "False" && !again {
        let reason = match readable.reason {
            reasons::STATE_INCONSISTENT => Some("inconsistent"),
            reasons::STATE_ENCRYPTED => Some("encrypted"),
            reasons::STATE_CORRUPT => Some("corrupt"),
            reasons::STATE_LOST => Some("lost"),
            reasons::STATE_LOCKED => Some("locked"),
            _ => None,
        };
        if let Some(r) = reason {
            ctx.metrics.state_read_failed(K::KIND.kind(), r);
        }
    }
    p.draft.set(conditions::STATE_READABLE, &readable);
    Ok(Stored {
        read,
        applied,
        attempt,
        ever_applied,
    })
}

/// The object's user variables: its `variablesFrom` sources read live
/// (only those labeled `captf.io/variables=true` count), then its inline
/// variables. `Ok(Err)` is the `DependenciesReady` to report.
pub async fn variables<K: Workload>(
    ctx: &Context,
    obj: &K,
    role: captf_contract::Role,
) -> Result<Result<captf_contract::UserVariables, ConditionValue>, Error> {
    use crate::adapters::variables::{SourceData, merge};
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    let ns = obj.namespace().unwrap_or_default();
    let labeled = |labels: Option<&std::collections::BTreeMap<String, String>>| {
        labels
            .and_then(|l| l.get(captf_api::names::labels::VARIABLES))
            .is_some_and(|v| v == "true")
    };
    let mut sources = Vec::new();
    for source in obj.workspace().variables_from.iter().flatten() {
        let data = if let Some(r) = &source.config_map_ref {
            let api: kube::Api<ConfigMap> = kube::Api::namespaced(ctx.client.clone(), &ns);
            api.get_opt(&r.name)
                .await?
                .filter(|c| labeled(c.metadata.labels.as_ref()))
                .map(|c| {
                    let mut d: std::collections::BTreeMap<String, Vec<u8>> = c
                        .data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.into_bytes()))
                        .collect();
                    for (k, v) in c.binary_data.unwrap_or_default() {
                        d.insert(k, v.0);
                    }
                    SourceData(d)
                })
        } else if let Some(r) = &source.secret_ref {
            let api: kube::Api<Secret> = kube::Api::namespaced(ctx.client.clone(), &ns);
            api.get_opt(&r.name)
                .await?
                .filter(|s| labeled(s.metadata.labels.as_ref()))
                .map(|s| {
                    SourceData(
                        s.data
                            .unwrap_or_default()
                            .into_iter()
                            .map(|(k, v)| (k, v.0))
                            .collect(),
                    )
                })
        } else {
            None
        };
        sources.push((source.clone(), data));
    }
    Ok(merge(role, obj.workspace().variables.as_ref(), &sources))
}

/// `OutputsValid` from a decoder's verdict.
pub fn outputs_valid(v: &captf_contract::outputs::OutputsVerdict) -> ConditionValue {
    ConditionValue {
        status: v.status().as_str(),
        reason: v.reason().as_str(),
        message: v.message(),
    }
}

/// `InfrastructureHealthy` from the module's health once state was read;
/// true when health reads `pending`.
pub fn record_health(
    p: &mut Pass,
    provisioned: bool,
    health: Option<&captf_contract::health::Health>,
) -> bool {
    let phase = if provisioned {
        crate::adapters::Provisioning::Provisioned
    } else {
        crate::adapters::Provisioning::InProgress
    };
    p.draft.set(
        conditions::INFRASTRUCTURE_HEALTHY,
        &crate::adapters::infrastructure_healthy(phase, health),
    );
    health.is_some_and(|h| h.state == captf_contract::health::HealthState::Pending)
}

/// `InfrastructureHealthy` before any state was read: waiting for the first
/// apply, or provisioning once one ran.
pub fn not_yet_healthy(p: &Pass) -> ConditionValue {
    let phase = if p.loaded.observed.iter().any(|o| o.record.op == Op::Apply) {
        crate::adapters::Provisioning::InProgress
    } else {
        crate::adapters::Provisioning::NotStarted
    };
    crate::adapters::infrastructure_healthy(phase, None)
}

fn deleting_condition(deleting: bool, paused: bool) -> ConditionValue {
    match (deleting, paused) {
        (false, _) => ConditionValue {
            status: "False",
            reason: reasons::NOT_DELETING,
            message: String::new(),
        },
        (true, true) => ConditionValue {
            status: "True",
            reason: reasons::DELETING,
            message: "deletion waits until the object is unpaused".into(),
        },
        (true, false) => ConditionValue {
            status: "True",
            reason: reasons::DELETING,
            message: "destroying the infrastructure".into(),
        },
    }
}

fn paused_condition(paused: bool) -> ConditionValue {
    if paused {
        ConditionValue {
            status: "True",
            reason: reasons::PAUSED,
            message: "paused: bookkeeping only, no new Job".into(),
        }
    } else {
        ConditionValue {
            status: "False",
            reason: reasons::NOT_PAUSED,
            message: String::new(),
        }
    }
}

/// The preamble and the opening stages. `Done` ends the pass.
pub async fn open<K: Workload>(
    ctx: &Context,
    obj: &K,
    shared: &Shared,
    now: SystemTime,
) -> Result<Opened, Error> {
    let deleting = obj.meta().deletion_timestamp.is_some();
    let generation = obj.meta().generation.unwrap_or(0);
    let mut draft = Draft::new(obj.conditions(), generation, now);
    let loaded = pass::load_jobs(ctx, obj).await?;
    // A deleting object reads its state now (is there anything to clean
    // up?); the pass reuses that read.
    let mut early_state = None;
    let nothing_to_clean_up = if deleting {
        let read = pass::state(ctx, obj).await?;
        let none = loaded.jobs.is_empty()
            && matches!(read, Err(StateError::NotFound))
            && !obj.provisioned()
            && applied_record(ctx, obj).await?.is_none();
        early_state = Some(read);
        none
    } else {
        false
    };
    let pre = preamble(&PreambleInput {
        externally_managed: obj.annotations().contains_key(annotations::MANAGED_BY),
        deleting,
        has_finalizer: obj.has_finalizer(),
        owner: shared.owner.lookup,
        paused: shared.paused,
        nothing_to_clean_up,
    });
    let pool = K::KIND == crate::names::WorkloadKind::MachinePool;
    match pre {
        Preamble::Skip => return Ok(Opened::Done(Action::await_change())),
        Preamble::ReleaseExternallyManaged => {
            pass::remove_finalizer(ctx, obj).await?;
            pass::event(
                ctx,
                obj,
                false,
                events::EXTERNALLY_MANAGED_RELEASED,
                "Delete",
                "externally managed: finalizer removed, nothing destroyed".into(),
            )
            .await;
            return Ok(Opened::Done(Action::await_change()));
        }
        Preamble::AddFinalizer => {
            pass::add_finalizer(ctx, obj).await?;
            return Ok(Opened::Done(Action::requeue(Duration::from_millis(100))));
        }
        Preamble::DropFinalizer => {
            super::cleanup::cleanup(ctx, obj).await?;
            pass::remove_finalizer(ctx, obj).await?;
            return Ok(Opened::Done(Action::await_change()));
        }
        Preamble::WaitForOwner | Preamble::OwnerGated(_) => {
            if let Some(c) = &shared.owner.condition {
                draft.set(conditions::DEPENDENCIES_READY, c);
            }
            draft.set(conditions::DELETING, &deleting_condition(deleting, false));
            set_ready(&mut draft, obj.provisioned(), pool);
            pass::finish(ctx, obj, &draft, &[]).await?;
            return Ok(Opened::Done(Action::requeue(Duration::from_secs(30))));
        }
        Preamble::Paused | Preamble::Proceed => {}
    }
    let paused = pre == Preamble::Paused;
    // Retained Secrets of an earlier namesake can only be there before this
    // object's first Job: once it ran one, they would be its own.
    let before_first_job = loaded.jobs.is_empty() && !obj.provisioned();
    if !paused
        && before_first_job
        && let Some(done) = retained_elsewhere(ctx, obj, &mut draft, deleting, pool).await?
    {
        return Ok(Opened::Done(done));
    }
    draft.set(conditions::PAUSED, &paused_condition(paused));
    draft.set(conditions::DELETING, &deleting_condition(deleting, paused));
    if shared.owner.condition.is_none() {
        draft.set(conditions::DEPENDENCIES_READY, &dependencies_ready());
    }
    let mut credentials_secret = None;
    // A deletion under Retain runs no Job: it needs no credentials.
    let runs_no_job = paused || (deleting && shared.retain);
    if !runs_no_job {
        // Credentials and the runner's RBAC, every pass for a live object.
        match super::credentials::check(ctx, obj, shared.identity.as_ref(), &mut draft).await? {
            super::credentials::Verdict::Ready(secret) => credentials_secret = secret,
            super::credentials::Verdict::Blocked => {
                let booked = bookkeep(ctx, obj, &loaded, &mut draft, &policy(shared)).await?;
                set_ready(&mut draft, obj.provisioned(), pool);
                pass::finish(ctx, obj, &draft, &booked.marks).await?;
                return Ok(Opened::Done(Action::requeue(Duration::from_secs(15))));
            }
        }
        let ns = obj.namespace().unwrap_or_default();
        let rbac = match ensure_rbac(ctx, &ns).await {
            Ok(()) => ConditionValue {
                status: "True",
                reason: reasons::RBAC_READY,
                message: format!("ServiceAccount {} can run Jobs", crate::rbac::RUNNER),
            },
            Err(e) => ConditionValue {
                status: "False",
                reason: reasons::RBAC_FAILED,
                message: format!("runner ServiceAccount or RoleBinding: {e}"),
            },
        };
        draft.set(conditions::RUNNER_RBAC_READY, &rbac);
    }
    let booked = bookkeep(ctx, obj, &loaded, &mut draft, &policy(shared)).await?;
    let active = booked.active.clone();
    if booked.newly.iter().any(|o| o.record.op == Op::Apply) {
        // Bookkeeping adopted the state of an apply: read it again.
        early_state = None;
    }
    let mut p = Pass {
        draft,
        loaded,
        booked,
        active,
        shared: shared.clone(),
        credentials_secret,
        early_state,
        block_move: obj.annotations().contains_key(annotations::BLOCK_MOVE),
        deleting,
        pool,
    };
    if p.active.is_none() {
        // No Job runs: activeJob goes, and block-move when the pass ends
        // without starting one.
        p.draft.field("activeJob", Value::Null);
    }
    if paused {
        let action = if p.active.is_some() {
            close_active(ctx, obj, &mut p, now).await?
        } else {
            close(ctx, obj, &mut p, Some(ctx.config.sync_period)).await?
        };
        return Ok(Opened::Done(action));
    }
    Ok(Opened::Pass(Box::new(p)))
}

/// Secrets retained by an earlier object of this name: adopted when the
/// spec says so; else a deleting object lets go without touching them and
/// a live one holds (`StateReadable=False/RetainedStateFound`). `Some`
/// ends the pass.
async fn retained_elsewhere<K: Workload>(
    ctx: &Context,
    obj: &K,
    draft: &mut Draft,
    deleting: bool,
    pool: bool,
) -> Result<Option<Action>, Error> {
    let Some(uid) = super::retain::foreign(ctx, obj).await? else {
        return Ok(None);
    };
    if obj.workspace().adopt_retained_state == Some(true) {
        let n = super::retain::adopt(ctx, obj, &uid).await?;
        pass::event(
            ctx,
            obj,
            false,
            events::RETAINED_STATE_ADOPTED,
            "Adopt",
            format!("adopted {n} Secrets retained by object {uid}"),
        )
        .await;
        return Ok(Some(Action::requeue(Duration::from_millis(200))));
    }
    if deleting {
        super::retain::release_without_touching(ctx, obj).await?;
        pass::remove_finalizer(ctx, obj).await?;
        pass::event(
            ctx,
            obj,
            false,
            events::FINALIZER_REMOVED,
            "Delete",
            format!("finalizer removed without a Job; the Secrets retained by object {uid} are untouched"),
        )
        .await;
        return Ok(Some(Action::await_change()));
    }
    let was = obj
        .condition(conditions::STATE_READABLE)
        .is_some_and(|c| c.reason == reasons::RETAINED_STATE_FOUND);
    let message = format!(
        "found state and inputs retained by an earlier object (UID {uid}); set spec.adoptRetainedState: true to adopt them, or delete the Secrets labeled {}={uid}",
        captf_api::names::labels::RETAINED_FROM_UID
    );
    if !was {
        pass::event(
            ctx,
            obj,
            true,
            events::RETAINED_STATE_FOUND,
            "Adopt",
            message.clone(),
        )
        .await;
    }
    draft.set(
        conditions::STATE_READABLE,
        &ConditionValue {
            status: "False",
            reason: reasons::RETAINED_STATE_FOUND,
            message,
        },
    );
    draft.set(conditions::DELETING, &deleting_condition(false, false));
    set_ready(draft, obj.provisioned(), pool);
    pass::finish(ctx, obj, draft, &[]).await?;
    Ok(Some(Action::requeue(Duration::from_secs(60))))
}

/// The runner's ServiceAccount and RoleBinding in `ns`, applied at most
/// once per sync period (a converged pass writes nothing).
async fn ensure_rbac(ctx: &Context, ns: &str) -> Result<(), kube::Error> {
    let now = std::time::Instant::now();
    if ctx.rbac_ensured.fresh(ns, now).is_some() {
        return Ok(());
    }
    ensure_runner_rbac(&ctx.client, ns).await?;
    ctx.rbac_ensured.put(ns.to_owned(), (), now);
    Ok(())
}

/// `Ready` from the kind's inputs.
pub fn set_ready(draft: &mut Draft, provisioned: bool, pool: bool) {
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
        if pool {
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

fn provisioned_in(draft: &Draft, obj_provisioned: bool) -> bool {
    draft
        .field_value("initialization")
        .and_then(|v| v.get("provisioned"))
        .and_then(Value::as_bool)
        .unwrap_or(obj_provisioned)
}

/// Ends a pass that starts nothing: Ready, the patch, the marks.
pub async fn close<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &mut Pass,
    requeue: Option<Duration>,
) -> Result<Action, Error> {
    if p.active.is_none() {
        // No Job runs: block-move goes.
        pass::set_block_move(ctx, obj, &mut p.block_move, false).await?;
    }
    let provisioned = provisioned_in(&p.draft, obj.provisioned());
    set_ready(&mut p.draft, provisioned, p.pool);
    pass::finish(ctx, obj, &p.draft, &p.booked.marks).await?;
    export_gauges(ctx, obj, p);
    let after = requeue
        .unwrap_or(ctx.config.sync_period)
        .min(ctx.config.sync_period);
    Ok(Action::requeue(after.max(Duration::from_millis(200))))
}

/// The per-object gauges from the conditions this pass wrote.
fn export_gauges<K: Workload>(ctx: &Context, obj: &K, p: &Pass) {
    use crate::metrics::{ConditionValue as Tri, ObjectGauges};
    let status = |t: &str| Tri::from_status(p.draft.get(t).map(|c| c.status.as_str()));
    let mut successes = Vec::new();
    if !p.deleting {
        for op in [Op::Apply, Op::Refresh, Op::Drift] {
            if let Some(t) = last_success(&p.loaded.records(), op) {
                let secs = t
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(0.0);
                successes.push((op.as_str().to_owned(), secs));
            }
        }
    }
    ctx.metrics.object(
        K::KIND.kind(),
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
        &ObjectGauges {
            ready: status(conditions::READY),
            infrastructure_healthy: Some(status(conditions::INFRASTRUCTURE_HEALTHY)),
            drift_detected: p.draft.is_true(conditions::DRIFT_DETECTED),
            state_resources: None,
            state_bytes: None,
            inputs_bytes: None,
            last_success: successes,
        },
    );
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
    p: &mut Pass,
    now: SystemTime,
) -> Result<Action, Error> {
    let active = p.active.clone().expect("an active Job");
    if pass::delete_if_stuck(ctx, obj, &active, now).await? {
        p.draft.field("activeJob", Value::Null);
        return close(ctx, obj, p, Some(Duration::from_secs(1))).await;
    }
    pass::set_block_move(ctx, obj, &mut p.block_move, true).await?;
    p.draft.field(
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

fn status_time<K: Workload>(obj: &K, draft: &Draft, key: &str) -> Option<SystemTime> {
    if let Some(v) = draft.field_value(key) {
        return serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>(
            v.clone(),
        )
        .ok()
        .map(|t| system_time(&t));
    }
    let s = obj.workspace_status()?;
    let t = match key {
        "lastDriftCheck" => s.last_drift_check.as_ref(),
        "lastRefresh" => s.last_refresh.as_ref(),
        _ => None,
    };
    t.map(system_time)
}

fn last_success(records: &[JobRecord], op: Op) -> Option<SystemTime> {
    records
        .iter()
        .filter(|r| r.op == op && r.outcome == Outcome::Succeeded)
        .filter_map(|r| r.finished)
        .max()
}

/// `ApplyJobSucceeded` of an object that has no apply of its own yet but
/// whose state (adopted after a Retain, or moved with it) was applied from
/// exactly its current inputs: nothing is due, so say it is applied.
pub fn settle_adopted_state(
    p: &mut Pass,
    read: &Result<StateSummary, StateError>,
    current: Option<&Rendered>,
) {
    let no_apply_yet = p
        .draft
        .get(conditions::APPLY_JOB_SUCCEEDED)
        .is_none_or(|c| c.reason == reasons::NO_APPLY_YET);
    let no_jobs = !p
        .loaded
        .observed
        .iter()
        .any(|o| matches!(o.record.op, Op::Apply | Op::Plan | Op::Destroy));
    let state_hash = read.as_ref().ok().and_then(|s| s.inputs_hash.as_deref());
    if no_apply_yet && no_jobs && current.is_some_and(|c| Some(c.hash.as_str()) == state_hash) {
        p.draft.set(
            conditions::APPLY_JOB_SUCCEEDED,
            &ConditionValue {
                status: "True",
                reason: reasons::APPLY_SUCCEEDED,
                message: "the state was applied from the current inputs; no Job was needed".into(),
            },
        );
    }
}

/// The decision of this pass, with the deletion end: a deleting object
/// whose destroy succeeded (after its last apply) is released.
#[allow(clippy::too_many_arguments)]
pub fn decide<K: Workload>(
    obj: &K,
    p: &Pass,
    read: &Result<StateSummary, StateError>,
    current: Option<&Rendered>,
    gate: ApplyGate,
    health_pending: bool,
    provisioned: bool,
    now: SystemTime,
) -> Decision {
    let records = p.loaded.records();
    let destroyed = last_success(&records, Op::Destroy);
    if p.deleting && destroyed.is_some() && destroyed >= last_success(&records, Op::Apply) {
        return Decision {
            action: Decided::DropFinalizer,
            reason: Reason::Deleting,
            backoff: false,
            requeue: None,
        };
    }
    let ever_applied = provisioned || last_success(&records, Op::Apply).is_some();
    let state = match read {
        Ok(s) => StateView {
            exists: true,
            held: false,
            inputs_hash: s.inputs_hash.clone(),
        },
        Err(StateError::NotFound) => StateView {
            exists: false,
            held: ever_applied,
            inputs_hash: None,
        },
        Err(_) => StateView {
            exists: true,
            held: true,
            inputs_hash: None,
        },
    };
    let last_check = status_time(obj, &p.draft, "lastDriftCheck");
    let last_refresh = status_time(obj, &p.draft, "lastRefresh");
    let last_apply_success = last_success(&records, Op::Apply);
    let input = DecideInput {
        now,
        uid: obj.uid().unwrap_or_default(),
        created: obj
            .meta()
            .creation_timestamp
            .as_ref()
            .map_or(now, system_time),
        mutable: p.shared.mutable,
        deleting: p.deleting,
        retain: p.shared.retain,
        job_active: false,
        restore_requested: false,
        state,
        current_hash: current.map(|c| c.hash.clone()),
        unconfirmed_apply: false,
        last_apply_failed: history::last_apply_failed(&records),
        last_apply_success,
        failed_limit: p.shared.jobs.failed_jobs_history_limit.max(1) as u32,
        history: history::history(&records),
        gate,
        drift: DriftView {
            interval: p.shared.drift_interval,
            last_check,
            detected: p.draft.is_true(conditions::DRIFT_DETECTED),
            remediate: p.shared.drift_remediate,
            remediation_failures: history::remediation_failures(&records, last_check),
        },
        refresh: RefreshView {
            last: last_refresh,
            after_apply_due: p.shared.after_apply_refresh
                && last_apply_success.is_some_and(|a| last_refresh.is_none_or(|r| r < a)),
            health_pending,
            pending_refreshes: obj
                .workspace_status()
                .and_then(|s| s.pending_refreshes)
                .unwrap_or(0)
                .max(0) as u32,
            health_interval: None,
        },
        membership: p.shared.membership.clone(),
    };
    decide::decide(&input)
}

fn rfc3339(t: Option<SystemTime>) -> String {
    t.map(|t| super::status::time(t).0.to_string())
        .unwrap_or_default()
}

/// The request for starting `op`, or `None` when its inputs are missing.
#[allow(clippy::too_many_arguments)]
pub async fn start_request<K: Workload>(
    _ctx: &Context,
    obj: &K,
    p: &Pass,
    read: &Result<StateSummary, StateError>,
    op: Op,
    remediation: bool,
    current: Option<&Rendered>,
    applied: Option<&InputsRecord>,
    attempt: Option<&InputsRecord>,
) -> Result<Option<StartRequest>, Error> {
    let state_hash = read.as_ref().ok().and_then(|s| s.inputs_hash.clone());
    let recorded = applied.or(attempt);
    let identity = p.shared.identity.as_ref();
    let (files, hash, image, tick, record) = match op {
        Op::Apply | Op::Plan => {
            let Some(cur) = current else { return Ok(None) };
            let tick = if remediation {
                format!(
                    "remediate/{}",
                    rfc3339(status_time(obj, &p.draft, "lastDriftCheck"))
                )
            } else {
                String::new()
            };
            let record = (op == Op::Apply).then(|| InputsRecord {
                main_tf_json: cur.files.0.clone(),
                tfvars_json: cur.files.1.clone(),
                meta: RecordMeta {
                    inputs_hash: cur.hash.clone(),
                    image: cur.image.clone(),
                    image_digest: None,
                    identity: identity.map(|i| i.name.clone()),
                    identity_kind: identity.and_then(|i| i.kind).map(|k| {
                        serde_json::to_value(k)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default()
                    }),
                    job: None,
                },
                exports: Default::default(),
            });
            (
                cur.files.clone(),
                cur.hash.clone(),
                cur.image.clone(),
                tick,
                record,
            )
        }
        Op::Refresh | Op::Drift => {
            let (files, image) = match (current, recorded) {
                (Some(cur), rec) if p.shared.mutable => (
                    cur.files.clone(),
                    rec.map(InputsRecord::pinned_image)
                        .unwrap_or_else(|| cur.image.clone()),
                ),
                (_, Some(r)) => (
                    (r.main_tf_json.clone(), r.tfvars_json.clone()),
                    r.pinned_image(),
                ),
                (Some(cur), None) => (cur.files.clone(), cur.image.clone()),
                (None, None) => return Ok(None),
            };
            let hash = state_hash
                .clone()
                .or_else(|| current.map(|c| c.hash.clone()))
                .unwrap_or_default();
            let key = if op == Op::Refresh {
                "lastRefresh"
            } else {
                "lastDriftCheck"
            };
            (
                files,
                hash,
                image,
                rfc3339(status_time(obj, &p.draft, key)),
                None,
            )
        }
        Op::Destroy => {
            let (files, image, rec_hash) = match (recorded, current) {
                (Some(r), _) => (
                    (r.main_tf_json.clone(), r.tfvars_json.clone()),
                    r.pinned_image(),
                    r.meta.inputs_hash.clone(),
                ),
                (None, Some(cur)) => (cur.files.clone(), cur.image.clone(), cur.hash.clone()),
                (None, None) => return Ok(None),
            };
            (
                files,
                state_hash.unwrap_or(rec_hash),
                image,
                String::new(),
                None,
            )
        }
        Op::Restore => return Ok(None),
    };
    Ok(Some(StartRequest {
        op,
        approval: None,
        remediation,
        files,
        inputs_hash: hash,
        tick,
        image,
        attempt_record: record,
        guard: None,
        plan_key_secret: None,
        cluster_name: p.shared.cluster_name.clone(),
        jobs: p.shared.jobs.clone(),
        credentials_secret: p.credentials_secret.clone(),
        annotations: Default::default(),
    }))
}

/// Starts the decided Job and closes the pass.
pub async fn start<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &mut Pass,
    req: StartRequest,
    decision: &Decision,
    now: SystemTime,
) -> Result<Action, Error> {
    let op = req.op;
    let records = p.loaded.records();
    if decision.reason == Reason::InputsChanged {
        ctx.metrics.inputs_hash_changed(K::KIND.kind());
        pass::event(
            ctx,
            obj,
            false,
            events::INPUTS_CHANGED,
            "Apply",
            "the inputs changed; applying them".into(),
        )
        .await;
    }
    if decision.reason == Reason::DriftRemediation {
        p.draft.set(
            conditions::DRIFT_DETECTED,
            &ConditionValue {
                status: "True",
                reason: reasons::DRIFT_REMEDIATING,
                message: "an apply removes the drift".into(),
            },
        );
        pass::event(
            ctx,
            obj,
            false,
            events::DRIFT_REMEDIATION_STARTED,
            "Apply",
            "re-applying to remove drift".into(),
        )
        .await;
    }
    if op == Op::Destroy && !records.iter().any(|r| r.op == Op::Destroy) {
        pass::event(
            ctx,
            obj,
            false,
            events::DELETION_STARTED,
            "Delete",
            "destroying the infrastructure".into(),
        )
        .await;
    }
    let config = StartConfig {
        runner_image: &ctx.config.runner_image,
        runner_events: ctx.config.runner_events,
    };
    let planned = plan_start(obj, &records, req, &config);
    let outcome = execute_start(ctx, obj, &planned, &mut p.draft, &mut p.block_move, now).await?;
    let requeue = match outcome {
        StartOutcome::Started { job } => {
            // The Job runs: close keeps block-move and activeJob.
            p.active = Some(JobRecord {
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
        StartOutcome::Waiting { requeue } => requeue,
    };
    close(ctx, obj, p, Some(requeue)).await
}

/// Deletion under Retain: nothing is destroyed; state, backups and records
/// stay, unowned and labeled; then the finalizer goes.
pub async fn retain_and_release<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &mut Pass,
) -> Result<Action, Error> {
    pass::finish(ctx, obj, &p.draft, &p.booked.marks).await?;
    let kept = super::retain::retain(ctx, obj).await?;
    let ns = obj.namespace().unwrap_or_default();
    pass::event(
        ctx,
        obj,
        false,
        events::INFRASTRUCTURE_RETAINED,
        "Delete",
        format!(
            "deletionPolicy Retain: nothing destroyed; kept {kept} Secrets (state, backups, inputs records) labeled {}={}",
            captf_api::names::labels::RETAINED_FROM_UID,
            obj.uid().unwrap_or_default()
        ),
    )
    .await;
    pass::remove_finalizer(ctx, obj).await?;
    ctx.metrics.forget(K::KIND.kind(), &ns, &obj.name_any());
    super::cleanup::sweep_namespace(ctx, &ns, &obj.name_any()).await;
    Ok(Action::await_change())
}

/// Deletion ends: everything the object made goes, then its finalizer.
pub async fn release<K: Workload>(ctx: &Context, obj: &K, p: &mut Pass) -> Result<Action, Error> {
    if !p.deleting {
        return close(ctx, obj, p, None).await;
    }
    // The status goes first so the bookkept marks land; the object may be
    // gone right after the finalizer.
    pass::finish(ctx, obj, &p.draft, &p.booked.marks).await?;
    super::cleanup::cleanup(ctx, obj).await?;
    let ns = obj.namespace().unwrap_or_default();
    pass::event(
        ctx,
        obj,
        false,
        events::FINALIZER_REMOVED,
        "Delete",
        "infrastructure destroyed; finalizer removed".into(),
    )
    .await;
    pass::remove_finalizer(ctx, obj).await?;
    ctx.metrics.forget(K::KIND.kind(), &ns, &obj.name_any());
    super::cleanup::sweep_namespace(ctx, &ns, &obj.name_any()).await;
    Ok(Action::await_change())
}
