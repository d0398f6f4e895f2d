//! The TerraformMachinePool pass.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use captf_api::common::{DeletionPolicy, DriftAction};
use captf_api::names::{annotations, conditions, events, kinds};
use captf_api::{TerraformCluster, TerraformMachinePool, effective};
use captf_contract::Role;
use captf_contract::outputs::RoleOutputs;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::common::{self, PassSettings};
use super::ending;
use super::exports::{self, Built, ExportsGuard};
use super::next_op;
use super::pass;
use super::pool_outputs;
use super::routing::{self, Dependency, Dependent};
use super::watches;
use super::workload::Workload;
use super::{Context, Error};
use crate::adapters::pool::{self as adapter, BootstrapSecret, ClusterState, GateInput};
use crate::adapters::{capi_owner_ref, cluster_name_label};
use crate::capi::{self, Cluster, MachinePool};
use crate::engine::decide::{Action as Decided, ApplyGate, Membership, Op};
use crate::names::{WorkloadKind, state_suffix};

/// What the pool's dependencies read.
struct Deps {
    mp: Option<MachinePool>,
    cluster: Option<Cluster>,
    tc: Option<TerraformCluster>,
    bootstrap: Option<BootstrapSecret>,
}

fn dependent(obj: &TerraformMachinePool) -> Dependent {
    Dependent {
        kind: kinds::TERRAFORM_MACHINE_POOL,
        namespace: obj.namespace().unwrap_or_default(),
        name: obj.name_any(),
    }
}

/// What the pass depends on beyond its owners: its own state, the
/// TerraformCluster, the bootstrap data Secret and the variables sources.
fn dependencies_of(
    obj: &TerraformMachinePool,
    mp: Option<&MachinePool>,
    tc: Option<&str>,
) -> BTreeSet<Dependency> {
    let ns = obj.namespace().unwrap_or_default();
    let mut deps = BTreeSet::from([Dependency::State {
        namespace: ns.clone(),
        suffix: state_suffix(WorkloadKind::MachinePool, &ns, &obj.name_any()),
    }]);
    if let Some(name) = cluster_name_label(&obj.metadata) {
        deps.insert(Dependency::Cluster {
            namespace: ns.clone(),
            name: name.to_owned(),
        });
    }
    if let Some(name) = tc {
        deps.insert(Dependency::TerraformCluster {
            namespace: ns.clone(),
            name: name.to_owned(),
        });
    }
    if let Some(name) =
        mp.and_then(|mp| mp.spec.template.spec.bootstrap.data_secret_name.as_deref())
    {
        deps.insert(Dependency::Secret {
            namespace: ns.clone(),
            name: name.to_owned(),
        });
    }
    deps.extend(routing::variables_sources(&ns, &obj.spec.workspace));
    deps
}

/// Reads the MachinePool, Cluster, TerraformCluster and bootstrap data
/// from the controller's caches (no request), recording each as a
/// dependency first.
async fn dependencies(ctx: &Context, obj: &TerraformMachinePool) -> Result<Deps, Error> {
    let stores = ctx
        .pool_stores
        .get()
        .expect("the pool controller sets its stores before its first pass");
    stores.ready().await;
    let ns = obj.namespace().unwrap_or_default();
    let mp = capi_owner_ref(&obj.metadata, capi::MACHINE_POOL_KIND)
        .and_then(|r| {
            watches::get(
                &stores.machine_pools,
                &capi::machine_pool_resource(),
                &ns,
                &r.name,
            )
        })
        .and_then(|d| MachinePool::from_dynamic(&d).ok());
    let cluster = cluster_name_label(&obj.metadata)
        .and_then(|name| watches::get(&stores.clusters, &capi::cluster_resource(), &ns, name))
        .and_then(|d| Cluster::from_dynamic(&d).ok());
    let tc_name = cluster.as_ref().and_then(adapter::terraform_cluster_name);
    ctx.dependents
        .record(dependent(obj), dependencies_of(obj, mp.as_ref(), tc_name));
    let tc = tc_name.and_then(|name| watches::get(&stores.terraform_clusters, &(), &ns, name));
    let bootstrap_name = mp
        .as_ref()
        .and_then(|mp| mp.spec.template.spec.bootstrap.data_secret_name.clone());
    let bootstrap = match bootstrap_name {
        None => None,
        // Cached when labeled with its cluster's name, as Cluster API's
        // bootstrap providers label it; else read live.
        Some(name) => match watches::get(&stores.bootstrap_secrets, &(), &ns, &name) {
            Some(s) => Some(s),
            None => {
                Api::<Secret>::namespaced(ctx.client.clone(), &ns)
                    .get_opt(&name)
                    .await?
            }
        },
    }
    .map(|s| {
        let data = s.data.unwrap_or_default();
        BootstrapSecret {
            value: data.get("value").map(|b| b.0.clone()),
            format: data
                .get("format")
                .and_then(|b| String::from_utf8(b.0.clone()).ok()),
        }
    });
    Ok(Deps {
        mp,
        cluster,
        tc,
        bootstrap,
    })
}

pub async fn reconcile(obj: Arc<TerraformMachinePool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ctx = &*ctx;
    let now = SystemTime::now();
    let ns = obj.namespace().unwrap_or_default();
    ctx.passes
        .count(kinds::TERRAFORM_MACHINE_POOL, &ns, &obj.name_any());
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
    let shared = PassSettings {
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
        common::Opening::Done(action) => return Ok(action),
        common::Opening::Continue(p) => p,
    };
    if pass.active.is_some() {
        return ending::close_active(ctx, obj, &mut pass, now).await;
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
        let plan = pool_outputs::plan_outputs(obj, state, provisioned);
        if let Some(patch) = &plan.spec_patch {
            let api: Api<TerraformMachinePool> = Api::namespaced(ctx.client.clone(), &ns);
            api.patch(
                &obj.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await?;
        }
        if let (Some(replicas), Some(instances)) = (plan.replicas, &plan.instances) {
            pass.draft.field("replicas", replicas);
            pass.draft.field("instances", instances);
            observed_replicas = Some(replicas);
        }
        ending::count_outputs_invalid(ctx, obj, &plan.outputs_valid);
        pass.draft
            .set(conditions::OUTPUTS_VALID, &plan.outputs_valid);
        provisioned = plan.provisioned;
        if plan.newly_provisioned {
            let note = "machine pool provisioned".to_owned();
            pass::event(ctx, obj, false, events::PROVISIONED, "Outputs", note).await;
        }
        health_pending = common::record_health(&mut pass, provisioned, plan.health.as_ref());
    } else if !provisioned {
        let v = common::not_yet_healthy(&pass);
        pass.draft.set(conditions::INFRASTRUCTURE_HEALTHY, &v);
    }
    pass.draft
        .field("initialization", json!({"provisioned": provisioned}));
    pass.draft.field("ready", provisioned);

    // Autoscaling mode: the module owns the count; write it back.
    if let Some(mp) = deps.mp.as_ref().filter(|_| !pass.deleting()) {
        let plan = pool_outputs::plan_replicas(mp, observed_replicas);
        pass.draft
            .set(conditions::AUTOSCALING_ACTIVE, &plan.condition);
        if let Some(r) = plan.written_back {
            let (reason, note) = pool_outputs::written_back_note(r);
            pass::event(ctx, obj, false, reason, "Outputs", note).await;
        }
        if let Some(patch) = &plan.machine_pool_patch {
            let api: Api<DynamicObject> =
                Api::namespaced_with(ctx.client.clone(), &ns, &capi::machine_pool_resource());
            let name = mp.metadata.name.as_deref().unwrap_or_default();
            api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
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
        match adapter::gates(&GateInput {
            terraform_cluster: deps.tc.as_ref(),
            cluster_state,
            machine_pool: mp,
            bootstrap_secret: deps.bootstrap.as_ref(),
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
        return ending::close(ctx, obj, &mut pass, Some(Duration::from_secs(15))).await;
    }

    next_op::settle_adopted_state(&mut pass, &read, current.as_ref());
    let decision = next_op::decide_op(
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
    ending::count_decision(ctx, obj, &decision);
    match decision.action.clone() {
        Decided::Start {
            op, remediation, ..
        } => {
            if op == Op::Apply && current.is_none() {
                return ending::close(ctx, obj, &mut pass, Some(Duration::from_secs(15))).await;
            }
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
            if let (Op::Apply, Some(g)) = (op, &guard) {
                g.prepare_apply(&mut req);
            }
            ending::start_job(ctx, obj, &mut pass, req, &decision, now).await
        }
        Decided::DropFinalizer => ending::release_after_destroy(ctx, obj, &mut pass).await,
        Decided::Retain => ending::retain_and_release(ctx, obj, &mut pass).await,
        Decided::Wait => ending::close(ctx, obj, &mut pass, decision.requeue).await,
    }
}
