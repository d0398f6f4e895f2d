//! The controllers: what each kind watches and how related objects map
//! back to it.

use std::future::Future;
use std::sync::Arc;

use captf_api::names::{kinds, labels};
use captf_api::plan::TerraformPlan;
use captf_api::{
    TerraformCluster, TerraformClusterIdentity, TerraformMachine, TerraformMachinePool,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};

use super::controller_runtime::{
    api, controller_config, count_pass, dyn_api, instrumented, primary_watch, tally,
};
use super::quiet::QuietPasses;
use super::routing::{self, ChangeFilter, Dependency, Dependents};
use super::shared_sources::{self, Feeds, OwnedFeeds};
use super::watches;
use super::workload::Workload;
use super::{Context, ERROR_REQUEUE, Error};
use crate::capi;

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

/// What a mapper tells about the objects it wakes: the quiet passes and
/// the controller's queue metrics.
#[derive(Clone)]
struct Waker {
    quiet: QuietPasses,
    queue: crate::metrics::Queue,
}

/// The objects an event wakes: the quiet passes they stood on no longer
/// hold, so their next pass reads everything again (see `quiet`), and
/// each waits in the controller's queue until its pass starts.
fn wake<K: Resource<DynamicType = ()>>(
    waker: &Waker,
    kind: &str,
    refs: Vec<ObjectRef<K>>,
) -> Vec<ObjectRef<K>> {
    for r in &refs {
        let ns = r.namespace.as_deref().unwrap_or_default();
        waker
            .quiet
            .forget(&super::workload::object_key(kind, ns, &r.name));
        waker.queue.woke(ns, &r.name);
    }
    refs
}

/// The objects of `kind` the Job slots let go next, when a slot frees:
/// their quiet pass no longer holds either.
fn slot_wakes<K: Resource<DynamicType = ()> + 'static>(
    ctx: &Context,
    kind: &'static str,
    queue: &crate::metrics::Queue,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
    use tokio::sync::broadcast::error::RecvError;
    let waker = Waker {
        quiet: ctx.quiet.clone(),
        queue: queue.clone(),
    };
    let keys = futures::stream::unfold(ctx.slots.woken(), |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(key) => return Some((key, rx)),
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return None,
            }
        }
    });
    keys.filter_map(move |key| {
        let mut parts = key.splitn(3, '/');
        let found = match (parts.next(), parts.next(), parts.next()) {
            (Some(k), Some(ns), Some(name)) if k == kind => {
                wake(&waker, kind, vec![ObjectRef::<K>::new(name).within(ns)]).pop()
            }
            _ => None,
        };
        futures::future::ready(found)
    })
}

/// One waker per mapper of a controller.
fn wakers(ctx: &Context, queue: &crate::metrics::Queue) -> [Waker; 8] {
    std::array::from_fn(|_| Waker {
        quiet: ctx.quiet.clone(),
        queue: queue.clone(),
    })
}

/// The objects of `kind` that own `meta` (Jobs, TerraformPlans).
fn owners<K: Resource<DynamicType = ()>>(
    meta: &kube::api::ObjectMeta,
    kind: &str,
) -> Vec<ObjectRef<K>> {
    let ns = meta.namespace.clone().unwrap_or_default();
    routing::owners_of_kind(meta, kind)
        .into_iter()
        .map(|name| ObjectRef::new(name).within(&ns))
        .collect()
}

/// The dependents of `kind` an event on `dep` wakes, as controller refs.
fn refs<K: Resource<DynamicType = ()>>(
    dependents: &Dependents,
    dep: &Dependency,
    kind: &str,
) -> Vec<ObjectRef<K>> {
    dependents
        .of(dep, kind)
        .into_iter()
        .map(|d| ObjectRef::new(&d.name).within(&d.namespace))
        .collect()
}

/// The object's own events, filtered to what calls for a pass, with the
/// controller's store of the objects.
fn own_stream<K: Workload>(
    ctx: &Context,
    controller: &'static str,
    queue: &crate::metrics::Queue,
) -> (
    impl futures::Stream<Item = Result<K, watcher::Error>> + Send + use<K>,
    reflector::Store<K>,
) {
    let (reader, writer) = reflector::store();
    let events = watches::stored(api::<K>(ctx), primary_watch(ctx), writer);
    let queue = queue.clone();
    let own = watches::filtered(
        events,
        ChangeFilter::new(routing::changed),
        |o: &K| routing::own_object(o.meta()),
        tally(ctx, controller, "self"),
    )
    .inspect(move |o| {
        if let Ok(o) = o {
            queue.woke(&o.namespace().unwrap_or_default(), &o.name_any());
        }
    });
    (own, reader)
}

fn managed_secret_owners<K: Resource<DynamicType = ()>>(
    dependents: &Dependents,
    s: &PartialObjectMeta<Secret>,
    kind: &str,
) -> Vec<ObjectRef<K>> {
    let ns = s.namespace().unwrap_or_default();
    let mut out: Vec<ObjectRef<K>> = routing::owners_of_kind(&s.metadata, kind)
        .into_iter()
        .map(|name| ObjectRef::new(name).within(&ns))
        .collect();
    if let Some(suffix) = routing::state_suffix_of(&s.metadata) {
        let dep = Dependency::State {
            namespace: ns.clone(),
            suffix: suffix.to_owned(),
        };
        out.extend(refs::<K>(dependents, &dep, kind));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup();
    out
}

fn variables_users<K: Resource<DynamicType = ()>>(
    dependents: &Dependents,
    meta: &kube::api::ObjectMeta,
    secret: bool,
    kind: &str,
) -> Vec<ObjectRef<K>> {
    let namespace = meta.namespace.clone().unwrap_or_default();
    let name = meta.name.clone().unwrap_or_default();
    let dep = if secret {
        Dependency::Secret { namespace, name }
    } else {
        Dependency::ConfigMap { namespace, name }
    };
    refs::<K>(dependents, &dep, kind)
}

const CLUSTERS: &str = "terraformcluster";
const MACHINES: &str = "terraformmachine";
const POOLS: &str = "terraformmachinepool";

/// Runs the TerraformCluster controller until `shutdown` resolves.
async fn run_clusters(
    ctx: Arc<Context>,
    feeds: Feeds,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let cluster_ar = capi::cluster_resource();
    let queue = ctx.metrics.queue(CLUSTERS, ctx.config.concurrency.clusters);
    let (own, store) = own_stream::<TerraformCluster>(&ctx, CLUSTERS, &queue);
    let kind = kinds::TERRAFORM_CLUSTER;
    let (d1, d2, d3) = (
        ctx.dependents.clone(),
        ctx.dependents.clone(),
        ctx.dependents.clone(),
    );
    let identities = cluster_identities(&ctx);
    let dependents_gone = dependents_gone(&ctx);
    let by_cluster = store.clone();
    let identity_ctx = ctx.clone();
    let metrics = ctx.metrics.clone();
    let [q, q1, q2, q3, q4, q5, q6, q7] = wakers(&ctx, &queue);
    Controller::for_stream(own, store.clone())
        .with_config(controller_config(ctx.config.concurrency.clusters))
        .watches_stream(feeds.jobs, move |job| {
            wake(&q, kind, owners::<TerraformCluster>(&job.metadata, kind))
        })
        .watches(
            api::<TerraformPlan>(&ctx),
            watcher::Config::default(),
            move |plan| wake(&q1, kind, owners::<TerraformCluster>(&plan.metadata, kind)),
        )
        .watches_stream(feeds.managed_secrets, move |s| {
            wake(&q2, kind, managed_secret_owners(&d1, &s, kind))
        })
        .watches_stream(feeds.configmaps, move |c| {
            wake(&q3, kind, variables_users(&d2, &c.metadata, false, kind))
        })
        .watches_stream(feeds.variables_secrets, move |s| {
            wake(&q4, kind, variables_users(&d3, &s.metadata, true, kind))
        })
        .watches_stream_with(
            feeds.clusters,
            move |c| {
                let refs = infrastructure_ref::<TerraformCluster>(&c, kind);
                wake(&q5, kind, refs.into_iter().collect())
            },
            cluster_ar.clone(),
        )
        .watches_stream(dependents_gone, move |gone| {
            wake(&q6, kind, clusters_named_by(&by_cluster, &gone.metadata))
        })
        .watches_stream(identities, move |identity| {
            // Every cluster using the identity checks it again.
            let name = identity.name_any();
            super::credentials::forget_identity_users(&identity_ctx.credentials_ensured, &name);
            wake(&q7, kind, identity_users(&store, &name))
        })
        .reconcile_on(slot_wakes::<TerraformCluster>(&ctx, kind, &queue))
        .graceful_shutdown_on(shutdown)
        .run(
            instrumented(CLUSTERS, queue.clone(), super::cluster::reconcile),
            error_policy::<TerraformCluster>,
            ctx,
        )
        .for_each(|res| count_pass(&metrics, &queue, CLUSTERS, res))
        .await;
}

/// The TerraformClusters of the Cluster a gone machine or pool named.
fn clusters_named_by(
    store: &reflector::Store<TerraformCluster>,
    gone: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Vec<ObjectRef<TerraformCluster>> {
    let Some(cluster) = gone
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::CLUSTER_NAME))
    else {
        return Vec::new();
    };
    store
        .state()
        .into_iter()
        .filter(|tc| tc.metadata.namespace == gone.namespace)
        .filter(|tc| routing::names_cluster(&tc.metadata, cluster))
        .map(|tc| ObjectRef::from_obj(&*tc))
        .collect()
}

/// The TerraformClusters that use the cluster identity `name`.
fn identity_users(
    store: &reflector::Store<TerraformCluster>,
    name: &str,
) -> Vec<ObjectRef<TerraformCluster>> {
    store
        .state()
        .into_iter()
        .filter(|tc| {
            tc.spec.workspace.identity_ref.as_ref().is_some_and(|r| {
                r.kind != Some(captf_api::common::IdentityKind::Secret) && r.name == name
            })
        })
        .map(|tc| ObjectRef::from_obj(&*tc))
        .collect()
}

/// The cluster identities, filtered to their writes.
fn cluster_identities(
    ctx: &Context,
) -> impl futures::Stream<Item = Result<TerraformClusterIdentity, watcher::Error>> + Send + 'static
{
    watches::filtered(
        watcher::watcher(
            Api::<TerraformClusterIdentity>::all(ctx.client.clone()),
            watcher::Config::default(),
        )
        .default_backoff(),
        ChangeFilter::new(routing::changed),
        |i: &TerraformClusterIdentity| routing::own_object(&i.metadata),
        tally(ctx, CLUSTERS, "identities"),
    )
}

/// A deleted machine or pool may unblock its cluster's deletion: their
/// deletions, as the metadata of pools.
fn dependents_gone(
    ctx: &Context,
) -> impl futures::Stream<Item = Result<PartialObjectMeta<TerraformMachinePool>, watcher::Error>>
+ Send
+ 'static {
    let pools_gone = watches::filtered(
        watcher::watcher(
            api::<PartialObjectMeta<TerraformMachinePool>>(ctx),
            watcher::Config::default(),
        )
        .default_backoff(),
        ChangeFilter::new(routing::deleted_only),
        |_| 0,
        tally(ctx, CLUSTERS, "terraformmachinepools"),
    );
    let machines_gone = watches::filtered(
        watcher::watcher(
            api::<PartialObjectMeta<TerraformMachine>>(ctx),
            watcher::Config::default(),
        )
        .default_backoff(),
        ChangeFilter::new(routing::deleted_only),
        |_| 0,
        tally(ctx, CLUSTERS, "terraformmachines"),
    )
    .map(|r| {
        r.map(|m| PartialObjectMeta::<TerraformMachinePool> {
            types: None,
            metadata: m.metadata,
            _phantom: Default::default(),
        })
    });
    futures::stream::select(pools_gone, machines_gone)
}

/// A kind Cluster API owns through one object of its own (a Machine or a
/// MachinePool), whose passes read that owner, the Cluster, the
/// TerraformCluster and the bootstrap data from caches (`shared_sources`).
struct Owned {
    controller: &'static str,
    kind: &'static str,
    owner: kube::api::ApiResource,
    /// The name of the owner watch in the watch-event metric.
    owner_source: &'static str,
    concurrency: u16,
}

/// The owners of an owned kind (Machines or MachinePools), stored for the
/// passes and filtered to what they consume.
fn owner_watch(
    ctx: &Context,
    owned: &Owned,
    writer: reflector::store::Writer<DynamicObject>,
) -> impl futures::Stream<Item = Result<DynamicObject, watcher::Error>> + Send + 'static {
    watches::filtered(
        watches::stored(
            dyn_api(ctx, &owned.owner),
            watcher::Config::default(),
            writer,
        ),
        ChangeFilter::new(routing::changed),
        routing::capi_owner_consumed,
        tally(ctx, owned.controller, owned.owner_source),
    )
}

/// Runs the controller of an owned kind until `shutdown` resolves: its own
/// events, its Jobs, our Secrets, its variables sources, bootstrap data,
/// the owners (waking the object their infrastructureRef names), the
/// Clusters and TerraformClusters (waking their dependents through the
/// index).
async fn run_owned<K, F, Fut>(
    ctx: Arc<Context>,
    owned: Owned,
    feeds: OwnedFeeds,
    reconcile: F,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) where
    K: Workload,
    F: FnMut(Arc<K>, Arc<Context>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    let (controller, kind, concurrency) = (owned.controller, owned.kind, owned.concurrency);
    let queue = ctx.metrics.queue(controller, concurrency);
    let (own, store) = own_stream::<K>(&ctx, controller, &queue);
    let owners_stream = owner_watch(&ctx, &owned, feeds.owner_writer);
    let d = ctx.dependents.clone();
    let metrics = ctx.metrics.clone();
    let (d1, d2, d3, d4, d5, d6) = (d.clone(), d.clone(), d.clone(), d.clone(), d.clone(), d);
    let [q, q1, q2, q3, q4, q5, q6, q7] = wakers(&ctx, &queue);
    Controller::for_stream(own, store)
        .with_config(controller_config(concurrency))
        .watches_stream(feeds.common.jobs, move |job| {
            wake(&q, kind, owners::<K>(&job.metadata, kind))
        })
        .watches_stream(feeds.common.managed_secrets, move |s| {
            wake(&q1, kind, managed_secret_owners(&d1, &s, kind))
        })
        .watches_stream(feeds.common.configmaps, move |c| {
            wake(&q2, kind, variables_users(&d2, &c.metadata, false, kind))
        })
        .watches_stream(feeds.common.variables_secrets, move |s| {
            wake(&q3, kind, variables_users(&d3, &s.metadata, true, kind))
        })
        .watches_stream(feeds.bootstrap, move |s| {
            // Bootstrap data wakes the objects whose owner names it.
            wake(&q4, kind, variables_users(&d4, &s.metadata, true, kind))
        })
        .watches_stream_with(
            owners_stream,
            move |o| {
                let refs = infrastructure_ref::<K>(&o, kind);
                wake(&q5, kind, refs.into_iter().collect())
            },
            owned.owner,
        )
        .watches_stream_with(
            feeds.common.clusters,
            move |c| {
                let dep = Dependency::Cluster {
                    namespace: c.namespace().unwrap_or_default(),
                    name: c.name_any(),
                };
                wake(&q6, kind, refs(&d5, &dep, kind))
            },
            capi::cluster_resource(),
        )
        .watches_stream(feeds.terraform_clusters, move |tc| {
            // Only what the objects consume changed (the filter saw to it).
            let dep = Dependency::TerraformCluster {
                namespace: tc.namespace().unwrap_or_default(),
                name: tc.name_any(),
            };
            wake(&q7, kind, refs(&d6, &dep, kind))
        })
        .reconcile_on(slot_wakes::<K>(&ctx, kind, &queue))
        .graceful_shutdown_on(shutdown)
        .run(
            instrumented(controller, queue.clone(), reconcile),
            error_policy::<K>,
            ctx,
        )
        .for_each(|res| count_pass(&metrics, &queue, controller, res))
        .await;
}

/// Runs the TerraformMachinePool controller until `shutdown` resolves.
async fn run_pools(
    ctx: Arc<Context>,
    feeds: OwnedFeeds,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let owned = Owned {
        controller: POOLS,
        kind: kinds::TERRAFORM_MACHINE_POOL,
        owner: capi::machine_pool_resource(),
        owner_source: "machinepools",
        concurrency: ctx.config.concurrency.machine_pools,
    };
    run_owned::<TerraformMachinePool, _, _>(ctx, owned, feeds, super::pool::reconcile, shutdown)
        .await;
}

/// Runs the TerraformMachine controller until `shutdown` resolves.
async fn run_machines(
    ctx: Arc<Context>,
    feeds: OwnedFeeds,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let owned = Owned {
        controller: MACHINES,
        kind: kinds::TERRAFORM_MACHINE,
        owner: capi::machine_resource(),
        owner_source: "machines",
        concurrency: ctx.config.concurrency.machines,
    };
    run_owned::<TerraformMachine, _, _>(ctx, owned, feeds, super::machine::reconcile, shutdown)
        .await;
}

/// Runs every controller until `stop` turns true. Each controller and the
/// shared watches are a task of their own: the runtime can poll them on
/// different workers, and no single task nests all of them (one joined
/// future overflowed a 2 MiB test thread's stack in debug builds).
pub async fn run_all(ctx: Arc<Context>, stop: tokio::sync::watch::Receiver<bool>) {
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let (feeds, shared_watches) = shared_sources::open(&ctx, stop.clone());
    let tasks = [
        ("shared watches", tokio::spawn(shared_watches)),
        (
            "identities",
            tokio::spawn(super::identities::run(ctx.clone(), stopped(stop.clone()))),
        ),
        (
            CLUSTERS,
            tokio::spawn(run_clusters(
                ctx.clone(),
                feeds.clusters,
                stopped(stop.clone()),
            )),
        ),
        (
            MACHINES,
            tokio::spawn(run_machines(
                ctx.clone(),
                feeds.machines,
                stopped(stop.clone()),
            )),
        ),
        (
            "machine templates",
            tokio::spawn(super::machine_template::run(
                ctx.clone(),
                stopped(stop.clone()),
            )),
        ),
        (
            POOLS,
            tokio::spawn(run_pools(ctx.clone(), feeds.pools, stopped(stop.clone()))),
        ),
    ];
    for (name, task) in tasks {
        if let Err(e) = task.await {
            tracing::error!(controller = name, error = %e, "controller task failed");
        }
    }
}
