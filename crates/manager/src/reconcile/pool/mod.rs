//! The TerraformMachinePool pass: this driver, its settings (`settings.rs`),
//! its fetch and plan (`pass.rs`) and its outputs (`outputs.rs`); the
//! execute stage is every kind's `ending::execute`.

mod outputs;
pub mod pass;
mod settings;

use std::sync::Arc;
use std::time::SystemTime;

use captf_api::TerraformMachinePool;
use kube::runtime::controller::Action;

use super::dependencies::read_pool_dependencies;
use super::ending;
use super::open_pass::{Opened, Opening};
use super::opening;
use super::{Context, Error};

/// The pass: dependencies from the caches, its settings, the shared
/// beginning (`opening::begin`), then fetch → plan → execute (`pool/pass.rs`).
pub async fn reconcile(obj: Arc<TerraformMachinePool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ctx = &*ctx;
    let now = SystemTime::now();
    let deps = read_pool_dependencies(ctx, obj).await?;
    let settings = settings::pass_settings(ctx, obj, &deps);
    let Opened {
        pass,
        status,
        early,
    } = match opening::begin(ctx, obj, &settings, now).await? {
        Opening::Done(action) => return Ok(action),
        Opening::Continue(opened) => *opened,
    };
    let snapshot = pass::fetch(ctx, obj, &pass, &status, early, &deps).await?;
    let plan = pass::plan(obj, &pass, status, &deps, &snapshot, now)?;
    ending::execute(ctx, obj, pass, plan, now).await
}
