//! The manager's tests that play Cluster API's part by hand (Clusters and
//! MachinePools no Cluster API controller may touch, in states it would not
//! make), one binary: Cluster API's managers watch every namespace, so these
//! get a control plane where they never start.

#[path = "../integration/support/mod.rs"]
mod support;

mod pool_orphaned;
mod runner_identity;
