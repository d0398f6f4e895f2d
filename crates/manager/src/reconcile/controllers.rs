//! The controllers: what each kind watches and how related objects map
//! back to it.

use std::future::Future;
use std::sync::Arc;

use captf_api::names::{kinds, labels};
use captf_api::plan::TerraformPlan;
use captf_api::{TerraformCluster, TerraformClusterIdentity};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use super::workload::Workload;
use super::{Context, ERROR_REQUEUE, Error};
use crate::capi;

fn api<K>(ctx: &Context) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match &ctx.config.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    }
}

fn dyn_api(ctx: &Context, ar: &kube::api::ApiResource) -> Api<DynamicObject> {
    match &ctx.config.namespace {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, ar),
        None => Api::all_with(ctx.client.clone(), ar),
    }
}

fn error_policy<K: Workload>(obj: Arc<K>, err: &Error, _ctx: Arc<Context>) -> Action {
    if err.is_conflict() {
        // Another writer got there first: the next pass reads the new version.
        tracing::debug!(kind = K::KIND.kind(), name = %obj.name_any(), "write conflict; retrying");
        return Action::requeue(std::time::Duration::from_millis(200));
    }
    tracing::warn!(kind = K::KIND.kind(), name = %obj.name_any(), namespace = ?obj.namespace(), error = %err, "reconcile failed; retrying");
    Action::requeue(ERROR_REQUEUE)
}

/// The object an infrastructureRef of `kind` names.
pub(crate) fn infrastructure_ref<K: Resource<DynamicType = ()>>(
    o: &DynamicObject,
    kind: &str,
) -> Option<ObjectRef<K>> {
    let r = o
        .data
        .pointer("/spec/infrastructureRef")
        .or_else(|| o.data.pointer("/spec/template/spec/infrastructureRef"))?;
    if r.get("kind")?.as_str()? != kind {
        return None;
    }
    let name = r.get("name")?.as_str()?;
    Some(ObjectRef::new(name).within(&o.namespace()?))
}

/// Watches only the ConfigMaps and Secrets offered as variable sources.
pub fn variable_sources() -> watcher::Config {
    watcher::Config::default().labels(&format!("{}=true", labels::VARIABLES))
}

/// The objects in `namespace` whose `spec.variablesFrom` names the source
/// (`secret`: a Secret, else a ConfigMap) called `name`.
pub fn variable_users<K: Workload>(
    objects: Vec<Arc<K>>,
    namespace: Option<String>,
    name: &str,
    secret: bool,
) -> Vec<ObjectRef<K>> {
    objects
        .into_iter()
        .filter(|o| o.namespace() == namespace)
        .filter(|o| {
            o.workspace().variables_from.iter().flatten().any(|v| {
                let r = if secret {
                    &v.secret_ref
                } else {
                    &v.config_map_ref
                };
                r.as_ref().is_some_and(|r| r.name == name)
            })
        })
        .map(|o| ObjectRef::from_obj(&*o))
        .collect()
}

fn managed_jobs() -> watcher::Config {
    watcher::Config::default().labels(&format!("{}=true", labels::MANAGED))
}

/// Runs the TerraformCluster controller until `shutdown` resolves.
pub async fn run_clusters(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let cluster_ar = capi::cluster_resource();
    let controller = Controller::new(api::<TerraformCluster>(&ctx), watcher::Config::default());
    let store = controller.store();
    let (by_config_map, by_secret) = (controller.store(), controller.store());
    controller
        .watches(api::<ConfigMap>(&ctx), variable_sources(), move |c| {
            variable_users(by_config_map.state(), c.namespace(), &c.name_any(), false)
        })
        .watches(api::<Secret>(&ctx), variable_sources(), move |s| {
            variable_users(by_secret.state(), s.namespace(), &s.name_any(), true)
        })
        .owns(api::<Job>(&ctx), managed_jobs())
        .owns(api::<TerraformPlan>(&ctx), watcher::Config::default())
        .watches_with(
            dyn_api(&ctx, &cluster_ar),
            cluster_ar.clone(),
            watcher::Config::default(),
            |c| infrastructure_ref::<TerraformCluster>(&c, kinds::TERRAFORM_CLUSTER),
        )
        .watches(
            Api::<TerraformClusterIdentity>::all(ctx.client.clone()),
            watcher::Config::default(),
            move |identity| {
                // Every cluster using the identity looks again.
                let name = identity.name_any();
                store
                    .state()
                    .into_iter()
                    .filter(|tc| {
                        tc.spec.workspace.identity_ref.as_ref().is_some_and(|r| {
                            r.kind != Some(captf_api::common::IdentityKind::Secret)
                                && r.name == name
                        })
                    })
                    .map(|tc| ObjectRef::from_obj(&*tc))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(
            super::cluster::reconcile,
            error_policy::<TerraformCluster>,
            ctx,
        )
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "TerraformCluster controller");
            }
        })
        .await;
}

/// Runs every controller until `stop` turns true.
pub async fn run_all(ctx: Arc<Context>, stop: tokio::sync::watch::Receiver<bool>) {
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    tokio::join!(
        run_identities(ctx.clone(), stopped(stop.clone())),
        run_clusters(ctx.clone(), stopped(stop.clone())),
        super::pool::run(ctx.clone(), stopped(stop.clone())),
    );
}

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
pub async fn run_identities(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    Controller::new(
        Api::<TerraformClusterIdentity>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .graceful_shutdown_on(shutdown)
    .run(reconcile_identity, identity_error, ctx)
    .for_each(|_| async {})
    .await;
}
