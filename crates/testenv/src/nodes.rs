//! A stand-in, the harness's only one: the node agent does what the kubelets
//! of a workload cluster's machines would do, for a test cluster that has
//! none (there is no cloud here to boot the machines). The workload clusters of the tests
//! are the test control plane itself (their `<cluster>-kubeconfig` Secrets
//! point at it), so when a TerraformMachinePool or TerraformMachine reports a
//! provider ID, the agent registers a Ready `Node` with that provider ID, and
//! Cluster API's own node matching (`nodeRefs`, ready replicas) runs on it.
//!
//! Deleting the nodes of members a pool retires is Cluster API's part (the
//! MachinePool controller deletes the nodes whose provider IDs left its
//! list), so the agent leaves those alone. What it does remove is what a
//! cloud's node lifecycle controller would: the nodes of instances that are
//! gone, known here by the object that reported them being deleted (its
//! destroy has run). An object that `clusterctl move` deletes from this
//! cluster (annotated `clusterctl.cluster.x-k8s.io/delete-for-move`) has not
//! destroyed anything: its instances, and so their nodes, stay.
//!
//! For a control-plane machine (a TerraformMachine labelled
//! `cluster.x-k8s.io/control-plane`, as the kubeadm control plane provider
//! labels its machines) the agent also does the one thing of `kubeadm init`
//! that Cluster API reads: the `kube-system/kubeadm-config` ConfigMap, by
//! which the kubeadm control plane provider marks the control plane
//! initialized (and so the bootstrap provider hands out join data).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

/// Label on every node the agent registers.
pub const AGENT_LABEL: &str = "captf.io/test-node-agent";

/// What `clusterctl move` puts on the objects it deletes from the source.
const DELETE_FOR_MOVE: &str = "clusterctl.cluster.x-k8s.io/delete-for-move";

fn infrastructure(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "infrastructure.cluster.x-k8s.io".to_owned(),
        version: "v1alpha1".to_owned(),
        api_version: "infrastructure.cluster.x-k8s.io/v1alpha1".to_owned(),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    }
}

/// The provider IDs of the machines an infrastructure object reports: a
/// pool's `spec.providerIDList` (its own `spec.providerID` names the pool,
/// not a machine, and gets no Node), a machine's `spec.providerID`.
pub fn provider_ids(obj: &DynamicObject) -> Vec<String> {
    let spec = &obj.data["spec"];
    let is_pool = obj
        .types
        .as_ref()
        .is_some_and(|t| t.kind == "TerraformMachinePool")
        || spec.get("providerIDList").is_some();
    let mut ids: Vec<String> = if is_pool {
        spec["providerIDList"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    } else {
        spec["providerID"]
            .as_str()
            .map(str::to_owned)
            .into_iter()
            .collect()
    };
    ids.retain(|id| !id.is_empty());
    ids
}

/// A node name for a provider ID: its path in lower-case DNS-label
/// characters, with a hash suffix so two IDs never share a name.
pub fn node_name(provider_id: &str) -> String {
    use std::hash::{Hash, Hasher};
    let path = provider_id
        .split_once("://")
        .map_or(provider_id, |(_, rest)| rest);
    let mut name: String = path
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    name = name.trim_matches('-').to_owned();
    name.truncate(40);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    provider_id.hash(&mut h);
    format!(
        "node-{}-{:08x}",
        name.trim_end_matches('-'),
        h.finish() as u32
    )
}

async fn register(nodes: &Api<Node>, provider_id: &str) -> Result<(), kube::Error> {
    let name = node_name(provider_id);
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {AGENT_LABEL: "true", "kubernetes.io/hostname": name}},
        "spec": {"providerID": provider_id},
    }))
    .expect("a static node");
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
        Err(e) => return Err(e),
    }
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    // What a healthy kubelet reports: Ready, and no pressure (Cluster API's
    // NodeHealthy, and so a Machine's availability, reads all four).
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason,
               "message": "reported by the test node agent",
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let status = json!({"status": {
        "conditions": [
            condition("Ready", "True", "KubeletReady"),
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID"),
        ],
        "addresses": [{"type": "Hostname", "address": name}],
    }});
    nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// What `kubeadm init` leaves in the workload cluster that Cluster API's
/// kubeadm control plane provider reads; an existing one is kept.
async fn kubeadm_init(client: &kube::Client) -> Result<(), kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "kube-system"}}))
        .expect("a static namespace");
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e),
    }
    let config: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "kubeadm-config", "namespace": "kube-system"},
        "data": {"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n\
            clusterName: kubernetes\nkubernetesVersion: v1.37.2\n\
            networking:\n  serviceSubnet: 10.0.0.0/24\n  dnsDomain: cluster.local\n"},
    }))
    .expect("a static config map");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    match maps.create(&PostParams::default(), &config).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// A control-plane machine: only machines carry the label.
fn is_control_plane(obj: &DynamicObject) -> bool {
    obj.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key("cluster.x-k8s.io/control-plane"))
}

/// Deletes the node of an instance that is gone; an absent node is fine.
async fn remove(nodes: &Api<Node>, provider_id: &str) -> Result<(), kube::Error> {
    match nodes
        .delete(&node_name(provider_id), &Default::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Runs until the future is dropped: watches pools and machines in every
/// namespace, registers a node for each provider ID they report, and
/// removes the nodes an object reported once that object is gone.
pub async fn run(client: kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    let watch = |kind: &str, plural: &str| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &infrastructure(kind, plural));
        watcher(api, watcher::Config::default()).boxed()
    };
    let mut events = futures::stream::select(
        watch("TerraformMachinePool", "terraformmachinepools"),
        watch("TerraformMachine", "terraformmachines"),
    );
    let mut registered: HashSet<String> = HashSet::new();
    let mut initialized = false;
    // uid of a pool or machine -> every provider ID it has reported.
    let mut reported: HashMap<String, HashSet<String>> = HashMap::new();
    while let Some(event) = events.next().await {
        let obj = match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
            Ok(watcher::Event::Delete(o)) => {
                let uid = o.metadata.uid.clone().unwrap_or_default();
                let mut gone = reported.remove(&uid).unwrap_or_default();
                let moved = o
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(DELETE_FOR_MOVE));
                if moved {
                    continue;
                }
                gone.extend(provider_ids(&o));
                for id in gone {
                    match remove(&nodes, &id).await {
                        Ok(()) => {
                            registered.remove(&id);
                        }
                        Err(e) => eprintln!("[node-agent] removing the node of {id}: {e}"),
                    }
                }
                continue;
            }
            Ok(_) => continue,
            Err(e) => {
                if crate::stopping() {
                    return;
                }
                eprintln!("[node-agent] watch error: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let uid = obj.metadata.uid.clone().unwrap_or_default();
        let ids = provider_ids(&obj);
        if !ids.is_empty() && is_control_plane(&obj) && !initialized {
            match kubeadm_init(&client).await {
                Ok(()) => initialized = true,
                Err(e) => eprintln!("[node-agent] writing kube-system/kubeadm-config: {e}"),
            }
        }
        for id in ids {
            reported.entry(uid.clone()).or_default().insert(id.clone());
            if registered.contains(&id) {
                continue;
            }
            match register(&nodes, &id).await {
                Ok(()) => {
                    registered.insert(id);
                }
                Err(e) => eprintln!("[node-agent] registering a node for {id}: {e}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_are_dns_labels_and_distinct() {
        let a = node_name("noop:///captf-test-x/pool-a/0");
        let b = node_name("noop:///captf-test-x/pool-a/1");
        assert_ne!(a, b);
        for n in [&a, &b, &node_name("oci://ocid1.instance.oc1..AAAA_bbb")] {
            assert!(n.len() <= 63, "{n}");
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{n}"
            );
            assert!(!n.starts_with('-') && !n.ends_with('-'), "{n}");
        }
        assert!(a.starts_with("node-captf-test-x-pool-a-0-"), "{a}");
    }

    #[test]
    fn provider_ids_are_a_pools_members_and_a_machines_own() {
        let pool: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
            "metadata": {"name": "p"},
            "spec": {"providerID": "a://pool", "providerIDList": ["a://1", "", "a://2"]},
        }))
        .unwrap();
        assert_eq!(provider_ids(&pool), ["a://1", "a://2"]);
        let listed_without_kind: DynamicObject = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"providerID": "a://pool", "providerIDList": ["a://1"]},
        }))
        .unwrap();
        assert_eq!(provider_ids(&listed_without_kind), ["a://1"]);
        let new_pool: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
            "metadata": {"name": "p"}, "spec": {"providerID": "a://pool"},
        }))
        .unwrap();
        assert_eq!(provider_ids(&new_pool), Vec::<String>::new());
        let machine: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachine",
            "metadata": {"name": "m"}, "spec": {"providerID": "a://3"},
        }))
        .unwrap();
        assert_eq!(provider_ids(&machine), ["a://3"]);
    }
}
