//! The webhook server behind a real apiserver: registered with a CA bundle
//! this test generates, called over TLS, and rejecting a bad
//! TerraformMachinePool with every violation in one response.

use std::time::{Duration, Instant};

use captf_api::names::webhooks::VALIDATING;
use captf_manager::webhook::{self, CERT_FILE, KEY_FILE, WebhookConfig};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

/// A serving certificate for 127.0.0.1 in `dir` (`tls.crt`, `tls.key`, the
/// names the webhook server reads); returns its CA's PEM.
fn write_serving_cert(dir: &std::path::Path) -> String {
    assert_eq!((CERT_FILE, KEY_FILE), ("tls.crt", "tls.key"));
    captf_testenv::pki::write_webhook_serving_pair(dir).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_calls_the_webhook_and_gets_every_violation_at_once() {
    let env = captf_testenv::TestEnv::get().await;
    let ns = env.namespace().await;

    let certs = tempfile::tempdir().unwrap();
    let ca_bundle = write_serving_cert(certs.path());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = WebhookConfig {
        cert_dir: certs.path().to_path_buf(),
        reload_interval: Duration::from_secs(1),
        manager_username: None,
        client: Some(ns.client()),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(webhook::serve(listener, config, async {
        let _ = stopped.await;
    }));

    let hook = VALIDATING
        .iter()
        .find(|h| h.kind == "TerraformMachinePool")
        .unwrap();
    // Scoped to this test's namespace so other tests never reach it.
    let registration = ValidatingWebhookConfiguration {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("captf-test-{}", ns.name())),
            ..Default::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            name: hook.name.to_string(),
            admission_review_versions: vec!["v1".into()],
            side_effects: "None".into(),
            failure_policy: Some("Fail".into()),
            match_policy: Some("Equivalent".into()),
            timeout_seconds: Some(10),
            client_config: WebhookClientConfig {
                url: Some(format!("https://127.0.0.1:{port}{}", hook.path)),
                ca_bundle: Some(ByteString(ca_bundle.into_bytes())),
                service: None,
            },
            namespace_selector: Some(LabelSelector {
                match_labels: Some(
                    [(
                        "kubernetes.io/metadata.name".to_string(),
                        ns.name().to_string(),
                    )]
                    .into(),
                ),
                match_expressions: None,
            }),
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec![captf_api::GROUP.into()]),
                api_versions: Some(vec![captf_api::VERSION.into()]),
                operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
                resources: Some(vec![hook.plural.into()]),
                scope: Some("Namespaced".into()),
            }]),
            ..Default::default()
        }]),
    };
    let registrations: Api<ValidatingWebhookConfiguration> = Api::all(ns.client());
    registrations
        .create(&PostParams::default(), &registration)
        .await
        .unwrap();

    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(captf_api::GROUP, captf_api::VERSION, hook.kind),
        hook.plural,
    );
    let pools: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    // Passes the schema; breaks six webhook rules. The marker value must
    // never come back.
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": captf_api::API_VERSION, "kind": hook.kind,
        "metadata": {"name": "bad"},
        "spec": {
            "source": {"image": "ghcr.io/Team/pool:v1"},
            "variables": {"captf_tags": "VALUE-MARKER", "replicas": 3, "count": 1, "instance_type": "m6i.large"},
            "jobs": {
                "activeDeadlineSeconds": 200,
                "securityContext": {"privileged": true},
            },
        },
    }))
    .unwrap();
    let want = [
        "spec.source.image",
        "spec.variables[captf_tags]",
        "spec.variables[replicas]",
        "spec.variables[count]",
        "spec.jobs.activeDeadlineSeconds",
        "spec.jobs.securityContext.privileged",
    ];

    // The apiserver picks the registration up asynchronously.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        match pools.create(&PostParams::default(), &bad).await {
            Err(kube::Error::Api(status)) if status.message.contains(hook.name) => break status,
            Ok(_) => {
                pools.delete("bad", &DeleteParams::default()).await.unwrap();
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
        assert!(Instant::now() < deadline, "the webhook was never called");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert_eq!(status.reason, "Invalid", "{status:?}");
    for field in want {
        assert!(
            status.message.contains(field),
            "{field} missing: {}",
            status.message
        );
    }
    let causes = status.details.as_ref().map(|d| d.causes.len()).unwrap_or(0);
    assert_eq!(causes, want.len(), "{status:?}");
    assert!(!status.message.contains("VALUE-MARKER"));

    // A valid pool passes through the same webhook.
    let good: DynamicObject = serde_json::from_value(json!({
        "apiVersion": captf_api::API_VERSION, "kind": hook.kind,
        "metadata": {"name": "good"},
        "spec": {"source": {"image": "ghcr.io/captf-io/aws-machinepool:v0.1.0-opentofu"}, "variables": {"instance_type": "m6i.large"}},
    }))
    .unwrap();
    pools.create(&PostParams::default(), &good).await.unwrap();

    registrations
        .delete(
            &format!("captf-test-{}", ns.name()),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

#[test]
fn shipped_manifests_register_every_endpoint() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../config/webhook/manifests.yaml"),
    )
    .unwrap();
    let config: ValidatingWebhookConfiguration = serde_yaml::from_str(&text).unwrap();
    let webhooks = config.webhooks.unwrap();
    assert_eq!(webhooks.len(), VALIDATING.len() + 1);
    let delete = webhooks
        .iter()
        .find(|w| w.name == captf_api::names::webhooks::MACHINE_DELETE)
        .unwrap();
    assert_eq!(delete.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(
        delete.rules.as_ref().unwrap()[0].operations.as_deref(),
        Some(&["DELETE".to_string()][..])
    );
    for hook in VALIDATING {
        let entry = webhooks
            .iter()
            .find(|w| w.name == hook.name)
            .unwrap_or_else(|| panic!("{} missing", hook.name));
        let service = entry.client_config.service.as_ref().unwrap();
        assert_eq!(service.path.as_deref(), Some(hook.path));
        assert_eq!(service.name, "webhook-service");
        let rule = &entry.rules.as_ref().unwrap()[0];
        assert_eq!(
            rule.resources.as_deref(),
            Some(&[hook.plural.to_string()][..])
        );
        assert_eq!(entry.failure_policy.as_deref(), Some("Fail"));
        let operations = rule.operations.clone().unwrap();
        assert!(
            operations.contains(&"CREATE".to_string())
                && operations.contains(&"UPDATE".to_string())
        );
        assert_eq!(
            operations.contains(&"DELETE".to_string()),
            hook.kind == "TerraformClusterIdentity"
        );
        assert_eq!(entry.side_effects, "None");
        assert_eq!(entry.admission_review_versions, ["v1"]);
    }
}

/// A webhook server for one test, and its registration.
struct Harness {
    port: u16,
    ca_bundle: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<Result<(), webhook::WebhookError>>>,
    _certs: tempfile::TempDir,
}

impl Harness {
    async fn start(client: kube::Client) -> Harness {
        let certs = tempfile::tempdir().unwrap();
        let ca_bundle = write_serving_cert(certs.path());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let config = WebhookConfig {
            cert_dir: certs.path().to_path_buf(),
            reload_interval: Duration::from_secs(1),
            manager_username: None,
            client: Some(client),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(webhook::serve(listener, config, async {
            let _ = stopped.await;
        }));
        Harness {
            port,
            ca_bundle,
            stop: Some(stop),
            server: Some(server),
            _certs: certs,
        }
    }

    fn entry(
        &self,
        name: &str,
        path: &str,
        plural: &str,
        scope: &str,
        operations: &[&str],
        selector: (&str, &str),
    ) -> ValidatingWebhook {
        let selector = Some(LabelSelector {
            match_labels: Some([(selector.0.to_string(), selector.1.to_string())].into()),
            match_expressions: None,
        });
        let cluster_scoped = scope == "Cluster";
        ValidatingWebhook {
            name: name.to_string(),
            admission_review_versions: vec!["v1".into()],
            side_effects: "None".into(),
            failure_policy: Some("Fail".into()),
            timeout_seconds: Some(10),
            client_config: WebhookClientConfig {
                url: Some(format!("https://127.0.0.1:{}{path}", self.port)),
                ca_bundle: Some(ByteString(self.ca_bundle.clone().into_bytes())),
                service: None,
            },
            namespace_selector: if cluster_scoped {
                None
            } else {
                selector.clone()
            },
            object_selector: if cluster_scoped { selector } else { None },
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec![captf_api::GROUP.into()]),
                api_versions: Some(vec![captf_api::VERSION.into()]),
                operations: Some(operations.iter().map(|o| o.to_string()).collect()),
                resources: Some(vec![plural.into()]),
                scope: Some(scope.into()),
            }]),
            ..Default::default()
        }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.server.take().unwrap().await.unwrap().unwrap();
    }
}

/// Retries `attempt` until it fails with a message naming `webhook`.
async fn refused_by<F, Fut, T>(webhook: &str, mut attempt: F) -> kube::core::Status
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match attempt().await {
            Err(kube::Error::Api(status)) if status.message.contains(webhook) => return *status,
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {}
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => {}
        }
        assert!(Instant::now() < deadline, "{webhook} was never called");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_checks_and_the_access_review_read_the_api() {
    // Its cluster-scoped identities reach every running manager.
    let _identities = captf_testenv::gate::creating_identities().await;
    let env = captf_testenv::TestEnv::get().await;
    let ns = env.namespace().await;
    let n = ns.name().to_string();
    let harness = Harness::start(ns.client()).await;
    let machine_hook = VALIDATING
        .iter()
        .find(|h| h.kind == "TerraformMachine")
        .unwrap();
    let identity_hook = VALIDATING
        .iter()
        .find(|h| h.kind == "TerraformClusterIdentity")
        .unwrap();
    let registration = ValidatingWebhookConfiguration {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("captf-test-{n}")),
            ..Default::default()
        },
        webhooks: Some(vec![
            harness.entry(
                captf_api::names::webhooks::MACHINE_DELETE,
                machine_hook.path,
                machine_hook.plural,
                "Namespaced",
                &["DELETE"],
                ("kubernetes.io/metadata.name", &n),
            ),
            harness.entry(
                identity_hook.name,
                identity_hook.path,
                identity_hook.plural,
                "Cluster",
                &["CREATE", "UPDATE", "DELETE"],
                ("captf-test", &n),
            ),
        ]),
    };
    let registrations: Api<ValidatingWebhookConfiguration> = Api::all(ns.client());
    registrations
        .create(&PostParams::default(), &registration)
        .await
        .unwrap();

    // A TerraformMachine that a live Machine points at cannot be deleted
    // directly.
    let tm_resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(captf_api::GROUP, captf_api::VERSION, "TerraformMachine"),
        "terraformmachines",
    );
    let tms: Api<DynamicObject> = Api::namespaced_with(ns.client(), &n, &tm_resource);
    let tm: DynamicObject = serde_json::from_value(json!({
        "apiVersion": captf_api::API_VERSION, "kind": "TerraformMachine",
        "metadata": {"name": "tm"}, "spec": {"source": {"image": "ghcr.io/a/b:v1"}},
    }))
    .unwrap();
    let machine_resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "Machine"),
        "machines",
    );
    let machines: Api<DynamicObject> = Api::namespaced_with(ns.client(), &n, &machine_resource);
    let machine: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": "m1"},
        "spec": {
            "clusterName": "c",
            "bootstrap": {"dataSecretName": "boot"},
            "infrastructureRef": {"apiGroup": captf_api::GROUP, "kind": "TerraformMachine", "name": "tm"},
        },
    }))
    .unwrap();
    machines
        .create(&PostParams::default(), &machine)
        .await
        .unwrap();
    let status = refused_by(captf_api::names::webhooks::MACHINE_DELETE, || {
        let tms = tms.clone();
        let tm = tm.clone();
        async move {
            let _ = tms.create(&PostParams::default(), &tm).await;
            tms.delete("tm", &DeleteParams::default()).await
        }
    })
    .await;
    assert_eq!(status.code, 403, "{status:?}");
    assert!(status.message.contains("Machine m1"), "{}", status.message);
    // Once the Machine is gone, the delete passes.
    machines
        .delete("m1", &DeleteParams::default())
        .await
        .unwrap();
    tms.delete("tm", &DeleteParams::default()).await.unwrap();

    // A user who may create identities but not read the Secret is refused.
    let identities: Api<DynamicObject> = Api::all_with(
        ns.client(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(
                captf_api::GROUP,
                captf_api::VERSION,
                "TerraformClusterIdentity",
            ),
            "terraformclusteridentities",
        ),
    );
    let identity = |name: &str| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": captf_api::API_VERSION, "kind": "TerraformClusterIdentity",
            "metadata": {"name": name, "labels": {"captf-test": n}},
            "spec": {"secretRef": {"name": "creds", "namespace": n}, "allowedNamespaces": {"list": [n]}},
        }))
        .unwrap()
    };
    let rbac: Api<DynamicObject> = Api::all_with(
        ns.client(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRole"),
            "clusterroles",
        ),
    );
    let role_name = format!("captf-test-{n}-identities");
    rbac.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": role_name},
            "rules": [{"apiGroups": [captf_api::GROUP], "resources": ["terraformclusteridentities"], "verbs": ["create", "get", "delete"]}],
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let bindings: Api<DynamicObject> = Api::all_with(
        ns.client(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
            "clusterrolebindings",
        ),
    );
    let mallory = format!("mallory-{n}");
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": role_name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": mallory}],
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let mut as_mallory = env.config().clone();
    as_mallory.auth_info.impersonate = Some(mallory.clone());
    let mallory_identities: Api<DynamicObject> = Api::all_with(
        kube::Client::try_from(as_mallory).unwrap(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(
                captf_api::GROUP,
                captf_api::VERSION,
                "TerraformClusterIdentity",
            ),
            "terraformclusteridentities",
        ),
    );
    let mine = format!("{n}-mallory");
    let status = refused_by(identity_hook.name, || {
        let api = mallory_identities.clone();
        let obj = identity(&mine);
        let mine = mine.clone();
        async move {
            let created = api.create(&PostParams::default(), &obj).await;
            if created.is_ok() {
                identities_cleanup(&api, &mine).await;
            }
            created
        }
    })
    .await;
    assert!(
        status
            .message
            .contains(&format!("user \"{mallory}\" may not get Secret {n}/creds")),
        "{}",
        status.message
    );

    // The admin may; the identity is then protected while a pool uses it.
    let id_name = format!("{n}-id");
    identities
        .create(&PostParams::default(), &identity(&id_name))
        .await
        .unwrap();
    let pools: Api<DynamicObject> = Api::namespaced_with(
        ns.client(),
        &n,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(captf_api::GROUP, captf_api::VERSION, "TerraformMachinePool"),
            "terraformmachinepools",
        ),
    );
    pools
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": captf_api::API_VERSION, "kind": "TerraformMachinePool",
                "metadata": {"name": "p"},
                "spec": {"source": {"image": "ghcr.io/a/b:v1"}, "identityRef": {"name": id_name}},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let status = refused_by(identity_hook.name, || {
        let api = identities.clone();
        let name = id_name.clone();
        async move { api.delete(&name, &DeleteParams::default()).await }
    })
    .await;
    assert!(
        status
            .message
            .contains(&format!("TerraformMachinePool {n}/p")),
        "{}",
        status.message
    );
    pools.delete("p", &DeleteParams::default()).await.unwrap();
    identities
        .delete(&id_name, &DeleteParams::default())
        .await
        .unwrap();

    registrations
        .delete(&format!("captf-test-{n}"), &DeleteParams::default())
        .await
        .unwrap();
    harness.stop().await;
}

async fn identities_cleanup(api: &Api<DynamicObject>, name: &str) {
    let _ = api.delete(name, &DeleteParams::default()).await;
}

/// Outside a pod (no downward-API environment) the manager learns its own
/// username from the API server, so the webhooks let its own writes
/// through wherever it runs.
#[tokio::test]
async fn the_manager_learns_its_username_from_the_api_server_outside_a_pod() {
    let env = captf_testenv::TestEnv::get().await;
    assert_eq!(webhook::manager_username_from_env(), None);
    assert_eq!(
        webhook::manager_username(&env.client()).await.as_deref(),
        Some(captf_testenv::pki::ADMIN_USER)
    );
}
