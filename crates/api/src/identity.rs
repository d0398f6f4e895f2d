//! TerraformClusterIdentity: cluster-scoped credentials and the namespaces
//! allowed to use them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN};

/// Where the credentials are and which namespaces may use them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformClusterIdentity",
    doc = "TerraformClusterIdentity names a credentials Secret and the namespaces allowed to \
        use it; it is cluster-scoped. CAPTF copies the Secret into each allowed namespace \
        where a TerraformCluster, TerraformMachine or TerraformMachinePool references the \
        identity, and Jobs never mount the original.",
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
    /// How credentials are supplied. `Secret`, the only value and the default, reads them from
    /// `secretRef`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<IdentityType>,
    /// The Secret holding the credentials, in any namespace; required while `type` is `Secret`
    /// or unset. Its keys reach the Jobs as environment variables and as files under
    /// `/var/run/captf/credentials`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    /// Keys the Secret's data must contain; an empty value counts as present. While one is
    /// missing, the identity is not ready and no Job that uses it starts. At most 64 names of
    /// letters, digits, `-`, `.` and `_`; unset means no check.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 64),
        inner(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$")),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub required_keys: Option<Vec<String>>,
    /// Namespaces whose objects may use this identity: those in `list` plus those `selector`
    /// matches. Unset allows no namespace; `{}` is refused, so write `selector: {}` to allow
    /// every namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<AllowedNamespaces>,
}

/// How an identity supplies credentials; `Secret` is the only value.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum IdentityType {
    Secret,
}

/// A Secret in a given namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct SecretReference {
    /// Name of the Secret, a DNS subdomain of 1 to 253 characters.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    pub name: String,
    /// Namespace of the Secret, a DNS label of 1 to 63 characters. It need not be one of the
    /// allowed namespaces, and it is never defaulted.
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
    /// Namespaces allowed by name, 1 to 100 DNS labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 100),
        inner(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub list: Option<Vec<String>>,
    /// Label selector on Namespaces; `{}` matches every namespace, existing or future.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// Observed state of a TerraformClusterIdentity.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformClusterIdentityStatus {
    /// Current conditions, at most 32. Only `Ready`, which is False while the Secret is missing
    /// (`SecretNotFound`) or lacks a required key (`CredentialsIncomplete`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])
    )]
    pub conditions: Option<Vec<Condition>>,
    /// Namespaces, sorted, that hold a copy of the credentials and at least one object using
    /// this identity. The identity cannot be deleted while this list is non-empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 1000),
        inner(length(min = 1, max = 63)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub namespaces: Option<Vec<String>>,
}
