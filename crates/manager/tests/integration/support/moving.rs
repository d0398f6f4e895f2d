//! The two management clusters of a `clusterctl move` test: what each
//! runs, the provider inventory clusterctl checks, and what a watcher of the
//! source records while the move runs.

use captf_images::layout::ImageSpec;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use captf_manager::capi;
use captf_manager::io::state::read_state;
use captf_manager::names::{WorkloadKind, state_suffix};
use captf_testenv::{TestEnv, TestNamespace};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

use super::webhooks::serve_our_webhooks;
use super::*;

pub const OP_LABEL: &str = "captf.infrastructure.cluster.x-k8s.io/op";

pub fn dynamic(client: kube::Client, ns: &str, ar: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client, ns, ar)
}

pub fn infra_resource(kind: &str) -> ApiResource {
    let gvk = kube::api::GroupVersionKind::gvk("infrastructure.cluster.x-k8s.io", "v1alpha1", kind);
    ApiResource::from_gvk(&gvk)
}

pub async fn create(api: &Api<DynamicObject>, obj: Value) {
    api.create(
        &PostParams::default(),
        &serde_json::from_value(obj).unwrap(),
    )
    .await
    .unwrap();
}
/// The images of the test: both management clusters pull them from the
/// same registry, so a digest pinned on the source resolves on the target.
pub struct Images {
    pub manager: ImageSpec,
    pub modules: Vec<(String, ImageSpec)>,
}

pub fn images(ns: &TestNamespace, tmp: &std::path::Path) -> Images {
    Images {
        manager: manager_image(),
        modules: ["cluster", "machine", "machinepool"]
            .into_iter()
            .map(|role| {
                (
                    module_ref(role, ns.name()),
                    module_image(tmp, role, "v1", &[]),
                )
            })
            .collect(),
    }
}

/// Everything one management cluster runs for the test's namespace: Cluster
/// API, our webhooks, the images where its pods run, the runner role, the
/// provider inventory and our controllers. Each cluster runs its pods on a
/// real node of its own.
pub async fn management_cluster(
    env: &'static TestEnv,
    ns: &TestNamespace,
    images: &Images,
) -> Manager {
    env.cluster_api().await;
    serve_our_webhooks(env).await;
    insert_manager(env, ns.name()).await;
    for (reference, image) in &images.modules {
        insert_module(env, reference, image.clone()).await;
    }
    install_runner_role(&ns.client()).await;
    inventory(&ns.client()).await;
    start_manager(ns.client(), ns.name())
}

/// The provider inventory `clusterctl init` would have written: `clusterctl
/// move` refuses a target that lacks any provider of the source.
pub async fn inventory(client: &kube::Client) {
    let providers = [
        (
            "capi-system",
            "cluster-api",
            "cluster-api",
            "CoreProvider",
            "v1.14.2",
        ),
        (
            "capi-kubeadm-bootstrap-system",
            "bootstrap-kubeadm",
            "kubeadm",
            "BootstrapProvider",
            "v1.14.2",
        ),
        (
            "capi-kubeadm-control-plane-system",
            "control-plane-kubeadm",
            "kubeadm",
            "ControlPlaneProvider",
            "v1.14.2",
        ),
        (
            "captf-system",
            "infrastructure-terraform",
            "terraform",
            "InfrastructureProvider",
            concat!("v", env!("CARGO_PKG_VERSION")),
        ),
    ];
    let gvk =
        kube::api::GroupVersionKind::gvk("clusterctl.cluster.x-k8s.io", "v1alpha3", "Provider");
    let ar = ApiResource::from_gvk(&gvk);
    for (namespace, name, provider, type_, version) in providers {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("creating namespace {namespace}: {e}"),
        }
        let api = dynamic(client.clone(), namespace, &ar);
        let obj = json!({
            "apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Provider",
            "metadata": {"name": name, "labels": {
                captf_testenv::CLUSTERCTL_LABEL: "",
                "clusterctl.cluster.x-k8s.io/provider": name,
            }},
            "providerName": provider, "type": type_, "version": version,
        });
        match api
            .create(
                &PostParams::default(),
                &serde_json::from_value(obj).unwrap(),
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("creating the {name} inventory entry: {e}"),
        }
    }
}

pub const OBJECTS: [(WorkloadKind, &str); 3] = [
    (WorkloadKind::Cluster, "prod"),
    (WorkloadKind::Machine, "cp-0"),
    (WorkloadKind::MachinePool, "pool-a"),
];

/// Each object's state serial, `None` while its state cannot be read.
pub async fn serials(client: &kube::Client, ns: &str) -> Option<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for (kind, name) in OBJECTS {
        let state = read_state(client, ns, &state_suffix(kind, ns, name))
            .await
            .ok()?
            .ok()?;
        out.insert(name.to_owned(), state.serial);
    }
    Some(out)
}

/// A Job as a watcher of the source sees it over the move.
#[derive(Debug, Clone)]
pub struct SeenJob {
    pub op: String,
    pub created: k8s_openapi::jiff::Timestamp,
    pub succeeded: bool,
}

/// What the source cluster showed while the move ran.
#[derive(Debug, Default)]
pub struct SourceLog {
    pub jobs: BTreeMap<String, SeenJob>,
    /// When the Cluster was first seen paused.
    pub paused_at: Option<k8s_openapi::jiff::Timestamp>,
    /// The last serials read before the state left with its objects.
    pub serials: Option<BTreeMap<String, u64>>,
}

/// Polls the source every 100 ms until `stop` is set.
pub async fn watch_source(
    client: kube::Client,
    ns: String,
    log: Arc<Mutex<SourceLog>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let clusters = dynamic(client.clone(), &ns, &capi::cluster_resource());
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let paused = match clusters.get_opt("prod").await {
            Ok(Some(c)) => c.data["spec"]["paused"] == json!(true),
            _ => false,
        };
        let listed = jobs
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let serials = serials(&client, &ns).await;
        {
            let mut log = log.lock().unwrap();
            if paused && log.paused_at.is_none() {
                log.paused_at = Some(k8s_openapi::jiff::Timestamp::now());
            }
            if serials.is_some() {
                log.serials = serials;
            }
            for job in listed {
                let name = job.metadata.name.clone().unwrap_or_default();
                let seen = SeenJob {
                    op: job_op(&job),
                    created: job
                        .metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| t.0)
                        .unwrap_or_default(),
                    succeeded: job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0) > 0,
                };
                let entry = log.jobs.entry(name).or_insert(seen.clone());
                entry.succeeded |= seen.succeeded;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

pub fn jobs_by_op(jobs: &[Job]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for job in jobs {
        let op = job_op(job);
        *out.entry(op).or_default() += 1;
    }
    out
}

pub fn applies_by_kind(jobs: &[Job]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for job in jobs {
        let labels = job.metadata.labels.clone().unwrap_or_default();
        if labels.get(OP_LABEL).map(String::as_str) == Some("apply") {
            let kind = labels
                .get("captf.infrastructure.cluster.x-k8s.io/owner-kind")
                .cloned()
                .unwrap_or_default();
            *out.entry(kind).or_default() += 1;
        }
    }
    out
}

pub fn clusterctl_move(source: &TestEnv, target: &TestEnv, ns: &str) -> std::process::Output {
    let clusterctl =
        captf_testenv::assets::capi_binary("clusterctl").expect("the clusterctl test asset");
    std::process::Command::new(clusterctl)
        .arg("move")
        .arg(format!(
            "--kubeconfig={}",
            source.kubeconfig().unwrap().display()
        ))
        .arg(format!(
            "--to-kubeconfig={}",
            target.kubeconfig().unwrap().display()
        ))
        .arg(format!("--namespace={ns}"))
        .arg("-v=2")
        .env("CLUSTERCTL_DISABLE_VERSIONCHECK", "true")
        .env("HOME", std::env::temp_dir())
        .output()
        .unwrap()
}
