//! The benchmark's load: the objects it creates (playing Cluster API's part:
//! owner references and cluster-name labels), the waits, the spec changes
//! it times, and the small HTTP reads of the manager's endpoints.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const OWNER_NAME: &str = "captf.infrastructure.cluster.x-k8s.io/owner-name";
const OP: &str = "captf.infrastructure.cluster.x-k8s.io/op";

/// What each bench Job's pod asks of the real node: a noop module needs a
/// fraction of the built-in 250m CPU and 2Gi memory, which would let a
/// two-core node run only eight pods at a time.
fn job_policy() -> Value {
    json!({"resources": {
        "requests": {"cpu": "10m", "memory": "64Mi"},
        "limits": {"memory": "512Mi"}
    }})
}

/// Which namespace and cluster each pool lives in.
#[derive(Debug, Clone)]
pub struct Layout {
    pub clusters: usize,
    pub namespaces: usize,
}

impl Layout {
    pub fn new(clusters: usize, namespaces: usize) -> Self {
        Layout {
            clusters: clusters.max(1),
            namespaces: namespaces.clamp(1, clusters.max(1)),
        }
    }

    fn cluster_of(&self, pool: usize) -> usize {
        pool % self.clusters
    }

    fn namespace_of_cluster(&self, cluster: usize) -> String {
        format!("bench-{}", cluster % self.namespaces)
    }

    pub fn namespace_of(&self, pool: usize) -> String {
        self.namespace_of_cluster(self.cluster_of(pool))
    }
}

fn cluster_name(c: usize) -> String {
    format!("c-{c}")
}

fn pool_name(p: usize) -> String {
    format!("p-{p}")
}

fn ar_cluster() -> kube::api::ApiResource {
    captf_manager::capi::cluster_resource()
}

fn ar_machine_pool() -> kube::api::ApiResource {
    captf_manager::capi::machine_pool_resource()
}

async fn create_value(
    client: &kube::Client,
    ns: &str,
    ar: &kube::api::ApiResource,
    v: Value,
) -> Result<String, String> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
    let obj: DynamicObject = serde_json::from_value(v).map_err(|e| e.to_string())?;
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .map_err(|e| format!("creating {} {:?}: {e}", ar.kind, obj.metadata.name))?;
    Ok(created.metadata.uid.unwrap_or_default())
}

async fn create_secret(
    client: &kube::Client,
    ns: &str,
    name: &str,
    data: Value,
    labels: Value,
) -> Result<(), String> {
    let s: Secret = serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "stringData": data}),
    )
    .map_err(|e| e.to_string())?;
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &s)
        .await
        .map(drop)
        .map_err(|e| format!("creating Secret {ns}/{name}: {e}"))
}

/// Namespaces, then each cluster (credentials, Cluster, TerraformCluster).
pub async fn create_clusters(client: &kube::Client, layout: &Layout) -> Result<(), String> {
    for n in 0..layout.namespaces {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": format!("bench-{n}")}}))
                .map_err(|e| e.to_string())?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .map_err(|e| format!("creating a namespace: {e}"))?;
    }
    for c in 0..layout.clusters {
        let ns = layout.namespace_of_cluster(c);
        let name = cluster_name(c);
        if c < layout.namespaces {
            create_secret(client, &ns, "creds", json!({"token": "x"}), json!({})).await?;
        }
        let uid = create_value(client, &ns, &ar_cluster(), json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": name}},
        }))
        .await?;
        create_value(client, &ns, &captf_resource("TerraformCluster", "terraformclusters"), json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": name},
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": name, "uid": uid}]},
            "spec": {"source": {"image": "local.demo/noop-cluster:dev"}, "identityRef": {"kind": "Secret", "name": "creds"}, "drift": {"intervalSeconds": 0}, "jobs": job_policy()},
        }))
        .await?;
    }
    Ok(())
}

/// Pools `from..to` (bootstrap data, MachinePool of 2, TerraformMachinePool).
pub async fn create_pools(
    client: &kube::Client,
    layout: &Layout,
    pools: std::ops::Range<usize>,
    refresh: Duration,
) -> Result<(), String> {
    for p in pools {
        create_pool(client, layout, p, refresh).await?;
    }
    Ok(())
}

fn captf_resource(kind: &str, plural: &str) -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "infrastructure.cluster.x-k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "infrastructure.cluster.x-k8s.io/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

async fn create_pool(
    client: &kube::Client,
    layout: &Layout,
    p: usize,
    refresh: Duration,
) -> Result<(), String> {
    let ns = layout.namespace_of(p);
    let cluster = cluster_name(layout.cluster_of(p));
    let name = pool_name(p);
    let boot = format!("{name}-bootstrap");
    create_secret(
        client,
        &ns,
        &boot,
        json!({"value": "#cloud-config\n", "format": "cloud-config"}),
        json!({"cluster.x-k8s.io/cluster-name": cluster}),
    )
    .await?;
    let uid = create_value(client, &ns, &ar_machine_pool(), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "spec": {"clusterName": cluster, "replicas": 2, "template": {"spec": {
            "clusterName": cluster, "bootstrap": {"dataSecretName": boot},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachinePool", "name": name},
            "version": "v1.37.2"}}},
    }))
    .await?;
    create_value(client, &ns, &captf_resource("TerraformMachinePool", "terraformmachinepools"), json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": name, "uid": uid}]},
        "spec": {"source": {"image": "local.demo/noop-machinepool:dev"}, "identityRef": {"kind": "Secret", "name": "creds"},
            "membershipRefreshIntervalSeconds": refresh.as_secs().clamp(15, 86400), "jobs": job_policy()},
    }))
    .await?;
    Ok(())
}

fn ready(o: &DynamicObject) -> bool {
    o.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// Waits until every TerraformCluster and `wanted` pools are
/// Ready, calling `sample` every two seconds (for the memory peak).
pub async fn wait_ready_pools(
    client: &kube::Client,
    layout: &Layout,
    wanted: usize,
    timeout: Duration,
    mut sample: impl FnMut(),
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let pools: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &captf_resource("TerraformMachinePool", "terraformmachinepools"),
    );
    let clusters: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &captf_resource("TerraformCluster", "terraformclusters"),
    );
    loop {
        sample();
        let p = pools
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items;
        let c = clusters
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items;
        let ready_pools = p.iter().filter(|o| ready(o)).count();
        if ready_pools >= wanted && c.iter().filter(|o| ready(o)).count() == layout.clusters {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{ready_pools} of {wanted} pools Ready after {}s",
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// A Job as first seen: its owner pool, its op, when.
type Seen = (String, String, Instant);

/// When each Job was first seen, by a watch of the bench's own.
#[derive(Clone, Default)]
pub struct JobLog {
    seen: Arc<Mutex<HashMap<String, Seen>>>,
}

impl JobLog {
    pub fn watch(client: kube::Client) -> JobLog {
        let log = JobLog::default();
        let seen = log.seen.clone();
        let jobs: Api<Job> = Api::all(client);
        tokio::spawn(async move {
            let mut stream = watcher::watcher(
                jobs,
                watcher::Config::default().labels("captf.io/managed=true"),
            )
            .default_backoff()
            .applied_objects()
            .boxed();
            while let Some(ev) = stream.next().await {
                let Ok(job) = ev else { continue };
                let labels = job.metadata.labels.clone().unwrap_or_default();
                let name = job.metadata.name.clone().unwrap_or_default();
                let owner = labels.get(OWNER_NAME).cloned().unwrap_or_default();
                let op = labels.get(OP).cloned().unwrap_or_default();
                seen.lock()
                    .unwrap()
                    .entry(name)
                    .or_insert((owner, op, Instant::now()));
            }
        });
        log
    }

    /// The first apply Job of `pool` seen after `since`.
    fn apply_after(&self, pool: &str, since: Instant) -> Option<Instant> {
        self.seen
            .lock()
            .unwrap()
            .values()
            .filter(|(owner, op, at)| owner == pool && op == "apply" && *at >= since)
            .map(|(_, _, at)| *at)
            .min()
    }
}

/// Scales `changes` MachinePools from 2 to 3, one every `every`, and times
/// each from the patch to its apply Job's creation.
pub async fn time_spec_changes(
    client: &kube::Client,
    layout: &Layout,
    changes: usize,
    every: Duration,
    log: &JobLog,
) -> Result<Vec<Duration>, String> {
    let mut sent = Vec::new();
    for p in 0..changes {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &layout.namespace_of(p), &ar_machine_pool());
        let at = Instant::now();
        api.patch(
            &pool_name(p),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .map_err(|e| format!("scaling {}: {e}", pool_name(p)))?;
        sent.push((pool_name(p), at));
        tokio::time::sleep(every).await;
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let found: Vec<Option<Duration>> = sent
            .iter()
            .map(|(pool, at)| log.apply_after(pool, *at).map(|j| j.duration_since(*at)))
            .collect();
        if found.iter().all(Option::is_some) || Instant::now() > deadline {
            return Ok(found.into_iter().flatten().collect());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A plain HTTP GET of `path` at `addr`: the body of a 200 answer.
pub async fn http_get(addr: &str, path: &str) -> Result<String, String> {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out))
        .await
        .map_err(|_| format!("GET {path} at {addr} timed out"))?
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!(
            "GET {path} at {addr}: {}",
            head.lines().next().unwrap_or_default()
        ));
    }
    // A chunked body: the chunk sizes are dropped line by line.
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok(unchunk(body));
    }
    Ok(body.to_owned())
}

fn unchunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].strip_prefix("\r\n").unwrap_or(&tail[n..]);
    }
    out
}

/// Waits until the manager's health endpoint answers.
pub async fn wait_ready(health: &str) -> Result<(), String> {
    for _ in 0..120 {
        if http_get(health, "/readyz").await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(format!(
        "the manager's health endpoint {health} did not answer in 60 s"
    ))
}
