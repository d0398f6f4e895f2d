//! What every controller of the manager is built with: the API handles of
//! its scope, the primary watch under `--watch-filter`, the concurrency,
//! the instrumented reconcile function and the counting of each pass.

use std::future::Future;
use std::sync::Arc;

use captf_api::names::labels;
use kube::Resource;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::watcher;

use super::watches;
use super::{Context, Error};

/// The API of a namespaced kind in the manager's scope (one namespace or all).
pub(super) fn api<K>(ctx: &Context) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match &ctx.config.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    }
}

pub(super) fn dyn_api(ctx: &Context, ar: &kube::api::ApiResource) -> Api<DynamicObject> {
    match &ctx.config.namespace {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, ar),
        None => Api::all_with(ctx.client.clone(), ar),
    }
}

/// The watch of a controller's own kind: only objects carrying
/// `cluster.x-k8s.io/watch-filter=<value>` under `--watch-filter`. An
/// object outside it is never in the controller's store, so no event of
/// a related object can start its pass either.
pub(super) fn primary_watch(ctx: &Context) -> watcher::Config {
    match &ctx.config.watch_filter {
        Some(v) => watcher::Config::default().labels(&format!("{}={v}", labels::WATCH_FILTER)),
        None => watcher::Config::default(),
    }
}

/// Wraps a controller's reconcile function: each pass runs in a
/// `reconcile` span naming the controller, the object and its Cluster
/// (which the JSON log format writes on every line), and is timed by the
/// controller's queue.
pub(super) fn instrumented<K, F, Fut>(
    controller: &'static str,
    queue: crate::metrics::Queue,
    mut reconcile: F,
) -> impl FnMut(Arc<K>, Arc<Context>) -> futures::future::BoxFuture<'static, Result<Action, Error>>
where
    K: Resource + Send + Sync + 'static,
    F: FnMut(Arc<K>, Arc<Context>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    use futures::FutureExt;
    use tracing::Instrument;
    move |obj: Arc<K>, ctx: Arc<Context>| {
        let namespace = obj.meta().namespace.clone().unwrap_or_default();
        let name = obj.meta().name.clone().unwrap_or_default();
        let cluster = obj
            .meta()
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::CLUSTER_NAME))
            .cloned()
            .unwrap_or_default();
        let span = tracing::info_span!("reconcile", controller, namespace = %namespace, name = %name, cluster = %cluster);
        let timer = queue.started(&namespace, &name);
        let queue = queue.clone();
        let pass = reconcile(obj, ctx);
        async move {
            let out = pass.await;
            if out.is_err() {
                queue.failed();
            }
            drop(timer);
            out
        }
        .instrument(span)
        .boxed()
    }
}

pub(super) fn tally(
    ctx: &Context,
    controller: &'static str,
    source: &'static str,
) -> watches::Tally {
    watches::Tally {
        metrics: ctx.metrics.clone(),
        controller,
        source,
    }
}

/// Counts each pass's end (`controller_runtime_reconcile_total`). A woken
/// object the controller's store does not hold (deleted meanwhile, or
/// outside `--watch-filter`) ran no pass: it only leaves the queue.
pub(super) async fn count_pass<T, E1, E2>(
    metrics: &crate::metrics::Metrics,
    queue: &crate::metrics::Queue,
    controller: &'static str,
    res: Result<T, kube::runtime::controller::Error<E1, E2>>,
) where
    E1: std::error::Error + 'static,
    E2: std::error::Error + 'static,
{
    use kube::runtime::controller::Error as Run;
    match res {
        Ok(_) => metrics.reconciled(controller, "success"),
        Err(Run::ObjectNotFound(r)) => {
            queue.left(r.namespace.as_deref().unwrap_or_default(), &r.name);
        }
        Err(e) => {
            metrics.reconciled(controller, "error");
            tracing::debug!(controller, error = %e, "reconcile");
        }
    }
}

pub(super) fn controller_config(concurrency: u16) -> kube::runtime::controller::Config {
    kube::runtime::controller::Config::default().concurrency(concurrency)
}
