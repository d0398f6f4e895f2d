//! The diagnostics endpoint: `/metrics` over HTTPS with a certificate made
//! at start, each request authenticated and authorized by the apiserver;
//! or, when asked for, plain HTTP without checks.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::access::{self, AccessAnswer, AccessOutcome, Step, TokenOutcome, User};
use super::{CONTENT_TYPE, Metrics};
use crate::tls::{TlsError, TlsOptions};

/// The only path served.
pub const METRICS_PATH: &str = "/metrics";
/// The verb the SubjectAccessReview asks about (a scrape is a GET).
const METRICS_VERB: &str = "get";
/// Names the generated certificate is valid for, as controller-runtime does.
const SELF_SIGNED_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

#[derive(Debug, thiserror::Error)]
pub enum DiagnosticsError {
    #[error("--diagnostics-address {address:?}: {message}")]
    Address { address: String, message: String },
    #[error("--diagnostics-address {address:?}: cannot listen: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
    #[error("generating the diagnostics serving certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("diagnostics TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error(transparent)]
    TlsOptions(#[from] TlsError),
}

/// Where to listen, read from `--diagnostics-address`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// `0`: no diagnostics endpoint.
    Disabled,
    /// `:port`: every interface.
    AllInterfaces(u16),
    /// `host:port`.
    Address(String),
}

/// Reads an address in the Go form the flag documents (`:8443`,
/// `127.0.0.1:8443`, `[::1]:8443`), or `0` to turn the endpoint off.
pub fn parse_address(address: &str) -> Result<Listen, DiagnosticsError> {
    let bad = |message: &str| DiagnosticsError::Address {
        address: address.to_owned(),
        message: message.to_owned(),
    };
    if address == "0" {
        return Ok(Listen::Disabled);
    }
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| bad("expected host:port or :port"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| bad("the port must be a number from 0 to 65535"))?;
    if host.is_empty() {
        Ok(Listen::AllInterfaces(port))
    } else if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        Err(bad("an IPv6 host must be in brackets"))
    } else {
        Ok(Listen::Address(address.to_owned()))
    }
}

/// How the endpoint is served.
#[derive(Clone)]
pub enum Security {
    /// Plain HTTP, every request served.
    Insecure,
    /// HTTPS, every request reviewed by the apiserver.
    Secure {
        tls: Arc<rustls::ServerConfig>,
        client: kube::Client,
    },
}

/// A TLS configuration with a fresh self-signed certificate, and that
/// certificate (for clients that want to pin it).
pub fn self_signed_tls()
-> Result<(Arc<rustls::ServerConfig>, CertificateDer<'static>), DiagnosticsError> {
    self_signed_tls_with(&TlsOptions::default())
}

/// [`self_signed_tls`] with the `--tls-*` settings the webhook server
/// uses too.
pub fn self_signed_tls_with(
    options: &TlsOptions,
) -> Result<(Arc<rustls::ServerConfig>, CertificateDer<'static>), DiagnosticsError> {
    let names: Vec<String> = SELF_SIGNED_NAMES.iter().map(|s| s.to_string()).collect();
    let generated = rcgen::generate_simple_self_signed(names)?;
    let cert = generated.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        generated.signing_key.serialize_der(),
    ));
    let mut tls = options
        .server_builder()?
        .with_single_cert(vec![cert.clone()], key)?;
    tls.alpn_protocols = crate::tls::alpn_protocols();
    Ok((Arc::new(tls), cert))
}

async fn bind(listen: &Listen, address: &str) -> Result<TcpListener, DiagnosticsError> {
    let failed = |source| DiagnosticsError::Bind {
        address: address.to_owned(),
        source,
    };
    match listen {
        Listen::Disabled => unreachable!("a disabled endpoint is never bound"),
        // Dual-stack first, like Go; IPv4 alone where IPv6 is off.
        Listen::AllInterfaces(port) => match TcpListener::bind(("::", *port)).await {
            Ok(l) => Ok(l),
            Err(_) => TcpListener::bind(("0.0.0.0", *port)).await.map_err(failed),
        },
        Listen::Address(a) => TcpListener::bind(a.as_str()).await.map_err(failed),
    }
}

/// Serves `metrics` on `address` until `shutdown` completes: HTTPS with a
/// self-signed certificate and apiserver reviews, or plain HTTP when
/// `insecure`. Returns at once when the address is `0`.
pub async fn serve(
    address: String,
    insecure: bool,
    client: kube::Client,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), DiagnosticsError> {
    let tls = TlsOptions::default();
    serve_with_tls(address, insecure, &tls, client, metrics, shutdown).await
}

/// [`serve`], speaking TLS as `tls` (the `--tls-*` flags) says.
pub async fn serve_with_tls(
    address: String,
    insecure: bool,
    tls: &TlsOptions,
    client: kube::Client,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), DiagnosticsError> {
    let listen = parse_address(&address)?;
    if listen == Listen::Disabled {
        tracing::info!("diagnostics endpoint disabled");
        return Ok(());
    }
    let security = if insecure {
        Security::Insecure
    } else {
        let (tls, _) = self_signed_tls_with(tls)?;
        Security::Secure { tls, client }
    };
    let listener = bind(&listen, &address).await?;
    serve_on(listener, security, metrics, shutdown).await;
    Ok(())
}

/// The routes: `/metrics`, behind the reviews when a client is given.
pub fn router(metrics: Metrics, reviewer: Option<kube::Client>) -> Router {
    Router::new()
        .route(METRICS_PATH, get(scrape))
        .with_state(AppState { metrics, reviewer })
}

#[derive(Clone)]
struct AppState {
    metrics: Metrics,
    reviewer: Option<kube::Client>,
}

async fn scrape(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(client) = &state.reviewer {
        let verdict = authorize(client, &headers).await;
        if verdict != AccessAnswer::Serve {
            let status =
                StatusCode::from_u16(verdict.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let reason = status.canonical_reason().unwrap_or("refused");
            return (status, reason).into_response();
        }
    }
    (
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        state.metrics.encode(),
    )
        .into_response()
}

/// Runs the reviews [`access::next_step`] asks for.
async fn authorize(client: &kube::Client, headers: &HeaderMap) -> AccessAnswer {
    let header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let token = access::bearer_token(header);
    let mut token_review = None;
    let mut access_review = None;
    loop {
        match access::next_step(token, token_review.as_ref(), access_review) {
            Step::ReviewToken(token) => token_review = Some(review_token(client, token).await),
            Step::ReviewAccess(user) => access_review = Some(review_access(client, user).await),
            Step::Answer(verdict) => {
                if let Some(TokenOutcome::Authenticated(user)) = &token_review {
                    tracing::debug!(user = %user.username, ?verdict, "diagnostics request reviewed");
                }
                return verdict;
            }
        }
    }
}

async fn review_token(client: &kube::Client, token: &str) -> TokenOutcome {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_owned()),
            audiences: None,
        },
        ..Default::default()
    };
    let answer = match Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
    {
        Ok(answer) => answer,
        Err(e) => {
            tracing::warn!(error = %e, "TokenReview for a diagnostics request failed");
            return TokenOutcome::Failed;
        }
    };
    let status = answer.status.unwrap_or_default();
    match (status.authenticated, status.user) {
        (Some(true), Some(info)) => TokenOutcome::Authenticated(User {
            username: info.username.unwrap_or_default(),
            uid: info.uid,
            groups: info.groups.unwrap_or_default(),
            extra: info.extra.unwrap_or_default().into_iter().collect(),
        }),
        _ => TokenOutcome::Rejected,
    }
}

async fn review_access(client: &kube::Client, user: &User) -> AccessOutcome {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.username.clone()),
            uid: user.uid.clone(),
            groups: Some(user.groups.clone()),
            extra: Some(user.extra.clone().into_iter().collect()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(METRICS_PATH.to_owned()),
                verb: Some(METRICS_VERB.to_owned()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    match Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
    {
        Ok(answer) if answer.status.as_ref().is_some_and(|s| s.allowed) => AccessOutcome::Allowed,
        Ok(_) => AccessOutcome::Denied,
        Err(e) => {
            tracing::warn!(user = %user.username, error = %e, "SubjectAccessReview for a diagnostics request failed");
            AccessOutcome::Failed
        }
    }
}

/// Serves on `listener` until `shutdown` completes.
pub async fn serve_on(
    listener: TcpListener,
    security: Security,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send,
) {
    let (acceptor, reviewer) = match security {
        Security::Insecure => (None, None),
        Security::Secure { tls, client } => (Some(TlsAcceptor::from(tls)), Some(client)),
    };
    let app = router(metrics, reviewer);
    crate::serving::serve_connections(listener, acceptor, app, "diagnostics", shutdown).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_like_go_listen_addresses() {
        let cases = [
            ("0", Some(Listen::Disabled)),
            (":8443", Some(Listen::AllInterfaces(8443))),
            (":0", Some(Listen::AllInterfaces(0))),
            (
                "127.0.0.1:8443",
                Some(Listen::Address("127.0.0.1:8443".into())),
            ),
            ("[::1]:8443", Some(Listen::Address("[::1]:8443".into()))),
            (
                "localhost:9000",
                Some(Listen::Address("localhost:9000".into())),
            ),
            ("", None),
            ("8443", None),
            (":https", None),
            (":70000", None),
            ("::1:8443", None),
        ];
        for (address, want) in cases {
            match (parse_address(address), want) {
                (Ok(got), Some(want)) => assert_eq!(got, want, "{address}"),
                (Err(e), None) => assert!(e.to_string().contains("--diagnostics-address"), "{e}"),
                (got, want) => panic!("{address}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_self_signed_certificate_names_localhost() {
        let (tls, cert) = self_signed_tls().unwrap();
        assert!(tls.alpn_protocols.contains(&b"http/1.1".to_vec()));
        let der = cert.as_ref();
        // The SAN entries are stored verbatim in the DER.
        assert!(der.windows(9).any(|w| w == b"localhost"));
        assert!(der.windows(4).any(|w| w == [127, 0, 0, 1]));
    }
}
