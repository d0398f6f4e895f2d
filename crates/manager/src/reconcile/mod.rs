//! The reconcile loop: one staged pass per object over the pure engine —
//! preamble, bookkeeping of finished Jobs, state, the kind's inputs and
//! outputs, the decision, a crash-safe Job start, and one status patch.

pub mod adoption;
pub mod announcements;
pub mod backups;
pub mod bookkeeping;
pub mod cleanup;
pub mod cluster;
pub mod controller_runtime;
pub mod controllers;
pub mod credentials;
pub mod dependencies;
pub mod effect;
pub mod effects;
pub mod ending;
pub mod ensured;
pub mod exports;
#[cfg(test)]
pub mod fake_apiserver;
pub mod identities;
pub mod inputs_applied;
mod job_report;
pub mod job_start;
pub mod leaving;
pub mod machine;
pub mod machine_template;
#[cfg(test)]
pub mod mock_api;
pub mod next_op;
pub mod open_pass;
pub mod opening;
pub mod opening_plan;
pub mod pass;
pub mod pass_conditions;
pub mod plans;
pub mod pool;
pub mod pull_fallback;
pub mod quiet;
pub mod rendered;
pub mod retain;
pub mod routing;
pub mod runner_access;
pub mod settings;
mod shared_sources;
pub mod slots;
mod start_gates;
pub mod status;
pub mod status_patch;
pub mod stored;
#[cfg(test)]
mod structure_tests;
pub mod variables;
pub mod watches;
#[cfg(test)]
mod whole_pass_tests;
pub mod workload;

use std::time::Duration;

use crate::recorder::{Recorder, Reporter};
use captf_api::effective::ManagerDefaults;

/// What the manager was started with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Image of the runner init container (`--runner-image`).
    pub runner_image: String,
    pub defaults: ManagerDefaults,
    /// Which runs post events (`--runner-events`).
    pub runner_events: crate::jobs::args::RunnerEvents,
    /// Minimum resync of every object (`--sync-period`).
    pub sync_period: Duration,
    /// Watch one namespace only (`--namespace`).
    pub namespace: Option<String>,
    /// Reconcile only objects labeled `cluster.x-k8s.io/watch-filter` with
    /// this value (`--watch-filter`; `None`: every object).
    pub watch_filter: Option<String>,
    /// Passes run at once per kind (`--<kind>-concurrency`).
    pub concurrency: Concurrency,
    /// Which registries machine-template images may be inspected on
    /// (`--image-inspect-allow-private-registries`,
    /// `--image-inspect-allowed-registries`).
    pub image_inspect: captf_lint::image::inspect::Policy,
    /// Unfinished Jobs across the manager (`--max-active-jobs`; 0: no cap).
    /// A cluster's own limit is `defaults.cluster_max_active_jobs`.
    pub max_active_jobs: u32,
    /// Complete backup sets kept per object (`--state-backups`; 0: take
    /// none, those there stay restorable).
    pub state_backups: u32,
    /// `--cluster-operation-gate`: a cluster's apply, destroy and restore
    /// and its machines' and pools' Jobs never run at once.
    pub cluster_operation_gate: bool,
}

/// Default of `--state-backups`.
pub const DEFAULT_STATE_BACKUPS: u32 = 5;

/// Default of `--max-active-jobs`.
pub const DEFAULT_MAX_ACTIVE_JOBS: u32 = 200;

/// How many passes of each kind run at once (0 is never configured: the
/// flags refuse it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency {
    pub clusters: u16,
    pub machines: u16,
    pub machine_templates: u16,
    pub machine_pools: u16,
    pub identities: u16,
}

impl Default for Concurrency {
    fn default() -> Self {
        Concurrency {
            clusters: 10,
            machines: 10,
            machine_templates: 10,
            machine_pools: 10,
            identities: 4,
        }
    }
}

impl Config {
    pub fn new(runner_image: impl Into<String>) -> Self {
        Config {
            runner_image: runner_image.into(),
            defaults: ManagerDefaults::default(),
            runner_events: crate::jobs::args::RunnerEvents::Notable,
            sync_period: Duration::from_secs(600),
            namespace: None,
            watch_filter: None,
            concurrency: Concurrency::default(),
            image_inspect: Default::default(),
            max_active_jobs: DEFAULT_MAX_ACTIVE_JOBS,
            state_backups: DEFAULT_STATE_BACKUPS,
            cluster_operation_gate: true,
        }
    }
}

/// PassSettings by every reconcile.
pub struct Context {
    pub client: kube::Client,
    pub config: Config,
    pub recorder: Recorder,
    pub metrics: crate::metrics::Metrics,
    /// Which objects each dependency wakes (see `routing`).
    pub dependents: routing::Dependents,
    /// Namespaces whose runner RBAC was applied within the sync period.
    pub rbac_ensured: ensured::Ensured<()>,
    /// Objects whose credentials were checked and mirrored within the sync
    /// period, with the verdict to report again.
    pub credentials_ensured: ensured::Ensured<credentials::Checked>,
    /// The caches the pool passes read (set when the pool controller runs).
    pub pool_stores: std::sync::OnceLock<watches::OwnerStores>,
    /// The caches the machine passes read (set when the machine controller
    /// runs).
    pub machine_stores: std::sync::OnceLock<watches::OwnerStores>,
    /// Objects whose last pass was quiet (see `quiet`).
    pub quiet: quiet::QuietPasses,
    /// The resourceVersion each running pass's own writes left on its
    /// object (see `pass::wrote`).
    pub written: Written,
    /// Full passes run per object (tests and the benchmark read it).
    pub passes: PassCounter,
    /// Resyncs that a quiet pass answered, per object.
    pub quiet_passes: PassCounter,
    /// Failed image inspections of machine templates, for their backoff.
    pub inspections: machine_template::Inspections,
    /// Unfinished Jobs and the objects waiting for a slot.
    pub slots: slots::JobSlots,
}

/// The resourceVersion a pass's own last write to its object returned,
/// keyed `Kind/namespace/name`: the status patch that ends the pass is
/// conditional on it, so a pass that began on a cached object older than
/// the manager's own last status write fails with a conflict and runs
/// again on the newer one, instead of writing conditions it read stale.
#[derive(Debug, Clone, Default)]
pub struct Written(std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>);

impl Written {
    pub fn get(&self, key: &str) -> Option<String> {
        self.0
            .lock()
            .expect("the written versions")
            .get(key)
            .cloned()
    }

    pub fn set(&self, key: String, resource_version: String) {
        self.0
            .lock()
            .expect("the written versions")
            .insert(key, resource_version);
    }

    pub fn forget(&self, key: &str) {
        self.0.lock().expect("the written versions").remove(key);
    }
}

/// Passes per object, keyed `Kind/namespace/name`.
#[derive(Debug, Clone, Default)]
pub struct PassCounter(std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, u64>>>);

impl PassCounter {
    pub fn count(&self, kind: &str, namespace: &str, name: &str) {
        *self
            .0
            .lock()
            .expect("the pass counter")
            .entry(format!("{kind}/{namespace}/{name}"))
            .or_default() += 1;
    }

    /// A copy of the counts so far.
    pub fn snapshot(&self) -> std::collections::BTreeMap<String, u64> {
        self.0.lock().expect("the pass counter").clone()
    }
}

impl Context {
    pub fn new(client: kube::Client, config: Config) -> Self {
        Context::with_metrics(client, config, crate::metrics::Metrics::new())
    }

    /// A context counting into `metrics` (the registry the client counts
    /// its requests into too).
    pub fn with_metrics(
        client: kube::Client,
        config: Config,
        metrics: crate::metrics::Metrics,
    ) -> Self {
        let reporter = Reporter {
            controller: "captf-controller-manager".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let ttl = config.sync_period;
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            config,
            metrics,
            dependents: routing::Dependents::default(),
            rbac_ensured: ensured::Ensured::new(ttl),
            credentials_ensured: ensured::Ensured::new(ttl),
            pool_stores: std::sync::OnceLock::new(),
            machine_stores: std::sync::OnceLock::new(),
            quiet: quiet::memo(ttl),
            written: Written::default(),
            passes: PassCounter::default(),
            quiet_passes: PassCounter::default(),
            inspections: Default::default(),
            slots: Default::default(),
        }
    }
}

/// A pass that could not finish; the controller retries it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// A write lost to another writer (HTTP 409).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(s)) if s.code == 409)
    }
}

/// The requeue after an error (the controller's own backoff is not used:
/// passes are idempotent and cheap to repeat).
pub const ERROR_REQUEUE: Duration = Duration::from_secs(5);
