//! The watch streams the controllers are built from: filtered by
//! [`super::routing`] so an event wakes only its dependents and only for a
//! change they consume, and the stores the passes read their Cluster API
//! owners and bootstrap data from (objects without `managedFields`; never
//! a state Secret: those are watched by metadata only).

use std::fmt::Debug;

use captf_api::TerraformCluster;
use futures::{Stream, StreamExt, future};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, reflector::store::Writer};
use kube::{Resource, ResourceExt};

use super::routing::{ChangeFilter, Fingerprint};

/// Managed fields are never read: they leave every object before it is
/// stored or routed.
pub fn strip<K: Resource>(o: &mut K) {
    o.managed_fields_mut().clear();
}

fn key<K: Resource>(o: &K) -> String {
    o.meta()
        .uid
        .clone()
        .unwrap_or_else(|| format!("{:?}/{:?}", o.meta().namespace, o.meta().name))
}

/// Where watch events are counted (`captf_watch_events_total`).
#[derive(Clone)]
pub struct Tally {
    pub metrics: crate::metrics::Metrics,
    pub controller: &'static str,
    pub source: &'static str,
}

impl Tally {
    fn count(&self, woke: bool) {
        self.metrics.watch_event(self.controller, self.source, woke);
    }
}

/// The objects of a watch whose change `filter` lets through (deleted ones
/// included, so their dependents learn they are gone).
pub fn filtered<K, S>(
    events: S,
    mut filter: ChangeFilter,
    fingerprint: impl Fn(&K) -> Fingerprint + Send + 'static,
    tally: Tally,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource + Send + 'static,
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
{
    events.filter_map(move |ev| {
        let out = match ev {
            Ok(Event::Apply(o) | Event::InitApply(o)) => {
                let wakes = filter.applied(key(&o), fingerprint(&o));
                tally.count(wakes);
                wakes.then_some(Ok(o))
            }
            Ok(Event::Delete(o)) => {
                let wakes = filter.deleted(&key(&o));
                tally.count(wakes);
                wakes.then_some(Ok(o))
            }
            Ok(Event::Init | Event::InitDone) => None,
            Err(e) => Some(Err(e)),
        };
        future::ready(out)
    })
}

/// How many items a subscriber of a shared watch may fall behind before
/// the watch waits for it (a controller takes each item straight into its
/// queue, so this is only ever reached in a burst).
const FEED_CAPACITY: usize = 1024;

/// What one controller receives of a shared watch.
pub type Feed<T> = futures::stream::BoxStream<'static, Result<T, watcher::Error>>;

/// One watch for `subscribers` controllers: each feed yields every item
/// of `source`, in order. The returned future drives the watch until
/// `stop` resolves or every feed is dropped. A watch error is logged here
/// (the watch retries with its backoff) instead of being handed to each
/// controller, which would count it as a failed pass.
pub fn fan_out<T, S>(
    source: S,
    subscribers: usize,
    name: &'static str,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> (
    Vec<Feed<T>>,
    impl std::future::Future<Output = ()> + Send + 'static,
)
where
    T: Clone + Send + 'static,
    S: Stream<Item = Result<T, watcher::Error>> + Send + 'static,
{
    use futures::SinkExt;
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..subscribers)
        .map(|_| futures::channel::mpsc::channel::<T>(FEED_CAPACITY))
        .unzip();
    let feeds = receivers.into_iter().map(|rx| rx.map(Ok).boxed()).collect();
    let drive = async move {
        let mut senders = senders;
        let mut source = std::pin::pin!(source);
        let mut stop = std::pin::pin!(stop);
        loop {
            let item = tokio::select! {
                () = &mut stop => return,
                item = source.next() => item,
            };
            match item {
                Some(Ok(o)) => {
                    let mut open = Vec::with_capacity(senders.len());
                    for mut tx in senders {
                        // A controller that stopped no longer listens.
                        if tx.send(o.clone()).await.is_ok() {
                            open.push(tx);
                        }
                    }
                    senders = open;
                    if senders.is_empty() {
                        return;
                    }
                }
                Some(Err(e)) => tracing::warn!(watch = name, error = %e, "watch failed; retrying"),
                None => return,
            }
        }
    };
    (feeds, drive)
}

/// The metadata of an object, for the mappers that read nothing else.
pub fn metadata_of<K: Resource>(o: &K) -> kube::api::PartialObjectMeta<K> {
    kube::api::PartialObjectMeta {
        types: None,
        metadata: o.meta().clone(),
        _phantom: Default::default(),
    }
}

/// A watch whose objects are kept in `writer`'s store (managed fields
/// stripped), yielding its events after the store has them.
pub fn stored<K>(
    api: Api<K>,
    config: watcher::Config,
    writer: Writer<K>,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    reflector::reflector(writer, watcher::watcher(api, config).modify(strip::<K>)).default_backoff()
}

/// What the machine and pool passes read from caches instead of the
/// apiserver: the owners (Machines or MachinePools), the Clusters, the
/// TerraformClusters and the bootstrap data Secrets (labeled with a cluster
/// name, not managed by us). Each of the two controllers keeps its own.
#[derive(Clone)]
pub struct OwnerStores {
    pub owners: Store<DynamicObject>,
    pub clusters: Store<DynamicObject>,
    pub terraform_clusters: Store<TerraformCluster>,
    pub bootstrap_secrets: Store<Secret>,
    listed: std::sync::Arc<tokio::sync::OnceCell<()>>,
}

impl OwnerStores {
    pub fn new(
        owners: Store<DynamicObject>,
        clusters: Store<DynamicObject>,
        terraform_clusters: Store<TerraformCluster>,
        bootstrap_secrets: Store<Secret>,
    ) -> Self {
        OwnerStores {
            owners,
            clusters,
            terraform_clusters,
            bootstrap_secrets,
            listed: Default::default(),
        }
    }

    /// Waits until every store has listed once (a pass must not mistake a
    /// store still filling for a missing owner). One pass waits on the
    /// stores and the others on it: a store's readiness wakes only the
    /// last of several tasks waiting on it at once, so passes starting
    /// together (a restart) would otherwise wait forever.
    pub async fn ready(&self) {
        self.listed
            .get_or_init(|| async {
                let _ = self.owners.wait_until_ready().await;
                let _ = self.clusters.wait_until_ready().await;
                let _ = self.terraform_clusters.wait_until_ready().await;
                let _ = self.bootstrap_secrets.wait_until_ready().await;
            })
            .await;
    }
}

/// An object of a store by namespace and name.
pub fn get<K>(store: &Store<K>, dyntype: &K::DynamicType, namespace: &str, name: &str) -> Option<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let r = reflector::ObjectRef::<K>::new_with(name, dyntype.clone()).within(namespace);
    store.get(&r).map(|o| (*o).clone())
}

/// The bootstrap data Secrets: labeled with a cluster name, and neither
/// ours (state, records, per-run inputs) nor a variables source.
pub fn bootstrap_secrets() -> watcher::Config {
    watcher::Config::default().labels(&format!(
        "{},!{},!{}",
        captf_api::names::labels::CLUSTER_NAME,
        captf_api::names::labels::MANAGED,
        captf_api::names::labels::VARIABLES
    ))
}

/// The Secrets we manage (state, records, per-run inputs), by metadata
/// only: their content never enters a cache. Backups are left out at the
/// apiserver: only their own object's pass writes them and nothing it
/// decides reads them back, so their events would wake no one, and each
/// state keeps up to `--state-backups` of them (five times the state
/// Secrets the watch would otherwise remember).
pub fn managed_secrets() -> watcher::Config {
    use captf_api::names::labels;
    watcher::Config::default().labels(&format!(
        "{}=true,!{}",
        labels::MANAGED,
        labels::STATE_BACKUP
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn every_pass_waiting_for_the_stores_goes_on_once_they_listed() {
        let mut mp = Writer::new(crate::capi::machine_pool_resource());
        let mut clusters = Writer::new(crate::capi::cluster_resource());
        let mut tcs = Writer::<TerraformCluster>::default();
        let mut secrets = Writer::<Secret>::default();
        let stores = OwnerStores::new(
            mp.as_reader(),
            clusters.as_reader(),
            tcs.as_reader(),
            secrets.as_reader(),
        );
        // Ten passes start together, as they do after a restart.
        let waiting: Vec<_> = (0..10)
            .map(|_| {
                let s = stores.clone();
                tokio::spawn(async move { s.ready().await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            waiting.iter().all(|w| !w.is_finished()),
            "no store has listed yet"
        );
        mp.apply_watcher_event(&Event::InitDone);
        clusters.apply_watcher_event(&Event::InitDone);
        tcs.apply_watcher_event(&Event::InitDone);
        secrets.apply_watcher_event(&Event::InitDone);
        for w in waiting {
            tokio::time::timeout(Duration::from_secs(5), w)
                .await
                .expect("a pass waiting for the stores goes on")
                .unwrap();
        }
    }

    /// The managed-Secret watch, on the real apiserver, lists state
    /// chunks, records and per-run Secrets, and no backup.
    #[tokio::test]
    async fn the_managed_secret_watch_leaves_backups_out() {
        use kube::api::{ListParams, PostParams};
        use serde_json::json;
        let env = captf_testenv::TestEnv::get().await;
        let ns = env.namespace().await;
        let secrets = ns.api::<Secret>();
        for (name, labels) in [
            (
                "tfstate-default-abc-mp",
                json!({"captf.io/managed": "true", "tfstate": "true"}),
            ),
            ("captf-inputs-mp-a", json!({"captf.io/managed": "true"})),
            (
                "captf-state-backup-abc-mp-3",
                json!({"captf.io/managed": "true", "captf.io/state-backup": "true"}),
            ),
            ("unrelated", json!({})),
        ] {
            let s: Secret =
                serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))
                    .unwrap();
            secrets.create(&PostParams::default(), &s).await.unwrap();
        }
        let selector = managed_secrets().label_selector.unwrap();
        let mut listed: Vec<String> = secrets
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|s| s.metadata.name)
            .collect();
        listed.sort();
        assert_eq!(listed, ["captf-inputs-mp-a", "tfstate-default-abc-mp"]);
    }
}
