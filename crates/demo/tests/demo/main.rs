//! The demo's tests, one binary: the demo as `make demo` runs it, the
//! release manifests on the binary's control plane, and the release's
//! cluster templates as clusterctl renders them.

mod demo;
mod manifests;
mod templates;
