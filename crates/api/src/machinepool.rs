//! TerraformMachinePool: the Cluster API infrastructure machine pool.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    HealthState, MachineAddress, MachinePoolDriftPolicy, PlanReference, WorkspaceSpec,
    WorkspaceStatus,
};

/// Desired state of a TerraformMachinePool: the machinepool-role module, its inputs and its
/// policy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformMachinePool",
    doc = "TerraformMachinePool is the Cluster API infrastructure machine pool of CAPTF: one \
        cloud scaling group, created by running a machinepool-role Terraform or OpenTofu \
        module image as Kubernetes Jobs. Every field is mutable, and a change to the \
        module's inputs applies the module again.",
    plural = "terraformmachinepools",
    shortname = "tfmp",
    category = "cluster-api",
    namespaced,
    status = "TerraformMachinePoolStatus",
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
    ),
    printcolumn(
        name = "MachinePool",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"MachinePool\")].name"
    ),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".status.replicas"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "InputsApplied",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"InputsApplied\")].status",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformMachinePoolSpec {
    /// Provider ID of the scaling group, written by the controller from the module's
    /// `provider_id` output; it may stay unset for modules without one. Do not set it yourself.
    #[serde(rename = "providerID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: Option<String>,
    /// Provider IDs of the group's instances, written by the controller from the module's
    /// `provider_id_list` output, sorted and without duplicates; at most 10000. Cluster API
    /// copies it to the MachinePool to match Nodes; do not set it yourself.
    #[serde(rename = "providerIDList", skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 10000),
        inner(length(min = 1, max = 512)),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub provider_id_list: Option<Vec<String>>,
    #[serde(flatten)]
    pub workspace: WorkspaceSpec,
    /// Drift checks of the pool. They cannot be turned off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<MachinePoolDriftPolicy>,
    /// Seconds between refreshes that pick up instances joining or leaving the group between
    /// applies, 15 to 86400. When unset, the TerraformCluster's
    /// `spec.defaults.membershipRefreshIntervalSeconds` applies, then 60. While the group's
    /// membership has not settled, refreshes run every 30 seconds, or at this interval when it
    /// is shorter.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 15, max = 86400))]
    pub membership_refresh_interval_seconds: Option<i32>,
}

/// One instance of the group, as the module reports it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachinePoolInstance {
    /// Provider ID of the instance, 1 to 512 characters.
    #[serde(rename = "providerID")]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: String,
    /// The cloud's own ID of the instance.
    #[serde(rename = "instanceID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub instance_id: Option<String>,
    /// Addresses of the instance, 1 to 256.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256), extend("x-kubernetes-list-type" = "atomic"))]
    pub addresses: Option<Vec<MachineAddress>>,
    /// Failure domain the instance runs in.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub failure_domain: Option<String>,
    /// Health of the instance: `pending`, `running`, `degraded`, `stopped`, `terminated` or
    /// `unknown`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<HealthState>,
}

/// Observed state of a TerraformMachinePool. It is rebuilt from the Terraform state and the
/// Jobs, so nothing in it is lost when the pool is moved.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformMachinePoolStatus {
    #[serde(flatten)]
    pub workspace: WorkspaceStatus,
    /// Current conditions of the pool, at most 32. Cluster API copies `Ready` into the
    /// MachinePool's `InfrastructureReady` condition.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])
    )]
    pub conditions: Option<Vec<Condition>>,
    /// Same value as `initialization.provisioned`, for Cluster API versions that still read
    /// this older field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Size of the group at the last refresh, from the module's `replicas` output.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    /// Instances of the group from the module's `instances` output, at most 1000. Cluster API
    /// itself does not use this list.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1000), extend("x-kubernetes-list-type" = "atomic"))]
    pub instances: Option<Vec<MachinePoolInstance>>,
    /// Not set by this version of CAPTF, which approves a pool's destructive changes through
    /// the `captf.io/approve-destructive-plan` annotation. Kept so that pools written by
    /// earlier versions still validate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_plan_ref: Option<PlanReference>,
}
