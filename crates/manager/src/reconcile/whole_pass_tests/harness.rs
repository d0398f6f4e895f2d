//! A pass's world on the fake apiserver: the objects, the controller's
//! caches filled from them, and the runner's part played by hand (a Job
//! finishes with its pod, its result and the state it saved).

use std::io::Write;
use std::sync::Arc;

use captf_api::TerraformCluster;
use captf_api::names::{annotations, labels};
use k8s_openapi::api::core::v1::Secret;
use kube::core::{ApiResource, DynamicObject};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};

use crate::capi;
use crate::names::{WorkloadKind, state_secret, state_suffix};
use crate::reconcile::fake_apiserver::{FakeApiserver, now};
use crate::reconcile::mock_api::MockApi;
use crate::reconcile::watches::OwnerStores;
use crate::reconcile::{Config, Context, Error};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::controller::Action;

pub const NS: &str = "ns";
pub const SECRETS: &str = "/api/v1/secrets";
pub const PODS: &str = "/api/v1/pods";
pub const JOBS: &str = "/apis/batch/v1/jobs";
pub const CLUSTERS: &str = "/apis/cluster.x-k8s.io/v1beta2/clusters";
pub const MACHINE_POOLS: &str = "/apis/cluster.x-k8s.io/v1beta2/machinepools";
pub const MACHINES: &str = "/apis/cluster.x-k8s.io/v1beta2/machines";
pub const TERRAFORM_CLUSTERS: &str =
    "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/terraformclusters";
pub const TERRAFORM_MACHINES: &str =
    "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/terraformmachines";
pub const TERRAFORM_MACHINE_POOLS: &str =
    "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/terraformmachinepools";

/// A controller's caches of a machine's or pool's dependencies (owners of
/// one kind, Clusters, TerraformClusters, bootstrap data Secrets), refilled
/// from the fake before each pass as a relist would.
struct Caches {
    owners_path: &'static str,
    owners: Writer<DynamicObject>,
    clusters: Writer<DynamicObject>,
    terraform_clusters: Writer<TerraformCluster>,
    bootstrap_secrets: Writer<Secret>,
}

impl Caches {
    fn new(owners_path: &'static str, owners: ApiResource) -> Caches {
        Caches {
            owners_path,
            owners: Writer::new(owners),
            clusters: Writer::new(capi::cluster_resource()),
            terraform_clusters: Writer::new(()),
            bootstrap_secrets: Writer::new(()),
        }
    }

    fn stores(&self) -> OwnerStores {
        OwnerStores::new(
            self.owners.as_reader(),
            self.clusters.as_reader(),
            self.terraform_clusters.as_reader(),
            self.bootstrap_secrets.as_reader(),
        )
    }

    fn refill(&mut self, fake: &FakeApiserver) {
        fn typed<K: serde::de::DeserializeOwned>(objects: Vec<Value>) -> Vec<K> {
            objects
                .into_iter()
                .map(|v| serde_json::from_value(v).unwrap())
                .collect()
        }
        let secrets = fake
            .list(SECRETS, NS)
            .into_iter()
            .filter(|s| s["metadata"]["labels"][labels::CLUSTER_NAME].is_string())
            .collect();
        relist(&mut self.owners, typed(fake.list(self.owners_path, NS)));
        relist(&mut self.clusters, typed(fake.list(CLUSTERS, NS)));
        relist(
            &mut self.terraform_clusters,
            typed(fake.list(TERRAFORM_CLUSTERS, NS)),
        );
        relist(&mut self.bootstrap_secrets, typed(secrets));
    }
}

/// The fake, a client on it that records each request, and the manager's
/// context.
pub struct World {
    pub fake: FakeApiserver,
    pub mock: MockApi,
    pub ctx: Arc<Context>,
    pool_caches: Caches,
    machine_caches: Caches,
}

fn relist<K>(writer: &mut Writer<K>, objects: Vec<K>)
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    writer.apply_watcher_event(&Event::Init);
    for obj in objects {
        writer.apply_watcher_event(&Event::InitApply(obj));
    }
    writer.apply_watcher_event(&Event::InitDone);
}

/// One managed resource while the module has outputs; none once destroyed
/// (a destroy leaves a state without outputs or resources).
fn resources_of(outputs: &serde_json::Map<String, Value>) -> Value {
    if outputs.is_empty() {
        json!([])
    } else {
        json!([{"mode": "managed", "type": "terraform_data", "name": "x", "instances": [{}]}])
    }
}

fn gz(doc: &Value) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(doc.to_string().as_bytes()).unwrap();
    e.finish().unwrap()
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl World {
    pub fn new() -> World {
        World::on(FakeApiserver::new())
    }

    /// A manager (nothing in its memory) on `fake`.
    fn on(fake: FakeApiserver) -> World {
        let mock = MockApi::new(fake.responder());
        let ctx = Context::new(
            mock.client(),
            Config::new("registry.example/captf-manager:dev"),
        );
        let pool_caches = Caches::new(MACHINE_POOLS, capi::machine_pool_resource());
        let machine_caches = Caches::new(MACHINES, capi::machine_resource());
        assert!(ctx.pool_stores.set(pool_caches.stores()).is_ok());
        assert!(ctx.machine_stores.set(machine_caches.stores()).is_ok());
        World {
            fake,
            mock,
            ctx: Arc::new(ctx),
            pool_caches,
            machine_caches,
        }
    }

    /// The manager restarts: the same apiserver, nothing remembered (no
    /// settled pass to answer a resync).
    pub fn restart(self) -> World {
        World::on(self.fake)
    }

    /// The manager forgets that the object's last pass settled, so its
    /// next pass is a full one (as a write to its state from outside
    /// would make it).
    pub fn forget_settled(&self, path: &str, name: &str) {
        let obj = self.fake.get(path, NS, name).expect("the object");
        match obj["kind"].as_str() {
            Some("TerraformMachine") => {
                let obj: captf_api::TerraformMachine = serde_json::from_value(obj).unwrap();
                crate::reconcile::quiet::unsettle(&self.ctx, &obj);
            }
            Some("TerraformMachinePool") => {
                let obj: captf_api::TerraformMachinePool = serde_json::from_value(obj).unwrap();
                crate::reconcile::quiet::unsettle(&self.ctx, &obj);
            }
            _ => {
                let obj: TerraformCluster = serde_json::from_value(obj).unwrap();
                crate::reconcile::quiet::unsettle(&self.ctx, &obj);
            }
        }
    }

    /// Moves the object's clock back `hours`: its Jobs were created and
    /// finished, and its status times written, that long ago.
    pub fn age(&self, path: &str, name: &str, hours: i64) {
        let earlier = |v: &mut Value| {
            if let Some(t) = v.as_str().and_then(|t| t.parse::<Timestamp>().ok()) {
                let t = t - SignedDuration::from_hours(hours);
                *v = json!(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
            }
        };
        for job in self.fake.list(JOBS, NS) {
            let job_name = job["metadata"]["name"].as_str().unwrap().to_owned();
            self.fake.update(JOBS, NS, &job_name, |j| {
                earlier(&mut j["metadata"]["creationTimestamp"]);
                for key in ["startTime", "completionTime"] {
                    earlier(&mut j["status"][key]);
                }
            });
        }
        self.fake.update(path, NS, name, |o| {
            if let Some(status) = o["status"].as_object_mut() {
                for key in ["lastRefresh", "lastDriftCheck"] {
                    if let Some(v) = status.get_mut(key) {
                        earlier(v);
                    }
                }
            }
        });
    }

    /// Runs `pass` on the object `name` of the collection `path` as the
    /// fake holds it now; the `VERB resource` lines it sent.
    async fn run<K, F>(
        &self,
        path: &str,
        name: &str,
        pass: fn(Arc<K>, Arc<Context>) -> F,
    ) -> Vec<String>
    where
        K: serde::de::DeserializeOwned,
        F: std::future::Future<Output = Result<Action, Error>>,
    {
        let obj: K = serde_json::from_value(self.fake.get(path, NS, name).expect("the object"))
            .expect("the object as its kind");
        let before = self.mock.lines().len();
        pass(Arc::new(obj), self.ctx.clone())
            .await
            .expect("the pass ends without an error");
        self.mock.lines().split_off(before)
    }

    /// One pass of the pool `name`, its caches relisted first.
    pub async fn pool_pass(&mut self, name: &str) -> Vec<String> {
        self.pool_caches.refill(&self.fake);
        self.run(
            TERRAFORM_MACHINE_POOLS,
            name,
            crate::reconcile::pool::reconcile,
        )
        .await
    }

    /// One pass of the machine `name`, its caches relisted first.
    pub async fn machine_pass(&mut self, name: &str) -> Vec<String> {
        self.machine_caches.refill(&self.fake);
        self.run(
            TERRAFORM_MACHINES,
            name,
            crate::reconcile::machine::reconcile,
        )
        .await
    }

    /// One pass of the TerraformCluster `name` (it reads its owner Cluster
    /// live).
    pub async fn cluster_pass(&mut self, name: &str) -> Vec<String> {
        self.run(
            TERRAFORM_CLUSTERS,
            name,
            crate::reconcile::cluster::reconcile,
        )
        .await
    }

    /// The state the runner would have saved for `kind`'s object `name`:
    /// `outputs` (name → value), applied from `inputs_hash`.
    pub fn save_state(
        &self,
        kind: WorkloadKind,
        name: &str,
        serial: u64,
        outputs: Value,
        inputs_hash: Option<&str>,
    ) {
        let suffix = state_suffix(kind, NS, name);
        let outputs: serde_json::Map<String, Value> = outputs
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    json!({"value": v, "type": "dynamic", "sensitive": false}),
                )
            })
            .collect();
        let doc = json!({"version": 4, "serial": serial, "lineage": "lineage-1",
            "terraform_version": "1.10.10", "outputs": outputs,
            "resources": resources_of(&outputs)});
        let mut ann = json!({});
        if let Some(h) = inputs_hash {
            ann[annotations::INPUTS_HASH] = json!(h);
        }
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": state_secret(&suffix), "namespace": NS, "annotations": ann,
                "labels": {"tfstate": "true", "tfstateSecretSuffix": suffix, "tfstateWorkspace": "default"}},
            "data": {"tfstate": b64(&gz(&doc))}});
        let name = state_secret(&suffix);
        if self.fake.get(SECRETS, NS, &name).is_some() {
            // The backend rewrites the data; the inputs hash changes only
            // with an apply.
            self.fake.update(SECRETS, NS, &name, |s| {
                s["data"] = secret["data"].clone();
                if inputs_hash.is_some() {
                    s["metadata"]["annotations"] = secret["metadata"]["annotations"].clone();
                }
            });
        } else {
            self.fake.insert(SECRETS, secret);
        }
    }

    /// The runner's part for every unfinished Job: it saves `outputs` (an
    /// apply records the Job's inputs hash), its pod ends with a result
    /// document, and the Job completes.
    pub fn finish_jobs(&self, kind: WorkloadKind, name: &str, outputs: Value) {
        for job in self.fake.list(JOBS, NS) {
            let done = job["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| !cs.is_empty());
            if done {
                continue;
            }
            let job_name = job["metadata"]["name"].as_str().unwrap().to_owned();
            let op = job["metadata"]["labels"][labels::JOB_OP]
                .as_str()
                .unwrap_or("apply")
                .to_owned();
            let hash = job["metadata"]["annotations"][annotations::INPUTS_HASH]
                .as_str()
                .map(str::to_owned);
            let serial = 1 + self.fake.list(JOBS, NS).len() as u64;
            let saved = if op == "destroy" {
                json!({})
            } else {
                outputs.clone()
            };
            self.save_state(kind, name, serial, saved, hash.as_deref());
            let result =
                json!({"version": 1, "op": op, "steps": [{"name": op, "exit": 0, "seconds": 1.0}]});
            self.fake.insert(
                PODS,
                json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("{job_name}-pod"), "namespace": NS,
                        "labels": {"batch.kubernetes.io/job-name": job_name}},
                    "spec": {"containers": []},
                    "status": {"containerStatuses": [{"name": "source", "ready": false, "restartCount": 0,
                        "image": "registry.example/m:v1", "imageID": "registry.example/m@sha256:abc",
                        "state": {"terminated": {"exitCode": 0, "message": result.to_string(),
                            "startedAt": now(), "finishedAt": now()}}}]}}),
            );
            self.fake.update(JOBS, NS, &job_name, |j| {
                j["status"] = json!({"succeeded": 1, "startTime": now(), "completionTime": now(),
                    "conditions": [{"type": "Complete", "status": "True"}]});
            });
        }
    }
}

/// `first`, then `rest`: a pass's expected lines from its parts.
pub fn then<'a>(first: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
    first.iter().chain(rest).copied().collect()
}

/// A start's lines for a refresh or drift check of a machine or pool: the
/// run lease alone, no read of the cluster write lease after it.
pub fn routine<'a>(start: &[&'a str]) -> Vec<&'a str> {
    let mut lines = start.to_vec();
    let lease = lines.iter().position(|l| *l == "POST leases");
    if let Some(i) = lease
        && lines.get(i + 1) == Some(&"GET leases")
    {
        lines.remove(i + 1);
    }
    lines
}

/// The identity Secret `creds` and the Cluster `prod`, as an operator and
/// Cluster API would leave them; the Cluster as stored.
pub fn seed_identity_and_cluster(fake: &FakeApiserver) -> Value {
    fake.insert(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "namespace": NS}, "data": {"token": "eA=="}}),
    );
    fake.insert(
        CLUSTERS,
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "prod", "namespace": NS,
                "labels": {labels::CLUSTER_NAME: "prod"}},
            "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                "kind": "TerraformCluster", "name": "prod"}}}),
    )
}

/// A provisioned cluster for machines and pools: the identity and the
/// Cluster (its infrastructure provisioned), the TerraformCluster with its
/// saved state and exports, and a bootstrap data Secret `bootstrap`.
pub fn seed_provisioned_cluster(world: &World) {
    let fake = &world.fake;
    let cluster = seed_identity_and_cluster(fake);
    fake.update(CLUSTERS, NS, "prod", |c| {
        c["status"] = json!({"initialization": {"infrastructureProvisioned": true}});
    });
    let labels = json!({labels::CLUSTER_NAME: "prod"});
    fake.insert(
        SECRETS,
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "bootstrap", "namespace": NS, "labels": labels},
            "data": {"value": "I2Nsb3VkLWNvbmZpZwo=", "format": "Y2xvdWQtY29uZmln"}}),
    );
    fake.insert(
        TERRAFORM_CLUSTERS,
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
            "metadata": {"name": "prod", "namespace": NS, "labels": labels,
                "ownerReferences": owned_by("Cluster", &cluster)},
            "spec": {"source": {"image": "registry.example/cluster:v1"},
                "identityRef": {"kind": "Secret", "name": "creds"}},
            "status": {"initialization": {"provisioned": true}}}),
    );
    world.save_state(
        WorkloadKind::Cluster,
        "prod",
        3,
        json!({"exports": {"backend_id": "b-1"},
            "control_plane_endpoint": {"host": "prod.invalid", "port": 6443},
            "failure_domains": [{"name": "fd1", "control_plane": true}],
            "health": {"state": "running", "healthy": true}}),
        Some("h2:cluster"),
    );
}

/// An owner reference to Cluster API's `owner` of `kind`.
pub fn owned_by(kind: &str, owner: &Value) -> Value {
    json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind,
        "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}])
}
