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

/// Desired state of a TerraformCluster: the cluster-role module, its inputs, and the policy it
/// hands to its machines and pools.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformCluster",
    doc = "TerraformCluster is the Cluster API infrastructure cluster of CAPTF: it runs a \
        cluster-role Terraform or OpenTofu module image as Kubernetes Jobs and publishes \
        the control-plane endpoint, failure domains and exports the module outputs. It does \
        nothing until a Cluster references it in `spec.infrastructureRef`.",
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
    /// Address of the workload cluster's API server. Set it to supply your own endpoint, which
    /// the module receives as its `control_plane_endpoint` input; leave it unset and the
    /// controller writes the module's `control_plane_endpoint` output here once. It cannot
    /// change once both host and port are set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// Drift checks of the cluster's own infrastructure. An interval of 0 also stops the health
    /// checks that follow provisioning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftPolicy>,
    /// `Automatic` (the default) applies every change at once, except that a plan that deletes
    /// or replaces resources waits for approval as a `Destructive` TerraformPlan. `Manual`
    /// plans every change first and applies it only after its `Manual` TerraformPlan is
    /// approved. The very first apply is never held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apply_policy: Option<ApplyPolicy>,
    /// Most Jobs that may run at once for this cluster and its machines and pools, 1 or more;
    /// default the manager's `--cluster-max-active-jobs` (20 unless changed). Further
    /// operations wait, and drift checks and refreshes start only while fewer than 80% of the
    /// slots are in use.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_active_jobs: Option<i32>,
    /// Settings that this cluster's machines and pools inherit when they leave them unset; they
    /// never apply to the cluster itself. Changes reach existing machines and pools without a
    /// rollout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defaults: Option<TerraformClusterDefaults>,
}

/// A network endpoint of an API server, in Cluster API's format. Host and port are set
/// together.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend(
    "minProperties" = 1,
    "x-kubernetes-validations" = [{
        "rule": "has(self.host) == has(self.port)",
        "message": "host and port must be set together"
    }]
))]
pub struct ApiEndpoint {
    /// Host name or IP address, 1 to 512 characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub host: Option<String>,
    /// TCP port, 1 to 65535.
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

/// Settings a TerraformCluster's machines and pools inherit when they leave them unset.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerraformClusterDefaults {
    /// Credentials for machines and pools that set no `identityRef`. When this is unset, they
    /// use the cluster's own `spec.identityRef`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<IdentityReference>,
    /// Job settings that machines and pools merge under their own `jobs`, field by field. The
    /// cluster's own `spec.jobs` is never inherited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<JobPolicy>,
    /// Drift settings for machines and pools that leave theirs unset. Machines take only the
    /// interval, and 0 turns their drift checks off; pools ignore an interval of 0 and also
    /// take the action.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftPolicy>,
    /// Remediation settings that machines merge under their own `remediation`, field by field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediation: Option<MachineRemediation>,
    /// Membership refresh interval, in seconds, for pools that set none: 15 to 86400; default
    /// 60.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 15, max = 86400))]
    pub membership_refresh_interval_seconds: Option<i32>,
    /// Deletion policy for machines and pools that set none, `Destroy` or `Retain`. When this
    /// is unset, they use the cluster's own `spec.deletionPolicy`, then `Destroy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,
}

/// A failure domain the cluster module reports, in Cluster API's format.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    /// Name of the failure domain, 1 to 256 characters.
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Whether control-plane machines may be placed in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// Free-form attributes the module reports for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributes: Option<BTreeMap<String, String>>,
}

/// Observed state of a TerraformCluster. It is rebuilt from the Terraform state and the Jobs,
/// so nothing in it is lost when the cluster is moved.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformClusterStatus {
    #[serde(flatten)]
    pub workspace: WorkspaceStatus,
    /// Current conditions of the cluster, at most 32. Cluster API copies `Ready` into the
    /// Cluster's `InfrastructureReady` condition.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])
    )]
    pub conditions: Option<Vec<Condition>>,
    /// Failure domains from the module's `failure_domains` output, at most 100 with unique
    /// names. Cluster API spreads control-plane machines over them.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 100),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub failure_domains: Option<Vec<FailureDomain>>,
    /// Copy of the module's `exports` output for other tools to read: any JSON, at most 65536
    /// bytes as compact JSON, otherwise it is cleared. Anyone who may read this object can read
    /// it, so modules must not export secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form")]
    pub exports: Option<serde_json::Value>,
    /// The cluster's TerraformPlan that is waiting for approval or for its apply to finish;
    /// absent when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_plan_ref: Option<PlanReference>,
}
