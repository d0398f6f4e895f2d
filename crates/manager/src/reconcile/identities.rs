//! The TerraformClusterIdentity controller: cluster-wide (identities are
//! cluster-scoped), reporting each identity's status from its source
//! Secret; the rules are in `identity/`, the reads and writes in
//! `io/identity.rs`.

use std::future::Future;
use std::sync::Arc;

use captf_api::TerraformClusterIdentity;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};

use super::{Context, ERROR_REQUEUE, Error};

async fn reconcile_identity(
    obj: Arc<TerraformClusterIdentity>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    match crate::io::identity::reconcile_identity(&ctx.client, &obj.name_any()).await? {
        Some(outcome) => Ok(Action::requeue(outcome.requeue_after)),
        None => Ok(Action::await_change()),
    }
}

fn identity_error(obj: Arc<TerraformClusterIdentity>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(name = %obj.name_any(), error = %err, "identity reconcile failed; retrying");
    Action::requeue(ERROR_REQUEUE)
}

/// Runs the TerraformClusterIdentity controller (cluster-wide: identities
/// are cluster-scoped).
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    const CONTROLLER: &str = "terraformclusteridentity";
    let concurrency = ctx.config.concurrency.identities;
    let queue = ctx.metrics.queue(CONTROLLER, concurrency);
    Controller::new(
        Api::<TerraformClusterIdentity>::all(ctx.client.clone()),
        super::controller_runtime::primary_watch(&ctx),
    )
    .with_config(super::controller_runtime::controller_config(concurrency))
    .graceful_shutdown_on(shutdown)
    .run(
        super::controller_runtime::instrumented(CONTROLLER, queue, reconcile_identity),
        identity_error,
        ctx,
    )
    .for_each(|_| async {})
    .await;
}
