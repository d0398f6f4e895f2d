//! The TerraformMachine pass: this driver, its fetch → plan → execute
//! (`pass.rs`) and its outputs (`outputs.rs`).

mod outputs;
mod pass;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use captf_api::common::DeletionPolicy;
use captf_api::names::{annotations, kinds};
use captf_api::{TerraformMachine, effective};
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::dependencies::{MachineDependencies, read_machine_dependencies};
use super::ending;
use super::open_pass;
use super::opening;
use super::quiet;
use super::settings;
use super::settings::PassSettings;
use super::workload::Workload;
use super::{Context, Error};
use crate::adapters::cluster_name_label;
use crate::adapters::machine as adapter;
use crate::capi::Cluster;

/// The machine's settings for the shared stages: immutable, drift reported
/// only, a refresh after an apply without a definite reading, and health
/// refreshes while remediation may annotate its Machine.
fn settings(
    ctx: &Context,
    obj: &TerraformMachine,
    deps: &MachineDependencies,
) -> (PassSettings, effective::EffectiveMachine) {
    let eff = effective::machine(
        &obj.spec,
        deps.tc.as_ref().map(|t| &t.spec),
        &ctx.config.defaults,
    );
    let health_interval = (eff.remediation.annotate_machine && obj.provisioned())
        .then(|| Duration::from_secs(eff.remediation.health_check_interval_seconds.max(1) as u64));
    let settings = PassSettings {
        owner: adapter::owner(&obj.metadata, deps.machine.as_ref(), deps.cluster.as_ref()),
        paused: obj.annotations().contains_key(annotations::PAUSED)
            || deps.cluster.as_ref().is_some_and(Cluster::paused),
        cluster_name: cluster_name_label(&obj.metadata)
            .map(str::to_owned)
            .unwrap_or_default(),
        jobs: eff.jobs.clone(),
        drift_interval: eff
            .drift_interval_seconds
            .map(|s| Duration::from_secs(s.max(1) as u64)),
        drift_remediate: false,
        identity: eff.identity.clone(),
        mutable: false,
        membership: None,
        after_apply_refresh: true,
        health_interval,
        retain: eff.deletion_policy == Some(DeletionPolicy::Retain),
        cluster_max_active_jobs: settings::cluster_job_limit(ctx, deps.tc.as_ref()),
    };
    (settings, eff)
}

/// The pass: dependencies from the caches, the shared opening stages, then
/// the rest as fetch → plan → execute (`machine/pass.rs`).
pub async fn reconcile(obj: Arc<TerraformMachine>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ctx = &*ctx;
    let now = SystemTime::now();
    let ns = obj.namespace().unwrap_or_default();
    let deps = read_machine_dependencies(ctx, obj).await?;
    let (settings, eff) = settings(ctx, obj, &deps);
    if let Some(action) = quiet::resync(ctx, obj, settings.identity.as_ref()).await? {
        return Ok(action);
    }
    quiet::unsettle(ctx, obj);
    ctx.passes
        .count(kinds::TERRAFORM_MACHINE, &ns, &obj.name_any());
    let mut pass = match opening::open(ctx, obj, &settings, now).await? {
        open_pass::Opening::Done(action) => return Ok(action),
        open_pass::Opening::Continue(p) => p,
    };
    if pass.active.is_some() {
        return ending::close_active(ctx, obj, &mut pass, now).await;
    }
    let snapshot = pass::fetch(ctx, obj, &mut pass, &deps).await?;
    let policy = pass::Policy {
        remediation: eff.remediation,
        deletion_policy_resolved: eff.deletion_policy.is_some(),
    };
    let plan = pass::plan(obj, &mut pass, &deps, &snapshot, &policy, now)?;
    ending::execute(ctx, obj, &mut pass, plan, now).await
}
