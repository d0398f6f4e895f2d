//! A Job as the manager builds it, run end to end: the real job controller
//! makes its Pod, the scheduler binds it to the real node, whose kubelet
//! runs the runner init container and the module container (the images as
//! `make images` builds them) with the real runner and OpenTofu on the noop
//! pool module, the kubernetes backend stores state in the test apiserver under
//! the runner's own ServiceAccount and RBAC, and the controller's readers
//! accept what comes back (termination message, state, outputs).

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use captf_contract::inputs::{
    Autoscaling, BootstrapData, BootstrapFormat, ClusterRef, CommonInputs, MachinePoolInputs,
};
use captf_contract::outputs::{OutputsReason, RoleOutputs, RootOutputs, decode};
use captf_contract::{Role, RoleInputs, UserVariables, inputs_hash, render_root};
use captf_manager::engine::decide::Op;
use captf_manager::engine::history::Outcome;
use captf_manager::io::jobs::{jobs_selector, mark_bookkept, observe_jobs};
use captf_manager::jobs::args::RunnerArgs;
use captf_manager::jobs::build::{JobBlueprint, build};
use captf_manager::names::{WorkloadKind, job_name, state_secret, state_suffix};
use captf_manager::rbac;
use captf_manager::state::reader::{StateSecret, read};
use captf_testenv::{TestEnv, eventually};
use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use support::{manager_image, module_image};

const MANAGER_IMAGE: &str = "local.test/captf-manager:dev";
const MODULE_IMAGE: &str = "local.test/noop-machinepool:dev";

fn pool_inputs(namespace: &str) -> MachinePoolInputs {
    MachinePoolInputs {
        common: CommonInputs::new(
            Role::MachinePool,
            ClusterRef {
                name: "prod".into(),
                namespace: namespace.into(),
            },
            "pool-a",
            namespace,
            None,
        ),
        captf_cluster_outputs: serde_json::json!({"backend_id": "noop-backend"}).into(),
        machinepool_name: "pool-a".into(),
        replicas: 3,
        bootstrap_data: BootstrapData::from_bytes(b"#cloud-config\n"),
        bootstrap_format: BootstrapFormat::CloudConfig,
        failure_domains: vec!["fd1".into(), "fd2".into()],
        cluster_failure_domains: vec!["fd1".into(), "fd2".into()],
        kubernetes_version: Some("v1.37.2".into()),
        node_labels: BTreeMap::new(),
        autoscaling: Autoscaling::default(),
    }
}

async fn install_runner_rbac(client: &kube::Client, namespace: &str) {
    let ssa = PatchParams::apply("captf-e2e").force();
    let roles: Api<ClusterRole> = Api::all(client.clone());
    roles
        .patch(
            rbac::RUNNER,
            &ssa,
            &Patch::Apply(rbac::runner_cluster_role()),
        )
        .await
        .unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    sas.create(
        &PostParams::default(),
        &rbac::runner_service_account(namespace),
    )
    .await
    .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
    bindings
        .create(
            &PostParams::default(),
            &rbac::runner_role_binding(namespace, rbac::RUNNER),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn an_apply_job_runs_the_noop_pool_module_and_stores_readable_state() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let namespace = ns.name().to_owned();
    let tmp = tempfile::tempdir().unwrap();
    let node = env.real_node().await;
    node.import(&manager_image(), MANAGER_IMAGE);
    let module_digest = node.import(
        &module_image(tmp.path(), "machinepool", "dev", &[]),
        MODULE_IMAGE,
    );
    install_runner_rbac(&client, &namespace).await;

    // The object the Job belongs to (a stand-in owner the GC can find).
    let owner = ns
        .api::<ConfigMap>()
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("pool-a".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();

    let inputs = RoleInputs::MachinePool(pool_inputs(&namespace));
    let variables = UserVariables::new();
    let rendered = render_root(&inputs, &variables).unwrap();
    let hash = inputs_hash(MODULE_IMAGE, &inputs, &variables).unwrap();
    let suffix = state_suffix(WorkloadKind::MachinePool, &namespace, "pool-a");
    let job = job_name(WorkloadKind::MachinePool, "pool-a", Op::Apply, 1, &hash, "");

    let run_secret = Secret {
        metadata: ObjectMeta {
            name: Some(format!("captf-run-{job}")),
            ..Default::default()
        },
        data: Some(
            rendered
                .files()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    };
    ns.api::<Secret>()
        .create(&PostParams::default(), &run_secret)
        .await
        .unwrap();

    let state_labels = BTreeMap::from([
        ("captf.io/managed".to_owned(), "true".to_owned()),
        (
            "cluster.x-k8s.io/cluster-name".to_owned(),
            "prod".to_owned(),
        ),
    ]);
    let request = JobBlueprint {
        kind: WorkloadKind::MachinePool,
        owner: OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "pool-a".into(),
            uid: owner.metadata.uid.clone().unwrap(),
            ..Default::default()
        },
        namespace: namespace.clone(),
        cluster_name: "prod".into(),
        job_name: job.clone(),
        attempt: 1,
        runner: RunnerArgs {
            op: Op::Apply,
            image: MODULE_IMAGE.into(),
            namespace: namespace.clone(),
            state_suffix: suffix.clone(),
            state_labels: state_labels.clone(),
            lock_timeout: Duration::from_secs(60),
            stop_timeout: Duration::from_secs(20),
            force_unlock: None,
            guard: None,
            guard_deletes: false,
            restore: None,
            plan_key: false,
            event_object: None,
            quiet_events: false,
        },
        runner_image: MANAGER_IMAGE.into(),
        image_pull_policy: None,
        inputs_hash: Some(hash.clone()),
        restore: None,
        annotations: BTreeMap::new(),
        active_deadline_seconds: 600,
        service_account: rbac::RUNNER.into(),
        image_pull_secrets: vec![],
        resources: None,
        env: vec![],
        security_context: None,
        pod_security_context: None,
        credentials_secret: None,
        plan_key_secret: None,
    };
    let jobs: Api<Job> = ns.api();
    jobs.create(&PostParams::default(), &build(&request).job)
        .await
        .unwrap();

    let condition = eventually("the Job to finish", 240, || async {
        let j = jobs.get(&job).await.unwrap();
        j.status?
            .conditions?
            .into_iter()
            .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
            .map(|c| c.type_)
    })
    .await;

    // The result document arrives as the source container's termination message.
    let pods: Api<Pod> = ns.api();
    let pod = pods
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await
        .unwrap()
        .items
        .remove(0);
    let status = pod.status.unwrap();
    let source = status
        .container_statuses
        .unwrap()
        .into_iter()
        .find(|c| c.name == "source")
        .unwrap();
    let message = source
        .state
        .unwrap()
        .terminated
        .unwrap()
        .message
        .unwrap_or_default();
    assert_eq!(condition, "Complete", "result: {message}");
    let result: serde_json::Value = serde_json::from_str(&message).unwrap();
    assert_eq!(result["version"], 1);
    assert_eq!(result["op"], "apply");
    assert!(result["error"].is_null(), "{result}");
    // The kubelet reports the image by a repository digest, as after a
    // pull: containerd names the content by the first repository that holds
    // it, which may be another test's (the manager keeps only the digest).
    assert!(
        source
            .image_id
            .ends_with(&format!("/noop-machinepool@{module_digest}")),
        "{}",
        source.image_id
    );
    // The scheduler bound the pod to the real node.
    assert_eq!(
        pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some(node.name.as_str())
    );

    // Bookkeeping reads the same through its own path: the object's Jobs by
    // owner labels, the finished one's pod, the outcome and the result.
    let selector = jobs_selector(WorkloadKind::MachinePool, "pool-a");
    let suffix =
        captf_manager::names::state_suffix(WorkloadKind::MachinePool, &namespace, "pool-a");
    let listed = jobs
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items;
    let observed = observe_jobs(&listed, &client, &namespace, &suffix)
        .await
        .unwrap();
    assert_eq!(observed.len(), 1);
    assert_eq!(
        (observed[0].record.op, observed[0].record.outcome),
        (Op::Apply, Outcome::Succeeded)
    );
    assert_eq!(
        observed[0].result.as_ref().map(|r| r.op.as_str()),
        Some("apply")
    );
    mark_bookkept(&client, &namespace, &job, Outcome::Succeeded, None)
        .await
        .unwrap();
    let again = jobs
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items;
    let observed = observe_jobs(&again, &client, &namespace, &suffix)
        .await
        .unwrap();
    assert_eq!(observed[0].record.outcome, Outcome::Succeeded);
    assert!(
        observed[0].result.is_none(),
        "a bookkept Job's pod is not read again"
    );

    // The state the backend wrote, read as the controller reads it.
    let secrets: Api<Secret> = ns.api();
    let listed = secrets
        .list(&ListParams::default().labels(&format!("tfstate=true,tfstateSecretSuffix={suffix}")))
        .await
        .unwrap()
        .items;
    assert_eq!(listed.len(), 1);
    let labels = listed[0].metadata.labels.clone().unwrap_or_default();
    for (k, v) in &state_labels {
        assert_eq!(labels.get(k), Some(v), "state Secret label {k}");
    }
    let chunks: Vec<StateSecret> = listed
        .iter()
        .map(|s| StateSecret {
            name: s.metadata.name.clone().unwrap(),
            tfstate: s
                .data
                .as_ref()
                .and_then(|d| d.get("tfstate"))
                .map(|b| b.0.clone()),
            inputs_hash: None,
        })
        .collect();
    let state = read(&state_secret(&suffix), &chunks).unwrap();
    assert!(state.managed_resources > 0);
    let outputs = RootOutputs::from_output_json(
        &serde_json::to_value(
            state
                .outputs
                .iter()
                .map(|(k, o)| (k.clone(), serde_json::json!({"value": o.value})))
                .collect::<serde_json::Map<_, _>>(),
        )
        .unwrap(),
    )
    .unwrap();
    let RoleOutputs::MachinePool(decoded) = decode(Role::MachinePool, &outputs) else {
        panic!("pool outputs")
    };
    assert_eq!(
        decoded.verdict.reason(),
        OutputsReason::OutputsValid,
        "{:?}",
        decoded.verdict
    );
    let pool = decoded.outputs.unwrap();
    assert_eq!(pool.replicas, 3);
    assert_eq!(pool.provider_id_list.len(), 3);
}
