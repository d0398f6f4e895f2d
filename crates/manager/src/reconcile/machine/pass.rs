//! The machine's pass once its opening stages ran, as fetch → plan →
//! execute.
//!
//! `fetch` reads what the rest of the pass needs, each object once: the
//! machine's state and durable inputs records and, until it is provisioned,
//! its TerraformCluster's state (for the exports) and its variables
//! sources; a provisioned machine never builds inputs again (they are
//! pinned in its applied record). `plan` is pure: outputs, health samples
//! and the remediation request, the first inputs through their gates, the
//! decision and the start request (`ending::PassPlan`); the shared
//! `ending::execute` makes the effects in order and ends the pass.

use std::time::{Duration, SystemTime};

use captf_api::TerraformMachine;
use captf_api::effective::EffectiveRemediation;
use captf_api::names::{annotations, conditions, events, reasons};
use captf_contract::{Role, RoleInputs};
use kube::ResourceExt;

use super::super::dependencies::MachineDependencies;
use super::super::effect::Effect;
use super::super::ending::{PassEnding, PassPlan};
use super::super::inputs_applied;
use super::super::next_op::{self, DecidedEnding, OutputsSeen};
use super::super::open_pass::{EarlyReads, OpenPass};
use super::super::pass;
use super::super::pass_conditions;
use super::super::pool::pass::DEPENDENCIES_REQUEUE;
use super::super::rendered;
use super::super::rendered::Rendered;
use super::super::status::Draft;
use super::super::stored;
use super::super::stored::Stored;
use super::super::variables;
use super::super::variables::VariableSources;
use super::super::workload::Workload;
use super::super::{Context, Error};
use super::outputs;
use crate::adapters::gates::ClusterState;
use crate::adapters::machine::{self as adapter, GateInput, Remediation};
use crate::engine::decide::{ApplyGate, Op};
use crate::engine::history::Outcome;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::names::{WorkloadKind, state_suffix};
use crate::state::reader::{StateError, StateSummary};

/// How long a due refresh or drift check without durable inputs waits
/// before it looks again.
pub const DURABLE_INPUTS_REQUEUE: Duration = Duration::from_secs(600);

/// How long a deletion whose policy cannot be resolved waits.
pub const UNRESOLVED_POLICY_REQUEUE: Duration = Duration::from_secs(60);

/// What the pass read after its opening stages.
pub struct MachineSnapshot {
    pub stored: Stored,
    /// The TerraformCluster's state, when the first inputs are built.
    pub cluster_state: Option<Result<StateSummary, StateError>>,
    pub sources: VariableSources,
}

/// The machine's policy beyond the shared settings.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub remediation: EffectiveRemediation,
    /// The machine or its TerraformCluster names a deletion policy.
    pub deletion_policy_resolved: bool,
}

/// Reads the snapshot: the state and records (reporting `StateReadable`)
/// and, while the machine still builds its first inputs, the cluster's
/// state and the variables sources.
pub async fn fetch(
    ctx: &Context,
    obj: &TerraformMachine,
    p: &OpenPass,
    opened_status: &Draft,
    early: EarlyReads,
    deps: &MachineDependencies,
) -> Result<MachineSnapshot, Error> {
    let stored = stored::read_stored(ctx, obj, p, opened_status, early).await?;
    let building = !obj.provisioned() && !p.deleting();
    let ns = obj.namespace().unwrap_or_default();
    let cluster_state = match (&deps.machine, &deps.cluster, &deps.tc) {
        (Some(_), Some(c), Some(tc)) if building && c.infrastructure_provisioned() => {
            let suffix = state_suffix(WorkloadKind::Cluster, &ns, &tc.name_any());
            Some(crate::io::state::read_state(&ctx.client, &ns, &suffix).await?)
        }
        _ => None,
    };
    let sources = if building {
        variables::variable_sources(ctx, obj).await?
    } else {
        Vec::new()
    };
    Ok(MachineSnapshot {
        stored,
        cluster_state,
        sources,
    })
}

/// What the outputs told the plan.
struct OutputsRead {
    provisioned: bool,
    health_pending: bool,
    definite: bool,
}

/// The machine's plan over its snapshot; `status` is the opening's.
pub fn plan(
    obj: &TerraformMachine,
    p: &OpenPass,
    mut status: Draft,
    deps: &MachineDependencies,
    snap: &MachineSnapshot,
    policy: &Policy,
    now: SystemTime,
) -> Result<PassPlan, Error> {
    // What the state and records ask for goes first, as when it was read.
    let mut effects = snap.stored.effects.clone();
    let mut measured = snap.stored.report(&mut status);
    let read = &snap.stored.read;
    let outputs = plan_outputs_stage(obj, p, &mut status, deps, read, policy, &mut effects);
    if p.deleting() && !policy.deletion_policy_resolved && !p.shared.paused {
        status.set(conditions::DELETING, &deletion_policy_unresolved());
        let ending = PassEnding::Close(Some(UNRESOLVED_POLICY_REQUEUE));
        return Ok(PassPlan::undecided(status, measured, effects, ending));
    }
    let current = if outputs.provisioned || p.deleting() {
        None
    } else {
        plan_inputs(obj, &mut status, deps, snap)
    };
    if let Some(r) = &current {
        measured.inputs_bytes = crate::metrics::Observed::Value(r.bytes());
    }
    let view = inputs_applied::view(p, read, current.as_ref());
    if current.is_none() && !p.deleting() && !snap.stored.ever_applied && !outputs.provisioned {
        // Nothing can run before the dependencies are there.
        inputs_applied::set(p, &mut status, &view, None);
        let ending = PassEnding::Close(Some(DEPENDENCIES_REQUEUE));
        return Ok(PassPlan::undecided(status, measured, effects, ending));
    }
    let current_hash = current_hash(current.as_ref(), &snap.stored, outputs.provisioned);
    next_op::settle_adopted_state(p, &mut status, read, current_hash);
    let decision = next_op::decide_op(
        obj,
        p,
        &status,
        &snap.stored,
        current.as_ref(),
        ApplyGate::Open,
        OutputsSeen {
            provisioned: outputs.provisioned,
            health_pending: outputs.health_pending,
            definite: outputs.definite,
        },
        now,
    );
    inputs_applied::set(p, &mut status, &view, Some(&decision));
    crate::reconcile::pass_conditions::explain_held_deletion(&mut status, &decision);
    let ending = match next_op::decided_ending(
        obj,
        p,
        &status,
        &snap.stored,
        &decision,
        current.as_ref(),
        DEPENDENCIES_REQUEUE,
    ) {
        DecidedEnding::Ends(ending) => ending,
        DecidedEnding::Start(req) => PassEnding::Start(req),
        DecidedEnding::Unstartable(op) => {
            inputs_missing(obj, &mut status, op);
            PassEnding::Close(Some(DURABLE_INPUTS_REQUEUE))
        }
    };
    Ok(PassPlan {
        status,
        measured,
        effects,
        decision: Some(decision),
        ending,
    })
}

/// `Deleting` while an inherited deletion policy cannot be read: never
/// guessed, neither destroy nor Retain.
fn deletion_policy_unresolved() -> ConditionValue {
    ConditionValue {
        status: ConditionStatus::True,
        reason: reasons::DELETION_POLICY_UNRESOLVED,
        message: "no deletionPolicy is set and the TerraformCluster cannot be found; set spec.deletionPolicy".into(),
    }
}

/// The inputs hash the machine answers to: the rendered one, or for a
/// provisioned machine the one pinned at its first apply.
fn current_hash<'a>(
    current: Option<&'a Rendered>,
    stored: &'a Stored,
    provisioned: bool,
) -> Option<&'a str> {
    match current {
        Some(c) => Some(c.hash.as_str()),
        None if provisioned => stored.applied.as_ref().map(|r| r.meta.inputs_hash.as_str()),
        None => None,
    }
}

/// A due op whose recorded inputs are gone: a machine never renders new
/// ones, so say why nothing runs.
fn inputs_missing(obj: &TerraformMachine, status: &mut Draft, op: Op) {
    match op {
        Op::Refresh | Op::Drift => {
            status.set(
                conditions::DRIFT_JOB_SUCCEEDED,
                &durable_inputs_missing(obj),
            );
        }
        // Never invent inputs: a destroy renders what was applied.
        Op::Destroy => status.set(
            conditions::DELETING,
            &ConditionValue {
                status: ConditionStatus::True,
                reason: reasons::DELETING,
                message: durable_inputs_missing(obj).message,
            },
        ),
        _ => {}
    }
}

/// A refresh or drift check is due but the machine's pinned inputs are
/// gone, and a machine never renders new ones.
fn durable_inputs_missing(obj: &TerraformMachine) -> ConditionValue {
    ConditionValue {
        status: ConditionStatus::Unknown,
        reason: reasons::DURABLE_INPUTS_MISSING,
        message: format!(
            "the durable inputs Secret {} is gone, so no refresh or drift check can run; \
             roll the Machine to replace it (docs/runbooks.md#durableinputsmissing)",
            crate::records::attempt_record_name(WorkloadKind::Machine, &obj.name_any())
        ),
    }
}

/// The outputs: `OutputsValid`, the set-once provider ID, the status fields,
/// the provisioned latch, `InfrastructureHealthy` with its samples, and the
/// Machine's remediation annotations.
#[allow(clippy::too_many_arguments)]
fn plan_outputs_stage(
    obj: &TerraformMachine,
    p: &OpenPass,
    status: &mut Draft,
    deps: &MachineDependencies,
    read: &Result<StateSummary, StateError>,
    policy: &Policy,
    effects: &mut Vec<Effect>,
) -> OutputsRead {
    let mut out = OutputsRead {
        provisioned: obj.provisioned(),
        health_pending: false,
        definite: false,
    };
    let Ok(state) = read else {
        if !out.provisioned {
            let v = pass_conditions::not_yet_healthy(p);
            status.set(conditions::INFRASTRUCTURE_HEALTHY, &v);
        }
        set_initialization(status, out.provisioned);
        return out;
    };
    let plan = outputs::plan_machine_outputs(obj, deps.machine.as_ref(), state, out.provisioned);
    let v = &plan.outputs_valid;
    let before = obj.condition(conditions::OUTPUTS_VALID);
    let again = before.is_some_and(|c| c.status == "False" && c.reason == v.reason);
    if v.status == "False" && !again {
        effects.push(Effect::CountOutputsInvalid(v.reason));
    }
    status.set(conditions::OUTPUTS_VALID, v);
    if let Some(id) = &plan.set_provider_id {
        effects.push(Effect::PatchSpec(outputs::provider_id_patch(id)));
        effects.push(event(
            false,
            events::PROVIDER_ID_SET,
            format!("spec.providerID set to {id}"),
        ));
    }
    if let Some(w) = &plan.writes {
        for (key, value) in outputs::status_fields(w) {
            status.field(key, value);
        }
    }
    out.provisioned = plan.provisioned;
    out.definite = plan.definite;
    out.health_pending = plan
        .health
        .as_ref()
        .is_some_and(|h| h.state == captf_contract::health::HealthState::Pending);
    if plan.newly_provisioned {
        effects.push(event(
            false,
            events::PROVISIONED,
            "machine provisioned".into(),
        ));
    }
    if out.provisioned {
        plan_health(obj, p, status, deps, &plan, policy, effects);
    } else {
        pass_conditions::record_health(status, false, plan.health.as_ref());
    }
    set_initialization(status, out.provisioned);
    out
}

fn event(warning: bool, reason: &'static str, note: String) -> Effect {
    Effect::Event {
        warning,
        reason,
        action: "Outputs",
        note,
    }
}

/// The v1beta2 initialization contract. A machine has no `status.ready`
/// (only pools keep that v1beta1 flag): a field the schema lacks is pruned
/// by the apiserver, so writing it would make every pass patch again.
fn set_initialization(status: &mut Draft, provisioned: bool) {
    status.set_provisioned(provisioned);
}

/// A new health sample: a refresh or drift Job that succeeded since the
/// last pass, or an apply whose own reading stands in for the refresh
/// after it.
fn new_sample(p: &OpenPass, definite: bool) -> bool {
    p.booked.newly.iter().any(|o| {
        o.record.outcome == Outcome::Succeeded
            && match o.record.op {
                Op::Refresh | Op::Drift => true,
                Op::Apply => definite,
                _ => false,
            }
    })
}

/// `InfrastructureHealthy` and `status.unhealthySamples` of a provisioned
/// machine, moved on by each new sample (and read once when the object has
/// no reading since provisioning), then the remediation request.
#[allow(clippy::too_many_arguments)]
fn plan_health(
    obj: &TerraformMachine,
    p: &OpenPass,
    status: &mut Draft,
    deps: &MachineDependencies,
    plan: &outputs::OutputsPlan,
    policy: &Policy,
    effects: &mut Vec<Effect>,
) {
    let before = obj.condition(conditions::INFRASTRUCTURE_HEALTHY);
    let unread = before.is_none_or(|c| {
        matches!(
            c.reason.as_str(),
            reasons::PROVISIONING | reasons::WAITING_FOR_PROVISIONING
        )
    });
    let previous_count = obj.status.as_ref().and_then(|s| s.unhealthy_samples);
    if !(unread || plan.newly_provisioned || new_sample(p, plan.definite)) {
        return;
    }
    let sampled = adapter::sample(&adapter::Sample {
        previous_reason: before.map(|c| c.reason.as_str()),
        previous_count,
        provider_id_missing: plan.provider_id_missing,
        health: plan.health.as_ref(),
    });
    status.set(conditions::INFRASTRUCTURE_HEALTHY, &sampled.condition);
    let samples = sampled.unhealthy_samples.map(|n| n.max(0) as u32);
    status.set_unhealthy_samples(samples);
    let Some(machine) = deps.machine.as_ref().filter(|_| !p.shared.paused) else {
        return;
    };
    let name = machine.metadata.name.clone().unwrap_or_default();
    let (patch, action, warning, reason, note) = match adapter::remediation(
        &policy.remediation,
        sampled.condition.reason,
        sampled.unhealthy_samples,
        machine,
    ) {
        None => return,
        Some(Remediation::Request { reason, patch }) => (
            patch,
            "requested",
            true,
            events::REMEDIATION_REQUESTED,
            format!(
                "Machine {name} annotated {}: {reason}",
                annotations::REMEDIATE_MACHINE
            ),
        ),
        Some(Remediation::Withdraw { patch }) => (
            patch,
            "withdrawn",
            false,
            events::REMEDIATION_WITHDRAWN,
            format!(
                "Machine {name}: {} removed, the instance is healthy again",
                annotations::REMEDIATE_MACHINE
            ),
        ),
    };
    effects.push(Effect::PatchOwner { name, patch });
    effects.push(Effect::CountRemediation(action));
    effects.push(Effect::Event {
        warning,
        reason,
        action: "Remediate",
        note,
    });
}

/// The machine's first inputs through the gates (the cluster's exports from
/// its state, the bootstrap data, the variables); `None` with
/// `DependenciesReady` saying what is missing.
fn plan_inputs(
    obj: &TerraformMachine,
    status: &mut Draft,
    deps: &MachineDependencies,
    snap: &MachineSnapshot,
) -> Option<Rendered> {
    let (Some(machine), Some(cluster)) = (&deps.machine, &deps.cluster) else {
        return None;
    };
    let cluster_outputs = pass::cluster_outputs(snap.cluster_state.as_ref());
    let cluster_state = match &cluster_outputs {
        Ok(o) => ClusterState::Outputs(o),
        Err(why) => ClusterState::Unreadable(why),
    };
    let gated = adapter::gates(&GateInput {
        cluster,
        terraform_cluster: deps.tc.as_ref(),
        cluster_state,
        machine,
        bootstrap_secret: deps.bootstrap.as_ref(),
    });
    let d = match gated {
        Ok(d) => d,
        Err(c) => {
            status.set(conditions::DEPENDENCIES_READY, &c);
            return None;
        }
    };
    let inline = obj.spec.workspace.variables.as_ref();
    let vars = match crate::adapters::variables::merge(Role::Machine, inline, &snap.sources) {
        Ok(vars) => vars,
        Err(c) => {
            status.set(conditions::DEPENDENCIES_READY, &c);
            return None;
        }
    };
    let inputs = RoleInputs::Machine(adapter::inputs(&obj.metadata, machine, cluster, &d));
    match rendered::render_inputs(&inputs, &vars, &obj.spec.workspace.source.image) {
        Ok(r) => {
            status.set(
                conditions::DEPENDENCIES_READY,
                &crate::adapters::dependencies_ready(),
            );
            Some(r)
        }
        Err(c) => {
            status.set(conditions::DEPENDENCIES_READY, &c);
            None
        }
    }
}
