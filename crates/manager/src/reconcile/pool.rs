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

use super::common::{self, OpenPass, PassSettings, Rendered};
use super::ending;
use super::exports::{self, Built, ExportsGuard};
use super::next_op;
use super::pass;
use super::pool_outputs;
use super::quiet;
use super::routing::{self, Dependency, Dependent};
use super::watches;
use super::workload::Workload;
use super::{Context, Error};
use crate::adapters::pool::{self as adapter, BootstrapSecret, ClusterState, GateInput};
use crate::adapters::{capi_owner_ref, cluster_name_label};
use crate::capi::{self, Cluster, MachinePool};
use crate::engine::decide::{Action as Decided, ApplyGate, Membership, Op};
use crate::names::{WorkloadKind, state_suffix};
use crate::state::reader::{StateError, StateSummary};

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

/// The pool's settings for the shared stages, from its spec, its
/// dependencies and the manager's defaults.
fn settings(ctx: &Context, obj: &TerraformMachinePool, deps: &Deps) -> PassSettings {
    let eff = effective::machine_pool(
        &obj.spec,
        deps.tc.as_ref().map(|t| &t.spec),
        &ctx.config.defaults,
    );
    let list_len = obj.spec.provider_id_list.as_ref().map_or(0, Vec::len);
    let replicas = obj.status.as_ref().and_then(|s| s.replicas);
    PassSettings {
        owner: adapter::owner(&obj.metadata, deps.mp.as_ref(), deps.cluster.as_ref()),
        paused: obj.annotations().contains_key(annotations::PAUSED)
            || deps.cluster.as_ref().is_some_and(Cluster::paused),
        cluster_name: cluster_name_label(&obj.metadata)
            .map(str::to_owned)
            .unwrap_or_default(),
        jobs: eff.jobs.clone(),
        drift_interval: Some(Duration::from_secs(eff.drift_interval_seconds.max(1) as u64)),
        drift_remediate: eff.drift_action == DriftAction::Remediate,
        identity: eff.identity.clone(),
        mutable: true,
        membership: Some(Membership {
            converging: adapter::membership_converging(list_len, replicas),
            interval: Duration::from_secs(eff.membership_refresh_interval_seconds.max(1) as u64),
        }),
        after_apply_refresh: true,
        retain: eff.deletion_policy == DeletionPolicy::Retain,
    }
}

/// The pass: dependencies from the caches, the shared opening stages, the
/// pool's outputs and write-back, its current inputs, the decision and
/// what it starts.
pub async fn reconcile(obj: Arc<TerraformMachinePool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ctx = &*ctx;
    let now = SystemTime::now();
    let ns = obj.namespace().unwrap_or_default();
    let deps = dependencies(ctx, obj).await?;
    let settings = settings(ctx, obj, &deps);
    if let Some(action) = quiet::resync(ctx, obj, settings.identity.as_ref()).await? {
        return Ok(action);
    }
    quiet::unsettle(ctx, obj);
    ctx.passes
        .count(kinds::TERRAFORM_MACHINE_POOL, &ns, &obj.name_any());
    let mut pass = match common::open(ctx, obj, &settings, now).await? {
        common::Opening::Done(action) => return Ok(action),
        common::Opening::Continue(p) => p,
    };
    if pass.active.is_some() {
        return ending::close_active(ctx, obj, &mut pass, now).await;
    }
    let stored = common::read_stored(ctx, obj, &mut pass).await?;
    let outputs = apply_outputs(ctx, obj, &mut pass, &stored.read).await?;
    write_back_replicas(ctx, obj, &mut pass, &deps, outputs.observed_replicas).await?;
    let built = current_inputs(ctx, obj, &mut pass, &deps).await?;
    let (current, guard) = render_current(ctx, obj, &mut pass, built, &stored).await?;
    if current.is_none() && !pass.deleting() && !stored.ever_applied {
        // Nothing can run before the dependencies are there.
        return ending::close(ctx, obj, &mut pass, Some(Duration::from_secs(15))).await;
    }
    next_op::settle_adopted_state(&mut pass, &stored.read, current.as_ref());
    let decision = next_op::decide_op(
        obj,
        &pass,
        &stored.read,
        current.as_ref(),
        guard.as_ref().map_or(ApplyGate::Open, ExportsGuard::gate),
        outputs.health_pending,
        outputs.provisioned,
        now,
    );
    tracing::info!(namespace = %ns, name = %obj.name_any(), reason = %decision.reason_label(), op = decision.op_label(), "decided");
    ending::count_decision(ctx, obj, &decision);
    let Decided::Start {
        op, remediation, ..
    } = decision.action.clone()
    else {
        return match decision.action {
            Decided::DropFinalizer => ending::release_after_destroy(ctx, obj, &mut pass).await,
            Decided::Retain => ending::retain_and_release(ctx, obj, &mut pass).await,
            _ => ending::close(ctx, obj, &mut pass, decision.requeue).await,
        };
    };
    if op == Op::Apply && current.is_none() {
        return ending::close(ctx, obj, &mut pass, Some(Duration::from_secs(15))).await;
    }
    let request = next_op::start_request(
        obj,
        &pass,
        &stored.read,
        op,
        remediation,
        current.as_ref(),
        stored.applied.as_ref(),
        stored.attempt.as_ref(),
    );
    let Some(mut req) = request else {
        return ending::close(ctx, obj, &mut pass, decision.requeue).await;
    };
    if let (Op::Apply, Some(g)) = (op, &guard) {
        g.prepare_apply(&mut req);
    }
    ending::start_job(ctx, obj, &mut pass, req, &decision, now).await
}

/// What the pool's outputs told the pass.
struct OutputsRead {
    provisioned: bool,
    health_pending: bool,
    observed_replicas: Option<i32>,
}

/// The pool's outputs: provider IDs to the spec, replicas, instances,
/// `OutputsValid`, the provisioned latch and `InfrastructureHealthy`.
async fn apply_outputs(
    ctx: &Context,
    obj: &TerraformMachinePool,
    pass: &mut OpenPass,
    read: &Result<StateSummary, StateError>,
) -> Result<OutputsRead, Error> {
    let mut out = OutputsRead {
        provisioned: obj.provisioned(),
        health_pending: false,
        observed_replicas: obj.status.as_ref().and_then(|s| s.replicas),
    };
    if let Ok(state) = read {
        let plan = pool_outputs::plan_outputs(obj, state, out.provisioned);
        if let Some(patch) = &plan.spec_patch {
            let api: Api<TerraformMachinePool> =
                Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
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
            out.observed_replicas = Some(replicas);
        }
        ending::count_outputs_invalid(ctx, obj, &plan.outputs_valid);
        pass.draft
            .set(conditions::OUTPUTS_VALID, &plan.outputs_valid);
        out.provisioned = plan.provisioned;
        if plan.newly_provisioned {
            let note = "machine pool provisioned".to_owned();
            pass::event(ctx, obj, false, events::PROVISIONED, "Outputs", note).await;
        }
        out.health_pending = common::record_health(pass, out.provisioned, plan.health.as_ref());
    } else if !out.provisioned {
        let v = common::not_yet_healthy(pass);
        pass.draft.set(conditions::INFRASTRUCTURE_HEALTHY, &v);
    }
    pass.draft
        .field("initialization", json!({"provisioned": out.provisioned}));
    pass.draft.field("ready", out.provisioned);
    Ok(out)
}

/// Autoscaling mode: the module owns the count; it goes back to the
/// MachinePool.
async fn write_back_replicas(
    ctx: &Context,
    obj: &TerraformMachinePool,
    pass: &mut OpenPass,
    deps: &Deps,
    observed: Option<i32>,
) -> Result<(), Error> {
    let Some(mp) = deps.mp.as_ref().filter(|_| !pass.deleting()) else {
        return Ok(());
    };
    let plan = pool_outputs::plan_replicas(mp, observed);
    pass.draft
        .set(conditions::AUTOSCALING_ACTIVE, &plan.condition);
    if let Some(r) = plan.written_back {
        let (reason, note) = pool_outputs::written_back_note(r);
        pass::event(ctx, obj, false, reason, "Outputs", note).await;
    }
    if let Some(patch) = &plan.machine_pool_patch {
        let ns = obj.namespace().unwrap_or_default();
        let api: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &ns, &capi::machine_pool_resource());
        let name = mp.metadata.name.as_deref().unwrap_or_default();
        api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
    }
    Ok(())
}

/// The pool's current inputs through the dependency gates (the cluster's
/// exports read live from its state, the variables from their sources);
/// `None` with `DependenciesReady` saying what is missing.
async fn current_inputs(
    ctx: &Context,
    obj: &TerraformMachinePool,
    pass: &mut OpenPass,
    deps: &Deps,
) -> Result<Option<Built>, Error> {
    let (Some(mp), Some(cluster)) = (&deps.mp, &deps.cluster) else {
        return Ok(None);
    };
    let ns = obj.namespace().unwrap_or_default();
    let tc_state = match &deps.tc {
        Some(tc) => {
            let suffix = state_suffix(WorkloadKind::Cluster, &ns, &tc.name_any());
            Some(crate::io::state::read_state(&ctx.client, &ns, &suffix).await?)
        }
        None => None,
    };
    let cluster_outputs = match &tc_state {
        Some(Ok(s)) => match pass::decode_outputs(Role::Cluster, s) {
            RoleOutputs::Cluster(d) if d.verdict.writable() => d
                .outputs
                .ok_or("the TerraformCluster's outputs are not valid"),
            _ => Err("the TerraformCluster's outputs are not valid"),
        },
        Some(Err(_)) => Err("the TerraformCluster's state cannot be read"),
        None => Err("no TerraformCluster"),
    };
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
            pass.draft.set(conditions::DEPENDENCIES_READY, &c);
            return Ok(None);
        }
    };
    match common::variables(ctx, obj, Role::MachinePool).await? {
        Err(c) => {
            pass.draft.set(conditions::DEPENDENCIES_READY, &c);
            Ok(None)
        }
        Ok(vars) => Ok(Some(Built {
            inputs: adapter::inputs(obj, mp, cluster, &d),
            vars,
            image: obj.spec.workspace.source.image.clone(),
        })),
    }
}

/// Renders the inputs; the exports guard may hold a change of the cluster's
/// exports and render the exports last applied instead.
async fn render_current(
    ctx: &Context,
    obj: &TerraformMachinePool,
    pass: &mut OpenPass,
    built: Option<Built>,
    stored: &common::Stored,
) -> Result<(Option<Rendered>, Option<ExportsGuard>), Error> {
    let Some(b) = built else {
        return Ok((None, None));
    };
    let full = match exports::render(&b) {
        Ok(full) => full,
        Err(c) => {
            pass.draft.set(conditions::DEPENDENCIES_READY, &c);
            return Ok((None, None));
        }
    };
    let (guard, held) = exports::apply_guard(
        ctx,
        obj,
        pass,
        &b,
        &stored.read,
        stored.applied.as_ref(),
        stored.attempt.as_ref(),
        stored.ever_applied,
    )
    .await?;
    let rendered = match held {
        Some(h) => exports::render(&h),
        None => Ok(full),
    };
    match rendered {
        Ok(r) => {
            let ready = crate::adapters::dependencies_ready();
            pass.draft.set(conditions::DEPENDENCIES_READY, &ready);
            Ok((Some(r), Some(guard)))
        }
        Err(c) => {
            pass.draft.set(conditions::DEPENDENCIES_READY, &c);
            Ok((None, None))
        }
    }
}
