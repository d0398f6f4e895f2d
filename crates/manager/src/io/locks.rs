//! Reading the state lock the backend keeps (`lock-tfstate-default-<suffix>`),
//! and the liveness of the pod that holds it, for `leases::lock_verdict`.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use crate::leases::{LockVerdict, lock_verdict};
use crate::names::{WorkloadKind, state_lock_lease};

/// The annotation the backend keeps the lock's details in.
pub const LOCK_INFO: &str = "app.terraform.io/lock-info";

/// How the state lock of `object` reads now: one GET of the lock Lease, and
/// one of its holder's pod only when the holder is one of the object's own
/// pods (a terminating pod counts as alive).
pub async fn read_state_lock(
    client: &kube::Client,
    namespace: &str,
    suffix: &str,
    kind: WorkloadKind,
    object: &str,
) -> Result<LockVerdict, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let Some(lease) = leases.get_opt(&state_lock_lease(suffix)).await? else {
        return Ok(LockVerdict::Unlocked);
    };
    let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
    let info = lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LOCK_INFO).cloned());
    // The verdict asks about at most one pod: read it first when it is ours.
    let host = info
        .as_deref()
        .and_then(|i| serde_json::from_str::<crate::leases::LockInfo>(i).ok())
        .map(|i| i.who.rsplit('@').next().unwrap_or("").to_owned());
    let mut alive = false;
    if let Some(host) = host
        .as_deref()
        .filter(|h| crate::leases::is_own_pod(h, kind, object))
    {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        alive = pods.get_opt(host).await?.is_some_and(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        });
    }
    Ok(lock_verdict(
        holder.as_deref(),
        info.as_deref(),
        kind,
        object,
        |_| alive,
    ))
}
