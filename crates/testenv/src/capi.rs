//! Cluster API's own controllers, run as processes against the test control
//! plane: the core manager, the kubeadm bootstrap provider and the kubeadm
//! control plane provider, built by `hack/test-assets.sh` from the pinned
//! `sigs.k8s.io/cluster-api` module.
//!
//! Each manager serves its webhooks on a loopback port with a certificate of
//! its own CA; the harness registers its webhook configurations (read from
//! the module's `config/webhook/manifests.yaml`) with URL client configs, and
//! points the conversion of its multi-version CRDs at its `/convert`, the way
//! cert-manager and kustomize wire them in a real installation.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::Error;
use crate::assets;
use crate::control_plane::free_port;
use crate::pki;
use crate::process::Process;

const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Field manager of the webhook configurations and CRD patches.
const MANAGER: &str = "captf-testenv";

/// One Cluster API manager binary and what it serves.
#[derive(Debug, Clone, Copy)]
pub struct Component {
    /// Process name, log file name and prefix of its webhook configurations.
    pub name: &'static str,
    binary: &'static str,
    /// File in the assets' `webhook/` folder.
    webhooks: &'static str,
    /// API groups whose CRDs this manager converts.
    groups: &'static [&'static str],
    /// Feature gates a provider needs from it.
    feature_gates: &'static str,
}

pub const CORE: Component = Component {
    name: "capi-controller-manager",
    binary: "cluster-api-manager",
    webhooks: "core.yaml",
    groups: &[
        "cluster.x-k8s.io",
        "addons.cluster.x-k8s.io",
        "runtime.cluster.x-k8s.io",
        "ipam.cluster.x-k8s.io",
    ],
    feature_gates: "MachinePool=true,ClusterTopology=true",
};

pub const KUBEADM_BOOTSTRAP: Component = Component {
    name: "capi-kubeadm-bootstrap-controller-manager",
    binary: "kubeadm-bootstrap-manager",
    webhooks: "bootstrap.yaml",
    groups: &["bootstrap.cluster.x-k8s.io"],
    feature_gates: "MachinePool=true",
};

pub const KUBEADM_CONTROL_PLANE: Component = Component {
    name: "capi-kubeadm-control-plane-controller-manager",
    binary: "kubeadm-control-plane-manager",
    webhooks: "controlplane.yaml",
    groups: &["controlplane.cluster.x-k8s.io"],
    feature_gates: "ClusterTopology=true",
};

/// Every manager the harness runs, in start order.
pub const COMPONENTS: [Component; 3] = [CORE, KUBEADM_BOOTSTRAP, KUBEADM_CONTROL_PLANE];

/// Starts `component` against the cluster of `kubeconfig`, waits until it is
/// ready (its webhook server included), then registers its webhooks and
/// conversions. Must run on a thread that outlives the process.
pub async fn start(
    component: Component,
    client: &kube::Client,
    kubeconfig: &Path,
    root: &Path,
) -> Result<Process, Error> {
    let binary = assets::capi_binary(component.binary)?;
    let certs = root.join(component.name);
    std::fs::create_dir_all(&certs)
        .map_err(|e| Error::io(format!("creating {}", certs.display()), e))?;
    let ca = pki::write_webhook_serving_pair(&certs)?;
    let (webhook_port, health_port, diagnostics_port) = (free_port()?, free_port()?, free_port()?);
    let args = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--leader-elect=false".to_owned(),
        format!("--webhook-port={webhook_port}"),
        format!("--webhook-cert-dir={}", certs.display()),
        format!("--health-addr=127.0.0.1:{health_port}"),
        format!("--diagnostics-address=127.0.0.1:{diagnostics_port}"),
        "--insecure-diagnostics=true".to_owned(),
        format!("--feature-gates={}", component.feature_gates),
    ];
    let mut process = Process::start(component.name, &binary, &args, root)?;
    wait_ready(&mut process, health_port).await?;
    let url = format!("https://127.0.0.1:{webhook_port}");
    register_webhooks(client, component, &url, &ca).await?;
    convert_through(client, component, &url, &ca).await?;
    Ok(process)
}

/// `GET /readyz` on the health port answers 200 once the manager's caches
/// and webhook server are up.
async fn wait_ready(process: &mut Process, port: u16) -> Result<(), Error> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(status) = process.exited() {
            return Err(Error::NotReady {
                what: format!("{} exited with {status}", process.name),
                logs: process.log_tail(60),
            });
        }
        if http_status(port, "/readyz").await == Some(200) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::NotReady {
                what: format!("{} not ready after {START_TIMEOUT:?}", process.name),
                logs: process.log_tail(60),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The status code of a plain HTTP/1.0 GET on loopback, `None` if the
/// server does not answer.
async fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).await.ok()?;
    let line = std::str::from_utf8(&head[..n]).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn ca_bundle(ca_pem: &str) -> ByteString {
    ByteString(ca_pem.as_bytes().to_vec())
}

/// A service client config of the manifests, turned into a URL one.
fn url_config(config: &WebhookClientConfig, base: &str, ca_pem: &str) -> WebhookClientConfig {
    let path = config
        .service
        .as_ref()
        .and_then(|s| s.path.clone())
        .unwrap_or_default();
    WebhookClientConfig {
        url: Some(format!("{base}{path}")),
        ca_bundle: Some(ca_bundle(ca_pem)),
        service: None,
    }
}

/// The documents of a webhook manifests file, as JSON values.
fn manifest_documents(path: &Path) -> Result<Vec<Value>, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value = Value::deserialize(doc).map_err(|e| Error::Crd {
            file: path.to_owned(),
            message: e.to_string(),
        })?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

fn manifest_error(path: &Path, e: serde_json::Error) -> Error {
    Error::Crd {
        file: path.to_owned(),
        message: e.to_string(),
    }
}

async fn register_webhooks(
    client: &kube::Client,
    component: Component,
    base: &str,
    ca_pem: &str,
) -> Result<(), Error> {
    let path = assets::capi_dir()?.join("webhook").join(component.webhooks);
    register_webhook_manifests(client, &path, component.name, base, ca_pem).await
}

/// Registers the webhook configurations of a `manifests.yaml` (service
/// client configs, as controller-gen writes them) for a server at `base`
/// (`https://127.0.0.1:<port>`) whose certificate `ca_pem` signed; each
/// configuration's name gets `prefix`.
pub async fn register_webhook_manifests(
    client: &kube::Client,
    path: &Path,
    prefix: &str,
    base: &str,
    ca_pem: &str,
) -> Result<(), Error> {
    let params = PatchParams::apply(MANAGER).force();
    for doc in manifest_documents(path)? {
        let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
        match kind.as_str() {
            "MutatingWebhookConfiguration" => {
                let mut c: MutatingWebhookConfiguration =
                    serde_json::from_value(doc).map_err(|e| manifest_error(path, e))?;
                let name = prefixed(prefix, c.metadata.name.as_deref());
                c.metadata.name = Some(name.clone());
                for w in c.webhooks.iter_mut().flatten() {
                    w.client_config = url_config(&w.client_config, base, ca_pem);
                }
                let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
                api.patch(&name, &params, &Patch::Apply(&c)).await?;
            }
            "ValidatingWebhookConfiguration" => {
                let mut c: ValidatingWebhookConfiguration =
                    serde_json::from_value(doc).map_err(|e| manifest_error(path, e))?;
                let name = prefixed(prefix, c.metadata.name.as_deref());
                c.metadata.name = Some(name.clone());
                for w in c.webhooks.iter_mut().flatten() {
                    w.client_config = url_config(&w.client_config, base, ca_pem);
                }
                let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
                api.patch(&name, &params, &Patch::Apply(&c)).await?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn prefixed(prefix: &str, name: Option<&str>) -> String {
    format!("{prefix}-{}", name.unwrap_or("webhook-configuration"))
}

/// Points every CRD of the component's groups that serves more than one
/// version at the component's conversion endpoint.
async fn convert_through(
    client: &kube::Client,
    component: Component,
    base: &str,
    ca_pem: &str,
) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let patch = json!({"spec": {"conversion": {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1", "v1beta1"],
            "clientConfig": {"url": format!("{base}/convert"), "caBundle": ca},
        },
    }}});
    for crd in api.list(&ListParams::default()).await? {
        if !component.groups.contains(&crd.spec.group.as_str()) || crd.spec.versions.len() < 2 {
            continue;
        }
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

/// Where the processes keep their certificates and logs.
pub fn root_dir(parent: &Path) -> PathBuf {
    parent.join("cluster-api")
}
