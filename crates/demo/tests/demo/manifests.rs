//! The deployment manifests in `config/` agree with the code and with each
//! other: the shipped runner ClusterRole is the code's, the manager's
//! ClusterRole grants what it calls and no more, and the Deployment, ServiceAccount,
//! binding and webhook Service fit together.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde::Deserialize;
use serde::de::DeserializeOwned;

fn config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

/// The image reference the release of these tests is made with.
const RELEASE_IMAGE: &str = "ghcr.io/captf-io/captf-manager:v0.1.0";

/// What an operator installs: `out/infrastructure-components.yaml` as
/// `make release` writes it (`hack/release-manifests.sh`), as text.
fn components_text() -> &'static str {
    static BUILT: OnceLock<String> = OnceLock::new();
    BUILT.get_or_init(|| {
        let kustomize = captf_testenv::assets::kustomize().expect("the kustomize test asset");
        let out = tempfile::tempdir().expect("a temporary folder");
        let run = std::process::Command::new("bash")
            .arg(config().join("../hack/release-manifests.sh"))
            .arg(out.path())
            .arg(RELEASE_IMAGE)
            .env("KUSTOMIZE", kustomize)
            .output()
            .expect("running hack/release-manifests.sh");
        assert!(
            run.status.success(),
            "hack/release-manifests.sh: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        for file in [
            "metadata.yaml",
            "cluster-template.yaml",
            "cluster-template-clusterclass.yaml",
            "clusterclass-noop.yaml",
            "identity.yaml",
        ] {
            assert!(out.path().join(file).is_file(), "the release lacks {file}");
        }
        std::fs::read_to_string(out.path().join("infrastructure-components.yaml"))
            .expect("the components file")
    })
}

/// The components' objects, in file order.
fn components() -> &'static [serde_yaml::Value] {
    static PARSED: OnceLock<Vec<serde_yaml::Value>> = OnceLock::new();
    PARSED.get_or_init(|| {
        serde_yaml::Deserializer::from_str(components_text())
            .map(|d| serde_yaml::Value::deserialize(d).expect("valid YAML"))
            .collect()
    })
}

/// The built object of `kind` named `name`, typed.
fn one<T: DeserializeOwned>(kind: &str, name: &str) -> T {
    let found: Vec<&serde_yaml::Value> = components()
        .iter()
        .filter(|v| {
            v["kind"].as_str() == Some(kind) && v["metadata"]["name"].as_str() == Some(name)
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "the components must hold exactly one {kind} {name}"
    );
    serde_yaml::from_value(found[0].clone()).unwrap_or_else(|e| panic!("{kind} {name}: {e}"))
}

#[test]
fn the_runner_role_manifest_is_the_codes_runner_role() {
    let role: ClusterRole = one("ClusterRole", "captf-runner");
    let wanted = captf_manager::rbac::runner_cluster_role();
    assert_eq!(role.metadata.name, wanted.metadata.name);
    assert_eq!(role.rules, wanted.rules);
}

#[test]
fn the_runner_create_policy_manifest_is_the_codes_policy() {
    use captf_manager::runner_admission as admission;
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let policy: ValidatingAdmissionPolicy =
        one("ValidatingAdmissionPolicy", admission::RUNNER_CREATES);
    assert_eq!(policy.spec, admission::runner_create_policy().spec);
    let binding: ValidatingAdmissionPolicyBinding = one(
        "ValidatingAdmissionPolicyBinding",
        admission::RUNNER_CREATES,
    );
    assert_eq!(binding.spec, admission::runner_create_policy_binding().spec);
}

/// What clusterctl and Cluster API expect of a provider's components: the
/// provider label on every object and on the manager's pods, the webhook
/// CA injected by cert-manager from a Certificate for the webhook Service,
/// and images pinned to a version.
#[test]
fn the_components_carry_what_clusterctl_and_cert_manager_need() {
    const PROVIDER: &str = "infrastructure-terraform";
    for object in components() {
        let what = format!(
            "{} {}",
            object["kind"].as_str().unwrap_or("?"),
            object["metadata"]["name"].as_str().unwrap_or("?")
        );
        assert_eq!(
            object["metadata"]["labels"]["cluster.x-k8s.io/provider"].as_str(),
            Some(PROVIDER),
            "{what} lacks the provider label"
        );
        if let Some(template) = object["spec"]["template"]["metadata"].as_mapping() {
            let labels = &template[&serde_yaml::Value::from("labels")];
            assert_eq!(
                labels["cluster.x-k8s.io/provider"].as_str(),
                Some(PROVIDER),
                "{what}'s pod template lacks the provider label"
            );
        }
        if object["metadata"]["namespace"].as_str().is_some() {
            assert_eq!(
                object["metadata"]["namespace"].as_str(),
                Some("captf-system"),
                "{what}"
            );
        }
    }
    let webhooks: serde_yaml::Value = one(
        "ValidatingWebhookConfiguration",
        "captf-validating-webhook-configuration",
    );
    let inject = webhooks["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        .as_str()
        .expect("the CA injection annotation");
    let (ns, certificate) = inject.split_once('/').expect("namespace/name");
    let certificate: serde_yaml::Value = one("Certificate", certificate);
    assert_eq!(certificate["metadata"]["namespace"].as_str(), Some(ns));
    let issuer = certificate["spec"]["issuerRef"]["name"].as_str().unwrap();
    let _: serde_yaml::Value = one("Issuer", issuer);
    // The certificate names the Service every webhook calls and lands in
    // the Secret the manager mounts.
    let dns: Vec<&str> = certificate["spec"]["dnsNames"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    for hook in webhooks["webhooks"].as_sequence().unwrap() {
        let service = &hook["clientConfig"]["service"];
        let host = format!(
            "{}.{}.svc",
            service["name"].as_str().unwrap(),
            service["namespace"].as_str().unwrap()
        );
        assert!(dns.contains(&host.as_str()), "{host} not among {dns:?}");
        let _: Service = one("Service", service["name"].as_str().unwrap());
    }
    let d: Deployment = one("Deployment", "captf-controller-manager");
    let pod = d.spec.unwrap().template.spec.unwrap();
    let mounted = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref())
        .filter_map(|s| s.secret_name.clone())
        .collect::<Vec<_>>();
    assert!(
        mounted.contains(
            &certificate["spec"]["secretName"]
                .as_str()
                .unwrap()
                .to_string()
        )
    );
    for c in pod
        .containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
    {
        let image = c.image.as_deref().unwrap_or_default();
        assert!(
            image.contains(':') && !image.ends_with(":latest"),
            "image {image:?} is not pinned to a version"
        );
    }
    // The metrics Service of the well-known name reaches the metrics port.
    let metrics: Service = one("Service", "captf-controller-manager-metrics");
    let port = &metrics.spec.unwrap().ports.unwrap()[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("metrics"), 8443));
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
fn the_manager_role_grants_what_the_manager_calls_and_nothing_more() {
    let role: ClusterRole = one("ClusterRole", "captf-manager-role");
    let infra = "infrastructure.cluster.x-k8s.io";
    let rbac = "rbac.authorization.k8s.io";
    // Each verb the manager's code calls (crates/manager/src), and no other:
    // watchers list and watch, server-side applies that may create need
    // create and patch, status and finalizer writes use their subresources.
    let mut wanted: Vec<(&str, &str, &[&str])> = vec![
        (
            infra,
            "terraformclusters",
            &["get", "list", "watch", "patch"],
        ),
        (
            infra,
            "terraformmachines",
            &["get", "list", "watch", "patch"],
        ),
        (
            infra,
            "terraformmachinepools",
            &["get", "list", "watch", "patch"],
        ),
        (
            infra,
            "terraformclusteridentities",
            &["get", "list", "watch"],
        ),
        (infra, "terraformmachinetemplates", &["list", "watch"]),
        (
            infra,
            "terraformplans",
            &["list", "watch", "create", "patch"],
        ),
        ("cluster.x-k8s.io", "clusters", &["get", "list", "watch"]),
        (
            "cluster.x-k8s.io",
            "machinepools",
            &["list", "watch", "patch"],
        ),
        ("cluster.x-k8s.io", "machines", &["list", "watch", "patch"]),
        (
            "batch",
            "jobs",
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        ("", "pods", &["get", "list"]),
        (
            "",
            "secrets",
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
        ("", "configmaps", &["get", "list", "watch"]),
        (
            "coordination.k8s.io",
            "leases",
            &["get", "list", "create", "update", "patch", "delete"],
        ),
        ("events.k8s.io", "events", &["create", "patch"]),
        (
            "",
            "serviceaccounts",
            &["get", "list", "create", "patch", "delete"],
        ),
        (rbac, "roles", &["list", "create", "patch", "delete"]),
        (rbac, "rolebindings", &["list", "create", "patch", "delete"]),
        ("", "namespaces", &["get"]),
        // The metrics endpoint reviews each scraper's token and access.
        ("authentication.k8s.io", "tokenreviews", &["create"]),
        ("authorization.k8s.io", "subjectaccessreviews", &["create"]),
    ];
    let status = [
        "terraformclusters/status",
        "terraformmachines/status",
        "terraformmachinepools/status",
        "terraformmachinetemplates/status",
        "terraformclusteridentities/status",
        "terraformplans/status",
    ];
    for s in status {
        wanted.push((infra, s, &["patch"]));
    }
    // Jobs carry blockOwnerDeletion owner references to these.
    for f in [
        "terraformclusters/finalizers",
        "terraformmachines/finalizers",
        "terraformmachinepools/finalizers",
    ] {
        wanted.push((infra, f, &["update"]));
    }
    for (group, resource, verbs) in &wanted {
        for verb in *verbs {
            assert!(
                allows(&role, group, resource, verb, None),
                "the manager role lacks {verb} on {group}/{resource}"
            );
        }
    }
    // Nothing beyond the list: no wildcard, no name-scoped extra, no verb
    // the code never calls.
    for rule in role.rules.iter().flatten() {
        assert!(rule.resource_names.is_none(), "name-scoped rule {rule:?}");
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                let granted = wanted
                    .iter()
                    .find(|(g, r, _)| g == group && r == resource)
                    .map(|(_, _, v)| *v)
                    .unwrap_or_else(|| {
                        panic!("the manager role grants {group}/{resource}, which it never calls")
                    });
                for verb in &rule.verbs {
                    assert!(
                        granted.contains(&verb.as_str()),
                        "the manager role grants {verb} on {group}/{resource}, which it never calls"
                    );
                }
            }
        }
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
    let d: Deployment = one("Deployment", "captf-controller-manager");
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
    // The runner image is the manager's own, read from its pod: nothing
    // pins it apart from the container image clusterctl may override.
    assert_eq!(field_ref("POD_NAME").as_deref(), Some("metadata.name"));
    assert!(
        !env.iter().any(|e| e.name == "CAPTF_MANAGER_IMAGE")
            && !args.iter().any(|a| a.starts_with("--runner-image")),
        "a runner image fixed in the manifest would not follow an image override"
    );
    assert_eq!(c.name, captf_manager::runner_image::MANAGER_CONTAINER);

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
    let sa: ServiceAccount = one("ServiceAccount", "captf-controller-manager");
    let role: ClusterRole = one("ClusterRole", "captf-manager-role");
    let binding: ClusterRoleBinding = one("ClusterRoleBinding", "captf-manager-rolebinding");
    let d: Deployment = one("Deployment", "captf-controller-manager");
    let service: Service = one("Service", "captf-webhook-service");

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

/// The components as an operator applies them: every object accepted by a
/// real apiserver with server-side apply (cert-manager's CRDs installed
/// first, as `clusterctl init` ensures), and every CRD Established. The
/// manager pod cannot start here (no such image is registered), so the
/// webhooks have no backend: nothing else may run in this test binary's
/// control plane after this test.
#[tokio::test(flavor = "current_thread")]
async fn the_components_apply_cleanly_with_server_side_apply() {
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    use kube::discovery::{Discovery, Scope};

    let env = captf_testenv::TestEnv::get().await;
    let client = env.client();
    let cert_manager =
        captf_testenv::assets::cert_manager_crds().expect("the cert-manager CRDs test asset");
    let crds = captf_testenv::crds::read_dir(&cert_manager).expect("cert-manager CRDs");
    captf_testenv::crds::install(&client, &crds)
        .await
        .expect("installing cert-manager's CRDs");

    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let params = PatchParams::apply("captf-components-test").force();
    let mut established = Vec::new();
    for object in components() {
        let object: DynamicObject = serde_yaml::from_value(object.clone()).expect("an object");
        let types = object.types.clone().expect("apiVersion and kind");
        let (group, version) = types
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &types.api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, &types.kind);
        let (resource, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("the apiserver does not serve {gvk:?}"));
        let name = object.metadata.name.clone().expect("a name");
        let api: Api<DynamicObject> = match (caps.scope, object.metadata.namespace.as_deref()) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
            (Scope::Namespaced, None) => {
                panic!("{} {name} is namespaced but has no namespace", types.kind)
            }
            (Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
        };
        api.patch(&name, &params, &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("applying {} {name}: {e}", types.kind));
        if types.kind == "CustomResourceDefinition" {
            established.push(name);
        }
    }
    assert_eq!(established.len(), 8, "the eight CRDs of the provider");
    let crd_api: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    for name in established {
        captf_testenv::eventually(&format!("CRD {name} Established"), 30, || {
            let crd_api = crd_api.clone();
            let name = name.clone();
            async move {
                let crd = crd_api.get(&name).await.ok()?;
                crd.status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                    .then_some(())
            }
        })
        .await;
    }
}
