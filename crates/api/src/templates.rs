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

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformClusterTemplate",
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
    pub template: TerraformClusterTemplateResource,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformClusterTemplateResource {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    pub spec: TerraformClusterSpec,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformMachineTemplate",
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
    pub template: TerraformMachineTemplateResource,
    /// Node capacity for the Cluster Autoscaler; overrides the image label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformMachineTemplateResource {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    pub spec: TerraformMachineSpec,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    Amd64,
    Arm64,
    S390x,
    Ppc64le,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct NodeInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub architecture: Option<Architecture>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub operating_system: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum CapacitySourceKind {
    Spec,
    Image,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend(
    "minProperties" = 1,
    "x-kubernetes-validations" = [{
        "rule": "!has(self.source) || self.source != 'Image' || has(self.image)",
        "message": "image is required when source is Image"
    }]
))]
pub struct CapacitySource {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<CapacitySourceKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformMachineTemplateStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])
    )]
    pub conditions: Option<Vec<Condition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_source: Option<CapacitySource>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformMachinePoolTemplate",
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
    pub template: TerraformMachinePoolTemplateResource,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformMachinePoolTemplateResource {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    pub spec: TerraformMachinePoolSpec,
}
