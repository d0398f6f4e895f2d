//! The manager's `captf_*` metrics and the diagnostics endpoint serving
//! them.
//!
//! [`Metrics`] is one registry shared by every reconciler: its methods are
//! named for what happened and take plain values, which are checked
//! against the documented label sets (see [`labels`]) before any series is
//! touched. Per-object series are removed with [`Metrics::forget`] when the
//! object is gone, so a scrape never reports deleted objects.

pub mod access;
mod active;
pub mod client;
pub mod diagnostics;
pub mod flow;
pub mod jobs;
pub mod labels;
pub mod runtime;
pub mod safety;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets_range};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

pub use diagnostics::{DiagnosticsError, serve, serve_on};
pub use jobs::{JobReport, ResourceCounts};
pub use labels::InvalidLabel;
pub use runtime::{PassTimer, Queue};

/// Every HELP text carries the stability level, as Kubernetes components do.
const STABILITY: &str = "[ALPHA] ";

/// The commit this binary was built from, when the build said so.
pub const COMMIT: &str = match option_env!("CAPTF_COMMIT") {
    Some(c) => c,
    None => "unknown",
};

/// Job wall time from 15 s to 2 h, ten buckets growing by the same factor.
const JOB_DURATION_MIN: f64 = 15.0;
const JOB_DURATION_MAX: f64 = 7200.0;
const JOB_DURATION_BUCKETS: u16 = 10;

fn job_duration_buckets() -> Vec<f64> {
    let mut buckets: Vec<f64> =
        exponential_buckets_range(JOB_DURATION_MIN, JOB_DURATION_MAX, JOB_DURATION_BUCKETS)
            .collect();
    // The computed top bound may miss 7200 by a rounding error; pin it so
    // the `le` label reads exactly 2 h.
    if let Some(last) = buckets.last_mut() {
        *last = JOB_DURATION_MAX;
    }
    buckets
}

fn job_duration_histogram() -> Histogram {
    Histogram::new(job_duration_buckets())
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindOpLabels {
    kind: &'static str,
    op: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    kind: &'static str,
    op: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobErrorLabels {
    kind: &'static str,
    op: &'static str,
    error_kind: &'static str,
    step: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    kind: &'static str,
    op: &'static str,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindReasonLabels {
    kind: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindResultLabels {
    kind: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectLabels {
    kind: &'static str,
    namespace: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectOpLabels {
    kind: &'static str,
    namespace: String,
    name: String,
    op: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
    contract: &'static str,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// The status of a condition, as the per-object gauges export it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionValue {
    True,
    False,
    Unknown,
}

impl ConditionValue {
    /// From a condition's `status` string; anything but `True`/`False`
    /// (including no condition at all) is Unknown.
    pub fn from_status(status: Option<&str>) -> ConditionValue {
        match status {
            Some("True") => ConditionValue::True,
            Some("False") => ConditionValue::False,
            _ => ConditionValue::Unknown,
        }
    }

    fn gauge(self) -> i64 {
        match self {
            ConditionValue::True => 1,
            ConditionValue::False => 0,
            ConditionValue::Unknown => -1,
        }
    }
}

/// Why a Job did not succeed, as its runner reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobError<'a> {
    /// The runner's error class (`step`, `image-layout`, ...).
    pub kind: &'a str,
    /// The runner step that failed, if one did.
    pub step: Option<&'a str>,
}

/// Everything exported per object, read from its status after a
/// reconcile. A `None` removes that series (the value is not known).
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectGauges {
    pub ready: ConditionValue,
    pub infrastructure_healthy: Option<ConditionValue>,
    pub drift_detected: bool,
    /// The state as this pass read it.
    pub state: Observed<StateSize>,
    /// Size of the rendered module inputs (`main.tf.json` and
    /// `terraform.tfvars.json`), as this pass rendered them.
    pub inputs_bytes: Observed<u64>,
    /// A TerraformMachine's `status.unhealthySamples` (`None` for other
    /// kinds).
    pub unhealthy_samples: Option<u64>,
    /// Newest successful Job per operation, in Unix seconds. Operations not
    /// listed lose their series (e.g. drift while it is not scheduled).
    pub last_success: Vec<(String, f64)>,
}

/// A value a pass may or may not have looked at: one it did not read
/// leaves its series as the last pass that read it set it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Observed<T> {
    /// Not read this pass: the series stays.
    #[default]
    Unread,
    /// Read and absent (no state yet): the series goes.
    Absent,
    Value(T),
}

/// The size of an object's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateSize {
    /// Managed resources (not data sources).
    pub resources: u64,
    /// Compressed size summed over its Secrets.
    pub bytes: u64,
}

struct Families {
    jobs: Family<JobLabels, Counter>,
    job_duration: Family<JobLabels, Histogram, fn() -> Histogram>,
    job_errors: Family<JobErrorLabels, Counter>,
    jobs_active: Family<KindOpLabels, Gauge>,
    decisions: Family<DecisionLabels, Counter>,
    inputs_hash_changes: Family<KindLabels, Counter>,
    lease_waits: Family<KindReasonLabels, Counter>,
    state_read_errors: Family<KindReasonLabels, Counter>,
    state_backups: Family<KindResultLabels, Counter>,
    state_restores: Family<KindResultLabels, Counter>,
    outputs_invalid: Family<KindReasonLabels, Counter>,
    remediation_requests: Family<ActionLabels, Counter>,
    ready: Family<ObjectLabels, Gauge>,
    infrastructure_healthy: Family<ObjectLabels, Gauge>,
    drift_detected: Family<ObjectLabels, Gauge>,
    state_resources: Family<ObjectLabels, Gauge>,
    state_bytes: Family<ObjectLabels, Gauge>,
    inputs_bytes: Family<ObjectLabels, Gauge>,
    unhealthy_samples: Family<NamespacedLabels, Gauge>,
    last_success: Family<ObjectOpLabels, FloatGauge>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespacedLabels {
    namespace: String,
    name: String,
}

struct Inner {
    registry: Registry,
    families: Families,
    flow: flow::FlowFamilies,
    jobs: jobs::JobFamilies,
    safety: safety::SafetyFamilies,
    runtime: runtime::RuntimeFamilies,
    client: client::ClientFamilies,
    active: std::sync::Mutex<active::ActiveJobs>,
    /// One queue per controller, made on first use.
    queues: std::sync::Mutex<std::collections::HashMap<&'static str, runtime::Queue>>,
}

/// The manager's metrics. Clones share one registry.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

fn help(text: &str) -> String {
    format!("{STABILITY}{text}")
}

/// Saturates sizes a gauge cannot hold (never reached in practice).
fn to_gauge(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn log_refused(what: &str, e: &InvalidLabel) {
    tracing::warn!(metric = what, error = %e, "metric observation dropped");
}

impl Metrics {
    /// A registry holding every `captf_*` metric and `captf_build_info`.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let f = Families {
            jobs: Family::default(),
            job_duration: Family::new_with_constructor(job_duration_histogram),
            job_errors: Family::default(),
            jobs_active: Family::default(),
            decisions: Family::default(),
            inputs_hash_changes: Family::default(),
            lease_waits: Family::default(),
            state_read_errors: Family::default(),
            state_backups: Family::default(),
            state_restores: Family::default(),
            outputs_invalid: Family::default(),
            remediation_requests: Family::default(),
            ready: Family::default(),
            infrastructure_healthy: Family::default(),
            drift_detected: Family::default(),
            state_resources: Family::default(),
            state_bytes: Family::default(),
            inputs_bytes: Family::default(),
            unhealthy_samples: Family::default(),
            last_success: Family::default(),
        };
        // Counters are registered without `_total`: the encoder appends it.
        let r = &mut registry;
        r.register(
            "captf_jobs",
            help("Run Jobs that completed"),
            f.jobs.clone(),
        );
        r.register(
            "captf_job_duration_seconds",
            help("Wall time of completed run Jobs in seconds"),
            f.job_duration.clone(),
        );
        r.register(
            "captf_job_errors",
            help("Run Jobs that did not succeed, by error class and failed step"),
            f.job_errors.clone(),
        );
        r.register(
            "captf_jobs_active",
            help("Run Jobs currently running"),
            f.jobs_active.clone(),
        );
        r.register(
            "captf_reconcile_op_decisions",
            help("Operations a reconcile decided to start (op none when it started nothing)"),
            f.decisions.clone(),
        );
        r.register(
            "captf_inputs_hash_changes",
            help("Applies started because the inputs of a mutable kind changed"),
            f.inputs_hash_changes.clone(),
        );
        r.register(
            "captf_lease_waits",
            help("Operations that started waiting for a lease or a Job slot"),
            f.lease_waits.clone(),
        );
        r.register(
            "captf_state_read_errors",
            help("State reads that turned unreadable"),
            f.state_read_errors.clone(),
        );
        r.register(
            "captf_state_backups",
            help("State backups taken, pruned and skipped"),
            f.state_backups.clone(),
        );
        r.register(
            "captf_state_restores",
            help("State restores requested with captf.io/restore-state, by outcome"),
            f.state_restores.clone(),
        );
        r.register(
            "captf_outputs_invalid",
            help("Module outputs that turned invalid"),
            f.outputs_invalid.clone(),
        );
        r.register(
            "captf_remediation_requests",
            help("remediate-machine annotations requested or withdrawn on Machines"),
            f.remediation_requests.clone(),
        );
        r.register(
            "captf_ready",
            help("Ready condition per object: 1 True, 0 False, -1 Unknown"),
            f.ready.clone(),
        );
        r.register(
            "captf_infrastructure_healthy",
            help("InfrastructureHealthy condition per object: 1 True, 0 False, -1 Unknown"),
            f.infrastructure_healthy.clone(),
        );
        r.register(
            "captf_drift_detected",
            help("1 while drift is detected on the object, else 0"),
            f.drift_detected.clone(),
        );
        r.register(
            "captf_state_resources",
            help("Managed resources recorded in the object's state"),
            f.state_resources.clone(),
        );
        r.register(
            "captf_state_bytes",
            help("Compressed size of the object's state in bytes, over all its Secrets"),
            f.state_bytes.clone(),
        );
        r.register(
            "captf_inputs_bytes",
            help("Size of the object's rendered module inputs in bytes"),
            f.inputs_bytes.clone(),
        );
        r.register(
            "captf_unhealthy_samples",
            help("A TerraformMachine's status.unhealthySamples"),
            f.unhealthy_samples.clone(),
        );
        r.register(
            "captf_last_success_timestamp_seconds",
            help("Unix time of the newest successful Job of the operation"),
            f.last_success.clone(),
        );
        let build: Family<BuildLabels, Gauge> = Family::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                commit: COMMIT,
                contract: captf_contract::CONTRACT_VERSION,
            })
            .set(1);
        r.register(
            "captf_build_info",
            help("Build of the manager and the module contract version it implements; always 1"),
            build,
        );
        let flow = flow::FlowFamilies::register(&mut registry);
        let jobs = jobs::JobFamilies::register(&mut registry);
        let safety = safety::SafetyFamilies::register(&mut registry);
        let runtime = runtime::RuntimeFamilies::register(&mut registry);
        let client = client::ClientFamilies::register(&mut registry);
        Metrics {
            inner: Arc::new(Inner {
                registry,
                families: f,
                flow,
                jobs,
                safety,
                runtime,
                client,
                active: Default::default(),
                queues: Default::default(),
            }),
        }
    }

    fn f(&self) -> &Families {
        &self.inner.families
    }

    /// A run Job completed (counted once per Job, at bookkeeping). `error`
    /// is what the runner reported; it is ignored for a succeeded Job, and a
    /// Job that did not succeed without one is classed by its `result`.
    pub fn job_finished(
        &self,
        kind: &str,
        op: &str,
        result: &str,
        duration: Duration,
        error: Option<JobError<'_>>,
    ) {
        let checked = (|| {
            Ok((
                labels::kind(kind)?,
                labels::op(op)?,
                labels::result(result)?,
            ))
        })();
        let (kind, op, result) = match checked {
            Ok(l) => l,
            Err(e) => return log_refused("captf_jobs_total", &e),
        };
        let job = JobLabels { kind, op, result };
        self.f().jobs.get_or_create(&job).inc();
        self.f()
            .job_duration
            .get_or_create(&job)
            .observe(duration.as_secs_f64());
        if result == labels::RESULT_SUCCEEDED {
            return;
        }
        let (error_kind, step) = match error {
            Some(e) => (
                labels::error_kind(e.kind),
                e.step.map_or(labels::STEP_NONE, labels::step),
            ),
            None => (labels::error_kind_of_result(result), labels::STEP_NONE),
        };
        self.f()
            .job_errors
            .get_or_create(&JobErrorLabels {
                kind,
                op,
                error_kind,
                step,
            })
            .inc();
    }

    /// A reconcile decided to start `op` (or nothing, with `None`) for
    /// `reason` (`NoState`, `UpToDate`, ...).
    pub fn decided(&self, kind: &str, op: Option<&str>, reason: &str) {
        let checked = (|| {
            Ok((
                labels::kind(kind)?,
                labels::decided_op(op)?,
                labels::decision_reason(reason)?,
            ))
        })();
        match checked {
            Ok((kind, op, reason)) => {
                self.f()
                    .decisions
                    .get_or_create(&DecisionLabels { kind, op, reason })
                    .inc();
            }
            Err(e) => log_refused("captf_reconcile_op_decisions_total", &e),
        }
    }

    /// An apply started because the inputs of a mutable kind changed.
    pub fn inputs_hash_changed(&self, kind: &str) {
        match labels::kind(kind) {
            Ok(kind) => {
                self.f()
                    .inputs_hash_changes
                    .get_or_create(&KindLabels { kind })
                    .inc();
            }
            Err(e) => log_refused("captf_inputs_hash_changes_total", &e),
        }
    }

    fn kind_reason(
        &self,
        metric: &str,
        family: &Family<KindReasonLabels, Counter>,
        kind: &str,
        reason: Result<&'static str, InvalidLabel>,
    ) {
        match labels::kind(kind).and_then(|k| Ok((k, reason?))) {
            Ok((kind, reason)) => {
                family
                    .get_or_create(&KindReasonLabels { kind, reason })
                    .inc();
            }
            Err(e) => log_refused(metric, &e),
        }
    }

    /// An operation started waiting (`run_lease`, `cluster_operation`,
    /// `machine_operations`, `job_slot`); once per wait, not per requeue.
    pub fn lease_wait_started(&self, kind: &str, reason: &str) {
        let f = &self.f().lease_waits;
        self.kind_reason(
            "captf_lease_waits_total",
            f,
            kind,
            labels::lease_wait_reason(reason),
        );
    }

    /// An object's state turned unreadable (`inconsistent`, `encrypted`,
    /// `corrupt`, `lost`, `locked`); once per transition.
    pub fn state_read_failed(&self, kind: &str, reason: &str) {
        let f = &self.f().state_read_errors;
        self.kind_reason(
            "captf_state_read_errors_total",
            f,
            kind,
            labels::state_read_reason(reason),
        );
    }

    /// `count` state backups were taken, pruned or skipped.
    pub fn state_backups(&self, kind: &str, result: &str, count: u64) {
        let f = &self.f().state_backups;
        match labels::kind(kind).and_then(|k| Ok((k, labels::backup_result(result)?))) {
            Ok((kind, result)) => {
                f.get_or_create(&KindResultLabels { kind, result })
                    .inc_by(count);
            }
            Err(e) => log_refused("captf_state_backups_total", &e),
        }
    }

    /// A requested restore ended (or named no backup).
    pub fn state_restore(&self, kind: &str, result: &str) {
        let f = &self.f().state_restores;
        match labels::kind(kind).and_then(|k| Ok((k, labels::restore_result(result)?))) {
            Ok((kind, result)) => {
                f.get_or_create(&KindResultLabels { kind, result }).inc();
            }
            Err(e) => log_refused("captf_state_restores_total", &e),
        }
    }

    /// An object's outputs turned invalid, with the `OutputsValid` reason;
    /// once per transition.
    pub fn outputs_invalid(&self, kind: &str, reason: &str) {
        let f = &self.f().outputs_invalid;
        self.kind_reason(
            "captf_outputs_invalid_total",
            f,
            kind,
            labels::outputs_invalid_reason(reason),
        );
    }

    /// A Machine's `remediate-machine` annotation was `requested` or
    /// `withdrawn`.
    pub fn remediation_request(&self, action: &str) {
        let action = match action {
            "requested" => "requested",
            "withdrawn" => "withdrawn",
            other => {
                tracing::warn!(
                    metric = "captf_remediation_requests_total",
                    action = other,
                    "label value refused"
                );
                return;
            }
        };
        self.f()
            .remediation_requests
            .get_or_create(&ActionLabels { action })
            .inc();
    }

    /// Replaces every per-object series of one object with `gauges`.
    pub fn object(&self, kind: &str, namespace: &str, name: &str, gauges: &ObjectGauges) {
        let kind = match labels::kind(kind) {
            Ok(k) => k,
            Err(e) => return log_refused("captf_ready", &e),
        };
        let f = self.f();
        let id = ObjectLabels {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let set = |family: &Family<ObjectLabels, Gauge>, value: Option<i64>| match value {
            Some(v) => {
                family.get_or_create(&id).set(v);
            }
            None => {
                family.remove(&id);
            }
        };
        set(&f.ready, Some(gauges.ready.gauge()));
        set(
            &f.infrastructure_healthy,
            gauges.infrastructure_healthy.map(ConditionValue::gauge),
        );
        set(&f.drift_detected, Some(i64::from(gauges.drift_detected)));
        match gauges.state {
            Observed::Unread => {}
            Observed::Absent => {
                set(&f.state_resources, None);
                set(&f.state_bytes, None);
            }
            Observed::Value(s) => {
                set(&f.state_resources, Some(to_gauge(s.resources)));
                set(&f.state_bytes, Some(to_gauge(s.bytes)));
            }
        }
        match gauges.inputs_bytes {
            Observed::Unread => {}
            Observed::Absent => set(&f.inputs_bytes, None),
            Observed::Value(b) => set(&f.inputs_bytes, Some(to_gauge(b))),
        }
        let machine = NamespacedLabels {
            namespace: id.namespace.clone(),
            name: id.name.clone(),
        };
        match (kind, gauges.unhealthy_samples) {
            (captf_api::names::kinds::TERRAFORM_MACHINE, Some(n)) => {
                f.unhealthy_samples.get_or_create(&machine).set(to_gauge(n));
            }
            (captf_api::names::kinds::TERRAFORM_MACHINE, None) => {
                f.unhealthy_samples.remove(&machine);
            }
            _ => {}
        }

        let mut kept = Vec::new();
        for (op, at) in &gauges.last_success {
            match labels::op(op) {
                Ok(op) => {
                    kept.push(op);
                    f.last_success.get_or_create(&object_op(&id, op)).set(*at);
                }
                Err(e) => log_refused("captf_last_success_timestamp_seconds", &e),
            }
        }
        for op in labels_ops().filter(|op| !kept.contains(op)) {
            f.last_success.remove(&object_op(&id, op));
        }
    }

    /// Removes every per-object series of an object that is gone.
    pub fn forget(&self, kind: &str, namespace: &str, name: &str) {
        let Ok(kind) = labels::kind(kind) else {
            return;
        };
        let f = self.f();
        let id = ObjectLabels {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        for family in [
            &f.ready,
            &f.infrastructure_healthy,
            &f.drift_detected,
            &f.state_resources,
            &f.state_bytes,
            &f.inputs_bytes,
        ] {
            family.remove(&id);
        }
        for op in labels_ops() {
            f.last_success.remove(&object_op(&id, op));
        }
        if kind == captf_api::names::kinds::TERRAFORM_MACHINE {
            f.unhealthy_samples.remove(&NamespacedLabels {
                namespace: id.namespace.clone(),
                name: id.name.clone(),
            });
        }
    }

    /// Every metric in the OpenMetrics text format (which Prometheus
    /// scrapes natively), ending with `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.inner.registry);
        out
    }
}

fn labels_ops() -> impl Iterator<Item = &'static str> {
    captf_api::common::Operation::ALL.iter().map(|o| o.as_str())
}

fn object_op(id: &ObjectLabels, op: &'static str) -> ObjectOpLabels {
    ObjectOpLabels {
        kind: id.kind,
        namespace: id.namespace.clone(),
        name: id.name.clone(),
        op,
    }
}

/// The media type of [`Metrics::encode`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests;
