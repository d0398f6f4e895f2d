//! TerraformMachinePool: the Cluster API infrastructure machine pool.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    HealthState, MachineAddress, MachinePoolDriftPolicy, PlanReference, WorkspaceSpec,
    WorkspaceStatus,
};

/// Desired state of a TerraformMachinePool: the machinepool-role module and its policy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformMachinePool",
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
    /// Written by the controller from the module's `provider_id` output.
    #[serde(rename = "providerID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: Option<String>,
    /// Written by the controller from the module's `provider_id_list` output.
    #[serde(rename = "providerIDList", skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 10000),
        inner(length(min = 1, max = 512)),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub provider_id_list: Option<Vec<String>>,
    #[serde(flatten)]
    pub workspace: WorkspaceSpec,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<MachinePoolDriftPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 15, max = 86400))]
    pub membership_refresh_interval_seconds: Option<i32>,
}

/// One member of the pool as the module reports it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct MachinePoolInstance {
    #[serde(rename = "providerID")]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: String,
    #[serde(rename = "instanceID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub instance_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256), extend("x-kubernetes-list-type" = "atomic"))]
    pub addresses: Option<Vec<MachineAddress>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub failure_domain: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<HealthState>,
}

/// Observed state of a TerraformMachinePool, rebuilt from state and Jobs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformMachinePoolStatus {
    #[serde(flatten)]
    pub workspace: WorkspaceStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])
    )]
    pub conditions: Option<Vec<Condition>>,
    /// Cluster API v1beta1 compatibility flag, latched with
    /// `initialization.provisioned`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1000), extend("x-kubernetes-list-type" = "atomic"))]
    pub instances: Option<Vec<MachinePoolInstance>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_plan_ref: Option<PlanReference>,
}
