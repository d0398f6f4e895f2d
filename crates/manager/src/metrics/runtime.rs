//! Reconcile and queue metrics in the shape Cluster API's dashboards and
//! the `CAPTFReconcileErrors` alert query (`controller_runtime_*`,
//! `workqueue_*`, label `controller`).
//!
//! The queue is the set of objects a watch event woke and no pass has
//! picked up yet: an object woken twice before its pass is one item, as in
//! a deduplicating work queue. Passes the controller schedules itself (a
//! requeue after a delay) enter no queue: they are timers, not work.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::help;

/// Pass and queue times from 5 ms to 60 s.
const TIME_BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: &'static str,
    controller: &'static str,
}

fn time_histogram() -> Histogram {
    Histogram::new(TIME_BUCKETS)
}

type Timed<L> = Family<L, Histogram, fn() -> Histogram>;

#[derive(Clone)]
pub(super) struct RuntimeFamilies {
    errors: Family<ControllerLabels, Counter>,
    reconcile_time: Timed<ControllerLabels>,
    active_workers: Family<ControllerLabels, Gauge>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    queue_duration: Timed<QueueLabels>,
    work_duration: Timed<QueueLabels>,
}

impl RuntimeFamilies {
    pub(super) fn register(r: &mut Registry) -> RuntimeFamilies {
        let f = RuntimeFamilies {
            errors: Family::default(),
            reconcile_time: Family::new_with_constructor(time_histogram),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(time_histogram),
            work_duration: Family::new_with_constructor(time_histogram),
        };
        r.register(
            "controller_runtime_reconcile_errors",
            help("Reconcile passes per controller that ended in an error"),
            f.errors.clone(),
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            help("Wall time of a reconcile pass per controller"),
            f.reconcile_time.clone(),
        );
        r.register(
            "controller_runtime_active_workers",
            help("Reconcile passes running now per controller"),
            f.active_workers.clone(),
        );
        r.register(
            "controller_runtime_max_concurrent_reconciles",
            help("Reconcile passes a controller may run at once"),
            f.max_concurrent.clone(),
        );
        r.register(
            "workqueue_depth",
            help("Objects woken by a watch event and not picked up by a pass yet"),
            f.depth.clone(),
        );
        r.register(
            "workqueue_adds",
            help("Objects a watch event woke that were not waiting already"),
            f.adds.clone(),
        );
        r.register(
            "workqueue_queue_duration_seconds",
            help("Seconds an object waited from its wake to its pass"),
            f.queue_duration.clone(),
        );
        r.register(
            "workqueue_work_duration_seconds",
            help("Seconds a pass took, from the queue's view"),
            f.work_duration.clone(),
        );
        f
    }
}

/// The queue of one controller. Clones share it.
#[derive(Clone)]
pub struct Queue {
    controller: &'static str,
    waiting: Arc<Mutex<HashMap<(String, String), Instant>>>,
    families: RuntimeFamilies,
}

/// A pass that runs; dropping it ends the pass's timing.
pub struct PassTimer {
    queue: Queue,
    started: Instant,
}

impl Queue {
    fn labels(&self) -> QueueLabels {
        QueueLabels {
            name: self.controller,
            controller: self.controller,
        }
    }

    fn controller(&self) -> ControllerLabels {
        ControllerLabels {
            controller: self.controller,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Instant>> {
        // A panic elsewhere while holding the map leaves it usable.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A watch event woke the object `namespace/name`.
    pub fn woke(&self, namespace: &str, name: &str) {
        let mut waiting = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        if waiting.contains_key(&key) {
            return;
        }
        waiting.insert(key, Instant::now());
        let depth = waiting.len();
        drop(waiting);
        self.families.adds.get_or_create(&self.labels()).inc();
        self.families
            .depth
            .get_or_create(&self.labels())
            .set(super::to_gauge(depth as u64));
    }

    /// A pass of `namespace/name` starts; it ends when the timer drops.
    pub fn started(&self, namespace: &str, name: &str) -> PassTimer {
        let now = Instant::now();
        let mut waiting = self.lock();
        let since = waiting.remove(&(namespace.to_owned(), name.to_owned()));
        let depth = waiting.len();
        drop(waiting);
        if let Some(since) = since {
            self.families
                .queue_duration
                .get_or_create(&self.labels())
                .observe(now.duration_since(since).as_secs_f64());
        }
        self.families
            .depth
            .get_or_create(&self.labels())
            .set(super::to_gauge(depth as u64));
        self.families
            .active_workers
            .get_or_create(&self.controller())
            .inc();
        PassTimer {
            queue: self.clone(),
            started: now,
        }
    }

    /// A woken object left the queue without a pass (it is gone, or not
    /// the controller's to reconcile).
    pub fn left(&self, namespace: &str, name: &str) {
        let mut waiting = self.lock();
        waiting.remove(&(namespace.to_owned(), name.to_owned()));
        let depth = waiting.len();
        drop(waiting);
        self.families
            .depth
            .get_or_create(&self.labels())
            .set(super::to_gauge(depth as u64));
    }

    /// A pass ended in an error.
    pub fn failed(&self) {
        self.families.errors.get_or_create(&self.controller()).inc();
    }
}

impl Drop for PassTimer {
    fn drop(&mut self) {
        let took = self.started.elapsed().as_secs_f64();
        let f = &self.queue.families;
        f.active_workers
            .get_or_create(&self.queue.controller())
            .dec();
        f.reconcile_time
            .get_or_create(&self.queue.controller())
            .observe(took);
        f.work_duration
            .get_or_create(&self.queue.labels())
            .observe(took);
    }
}

impl super::Metrics {
    /// The queue of `controller`, which runs at most `concurrency` passes
    /// at once.
    pub fn queue(&self, controller: &'static str, concurrency: u16) -> Queue {
        let families = self.inner.runtime.clone();
        families
            .max_concurrent
            .get_or_create(&ControllerLabels { controller })
            .set(i64::from(concurrency));
        // Every series exists from the start, so a rate over it is 0, not
        // absent, until something happens.
        let q = Queue {
            controller,
            waiting: Default::default(),
            families,
        };
        let _ = q.families.errors.get_or_create(&q.controller());
        let _ = q.families.active_workers.get_or_create(&q.controller());
        let _ = q.families.depth.get_or_create(&q.labels());
        let _ = q.families.adds.get_or_create(&q.labels());
        let mut queues = self.inner.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues.entry(controller).or_insert(q).clone()
    }
}
