//! A cluster `prod` with many pools, its owner references and labels made
//! by hand as Cluster API would (the binaries using it run no Cluster API:
//! they measure the provider alone).

use captf_api::{TerraformCluster, TerraformMachinePool};
use captf_manager::capi;
use captf_testenv::TestNamespace;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use super::*;

pub async fn create_dynamic(ns: &TestNamespace, ar: &kube::api::ApiResource, obj: Value) -> String {
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), ar);
    let created = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(obj).unwrap(),
        )
        .await
        .unwrap();
    created.metadata.uid.unwrap()
}

pub async fn create_secret(ns: &TestNamespace, name: &str, data: Value, labels: Value) {
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels}, "stringData": data,
    }))
    .unwrap();
    ns.api::<Secret>()
        .create(&PostParams::default(), &s)
        .await
        .unwrap();
}

/// The Cluster `prod` with its TerraformCluster, as Cluster API and an
/// operator would make them.
pub async fn bring_up_cluster(ns: &TestNamespace) {
    create_secret(ns, "creds", json!({"token": "x"}), json!({})).await;
    let uid = create_dynamic(ns, &capi::cluster_resource(), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "prod"},
        "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": "prod"}},
    }))
    .await;
    let tc: TerraformCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "metadata": {"name": "prod", "labels": {"cluster.x-k8s.io/cluster-name": "prod"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "prod", "uid": uid}]},
        "spec": {"source": {"image": module_ref("cluster", ns.name())}, "identityRef": {"kind": "Secret", "name": "creds"}, "drift": {"intervalSeconds": 0}},
    }))
    .unwrap();
    ns.api::<TerraformCluster>()
        .create(&PostParams::default(), &tc)
        .await
        .unwrap();
}

/// `pool-<i>`: its bootstrap data, MachinePool of 2 and TerraformMachinePool
/// with its membership refreshed every `refresh_interval_seconds`.
pub async fn add_pool(ns: &TestNamespace, i: usize, refresh_interval_seconds: u32) {
    let name = format!("pool-{i}");
    let boot = format!("boot-{i}");
    create_secret(
        ns,
        &boot,
        json!({"value": "#cloud-config\n", "format": "cloud-config"}),
        json!({"cluster.x-k8s.io/cluster-name": "prod"}),
    )
    .await;
    let uid = create_dynamic(ns, &capi::machine_pool_resource(), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "prod"}},
        "spec": {"clusterName": "prod", "replicas": 2, "template": {"spec": {
            "clusterName": "prod",
            "bootstrap": {"dataSecretName": boot},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachinePool", "name": name},
            "version": "v1.37.2",
        }}},
    }))
    .await;
    let pool: TerraformMachinePool = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "prod"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": name, "uid": uid}]},
        "spec": {"source": {"image": module_ref("machinepool", ns.name())},
            "identityRef": {"kind": "Secret", "name": "creds"},
            "membershipRefreshIntervalSeconds": refresh_interval_seconds},
    }))
    .unwrap();
    ns.api::<TerraformMachinePool>()
        .create(&PostParams::default(), &pool)
        .await
        .unwrap();
}
