//! The harness's own tests, one binary: the control plane, the executor,
//! the real node and the lifecycle of `captf-testenv` processes.

mod control_plane;
mod executor;
mod lifecycle;
mod real_node;
