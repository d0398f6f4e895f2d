//! The command line of the `runner` binary. The parser is public so the
//! manager's Job builder can check the arguments it renders against it.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::op::Op;

/// Default of `--stop-timeout` when the Job passes none.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// Default of `--lock-timeout`.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(300);
/// Default of `--result`: the container's termination-message file.
pub const DEFAULT_RESULT_PATH: &str = "/dev/termination-log";

/// `runner [global flags] <command>`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "runner",
    about = "Runs one Terraform/OpenTofu operation inside a CAPTF Job",
    disable_version_flag = true,
    disable_help_subcommand = true,
    arg_required_else_help = true,
    args_override_self = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalFlags,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The Kubernetes component-base logging and version flags. The runner logs
/// plain lines, so most of them are accepted for compatibility and checked
/// for validity only.
#[derive(Debug, Clone, Args)]
pub struct GlobalFlags {
    /// Comma-separated key=bool pairs of feature gates.
    #[arg(long, global = true, value_parser = parse_feature_gates)]
    pub feature_gates: Option<FeatureGates>,
    /// Maximum time between log flushes.
    #[arg(long, global = true, default_value = "5s", value_parser = parse_go_duration)]
    pub log_flush_frequency: Duration,
    #[arg(long, global = true, default_value_t = 0)]
    pub log_json_info_buffer_size: u64,
    #[arg(long, global = true, default_value_t = false, num_args = 0..=1,
          default_missing_value = "true", require_equals = true, action = clap::ArgAction::Set)]
    pub log_json_split_stream: bool,
    #[arg(long, global = true, default_value_t = 0)]
    pub log_text_info_buffer_size: u64,
    #[arg(long, global = true, default_value_t = false, num_args = 0..=1,
          default_missing_value = "true", require_equals = true, action = clap::ArgAction::Set)]
    pub log_text_split_stream: bool,
    /// Log format: text or json.
    #[arg(long, global = true, default_value = "text", value_parser = ["text", "json"])]
    pub logging_format: String,
    /// Log verbosity.
    #[arg(short = 'v', long = "v", global = true, default_value_t = 0)]
    pub verbosity: u32,
    /// Per-file verbosity (pattern=N,...).
    #[arg(long, global = true, value_parser = parse_vmodule)]
    pub vmodule: Option<String>,
    /// Print version information and quit: `true`, `raw`, or a version to report.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true,
          value_parser = parse_version_flag)]
    pub version: Option<VersionFlag>,
}

/// Feature gates given with `--feature-gates`, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureGates(pub Vec<(String, bool)>);

/// The value of `--version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionFlag {
    False,
    True,
    Raw,
    /// `vX.Y.Z`: report this version instead of the built-in one.
    Literal(String),
}

#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Copy this binary to <dest> with mode 0755.
    Copy {
        /// Destination path.
        #[arg(num_args = 0..)]
        dest: Vec<String>,
    },
    /// Run one operation. A repeated single-value flag keeps its last value,
    /// as Go's flag parsing does.
    #[command(args_override_self = true)]
    Run(Box<RunArgs>),
    /// Print the name and build information.
    Version,
}

/// The flags of `runner run`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct RunArgs {
    /// Operation: apply, destroy, refresh, drift, restore or plan.
    #[arg(long, value_parser = parse_op)]
    pub op: Op,
    /// Runtime command, one element per flag.
    #[arg(long = "bin", action = clap::ArgAction::Append, default_value = "/captf/runtime")]
    pub bin: Vec<String>,
    /// Image reference, echoed in the result.
    #[arg(long, default_value = "")]
    pub image: String,
    #[arg(long, default_value = "/captf/module")]
    pub module: String,
    #[arg(long, default_value = "/captf/providers")]
    pub providers: String,
    #[arg(long, default_value = "/captf/work")]
    pub workdir: String,
    #[arg(long, default_value = "/captf/config")]
    pub config: String,
    /// One `init -backend-config` value per flag (never split on commas).
    #[arg(long = "backend-config", action = clap::ArgAction::Append)]
    pub backend_config: Vec<String>,
    #[arg(long, default_value = "5m0s", value_parser = parse_go_duration)]
    pub lock_timeout: Duration,
    #[arg(long, default_value = "1m0s", value_parser = parse_go_duration)]
    pub stop_timeout: Duration,
    /// Stale lock ID to release right after init.
    #[arg(long, default_value = "")]
    pub force_unlock: String,
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true",
          require_equals = true, action = clap::ArgAction::Set, value_parser = parse_go_bool)]
    pub guard_deletes: bool,
    #[arg(long, default_value = "")]
    pub inputs_hash: String,
    #[arg(long, default_value = "")]
    pub allow_deletes_hash: String,
    #[arg(long, default_value = "")]
    pub expect_plan: String,
    #[arg(long, default_value = "/captf/plan-key/key")]
    pub plan_key_file: String,
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub restore_chunks: i64,
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub restore_resources: i64,
    /// `<apiVersion>/<kind>/<namespace>/<name>/<uid>`; no events when empty.
    #[arg(long, default_value = "")]
    pub event_object: String,
    #[arg(long, default_value = "")]
    pub job_name: String,
    /// Post only what a routine run must not hide: a failure or an
    /// interruption, a plan with changes, resources changed.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true",
          require_equals = true, action = clap::ArgAction::Set, value_parser = parse_go_bool)]
    pub quiet_events: bool,
    #[arg(long, default_value = DEFAULT_RESULT_PATH)]
    pub result: String,
}

impl RunArgs {
    /// Whether an apply plans first and inspects the plan.
    pub fn plans_before_apply(&self) -> bool {
        self.op == Op::Apply && (self.guard_deletes || !self.expect_plan.is_empty())
    }

    /// The lock timeout in whole seconds, as the runtime's flag wants it.
    pub fn lock_timeout_secs(&self) -> u64 {
        self.lock_timeout.as_secs()
    }
}

/// Parses the whole command line (`argv[0]` first).
pub fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    Cli::try_parse_from(args)
}

/// Parses the arguments that follow `runner run` (as a Job's `args` carry
/// them, without the program name or the subcommand).
pub fn parse_run_args<I, T>(args: I) -> Result<RunArgs, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let argv: Vec<std::ffi::OsString> = ["runner".into(), "run".into()]
        .into_iter()
        .chain(args.into_iter().map(Into::into))
        .collect();
    match Cli::try_parse_from(argv)?.command {
        Some(Command::Run(run)) => Ok(*run),
        _ => unreachable!("the argument vector starts with the run subcommand"),
    }
}

/// Finds the `--result` value of a `run` command line that failed to parse,
/// so the flag error can still be reported where the manager looks.
pub fn result_path_of_bad_args(args: &[String]) -> Option<String> {
    let run_at = args.iter().position(|a| a == "run")?;
    let mut path = None;
    let mut it = args[run_at + 1..].iter();
    while let Some(arg) = it.next() {
        if let Some(v) = arg.strip_prefix("--result=") {
            path = Some(v.to_owned());
        } else if arg == "--result" {
            path = it.next().cloned();
        }
    }
    Some(path.unwrap_or_else(|| DEFAULT_RESULT_PATH.to_owned()))
}

fn parse_op(s: &str) -> Result<Op, String> {
    s.parse()
}

fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("invalid boolean {s:?}")),
    }
}

fn parse_version_flag(s: &str) -> Result<VersionFlag, String> {
    match s {
        "raw" => Ok(VersionFlag::Raw),
        _ if s.starts_with('v') && s.len() > 1 => Ok(VersionFlag::Literal(s.to_owned())),
        _ => parse_go_bool(s)
            .map(|b| {
                if b {
                    VersionFlag::True
                } else {
                    VersionFlag::False
                }
            })
            .map_err(|_| format!("invalid version flag {s:?}: want true, false, raw or vX.Y.Z")),
    }
}

const FEATURE_GATES: [&str; 5] = [
    "AllAlpha",
    "AllBeta",
    "ContextualLogging",
    "LoggingAlphaOptions",
    "LoggingBetaOptions",
];

fn parse_feature_gates(s: &str) -> Result<FeatureGates, String> {
    let mut gates = Vec::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("missing bool value for feature gate {pair:?}"))?;
        if !FEATURE_GATES.contains(&name) {
            return Err(format!("unrecognized feature gate: {name}"));
        }
        let value = parse_go_bool(value)
            .map_err(|_| format!("invalid value of feature gate {name}: {value:?}"))?;
        gates.push((name.to_owned(), value));
    }
    Ok(FeatureGates(gates))
}

fn parse_vmodule(s: &str) -> Result<String, String> {
    for pair in s.split(',').filter(|p| !p.is_empty()) {
        let (pattern, level) = pair
            .split_once('=')
            .ok_or_else(|| format!("vmodule entry {pair:?} is not pattern=N"))?;
        if pattern.is_empty() || level.parse::<u32>().is_err() {
            return Err(format!("vmodule entry {pair:?} is not pattern=N"));
        }
    }
    Ok(s.to_owned())
}

/// Parses a Go `time.ParseDuration` string (`300s`, `5m0s`, `1h30m`, `1.5s`).
/// Negative durations are refused: a timeout below zero means nothing.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?}");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    if rest.starts_with('-') {
        return Err(format!("negative duration {s:?}"));
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total_nanos: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit_nanos = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total_nanos += value * unit_nanos;
    }
    if !total_nanos.is_finite() || total_nanos > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(Duration::from_nanos(total_nanos.round() as u64))
}
