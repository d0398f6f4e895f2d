//! Inputs records and the runner's RBAC written to, and read from, the real
//! apiserver.

use captf_manager::io::records::{read_record, write_record};
use captf_manager::io::runner_rbac::ensure_object_runner;
use captf_manager::names::WorkloadKind;
use captf_manager::rbac;
use captf_manager::records::{InputsRecord, RecordMeta, attempt_record_name, record_labels};
use captf_testenv::TestEnv;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ObjectMeta, PostParams};

fn record(hash: &str) -> InputsRecord {
    InputsRecord {
        main_tf_json: "{\"module\":{}}\n".into(),
        tfvars_json: "{\"bootstrap_data\":\"c2VjcmV0\"}\n".into(),
        meta: RecordMeta {
            inputs_hash: hash.into(),
            image: "ghcr.io/captf-io/noop-machinepool:v1-tofu".into(),
            image_digest: None,
            identity: None,
            identity_kind: None,
            job: Some("captf-mp-pool-apply-a1-abcdef".into()),
            unconfirmed_apply: None,
            unpullable_images: Vec::new(),
        },
        exports: Default::default(),
    }
}

#[tokio::test]
async fn records_round_trip_and_are_rewritten() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let cm = ns
        .api::<ConfigMap>()
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("pool".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "pool".into(),
        uid: cm.metadata.uid.unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let name = attempt_record_name(WorkloadKind::MachinePool, "pool");
    assert!(
        read_record(&client, ns.name(), &name)
            .await
            .unwrap()
            .is_none()
    );

    let labels = record_labels(WorkloadKind::MachinePool, "pool");
    write_record(
        &client,
        ns.name(),
        &name,
        &record("h2:one"),
        &owner,
        labels.clone(),
    )
    .await
    .unwrap();
    assert_eq!(
        read_record(&client, ns.name(), &name)
            .await
            .unwrap()
            .unwrap()
            .unwrap(),
        record("h2:one")
    );

    // The next apply rewrites it; a digest pinned on promotion shows up too.
    let next = record("h2:two").promote("job-2", Some("sha256:11"), None);
    write_record(&client, ns.name(), &name, &next, &owner, labels)
        .await
        .unwrap();
    let read = read_record(&client, ns.name(), &name)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(read, next);
    assert_eq!(read.meta.image_digest.as_deref(), Some("sha256:11"));
}

#[tokio::test]
async fn an_objects_runner_identity_is_applied_idempotently() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    // A real owner, so the garbage collector keeps what it owns.
    let owner = ns
        .api::<ConfigMap>()
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
    let runner = rbac::ObjectRunner {
        namespace: ns.name().to_owned(),
        state_suffix: "0123456789abcdef-mp".into(),
        owner: OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: owner.metadata.uid.unwrap(),
            ..Default::default()
        },
    };
    ensure_object_runner(&client, &runner).await.unwrap();
    ensure_object_runner(&client, &runner).await.unwrap();
    let name = "captf-runner-0123456789abcdef-mp";
    let sa = ns.api::<ServiceAccount>().get(name).await.unwrap();
    assert_eq!(sa.metadata.owner_references.unwrap()[0].name, "owner");
    let role = ns.api::<Role>().get(name).await.unwrap();
    assert_eq!(role.rules, runner.role().rules);
    let rb = ns.api::<RoleBinding>().get(name).await.unwrap();
    assert_eq!(
        (rb.role_ref.kind.as_str(), rb.role_ref.name.as_str()),
        ("Role", name)
    );
    assert_eq!(
        rb.subjects.unwrap()[0].namespace.as_deref(),
        Some(ns.name())
    );
}
