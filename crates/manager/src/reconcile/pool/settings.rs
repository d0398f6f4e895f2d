//! The pool's settings for the shared stages, from its spec, its
//! dependencies and the manager's defaults.

use std::time::Duration;

use captf_api::common::{DeletionPolicy, DriftAction};
use captf_api::names::annotations;
use captf_api::{TerraformMachinePool, effective};
use kube::ResourceExt;

use super::super::Context;
use super::super::dependencies::PoolDependencies;
use super::super::settings;
use super::super::settings::PassSettings;
use crate::adapters::cluster_name_label;
use crate::adapters::pool::{self as adapter};
use crate::capi::Cluster;
use crate::engine::decide::Membership;

/// The pool's settings for the shared stages, from its spec, its
/// dependencies and the manager's defaults.
pub(super) fn pass_settings(
    ctx: &Context,
    obj: &TerraformMachinePool,
    deps: &PoolDependencies,
) -> PassSettings {
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
