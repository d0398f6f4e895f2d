//! Rules that need facts read from the API (which Machines reference a
//! TerraformMachine, who uses an identity, what the requester may read).
//! The webhook server gathers the facts; the decisions stay pure.

use kube::ResourceExt;

use super::{Operation, Request, Verdict, ViolationKind, Violations};
use crate::TerraformMachine;
use crate::identity::TerraformClusterIdentity;
use crate::names::{annotations, kinds};

/// A Cluster API Machine as the TerraformMachine delete check sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineReference {
    pub machine: String,
    pub deleting: bool,
    /// API group, kind and name of `spec.infrastructureRef`.
    pub group: String,
    pub kind: String,
    pub name: String,
}

/// `delete.validation.terraformmachine…`: a TerraformMachine that a live
/// Machine still points at must be deleted through that Machine, so it is
/// drained and its hooks run. `cluster_paused` is the `spec.paused` of the
/// Cluster its label names (`None`: no such Cluster).
pub fn terraform_machine_delete(
    machine: &TerraformMachine,
    machines: &[MachineReference],
    cluster_paused: Option<bool>,
) -> Verdict {
    let mut v = Violations::default();
    let moving = machine
        .annotations()
        .contains_key(annotations::DELETE_FOR_MOVE);
    if moving && cluster_paused == Some(true) {
        return v.into_verdict(vec![]);
    }
    let name = machine.name_any();
    if let Some(owner) = machines.iter().find(|m| {
        !m.deleting
            && m.group == crate::GROUP
            && m.kind == kinds::TERRAFORM_MACHINE
            && m.name == name
    }) {
        v.push(
            "metadata.name",
            ViolationKind::Forbidden,
            format!(
                "Machine {} references this TerraformMachine; delete that Machine instead so the node is drained and its lifecycle hooks run",
                owner.machine
            ),
        );
    }
    v.into_verdict(vec![])
}

/// Whether creating or updating an identity needs the requester's own
/// right to read its Secret checked: on create, and when `secretRef` or
/// `allowedNamespaces` changed.
pub fn identity_access_review_due(
    req: &Request,
    new: &TerraformClusterIdentity,
    old: Option<&TerraformClusterIdentity>,
) -> bool {
    match (req.operation, old) {
        (Operation::Create, _) | (Operation::Update, None) => new.spec.secret_ref.is_some(),
        (Operation::Update, Some(old)) => {
            new.spec.secret_ref.is_some()
                && (new.spec.secret_ref != old.spec.secret_ref
                    || new.spec.allowed_namespaces != old.spec.allowed_namespaces)
        }
        (Operation::Delete, _) => false,
    }
}

/// The violation for a requester who may not read the identity's Secret.
pub fn identity_access_denied(username: &str, identity: &TerraformClusterIdentity) -> Verdict {
    let mut v = Violations::default();
    if let Some(secret) = &identity.spec.secret_ref {
        v.push(
            "spec.secretRef",
            ViolationKind::Forbidden,
            format!(
                "user \"{username}\" may not get Secret {}/{}",
                secret.namespace, secret.name
            ),
        );
    }
    v.into_verdict(vec![])
}

/// `validation.terraformclusteridentity…` on DELETE: refused while any
/// object resolves to the identity (`users`, as `Kind namespace/name`) or
/// a namespace still holds its mirror.
pub fn terraform_cluster_identity_delete(
    identity: &TerraformClusterIdentity,
    users: &[String],
) -> Verdict {
    let mut v = Violations::default();
    if let Some(user) = users.first() {
        v.push(
            "metadata.name",
            ViolationKind::Forbidden,
            format!("the identity is still used by {user}"),
        );
    }
    let namespaces = identity
        .status
        .as_ref()
        .and_then(|s| s.namespaces.clone())
        .unwrap_or_default();
    if !namespaces.is_empty() {
        v.push(
            "status.namespaces",
            ViolationKind::Forbidden,
            format!(
                "credentials are still mirrored into namespaces {}",
                namespaces.join(", ")
            ),
        );
    }
    v.into_verdict(vec![])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tm(annotations: serde_json::Value) -> TerraformMachine {
        serde_json::from_value(json!({
            "apiVersion": crate::API_VERSION, "kind": "TerraformMachine",
            "metadata": {"name": "tm", "namespace": "ns", "annotations": annotations},
            "spec": {"source": {"image": "a/b:v1"}},
        }))
        .unwrap()
    }

    fn machine(name: &str, target: &str, deleting: bool) -> MachineReference {
        MachineReference {
            machine: name.into(),
            deleting,
            group: crate::GROUP.into(),
            kind: "TerraformMachine".into(),
            name: target.into(),
        }
    }

    #[test]
    fn machine_delete_rules() {
        let plain = tm(json!({}));
        assert!(terraform_machine_delete(&plain, &[], None).allowed());
        assert!(terraform_machine_delete(&plain, &[machine("m0", "other", false)], None).allowed());
        assert!(terraform_machine_delete(&plain, &[machine("m1", "tm", true)], None).allowed());
        let refused = terraform_machine_delete(&plain, &[machine("m1", "tm", false)], None);
        assert!(!refused.allowed());
        assert!(refused.violations[0].detail.contains("Machine m1"));

        let moving = tm(json!({"clusterctl.cluster.x-k8s.io/delete-for-move": ""}));
        let live = [machine("m1", "tm", false)];
        assert!(terraform_machine_delete(&moving, &live, Some(true)).allowed());
        assert!(!terraform_machine_delete(&moving, &live, Some(false)).allowed());
        assert!(!terraform_machine_delete(&moving, &live, None).allowed());
    }

    fn identity(
        spec: serde_json::Value,
        namespaces: Option<Vec<&str>>,
    ) -> TerraformClusterIdentity {
        let mut value = json!({
            "apiVersion": crate::API_VERSION, "kind": "TerraformClusterIdentity",
            "metadata": {"name": "id"}, "spec": spec,
        });
        if let Some(ns) = namespaces {
            value["status"] = json!({"namespaces": ns});
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn access_review_timing() {
        let a = identity(json!({"secretRef": {"name": "s", "namespace": "n"}}), None);
        let b = identity(json!({"secretRef": {"name": "s2", "namespace": "n"}}), None);
        let widened = identity(
            json!({"secretRef": {"name": "s", "namespace": "n"}, "allowedNamespaces": {"selector": {}}}),
            None,
        );
        let create = Request::create("u");
        let update = Request::update("u");
        assert!(identity_access_review_due(&create, &a, None));
        assert!(!identity_access_review_due(&update, &a, Some(&a)));
        assert!(identity_access_review_due(&update, &b, Some(&a)));
        assert!(identity_access_review_due(&update, &widened, Some(&a)));
        assert!(identity_access_review_due(&update, &a, Some(&widened)));
        let denied = identity_access_denied("bob", &a);
        assert_eq!(
            denied.violations[0].detail,
            "user \"bob\" may not get Secret n/s"
        );
    }

    #[test]
    fn identity_delete_rules() {
        let free = identity(
            json!({"secretRef": {"name": "s", "namespace": "n"}}),
            Some(vec![]),
        );
        assert!(terraform_cluster_identity_delete(&free, &[]).allowed());
        let used = terraform_cluster_identity_delete(&free, &["TerraformMachinePool a/p".into()]);
        assert_eq!(used.violations.len(), 1);
        assert!(
            used.violations[0]
                .detail
                .contains("TerraformMachinePool a/p")
        );
        let mirrored = identity(
            json!({"secretRef": {"name": "s", "namespace": "n"}}),
            Some(vec!["a", "b"]),
        );
        let verdict = terraform_cluster_identity_delete(&mirrored, &[]);
        assert_eq!(verdict.violations[0].field, "status.namespaces");
        assert!(verdict.violations[0].detail.contains("a, b"));
    }
}
