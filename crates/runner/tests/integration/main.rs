//! The runner's integration tests, one binary: the command line, the pure
//! parts, the binary under real OpenTofu and its Jobs on the control plane.

mod binary;
mod cli;
mod e2e;
mod events;
mod exec;
mod plan;
mod pure;
mod redact;
mod result_doc;
mod static_binary;
