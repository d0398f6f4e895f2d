//! TerraformPlan: a plan the manager made that waits for a person's approval.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The planned change and its approval. Every field except `approved` and `approvedBy` is fixed
/// when the plan is created.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformPlan",
    derive = "PartialEq",
    doc = "TerraformPlan is a change CAPTF planned for a TerraformCluster that waits for a \
        person's approval before it is applied. Approve it by setting `spec.approved: true` \
        and `spec.approvedBy` to your own username; it shows counts and resource addresses, \
        never values.",
    plural = "terraformplans",
    shortname = "tfplan",
    category = "cluster-api",
    namespaced,
    status = "TerraformPlanStatus",
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    printcolumn(name = "Target", type_ = "string", json_path = ".spec.targetRef.name"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".spec.reason"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Create", type_ = "integer", json_path = ".spec.summary.create"),
    printcolumn(name = "Update", type_ = "integer", json_path = ".spec.summary.update"),
    printcolumn(
        name = "Replace",
        type_ = "integer",
        json_path = ".spec.summary.replace"
    ),
    printcolumn(name = "Delete", type_ = "integer", json_path = ".spec.summary.delete"),
    printcolumn(name = "Approved", type_ = "boolean", json_path = ".spec.approved"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "(has(self.approved) && self.approved) == has(self.approvedBy)",
    "message": "approvedBy must be set exactly when approved is true"
}]))]
pub struct TerraformPlanSpec {
    /// The object the plan was made for, in the plan's namespace.
    pub target_ref: PlanTargetRef,
    /// Fingerprint of the planned changes, such as `p2:<hex>`. The approved apply plans again
    /// and goes ahead only if it gets the same fingerprint.
    #[schemars(length(min = 1, max = 128))]
    pub plan_hash: String,
    /// Hash of the inputs the plan was made from, such as `h2:<hex>`.
    #[schemars(length(min = 1, max = 128))]
    pub inputs_hash: String,
    /// Why the plan needs approval: `Manual` (the cluster's `applyPolicy` is `Manual`),
    /// `Destructive` (the plan deletes or replaces resources) or `ExportsChange` (a pool change
    /// of the cluster's exports; only made by earlier CAPTF versions).
    pub reason: PlanReason,
    /// What the plan changes, as counts and resource addresses.
    pub summary: PlanSummary,
    /// Set to true, together with `approvedBy`, to approve the plan. An approval can be neither
    /// withdrawn nor changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    /// Username of whoever approved the plan, 1 to 512 characters. Required exactly when
    /// `approved` is true, and it must be the username of the request that approves.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub approved_by: Option<String>,
}

/// The object a TerraformPlan was made for.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct PlanTargetRef {
    /// Kind of the object: `TerraformCluster` or `TerraformMachinePool`.
    pub kind: PlanTargetKind,
    /// Name of the object, in the plan's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Kinds a TerraformPlan can be made for: `TerraformCluster` or `TerraformMachinePool`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PlanTargetKind {
    TerraformCluster,
    TerraformMachinePool,
}

/// Why a plan needs approval: `Manual`, `Destructive` or `ExportsChange`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PlanReason {
    Manual,
    Destructive,
    ExportsChange,
}

/// Where a plan is in its life: `Pending` or `Approved` while live, then `Applied`,
/// `Superseded` or `Failed`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PlanPhase {
    Pending,
    Approved,
    Applied,
    Superseded,
    Failed,
}

impl PlanPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanPhase::Pending => "Pending",
            PlanPhase::Approved => "Approved",
            PlanPhase::Applied => "Applied",
            PlanPhase::Superseded => "Superseded",
            PlanPhase::Failed => "Failed",
        }
    }

    /// Pending and Approved plans are live; the others are finished.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            PlanPhase::Applied | PlanPhase::Superseded | PlanPhase::Failed
        )
    }

    pub fn parse(s: &str) -> Option<PlanPhase> {
        [
            PlanPhase::Pending,
            PlanPhase::Approved,
            PlanPhase::Applied,
            PlanPhase::Superseded,
            PlanPhase::Failed,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

/// Counts and addresses of what the plan changes; never values.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct PlanSummary {
    /// Resources the plan creates.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub create: Option<i32>,
    /// Resources the plan updates in place.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub update: Option<i32>,
    /// Resources the plan replaces; a replacement is counted only here.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replace: Option<i32>,
    /// Resources the plan deletes, not counting replacements.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub delete: Option<i32>,
    /// Resources the plan imports into the state.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub import: Option<i32>,
    /// Resources the plan moves to a new address with a `moved` block.
    #[serde(rename = "move", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub move_: Option<i32>,
    /// Resources the plan removes from the state without destroying them.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub forget: Option<i32>,
    /// Root module outputs whose value changes; a change of outputs alone still needs approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub output_changes: Option<i32>,
    /// Changed resources as `<address> (<actions>)`, sorted by address, at most 50; for example
    /// `aws_instance.b (update, move)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 50),
        inner(length(min = 1, max = 600)),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub resources: Option<Vec<String>>,
    /// True when `resources` lists fewer resources than the plan changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

/// Observed state of a TerraformPlan.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformPlanStatus {
    /// Current conditions, at most 32: `Ready` and `Approved`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])
    )]
    pub conditions: Option<Vec<Condition>>,
    /// `Pending` (waiting for approval), `Approved` (approved, apply not finished), `Applied`,
    /// `Superseded` (replaced by a newer plan or no longer needed) or `Failed` (the approved
    /// apply planned different changes). It is also kept in the label `captf.io/plan-phase`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<PlanPhase>,
    /// The `metadata.generation` this status was computed for.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
}
