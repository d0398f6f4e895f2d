//! The stages every Job-running kind shares: loading its Jobs, reading
//! state, block-move, stuck Jobs, finalizers, the plan key, and the pass's
//! writes to its own object. The end-of-pass status patch is in
//! `status_patch.rs`, bookkeeping in `bookkeeping.rs`, the Job start in
//! `job_start.rs`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use captf_api::names::{annotations, conditions, events};
use captf_contract::Role;
use captf_contract::outputs::{RoleOutputs, RootOutputs, decode};
use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::workload::Workload;
use super::{Context, Error};
use crate::engine::decide::Op;
use crate::engine::history::{JobRecord, Outcome};
use crate::io::jobs::{jobs_selector, observe_jobs};
use crate::io::leases::release_if_held;
use crate::io::state::read_state;
use crate::jobs::observe::ObservedJob;
use crate::jobs::recovery::{STUCK_AFTER, is_stuck};
use crate::leases::run_lease_name;
use crate::names::state_suffix;
use crate::records::{record_labels, run_secret_name};
use crate::state::reader::{StateError, StateSummary};

/// Requeue when a start was deferred (an old namesake Job goes away).
pub const START_DEFERRED_REQUEUE: Duration = Duration::from_secs(5);
/// Requeue while a lease is held by another Job.
pub const LEASE_REQUEUE: Duration = Duration::from_secs(15);

/// The object's Jobs, as controlled by it.
pub struct Loaded {
    pub jobs: Vec<Job>,
    pub observed: Vec<ObservedJob>,
}

impl Loaded {
    pub fn job(&self, name: &str) -> Option<&Job> {
        self.jobs
            .iter()
            .find(|j| j.metadata.name.as_deref() == Some(name))
    }

    pub fn annotation(&self, job: &str, key: &str) -> Option<&str> {
        self.job(job)?
            .metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    pub fn records(&self) -> Vec<JobRecord> {
        self.observed.iter().map(|o| o.record.clone()).collect()
    }

    /// The newest finished Job among `ops`.
    pub fn newest_finished(&self, ops: &[Op]) -> Option<&ObservedJob> {
        self.observed
            .iter()
            .filter(|o| ops.contains(&o.record.op) && o.record.finished.is_some())
            .max_by_key(|o| (o.record.finished, o.record.created))
    }

    /// The newest apply Job for `inputs_hash` (running or finished).
    pub fn newest_apply_for(&self, inputs_hash: &str) -> Option<&ObservedJob> {
        self.observed
            .iter()
            .filter(|o| o.record.op == Op::Apply)
            .filter(|o| {
                self.annotation(&o.record.name, annotations::INPUTS_HASH) == Some(inputs_hash)
            })
            .max_by_key(|o| o.record.created)
    }
}

/// Lists the object's Jobs (those it controls by UID) and observes them.
pub async fn load_jobs<K: Workload>(ctx: &Context, obj: &K) -> Result<Loaded, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let uid = obj.uid().unwrap_or_default();
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let lp = ListParams::default().labels(&jobs_selector(K::KIND, &obj.name_any()));
    let jobs: Vec<Job> = api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|j| {
            j.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.controller == Some(true) && r.uid == uid)
        })
        .collect();
    let suffix = crate::names::state_suffix(K::KIND, &ns, &obj.name_any());
    let observed = observe_jobs(&jobs, &ctx.client, &ns, &suffix).await?;
    Ok(Loaded { jobs, observed })
}

/// Emits an event on the object (failures are logged, never fatal).
pub async fn event<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    warning: bool,
    reason: &str,
    action: &str,
    note: String,
) {
    if !crate::recorder::listed(reason) {
        tracing::error!(
            reason,
            "an event reason the documented list does not name; not published"
        );
        return;
    }
    let ev = crate::recorder::EventSpec {
        warning,
        reason: reason.to_owned(),
        action: action.to_owned(),
        note,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &obj.object_ref(&())).await {
        tracing::warn!(error = %e, reason, "could not publish an event");
    }
}

/// Reads the state; `Err(StateError)` when it is missing or unusable.
pub async fn state<K: Workload>(
    ctx: &Context,
    obj: &K,
) -> Result<Result<StateSummary, StateError>, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let suffix = state_suffix(K::KIND, &ns, &obj.name_any());
    Ok(read_state(&ctx.client, &ns, &suffix).await?)
}

/// Decodes the outputs of `state` for `role`.
pub fn decode_outputs(role: Role, state: &StateSummary) -> RoleOutputs {
    decode(role, &root_outputs(state))
}

/// The TerraformCluster's outputs a machine or pool may use, from its state
/// as read (`None`: not read); `Err` says why not, without any value.
pub fn cluster_outputs(
    read: Option<&Result<StateSummary, crate::state::reader::StateError>>,
) -> Result<captf_contract::outputs::ClusterOutputs, &'static str> {
    use crate::adapters::gates::{NO_STATE_READ, OUTPUTS_NOT_VALID, STATE_UNREADABLE};
    match read {
        Some(Ok(s)) => match decode_outputs(Role::Cluster, s) {
            RoleOutputs::Cluster(d) if d.verdict.writable() => d.outputs.ok_or(OUTPUTS_NOT_VALID),
            _ => Err(OUTPUTS_NOT_VALID),
        },
        Some(Err(_)) => Err(STATE_UNREADABLE),
        None => Err(NO_STATE_READ),
    }
}

/// The state's root outputs, as the contract's decoders read them.
pub fn root_outputs(state: &StateSummary) -> RootOutputs {
    RootOutputs::from_state_values(
        state
            .outputs
            .iter()
            .map(|(k, o)| (k.clone(), o.value.clone())),
    )
}

/// Sets or removes the block-move annotation, written at once rather than
/// in the status patch (`clusterctl move` reads it before anything else).
/// `present` is what this pass knows of it (the object read at its start,
/// then this pass's own writes), so a removal and a re-add in one pass
/// both land.
pub async fn set_block_move<K: Workload>(
    ctx: &Context,
    obj: &K,
    present: &mut bool,
    on: bool,
) -> Result<(), Error> {
    if *present == on {
        return Ok(());
    }
    let value = if on {
        json!("true")
    } else {
        serde_json::Value::Null
    };
    let patch = json!({"metadata": {"annotations": {annotations::BLOCK_MOVE: value}}});
    patch_own(ctx, obj, &patch).await?;
    *present = on;
    Ok(())
}

/// A merge patch of the pass's own object (metadata or spec, never its
/// status), remembered so the status patch that ends the pass expects the
/// version it left.
pub async fn patch_own<K: Workload>(
    ctx: &Context,
    obj: &K,
    patch: &serde_json::Value,
) -> Result<(), Error> {
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let after = api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await?;
    wrote(ctx, &after);
    Ok(())
}

pub(super) fn written_key<K: Workload>(obj: &K) -> String {
    super::workload::object_key_of(obj)
}

/// A write of this pass to its own object returned `after`: the status
/// patch that ends the pass expects its resourceVersion.
pub(super) fn wrote<K: Workload>(ctx: &Context, after: &K) {
    if let Some(rv) = after.meta().resource_version.clone() {
        ctx.written.set(written_key(after), rv);
    }
}

/// A pass begins: only its own writes count from here.
pub fn begin_writes<K: Workload>(ctx: &Context, obj: &K) {
    ctx.written.forget(&written_key(obj));
}

/// The condition a waiting op reports on.
pub fn op_condition(op: Op) -> &'static str {
    match op {
        Op::Refresh | Op::Drift => conditions::DRIFT_JOB_SUCCEEDED,
        Op::Restore => conditions::RESTORE_JOB_SUCCEEDED,
        _ => conditions::APPLY_JOB_SUCCEEDED,
    }
}

/// Deletes an active Job that can never start (its per-run Secret is gone
/// and no pod left `Pending` for a minute). True when it was deleted.
pub async fn delete_if_stuck<K: Workload>(
    ctx: &Context,
    obj: &K,
    active: &JobRecord,
    now: SystemTime,
) -> Result<bool, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let age = now.duration_since(active.created).unwrap_or_default();
    if age < STUCK_AFTER {
        return Ok(false);
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let secret_exists = secrets
        .get_opt(&run_secret_name(&active.name))
        .await?
        .is_some();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let phases: Vec<String> = pods
        .list(
            &ListParams::default().labels(&format!("batch.kubernetes.io/job-name={}", active.name)),
        )
        .await?
        .items
        .into_iter()
        .map(|p| {
            p.status
                .and_then(|s| s.phase)
                .unwrap_or_else(|| "Pending".into())
        })
        .collect();
    let phases: Vec<&str> = phases.iter().map(String::as_str).collect();
    if !is_stuck(age, secret_exists, &phases) {
        return Ok(false);
    }
    withdraw_job(ctx, obj, &active.name).await?;
    event(
        ctx,
        obj,
        true,
        events::STUCK_JOB_DELETED,
        active.op.as_str(),
        format!(
            "Job {} never started: its per-run Secret is missing",
            active.name
        ),
    )
    .await;
    Ok(true)
}

/// Deletes a running Job the manager gives up on (it never started, or its
/// image cannot be pulled) and gives back the leases its start took: the
/// run lease, and a cluster's write lease.
pub async fn withdraw_job<K: Workload>(ctx: &Context, obj: &K, job: &str) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    match jobs.delete(job, &DeleteParams::background()).await {
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(e) => return Err(e.into()),
    }
    let suffix = state_suffix(K::KIND, &ns, &obj.name_any());
    release_if_held(&ctx.client, &ns, &run_lease_name(&suffix), job, None).await?;
    if let Some(lease) = obj.cluster_write_lease() {
        release_if_held(&ctx.client, &ns, &lease, job, None).await?;
    }
    Ok(())
}

/// The live Job holding the object's run lease, if any: one GET of the
/// lease, and one of its holder Job while it is held. Asked before what a
/// running Job makes unsafe (dropping the finalizer, clearing block-move):
/// the pass lists Jobs live, but a start racing it (another manager's, on a
/// stale cache) holds the lease before its Job exists (`internals.md`
/// §1.19).
pub async fn run_lease_holder<K: Workload>(
    ctx: &Context,
    obj: &K,
) -> Result<Option<String>, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = run_lease_name(&state_suffix(K::KIND, &ns, &obj.name_any()));
    let now = std::time::SystemTime::now();
    Ok(crate::io::leases::live_holder(&ctx.client, &ns, &name, now).await?)
}

/// Makes sure the object carries its finalizer (ends the pass when added).
pub async fn add_finalizer<K: Workload>(ctx: &Context, obj: &K) -> Result<(), Error> {
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(K::FINALIZER.to_owned());
    let patch =
        json!({"metadata": {"finalizers": finalizers, "resourceVersion": obj.resource_version()}});
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// Removes the object's finalizer, bound to the version this pass read or
/// last wrote: the list written is the one read less ours, so on a newer
/// version (another controller removed its own finalizer meanwhile) it is
/// refused (409, the pass runs again) rather than bringing that one back.
pub async fn remove_finalizer<K: Workload>(ctx: &Context, obj: &K) -> Result<(), Error> {
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let finalizers: Vec<&String> = obj
        .finalizers()
        .iter()
        .filter(|f| *f != K::FINALIZER)
        .collect();
    let expected = ctx
        .written
        .get(&written_key(obj))
        .or_else(|| obj.meta().resource_version.clone());
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": expected}});
    match api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The plan key Secret of an object, created the first time it is needed.
pub async fn ensure_plan_key<K: Workload>(ctx: &Context, obj: &K) -> Result<String, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let secret_name = plan_key_name(K::KIND, &name);
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    if api.get_opt(&secret_name).await?.is_some() {
        return Ok(secret_name);
    }
    let mut key = [0u8; 32];
    getrandom(&mut key);
    let mut owner = obj.owner_reference();
    owner.controller = None;
    owner.block_owner_deletion = None;
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(secret_name.clone()),
            namespace: Some(ns),
            labels: Some(record_labels(K::KIND, &name)),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "key".to_owned(),
            ByteString(key.to_vec()),
        )])),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(secret_name),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(secret_name),
        Err(e) => Err(e.into()),
    }
}

/// `captf-plankey-<ks>-<name>`.
pub fn plan_key_name(kind: crate::names::WorkloadKind, name: &str) -> String {
    format!("captf-plankey-{}-{name}", kind.short())
}

/// 32 bytes from the kernel's random source.
fn getrandom(buf: &mut [u8]) {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .expect("reading /dev/urandom");
}

/// Whether the newest finished Job of `op` succeeded after `since`.
pub fn succeeded_since(loaded: &Loaded, op: Op, since: Option<SystemTime>) -> bool {
    loaded.newest_finished(&[op]).is_some_and(|o| {
        o.record.outcome == Outcome::Succeeded
            && since.is_none_or(|s| o.record.finished.is_some_and(|f| f >= s))
    })
}

/// `K::api_version` as `Resource` spells it (for owner checks in tests).
pub fn api_version<K: Resource<DynamicType = ()>>() -> String {
    K::api_version(&()).into_owned()
}
