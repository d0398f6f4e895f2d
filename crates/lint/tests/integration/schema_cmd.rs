//! `tfcapi-lint schema`: the user-variables schema of the reference modules
//! and of generated ones, checked as the manager reads it (a closed root
//! object, top-level types) and as a JSON Schema, plus its exit codes.

use captf_lint::varschema::MAX_LABEL_BYTES;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::run_cli as run;

fn modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../modules")
}

/// Runs `schema` and checks what every printed schema must be: one line,
/// a closed object with sorted `required` naming only its properties.
fn schema(dir: &Path, role: &str) -> Value {
    let (code, out, err) = run(&["schema", dir.to_str().unwrap(), "--role", role]);
    assert_eq!(code, 0, "{}: {err}", dir.display());
    assert!(err.is_empty(), "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.ends_with("}\n"), "{out}");
    assert!(
        out.starts_with(r#"{"type":"object","additionalProperties":false,"properties":{"#),
        "{out}"
    );
    let doc: Value = serde_json::from_str(&out).unwrap();
    let required: Vec<&str> = doc["required"]
        .as_array()
        .expect("required is always present")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut sorted = required.clone();
    sorted.sort();
    assert_eq!(required, sorted);
    for name in &required {
        assert!(doc["properties"].get(name).is_some(), "{name}");
    }
    doc
}

/// The contract inputs of a role, which a schema must never list.
fn contract_inputs(role: &str) -> Vec<&'static str> {
    let role: captf_lint::contract::Role = role.parse().unwrap();
    captf_lint::contract::inputs(role)
        .iter()
        .map(|i| i.name)
        .collect()
}

/// The manager's reading of a schema property's `type`: a string or an
/// array of strings, or absent for anything.
fn types_of(prop: &Value) -> Vec<&str> {
    match &prop["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
        Value::Null => vec![],
        other => panic!("type is {other}"),
    }
}

#[test]
fn noop_modules_list_only_their_test_hooks() {
    for role in ["cluster", "machine", "machinepool"] {
        let doc = schema(&modules().join("noop").join(role), role);
        let props = doc["properties"].as_object().unwrap();
        for name in contract_inputs(role) {
            assert!(!props.contains_key(name), "{role}: {name} listed");
        }
        assert!(props.keys().all(|k| k.starts_with("noop_")), "{props:?}");
        assert_eq!(
            doc["properties"]["noop_fail_apply"],
            json!({"type": "boolean"})
        );
        assert_eq!(
            doc["properties"]["noop_health_state"],
            json!({"type": ["string", "null"]})
        );
        assert_eq!(doc["required"], json!([]), "{role}");
    }
}

#[test]
fn oci_machinepool_schema_has_its_user_variables_and_no_contract_input() {
    let doc = schema(&modules().join("oci/machinepool"), "machinepool");
    let props = doc["properties"].as_object().unwrap();
    for name in contract_inputs("machinepool") {
        assert!(!props.contains_key(name), "{name} listed");
    }
    assert!(!props.contains_key("captf_object"));
    assert!(!props.contains_key("bootstrap_data"));
    // Every user variable of the module has a default.
    assert_eq!(doc["required"], json!([]));
    assert_eq!(props["shape"], json!({"type": "string"}));
    assert_eq!(props["subnet_id"], json!({"type": ["string", "null"]}));
    // `nullable = false`: null is not a value a user can mean anything by.
    assert_eq!(
        props["additional_nsg_ids"],
        json!({"type": "array", "items": {"type": "string"}})
    );
    assert_eq!(
        props["additional_tags"],
        json!({"type": "object", "additionalProperties": {"type": "string"}})
    );
    assert_eq!(props["external_cluster_exports"], json!({}));
    assert_eq!(types_of(&props["ocpus"]), ["number"]);
    assert_eq!(types_of(&props["preemptible"]), ["boolean"]);
}

fn write_module(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, src) in files {
        std::fs::write(dir.join(name), src).unwrap();
    }
}

const USER_VARIABLES: &str = r#"
variable "captf_tags" { type = map(string) }
variable "machine_name" { type = string }
variable "zone" { type = string }
variable "image" {
  type = object({
    id   = string
    arch = optional(string, "amd64")
  })
}
variable "disk_gib" {
  type    = number
  default = null
}
variable "labels" {
  type      = map(string)
  default   = {}
  sensitive = true
}
variable "anything" {}
"#;

#[test]
fn required_types_and_values_as_a_json_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    write_module(&dir, &[("variables.tf", USER_VARIABLES)]);
    let doc = schema(&dir, "machine");
    assert_eq!(doc["required"], json!(["anything", "image", "zone"]));
    assert_eq!(
        doc["properties"]["image"],
        json!({
            "type": "object",
            "properties": {"arch": {"type": "string"}, "id": {"type": "string"}},
            "required": ["id"]
        })
    );
    assert_eq!(
        doc["properties"]["disk_gib"],
        json!({"type": ["number", "null"]})
    );
    assert_eq!(doc["properties"]["labels"]["type"], "object");
    assert!(doc["properties"].get("machine_name").is_none());
    // A pool has no `machine_name` input: there it is the module's own.
    let pool = schema(&dir, "machinepool");
    assert!(
        pool["required"]
            .as_array()
            .unwrap()
            .contains(&json!("machine_name"))
    );

    let validator = jsonschema::validator_for(&doc).unwrap();
    let valid = json!({"zone": "a", "image": {"id": "i"}, "anything": [1], "disk_gib": null});
    assert!(validator.is_valid(&valid));
    for bad in [
        json!({"zone": "a", "image": {"id": "i"}}),
        json!({"zone": 1, "image": {"id": "i"}, "anything": 1}),
        json!({"zone": "a", "image": {"arch": "arm64"}, "anything": 1}),
        json!({"zone": "a", "image": {"id": "i"}, "anything": 1, "labels": {"k": 1}}),
        json!({"zone": "a", "image": {"id": "i"}, "anything": 1, "machine_name": "m"}),
    ] {
        assert!(!validator.is_valid(&bad), "{bad}");
    }
}

#[test]
fn over_the_label_limit_exits_1_and_prints_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("big");
    let name = "a_user_variable_with_a_name_long_enough_to_fill_the_label_quickly";
    // Defaults keep `required` empty: each variable costs at least its name
    // plus `"":{"type":"string"},`.
    let module = |count: usize| -> String {
        (0..count)
            .map(|i| {
                format!("variable \"{name}_{i}\" {{\n  type    = string\n  default = \"\"\n}}\n")
            })
            .collect()
    };
    let count = MAX_LABEL_BYTES / name.len() + 1;
    let src = module(count);
    write_module(&dir, &[("variables.tf", &src)]);
    let (code, out, err) = run(&["schema", dir.to_str().unwrap(), "--role", "cluster"]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty());
    assert!(err.contains("over the label limit of 16384 bytes"), "{err}");
}

#[test]
fn a_schema_of_exactly_the_label_limit_prints() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("edge");
    let overhead = r#"{"type":"object","additionalProperties":false,"properties":{"":{"type":"string"}},"required":[]}"#.len();
    for (extra, want) in [(0, 0), (1, 1)] {
        let name = "v".repeat(MAX_LABEL_BYTES - overhead + extra);
        let src = format!("variable \"{name}\" {{\n  type    = string\n  default = \"\"\n}}\n");
        write_module(&dir, &[("variables.tf", &src)]);
        let (code, out, err) = run(&["schema", dir.to_str().unwrap(), "--role", "cluster"]);
        assert_eq!(code, want, "{extra}: {err}");
        if want == 0 {
            assert_eq!(out.len(), MAX_LABEL_BYTES + 1, "the schema and its newline");
        }
    }
}

#[test]
fn unreadable_modules_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let bad_type = tmp.path().join("bad-type");
    write_module(
        &bad_type,
        &[(
            "main.tf",
            "variable \"token\" {\n  type      = strng\n  default   = \"hunter2\"\n  sensitive = true\n}\n",
        )],
    );
    let (code, out, err) = run(&["schema", bad_type.to_str().unwrap(), "--role", "machine"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.contains("main.tf:1: variable token: cannot read its type constraint"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    for dir in [
        "tests/fixtures/malformed/unclosed-brace",
        "tests/fixtures/does-not-exist",
    ] {
        let (code, out, err) = run(&["schema", dir, "--role", "machine"]);
        assert_eq!(code, 2, "{dir}: {err}");
        assert!(out.is_empty());
        assert!(err.starts_with("tfcapi-lint: cannot read module"), "{err}");
    }
}

#[test]
fn usage_errors_exit_3() {
    let dir = "tests/fixtures/good/machine";
    let cases: &[&[&str]] = &[
        &["schema", dir],
        &["schema", dir, "--role", "worker"],
        &["schema", dir, "--role", "machine", "--contract", "v9"],
        &["schema", "--role", "machine"],
        &["schema", dir, dir, "--role", "machine"],
        &["schema", dir, "--role", "machine", "--json"],
    ];
    for args in cases {
        let (code, out, err) = run(args);
        assert_eq!(code, 3, "{args:?}: {out}{err}");
        assert!(out.is_empty(), "{args:?}");
        assert!(err.starts_with("tfcapi-lint schema: "), "{args:?}: {err}");
    }
    let (_, _, err) = run(&["schema", dir]);
    assert!(err.contains("required flag \"role\" not set"), "{err}");
}

#[test]
fn help_lists_the_schema_command() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("schema ") && l.contains("user variables")),
        "{out}"
    );
    let (code, out, _) = run(&["schema", "--help"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("--role") && out.contains("--contract"),
        "{out}"
    );
    assert!(out.contains(&format!("({MAX_LABEL_BYTES} bytes)")), "{out}");
}

#[test]
fn the_binary_prints_the_schema_and_its_exit_codes() {
    let bin = env!("CARGO_BIN_EXE_tfcapi-lint");
    let out = Command::new(bin)
        .args(["schema", "--role", "machine"])
        .arg(modules().join("noop/machine"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["additionalProperties"], false);
    for (args, want) in [
        (&["schema", "--role", "machine", "/does/not/exist"][..], 2),
        (&["schema", "/does/not/exist"][..], 3),
    ] {
        let out = Command::new(bin).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(want), "{args:?}");
    }
}
