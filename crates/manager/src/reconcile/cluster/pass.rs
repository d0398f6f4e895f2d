//! The cluster's pass once its opening stages and its plans' bookkeeping
//! ran, as fetch → plan → execute (the shape of `pool/pass.rs`).
//!
//! `fetch` reads the state and records, the variables sources and, for a
//! deleting cluster, its remaining machines and pools. `plan` is pure: the
//! outputs (endpoint, failure domains, exports, provisioned latch), the
//! inputs, the TerraformPlan gate, the wait for dependents, the decision
//! and the start request. `execute` makes the effects in order, then the
//! Job start (with the plan key a plan Job needs), then the status.

use std::time::{Duration, SystemTime};

use captf_api::TerraformCluster;
use captf_api::common::ApplyPolicy;
use captf_api::names::{annotations, conditions, events, labels, reasons};
use captf_api::plan::TerraformPlan;
use captf_api::{TerraformMachine, TerraformMachinePool};
use captf_contract::outputs::RoleOutputs;
use captf_contract::{Role, RoleInputs};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::super::effect::Effect;
use super::super::ending::{self, PassEnding, PassPlan};
use super::super::inputs_applied;
use super::super::job_start::StartRequest;
use super::super::next_op::{self, OutputsSeen};
use super::super::open_pass::{Closing, EarlyReads, OpenPass};
use super::super::pass;
use super::super::pass_conditions;
use super::super::plans;
use super::super::rendered::Rendered;
use super::super::status::Draft;
use super::super::stored;
use super::super::stored::Stored;
use super::super::variables;
use super::super::variables::VariableSources;
use super::super::workload::Workload;
use super::super::{Context, Error};
use super::plan_flow;
use crate::adapters::cluster::{self as adapter, ExportsWrite, OutputsReading};
use crate::capi::Cluster;
use crate::engine::decide::{Action as Decided, Approval, Op};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::jobs::args::Guard;
use crate::records::InputsRecord;

/// Requeue while dependents of a deleting cluster remain.
pub const DEPENDENTS_REQUEUE: Duration = Duration::from_secs(10);

/// What the pass read after its opening stages.
pub struct ClusterSnapshot {
    pub stored: Stored,
    pub sources: VariableSources,
    /// The cluster's TerraformMachinePools and TerraformMachines (read only
    /// while it is deleting).
    pub dependents: Vec<String>,
}

/// Reads the snapshot.
pub async fn fetch(
    ctx: &Context,
    obj: &TerraformCluster,
    p: &OpenPass,
    opened_status: &Draft,
    early: EarlyReads,
    cluster_name: &str,
) -> Result<ClusterSnapshot, Error> {
    let stored = stored::read_stored(ctx, obj, p, opened_status, early).await?;
    let sources = variables::variable_sources(ctx, obj).await?;
    let dependents = if p.deleting() {
        dependents(ctx, &obj.namespace().unwrap_or_default(), cluster_name).await?
    } else {
        Vec::new()
    };
    Ok(ClusterSnapshot {
        stored,
        sources,
        dependents,
    })
}

/// The machines and pools of a cluster (by cluster-name label).
async fn dependents(ctx: &Context, ns: &str, cluster: &str) -> Result<Vec<String>, Error> {
    let lp = ListParams::default().labels(&format!("{}={cluster}", labels::CLUSTER_NAME));
    let pools: Api<TerraformMachinePool> = Api::namespaced(ctx.client.clone(), ns);
    let machines: Api<TerraformMachine> = Api::namespaced(ctx.client.clone(), ns);
    let mut out: Vec<String> = pools
        .list(&lp)
        .await?
        .items
        .iter()
        .map(|p| format!("TerraformMachinePool {}", p.name_any()))
        .collect();
    out.extend(
        machines
            .list(&lp)
            .await?
            .items
            .iter()
            .map(|m| format!("TerraformMachine {}", m.name_any())),
    );
    Ok(out)
}

/// What the plan needs besides the object, the pass and the snapshot.
pub struct ClusterContext<'a> {
    pub cluster: Option<&'a Cluster>,
    pub apply_policy: ApplyPolicy,
    pub now: SystemTime,
}

/// The cluster's plan over its snapshot; `status` is the opening's.
/// `plans_list` is the object's TerraformPlans after their bookkeeping;
/// the plans it supersedes are marked in it.
pub fn plan(
    obj: &TerraformCluster,
    p: &OpenPass,
    mut status: Draft,
    snap: &ClusterSnapshot,
    plans_list: &mut [TerraformPlan],
    cx: &ClusterContext<'_>,
) -> PassPlan {
    // What the state and records ask for goes first, as when it was read.
    let mut effects = snap.stored.effects.clone();
    let mut measured = snap.stored.report(&mut status);
    let seen = plan_outputs_stage(obj, p, &mut status, &snap.stored, cx.cluster, &mut effects);
    let current = plan_inputs(obj, &mut status, cx.cluster, snap);
    if let Some(r) = &current {
        measured.inputs_bytes = crate::metrics::Observed::Value(r.bytes());
    }
    let (gate, superseded) = plan_flow::plan_gate(p, plans_list, current.as_ref(), cx.apply_policy);
    effects.extend(
        superseded
            .into_iter()
            .map(|s| Effect::SupersedePlan(Box::new(s))),
    );
    let live = plans::live_plan(plans_list).map(|p| p.name_any());
    status.field("pendingPlanRef", live.as_ref().map(|n| json!({"name": n})));
    if p.deleting() && !wait_for_dependents(&mut status, &snap.dependents) {
        let ending = PassEnding::Close(Some(DEPENDENTS_REQUEUE));
        return PassPlan::undecided(status, measured, effects, ending);
    }
    let read = &snap.stored.read;
    let current_hash = current.as_ref().map(|c| c.hash.as_str());
    next_op::settle_adopted_state(p, &mut status, read, current_hash);
    let decision = next_op::decide_op(
        obj,
        p,
        &status,
        &snap.stored,
        current.as_ref(),
        gate,
        seen,
        cx.now,
    );
    let view = inputs_applied::view(p, read, current.as_ref());
    inputs_applied::set(p, &mut status, &view, Some(&decision));
    crate::reconcile::pass_conditions::explain_held_deletion(&mut status, &decision);
    let ending = match decision.action.clone() {
        Decided::Start {
            op,
            approval,
            remediation,
        } => {
            let started = guarded_start_request(
                obj,
                p,
                &status,
                &snap.stored,
                current.as_ref(),
                plans_list,
                (op, approval, remediation),
            );
            match started {
                Some(req) => PassEnding::Start(Box::new(req)),
                None => PassEnding::Close(decision.requeue),
            }
        }
        Decided::DropFinalizer => PassEnding::Release,
        Decided::Retain => PassEnding::Retain,
        Decided::Wait => {
            let ns = obj.namespace().unwrap_or_default();
            plan_flow::explain_wait(&mut status, &decision, live.as_deref(), &ns);
            PassEnding::Close(decision.requeue)
        }
    };
    PassPlan {
        status,
        measured,
        effects,
        decision: Some(decision),
        ending,
    }
}

/// The two inputs of a record's values file the cluster pass reads back.
/// Only these are parsed: user variables may hold numbers (`1e400`) that
/// serde_json's `Value` cannot.
#[derive(serde::Deserialize)]
struct RecordedEndpointInputs {
    control_plane_initialized: Option<bool>,
    control_plane_endpoint: Option<serde::de::IgnoredAny>,
}

fn recorded_endpoint_inputs(record: Option<&InputsRecord>) -> Option<RecordedEndpointInputs> {
    record.and_then(|r| serde_json::from_str(&r.tfvars_json).ok())
}

fn recorded_control_plane_initialized(record: Option<&InputsRecord>) -> bool {
    recorded_endpoint_inputs(record)
        .and_then(|v| v.control_plane_initialized)
        .unwrap_or(false)
}

fn applied_endpoint_input_null(record: Option<&InputsRecord>) -> bool {
    recorded_endpoint_inputs(record).is_some_and(|v| v.control_plane_endpoint.is_none())
}

/// What the outputs publish beyond `provisioned`: the control-plane
/// endpoint (once, into the spec), the failure domains and the exports,
/// each with its event.
fn plan_published(
    obj: &TerraformCluster,
    draft: &mut Draft,
    serial: u64,
    w: &adapter::ClusterWrites,
    effects: &mut Vec<Effect>,
) {
    if let Some(ep) = &w.control_plane_endpoint {
        effects.push(Effect::PatchSpec(json!({
            "metadata": {"annotations": {annotations::ENDPOINT_SOURCE: annotations::ENDPOINT_SOURCE_MODULE}},
            "spec": {"controlPlaneEndpoint": ep},
        })));
        effects.push(Effect::outputs_event(
            false,
            events::CONTROL_PLANE_ENDPOINT_SET,
            format!(
                "control plane endpoint {}:{}",
                ep.host.clone().unwrap_or_default(),
                ep.port.unwrap_or_default()
            ),
        ));
    }
    let status = obj.status.as_ref();
    if let Some(fd) = &w.failure_domains {
        let before = status.and_then(|s| s.failure_domains.as_ref());
        let to_json = |v| serde_json::to_value(v).unwrap_or(Value::Null);
        if to_json(before) != to_json(fd.as_ref()) {
            let names: Vec<&str> = fd.iter().flatten().map(|d| d.name.as_str()).collect();
            effects.push(Effect::outputs_event(
                false,
                events::FAILURE_DOMAINS_CHANGED,
                format!("failure domains now: [{}]", names.join(", ")),
            ));
        }
        draft.field("failureDomains", fd);
    }
    match &w.exports {
        ExportsWrite::Keep => {}
        ExportsWrite::Publish(v) => draft.field("exports", v),
        ExportsWrite::ClearTooLarge => {
            // Once per state: a state the pass has not seen yet, or
            // exports that were published until now.
            let published = status.is_some_and(|s| s.exports.is_some());
            let new_state = status.and_then(|s| s.workspace.observed_state_serial)
                != i64::try_from(serial).ok();
            if published || new_state {
                let note = format!(
                    "the exports exceed {} KiB as compact JSON; status.exports is cleared",
                    captf_contract::outputs::MAX_PUBLISHED_EXPORTS_BYTES / 1024
                );
                effects.push(Effect::outputs_event(
                    true,
                    events::EXPORTS_NOT_PUBLISHED,
                    note,
                ));
            }
            draft.field("exports", Value::Null)
        }
    }
}

/// The cluster's outputs: the control plane endpoint to the spec, failure
/// domains, exports, the provisioned latch, `EndpointAvailable` and
/// `InfrastructureHealthy`.
fn plan_outputs_stage(
    obj: &TerraformCluster,
    p: &OpenPass,
    status: &mut Draft,
    stored: &Stored,
    cluster: Option<&Cluster>,
    effects: &mut Vec<Effect>,
) -> OutputsSeen {
    let mut provisioned = obj.provisioned();
    let mut health_pending = false;
    if let (Ok(state), Some(c)) = (&stored.read, cluster) {
        let decoded = match pass::decode_outputs(Role::Cluster, state) {
            RoleOutputs::Cluster(d) => d,
            _ => unreachable!("cluster outputs decode as cluster outputs"),
        };
        let valid = pass_conditions::outputs_valid(&decoded.verdict);
        let before = obj.condition(conditions::OUTPUTS_VALID);
        let again = before.is_some_and(|c| c.status == "False" && c.reason == valid.reason);
        if valid.status == "False" && !again {
            effects.push(Effect::CountOutputsInvalid(valid.reason));
        }
        status.set(conditions::OUTPUTS_VALID, &valid);
        let outputs = decoded
            .outputs
            .as_ref()
            .filter(|_| decoded.verdict.writable());
        let w = adapter::writes(
            obj,
            c,
            &OutputsReading {
                outputs,
                successful_apply: state.inputs_hash.is_some(),
                applied_endpoint_input_null: applied_endpoint_input_null(stored.applied.as_ref()),
                provisioned: obj.provisioned(),
            },
        );
        plan_published(obj, status, state.serial, &w, effects);
        if w.provisioned && !provisioned {
            effects.push(Effect::outputs_event(
                false,
                events::PROVISIONED,
                "infrastructure provisioned".into(),
            ));
        }
        provisioned = w.provisioned;
        if let Some(ea) = &w.endpoint_available {
            status.set(conditions::ENDPOINT_AVAILABLE, ea);
        }
        health_pending =
            pass_conditions::record_health(status, provisioned, decoded.health.as_ref());
    } else if !provisioned {
        let v = pass_conditions::not_yet_healthy(p);
        status.set(conditions::INFRASTRUCTURE_HEALTHY, &v);
    }
    status.set_provisioned(provisioned);
    OutputsSeen {
        provisioned,
        health_pending,
        definite: false,
    }
}

/// The cluster inputs, rendered with the variables; `None` with
/// `DependenciesReady` saying why when they cannot be.
fn plan_inputs(
    obj: &TerraformCluster,
    status: &mut Draft,
    cluster: Option<&Cluster>,
    snap: &ClusterSnapshot,
) -> Option<Rendered> {
    let inline = obj.spec.workspace.variables.as_ref();
    let vars = crate::adapters::variables::merge(Role::Cluster, inline, &snap.sources);
    let (c, vars) = match (cluster, vars) {
        (_, Err(c)) => {
            status.set(conditions::DEPENDENCIES_READY, &c);
            return None;
        }
        (None, _) => return None,
        (Some(c), Ok(vars)) => (c, vars),
    };
    let initialized = recorded_control_plane_initialized(snap.stored.attempt.as_ref());
    let inputs = RoleInputs::Cluster(adapter::inputs(obj, c, initialized));
    let image = obj.spec.workspace.source.image.clone();
    match super::super::rendered::render_inputs(&inputs, &vars, &image) {
        Ok(r) => Some(r),
        Err(c) => {
            status.set(conditions::DEPENDENCIES_READY, &c);
            None
        }
    }
}

/// A deleting cluster waits for its machines and pools (`DeletionBlocked`);
/// `true` when none remains.
fn wait_for_dependents(status: &mut Draft, dependents: &[String]) -> bool {
    let blocked = if dependents.is_empty() {
        ConditionValue {
            status: ConditionStatus::False,
            reason: reasons::NOT_BLOCKED,
            message: "no machine or pool of the cluster remains".into(),
        }
    } else {
        ConditionValue {
            status: ConditionStatus::True,
            reason: reasons::DEPENDENTS_EXIST,
            message: format!("waiting for {} to be deleted", dependents.join(", ")),
        }
    };
    status.set(conditions::DELETION_BLOCKED, &blocked);
    dependents.is_empty()
}

/// The start request of the decided op: every apply is guarded, and an
/// approval binds the approved plan.
fn guarded_start_request(
    obj: &TerraformCluster,
    p: &OpenPass,
    status: &Draft,
    stored: &Stored,
    current: Option<&Rendered>,
    plans_list: &[TerraformPlan],
    (op, approval, remediation): (Op, Option<Approval>, bool),
) -> Option<StartRequest> {
    let mut req = next_op::start_request(obj, p, status, stored, op, remediation, current)?;
    if op == Op::Apply {
        let expect = match &approval {
            Some(Approval::ExpectPlan(h)) => Some(h.clone()),
            _ => None,
        };
        if let Some(plan) = expect
            .as_ref()
            .and_then(|h| plans::live_plan(plans_list).filter(|p| &p.spec.plan_hash == h))
        {
            req.annotations
                .insert(annotations::APPROVED_PLAN.to_owned(), plan.name_any());
            if plan.spec.approved == Some(true) {
                req.approval = approval.clone();
            }
        }
        req.guard = Some(Guard {
            inputs_hash: req.inputs_hash.clone(),
            allow_deletes_hash: None,
            expect_plan: expect,
        });
    }
    Some(req)
}

/// The execute stage with the cluster's one addition: the plan key a plan
/// or apply Job mounts, made after the effects and before the start.
pub async fn execute(
    ctx: &Context,
    obj: &TerraformCluster,
    pass: OpenPass,
    plan: PassPlan,
    now: SystemTime,
) -> Result<Action, Error> {
    let mut closing = Closing::new(pass, plan.status, plan.measured);
    ending::make_effects(ctx, obj, &mut closing, &plan.effects).await?;
    let mut ending = plan.ending;
    if let PassEnding::Start(req) = &mut ending
        && matches!(req.op, Op::Plan | Op::Apply)
    {
        // The plan key the plan Job signs with and the apply checks.
        req.plan_key_secret = Some(pass::ensure_plan_key(ctx, obj).await?);
    }
    ending::close_as_planned(ctx, obj, &mut closing, ending, plan.decision, now).await
}

#[cfg(test)]
#[path = "pass_tests.rs"]
mod tests;
