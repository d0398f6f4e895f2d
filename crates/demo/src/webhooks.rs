//! This provider's validating webhooks in plain `make demo`, registered as
//! an installation registers them: the manager, a host process here, serves
//! them with a certificate of the demo's own CA, and the configurations of
//! `config/webhook/manifests.yaml` call it by URL. A newcomer's bad object
//! is refused as it would be in a management cluster.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the registered webhooks may take to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The serving certificate and port of the manager's webhook server.
pub struct DemoWebhooks {
    pub port: u16,
    pub cert_dir: PathBuf,
    ca_pem: String,
}

impl DemoWebhooks {
    /// A serving pair of a new CA under `work_dir` and a free port.
    pub fn prepare(work_dir: &Path) -> Result<DemoWebhooks, String> {
        let cert_dir = work_dir.join("webhook-certs");
        std::fs::create_dir_all(&cert_dir)
            .map_err(|e| format!("creating {}: {e}", cert_dir.display()))?;
        let ca_pem = captf_testenv::pki::write_webhook_serving_pair(&cert_dir)
            .map_err(|e| format!("the webhook serving certificate: {e}"))?;
        let addr = crate::bins::free_loopback_addr()?;
        let port = addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("no port in {addr}"))?;
        Ok(DemoWebhooks {
            port,
            cert_dir,
            ca_pem,
        })
    }

    /// The manager's flags that serve the webhooks.
    pub fn manager_args(&self) -> Vec<String> {
        vec![
            format!("--webhook-port={}", self.port),
            format!("--webhook-cert-dir={}", self.cert_dir.display()),
        ]
    }

    /// Registers the shipped webhook configurations (`manifests`) to call
    /// the manager, then waits until they refuse a TerraformCluster running
    /// its Jobs as root; returns the denial.
    pub async fn register(
        &self,
        client: &kube::Client,
        manifests: &Path,
    ) -> Result<String, String> {
        captf_testenv::capi::register_webhook_manifests(
            client,
            manifests,
            "captf",
            &format!("https://127.0.0.1:{}", self.port),
            &self.ca_pem,
        )
        .await
        .map_err(|e| format!("registering the webhooks: {e}"))?;
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            match crate::install::webhook_denial(client, "default").await {
                Ok(denial) => return Ok(denial),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }
}
