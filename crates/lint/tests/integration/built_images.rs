//! The six module images `make images` builds (the same recipe,
//! `crates/images`, with the same inputs): `noop` and `oci`, each role,
//! named `<cloud>-<role>`. Each carries the variables schema
//! `tfcapi-lint schema` writes from its module and passes `tfcapi-lint image
//! --strict` (the pool images allow the one warning their READMEs explain);
//! the OCI pool image's own runtime, unpacked, initialises and validates its
//! module from the image's provider mirror alone, with no network.

use std::path::{Path, PathBuf};
use std::process::Command;

use captf_images::recipes::{ModuleExtras, Provenance, ProviderMirror};

const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

fn modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../modules")
}

fn lint() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tfcapi-lint"))
}

/// `tfcapi-lint schema` of a module, as `make images` labels its image.
fn schema_of(cloud: &str, role: &str) -> String {
    let out = lint()
        .arg("schema")
        .arg(modules().join(cloud).join(role))
        .args(["--role", role])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "schema of {cloud}-{role}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The image `make images` writes for `<cloud>-<role>`, as a layout in
/// `dir`, and its variables-schema label.
fn build(dir: &Path, cloud: &str, role: &str) -> (PathBuf, String) {
    let tofu = captf_testenv::assets::tofu().expect("the OpenTofu test asset");
    let version = captf_testenv::assets::version("OPENTOFU_VERSION").unwrap();
    let oci = cloud == "oci";
    let extras = ModuleExtras {
        name: format!("{cloud}-{role}"),
        providers: oci.then(|| ProviderMirror {
            dir: captf_testenv::assets::oci_provider_mirror(),
            sums: captf_testenv::assets::oci_provider_sums(),
        }),
        ca_bundle: oci.then(|| PathBuf::from(CA_BUNDLE)),
        variables_schema: Some(schema_of(cloud, role)),
    };
    let provenance = Provenance {
        version: "v0.1.0-opentofu".into(),
        ..Default::default()
    };
    let schema = extras.variables_schema.clone().unwrap_or_default();
    let spec = captf_images::recipes::module_image_with(
        role,
        &modules().join(cloud).join(role),
        &tofu,
        version,
        &provenance,
        &extras,
    )
    .unwrap();
    let layout = dir.join(format!("{cloud}-{role}"));
    assert_eq!(
        spec.labels.get("io.captf.variables-schema"),
        Some(&schema.trim().to_owned())
    );
    captf_images::layout::write_layout(&layout, &spec, Some("v0.1.0-opentofu")).unwrap();
    (layout, schema)
}

#[test]
fn the_six_module_images_carry_their_schema_and_pass_the_strict_image_lint() {
    let dir = tempfile::tempdir().unwrap();
    for cloud in ["noop", "oci"] {
        for role in ["cluster", "machine", "machinepool"] {
            let (layout, schema) = build(dir.path(), cloud, role);
            let mut cmd = lint();
            cmd.arg("image")
                .arg(format!("oci:{}", layout.display()))
                .args(["--role", role, "--strict", "--json"]);
            if role == "machinepool" {
                cmd.args(["--allow-warning", "pool/autoscaling-ignore-changes"]);
            }
            let out = cmd.output().unwrap();
            let report = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{cloud}-{role}: {report}");
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(report["summary"]["error"], 0, "{cloud}-{role}: {report}");
            assert_eq!(report["summary"]["warning"], 0, "{cloud}-{role}: {report}");
            let schema: serde_json::Value = serde_json::from_str(&schema).unwrap();
            assert_eq!(schema["type"], "object", "{cloud}-{role}");
            assert_eq!(schema["additionalProperties"], false, "{cloud}-{role}");
        }
    }
}

/// The CLI configuration the runner writes (`crates/runner/src/env.rs`):
/// providers from the image's mirror only.
fn mirror_only_cli_config(providers: &Path) -> String {
    format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [\"*/*/*\"]\n  }}\n  direct {{\n    exclude = [\"*/*/*\"]\n  }}\n}}\n",
        providers.display()
    )
}

#[test]
fn the_oci_pool_image_initialises_and_validates_its_module_offline() {
    let dir = tempfile::tempdir().unwrap();
    let (layout, _) = build(dir.path(), "oci", "machinepool");
    let root = dir.path().join("rootfs");
    captf_images::layout::unpack(&layout, &root).unwrap();
    for file in ["captf/runtime", "etc/ssl/certs/ca-certificates.crt"] {
        assert!(root.join(file).is_file(), "{file} in the image");
    }
    for left_out in ["tests", "README.md", "Makefile"] {
        assert!(
            !root.join("captf/module").join(left_out).exists(),
            "{left_out} shipped"
        );
    }
    // The module as a Job finds it, in a folder it may write to.
    let work = dir.path().join("work");
    copy_tree(&root.join("captf/module"), &work);
    let config = dir.path().join("cli.tfrc");
    std::fs::write(
        &config,
        mirror_only_cli_config(&root.join("captf/providers")),
    )
    .unwrap();
    for args in [
        &["init", "-backend=false", "-input=false"][..],
        &["validate", "-no-color"][..],
    ] {
        // A network namespace of its own: no interface but a down loopback.
        let out = Command::new("unshare")
            .arg("--net")
            .arg(root.join("captf/runtime"))
            .arg(format!("-chdir={}", work.display()))
            .args(args)
            .env("TF_CLI_CONFIG_FILE", &config)
            .env("HOME", dir.path())
            .env("CHECKPOINT_DISABLE", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tofu {}: {}{}",
            args[0],
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
