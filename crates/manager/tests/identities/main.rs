//! The manager's identity tests, one binary: they call the identity code
//! directly and read the status and events it writes, so no manager may run
//! on their control plane (every manager reconciles every cluster-scoped
//! TerraformClusterIdentity and would answer first).

mod identity_io;
