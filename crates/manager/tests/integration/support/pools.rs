//! A TerraformMachinePool's test scaffolding: the objects of a cluster with
//! one pool, made by Cluster API's controllers or (for a state they would
//! not make) by hand, and what the pool tests read back.

use captf_api::{TerraformCluster, TerraformMachinePool};
use captf_manager::capi;
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::*;

pub fn dynamic(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

pub async fn create(ns: &TestNamespace, ar: &kube::api::ApiResource, obj: Value) -> DynamicObject {
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), ar);
    api.create(&PostParams::default(), &dynamic(obj))
        .await
        .unwrap()
}

pub fn plain_secret(name: &str, data: &[(&str, &str)], labels: Value) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "stringData": data.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect::<serde_json::Map<_, _>>(),
    }))
    .unwrap()
}

/// A provisioned cluster and a MachinePool of `replicas` with its pool.
pub async fn bring_up(ns: &TestNamespace, replicas: i32, mp_annotations: Value) {
    bring_up_with(ns, replicas, mp_annotations, json!({})).await;
}

/// Who makes the owner references and labels Cluster API would make.
#[derive(Clone, Copy, PartialEq)]
pub enum Driver {
    /// Cluster API's controllers (started if they are not yet).
    ClusterApi,
    /// The test, by hand, for a state Cluster API would not make.
    ByHand,
}

/// [`bring_up`] with more fields in the pool's spec.
pub async fn bring_up_with(
    ns: &TestNamespace,
    replicas: i32,
    mp_annotations: Value,
    pool_spec: Value,
) {
    bring_up_driven(ns, replicas, mp_annotations, pool_spec, Driver::ClusterApi).await;
}

pub async fn bring_up_driven(
    ns: &TestNamespace,
    replicas: i32,
    mp_annotations: Value,
    pool_spec: Value,
    driver: Driver,
) {
    let by_hand = driver == Driver::ByHand;
    assert!(
        !(by_hand && TestEnv::get().await.cluster_api_started()),
        "a test that plays Cluster API by hand must run where its managers never start \
         (the by_hand test binary)"
    );
    // What Cluster API sets and the test sets only when it plays Cluster API.
    let labels = if by_hand {
        json!({"cluster.x-k8s.io/cluster-name": "prod"})
    } else {
        json!({})
    };
    let owned_by = |kind: &str, obj: &DynamicObject| {
        if by_hand {
            json!({"labels": {"cluster.x-k8s.io/cluster-name": "prod"},
                   "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind,
                                        "name": obj.metadata.name, "uid": obj.metadata.uid}]})
        } else {
            json!({})
        }
    };
    let secrets = ns.api::<Secret>();
    secrets
        .create(
            &PostParams::default(),
            &plain_secret("creds", &[("token", "x")], json!({})),
        )
        .await
        .unwrap();
    secrets
        .create(
            &PostParams::default(),
            &plain_secret(
                "pool-bootstrap",
                &[("value", "#cloud-config\n"), ("format", "cloud-config")],
                json!({"cluster.x-k8s.io/cluster-name": "prod"}),
            ),
        )
        .await
        .unwrap();
    let cluster = create(ns, &capi::cluster_resource(), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "prod", "labels": labels.clone()},
        "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": "prod"}},
    }))
    .await;
    if !by_hand {
        let cluster_api = TestEnv::get().await.cluster_api().await;
        let uid = cluster.metadata.uid.clone().unwrap();
        secrets
            .create(
                &PostParams::default(),
                &cluster_api.kubeconfig_secret("prod", &uid),
            )
            .await
            .unwrap();
    }
    let mut tc_meta = owned_by("Cluster", &cluster);
    tc_meta["name"] = json!("prod");
    let tc: TerraformCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "metadata": tc_meta,
        "spec": {"source": {"image": module_ref("cluster", ns.name())}, "identityRef": {"kind": "Secret", "name": "creds"}, "drift": {"intervalSeconds": 0}},
    }))
    .unwrap();
    ns.api::<TerraformCluster>()
        .create(&PostParams::default(), &tc)
        .await
        .unwrap();
    let mp = create(ns, &capi::machine_pool_resource(), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": "pool-a", "labels": labels, "annotations": mp_annotations},
        "spec": {
            "clusterName": "prod",
            "replicas": replicas,
            "template": {"spec": {
                "clusterName": "prod",
                "bootstrap": {"dataSecretName": "pool-bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachinePool", "name": "pool-a"},
                "version": "v1.37.2",
            }},
        },
    }))
    .await;
    let mut spec = json!({"source": {"image": module_ref("machinepool", ns.name())}, "identityRef": {"kind": "Secret", "name": "creds"}, "membershipRefreshIntervalSeconds": 15});
    for (k, v) in pool_spec.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    let mut pool_meta = owned_by("MachinePool", &mp);
    pool_meta["name"] = json!("pool-a");
    let pool: TerraformMachinePool = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
        "metadata": pool_meta,
        "spec": spec,
    }))
    .unwrap();
    ns.api::<TerraformMachinePool>()
        .create(&PostParams::default(), &pool)
        .await
        .unwrap();
}

pub fn condition<'a>(p: &'a TerraformMachinePool, type_: &str) -> Option<&'a Condition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

pub fn is(p: &TerraformMachinePool, type_: &str, status: &str) -> bool {
    condition(p, type_).is_some_and(|c| c.status == status)
}

pub async fn wait_pool(
    ns: &TestNamespace,
    what: &str,
    secs: u64,
    check: impl Fn(&TerraformMachinePool) -> bool,
) -> TerraformMachinePool {
    let api = ns.api::<TerraformMachinePool>();
    let last = std::sync::Mutex::new(String::new());
    eventually(what, secs, || async {
        let p = api.get("pool-a").await.ok()?;
        let seen = format!(
            "{:?} ids={:?} replicas={:?}",
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .map(|cs| cs
                    .iter()
                    .map(|c| format!("{}={}/{}: {}", c.type_, c.status, c.reason, c.message))
                    .collect::<Vec<_>>()),
            p.spec.provider_id_list,
            p.status.as_ref().and_then(|s| s.replicas)
        );
        let mut l = last.lock().unwrap();
        if *l != seen {
            eprintln!("pool-a: {seen}");
            *l = seen;
        }
        check(&p).then_some(p)
    })
    .await
}

pub fn ops(jobs: &[Job], op: &str) -> usize {
    jobs.iter()
        .filter(|j| {
            j.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("captf.infrastructure.cluster.x-k8s.io/op"))
                .map(String::as_str)
                == Some(op)
        })
        .filter(|j| {
            j.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("captf.infrastructure.cluster.x-k8s.io/owner-kind"))
                .map(String::as_str)
                == Some("TerraformMachinePool")
        })
        .count()
}

pub fn names(jobs: &[Job], op: &str) -> Vec<String> {
    jobs.iter()
        .filter(|j| ops(std::slice::from_ref(j), op) == 1)
        .filter_map(|j| j.metadata.name.clone())
        .collect()
}

pub async fn scale(ns: &TestNamespace, replicas: i32) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi::machine_pool_resource());
    api.patch(
        "pool-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap();
}

pub fn ids(p: &TerraformMachinePool) -> Vec<String> {
    p.spec.provider_id_list.clone().unwrap_or_default()
}

pub async fn setup(
    env: &'static TestEnv,
    ns: &TestNamespace,
    tmp: &std::path::Path,
    driver: Driver,
) -> Manager {
    if driver == Driver::ClusterApi {
        env.cluster_api().await;
    }
    install_noop_modules(env, ns, tmp).await;
    start_manager(ns.client(), ns.name())
}

/// The manager image and the noop cluster and pool modules under `ns`'s
/// references, and the runner role of `ns`.
pub async fn install_noop_modules(
    env: &'static TestEnv,
    ns: &TestNamespace,
    tmp: &std::path::Path,
) {
    insert_manager(env, ns.name()).await;
    insert_module(
        env,
        &module_ref("cluster", ns.name()),
        module_image(tmp, "cluster", "v1", &[]),
    )
    .await;
    insert_module(
        env,
        &module_ref("machinepool", ns.name()),
        module_image(tmp, "machinepool", "v1", &[]),
    )
    .await;
    install_runner_role(&ns.client()).await;
}

/// Secrets, Leases and Jobs the provider made that are still in `ns`.
pub async fn leftovers(ns: &TestNamespace) -> Option<(usize, Vec<String>, usize)> {
    let jobs = ns
        .api::<Job>()
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .len();
    let secrets: Vec<String> = ns
        .api::<Secret>()
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .filter(|n| n.starts_with("captf-") || n.starts_with("tfstate-"))
        .collect();
    let leases = ns
        .api::<Lease>()
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .len();
    Some((jobs, secrets, leases))
}
