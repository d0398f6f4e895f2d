//! `manager`: the CAPTF controller manager.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use captf_manager::reconcile::{Config, Context, controllers};
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

fn runner_image(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("--runner-image (or CAPTF_MANAGER_IMAGE) must be set".into());
    }
    if s.contains(char::is_whitespace) || !s.contains('/') {
        return Err(format!(
            "--runner-image {s:?} is not a normalized image reference"
        ));
    }
    Ok(s.to_owned())
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
    /// Image of the Jobs' runner init container.
    #[arg(long, env = "CAPTF_MANAGER_IMAGE", value_parser = runner_image)]
    runner_image: String,
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
    /// Log format: text or json.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    logging_format: String,
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
            ("runner-image", self.runner_image.clone()),
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
            ("logging-format", self.logging_format.clone()),
        ]
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

async fn client(flags: &Flags) -> Result<kube::Client, String> {
    let config = match &flags.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| e.to_string())?
        }
        None => kube::Config::infer().await.map_err(|e| e.to_string())?,
    };
    kube::Client::try_from(config).map_err(|e| e.to_string())
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

async fn run(flags: Flags) -> Result<(), String> {
    let health = socket(&flags.health_addr)?;
    let client = client(&flags).await?;
    let mut config = Config::new(flags.runner_image.clone());
    config.sync_period = flags.sync_period;
    config.namespace = flags.namespace.clone();
    config.runner_events = flags.runner_events;
    config.defaults.drift_interval_seconds =
        i32::try_from(flags.drift_default_interval.as_secs()).unwrap_or(i32::MAX);
    let ctx = Arc::new(Context::new(client.clone(), config));

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }));
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
        Some(tokio::spawn(async move {
            if let Err(e) = captf_manager::webhook::serve(listener, config, stopped(rx)).await {
                tracing::error!("webhook server: {e}");
            }
        }))
    } else {
        None
    };

    tracing::info!(runner_image = %flags.runner_image, "starting controllers");
    let controllers = tokio::spawn(controllers::run_all(ctx, stop_rx.clone()));

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| e.to_string())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("stopping");
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(20), async {
        let _ = controllers.await;
        let _ = health_task.await;
        if let Some(w) = webhook_task {
            let _ = w.await;
        }
    })
    .await;
    Ok(())
}
