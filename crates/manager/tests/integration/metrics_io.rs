//! The diagnostics endpoint against the real apiserver: ServiceAccount
//! tokens issued by TokenRequest, checked by TokenReview and
//! SubjectAccessReview, decide who may scrape `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use captf_manager::metrics::diagnostics::{self, Security};
use captf_manager::metrics::{Metrics, serve};
use captf_testenv::{TestEnv, TestNamespace};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::{TcpListener, TcpStream};

/// How the test reaches the server.
enum Transport {
    Plain,
    /// TLS trusting only the certificate the server was given.
    Tls(CertificateDer<'static>),
}

/// One GET of `/metrics`; returns the status and body.
async fn scrape(port: u16, transport: &Transport, token: Option<&str>) -> (u16, String) {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut request = hyper::Request::get("/metrics").header("host", format!("localhost:{port}"));
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request.body(Empty::<Bytes>::new()).unwrap();
    let response = match transport {
        Transport::Plain => send(TokioIo::new(tcp), request).await,
        Transport::Tls(cert) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(cert.clone()).unwrap();
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
            let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
            let name = ServerName::try_from("localhost").unwrap();
            let tls = connector.connect(name, tcp).await.unwrap();
            send(TokioIo::new(tls), request).await
        }
    };
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

async fn send<IO>(
    io: TokioIo<IO>,
    request: hyper::Request<Empty<Bytes>>,
) -> hyper::Response<hyper::body::Incoming>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(connection);
    sender.send_request(request).await.unwrap()
}

/// A running secure server with the certificate it serves.
struct Secure {
    port: u16,
    transport: Transport,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Secure {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn start_secure(ns: &TestNamespace, metrics: Metrics) -> Secure {
    let (tls, cert) = diagnostics::self_signed_tls().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let security = Security::Secure {
        tls,
        client: ns.client(),
    };
    tokio::spawn(diagnostics::serve_on(listener, security, metrics, async {
        let _ = stopped.await;
    }));
    Secure {
        port,
        transport: Transport::Tls(cert),
        stop: Some(stop),
    }
}

/// A ServiceAccount in the test namespace and a token for it.
async fn service_account_token(ns: &TestNamespace, name: &str) -> String {
    let accounts: Api<ServiceAccount> = ns.api();
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let request = TokenRequest {
        spec: TokenRequestSpec {
            // The apiserver's own audience, which a TokenReview without
            // audiences checks against.
            audiences: vec![],
            expiration_seconds: Some(600),
            ..Default::default()
        },
        ..Default::default()
    };
    accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("TokenRequest for a ServiceAccount")
        .status
        .expect("a TokenRequest answer carries a status")
        .token
}

/// Lets `account` get `/metrics`; returns the cluster-scoped names to
/// delete afterwards.
async fn grant_metrics_reader(ns: &TestNamespace, account: &str) -> String {
    let name = format!("captf-test-metrics-reader-{}", ns.name());
    let roles: Api<ClusterRole> = Api::all(ns.client());
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec!["/metrics".into()]),
            verbs: vec!["get".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    roles.create(&PostParams::default(), &role).await.unwrap();
    let bindings: Api<ClusterRoleBinding> = Api::all(ns.client());
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(ns.name().into()),
            ..Default::default()
        }]),
    };
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    name
}

async fn revoke(ns: &TestNamespace, name: &str) {
    let dp = DeleteParams::default();
    let _ = Api::<ClusterRoleBinding>::all(ns.client())
        .delete(name, &dp)
        .await;
    let _ = Api::<ClusterRole>::all(ns.client()).delete(name, &dp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_endpoint_refuses_requests_without_a_valid_token() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let server = start_secure(&ns, Metrics::new()).await;

    let (status, body) = scrape(server.port, &server.transport, None).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = scrape(server.port, &server.transport, Some("not-a-token")).await;
    assert_eq!(status, 401, "{body}");
    assert!(!body.contains("captf_build_info"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_endpoint_forbids_a_service_account_without_the_permission() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let server = start_secure(&ns, Metrics::new()).await;
    let token = service_account_token(&ns, "no-metrics").await;

    let (status, body) = scrape(server.port, &server.transport, Some(&token)).await;
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains("captf_build_info"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_endpoint_serves_a_service_account_allowed_to_get_metrics() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let metrics = Metrics::new();
    metrics.inputs_hash_changed("TerraformCluster");
    let server = start_secure(&ns, metrics).await;
    let token = service_account_token(&ns, "metrics-reader").await;
    let grant = grant_metrics_reader(&ns, "metrics-reader").await;

    // The authorizer learns of new bindings from its watch, shortly after.
    let (status, body) = captf_testenv::eventually("the binding to take effect", 30, || async {
        let (status, body) = scrape(server.port, &server.transport, Some(&token)).await;
        (status != 403).then_some((status, body))
    })
    .await;
    revoke(&ns, &grant).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("captf_build_info{"), "{body}");
    assert!(
        body.contains(r#"captf_inputs_hash_changes_total{kind="TerraformCluster"} 1"#),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_endpoint_serves_without_a_token() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    // `serve` binds the address itself: find a free port first.
    let port = {
        let probe = TcpListener::bind("127.0.0.1:0").await.unwrap();
        probe.local_addr().unwrap().port()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(
        format!("127.0.0.1:{port}"),
        true,
        ns.client(),
        Metrics::new(),
        async {
            let _ = stopped.await;
        },
    ));

    let (status, body) = captf_testenv::eventually("the insecure server to listen", 10, || async {
        match TcpStream::connect(("127.0.0.1", port)).await {
            Ok(_) => Some(scrape(port, &Transport::Plain, None).await),
            Err(_) => None,
        }
    })
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("captf_build_info{"), "{body}");

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server stops on shutdown")
        .unwrap()
        .unwrap();
}
