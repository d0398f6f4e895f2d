//! `captf-images`: writes the manager image or a module image as an OCI
//! image layout directory plus a tarball of it (`<out>.tar`). `make images`
//! runs it for every image of a release.

use anyhow::{Context, Result};
use captf_images::layout::{self, ImageSpec};
use captf_images::recipes::{self, Provenance};
use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
#[command(
    name = "captf-images",
    about = "Builds the provider's images as OCI image layouts"
)]
struct Cli {
    #[command(subcommand)]
    image: Image,
}

#[derive(Subcommand, Debug)]
enum Image {
    /// The manager image: static `/manager` and `/runner`.
    Manager {
        #[arg(long)]
        manager: PathBuf,
        #[arg(long)]
        runner: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// A module image: the module at `/captf/module`, OpenTofu at `/captf/runtime`.
    Module {
        /// cluster, machine or machinepool.
        #[arg(long)]
        role: String,
        /// The module's folder, e.g. `modules/noop/cluster`.
        #[arg(long)]
        module: PathBuf,
        /// The OpenTofu binary.
        #[arg(long)]
        runtime: PathBuf,
        /// Its version, for the `io.captf.runtime.version` label.
        #[arg(long)]
        runtime_version: String,
        /// The image's name (`org.opencontainers.image.title`); `noop-<role>` when unset.
        #[arg(long, default_value = "")]
        name: String,
        /// A provider filesystem mirror to ship at `/captf/providers`.
        #[arg(long, requires = "provider_sums")]
        providers: Option<PathBuf>,
        /// The sums (`<sha256>  <file name>` lines) every mirror file is checked against.
        #[arg(long, requires = "providers")]
        provider_sums: Option<PathBuf>,
        /// A CA bundle for the providers' TLS, put at `/etc/ssl/certs/ca-certificates.crt`.
        #[arg(long)]
        ca_bundle: Option<PathBuf>,
        /// A file holding the `io.captf.variables-schema` label (`tfcapi-lint schema`'s output).
        #[arg(long)]
        variables_schema: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Args, Debug)]
struct Common {
    /// Layout directory to write (replaced); the tarball goes next to it.
    #[arg(long)]
    out: PathBuf,
    /// The image reference the layout is tagged with, e.g. `ghcr.io/o/captf-manager:v0.1.0`.
    #[arg(long)]
    reference: String,
    /// `org.opencontainers.image.version`.
    #[arg(long)]
    version: String,
    /// `org.opencontainers.image.revision` (the commit).
    #[arg(long, default_value = "")]
    revision: String,
    /// `org.opencontainers.image.source` (repository URL).
    #[arg(long, default_value = "")]
    source: String,
}

impl Common {
    fn provenance(&self) -> Provenance {
        Provenance {
            version: self.version.clone(),
            revision: self.revision.clone(),
            source: self.source.clone(),
        }
    }
}

fn write(spec: &ImageSpec, common: &Common) -> Result<()> {
    let written = layout::write_layout(&common.out, spec, layout::tag_of(&common.reference))?;
    let archive = archive_path(&common.out);
    layout::write_archive(&common.out, &archive)?;
    println!(
        "{} {} ({} bytes compressed) -> {} and {}",
        common.reference,
        written.manifest_digest,
        written.layer_bytes,
        common.out.display(),
        archive.display()
    );
    Ok(())
}

fn archive_path(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".tar");
    out.with_file_name(name)
}

fn main() -> Result<()> {
    match Cli::parse().image {
        Image::Manager {
            manager,
            runner,
            common,
        } => write(
            &recipes::manager_image(&manager, &runner, &common.provenance()),
            &common,
        ),
        Image::Module {
            role,
            module,
            runtime,
            runtime_version,
            name,
            providers,
            provider_sums,
            ca_bundle,
            variables_schema,
            common,
        } => {
            let variables_schema = match variables_schema {
                Some(path) => Some(
                    std::fs::read_to_string(&path)
                        .with_context(|| format!("reading {}", path.display()))?,
                ),
                None => None,
            };
            let extras = recipes::ModuleExtras {
                name,
                providers: providers
                    .zip(provider_sums)
                    .map(|(dir, sums)| recipes::ProviderMirror { dir, sums }),
                ca_bundle,
                variables_schema,
            };
            let spec = recipes::module_image_with(
                &role,
                &module,
                &runtime,
                &runtime_version,
                &common.provenance(),
                &extras,
            )?;
            write(&spec, &common)
        }
    }
}
