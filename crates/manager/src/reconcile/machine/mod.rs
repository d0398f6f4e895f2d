//! The TerraformMachine pass: this driver, its settings (`settings.rs`), its
//! fetch and plan (`pass.rs`) and its outputs (`outputs.rs`); the execute
//! stage is every kind's `ending::execute`.

mod outputs;
mod pass;
mod settings;

use std::sync::Arc;
use std::time::SystemTime;

use captf_api::TerraformMachine;
use kube::runtime::controller::Action;

use super::dependencies::read_machine_dependencies;
use super::ending;
use super::open_pass::{Opened, Opening};
use super::opening;
use super::{Context, Error};

/// The pass: dependencies from the caches, its settings, the shared
/// beginning (`opening::begin`), then fetch → plan → execute (`machine/pass.rs`).
pub async fn reconcile(obj: Arc<TerraformMachine>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ctx = &*ctx;
    let now = SystemTime::now();
    let deps = read_machine_dependencies(ctx, obj).await?;
    let (settings, eff) = settings::pass_settings(ctx, obj, &deps);
    let Opened {
        pass,
        status,
        early,
    } = match opening::begin(ctx, obj, &settings, now).await? {
        Opening::Done(action) => return Ok(action),
        Opening::Continue(opened) => *opened,
    };
    let snapshot = pass::fetch(ctx, obj, &pass, &status, early, &deps).await?;
    let policy = pass::Policy {
        remediation: eff.remediation,
        deletion_policy_resolved: eff.deletion_policy.is_some(),
    };
    let plan = pass::plan(obj, &pass, status, &deps, &snapshot, &policy, now)?;
    ending::execute(ctx, obj, pass, plan, now).await
}
