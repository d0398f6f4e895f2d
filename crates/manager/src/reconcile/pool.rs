//! The TerraformMachinePool pass.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use captf_api::common::{DeletionPolicy, DriftAction};
use captf_api::names::{annotations, conditions, events, kinds, labels, reasons};
use captf_api::{TerraformCluster, TerraformMachinePool, effective};
use captf_contract::Role;
use captf_contract::outputs::RoleOutputs;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::common::{self, Shared};
use super::exports::{self, Built, ExportsGuard};
use super::pass;
use super::workload::Workload;
use super::{Context, ERROR_REQUEUE, Error};
use crate::adapters::pool::{self as adapter, BootstrapSecret, ClusterState, GateInput};
use crate::adapters::{capi_owner_ref, cluster_name_label};
use crate::capi::{self, Cluster, MachinePool};
use crate::engine::decide::{Action as Decided, ApplyGate, Membership, Op};
use crate::engine::job_conditions::ConditionValue;
use crate::names::{WorkloadKind, state_suffix};

async fn get_dynamic(
    ctx: &Context,
    ns: &str,
    ar: &kube::api::ApiResource,
    name: &str,
) -> Result<Option<DynamicObject>, Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, ar);
    Ok(api.get_opt(name).await?)
}

/// What the pool's dependencies read.
struct Deps {
    mp: Option<MachinePool>,
    cluster: Option<Cluster>,
    tc: Option<TerraformCluster>,
}

async fn dependencies(ctx: &Context, obj: &TerraformMachinePool) -> Result<Deps, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let mp = match capi_owner_ref(&obj.metadata, capi::MACHINE_POOL_KIND) {
        Some(r) => get_dynamic(ctx, &ns, &capi::machine_pool_resource(), &r.name)
            .await?
            .and_then(|d| MachinePool::from_dynamic(&d).ok()),
        None => None,
    };
    let cluster = match cluster_name_label(&obj.metadata) {
        Some(name) => get_dynamic(ctx, &ns, &capi::cluster_resource(), name)
            .await?
            .and_then(|d| Cluster::from_dynamic(&d).ok()),
        None => None,
    };
    let tc = match cluster.as_ref().and_then(adapter::terraform_cluster_name) {
        Some(name) => {
            Api::<TerraformCluster>::namespaced(ctx.client.clone(), &ns)
                .get_opt(name)
                .await?
        }
        None => None,
    };
    Ok(Deps { mp, cluster, tc })
}

async fn bootstrap_secret(
    ctx: &Context,
    ns: &str,
    mp: &MachinePool,
) -> Result<Option<BootstrapSecret>, Error> {
    let Some(name) = mp.spec.template.spec.bootstrap.data_secret_name.as_deref() else {
        return Ok(None);
    };
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), ns)
        .get_opt(name)
        .await?;
    Ok(secret.map(|s| {
        let data = s.data.unwrap_or_default();
        BootstrapSecret {
            value: data.get("value").map(|b| b.0.clone()),
            format: data
                .get("format")
                .and_then(|b| String::from_utf8(b.0.clone()).ok()),
        }
    }))
}

pub async fn reconcile(obj: Arc<TerraformMachinePool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ctx = &*ctx;
    let now = SystemTime::now();
    let ns = obj.namespace().unwrap_or_default();
    let deps = dependencies(ctx, obj).await?;
    let owner = adapter::owner(&obj.metadata, deps.mp.as_ref(), deps.cluster.as_ref());
    let paused = obj.annotations().contains_key(annotations::PAUSED)
        || deps.cluster.as_ref().is_some_and(Cluster::paused);
    let cluster_name = cluster_name_label(&obj.metadata)
        .map(str::to_owned)
        .unwrap_or_default();
    let eff = effective::machine_pool(
        &obj.spec,
        deps.tc.as_ref().map(|t| &t.spec),
        &ctx.config.defaults,
    );
    let status = obj.status.as_ref();
    let list_len = obj.spec.provider_id_list.as_ref().map_or(0, Vec::len);
    let shared = Shared {
        owner,
        paused,
        cluster_name: cluster_name.clone(),
        jobs: eff.jobs.clone(),
        drift_interval: Some(Duration::from_secs(eff.drift_interval_seconds.max(1) as u64)),
        drift_remediate: eff.drift_action == DriftAction::Remediate,
        identity: eff.identity.clone(),
        mutable: true,
        membership: Some(Membership {
            converging: adapter::membership_converging(list_len, status.and_then(|s| s.replicas)),
            interval: Duration::from_secs(eff.membership_refresh_interval_seconds.max(1) as u64),
        }),
        after_apply_refresh: true,
        retain: eff.deletion_policy == DeletionPolicy::Retain,
    };
    let mut pass = match common::open(ctx, obj, &shared, now).await? {
        common::Opened::Done(action) => return Ok(action),
        common::Opened::Pass(p) => p,
    };
    if pass.active.is_some() {
        return common::close_active(ctx, obj, &mut pass, now).await;
    }

    // The pool's own state and outputs.
    let common::Stored {
        read,
        applied,
        attempt,
        ever_applied,
    } = common::read_stored(ctx, obj, &mut pass).await?;
    let mut provisioned = obj.provisioned();
    let mut health_pending = false;
    let mut observed_replicas = status.and_then(|s| s.replicas);
    if let Ok(state) = &read {
        let decoded = match pass::decode_outputs(Role::MachinePool, state) {
            RoleOutputs::MachinePool(d) => d,
            _ => unreachable!("pool outputs decode as pool outputs"),
        };
        let outputs = decoded
            .outputs
            .as_ref()
            .filter(|_| decoded.verdict.writable());
        let mut valid = common::outputs_valid(&decoded.verdict);
        if let Some(o) = outputs {
            let w = adapter::writes(o, false);
            if w.instances_truncated {
                valid = ConditionValue {
                    status: "True",
                    reason: reasons::INSTANCES_TRUNCATED,
                    message: "more instances than status.instances holds".into(),
                };
            }
            let spec_list = obj.spec.provider_id_list.clone().unwrap_or_default();
            if spec_list != w.provider_id_list || obj.spec.provider_id != w.provider_id {
                let api: Api<TerraformMachinePool> = Api::namespaced(ctx.client.clone(), &ns);
                let patch = json!({"spec": {"providerID": w.provider_id, "providerIDList": w.provider_id_list}});
                api.patch(
                    &obj.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
            }
            pass.draft.field("replicas", w.replicas);
            pass.draft.field("instances", &w.instances);
            observed_replicas = Some(w.replicas);
        }
        common::count_outputs_invalid(ctx, obj, &valid);
        pass.draft.set(conditions::OUTPUTS_VALID, &valid);
        let was = provisioned;
        provisioned = adapter::provisioned(provisioned, state.inputs_hash.is_some(), outputs);
        if provisioned && !was {
            pass::event(
                ctx,
                obj,
                false,
                events::PROVISIONED,
                "Outputs",
                "machine pool provisioned".into(),
            )
            .await;
        }
        health_pending = common::record_health(&mut pass, provisioned, decoded.health.as_ref());
    } else if !provisioned {
        let v = common::not_yet_healthy(&pass);
        pass.draft.set(conditions::INFRASTRUCTURE_HEALTHY, &v);
    }
    pass.draft
        .field("initialization", json!({"provisioned": provisioned}));
    pass.draft.field("ready", provisioned);

    // Autoscaling mode: the module owns the count; write it back.
    if let Some(mp) = deps.mp.as_ref().filter(|_| !pass.deleting()) {
        let sync = adapter::replicas_sync(mp, observed_replicas);
        pass.draft
            .set(conditions::AUTOSCALING_ACTIVE, &sync.condition);
        let mut patch = serde_json::Map::new();
        if sync.claim {
            patch.insert("metadata".into(), json!({"annotations": {annotations::REPLICAS_MANAGED_BY: annotations::REPLICAS_MANAGER}}));
        } else if sync.release {
            patch.insert(
                "metadata".into(),
                json!({"annotations": {annotations::REPLICAS_MANAGED_BY: Value::Null}}),
            );
        }
        if let Some(r) = sync.replicas.filter(|r| mp.spec.replicas != Some(*r)) {
            patch.insert("spec".into(), json!({"replicas": r}));
            pass::event(
                ctx,
                obj,
                false,
                events::REPLICAS_WRITTEN_BACK,
                "Outputs",
                format!("MachinePool.spec.replicas set to {r}"),
            )
            .await;
        }
        if !patch.is_empty() {
            let api: Api<DynamicObject> =
                Api::namespaced_with(ctx.client.clone(), &ns, &capi::machine_pool_resource());
            api.patch(
                mp.metadata.name.as_deref().unwrap_or_default(),
                &PatchParams::default(),
                &Patch::Merge(&Value::Object(patch)),
            )
            .await?;
        }
    }

    // Current inputs, through the dependency gates.
    let mut built = None;
    if let (Some(mp), Some(cluster)) = (&deps.mp, &deps.cluster) {
        let tc_state;
        let cluster_outputs;
        let cluster_state = match &deps.tc {
            Some(tc) => {
                let suffix = state_suffix(WorkloadKind::Cluster, &ns, &tc.name_any());
                tc_state = crate::io::state::read_state(&ctx.client, &ns, &suffix).await?;
                match &tc_state {
                    Ok(s) => match pass::decode_outputs(Role::Cluster, s) {
                        RoleOutputs::Cluster(d) if d.verdict.writable() && d.outputs.is_some() => {
                            cluster_outputs = d.outputs.unwrap();
                            ClusterState::Outputs(&cluster_outputs)
                        }
                        _ => {
                            ClusterState::Unreadable("the TerraformCluster's outputs are not valid")
                        }
                    },
                    Err(_) => {
                        ClusterState::Unreadable("the TerraformCluster's state cannot be read")
                    }
                }
            }
            None => ClusterState::Unreadable("no TerraformCluster"),
        };
        let bootstrap = bootstrap_secret(ctx, &ns, mp).await?;
        match adapter::gates(&GateInput {
            terraform_cluster: deps.tc.as_ref(),
            cluster_state,
            machine_pool: mp,
            bootstrap_secret: bootstrap.as_ref(),
        }) {
            Err(c) => pass.draft.set(conditions::DEPENDENCIES_READY, &c),
            Ok(d) => match common::variables(ctx, obj, Role::MachinePool).await? {
                Err(c) => pass.draft.set(conditions::DEPENDENCIES_READY, &c),
                Ok(vars) => {
                    built = Some(Built {
                        inputs: adapter::inputs(obj, mp, cluster, &d),
                        vars,
                        image: obj.spec.workspace.source.image.clone(),
                    });
                }
            },
        }
    }

    // The inputs render; the exports guard may hold a change of the
    // cluster's exports and render the exports last applied instead.
    let mut guard = None;
    let mut current = None;
    if let Some(b) = &built {
        let rendered = match exports::render(b) {
            Ok(full) => {
                let (g, held) = exports::apply_guard(
                    ctx,
                    obj,
                    &mut pass,
                    b,
                    &read,
                    applied.as_ref(),
                    attempt.as_ref(),
                    ever_applied,
                )
                .await?;
                guard = Some(g);
                match held {
                    Some(h) => exports::render(&h),
                    None => Ok(full),
                }
            }
            Err(c) => Err(c),
        };
        match rendered {
            Ok(r) => {
                pass.draft.set(
                    conditions::DEPENDENCIES_READY,
                    &crate::adapters::dependencies_ready(),
                );
                current = Some(r);
            }
            Err(c) => {
                guard = None;
                pass.draft.set(conditions::DEPENDENCIES_READY, &c);
            }
        }
    }
    if current.is_none() && !pass.deleting() && !ever_applied {
        // Nothing can run before the dependencies are there.
        return common::close(ctx, obj, &mut pass, Some(Duration::from_secs(15))).await;
    }

    common::settle_adopted_state(&mut pass, &read, current.as_ref());
    let decision = common::decide(
        obj,
        &pass,
        &read,
        current.as_ref(),
        guard.as_ref().map_or(ApplyGate::Open, ExportsGuard::gate),
        health_pending,
        provisioned,
        now,
    );
    tracing::info!(namespace = %ns, name = %obj.name_any(), reason = %decision.reason_label(), op = decision.op_label(), "decided");
    common::count_decision(ctx, obj, &decision);
    match decision.action.clone() {
        Decided::Start {
            op, remediation, ..
        } => {
            if op == Op::Apply && current.is_none() {
                return common::close(ctx, obj, &mut pass, Some(Duration::from_secs(15))).await;
            }
            let Some(req) = common::start_request(
                ctx,
                obj,
                &pass,
                &read,
                op,
                remediation,
                current.as_ref(),
                applied.as_ref(),
                attempt.as_ref(),
            )
            .await?
            else {
                return common::close(ctx, obj, &mut pass, decision.requeue).await;
            };
            let mut req = req;
            if let (Op::Apply, Some(g)) = (op, &guard) {
                g.prepare_apply(&mut req);
            }
            common::start(ctx, obj, &mut pass, req, &decision, now).await
        }
        Decided::DropFinalizer => common::release(ctx, obj, &mut pass).await,
        Decided::Retain => common::retain_and_release(ctx, obj, &mut pass).await,
        Decided::Wait => common::close(ctx, obj, &mut pass, decision.requeue).await,
    }
}

fn error_policy(obj: Arc<TerraformMachinePool>, err: &Error, _ctx: Arc<Context>) -> Action {
    if err.is_conflict() {
        tracing::debug!(name = %obj.name_any(), "write conflict; retrying");
        return Action::requeue(Duration::from_millis(200));
    }
    tracing::warn!(name = %obj.name_any(), namespace = ?obj.namespace(), error = %err, "reconcile failed; retrying");
    Action::requeue(ERROR_REQUEUE)
}

/// Runs the TerraformMachinePool controller until `shutdown` resolves.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let (pools, jobs, mps, tcs, secrets) = match &ctx.config.namespace {
        Some(ns) => (
            Api::<TerraformMachinePool>::namespaced(ctx.client.clone(), ns),
            Api::<Job>::namespaced(ctx.client.clone(), ns),
            Api::<DynamicObject>::namespaced_with(
                ctx.client.clone(),
                ns,
                &capi::machine_pool_resource(),
            ),
            Api::<TerraformCluster>::namespaced(ctx.client.clone(), ns),
            Api::<Secret>::namespaced(ctx.client.clone(), ns),
        ),
        None => (
            Api::all(ctx.client.clone()),
            Api::all(ctx.client.clone()),
            Api::all_with(ctx.client.clone(), &capi::machine_pool_resource()),
            Api::all(ctx.client.clone()),
            Api::all(ctx.client.clone()),
        ),
    };
    let controller = Controller::new(pools, watcher::Config::default());
    let by_cluster = controller.store();
    let by_secret = controller.store();
    let (by_variables_cm, by_variables_secret) = (controller.store(), controller.store());
    let (config_maps, variable_secrets) = match &ctx.config.namespace {
        Some(ns) => (
            Api::<ConfigMap>::namespaced(ctx.client.clone(), ns),
            Api::<Secret>::namespaced(ctx.client.clone(), ns),
        ),
        None => (Api::all(ctx.client.clone()), Api::all(ctx.client.clone())),
    };
    controller
        .watches(
            config_maps,
            super::controllers::variable_sources(),
            move |c| {
                super::controllers::variable_users(
                    by_variables_cm.state(),
                    c.namespace(),
                    &c.name_any(),
                    false,
                )
            },
        )
        .watches(
            variable_secrets,
            super::controllers::variable_sources(),
            move |s| {
                super::controllers::variable_users(
                    by_variables_secret.state(),
                    s.namespace(),
                    &s.name_any(),
                    true,
                )
            },
        )
        .owns(
            jobs,
            watcher::Config::default().labels(&format!("{}=true", labels::MANAGED)),
        )
        .watches_with(
            mps,
            capi::machine_pool_resource(),
            watcher::Config::default(),
            |mp| {
                super::controllers::infrastructure_ref::<TerraformMachinePool>(
                    &mp,
                    kinds::TERRAFORM_MACHINE_POOL,
                )
            },
        )
        .watches(tcs, watcher::Config::default(), move |tc| {
            // The cluster's pools look again when it changes (exports).
            let cluster = tc
                .labels()
                .get(labels::CLUSTER_NAME)
                .cloned()
                .unwrap_or_else(|| tc.name_any());
            by_cluster
                .state()
                .into_iter()
                .filter(|p| {
                    p.namespace() == tc.namespace()
                        && cluster_name_label(&p.metadata) == Some(cluster.as_str())
                })
                .map(|p| ObjectRef::from_obj(&*p))
                .collect::<Vec<_>>()
        })
        .watches(
            secrets,
            watcher::Config::default().labels(labels::CLUSTER_NAME),
            move |s| {
                // A bootstrap data rotation: the cluster's pools look again.
                let cluster = s
                    .labels()
                    .get(labels::CLUSTER_NAME)
                    .cloned()
                    .unwrap_or_default();
                by_secret
                    .state()
                    .into_iter()
                    .filter(|p| {
                        p.namespace() == s.namespace()
                            && cluster_name_label(&p.metadata) == Some(cluster.as_str())
                    })
                    .map(|p| ObjectRef::from_obj(&*p))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}
