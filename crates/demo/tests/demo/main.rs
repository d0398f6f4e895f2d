//! The demo's tests, one binary: the demo as `make demo` runs it, and the
//! release manifests on the binary's control plane.

mod demo;
mod manifests;
