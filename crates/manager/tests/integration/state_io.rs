//! State read and adopted from Secrets shaped as the `kubernetes` backend
//! writes them, on the real apiserver.

use std::collections::BTreeMap;
use std::io::Write;

use captf_manager::io::state::{adopt, read_state};
use captf_manager::names::{WorkloadKind, state_secret, state_suffix};
use captf_testenv::TestEnv;
use flate2::Compression;
use flate2::write::GzEncoder;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::json;

fn backend_secret(name: &str, suffix: &str, state: &serde_json::Value) -> Secret {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(state.to_string().as_bytes()).unwrap();
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([
                ("tfstate".into(), "true".into()),
                ("tfstateSecretSuffix".into(), suffix.into()),
                ("tfstateWorkspace".into(), "default".into()),
            ])),
            annotations: Some(BTreeMap::from([("encoding".into(), "gzip".into())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "tfstate".into(),
            ByteString(gz.finish().unwrap()),
        )])),
        ..Default::default()
    }
}

#[tokio::test]
async fn state_is_read_adopted_and_re_owned() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let suffix = state_suffix(WorkloadKind::Cluster, ns.name(), "prod");

    let missing = read_state(&client, ns.name(), &suffix).await.unwrap();
    assert_eq!(missing.unwrap_err().reason(), "StateNotFound");

    let state = json!({"version": 4, "serial": 3, "lineage": "l", "terraform_version": "1.10.10",
        "outputs": {"exports": {"value": {"a": 1}, "type": ["object", {}], "sensitive": true}},
        "resources": [{"mode": "managed", "type": "terraform_data", "name": "x", "instances": []}]});
    let secrets: Api<Secret> = ns.api();
    secrets
        .create(
            &PostParams::default(),
            &backend_secret(&state_secret(&suffix), &suffix, &state),
        )
        .await
        .unwrap();
    let read = read_state(&client, ns.name(), &suffix)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            read.serial,
            read.managed_resources,
            read.inputs_hash.clone()
        ),
        (3, 1, None)
    );

    // Adopt for the object; a real owner so the garbage collector keeps it.
    let owner_obj = ns
        .api::<ConfigMap>()
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("prod".into()),
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
        name: "prod".into(),
        uid: owner_obj.metadata.uid.clone().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    // The five state labels an older manager's chunks lack are added; the
    // backend's own stay.
    let state_labels = captf_manager::names::state_labels(
        captf_manager::names::WorkloadKind::Cluster,
        "prod",
        "prod",
    );
    let first = adopt(
        &client,
        ns.name(),
        &suffix,
        &owner,
        &state_labels,
        Some("h2:abc"),
    )
    .await
    .unwrap();
    assert!(first.rehashed, "the base Secret records the hash");
    let base = secrets.get(&state_secret(&suffix)).await.unwrap();
    let labels = base.metadata.labels.clone().unwrap_or_default();
    for (k, v) in &state_labels {
        assert_eq!(labels.get(k), Some(v), "{k}");
    }
    assert_eq!(labels.get("tfstate").map(String::as_str), Some("true"));
    let refs = base.metadata.owner_references.clone().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].uid, owner.uid);
    assert_eq!(
        (refs[0].controller, refs[0].block_owner_deletion),
        (None, None)
    );
    let read = read_state(&client, ns.name(), &suffix)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.inputs_hash.as_deref(), Some("h2:abc"));

    // Adopting again changes nothing; a restore without a hash removes it.
    let rv = base.metadata.resource_version.clone();
    let again = adopt(
        &client,
        ns.name(),
        &suffix,
        &owner,
        &state_labels,
        Some("h2:abc"),
    )
    .await
    .unwrap();
    assert_eq!(
        secrets
            .get(&state_secret(&suffix))
            .await
            .unwrap()
            .metadata
            .resource_version,
        rv
    );
    assert_eq!(again, Default::default(), "nothing to announce");
    adopt(&client, ns.name(), &suffix, &owner, &state_labels, None)
        .await
        .unwrap();
    let read = read_state(&client, ns.name(), &suffix)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.inputs_hash, None);
}
