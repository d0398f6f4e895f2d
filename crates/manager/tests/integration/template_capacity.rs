//! A TerraformMachineTemplate's scale-from-zero status, resolved by the
//! manager's template controller against the real apiserver from the labels
//! of an image served by a registry on the loopback interface (the
//! distribution API, no layers pulled), and from `spec.capacity`.

use crate::support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

use captf_api::templates::TerraformMachineTemplate;
use captf_testenv::{TestEnv, TestNamespace, eventually};
use kube::api::PostParams;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::touch::{passes_of, wait_for_passes};
use support::*;

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A registry serving one image, `noop-machine:v1`, whose config carries
/// `labels`, to clients sending `authorization` when one is given; returns
/// its port and counts the requests it answered.
fn registry(
    labels: Value,
    authorization: Option<String>,
) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Labels": labels, "User": "65532"},
        "rootfs": {"type": "layers", "diff_ids": []},
    }))
    .unwrap();
    let config_digest = digest(&config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": config.len()},
        "layers": [],
    }))
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                continue;
            }
            let mut authorized = authorization.is_none();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = h.trim().split_once(':')
                    && name.eq_ignore_ascii_case("authorization")
                    && Some(value.trim()) == authorization.as_deref()
                {
                    authorized = true;
                }
            }
            if !authorized {
                let _ = stream.write_all(
                    b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                continue;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let (status, ctype, body): (&str, &str, &[u8]) = match path.as_str() {
                "/v2/noop-machine/manifests/v1" => (
                    "200 OK",
                    "application/vnd.oci.image.manifest.v1+json",
                    &manifest,
                ),
                p if p == format!("/v2/noop-machine/blobs/{config_digest}") => {
                    ("200 OK", "application/octet-stream", &config)
                }
                _ => ("404 Not Found", "text/plain", b"not found"),
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body);
        }
    });
    (port, served)
}

fn labels() -> Value {
    json!({
        "io.captf.capacity": r#"{"cpu":"4","memory":"16Gi"}"#,
        "io.captf.node-info": r#"{"architecture":"amd64","operatingSystem":"linux"}"#,
        "io.captf.variables-schema": r#"{"type":"object","additionalProperties":false,"properties":{"size":{"type":"string"}},"required":["size"]}"#,
    })
}

async fn template(ns: &TestNamespace, name: &str, port: u16, capacity: Option<Value>) {
    template_with(ns, name, port, capacity, None).await;
}

async fn template_with(
    ns: &TestNamespace,
    name: &str,
    port: u16,
    capacity: Option<Value>,
    pull_secret: Option<&str>,
) {
    let mut spec = json!({"template": {"spec": {
        "source": {"image": format!("127.0.0.1:{port}/noop-machine:v1")},
        "variables": {"size": "m"},
    }}});
    if let Some(c) = capacity {
        spec["capacity"] = c;
    }
    if let Some(s) = pull_secret {
        spec["template"]["spec"]["jobs"] = json!({"imagePullSecrets": [{"name": s}]});
    }
    let t: TerraformMachineTemplate = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachineTemplate",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap();
    ns.api::<TerraformMachineTemplate>()
        .create(&PostParams::default(), &t)
        .await
        .unwrap();
}

fn condition(t: &TerraformMachineTemplate, type_: &str) -> Option<(String, String, String)> {
    t.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn resolved(ns: &TestNamespace, name: &str) -> TerraformMachineTemplate {
    let api = ns.api::<TerraformMachineTemplate>();
    eventually(&format!("{name} resolved"), 60, || async {
        let t = api.get(name).await.ok()?;
        condition(&t, "CapacityResolved").map(|_| t)
    })
    .await
}

fn capacity(t: &TerraformMachineTemplate) -> BTreeMap<String, String> {
    t.status
        .as_ref()
        .and_then(|s| s.capacity.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|(k, q)| (k, q.0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_comes_from_the_image_labels_or_from_spec_capacity() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let (port, served) = registry(labels(), None);
    let manager = start_manager_with(ns.client(), ns.name(), |c| {
        // The registry listens on the loopback interface.
        c.image_inspect.allow_private = true;
    });
    template(&ns, "from-image", port, None).await;
    template(&ns, "from-spec", port, Some(json!({"cpu": "2"}))).await;

    let t = resolved(&ns, "from-image").await;
    let (status, reason, _) = condition(&t, "CapacityResolved").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "CapacityResolved")
    );
    assert_eq!(
        capacity(&t),
        BTreeMap::from([("cpu".into(), "4".into()), ("memory".into(), "16Gi".into())])
    );
    let st = t.status.as_ref().unwrap();
    let ni = serde_json::to_value(&st.node_info).unwrap();
    assert_eq!(
        ni,
        json!({"architecture": "amd64", "operatingSystem": "linux"})
    );
    let note = expect_event(
        &ns,
        "CapacityResolved",
        "Normal",
        "TerraformMachineTemplate",
        "from-image",
    )
    .await;
    assert!(note.contains("16Gi"), "{note}");
    let source = serde_json::to_value(&st.capacity_source).unwrap();
    assert_eq!(
        source,
        json!({"source": "Image", "image": format!("127.0.0.1:{port}/noop-machine:v1")})
    );
    assert_eq!(
        condition(&t, "VariablesValid").map(|c| c.1).as_deref(),
        Some("VariablesValid")
    );

    let t = resolved(&ns, "from-spec").await;
    assert_eq!(capacity(&t), BTreeMap::from([("cpu".into(), "2".into())]));
    let source = serde_json::to_value(&t.status.as_ref().unwrap().capacity_source).unwrap();
    assert_eq!(source["source"], "Spec");

    // Resolved once per image: a settled template reads the registry no
    // more (two manifest and two config reads so far).
    // A pass of the settled template, woken by a change outside its
    // spec, reads nothing.
    let after = served.load(std::sync::atomic::Ordering::SeqCst);
    let key = format!("TerraformMachineTemplate/{}/from-image", ns.name());
    let before = passes_of(&manager, &key);
    ns.api::<TerraformMachineTemplate>()
        .patch(
            "from-image",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"example.com/touched": "1"}}})),
        )
        .await
        .unwrap();
    wait_for_passes(&manager, &key, before, 1).await;
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), after);
    assert_eq!(after, 4);

    // Variables from a source: checked once the source exists.
    let t: TerraformMachineTemplate = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachineTemplate",
        "metadata": {"name": "from-source"},
        "spec": {"template": {"spec": {
            "source": {"image": format!("127.0.0.1:{port}/noop-machine:v1")},
            "variablesFrom": [{"configMapRef": {"name": "sizes"}}],
        }}},
    }))
    .unwrap();
    ns.api::<TerraformMachineTemplate>()
        .create(&PostParams::default(), &t)
        .await
        .unwrap();
    let t = resolved(&ns, "from-source").await;
    assert_eq!(
        condition(&t, "VariablesValid").map(|c| c.1).as_deref(),
        Some("VariablesSourcePending")
    );
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "sizes", "labels": {"captf.io/variables": "true"}},
        "data": {"size": "l"},
    }))
    .unwrap();
    ns.api::<k8s_openapi::api::core::v1::ConfigMap>()
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let api = ns.api::<TerraformMachineTemplate>();
    eventually("the source's variables checked", 60, || async {
        let t = api.get("from-source").await.ok()?;
        (condition(&t, "VariablesValid")?.1 == "VariablesValid").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_registry_is_refused_without_the_flag() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let (port, served) = registry(labels(), None);
    let _manager = start_manager(ns.client(), ns.name());
    template(&ns, "refused", port, None).await;
    let t = resolved(&ns, "refused").await;
    let (status, reason, message) = condition(&t, "CapacityResolved").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ImageInspectFailed")
    );
    assert!(message.contains("private address"), "{message}");
    let note = expect_event(
        &ns,
        "ImageInspectFailed",
        "Warning",
        "TerraformMachineTemplate",
        "refused",
    )
    .await;
    assert!(note.contains("private address"), "{note}");
    assert_eq!(
        condition(&t, "VariablesValid").map(|c| c.1).as_deref(),
        Some("VariablesSchemaUnavailable")
    );
    assert_eq!(
        served.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "refused at dial time: no request reached the registry"
    );
    assert!(capacity(&t).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_registry_is_read_with_the_templates_own_pull_secret_only() {
    use base64::Engine;
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let basic = base64::engine::general_purpose::STANDARD.encode("robot:s3cret");
    let (port, _) = registry(labels(), Some(format!("Basic {basic}")));
    let config = json!({"auths": {format!("127.0.0.1:{port}"): {"auth": basic}}});
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "regcred"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": config.to_string()},
    }))
    .unwrap();
    ns.api::<k8s_openapi::api::core::v1::Secret>()
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let _manager = start_manager_with(ns.client(), ns.name(), |c| {
        c.image_inspect.allow_private = true;
    });
    template_with(&ns, "with-secret", port, None, Some("regcred")).await;
    template(&ns, "without", port, None).await;
    let t = resolved(&ns, "with-secret").await;
    assert_eq!(
        condition(&t, "CapacityResolved").map(|c| c.1).as_deref(),
        Some("CapacityResolved")
    );
    assert_eq!(capacity(&t).get("cpu").map(String::as_str), Some("4"));
    let t = resolved(&ns, "without").await;
    let (status, reason, message) = condition(&t, "CapacityResolved").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ImageInspectFailed")
    );
    assert!(
        !message.contains("s3cret") && !message.contains(&basic),
        "{message}"
    );
}
