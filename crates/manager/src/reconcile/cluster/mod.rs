//! The TerraformCluster pass: this driver, its owner Cluster, dependencies
//! and settings (`settings.rs`), its fetch → plan → execute (`pass.rs`) and
//! its TerraformPlan flow (`plan_flow.rs`).

mod pass;
mod plan_flow;
mod settings;

use std::sync::Arc;
use std::time::SystemTime;

use captf_api::TerraformCluster;
use captf_api::effective;
use captf_api::names::kinds;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::ending;
use super::open_pass::{Closing, Opened, Opening};
use super::opening;
use super::quiet;
use super::{Context, Error};

/// The pass: the owner Cluster, the shared opening stages, the plans its
/// bookkeeping reported, outputs, current inputs, the plan gate, the wait
/// for dependents on deletion, the decision and what it starts.
pub async fn reconcile(obj: Arc<TerraformCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ctx = &*ctx;
    let now = SystemTime::now();
    let ns = obj.namespace().unwrap_or_default();
    settings::record_dependencies(ctx, obj);
    let eff = effective::cluster(&obj.spec, &ctx.config.defaults);
    if let Some(action) = quiet::resync(ctx, obj, obj.spec.workspace.identity_ref.as_ref()).await? {
        return Ok(action);
    }
    quiet::unsettle(ctx, obj);
    ctx.passes
        .count(kinds::TERRAFORM_CLUSTER, &ns, &obj.name_any());
    let cluster = settings::owner_cluster(ctx, obj).await?;
    let settings = settings::pass_settings(obj, cluster.as_ref(), &eff);
    let opened = match opening::open(ctx, obj, &settings, now).await? {
        Opening::Done(action) => return Ok(action),
        Opening::Continue(opened) => *opened,
    };
    let mut plans_list =
        plan_flow::bookkeep_plans(ctx, obj, &opened.pass, &settings.cluster_name).await?;
    if opened.pass.active.is_some() {
        return ending::close_active(ctx, obj, &mut Closing::opened(opened), now).await;
    }
    let Opened {
        pass,
        status,
        early,
    } = opened;
    let snapshot = pass::fetch(ctx, obj, &pass, &status, early, &settings.cluster_name).await?;
    let cx = pass::ClusterContext {
        cluster: cluster.as_ref(),
        apply_policy: eff.apply_policy,
        now,
    };
    let plan = pass::plan(obj, &pass, status, &snapshot, &mut plans_list, &cx);
    pass::execute(ctx, obj, pass, plan, now).await
}
