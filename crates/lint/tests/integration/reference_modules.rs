//! The project's own reference modules lint clean with `--strict`, through
//! the real binary, allowing only the warnings each module's Makefile
//! documents (`TFCAPI_LINT_ALLOW...` lines).

use std::path::Path;
use std::process::Command;

/// The warnings a module's Makefile allows: the values of its
/// `TFCAPI_LINT_ALLOW` line, or of `TFCAPI_LINT_ALLOW_<role>` for `role`.
fn allowed(makefile: &Path, role: &str) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(makefile) else {
        return Vec::new();
    };
    let keys = [
        "TFCAPI_LINT_ALLOW".to_owned(),
        format!("TFCAPI_LINT_ALLOW_{role}"),
    ];
    text.lines()
        .filter_map(|l| l.split_once(":="))
        .filter(|(k, _)| keys.iter().any(|key| k.trim() == key))
        .flat_map(|(_, v)| v.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

fn lint_reference(dir: &Path, makefile: &Path, role: &str) {
    let mut args = vec![
        "module".to_owned(),
        "--role".into(),
        role.into(),
        "--strict".into(),
    ];
    for w in allowed(makefile, role) {
        args.push("--allow-warning".into());
        args.push(w);
    }
    args.push(dir.display().to_string());
    let out = Command::new(env!("CARGO_BIN_EXE_tfcapi-lint"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: exit {:?}\n{}{}",
        dir.display(),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn modules() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../modules")
}

#[test]
fn noop_modules_lint_clean_with_strict() {
    let noop = modules().join("noop");
    for role in ["cluster", "machine", "machinepool"] {
        lint_reference(&noop.join(role), &noop.join("Makefile"), role);
    }
    // Only the pool has an exception, and only the documented one.
    assert!(allowed(&noop.join("Makefile"), "machine").is_empty());
    assert_eq!(
        allowed(&noop.join("Makefile"), "machinepool"),
        ["pool/autoscaling-ignore-changes"]
    );
}

#[test]
fn oci_machinepool_lints_clean_with_strict_and_its_one_exception() {
    let oci = modules().join("oci/machinepool");
    let makefile = oci.join("Makefile");
    assert_eq!(
        allowed(&makefile, "machinepool"),
        ["pool/autoscaling-ignore-changes"]
    );
    lint_reference(&oci, &makefile, "machinepool");
}

#[test]
fn the_exception_is_needed_where_it_is_declared() {
    // Without its allowance the OCI pool raises exactly that warning, so the
    // exception is not hiding anything else.
    let oci = modules().join("oci/machinepool");
    let out = Command::new(env!("CARGO_BIN_EXE_tfcapi-lint"))
        .args(["module", "--role", "machinepool", "--strict", "--json"])
        .arg(&oci)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["pool/autoscaling-ignore-changes"]);
}

#[test]
fn binary_exit_codes() {
    let bin = env!("CARGO_BIN_EXE_tfcapi-lint");
    let fixtures = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let cases: &[(&[&str], i32)] = &[
        (
            &["module", "--role", "machine", "--strict", "good/machine"],
            0,
        ),
        (&["module", "--role", "machine", "bad/missing-output"], 1),
        (
            &["module", "--role", "machine", "bad/extra-input-no-default"],
            0,
        ),
        (
            &[
                "module",
                "--role",
                "machine",
                "--strict",
                "bad/extra-input-no-default",
            ],
            1,
        ),
        (
            &["module", "--role", "machine", "malformed/unclosed-brace"],
            2,
        ),
        (&["module", "--role", "machine", "does/not/exist"], 2),
        (&["module", "good/machine"], 3),
    ];
    for (args, want) in cases {
        let out = Command::new(bin)
            .args(*args)
            .current_dir(&fixtures)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(*want), "{args:?}");
    }
}
