//! Install mode (`captf-demo --install`): the provider comes up from its
//! release, as an operator installs it — `infrastructure-components.yaml`
//! applied with server-side apply and the manager Deployment's pod run on
//! the real node from the manager image's OCI layout, under the shipped
//! security context, probes and RBAC, its webhooks called through their
//! Service — instead of the manager binary started on the side.
//!
//! The demo has no cert-manager, which asks for two changes where its parts
//! would act: the serving certificate is the demo's (in place of
//! cert-manager's issuer) and the webhook configurations carry its CA (in
//! place of cert-manager's CA injection). And the Deployment runs one
//! replica: one node, where a second would only wait for the leader lease.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;
use serde_json::Value;

use crate::kube_io;

/// The release an install starts from.
#[derive(Debug, Clone)]
pub struct Release {
    /// `out/infrastructure-components.yaml`.
    pub components: PathBuf,
    /// The manager image's OCI layout (`out/images/captf-manager`).
    pub manager_layout: PathBuf,
}

/// The Deployment and container of the manager, as the components name them.
pub const DEPLOYMENT: &str = "captf-controller-manager";
pub const NAMESPACE: &str = "captf-system";
/// The Secret the Deployment mounts, which cert-manager would issue.
pub const SERVING_SECRET: &str = "captf-webhook-service-cert";
/// The Service the webhook configurations call.
pub const WEBHOOK_SERVICE: &str = "captf-webhook-service";
/// The provider's pods, by the label clusterctl and Cluster API use.
pub const PROVIDER_PODS: &str = "cluster.x-k8s.io/provider=infrastructure-terraform";

/// The documents of a components file.
pub fn parse(text: &str) -> Result<Vec<Value>, String> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).map_err(|e| format!("the components are not YAML: {e}")))
        .filter(|v| !matches!(v, Ok(Value::Null)))
        .collect()
}

fn is(object: &Value, kind: &str, name: &str) -> bool {
    object["kind"] == kind && object["metadata"]["name"] == name
}

/// The manager container's image in the components.
pub fn manager_image(objects: &[Value]) -> Result<String, String> {
    objects
        .iter()
        .find(|o| is(o, "Deployment", DEPLOYMENT))
        .and_then(|d| d["spec"]["template"]["spec"]["containers"].as_array())
        .and_then(|cs| cs.iter().find(|c| c["name"] == "manager"))
        .and_then(|c| c["image"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| {
            format!("the components have no Deployment {DEPLOYMENT} with a manager container")
        })
}

/// The components with the demo's changes (see the module comment); every
/// other object and field as released.
pub fn adapt(mut objects: Vec<Value>, ca_pem: &str) -> Result<Vec<Value>, String> {
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let mut seen_webhooks = false;
    for object in &mut objects {
        if is(object, "Deployment", DEPLOYMENT) {
            object["spec"]["replicas"] = 1.into();
        }
        if object["kind"] == "ValidatingWebhookConfiguration" {
            seen_webhooks = true;
            for hook in object["webhooks"].as_array_mut().into_iter().flatten() {
                if hook["clientConfig"]["service"].is_null() {
                    return Err("a webhook without a service to call".to_owned());
                }
                hook["clientConfig"]["caBundle"] = ca_bundle.clone().into();
            }
        }
    }
    if !seen_webhooks {
        return Err("the components have no ValidatingWebhookConfiguration".into());
    }
    Ok(objects)
}

/// The serving certificate Secret cert-manager would have issued.
fn serving_secret(cert_dir: &Path, ca_pem: &str) -> Result<Value, String> {
    let read = |name: &str| {
        std::fs::read_to_string(cert_dir.join(name))
            .map_err(|e| format!("reading {}: {e}", cert_dir.join(name).display()))
    };
    Ok(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SERVING_SECRET, "namespace": NAMESPACE},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": read("tls.crt")?, "tls.key": read("tls.key")?, "ca.crt": ca_pem},
    }))
}

/// Installs the provider from `release` and starts running its pods.
/// Returns the manager image (the Jobs' runner comes from it too).
pub async fn install(
    env: &'static captf_testenv::TestEnv,
    release: &Release,
    work_dir: &Path,
    field_manager: &str,
) -> Result<String, String> {
    let text = std::fs::read_to_string(&release.components)
        .map_err(|e| format!("reading {}: {e}", release.components.display()))?;
    let objects = parse(&text)?;
    let image = manager_image(&objects)?;
    let node = env.try_real_node().await?;
    node.import_layout(&release.manager_layout, &image)?;

    let client = env.client();
    let crds_dir = captf_testenv::assets::cert_manager_crds().map_err(|e| e.to_string())?;
    let crds = captf_testenv::crds::read_dir(&crds_dir).map_err(|e| e.to_string())?;
    captf_testenv::crds::install(&client, &crds)
        .await
        .map_err(|e| format!("installing cert-manager's CRDs: {e}"))?;

    let cert_dir = work_dir.join("webhook-cert");
    std::fs::create_dir_all(&cert_dir).map_err(|e| e.to_string())?;
    let service_names = [
        format!("{WEBHOOK_SERVICE}.{NAMESPACE}.svc"),
        format!("{WEBHOOK_SERVICE}.{NAMESPACE}.svc.cluster.local"),
    ];
    let ca_pem = captf_testenv::pki::write_serving_pair_for(&cert_dir, &service_names)
        .map_err(|e| e.to_string())?;
    for object in adapt(objects, &ca_pem)? {
        kube_io::apply(&client, &object, field_manager).await?;
        if object["kind"] == "Namespace" && object["metadata"]["name"] == NAMESPACE {
            kube_io::apply(&client, &serving_secret(&cert_dir, &ca_pem)?, field_manager).await?;
        }
    }
    Ok(image)
}

/// The manager's pod once the kubelet calls it Ready (its readiness probe
/// passing): its name and its node's. Fails with the pod's state when it
/// is not Ready within `timeout`.
pub async fn wait_pod_ready(
    client: &kube::Client,
    timeout: std::time::Duration,
) -> Result<(String, String), String> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, ListParams};
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let selector = ListParams::default().labels(PROVIDER_PODS);
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let listed = pods
            .list(&selector)
            .await
            .map_err(|e| format!("listing the manager pods: {e}"))?;
        let ready = listed.items.iter().find(|p| pod_ready(p));
        if let Some(pod) = ready {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
            return Ok((name, node.unwrap_or_default()));
        }
        if std::time::Instant::now() > deadline {
            let states: Vec<String> = listed.items.iter().map(pod_state).collect();
            return Err(format!(
                "no manager pod Ready within {}s: {}",
                timeout.as_secs(),
                states.join("; ")
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

fn pod_ready(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A pod's phase and its containers' waiting or terminated reasons.
fn pod_state(pod: &k8s_openapi::api::core::v1::Pod) -> String {
    let status = pod.status.as_ref();
    let reasons: Vec<String> = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let state = c.state.as_ref()?;
            let waiting = state.waiting.as_ref().and_then(|w| {
                let message = w.message.as_deref().unwrap_or_default();
                w.reason.clone().map(|r| format!("{r} {message}"))
            });
            let terminated = state.terminated.as_ref().and_then(|t| t.reason.clone());
            waiting.or(terminated).map(|r| format!("{}: {r}", c.name))
        })
        .collect();
    format!(
        "{} {} {}",
        pod.metadata.name.as_deref().unwrap_or_default(),
        status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending"),
        reasons.join(", ")
    )
}

/// Proof that the manager answers admission: a TerraformCluster the schema
/// accepts but the webhook refuses (a Job running as root), sent as a dry
/// run in `namespace`. Returns the webhook's denial.
pub async fn webhook_denial(client: &kube::Client, namespace: &str) -> Result<String, String> {
    use kube::api::{Api, DynamicObject, PostParams};
    let kind = kube_io::resolve(
        client,
        "infrastructure.cluster.x-k8s.io/v1alpha1",
        "TerraformCluster",
    )
    .await?;
    let object: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "TerraformCluster",
        "metadata": {"name": "webhook-check", "namespace": namespace},
        "spec": {
            "source": {"image": "reg.example/noop-cluster:v1"},
            "identityRef": {"kind": "Secret", "name": "webhook-check"},
            "jobs": {"securityContext": {"runAsUser": 0}},
        },
    }))
    .map_err(|e| e.to_string())?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &kind.resource);
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api.create(&params, &object).await {
        Err(kube::Error::Api(status)) if status.message.contains("denied the request") => {
            Ok(status.message)
        }
        Err(e) => Err(format!("the webhook check failed: {e}")),
        Ok(_) => Err(
            "a TerraformCluster running its Jobs as root was admitted: the webhook did not answer"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPONENTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: captf-system}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: captf-controller-manager, namespace: captf-system}
spec:
  replicas: 2
  template:
    spec:
      containers:
      - {name: manager, image: reg.example/captf-manager:v1}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: captf-validating-webhook-configuration}
webhooks:
- name: a.example
  clientConfig:
    service: {name: captf-webhook-service, namespace: captf-system, path: /validate-a}
"#;

    #[test]
    fn one_replica_and_webhooks_called_through_their_service_with_the_demo_ca() {
        let objects = parse(COMPONENTS).unwrap();
        assert_eq!(
            manager_image(&objects).unwrap(),
            "reg.example/captf-manager:v1"
        );
        let adapted = adapt(objects.clone(), "PEM").unwrap();
        assert_eq!(adapted[1]["spec"]["replicas"], 1);
        let client = &adapted[2]["webhooks"][0]["clientConfig"];
        assert_eq!(client["caBundle"], "UEVN");
        assert_eq!(
            client["service"],
            objects[2]["webhooks"][0]["clientConfig"]["service"]
        );
        assert!(client.get("url").is_none());
        // Nothing else moved.
        assert_eq!(adapted[0], objects[0]);
        assert_eq!(
            adapted[1]["spec"]["template"],
            objects[1]["spec"]["template"]
        );
        assert!(adapt(vec![objects[0].clone()], "PEM").is_err());
        let mut no_service = objects.clone();
        no_service[2]["webhooks"][0]["clientConfig"] = serde_json::json!({"url": "https://x"});
        assert!(adapt(no_service, "PEM").is_err());
    }
}
