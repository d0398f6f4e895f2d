//! TerraformPlan: a plan the manager made that waits for a person's approval.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "TerraformPlan",
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
    pub target_ref: PlanTargetRef,
    #[schemars(length(min = 1, max = 128))]
    pub plan_hash: String,
    #[schemars(length(min = 1, max = 128))]
    pub inputs_hash: String,
    pub reason: PlanReason,
    pub summary: PlanSummary,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub approved_by: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct PlanTargetRef {
    pub kind: PlanTargetKind,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PlanTargetKind {
    TerraformCluster,
    TerraformMachinePool,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PlanReason {
    Manual,
    Destructive,
    ExportsChange,
}

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
    #[schemars(range(min = 0))]
    pub import: Option<i32>,
    #[serde(rename = "move", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub move_: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub forget: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub output_changes: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 50),
        inner(length(min = 1, max = 600)),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub resources: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TerraformPlanStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 32),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])
    )]
    pub conditions: Option<Vec<Condition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<PlanPhase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
}
