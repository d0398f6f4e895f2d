//! What the cluster's pass reads and records before its shared stages
//! (its owner Cluster, its dependencies) and its settings for them.

use std::time::Duration;

use captf_api::TerraformCluster;
use captf_api::common::{DeletionPolicy, DriftAction};
use captf_api::effective;
use captf_api::names::{annotations, kinds};
use kube::ResourceExt;
use kube::api::Api;

use super::super::routing::{self, Dependency, Dependent};
use super::super::settings::PassSettings;
use super::super::{Context, Error};
use crate::adapters::cluster as adapter;
use crate::adapters::{capi_owner_ref, cluster_name_label};
use crate::capi::{self, Cluster};
use crate::names::WorkloadKind;

/// The owner Cluster, read live (the cluster controller keeps no store of
/// Clusters).
pub(super) async fn owner_cluster(
    ctx: &Context,
    obj: &TerraformCluster,
) -> Result<Option<Cluster>, Error> {
    let Some(r) = capi_owner_ref(&obj.metadata, capi::CLUSTER_KIND) else {
        return Ok(None);
    };
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &obj.namespace().unwrap_or_default(),
        &capi::cluster_resource(),
    );
    match api.get_opt(&r.name).await? {
        Some(d) => Ok(Cluster::from_dynamic(&d).ok()),
        None => Ok(None),
    }
}

/// What the pass depends on beyond its owner Cluster (which names it): its
/// own state and its variables sources.
pub(super) fn record_dependencies(ctx: &Context, obj: &TerraformCluster) {
    let ns = obj.namespace().unwrap_or_default();
    let mut deps = std::collections::BTreeSet::from([Dependency::State {
        namespace: ns.clone(),
        suffix: crate::names::state_suffix(WorkloadKind::Cluster, &ns, &obj.name_any()),
    }]);
    deps.extend(routing::variables_sources(&ns, &obj.spec.workspace));
    ctx.dependents.record(
        Dependent {
            kind: kinds::TERRAFORM_CLUSTER,
            namespace: ns,
            name: obj.name_any(),
        },
        deps,
    );
}

/// The cluster's settings for the shared stages.
pub(super) fn pass_settings(
    obj: &TerraformCluster,
    cluster: Option<&Cluster>,
    eff: &effective::EffectiveCluster,
) -> PassSettings {
    let cluster_name = cluster
        .and_then(|c| c.metadata.name.clone())
        .or_else(|| cluster_name_label(&obj.metadata).map(str::to_owned))
        .or_else(|| capi_owner_ref(&obj.metadata, capi::CLUSTER_KIND).map(|r| r.name.clone()))
        .unwrap_or_else(|| obj.name_any());
    PassSettings {
        owner: adapter::owner(&obj.metadata, cluster),
        paused: obj.annotations().contains_key(annotations::PAUSED)
            || cluster.is_some_and(Cluster::paused),
        cluster_name,
        jobs: eff.jobs.clone(),
        drift_interval: eff
            .drift_interval_seconds
            .map(|s| Duration::from_secs(s as u64)),
        drift_remediate: eff.drift_action == DriftAction::Remediate,
        identity: obj.spec.workspace.identity_ref.clone(),
        mutable: true,
        membership: None,
        after_apply_refresh: false,
        health_interval: None,
        retain: eff.deletion_policy == DeletionPolicy::Retain,
        cluster_max_active_jobs: eff.max_active_jobs.max(0) as u32,
    }
}
