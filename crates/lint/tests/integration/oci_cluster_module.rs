//! The OCI cluster module (`modules/oci/cluster`) against the real
//! `oracle/oci` provider, offline (see `oci_support`): `tofu validate`, the
//! whole `tofu test` suite over a mocked provider with the real schema, and
//! `tfcapi-lint --strict`. Also the provider pin every OCI module shares.

use crate::oci_support;

use oci_support::{PROVIDER_PIN, Workspace, oci_modules};

#[test]
fn the_cluster_module_validates_against_the_real_provider() {
    let ws = Workspace::role("cluster");
    ws.init();
    let (ok, out) = ws.validate();
    assert!(ok, "tofu validate: {out}");
    assert!(out.contains("The configuration is valid"), "{out}");
}

#[test]
fn the_cluster_module_passes_its_tofu_test_suite() {
    let ws = Workspace::role("cluster");
    ws.init();
    // inputs, placement, endpoint (the guard among them), outputs.
    let log = oci_support::run_whole_suite(&ws, 37);
    for file in [
        "tests/inputs.tftest.hcl",
        "tests/placement.tftest.hcl",
        "tests/endpoint.tftest.hcl",
        "tests/outputs.tftest.hcl",
    ] {
        assert!(
            log.runs.iter().any(|(f, _, _)| f == file),
            "{file} ran no test"
        );
    }
    // The guard refuses, and an unchanged plan passes it.
    for run in [
        "an_unchanged_plan_passes_the_guard",
        "the_guard_refuses_a_new_port",
        "the_guard_refuses_a_new_visibility",
        "the_guard_refuses_a_new_subnet_or_address",
    ] {
        assert!(
            log.runs
                .iter()
                .any(|(f, r, status)| f == "tests/endpoint.tftest.hcl"
                    && r == run
                    && status == "pass"),
            "{run} did not pass"
        );
    }
}

#[test]
fn the_cluster_module_lints_clean_with_strict() {
    oci_support::lint_strict(&oci_modules().join("cluster"), "cluster");
}

#[test]
fn every_oci_module_pins_the_provider_the_images_ship() {
    // One range for the three roles, and it must admit the mirrored build:
    // `init` of each copy installs it (the other tests), and the range is
    // written the same everywhere so a bump is one decision.
    for role in ["cluster", "machine", "machinepool"] {
        let path = oci_modules().join(role).join("versions.tf");
        let text = std::fs::read_to_string(&path).unwrap();
        let pin = format!("version = \"{PROVIDER_PIN}\"");
        assert_eq!(
            text.matches(&pin).count(),
            1,
            "{} must pin oracle/oci {PROVIDER_PIN} once:\n{text}",
            path.display()
        );
    }
    let mirrored = oci_support::mirrored_version(&captf_testenv::assets::oci_provider_mirror());
    assert_eq!(mirrored, "8.28.0", "the build the images ship");
}
