//! The few Cluster API v1beta2 fields the adapters read, as serde types.
//!
//! These types hold only a subset of `Cluster` and `MachinePool`, so they are
//! for reading (from a `DynamicObject` or a typed `get`) and never for a
//! replace or an update: writing one back would drop every other field.
//! Writes to Cluster API objects go through merge patches built elsewhere.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde::{Deserialize, Serialize};

pub use captf_api::names::capi::{
    CLUSTER as CLUSTER_KIND, GROUP, MACHINE as MACHINE_KIND, MACHINE_POOL as MACHINE_POOL_KIND,
    VERSION,
};

/// The `ApiResource` of a v1beta2 kind, for dynamic clients.
fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, kind), plural)
}

/// `clusters.cluster.x-k8s.io/v1beta2`.
pub fn cluster_resource() -> ApiResource {
    resource(CLUSTER_KIND, "clusters")
}

/// `machinepools.cluster.x-k8s.io/v1beta2`.
pub fn machine_pool_resource() -> ApiResource {
    resource(MACHINE_POOL_KIND, "machinepools")
}

/// `machines.cluster.x-k8s.io/v1beta2`.
pub fn machine_resource() -> ApiResource {
    resource(MACHINE_KIND, "machines")
}

/// True when an `apiVersion` belongs to Cluster API's core group (any
/// version: ownerRefs written by older controllers say `v1beta1`).
pub fn is_core_api_version(api_version: &str) -> bool {
    api_version.split_once('/').map(|(g, _)| g) == Some(GROUP)
}

/// A reference by API group, kind and name (`ContractVersionedObjectReference`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default)]
    pub api_group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

/// `APIEndpoint`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiEndpoint {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// `NetworkRanges`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkRanges {
    #[serde(default)]
    pub cidr_blocks: Vec<String>,
}

/// `ClusterNetwork`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetwork {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NetworkRanges>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<NetworkRanges>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_domain: Option<String>,
}

/// The part of `Topology` the cluster role reads.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_network: Option<ClusterNetwork>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
}

/// `ClusterInitializationStatus`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInitialization {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

/// The part of a v1beta2 condition read here.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusCondition {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
}

/// The `ControlPlaneInitialized` condition of a Cluster.
pub const CONTROL_PLANE_INITIALIZED_CONDITION: &str = "ControlPlaneInitialized";

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ClusterInitialization>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<StatusCondition>>,
}

/// A Cluster API `Cluster` (subset).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Cluster {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ClusterSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ClusterStatus>,
}

impl Cluster {
    /// Reads a Cluster from a dynamic object.
    pub fn from_dynamic(obj: &DynamicObject) -> Result<Cluster, serde_json::Error> {
        from_dynamic(obj)
    }

    /// `spec.paused` is true.
    pub fn paused(&self) -> bool {
        self.spec.paused == Some(true)
    }

    /// `status.initialization.controlPlaneInitialized`, or the
    /// `ControlPlaneInitialized` condition True: Cluster API sets only the
    /// condition for a control plane of stand-alone Machines (no control
    /// plane provider), once the first of them has a node.
    pub fn control_plane_initialized(&self) -> bool {
        let Some(status) = self.status.as_ref() else {
            return false;
        };
        let field = status
            .initialization
            .as_ref()
            .and_then(|i| i.control_plane_initialized)
            == Some(true);
        field
            || status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == CONTROL_PLANE_INITIALIZED_CONDITION && c.status == "True")
    }

    /// `status.initialization.infrastructureProvisioned` (unset reads false).
    pub fn infrastructure_provisioned(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.infrastructure_provisioned)
            == Some(true)
    }
}

/// `MachinePool.spec.template.metadata`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct TemplateMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// `Bootstrap`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
}

/// The part of `MachineSpec` a machine reads from its Machine and a pool
/// from its template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    #[serde(default)]
    pub cluster_name: String,
    #[serde(default)]
    pub bootstrap: Bootstrap,
    #[serde(default)]
    pub infrastructure_ref: ObjectReference,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
}

/// `MachineTemplateSpec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineTemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    #[serde(default)]
    pub spec: MachineSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolSpec {
    #[serde(default)]
    pub cluster_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domains: Option<Vec<String>>,
    #[serde(
        rename = "providerIDList",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id_list: Option<Vec<String>>,
    #[serde(default)]
    pub template: MachineTemplateSpec,
}

/// A Cluster API `MachinePool` (subset).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct MachinePool {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: MachinePoolSpec,
}

impl MachinePool {
    /// Reads a MachinePool from a dynamic object.
    pub fn from_dynamic(obj: &DynamicObject) -> Result<MachinePool, serde_json::Error> {
        from_dynamic(obj)
    }

    /// One annotation of the MachinePool.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }
}

/// A Cluster API `Machine` (subset).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Machine {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: MachineSpec,
}

impl Machine {
    /// Reads a Machine from a dynamic object.
    pub fn from_dynamic(obj: &DynamicObject) -> Result<Machine, serde_json::Error> {
        from_dynamic(obj)
    }

    /// Carries the `cluster.x-k8s.io/control-plane` label (presence only).
    pub fn control_plane(&self) -> bool {
        self.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(captf_api::names::labels::CONTROL_PLANE))
    }

    /// Has a deletion timestamp.
    pub fn deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    /// One annotation of the Machine.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }
}

fn from_dynamic<T: serde::de::DeserializeOwned>(
    obj: &DynamicObject,
) -> Result<T, serde_json::Error> {
    serde_json::from_value(serde_json::to_value(obj)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A Cluster that passes the v1beta2 schema (the apiserver test below
    /// creates it), with every field the adapters read.
    pub(crate) const CLUSTER_YAML: &str = r#"
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: prod
  labels:
    team: a
spec:
  paused: false
  clusterNetwork:
    apiServerPort: 6443
    pods:
      cidrBlocks: ["192.168.0.0/16"]
    services:
      cidrBlocks: ["10.96.0.0/12"]
    serviceDomain: cluster.local
  controlPlaneEndpoint:
    host: api.prod.example.com
    port: 6443
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: TerraformCluster
    name: prod
  controlPlaneRef:
    apiGroup: controlplane.cluster.x-k8s.io
    kind: KubeadmControlPlane
    name: prod-cp
"#;

    /// A MachinePool that passes the v1beta2 schema.
    pub(crate) const MACHINE_POOL_YAML: &str = r#"
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachinePool
metadata:
  name: prod-workers
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "1"
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "5"
spec:
  clusterName: prod
  replicas: 3
  failureDomains: ["fd-1", "fd-2"]
  template:
    metadata:
      labels:
        node-role.example.com/worker: ""
    spec:
      clusterName: prod
      version: v1.33.1
      bootstrap:
        configRef:
          apiGroup: bootstrap.cluster.x-k8s.io
          kind: KubeadmConfig
          name: prod-workers
        dataSecretName: prod-workers-bootstrap
      infrastructureRef:
        apiGroup: infrastructure.cluster.x-k8s.io
        kind: TerraformMachinePool
        name: prod-workers
"#;

    fn dynamic(yaml: &str) -> DynamicObject {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn check_cluster(c: &Cluster) {
        assert_eq!(c.metadata.name.as_deref(), Some("prod"));
        assert!(!c.paused());
        let infra = c.spec.infrastructure_ref.as_ref().unwrap();
        assert_eq!(
            (
                infra.api_group.as_str(),
                infra.kind.as_str(),
                infra.name.as_str()
            ),
            (
                "infrastructure.cluster.x-k8s.io",
                "TerraformCluster",
                "prod"
            )
        );
        let ep = c.spec.control_plane_endpoint.as_ref().unwrap();
        assert_eq!(
            (ep.host.as_deref(), ep.port),
            (Some("api.prod.example.com"), Some(6443))
        );
        let net = c.spec.cluster_network.as_ref().unwrap();
        assert_eq!(net.pods.as_ref().unwrap().cidr_blocks, ["192.168.0.0/16"]);
        assert_eq!(net.services.as_ref().unwrap().cidr_blocks, ["10.96.0.0/12"]);
        assert_eq!(net.service_domain.as_deref(), Some("cluster.local"));
        assert_eq!(net.api_server_port, Some(6443));
    }

    fn check_machine_pool(mp: &MachinePool) {
        assert_eq!(mp.spec.cluster_name, "prod");
        assert_eq!(mp.spec.replicas, Some(3));
        assert_eq!(
            mp.spec.failure_domains.as_deref().unwrap(),
            ["fd-1", "fd-2"]
        );
        let t = &mp.spec.template;
        assert_eq!(t.spec.version.as_deref(), Some("v1.33.1"));
        assert_eq!(
            t.spec.bootstrap.data_secret_name.as_deref(),
            Some("prod-workers-bootstrap")
        );
        assert_eq!(t.spec.infrastructure_ref.kind, "TerraformMachinePool");
        assert_eq!(t.spec.infrastructure_ref.name, "prod-workers");
        let labels = t.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert_eq!(labels.get("node-role.example.com/worker").unwrap(), "");
        assert_eq!(
            mp.annotation(captf_api::names::annotations::AUTOSCALER_MAX_SIZE),
            Some("5")
        );
    }

    #[test]
    fn full_examples_parse_from_dynamic_objects() {
        check_cluster(&Cluster::from_dynamic(&dynamic(CLUSTER_YAML)).unwrap());
        check_machine_pool(&MachinePool::from_dynamic(&dynamic(MACHINE_POOL_YAML)).unwrap());
    }

    #[test]
    fn status_and_absent_fields_read_as_unset() {
        let mut obj = dynamic(CLUSTER_YAML);
        obj.data["status"] = serde_json::json!({
            "initialization": {"infrastructureProvisioned": true, "controlPlaneInitialized": true},
            "phase": "Provisioned"
        });
        assert!(
            Cluster::from_dynamic(&obj)
                .unwrap()
                .control_plane_initialized()
        );
        obj.data["status"] = serde_json::json!({});
        assert!(
            !Cluster::from_dynamic(&obj)
                .unwrap()
                .control_plane_initialized()
        );
        let bare: MachinePool = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"clusterName": "prod", "template": {"spec": {"clusterName": "prod"}}}
        }))
        .unwrap();
        assert_eq!(bare.spec.replicas, None);
        assert_eq!(bare.spec.template.spec.bootstrap.data_secret_name, None);
    }

    #[test]
    fn core_api_versions_are_recognised_by_group() {
        assert!(is_core_api_version("cluster.x-k8s.io/v1beta2"));
        assert!(is_core_api_version("cluster.x-k8s.io/v1beta1"));
        assert!(!is_core_api_version(
            "infrastructure.cluster.x-k8s.io/v1alpha1"
        ));
        assert!(!is_core_api_version("v1"));
        assert_eq!(cluster_resource().plural, "clusters");
        assert_eq!(
            machine_pool_resource().api_version,
            "cluster.x-k8s.io/v1beta2"
        );
    }

    /// The examples are accepted by the real apiserver with Cluster API's
    /// CRDs, and what it returns still parses.
    #[tokio::test]
    async fn examples_are_valid_v1beta2_objects() {
        use kube::api::{Api, PostParams};
        let env = captf_testenv::TestEnv::get().await;
        let ns = env.namespace().await;
        for (yaml, ar) in [
            (CLUSTER_YAML, cluster_resource()),
            (MACHINE_POOL_YAML, machine_pool_resource()),
        ] {
            let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &ar);
            let created = api
                .create(&PostParams::default(), &dynamic(yaml))
                .await
                .unwrap_or_else(|e| panic!("{} rejected: {e}", ar.kind));
            if ar.kind == CLUSTER_KIND {
                check_cluster(&Cluster::from_dynamic(&created).unwrap());
            } else {
                check_machine_pool(&MachinePool::from_dynamic(&created).unwrap());
            }
        }
    }

    #[test]
    fn the_control_plane_is_initialized_by_field_or_by_condition() {
        let cluster = |status: serde_json::Value| -> Cluster {
            serde_json::from_value(json!({"metadata": {"name": "prod"}, "status": status})).unwrap()
        };
        let cases = [
            ("no status", json!(null), false),
            (
                "a provider set the field",
                json!({"initialization": {"controlPlaneInitialized": true}}),
                true,
            ),
            (
                "stand-alone control-plane Machines: the condition only",
                json!({"conditions": [{"type": "ControlPlaneInitialized", "status": "True"}]}),
                true,
            ),
            (
                "not yet",
                json!({"initialization": {"controlPlaneInitialized": false},
                       "conditions": [{"type": "ControlPlaneInitialized", "status": "False"}]}),
                false,
            ),
            (
                "another condition",
                json!({"conditions": [{"type": "InfrastructureReady", "status": "True"}]}),
                false,
            ),
        ];
        for (what, status, want) in cases {
            assert_eq!(cluster(status).control_plane_initialized(), want, "{what}");
        }
    }
}
