//! The Cluster API side of the demo, which runs Cluster API's own
//! controllers: which objects to wait for, which Clusters need the
//! kubeconfig Secret a control plane provider would write, and the
//! MachinePool's own view of its members (node references by provider ID).
//! Pure: from objects as read back from the apiserver to plain values.

use captf_api::names::{capi, kinds};
use serde_json::Value;

fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn is(object: &Value, group: &str, kind: &str) -> bool {
    let group_of = text(object, "/apiVersion")
        .and_then(|v| v.rsplit_once('/'))
        .map(|(g, _)| g);
    group_of == Some(group) && text(object, "/kind") == Some(kind)
}

/// The infrastructure objects the demo waits for: `(kind, name)` of every
/// TerraformCluster, TerraformMachinePool and TerraformMachine, clusters
/// first. (A MachineDeployment's machines are named by Cluster API; the
/// demo waits for them through their Machines.)
pub fn infrastructure(objects: &[Value]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for kind in [
        kinds::TERRAFORM_CLUSTER,
        kinds::TERRAFORM_MACHINE_POOL,
        kinds::TERRAFORM_MACHINE,
    ] {
        for o in objects.iter().filter(|o| is(o, captf_api::GROUP, kind)) {
            out.push((
                kind,
                text(o, "/metadata/name").unwrap_or_default().to_owned(),
            ));
        }
    }
    out
}

/// `(namespace, name, uid)` of every applied Cluster: each gets the
/// `<name>-kubeconfig` Secret, which points at the demo's control plane
/// (it is the workload cluster too, where the node agent registers nodes).
pub fn clusters(applied: &[Value]) -> Result<Vec<(String, String, String)>, String> {
    applied
        .iter()
        .filter(|o| is(o, capi::GROUP, capi::CLUSTER))
        .map(|c| {
            let name = text(c, "/metadata/name").unwrap_or_default().to_owned();
            let uid = text(c, "/metadata/uid")
                .ok_or_else(|| format!("Cluster {name} has no metadata.uid (not read back?)"))?;
            let namespace = text(c, "/metadata/namespace").unwrap_or("default");
            Ok((namespace.to_owned(), name, uid.to_owned()))
        })
        .collect()
}

/// One member as the MachinePool sees it: the Node Cluster API matched and
/// that node's provider ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub node: String,
    pub provider_id: String,
}

/// The MachinePool's members: each node of `status.nodeRefs` with the
/// provider ID `nodes` (the Node objects) give it, sorted by provider ID.
pub fn members(machine_pool: &Value, nodes: &[Value]) -> Vec<Member> {
    let mut out: Vec<Member> = machine_pool
        .pointer("/status/nodeRefs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| text(r, "/name"))
        .map(|node| Member {
            node: node.to_owned(),
            provider_id: nodes
                .iter()
                .find(|n| text(n, "/metadata/name") == Some(node))
                .and_then(|n| text(n, "/spec/providerID"))
                .unwrap_or("<node not found>")
                .to_owned(),
        })
        .collect();
    out.sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
    out
}

/// Whether Cluster API has matched every wanted replica to a node: as many
/// node references as `spec.replicas`, all counted ready, phase Running.
pub fn matched(machine_pool: &Value) -> bool {
    let wanted = machine_pool
        .pointer("/spec/replicas")
        .and_then(Value::as_i64);
    let refs = machine_pool
        .pointer("/status/nodeRefs")
        .and_then(Value::as_array)
        .map_or(0, Vec::len) as i64;
    let ready = machine_pool
        .pointer("/status/deprecated/v1beta1/readyReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    wanted == Some(refs) && ready == refs && text(machine_pool, "/status/phase") == Some("Running")
}

/// Whether Cluster API has matched a Machine to its Node: a provider ID
/// copied from its infrastructure, a node reference, phase Running.
pub fn machine_matched(machine: &Value) -> bool {
    text(machine, "/spec/providerID").is_some()
        && text(machine, "/status/nodeRef/name").is_some()
        && text(machine, "/status/phase") == Some("Running")
}

/// Whether a MachineDeployment has every wanted replica ready.
pub fn deployment_ready(deployment: &Value) -> bool {
    let wanted = deployment.pointer("/spec/replicas").and_then(Value::as_i64);
    let ready = deployment
        .pointer("/status/readyReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    wanted == Some(ready)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn objects() -> Vec<Value> {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "d", "uid": "u0"}}),
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                   "metadata": {"name": "demo", "namespace": "d", "uid": "u1"}}),
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
                   "metadata": {"name": "tc", "namespace": "d", "uid": "u2"}}),
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
                   "metadata": {"name": "tmp", "namespace": "d", "uid": "u4"}}),
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachine",
                   "metadata": {"name": "tm", "namespace": "d", "uid": "u5"}}),
        ]
    }

    #[test]
    fn the_waited_objects_and_the_clusters_needing_a_kubeconfig() {
        assert_eq!(
            infrastructure(&objects()),
            [
                ("TerraformCluster", "tc".to_owned()),
                ("TerraformMachinePool", "tmp".to_owned()),
                ("TerraformMachine", "tm".to_owned()),
            ]
        );
        assert_eq!(
            clusters(&objects()).unwrap(),
            [("d".to_owned(), "demo".to_owned(), "u1".to_owned())]
        );
        let mut unread = objects();
        unread[1]["metadata"].as_object_mut().unwrap().remove("uid");
        assert!(
            clusters(&unread)
                .unwrap_err()
                .contains("Cluster demo has no metadata.uid")
        );
    }

    #[test]
    fn members_are_node_references_with_their_provider_ids() {
        let mp = json!({"spec": {"replicas": 2}, "status": {
            "phase": "Running", "nodeRefs": [{"name": "n-b"}, {"name": "n-a"}],
            "deprecated": {"v1beta1": {"readyReplicas": 2}}}});
        let nodes = [
            json!({"metadata": {"name": "n-a"}, "spec": {"providerID": "noop:///d/p/0"}}),
            json!({"metadata": {"name": "n-b"}, "spec": {"providerID": "noop:///d/p/1"}}),
        ];
        assert_eq!(
            members(&mp, &nodes),
            [
                Member {
                    node: "n-a".into(),
                    provider_id: "noop:///d/p/0".into()
                },
                Member {
                    node: "n-b".into(),
                    provider_id: "noop:///d/p/1".into()
                },
            ]
        );
        assert!(matched(&mp));
        let partial = members(&mp, &nodes[..1]);
        let b = partial.iter().find(|m| m.node == "n-b").unwrap();
        assert_eq!(b.provider_id, "<node not found>");
    }

    #[test]
    fn a_pool_is_matched_only_with_every_replica_ready_and_running() {
        let base = json!({"spec": {"replicas": 3}, "status": {
            "phase": "Running", "nodeRefs": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
            "deprecated": {"v1beta1": {"readyReplicas": 3}}}});
        assert!(matched(&base));
        let mut fewer = base.clone();
        fewer["spec"]["replicas"] = json!(4);
        assert!(!matched(&fewer));
        let mut unready = base.clone();
        unready["status"]["deprecated"]["v1beta1"]["readyReplicas"] = json!(2);
        assert!(!matched(&unready));
        let mut scaling = base.clone();
        scaling["status"]["phase"] = json!("ScalingUp");
        assert!(!matched(&scaling));
        let mut empty = json!({"spec": {"replicas": 0}, "status": {"phase": "Running"}});
        assert!(matched(&empty));
        empty["spec"]["replicas"] = json!(1);
        assert!(!matched(&empty));
    }

    #[test]
    fn machines_and_deployments_are_matched_and_ready() {
        let m = json!({"spec": {"providerID": "noop:///d/m"},
                       "status": {"nodeRef": {"name": "n"}, "phase": "Running"}});
        assert!(machine_matched(&m));
        let mut no_node = m.clone();
        no_node["status"].as_object_mut().unwrap().remove("nodeRef");
        assert!(!machine_matched(&no_node));
        let mut provisioning = m.clone();
        provisioning["status"]["phase"] = json!("Provisioned");
        assert!(!machine_matched(&provisioning));
        let md = json!({"spec": {"replicas": 2}, "status": {"readyReplicas": 2}});
        assert!(deployment_ready(&md));
        let mut short = md.clone();
        short["status"]["readyReplicas"] = json!(1);
        assert!(!deployment_ready(&short));
    }
}
