//! The TerraformMachinePool pass: this driver, its fetch → plan → execute
//! (`pass.rs`) and its outputs (`outputs.rs`).

mod outputs;
pub mod pass;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use captf_api::common::{DeletionPolicy, DriftAction};
use captf_api::names::{annotations, kinds};
use captf_api::{TerraformMachinePool, effective};
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::dependencies::{PoolDependencies, read_pool_dependencies};
use super::ending;
use super::open_pass;
use super::opening;
use super::quiet;
use super::settings;
use super::settings::PassSettings;
use super::{Context, Error};
use crate::adapters::cluster_name_label;
use crate::adapters::pool::{self as adapter};
use crate::capi::Cluster;
use crate::engine::decide::Membership;

/// The pool's settings for the shared stages, from its spec, its
/// dependencies and the manager's defaults.
fn settings(ctx: &Context, obj: &TerraformMachinePool, deps: &PoolDependencies) -> PassSettings {
    let eff = effective::machine_pool(
        &obj.spec,
        deps.tc.as_ref().map(|t| &t.spec),
        &ctx.config.defaults,
    );
    let list_len = obj.spec.provider_id_list.as_ref().map_or(0, Vec::len);
    let replicas = obj.status.as_ref().and_then(|s| s.replicas);
    PassSettings {
        owner: adapter::owner(&obj.metadata, deps.mp.as_ref(), deps.cluster.as_ref()),
        paused: obj.annotations().contains_key(annotations::PAUSED)
            || deps.cluster.as_ref().is_some_and(Cluster::paused),
        cluster_name: cluster_name_label(&obj.metadata)
            .map(str::to_owned)
            .unwrap_or_default(),
        jobs: eff.jobs.clone(),
        drift_interval: Some(Duration::from_secs(eff.drift_interval_seconds.max(1) as u64)),
        drift_remediate: eff.drift_action == DriftAction::Remediate,
        identity: eff.identity.clone(),
        mutable: true,
        membership: Some(Membership {
            converging: adapter::membership_converging(list_len, replicas),
            interval: Duration::from_secs(eff.membership_refresh_interval_seconds.max(1) as u64),
        }),
        after_apply_refresh: true,
        health_interval: None,
        retain: eff.deletion_policy == DeletionPolicy::Retain,
        cluster_max_active_jobs: settings::cluster_job_limit(ctx, deps.tc.as_ref()),
    }
}

/// The pass: dependencies from the caches, the shared opening stages, then
/// the rest as fetch → plan → execute (`pool/pass.rs`).
pub async fn reconcile(obj: Arc<TerraformMachinePool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ctx = &*ctx;
    let now = SystemTime::now();
    let ns = obj.namespace().unwrap_or_default();
    let deps = read_pool_dependencies(ctx, obj).await?;
    let settings = settings(ctx, obj, &deps);
    if let Some(action) = quiet::resync(ctx, obj, settings.identity.as_ref()).await? {
        return Ok(action);
    }
    quiet::unsettle(ctx, obj);
    ctx.passes
        .count(kinds::TERRAFORM_MACHINE_POOL, &ns, &obj.name_any());
    let mut pass = match opening::open(ctx, obj, &settings, now).await? {
        open_pass::Opening::Done(action) => return Ok(action),
        open_pass::Opening::Continue(p) => p,
    };
    if pass.active.is_some() {
        return ending::close_active(ctx, obj, &mut pass, now).await;
    }
    let snapshot = pass::fetch(ctx, obj, &mut pass, &deps).await?;
    let plan = pass::plan(obj, &mut pass, &deps, &snapshot, now)?;
    ending::execute(ctx, obj, &mut pass, plan, now).await
}
