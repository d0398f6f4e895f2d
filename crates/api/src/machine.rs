//! TerraformMachine: the Cluster API infrastructure machine.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    MachineAddress, MachineDriftPolicy, MachineRemediation, WorkspaceSpec, WorkspaceStatus,
};

/// Desired state of a TerraformMachine: the machine-role module, its inputs and its policy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformMachine",
    doc = "TerraformMachine is the Cluster API infrastructure machine of CAPTF: one instance, \
        created by running a machine-role Terraform or OpenTofu module image as Kubernetes \
        Jobs. Its module and inputs are immutable; to change an instance, change the \
        template and roll the Machine.",
    plural = "terraformmachines",
    shortname = "tfm",
    category = "cluster-api",
    namespaced,
    status = "TerraformMachineStatus",
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
    ),
    printcolumn(
        name = "Machine",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"Machine\")].name"
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
    printcolumn(name = "ProviderID", type_ = "string", json_path = ".spec.providerID"),
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
pub struct TerraformMachineSpec {
    /// Provider ID of the instance, written by the controller from the module's `provider_id`
    /// output after the first successful apply; Cluster API copies it to the Machine and
    /// matches it with the Node. Once set it never changes.
    #[serde(rename = "providerID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: Option<String>,
    #[serde(flatten)]
    pub workspace: WorkspaceSpec,
    /// Drift checks of the machine. Drift is always reported, never remediated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<MachineDriftPolicy>,
    /// How the machine asks Cluster API to replace it when unhealthy, merged field by field
    /// over the TerraformCluster's `spec.defaults.remediation`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediation: Option<MachineRemediation>,
}

/// Observed state of a TerraformMachine. It is rebuilt from the Terraform state and the Jobs,
/// so nothing in it is lost when the machine is moved.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformMachineStatus {
    #[serde(flatten)]
    pub workspace: WorkspaceStatus,
    /// Current conditions of the machine, at most 32. Cluster API copies `Ready` into the
    /// Machine's `InfrastructureReady` condition.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])
    )]
    pub conditions: Option<Vec<Condition>>,
    /// Addresses of the instance from the module's `addresses` output, 1 to 256.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256), extend("x-kubernetes-list-type" = "atomic"))]
    pub addresses: Option<Vec<MachineAddress>>,
    /// Failure domain of the instance from the module's `failure_domain` output. It must match
    /// the Machine's `spec.failureDomain` when that is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub failure_domain: Option<String>,
    /// Whether the instance is a spot or preemptible one, from the module's `interruptible`
    /// output; false when the module does not say. Cluster API then labels the Node
    /// `cluster.x-k8s.io/interruptible`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interruptible: Option<bool>,
    /// Unhealthy health checks in a row; absent while the instance is healthy. Remediation is
    /// requested when it reaches `remediation.unhealthyThreshold`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub unhealthy_samples: Option<i32>,
}
