//! The `runner` binary's commands without a runtime: usage, version, copy,
//! and the result of a command line that does not parse.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

const RUNNER: &str = env!("CARGO_BIN_EXE_runner");

#[test]
fn bare_runner_prints_usage_and_exits_2() {
    let out = Command::new(RUNNER).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage: runner"));
    assert!(out.stdout.is_empty());
}

#[test]
fn version_forms() {
    for (args, want) in [
        (vec!["version"], "runner v"),
        (vec!["--version"], "runner v"),
        (vec!["--version=raw"], "{\"compiler\""),
        (vec!["--version=v9.8.7"], "runner v9.8.7"),
    ] {
        let out = Command::new(RUNNER).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with(want),
            "{args:?}"
        );
    }
}

#[test]
fn copy_installs_itself_with_mode_0755() {
    let d = tempfile::tempdir().unwrap();
    let dest = d.path().join("runner");
    let out = Command::new(RUNNER)
        .args(["copy", dest.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read(&dest).unwrap(),
        std::fs::read(RUNNER).unwrap()
    );
    assert_eq!(
        std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let out = Command::new(&dest).arg("version").output().unwrap();
    assert!(out.status.success());

    assert_eq!(
        Command::new(RUNNER).arg("copy").status().unwrap().code(),
        Some(2)
    );
    assert_eq!(
        Command::new(RUNNER)
            .args(["copy", "a", "b"])
            .status()
            .unwrap()
            .code(),
        Some(2)
    );
    let missing = d.path().join("no/such/dir/runner");
    assert_eq!(
        Command::new(RUNNER)
            .args(["copy", missing.to_str().unwrap()])
            .status()
            .unwrap()
            .code(),
        Some(1)
    );
}

#[test]
fn flag_errors_still_write_a_result() {
    let d = tempfile::tempdir().unwrap();
    let result = d.path().join("result.json");
    for args in [
        vec!["run".to_owned(), "--op=upgrade".to_owned()],
        vec![
            "run".to_owned(),
            "--op=apply".to_owned(),
            "extra".to_owned(),
        ],
        vec![
            "--logging-format=xml".to_owned(),
            "run".to_owned(),
            "--op=apply".to_owned(),
        ],
    ] {
        let _ = std::fs::remove_file(&result);
        let out = Command::new(RUNNER)
            .args(&args)
            .arg(format!("--result={}", result.display()))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["steps"], serde_json::json!([]));
        assert_eq!(v["error"]["kind"], "step");
        assert_eq!(v["error"]["step"], "flags");
        assert!(!v["error"]["tail"].as_str().unwrap().is_empty());
    }
}

#[test]
fn an_unwritable_result_fails_the_run() {
    let d = tempfile::tempdir().unwrap();
    // Preflight fails (no module), and the result cannot be written either.
    let out = Command::new(RUNNER)
        .args([
            "run",
            "--op=apply",
            &format!("--module={}", d.path().display()),
            "--result=/nonexistent/dir/result.json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("writing the result"));
}
