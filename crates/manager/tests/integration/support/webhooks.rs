//! This provider's admission webhooks, served for the rest of a test binary's
//! life from a thread of their own and registered from the generated
//! `config/webhook/manifests.yaml`, so every write of the binary's tests
//! (Cluster API's included) passes through them as in an installation.

use std::sync::OnceLock;
use std::time::Duration;

use captf_manager::webhook::{self, WebhookConfig};
use captf_testenv::TestEnv;

/// Starts the server and registers the webhooks, once per cluster of the
/// test binary.
pub async fn serve_our_webhooks(env: &'static TestEnv) {
    static STARTED: [OnceLock<Result<(), String>>; 2] = [OnceLock::new(), OnceLock::new()];
    let started = tokio::task::spawn_blocking(move || {
        STARTED[env.index()].get_or_init(|| start(env)).clone()
    })
    .await
    .unwrap();
    if let Err(e) = started {
        panic!("serving this provider's webhooks: {e}");
    }
}

fn start(env: &'static TestEnv) -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("captf-webhooks".to_owned())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the webhooks");
            rt.block_on(async move {
                let client = env.client();
                let certs = match tempfile::tempdir() {
                    Ok(dir) => dir,
                    Err(e) => return drop(tx.send(Err(e.to_string()))),
                };
                let ca = match captf_testenv::pki::write_webhook_serving_pair(certs.path()) {
                    Ok(ca) => ca,
                    Err(e) => return drop(tx.send(Err(e.to_string()))),
                };
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let port = listener.local_addr().unwrap().port();
                let config = WebhookConfig {
                    cert_dir: certs.path().to_path_buf(),
                    reload_interval: Duration::from_secs(60),
                    // The controllers of the test binaries write as the
                    // harness's admin: the manager's identity here, so its
                    // set-once write of spec.providerID is let through.
                    manager_username: Some(captf_testenv::pki::ADMIN_USER.to_owned()),
                    client: Some(client.clone()),
                };
                let server = tokio::spawn(webhook::serve(listener, config, std::future::pending()));
                let registered = captf_testenv::capi::register_webhook_manifests(
                    &client,
                    &super::workspace().join("config/webhook/manifests.yaml"),
                    "captf",
                    &format!("https://127.0.0.1:{port}"),
                    &ca,
                )
                .await
                .map_err(|e| e.to_string());
                let _ = tx.send(registered);
                let _ = server.await;
                drop(certs);
            });
        })
        .map_err(|e| e.to_string())?;
    rx.recv().map_err(|e| e.to_string())?
}
