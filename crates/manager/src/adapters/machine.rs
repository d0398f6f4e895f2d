//! The TerraformMachine adapter: its owner `Machine` and Cluster, the
//! dependency gates, the `machine` role inputs, what its outputs write, the
//! health samples and the remediation request on the Machine.

use captf_api::TerraformCluster;
use captf_api::common::MachineAddress;
use captf_api::effective::EffectiveRemediation;
use captf_api::names::{annotations, kinds, reasons};
use captf_contract::health::{Health, infrastructure_healthy as module_health};
use captf_contract::inputs::{
    BootstrapData, BootstrapFormat, ClusterRef, CommonInputs, MachineInputs,
};
use captf_contract::outputs::MachineOutputs;
use captf_contract::{JsonText, Role};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::gates::{self, BootstrapSecret, ClusterState};
use super::pool::address_type;
use super::{
    OwnerDecision, annotation, back_reference_checks, capi_owner_ref, condition, names_captf_kind,
};
use crate::capi::{self, Cluster, Machine};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};

/// Decides whether the owning Machine and the Cluster may be used.
/// `machine` is the Machine the ownerReference names, as fetched (`None`:
/// not found); `cluster` the Cluster the cluster-name label names.
pub fn owner(
    object: &ObjectMeta,
    machine: Option<&Machine>,
    cluster: Option<&Cluster>,
) -> OwnerDecision {
    let Some(owner_ref) = capi_owner_ref(object, capi::MACHINE_KIND) else {
        // A control plane provider owns the object first, then the Machine
        // it creates takes over.
        let has_other_owners = object
            .owner_references
            .as_ref()
            .is_some_and(|r| !r.is_empty());
        return if has_other_owners {
            OwnerDecision::missing(
                ConditionStatus::Unknown,
                reasons::WAITING_FOR_OWNER_MACHINE,
                "owned, but not by a Machine yet",
            )
        } else {
            OwnerDecision::missing(
                ConditionStatus::Unknown,
                reasons::WAITING_FOR_OWNER,
                "no Machine references this TerraformMachine yet",
            )
        };
    };
    let Some(m) = machine else {
        return OwnerDecision::missing(
            ConditionStatus::False,
            reasons::OWNER_NOT_FOUND,
            format!("Machine {} not found", owner_ref.name),
        );
    };
    let own_name = object.name.as_deref().unwrap_or_default();
    let infra = &m.spec.infrastructure_ref;
    if !names_captf_kind(infra, kinds::TERRAFORM_MACHINE) || infra.name != own_name {
        return OwnerDecision::gated(
            reasons::OWNER_MISMATCH,
            format!(
                "Machine {}: spec.infrastructureRef does not name this TerraformMachine",
                m.metadata.name.as_deref().unwrap_or_default()
            ),
        );
    }
    if let Err(why) = back_reference_checks(owner_ref, &m.metadata, object, &m.spec.cluster_name) {
        return OwnerDecision::gated(reasons::OWNER_MISMATCH, why);
    }
    super::cluster_owner(object, cluster)
}

/// What the gates read. The caller fetches the TerraformCluster the Cluster
/// names, its state (skipped for an externally managed one) and the Secret
/// the Machine names.
#[derive(Debug, Clone, Copy)]
pub struct GateInput<'a> {
    pub cluster: &'a Cluster,
    /// `None`: the Cluster names no TerraformCluster yet, or it was not found.
    pub terraform_cluster: Option<&'a TerraformCluster>,
    pub cluster_state: ClusterState<'a>,
    pub machine: &'a Machine,
    /// `None`: the Secret was not found.
    pub bootstrap_secret: Option<&'a BootstrapSecret>,
}

/// What the gates let through into the inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Dependencies {
    /// `captf_cluster_outputs`, as the cluster's module wrote them.
    pub exports: JsonText,
    pub bootstrap_data: BootstrapData,
    pub bootstrap_format: BootstrapFormat,
}

/// The machine's gates in the order of the contract: the Cluster's
/// infrastructure provisioned, the cluster's exports, the bootstrap data.
pub fn gates(i: &GateInput<'_>) -> Result<Dependencies, ConditionValue> {
    let cluster_name = i.cluster.metadata.name.as_deref().unwrap_or_default();
    if !i.cluster.infrastructure_provisioned() {
        return Err(gates::waiting(
            reasons::WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            format!("Cluster {cluster_name}: infrastructure is not provisioned yet"),
        ));
    }
    let Some(tc) = i.terraform_cluster else {
        return Err(gates::waiting(
            reasons::WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            "the Cluster's TerraformCluster does not exist yet",
        ));
    };
    let (exports, _) = gates::exports(tc, i.cluster_state)?;
    let m = i.machine;
    let (bootstrap_data, bootstrap_format) = gates::bootstrap(
        &format!("Machine {}", m.metadata.name.as_deref().unwrap_or_default()),
        m.spec.bootstrap.data_secret_name.as_deref(),
        i.bootstrap_secret,
    )?;
    Ok(Dependencies {
        exports,
        bootstrap_data,
        bootstrap_format,
    })
}

/// Builds the `machine` role inputs.
pub fn inputs(
    object: &ObjectMeta,
    machine: &Machine,
    cluster: &Cluster,
    deps: &Dependencies,
) -> MachineInputs {
    let namespace = object.namespace.clone().unwrap_or_default();
    let cluster_ref = ClusterRef {
        name: cluster.metadata.name.clone().unwrap_or_default(),
        namespace: cluster
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| namespace.clone()),
    };
    let template = annotation(object, annotations::CLONED_FROM_NAME).map(str::to_owned);
    MachineInputs {
        common: CommonInputs::new(
            Role::Machine,
            cluster_ref,
            object.name.clone().unwrap_or_default(),
            namespace,
            template,
        ),
        captf_cluster_outputs: deps.exports.clone(),
        machine_name: machine.metadata.name.clone().unwrap_or_default(),
        bootstrap_data: deps.bootstrap_data.clone(),
        bootstrap_format: deps.bootstrap_format,
        failure_domain: machine
            .spec
            .failure_domain
            .clone()
            .filter(|f| !f.is_empty()),
        kubernetes_version: machine.spec.version.clone(),
        control_plane: machine.control_plane(),
    }
}

/// What valid machine outputs write.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineWrites {
    pub provider_id: String,
    /// `status.addresses` in canonical order; `None` clears the field (it
    /// holds at least one).
    pub addresses: Option<Vec<MachineAddress>>,
    pub failure_domain: Option<String>,
    pub interruptible: bool,
}

/// Maps valid machine outputs onto the TerraformMachine (the decoder
/// already sorted the addresses: internal before external, then by text).
pub fn writes(o: &MachineOutputs) -> MachineWrites {
    MachineWrites {
        provider_id: o.provider_id.clone(),
        addresses: (!o.addresses.is_empty()).then(|| {
            o.addresses
                .iter()
                .map(|a| MachineAddress {
                    type_: address_type(a.kind),
                    address: a.address.clone(),
                })
                .collect()
        }),
        failure_domain: o.failure_domain.clone(),
        interruptible: o.interruptible,
    }
}

/// `status.initialization.provisioned`: latched, or a successful apply's
/// valid outputs carry a provider ID and a health other than `pending`.
pub fn provisioned(
    latched: bool,
    successful_apply: bool,
    outputs: Option<&MachineOutputs>,
) -> bool {
    use captf_contract::health::HealthState;
    latched || (successful_apply && outputs.is_some_and(|o| o.health.state != HealthState::Pending))
}

/// One health sample of a provisioned machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    /// `InfrastructureHealthy`'s reason before this sample.
    pub previous_reason: Option<&'a str>,
    /// `status.unhealthySamples` before this sample.
    pub previous_count: Option<i32>,
    /// The `provider_id` output is null or empty.
    pub provider_id_missing: bool,
    /// The `health` output (`None`: null or unreadable).
    pub health: Option<&'a Health>,
}

/// What a sample makes of `InfrastructureHealthy` and the unhealthy count.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    pub condition: ConditionValue,
    /// `status.unhealthySamples`; `None` when healthy (the field is unset).
    pub unhealthy_samples: Option<i32>,
}

/// Applies one sample: a missing provider ID is `ProviderIDMissing` once
/// and terminated on the next consecutive sample; otherwise the module's
/// health. Unhealthy, degraded and stopped count up, healthy resets, the
/// rest leave the count.
pub fn sample(s: &Sample<'_>) -> Sampled {
    let condition = if s.provider_id_missing {
        let again = matches!(s.previous_reason, Some(reasons::PROVIDER_ID_MISSING))
            || matches!(s.previous_reason, Some(reasons::INSTANCE_TERMINATED));
        if again {
            super::condition(
                ConditionStatus::False,
                reasons::INSTANCE_TERMINATED,
                "the provider_id output is missing in two consecutive samples; the instance is treated as terminated",
            )
        } else {
            super::condition(
                ConditionStatus::Unknown,
                reasons::PROVIDER_ID_MISSING,
                "the provider_id output is missing; one more missing sample treats the instance as terminated",
            )
        }
    } else {
        let c = module_health(s.health);
        condition(c.status, c.reason, c.message)
    };
    let unhealthy_samples = match condition.reason {
        reasons::HEALTHY => None,
        reasons::INSTANCE_UNHEALTHY | reasons::INSTANCE_DEGRADED | reasons::INSTANCE_STOPPED => {
            Some(s.previous_count.unwrap_or(0).saturating_add(1))
        }
        _ => s.previous_count,
    };
    Sampled {
        condition,
        unhealthy_samples,
    }
}

/// What the Machine's remediation annotations call for.
#[derive(Debug, Clone, PartialEq)]
pub enum Remediation {
    /// Annotate the Machine (`RemediationRequested`), for this reason.
    Request { reason: &'static str, patch: Value },
    /// Remove our annotations (`RemediationWithdrawn`).
    Withdraw { patch: Value },
}

/// Keeps `cluster.x-k8s.io/remediate-machine` in step with the instance's
/// health: requested at the threshold (or at once for a terminated
/// instance) when the machine asks for it, withdrawn once healthy, and
/// only when we set it.
pub fn remediation(
    policy: &EffectiveRemediation,
    health_reason: &str,
    unhealthy_samples: Option<i32>,
    machine: &Machine,
) -> Option<Remediation> {
    let ours = machine
        .annotation(annotations::REMEDIATION_REQUESTED)
        .is_some();
    if health_reason == reasons::HEALTHY {
        return (ours && !machine.deleting()).then(|| Remediation::Withdraw {
            patch: json!({"metadata": {"annotations": {
                annotations::REMEDIATE_MACHINE: Value::Null,
                annotations::REMEDIATION_REQUESTED: Value::Null,
            }}}),
        });
    }
    if !policy.annotate_machine || machine.annotation(annotations::REMEDIATE_MACHINE).is_some() {
        return None;
    }
    let terminated = health_reason == reasons::INSTANCE_TERMINATED;
    let reached = unhealthy_samples.is_some_and(|n| n >= policy.unhealthy_threshold.max(1));
    if !terminated && !reached {
        return None;
    }
    let reason = if terminated {
        reasons::INSTANCE_TERMINATED
    } else {
        reasons::INSTANCE_UNHEALTHY
    };
    Some(Remediation::Request {
        reason,
        patch: json!({"metadata": {"annotations": {
            annotations::REMEDIATE_MACHINE: "",
            annotations::REMEDIATION_REQUESTED: health_reason,
        }}}),
    })
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
