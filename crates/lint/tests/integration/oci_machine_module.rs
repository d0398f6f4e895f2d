//! The OCI machine module (`modules/oci/machine`) against the real
//! `oracle/oci` provider, offline (see `oci_support`): `tofu validate`, the
//! whole `tofu test` suite over a mocked provider with the real schema (its
//! handoff file runs `../cluster` first, so the copy holds every OCI
//! module), and `tfcapi-lint --strict`.

use crate::oci_support;

use oci_support::{Workspace, oci_modules};

#[test]
fn the_machine_module_validates_against_the_real_provider() {
    let ws = Workspace::role("machine");
    ws.init();
    let (ok, out) = ws.validate();
    assert!(ok, "tofu validate: {out}");
    assert!(out.contains("The configuration is valid"), "{out}");
}

#[test]
fn the_machine_module_passes_its_tofu_test_suite() {
    let ws = Workspace::role("machine");
    ws.init();
    let log = oci_support::run_whole_suite(&ws, 29);
    // The cluster's own exports built a control-plane machine.
    assert!(
        log.runs
            .iter()
            .any(|(f, r, status)| f == "tests/handoff.tftest.hcl"
                && r == "a_control_plane_machine_on_the_clusters_exports"
                && status == "pass"),
        "{:?}",
        log.runs
    );
}

#[test]
fn the_machine_module_lints_clean_with_strict() {
    oci_support::lint_strict(&oci_modules().join("machine"), "machine");
}
