//! The linter's integration tests, one binary: fixtures, loading, images,
//! the reference modules, the differential test against OpenTofu, the OCI
//! modules (cluster, machine, machine pool) against the real provider, the
//! `schema` command and the SARIF format.

mod built_images;
mod differential;
mod fixtures;
mod image;
mod loading;
mod oci_cluster_module;
mod oci_machine_module;
mod oci_module;
mod oci_support;
mod reference_modules;
mod sarif_format;
mod schema_cmd;
mod support;
