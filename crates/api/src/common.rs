//! Types shared by several kinds: the module source, identity reference,
//! Job policy, variables sources, drift and remediation policies, the
//! workspace spec and status embedded by the three module kinds, and the
//! enumerations they use.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EnvVar, LocalObjectReference, PodSecurityContext, ResourceRequirements, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema;

/// DNS subdomain (RFC 1123), as Kubernetes object names use.
pub const DNS_SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// DNS label (RFC 1123), as namespace names use.
pub const DNS_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// Free-form module variables: a JSON object kept verbatim by the apiserver.
pub type Variables = serde_json::Map<String, serde_json::Value>;

/// The OCI image bundling the role module and its runtime.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<PullPolicy>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PullPolicy {
    IfNotPresent,
    Always,
    Never,
}

impl PullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Always => "Always",
            PullPolicy::Never => "Never",
        }
    }
}

/// Which credentials an object's Jobs use.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdentityReference {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<IdentityKind>,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum IdentityKind {
    TerraformClusterIdentity,
    Secret,
}

/// Tuning of the Kubernetes Jobs that run the module.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobPolicy {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub successful_jobs_history_limit: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub failed_jobs_history_limit: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub active_deadline_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 3600))]
    pub lock_timeout_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub service_account_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10), extend("x-kubernetes-list-type" = "atomic"))]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 64),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub env: Option<Vec<EnvVar>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<PodSecurityContext>,
}

/// A ConfigMap or Secret in the object's namespace that supplies variables.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.configMapRef) != has(self.secretRef)",
    "message": "set exactly one of configMapRef and secretRef"
}]))]
pub struct VariablesSource {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<LocalNameReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalNameReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<VariablesFormat>,
}

/// Name of an object in the referring object's own namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct LocalNameReference {
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum VariablesFormat {
    String,
    #[serde(rename = "JSON")]
    Json,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    Destroy,
    Retain,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DriftAction {
    Report,
    Remediate,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ApplyPolicy {
    Automatic,
    Manual,
}

/// Drift policy of a cluster, and the defaults it hands to its children.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftPolicy {
    /// 0 turns drift checks off.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub interval_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<DriftAction>,
}

/// Drift policy of a machine: always reported, never remediated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDriftPolicy {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub interval_seconds: Option<i32>,
}

/// Drift policy of a pool: it cannot be turned off, so the interval is at
/// least 1.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolDriftPolicy {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub interval_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<DriftAction>,
}

/// How a machine asks Cluster API to remediate it when unhealthy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineRemediation {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotate_machine: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub unhealthy_threshold: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 86400))]
    pub health_check_interval_seconds: Option<i32>,
}

/// The spec fields every module kind shares, flattened into its `spec`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSpec {
    pub source: Source,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<IdentityReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<JobPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::variables")]
    pub variables: Option<Variables>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16), extend("x-kubernetes-list-type" = "atomic"))]
    pub variables_from: Option<Vec<VariablesSource>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adopt_retained_state: Option<bool>,
}

impl WorkspaceSpec {
    /// A spec with only an image set.
    pub fn from_image(image: impl Into<String>) -> WorkspaceSpec {
        WorkspaceSpec {
            source: Source {
                image: image.into(),
                image_pull_policy: None,
            },
            identity_ref: None,
            jobs: None,
            variables: None,
            variables_from: None,
            deletion_policy: None,
            adopt_retained_state: None,
        }
    }
}

/// Operations a run Job performs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Apply,
    Destroy,
    Drift,
    Refresh,
    Restore,
    Plan,
}

impl Operation {
    pub const ALL: [Operation; 6] = [
        Operation::Apply,
        Operation::Destroy,
        Operation::Drift,
        Operation::Refresh,
        Operation::Restore,
        Operation::Plan,
    ];

    /// The name the runner's `--op` flag, Job labels and names use.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "apply",
            Operation::Destroy => "destroy",
            Operation::Drift => "drift",
            Operation::Refresh => "refresh",
            Operation::Restore => "restore",
            Operation::Plan => "plan",
        }
    }
}

/// Failure classes a runner reports.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RunErrorKind {
    ImageLayout,
    Step,
    Interrupted,
    Blocked,
    PlanChanged,
}

/// Health states a module reports for an instance.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthState {
    Pending,
    Running,
    Degraded,
    Stopped,
    Terminated,
    Unknown,
}

/// Cluster API machine address types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MachineAddressType {
    Hostname,
    ExternalIP,
    InternalIP,
    ExternalDNS,
    InternalDNS,
}

/// A Cluster API machine address.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct MachineAddress {
    #[serde(rename = "type")]
    pub type_: MachineAddressType,
    #[schemars(length(min = 1, max = 256))]
    pub address: String,
}

/// Cluster API v1beta2 initialization contract.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct Initialization {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// The Job running now.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveJob {
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    pub operation: Operation,
    #[schemars(range(min = 1))]
    pub attempt: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
}

/// One runtime command a run executed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStep {
    #[schemars(length(min = 1, max = 64))]
    pub name: String,
    pub exit_code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub duration_milliseconds: Option<i64>,
}

/// Why a run failed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunError {
    pub kind: RunErrorKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub step: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 10),
        inner(length(min = 1, max = 512)),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub resources: Option<Vec<String>>,
}

/// Counts and addresses of the changes a drift run found.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct DriftSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub create: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub update: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replace: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub delete: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 20),
        inner(length(min = 1, max = 512)),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub resources: Option<Vec<String>>,
}

/// Result of the newest completed Job.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastRun {
    #[schemars(length(min = 1, max = 63))]
    pub job: String,
    pub operation: Operation,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16), extend("x-kubernetes-list-type" = "atomic"))]
    pub steps: Option<Vec<RunStep>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftSummary>,
}

/// One kept state backup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateBackup {
    #[schemars(range(min = 1))]
    pub serial: i64,
    pub taken_at: Time,
    #[schemars(range(min = 1))]
    pub bytes: i64,
}

/// What the last Job actually ran.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct SourceStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image_digest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub runtime_version: Option<String>,
}

/// The live TerraformPlan of a target.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct PlanReference {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The status fields every module kind shares, flattened into its `status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_job: Option<ActiveJob>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run: Option<LastRun>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_drift_check: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_refresh: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub pending_refreshes: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_state_serial: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub last_restored_serial: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub state_secret_suffix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16), extend("x-kubernetes-list-type" = "atomic"))]
    pub state_backups: Option<Vec<StateBackup>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceStatus>,
}

/// Labels and annotations a template copies onto the object it creates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct TemplateMeta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}
