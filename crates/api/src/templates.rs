//! The three template kinds ClusterClass and the machine-set controllers
//! clone into module objects.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cluster::TerraformClusterSpec;
use crate::common::TemplateMeta;
use crate::machine::TerraformMachineSpec;
use crate::machinepool::TerraformMachinePoolSpec;

/// The TerraformCluster this template creates.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformClusterTemplate",
    doc = "TerraformClusterTemplate holds a TerraformCluster spec that a ClusterClass clones \
        into a new TerraformCluster for each Cluster. Its `spec.template.spec` cannot \
        change; create a new template instead.",
    plural = "terraformclustertemplates",
    shortname = "tfct",
    category = "cluster-api",
    namespaced,
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    printcolumn(
        name = "Image",
        type_ = "string",
        json_path = ".spec.template.spec.source.image"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct TerraformClusterTemplateSpec {
    /// Labels, annotations and spec of the TerraformCluster to create.
    pub template: TerraformClusterTemplateResource,
}

/// What each TerraformCluster created from the template gets.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformClusterTemplateResource {
    /// Labels and annotations to copy onto the created TerraformCluster; they may be changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    /// Spec of the created TerraformCluster, with the fields and defaults of a
    /// TerraformCluster's spec; immutable. `identityRef` may be left out if a ClusterClass
    /// patch sets it.
    pub spec: TerraformClusterSpec,
}

/// The TerraformMachine this template creates, and node capacity for the Cluster Autoscaler.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformMachineTemplate",
    doc = "TerraformMachineTemplate holds a TerraformMachine spec that Cluster API clones into \
        one TerraformMachine per Machine. Its status reports node capacity, from \
        `spec.capacity` or the module image, so that the Cluster Autoscaler can scale from \
        zero.",
    plural = "terraformmachinetemplates",
    shortname = "tfmt",
    category = "cluster-api",
    namespaced,
    status = "TerraformMachineTemplateStatus",
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    printcolumn(
        name = "Image",
        type_ = "string",
        json_path = ".spec.template.spec.source.image"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct TerraformMachineTemplateSpec {
    /// Labels, annotations and spec of each TerraformMachine to create.
    pub template: TerraformMachineTemplateResource,
    /// Capacity of a node made from this template, as resource name to quantity (for example
    /// `cpu: "4"`), so the Cluster Autoscaler can scale from zero. It replaces the image's
    /// `io.captf.capacity` label as a whole; it is never copied to machines, and changing it
    /// replaces no machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
}

/// What each TerraformMachine created from the template gets.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformMachineTemplateResource {
    /// Labels and annotations to copy onto each created TerraformMachine; they may be changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    /// Spec of each created TerraformMachine, with the fields and defaults of a
    /// TerraformMachine's spec; immutable. `providerID` must be empty.
    pub spec: TerraformMachineSpec,
}

/// CPU architecture of a node: `amd64`, `arm64`, `s390x` or `ppc64le`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    Amd64,
    Arm64,
    S390x,
    Ppc64le,
}

/// Node properties read from the image's `io.captf.node-info` label.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct NodeInfo {
    /// CPU architecture of the nodes: `amd64`, `arm64`, `s390x` or `ppc64le`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub architecture: Option<Architecture>,
    /// Operating system of the nodes, such as `linux`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub operating_system: Option<String>,
}

/// Where a template's capacity came from: `Spec` or `Image`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum CapacitySourceKind {
    Spec,
    Image,
}

/// Where `status.capacity` came from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend(
    "minProperties" = 1,
    "x-kubernetes-validations" = [{
        "rule": "!has(self.source) || self.source != 'Image' || has(self.image)",
        "message": "image is required when source is Image"
    }]
))]
pub struct CapacitySource {
    /// `Spec` when `spec.capacity` is set, `Image` when the capacity came from the image's
    /// `io.captf.capacity` label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<CapacitySourceKind>,
    /// Image reference last inspected; required when `source` is `Image`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
}

/// Node capacity and properties for the Cluster Autoscaler, read from the template and its
/// module image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformMachineTemplateStatus {
    /// Current conditions, at most 32: `CapacityResolved` and `VariablesValid`. This kind has
    /// no `Ready` condition.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])
    )]
    pub conditions: Option<Vec<Condition>>,
    /// Node capacity the Cluster Autoscaler uses: `spec.capacity` when set, otherwise the
    /// image's `io.captf.capacity` label; unset when neither is available.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
    /// Architecture and operating system of the nodes, from the image's `io.captf.node-info`
    /// label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeInfo>,
    /// Where `capacity` came from, and which image was inspected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_source: Option<CapacitySource>,
}

/// The TerraformMachinePool this template creates.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformMachinePoolTemplate",
    doc = "TerraformMachinePoolTemplate holds a TerraformMachinePool spec that a ClusterClass \
        clones into a new TerraformMachinePool for each MachinePool. Its \
        `spec.template.spec` cannot change; create a new template instead.",
    plural = "terraformmachinepooltemplates",
    shortname = "tfmpt",
    category = "cluster-api",
    namespaced,
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    printcolumn(
        name = "Image",
        type_ = "string",
        json_path = ".spec.template.spec.source.image"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct TerraformMachinePoolTemplateSpec {
    /// Labels, annotations and spec of the TerraformMachinePool to create.
    pub template: TerraformMachinePoolTemplateResource,
}

/// What each TerraformMachinePool created from the template gets.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformMachinePoolTemplateResource {
    /// Labels and annotations to copy onto the created TerraformMachinePool; they may be
    /// changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    /// Spec of the created TerraformMachinePool, with the fields and defaults of a
    /// TerraformMachinePool's spec; immutable. `providerID` and `providerIDList` are accepted
    /// but unused, because the controller writes them on the created pool.
    pub spec: TerraformMachinePoolSpec,
}
