//! Reading the state lock the backend keeps (`lock-tfstate-default-<suffix>`),
//! and the liveness of the pod that holds it, for `leases::lock_verdict`.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use crate::leases::{LockVerdict, lock_verdict};
use crate::names::{WorkloadKind, state_lock_lease};

/// The annotation the backend keeps the lock's details in.
pub const LOCK_INFO: &str = "app.terraform.io/lock-info";

/// The lock version of a state that has no lock Lease yet.
pub const LOCK_ABSENT: &str = "absent";

/// The state lock as one read saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateLock {
    pub verdict: LockVerdict,
    /// The lock Lease's resourceVersion, or [`LOCK_ABSENT`]: recorded on an
    /// apply Job as lock evidence.
    pub version: String,
}

/// The lock version of a Lease (or of none).
fn version_of(lease: Option<&Lease>) -> String {
    lease
        .and_then(|l| l.metadata.resource_version.clone())
        .unwrap_or_else(|| LOCK_ABSENT.to_owned())
}

/// The state lock's version now (one GET of the lock Lease).
pub async fn lock_version(
    client: &kube::Client,
    namespace: &str,
    suffix: &str,
) -> Result<String, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    Ok(version_of(
        leases.get_opt(&state_lock_lease(suffix)).await?.as_ref(),
    ))
}

/// How the state lock of `object` reads now: one GET of the lock Lease, and
/// one of its holder's pod only when the holder is one of the object's own
/// pods (a terminating pod counts as alive).
pub async fn read_state_lock(
    client: &kube::Client,
    namespace: &str,
    suffix: &str,
    kind: WorkloadKind,
    object: &str,
) -> Result<StateLock, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let Some(lease) = leases.get_opt(&state_lock_lease(suffix)).await? else {
        return Ok(StateLock {
            verdict: LockVerdict::Unlocked,
            version: LOCK_ABSENT.to_owned(),
        });
    };
    let version = version_of(Some(&lease));
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
    let verdict = lock_verdict(holder.as_deref(), info.as_deref(), kind, object, |_| alive);
    Ok(StateLock { verdict, version })
}
