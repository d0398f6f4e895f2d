//! What a Job's runner may do. Each TerraformCluster, TerraformMachine and
//! TerraformMachinePool runs its Jobs under a ServiceAccount of its own,
//! bound to a Role that names only that object's state Secrets and lock
//! Lease (plus the `create` RBAC cannot scope by name, and progress events):
//! a module image, third-party code, reaches no other object's state, no
//! credentials mirror and no workload cluster's kubeconfig.
//!
//! The namespace-wide `captf-runner` ClusterRole, ServiceAccount and
//! RoleBinding are what earlier releases used; the ClusterRole stays for
//! operators' own runner ServiceAccounts (`spec.jobs.serviceAccountName`).

use std::collections::BTreeMap;

use captf_api::names::labels;
use captf_contract::state_names;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// Name of the ClusterRole, and of the ServiceAccount and RoleBinding made
/// in each namespace.
pub const RUNNER: &str = "captf-runner";

fn rule(group: &str, resource: &str, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(vec![resource.to_owned()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..Default::default()
    }
}

fn managed_labels() -> Option<BTreeMap<String, String>> {
    Some(BTreeMap::from([(
        labels::MANAGED.to_owned(),
        "true".to_owned(),
    )]))
}

/// Name of an object's runner ServiceAccount, Role and RoleBinding:
/// `captf-runner-<state suffix>`. The suffix is unique per namespace, kind
/// and name and short, so the name is valid whatever the object's name.
pub fn object_runner_name(state_suffix: &str) -> String {
    format!("{RUNNER}-{state_suffix}")
}

/// The runner identity of one object: its namespace, state suffix and the
/// owner reference that removes the identity with the object.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectRunner {
    pub namespace: String,
    pub state_suffix: String,
    pub owner: OwnerReference,
}

impl ObjectRunner {
    pub fn name(&self) -> String {
        object_runner_name(&self.state_suffix)
    }

    fn meta(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name()),
            namespace: Some(self.namespace.clone()),
            labels: managed_labels(),
            owner_references: Some(vec![self.owner.clone()]),
            ..Default::default()
        }
    }

    pub fn service_account(&self) -> ServiceAccount {
        ServiceAccount {
            metadata: self.meta(),
            ..Default::default()
        }
    }

    /// What the `kubernetes` backend calls, through the runner's state proxy
    /// (`crates/runner/src/state_proxy.rs`), which answers the backend's
    /// lists from GETs: no `list` at all. `get`, `update` and `delete` name
    /// the state's Secrets (chunks included) and its lock; `create` cannot be
    /// scoped by name, so it is granted alone. Lease `delete` only serves
    /// deleting a workspace, which a runner never does.
    pub fn role(&self) -> Role {
        let named = |group: &str, resource: &str, verbs: &[&str], names: Vec<String>| {
            let mut r = rule(group, resource, verbs);
            r.resource_names = Some(names);
            r
        };
        let suffix = &self.state_suffix;
        Role {
            metadata: self.meta(),
            rules: Some(vec![
                named(
                    "",
                    "secrets",
                    &["get", "update", "delete"],
                    state_names::state_secrets(suffix),
                ),
                rule("", "secrets", &["create"]),
                named(
                    "coordination.k8s.io",
                    "leases",
                    &["get", "update"],
                    vec![state_names::state_lock_lease(suffix)],
                ),
                rule("coordination.k8s.io", "leases", &["create"]),
                rule("events.k8s.io", "events", &["create"]),
            ]),
        }
    }

    pub fn role_binding(&self) -> RoleBinding {
        RoleBinding {
            metadata: self.meta(),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".to_owned(),
                kind: "Role".to_owned(),
                name: self.name(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: self.name(),
                namespace: Some(self.namespace.clone()),
                api_group: None,
            }]),
        }
    }
}

/// The runner's permissions: state Secrets (the backend reads, writes and,
/// for chunked state, deletes them), lock Leases (never deleted by the
/// runner), and events.
pub fn runner_cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(RUNNER.to_owned()),
            labels: managed_labels(),
            ..Default::default()
        },
        rules: Some(vec![
            rule(
                "",
                "secrets",
                &["get", "list", "create", "update", "delete"],
            ),
            rule(
                "coordination.k8s.io",
                "leases",
                &["get", "create", "update"],
            ),
            rule("events.k8s.io", "events", &["create"]),
        ]),
        aggregation_rule: None,
    }
}

/// The default runner ServiceAccount of `namespace`.
pub fn runner_service_account(namespace: &str) -> ServiceAccount {
    ServiceAccount {
        metadata: ObjectMeta {
            name: Some(RUNNER.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: managed_labels(),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Binds `service_account` in `namespace` to the runner ClusterRole, for
/// that namespace only.
pub fn runner_role_binding(namespace: &str, service_account: &str) -> RoleBinding {
    RoleBinding {
        metadata: ObjectMeta {
            name: Some(RUNNER.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: managed_labels(),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: RUNNER.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: service_account.to_owned(),
            namespace: Some(namespace.to_owned()),
            api_group: None,
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_never_deletes_leases_and_reaches_nothing_else() {
        let role = runner_cluster_role();
        let rules = role.rules.unwrap();
        let grants: Vec<(String, String, Vec<String>)> = rules
            .into_iter()
            .map(|r| {
                (
                    r.api_groups.unwrap().join(","),
                    r.resources.unwrap().join(","),
                    r.verbs,
                )
            })
            .collect();
        assert_eq!(
            grants,
            [
                (
                    "".into(),
                    "secrets".into(),
                    vec![
                        "get".into(),
                        "list".into(),
                        "create".into(),
                        "update".into(),
                        "delete".into()
                    ]
                ),
                (
                    "coordination.k8s.io".into(),
                    "leases".into(),
                    vec!["get".into(), "create".into(), "update".into()]
                ),
                (
                    "events.k8s.io".into(),
                    "events".into(),
                    vec!["create".into()]
                ),
            ]
        );
    }

    fn object_runner() -> ObjectRunner {
        ObjectRunner {
            namespace: "team-a".into(),
            state_suffix: "0123456789abcdef-mp".into(),
            owner: OwnerReference {
                api_version: "infrastructure.cluster.x-k8s.io/v1beta2".into(),
                kind: "TerraformMachinePool".into(),
                name: "pool-a".into(),
                uid: "u-1".into(),
                ..Default::default()
            },
        }
    }

    #[test]
    fn an_objects_runner_reaches_its_own_state_only() {
        let r = object_runner();
        let rules = r.role().rules.unwrap();
        type Grant = (String, String, Vec<String>, Option<Vec<String>>);
        let view: Vec<Grant> = rules
            .into_iter()
            .map(|r| {
                (
                    r.api_groups.unwrap().join(","),
                    r.resources.unwrap().join(","),
                    r.verbs,
                    r.resource_names,
                )
            })
            .collect();
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let base = "tfstate-default-0123456789abcdef-mp";
        let mut secrets = vec![base.to_owned()];
        secrets.extend((1..8).map(|i| format!("{base}-part-{i}")));
        assert_eq!(
            view,
            [
                (
                    "".into(),
                    "secrets".into(),
                    v(&["get", "update", "delete"]),
                    Some(secrets)
                ),
                ("".into(), "secrets".into(), v(&["create"]), None),
                (
                    "coordination.k8s.io".into(),
                    "leases".into(),
                    v(&["get", "update"]),
                    Some(vec![format!("lock-{base}")])
                ),
                (
                    "coordination.k8s.io".into(),
                    "leases".into(),
                    v(&["create"]),
                    None
                ),
                (
                    "events.k8s.io".into(),
                    "events".into(),
                    v(&["create"]),
                    None
                ),
            ]
        );
        // No rule lists, watches or patches anything.
        let role = r.role();
        for rule in role.rules.as_ref().unwrap() {
            for verb in ["list", "watch", "patch", "*"] {
                assert!(!rule.verbs.iter().any(|x| x == verb), "{verb} in {rule:?}");
            }
        }
    }

    #[test]
    fn an_objects_identity_is_owned_by_it_and_bound_to_its_own_role() {
        let r = object_runner();
        let name = "captf-runner-0123456789abcdef-mp";
        let sa = r.service_account();
        let role = r.role();
        let rb = r.role_binding();
        for meta in [&sa.metadata, &role.metadata, &rb.metadata] {
            assert_eq!(meta.name.as_deref(), Some(name));
            assert_eq!(meta.namespace.as_deref(), Some("team-a"));
            assert_eq!(meta.owner_references.as_ref().unwrap()[0].uid, "u-1");
        }
        assert_eq!(
            (rb.role_ref.kind.as_str(), rb.role_ref.name.as_str()),
            ("Role", name)
        );
        let s = &rb.subjects.unwrap()[0];
        assert_eq!(
            (s.name.as_str(), s.namespace.as_deref()),
            (name, Some("team-a"))
        );
    }

    #[test]
    fn the_binding_is_namespaced_to_its_service_account() {
        let b = runner_role_binding("team-a", "custom-runner");
        assert_eq!(b.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(b.role_ref.kind, "ClusterRole");
        let s = &b.subjects.unwrap()[0];
        assert_eq!(
            (s.kind.as_str(), s.name.as_str(), s.namespace.as_deref()),
            ("ServiceAccount", "custom-runner", Some("team-a"))
        );
        assert_eq!(
            runner_service_account("team-a").metadata.name.as_deref(),
            Some(RUNNER)
        );
    }
}
