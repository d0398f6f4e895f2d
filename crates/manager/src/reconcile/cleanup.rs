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
use crate::names::{WorkloadKind, name_label, state_lock_lease, state_suffix};
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
    // Its runner identity goes with it (owner references); a namesake made
    // later must apply its own.
    let runner = crate::rbac::object_runner_name(&suffix);
    ctx.rbac_ensured
        .forget(&super::runner_access::runner_key(&ns, &runner));
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
    names.extend(obj.cluster_write_lease());
    for n in names {
        match leases.delete(&n, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// After `leaving` (an object of `kind`) lets go: when no module object
/// remains in the namespace, the runner's ServiceAccount, RoleBinding and
/// Leases we made go too. Failures are only logged (the next release
/// sweeps again).
pub async fn sweep_namespace(ctx: &Context, namespace: &str, kind: WorkloadKind, leaving: &str) {
    if let Err(e) = try_sweep(ctx, namespace, kind, leaving).await {
        tracing::warn!(namespace, error = %e, "namespace sweep failed");
    }
}

/// How many module objects other than `leaving` (of `kind`) are listed:
/// the leaving one may still be read for a moment after its finalizer went.
fn remaining(kind: WorkloadKind, leaving: &str, listed: &[(WorkloadKind, String)]) -> usize {
    listed
        .iter()
        .filter(|(k, name)| !(*k == kind && name == leaving))
        .count()
}

async fn try_sweep(
    ctx: &Context,
    ns: &str,
    kind: WorkloadKind,
    leaving: &str,
) -> Result<(), Error> {
    use captf_api::{TerraformCluster, TerraformMachine, TerraformMachinePool};
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let lp = ListParams::default();
    let mut listed = Vec::new();
    let clusters: Api<TerraformCluster> = Api::namespaced(ctx.client.clone(), ns);
    for o in clusters.list(&lp).await?.items {
        listed.push((WorkloadKind::Cluster, o.name_any()));
    }
    let machines: Api<TerraformMachine> = Api::namespaced(ctx.client.clone(), ns);
    for o in machines.list(&lp).await?.items {
        listed.push((WorkloadKind::Machine, o.name_any()));
    }
    let pools: Api<TerraformMachinePool> = Api::namespaced(ctx.client.clone(), ns);
    for o in pools.list(&lp).await?.items {
        listed.push((WorkloadKind::MachinePool, o.name_any()));
    }
    let remaining = remaining(kind, leaving, &listed);
    if remaining > 0 {
        return Ok(());
    }
    // The runner identities go: the next object here must apply its own.
    let in_ns = |key: &str| key.split_once('/').is_some_and(|(n, _)| n == ns);
    ctx.rbac_ensured.forget_where(in_ns);
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
    let roles: Api<Role> = Api::namespaced(ctx.client.clone(), ns);
    for role in roles.list(&managed).await?.items {
        let _ = roles.delete(&role.name_any(), &dp).await;
    }
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), ns);
    for l in leases.list(&managed).await?.items {
        let _ = leases.delete(&l.name_any(), &dp).await;
    }
    // Also after: a pass that applied one meanwhile saw it deleted.
    ctx.rbac_ensured.forget_where(in_ns);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_leaving_object_itself_is_not_counted() {
        use WorkloadKind::{Cluster, Machine, MachinePool};
        let listed = |v: &[(WorkloadKind, &str)]| -> Vec<(WorkloadKind, String)> {
            v.iter().map(|(k, n)| (*k, n.to_string())).collect()
        };
        type Listed = Vec<(WorkloadKind, String)>;
        let table: &[(WorkloadKind, &str, Listed, usize)] = &[
            (Cluster, "prod", listed(&[]), 0),
            (Machine, "m-1", listed(&[(Machine, "m-1")]), 0),
            (MachinePool, "prod", listed(&[(MachinePool, "prod")]), 0),
            // Another kind of the same name still needs the runner.
            (Cluster, "prod", listed(&[(MachinePool, "prod")]), 1),
            (
                Machine,
                "m-1",
                listed(&[(Machine, "m-1"), (Machine, "m-2")]),
                1,
            ),
        ];
        for (kind, leaving, objects, want) in table {
            assert_eq!(
                remaining(*kind, leaving, objects),
                *want,
                "{kind:?} {leaving} {objects:?}"
            );
        }
    }
}
