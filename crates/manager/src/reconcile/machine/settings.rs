//! The machine's settings for the shared stages.

use std::time::Duration;

use captf_api::common::DeletionPolicy;
use captf_api::names::annotations;
use captf_api::{TerraformMachine, effective};
use kube::ResourceExt;

use super::super::Context;
use super::super::dependencies::MachineDependencies;
use super::super::settings;
use super::super::settings::PassSettings;
use super::super::workload::Workload;
use crate::adapters::cluster_name_label;
use crate::adapters::machine as adapter;
use crate::capi::Cluster;

/// The machine's settings for the shared stages: immutable, drift reported
/// only, a refresh after an apply without a definite reading, and health
/// refreshes while remediation may annotate its Machine.
pub(super) fn pass_settings(
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
