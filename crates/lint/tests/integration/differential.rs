//! Differential test against the real OpenTofu: over the fixture modules, a
//! few syntax-heavy ones and the OCI machine-pool module, the linter calls a
//! module unparsable (exit 2) exactly when `tofu init -backend=false` +
//! `tofu validate` reject it. Runs offline: the fixtures are provider-free
//! (`terraform_data`), and the OCI module is validated by the real
//! `oracle/oci` provider installed from the asset cache's mirror.

use crate::oci_support;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Fixtures left out, and why.
const EXCLUDED: &[(&str, &str)] = &[
    (
        "bad/type-unreadable",
        "its type constraint is invalid for OpenTofu too, but the linter reports that as an input/type warning, not as unparsable",
    ),
    (
        "bad/source-escape",
        "calls a module outside its directory and one that does not exist: init fails by design",
    ),
    (
        "bad/provider-config",
        "configures the aws provider, which init would download",
    ),
];

/// Modules where the two disagree because the spec says so.
const DIVERGENT: &[(&str, &str)] = &[(
    "tofu-twin",
    "main.tf is broken but shadowed by main.tofu: OpenTofu never reads it, the linter parses both file sets",
)];

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

struct Tofu {
    bin: PathBuf,
    config: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Tofu {
    fn new() -> Tofu {
        let bin = captf_testenv::assets::tofu().expect("the tofu test asset");
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("empty.tfrc");
        std::fs::write(&config, "").unwrap();
        Tofu {
            bin,
            config,
            _tmp: tmp,
        }
    }

    fn run(&self, dir: &Path, args: &[&str]) -> (bool, String) {
        let out = Command::new(&self.bin)
            .args(args)
            .current_dir(dir)
            .env("TF_CLI_CONFIG_FILE", &self.config)
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1")
            .env_remove("TF_PLUGIN_CACHE_DIR")
            .output()
            .unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    /// Whether OpenTofu accepts the module, and what it said.
    fn accepts(&self, module: &Path) -> (bool, String) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("m");
        copy_dir(module, &dir);
        let (ok, out) = self.run(
            &dir,
            &["init", "-backend=false", "-input=false", "-no-color"],
        );
        if !ok {
            return (false, out);
        }
        self.run(&dir, &["validate", "-no-color"])
    }
}

fn linter_rejects(module: &Path) -> (bool, String) {
    let args: Vec<String> = [
        "tfcapi-lint",
        "module",
        "--role",
        "machine",
        module.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = captf_lint::cli::run(&args, &mut out, &mut err);
    (code == 2, String::from_utf8_lossy(&err).into_owned())
}

fn modules() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for group in ["good", "bad", "malformed"] {
        let dir = Path::new("tests/fixtures").join(group);
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = format!("{group}/{}", p.file_name().unwrap().to_string_lossy());
            if p.is_dir() && !EXCLUDED.iter().any(|(n, _)| *n == name) {
                out.push((name, p));
            }
        }
    }
    for e in std::fs::read_dir("tests/differential").unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !DIVERGENT.iter().any(|(n, _)| *n == name) {
            out.push((name, p));
        }
    }
    out.sort();
    out
}

#[test]
fn linter_and_tofu_agree_on_what_is_malformed() {
    let tofu = Tofu::new();
    let mut disagreements = Vec::new();
    let mut rejected = 0;
    let all = modules();
    for (name, path) in &all {
        let (lint_rejects, lint_says) = linter_rejects(path);
        let (tofu_accepts, tofu_says) = tofu.accepts(path);
        if lint_rejects {
            rejected += 1;
        }
        if lint_rejects == tofu_accepts {
            disagreements.push(format!(
                "{name}: linter {} ({lint_says}), tofu {} ({tofu_says})",
                if lint_rejects { "rejects" } else { "accepts" },
                if tofu_accepts { "accepts" } else { "rejects" },
            ));
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    // The set must hold both kinds, or the comparison proves nothing.
    assert!(
        rejected >= 5 && all.len() - rejected >= 20,
        "{rejected} of {}",
        all.len()
    );
}

#[test]
fn linter_and_tofu_agree_on_the_oci_module() {
    // Validated by its provider, the build at hand from the mirror
    // (oci_support); linted as it is in the repository.
    let ws = oci_support::Workspace::new();
    ws.init();
    let (tofu_accepts, tofu_says) = ws.validate();
    let (lint_rejects, lint_says) = linter_rejects(&oci_support::module_source());
    assert!(
        tofu_accepts && !lint_rejects,
        "linter {} ({lint_says}), tofu {} ({tofu_says})",
        if lint_rejects { "rejects" } else { "accepts" },
        if tofu_accepts { "accepts" } else { "rejects" },
    );
}

#[test]
fn documented_divergences_still_diverge() {
    let tofu = Tofu::new();
    for (name, why) in DIVERGENT {
        let path = Path::new("tests/differential").join(name);
        let (lint_rejects, _) = linter_rejects(&path);
        let (tofu_accepts, out) = tofu.accepts(&path);
        assert!(lint_rejects && tofu_accepts, "{name} ({why}): {out}");
    }
}
