//! The harness's own tests, one binary: the control plane, the real nodes
//! and the lifecycle of `captf-testenv` processes.

mod control_plane;
mod lifecycle;
mod real_node;
