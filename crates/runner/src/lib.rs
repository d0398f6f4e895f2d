//! The runner: the small static binary that runs one Terraform/OpenTofu
//! operation inside a Job and reports its result document.
//!
//! Decisions live in pure modules (`cli`, `steps`, `plan`, `result`,
//! `redact`, `summary`, `env`, `workdir`); `exec`, `events` and `run` do
//! the I/O around them; `app` is the command-line entry point.

pub mod app;
pub mod cli;
pub mod env;
pub mod events;
pub mod exec;
pub mod op;
pub mod plan;
pub mod redact;
/// The result document is the contract between runner and manager.
pub use captf_contract::result;
pub mod run;
pub mod state_proxy;
pub mod state_write;
pub mod steps;
pub mod summary;
pub mod workdir;

pub use cli::{RunArgs, parse_run_args};
pub use op::Op;
pub use result::ResultDoc;
