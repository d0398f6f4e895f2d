//! What a finished Job's runner reported beyond its outcome: how long each
//! step took, how long the Job queued, which attempt succeeded, how many
//! resources it changed or found drifted, and whether it broke a stale
//! lock. Counted once per Job, with its outcome (see
//! [`super::Metrics::job_finished`]).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::{KindLabels, KindOpLabels, help, labels, log_refused};

/// Per-step wall time from 1 s to 2 h.
const STEP_BUCKETS: [f64; 12] = [
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 3600.0, 7200.0,
];

/// Creation to runner start, from 5 s to 30 min, with the 300 s boundary
/// `CAPTFJobQueueSlow` alerts on.
const QUEUE_BUCKETS: [f64; 9] = [5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0];

/// Attempts of a succeeded Job: 1 is a first-time success.
const ATTEMPT_BUCKETS: [f64; 7] = [1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    kind: &'static str,
    op: &'static str,
    step: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChangeLabels {
    kind: &'static str,
    op: &'static str,
    action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DriftLabels {
    kind: &'static str,
    action: &'static str,
}

fn step_histogram() -> Histogram {
    Histogram::new(STEP_BUCKETS)
}

fn queue_histogram() -> Histogram {
    Histogram::new(QUEUE_BUCKETS)
}

fn attempt_histogram() -> Histogram {
    Histogram::new(ATTEMPT_BUCKETS)
}

pub(super) struct JobFamilies {
    steps: Family<StepLabels, Histogram, fn() -> Histogram>,
    queue: Family<KindOpLabels, Histogram, fn() -> Histogram>,
    attempts: Family<KindOpLabels, Histogram, fn() -> Histogram>,
    changed: Family<ChangeLabels, Counter>,
    drift: Family<DriftLabels, Counter>,
    force_unlocks: Family<KindLabels, Counter>,
}

impl JobFamilies {
    pub(super) fn register(r: &mut Registry) -> JobFamilies {
        let f = JobFamilies {
            steps: Family::new_with_constructor(step_histogram),
            queue: Family::new_with_constructor(queue_histogram),
            attempts: Family::new_with_constructor(attempt_histogram),
            changed: Family::default(),
            drift: Family::default(),
            force_unlocks: Family::default(),
        };
        r.register(
            "captf_job_step_duration_seconds",
            help("Wall time of each runner step of completed run Jobs in seconds"),
            f.steps.clone(),
        );
        r.register(
            "captf_job_queue_seconds",
            help("Seconds from a run Job's creation to the start of its runner"),
            f.queue.clone(),
        );
        r.register(
            "captf_job_attempts",
            help("Attempt number of a succeeded run Job: 1 plus the failed Jobs of its operation since the last success"),
            f.attempts.clone(),
        );
        r.register(
            "captf_resources_changed",
            help("Resources an apply or destroy changed, by action, from the runtime's summary"),
            f.changed.clone(),
        );
        r.register(
            "captf_drift_resources",
            help("Resources a drift-finding Job would change, by action"),
            f.drift.clone(),
        );
        r.register(
            "captf_lock_force_unlocks",
            help("Stale state locks a run Job force-unlocked"),
            f.force_unlocks.clone(),
        );
        f
    }
}

/// Resource counts by action, as the runner reported them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceCounts {
    pub create: u64,
    pub update: u64,
    pub replace: u64,
    pub delete: u64,
    pub import: u64,
}

/// What a finished Job's runner reported, for the Job metrics beyond its
/// outcome. Empty for a Job that left no result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobReport {
    /// Each step the runner ran and its wall time.
    pub steps: Vec<(String, Duration)>,
    /// Creation to the start of the runner; `None` when the pod reported
    /// no start.
    pub queued: Option<Duration>,
    /// The attempt number of a succeeded Job; `None` for any other.
    pub attempts: Option<u32>,
    /// What an apply or destroy changed (its runtime's summary line).
    pub changed: Option<ResourceCounts>,
    /// What a drift check found the infrastructure would need.
    pub drift: Option<ResourceCounts>,
    /// A stale lock was broken (the `force-unlock` step succeeded).
    pub force_unlocked: bool,
}

impl super::Metrics {
    /// Records the runner's report of a finished Job of `kind` and `op`.
    pub fn job_report(&self, kind: &str, op: &str, report: &JobReport) {
        let (kind, op) = match labels::kind(kind).and_then(|k| Ok((k, labels::op(op)?))) {
            Ok(l) => l,
            Err(e) => return log_refused("captf_job_step_duration_seconds", &e),
        };
        let f = &self.inner.jobs;
        for (step, took) in &report.steps {
            let step = labels::step(step);
            f.steps
                .get_or_create(&StepLabels { kind, op, step })
                .observe(took.as_secs_f64());
        }
        let kind_op = KindOpLabels { kind, op };
        if let Some(q) = report.queued {
            f.queue.get_or_create(&kind_op).observe(q.as_secs_f64());
        }
        if let Some(n) = report.attempts {
            f.attempts.get_or_create(&kind_op).observe(f64::from(n));
        }
        if let Some(c) = report.changed {
            for (action, n) in [
                ("create", c.create),
                ("update", c.update),
                ("delete", c.delete),
                ("import", c.import),
            ] {
                if n > 0 {
                    f.changed
                        .get_or_create(&ChangeLabels { kind, op, action })
                        .inc_by(n);
                }
            }
        }
        if let Some(d) = report.drift {
            for (action, n) in [
                ("create", d.create),
                ("update", d.update),
                ("replace", d.replace),
                ("delete", d.delete),
            ] {
                if n > 0 {
                    f.drift
                        .get_or_create(&DriftLabels { kind, action })
                        .inc_by(n);
                }
            }
        }
        if report.force_unlocked {
            f.force_unlocks.get_or_create(&KindLabels { kind }).inc();
        }
    }
}
