//! What a deleted object leaves behind is removed before its finalizer
//! goes: state Secrets, inputs records, the plan key, leases.

use captf_api::names::labels;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};

use super::pass::plan_key_name;
use super::workload::Workload;
use super::{Context, Error};
use crate::io::state::state_selector;
use crate::leases::run_lease_name;
use crate::names::{name_label, state_lock_lease, state_suffix};
use crate::records::{applied_record_name, attempt_record_name};

async fn delete_secret(api: &Api<Secret>, name: &str) -> Result<(), Error> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes every Secret and Lease the object made. Safe to repeat.
pub async fn cleanup<K: Workload>(ctx: &Context, obj: &K) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let suffix = state_suffix(K::KIND, &ns, &name);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let state = secrets
        .list(&ListParams::default().labels(&state_selector(&suffix)))
        .await?;
    for s in state.items {
        delete_secret(&secrets, &s.name_any()).await?;
    }
    // Backups and anything else labeled as this object's.
    let owned = format!(
        "{}={},{}={}",
        labels::OWNER_KIND,
        K::KIND.kind(),
        labels::OWNER_NAME,
        name_label(&name)
    );
    for s in secrets
        .list(&ListParams::default().labels(&owned))
        .await?
        .items
    {
        delete_secret(&secrets, &s.name_any()).await?;
    }
    for n in [
        attempt_record_name(K::KIND, &name),
        applied_record_name(K::KIND, &name),
    ] {
        delete_secret(&secrets, &n).await?;
    }
    forget_runs(ctx, obj).await
}

/// What only served the object's runs goes: its plan key, its share of
/// the credentials mirror, its run and state lock Leases. Safe to repeat.
pub async fn forget_runs<K: Workload>(ctx: &Context, obj: &K) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    delete_secret(&secrets, &plan_key_name(K::KIND, &name)).await?;
    super::credentials::forget_object(ctx, obj).await?;
    ctx.dependents.forget(&super::routing::Dependent {
        kind: K::KIND.kind(),
        namespace: ns.clone(),
        name: name.clone(),
    });
    let suffix = state_suffix(K::KIND, &ns, &name);
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), &ns);
    let mut names = vec![run_lease_name(&suffix), state_lock_lease(&suffix)];
    if K::KIND == crate::names::WorkloadKind::Cluster
        && let Some(cluster) = crate::adapters::cluster_name_label(obj.meta())
    {
        names.push(crate::leases::cluster_lease_name(&ns, cluster));
    }
    for n in names {
        match leases.delete(&n, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// After `leaving` lets go: when no module object remains in the namespace,
/// the runner's ServiceAccount, RoleBinding and Leases we made go too.
/// Failures are only logged (the next release sweeps again).
pub async fn sweep_namespace(ctx: &Context, namespace: &str, leaving: &str) {
    if let Err(e) = try_sweep(ctx, namespace, leaving).await {
        tracing::warn!(namespace, error = %e, "namespace sweep failed");
    }
}

async fn try_sweep(ctx: &Context, ns: &str, leaving: &str) -> Result<(), Error> {
    use captf_api::{TerraformCluster, TerraformMachine, TerraformMachinePool};
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::RoleBinding;
    let lp = ListParams::default();
    let others = |names: Vec<String>| names.into_iter().filter(|n| n != leaving).count();
    let clusters: Api<TerraformCluster> = Api::namespaced(ctx.client.clone(), ns);
    let machines: Api<TerraformMachine> = Api::namespaced(ctx.client.clone(), ns);
    let pools: Api<TerraformMachinePool> = Api::namespaced(ctx.client.clone(), ns);
    let remaining = others(
        clusters
            .list(&lp)
            .await?
            .items
            .iter()
            .map(|o| o.name_any())
            .collect(),
    ) + machines.list(&lp).await?.items.len()
        + others(
            pools
                .list(&lp)
                .await?
                .items
                .iter()
                .map(|o| o.name_any())
                .collect(),
        );
    if remaining > 0 {
        return Ok(());
    }
    // The runner RBAC goes: the next object here must apply it again.
    ctx.rbac_ensured.forget(ns);
    let managed = ListParams::default().labels(&format!("{}=true", labels::MANAGED));
    let dp = DeleteParams::default();
    let sas: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), ns);
    for sa in sas.list(&managed).await?.items {
        let _ = sas.delete(&sa.name_any(), &dp).await;
    }
    let rbs: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), ns);
    for rb in rbs.list(&managed).await?.items {
        let _ = rbs.delete(&rb.name_any(), &dp).await;
    }
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), ns);
    for l in leases.list(&managed).await?.items {
        let _ = leases.delete(&l.name_any(), &dp).await;
    }
    // Also after: a pass that applied it meanwhile saw it deleted.
    ctx.rbac_ensured.forget(ns);
    Ok(())
}
