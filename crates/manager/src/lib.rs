//! The manager: the reconcile engine, one adapter per kind, the Job builder,
//! the webhooks and the manager binary.

pub mod adapters;
pub mod capi;
pub mod client;
pub mod engine;
pub mod flags;
pub mod identity;
pub mod io;
pub mod jobs;
pub mod leader;
pub mod leases;
pub mod logging;
pub mod metrics;
pub mod names;
pub mod rbac;
pub mod reconcile;
pub mod recorder;
pub mod records;
pub mod runner_admission;
pub mod runner_image;
pub mod serving;
pub mod state;
pub mod tls;
pub mod webhook;
