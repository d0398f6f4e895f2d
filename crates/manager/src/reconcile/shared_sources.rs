//! The watches more than one controller needs, each opened once: our Jobs,
//! our Secrets (by metadata), the variables sources (by metadata), the
//! Clusters, and what the machine and pool passes read from caches (the
//! Clusters, the TerraformClusters, the bootstrap data). Each watch is
//! decoded and filtered once and its changes fanned out to the controllers
//! (`watches::fan_out`); each cache is kept once and read by both the
//! machine and the pool passes. Before, each of the three controllers ran
//! its own copy of every watch: three decodes of every Job event, three
//! change filters of every Job and Secret, two copies of every Cluster,
//! TerraformCluster and bootstrap Secret.

use std::future::Future;

use captf_api::TerraformCluster;
use captf_api::names::labels;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Resource;
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::store::Writer;
use kube::runtime::{WatchStreamExt, watcher};

use super::Context;
use super::controller_runtime::{api, dyn_api};
use super::routing::{self, ChangeFilter};
use super::watches::{self, Feed, OwnerStores, Tally};
use crate::capi;

/// The label of the shared watches in `captf_watch_events_total`.
const SHARED: &str = "shared";

/// What the TerraformCluster controller receives.
pub(super) struct Feeds {
    /// Our Jobs whose end or loss calls for their owner's pass.
    pub jobs: Feed<PartialObjectMeta<Job>>,
    /// Our Secrets (state, records, per-run inputs), by metadata.
    pub managed_secrets: Feed<PartialObjectMeta<Secret>>,
    /// The ConfigMaps offered as variables sources, by metadata.
    pub configmaps: Feed<PartialObjectMeta<ConfigMap>>,
    /// The Secrets offered as variables sources, by metadata.
    pub variables_secrets: Feed<PartialObjectMeta<Secret>>,
    /// Cluster API Clusters whose consumed fields changed.
    pub clusters: Feed<DynamicObject>,
}

/// What the controller of a kind Cluster API owns (machines, pools)
/// receives: the feeds above, the shared caches' changes, and the writer
/// of its owners' cache, which its own watch of the owners fills.
pub(super) struct OwnedFeeds {
    pub common: Feeds,
    /// TerraformClusters whose exports, spec, provisioning, pause or
    /// deletion changed.
    pub terraform_clusters: Feed<PartialObjectMeta<TerraformCluster>>,
    /// Bootstrap data Secrets that changed.
    pub bootstrap: Feed<PartialObjectMeta<Secret>>,
    pub owner_writer: Writer<DynamicObject>,
}

/// The feeds of the three controllers.
pub(super) struct AllFeeds {
    pub clusters: Feeds,
    pub machines: OwnedFeeds,
    pub pools: OwnedFeeds,
}

fn tally(ctx: &Context, source: &'static str) -> Tally {
    Tally {
        metrics: ctx.metrics.clone(),
        controller: SHARED,
        source,
    }
}

/// Watches only the ConfigMaps and Secrets offered as variable sources.
pub fn variable_sources() -> watcher::Config {
    watcher::Config::default().labels(&format!("{}=true", labels::VARIABLES))
}

fn managed_jobs() -> watcher::Config {
    watcher::Config::default().labels(&format!("{}=true", labels::MANAGED))
}

/// The three feeds of one fanned-out watch.
type Three<T> = [Feed<T>; 3];

fn three<T>(feeds: Vec<Feed<T>>) -> Three<T> {
    feeds
        .try_into()
        .unwrap_or_else(|_| unreachable!("a watch fanned out to three"))
}

fn two<T>(feeds: Vec<Feed<T>>) -> [Feed<T>; 2] {
    feeds
        .try_into()
        .unwrap_or_else(|_| unreachable!("a watch fanned out to two"))
}

/// Opens every shared watch and sets the machine and pool caches on
/// `ctx`. The returned future drives the watches until `stop` turns true.
pub(super) fn open(
    ctx: &Context,
    stop: tokio::sync::watch::Receiver<bool>,
) -> (AllFeeds, impl Future<Output = ()> + Send + 'static) {
    let stopped = move || {
        let mut rx = stop.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };

    // Our Jobs: the Job slots follow every event; the controllers get the
    // metadata of those that finished or went.
    let slots = ctx.slots.clone();
    let metrics = ctx.metrics.clone();
    let job_events = watcher::watcher(api::<Job>(ctx), managed_jobs())
        .default_backoff()
        .inspect(move |e| {
            if let Ok(e) = e {
                slots.observe(e);
                metrics.observe_job(e);
            }
        });
    let jobs = watches::filtered(
        job_events,
        ChangeFilter::new(routing::job_event_wakes),
        routing::job_finished,
        tally(ctx, "jobs"),
    )
    .map(|r| r.map(|job| watches::metadata_of(&job)));
    let (jobs, drive_jobs) = watches::fan_out(jobs, 3, "jobs", stopped());

    let (managed, drive_managed) = watches::fan_out(
        metadata_feed::<Secret>(ctx, watches::managed_secrets(), "managed-secrets"),
        3,
        "managed-secrets",
        stopped(),
    );
    let (configmaps, drive_configmaps) = watches::fan_out(
        metadata_feed::<ConfigMap>(ctx, variable_sources(), "configmaps"),
        3,
        "configmaps",
        stopped(),
    );
    let (var_secrets, drive_var_secrets) = watches::fan_out(
        metadata_feed::<Secret>(ctx, variable_sources(), "variables-secrets"),
        3,
        "variables-secrets",
        stopped(),
    );

    // The caches the machine and pool passes share.
    let cluster_ar = capi::cluster_resource();
    let cluster_writer = Writer::new(cluster_ar.clone());
    let tc_writer = Writer::<TerraformCluster>::default();
    let secret_writer = Writer::<Secret>::default();
    let machine_owners = Writer::new(capi::machine_resource());
    let pool_owners = Writer::new(capi::machine_pool_resource());
    let stores = |owners: &Writer<DynamicObject>| {
        OwnerStores::new(
            owners.as_reader(),
            cluster_writer.as_reader(),
            tc_writer.as_reader(),
            secret_writer.as_reader(),
        )
    };
    let _ = ctx.machine_stores.set(stores(&machine_owners));
    let _ = ctx.pool_stores.set(stores(&pool_owners));

    let clusters = watches::filtered(
        watches::stored(
            dyn_api(ctx, &cluster_ar),
            watcher::Config::default(),
            cluster_writer,
        ),
        ChangeFilter::new(routing::changed),
        routing::capi_owner_consumed,
        tally(ctx, "clusters"),
    );
    let (clusters, drive_clusters) = watches::fan_out(clusters, 3, "clusters", stopped());
    let terraform_clusters = watches::filtered(
        watches::stored(
            api::<TerraformCluster>(ctx),
            watcher::Config::default(),
            tc_writer,
        ),
        ChangeFilter::new(routing::changed),
        routing::terraform_cluster_consumed,
        tally(ctx, "terraformclusters"),
    )
    .map(|r| r.map(|tc| watches::metadata_of(&tc)));
    let (terraform_clusters, drive_tcs) =
        watches::fan_out(terraform_clusters, 2, "terraformclusters", stopped());
    let bootstrap = watches::filtered(
        watches::stored(
            api::<Secret>(ctx),
            watches::bootstrap_secrets(),
            secret_writer,
        ),
        ChangeFilter::new(routing::changed),
        |s: &Secret| routing::any_write(&s.metadata),
        tally(ctx, "bootstrap-secrets"),
    )
    .map(|r| r.map(|s| watches::metadata_of(&s)));
    let (bootstrap, drive_bootstrap) =
        watches::fan_out(bootstrap, 2, "bootstrap-secrets", stopped());

    let [jobs_c, jobs_m, jobs_p] = three(jobs);
    let [managed_c, managed_m, managed_p] = three(managed);
    let [cm_c, cm_m, cm_p] = three(configmaps);
    let [vs_c, vs_m, vs_p] = three(var_secrets);
    let [cl_c, cl_m, cl_p] = three(clusters);
    let [tc_m, tc_p] = two(terraform_clusters);
    let [boot_m, boot_p] = two(bootstrap);
    let feeds = AllFeeds {
        clusters: Feeds {
            jobs: jobs_c,
            managed_secrets: managed_c,
            configmaps: cm_c,
            variables_secrets: vs_c,
            clusters: cl_c,
        },
        machines: OwnedFeeds {
            common: Feeds {
                jobs: jobs_m,
                managed_secrets: managed_m,
                configmaps: cm_m,
                variables_secrets: vs_m,
                clusters: cl_m,
            },
            terraform_clusters: tc_m,
            bootstrap: boot_m,
            owner_writer: machine_owners,
        },
        pools: OwnedFeeds {
            common: Feeds {
                jobs: jobs_p,
                managed_secrets: managed_p,
                configmaps: cm_p,
                variables_secrets: vs_p,
                clusters: cl_p,
            },
            terraform_clusters: tc_p,
            bootstrap: boot_p,
            owner_writer: pool_owners,
        },
    };
    let drive = async move {
        tokio::join!(
            drive_jobs,
            drive_managed,
            drive_configmaps,
            drive_var_secrets,
            drive_clusters,
            drive_tcs,
            drive_bootstrap,
        );
    };
    (feeds, drive)
}

/// A watch of `S` by metadata, filtered to its writes.
fn metadata_feed<S>(
    ctx: &Context,
    config: watcher::Config,
    source: &'static str,
) -> impl futures::Stream<Item = Result<PartialObjectMeta<S>, watcher::Error>> + Send + 'static
where
    S: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let events = watcher::watcher(api::<PartialObjectMeta<S>>(ctx), config).default_backoff();
    watches::filtered(
        events,
        ChangeFilter::new(routing::changed),
        |s: &PartialObjectMeta<S>| routing::any_write(&s.metadata),
        tally(ctx, source),
    )
}
