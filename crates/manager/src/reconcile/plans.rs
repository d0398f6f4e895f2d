//! TerraformPlan objects of a TerraformCluster: made when a guarded apply
//! stops before a destructive plan, approved by a person, and ended when
//! the approved apply runs, its plan changes, or the inputs move on.

use std::collections::BTreeMap;

use captf_api::TerraformCluster;
use captf_api::names::{events, kinds, labels};
use captf_api::plan::{
    PlanPhase, PlanReason, PlanSummary, PlanTargetKind, PlanTargetRef, TerraformPlan,
    TerraformPlanSpec, TerraformPlanStatus,
};
use captf_contract::result::PlanSummary as RunnerPlan;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::pass::event;
use super::status::time;
use super::{Context, Error};
use crate::names::sha256_hex;

/// The phase a plan is in: the label for terminal phases, else from
/// `spec.approved`.
pub fn phase(plan: &TerraformPlan) -> PlanPhase {
    let label = plan.labels().get(labels::PLAN_PHASE).map(String::as_str);
    match label {
        Some("Applied") => PlanPhase::Applied,
        Some("Superseded") => PlanPhase::Superseded,
        Some("Failed") => PlanPhase::Failed,
        _ if plan.spec.approved == Some(true) => PlanPhase::Approved,
        _ => PlanPhase::Pending,
    }
}

fn live(plan: &TerraformPlan) -> bool {
    matches!(phase(plan), PlanPhase::Pending | PlanPhase::Approved)
}

/// `<target>-<10 hex>` from the Job that made the plan and its hash.
pub fn plan_name(target: &str, job: &str, plan_hash: &str) -> String {
    let h = &sha256_hex(format!("{job}\0{plan_hash}").as_bytes())[..10];
    let target: String = target.chars().take(253 - 11).collect();
    format!("{target}-{h}")
}

/// The target's plans (controlled by it).
pub async fn list(ctx: &Context, obj: &TerraformCluster) -> Result<Vec<TerraformPlan>, Error> {
    let api: Api<TerraformPlan> =
        Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let uid = obj.uid().unwrap_or_default();
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| {
            p.owner_references()
                .iter()
                .any(|r| r.controller == Some(true) && r.uid == uid)
        })
        .collect())
}

/// The live plan, if any.
pub fn live_plan(plans: &[TerraformPlan]) -> Option<&TerraformPlan> {
    plans
        .iter()
        .filter(|p| live(p))
        .max_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0))
}

fn plan_conditions(phase: PlanPhase, approved: bool, now: std::time::SystemTime) -> Vec<Condition> {
    let (ready, ready_reason) = match phase {
        PlanPhase::Pending => ("True", "Pending"),
        PlanPhase::Approved => ("True", "Approved"),
        PlanPhase::Applied => ("True", "Applied"),
        PlanPhase::Superseded => ("False", "Superseded"),
        PlanPhase::Failed => ("False", "Failed"),
    };
    let (appr, appr_reason) = match (approved, phase) {
        (true, PlanPhase::Superseded) => ("False", "ApprovalIgnored"),
        (true, _) => ("True", "Approved"),
        (false, PlanPhase::Pending) => ("False", "Pending"),
        (false, _) => ("False", "NotApproved"),
    };
    let c = |t: &str, s: &str, r: &str| Condition {
        type_: t.to_owned(),
        status: s.to_owned(),
        reason: r.to_owned(),
        message: String::new(),
        last_transition_time: time(now),
        observed_generation: None,
    };
    vec![
        c("Ready", ready, ready_reason),
        c("Approved", appr, appr_reason),
    ]
}

/// Moves a plan to `to` (label and status).
pub async fn set_phase(ctx: &Context, plan: &TerraformPlan, to: PlanPhase) -> Result<(), Error> {
    let api: Api<TerraformPlan> =
        Api::namespaced(ctx.client.clone(), &plan.namespace().unwrap_or_default());
    let name = plan.name_any();
    let label = json!({"metadata": {"labels": {labels::PLAN_PHASE: to.as_str()}}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&label))
        .await?;
    let status = json!({"status": TerraformPlanStatus {
        conditions: Some(plan_conditions(to, plan.spec.approved == Some(true), std::time::SystemTime::now())),
        phase: Some(to),
        observed_generation: plan.metadata.generation,
    }});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    let kind = match plan.spec.target_ref.kind {
        captf_api::plan::PlanTargetKind::TerraformCluster => kinds::TERRAFORM_CLUSTER,
        captf_api::plan::PlanTargetKind::TerraformMachinePool => kinds::TERRAFORM_MACHINE_POOL,
    };
    let result = match to {
        PlanPhase::Pending => "created",
        PlanPhase::Approved => "approved",
        PlanPhase::Applied => "applied",
        PlanPhase::Superseded => "superseded",
        PlanPhase::Failed => "failed",
    };
    ctx.metrics.plan_transition(kind, result);
    Ok(())
}

/// Marks `plan` superseded and says why on `obj`; an approved plan's
/// approval is lost with it, so that event is a warning.
pub async fn supersede<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    plan: &TerraformPlan,
    why: &str,
) -> Result<(), Error> {
    set_phase(ctx, plan, PlanPhase::Superseded).await?;
    let approved = plan.spec.approved == Some(true);
    let note = format!(
        "TerraformPlan {} is superseded: {why}{}",
        plan.name_any(),
        if approved {
            "; its approval no longer applies"
        } else {
            ""
        }
    );
    event(ctx, obj, approved, events::PLAN_SUPERSEDED, "Plan", note).await;
    Ok(())
}

/// Whether a plan changes nothing at all (no resource, output, import,
/// move or forget): such a plan needs no approval.
pub fn is_empty(plan: &RunnerPlan) -> bool {
    let c = &plan.counts;
    [
        c.create,
        c.update,
        c.replace,
        c.delete,
        c.import,
        c.moves,
        c.forget,
        c.output_changes,
    ]
    .iter()
    .all(|n| *n == 0)
}

/// The TerraformPlan object of a reported plan, `Pending`, owned by the
/// TerraformCluster.
fn plan_object(
    obj: &TerraformCluster,
    cluster_name: &str,
    name: &str,
    inputs_hash: &str,
    plan: &RunnerPlan,
    reason: PlanReason,
) -> TerraformPlan {
    let ns = obj.namespace().unwrap_or_default();
    let counts = &plan.counts;
    let as_i32 = |n: u64| Some(i32::try_from(n).unwrap_or(i32::MAX));
    let mut tp = TerraformPlan::new(
        name,
        TerraformPlanSpec {
            target_ref: PlanTargetRef {
                kind: PlanTargetKind::TerraformCluster,
                name: obj.name_any(),
            },
            plan_hash: plan.hash.clone(),
            inputs_hash: inputs_hash.to_owned(),
            reason,
            summary: PlanSummary {
                create: as_i32(counts.create),
                update: as_i32(counts.update),
                replace: as_i32(counts.replace),
                delete: as_i32(counts.delete),
                import: as_i32(counts.import),
                move_: as_i32(counts.moves),
                forget: as_i32(counts.forget),
                output_changes: as_i32(counts.output_changes),
                resources: (!plan.resources.is_empty()).then(|| plan.resources.clone()),
                truncated: Some(plan.truncated),
            },
            approved: None,
            approved_by: None,
        },
    );
    tp.metadata.namespace = Some(ns);
    tp.metadata.labels = Some(BTreeMap::from([
        (labels::CLUSTER_NAME.to_owned(), cluster_name.to_owned()),
        (
            labels::DESTRUCTIVE.to_owned(),
            (counts.delete + counts.replace > 0).to_string(),
        ),
        (labels::PLAN_PHASE.to_owned(), "Pending".to_owned()),
        (
            labels::PLAN_REASON.to_owned(),
            match reason {
                PlanReason::Manual => "Manual",
                PlanReason::Destructive => "Destructive",
                PlanReason::ExportsChange => "ExportsChange",
            }
            .to_owned(),
        ),
    ]));
    tp.metadata.owner_references =
        Some(vec![obj.controller_owner_ref(&()).expect("stored object")]);
    tp
}

/// Creates the plan a Job reported (a blocked apply: `Destructive`; a plan
/// Job under `applyPolicy: Manual`: `Manual`), superseding the live one.
#[allow(clippy::too_many_arguments)]
pub async fn create(
    ctx: &Context,
    obj: &TerraformCluster,
    cluster_name: &str,
    job: &str,
    inputs_hash: &str,
    plan: &RunnerPlan,
    existing: &[TerraformPlan],
    reason: PlanReason,
) -> Result<String, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = plan_name(&obj.name_any(), job, &plan.hash);
    for old in existing.iter().filter(|p| live(p) && p.name_any() != name) {
        supersede(
            ctx,
            obj,
            old,
            &format!("TerraformPlan {name} is the current plan"),
        )
        .await?;
    }
    let tp = plan_object(obj, cluster_name, &name, inputs_hash, plan, reason);
    let api: Api<TerraformPlan> = Api::namespaced(ctx.client.clone(), &ns);
    match api.create(&PostParams::default(), &tp).await {
        Ok(created) => {
            set_phase(ctx, &created, PlanPhase::Pending).await?;
            event(
                ctx,
                obj,
                false,
                events::PLAN_READY,
                "Plan",
                format!(
                    "TerraformPlan {name} waits for approval (after review set spec.approved=true and spec.approvedBy=<your username> on it)"
                ),
            )
            .await;
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(name)
}
