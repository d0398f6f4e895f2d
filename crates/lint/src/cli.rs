//! The command line: parses arguments, runs a command, writes its output and
//! returns the exit code.

use crate::checks;
use crate::config::load::{self, DiskFs};
use crate::contract::{CONTRACT_VERSIONS, Role};
use crate::image;
use crate::report::{FileSet, Report, Subject, exit};
use crate::sarif;
use crate::varschema::{self, MAX_LABEL_BYTES};
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
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
    /// Print the JSON Schema of a module's user variables.
    ///
    /// One line of compact JSON: the value of an image's
    /// io.captf.variables-schema label. Exit 1 when it is over the label
    /// limit (16384 bytes).
    Schema {
        /// The module directory.
        module_dir: String,
        /// The module's role: cluster, machine or machinepool.
        #[arg(long)]
        role: Option<String>,
        /// The contract version whose inputs are not user variables.
        #[arg(long, default_value = "v1alpha1")]
        contract: String,
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
    /// Print the report as JSON (the same as `--format json`).
    #[arg(long)]
    json: bool,
    /// The report's format: text (default), json or sarif (SARIF 2.1.0).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Fail on warnings too.
    #[arg(long)]
    strict: bool,
    /// Report this check's warnings as info (repeatable or comma-separated).
    #[arg(long = "allow-warning", value_delimiter = ',')]
    allow_warning: Vec<String>,
}

/// How a lint report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
    Sarif,
}

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The subcommands, for naming the command path in usage errors.
const COMMANDS: &[&str] = &["module", "image", "schema", "version"];

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
    format: Format,
    strict: bool,
    allow_warning: Vec<String>,
}

/// The `--role` and `--contract` every module-reading command needs.
fn role_and_contract(
    role: Option<String>,
    contract: &str,
    path: &str,
    err: &mut dyn Write,
) -> Result<Role, i32> {
    let Some(role) = role else {
        return Err(usage_error(err, path, "required flag \"role\" not set"));
    };
    let role: Role = role
        .parse()
        .map_err(|e: captf_contract::UnknownRole| usage_error(err, path, &e.to_string()))?;
    if !CONTRACT_VERSIONS.contains(&contract) {
        return Err(usage_error(
            err,
            path,
            &format!(
                "unknown contract {contract:?} (known: {})",
                CONTRACT_VERSIONS.join(", ")
            ),
        ));
    }
    Ok(role)
}

/// `--json` is `--format json`; with a different `--format` it is ambiguous.
fn format(
    json: bool,
    format: Option<Format>,
    path: &str,
    err: &mut dyn Write,
) -> Result<Format, i32> {
    match (json, format) {
        (true, Some(f)) if f != Format::Json => Err(usage_error(
            err,
            path,
            "--json and --format cannot both be given with different formats (--json means --format json)",
        )),
        (true, _) => Ok(Format::Json),
        (false, f) => Ok(f.unwrap_or(Format::Text)),
    }
}

fn settings(common: CommonFlags, path: &str, err: &mut dyn Write) -> Result<Settings, i32> {
    let role = role_and_contract(common.role, &common.contract, path, err)?;
    let format = format(common.json, common.format, path, err)?;
    Ok(Settings {
        role,
        contract: common.contract,
        format,
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
                .filter(|a| COMMANDS.contains(&a.as_str()))
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
        Some(Command::Version { json }) => version(json, out),
        Some(Command::Schema {
            module_dir,
            role,
            contract,
        }) => schema(&module_dir, role, &contract, out, err),
        Some(Command::Module { module_dir, common }) => lint_module(module_dir, common, out, err),
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

fn version(json: bool, out: &mut dyn Write) -> i32 {
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

fn lint_module(
    module_dir: String,
    common: CommonFlags,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
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

fn emit(mut report: Report, s: &Settings, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    report.finish(&s.allow_warning);
    let rendered = match s.format {
        Format::Text => Ok(report.to_text()),
        Format::Json => report.to_json(),
        Format::Sarif => {
            sarif::to_sarif(&report, sarif::module_root_uri(&report.subject).as_deref())
        }
    };
    match rendered {
        Ok(text) => {
            let _ = out.write_all(text.as_bytes());
        }
        Err(e) => {
            let _ = writeln!(err, "tfcapi-lint: cannot encode the report: {e}");
            return exit::UNPARSABLE;
        }
    }
    report.exit_code(s.strict)
}

/// `tfcapi-lint schema`: prints the user variables' schema, or nothing when
/// it is over the label limit (a cut label would be worse than none).
fn schema(
    module_dir: &str,
    role: Option<String>,
    contract: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let role = match role_and_contract(role, contract, "tfcapi-lint schema", err) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let tree = match load::load(&DiskFs, Path::new(module_dir)) {
        Ok(t) => t,
        Err(e) => {
            let _ = writeln!(err, "tfcapi-lint: cannot read module: {e}");
            return exit::UNPARSABLE;
        }
    };
    let schema = match varschema::build(&tree, role) {
        Ok(s) => s.to_compact_json(),
        Err(e) => {
            let _ = writeln!(err, "tfcapi-lint: cannot build the variables schema: {e}");
            return exit::UNPARSABLE;
        }
    };
    if schema.len() > MAX_LABEL_BYTES {
        let _ = writeln!(
            err,
            "tfcapi-lint: the variables schema is {} bytes, over the label limit of {MAX_LABEL_BYTES} bytes (MAX_LABEL_BYTES); nothing printed",
            schema.len()
        );
        return exit::FINDINGS;
    }
    let _ = writeln!(out, "{schema}");
    exit::OK
}
