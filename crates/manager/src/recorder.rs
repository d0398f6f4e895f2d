//! Events (`events.k8s.io/v1`) as Kubernetes' own recorders write them: the
//! first of a kind within six minutes is created, a repeat is counted into
//! that event's `series`. The same requests and objects as kube-runtime's
//! recorder, with a smaller memory: kube-runtime keeps a copy of every
//! event of the last six minutes in a map that never gives back its
//! capacity, which after a bring-up of many objects held megabytes for
//! good. This cache keeps the name, namespace and count a repeat needs,
//! keyed by a digest, and shrinks when it empties.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};

/// How long a repeat joins the series of an earlier event.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// Who writes the events.
/// Reasons the code asked to publish that `events::MANAGER` does not name:
/// never published, and kept so a test fails on them.
static UNLISTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether `reason` is one of the documented list; an unlisted one is
/// remembered (see [`unlisted_reasons`]) and must not be published.
pub fn listed(reason: &str) -> bool {
    if captf_api::names::events::MANAGER.contains(&reason) {
        return true;
    }
    UNLISTED
        .lock()
        .expect("the unlisted reasons")
        .push(reason.to_owned());
    false
}

/// Every unlisted reason asked for so far in this process.
pub fn unlisted_reasons() -> Vec<String> {
    UNLISTED.lock().expect("the unlisted reasons").clone()
}

#[derive(Debug, Clone)]
pub struct Reporter {
    pub controller: String,
    pub instance: Option<String>,
}

/// One event to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    pub warning: bool,
    pub reason: String,
    pub action: String,
    pub note: String,
}

/// What to send for an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Publish {
    /// A new event of this name.
    Create { name: String },
    /// The `count`th of the series of the event `name` in `namespace`.
    Series {
        name: String,
        namespace: String,
        count: i32,
    },
}

#[derive(Debug, Clone)]
struct Entry {
    name: String,
    namespace: String,
    count: i32,
    last: Instant,
}

/// The events of the last [`SERIES_WINDOW`], by a digest of what makes two
/// events the same: type, action, reason and the object (the note is not
/// part of it, as in Kubernetes' recorders).
#[derive(Debug, Default)]
pub struct SeriesCache {
    entries: HashMap<u64, Entry>,
}

impl SeriesCache {
    /// What to send for an event with `key` at `now`; `fresh_name` names a
    /// new one.
    pub fn record(
        &mut self,
        key: u64,
        namespace: &str,
        fresh_name: impl FnOnce() -> String,
        now: Instant,
    ) -> Publish {
        self.prune(now);
        match self.entries.get_mut(&key) {
            Some(e) => {
                e.count += 1;
                e.last = now;
                Publish::Series {
                    name: e.name.clone(),
                    namespace: e.namespace.clone(),
                    count: e.count,
                }
            }
            None => {
                let name = fresh_name();
                self.entries.insert(
                    key,
                    Entry {
                        name: name.clone(),
                        namespace: namespace.to_owned(),
                        count: 1,
                        last: now,
                    },
                );
                Publish::Create { name }
            }
        }
    }

    /// Forgets a series that could not be written (the next one starts a
    /// new event).
    pub fn forget(&mut self, key: u64) {
        self.entries.remove(&key);
    }

    fn prune(&mut self, now: Instant) {
        self.entries
            .retain(|_, e| now.saturating_duration_since(e.last) < SERIES_WINDOW);
        // A burst (a bring-up) must not keep its table for good.
        if self.entries.capacity() > 64 && self.entries.len() < self.entries.capacity() / 4 {
            self.entries.shrink_to(self.entries.len() * 2);
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.entries.capacity()
    }
}

/// Publishes events through the apiserver.
pub struct Recorder {
    client: kube::Client,
    reporter: Reporter,
    cache: Mutex<SeriesCache>,
}

impl Recorder {
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        Recorder {
            client,
            reporter,
            cache: Mutex::default(),
        }
    }

    fn key(&self, ev: &EventSpec, regarding: &ObjectReference) -> u64 {
        let mut h = DefaultHasher::new();
        (ev.warning, &ev.action, &ev.reason).hash(&mut h);
        (
            &regarding.kind,
            &regarding.namespace,
            &regarding.name,
            &regarding.uid,
            &regarding.api_version,
        )
            .hash(&mut h);
        h.finish()
    }

    /// Creates the event, or counts it into the series of the same event
    /// of the last six minutes.
    pub async fn publish(
        &self,
        ev: &EventSpec,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let key = self.key(ev, regarding);
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let now = Timestamp::now();
        let fresh = || {
            let base = regarding
                .name
                .as_deref()
                .unwrap_or(&self.reporter.controller);
            format!("{base}.{:x}", now.as_nanosecond())
        };
        let publish = self.cache.lock().expect("the event cache").record(
            key,
            &namespace,
            fresh,
            Instant::now(),
        );
        let result = match &publish {
            Publish::Create { name } => {
                let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
                let event = self.event(ev, regarding, name, &namespace, now);
                api.create(&PostParams::default(), &event).await.map(drop)
            }
            Publish::Series {
                name,
                namespace,
                count,
            } => {
                let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
                let series = EventSeries {
                    count: *count,
                    last_observed_time: MicroTime(now),
                };
                let patch = serde_json::json!({ "series": series });
                api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(drop)
            }
        };
        if result.is_err() {
            self.cache.lock().expect("the event cache").forget(key);
        }
        result
    }

    fn event(
        &self,
        ev: &EventSpec,
        regarding: &ObjectReference,
        name: &str,
        namespace: &str,
        now: Timestamp,
    ) -> K8sEvent {
        K8sEvent {
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            note: Some(ev.note.clone()),
            metadata: ObjectMeta {
                namespace: Some(namespace.to_owned()),
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(if ev.warning { "Warning" } else { "Normal" }.to_owned()),
            ..K8sEvent::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_within_six_minutes_is_counted_into_its_series() {
        let mut cache = SeriesCache::default();
        let t0 = Instant::now();
        let name = |n: &str| {
            let n = n.to_owned();
            move || n
        };
        assert_eq!(
            cache.record(1, "ns", name("a.1"), t0),
            Publish::Create { name: "a.1".into() }
        );
        assert_eq!(
            cache.record(1, "ns", name("a.2"), t0 + Duration::from_secs(60)),
            Publish::Series {
                name: "a.1".into(),
                namespace: "ns".into(),
                count: 2
            }
        );
        // Another event of the same object is another series.
        assert_eq!(
            cache.record(2, "ns", name("b.1"), t0 + Duration::from_secs(61)),
            Publish::Create { name: "b.1".into() }
        );
        // Six minutes after the last repeat, a new event.
        let later = t0 + Duration::from_secs(60) + SERIES_WINDOW;
        assert_eq!(
            cache.record(1, "ns", name("a.3"), later),
            Publish::Create { name: "a.3".into() }
        );
        // A series that could not be written starts again.
        cache.forget(1);
        assert_eq!(
            cache.record(1, "ns", name("a.4"), later),
            Publish::Create { name: "a.4".into() }
        );
    }

    #[test]
    fn a_burst_gives_its_memory_back_once_it_is_over() {
        let mut cache = SeriesCache::default();
        let t0 = Instant::now();
        for k in 0..5_000u64 {
            cache.record(k, "ns", || format!("e.{k}"), t0);
        }
        assert_eq!(cache.len(), 5_000);
        let burst = cache.capacity();
        let after = t0 + SERIES_WINDOW + Duration::from_secs(1);
        cache.record(9_999, "ns", || "quiet.1".into(), after);
        assert_eq!(cache.len(), 1);
        assert!(
            cache.capacity() <= 64,
            "capacity {} after a burst of {burst}",
            cache.capacity()
        );
    }

    #[test]
    fn only_listed_reasons_are_published_and_others_are_remembered() {
        assert!(listed("Destroyed"));
        assert!(listed(captf_api::names::events::STATE_LOST));
        assert!(!listed("SomethingNobodyDocumented"));
        assert!(unlisted_reasons().contains(&"SomethingNobodyDocumented".to_owned()));
        // A runner reason is not the manager's to publish.
        assert!(!listed("StepStarted"));
    }
}
