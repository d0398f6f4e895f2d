//! TerraformCluster: the Cluster API infrastructure cluster.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    ApplyPolicy, DeletionPolicy, DriftPolicy, IdentityReference, JobPolicy, MachineRemediation,
    PlanReference, WorkspaceSpec, WorkspaceStatus,
};
use crate::schema;

/// Desired state of a TerraformCluster: the cluster-role module, its inputs and policy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformCluster",
    plural = "terraformclusters",
    shortname = "tfc",
    category = "cluster-api",
    namespaced,
    status = "TerraformClusterStatus",
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Provisioned",
        type_ = "boolean",
        json_path = ".status.initialization.provisioned"
    ),
    printcolumn(
        name = "Endpoint",
        type_ = "string",
        json_path = ".spec.controlPlaneEndpoint.host"
    ),
    printcolumn(
        name = "Image",
        type_ = "string",
        json_path = ".spec.source.image",
        priority = 1
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
pub struct TerraformClusterSpec {
    #[serde(flatten)]
    pub workspace: WorkspaceSpec,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apply_policy: Option<ApplyPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_active_jobs: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defaults: Option<TerraformClusterDefaults>,
}

/// The control-plane endpoint (Cluster API `APIEndpoint`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend(
    "minProperties" = 1,
    "x-kubernetes-validations" = [{
        "rule": "has(self.host) == has(self.port)",
        "message": "host and port must be set together"
    }]
))]
pub struct ApiEndpoint {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

impl ApiEndpoint {
    /// Both host and port are set: from then on the endpoint is fixed.
    pub fn is_complete(&self) -> bool {
        self.host.is_some() && self.port.is_some()
    }
}

/// Policy a cluster hands down to its machines and pools.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerraformClusterDefaults {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<IdentityReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<JobPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediation: Option<MachineRemediation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 15, max = 86400))]
    pub membership_refresh_interval_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,
}

/// A failure domain the cluster module reports (Cluster API `FailureDomain`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributes: Option<BTreeMap<String, String>>,
}

/// Observed state of a TerraformCluster, rebuilt from state and Jobs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformClusterStatus {
    #[serde(flatten)]
    pub workspace: WorkspaceStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])
    )]
    pub conditions: Option<Vec<Condition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 100),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub failure_domains: Option<Vec<FailureDomain>>,
    /// Copy of the module's `exports` output; any JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form")]
    pub exports: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_plan_ref: Option<PlanReference>,
}
