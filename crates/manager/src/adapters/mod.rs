//! What each kind adds to the shared engine: how its owner is found and
//! checked, how its role inputs are built from the Cluster API objects, and
//! how decoded outputs map onto what gets written. Pure over plain data; the
//! reconcilers fetch the objects and write the results.

pub mod capacity;
pub mod cluster;
pub mod exports_guard;
pub mod gates;
pub mod machine;
pub mod pool;
pub mod variables;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use captf_api::names::{conditions, labels, reasons};
use captf_contract::health::{Health, infrastructure_healthy as module_health};

use crate::capi::{self, ObjectReference};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::engine::preamble::OwnerLookup;

pub(crate) fn condition(
    status: ConditionStatus,
    reason: &'static str,
    message: impl Into<String>,
) -> ConditionValue {
    ConditionValue {
        status,
        reason,
        message: message.into(),
    }
}

/// The outcome of an owner lookup: what the preamble needs and the
/// `DependenciesReady` value to report when the owner cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerDecision {
    pub lookup: OwnerLookup,
    /// `DependenciesReady` while the owner is missing or gated; `None` when
    /// found (the kind's own gates decide the condition then).
    pub condition: Option<ConditionValue>,
}

impl OwnerDecision {
    fn found() -> Self {
        OwnerDecision {
            lookup: OwnerLookup::Found,
            condition: None,
        }
    }

    fn missing(status: ConditionStatus, reason: &'static str, message: impl Into<String>) -> Self {
        OwnerDecision {
            lookup: OwnerLookup::Missing,
            condition: Some(condition(status, reason, message)),
        }
    }

    fn gated(reason: &'static str, message: impl Into<String>) -> Self {
        OwnerDecision {
            lookup: OwnerLookup::Gated(reason),
            condition: Some(condition(ConditionStatus::False, reason, message)),
        }
    }
}

/// The first ownerReference to a Cluster API core object of `kind`: the one
/// the caller fetches and passes back to the owner check.
pub fn capi_owner_ref<'a>(meta: &'a ObjectMeta, kind: &str) -> Option<&'a OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.kind == kind && capi::is_core_api_version(&r.api_version))
}

/// The object's `cluster.x-k8s.io/cluster-name` label.
pub fn cluster_name_label(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(labels::CLUSTER_NAME))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// One of the object's annotations.
pub(crate) fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// True when `r` names a CAPTF object of `kind`.
pub(crate) fn names_captf_kind(r: &ObjectReference, kind: &str) -> bool {
    r.api_group == captf_api::GROUP && r.kind == kind
}

/// The back-reference checks shared by every owner kind, after the owner's
/// reference to this object was found pointing here: the ownerRef's UID (when
/// it has one) is the owner's, and the object's cluster-name label (when set)
/// names the owner's cluster. `Err` names the failed check.
pub(crate) fn back_reference_checks(
    owner_ref: &OwnerReference,
    owner: &ObjectMeta,
    object: &ObjectMeta,
    owner_cluster: &str,
) -> Result<(), String> {
    let what = format!("{} {}", owner_ref.kind, owner_ref.name);
    if !owner_ref.uid.is_empty() && owner.uid.as_deref() != Some(owner_ref.uid.as_str()) {
        return Err(format!(
            "{what}: the ownerReference UID is not the UID of that object"
        ));
    }
    if let Some(label) = cluster_name_label(object)
        && label != owner_cluster
    {
        return Err(format!(
            "{what} belongs to cluster {owner_cluster:?}, but the {} label says {label:?}",
            labels::CLUSTER_NAME
        ));
    }
    Ok(())
}

/// The owner checks machines and pools share once their own owner passed:
/// the cluster-name label, the Cluster it names, and that Cluster's
/// infrastructure being a TerraformCluster.
pub(crate) fn cluster_owner(object: &ObjectMeta, cluster: Option<&capi::Cluster>) -> OwnerDecision {
    let Some(cluster_name) = cluster_name_label(object) else {
        return OwnerDecision::missing(
            ConditionStatus::Unknown,
            reasons::WAITING_FOR_OWNER,
            format!("waiting for the {} label", labels::CLUSTER_NAME),
        );
    };
    let Some(cluster) = cluster else {
        return OwnerDecision::missing(
            ConditionStatus::False,
            reasons::OWNER_NOT_FOUND,
            format!("Cluster {cluster_name} not found"),
        );
    };
    match &cluster.spec.infrastructure_ref {
        Some(r) if !names_captf_kind(r, captf_api::names::kinds::TERRAFORM_CLUSTER) => {
            OwnerDecision::gated(
                reasons::CLUSTER_NOT_TERRAFORM,
                format!(
                    "Cluster {cluster_name} uses infrastructure {} of group {:?}, not a TerraformCluster",
                    r.kind, r.api_group
                ),
            )
        }
        _ => OwnerDecision::found(),
    }
}

/// Where an object is on its way to being provisioned, for
/// `InfrastructureHealthy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provisioning {
    /// No apply has started yet.
    NotStarted,
    /// The first apply started, and the object is not provisioned yet.
    InProgress,
    /// `status.initialization.provisioned` latched.
    Provisioned,
}

/// `InfrastructureHealthy`: the controller's own reasons before the object
/// is provisioned, then the module's health reading (`None`: null or
/// unreadable `health`).
pub fn infrastructure_healthy(phase: Provisioning, health: Option<&Health>) -> ConditionValue {
    match phase {
        Provisioning::NotStarted => condition(
            ConditionStatus::Unknown,
            reasons::WAITING_FOR_PROVISIONING,
            "no apply has started yet",
        ),
        Provisioning::InProgress => condition(
            ConditionStatus::False,
            reasons::PROVISIONING,
            match health {
                Some(h) => format!("provisioning; module health reads {}", h.state),
                None => "provisioning".to_owned(),
            },
        ),
        Provisioning::Provisioned => {
            let c = module_health(health);
            condition(c.status, c.reason, c.message)
        }
    }
}

/// `DependenciesReady=True`.
pub fn dependencies_ready() -> ConditionValue {
    condition(
        ConditionStatus::True,
        reasons::DEPENDENCIES_READY,
        conditions::DEPENDENCIES_READY,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use captf_contract::health::HealthState;

    #[test]
    fn infrastructure_healthy_table() {
        let pending = Health {
            state: HealthState::Pending,
            healthy: false,
            message: None,
            reasons: vec![],
        };
        let running = Health::running_healthy();
        let cases = [
            (
                Provisioning::NotStarted,
                None,
                "Unknown",
                "WaitingForProvisioning",
            ),
            (
                Provisioning::NotStarted,
                Some(&running),
                "Unknown",
                "WaitingForProvisioning",
            ),
            (Provisioning::InProgress, None, "False", "Provisioning"),
            (
                Provisioning::InProgress,
                Some(&pending),
                "False",
                "Provisioning",
            ),
            (Provisioning::Provisioned, Some(&running), "True", "Healthy"),
            (
                Provisioning::Provisioned,
                Some(&pending),
                "False",
                "InstancePending",
            ),
            (Provisioning::Provisioned, None, "Unknown", "HealthUnknown"),
        ];
        for (phase, health, status, reason) in cases {
            let c = infrastructure_healthy(phase, health);
            assert_eq!(
                (c.status.as_str(), c.reason),
                (status, reason),
                "{phase:?} {health:?}"
            );
        }
        assert_eq!(
            infrastructure_healthy(Provisioning::InProgress, Some(&pending)).message,
            "provisioning; module health reads pending"
        );
    }

    #[test]
    fn owner_refs_are_matched_by_kind_and_core_group() {
        let r = |api_version: &str, kind: &str, name: &str| OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: String::new(),
            ..Default::default()
        };
        let meta = ObjectMeta {
            owner_references: Some(vec![
                r("example.com/v1", "MachinePool", "fake"),
                r("cluster.x-k8s.io/v1beta1", "MachinePool", "real"),
            ]),
            ..Default::default()
        };
        assert_eq!(capi_owner_ref(&meta, "MachinePool").unwrap().name, "real");
        assert!(capi_owner_ref(&meta, "Cluster").is_none());
        assert!(capi_owner_ref(&ObjectMeta::default(), "Cluster").is_none());
    }
}
