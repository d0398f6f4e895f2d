//! The deployment manifests in `config/` agree with the code and with each
//! other: the runner ClusterRole is the one the manager binds, the manager's
//! ClusterRole covers what it does, and the Deployment, ServiceAccount,
//! binding and webhook Service fit together.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde::Deserialize;
use serde::de::DeserializeOwned;

fn config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

/// The documents of a YAML file, typed.
fn docs<T: DeserializeOwned>(relative: &str, kind: &str) -> Vec<T> {
    let path = config().join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).expect("valid YAML"))
        .filter(|v| v.get("kind").and_then(|k| k.as_str()) == Some(kind))
        .map(|v| serde_yaml::from_value(v).unwrap_or_else(|e| panic!("{relative}: {kind}: {e}")))
        .collect()
}

fn one<T: DeserializeOwned>(relative: &str, kind: &str) -> T {
    let mut all = docs::<T>(relative, kind);
    assert_eq!(all.len(), 1, "{relative} must hold exactly one {kind}");
    all.remove(0)
}

#[test]
fn the_runner_role_manifest_is_the_role_the_manager_binds() {
    let role: ClusterRole = one("rbac/runner_role.yaml", "ClusterRole");
    assert_eq!(role, captf_manager::rbac::runner_cluster_role());
}

/// True when `role` lets its holder do `verb` on `group`/`resource`
/// (optionally only for `name`).
fn allows(role: &ClusterRole, group: &str, resource: &str, verb: &str, name: Option<&str>) -> bool {
    role.rules.iter().flatten().any(|r| {
        let has = |list: &Option<Vec<String>>, v: &str| {
            list.as_ref()
                .is_some_and(|l| l.iter().any(|x| x == v || x == "*"))
        };
        let names_ok = match (&r.resource_names, name) {
            (None, _) => true,
            (Some(names), Some(n)) => names.iter().any(|x| x == n),
            (Some(_), None) => false,
        };
        has(&r.api_groups, group)
            && has(&r.resources, resource)
            && r.verbs.iter().any(|v| v == verb || v == "*")
            && names_ok
    })
}

#[test]
fn the_manager_role_covers_what_the_manager_does() {
    let role: ClusterRole = one("rbac/role.yaml", "ClusterRole");
    let infra = "infrastructure.cluster.x-k8s.io";
    let rw = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let ro = ["get", "list", "watch"];
    let mut wanted: Vec<(&str, &str, &[&str])> = vec![
        ("cluster.x-k8s.io", "clusters", &ro),
        (
            "cluster.x-k8s.io",
            "machinepools",
            &["get", "list", "watch", "patch"],
        ),
        (
            "cluster.x-k8s.io",
            "machines",
            &["get", "list", "watch", "patch"],
        ),
        ("batch", "jobs", &rw),
        ("", "pods", &ro),
        ("", "secrets", &rw),
        ("", "configmaps", &ro),
        ("coordination.k8s.io", "leases", &rw),
        ("events.k8s.io", "events", &["create", "patch"]),
        ("", "serviceaccounts", &rw),
        ("rbac.authorization.k8s.io", "rolebindings", &rw),
        ("", "namespaces", &ro),
        // The metrics endpoint reviews each scraper's token and access.
        ("authentication.k8s.io", "tokenreviews", &["create"]),
        ("authorization.k8s.io", "subjectaccessreviews", &["create"]),
    ];
    let reconciled = [
        "terraformclusters",
        "terraformmachines",
        "terraformmachinepools",
        "terraformmachinetemplates",
        "terraformclusteridentities",
        "terraformplans",
    ];
    let status: Vec<String> = reconciled.iter().map(|r| format!("{r}/status")).collect();
    for r in reconciled {
        wanted.push((infra, r, &rw));
    }
    for s in &status {
        wanted.push((infra, s, &["get", "update", "patch"]));
    }
    let finalized = [
        "terraformclusters/finalizers",
        "terraformmachines/finalizers",
        "terraformmachinepools/finalizers",
        "terraformclusteridentities/finalizers",
    ];
    for f in finalized {
        wanted.push((infra, f, &["update"]));
    }
    for (group, resource, verbs) in wanted {
        for verb in verbs {
            assert!(
                allows(&role, group, resource, verb, None),
                "the manager role lacks {verb} on {group}/{resource}"
            );
        }
    }
    // It binds the runner role, and no other, without holding it.
    assert!(allows(
        &role,
        "rbac.authorization.k8s.io",
        "clusterroles",
        "bind",
        Some("captf-runner")
    ));
    assert!(!allows(
        &role,
        "rbac.authorization.k8s.io",
        "clusterroles",
        "bind",
        Some("cluster-admin")
    ));
    assert!(!allows(
        &role,
        "rbac.authorization.k8s.io",
        "clusterroles",
        "escalate",
        Some("captf-runner")
    ));
    // Nothing cluster-wide beyond what is listed: no wildcards.
    for rule in role.rules.iter().flatten() {
        for list in [&rule.api_groups, &rule.resources].into_iter().flatten() {
            assert!(!list.iter().any(|x| x == "*"), "wildcard in {rule:?}");
        }
        assert!(
            !rule.verbs.iter().any(|v| v == "*"),
            "wildcard verb in {rule:?}"
        );
    }
}

#[test]
fn every_crd_of_the_project_is_installed_by_the_kustomization() {
    let text = std::fs::read_to_string(config().join("crd/kustomization.yaml")).unwrap();
    let listed: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let listed: BTreeSet<String> = listed["resources"]
        .as_sequence()
        .expect("resources list")
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let present: BTreeSet<String> = std::fs::read_dir(config().join("crd/bases"))
        .unwrap()
        .map(|e| format!("bases/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    assert_eq!(listed, present);
}

fn container<'a>(d: &'a Deployment, name: &str) -> &'a Container {
    let spec = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    spec.containers
        .iter()
        .find(|c| c.name == name)
        .expect("the container")
}

#[test]
fn the_deployment_matches_the_shipped_contract() {
    let d: Deployment = one("manager/manager.yaml", "Deployment");
    assert_eq!(d.metadata.name.as_deref(), Some("captf-controller-manager"));
    assert_eq!(d.metadata.namespace.as_deref(), Some("captf-system"));
    let pod = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(pod.termination_grace_period_seconds, Some(30));
    let c = container(&d, "manager");

    let args = c.args.clone().unwrap_or_default();
    for arg in [
        "--leader-elect",
        "--diagnostics-address=:8443",
        "--insecure-diagnostics=false",
        "--webhook-port=9443",
    ] {
        assert!(args.iter().any(|a| a == arg), "missing arg {arg}");
    }

    let env = c.env.clone().unwrap_or_default();
    let field_ref = |name: &str| {
        env.iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.clone())
    };
    assert_eq!(
        field_ref("POD_NAMESPACE").as_deref(),
        Some("metadata.namespace")
    );
    assert_eq!(
        field_ref("SERVICE_ACCOUNT_NAME").as_deref(),
        Some("spec.serviceAccountName")
    );
    let image = env
        .iter()
        .find(|e| e.name == "CAPTF_MANAGER_IMAGE")
        .and_then(|e| e.value.clone());
    assert_eq!(
        image.as_deref(),
        c.image.as_deref(),
        "the runner comes from the manager's own image"
    );

    // Probes on the health port.
    let health_port = c
        .ports
        .iter()
        .flatten()
        .find(|p| p.container_port == 9440)
        .and_then(|p| p.name.clone())
        .expect("a named port 9440");
    for (probe, path) in [
        (&c.liveness_probe, "/healthz"),
        (&c.readiness_probe, "/readyz"),
    ] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .expect("an HTTP probe");
        assert_eq!(get.path.as_deref(), Some(path));
        let port = serde_json::to_value(&get.port).unwrap();
        assert!(
            port == health_port.as_str() || port == 9440,
            "{path} probe port {port}"
        );
    }
    let pre_stop = c
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        .expect("a preStop hook");
    assert_eq!(pre_stop.sleep.as_ref().map(|s| s.seconds), Some(5));

    // Hardened: nothing a restricted namespace would refuse.
    let sc = c
        .security_context
        .as_ref()
        .expect("a container security context");
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_ne!(sc.privileged, Some(true));
    let drop = sc
        .capabilities
        .as_ref()
        .and_then(|c| c.drop.clone())
        .unwrap_or_default();
    assert_eq!(drop, ["ALL"]);
    let seccomp = sc
        .seccomp_profile
        .as_ref()
        .or(pod
            .security_context
            .as_ref()
            .and_then(|p| p.seccomp_profile.as_ref()))
        .map(|s| s.type_.clone());
    assert_eq!(seccomp.as_deref(), Some("RuntimeDefault"));

    // The webhook cert dir the manager reads by default is mounted.
    let mounts = c.volume_mounts.clone().unwrap_or_default();
    assert!(
        mounts
            .iter()
            .any(|m| m.mount_path.trim_end_matches('/') == "/tmp/k8s-webhook-server/serving-certs")
    );
}

#[test]
fn service_account_binding_deployment_and_webhook_service_fit_together() {
    let sa: ServiceAccount = one("rbac/service_account.yaml", "ServiceAccount");
    let role: ClusterRole = one("rbac/role.yaml", "ClusterRole");
    let binding: ClusterRoleBinding = one("rbac/role_binding.yaml", "ClusterRoleBinding");
    let d: Deployment = one("manager/manager.yaml", "Deployment");
    let service: Service = one("webhook/service.yaml", "Service");

    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(Some(&binding.role_ref.name), role.metadata.name.as_ref());
    let subject = &binding.subjects.as_ref().unwrap()[0];
    assert_eq!(subject.kind, "ServiceAccount");
    assert_eq!(Some(&subject.name), sa.metadata.name.as_ref());
    assert_eq!(subject.namespace, sa.metadata.namespace);

    let spec = d.spec.as_ref().unwrap();
    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.service_account_name, sa.metadata.name);
    assert_eq!(d.metadata.namespace, sa.metadata.namespace);

    // The webhook Service reaches the manager's pods, on the webhook port.
    let pod_labels = spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .clone()
        .unwrap();
    let selector = service.spec.as_ref().unwrap().selector.clone().unwrap();
    for (k, v) in &selector {
        assert_eq!(
            pod_labels.get(k),
            Some(v),
            "webhook Service selector {k}={v}"
        );
    }
    let match_labels = spec.selector.match_labels.as_ref().unwrap();
    assert!(
        match_labels
            .iter()
            .all(|(k, v)| pod_labels.get(k) == Some(v))
    );
    let target = serde_json::to_value(
        &service.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].target_port,
    )
    .unwrap();
    let webhook_port = container(&d, "manager")
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("webhook-server"))
        .map(|p| p.container_port);
    assert_eq!(Some(target), webhook_port.map(serde_json::Value::from));
}
