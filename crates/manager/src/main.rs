//! `manager`: the CAPTF controller manager.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use captf_manager::flags::{self, Flags};
use captf_manager::leader::{self, Elector, Timing};
use captf_manager::logging;
use captf_manager::reconcile::{Config, Context, controllers};
use tokio::sync::watch;

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
    let config = match flags.kubeconfig() {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(&path).map_err(|e| e.to_string())?;
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
    // Usage errors print and exit 2, --help prints and exits 0.
    let flags = flags::parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit());
    if let Some(version) = flags.version_output() {
        println!("{version}");
        return std::process::ExitCode::SUCCESS;
    }
    let log_warnings = logging::init(flags.logging.logging_format, flags.logging.verbosity);
    for (name, value) in &flags.logged {
        tracing::info!("FLAG: --{name}={value:?}");
    }
    for warning in log_warnings.iter().chain(&flags.warnings()) {
        tracing::warn!("{warning}");
    }
    tracing::info!(
        version = flags::VERSION,
        commit = captf_manager::metrics::COMMIT,
        "starting manager"
    );
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
    config.namespace = flags.namespace();
    config.watch_filter = flags.watch_filter();
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
            manager_username: captf_manager::webhook::manager_username(&client).await,
            client: Some(client.clone()),
        };
        let tls = captf_manager::webhook::ServingTls {
            files: captf_manager::webhook::CertFiles {
                cert: flags.webhook_cert_name.clone(),
                key: flags.webhook_key_name.clone(),
            },
            options: flags.tls_options(),
        };
        let rx = stop_rx.clone();
        let serving = webhook_serving.clone();
        Some(tokio::spawn(async move {
            let served = captf_manager::webhook::serve_reporting(
                listener,
                config,
                &tls,
                &serving,
                stopped(rx),
            );
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
        let tls = flags.tls_options();
        let client = client.clone();
        async move {
            if let Err(e) = captf_manager::metrics::diagnostics::serve_with_tls(
                address,
                insecure,
                &tls,
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
}
