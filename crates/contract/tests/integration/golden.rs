//! Golden files of the rendered root of each role (minimal and full), of the
//! restore root, and of the hashes. `UPDATE_GOLDEN=1` rewrites them; without
//! it any difference fails.

use crate::common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use captf_contract::inputs::RoleInputs;
use captf_contract::{
    Role, approval_hash, exports_hash, inputs_hash, render_backend_root, render_root,
};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn check_golden(rel: &str, actual: &str) {
    let path = golden_dir().join(rel);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "golden file {} unreadable ({e}); run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs from the rendered output (run with UPDATE_GOLDEN=1 to accept):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

#[test]
fn rendered_roots_match_golden_files() {
    for role in Role::ALL {
        for variant in common::VARIANTS {
            let rendered = render_root(
                &common::inputs(role, variant),
                &common::variables(role, variant),
            )
            .unwrap();
            for (file, contents) in rendered.files() {
                check_golden(&format!("{role}-{variant}/{file}"), contents);
            }
        }
    }
    let restore = render_backend_root();
    for (file, contents) in restore.files() {
        check_golden(&format!("restore/{file}"), contents);
    }
}

#[test]
fn hashes_match_golden_file() {
    let mut out = String::new();
    for role in Role::ALL {
        for variant in common::VARIANTS {
            let inputs = common::inputs(role, variant);
            let vars = common::variables(role, variant);
            let h = inputs_hash(common::IMAGE, &inputs, &vars).unwrap();
            writeln!(out, "{role}-{variant} inputs {h}").unwrap();
            match &inputs {
                RoleInputs::MachinePool(pool) => {
                    let a = approval_hash(common::IMAGE, pool, &vars).unwrap();
                    writeln!(out, "{role}-{variant} approval {a}").unwrap();
                    let e = exports_hash(pool.captf_cluster_outputs.as_str()).unwrap();
                    writeln!(out, "{role}-{variant} exports {e}").unwrap();
                }
                RoleInputs::Machine(m) => {
                    let e = exports_hash(m.captf_cluster_outputs.as_str()).unwrap();
                    writeln!(out, "{role}-{variant} exports {e}").unwrap();
                }
                RoleInputs::Cluster(_) => {}
            }
        }
    }
    check_golden("hashes.txt", &out);
}

#[test]
fn hashed_bytes_match_golden_files() {
    // Exactly what the inputs hash covers, frozen per role.
    for role in Role::ALL {
        let payload = captf_contract::hash::inputs_hash_payload(
            common::IMAGE,
            &common::inputs(role, "full"),
            &common::variables(role, "full"),
        )
        .unwrap();
        let mut text = String::from_utf8(payload).unwrap();
        text.push('\n');
        check_golden(&format!("hash-payload/{role}-full.json"), &text);
    }
}

#[test]
fn main_tf_json_depends_on_variable_names_and_sensitivity_only() {
    for role in Role::ALL {
        let base = render_root(
            &common::inputs(role, "full"),
            &common::variables(role, "full"),
        )
        .unwrap();
        // Same names and sensitivity, other values everywhere.
        let other_inputs = common::inputs(role, "minimal");
        let mut vars = captf_contract::UserVariables::new();
        for (name, var) in common::variables(role, "full").iter() {
            vars.insert(
                role,
                name,
                serde_json::json!({"other": [1, 2]}).into(),
                var.sensitive,
            )
            .unwrap();
        }
        let other = render_root(&other_inputs, &vars).unwrap();
        assert_eq!(base.main_tf_json, other.main_tf_json, "{role}");
        assert_ne!(base.tfvars_json, other.tfvars_json, "{role}");
    }
}
