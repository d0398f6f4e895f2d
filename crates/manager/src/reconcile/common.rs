//! The pass skeleton every Job-running kind follows: the preamble with its
//! early exits, credentials and RBAC, bookkeeping, Ready, the Job start
//! and the closing status patch. What runs next is `next_op.rs`.

use std::time::{Duration, SystemTime};

use captf_api::common::IdentityReference;
use captf_api::effective::{self, EffectiveJobPolicy};
use captf_api::names::{annotations, conditions, events, reasons};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use serde_json::Value;

use super::bookkeeping::{BookkeepingPolicy, Bookkept, bookkeep};
use super::pass::{self, Loaded};
use super::status::Draft;
use super::workload::Workload;
use super::{Context, Error};
use crate::adapters::{OwnerDecision, dependencies_ready};
use crate::engine::decide::{Membership, Op};
use crate::engine::history::JobRecord;
use crate::engine::job_conditions::ConditionValue;
use crate::engine::preamble::{Preamble, PreambleInput, preamble};
use crate::engine::ready::{SummaryInput, summarize};
use crate::io::records::{ensure_object_runner, read_record};
use crate::records::{InputsRecord, applied_record_name, attempt_record_name};
use crate::state::reader::{StateError, StateSummary};

/// The settings a kind resolved for this pass before the shared stages
/// (owner, pause, Job policy, drift, identity, membership, retention).
#[derive(Debug, Clone)]
pub struct PassSettings {
    pub owner: OwnerDecision,
    pub paused: bool,
    pub cluster_name: String,
    pub jobs: EffectiveJobPolicy,
    pub drift_interval: Option<Duration>,
    pub drift_remediate: bool,
    pub identity: Option<IdentityReference>,
    pub mutable: bool,
    pub membership: Option<Membership>,
    /// A refresh follows every successful apply (pools; machines unless
    /// the apply's own outputs gave a definite health reading).
    pub after_apply_refresh: bool,
    /// Periodic health refreshes (a provisioned machine whose Machine is
    /// annotated on remediation).
    pub health_interval: Option<Duration>,
    /// `deletionPolicy: Retain` is in effect.
    pub retain: bool,
    /// Unfinished Jobs the object's cluster may have (0: no cap).
    pub cluster_max_active_jobs: u32,
}

/// The Job limit of a machine's or pool's cluster: its TerraformCluster's
/// `spec.maxActiveJobs`, else `--cluster-max-active-jobs`.
pub fn cluster_job_limit(ctx: &Context, tc: Option<&captf_api::TerraformCluster>) -> u32 {
    let limit = match tc {
        Some(tc) => effective::cluster(&tc.spec, &ctx.config.defaults).max_active_jobs,
        None => ctx.config.defaults.cluster_max_active_jobs,
    };
    limit.max(0) as u32
}

/// Current inputs, rendered.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub files: (String, String),
    pub hash: String,
    pub image: String,
}

impl Rendered {
    /// `main.tf.json` and `terraform.tfvars.json` together, in bytes.
    pub fn bytes(&self) -> u64 {
        (self.files.0.len() + self.files.1.len()) as u64
    }
}

/// Renders a role's inputs with the user variables; `Err` is the
/// `DependenciesReady` to report (too large, exports with fractions, or
/// variables the hash refuses).
pub fn render_inputs(
    inputs: &captf_contract::RoleInputs,
    vars: &captf_contract::UserVariables,
    image: &str,
) -> Result<Rendered, ConditionValue> {
    match (
        captf_contract::render_root(inputs, vars),
        captf_contract::inputs_hash(image, inputs, vars),
    ) {
        (Ok(root), Ok(hash)) => Ok(Rendered {
            files: (root.main_tf_json, root.tfvars_json),
            hash,
            image: image.to_owned(),
        }),
        (Err(e), _) => Err(ConditionValue {
            status: "False",
            reason: reasons::INPUTS_TOO_LARGE,
            message: e.to_string(),
        }),
        // Exports may hold any number, but the inputs passed on may not: the
        // object waits for the cluster's module to export integers.
        (_, Err(captf_contract::hash::HashError::NonIntegerNumber { path, .. }))
            if path.starts_with("/captf_cluster_outputs/") =>
        {
            Err(ConditionValue {
                status: "False",
                reason: reasons::WAITING_FOR_CLUSTER_EXPORTS,
                message: format!(
                    "the TerraformCluster's exports hold a non-integer number at {}, which cannot be passed on; export integers or strings",
                    path.trim_start_matches("/captf_cluster_outputs")
                ),
            })
        }
        (_, Err(e)) => Err(ConditionValue {
            status: "False",
            reason: reasons::VARIABLES_INVALID,
            message: e.to_string(),
        }),
    }
}

/// A pass past the preamble: its status draft, the object's Jobs and what
/// bookkeeping made of them, and what the opening stages learned.
pub struct OpenPass {
    pub draft: Draft,
    pub loaded: Loaded,
    pub booked: Bookkept,
    pub active: Option<JobRecord>,
    pub shared: PassSettings,
    pub credentials_secret: Option<String>,
    /// The credentials verdict of the pass; `None` when it checked none.
    pub credentials: Option<super::credentials::Verdict>,
    /// The state as read at the opening of a deleting object's pass.
    early_state: Option<Result<StateSummary, StateError>>,
    /// The applied and attempt records as read at that opening.
    early_records: Option<Records>,
    /// Whether the object carries the block-move annotation now.
    pub block_move: bool,
    /// The apply whose outcome is unknown and still in force (set when the
    /// records are read).
    pub unconfirmed_apply: Option<String>,
    /// The backup a `captf.io/restore-state` request asks to restore (set
    /// when the state is read).
    pub restore: Option<super::backups::RestoreTarget>,
    /// A write of this pass's fetch stage failed and is tried again by a
    /// pass this soon (whatever the plan's own requeue).
    pub retry_after: Option<Duration>,
    /// What this pass measured of the state and the inputs, exported with
    /// the per-object gauges.
    pub measured: Measured,
    deleting: bool,
    pool: bool,
}

/// Sizes a pass measured (unread ones keep their gauges as they were).
#[derive(Debug, Clone, Copy, Default)]
pub struct Measured {
    pub state: crate::metrics::Observed<crate::metrics::StateSize>,
    pub inputs_bytes: crate::metrics::Observed<u64>,
}

impl Measured {
    /// The sizes of a state read; an unusable state is left unmeasured.
    pub fn state_read(&mut self, read: &Result<StateSummary, StateError>) {
        use crate::metrics::{Observed, StateSize};
        self.state = match read {
            Ok(s) => Observed::Value(StateSize {
                resources: s.managed_resources as u64,
                bytes: s.compressed_bytes as u64,
            }),
            Err(StateError::NotFound) => Observed::Absent,
            Err(_) => Observed::Unread,
        };
    }
}

impl OpenPass {
    pub fn deleting(&self) -> bool {
        self.deleting
    }

    /// A pool (its `Ready` counts `ApplyJobSucceeded` after provisioning).
    pub fn pool(&self) -> bool {
        self.pool
    }
}

#[cfg(test)]
impl OpenPass {
    /// A pass past its opening stages, for tests of the stages after them.
    pub fn for_plan_tests(
        draft: Draft,
        loaded: Loaded,
        shared: PassSettings,
        pool: bool,
        deleting: bool,
    ) -> Self {
        OpenPass {
            draft,
            loaded,
            booked: Bookkept::default(),
            active: None,
            shared,
            credentials_secret: None,
            credentials: Some(super::credentials::Verdict::Ready(None)),
            early_state: None,
            early_records: None,
            block_move: false,
            unconfirmed_apply: None,
            restore: None,
            retry_after: None,
            measured: Measured::default(),
            deleting,
            pool,
        }
    }
}

/// How the opening stages ended: the pass is done (an early exit of the
/// preamble), or it continues with what they read and decided.
pub enum Opening {
    Done(Action),
    Continue(Box<OpenPass>),
}

fn policy(shared: &PassSettings) -> BookkeepingPolicy {
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

/// The object's two inputs records, read together.
pub struct Records {
    pub applied: Option<InputsRecord>,
    pub attempt: Option<InputsRecord>,
}

impl Records {
    async fn read<K: Workload>(ctx: &Context, obj: &K) -> Result<Self, Error> {
        Ok(Records {
            applied: applied_record(ctx, obj).await?,
            attempt: attempt_record(ctx, obj).await?,
        })
    }
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
    p: &mut OpenPass,
) -> Result<Stored, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let suffix = crate::names::state_suffix(K::KIND, &ns, &obj.name_any());
    // The chunks themselves are kept for this pass only, for a backup.
    let (read, chunks) = match p.early_state.take() {
        Some(read) => (read, Vec::new()),
        None => {
            let chunks = crate::io::state::list(&ctx.client, &ns, &suffix).await?;
            (crate::io::state::summarize(&suffix, &chunks), chunks)
        }
    };
    p.measured.state_read(&read);
    let Records {
        applied,
        mut attempt,
    } = match p.early_records.take() {
        Some(records) => records,
        None => Records::read(ctx, obj).await?,
    };
    let ever_applied = obj.provisioned() || applied.is_some();
    let mut unconfirmed = InputsRecord::unconfirmed_in_force(attempt.as_ref(), applied.as_ref());
    if let Some(job) = &unconfirmed
        && confirm_no_resources(ctx, obj, job).await?
    {
        if let Some(a) = attempt.as_mut() {
            a.meta.unconfirmed_apply = None;
        }
        unconfirmed = None;
    }
    // The backend writes an empty state at `init`: one that records
    // nothing holds no more than none.
    let no_record = match &read {
        Err(StateError::NotFound) => true,
        Ok(s) => s.records_nothing(),
        Err(_) => false,
    };
    let held = no_record && !ever_applied;
    let readable = match &unconfirmed {
        Some(job) if held => ConditionValue {
            status: "False",
            reason: reasons::APPLY_OUTCOME_UNKNOWN,
            message: format!(
                "apply Job {job} ended without a result, failed in its apply step, or disappeared, and no state records anything: it may have created resources nothing records. \
                 Check the infrastructure, then set {}={job} (or restore a backup, or delete with deletionPolicy Retain)",
                annotations::CONFIRM_NO_RESOURCES
            ),
        },
        _ => pass::state_readable(&read, ever_applied),
    };
    // A lock reported held by someone else is looked at again each pass
    // until it is gone (one GET while it lasts; none otherwise).
    let was_locked = obj
        .condition(conditions::STATE_READABLE)
        .is_some_and(|c| c.reason == reasons::STATE_LOCKED);
    let readable = if was_locked && readable.status == "True" {
        locked_by_other(obj, &read_lock(ctx, obj).await?.verdict).unwrap_or(readable)
    } else {
        readable
    };
    p.unconfirmed_apply = unconfirmed;
    // Informational: the backend's suffix, and the serial the outputs come from.
    p.draft.field("stateSecretSuffix", suffix);
    super::backups::back_up_new_serial(ctx, obj, p, &read, &chunks).await?;
    drop(chunks);
    p.restore = super::backups::requested_restore(ctx, obj, p).await?;
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
        if matches!(
            readable.reason,
            reasons::STATE_LOST | reasons::APPLY_OUTCOME_UNKNOWN
        ) {
            let note = readable.message.clone();
            pass::event(ctx, obj, true, events::STATE_LOST, "Reconcile", note).await;
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

/// How the object's state lock reads now (see `io::locks`).
pub(super) async fn read_lock<K: Workload>(
    ctx: &Context,
    obj: &K,
) -> Result<crate::io::locks::StateLock, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let suffix = crate::names::state_suffix(K::KIND, &ns, &name);
    Ok(crate::io::locks::read_state_lock(&ctx.client, &ns, &suffix, K::KIND, &name).await?)
}

/// The `StateLocked` condition of a lock held by someone other than the
/// object's own runners.
pub(super) fn locked_by_other<K: Workload>(
    obj: &K,
    verdict: &crate::leases::LockVerdict,
) -> Option<ConditionValue> {
    let crate::leases::LockVerdict::Foreign {
        who,
        operation,
        created,
    } = verdict
    else {
        return None;
    };
    let ns = obj.namespace().unwrap_or_default();
    let suffix = crate::names::state_suffix(K::KIND, &ns, &obj.name_any());
    let lease = crate::names::state_lock_lease(&suffix);
    Some(crate::leases::locked_condition(
        who, operation, created, &ns, &lease,
    ))
}

/// `captf.io/confirm-no-resources` naming the apply whose outcome is unknown:
/// the operator checked that it created nothing. The record's mark and the
/// annotation are removed (in that order, so a crash between them leaves an
/// annotation that names nothing recorded, which is ignored). Any other
/// value is ignored and logged.
async fn confirm_no_resources<K: Workload>(
    ctx: &Context,
    obj: &K,
    job: &str,
) -> Result<bool, Error> {
    let Some(named) = obj.annotations().get(annotations::CONFIRM_NO_RESOURCES) else {
        return Ok(false);
    };
    let name = obj.name_any();
    if named != job {
        tracing::info!(
            name,
            named,
            recorded = job,
            "confirm-no-resources names another Job; ignored"
        );
        return Ok(false);
    }
    let ns = obj.namespace().unwrap_or_default();
    let record = attempt_record_name(K::KIND, &name);
    crate::io::records::set_unconfirmed(&ctx.client, &ns, &record, None).await?;
    let api: kube::Api<K> = kube::Api::namespaced(ctx.client.clone(), &ns);
    let patch =
        serde_json::json!({"metadata": {"annotations": {annotations::CONFIRM_NO_RESOURCES: null}}});
    api.patch(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await?;
    tracing::info!(
        name,
        job,
        "the operator confirmed that the unknown apply created nothing"
    );
    Ok(true)
}

/// The object's user variables: its `variablesFrom` sources read live
/// (only those labeled `captf.io/variables=true` count), then its inline
/// variables. `Ok(Err)` is the `DependenciesReady` to report.
pub async fn variables<K: Workload>(
    ctx: &Context,
    obj: &K,
    role: captf_contract::Role,
) -> Result<Result<captf_contract::UserVariables, ConditionValue>, Error> {
    let sources = variable_sources(ctx, obj).await?;
    Ok(crate::adapters::variables::merge(
        role,
        obj.workspace().variables.as_ref(),
        &sources,
    ))
}

/// The sources read for the variables.
pub type VariableSources = Vec<(
    captf_api::common::VariablesSource,
    Option<crate::adapters::variables::SourceData>,
)>;

/// The object's `variablesFrom` sources, read live; one without the
/// `captf.io/variables=true` label reads as missing.
pub async fn variable_sources<K: Workload>(
    ctx: &Context,
    obj: &K,
) -> Result<VariableSources, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let sources = obj.workspace().variables_from.clone().unwrap_or_default();
    read_variable_sources(ctx, &ns, &sources).await
}

/// `sources` of namespace `ns`, read live; one without the
/// `captf.io/variables=true` label reads as missing.
pub async fn read_variable_sources(
    ctx: &Context,
    ns: &str,
    sources: &[captf_api::common::VariablesSource],
) -> Result<VariableSources, Error> {
    use crate::adapters::variables::SourceData;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    let ns = ns.to_owned();
    let labeled = |labels: Option<&std::collections::BTreeMap<String, String>>| {
        labels
            .and_then(|l| l.get(captf_api::names::labels::VARIABLES))
            .is_some_and(|v| v == "true")
    };
    let mut read = Vec::new();
    for source in sources {
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
        read.push((source.clone(), data));
    }
    Ok(read)
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
    p: &mut OpenPass,
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
pub fn not_yet_healthy(p: &OpenPass) -> ConditionValue {
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
    shared: &PassSettings,
    now: SystemTime,
) -> Result<Opening, Error> {
    let deleting = obj.meta().deletion_timestamp.is_some();
    let generation = obj.meta().generation.unwrap_or(0);
    let mut draft = Draft::new(obj.conditions(), generation, now);
    let loaded = pass::load_jobs(ctx, obj).await?;
    // A deleting object reads its state now (is there anything to clean
    // up?); the pass reuses that read.
    let mut early_state = None;
    let mut early_records = None;
    let (nothing_to_destroy, nothing_to_clean_up) = if deleting {
        let read = pass::state(ctx, obj).await?;
        let records = Records::read(ctx, obj).await?;
        let left = crate::engine::leftovers::Leftovers {
            jobs: !loaded.jobs.is_empty(),
            state: !matches!(read, Err(StateError::NotFound)),
            provisioned: obj.provisioned(),
            applied_record: records.applied.is_some(),
            unconfirmed_apply: InputsRecord::unconfirmed_in_force(
                records.attempt.as_ref(),
                records.applied.as_ref(),
            )
            .is_some(),
            vanished_apply: vanished_apply(obj, &loaded).is_some(),
        };
        early_state = Some(read);
        early_records = Some(records);
        (left.nothing_to_destroy(), left.nothing_to_clean_up())
    } else {
        (false, false)
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
        Preamble::Skip => return Ok(Opening::Done(Action::await_change())),
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
            return Ok(Opening::Done(Action::await_change()));
        }
        Preamble::AddFinalizer => {
            pass::add_finalizer(ctx, obj).await?;
            return Ok(Opening::Done(Action::requeue(Duration::from_millis(100))));
        }
        Preamble::DropFinalizer => {
            // Nothing to clean up, unless a start racing this pass holds
            // the run lease: its Job would outlive the object.
            if let Some(job) = pass::run_lease_holder(ctx, obj).await? {
                tracing::info!(namespace = %obj.namespace().unwrap_or_default(), name = %obj.name_any(), job = %job, "the run lease is held; the finalizer stays");
                return Ok(Opening::Done(Action::requeue(pass::START_DEFERRED_REQUEUE)));
            }
            super::cleanup::cleanup(ctx, obj).await?;
            pass::remove_finalizer(ctx, obj).await?;
            return Ok(Opening::Done(Action::await_change()));
        }
        Preamble::WaitForOwner | Preamble::OwnerGated(_) => {
            if let Some(c) = &shared.owner.condition {
                draft.set(conditions::DEPENDENCIES_READY, c);
            }
            draft.set(conditions::DELETING, &deleting_condition(deleting, false));
            set_ready(&mut draft, obj.provisioned(), pool);
            pass::finish(ctx, obj, &draft, &[]).await?;
            return Ok(Opening::Done(Action::requeue(Duration::from_secs(30))));
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
        return Ok(Opening::Done(done));
    }
    draft.set(conditions::PAUSED, &paused_condition(paused));
    draft.set(conditions::DELETING, &deleting_condition(deleting, paused));
    if shared.owner.condition.is_none() {
        draft.set(conditions::DEPENDENCIES_READY, &dependencies_ready());
    }
    let mut credentials_secret = None;
    let mut credentials = None;
    // A deletion under Retain, or of an object with nothing to destroy,
    // runs no Job: it needs no credentials (a missing identity must not
    // keep such an object forever).
    let runs_no_job = paused || (deleting && (shared.retain || nothing_to_destroy));
    if !runs_no_job {
        // Credentials and the runner's RBAC, every pass for a live object.
        match super::credentials::check(ctx, obj, shared.identity.as_ref(), &mut draft).await? {
            super::credentials::Verdict::Ready(secret) => {
                credentials = Some(super::credentials::Verdict::Ready(secret.clone()));
                credentials_secret = secret;
            }
            super::credentials::Verdict::Blocked => {
                let booked = bookkeep(ctx, obj, &loaded, &mut draft, &policy(shared)).await?;
                set_ready(&mut draft, obj.provisioned(), pool);
                pass::finish(ctx, obj, &draft, &booked.marks).await?;
                return Ok(Opening::Done(Action::requeue(Duration::from_secs(15))));
            }
        }
        match ensure_runner(ctx, obj, &shared.jobs).await {
            Ok(account) => draft.set(
                conditions::RUNNER_RBAC_READY,
                &ConditionValue {
                    status: "True",
                    reason: reasons::RBAC_READY,
                    message: format!("ServiceAccount {account} can run Jobs"),
                },
            ),
            Err(blocked) => {
                // No Job can run as a missing or unconsenting account.
                draft.set(conditions::RUNNER_RBAC_READY, &blocked);
                let booked = bookkeep(ctx, obj, &loaded, &mut draft, &policy(shared)).await?;
                set_ready(&mut draft, obj.provisioned(), pool);
                pass::finish(ctx, obj, &draft, &booked.marks).await?;
                return Ok(Opening::Done(Action::requeue(Duration::from_secs(30))));
            }
        }
    }
    let booked = bookkeep(ctx, obj, &loaded, &mut draft, &policy(shared)).await?;
    let active = booked.active.clone();
    if booked.newly.iter().any(|o| o.record.op == Op::Apply) {
        // Bookkeeping adopted the state of an apply: read it again.
        early_state = None;
    }
    if !booked.newly.is_empty() {
        // Bookkeeping may have written the records: read them again.
        early_records = None;
    }
    let mut p = OpenPass {
        draft,
        loaded,
        booked,
        active,
        shared: shared.clone(),
        credentials_secret,
        credentials,
        early_state,
        early_records,
        block_move: obj.annotations().contains_key(annotations::BLOCK_MOVE),
        unconfirmed_apply: None,
        restore: None,
        retry_after: None,
        measured: Measured::default(),
        deleting,
        pool,
    };
    if p.active.is_none() {
        if let Some(job) = vanished_apply(obj, &p.loaded) {
            record_vanished(ctx, obj, &mut p.draft, &job).await?;
            // It may have marked the attempt record.
            p.early_records = None;
        }
        // No Job runs: activeJob goes, and block-move when the pass ends
        // without starting one.
        p.draft.field("activeJob", Value::Null);
    }
    if paused {
        let action = if p.active.is_some() {
            super::ending::close_active(ctx, obj, &mut p, now).await?
        } else {
            super::ending::close(ctx, obj, &mut p, Some(ctx.config.sync_period)).await?
        };
        return Ok(Opening::Done(action));
    }
    Ok(Opening::Continue(Box::new(p)))
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
/// One GET, only when a Job named as running is not listed.
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
    let record = attempt_record_name(K::KIND, &obj.name_any());
    crate::io::records::set_unconfirmed(&ctx.client, &ns, &record, Some(job)).await?;
    let message = format!(
        "apply Job {job} disappeared while it ran; it may have partly applied, so an apply of the current inputs stays due"
    );
    draft.set(
        conditions::APPLY_JOB_SUCCEEDED,
        &ConditionValue {
            status: "False",
            reason: reasons::APPLY_FAILED,
            message: message.clone(),
        },
    );
    pass::event(ctx, obj, true, events::JOB_INTERRUPTED, "Apply", message).await;
    Ok(())
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

/// The ServiceAccount `obj`'s Jobs run as: the operator's own
/// (`jobs.serviceAccountName`, which must exist and carry
/// `captf.io/runner=true`), or the object's runner identity
/// (`rbac::ObjectRunner`). Either is checked or applied at most once per
/// sync period, so a converged pass writes nothing. `Err` is the
/// `RunnerRBACReady=False` condition that keeps Jobs from starting.
pub(super) async fn ensure_runner<K: Workload>(
    ctx: &Context,
    obj: &K,
    jobs: &EffectiveJobPolicy,
) -> Result<String, ConditionValue> {
    let namespace = obj.namespace().unwrap_or_default();
    let (key, account) = match &jobs.service_account_name {
        Some(own) => (format!("{namespace}/own:{own}"), own.clone()),
        None => {
            let name = object_runner(obj).name();
            (runner_key(&namespace, &name), name)
        }
    };
    let now = std::time::Instant::now;
    if ctx.rbac_ensured.fresh(&key, now()).is_some() {
        return Ok(account);
    }
    let _writer = ctx.rbac_ensured.writer(&key).await;
    if ctx.rbac_ensured.fresh(&key, now()).is_some() {
        return Ok(account);
    }
    if jobs.service_account_name.is_some() {
        check_opted_in(ctx, &namespace, &account).await?;
    } else {
        ensure_object_runner(&ctx.client, &object_runner(obj))
            .await
            .map_err(|e| ConditionValue {
                status: "False",
                reason: reasons::RBAC_FAILED,
                message: format!("runner ServiceAccount, Role or RoleBinding {account}: {e}"),
            })?;
    }
    ctx.rbac_ensured.put(key, (), now());
    Ok(account)
}

/// An operator's runner ServiceAccount must exist and consent
/// (`captf.io/runner=true`); the manager binds nothing to it.
async fn check_opted_in(
    ctx: &Context,
    namespace: &str,
    account: &str,
) -> Result<(), ConditionValue> {
    use captf_api::names::labels;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let not_opted_in = |message: String| ConditionValue {
        status: "False",
        reason: reasons::SERVICE_ACCOUNT_NOT_OPTED_IN,
        message,
    };
    let api: kube::Api<ServiceAccount> = kube::Api::namespaced(ctx.client.clone(), namespace);
    match api.get_opt(account).await {
        Ok(Some(sa)) if sa.labels().get(labels::RUNNER).map(String::as_str) == Some("true") => {
            Ok(())
        }
        Ok(Some(_)) => Err(not_opted_in(format!(
            "ServiceAccount {account} lacks the label {}=true",
            labels::RUNNER
        ))),
        Ok(None) => Err(not_opted_in(format!(
            "ServiceAccount {account} does not exist"
        ))),
        Err(e) => Err(ConditionValue {
            status: "False",
            reason: reasons::RBAC_FAILED,
            message: format!("reading ServiceAccount {account}: {e}"),
        }),
    }
}

/// The runner identity of `obj`.
pub(super) fn object_runner<K: Workload>(obj: &K) -> crate::rbac::ObjectRunner {
    let namespace = obj.namespace().unwrap_or_default();
    crate::rbac::ObjectRunner {
        state_suffix: crate::names::state_suffix(K::KIND, &namespace, &obj.name_any()),
        namespace,
        owner: obj.owner_reference(),
    }
}

/// The memo key of a runner identity: `<namespace>/<name>`.
pub(super) fn runner_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
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

#[cfg(test)]
mod tests {
    use captf_contract::inputs::{
        BootstrapData, BootstrapFormat, ClusterRef, CommonInputs, MachineInputs,
    };
    use captf_contract::{JsonText, Role, RoleInputs, UserVariables};

    use super::*;

    fn machine(exports: &str) -> RoleInputs {
        let cluster = ClusterRef {
            name: "prod".into(),
            namespace: "ns".into(),
        };
        RoleInputs::Machine(MachineInputs {
            common: CommonInputs::new(Role::Machine, cluster, "m-0", "ns", None),
            captf_cluster_outputs: JsonText::parse(exports).unwrap(),
            machine_name: "m-0".into(),
            bootstrap_data: BootstrapData::from_bytes(b"#cloud-config"),
            bootstrap_format: BootstrapFormat::CloudConfig,
            failure_domain: None,
            kubernetes_version: None,
            control_plane: false,
        })
    }

    #[test]
    fn fractional_exports_wait_for_the_cluster_without_naming_the_value() {
        let vars = UserVariables::new();
        let e = render_inputs(&machine(r#"{"lb": {"w": 0.25}}"#), &vars, "img").unwrap_err();
        assert_eq!(e.reason, reasons::WAITING_FOR_CLUSTER_EXPORTS);
        assert!(e.message.contains("at /lb/w"), "{}", e.message);
        assert!(!e.message.contains("0.25"), "{}", e.message);
        // Long integers and -0 are integers and pass as written.
        let ok = render_inputs(
            &machine(r#"{"n": 123456789012345678901234567890, "z": -0}"#),
            &vars,
            "img",
        )
        .unwrap();
        assert!(ok.files.1.contains("123456789012345678901234567890"));
    }
}
