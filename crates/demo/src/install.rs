//! Install mode (`captf-demo --install`): the provider comes up from its
//! release, as an operator installs it — `infrastructure-components.yaml`
//! applied with server-side apply and the manager Deployment's pod run by
//! the node agent from the manager image's OCI layout — instead of the
//! manager binary started on the side.
//!
//! One host stands in for a cluster, which asks for three changes, each
//! made where a cluster's own parts would act: the serving certificate is
//! the demo's (in place of cert-manager's issuer), the webhook
//! configuration calls `https://127.0.0.1:<port>` with that CA (in place of
//! cert-manager's CA injection and a Service route: this control plane has
//! no pod network), and the Deployment runs one replica (its ports are the
//! host's).

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
/// The port the shipped manifest serves webhooks on (`--webhook-port`).
pub const WEBHOOK_PORT: u16 = 9443;
/// The health port of the shipped manifest (`--health-addr` default).
pub const HEALTH_ADDR: &str = "127.0.0.1:9440";
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

/// The components with the three single-host changes (see the module
/// comment); every other object and field as released.
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
                let path = hook["clientConfig"]["service"]["path"]
                    .as_str()
                    .ok_or_else(|| "a webhook without a service path".to_owned())?
                    .to_owned();
                hook["clientConfig"] = serde_json::json!({
                    "url": format!("https://127.0.0.1:{WEBHOOK_PORT}{path}"),
                    "caBundle": ca_bundle,
                });
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
    let root = work_dir.join("images/provider-manager");
    let digest = captf_images::layout::unpack(&release.manager_layout, &root)
        .map_err(|e| format!("unpacking {}: {e:#}", release.manager_layout.display()))?;
    env.executor().insert(
        image.clone(),
        captf_testenv::executor::LocalImage { root, digest },
    );

    let client = env.client();
    let crds_dir = captf_testenv::assets::cert_manager_crds().map_err(|e| e.to_string())?;
    let crds = captf_testenv::crds::read_dir(&crds_dir).map_err(|e| e.to_string())?;
    captf_testenv::crds::install(&client, &crds)
        .await
        .map_err(|e| format!("installing cert-manager's CRDs: {e}"))?;

    let cert_dir = work_dir.join("webhook-cert");
    std::fs::create_dir_all(&cert_dir).map_err(|e| e.to_string())?;
    let ca_pem =
        captf_testenv::pki::write_webhook_serving_pair(&cert_dir).map_err(|e| e.to_string())?;
    for object in adapt(objects, &ca_pem)? {
        kube_io::apply(&client, &object, field_manager).await?;
        if object["kind"] == "Namespace" && object["metadata"]["name"] == NAMESPACE {
            kube_io::apply(&client, &serving_secret(&cert_dir, &ca_pem)?, field_manager).await?;
        }
    }
    env.run_pods(PROVIDER_PODS);
    Ok(image)
}

/// Proof that the installed manager answers admission: a TerraformCluster
/// the schema accepts but the webhook refuses (a Job running as root),
/// sent as a dry run. Returns the webhook's denial.
pub async fn webhook_denial(client: &kube::Client) -> Result<String, String> {
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
        "metadata": {"name": "webhook-check", "namespace": NAMESPACE},
        "spec": {
            "source": {"image": "reg.example/noop-cluster:v1"},
            "identityRef": {"kind": "Secret", "name": "webhook-check"},
            "jobs": {"securityContext": {"runAsUser": 0}},
        },
    }))
    .map_err(|e| e.to_string())?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &kind.resource);
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
    fn one_replica_and_webhooks_called_on_the_host_with_the_demo_ca() {
        let objects = parse(COMPONENTS).unwrap();
        assert_eq!(
            manager_image(&objects).unwrap(),
            "reg.example/captf-manager:v1"
        );
        let adapted = adapt(objects.clone(), "PEM").unwrap();
        assert_eq!(adapted[1]["spec"]["replicas"], 1);
        let client = &adapted[2]["webhooks"][0]["clientConfig"];
        assert_eq!(client["url"], "https://127.0.0.1:9443/validate-a");
        assert_eq!(client["caBundle"], "UEVN");
        assert!(client.get("service").is_none());
        // Nothing else moved.
        assert_eq!(adapted[0], objects[0]);
        assert_eq!(
            adapted[1]["spec"]["template"],
            objects[1]["spec"]["template"]
        );
        assert!(adapt(vec![objects[0].clone()], "PEM").is_err());
    }
}
