//! The contract's integration tests, one binary: golden renders, the
//! reference vectors, properties and the rendered roots under real OpenTofu.

mod common;
mod golden;
mod literals;
mod oci_module;
mod outputs;
mod properties;
mod reference_vectors;
mod render;
mod schemas;
mod tofu;
