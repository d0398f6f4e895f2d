//! The accept loop the manager's HTTP servers share (webhooks, metrics):
//! each connection over TLS when an acceptor is given (the handshake
//! bounded in time), HTTP/1.1 or HTTP/2, until shutdown.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// A client that does not finish its TLS handshake in this time is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `shutdown` completes; `what` names the
/// server in logs.
pub async fn serve_connections(
    listener: TcpListener,
    acceptor: Option<TlsAcceptor>,
    app: Router,
    what: &'static str,
    shutdown: impl Future<Output = ()> + Send,
) {
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(server = what, error = %e, "accepting a connection failed");
                    continue;
                }
            },
        };
        let service = TowerToHyperService::new(app.clone());
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let builder = auto::Builder::new(TokioExecutor::new());
            let served = match acceptor {
                None => builder.serve_connection(TokioIo::new(tcp), service).await,
                Some(acceptor) => {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => builder.serve_connection(TokioIo::new(tls), service).await,
                        Ok(Err(e)) => {
                            tracing::debug!(server = what, %peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(server = what, %peer, "TLS handshake timed out");
                            return;
                        }
                    }
                }
            };
            if let Err(e) = served {
                tracing::debug!(server = what, %peer, error = %e, "connection ended with an error");
            }
        });
    }
}
