//! The pool's pass once its opening stages ran, as fetch → plan → execute.
//!
//! `fetch` reads what the rest of the pass needs, each object once: the
//! pool's state and durable inputs records, its TerraformCluster's state
//! (for the exports), and its variables sources. `plan` is pure (no client
//! in its signature): outputs, write-back, inputs through their gates, the
//! exports guard, the decision and the start request, as the status (the
//! opening's, carried on), a list of effects and an ending
//! (`ending::PassPlan`).
//! The shared `ending::execute` makes the effects in order and ends the
//! pass (the Job start, then the status).

use std::time::{Duration, SystemTime};

use captf_api::TerraformMachinePool;
use captf_api::names::{conditions, events};
use captf_contract::Role;
use kube::ResourceExt;

use super::super::dependencies::PoolDependencies;
use super::super::effect::Effect;
use super::super::ending::{PassEnding, PassPlan};
use super::super::exports::{self, Built, ExportsGuard};
use super::super::inputs_applied;
use super::super::next_op::{self, DecidedEnding, OutputsSeen};
use super::super::open_pass::{EarlyReads, OpenPass};
use super::super::pass;
use super::super::pass_conditions;
use super::super::rendered::Rendered;
use super::super::status::Draft;
use super::super::stored;
use super::super::stored::Stored;
use super::super::variables;
use super::super::variables::VariableSources;
use super::super::workload::Workload;
use super::super::{Context, Error};
use super::outputs;
use crate::adapters::pool::{self as adapter, ClusterState, GateInput};
use crate::engine::decide::{ApplyGate, Op};
use crate::names::{WorkloadKind, state_suffix};
use crate::state::reader::{StateError, StateSummary};

/// How long a pool whose dependencies are missing waits before it looks
/// again (their watch events usually come first).
pub const DEPENDENCIES_REQUEUE: Duration = Duration::from_secs(15);

/// What the pass read after its opening stages.
pub struct PoolSnapshot {
    pub stored: Stored,
    /// The TerraformCluster's state, when there is one to read.
    pub cluster_state: Option<Result<StateSummary, StateError>>,
    pub sources: VariableSources,
}

/// Reads the snapshot: the state and records (reporting `StateReadable`),
/// the cluster's state and the variables sources.
pub async fn fetch(
    ctx: &Context,
    obj: &TerraformMachinePool,
    p: &OpenPass,
    opened_status: &Draft,
    early: EarlyReads,
    deps: &PoolDependencies,
) -> Result<PoolSnapshot, Error> {
    let stored = stored::read_stored(ctx, obj, p, opened_status, early).await?;
    let ns = obj.namespace().unwrap_or_default();
    let cluster_state = match (&deps.mp, &deps.cluster, &deps.tc) {
        (Some(_), Some(_), Some(tc)) => {
            let suffix = state_suffix(WorkloadKind::Cluster, &ns, &tc.name_any());
            Some(crate::io::state::read_state(&ctx.client, &ns, &suffix).await?)
        }
        _ => None,
    };
    let sources = variables::variable_sources(ctx, obj).await?;
    Ok(PoolSnapshot {
        stored,
        cluster_state,
        sources,
    })
}

/// What the outputs told the plan.
struct OutputsRead {
    provisioned: bool,
    health_pending: bool,
    observed_replicas: Option<i32>,
}

/// The pool's plan over its snapshot; `status` is the opening's.
pub fn plan(
    obj: &TerraformMachinePool,
    p: &OpenPass,
    mut status: Draft,
    deps: &PoolDependencies,
    snap: &PoolSnapshot,
    now: SystemTime,
) -> Result<PassPlan, Error> {
    // What the state and records ask for goes first, as when it was read.
    let mut effects = snap.stored.effects.clone();
    let mut measured = snap.stored.report(&mut status);
    let read = &snap.stored.read;
    let outputs = plan_outputs_stage(obj, p, &mut status, read, &mut effects);
    plan_write_back(
        p,
        &mut status,
        deps,
        outputs.observed_replicas,
        &mut effects,
    );
    let built = plan_inputs(obj, &mut status, deps, snap);
    let (current, guard) = render_guarded(obj, p, &mut status, built, &snap.stored, &mut effects)?;
    if let Some(r) = &current {
        measured.inputs_bytes = crate::metrics::Observed::Value(r.bytes());
    }
    let view = inputs_applied::view(p, read, current.as_ref());
    if current.is_none() && !p.deleting() && !snap.stored.ever_applied {
        // Nothing can run before the dependencies are there.
        inputs_applied::set(p, &mut status, &view, None);
        let ending = PassEnding::Close(Some(DEPENDENCIES_REQUEUE));
        return Ok(PassPlan::undecided(status, measured, effects, ending));
    }
    let current_hash = current.as_ref().map(|c| c.hash.as_str());
    next_op::settle_adopted_state(p, &mut status, read, current_hash);
    let gate = guard.as_ref().map_or(ApplyGate::Open, ExportsGuard::gate);
    let decision = next_op::decide_op(
        obj,
        p,
        &status,
        &snap.stored,
        current.as_ref(),
        gate,
        OutputsSeen {
            provisioned: outputs.provisioned,
            health_pending: outputs.health_pending,
            definite: false,
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
        DecidedEnding::Unstartable(_) => PassEnding::Close(decision.requeue),
        DecidedEnding::Start(mut req) => {
            if let (Op::Apply, Some(g)) = (req.op, &guard) {
                g.prepare_apply(&mut req);
            }
            PassEnding::Start(req)
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

/// The pool's outputs: provider IDs to the spec, replicas, instances,
/// `OutputsValid`, the provisioned latch and `InfrastructureHealthy`.
fn plan_outputs_stage(
    obj: &TerraformMachinePool,
    p: &OpenPass,
    status: &mut Draft,
    read: &Result<StateSummary, StateError>,
    effects: &mut Vec<Effect>,
) -> OutputsRead {
    let mut out = OutputsRead {
        provisioned: obj.provisioned(),
        health_pending: false,
        observed_replicas: obj.status.as_ref().and_then(|s| s.replicas),
    };
    if let Ok(state) = read {
        let plan = outputs::plan_pool_outputs(obj, state, out.provisioned);
        if let Some(patch) = &plan.spec_patch {
            effects.push(Effect::PatchSpec(patch.clone()));
        }
        if let (Some(replicas), Some(instances)) = (plan.replicas, &plan.instances) {
            status.field("replicas", replicas);
            status.field("instances", instances);
            out.observed_replicas = Some(replicas);
        }
        let v = &plan.outputs_valid;
        let before = obj.condition(conditions::OUTPUTS_VALID);
        let again = before.is_some_and(|c| c.status == "False" && c.reason == v.reason);
        if v.status == "False" && !again {
            effects.push(Effect::CountOutputsInvalid(v.reason));
        }
        status.set(conditions::OUTPUTS_VALID, v);
        out.provisioned = plan.provisioned;
        if plan.newly_provisioned {
            effects.push(Effect::Event {
                warning: false,
                reason: events::PROVISIONED,
                action: "Outputs",
                note: "machine pool provisioned".into(),
            });
        }
        out.health_pending =
            pass_conditions::record_health(status, out.provisioned, plan.health.as_ref());
    } else if !out.provisioned {
        let v = pass_conditions::not_yet_healthy(p);
        status.set(conditions::INFRASTRUCTURE_HEALTHY, &v);
    }
    status.set_provisioned(out.provisioned);
    status.field("ready", out.provisioned);
    out
}

/// Autoscaling mode: the module owns the count; it goes back to the
/// MachinePool.
fn plan_write_back(
    p: &OpenPass,
    status: &mut Draft,
    deps: &PoolDependencies,
    observed: Option<i32>,
    effects: &mut Vec<Effect>,
) {
    let Some(mp) = deps.mp.as_ref().filter(|_| !p.deleting()) else {
        return;
    };
    let plan = outputs::plan_replicas(mp, observed);
    status.set(conditions::AUTOSCALING_ACTIVE, &plan.condition);
    if let Some(r) = plan.written_back {
        let (reason, note) = outputs::written_back_note(r);
        effects.push(Effect::Event {
            warning: false,
            reason,
            action: "Outputs",
            note,
        });
    }
    if let Some(patch) = plan.machine_pool_patch {
        let name = mp.metadata.name.clone().unwrap_or_default();
        effects.push(Effect::PatchOwner { name, patch });
    }
}

/// The pool's current inputs through the dependency gates (the cluster's
/// exports from its state, the variables from their sources); `None` with
/// `DependenciesReady` saying what is missing.
fn plan_inputs(
    obj: &TerraformMachinePool,
    status: &mut Draft,
    deps: &PoolDependencies,
    snap: &PoolSnapshot,
) -> Option<Built> {
    let (Some(mp), Some(cluster)) = (&deps.mp, &deps.cluster) else {
        return None;
    };
    let cluster_outputs = pass::cluster_outputs(snap.cluster_state.as_ref());
    let cluster_state = match &cluster_outputs {
        Ok(o) => ClusterState::Outputs(o),
        Err(why) => ClusterState::Unreadable(why),
    };
    let gated = adapter::gates(&GateInput {
        terraform_cluster: deps.tc.as_ref(),
        cluster_state,
        machine_pool: mp,
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
    match crate::adapters::variables::merge(Role::MachinePool, inline, &snap.sources) {
        Err(c) => {
            status.set(conditions::DEPENDENCIES_READY, &c);
            None
        }
        Ok(vars) => Some(Built {
            inputs: adapter::inputs(obj, mp, cluster, &d),
            vars,
            image: obj.spec.workspace.source.image.clone(),
        }),
    }
}

/// Renders the inputs; the exports guard may hold a change of the cluster's
/// exports and render the exports last applied instead.
fn render_guarded(
    obj: &TerraformMachinePool,
    p: &OpenPass,
    status: &mut Draft,
    built: Option<Built>,
    stored: &Stored,
    effects: &mut Vec<Effect>,
) -> Result<(Option<Rendered>, Option<ExportsGuard>), Error> {
    let Some(b) = built else {
        return Ok((None, None));
    };
    let full = match exports::render(&b) {
        Ok(full) => full,
        Err(c) => {
            status.set(conditions::DEPENDENCIES_READY, &c);
            return Ok((None, None));
        }
    };
    let planned = exports::plan_guard(
        obj,
        p,
        status,
        &b,
        &stored.read,
        stored.applied.as_ref(),
        stored.attempt.as_ref(),
        stored.ever_applied,
    )?;
    effects.extend(planned.writes);
    let rendered = match planned.held {
        Some(h) => exports::render(&h),
        None => Ok(full),
    };
    match rendered {
        Ok(r) => {
            let ready = crate::adapters::dependencies_ready();
            status.set(conditions::DEPENDENCIES_READY, &ready);
            Ok((Some(r), Some(planned.guard)))
        }
        Err(c) => {
            status.set(conditions::DEPENDENCIES_READY, &c);
            Ok((None, None))
        }
    }
}

#[cfg(test)]
#[path = "pass_tests.rs"]
mod tests;
