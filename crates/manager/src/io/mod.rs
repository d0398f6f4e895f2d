//! The thin shell: reads and writes against the apiserver, each driven by a
//! pure decision of the engine.

pub mod backups;
pub mod identity;
pub mod jobs;
pub mod leases;
pub mod locks;
pub mod records;
pub mod runner_rbac;
pub mod start;
pub mod state;

/// The field manager of the manager's server-side applies.
pub const FIELD_MANAGER: &str = "captf-manager";
