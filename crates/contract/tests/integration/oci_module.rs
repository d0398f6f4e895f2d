//! The OCI machine-pool module's offline checks, run with the real OpenTofu
//! of the test assets: its provider-free logic submodule's `tofu test`
//! suite, and formatting. Nothing here needs the OCI provider or a network.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn module_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../modules/oci/machinepool")
}

fn tofu() -> PathBuf {
    captf_testenv::assets::tofu()
        .unwrap_or_else(|e| panic!("OpenTofu test asset missing: {e} (run hack/test-assets.sh)"))
}

/// Copies a module tree, leaving out OpenTofu's working files so a stale
/// local `init` never leaks into the test.
fn copy_module(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name.to_string_lossy().starts_with(".terraform") {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_module(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs OpenTofu offline: an empty CLI config (no mirrors, no credentials,
/// no plugin cache) and no inherited TF_* settings.
fn run_tofu(dir: &Path, cli_config: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(tofu());
    cmd.args(args).current_dir(dir);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("TF_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("TF_CLI_CONFIG_FILE", cli_config)
        .env("TF_IN_AUTOMATION", "1")
        .env("TF_INPUT", "0")
        .env("CHECKPOINT_DISABLE", "1");
    cmd.output().unwrap()
}

fn describe(out: &Output) -> String {
    format!(
        "{}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Number of `run` blocks in the test files, so a run that is skipped or
/// silently dropped fails the count below.
fn declared_runs(tests: &Path) -> usize {
    let mut runs = 0;
    for entry in std::fs::read_dir(tests).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".tftest.hcl") {
            let text = std::fs::read_to_string(&path).unwrap();
            runs += text
                .lines()
                .filter(|l| l.starts_with("run \"") && l.trim_end().ends_with('{'))
                .count();
        }
    }
    runs
}

/// Parses "Success! N passed, 0 failed." from `tofu test`.
fn passed_count(stdout: &str) -> Option<usize> {
    let line = stdout.lines().find(|l| l.starts_with("Success! "))?;
    let rest = line.strip_prefix("Success! ")?;
    let (n, tail) = rest.split_once(" passed, ")?;
    tail.starts_with("0 failed").then_some(())?;
    n.parse().ok()
}

#[test]
fn logic_submodule_passes_its_offline_test_suite() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("machinepool");
    copy_module(&module_dir(), &module);
    let cli_config = dir.path().join("empty.tfrc");
    std::fs::write(&cli_config, "").unwrap();
    let logic = module.join("modules/logic");

    let init = run_tofu(
        &logic,
        &cli_config,
        &["init", "-backend=false", "-input=false", "-no-color"],
    );
    assert!(init.status.success(), "tofu init: {}", describe(&init));
    // Built-ins only: init installed no provider.
    assert!(
        !logic.join(".terraform/providers").exists(),
        "the logic submodule must need no provider"
    );

    let test = run_tofu(&logic, &cli_config, &["test", "-no-color"]);
    let stdout = String::from_utf8_lossy(&test.stdout).into_owned();
    assert!(test.status.success(), "tofu test: {}", describe(&test));
    let expected = declared_runs(&logic.join("tests"));
    assert!(expected > 0, "no run blocks found");
    assert_eq!(
        passed_count(&stdout),
        Some(expected),
        "every run block must pass:\n{stdout}"
    );
    assert!(!stdout.contains("... skip"), "a run was skipped:\n{stdout}");
}

#[test]
fn oci_module_is_formatted() {
    let dir = tempfile::tempdir().unwrap();
    let cli_config = dir.path().join("empty.tfrc");
    std::fs::write(&cli_config, "").unwrap();
    let out = run_tofu(
        &module_dir(),
        &cli_config,
        &["fmt", "-check", "-recursive", "-diff", "-no-color"],
    );
    assert!(out.status.success(), "tofu fmt: {}", describe(&out));
}

#[test]
fn passed_count_reads_only_a_clean_summary() {
    assert_eq!(passed_count("x\nSuccess! 12 passed, 0 failed.\n"), Some(12));
    assert_eq!(passed_count("Failure! 3 passed, 1 failed.\n"), None);
    assert_eq!(
        passed_count("Success! 3 passed, 0 failed, 2 skipped.\n"),
        Some(3)
    );
}
