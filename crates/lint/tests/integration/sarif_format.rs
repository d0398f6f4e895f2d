//! `--format sarif`: real reports validated against the OASIS SARIF 2.1.0
//! JSON schema (`tests/testdata/sarif/`), compared result by result with the
//! JSON report, and the `--format`/`--json` flags.

use crate::support::{self, Image, Item, file, layer};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::support::run_cli as run;

/// The `language` pattern of the stored (pre-errata) schema, which is not a
/// valid regular expression (a stray `]`), and SARIF 2.1.0 Errata 01's fix.
const LANGUAGE_PATTERN: &str = "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$";
const LANGUAGE_PATTERN_ERRATA: &str = "^[a-zA-Z]{2}(-[a-zA-Z]{2})?$";

/// Replaces the pre-errata `language` pattern wherever it is; returns how
/// many it replaced.
fn apply_language_errata(v: &mut Value) -> usize {
    match v {
        Value::Object(m) => {
            let mut n = 0;
            if m.get("pattern").and_then(Value::as_str) == Some(LANGUAGE_PATTERN) {
                m.insert("pattern".into(), json!(LANGUAGE_PATTERN_ERRATA));
                n += 1;
            }
            n + m.values_mut().map(apply_language_errata).sum::<usize>()
        }
        Value::Array(a) => a.iter_mut().map(apply_language_errata).sum(),
        _ => 0,
    }
}

/// The official schema, with `format` checked too (`uri`, `uri-reference`).
/// The validator checks a schema's own regular expressions, so the file's
/// one invalid pattern gets the errata's fix here, in memory: tfcapi-lint
/// never writes `language`, the property it constrains.
fn sarif_validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string("tests/testdata/sarif/sarif-schema-2.1.0.json").unwrap();
    let mut schema: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(apply_language_errata(&mut schema), 2);
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
}

fn assert_valid(validator: &jsonschema::Validator, doc: &Value, what: &str) {
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {}", errors.join("\n"));
}

fn fixture_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for group in ["good", "bad"] {
        for e in std::fs::read_dir(Path::new("tests/fixtures").join(group)).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Checks a SARIF log against the JSON report of the same run: one result
/// per finding, in order, and one described rule per check ID.
fn assert_matches_json(sarif: &Value, report: &Value, what: &str) {
    let findings = report["findings"].as_array().unwrap();
    let run = &sarif["runs"][0];
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), findings.len(), "{what}");
    for (r, f) in results.iter().zip(findings) {
        assert_eq!(r["ruleId"], f["id"], "{what}");
        assert_eq!(r["message"]["text"], f["message"], "{what}");
        let level = match f["severity"].as_str().unwrap() {
            "info" => "note",
            other => other,
        };
        assert_eq!(r["level"], level, "{what}");
        let file = f["file"].as_str().unwrap();
        let line = f["line"].as_u64().unwrap();
        if file.is_empty() {
            assert!(r.get("locations").is_none(), "{what}: {r}");
            continue;
        }
        let physical = &r["locations"][0]["physicalLocation"];
        if !file.starts_with('/') {
            assert_eq!(physical["artifactLocation"]["uriBaseId"], "MODULEROOT");
            assert_eq!(
                physical["artifactLocation"]["uri"].as_str().unwrap(),
                file.replace(' ', "%20")
            );
        }
        match line {
            0 => assert!(physical.get("region").is_none(), "{what}"),
            n => assert_eq!(physical["region"]["startLine"], n, "{what}"),
        }
    }
    let ids: BTreeSet<&str> = findings.iter().map(|f| f["id"].as_str().unwrap()).collect();
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let rule_ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(rule_ids, ids.into_iter().collect::<Vec<_>>(), "{what}");
    for r in rules {
        let text = r["shortDescription"]["text"].as_str().unwrap();
        assert_ne!(
            text, "A tfcapi-lint check",
            "{what}: {} has no description",
            r["id"]
        );
    }
}

#[test]
fn every_fixture_report_is_valid_sarif_matching_the_json_report() {
    let validator = sarif_validator();
    for dir in fixture_dirs() {
        let role = std::fs::read_to_string(dir.join("role")).unwrap();
        let (role, path) = (role.trim(), dir.to_str().unwrap());
        let (code, out, err) = run(&[
            "module", "--role", role, "--strict", "--format", "sarif", path,
        ]);
        let (json_code, json_out, _) = run(&["module", "--role", role, "--strict", "--json", path]);
        assert_eq!(code, json_code, "{path}: {err}");
        let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_valid(&validator, &doc, path);
        let report: Value = serde_json::from_str(&json_out).unwrap();
        assert_matches_json(&doc, &report, path);
    }
}

/// A machine module with an error, a warning and an info finding, one of
/// them in a nested module whose directory name needs encoding in a URI.
fn three_severities_module(dir: &Path) {
    let sub = dir.join("sub dir");
    std::fs::create_dir_all(&sub).unwrap();
    let vars = std::fs::read_to_string("tests/fixtures/good/machine/variables.tf").unwrap();
    std::fs::write(
        dir.join("variables.tf"),
        format!("{vars}\nvariable \"size\" {{\n  type = string\n}}\n"),
    )
    .unwrap();
    let main = std::fs::read_to_string("tests/fixtures/good/machine/main.tf").unwrap();
    let main = main.replace("  required_version = \">= 1.6\"\n", "");
    std::fs::write(
        dir.join("main.tf"),
        format!("{main}\nmodule \"sub\" {{\n  source = \"./sub dir\"\n}}\n"),
    )
    .unwrap();
    std::fs::write(sub.join("main.tf"), "terraform {\n  backend \"s3\" {}\n}\n").unwrap();
}

#[test]
fn a_module_with_all_three_severities_is_valid_sarif() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("module");
    three_severities_module(&dir);
    let path = dir.to_str().unwrap();
    let (code, out, err) = run(&["module", "--role", "machine", "--format", "sarif", path]);
    assert_eq!(code, 1, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_valid(&sarif_validator(), &doc, "three severities");
    assert_eq!(
        doc["$schema"],
        "https://json.schemastore.org/sarif-2.1.0.json"
    );
    assert_eq!(doc["version"], "2.1.0");
    let run_ = &doc["runs"][0];
    assert_eq!(run_["tool"]["driver"]["name"], "tfcapi-lint");
    assert_eq!(run_["tool"]["driver"]["version"], captf_lint::cli::VERSION);
    let levels: BTreeSet<&str> = run_["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["level"].as_str().unwrap())
        .collect();
    assert_eq!(levels, BTreeSet::from(["error", "note", "warning"]));
    let root = std::fs::canonicalize(&dir).unwrap();
    assert_eq!(
        run_["originalUriBaseIds"]["MODULEROOT"]["uri"],
        format!("file://{}/", root.display())
    );
    let backend = run_["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "module/backend")
        .unwrap();
    assert_eq!(
        backend["locations"][0]["physicalLocation"],
        json!({
            "artifactLocation": {"uri": "sub%20dir/main.tf", "uriBaseId": "MODULEROOT"},
            "region": {"startLine": 2}
        })
    );
    let (_, json_out, _) = run(&["module", "--role", "machine", "--json", path]);
    assert_matches_json(
        &doc,
        &serde_json::from_str(&json_out).unwrap(),
        "three severities",
    );
}

#[test]
fn the_schema_check_can_fail() {
    // The validator is not a rubber stamp: SARIF has no level "info".
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("module");
    three_severities_module(&dir);
    let (_, out, _) = run(&[
        "module",
        "--role",
        "machine",
        "--format",
        "sarif",
        dir.to_str().unwrap(),
    ]);
    let mut doc: Value = serde_json::from_str(&out).unwrap();
    let validator = sarif_validator();
    assert!(validator.is_valid(&doc));
    let mut bad = doc.clone();
    bad["runs"][0]["results"][0]["level"] = json!("info");
    assert!(!validator.is_valid(&bad));
    // Nor are formats skipped: a path with a space is no URI reference.
    let results = doc["runs"][0]["results"].as_array_mut().unwrap();
    let nested = results
        .iter_mut()
        .find(|r| r["ruleId"] == "module/backend")
        .unwrap();
    nested["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] =
        json!("sub dir/main.tf");
    assert!(!validator.is_valid(&doc));
}

#[test]
fn an_image_report_is_valid_sarif_rooted_at_the_image_module() {
    let module = "terraform {\n  backend \"s3\" {}\n}\nvariable \"size\" {\n  type = string\n}\n";
    let image = Image {
        layers: vec![layer(vec![
            Item::Dir("captf/", 0o755),
            Item::Dir("captf/module/", 0o755),
            file("captf/module/main.tf", module, 0o644),
        ])],
        user: "",
        labels: vec![],
        entrypoint: None,
        os: "linux",
        arch: "amd64",
    };
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("img");
    support::write_layout(&layout, &[image], "v1");
    let target = format!("oci:{}", layout.display());
    let (code, out, err) = run(&["image", "--role", "machine", "--format", "sarif", &target]);
    assert_eq!(code, 1, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_valid(&sarif_validator(), &doc, "image");
    let run_ = &doc["runs"][0];
    assert_eq!(
        run_["originalUriBaseIds"],
        json!({"MODULEROOT": {"uri": "file:///captf/module/"}})
    );
    let uris: BTreeSet<(&str, Option<&str>)> = run_["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["locations"][0]["physicalLocation"]["artifactLocation"].as_object())
        .map(|a| {
            (
                a["uri"].as_str().unwrap(),
                a.get("uriBaseId").and_then(Value::as_str),
            )
        })
        .collect();
    assert!(uris.contains(&("main.tf", Some("MODULEROOT"))), "{uris:?}");
    assert!(uris.contains(&("file:///captf/runtime", None)), "{uris:?}");
    let (_, json_out, _) = run(&["image", "--role", "machine", "--json", &target]);
    assert_matches_json(&doc, &serde_json::from_str(&json_out).unwrap(), "image");
}

#[test]
fn format_and_json_flags() {
    let dir = "tests/fixtures/bad/missing-output";
    let base = ["module", "--role", "machine", dir];
    let with = |flags: &[&str]| {
        let mut args: Vec<&str> = base.to_vec();
        args.splice(3..3, flags.iter().copied());
        run(&args)
    };
    let (code, json, _) = with(&["--json"]);
    assert_eq!(code, 1);
    assert_eq!(
        with(&["--format", "json"]),
        (1, json.clone(), String::new())
    );
    assert_eq!(with(&["--format=json", "--json"]), (1, json, String::new()));
    let (code, text, _) = with(&[]);
    assert_eq!(with(&["--format", "text"]), (code, text, String::new()));
    for flags in [
        &["--json", "--format", "sarif"][..],
        &["--json", "--format", "text"][..],
        &["--format", "xml"][..],
    ] {
        let (code, out, err) = with(flags);
        assert_eq!(code, 3, "{flags:?}: {out}{err}");
        assert!(out.is_empty());
        assert!(err.starts_with("tfcapi-lint module: "), "{err}");
    }
    let (code, _, err) = run(&[
        "image", "--role", "machine", "--json", "--format", "sarif", "oci:x",
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("--json means --format json"), "{err}");
}

#[test]
fn sarif_keeps_the_exit_codes() {
    let cases: &[(&[&str], i32)] = &[
        (
            &[
                "module",
                "--role",
                "machine",
                "--strict",
                "--format",
                "sarif",
                "tests/fixtures/good/machine",
            ],
            0,
        ),
        (
            &[
                "module",
                "--role",
                "machine",
                "--format",
                "sarif",
                "tests/fixtures/bad/extra-input-no-default",
            ],
            0,
        ),
        (
            &[
                "module",
                "--role",
                "machine",
                "--strict",
                "--format",
                "sarif",
                "tests/fixtures/bad/extra-input-no-default",
            ],
            1,
        ),
        (
            &[
                "module",
                "--role",
                "machine",
                "--format",
                "sarif",
                "tests/fixtures/malformed/unclosed-brace",
            ],
            2,
        ),
        (
            &["module", "--format", "sarif", "tests/fixtures/good/machine"],
            3,
        ),
    ];
    for (args, want) in cases {
        let (code, out, err) = run(args);
        assert_eq!(code, *want, "{args:?}: {err}");
        if *want < 2 {
            let doc: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(doc["version"], "2.1.0");
        } else {
            assert!(out.is_empty());
        }
    }
}
