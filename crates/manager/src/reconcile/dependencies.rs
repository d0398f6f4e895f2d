//! What a machine's or pool's pass reads beyond its own object: its Cluster
//! API owner, the Cluster, the TerraformCluster and the bootstrap data,
//! from the controller's caches, each recorded first as a dependency so a
//! change to it wakes the object.

use std::collections::BTreeSet;

use captf_api::names::kinds;
use captf_api::{TerraformCluster, TerraformMachine, TerraformMachinePool};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::Store;

use super::routing::{self, Dependency, Dependent};
use super::watches;
use super::workload::Workload;
use super::{Context, Error};
use crate::adapters::pool as adapter;
use crate::adapters::pool::BootstrapSecret;
use crate::adapters::{capi_owner_ref, cluster_name_label};
use crate::capi::{self, Cluster, Machine, MachinePool};
use crate::names::state_suffix;

/// What the pool's dependencies read.
pub struct PoolDependencies {
    pub mp: Option<MachinePool>,
    pub cluster: Option<Cluster>,
    pub tc: Option<TerraformCluster>,
    pub bootstrap: Option<BootstrapSecret>,
}

fn pool_dependent(obj: &TerraformMachinePool) -> Dependent {
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
fn dependencies_of<K: Workload>(
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

/// The name of the TerraformCluster of an object's cluster: the one its
/// Cluster's `spec.infrastructureRef` names; while an object whose Cluster
/// is gone is being deleted, the one TerraformCluster of its namespace
/// labelled with its cluster name, so an inherited deletion policy (a
/// `Retain`) still holds for an orphan.
fn terraform_cluster_of<K: Workload>(
    obj: &K,
    cluster: Option<&Cluster>,
    store: &Store<TerraformCluster>,
) -> Option<String> {
    if let Some(cluster) = cluster {
        return adapter::terraform_cluster_name(cluster).map(str::to_owned);
    }
    obj.meta().deletion_timestamp.as_ref()?;
    let cluster_name = cluster_name_label(obj.meta())?;
    let ns = obj.namespace().unwrap_or_default();
    let state = store.state();
    labelled_terraform_cluster(state.iter().map(|tc| tc.as_ref()), &ns, cluster_name)
}

/// The only TerraformCluster of `candidates` in `namespace` labelled with
/// `cluster_name`; none when two claim it (which one the cluster had cannot
/// be told).
fn labelled_terraform_cluster<'a>(
    candidates: impl Iterator<Item = &'a TerraformCluster>,
    namespace: &str,
    cluster_name: &str,
) -> Option<String> {
    let mut labelled = candidates.filter(|tc| {
        tc.namespace().as_deref() == Some(namespace)
            && cluster_name_label(&tc.metadata) == Some(cluster_name)
    });
    let first = labelled.next()?;
    labelled.next().is_none().then(|| first.name_any())
}

/// Reads the MachinePool, Cluster, TerraformCluster and bootstrap data
/// from the controller's caches (no request), recording each as a
/// dependency first.
pub(super) async fn read_pool_dependencies(
    ctx: &Context,
    obj: &TerraformMachinePool,
) -> Result<PoolDependencies, Error> {
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
    let tc_name = terraform_cluster_of(obj, cluster.as_ref(), &stores.terraform_clusters);
    let bootstrap_name = mp
        .as_ref()
        .and_then(|mp| mp.spec.template.spec.bootstrap.data_secret_name.as_deref());
    ctx.dependents.record(
        pool_dependent(obj),
        dependencies_of(obj, tc_name.as_deref(), bootstrap_name),
    );
    let tc = tc_name.and_then(|name| watches::get(&stores.terraform_clusters, &(), &ns, &name));
    let bootstrap_name = mp
        .as_ref()
        .and_then(|mp| mp.spec.template.spec.bootstrap.data_secret_name.clone());
    let bootstrap = bootstrap_data(ctx, stores, &ns, bootstrap_name.as_deref()).await?;
    Ok(PoolDependencies {
        mp,
        cluster,
        tc,
        bootstrap,
    })
}

/// The bootstrap data Secret `name`: from the cache when labeled with its
/// cluster's name, as Cluster API's bootstrap providers label it; else
/// read live.
async fn bootstrap_data(
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

/// What the machine's dependencies read.
pub struct MachineDependencies {
    pub machine: Option<Machine>,
    pub cluster: Option<Cluster>,
    pub tc: Option<TerraformCluster>,
    pub bootstrap: Option<BootstrapSecret>,
}

fn machine_dependent(obj: &TerraformMachine) -> Dependent {
    Dependent {
        kind: kinds::TERRAFORM_MACHINE,
        namespace: obj.namespace().unwrap_or_default(),
        name: obj.name_any(),
    }
}

/// Reads the Machine, Cluster, TerraformCluster and bootstrap data from the
/// controller's caches, recording each as a dependency first. A provisioned
/// machine never reads its bootstrap data again: its inputs are pinned.
pub(super) async fn read_machine_dependencies(
    ctx: &Context,
    obj: &TerraformMachine,
) -> Result<MachineDependencies, Error> {
    let stores = ctx
        .machine_stores
        .get()
        .expect("the machine controller sets its stores before its first pass");
    stores.ready().await;
    let ns = obj.namespace().unwrap_or_default();
    let machine = capi_owner_ref(&obj.metadata, capi::MACHINE_KIND)
        .and_then(|r| watches::get(&stores.owners, &capi::machine_resource(), &ns, &r.name))
        .and_then(|d| Machine::from_dynamic(&d).ok());
    let cluster = cluster_name_label(&obj.metadata)
        .and_then(|name| watches::get(&stores.clusters, &capi::cluster_resource(), &ns, name))
        .and_then(|d| Cluster::from_dynamic(&d).ok());
    let tc_name = terraform_cluster_of(obj, cluster.as_ref(), &stores.terraform_clusters);
    let bootstrap = machine
        .as_ref()
        .and_then(|m| m.spec.bootstrap.data_secret_name.as_deref());
    ctx.dependents.record(
        machine_dependent(obj),
        dependencies_of(obj, tc_name.as_deref(), bootstrap),
    );
    let tc = tc_name.and_then(|name| watches::get(&stores.terraform_clusters, &(), &ns, &name));
    let bootstrap_name = machine
        .as_ref()
        .filter(|_| !obj.provisioned())
        .and_then(|m| m.spec.bootstrap.data_secret_name.clone());
    let bootstrap = bootstrap_data(ctx, stores, &ns, bootstrap_name.as_deref()).await?;
    Ok(MachineDependencies {
        machine,
        cluster,
        tc,
        bootstrap,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tc(namespace: &str, name: &str, cluster_name: Option<&str>) -> TerraformCluster {
        let mut tc: TerraformCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
            "kind": "TerraformCluster",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"source": {"image": "r/m:v1"}},
        }))
        .unwrap();
        if let Some(c) = cluster_name {
            tc.metadata.labels = Some(
                [(
                    captf_api::names::labels::CLUSTER_NAME.to_owned(),
                    c.to_owned(),
                )]
                .into(),
            );
        }
        tc
    }

    #[test]
    fn an_orphan_finds_its_terraform_cluster_by_its_cluster_name_label() {
        let all = [
            tc("a", "prod-infra", Some("prod")),
            tc("a", "dev-infra", Some("dev")),
            tc("b", "prod-elsewhere", Some("prod")),
            tc("a", "unlabelled", None),
        ];
        let found = |ns, name| labelled_terraform_cluster(all.iter(), ns, name);
        assert_eq!(found("a", "prod").as_deref(), Some("prod-infra"));
        assert_eq!(found("b", "prod").as_deref(), Some("prod-elsewhere"));
        assert_eq!(found("a", "staging"), None);
        // Two claimants: which one was the cluster's cannot be told.
        let twice = [tc("a", "one", Some("prod")), tc("a", "two", Some("prod"))];
        assert_eq!(labelled_terraform_cluster(twice.iter(), "a", "prod"), None);
    }
}
