//! The TerraformCluster pass.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use captf_api::TerraformCluster;
use captf_api::common::{ApplyPolicy, DeletionPolicy, DriftAction};
use captf_api::effective;
use captf_api::names::{annotations, conditions, events, kinds, labels, reasons};
use captf_api::plan::{PlanReason, TerraformPlan};
use captf_api::{TerraformMachine, TerraformMachinePool};
use captf_contract::outputs::RoleOutputs;
use captf_contract::{Role, RoleInputs, inputs_hash, render_root};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::common::{self, PassSettings};
use super::ending;
use super::next_op;
use super::pass;
use super::plans;
use super::routing::{self, Dependency, Dependent};
use super::workload::Workload;
use super::{Context, Error};
use crate::adapters::cluster::{self as adapter, ExportsWrite, OutputsReading};
use crate::adapters::{capi_owner_ref, cluster_name_label};
use crate::capi::{self, Cluster};
use crate::engine::decide::{Action as Decided, ApplyGate, Approval, ManualPlan, Op};
use crate::engine::history::Outcome;
use crate::engine::job_conditions::ConditionValue;
use crate::jobs::args::Guard;
use crate::names::WorkloadKind;
use crate::records::InputsRecord;

/// Requeue while dependents of a deleting cluster remain.
const DEPENDENTS_REQUEUE: Duration = Duration::from_secs(10);

async fn owner_cluster(ctx: &Context, obj: &TerraformCluster) -> Result<Option<Cluster>, Error> {
    let Some(r) = capi_owner_ref(&obj.metadata, capi::CLUSTER_KIND) else {
        return Ok(None);
    };
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &obj.namespace().unwrap_or_default(),
        &capi::cluster_resource(),
    );
    match api.get_opt(&r.name).await? {
        Some(d) => Ok(Cluster::from_dynamic(&d).ok()),
        None => Ok(None),
    }
}

/// The cluster's dependents that must go before it is destroyed.
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

fn recorded_control_plane_initialized(record: Option<&InputsRecord>) -> bool {
    record
        .and_then(|r| serde_json::from_str::<Value>(&r.tfvars_json).ok())
        .and_then(|v| v.get("control_plane_initialized").and_then(Value::as_bool))
        .unwrap_or(false)
}

fn applied_endpoint_input_null(record: Option<&InputsRecord>) -> bool {
    record
        .and_then(|r| serde_json::from_str::<Value>(&r.tfvars_json).ok())
        .is_some_and(|v| v.get("control_plane_endpoint").is_none_or(Value::is_null))
}

/// The Manual plan of the current inputs: the live `Manual` TerraformPlan,
/// else an empty plan the newest plan Job of these inputs found (applied
/// without approval), else none (a plan Job is due).
fn manual_plan(
    pass: &common::OpenPass,
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

/// What the pass depends on beyond its owner Cluster (which names it): its
/// own state and its variables sources.
fn record_dependencies(ctx: &Context, obj: &TerraformCluster) {
    let ns = obj.namespace().unwrap_or_default();
    let mut deps = std::collections::BTreeSet::from([Dependency::State {
        namespace: ns.clone(),
        suffix: crate::names::state_suffix(WorkloadKind::Cluster, &ns, &obj.name_any()),
    }]);
    deps.extend(routing::variables_sources(&ns, &obj.spec.workspace));
    ctx.dependents.record(
        Dependent {
            kind: kinds::TERRAFORM_CLUSTER,
            namespace: ns,
            name: obj.name_any(),
        },
        deps,
    );
}

pub async fn reconcile(obj: Arc<TerraformCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ctx = &*ctx;
    let now = SystemTime::now();
    let ns = obj.namespace().unwrap_or_default();
    ctx.passes
        .count(kinds::TERRAFORM_CLUSTER, &ns, &obj.name_any());
    record_dependencies(ctx, obj);
    let cluster = owner_cluster(ctx, obj).await?;
    let owner = adapter::owner(&obj.metadata, cluster.as_ref());
    let paused = obj.annotations().contains_key(annotations::PAUSED)
        || cluster.as_ref().is_some_and(Cluster::paused);
    let cluster_name = cluster
        .as_ref()
        .and_then(|c| c.metadata.name.clone())
        .or_else(|| cluster_name_label(&obj.metadata).map(str::to_owned))
        .or_else(|| capi_owner_ref(&obj.metadata, capi::CLUSTER_KIND).map(|r| r.name.clone()))
        .unwrap_or_else(|| obj.name_any());
    let eff = effective::cluster(&obj.spec, &ctx.config.defaults);
    let drift_interval = eff
        .drift_interval_seconds
        .map(|s| Duration::from_secs(s as u64));
    let shared = PassSettings {
        owner,
        paused,
        cluster_name: cluster_name.clone(),
        jobs: eff.jobs.clone(),
        drift_interval,
        drift_remediate: eff.drift_action == DriftAction::Remediate,
        identity: obj.spec.workspace.identity_ref.clone(),
        mutable: true,
        membership: None,
        after_apply_refresh: false,
        retain: eff.deletion_policy == DeletionPolicy::Retain,
    };
    let mut pass = match common::open(ctx, obj, &shared, now).await? {
        common::Opening::Done(action) => return Ok(action),
        common::Opening::Continue(p) => p,
    };

    let mut plans_list = plans::list(ctx, obj).await?;
    // Plans reported in this pass's bookkeeping: a blocked apply's
    // (`Destructive`), or a plan Job's under `applyPolicy: Manual` (an
    // empty plan needs no approval and makes none).
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
            &cluster_name,
            &o.record.name,
            &hash,
            plan,
            &plans_list,
            reason,
        )
        .await?;
        plans_list = plans::list(ctx, obj).await?;
    }
    // An approved plan's apply ends it.
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
            Outcome::Succeeded => Some(captf_api::plan::PlanPhase::Applied),
            Outcome::PlanChanged => Some(captf_api::plan::PlanPhase::Failed),
            _ => None,
        };
        if let Some(to) = to {
            plans::set_phase(ctx, p, to).await?;
            // Read again only after a change.
            changed_plans = true;
            let reason = if to == captf_api::plan::PlanPhase::Applied {
                events::PLAN_APPLIED
            } else {
                events::PLAN_CHANGED
            };
            pass::event(
                ctx,
                obj,
                to != captf_api::plan::PlanPhase::Applied,
                reason,
                "Plan",
                format!("TerraformPlan {plan_name}: {}", to.as_str()),
            )
            .await;
        }
    }
    if changed_plans {
        plans_list = plans::list(ctx, obj).await?;
    }

    if pass.active.is_some() {
        return ending::close_active(ctx, obj, &mut pass, now).await;
    }

    // State and outputs.
    let common::Stored {
        read,
        applied,
        attempt,
        ..
    } = common::read_stored(ctx, obj, &mut pass).await?;
    let mut provisioned = obj.provisioned();
    let mut health_pending = false;
    if let (Ok(state), Some(c)) = (&read, cluster.as_ref()) {
        let decoded = match pass::decode_outputs(Role::Cluster, state) {
            RoleOutputs::Cluster(d) => d,
            _ => unreachable!("cluster outputs decode as cluster outputs"),
        };
        let valid = common::outputs_valid(&decoded.verdict);
        ending::count_outputs_invalid(ctx, obj, &valid);
        pass.draft.set(conditions::OUTPUTS_VALID, &valid);
        let outputs = decoded
            .outputs
            .as_ref()
            .filter(|_| decoded.verdict.writable());
        let successful_apply = state.inputs_hash.is_some();
        let w = adapter::writes(
            obj,
            c,
            &OutputsReading {
                outputs,
                successful_apply,
                applied_endpoint_input_null: applied_endpoint_input_null(applied.as_ref()),
                provisioned: obj.provisioned(),
            },
        );
        if let Some(ep) = &w.control_plane_endpoint {
            let api: Api<TerraformCluster> = Api::namespaced(ctx.client.clone(), &ns);
            let patch = json!({
                "metadata": {"annotations": {annotations::ENDPOINT_SOURCE: annotations::ENDPOINT_SOURCE_MODULE}},
                "spec": {"controlPlaneEndpoint": ep},
            });
            api.patch(
                &obj.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
            pass::event(
                ctx,
                obj,
                false,
                events::CONTROL_PLANE_ENDPOINT_SET,
                "Outputs",
                format!(
                    "control plane endpoint {}:{}",
                    ep.host.clone().unwrap_or_default(),
                    ep.port.unwrap_or_default()
                ),
            )
            .await;
        }
        if let Some(fd) = &w.failure_domains {
            pass.draft.field("failureDomains", fd);
        }
        match &w.exports {
            ExportsWrite::Keep => {}
            ExportsWrite::Publish(v) => pass.draft.field("exports", v),
            ExportsWrite::ClearTooLarge => pass.draft.field("exports", Value::Null),
        }
        if w.provisioned && !provisioned {
            pass::event(
                ctx,
                obj,
                false,
                events::PROVISIONED,
                "Outputs",
                "infrastructure provisioned".into(),
            )
            .await;
        }
        provisioned = w.provisioned;
        if let Some(ea) = &w.endpoint_available {
            pass.draft.set(conditions::ENDPOINT_AVAILABLE, ea);
        }
        health_pending = common::record_health(&mut pass, provisioned, decoded.health.as_ref());
    } else if !provisioned {
        let v = common::not_yet_healthy(&pass);
        pass.draft.set(conditions::INFRASTRUCTURE_HEALTHY, &v);
    }
    pass.draft
        .field("initialization", json!({"provisioned": provisioned}));

    // Current inputs.
    let vars = common::variables(ctx, obj, Role::Cluster).await?;
    let current = match (&cluster, vars) {
        (Some(c), Ok(vars)) => {
            let inputs = RoleInputs::Cluster(adapter::inputs(
                obj,
                c,
                recorded_control_plane_initialized(attempt.as_ref()),
            ));
            let image = obj.spec.workspace.source.image.clone();
            match (
                render_root(&inputs, &vars),
                inputs_hash(&image, &inputs, &vars),
            ) {
                (Ok(root), Ok(hash)) => Some(common::Rendered {
                    files: (root.main_tf_json.clone(), root.tfvars_json.clone()),
                    hash,
                    image,
                }),
                (Err(e), _) => {
                    pass.draft.set(
                        conditions::DEPENDENCIES_READY,
                        &ConditionValue {
                            status: "False",
                            reason: reasons::INPUTS_TOO_LARGE,
                            message: e.to_string(),
                        },
                    );
                    None
                }
                (_, Err(e)) => {
                    pass.draft.set(
                        conditions::DEPENDENCIES_READY,
                        &ConditionValue {
                            status: "False",
                            reason: reasons::VARIABLES_INVALID,
                            message: e.to_string(),
                        },
                    );
                    None
                }
            }
        }
        (_, Err(c)) => {
            pass.draft.set(conditions::DEPENDENCIES_READY, &c);
            None
        }
        (None, _) => None,
    };

    // The destructive-plan guard: the newest apply of the current inputs
    // was blocked → wait for the approval of its plan.
    let mut gate = ApplyGate::Open;
    if let Some(cur) = &current {
        if !pass.deleting() {
            let mut changed = plans::supersede_moot(ctx, &plans_list, &cur.hash).await?;
            if eff.apply_policy == ApplyPolicy::Automatic {
                // Back to Automatic: a waiting Manual plan is moot.
                for p in plans_list
                    .iter()
                    .filter(|p| p.spec.reason == PlanReason::Manual)
                    .filter(|p| plans::live_plan(std::slice::from_ref(p)).is_some())
                {
                    plans::set_phase(ctx, p, captf_api::plan::PlanPhase::Superseded).await?;
                    changed = true;
                }
            }
            if changed {
                plans_list = plans::list(ctx, obj).await?;
            }
        }
        if eff.apply_policy == ApplyPolicy::Manual {
            gate = ApplyGate::Manual(manual_plan(&pass, &plans_list, &cur.hash));
        } else if let Some(newest) = pass.loaded.newest_apply_for(&cur.hash)
            && newest.record.outcome == Outcome::Blocked
        {
            let approval = plans::live_plan(&plans_list)
                .filter(|p| p.spec.inputs_hash == cur.hash && p.spec.approved == Some(true))
                .map(|p| Approval::ExpectPlan(p.spec.plan_hash.clone()));
            gate = ApplyGate::Blocked(approval);
        }
    }
    let live = plans::live_plan(&plans_list).map(|p| p.name_any());
    pass.draft
        .field("pendingPlanRef", live.as_ref().map(|n| json!({"name": n})));

    // A deleting cluster waits for its machines and pools.
    if pass.deleting() {
        let deps = dependents(ctx, &ns, &cluster_name).await?;
        if !deps.is_empty() {
            pass.draft.set(
                conditions::DELETION_BLOCKED,
                &ConditionValue {
                    status: "True",
                    reason: reasons::DEPENDENTS_EXIST,
                    message: format!("waiting for {} to be deleted", deps.join(", ")),
                },
            );
            return ending::close(ctx, obj, &mut pass, Some(DEPENDENTS_REQUEUE)).await;
        }
        pass.draft.set(
            conditions::DELETION_BLOCKED,
            &ConditionValue {
                status: "False",
                reason: reasons::NOT_BLOCKED,
                message: "no machine or pool of the cluster remains".into(),
            },
        );
    }

    next_op::settle_adopted_state(&mut pass, &read, current.as_ref());
    let decision = next_op::decide_op(
        obj,
        &pass,
        &read,
        current.as_ref(),
        gate,
        health_pending,
        provisioned,
        now,
    );
    tracing::info!(namespace = %ns, name = %obj.name_any(), reason = %decision.reason_label(), op = decision.op_label(), "decided");
    ending::count_decision(ctx, obj, &decision);
    match decision.action.clone() {
        Decided::Start {
            op,
            approval,
            remediation,
        } => {
            let Some(req) = next_op::start_request(
                obj,
                &pass,
                &read,
                op,
                remediation,
                current.as_ref(),
                applied.as_ref(),
                attempt.as_ref(),
            ) else {
                return ending::close(ctx, obj, &mut pass, decision.requeue).await;
            };
            let mut req = req;
            if op == Op::Plan {
                req.plan_key_secret = Some(pass::ensure_plan_key(ctx, obj).await?);
            }
            if op == Op::Apply {
                // Every cluster apply is guarded; an approval binds the plan.
                let expect = match &approval {
                    Some(Approval::ExpectPlan(h)) => Some(h.clone()),
                    _ => None,
                };
                if let Some(p) = expect
                    .as_ref()
                    .and_then(|h| plans::live_plan(&plans_list).filter(|p| &p.spec.plan_hash == h))
                {
                    req.annotations
                        .insert(annotations::APPROVED_PLAN.to_owned(), p.name_any());
                }
                req.guard = Some(Guard {
                    inputs_hash: req.inputs_hash.clone(),
                    allow_deletes_hash: None,
                    expect_plan: expect,
                });
                req.plan_key_secret = Some(pass::ensure_plan_key(ctx, obj).await?);
            }
            ending::start_job(ctx, obj, &mut pass, req, &decision, now).await
        }
        Decided::DropFinalizer => ending::release_after_destroy(ctx, obj, &mut pass).await,
        Decided::Retain => ending::retain_and_release(ctx, obj, &mut pass).await,
        Decided::Wait => {
            if decision.reason == crate::engine::decide::Reason::PlanAwaitingApproval {
                let plan = live.clone().unwrap_or_default();
                pass.draft.set(conditions::APPLY_JOB_SUCCEEDED, &ConditionValue {
                    status: "Unknown",
                    reason: reasons::PLAN_AWAITING_APPROVAL,
                    message: format!(
                        "applyPolicy is Manual: TerraformPlan {plan} waits for approval; review it, then: kubectl patch terraformplan {plan} -n {ns} --type merge -p '{{\"spec\":{{\"approved\":true}}}}'"
                    ),
                });
            }
            if decision.reason == crate::engine::decide::Reason::DestructivePlanBlocked {
                let plan = live.clone().unwrap_or_default();
                pass.draft.set(conditions::APPLY_JOB_SUCCEEDED, &ConditionValue {
                    status: "False",
                    reason: reasons::DESTRUCTIVE_PLAN_BLOCKED,
                    message: format!(
                        "the apply stopped before a plan that deletes or replaces resources; nothing was applied; approve TerraformPlan {plan} (spec.approved=true) to apply it"
                    ),
                });
            }
            ending::close(ctx, obj, &mut pass, decision.requeue).await
        }
    }
}
