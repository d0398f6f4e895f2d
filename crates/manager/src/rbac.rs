//! What a Job's runner may do: the `captf-runner` ClusterRole, and the
//! ServiceAccount and RoleBinding the manager creates in each namespace that
//! runs Jobs. Least privilege: state Secrets and lock Leases of the
//! namespace, and progress events.

use std::collections::BTreeMap;

use captf_api::names::labels;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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
