//! The validating webhook server: HTTPS with a certificate reloaded from
//! disk, one endpoint per kind, AdmissionReview v1 answers computed by the
//! pure rules in `captf_api::admission`.

pub mod certs;
pub mod lookups;
pub mod review;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use captf_api::names::webhooks::VALIDATING;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub use certs::{CERT_FILE, CertError, CertFiles, CertStore, KEY_FILE};

use crate::tls::{TlsError, TlsOptions};

/// Where the serving certificate is read from unless configured otherwise
/// (the controller-runtime convention cert-manager deployments rely on).
pub const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// Largest AdmissionReview accepted: two copies of the biggest object the
/// apiserver stores, with room to spare.
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// How the server runs.
#[derive(Clone)]
pub struct WebhookConfig {
    /// Folder holding the certificate and key ([`ServingTls::files`]).
    pub cert_dir: PathBuf,
    /// How often the certificate files are checked for changes.
    pub reload_interval: Duration,
    /// `system:serviceaccount:<ns>:<sa>` of the manager, when known.
    pub manager_username: Option<String>,
    /// For the rules that read the API (delete checks, the identity access
    /// review). Without it only the pure rules run.
    pub client: Option<kube::Client>,
}

/// How the server speaks TLS: which files of [`WebhookConfig::cert_dir`]
/// hold the certificate, and the protocol settings shared with the
/// diagnostics endpoint. The default reads `tls.crt` and `tls.key` with the
/// library's defaults.
#[derive(Clone, Debug, Default)]
pub struct ServingTls {
    /// `--webhook-cert-name`, `--webhook-key-name`.
    pub files: CertFiles,
    /// `--tls-min-version`, `--tls-cipher-suites`, `--tls-curve-preferences`.
    pub options: TlsOptions,
}

/// The manager's own username, which the webhooks let make the writes only
/// the manager may make: from the downward-API environment in its pod, else
/// as the API server knows the client (a SelfSubjectReview, which every
/// authenticated user may create): a manager run outside a pod, as `make
/// demo` runs it. `None`, logged, when neither says.
pub async fn manager_username(client: &kube::Client) -> Option<String> {
    if let Some(name) = manager_username_from_env() {
        return Some(name);
    }
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let reviews: kube::Api<SelfSubjectReview> = kube::Api::all(client.clone());
    match reviews
        .create(
            &kube::api::PostParams::default(),
            &SelfSubjectReview::default(),
        )
        .await
    {
        Ok(review) => review.status?.user_info?.username,
        Err(e) => {
            tracing::warn!(error = %e, "could not learn the manager's own username; the webhooks let no write through as the manager's");
            None
        }
    }
}

/// The manager's own username, from the downward-API environment.
pub fn manager_username_from_env() -> Option<String> {
    let ns = std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|s| !s.is_empty())?;
    let sa = std::env::var("SERVICE_ACCOUNT_NAME")
        .ok()
        .filter(|s| !s.is_empty())?;
    Some(format!("system:serviceaccount:{ns}:{sa}"))
}

#[derive(Clone)]
struct AppState {
    manager_username: Option<Arc<str>>,
    client: Option<kube::Client>,
}

/// The routes: one validating endpoint per kind.
pub fn router(manager_username: Option<String>, client: Option<kube::Client>) -> Router {
    let state = AppState {
        manager_username: manager_username.map(Arc::from),
        client,
    };
    let mut router = Router::new();
    for hook in VALIDATING {
        let kind = hook.kind;
        router = router.route(
            hook.path,
            post(
                move |State(state): State<AppState>, body: axum::body::Bytes| async move {
                    handle(kind, &state, &body).await
                },
            ),
        );
    }
    router
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn handle(kind: &str, state: &AppState, body: &[u8]) -> Response {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return (StatusCode::BAD_REQUEST, "body is not JSON").into_response();
    };
    let input = match review::decode(&value) {
        Ok(input) => input,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let manager = state.manager_username.as_deref();
    let mut outcome = review::verdict(kind, &input, manager).map_err(review::Problem::BadRequest);
    if let (Ok(verdict), Some(client)) = (&outcome, &state.client) {
        outcome = lookups::extend(client, kind, &input, manager, verdict.clone())
            .await
            .map_err(review::Problem::Internal);
    }
    axum::Json(review::respond(kind, &input, outcome)).into_response()
}

/// Serves HTTPS on `listener` until `shutdown` completes. The certificate
/// must be readable at start; later changes are picked up while serving.
pub async fn serve(
    listener: TcpListener,
    config: WebhookConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), WebhookError> {
    let tls = ServingTls::default();
    serve_reporting(listener, config, &tls, &AtomicBool::new(false), shutdown).await
}

/// [`serve`], with `serving` true from the moment the certificate is loaded
/// and connections are accepted until the server stops (what `/readyz`
/// reports).
pub async fn serve_reporting(
    listener: TcpListener,
    config: WebhookConfig,
    tls: &ServingTls,
    serving: &AtomicBool,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), WebhookError> {
    let store = CertStore::open_files(&config.cert_dir, tls.files.clone())?;
    let mut tls = tls
        .options
        .server_builder()?
        .with_cert_resolver(store.clone());
    tls.alpn_protocols = crate::tls::alpn_protocols();
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    let app = router(config.manager_username.clone(), config.client.clone());

    let reloader = tokio::spawn(watch_certificate(store, config.reload_interval));
    serving.store(true, Ordering::Release);
    crate::serving::serve_connections(listener, Some(acceptor), app, "webhook", shutdown).await;
    serving.store(false, Ordering::Release);
    reloader.abort();
    Ok(())
}

async fn watch_certificate(store: Arc<CertStore>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match store.reload_if_changed() {
            Ok(true) => tracing::info!("webhook serving certificate reloaded"),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "webhook serving certificate not reloaded; keeping the previous one")
            }
        }
    }
}
