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

/// Free-form module variables: a JSON object, kept unpruned by the apiserver
/// but not verbatim (it serves numbers as Go writes an int64 or a float64).
/// `JsonText::from_served_value` gives back the exact text it serves for a
/// value; the spec's flattened fields are buffered by serde, so a raw value
/// could not be kept here.
pub type Variables = serde_json::Map<String, serde_json::Value>;

/// The OCI image that bundles the module with the Terraform or OpenTofu binary it runs with.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// Image reference of the module, `registry/repository:tag` or
    /// `registry/repository@sha256:<digest>`; the tag or digest is the module version. It must
    /// parse as an image reference (1 to 512 characters); neither the registry nor the image
    /// content is checked at admission. The module runs with this object's credentials, so
    /// reference only images you trust.
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// When the node pulls the image: `IfNotPresent`, `Always` or `Never`. When unset,
    /// Kubernetes' own default applies: `Always` for a `:latest` tag or a reference with
    /// neither tag nor digest, `IfNotPresent` otherwise. Pull secrets come from
    /// `jobs.imagePullSecrets`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<PullPolicy>,
}

/// When the node pulls the module image: `IfNotPresent`, `Always` or `Never`.
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

/// Names the credentials an object's Jobs use: a TerraformClusterIdentity, or a Secret in the
/// object's own namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdentityReference {
    /// What `name` refers to: `TerraformClusterIdentity` (the default when unset) or `Secret`.
    /// A `Secret` in the object's own namespace is used as it is: no copy is made and neither
    /// `allowedNamespaces` nor `requiredKeys` applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<IdentityKind>,
    /// Name of the TerraformClusterIdentity, or of the Secret when `kind` is `Secret`; 1 to 253
    /// characters. Whether it exists is checked when the object is reconciled, not at
    /// admission.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// What an `identityRef` names: `TerraformClusterIdentity` or `Secret`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum IdentityKind {
    TerraformClusterIdentity,
    Secret,
}

/// Settings of the Kubernetes Jobs that run the module. Every field is optional; an unset field
/// takes the inherited or built-in value named in its description.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobPolicy {
    /// How many succeeded Jobs to keep per object and operation, 0 to 100; default 3. The
    /// newest succeeded Job of each operation is always kept, even at 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub successful_jobs_history_limit: Option<i32>,
    /// How many failed Jobs to keep per object and operation, 0 to 100; default 3. Even at 0,
    /// the newest failed Job of an operation is kept until a newer Job of that operation
    /// succeeds, since retry backoff counts it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub failed_jobs_history_limit: Option<i32>,
    /// Longest time a Job may run, in seconds, 1 to 86400; default 3600. A Job that reaches it
    /// is stopped and counts as a failed attempt. It must be greater than `lockTimeoutSeconds`
    /// (300 when that is unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub active_deadline_seconds: Option<i64>,
    /// How long a Job waits for the Terraform state lock, in seconds, 0 to 3600; default 300.
    /// It must be less than `activeDeadlineSeconds` (3600 when that is unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 3600))]
    pub lock_timeout_seconds: Option<i32>,
    /// ServiceAccount the Job pods run as, 1 to 253 characters. When unset, CAPTF creates a
    /// `captf-runner` ServiceAccount in the namespace, bound to the `captf-runner` ClusterRole,
    /// and uses it; a named account must already exist and have the permissions the runner
    /// needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub service_account_name: Option<String>,
    /// Secrets in the object's namespace used to pull the module image and the runner image, 1
    /// to 10 entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10), extend("x-kubernetes-list-type" = "atomic"))]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    /// Compute resources of the container that runs the module; when set, they replace the
    /// built-in values as a whole. When unset: requests `cpu: 250m` and `memory: 2Gi`, a
    /// `memory: 2Gi` limit and no CPU limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Extra environment variables for the container that runs the module, 1 to 64 entries with
    /// unique names. `HOME`, `TMPDIR`, `CHECKPOINT_DISABLE` and names starting with `TF_`,
    /// `KUBE_` or `KUBERNETES_` are refused, because the runner sets them.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 64),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub env: Option<Vec<EnvVar>>,
    /// Security settings of the container that runs the module, laid field by field over
    /// hardened defaults: no privilege escalation, a read-only root filesystem and every
    /// capability dropped. Settings that weaken it are refused, such as `privileged`, added
    /// capabilities, a writable root filesystem, UID 0, `runAsNonRoot: false` or an
    /// `Unconfined` seccomp or AppArmor profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    /// Security settings of the Job's pod, laid field by field over the defaults: the
    /// `RuntimeDefault` seccomp profile, `fsGroup: 65532`, `runAsUser: 65532` and `runAsGroup: 65532`. UID 0, `runAsNonRoot: false`,
    /// `Unconfined` profiles, Windows host processes and sysctls outside the Pod Security
    /// Standards baseline safe set are refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<PodSecurityContext>,
}

/// A ConfigMap or Secret in the object's namespace whose data keys become module variables of
/// the same names. Set exactly one of `configMapRef` and `secretRef`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.configMapRef) != has(self.secretRef)",
    "message": "set exactly one of configMapRef and secretRef"
}]))]
pub struct VariablesSource {
    /// ConfigMap to read variables from. It must carry the label `captf.io/variables=true`;
    /// without it the ConfigMap counts as missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<LocalNameReference>,
    /// Secret to read variables from. It must carry the label `captf.io/variables=true`;
    /// without it the Secret counts as missing. Its variables are marked sensitive, so plan and
    /// apply output redacts their values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalNameReference>,
    /// When true, a missing source contributes nothing. When false or unset, the object waits
    /// with `DependenciesReady=False` and reason `VariablesSourceNotFound` until the source
    /// exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// How data values are read: `String` (the default) passes each value as a string for the
    /// module to convert; `JSON` parses each value as JSON, so lists and maps can be passed. A
    /// value that is not valid JSON stops the object with reason `VariablesInvalid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<VariablesFormat>,
}

/// Names an object in the referring object's own namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct LocalNameReference {
    /// Name of the object, a DNS subdomain of 1 to 253 characters.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    pub name: String,
}

/// How the data values of a variables source are read: `String` or `JSON`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum VariablesFormat {
    String,
    #[serde(rename = "JSON")]
    Json,
}

/// What deleting an object does to its infrastructure: `Destroy` or `Retain`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    Destroy,
    Retain,
}

/// What a drift check does with the drift it finds: `Report` or `Remediate`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DriftAction {
    Report,
    Remediate,
}

/// Whether a cluster applies changes at once (`Automatic`) or only after a plan is approved
/// (`Manual`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ApplyPolicy {
    Automatic,
    Manual,
}

/// How often drift checks run and what they do with the drift they find.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftPolicy {
    /// Seconds between drift checks, 0 or more; 0 turns them off. When unset, the manager's
    /// `--drift-default-interval` applies (30 minutes unless changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub interval_seconds: Option<i32>,
    /// `Report` (the default) only records drift in the `DriftDetected` condition; `Remediate`
    /// applies the current inputs again to undo it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<DriftAction>,
}

/// Drift checks of a machine. Drift found on a machine is always reported, never remediated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDriftPolicy {
    /// Seconds between drift checks, 0 or more; 0 turns them off. When unset, the
    /// TerraformCluster's `spec.defaults.drift.intervalSeconds` applies, then the manager's
    /// `--drift-default-interval` (30 minutes unless changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub interval_seconds: Option<i32>,
}

/// Drift checks of a pool. They cannot be turned off, because they also read the group's
/// current size.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolDriftPolicy {
    /// Seconds between drift checks, 1 or more. When unset, the TerraformCluster's
    /// `spec.defaults.drift.intervalSeconds` applies if it is above 0, then the manager's
    /// `--drift-default-interval` (30 minutes unless changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub interval_seconds: Option<i32>,
    /// `Report` only records drift in the `DriftDetected` condition; `Remediate` applies the
    /// current inputs again to undo it. When unset, the TerraformCluster's
    /// `spec.defaults.drift.action` applies, then its `spec.drift.action`, then `Report`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<DriftAction>,
}

/// How a machine asks Cluster API to replace it when its instance is unhealthy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineRemediation {
    /// When true, CAPTF sets `cluster.x-k8s.io/remediate-machine` on the owning Machine after
    /// `unhealthyThreshold` unhealthy health checks in a row, or at once when the instance is
    /// terminated; a MachineHealthCheck must cover the Machine for Cluster API to act on it.
    /// Default false; a machine's own `false` overrides an inherited `true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotate_machine: Option<bool>,
    /// Unhealthy health checks in a row before remediation is requested, 1 to 100; default 3.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub unhealthy_threshold: Option<i32>,
    /// Seconds between health checks while `annotateMachine` is true, 60 to 86400; default 300.
    /// Ignored while `annotateMachine` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 86400))]
    pub health_check_interval_seconds: Option<i32>,
}

/// Spec fields shared by TerraformCluster, TerraformMachine and TerraformMachinePool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSpec {
    /// The module image to run. Immutable on a TerraformMachine; on a cluster or pool, a new
    /// image is applied over the existing infrastructure.
    pub source: Source,
    /// Credentials the Jobs use. Required on a TerraformCluster; a machine or pool that leaves
    /// it unset uses its TerraformCluster's `spec.defaults.identityRef`, then the cluster's own
    /// `spec.identityRef`. Immutable on a TerraformMachine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<IdentityReference>,
    /// Settings of the Jobs that run the module. A machine or pool merges them over its
    /// TerraformCluster's `spec.defaults.jobs` and then the built-in values: field by field,
    /// `env` by name and `imagePullSecrets` as a union; a cluster uses only its own settings
    /// and the built-ins.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<JobPolicy>,
    /// Module variables as a JSON object of 1 to 256 keys; they win over every `variablesFrom`
    /// source. A key must be a letter or underscore followed by letters, digits, underscores or
    /// hyphens, must not start with `captf_`, and must not be an input the controller sets for
    /// the module's role or a module meta-argument such as `count`. Immutable on a
    /// TerraformMachine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::variables")]
    pub variables: Option<Variables>,
    /// ConfigMaps and Secrets in the object's namespace whose keys become module variables, 1
    /// to 16 entries, read in list order so that a later source wins on the same key. Immutable
    /// on a TerraformMachine, which keeps the values of its first apply once provisioned.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16), extend("x-kubernetes-list-type" = "atomic"))]
    pub variables_from: Option<Vec<VariablesSource>>,
    /// What deleting the object does: `Destroy` runs the module's destroy and then removes its
    /// state; `Retain` leaves the infrastructure running and keeps its state for a later object
    /// of the same kind, namespace and name to adopt. When unset, a cluster uses `Destroy`, and
    /// a machine or pool uses its TerraformCluster's `spec.defaults.deletionPolicy`, then the
    /// cluster's `spec.deletionPolicy`, then `Destroy` (a deleting machine whose cluster cannot
    /// be found waits until one is set). It may be changed at any time; setting `Retain` on an
    /// object being deleted releases it even when destroy cannot run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,
    /// Set to true to take over the state that an earlier object of the same kind, namespace
    /// and name kept with `deletionPolicy: Retain`; until then the object waits with reason
    /// `RetainedStateFound`. Default false; never inherited from the cluster.
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

/// The kind of work a Job does: `apply`, `destroy`, `drift`, `refresh`, `restore` or `plan`.
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

/// Why a run failed: `image-layout`, `step`, `interrupted`, `blocked` or `plan-changed`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RunErrorKind {
    ImageLayout,
    Step,
    Interrupted,
    Blocked,
    PlanChanged,
}

/// Health the module reports for an instance: `pending`, `running`, `degraded`, `stopped`,
/// `terminated` or `unknown`.
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

/// Kind of a machine address: `Hostname`, `ExternalIP`, `InternalIP`, `ExternalDNS` or
/// `InternalDNS`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MachineAddressType {
    Hostname,
    ExternalIP,
    InternalIP,
    ExternalDNS,
    InternalDNS,
}

/// An address of an instance, in Cluster API's format.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct MachineAddress {
    /// Kind of address: `Hostname`, `ExternalIP`, `InternalIP`, `ExternalDNS` or `InternalDNS`.
    #[serde(rename = "type")]
    pub type_: MachineAddressType,
    /// The address itself, 1 to 256 characters.
    #[schemars(length(min = 1, max = 256))]
    pub address: String,
}

/// Provisioning status in the form Cluster API's v1beta2 contract reads.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct Initialization {
    /// True once the infrastructure is provisioned: an apply succeeded, the module's outputs
    /// are valid and its health reading is no longer pending. Once true, it stays true for the
    /// life of the object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// The Job running now.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveJob {
    /// Name of the Job, in the object's namespace.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// What the Job does: `apply`, `destroy`, `drift`, `refresh`, `restore` or `plan`.
    pub operation: Operation,
    /// Sequence number of this Job among the object's Jobs of the same operation, as in the
    /// `a<N>` part of its name; 1 or more.
    #[schemars(range(min = 1))]
    pub attempt: i32,
    /// When the Job started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
}

/// One Terraform or OpenTofu command a Job ran.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStep {
    /// Name of the step, such as `init`, `validate`, `plan`, `apply` or `apply-refresh-only`.
    #[schemars(length(min = 1, max = 64))]
    pub name: String,
    /// Exit code of the command; 0 means it succeeded.
    pub exit_code: i32,
    /// How long the command ran, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub duration_milliseconds: Option<i64>,
}

/// Why a Job failed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunError {
    /// Class of failure: `image-layout` (the image lacks the expected module layout), `step` (a
    /// command failed), `interrupted` (the run was stopped, for example at its deadline),
    /// `blocked` (the plan needs an approval first) or `plan-changed` (an approved apply
    /// planned different changes).
    pub kind: RunErrorKind,
    /// Name of the step that failed, when `kind` is `step`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub step: Option<String>,
    /// Short explanation written by the runner, 1 to 512 characters; never the command's raw
    /// output.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub summary: Option<String>,
    /// For a failed apply or destroy, the resources it failed on as `<address>: <summary>`, at
    /// most 10, with secrets redacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 10),
        inner(length(min = 1, max = 512)),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub resources: Option<Vec<String>>,
}

/// What a drift check found, as counts and resource addresses; never values.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct DriftSummary {
    /// Resources that would be created to undo the drift.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub create: Option<i32>,
    /// Resources that would be updated in place to undo the drift.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub update: Option<i32>,
    /// Resources that would be replaced to undo the drift; a replacement is counted only here.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replace: Option<i32>,
    /// Resources that would be deleted to undo the drift, not counting replacements.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub delete: Option<i32>,
    /// Addresses of the drifted resources, at most 20.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 20),
        inner(length(min = 1, max = 512)),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub resources: Option<Vec<String>>,
}

/// Outcome of the newest finished Job, as its runner reported it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastRun {
    /// Name of the Job.
    #[schemars(length(min = 1, max = 63))]
    pub job: String,
    /// What the Job did: `apply`, `destroy`, `drift`, `refresh`, `restore` or `plan`.
    pub operation: Operation,
    /// The commands the Job ran, in order, at most 16.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16), extend("x-kubernetes-list-type" = "atomic"))]
    pub steps: Option<Vec<RunStep>>,
    /// Why the Job failed; absent when it succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
    /// What a drift check found; present only when it found drift.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftSummary>,
}

/// A saved copy of the object's Terraform state.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateBackup {
    /// Serial of the saved state. Set the annotation `captf.io/restore-state` to this value to
    /// restore this backup.
    #[schemars(range(min = 1))]
    pub serial: i64,
    /// When the backup was taken.
    pub taken_at: Time,
    /// Compressed size of the backup, in bytes.
    #[schemars(range(min = 1))]
    pub bytes: i64,
}

/// What the most recent Job actually ran.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct SourceStatus {
    /// Image reference as the spec gave it when the Job ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
    /// Digest of the image the container runtime ran; for information only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image_digest: Option<String>,
    /// Version of the Terraform or OpenTofu binary in the image.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub runtime_version: Option<String>,
}

/// Names a TerraformPlan in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct PlanReference {
    /// Name of the TerraformPlan, 1 to 253 characters.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Status fields shared by TerraformCluster, TerraformMachine and TerraformMachinePool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceStatus {
    /// Provisioning status that Cluster API reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    /// The `metadata.generation` this status was computed for.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    /// The Job running now; absent when none is running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_job: Option<ActiveJob>,
    /// Outcome of the newest finished Job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run: Option<LastRun>,
    /// When the last drift check finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_drift_check: Option<Time>,
    /// When the last refresh or drift check finished, or the last apply whose own health
    /// reading stood in for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_refresh: Option<Time>,
    /// Health readings in a row that said the infrastructure is still pending; absent
    /// otherwise. Refreshes run more often while it is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub pending_refreshes: Option<i32>,
    /// Serial of the Terraform state the outputs in this status were read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_state_serial: Option<i64>,
    /// Backup serial of the last restore that ran, whether it succeeded or failed, so that the
    /// same `captf.io/restore-state` request does not run twice.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub last_restored_serial: Option<i64>,
    /// Suffix of the Secrets that hold this object's Terraform state
    /// (`tfstate-default-<suffix>`), derived from its namespace, kind and name; for information
    /// only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub state_secret_suffix: Option<String>,
    /// State backups kept for this object, newest first, at most 16. The manager's
    /// `--state-backups` flag sets how many are kept (5 unless changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16), extend("x-kubernetes-list-type" = "atomic"))]
    pub state_backups: Option<Vec<StateBackup>>,
    /// What the most recent Job ran; absent until a Job has run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceStatus>,
}

/// Labels and annotations a template copies onto each object created from it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct TemplateMeta {
    /// Labels to put on each created object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations to put on each created object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}
