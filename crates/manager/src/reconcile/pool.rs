//! The TerraformMachinePool pass.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use captf_api::common::{DeletionPolicy, DriftAction};
use captf_api::names::{annotations, kinds};
use captf_api::{TerraformCluster, TerraformMachinePool, effective};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;

use super::ending;
use super::open_pass;
use super::opening;
use super::pool_pass;
use super::quiet;
use super::routing::{self, Dependency, Dependent};
use super::settings;
use super::settings::PassSettings;
use super::watches;
use super::workload::Workload;
use super::{Context, Error};
use crate::adapters::pool::{self as adapter, BootstrapSecret};
use crate::adapters::{capi_owner_ref, cluster_name_label};
use crate::capi::{self, Cluster, MachinePool};
use crate::engine::decide::Membership;
use crate::names::state_suffix;

/// What the pool's dependencies read.
pub struct Deps {
    pub mp: Option<MachinePool>,
    pub cluster: Option<Cluster>,
    pub tc: Option<TerraformCluster>,
    pub bootstrap: Option<BootstrapSecret>,
}

fn dependent(obj: &TerraformMachinePool) -> Dependent {
    Dependent {
        kind: kinds::TERRAFORM_MACHINE_POOL,
        namespace: obj.namespace().unwrap_or_default(),
        name: obj.name_any(),
    }
}

/// What a machine's or pool's pass depends on beyond its owner (which names
/// it): its own state, the Cluster of its cluster-name label, the
/// TerraformCluster `tc`, the bootstrap data Secret `bootstrap` and its
/// variables sources.
pub(super) fn dependencies_of<K: Workload>(
    obj: &K,
    tc: Option<&str>,
    bootstrap: Option<&str>,
) -> BTreeSet<Dependency> {
    let ns = obj.namespace().unwrap_or_default();
    let mut deps = BTreeSet::from([Dependency::State {
        namespace: ns.clone(),
        suffix: state_suffix(K::KIND, &ns, &obj.name_any()),
    }]);
    if let Some(name) = cluster_name_label(obj.meta()) {
        deps.insert(Dependency::Cluster {
            namespace: ns.clone(),
            name: name.to_owned(),
        });
    }
    if let Some(name) = tc {
        deps.insert(Dependency::TerraformCluster {
            namespace: ns.clone(),
            name: name.to_owned(),
        });
    }
    if let Some(name) = bootstrap {
        deps.insert(Dependency::Secret {
            namespace: ns.clone(),
            name: name.to_owned(),
        });
    }
    deps.extend(routing::variables_sources(&ns, obj.workspace()));
    deps
}

/// Reads the MachinePool, Cluster, TerraformCluster and bootstrap data
/// from the controller's caches (no request), recording each as a
/// dependency first.
async fn dependencies(ctx: &Context, obj: &TerraformMachinePool) -> Result<Deps, Error> {
    let stores = ctx
        .pool_stores
        .get()
        .expect("the pool controller sets its stores before its first pass");
    stores.ready().await;
    let ns = obj.namespace().unwrap_or_default();
    let mp = capi_owner_ref(&obj.metadata, capi::MACHINE_POOL_KIND)
        .and_then(|r| watches::get(&stores.owners, &capi::machine_pool_resource(), &ns, &r.name))
        .and_then(|d| MachinePool::from_dynamic(&d).ok());
    let cluster = cluster_name_label(&obj.metadata)
        .and_then(|name| watches::get(&stores.clusters, &capi::cluster_resource(), &ns, name))
        .and_then(|d| Cluster::from_dynamic(&d).ok());
    let tc_name = cluster.as_ref().and_then(adapter::terraform_cluster_name);
    let bootstrap_name = mp
        .as_ref()
        .and_then(|mp| mp.spec.template.spec.bootstrap.data_secret_name.as_deref());
    ctx.dependents.record(
        dependent(obj),
        dependencies_of(obj, tc_name, bootstrap_name),
    );
    let tc = tc_name.and_then(|name| watches::get(&stores.terraform_clusters, &(), &ns, name));
    let bootstrap_name = mp
        .as_ref()
        .and_then(|mp| mp.spec.template.spec.bootstrap.data_secret_name.clone());
    let bootstrap = bootstrap_data(ctx, stores, &ns, bootstrap_name.as_deref()).await?;
    Ok(Deps {
        mp,
        cluster,
        tc,
        bootstrap,
    })
}

/// The bootstrap data Secret `name`: from the cache when labeled with its
/// cluster's name, as Cluster API's bootstrap providers label it; else
/// read live.
pub(super) async fn bootstrap_data(
    ctx: &Context,
    stores: &watches::OwnerStores,
    ns: &str,
    name: Option<&str>,
) -> Result<Option<BootstrapSecret>, Error> {
    let Some(name) = name else {
        return Ok(None);
    };
    let secret = match watches::get(&stores.bootstrap_secrets, &(), ns, name) {
        Some(s) => Some(s),
        None => {
            Api::<Secret>::namespaced(ctx.client.clone(), ns)
                .get_opt(name)
                .await?
        }
    };
    Ok(secret.map(|s| {
        let data = s.data.unwrap_or_default();
        BootstrapSecret {
            value: data.get("value").map(|b| b.0.clone()),
            format: data
                .get("format")
                .and_then(|b| String::from_utf8(b.0.clone()).ok()),
        }
    }))
}

/// The pool's settings for the shared stages, from its spec, its
/// dependencies and the manager's defaults.
fn settings(ctx: &Context, obj: &TerraformMachinePool, deps: &Deps) -> PassSettings {
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
/// the rest as fetch → plan → execute (`pool_pass.rs`).
pub async fn reconcile(obj: Arc<TerraformMachinePool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ctx = &*ctx;
    let now = SystemTime::now();
    let ns = obj.namespace().unwrap_or_default();
    let deps = dependencies(ctx, obj).await?;
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
    let snapshot = pool_pass::fetch(ctx, obj, &mut pass, &deps).await?;
    let plan = pool_pass::plan(obj, &mut pass, &deps, &snapshot, now)?;
    pool_pass::execute(ctx, obj, &mut pass, plan, now).await
}
