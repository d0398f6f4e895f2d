//! A TerraformMachine's test scaffolding: the user's part of a cluster and
//! a TerraformMachine with the Cluster API Machine naming it, as a user
//! makes them without a control plane provider.

use captf_api::TerraformCluster;
use captf_manager::capi;
use captf_testenv::TestNamespace;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use super::pools::create;
use super::{create_capi_cluster, module_ref};

/// The Cluster API Machines of `ns`.
pub fn machines(ns: &TestNamespace) -> Api<DynamicObject> {
    Api::namespaced_with(ns.client(), ns.name(), &capi::machine_resource())
}

/// The user's part of a cluster: credentials, the bootstrap data a bootstrap
/// provider would write, the Cluster and its TerraformCluster.
pub async fn cluster(ns: &TestNamespace) {
    let secret = |name: &str, data: Value, labels: Value| -> Secret {
        serde_json::from_value(
            json!({"metadata": {"name": name, "labels": labels}, "stringData": data}),
        )
        .unwrap()
    };
    let secrets = ns.api::<Secret>();
    for s in [
        secret("creds", json!({"token": "x"}), json!({})),
        secret(
            "machine-bootstrap",
            json!({"value": "#cloud-config\n", "format": "cloud-config"}),
            json!({"cluster.x-k8s.io/cluster-name": "prod"}),
        ),
    ] {
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }
    create_capi_cluster(ns, "prod").await;
    let tc: TerraformCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "metadata": {"name": "prod"},
        "spec": {"source": {"image": module_ref("cluster", ns.name())}, "identityRef": {"kind": "Secret", "name": "creds"}, "drift": {"intervalSeconds": 0}},
    }))
    .unwrap();
    ns.api::<TerraformCluster>()
        .create(&PostParams::default(), &tc)
        .await
        .unwrap();
}

/// A TerraformMachine's spec on the noop machine module, with `extra`
/// fields merged in.
pub fn machine_spec(ns: &TestNamespace, extra: Value) -> Value {
    let mut spec = json!({
        "source": {"image": module_ref("machine", ns.name())},
        "identityRef": {"kind": "Secret", "name": "creds"},
        "drift": {"intervalSeconds": 0},
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    spec
}

/// A TerraformMachine and the Machine naming it, as a user creates a
/// machine without a control plane provider.
pub async fn machine_pair(ns: &TestNamespace, name: &str, control_plane: bool, extra: Value) {
    create(
        ns,
        &infra_resource("TerraformMachine"),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachine",
            "metadata": {"name": name},
            "spec": machine_spec(ns, extra),
        }),
    )
    .await;
    let labels = if control_plane {
        json!({"cluster.x-k8s.io/control-plane": ""})
    } else {
        json!({})
    };
    create(
        ns,
        &capi::machine_resource(),
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "clusterName": "prod",
                "bootstrap": {"dataSecretName": "machine-bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachine", "name": name},
                "version": "v1.37.2",
                "failureDomain": "fd1",
            },
        }),
    )
    .await;
}

pub fn infra_resource(kind: &str) -> kube::api::ApiResource {
    let gvk = kube::api::GroupVersionKind::gvk("infrastructure.cluster.x-k8s.io", "v1alpha1", kind);
    kube::api::ApiResource::from_gvk(&gvk)
}
