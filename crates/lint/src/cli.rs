//! The command line: parses arguments, runs a command, writes its output and
//! returns the exit code.

use crate::checks;
use crate::config::load::{self, DiskFs};
use crate::contract::{CONTRACT_VERSIONS, Role};
use crate::image;
use crate::report::{FileSet, Report, Subject, exit};
use clap::{Args, CommandFactory, Parser, Subcommand};
use std::io::Write;
use std::path::Path;

#[derive(Parser, Debug)]
#[command(
    name = "tfcapi-lint",
    about = "Checks CAPTF modules and module images against the module contract",
    disable_version_flag = true
)]
struct Cli {
    /// Print build information (`--version=raw` prints the version alone).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "")]
    version: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Lint a module directory.
    Module {
        /// The module directory.
        module_dir: String,
        #[command(flatten)]
        common: CommonFlags,
    },
    /// Lint a module image: a registry reference or `oci:<dir>`.
    Image {
        image_ref: String,
        #[command(flatten)]
        common: CommonFlags,
        /// Platform to check in a multi-platform image.
        #[arg(long)]
        platform: Option<String>,
        /// Check every platform of an index.
        #[arg(long)]
        all_platforms: bool,
        /// Talk plain HTTP to the registry.
        #[arg(long)]
        insecure: bool,
    },
    /// Print build information.
    Version {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
struct CommonFlags {
    /// The module's role: cluster, machine or machinepool.
    #[arg(long)]
    role: Option<String>,
    /// The contract version to check against.
    #[arg(long, default_value = "v1alpha1")]
    contract: String,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Fail on warnings too.
    #[arg(long)]
    strict: bool,
    /// Report this check's warnings as info (repeatable or comma-separated).
    #[arg(long = "allow-warning", value_delimiter = ',')]
    allow_warning: Vec<String>,
}

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

fn usage_error(err: &mut dyn Write, path: &str, message: &str) -> i32 {
    let mut cmd = Cli::command();
    cmd.build();
    let usage = match path.strip_prefix("tfcapi-lint ") {
        Some(sub) => cmd
            .find_subcommand_mut(sub)
            .map(|c| c.render_usage().to_string())
            .unwrap_or_default(),
        None => cmd.render_usage().to_string(),
    };
    let _ = writeln!(err, "{path}: {message}\n{usage}");
    exit::USAGE
}

/// Validated flags shared by both lint commands.
struct Settings {
    role: Role,
    contract: String,
    json: bool,
    strict: bool,
    allow_warning: Vec<String>,
}

fn settings(common: CommonFlags, path: &str, err: &mut dyn Write) -> Result<Settings, i32> {
    let Some(role) = common.role else {
        return Err(usage_error(err, path, "required flag \"role\" not set"));
    };
    let role: Role = role
        .parse()
        .map_err(|e: captf_contract::UnknownRole| usage_error(err, path, &e.to_string()))?;
    if !CONTRACT_VERSIONS.contains(&common.contract.as_str()) {
        return Err(usage_error(
            err,
            path,
            &format!(
                "unknown contract {:?} (known: {})",
                common.contract,
                CONTRACT_VERSIONS.join(", ")
            ),
        ));
    }
    Ok(Settings {
        role,
        contract: common.contract,
        json: common.json,
        strict: common.strict,
        allow_warning: common.allow_warning,
    })
}

/// Runs the linter with `args` (program name first).
pub fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = write!(out, "{e}");
                return exit::OK;
            }
            let sub = args
                .get(1)
                .filter(|a| ["module", "image", "version"].contains(&a.as_str()))
                .map(|s| format!("tfcapi-lint {s}"))
                .unwrap_or_else(|| "tfcapi-lint".into());
            let rendered = e.to_string();
            let message = rendered
                .split("\n\nUsage:")
                .next()
                .unwrap_or_default()
                .trim_start_matches("error: ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            return usage_error(err, &sub, &message);
        }
    };
    if let Some(v) = cli.version {
        if v == "raw" {
            let _ = writeln!(out, "{VERSION}");
        } else {
            let _ = writeln!(
                out,
                "tfcapi-lint {VERSION} (contracts: {})",
                CONTRACT_VERSIONS.join(", ")
            );
        }
        return exit::OK;
    }
    match cli.command {
        None => usage_error(err, "tfcapi-lint", "a command is required"),
        Some(Command::Version { json }) => {
            if json {
                #[derive(serde::Serialize)]
                struct Info {
                    version: &'static str,
                    commit: &'static str,
                    date: &'static str,
                    contract: &'static [&'static str],
                }
                let doc = Info {
                    version: VERSION,
                    commit: option_env!("CAPTF_COMMIT").unwrap_or("unknown"),
                    date: option_env!("CAPTF_BUILD_DATE").unwrap_or("unknown"),
                    contract: CONTRACT_VERSIONS,
                };
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&doc).unwrap_or_default()
                );
            } else {
                let _ = writeln!(
                    out,
                    "tfcapi-lint {VERSION} (contracts: {})",
                    CONTRACT_VERSIONS.join(", ")
                );
            }
            exit::OK
        }
        Some(Command::Module { module_dir, common }) => {
            let s = match settings(common, "tfcapi-lint module", err) {
                Ok(s) => s,
                Err(code) => return code,
            };
            let tree = match load::load(&DiskFs, Path::new(&module_dir)) {
                Ok(t) => t,
                Err(e) => {
                    let _ = writeln!(err, "tfcapi-lint: cannot read module: {e}");
                    return exit::UNPARSABLE;
                }
            };
            let file_set = if tree.modules[0].has_tofu {
                FileSet::OpenTofu
            } else {
                FileSet::Terraform
            };
            let report = Report {
                subject: Subject::Module(module_dir),
                contract: s.contract.clone(),
                role: s.role.to_string(),
                findings: checks::module::check(&tree, s.role),
                file_set,
            };
            emit(report, &s, out, err)
        }
        Some(Command::Image {
            image_ref,
            common,
            platform,
            all_platforms,
            insecure,
        }) => {
            let s = match settings(common, "tfcapi-lint image", err) {
                Ok(s) => s,
                Err(code) => return code,
            };
            let source = match image::Source::parse(&image_ref) {
                Ok(src) => src,
                Err(e) => return usage_error(err, "tfcapi-lint image", &e),
            };
            let opts = image::Options {
                role: s.role,
                contract: s.contract.clone(),
                platform,
                all_platforms,
                insecure,
                limits: Default::default(),
            };
            match image::lint(&source, &image_ref, &opts) {
                Ok(report) => emit(report, &s, out, err),
                Err(e) => {
                    let _ = writeln!(err, "tfcapi-lint: {e}");
                    exit::UNPARSABLE
                }
            }
        }
    }
}

fn emit(mut report: Report, s: &Settings, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    report.finish(&s.allow_warning);
    if s.json {
        match report.to_json() {
            Ok(j) => {
                let _ = out.write_all(j.as_bytes());
            }
            Err(e) => {
                let _ = writeln!(err, "tfcapi-lint: cannot encode the report: {e}");
                return exit::UNPARSABLE;
            }
        }
    } else {
        let _ = out.write_all(report.to_text().as_bytes());
    }
    report.exit_code(s.strict)
}
