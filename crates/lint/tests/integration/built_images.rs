//! `tfcapi-lint image` on the no-op module images `make images` builds
//! (same recipe, crates/images): each passes with no error, and with no
//! warning beyond the one the no-op pool module is documented to allow
//! (modules/noop/Makefile).

use std::process::Command;

#[test]
fn the_built_noop_module_images_pass_the_image_lint() {
    let tofu = captf_testenv::assets::tofu().expect("the OpenTofu test asset");
    let version = captf_testenv::assets::version("OPENTOFU_VERSION").unwrap();
    let modules = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../modules/noop");
    let dir = tempfile::tempdir().unwrap();
    let provenance = captf_images::recipes::Provenance {
        version: "v0.1.0".into(),
        ..Default::default()
    };
    for (role, allowed) in [
        ("cluster", None),
        ("machine", None),
        ("machinepool", Some("pool/autoscaling-ignore-changes")),
    ] {
        let spec = captf_images::recipes::module_image(
            role,
            &modules.join(role),
            &tofu,
            version,
            &provenance,
        )
        .unwrap();
        let layout = dir.path().join(format!("noop-{role}"));
        captf_images::layout::write_layout(&layout, &spec, Some("v0.1.0")).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tfcapi-lint"));
        cmd.arg("image")
            .arg(format!("oci:{}", layout.display()))
            .args(["--role", role, "--strict"]);
        if let Some(rule) = allowed {
            cmd.args(["--allow-warning", rule]);
        }
        let out = cmd.output().unwrap();
        let report = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "noop-{role}: {report}");
        assert!(
            report.contains("0 error(s), 0 warning(s)"),
            "noop-{role}: {report}"
        );
    }
}
