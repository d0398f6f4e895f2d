//! The generated CRDs on a real apiserver: they install, keep full objects
//! (free-form variables included) unchanged, and refuse schema violations.

use captf_api::crds;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(captf_api::GROUP, captf_api::VERSION, kind),
        plural,
    )
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).expect("a valid object")
}

async fn create(api: &Api<DynamicObject>, value: Value) -> Result<DynamicObject, kube::Error> {
    api.create(&PostParams::default(), &object(value)).await
}

fn namespaced(ns: &captf_testenv::TestNamespace, kind: &str, plural: &str) -> Api<DynamicObject> {
    Api::namespaced_with(ns.client(), ns.name(), &resource(kind, plural))
}

async fn setup() -> captf_testenv::TestNamespace {
    captf_testenv::TestEnv::get().await.namespace().await
}

#[tokio::test(flavor = "current_thread")]
async fn every_crd_is_established_with_labels_and_category() {
    let ns = setup().await;
    let api: Api<CustomResourceDefinition> = Api::all(ns.client());
    let ours = crds::all();
    assert_eq!(ours.len(), 8);
    for crd in ours {
        let name = crd.metadata.name.clone().unwrap();
        let live = api.get(&name).await.expect("CRD installed");
        let conditions = live.status.and_then(|s| s.conditions).unwrap_or_default();
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True"),
            "{name} not Established: {conditions:?}"
        );
        let labels = live.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels
                .get(captf_api::CAPI_CONTRACT_LABEL)
                .map(String::as_str),
            Some("v1alpha1"),
            "{name}"
        );
        assert_eq!(
            live.spec.names.categories,
            Some(vec![captf_api::CATEGORY.to_string()]),
            "{name}"
        );
    }
}

fn full_variables() -> Value {
    json!({
        "instance_type": "m6i.large",
        "root_volume_gib": 100,
        "spot": false,
        "tags": {"team": "a", "nested": {"deeper": [1, "two", {"three": null}]}},
        "zones": ["a", "b"],
    })
}

fn full_jobs() -> Value {
    json!({
        "successfulJobsHistoryLimit": 0,
        "failedJobsHistoryLimit": 5,
        "activeDeadlineSeconds": 3600,
        "lockTimeoutSeconds": 300,
        "serviceAccountName": "custom-runner",
        "imagePullSecrets": [{"name": "regcred"}],
        "resources": {"requests": {"cpu": "250m", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
        "env": [{"name": "AWS_REGION", "value": "us-east-1"}],
        "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "readOnlyRootFilesystem": true},
        "podSecurityContext": {"fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
    })
}

fn full_workspace(image: &str) -> Value {
    json!({
        "source": {"image": image, "imagePullPolicy": "Always"},
        "identityRef": {"kind": "TerraformClusterIdentity", "name": "aws-prod"},
        "jobs": full_jobs(),
        "variables": full_variables(),
        "variablesFrom": [
            {"configMapRef": {"name": "common"}, "optional": true, "format": "JSON"},
            {"secretRef": {"name": "secret-vars"}, "format": "String"},
        ],
        "deletionPolicy": "Retain",
        "adoptRetainedState": true,
    })
}

fn merge(mut base: Value, extra: Value) -> Value {
    let (Value::Object(b), Value::Object(e)) = (&mut base, extra) else {
        panic!("objects expected")
    };
    b.extend(e);
    base
}

fn cluster_spec() -> Value {
    merge(
        full_workspace("ghcr.io/captf-io/aws-cluster:v0.1.0-opentofu"),
        json!({
            "controlPlaneEndpoint": {"host": "api.example.com", "port": 6443},
            "drift": {"intervalSeconds": 0, "action": "Remediate"},
            "applyPolicy": "Manual",
            "maxActiveJobs": 5,
            "defaults": {
                "identityRef": {"kind": "Secret", "name": "local-creds"},
                "jobs": {"activeDeadlineSeconds": 1800},
                "drift": {"intervalSeconds": 600, "action": "Report"},
                "remediation": {"annotateMachine": true, "unhealthyThreshold": 3, "healthCheckIntervalSeconds": 300},
                "membershipRefreshIntervalSeconds": 60,
                "deletionPolicy": "Destroy",
            },
        }),
    )
}

fn machine_spec() -> Value {
    merge(
        full_workspace("ghcr.io/captf-io/aws-machine:v0.1.0-opentofu"),
        json!({
            "drift": {"intervalSeconds": 900},
            "remediation": {"annotateMachine": false, "unhealthyThreshold": 2, "healthCheckIntervalSeconds": 60},
        }),
    )
}

fn pool_spec() -> Value {
    merge(
        full_workspace("ghcr.io/captf-io/aws-machinepool:v0.1.0-opentofu"),
        json!({
            "providerID": "aws:///us-east-1/my-cluster-workers",
            "providerIDList": ["aws:///us-east-1a/i-01", "aws:///us-east-1b/i-02"],
            "drift": {"intervalSeconds": 900, "action": "Remediate"},
            "membershipRefreshIntervalSeconds": 30,
        }),
    )
}

fn workspace_status() -> Value {
    json!({
        "initialization": {"provisioned": true},
        "observedGeneration": 4,
        "activeJob": {"name": "w-apply-a3", "operation": "apply", "attempt": 3, "startTime": "2026-10-02T09:00:00Z"},
        "lastRun": {
            "job": "w-drift-a2", "operation": "drift",
            "steps": [{"name": "init", "exitCode": 0, "durationMilliseconds": 1200}],
            "error": {"kind": "step", "step": "plan", "summary": "Error: boom", "resources": ["aws_instance.a: failed"]},
            "drift": {"create": 1, "update": 0, "replace": 0, "delete": 2, "resources": ["aws_instance.a"]},
        },
        "lastDriftCheck": "2026-10-02T09:30:07Z",
        "lastRefresh": "2026-10-02T09:41:12Z",
        "pendingRefreshes": 1,
        "observedStateSerial": 17,
        "lastRestoredSerial": 12,
        "stateSecretSuffix": "0123456789abcdef-mp",
        "stateBackups": [{"serial": 16, "takenAt": "2026-10-02T09:00:00Z", "bytes": 2048}],
        "source": {"image": "ghcr.io/x/y:v1", "imageDigest": "sha256:abc", "runtimeVersion": "1.10.10"},
    })
}

fn condition(type_: &str) -> Value {
    json!({"type": type_, "status": "True", "reason": type_, "message": "", "observedGeneration": 4, "lastTransitionTime": "2026-10-02T09:12:40Z"})
}

/// Creates `spec`, writes `status` through the status subresource when
/// given, and checks the apiserver hands both back unchanged.
async fn round_trip(
    api: &Api<DynamicObject>,
    kind: &str,
    name: &str,
    spec: Value,
    status: Option<Value>,
) {
    let created = create(
        api,
        json!({"apiVersion": captf_api::API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}),
    )
    .await
    .unwrap_or_else(|e| panic!("{kind} create: {e}"));
    assert_eq!(created.data["spec"], spec, "{kind} spec changed on create");
    if let Some(status) = status {
        let mut with_status = created.clone();
        with_status.data["status"] = status.clone();
        let updated = api
            .replace_status(name, &PostParams::default(), &with_status)
            .await
            .unwrap_or_else(|e| panic!("{kind} status: {e}"));
        assert_eq!(updated.data["status"], status, "{kind} status changed");
    }
    let read = api.get(name).await.unwrap();
    assert_eq!(
        read.data["spec"], spec,
        "{kind} spec changed when read back"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn full_objects_of_every_kind_round_trip_unchanged() {
    let ns = setup().await;
    let n = ns.name().to_string();

    let cluster_status = merge(
        workspace_status(),
        json!({
            "conditions": [condition("Ready"), condition("InputsApplied")],
            "failureDomains": [{"name": "us-east-1a", "controlPlane": true, "attributes": {"zone": "a"}}],
            "exports": {"vpc_id": "vpc-1", "subnets": [{"id": "s-1", "tags": {"a": "b"}}], "count": 3},
            "pendingPlanRef": {"name": "c-0123456789"},
        }),
    );
    round_trip(
        &namespaced(&ns, "TerraformCluster", "terraformclusters"),
        "TerraformCluster",
        "c",
        cluster_spec(),
        Some(cluster_status),
    )
    .await;

    let machine_status = merge(
        workspace_status(),
        json!({
            "conditions": [condition("Ready")],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "m1"}],
            "failureDomain": "us-east-1a",
            "interruptible": false,
            "unhealthySamples": 2,
        }),
    );
    let mut machine = machine_spec();
    machine["providerID"] = json!("aws:///us-east-1a/i-0abc");
    round_trip(
        &namespaced(&ns, "TerraformMachine", "terraformmachines"),
        "TerraformMachine",
        "m",
        machine,
        Some(machine_status),
    )
    .await;

    let pool_status = merge(
        workspace_status(),
        json!({
            "conditions": [condition("Ready"), condition("AutoscalingActive")],
            "ready": true,
            "replicas": 2,
            "instances": [
                {"providerID": "aws:///us-east-1a/i-01", "instanceID": "i-01", "failureDomain": "us-east-1a", "state": "running",
                 "addresses": [{"type": "InternalIP", "address": "10.0.1.23"}]},
                {"providerID": "aws:///us-east-1b/i-02", "state": "pending"},
            ],
            "pendingPlanRef": {"name": "p-0123456789"},
        }),
    );
    round_trip(
        &namespaced(&ns, "TerraformMachinePool", "terraformmachinepools"),
        "TerraformMachinePool",
        "p",
        pool_spec(),
        Some(pool_status),
    )
    .await;

    let template_meta = json!({"labels": {"a": "b"}, "annotations": {"c": "d"}});
    round_trip(
        &namespaced(&ns, "TerraformClusterTemplate", "terraformclustertemplates"),
        "TerraformClusterTemplate",
        "ct",
        json!({"template": {"metadata": template_meta, "spec": cluster_spec()}}),
        None,
    )
    .await;
    round_trip(
        &namespaced(&ns, "TerraformMachineTemplate", "terraformmachinetemplates"),
        "TerraformMachineTemplate", "mt",
        json!({"template": {"metadata": template_meta, "spec": machine_spec()}, "capacity": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}}),
        Some(json!({
            "conditions": [condition("CapacityResolved"), condition("VariablesValid")],
            "capacity": {"cpu": "4", "memory": "16Gi"},
            "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"},
            "capacitySource": {"source": "Image", "image": "ghcr.io/x/y:v1"},
        })),
    ).await;
    round_trip(
        &namespaced(
            &ns,
            "TerraformMachinePoolTemplate",
            "terraformmachinepooltemplates",
        ),
        "TerraformMachinePoolTemplate",
        "mpt",
        json!({"template": {"metadata": template_meta, "spec": pool_spec()}}),
        None,
    )
    .await;
    round_trip(
        &namespaced(&ns, "TerraformPlan", "terraformplans"),
        "TerraformPlan", "c-0123456789",
        json!({
            "targetRef": {"kind": "TerraformCluster", "name": "c"},
            "planHash": "p2:abc", "inputsHash": "h2:def", "reason": "Manual",
            "summary": {"create": 1, "update": 2, "replace": 0, "delete": 1, "import": 0, "move": 1, "forget": 0, "outputChanges": 1,
                        "resources": ["aws_instance.b (update, move)"], "truncated": false},
            "approved": true, "approvedBy": "alice",
        }),
        Some(json!({"conditions": [condition("Ready"), condition("Approved")], "phase": "Approved", "observedGeneration": 1})),
    ).await;

    // Cluster-scoped: a unique name per namespace keeps tests independent.
    let identities: Api<DynamicObject> = Api::all_with(
        ns.client(),
        &resource("TerraformClusterIdentity", "terraformclusteridentities"),
    );
    round_trip(
        &identities,
        "TerraformClusterIdentity",
        &format!("{n}-id"),
        json!({
            "type": "Secret",
            "secretRef": {"name": "aws-creds", "namespace": "captf-system"},
            "requiredKeys": ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
            "allowedNamespaces": {"list": [n.clone()], "selector": {"matchLabels": {"team": "a"}}},
        }),
        Some(json!({"conditions": [condition("Ready")], "namespaces": [n.clone()]})),
    )
    .await;
}

fn assert_invalid(result: Result<DynamicObject, kube::Error>, fields: &[&str]) {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            for field in fields {
                assert!(
                    status.message.contains(field),
                    "{field} missing from: {}",
                    status.message
                );
            }
        }
        other => panic!("expected 422, got {other:?}"),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn schema_violations_are_refused_with_422() {
    let ns = setup().await;
    let pools = namespaced(&ns, "TerraformMachinePool", "terraformmachinepools");
    let bad = json!({
        "apiVersion": captf_api::API_VERSION, "kind": "TerraformMachinePool", "metadata": {"name": "bad"},
        "spec": {
            "source": {"image": "ghcr.io/x/y:v1", "imagePullPolicy": "Sometimes"},
            "drift": {"intervalSeconds": 0, "action": "Ignore"},
            "membershipRefreshIntervalSeconds": 5,
            "variables": {},
        },
    });
    assert_invalid(
        create(&pools, bad).await,
        &[
            "spec.source.imagePullPolicy",
            "spec.drift.intervalSeconds",
            "spec.drift.action",
            "spec.membershipRefreshIntervalSeconds",
            "spec.variables",
        ],
    );
    // CEL rules run only once the plain schema checks pass.
    let both_refs = json!({
        "apiVersion": captf_api::API_VERSION, "kind": "TerraformMachinePool", "metadata": {"name": "both"},
        "spec": {
            "source": {"image": "ghcr.io/x/y:v1"},
            "variablesFrom": [{"configMapRef": {"name": "a"}, "secretRef": {"name": "b"}}],
        },
    });
    assert_invalid(create(&pools, both_refs).await, &["spec.variablesFrom[0]"]);
    let empty_spec = json!({"apiVersion": captf_api::API_VERSION, "kind": "TerraformMachinePool", "metadata": {"name": "empty"}, "spec": {}});
    assert_invalid(create(&pools, empty_spec).await, &["spec"]);

    let clusters = namespaced(&ns, "TerraformCluster", "terraformclusters");
    let no_identity = json!({
        "apiVersion": captf_api::API_VERSION, "kind": "TerraformCluster", "metadata": {"name": "c"},
        "spec": {"source": {"image": "ghcr.io/x/y:v1"}, "controlPlaneEndpoint": {"host": "h"}},
    });
    assert_invalid(
        create(&clusters, no_identity).await,
        &["spec.identityRef", "spec.controlPlaneEndpoint"],
    );
}

#[tokio::test(flavor = "current_thread")]
async fn machine_definition_is_immutable_without_the_webhook() {
    let ns = setup().await;
    let machines = namespaced(&ns, "TerraformMachine", "terraformmachines");
    let created = create(
        &machines,
        json!({"apiVersion": captf_api::API_VERSION, "kind": "TerraformMachine", "metadata": {"name": "m"},
               "spec": {"source": {"image": "ghcr.io/x/y:v1"}, "variables": {"a": 1}}}),
    )
    .await
    .unwrap();
    let mut changed = created.clone();
    changed.data["spec"]["source"]["image"] = json!("ghcr.io/x/y:v2");
    changed.data["spec"]["variables"]["a"] = json!(2);
    assert_invalid(
        machines
            .replace("m", &PostParams::default(), &changed)
            .await,
        &["spec.source", "spec.variables"],
    );
    // providerID goes from empty to set once, then stays.
    let mut set = created.clone();
    set.data["spec"]["providerID"] = json!("aws:///a/i-1");
    let set = machines
        .replace("m", &PostParams::default(), &set)
        .await
        .unwrap();
    let mut reset = set.clone();
    reset.data["spec"]["providerID"] = json!("aws:///a/i-2");
    assert_invalid(
        machines.replace("m", &PostParams::default(), &reset).await,
        &["spec.providerID"],
    );
    // Policy fields stay mutable.
    let mut policy = set.clone();
    policy.data["spec"]["drift"] = json!({"intervalSeconds": 60});
    machines
        .replace("m", &PostParams::default(), &policy)
        .await
        .unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn both_seed_examples_are_accepted_as_written() {
    let ns = setup().await;
    let n = ns.name().to_string();
    let pools = namespaced(&ns, "TerraformMachinePool", "terraformmachinepools");
    for (name, yaml) in [("minimal", SEED_EXAMPLE), ("full", SEED_FULL_EXAMPLE)] {
        let mut value: Value = serde_yaml::from_str(yaml).unwrap();
        value["metadata"]["namespace"] = json!(n);
        let spec = value["spec"].clone();
        let created = create(&pools, value)
            .await
            .unwrap_or_else(|e| panic!("seed {name} example refused: {e}"));
        assert_eq!(created.data["spec"], spec, "seed {name} example changed");
        pools
            .delete("my-cluster-workers", &Default::default())
            .await
            .unwrap();
        // Without a finalizer the object is gone at once.
    }
}

const SEED_EXAMPLE: &str = r#"
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: TerraformMachinePool
metadata:
  name: my-cluster-workers
  namespace: team-a
  labels:
    cluster.x-k8s.io/cluster-name: my-cluster
spec:
  source:
    image: ghcr.io/captf-io/aws-machinepool:v0.1.0-opentofu
  identityRef:
    name: aws-prod
"#;

const SEED_FULL_EXAMPLE: &str = r#"
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: TerraformMachinePool
metadata:
  name: my-cluster-workers
  namespace: team-a
  labels:
    cluster.x-k8s.io/cluster-name: my-cluster
spec:
  source:
    image: ghcr.io/captf-io/aws-machinepool:v0.1.0-opentofu
    imagePullPolicy: IfNotPresent
  identityRef:
    name: aws-prod
  jobs:
    activeDeadlineSeconds: 3600
    lockTimeoutSeconds: 300
  variables:
    instance_type: m6i.large
    root_volume_gib: 100
  variablesFrom:
    - configMapRef:
        name: pool-common-vars
  drift:
    intervalSeconds: 900
    action: Remediate
  membershipRefreshIntervalSeconds: 30
  providerID: aws:///us-east-1/my-cluster-workers
  providerIDList:
    - aws:///us-east-1a/i-0a1b2c3d4e5f60001
    - aws:///us-east-1b/i-0a1b2c3d4e5f60002
"#;
