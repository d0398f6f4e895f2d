//! Standing in for the Cluster API controllers, which the demo does not run:
//! the ownerReferences and `cluster.x-k8s.io/cluster-name` labels they would
//! put on the infrastructure objects once the Cluster and MachinePool exist.
//! Pure: from the applied objects (with their UIDs) to server-side apply
//! patches.

use captf_api::names::{capi, kinds, labels};
use serde_json::{Value, json};

/// The field manager of these writes, apart from the examples' own.
pub const FIELD_MANAGER: &str = "captf-demo-capi";

fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn is(object: &Value, group: &str, kind: &str) -> bool {
    let group_of = text(object, "/apiVersion")
        .and_then(|v| v.rsplit_once('/'))
        .map(|(g, _)| g);
    group_of == Some(group) && text(object, "/kind") == Some(kind)
}

fn find<'a>(
    objects: &'a [Value],
    group: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Option<&'a Value> {
    objects.iter().find(|o| {
        is(o, group, kind)
            && text(o, "/metadata/namespace") == Some(namespace)
            && text(o, "/metadata/name") == Some(name)
    })
}

/// The ownerReference Cluster API writes, pointing at `owner`.
fn owner_ref(owner: &Value) -> Result<Value, String> {
    let kind = text(owner, "/kind").unwrap_or_default();
    let name = text(owner, "/metadata/name").unwrap_or_default();
    let uid = text(owner, "/metadata/uid").ok_or_else(|| {
        format!("{kind} {name} has no metadata.uid (not read back from the apiserver?)")
    })?;
    Ok(json!({
        "apiVersion": format!("{}/{}", capi::GROUP, capi::VERSION),
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": true,
    }))
}

/// A patch that adds `owner` and the cluster-name label to `target`.
fn patch(target: &Value, cluster_name: &str, owner: Option<&Value>) -> Result<Value, String> {
    let mut metadata = json!({
        "name": text(target, "/metadata/name"),
        "namespace": text(target, "/metadata/namespace"),
        "labels": {labels::CLUSTER_NAME: cluster_name},
    });
    if let Some(owner) = owner {
        metadata["ownerReferences"] = json!([owner_ref(owner)?]);
    }
    Ok(json!({
        "apiVersion": target["apiVersion"],
        "kind": target["kind"],
        "metadata": metadata,
    }))
}

/// The infrastructure object `reference` (an `infrastructureRef`) names.
fn referenced<'a>(
    objects: &'a [Value],
    from: &Value,
    reference: Option<&Value>,
    kind: &str,
) -> Result<&'a Value, String> {
    let from_name = format!(
        "{} {}",
        text(from, "/kind").unwrap_or_default(),
        text(from, "/metadata/name").unwrap_or_default()
    );
    let reference = reference.ok_or_else(|| format!("{from_name} has no infrastructureRef"))?;
    let group = text(reference, "/apiGroup").unwrap_or_default();
    let ref_kind = text(reference, "/kind").unwrap_or_default();
    if group != captf_api::GROUP || ref_kind != kind {
        return Err(format!(
            "{from_name}: infrastructureRef names {ref_kind} of group {group:?}, not a {kind}"
        ));
    }
    let name = text(reference, "/name").unwrap_or_default();
    let namespace = text(from, "/metadata/namespace").unwrap_or_default();
    find(objects, captf_api::GROUP, kind, namespace, name)
        .ok_or_else(|| format!("{from_name}: {kind} {name} is not among the example objects"))
}

/// The patches Cluster API would make for `objects`: each Cluster owns the
/// TerraformCluster it references; each MachinePool owns its
/// TerraformMachinePool and is owned by its Cluster; all of them carry the
/// cluster-name label.
pub fn ownership(objects: &[Value]) -> Result<Vec<Value>, String> {
    let mut patches = Vec::new();
    for cluster in objects.iter().filter(|o| is(o, capi::GROUP, capi::CLUSTER)) {
        let name = text(cluster, "/metadata/name").unwrap_or_default();
        let infra = referenced(
            objects,
            cluster,
            cluster.pointer("/spec/infrastructureRef"),
            kinds::TERRAFORM_CLUSTER,
        )?;
        patches.push(patch(infra, name, Some(cluster))?);
    }
    for pool in objects
        .iter()
        .filter(|o| is(o, capi::GROUP, capi::MACHINE_POOL))
    {
        let cluster_name = text(pool, "/spec/clusterName").unwrap_or_default();
        let namespace = text(pool, "/metadata/namespace").unwrap_or_default();
        let infra = referenced(
            objects,
            pool,
            pool.pointer("/spec/template/spec/infrastructureRef"),
            kinds::TERRAFORM_MACHINE_POOL,
        )?;
        let cluster = find(objects, capi::GROUP, capi::CLUSTER, namespace, cluster_name);
        patches.push(patch(pool, cluster_name, cluster)?);
        patches.push(patch(infra, cluster_name, Some(pool))?);
    }
    Ok(patches)
}

/// The infrastructure objects the demo waits for: `(kind, name)` of every
/// TerraformCluster and TerraformMachinePool, clusters first.
pub fn infrastructure(objects: &[Value]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for kind in [kinds::TERRAFORM_CLUSTER, kinds::TERRAFORM_MACHINE_POOL] {
        for o in objects.iter().filter(|o| is(o, captf_api::GROUP, kind)) {
            out.push((
                kind,
                text(o, "/metadata/name").unwrap_or_default().to_owned(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects() -> Vec<Value> {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "d", "uid": "u0"}}),
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                   "metadata": {"name": "demo", "namespace": "d", "uid": "u1"},
                   "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                  "kind": "TerraformCluster", "name": "tc"}}}),
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
                   "metadata": {"name": "tc", "namespace": "d", "uid": "u2"}}),
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
                   "metadata": {"name": "mp", "namespace": "d", "uid": "u3"},
                   "spec": {"clusterName": "demo", "template": {"spec": {"infrastructureRef":
                       {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "TerraformMachinePool", "name": "tmp"}}}}}),
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
                   "metadata": {"name": "tmp", "namespace": "d", "uid": "u4"}}),
        ]
    }

    fn owner(kind: &str, name: &str, uid: &str) -> Value {
        json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind, "name": name,
                "uid": uid, "controller": true}])
    }

    #[test]
    fn owners_and_labels_as_cluster_api_sets_them() {
        let patches = ownership(&objects()).unwrap();
        let label = json!({"cluster.x-k8s.io/cluster-name": "demo"});
        let summary: Vec<(&str, &str, &Value, &Value)> = patches
            .iter()
            .map(|p| {
                (
                    p["kind"].as_str().unwrap(),
                    p["metadata"]["name"].as_str().unwrap(),
                    &p["metadata"]["labels"],
                    &p["metadata"]["ownerReferences"],
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "TerraformCluster",
                    "tc",
                    &label,
                    &owner("Cluster", "demo", "u1")
                ),
                ("MachinePool", "mp", &label, &owner("Cluster", "demo", "u1")),
                (
                    "TerraformMachinePool",
                    "tmp",
                    &label,
                    &owner("MachinePool", "mp", "u3")
                ),
            ]
        );
        assert_eq!(
            patches[0]["apiVersion"],
            "infrastructure.cluster.x-k8s.io/v1alpha1"
        );
        assert_eq!(patches[0]["metadata"]["namespace"], "d");
        assert_eq!(
            infrastructure(&objects()),
            [
                ("TerraformCluster", "tc".to_owned()),
                ("TerraformMachinePool", "tmp".to_owned())
            ]
        );
    }

    #[test]
    fn a_pool_without_its_cluster_gets_only_the_label() {
        let mut objs = objects();
        objs.remove(1); // the Cluster
        objs.remove(1); // the TerraformCluster
        let patches = ownership(&objs).unwrap();
        assert_eq!(patches[0]["kind"], "MachinePool");
        assert!(patches[0]["metadata"].get("ownerReferences").is_none());
        assert_eq!(
            patches[1]["metadata"]["ownerReferences"],
            owner("MachinePool", "mp", "u3")
        );
    }

    #[test]
    fn broken_references_are_named() {
        let mut objs = objects();
        objs.remove(2); // the TerraformCluster
        let err = ownership(&objs).unwrap_err();
        assert_eq!(
            err,
            "Cluster demo: TerraformCluster tc is not among the example objects"
        );

        let mut objs = objects();
        objs[1]["spec"]["infrastructureRef"]["kind"] = json!("AWSCluster");
        let err = ownership(&objs).unwrap_err();
        assert!(err.contains("names AWSCluster"), "{err}");

        let mut objs = objects();
        objs[1]["metadata"].as_object_mut().unwrap().remove("uid");
        let err = ownership(&objs).unwrap_err();
        assert!(err.contains("Cluster demo has no metadata.uid"), "{err}");

        let mut objs = objects();
        objs[3]["spec"]["template"]["spec"]
            .as_object_mut()
            .unwrap()
            .remove("infrastructureRef");
        assert_eq!(
            ownership(&objs).unwrap_err(),
            "MachinePool mp has no infrastructureRef"
        );
    }
}
