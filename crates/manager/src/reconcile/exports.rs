//! The pool exports guard in the pass: the baseline read from the records,
//! the verdict, the attempt record's exports fields kept current, the
//! approval consumed once it is moot, and what an apply Job carries.

use captf_api::TerraformMachinePool;
use captf_api::names::{annotations, conditions, events, reasons};
use captf_contract::inputs::MachinePoolInputs;
use captf_contract::{JsonText, RoleInputs, UserVariables, approval_hash, exports_hash};
use kube::ResourceExt;
use serde::Deserialize;
use serde_json::json;

use super::Error;
use super::effect::Effect;
use super::job_start::StartRequest;
use super::open_pass::OpenPass;
use super::rendered::Rendered;
use super::status::Draft;
use crate::adapters::exports_guard::{
    AppliedExports, ApplyJob, Baseline, GuardInput, GuardVerdict, applied_exports, blocked_message,
    blocking_job, failed_part_way, verdict,
};
use crate::engine::decide::{ApplyGate, Approval, Op};
use crate::engine::history::Outcome;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::jobs::args::Guard;
use crate::records::{ExportsRecord, InputsRecord};
use crate::state::reader::{StateError, StateSummary};

/// The pool's current inputs before rendering.
#[derive(Debug, Clone)]
pub struct Built {
    pub inputs: MachinePoolInputs,
    pub vars: UserVariables,
    pub image: String,
}

/// Renders built inputs; `Err` is the `DependenciesReady` to report.
pub fn render(b: &Built) -> Result<Rendered, ConditionValue> {
    super::rendered::render_inputs(
        &RoleInputs::MachinePool(b.inputs.clone()),
        &b.vars,
        &b.image,
    )
}

/// What the guard decided for this pass.
#[derive(Debug, Clone)]
pub struct ExportsGuard {
    pub verdict: GuardVerdict,
    pub approval_hash: String,
    /// Hash of the exports an apply of this pass renders.
    pub rendered_exports_hash: String,
    /// The attempt record's exports fields as they read after this pass.
    pub record: ExportsRecord,
}

impl ExportsGuard {
    /// The apply gate: a change that cannot be held waits for approval.
    pub fn gate(&self) -> ApplyGate {
        match self.verdict {
            GuardVerdict::Waiting { .. } => ApplyGate::Blocked(None),
            _ => ApplyGate::Open,
        }
    }

    /// What an apply Job of this pass carries: the rendered exports' hash,
    /// the guard with its approval hash, or the held marker; and the
    /// exports fields its attempt record keeps.
    pub fn prepare_apply(&self, req: &mut StartRequest) {
        req.annotations.insert(
            annotations::CLUSTER_OUTPUTS_HASH.to_owned(),
            self.rendered_exports_hash.clone(),
        );
        match &self.verdict {
            GuardVerdict::Guarded { approved } => {
                req.annotations.insert(
                    annotations::APPROVAL_HASH.to_owned(),
                    self.approval_hash.clone(),
                );
                req.guard = Some(Guard {
                    inputs_hash: self.approval_hash.clone(),
                    allow_deletes_hash: approved.then(|| self.approval_hash.clone()),
                    expect_plan: None,
                });
                req.approval = approved.then(|| Approval::AllowDeletes(self.approval_hash.clone()));
            }
            GuardVerdict::Held { .. } => {
                req.annotations.insert(
                    annotations::HELD_CLUSTER_OUTPUTS.to_owned(),
                    self.rendered_exports_hash.clone(),
                );
            }
            _ => {}
        }
        if let Some(r) = req.attempt_record.as_mut() {
            r.exports = self.record.clone();
        }
    }
}

/// `captf_cluster_outputs` as a record's values file rendered it, numbers
/// as written.
fn recorded_exports(r: &InputsRecord) -> Option<JsonText> {
    #[derive(Deserialize)]
    struct Values {
        captf_cluster_outputs: JsonText,
    }
    let values: Values = serde_json::from_str(&r.tfvars_json).ok()?;
    // The values file is indented; records keep the exports compact.
    Some(values.captf_cluster_outputs.compacted())
}

/// Applies the guard to the built inputs (which render). Returns the
/// guard and, while a change is held, the inputs to render instead: the
/// exports last applied in place of the current ones.
#[allow(clippy::too_many_arguments)]
pub fn plan_guard(
    obj: &TerraformMachinePool,
    p: &OpenPass,
    status: &mut Draft,
    built: &Built,
    read: &Result<StateSummary, StateError>,
    applied: Option<&InputsRecord>,
    attempt: Option<&InputsRecord>,
    ever_applied: bool,
) -> Result<GuardPlan, Error> {
    let mut writes = Vec::new();
    let known = known_exports(read, applied, attempt, ever_applied);
    let known_hash = known_hash(&known);
    let partial = partial_change(p, attempt, known_hash.as_deref());
    let current_exports = &built.inputs.captf_cluster_outputs;
    let current_exports_hash = exports_hash(current_exports.as_str())
        .map_err(|e| Error::Invalid(format!("spec: the cluster's exports: {e}")))?;
    let approval = approval_hash(&built.image, &built.inputs, &built.vars)
        .map_err(|e| Error::Invalid(format!("spec: the pool's inputs: {e}")))?;
    let jobs = apply_jobs(p);
    let approved_by = obj
        .annotations()
        .get(annotations::APPROVE_DESTRUCTIVE_PLAN)
        .cloned();
    let v = verdict(&GuardInput {
        deleting: p.deleting(),
        applied: &known,
        current_exports_hash: &current_exports_hash,
        approval_hash: &approval,
        approval: approved_by.as_deref(),
        partial: partial.is_some(),
        blocked_by: blocking_job(&jobs, &approval),
    });

    let waiting = matches!(v, GuardVerdict::Held { .. } | GuardVerdict::Waiting { .. });
    let record = ExportsRecord {
        applied: match &known {
            AppliedExports::Recorded { value, .. } => Some(value.to_string()),
            _ => None,
        },
        applied_hash: known_hash.clone(),
        pending: waiting.then(|| current_exports.to_string()),
        partial,
    };
    if let Some(a) = attempt.filter(|a| a.exports != record && !p.deleting()) {
        let mut next = a.clone();
        next.exports = record.clone();
        writes.push(Effect::WriteAttemptRecord(Box::new(next)));
    }

    set_apply_condition(obj, p, status, &v, &approval, approved_by.as_deref());
    writes.extend(approved_applies(p, approved_by.as_deref()));
    if v == GuardVerdict::Unguarded && approved_by.is_some() && !p.deleting() {
        // An approval left on the pool is consumed so the same change
        // returning needs a new one.
        writes.push(Effect::RemoveAnnotation(
            annotations::APPROVE_DESTRUCTIVE_PLAN,
        ));
    }

    let (held, rendered_exports_hash) = match &v {
        GuardVerdict::Held { exports, .. } => {
            let mut held = built.clone();
            held.inputs.captf_cluster_outputs = exports.clone();
            (Some(held), known_hash.clone().unwrap_or_default())
        }
        _ => (None, current_exports_hash),
    };
    Ok(GuardPlan {
        guard: ExportsGuard {
            verdict: v,
            approval_hash: approval,
            rendered_exports_hash,
            record,
        },
        held,
        writes,
    })
}

/// `PlanApplied` for each apply read this pass that succeeded under the
/// approval still on the pool (RESOLUTIONS row 1: on the pool, when the
/// approved apply succeeds; the approval goes in the same pass).
fn approved_applies(p: &OpenPass, approval: Option<&str>) -> Vec<Effect> {
    let Some(approval) = approval else {
        return Vec::new();
    };
    p.booked
        .newly
        .iter()
        .filter(|o| o.record.op == Op::Apply && o.record.outcome == Outcome::Succeeded)
        .filter(|o| {
            p.loaded
                .annotation(&o.record.name, annotations::APPROVAL_HASH)
                == Some(approval)
        })
        .map(|o| Effect::Event {
            warning: false,
            reason: events::PLAN_APPLIED,
            action: "Plan",
            note: format!(
                "Job {} applied the deletes approved by {}={approval}",
                o.record.name,
                annotations::APPROVE_DESTRUCTIVE_PLAN
            ),
        })
        .collect()
}

/// The hash of the exports last applied, when known.
fn known_hash(known: &AppliedExports) -> Option<String> {
    match known {
        AppliedExports::Recorded { hash, .. } | AppliedExports::HashOnly { hash } => {
            Some(hash.clone())
        }
        _ => None,
    }
}

/// The exports the pool last applied, from the applied record (trusted
/// when the state was applied from it) and the attempt record's own.
fn known_exports(
    read: &Result<StateSummary, StateError>,
    applied: Option<&InputsRecord>,
    attempt: Option<&InputsRecord>,
    ever_applied: bool,
) -> AppliedExports {
    let state_hash = read.as_ref().ok().and_then(|s| s.inputs_hash.as_deref());
    let from_applied = applied.and_then(|r| {
        let value = recorded_exports(r)?;
        let hash = exports_hash(value.as_str()).ok()?;
        Some((hash, value, Some(r.meta.inputs_hash.as_str()) == state_hash))
    });
    let recorded_value: Option<JsonText> = attempt
        .and_then(|r| r.exports.applied.as_deref())
        .and_then(|t| JsonText::parse(t).ok());
    applied_exports(&Baseline {
        applied_record: from_applied.as_ref().map(|(h, v, m)| (h.as_str(), v, *m)),
        recorded_value: recorded_value.as_ref(),
        recorded_hash: attempt.and_then(|r| r.exports.applied_hash.as_deref()),
        ever_applied,
    })
}

/// An exports change applied part-way: an apply read this pass clears it
/// when it succeeded, and records it when it failed part-way through a
/// change of the exports.
fn partial_change(
    p: &OpenPass,
    attempt: Option<&InputsRecord>,
    known_hash: Option<&str>,
) -> Option<String> {
    let mut partial = attempt.and_then(|r| r.exports.partial.clone());
    for o in p.booked.newly.iter().filter(|o| o.record.op == Op::Apply) {
        let job = o.record.name.as_str();
        if o.record.outcome == Outcome::Succeeded {
            partial = None;
            continue;
        }
        let error = o.result.as_ref().and_then(|r| r.error.as_ref());
        let rendered = p.loaded.annotation(job, annotations::CLUSTER_OUTPUTS_HASH);
        let changed = rendered.is_some() && rendered != known_hash;
        if changed
            && failed_part_way(
                o.record.outcome,
                error.and_then(|e| e.step.as_deref()),
                o.result.is_some(),
            )
        {
            let exports = attempt
                .filter(|r| r.names_job(job))
                .and_then(recorded_exports)
                .map(|e| e.to_string())
                .unwrap_or_else(|| json!(rendered).to_string());
            partial = Some(exports);
        }
    }
    partial
}

/// The pool's apply Jobs as the guard reads them.
fn apply_jobs(p: &OpenPass) -> Vec<ApplyJob<'_>> {
    p.loaded
        .observed
        .iter()
        .filter(|o| o.record.op == Op::Apply)
        .map(|o| ApplyJob {
            name: &o.record.name,
            created: o.record.created,
            outcome: o.record.outcome,
            approval_hash: p
                .loaded
                .annotation(&o.record.name, annotations::APPROVAL_HASH),
            held: p
                .loaded
                .annotation(&o.record.name, annotations::HELD_CLUSTER_OUTPUTS)
                .is_some(),
        })
        .collect()
}

/// `ApplyJobSucceeded` while a change waits (`DestructivePlanBlocked`),
/// and its last real outcome once the change that waited is gone.
fn set_apply_condition(
    obj: &TerraformMachinePool,
    p: &OpenPass,
    status: &mut Draft,
    v: &GuardVerdict,
    approval_hash: &str,
    approval: Option<&str>,
) {
    if matches!(v, GuardVerdict::Held { .. } | GuardVerdict::Waiting { .. }) {
        let message = blocked_message(
            &obj.name_any(),
            &obj.namespace().unwrap_or_default(),
            v,
            approval_hash,
            approval,
        );
        status.set(
            conditions::APPLY_JOB_SUCCEEDED,
            &ConditionValue {
                status: ConditionStatus::False,
                reason: reasons::DESTRUCTIVE_PLAN_BLOCKED,
                message,
            },
        );
    } else if *v == GuardVerdict::Unguarded
        && status
            .get(conditions::APPLY_JOB_SUCCEEDED)
            .is_some_and(|c| c.reason == reasons::DESTRUCTIVE_PLAN_BLOCKED)
    {
        // A change that waited is gone (applied or withdrawn).
        let mut c = super::bookkeeping::apply_condition_past_blocks(&p.loaded);
        c.message = format!(
            "{}; the exports change that waited for approval is no longer rendered",
            c.message
        );
        status.set(conditions::APPLY_JOB_SUCCEEDED, &c);
    }
}

/// What the guard decided for this pass: its verdict, the inputs it holds
/// the pool on (the exports last applied) if any, and its writes.
pub struct GuardPlan {
    pub guard: ExportsGuard,
    pub held: Option<Built>,
    pub writes: Vec<Effect>,
}
