//! The TerraformPlan flow of a cluster pass: the plans its bookkeeping
//! reports (a blocked apply's, a Manual plan Job's) and ends (an approved
//! apply), the gate the plans put on the next apply, and what the status
//! says while a plan waits for its approval.

use captf_api::TerraformCluster;
use captf_api::common::ApplyPolicy;
use captf_api::names::{annotations, conditions, events, reasons};
use captf_api::plan::{PlanReason, TerraformPlan};
use kube::ResourceExt;

use super::super::open_pass::OpenPass;
use super::super::pass;
use super::super::plans;
use super::super::rendered::Rendered;
use super::super::status::Draft;
use super::super::{Context, Error};
use crate::engine::decide::{ApplyGate, Approval, Decision, ManualPlan, Op, Reason};
use crate::engine::history::Outcome;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};

/// The Manual plan of the current inputs: the live `Manual` TerraformPlan,
/// else an empty plan the newest plan Job of these inputs found (applied
/// without approval), else none (a plan Job is due).
pub(super) fn manual_plan(
    pass: &OpenPass,
    plans_list: &[TerraformPlan],
    current_hash: &str,
) -> Option<ManualPlan> {
    if let Some(p) = plans::live_plan(plans_list)
        .filter(|p| p.spec.reason == PlanReason::Manual && p.spec.inputs_hash == current_hash)
    {
        return Some(ManualPlan {
            plan_hash: p.spec.plan_hash.clone(),
            empty: false,
            approved: p.spec.approved == Some(true),
        });
    }
    let newest = pass
        .loaded
        .observed
        .iter()
        .filter(|o| o.record.op == Op::Plan)
        .filter(|o| {
            pass.loaded
                .annotation(&o.record.name, annotations::INPUTS_HASH)
                == Some(current_hash)
        })
        .max_by_key(|o| o.record.created)?;
    let hash = newest
        .result
        .as_ref()
        .and_then(|r| r.plan.as_ref())
        .filter(|p| plans::is_empty(p))
        .map(|p| p.hash.clone())?;
    (newest.record.outcome == Outcome::Succeeded).then_some(ManualPlan {
        plan_hash: hash,
        empty: true,
        approved: false,
    })
}

/// TerraformPlans from this pass's bookkeeping: a blocked apply's plan
/// (`Destructive`), a plan Job's under `applyPolicy: Manual` (an empty plan
/// needs no approval and makes none), and the end of an approved plan's
/// apply. The object's plans, read once (again only after a change).
pub(super) async fn bookkeep_plans(
    ctx: &Context,
    obj: &TerraformCluster,
    pass: &OpenPass,
    cluster_name: &str,
) -> Result<Vec<TerraformPlan>, Error> {
    let plans_list = plans::list(ctx, obj).await?;
    let mut plans_list = create_reported_plans(ctx, obj, pass, cluster_name, plans_list).await?;
    if end_approved_plans(ctx, obj, pass, &plans_list).await? {
        // Read again only after a change.
        plans_list = plans::list(ctx, obj).await?;
    }
    Ok(plans_list)
}

/// Plans reported in this pass's bookkeeping: a blocked apply's
/// (`Destructive`), or a plan Job's under `applyPolicy: Manual` (an empty
/// plan needs no approval and makes none). Returns the plans as they are
/// after.
async fn create_reported_plans(
    ctx: &Context,
    obj: &TerraformCluster,
    pass: &OpenPass,
    cluster_name: &str,
    mut plans_list: Vec<TerraformPlan>,
) -> Result<Vec<TerraformPlan>, Error> {
    for o in &pass.booked.newly {
        let reason = match (o.record.op, o.record.outcome) {
            (_, Outcome::Blocked) => PlanReason::Destructive,
            (Op::Plan, Outcome::Succeeded) => PlanReason::Manual,
            _ => continue,
        };
        let Some(plan) = o
            .result
            .as_ref()
            .and_then(|r| r.plan.as_ref())
            .filter(|p| reason == PlanReason::Destructive || !plans::is_empty(p))
        else {
            continue;
        };
        let hash = pass
            .loaded
            .annotation(&o.record.name, annotations::INPUTS_HASH)
            .unwrap_or_default()
            .to_owned();
        plans::create(
            ctx,
            obj,
            cluster_name,
            &o.record.name,
            &hash,
            plan,
            &plans_list,
            reason,
        )
        .await?;
        plans_list = plans::list(ctx, obj).await?;
    }
    Ok(plans_list)
}

/// An approved plan's apply ends it: `Applied` on success, `Failed` when
/// the plan changed under it. Returns whether a plan changed.
async fn end_approved_plans(
    ctx: &Context,
    obj: &TerraformCluster,
    pass: &OpenPass,
    plans_list: &[TerraformPlan],
) -> Result<bool, Error> {
    use captf_api::plan::PlanPhase;
    let mut changed_plans = false;
    for o in &pass.booked.newly {
        let Some(plan_name) = pass
            .loaded
            .annotation(&o.record.name, annotations::APPROVED_PLAN)
        else {
            continue;
        };
        let Some(p) = plans_list.iter().find(|p| p.name_any() == plan_name) else {
            continue;
        };
        let to = match o.record.outcome {
            Outcome::Succeeded => PlanPhase::Applied,
            Outcome::PlanChanged => PlanPhase::Failed,
            _ => continue,
        };
        plans::set_phase(ctx, p, to).await?;
        changed_plans = true;
        let reason = if to == PlanPhase::Applied {
            events::PLAN_APPLIED
        } else {
            events::PLAN_CHANGED
        };
        let note = format!("TerraformPlan {plan_name}: {}", to.as_str());
        pass::event(ctx, obj, to != PlanPhase::Applied, reason, "Plan", note).await;
    }
    Ok(changed_plans)
}

/// The apply gate from the TerraformPlans, and the plans this pass
/// supersedes: a live plan of other inputs is moot, and so is a waiting
/// Manual plan once the policy is back to Automatic. The superseded plans
/// are marked in `plans_list` at once (the writes follow in the pass's
/// effects), so the gate reads the list as it will be.
pub(super) fn plan_gate(
    pass: &OpenPass,
    plans_list: &mut [TerraformPlan],
    current: Option<&Rendered>,
    policy: ApplyPolicy,
) -> (ApplyGate, Vec<TerraformPlan>) {
    let mut superseded = Vec::new();
    let Some(cur) = current else {
        return (ApplyGate::Open, superseded);
    };
    if !pass.deleting() {
        for p in plans_list.iter_mut() {
            let live = plans::live_plan(std::slice::from_ref(p)).is_some();
            let moot = p.spec.inputs_hash != cur.hash
                || (policy == ApplyPolicy::Automatic && p.spec.reason == PlanReason::Manual);
            if live && moot {
                superseded.push(p.clone());
                p.labels_mut().insert(
                    captf_api::names::labels::PLAN_PHASE.to_owned(),
                    captf_api::plan::PlanPhase::Superseded.as_str().to_owned(),
                );
            }
        }
    }
    let gate = if policy == ApplyPolicy::Manual {
        ApplyGate::Manual(manual_plan(pass, plans_list, &cur.hash))
    } else if let Some(newest) = pass.loaded.newest_apply_for(&cur.hash)
        && newest.record.outcome == Outcome::Blocked
    {
        let approval = plans::live_plan(plans_list)
            .filter(|p| p.spec.inputs_hash == cur.hash && p.spec.approved == Some(true))
            .map(|p| Approval::ExpectPlan(p.spec.plan_hash.clone()));
        ApplyGate::Blocked(approval)
    } else {
        ApplyGate::Open
    };
    (gate, superseded)
}

/// `ApplyJobSucceeded` while the decision waits for a plan's approval.
pub(super) fn explain_wait(status: &mut Draft, decision: &Decision, live: Option<&str>, ns: &str) {
    let plan = live.unwrap_or_default();
    let v = match decision.reason {
        Reason::PlanAwaitingApproval => ConditionValue {
            status: ConditionStatus::Unknown,
            reason: reasons::PLAN_AWAITING_APPROVAL,
            message: format!(
                "applyPolicy is Manual: TerraformPlan {plan} waits for approval; review it, then: kubectl patch terraformplan {plan} -n {ns} --type merge -p '{{\"spec\":{{\"approved\":true,\"approvedBy\":\"<your username>\"}}}}'"
            ),
        },
        Reason::DestructivePlanBlocked => ConditionValue {
            status: ConditionStatus::False,
            reason: reasons::DESTRUCTIVE_PLAN_BLOCKED,
            message: format!(
                "the apply stopped before a plan that deletes or replaces resources; nothing was applied; approve TerraformPlan {plan} (spec.approved=true and spec.approvedBy=<your username>) to apply it"
            ),
        },
        _ => return,
    };
    status.set(conditions::APPLY_JOB_SUCCEEDED, &v);
}
