//! The reconcile loop: one staged pass per object over the pure engine —
//! preamble, bookkeeping of finished Jobs, state, the kind's inputs and
//! outputs, the decision, a crash-safe Job start, and one status patch.

pub mod cleanup;
pub mod cluster;
pub mod common;
pub mod controllers;
pub mod credentials;
pub mod exports;
pub mod pass;
pub mod plans;
pub mod pool;
pub mod retain;
pub mod status;
pub mod workload;

use std::time::Duration;

use captf_api::effective::ManagerDefaults;
use kube::runtime::events::{Recorder, Reporter};

/// What the manager was started with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Image of the runner init container (`--runner-image`).
    pub runner_image: String,
    pub defaults: ManagerDefaults,
    /// Runner progress events (`--runner-events`).
    pub runner_events: bool,
    /// Minimum resync of every object (`--sync-period`).
    pub sync_period: Duration,
    /// Watch one namespace only (`--namespace`).
    pub namespace: Option<String>,
}

impl Config {
    pub fn new(runner_image: impl Into<String>) -> Self {
        Config {
            runner_image: runner_image.into(),
            defaults: ManagerDefaults::default(),
            runner_events: true,
            sync_period: Duration::from_secs(600),
            namespace: None,
        }
    }
}

/// Shared by every reconcile.
pub struct Context {
    pub client: kube::Client,
    pub config: Config,
    pub recorder: Recorder,
    pub metrics: crate::metrics::Metrics,
}

impl Context {
    pub fn new(client: kube::Client, config: Config) -> Self {
        let reporter = Reporter {
            controller: "captf-controller-manager".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            config,
            metrics: crate::metrics::Metrics::new(),
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
