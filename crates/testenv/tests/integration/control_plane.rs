//! Proves the test environment is real: a real apiserver at the pinned
//! version, CRDs that become Established and serve objects, Cluster API's
//! kinds, garbage collection, namespace deletion and the job controller.

use captf_testenv::{TestEnv, assets, crds, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, ObjectMeta, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

#[tokio::test]
async fn apiserver_reports_the_pinned_version() {
    let env = TestEnv::get().await;
    assert!(
        env.kubeconfig().is_some(),
        "this test checks the local control plane"
    );
    let version = env.client().apiserver_version().await.unwrap();
    let pinned = assets::version("KUBERNETES_VERSION").unwrap();
    assert_eq!(version.git_version, format!("v{pinned}"));
    assert_eq!(version.major, "1");
    assert_eq!(version.minor, pinned.split('.').nth(1).unwrap());
}

#[tokio::test]
async fn an_installed_crd_is_established_and_serves_objects() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.testenv.captf.io"},
        "spec": {
            "group": "testenv.captf.io",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}}}
                }}}
            }]
        }
    }))
    .unwrap();
    crds::install(&ns.client(), &[crd]).await.unwrap();

    let gvk = GroupVersionKind::gvk("testenv.captf.io", "v1", "Widget");
    let api: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &ApiResource::from_gvk(&gvk));
    let widget = |size: i64| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "testenv.captf.io/v1", "kind": "Widget",
            "metadata": {"name": format!("w{size}")}, "spec": {"size": size}
        }))
        .unwrap()
    };
    api.create(&PostParams::default(), &widget(3))
        .await
        .unwrap();
    let got = api.get("w3").await.unwrap();
    assert_eq!(got.data["spec"]["size"], 3);
    // The schema is enforced, so this is the real apiserver validating.
    let err = api
        .create(&PostParams::default(), &widget(0))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("spec.size"), "{err}");
}

fn capi(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", kind))
}

#[tokio::test]
async fn cluster_api_cluster_and_machine_pool_can_be_created() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi("Cluster"));
    let pools: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.name(), &capi("MachinePool"));

    let cluster: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "c1"},
        "spec": {"infrastructureRef": {
            "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": "c1"
        }}
    }))
    .unwrap();
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();

    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": "p1", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
        "spec": {
            "clusterName": "c1",
            "replicas": 2,
            "template": {"spec": {
                "clusterName": "c1",
                "bootstrap": {"dataSecretName": "p1-bootstrap"},
                "infrastructureRef": {
                    "apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "TerraformMachinePool", "name": "p1"
                }
            }}
        }
    }))
    .unwrap();
    pools.create(&PostParams::default(), &pool).await.unwrap();

    let got = pools.get("p1").await.unwrap();
    assert_eq!(got.data["spec"]["replicas"], 2);
    assert_eq!(
        got.data["spec"]["template"]["spec"]["infrastructureRef"]["kind"],
        "TerraformMachinePool"
    );
    let listed = clusters.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);

    // v1beta2 is the schema we speak: a MachinePool without its required
    // template is refused.
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": "bad"}, "spec": {"clusterName": "c1"}
    }))
    .unwrap();
    let err = pools
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("spec.template"), "{err}");
}

#[tokio::test]
async fn deleting_an_owner_garbage_collects_what_it_owns() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let cms: Api<ConfigMap> = ns.api();
    let secrets: Api<Secret> = ns.api();

    let owner = cms
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("owner".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let owned = Secret {
        metadata: ObjectMeta {
            name: Some("owned".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "owner".into(),
                uid: owner.metadata.uid.clone().unwrap(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &owned)
        .await
        .unwrap();

    cms.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the garbage collector to delete the owned Secret",
        60,
        || async {
            match secrets.get_opt("owned").await.unwrap() {
                None => Some(()),
                Some(_) => None,
            }
        },
    )
    .await;
}

#[tokio::test]
async fn a_job_gets_a_pod_from_the_real_job_controller() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let jobs: Api<Job> = ns.api();
    let pods: Api<Pod> = ns.api();

    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "hello"},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "example.invalid/hello:1"}]
            }}
        }
    }))
    .unwrap();
    let job = jobs.create(&PostParams::default(), &job).await.unwrap();
    let job_uid = job.metadata.uid.unwrap();

    let pod = eventually("the job controller to create a Pod", 60, || async {
        let lp = ListParams::default().labels("batch.kubernetes.io/job-name=hello");
        pods.list(&lp).await.unwrap().items.into_iter().next()
    })
    .await;
    let owner = pod
        .metadata
        .owner_references
        .unwrap()
        .into_iter()
        .find(|o| o.controller == Some(true))
        .expect("the Pod has a controller");
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Job", job_uid.as_str())
    );
    // The job controller counts it as active: it really manages the Pod.
    eventually("the Job status to count the active Pod", 60, || async {
        let j = jobs.get("hello").await.unwrap();
        (j.status.and_then(|s| s.active) == Some(1)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_deleted_namespace_is_finalized_by_the_namespace_controller() {
    let env = TestEnv::get().await;
    let namespaces: Api<Namespace> = Api::all(env.client());
    let ns = namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    generate_name: Some("captf-ns-".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let name = ns.metadata.name.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), &name);
    cms.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: ObjectMeta {
                name: Some("content".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    namespaces
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the namespace to be removed", 60, || async {
        namespaces
            .get_opt(&name)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn control_plane_logs_are_available_for_failing_tests() {
    let env = TestEnv::get().await;
    let logs = env.logs(5);
    for name in ["etcd", "kube-apiserver", "kube-controller-manager"] {
        assert!(
            logs.contains(&format!("----- {name} (")),
            "{name} missing from:\n{logs}"
        );
    }
    // The apiserver logs while serving, so its tail is never empty.
    let apiserver = logs.split("----- kube-apiserver").nth(1).unwrap();
    assert!(apiserver.lines().count() > 1, "{apiserver}");
}

/// Cluster-scoped identities go with the namespace their source Secret
/// lives in (finalizer and all), and no other identity does: every manager
/// of a binary would go on reconciling them.
#[tokio::test]
async fn a_namespace_takes_the_identities_of_its_secrets_with_it() {
    use captf_api::TerraformClusterIdentity;
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let name = ns.name().to_owned();
    let identities: Api<TerraformClusterIdentity> = Api::all(env.client());
    let identity = |id: &str, source_ns: &str| -> TerraformClusterIdentity {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
            "kind": "TerraformClusterIdentity",
            "metadata": {"name": id, "finalizers": ["captf.io/test"]},
            "spec": {"secretRef": {"name": "creds", "namespace": source_ns}},
        }))
        .unwrap()
    };
    let (mine, other) = (format!("{name}-mine"), format!("{name}-other"));
    for (id, source_ns) in [(&mine, name.as_str()), (&other, "somewhere-else")] {
        identities
            .create(&PostParams::default(), &identity(id, source_ns))
            .await
            .unwrap();
    }
    // The guard's drop deletes, and waits for, the identities of its Secrets.
    drop(ns);
    assert!(identities.get_opt(&mine).await.unwrap().is_none());
    let kept = identities.get_opt(&other).await.unwrap();
    assert!(kept.is_some(), "an identity of another namespace stays");
    let unfinalized = json!({"metadata": {"finalizers": null}});
    identities
        .patch(
            &other,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&unfinalized),
        )
        .await
        .unwrap();
    identities
        .delete(&other, &DeleteParams::default())
        .await
        .unwrap();
}
