//! `manager`: the CAPTF controller manager.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use captf_manager::leader::{self, Elector, Timing};
use captf_manager::reconcile::{Concurrency, Config, Context, controllers};
use clap::Parser;
use tokio::sync::watch;

/// Go-style durations of whole units (`90s`, `10m`, `1h`).
fn duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("invalid duration {s:?}: use s, m or h")),
    };
    if secs == 0 {
        return Err(format!("duration {s:?} must be greater than zero"));
    }
    Ok(Duration::from_secs(secs))
}

#[derive(Parser, Debug)]
#[command(name = "manager", version, about = "CAPTF controller manager")]
struct Flags {
    /// Out-of-cluster kubeconfig (else $KUBECONFIG, else in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Watch one namespace only.
    #[arg(long)]
    namespace: Option<String>,
    /// Image of the Jobs' runner init container. Unset in a pod: the
    /// manager container's own image (read from its pod at start).
    #[arg(long, env = "CAPTF_MANAGER_IMAGE", value_parser = captf_manager::runner_image::validate)]
    runner_image: Option<String>,
    /// Serves /healthz and /readyz.
    #[arg(long, default_value = ":9440")]
    health_addr: String,
    /// Webhook port; 0 serves no webhook.
    #[arg(long, default_value_t = 9443)]
    webhook_port: u16,
    #[arg(long, default_value = "/tmp/k8s-webhook-server/serving-certs/")]
    webhook_cert_dir: PathBuf,
    /// Minimum resync of every object.
    #[arg(long, default_value = "10m", value_parser = duration)]
    sync_period: Duration,
    /// Drift interval of objects that set none.
    #[arg(long, default_value = "30m", value_parser = duration)]
    drift_default_interval: Duration,
    /// Runner progress events.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    runner_events: bool,
    /// Serves /metrics (HTTPS with token review unless insecure); 0 disables.
    #[arg(long, default_value = ":8443")]
    diagnostics_address: String,
    /// Serve /metrics over plain HTTP without authentication.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    insecure_diagnostics: bool,
    /// Reconcile only while holding the leader-election Lease.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    leader_elect: bool,
    #[arg(long, default_value = "15s", value_parser = duration)]
    leader_elect_lease_duration: Duration,
    #[arg(long, default_value = "10s", value_parser = duration)]
    leader_elect_renew_deadline: Duration,
    #[arg(long, default_value = "2s", value_parser = duration)]
    leader_elect_retry_period: Duration,
    /// Log format: text or json.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    logging_format: String,
    /// TerraformCluster passes run at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..))]
    terraformcluster_concurrency: u16,
    /// TerraformMachine passes run at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..))]
    terraformmachine_concurrency: u16,
    /// TerraformMachineTemplate passes run at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..))]
    terraformmachinetemplate_concurrency: u16,
    /// TerraformMachinePool passes run at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..))]
    terraformmachinepool_concurrency: u16,
    /// TerraformClusterIdentity passes run at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    terraformclusteridentity_concurrency: u16,
    /// Requests per second to the apiserver, sustained (0: no limit).
    #[arg(long, default_value_t = 20.0, value_parser = non_negative)]
    kube_api_qps: f64,
    /// Requests to the apiserver in a burst above the sustained rate.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    kube_api_burst: u32,
    /// Let machine-template image inspection dial loopback, link-local,
    /// private, unique-local and CGNAT addresses.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    image_inspect_allow_private_registries: bool,
    /// Registries (`host[:port]`) machine-template images may be inspected
    /// on; empty allows every registry passing the address check.
    #[arg(long, value_delimiter = ',', value_parser = registry_host)]
    image_inspect_allowed_registries: Vec<String>,
    /// Unfinished Jobs across the manager (0: no cap).
    #[arg(long, default_value_t = captf_manager::reconcile::DEFAULT_MAX_ACTIVE_JOBS)]
    max_active_jobs: u32,
    /// Unfinished Jobs of one cluster, its machines' and pools' included,
    /// unless its `spec.maxActiveJobs` says otherwise (0: no cap).
    #[arg(long, default_value_t = captf_api::effective::DEFAULT_CLUSTER_MAX_ACTIVE_JOBS as u32,
          value_parser = clap::value_parser!(u32).range(0..=i32::MAX as i64))]
    cluster_max_active_jobs: u32,
    /// Complete state backup sets kept per object (0: take none; those
    /// there stay restorable).
    #[arg(long, default_value_t = captf_manager::reconcile::DEFAULT_STATE_BACKUPS)]
    state_backups: u32,
    /// Keep a cluster's apply, destroy and restore apart from its machines'
    /// and pools' Jobs (the cluster write lease).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    cluster_operation_gate: bool,
}

/// A `host[:port]` entry of `--image-inspect-allowed-registries`.
fn registry_host(s: &str) -> Result<String, String> {
    let (host, port) = match s.rsplit_once(':') {
        Some((h, _)) if !h.ends_with(']') && h.contains(':') => (s, None),
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-[]:".contains(c));
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0));
    if host_ok && port_ok && !s.contains('/') {
        Ok(s.to_owned())
    } else {
        Err(format!("{s:?} is not a registry host[:port]"))
    }
}

fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a number of 0 or more")),
    }
}

impl Flags {
    /// Every flag and its value, as logged once at start.
    fn logged(&self) -> Vec<(&'static str, String)> {
        let opt = |p: &Option<PathBuf>| {
            p.as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        vec![
            ("kubeconfig", opt(&self.kubeconfig)),
            ("namespace", self.namespace.clone().unwrap_or_default()),
            (
                "runner-image",
                self.runner_image.clone().unwrap_or_default(),
            ),
            ("health-addr", self.health_addr.clone()),
            ("webhook-port", self.webhook_port.to_string()),
            (
                "webhook-cert-dir",
                self.webhook_cert_dir.display().to_string(),
            ),
            ("sync-period", format!("{}s", self.sync_period.as_secs())),
            (
                "drift-default-interval",
                format!("{}s", self.drift_default_interval.as_secs()),
            ),
            ("runner-events", self.runner_events.to_string()),
            ("diagnostics-address", self.diagnostics_address.clone()),
            (
                "insecure-diagnostics",
                self.insecure_diagnostics.to_string(),
            ),
            ("leader-elect", self.leader_elect.to_string()),
            (
                "leader-elect-lease-duration",
                format!("{}s", self.leader_elect_lease_duration.as_secs()),
            ),
            (
                "leader-elect-renew-deadline",
                format!("{}s", self.leader_elect_renew_deadline.as_secs()),
            ),
            (
                "leader-elect-retry-period",
                format!("{}s", self.leader_elect_retry_period.as_secs()),
            ),
            ("logging-format", self.logging_format.clone()),
            (
                "terraformcluster-concurrency",
                self.terraformcluster_concurrency.to_string(),
            ),
            (
                "terraformmachine-concurrency",
                self.terraformmachine_concurrency.to_string(),
            ),
            (
                "terraformmachinetemplate-concurrency",
                self.terraformmachinetemplate_concurrency.to_string(),
            ),
            (
                "terraformmachinepool-concurrency",
                self.terraformmachinepool_concurrency.to_string(),
            ),
            (
                "terraformclusteridentity-concurrency",
                self.terraformclusteridentity_concurrency.to_string(),
            ),
            ("kube-api-qps", self.kube_api_qps.to_string()),
            ("kube-api-burst", self.kube_api_burst.to_string()),
            (
                "image-inspect-allow-private-registries",
                self.image_inspect_allow_private_registries.to_string(),
            ),
            (
                "image-inspect-allowed-registries",
                self.image_inspect_allowed_registries.join(","),
            ),
            ("max-active-jobs", self.max_active_jobs.to_string()),
            (
                "cluster-max-active-jobs",
                self.cluster_max_active_jobs.to_string(),
            ),
            ("state-backups", self.state_backups.to_string()),
            (
                "cluster-operation-gate",
                self.cluster_operation_gate.to_string(),
            ),
        ]
    }

    fn concurrency(&self) -> Concurrency {
        Concurrency {
            clusters: self.terraformcluster_concurrency,
            machines: self.terraformmachine_concurrency,
            machine_templates: self.terraformmachinetemplate_concurrency,
            machine_pools: self.terraformmachinepool_concurrency,
            identities: self.terraformclusteridentity_concurrency,
        }
    }
}

fn socket(addr: &str) -> Result<SocketAddr, String> {
    let full = if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr.to_owned()
    };
    full.parse()
        .map_err(|_| format!("invalid address {addr:?}"))
}

async fn client(
    flags: &Flags,
    metrics: &captf_manager::metrics::Metrics,
) -> Result<kube::Client, String> {
    let config = match &flags.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| e.to_string())?
        }
        None => kube::Config::infer().await.map_err(|e| e.to_string())?,
    };
    captf_manager::client::build(config, metrics, flags.kube_api_qps, flags.kube_api_burst)
        .map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let flags = Flags::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    if flags.logging_format == "json" {
        subscriber.json().init();
    } else {
        subscriber.init();
    }
    for (name, value) in flags.logged() {
        tracing::info!("FLAG: --{name}={value:?}");
    }
    match run(flags).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The namespace the manager runs in (where its election Lease lives).
fn own_namespace() -> Result<String, String> {
    std::env::var("POD_NAMESPACE")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok()
        })
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| "--leader-elect needs the manager's namespace: set POD_NAMESPACE".into())
}

/// Resolves on SIGINT or SIGTERM.
async fn signalled() {
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    match term {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

async fn run(flags: Flags) -> Result<(), String> {
    let health = socket(&flags.health_addr)?;
    let timing = Timing {
        lease_duration: flags.leader_elect_lease_duration,
        renew_deadline: flags.leader_elect_renew_deadline,
        retry_period: flags.leader_elect_retry_period,
    };
    timing.validate()?;
    captf_manager::metrics::diagnostics::parse_address(&flags.diagnostics_address)
        .map_err(|e| e.to_string())?;
    let metrics = captf_manager::metrics::Metrics::new();
    let client = client(&flags, &metrics).await?;
    let elector = if flags.leader_elect {
        Some(Elector::new(
            client.clone(),
            &own_namespace()?,
            leader::identity(),
            timing,
        ))
    } else {
        None
    };
    let runner_image = captf_manager::runner_image::resolve(
        flags.runner_image.as_deref(),
        captf_manager::runner_image::own_pod(),
        &client,
    )
    .await?;
    let mut config = Config::new(runner_image);
    config.sync_period = flags.sync_period;
    config.concurrency = flags.concurrency();
    config.namespace = flags.namespace.clone();
    config.runner_events = flags.runner_events;
    config.defaults.drift_interval_seconds =
        i32::try_from(flags.drift_default_interval.as_secs()).unwrap_or(i32::MAX);
    config.max_active_jobs = flags.max_active_jobs;
    config.state_backups = flags.state_backups;
    config.cluster_operation_gate = flags.cluster_operation_gate;
    config.defaults.cluster_max_active_jobs = flags.cluster_max_active_jobs as i32;
    config.image_inspect = captf_lint::image::inspect::Policy {
        allow_private: flags.image_inspect_allow_private_registries,
        allowed_registries: flags.image_inspect_allowed_registries.clone(),
    };
    let ctx = Arc::new(Context::with_metrics(client.clone(), config, metrics));

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    // Ready once the webhook server serves (at once when there is none): a
    // pod whose admission would refuse every write must not get traffic.
    let webhook_serving = Arc::new(AtomicBool::new(flags.webhook_port == 0));
    let app = probes(webhook_serving.clone());
    let listener = tokio::net::TcpListener::bind(health)
        .await
        .map_err(|e| format!("--health-addr {health}: {e}"))?;
    tracing::info!(%health, "serving health probes");
    let health_task = tokio::spawn({
        let rx = stop_rx.clone();
        async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stopped(rx))
                .await;
        }
    });

    let webhook_task = if flags.webhook_port != 0 {
        let addr = SocketAddr::from(([0, 0, 0, 0], flags.webhook_port));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("--webhook-port {}: {e}", flags.webhook_port))?;
        let config = captf_manager::webhook::WebhookConfig {
            cert_dir: flags.webhook_cert_dir.clone(),
            reload_interval: Duration::from_secs(10),
            manager_username: captf_manager::webhook::manager_username_from_env(),
            client: Some(client.clone()),
        };
        let rx = stop_rx.clone();
        let serving = webhook_serving.clone();
        Some(tokio::spawn(async move {
            let served =
                captf_manager::webhook::serve_reporting(listener, config, &serving, stopped(rx));
            if let Err(e) = served.await {
                tracing::error!("webhook server: {e}");
            }
        }))
    } else {
        None
    };

    let metrics = ctx.metrics.clone();
    let diagnostics_task = tokio::spawn({
        let rx = stop_rx.clone();
        let address = flags.diagnostics_address.clone();
        let insecure = flags.insecure_diagnostics;
        let client = client.clone();
        async move {
            if let Err(e) = captf_manager::metrics::diagnostics::serve(
                address,
                insecure,
                client,
                metrics,
                stopped(rx),
            )
            .await
            {
                tracing::error!("diagnostics server: {e}");
            }
        }
    });

    // Health, metrics and webhooks serve on every replica; the controllers
    // only on the leader.
    let mut signal = Box::pin(signalled());
    if let Some(e) = &elector {
        tracing::info!(
            identity = e.identity(),
            lease = leader::LEASE_NAME,
            "waiting for leadership"
        );
        tokio::select! {
            _ = e.acquire() => tracing::info!(identity = e.identity(), "leading"),
            _ = &mut signal => {
                let _ = stop_tx.send(true);
                return Ok(());
            }
        }
    }
    tracing::info!(runner_image = %ctx.config.runner_image, "starting controllers");
    let controllers = tokio::spawn(controllers::run_all(ctx, stop_rx.clone()));
    let lost = async {
        match &elector {
            Some(e) => e.hold().await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        _ = &mut signal => Ok(()),
        _ = lost => Err("leader election lost: stopping".to_owned()),
    };
    tracing::info!("stopping");
    let _ = stop_tx.send(true);
    // A replica that lost the Lease stops at once: another may lead now.
    let grace = if outcome.is_ok() { 20 } else { 2 };
    let _ = tokio::time::timeout(Duration::from_secs(grace), async {
        let _ = controllers.await;
        let _ = health_task.await;
        let _ = diagnostics_task.await;
        if let Some(w) = webhook_task {
            let _ = w.await;
        }
    })
    .await;
    if let (Ok(()), Some(e)) = (&outcome, &elector)
        && let Err(err) = e.release().await
    {
        tracing::warn!(error = %err, "could not give the leader Lease up");
    }
    outcome
}

/// `/healthz` answers while the process runs; `/readyz` only while
/// `webhook_serving` holds (503 otherwise).
fn probes(webhook_serving: Arc<AtomicBool>) -> Router {
    let readyz = move || {
        let serving = webhook_serving.load(Ordering::Acquire);
        async move {
            if serving {
                (StatusCode::OK, "ok")
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "webhook server not serving",
                )
            }
        }
    };
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use tower::ServiceExt;

    async fn status_of(app: &Router, path: &str) -> StatusCode {
        let request = axum::http::Request::get(path)
            .body(axum::body::Body::empty())
            .unwrap();
        app.clone().oneshot(request).await.unwrap().status()
    }

    #[tokio::test]
    async fn readyz_fails_until_the_webhook_server_serves_and_after_it_stops() {
        let serving = Arc::new(AtomicBool::new(false));
        let app = probes(serving.clone());
        assert_eq!(status_of(&app, "/healthz").await, StatusCode::OK);
        assert_eq!(
            status_of(&app, "/readyz").await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        serving.store(true, Ordering::Release);
        assert_eq!(status_of(&app, "/readyz").await, StatusCode::OK);
        serving.store(false, Ordering::Release);
        assert_eq!(
            status_of(&app, "/readyz").await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(status_of(&app, "/healthz").await, StatusCode::OK);
    }

    /// The Deployment's `args`, as shipped in `config/manager/manager.yaml`.
    fn shipped_args() -> Vec<String> {
        let text = include_str!("../../../config/manager/manager.yaml");
        for doc in serde_yaml::Deserializer::from_str(text) {
            let v = serde_yaml::Value::deserialize(doc).unwrap();
            if v["kind"] == "Deployment" {
                let args = &v["spec"]["template"]["spec"]["containers"][0]["args"];
                return serde_yaml::from_value(args.clone()).unwrap();
            }
        }
        panic!("no Deployment in config/manager/manager.yaml");
    }

    #[test]
    fn the_shipped_manifest_args_parse() {
        let mut argv = vec!["manager".to_owned()];
        argv.extend(shipped_args());
        argv.push("--runner-image=ghcr.io/captf-io/captf-manager:dev".to_owned());
        let f = Flags::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        assert!(f.leader_elect);
        assert_eq!(f.diagnostics_address, ":8443");
        assert!(!f.insecure_diagnostics);
        assert_eq!(f.webhook_port, 9443);
    }

    #[test]
    fn backups_and_the_operation_gate_have_the_spec_defaults() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["manager", "--runner-image=r.example/runner"];
            argv.extend_from_slice(extra);
            Flags::try_parse_from(argv)
        };
        let f = parse(&[]).unwrap();
        assert_eq!((f.state_backups, f.cluster_operation_gate), (5, true));
        let f = parse(&["--state-backups=0", "--cluster-operation-gate=false"]).unwrap();
        assert_eq!((f.state_backups, f.cluster_operation_gate), (0, false));
        assert!(
            parse(&["--state-backups=-1"]).is_err(),
            "a negative count is refused"
        );
    }

    #[test]
    fn bool_flags_take_go_forms() {
        let base = ["manager", "--runner-image=r.example/runner"];
        let parse = |extra: &[&str]| {
            let mut argv: Vec<&str> = base.to_vec();
            argv.extend_from_slice(extra);
            Flags::try_parse_from(argv).unwrap()
        };
        assert!(!parse(&[]).leader_elect);
        assert!(parse(&["--leader-elect"]).leader_elect);
        assert!(parse(&["--leader-elect=true"]).leader_elect);
        assert!(!parse(&["--leader-elect=false"]).leader_elect);
        assert!(parse(&["--insecure-diagnostics"]).insecure_diagnostics);
        assert!(
            Flags::try_parse_from([
                "manager",
                "--runner-image=r.example/runner",
                "--leader-elect-retry-period=0s"
            ])
            .is_err()
        );
    }

    #[test]
    fn concurrency_and_client_limits_have_the_spec_defaults_and_bounds() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["manager", "--runner-image=r.example/runner"];
            argv.extend_from_slice(extra);
            Flags::try_parse_from(argv)
        };
        let f = parse(&[]).unwrap();
        assert_eq!(f.concurrency(), Concurrency::default());
        assert_eq!(
            (f.concurrency().machine_pools, f.concurrency().identities),
            (10, 4)
        );
        assert_eq!((f.kube_api_qps, f.kube_api_burst), (20.0, 30));
        let f = parse(&[
            "--terraformmachinepool-concurrency=50",
            "--terraformcluster-concurrency=3",
            "--kube-api-qps=0",
        ])
        .unwrap();
        assert_eq!(f.concurrency().machine_pools, 50);
        assert_eq!(f.concurrency().clusters, 3);
        assert_eq!(f.kube_api_qps, 0.0);
        for bad in [
            "--terraformmachinepool-concurrency=0",
            "--terraformclusteridentity-concurrency=0",
            "--kube-api-qps=-1",
            "--kube-api-burst=0",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad} is refused");
        }
    }
}
