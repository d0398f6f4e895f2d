//! What each of the provider's images holds: the manager image (the
//! `manager` and `runner` binaries) and the no-op module images (a module
//! at `/captf/module` and OpenTofu at `/captf/runtime`, per the module
//! image contract). `Containerfile` and `modules/noop/Containerfile`
//! describe the same images for builders with a container engine.

use crate::layout::{Content, Entry, ImageSpec};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The non-root uid and gid every image runs as (Pod Security
/// `restricted` needs a numeric non-root user).
pub const NONROOT: u64 = 65532;
pub const CONTRACT: &str = "v1alpha1";

/// Where the release came from, for the OCI labels.
#[derive(Debug, Clone, Default)]
pub struct Provenance {
    pub version: String,
    pub revision: String,
    /// URL of the source repository; no label when empty.
    pub source: String,
}

fn oci_labels(p: &Provenance, title: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        ("org.opencontainers.image.title".into(), title.into()),
        ("org.opencontainers.image.version".into(), p.version.clone()),
        (
            "org.opencontainers.image.revision".into(),
            p.revision.clone(),
        ),
        (
            "org.opencontainers.image.licenses".into(),
            "Apache-2.0".into(),
        ),
    ]);
    if !p.source.is_empty() {
        labels.insert("org.opencontainers.image.source".into(), p.source.clone());
    }
    labels
}

fn binary(path: &str, from: &Path) -> Entry {
    Entry {
        path: path.into(),
        content: Content::HostFile(from.to_path_buf()),
        mode: 0o755,
        owner: 0,
    }
}

/// The manager image: `/manager` (the Deployment's command) and `/runner`
/// (copied into every Job by its init container). Both must be static:
/// the image has no libc, no shell, nothing else.
pub fn manager_image(manager: &Path, runner: &Path, p: &Provenance) -> ImageSpec {
    ImageSpec {
        entries: vec![binary("/manager", manager), binary("/runner", runner)],
        user: format!("{NONROOT}:{NONROOT}"),
        working_dir: None,
        labels: oci_labels(p, "captf-manager"),
        env: vec![],
        entrypoint: vec![],
    }
}

/// A module image of `role` from `module_dir`, running `runtime` (an
/// OpenTofu binary of `runtime_version`).
pub fn module_image(
    role: &str,
    module_dir: &Path,
    runtime: &Path,
    runtime_version: &str,
    p: &Provenance,
) -> Result<ImageSpec> {
    if !matches!(role, "cluster" | "machine" | "machinepool") {
        bail!("role {role:?} is not one of cluster, machine, machinepool");
    }
    let mut entries = vec![
        Entry {
            path: "/captf".into(),
            content: Content::Dir,
            mode: 0o755,
            owner: NONROOT,
        },
        Entry {
            path: "/captf/module".into(),
            content: Content::Dir,
            mode: 0o755,
            owner: NONROOT,
        },
        // An empty provider mirror: the runner then tells `init` to
        // install from the image only, so a Job needs no registry egress
        // (the no-op modules use no provider).
        Entry {
            path: "/captf/providers".into(),
            content: Content::Dir,
            mode: 0o755,
            owner: NONROOT,
        },
        binary("/captf/runtime", runtime),
    ];
    let files = module_files(module_dir)?;
    if !files.iter().any(|(rel, _)| is_top_level_module_file(rel)) {
        bail!("{} holds no .tf or .tf.json file", module_dir.display());
    }
    for (relative, from) in files {
        let (content, mode) = if from.is_dir() {
            (Content::Dir, 0o755)
        } else {
            (Content::HostFile(from), 0o644)
        };
        entries.push(Entry {
            path: format!("/captf/module/{relative}"),
            content,
            mode,
            owner: NONROOT,
        });
    }
    let mut labels = oci_labels(p, &format!("noop-{role}"));
    labels.extend([
        ("io.captf.contract".to_string(), CONTRACT.to_string()),
        ("io.captf.role".to_string(), role.to_string()),
        ("io.captf.runtime".to_string(), "tofu".to_string()),
        (
            "io.captf.runtime.version".to_string(),
            runtime_version.to_string(),
        ),
    ]);
    Ok(ImageSpec {
        entries,
        user: format!("{NONROOT}:{NONROOT}"),
        working_dir: Some("/captf".into()),
        labels,
        env: vec![],
        entrypoint: vec![],
    })
}

fn is_top_level_module_file(relative: &str) -> bool {
    !relative.contains('/')
        && [".tf", ".tf.json", ".tofu", ".tofu.json"]
            .iter()
            .any(|ext| relative.ends_with(ext))
}

/// Every file and folder under `dir`, relative, skipping what a local
/// `tofu init` leaves behind (`.terraform*`) and tests (`tests/`, which
/// `tofu test` runs at build time, not in a Job).
fn module_files(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    walk(dir, "", &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) -> Result<()> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(".terraform") || (prefix.is_empty() && name == "tests") {
            continue;
        }
        let relative = format!("{prefix}{name}");
        let path = entry.path();
        out.push((relative.clone(), path.clone()));
        if entry.file_type()?.is_dir() {
            walk(&path, &format!("{relative}/"), out)?;
        }
    }
    Ok(())
}
