//! The TerraformCluster pass.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use captf_api::TerraformCluster;
use captf_api::common::{DeletionPolicy, DriftAction};
use captf_api::effective;
use captf_api::names::{annotations, conditions, events, kinds, labels, reasons};
use captf_api::plan::TerraformPlan;
use captf_api::{TerraformMachine, TerraformMachinePool};
use captf_contract::outputs::RoleOutputs;
use captf_contract::{Role, RoleInputs, inputs_hash, render_root};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::common::{self, OpenPass, PassSettings};
use super::ending;
use super::next_op;
use super::pass;
use super::plan_flow;
use super::plans;
use super::quiet;
use super::routing::{self, Dependency, Dependent};
use super::workload::Workload;
use super::{Context, Error};
use crate::adapters::cluster::{self as adapter, ExportsWrite, OutputsReading};
use crate::adapters::{capi_owner_ref, cluster_name_label};
use crate::capi::{self, Cluster};
use crate::engine::decide::{Action as Decided, Approval, Decision, Op};
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

/// The cluster's settings for the shared stages.
fn settings(
    obj: &TerraformCluster,
    cluster: Option<&Cluster>,
    eff: &effective::EffectiveCluster,
) -> PassSettings {
    let cluster_name = cluster
        .and_then(|c| c.metadata.name.clone())
        .or_else(|| cluster_name_label(&obj.metadata).map(str::to_owned))
        .or_else(|| capi_owner_ref(&obj.metadata, capi::CLUSTER_KIND).map(|r| r.name.clone()))
        .unwrap_or_else(|| obj.name_any());
    PassSettings {
        owner: adapter::owner(&obj.metadata, cluster),
        paused: obj.annotations().contains_key(annotations::PAUSED)
            || cluster.is_some_and(Cluster::paused),
        cluster_name,
        jobs: eff.jobs.clone(),
        drift_interval: eff
            .drift_interval_seconds
            .map(|s| Duration::from_secs(s as u64)),
        drift_remediate: eff.drift_action == DriftAction::Remediate,
        identity: obj.spec.workspace.identity_ref.clone(),
        mutable: true,
        membership: None,
        after_apply_refresh: false,
        retain: eff.deletion_policy == DeletionPolicy::Retain,
    }
}

/// The pass: the owner Cluster, the shared opening stages, the plans its
/// bookkeeping reported, outputs, current inputs, the plan gate, the wait
/// for dependents on deletion, the decision and what it starts.
pub async fn reconcile(obj: Arc<TerraformCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ctx = &*ctx;
    let now = SystemTime::now();
    let ns = obj.namespace().unwrap_or_default();
    record_dependencies(ctx, obj);
    let eff = effective::cluster(&obj.spec, &ctx.config.defaults);
    if let Some(action) = quiet::resync(ctx, obj, obj.spec.workspace.identity_ref.as_ref()).await? {
        return Ok(action);
    }
    quiet::unsettle(ctx, obj);
    ctx.passes
        .count(kinds::TERRAFORM_CLUSTER, &ns, &obj.name_any());
    let cluster = owner_cluster(ctx, obj).await?;
    let settings = settings(obj, cluster.as_ref(), &eff);
    let mut pass = match common::open(ctx, obj, &settings, now).await? {
        common::Opening::Done(action) => return Ok(action),
        common::Opening::Continue(p) => p,
    };
    let mut plans_list = plan_flow::bookkeep_plans(ctx, obj, &pass, &settings.cluster_name).await?;
    if pass.active.is_some() {
        return ending::close_active(ctx, obj, &mut pass, now).await;
    }
    let stored = common::read_stored(ctx, obj, &mut pass).await?;
    let (provisioned, health_pending) =
        apply_outputs(ctx, obj, &mut pass, &stored, cluster.as_ref()).await?;
    let current = current_inputs(
        ctx,
        obj,
        &mut pass,
        cluster.as_ref(),
        stored.attempt.as_ref(),
    )
    .await?;
    let gate = plan_flow::plan_gate(
        ctx,
        obj,
        &pass,
        &mut plans_list,
        current.as_ref(),
        eff.apply_policy,
    )
    .await?;
    let live = plans::live_plan(&plans_list).map(|p| p.name_any());
    pass.draft
        .field("pendingPlanRef", live.as_ref().map(|n| json!({"name": n})));
    if pass.deleting()
        && let Some(action) =
            wait_for_dependents(ctx, obj, &mut pass, &settings.cluster_name).await?
    {
        return Ok(action);
    }
    next_op::settle_adopted_state(&mut pass, &stored.read, current.as_ref());
    let decision = next_op::decide_op(
        obj,
        &pass,
        &stored.read,
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
            let start = Started {
                op,
                approval,
                remediation,
            };
            start_op(
                ctx,
                obj,
                &mut pass,
                &stored,
                current.as_ref(),
                start,
                &plans_list,
                &decision,
                now,
            )
            .await
        }
        Decided::DropFinalizer => ending::release_after_destroy(ctx, obj, &mut pass).await,
        Decided::Retain => ending::retain_and_release(ctx, obj, &mut pass).await,
        Decided::Wait => {
            plan_flow::explain_wait(&mut pass, &decision, live.as_deref(), &ns);
            ending::close(ctx, obj, &mut pass, decision.requeue).await
        }
    }
}

/// The cluster's outputs: the control plane endpoint to the spec, failure
/// domains, exports, the provisioned latch, `EndpointAvailable` and
/// `InfrastructureHealthy`. Returns (provisioned, health pending).
async fn apply_outputs(
    ctx: &Context,
    obj: &TerraformCluster,
    pass: &mut OpenPass,
    stored: &common::Stored,
    cluster: Option<&Cluster>,
) -> Result<(bool, bool), Error> {
    let mut provisioned = obj.provisioned();
    let mut health_pending = false;
    if let (Ok(state), Some(c)) = (&stored.read, cluster) {
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
                applied_endpoint_input_null: applied_endpoint_input_null(stored.applied.as_ref()),
                provisioned: obj.provisioned(),
            },
        );
        if let Some(ep) = &w.control_plane_endpoint {
            let api: Api<TerraformCluster> =
                Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
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
        health_pending = common::record_health(pass, provisioned, decoded.health.as_ref());
    } else if !provisioned {
        let v = common::not_yet_healthy(pass);
        pass.draft.set(conditions::INFRASTRUCTURE_HEALTHY, &v);
    }
    pass.draft
        .field("initialization", json!({"provisioned": provisioned}));
    Ok((provisioned, health_pending))
}

/// The cluster inputs, rendered with the variables; `None` with
/// `DependenciesReady` saying why when they cannot be.
async fn current_inputs(
    ctx: &Context,
    obj: &TerraformCluster,
    pass: &mut OpenPass,
    cluster: Option<&Cluster>,
    attempt: Option<&InputsRecord>,
) -> Result<Option<common::Rendered>, Error> {
    let vars = common::variables(ctx, obj, Role::Cluster).await?;
    let current = match (cluster, vars) {
        (Some(c), Ok(vars)) => {
            let inputs = RoleInputs::Cluster(adapter::inputs(
                obj,
                c,
                recorded_control_plane_initialized(attempt),
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
    Ok(current)
}

/// A deleting cluster waits for its machines and pools (`DeletionBlocked`).
async fn wait_for_dependents(
    ctx: &Context,
    obj: &TerraformCluster,
    pass: &mut OpenPass,
    cluster_name: &str,
) -> Result<Option<Action>, Error> {
    let deps = dependents(ctx, &obj.namespace().unwrap_or_default(), cluster_name).await?;
    if !deps.is_empty() {
        pass.draft.set(
            conditions::DELETION_BLOCKED,
            &ConditionValue {
                status: "True",
                reason: reasons::DEPENDENTS_EXIST,
                message: format!("waiting for {} to be deleted", deps.join(", ")),
            },
        );
        let action = ending::close(ctx, obj, pass, Some(DEPENDENTS_REQUEUE)).await?;
        return Ok(Some(action));
    }
    pass.draft.set(
        conditions::DELETION_BLOCKED,
        &ConditionValue {
            status: "False",
            reason: reasons::NOT_BLOCKED,
            message: "no machine or pool of the cluster remains".into(),
        },
    );
    Ok(None)
}

/// What the decision starts.
struct Started {
    op: Op,
    approval: Option<Approval>,
    remediation: bool,
}

/// Starts the decided op: a plan Job gets the plan key; every apply is
/// guarded, and an approval binds the approved plan.
#[allow(clippy::too_many_arguments)]
async fn start_op(
    ctx: &Context,
    obj: &TerraformCluster,
    pass: &mut OpenPass,
    stored: &common::Stored,
    current: Option<&common::Rendered>,
    start: Started,
    plans_list: &[TerraformPlan],
    decision: &Decision,
    now: SystemTime,
) -> Result<Action, Error> {
    let Started {
        op,
        approval,
        remediation,
    } = start;
    let Some(req) = next_op::start_request(
        obj,
        pass,
        &stored.read,
        op,
        remediation,
        current,
        stored.applied.as_ref(),
        stored.attempt.as_ref(),
    ) else {
        return ending::close(ctx, obj, pass, decision.requeue).await;
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
            .and_then(|h| plans::live_plan(plans_list).filter(|p| &p.spec.plan_hash == h))
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
    ending::start_job(ctx, obj, pass, req, decision, now).await
}
