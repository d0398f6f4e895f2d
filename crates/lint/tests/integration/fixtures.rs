//! Golden tests over the fixture modules: each is linted as
//! `module --role <role> --strict --json <dir>` (and again as text) and the
//! output compared byte for byte with `expected.json` / `expected.txt`.
//! `UPDATE_GOLDEN=1` (or `UPDATE_SNAPSHOTS=1`) rewrites the golden files.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn update() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some() || std::env::var_os("UPDATE_SNAPSHOTS").is_some()
}

fn fixtures(group: &str) -> Vec<PathBuf> {
    let dir = Path::new("tests/fixtures").join(group);
    let mut out: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

use crate::support::run_cli as run;

fn role(dir: &Path) -> String {
    fs::read_to_string(dir.join("role"))
        .unwrap()
        .trim()
        .to_string()
}

/// Compares `actual` with the golden file, or rewrites it when asked.
fn golden(path: &Path, actual: &str, failures: &mut Vec<String>) {
    if update() {
        fs::write(path, actual).unwrap();
        return;
    }
    match fs::read_to_string(path) {
        Ok(want) if want == actual => {}
        Ok(want) => failures.push(format!(
            "{} differs:\n--- want\n{want}\n--- got\n{actual}",
            path.display()
        )),
        Err(e) => failures.push(format!(
            "{}: {e} (run with UPDATE_GOLDEN=1)",
            path.display()
        )),
    }
}

fn lint(dir: &Path, json: bool) -> (i32, String, String) {
    let role = role(dir);
    let dir = dir.to_str().unwrap();
    let mut args = vec!["module", "--role", &role, "--strict"];
    if json {
        args.push("--json");
    }
    args.push(dir);
    run(&args)
}

#[test]
fn good_fixtures_are_clean() {
    let mut failures = Vec::new();
    for dir in fixtures("good") {
        let (code, out, err) = lint(&dir, true);
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        if code != 0 || doc["findings"] != serde_json::json!([]) {
            failures.push(format!("{}: exit {code}, {out}{err}", dir.display()));
        }
        golden(&dir.join("expected.json"), &out, &mut failures);
        let (_, text, _) = lint(&dir, false);
        golden(&dir.join("expected.txt"), &text, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn bad_fixtures_match_their_golden_reports() {
    let mut failures = Vec::new();
    for dir in fixtures("bad") {
        let (code, out, err) = lint(&dir, true);
        let doc: serde_json::Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{}: {e}: {out}{err}", dir.display()));
        let findings = doc["findings"].as_array().unwrap();
        assert!(!findings.is_empty(), "{} has no finding", dir.display());
        let only_info = findings.iter().all(|f| f["severity"] == "info");
        let want_code = if only_info { 0 } else { 1 };
        if code != want_code {
            failures.push(format!("{}: exit {code}, want {want_code}", dir.display()));
        }
        golden(&dir.join("expected.json"), &out, &mut failures);
        let (_, text, _) = lint(&dir, false);
        golden(&dir.join("expected.txt"), &text, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn malformed_fixtures_exit_2_with_a_position() {
    let mut failures = Vec::new();
    for dir in fixtures("malformed") {
        let (code, out, err) = lint(&dir, true);
        if code != 2 || !out.is_empty() {
            failures.push(format!("{}: exit {code}, stdout {out:?}", dir.display()));
        }
        golden(&dir.join("expected.err"), &err, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every module check has a fixture that triggers it.
#[test]
fn every_module_check_is_triggered_by_a_fixture() {
    let ids = [
        "input/required",
        "input/user-variable-default",
        "input/type",
        "input/sensitive",
        "input/default",
        "input/reserved",
        "input/tags-declared",
        "output/required",
        "output/reserved",
        "output/health",
        "module/version",
        "module/backend",
        "module/source-escape",
        "module/cloud",
        "module/provider-config",
        "module/tofu-shadow",
        "input/tags-unused",
        "output/endpoint-never-set",
        "output/provider-id-list-shape",
        "pool/autoscaling-ignore-changes",
    ];
    let mut seen = BTreeSet::new();
    for dir in fixtures("bad") {
        let (_, out, _) = lint(&dir, true);
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        for f in doc["findings"].as_array().unwrap() {
            seen.insert(f["id"].as_str().unwrap().to_string());
        }
    }
    let missing: Vec<_> = ids.iter().filter(|id| !seen.contains(**id)).collect();
    assert!(missing.is_empty(), "no fixture triggers {missing:?}");
}

#[test]
fn usage_errors_exit_3() {
    let cases: &[&[&str]] = &[
        &[],
        &["module", "tests/fixtures/good/machine"],
        &["module", "--role", "worker", "tests/fixtures/good/machine"],
        &[
            "module",
            "--role",
            "machine",
            "--contract",
            "v9",
            "tests/fixtures/good/machine",
        ],
        &["module", "--role", "machine"],
        &["module", "--role", "machine", "a", "b"],
        &["module", "--role", "machine", "--bogus", "x"],
        &["frobnicate"],
    ];
    for args in cases {
        let (code, out, err) = run(args);
        assert_eq!(code, 3, "{args:?}: {out}{err}");
        assert!(!err.is_empty(), "{args:?}");
    }
    let (_, _, err) = run(&["module", "--role", "machine", "--contract", "v9", "x"]);
    assert!(
        err.contains("unknown contract \"v9\" (known: v1alpha1)"),
        "{err}"
    );
}

#[test]
fn allow_warning_is_repeatable_and_comma_separated() {
    let dir = "tests/fixtures/bad/pool-list-shape";
    let (code, out, _) = run(&[
        "module",
        "--role",
        "machinepool",
        "--strict",
        "--json",
        "--allow-warning",
        "output/provider-id-list-shape,input/default",
        dir,
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("(allowed by --allow-warning)"));
    let (code, _, _) = run(&[
        "module",
        "--role",
        "machinepool",
        "--strict",
        "--allow-warning",
        "input/default",
        "--allow-warning",
        "output/provider-id-list-shape",
        dir,
    ]);
    assert_eq!(code, 0);
}

#[test]
fn version_json_lists_contracts() {
    let (code, out, _) = run(&["version", "--json"]);
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["contract"], serde_json::json!(["v1alpha1"]));
    let first_key = out.lines().nth(1).unwrap().trim();
    assert!(first_key.starts_with("\"version\""), "{out}");
}
