//! The manager's command line (spec §18): every flag, its default and its
//! validation. Flags take `--name=value` and `--name value`, underscores for
//! dashes, Go durations and Go booleans, so the args of a manifest written
//! for a Go Cluster API manager start this one or are refused with a message
//! naming the flag.

#[cfg(test)]
mod tests;
mod values;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::jobs::args::RunnerEvents;
use crate::logging::Format;
use crate::reconcile::Concurrency;
use crate::tls::{MinVersion, TlsOptions};
pub use values::{CipherSuites, CurveIds, FEATURE_GATES, FeatureGates, VersionFlag, go_duration};

/// The version `--version` prints.
pub const VERSION: &str = concat!("v", env!("CARGO_PKG_VERSION"));

#[derive(Parser, Debug)]
#[command(
    name = "manager",
    about = "CAPTF controller manager",
    disable_version_flag = true,
    disable_help_subcommand = true,
    args_override_self = true
)]
pub struct Flags {
    /// Out-of-cluster kubeconfig (else $KUBECONFIG, else in-cluster).
    #[arg(long, default_value = "")]
    pub kubeconfig: String,
    /// Watch one namespace only ("" watches all).
    #[arg(long, default_value = "")]
    pub namespace: String,
    /// Reconcile only objects labeled cluster.x-k8s.io/watch-filter=<value>.
    #[arg(long, default_value = "", value_parser = values::label_value)]
    pub watch_filter: String,
    /// Image of the Jobs' runner init container. Unset in a pod: the
    /// manager container's own image (read from its pod at start).
    #[arg(long, env = "CAPTF_MANAGER_IMAGE", value_parser = crate::runner_image::validate)]
    pub runner_image: Option<String>,
    /// Serves /healthz and /readyz.
    #[arg(long, default_value = ":9440")]
    pub health_addr: String,
    /// Accepted for compatibility; Rust has no pprof, nothing is served.
    #[arg(long, default_value = "")]
    pub profiler_address: String,
    /// Webhook port; 0 serves no webhook.
    #[arg(long, default_value_t = 9443)]
    pub webhook_port: u16,
    /// Folder of the webhook serving certificate.
    #[arg(long, default_value = "/tmp/k8s-webhook-server/serving-certs/")]
    pub webhook_cert_dir: PathBuf,
    /// Certificate file in --webhook-cert-dir.
    #[arg(long, default_value = crate::webhook::CERT_FILE, value_parser = values::file_name)]
    pub webhook_cert_name: String,
    /// Key file in --webhook-cert-dir.
    #[arg(long, default_value = crate::webhook::KEY_FILE, value_parser = values::file_name)]
    pub webhook_key_name: String,
    /// Minimum resync of every object; also the orphan sweep interval.
    #[arg(long, default_value = "10m", value_parser = values::positive_duration)]
    pub sync_period: Duration,
    /// Drift interval of objects that set none.
    #[arg(long, default_value = "30m", value_parser = values::positive_duration)]
    pub drift_default_interval: Duration,
    /// Runner events: `true` (a routine refresh or drift check posts only
    /// failures, findings and changes), `all` (its progress too), `false`.
    #[arg(long, default_value = "true", value_parser = values::runner_events)]
    #[arg(action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub runner_events: RunnerEvents,
    /// Serves /metrics (HTTPS with token review unless insecure); 0 disables.
    #[arg(long, default_value = ":8443")]
    pub diagnostics_address: String,
    /// Serve /metrics over plain HTTP without authentication.
    #[arg(long, default_value = "false", value_parser = values::go_bool)]
    #[arg(action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub insecure_diagnostics: bool,
    /// Lowest TLS version served (webhooks, diagnostics): VersionTLS10 to
    /// VersionTLS13; 1.0 and 1.1 serve from TLS 1.2.
    #[arg(long, default_value = "VersionTLS12", value_parser = values::min_version)]
    pub tls_min_version: MinVersion,
    /// Comma-separated Go cipher suite names (default: the library's).
    #[arg(long, default_value = "", value_parser = values::cipher_suites)]
    pub tls_cipher_suites: CipherSuites,
    /// Comma-separated Go curve IDs: 23 P-256, 24 P-384, 29 X25519.
    #[arg(long, default_value = "", value_parser = values::curve_ids)]
    pub tls_curve_preferences: CurveIds,
    /// Reconcile only while holding the leader-election Lease.
    #[arg(long, default_value = "false", value_parser = values::go_bool)]
    #[arg(action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub leader_elect: bool,
    #[arg(long, default_value = "15s", value_parser = values::positive_duration)]
    pub leader_elect_lease_duration: Duration,
    #[arg(long, default_value = "10s", value_parser = values::positive_duration)]
    pub leader_elect_renew_deadline: Duration,
    #[arg(long, default_value = "2s", value_parser = values::positive_duration)]
    pub leader_elect_retry_period: Duration,
    /// TerraformCluster passes run at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..))]
    pub terraformcluster_concurrency: u16,
    /// TerraformMachine passes run at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..))]
    pub terraformmachine_concurrency: u16,
    /// TerraformMachineTemplate passes run at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..))]
    pub terraformmachinetemplate_concurrency: u16,
    /// TerraformMachinePool passes run at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..))]
    pub terraformmachinepool_concurrency: u16,
    /// TerraformClusterIdentity passes run at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub terraformclusteridentity_concurrency: u16,
    /// Requests per second to the apiserver, sustained (0: no limit).
    #[arg(long, default_value_t = 20.0, value_parser = values::non_negative)]
    pub kube_api_qps: f64,
    /// Requests to the apiserver in a burst above the sustained rate.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub kube_api_burst: u32,
    /// Let machine-template image inspection dial loopback, link-local,
    /// private, unique-local and CGNAT addresses.
    #[arg(long, default_value = "false", value_parser = values::go_bool)]
    #[arg(action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub image_inspect_allow_private_registries: bool,
    /// Registries (`host[:port]`) machine-template images may be inspected
    /// on; empty allows every registry passing the address check.
    #[arg(long, value_delimiter = ',', value_parser = values::registry_host)]
    pub image_inspect_allowed_registries: Vec<String>,
    /// Unfinished Jobs across the manager (0: no cap).
    #[arg(long, default_value_t = crate::reconcile::DEFAULT_MAX_ACTIVE_JOBS)]
    pub max_active_jobs: u32,
    /// Unfinished Jobs of one cluster, its machines' and pools' included,
    /// unless its `spec.maxActiveJobs` says otherwise (0: no cap).
    #[arg(long, default_value_t = captf_api::effective::DEFAULT_CLUSTER_MAX_ACTIVE_JOBS as u32,
          value_parser = clap::value_parser!(u32).range(0..=i32::MAX as i64))]
    pub cluster_max_active_jobs: u32,
    /// Complete state backup sets kept per object (0: take none; those
    /// there stay restorable).
    #[arg(long, default_value_t = crate::reconcile::DEFAULT_STATE_BACKUPS)]
    pub state_backups: u32,
    /// Keep a cluster's apply, destroy and restore apart from its machines'
    /// and pools' Jobs (the cluster write lease).
    #[arg(long, default_value = "true", value_parser = values::go_bool)]
    #[arg(action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub cluster_operation_gate: bool,
    #[command(flatten)]
    pub logging: LoggingFlags,
    /// Print the version and quit: true, raw (JSON build details) or a
    /// vX.Y.Z to print instead.
    #[arg(long, default_value = "false", value_parser = values::version_flag)]
    #[arg(action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub version: VersionFlag,
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Every flag and its value, as logged at start (filled by [`parse_from`]).
    #[arg(skip)]
    pub logged: Vec<(String, String)>,
}

/// The Kubernetes component-base logging flags. `--logging-format` and
/// `-v` act; the others are accepted and checked so manifests written for
/// Go managers start, and change nothing.
#[derive(clap::Args, Debug)]
pub struct LoggingFlags {
    /// Log format: text or json (one component-base JSON object a line).
    #[arg(long, default_value = "text", value_parser = crate::logging::Format::parse)]
    pub logging_format: Format,
    /// Log verbosity: below 4 errors, warnings and info; 4 and 5 add debug
    /// of the manager's own code; 6 and more add its trace and the
    /// libraries' debug. RUST_LOG, when set, replaces it.
    #[arg(short = 'v', long = "v", default_value = "2", value_parser = values::verbosity)]
    pub verbosity: u32,
    /// Per-file verbosity (pattern=N,...); text format only. Checked, no effect.
    #[arg(long, default_value = "", value_parser = values::vmodule)]
    pub vmodule: String,
    /// Name=bool pairs of the component-base logging gates (AllAlpha,
    /// AllBeta, ContextualLogging, LoggingAlphaOptions, LoggingBetaOptions).
    /// Checked, no effect.
    #[arg(long, value_parser = values::feature_gates)]
    pub feature_gates: Vec<FeatureGates>,
    /// Go duration between log flushes. Checked, no effect: every line is
    /// written at once.
    #[arg(long, default_value = "5s", value_parser = values::positive_duration)]
    pub log_flush_frequency: Duration,
    /// Quantity (alpha). Checked, no effect.
    #[arg(long, default_value = "0", value_parser = values::quantity)]
    pub log_json_info_buffer_size: String,
    /// Alpha. Checked, no effect: every line goes to stderr.
    #[arg(long, default_value = "false", value_parser = values::go_bool)]
    #[arg(action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub log_json_split_stream: bool,
    /// Quantity (alpha). Checked, no effect.
    #[arg(long, default_value = "0", value_parser = values::quantity)]
    pub log_text_info_buffer_size: String,
    /// Alpha. Checked, no effect: every line goes to stderr.
    #[arg(long, default_value = "false", value_parser = values::go_bool)]
    #[arg(action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub log_text_split_stream: bool,
}

#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Print the version and quit (as --version).
    Version,
}

/// Underscores for dashes in flag names (`--leader_elect=true`), as Go
/// managers normalize them; values and arguments after `--` are untouched.
pub fn normalize<I, T>(argv: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut past_flags = false;
    let mut out = Vec::new();
    for arg in argv.into_iter().map(Into::into) {
        let normalized = match arg.to_str() {
            Some("--") => {
                past_flags = true;
                None
            }
            Some(text) if !past_flags && text.starts_with("--") => {
                let (name, value) = text.split_at(text.find('=').unwrap_or(text.len()));
                Some(OsString::from(format!("{}{value}", name.replace('_', "-"))))
            }
            _ => None,
        };
        out.push(normalized.unwrap_or(arg));
    }
    out
}

/// Parses a command line (program name first), checks the flags that
/// depend on each other and records what to log.
pub fn parse_from<I, T>(argv: I) -> Result<Flags, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut cmd = Flags::command();
    let matches = cmd.try_get_matches_from_mut(normalize(argv))?;
    let mut flags = Flags::from_arg_matches(&matches)?;
    flags.logged = logged(&cmd, &matches);
    if let Err((kind, message)) = flags.check() {
        return Err(cmd.error(kind, message));
    }
    Ok(flags)
}

/// Every argument of `cmd` with the value in effect, sorted by name as Go's
/// flag sets print them. Read from the parse itself, so a flag added later
/// is logged without anyone listing it.
fn logged(cmd: &clap::Command, matches: &ArgMatches) -> Vec<(String, String)> {
    let mut lines: Vec<(String, String)> = cmd
        .get_arguments()
        .filter_map(|arg| {
            let name = arg.get_long()?.to_owned();
            let raw = matches.try_get_raw(arg.get_id().as_str()).ok().flatten();
            let value = match raw {
                Some(values) => values
                    .map(|v| v.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(","),
                // --help never reaches here set: it prints and quits.
                None if arg.get_num_args().is_some_and(|n| n.takes_values()) => String::new(),
                None => "false".to_owned(),
            };
            Some((name, value))
        })
        .collect();
    lines.sort();
    lines
}

impl Flags {
    /// Conditions between flags that no single value parser sees.
    fn check(&self) -> Result<(), (ErrorKind, String)> {
        if self.logging.logging_format != Format::Text && !self.logging.vmodule.is_empty() {
            return Err((
                ErrorKind::ArgumentConflict,
                "--vmodule is only supported with --logging-format=text".to_owned(),
            ));
        }
        self.tls_options().server_builder().map_err(|e| {
            (
                ErrorKind::ValueValidation,
                format!("--tls-min-version, --tls-cipher-suites, --tls-curve-preferences: {e}"),
            )
        })?;
        Ok(())
    }

    /// What to print instead of starting, when the command line asks for
    /// the version.
    pub fn version_output(&self) -> Option<String> {
        if self.command == Some(Command::Version) {
            return Some(format!("manager {VERSION}"));
        }
        match &self.version {
            VersionFlag::False => None,
            VersionFlag::True => Some(format!("manager {VERSION}")),
            VersionFlag::Literal(v) => Some(format!("manager {v}")),
            VersionFlag::Raw => Some(
                serde_json::json!({
                    "gitVersion": VERSION,
                    "gitCommit": crate::metrics::COMMIT,
                    "compiler": "rustc",
                    "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
                })
                .to_string(),
            ),
        }
    }

    /// Values accepted but served differently from a Go manager, to warn
    /// about once at start.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = self.tls_options().warnings();
        if !self.profiler_address.is_empty() {
            warnings.push(format!(
                "--profiler-address={}: this manager has no profiler; nothing is served there",
                self.profiler_address
            ));
        }
        warnings
    }

    pub fn concurrency(&self) -> Concurrency {
        Concurrency {
            clusters: self.terraformcluster_concurrency,
            machines: self.terraformmachine_concurrency,
            machine_templates: self.terraformmachinetemplate_concurrency,
            machine_pools: self.terraformmachinepool_concurrency,
            identities: self.terraformclusteridentity_concurrency,
        }
    }

    /// TLS settings of the webhook server and the diagnostics endpoint.
    pub fn tls_options(&self) -> TlsOptions {
        TlsOptions {
            min_version: self.tls_min_version,
            cipher_suites: self.tls_cipher_suites.0.clone(),
            curve_preferences: self.tls_curve_preferences.0.clone(),
        }
    }

    /// `--kubeconfig`, when given.
    pub fn kubeconfig(&self) -> Option<PathBuf> {
        Some(PathBuf::from(&self.kubeconfig)).filter(|p| !p.as_os_str().is_empty())
    }

    /// `--namespace`, when given ("" watches every namespace).
    pub fn namespace(&self) -> Option<String> {
        Some(self.namespace.clone()).filter(|n| !n.is_empty())
    }

    /// `--watch-filter`, when given.
    pub fn watch_filter(&self) -> Option<String> {
        Some(self.watch_filter.clone()).filter(|w| !w.is_empty())
    }

    /// The feature gates in effect: the defaults with `--feature-gates`
    /// applied in order (a gate named twice takes the last value).
    pub fn feature_gates(&self) -> BTreeMap<&'static str, bool> {
        let mut gates: BTreeMap<&'static str, bool> = FEATURE_GATES.into_iter().collect();
        for (name, enabled) in self.logging.feature_gates.iter().flat_map(|g| &g.0) {
            if let Some(&(known, _)) = FEATURE_GATES.iter().find(|(k, _)| *k == name.as_str()) {
                gates.insert(known, *enabled);
            }
        }
        gates
    }
}
