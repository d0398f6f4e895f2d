//! A TerraformCluster as a user creates it, with its Cluster (owned by
//! Cluster API's controllers) and credentials.

use captf_api::TerraformCluster;
use captf_testenv::TestNamespace;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use serde_json::json;

use super::create_capi_cluster;

/// A TerraformCluster on `image` (one the executor may not have yet).
pub async fn create_cluster(ns: &TestNamespace, name: &str, image: &str) {
    create_capi_cluster(ns, name).await;
    let creds: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-creds")}, "stringData": {"token": "x"},
    }))
    .unwrap();
    ns.api::<Secret>()
        .create(&PostParams::default(), &creds)
        .await
        .unwrap();
    let tc: TerraformCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "metadata": {"name": name},
        "spec": {"source": {"image": image},
                 "identityRef": {"kind": "Secret", "name": format!("{name}-creds")},
                 "drift": {"intervalSeconds": 0}},
    }))
    .unwrap();
    ns.api::<TerraformCluster>()
        .create(&PostParams::default(), &tc)
        .await
        .unwrap();
}
