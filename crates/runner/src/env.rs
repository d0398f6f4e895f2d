//! The environment the runtime runs with.

use std::path::Path;

/// `TF_*`/`KUBE_*` names the runner lets through.
const KEPT: [&str; 3] = ["TF_IN_AUTOMATION", "TF_INPUT", "KUBE_NAMESPACE"];

/// The rewritten environment and the names that were dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeEnv {
    pub vars: Vec<(String, String)>,
    pub dropped: Vec<String>,
    /// Set when `TMPDIR` was absent and the runner must create this folder.
    pub created_tmpdir: Option<String>,
}

impl RuntimeEnv {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Rewrites `env` for the runtime: the runner owns every `TF_*` and `KUBE_*`
/// name except three, forces `HOME` and `TF_DATA_DIR` into the work
/// directory, keeps or supplies `TMPDIR`, and points `TF_CLI_CONFIG_FILE` at
/// the mirror configuration when there is one.
pub fn rewrite_env(
    env: impl IntoIterator<Item = (String, String)>,
    workdir: &str,
    with_mirror: bool,
) -> RuntimeEnv {
    let workdir = workdir.trim_end_matches('/');
    let mut vars = Vec::new();
    let mut dropped = Vec::new();
    let mut tmpdir = None;
    for (name, value) in env {
        let reserved = (name.starts_with("TF_") || name.starts_with("KUBE_"))
            && !KEPT.contains(&name.as_str());
        if reserved {
            dropped.push(name);
            continue;
        }
        match name.as_str() {
            "HOME" => {}
            "TMPDIR" if !value.is_empty() => tmpdir = Some(value),
            "TMPDIR" => {}
            _ => vars.push((name, value)),
        }
    }
    vars.push(("HOME".to_owned(), workdir.to_owned()));
    vars.push(("TF_DATA_DIR".to_owned(), format!("{workdir}/.terraform")));
    let created_tmpdir = match tmpdir {
        Some(t) => {
            vars.push(("TMPDIR".to_owned(), t));
            None
        }
        None => {
            let t = format!("{workdir}/tmp");
            vars.push(("TMPDIR".to_owned(), t.clone()));
            Some(t)
        }
    };
    if with_mirror {
        vars.push((
            "TF_CLI_CONFIG_FILE".to_owned(),
            format!("{workdir}/cli.tfrc"),
        ));
    }
    dropped.sort();
    RuntimeEnv {
        vars,
        dropped,
        created_tmpdir,
    }
}

/// The CLI configuration that installs providers only from the image's
/// mirror.
pub fn mirror_cli_config(mirror: &Path) -> String {
    let path = serde_json::to_string(&mirror.to_string_lossy()).expect("strings serialize");
    format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path    = {path}\n    include = [\"*/*/*\"]\n  }}\n  direct {{\n    exclude = [\"*/*/*\"]\n  }}\n}}\n"
    )
}
