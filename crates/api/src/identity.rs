//! TerraformClusterIdentity: cluster-scoped credentials and the namespaces
//! allowed to use them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformClusterIdentity",
    plural = "terraformclusteridentities",
    category = "cluster-api",
    status = "TerraformClusterIdentityStatus",
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    label("clusterctl.cluster.x-k8s.io/move-hierarchy", "true"),
    printcolumn(name = "Secret", type_ = "string", json_path = ".spec.secretRef.name"),
    printcolumn(
        name = "Namespace",
        type_ = "string",
        json_path = ".spec.secretRef.namespace"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend(
    "minProperties" = 1,
    "x-kubernetes-validations" = [{
        "rule": "(has(self.type) && self.type != 'Secret') || has(self.secretRef)",
        "message": "secretRef is required when type is Secret"
    }]
))]
pub struct TerraformClusterIdentitySpec {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<IdentityType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 64),
        inner(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$")),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub required_keys: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<AllowedNamespaces>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum IdentityType {
    Secret,
}

/// A Secret in any namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct SecretReference {
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    pub name: String,
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub namespace: String,
}

/// Namespaces that may reference the identity: the union of `list` and the
/// namespaces `selector` matches.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.list) || has(self.selector)",
    "message": "allowedNamespaces {} is ambiguous: set list, or write selector: {} to allow every namespace"
}]))]
pub struct AllowedNamespaces {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 100),
        inner(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub list: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformClusterIdentityStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])
    )]
    pub conditions: Option<Vec<Condition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 1000),
        inner(length(min = 1, max = 63)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub namespaces: Option<Vec<String>>,
}
