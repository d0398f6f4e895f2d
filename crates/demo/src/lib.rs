//! The local demo: a control plane, a real node (kubelet, containerd)
//! running the Jobs, and the manager binary, converging the example Cluster,
//! TerraformCluster, MachinePool and TerraformMachinePool on the no-op
//! modules. The decisions (what Cluster API would write, what changed,
//! how a table prints) are pure functions here; `main.rs` does the I/O.

pub mod bins;
pub mod capi;
pub mod examples;
pub mod images;
pub mod install;
pub mod kube_io;
pub mod progress;
pub mod summary;
pub mod table;
pub mod webhooks;
