//! Inputs records and the runner's RBAC written to, and read from, the real
//! apiserver.

use captf_manager::io::records::{ensure_runner_rbac, read_record, write_record};
use captf_manager::names::WorkloadKind;
use captf_manager::records::{InputsRecord, RecordMeta, attempt_record_name, record_labels};
use captf_testenv::TestEnv;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
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
async fn runner_rbac_is_ensured_idempotently() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    ensure_runner_rbac(&client, ns.name()).await.unwrap();
    ensure_runner_rbac(&client, ns.name()).await.unwrap();
    assert!(
        ns.api::<ServiceAccount>()
            .get_opt("captf-runner")
            .await
            .unwrap()
            .is_some()
    );
    let rb = ns.api::<RoleBinding>().get("captf-runner").await.unwrap();
    assert_eq!(rb.role_ref.name, "captf-runner");
    assert_eq!(
        rb.subjects.unwrap()[0].namespace.as_deref(),
        Some(ns.name())
    );
}
