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

/// What a module image holds beyond its module and runtime.
#[derive(Debug, Clone, Default)]
pub struct ModuleExtras {
    /// The image's name (`org.opencontainers.image.title`), e.g.
    /// `oci-machinepool`; `noop-<role>` when empty.
    pub name: String,
    /// A provider filesystem mirror (`<host>/<namespace>/<type>/<version>/
    /// <os_arch>/<binary>`) copied to `/captf/providers`, so `init` needs no
    /// egress; every file in it must have its sha256 in `sums`.
    pub providers: Option<ProviderMirror>,
    /// A CA bundle put at `/etc/ssl/certs/ca-certificates.crt`, where the
    /// providers' TLS looks for one.
    pub ca_bundle: Option<PathBuf>,
    /// The `io.captf.variables-schema` label (`tfcapi-lint schema`'s
    /// output).
    pub variables_schema: Option<String>,
}

/// A provider mirror and the `SHA256SUMS`-style file (`<hex>  <file name>`
/// per line) its files are checked against.
#[derive(Debug, Clone)]
pub struct ProviderMirror {
    pub dir: PathBuf,
    pub sums: PathBuf,
}

/// A module image of `role` from `module_dir`, running `runtime` (an
/// OpenTofu binary of `runtime_version`), with an empty provider mirror:
/// the no-op modules'.
pub fn module_image(
    role: &str,
    module_dir: &Path,
    runtime: &Path,
    runtime_version: &str,
    p: &Provenance,
) -> Result<ImageSpec> {
    module_image_with(
        role,
        module_dir,
        runtime,
        runtime_version,
        p,
        &ModuleExtras::default(),
    )
}

/// [`module_image`] with a name, a provider mirror, a CA bundle and a
/// variables schema.
pub fn module_image_with(
    role: &str,
    module_dir: &Path,
    runtime: &Path,
    runtime_version: &str,
    p: &Provenance,
    extras: &ModuleExtras,
) -> Result<ImageSpec> {
    if !matches!(role, "cluster" | "machine" | "machinepool") {
        bail!("role {role:?} is not one of cluster, machine, machinepool");
    }
    let mut entries = vec![
        dir_entry("/captf"),
        dir_entry("/captf/module"),
        // The provider mirror, empty when the module uses no provider: the
        // runner then tells `init` to install from the image only, so a Job
        // needs no registry egress.
        dir_entry("/captf/providers"),
        binary("/captf/runtime", runtime),
    ];
    if let Some(mirror) = &extras.providers {
        entries.extend(mirror_entries(mirror)?);
    }
    if let Some(bundle) = &extras.ca_bundle {
        if !bundle.is_file() {
            bail!("the CA bundle {} is not a file", bundle.display());
        }
        entries.push(Entry {
            path: "/etc/ssl/certs/ca-certificates.crt".into(),
            content: Content::HostFile(bundle.clone()),
            mode: 0o644,
            owner: 0,
        });
    }
    entries.extend(module_entries(module_dir)?);
    let title = match extras.name.as_str() {
        "" => format!("noop-{role}"),
        name => name.to_owned(),
    };
    let mut labels = oci_labels(p, &title);
    labels.extend([
        ("io.captf.contract".to_string(), CONTRACT.to_string()),
        ("io.captf.role".to_string(), role.to_string()),
        ("io.captf.runtime".to_string(), "tofu".to_string()),
        (
            "io.captf.runtime.version".to_string(),
            runtime_version.to_string(),
        ),
    ]);
    if let Some(schema) = &extras.variables_schema {
        labels.insert("io.captf.variables-schema".into(), schema.trim().into());
    }
    Ok(ImageSpec {
        entries,
        user: format!("{NONROOT}:{NONROOT}"),
        working_dir: Some("/captf".into()),
        labels,
        env: vec![],
        entrypoint: vec![],
    })
}

fn dir_entry(path: &str) -> Entry {
    Entry {
        path: path.into(),
        content: Content::Dir,
        mode: 0o755,
        owner: NONROOT,
    }
}

/// The module's own files under `/captf/module`.
fn module_entries(module_dir: &Path) -> Result<Vec<Entry>> {
    let files = module_files(module_dir)?;
    if !files.iter().any(|(rel, _)| is_top_level_module_file(rel)) {
        bail!("{} holds no .tf or .tf.json file", module_dir.display());
    }
    Ok(files
        .into_iter()
        .map(|(relative, from)| {
            let (content, mode) = if from.is_dir() {
                (Content::Dir, 0o755)
            } else {
                (Content::HostFile(from), 0o644)
            };
            Entry {
                path: format!("/captf/module/{relative}"),
                content,
                mode,
                owner: NONROOT,
            }
        })
        .collect())
}

/// The mirror's files under `/captf/providers`, each checked against its
/// sum first: an image never ships a provider nobody vouched for.
fn mirror_entries(mirror: &ProviderMirror) -> Result<Vec<Entry>> {
    let sums = std::fs::read_to_string(&mirror.sums)
        .with_context(|| format!("reading {}", mirror.sums.display()))?;
    let sums = parse_sums(&sums);
    let mut files = Vec::new();
    walk(&mirror.dir, "", &mut files, &|_, _| false)?;
    if !files.iter().any(|(_, from)| from.is_file()) {
        bail!("the provider mirror {} holds no file", mirror.dir.display());
    }
    let mut entries = Vec::new();
    for (relative, from) in files {
        if from.is_dir() {
            entries.push(dir_entry(&format!("/captf/providers/{relative}")));
            continue;
        }
        let name = relative.rsplit('/').next().unwrap_or(&relative);
        let Some(want) = sums.get(name) else {
            bail!(
                "{}: {name} has no sum in {}",
                mirror.dir.display(),
                mirror.sums.display()
            );
        };
        let bytes = std::fs::read(&from).with_context(|| format!("reading {}", from.display()))?;
        let got = crate::layout::sha256(&bytes);
        if got.strip_prefix("sha256:") != Some(want.as_str()) {
            bail!("{relative}: sha256 {got} does not match {want} in the sums file");
        }
        entries.push(Entry {
            path: format!("/captf/providers/{relative}"),
            content: Content::HostFile(from),
            mode: 0o755,
            owner: NONROOT,
        });
    }
    Ok(entries)
}

/// `<hex>  <name>` lines (a `*` before the name marks binary mode) as name
/// → hex.
fn parse_sums(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let (hex, name) = l.trim().split_once(char::is_whitespace)?;
            let name = name.trim().trim_start_matches('*');
            Some((name.to_owned(), hex.to_ascii_lowercase()))
        })
        .collect()
}

fn is_top_level_module_file(relative: &str) -> bool {
    !relative.contains('/')
        && [".tf", ".tf.json", ".tofu", ".tofu.json"]
            .iter()
            .any(|ext| relative.ends_with(ext))
}

/// Every file and folder under `dir` a Job may read, relative: not what a
/// local `tofu init` leaves behind (`.terraform*`) or other hidden files,
/// tests (`tests/`, which `tofu test` runs at build time, not in a Job),
/// the module's `Makefile` or its Markdown documents.
fn module_files(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    walk(dir, "", &mut out, &|prefix, name| {
        name.starts_with('.')
            || (prefix.is_empty() && (name == "Makefile" || name == "tests"))
            || name.ends_with(".md")
    })?;
    Ok(out)
}

/// Every file and folder under `dir`, relative to it (with `prefix`),
/// parents before children; what `skip(prefix, name)` names is left out
/// with all it holds.
fn walk(
    dir: &Path,
    prefix: &str,
    out: &mut Vec<(String, PathBuf)>,
    skip: &dyn Fn(&str, &str) -> bool,
) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if skip(prefix, &name) {
            continue;
        }
        let relative = format!("{prefix}{name}");
        let path = entry.path();
        out.push((relative.clone(), path.clone()));
        if entry.file_type()?.is_dir() {
            walk(&path, &format!("{relative}/"), out, skip)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn paths(spec: &ImageSpec) -> Vec<&str> {
        spec.entries.iter().map(|e| e.path.as_str()).collect()
    }

    /// A module folder as a module repository holds it, with its tests,
    /// documents, Makefile and a local `init`'s leftovers.
    fn module_folder(dir: &Path) -> PathBuf {
        let module = dir.join("module");
        for file in [
            "main.tf",
            "modules/pool/main.tf",
            "templates/cloud-init.tftpl",
            "tests/zones.tftest.hcl",
            "README.md",
            "modules/pool/README.md",
            "Makefile",
            ".terraform.lock.hcl",
            ".terraform/providers/x",
        ] {
            write(&module.join(file), "x");
        }
        module
    }

    fn mirror(dir: &Path, sum_of: &str) -> ProviderMirror {
        let binary =
            "registry.opentofu.org/oracle/oci/8.28.0/linux_amd64/terraform-provider-oci_v8.28.0";
        write(&dir.join("mirror").join(binary), "provider");
        let hex = crate::layout::sha256(sum_of.as_bytes());
        let hex = hex.trim_start_matches("sha256:");
        write(
            &dir.join("SHA256SUMS"),
            &format!("{hex}  terraform-provider-oci_v8.28.0\nffff  other.zst\n"),
        );
        ProviderMirror {
            dir: dir.join("mirror"),
            sums: dir.join("SHA256SUMS"),
        }
    }

    #[test]
    fn a_module_image_holds_only_the_module_s_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let module = module_folder(dir.path());
        let spec = module_image(
            "machinepool",
            &module,
            &module.join("main.tf"),
            "1.12.6",
            &Provenance::default(),
        )
        .unwrap();
        let module_paths: Vec<&str> = paths(&spec)
            .into_iter()
            .filter(|p| p.starts_with("/captf/module/"))
            .collect();
        assert_eq!(
            module_paths,
            [
                "/captf/module/main.tf",
                "/captf/module/modules",
                "/captf/module/modules/pool",
                "/captf/module/modules/pool/main.tf",
                "/captf/module/templates",
                "/captf/module/templates/cloud-init.tftpl",
            ]
        );
        assert_eq!(
            spec.labels["org.opencontainers.image.title"],
            "noop-machinepool"
        );
        assert!(!spec.labels.contains_key("io.captf.variables-schema"));
    }

    #[test]
    fn the_providers_the_ca_bundle_name_and_schema_go_in_when_the_sums_match() {
        let dir = tempfile::tempdir().unwrap();
        let module = module_folder(dir.path());
        write(&dir.path().join("ca.crt"), "certificates");
        let extras = ModuleExtras {
            name: "oci-machinepool".into(),
            providers: Some(mirror(dir.path(), "provider")),
            ca_bundle: Some(dir.path().join("ca.crt")),
            variables_schema: Some("{\"type\":\"object\"}\n".into()),
        };
        let spec = module_image_with(
            "machinepool",
            &module,
            &module.join("main.tf"),
            "1.12.6",
            &Provenance::default(),
            &extras,
        )
        .unwrap();
        let provider = spec
            .entries
            .iter()
            .find(|e| {
                e.path
                    .ends_with("/linux_amd64/terraform-provider-oci_v8.28.0")
            })
            .expect("the provider in the mirror");
        assert_eq!(
            provider.path,
            "/captf/providers/registry.opentofu.org/oracle/oci/8.28.0/linux_amd64/terraform-provider-oci_v8.28.0"
        );
        assert_eq!((provider.mode, provider.owner), (0o755, NONROOT));
        assert!(paths(&spec).contains(&"/etc/ssl/certs/ca-certificates.crt"));
        assert_eq!(
            spec.labels["org.opencontainers.image.title"],
            "oci-machinepool"
        );
        assert_eq!(
            spec.labels["io.captf.variables-schema"],
            "{\"type\":\"object\"}"
        );
    }

    #[test]
    fn a_provider_whose_sum_differs_or_is_missing_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let module = module_folder(dir.path());
        let build = |providers| {
            module_image_with(
                "machinepool",
                &module,
                &module.join("main.tf"),
                "1.12.6",
                &Provenance::default(),
                &ModuleExtras {
                    providers: Some(providers),
                    ..Default::default()
                },
            )
        };
        let wrong = build(mirror(dir.path(), "something else")).unwrap_err();
        assert!(wrong.to_string().contains("does not match"), "{wrong}");
        let unlisted = mirror(dir.path(), "provider");
        std::fs::write(&unlisted.sums, "").unwrap();
        let missing = build(unlisted).unwrap_err();
        assert!(missing.to_string().contains("has no sum"), "{missing}");
    }
}
