//! `tfcapi-lint image`: fetch an image's manifest and layers (never run it),
//! rebuild its file system, check it against the image contract and lint the
//! module it carries.

pub mod auth;
pub mod checks;
pub mod fetch;
pub mod fs;
pub mod inspect;
pub mod labels;
pub mod reference;

pub use reference::Source;

use crate::checks::module as module_checks;
use crate::config::load::{self, LoadError};
use crate::config::model;
use crate::contract::Role;
use crate::report::{FileSet, Finding, ImageInfo, Report, Severity, Subject};
use fetch::{Blobs, Document, INDEX_TYPES};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("cannot fetch the image: {0}")]
    Fetch(String),
    #[error("image too large: {0}")]
    TooLarge(String),
    #[error("cannot read the image's module: {0}")]
    Module(String),
}

#[derive(Debug, Clone)]
pub struct Options {
    pub role: Role,
    pub contract: String,
    /// Set only when given on the command line.
    pub platform: Option<String>,
    pub all_platforms: bool,
    pub insecure: bool,
    pub limits: fs::Limits,
}

pub const DEFAULT_PLATFORM: &str = "linux/amd64";

/// Fetches and lints the image `source` names; `as_given` is the reference
/// as written on the command line.
pub fn lint(source: &Source, as_given: &str, opts: &Options) -> Result<Report, ImageError> {
    match source {
        Source::Layout(dir) => lint_blobs(&fetch::Layout::from_path(dir), as_given, opts),
        Source::Registry(r) => lint_blobs(
            &fetch::Registry::new(r.clone(), opts.insecure),
            as_given,
            opts,
        ),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Platform {
    os: String,
    arch: String,
    variant: String,
}

impl Platform {
    fn parse(s: &str) -> Platform {
        let mut p = s.split('/');
        Platform {
            os: p.next().unwrap_or_default().to_string(),
            arch: p.next().unwrap_or_default().to_string(),
            variant: p.next().unwrap_or_default().to_string(),
        }
    }

    fn from_json(v: &serde_json::Value) -> Platform {
        Platform {
            os: v["os"].as_str().unwrap_or_default().to_string(),
            arch: v["architecture"].as_str().unwrap_or_default().to_string(),
            variant: v["variant"].as_str().unwrap_or_default().to_string(),
        }
    }

    /// Whether this platform satisfies `wanted` (a variant is compared only
    /// when `wanted` names one).
    fn satisfies(&self, wanted: &Platform) -> bool {
        self.os == wanted.os
            && self.arch == wanted.arch
            && (wanted.variant.is_empty() || self.variant == wanted.variant)
    }

    fn target(&self) -> String {
        format!("{}_{}", self.os, self.arch)
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.arch)?;
        if !self.variant.is_empty() {
            write!(f, "/{}", self.variant)?;
        }
        Ok(())
    }
}

fn bad_doc(what: &str, e: impl std::fmt::Display) -> ImageError {
    ImageError::Fetch(format!("{what}: {e}"))
}

pub fn lint_blobs(blobs: &dyn Blobs, as_given: &str, opts: &Options) -> Result<Report, ImageError> {
    let top = blobs.top()?;
    let wanted = Platform::parse(opts.platform.as_deref().unwrap_or(DEFAULT_PLATFORM));
    let mut findings = Vec::new();
    // (platform from the index, manifest)
    let mut selected: Vec<(Option<Platform>, Document)> = Vec::new();
    if INDEX_TYPES.contains(&top.media_type.as_str()) {
        let index: serde_json::Value =
            serde_json::from_slice(&top.bytes).map_err(|e| bad_doc("image index", e))?;
        let entries: Vec<(Platform, String)> = index["manifests"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|m| {
                        (
                            Platform::from_json(&m["platform"]),
                            m["digest"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .filter(|(p, _)| !p.os.is_empty() && p.os != "unknown")
                    .collect()
            })
            .unwrap_or_default();
        let chosen: Vec<&(Platform, String)> = if opts.all_platforms {
            entries.iter().collect()
        } else {
            entries
                .iter()
                .filter(|(p, _)| p.satisfies(&wanted))
                .take(1)
                .collect()
        };
        if chosen.is_empty() {
            let have: Vec<String> = entries.iter().map(|(p, _)| p.to_string()).collect();
            findings.push(Finding::new(
                "image/platform",
                Severity::Error,
                format!(
                    "the image index has no manifest for {wanted} (it has: {})",
                    if have.is_empty() {
                        "none".into()
                    } else {
                        have.join(", ")
                    }
                ),
            ));
        }
        for (p, digest) in chosen {
            selected.push((Some(p.clone()), blobs.manifest(digest)?));
        }
    } else {
        selected.push((None, top.clone()));
    }
    let multi = selected.len() > 1;
    let mut file_set = FileSet::NoModule;
    let mut platforms = Vec::new();
    for (from_index, manifest) in &selected {
        let (platform, mut found, set) =
            lint_manifest(blobs, manifest, from_index.as_ref(), &wanted, opts)?;
        if multi {
            for f in &mut found {
                f.message = format!("[{platform}] {}", f.message);
            }
        }
        if set != FileSet::NoModule {
            file_set = set;
        }
        platforms.push(platform.to_string());
        findings.extend(found);
    }
    let info = ImageInfo {
        reference: as_given.to_string(),
        digest: top.digest.clone(),
        platforms,
    };
    Ok(Report {
        subject: Subject::Image(info),
        contract: opts.contract.clone(),
        role: opts.role.to_string(),
        findings,
        file_set,
    })
}

fn lint_manifest(
    blobs: &dyn Blobs,
    manifest: &Document,
    from_index: Option<&Platform>,
    wanted: &Platform,
    opts: &Options,
) -> Result<(Platform, Vec<Finding>, FileSet), ImageError> {
    let m: serde_json::Value =
        serde_json::from_slice(&manifest.bytes).map_err(|e| bad_doc("image manifest", e))?;
    let config_digest = m["config"]["digest"]
        .as_str()
        .ok_or_else(|| bad_doc("image manifest", "no config digest"))?;
    let config_json: serde_json::Value =
        serde_json::from_slice(&fetch::read_document(blobs, config_digest)?)
            .map_err(|e| bad_doc("image config", e))?;
    let config = checks::ImageConfig::from_json(&config_json);
    let platform = from_index.cloned().unwrap_or(Platform {
        os: config.os.clone(),
        arch: config.architecture.clone(),
        variant: config.variant.clone(),
    });
    let mut findings = Vec::new();
    if from_index.is_none() && opts.platform.is_some() && !platform.satisfies(wanted) {
        findings.push(Finding::new(
            "image/platform",
            Severity::Error,
            format!("the image is built for {platform}, not for the requested {wanted}"),
        ));
    }
    let mut image_fs = fs::ImageFs::default();
    for layer in m["layers"].as_array().into_iter().flatten() {
        let digest = layer["digest"]
            .as_str()
            .ok_or_else(|| bad_doc("image manifest", "a layer without digest"))?;
        image_fs.apply_layer(blobs.blob(digest)?, &opts.limits)?;
    }
    let (providers, file_set) = match load::load(&image_fs, Path::new(fs::MODULE_DIR)) {
        Ok(tree) => {
            findings.extend(module_checks::check(&tree, opts.role));
            let mut providers = Vec::new();
            for module in &tree.modules {
                for set in [&module.terraform, &module.opentofu] {
                    for p in model::required_providers(set) {
                        if !providers.contains(&p) {
                            providers.push(p);
                        }
                    }
                }
            }
            let set = if tree.modules[0].has_tofu {
                FileSet::OpenTofu
            } else {
                FileSet::Terraform
            };
            (providers, set)
        }
        Err(LoadError::Empty(_)) => (Vec::new(), FileSet::NoModule),
        Err(LoadError::Io { .. }) if image_fs.resolve(fs::MODULE_DIR, true).is_none() => {
            (Vec::new(), FileSet::NoModule)
        }
        Err(e) => return Err(ImageError::Module(e.to_string())),
    };
    findings.extend(checks::check(&checks::Input {
        fs: &image_fs,
        config: &config,
        role: opts.role,
        contract: &opts.contract,
        target: platform.target(),
        providers: &providers,
    }));
    Ok((platform, findings, file_set))
}
