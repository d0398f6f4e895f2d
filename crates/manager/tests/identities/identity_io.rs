//! TerraformClusterIdentity reconciliation and the credentials mirror
//! against the real apiserver: who may use an identity, the mirror's life
//! (created, rotated, shared, released, revoked) and what the conditions
//! say on the way.

use std::collections::BTreeMap;

use captf_api::TerraformClusterIdentity;
use captf_api::common::{IdentityKind, IdentityReference};
use captf_api::names::{annotations, events, labels, reasons};
use captf_manager::identity::{Credentials, MirrorEvent};
use captf_manager::io::identity::{
    User, ensure_credentials, reconcile_identity, release_credentials,
};
use captf_testenv::{TestEnv, TestNamespace};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

/// A credential value that must never show up in a message.
const SECRET_VALUE: &str = "hunter2-do-not-print";

fn bytes(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect()
}

async fn put_source(ns: &TestNamespace, name: &str, pairs: &[(&str, &str)]) {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        data: Some(bytes(pairs)),
        ..Default::default()
    };
    let api = ns.api::<Secret>();
    match api.get_opt(name).await.unwrap() {
        None => {
            api.create(&PostParams::default(), &secret).await.unwrap();
        }
        Some(_) => {
            api.patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "data": secret.data })),
            )
            .await
            .unwrap();
        }
    }
}

/// Creates an identity reading `source` from `ns`, with the given
/// `allowedNamespaces` (JSON, `null` for unset) and required keys.
async fn create_identity(
    client: &kube::Client,
    name: &str,
    ns: &TestNamespace,
    source: &str,
    allowed: serde_json::Value,
    required: &[&str],
) {
    let mut spec = json!({ "secretRef": { "name": source, "namespace": ns.name() } });
    if !allowed.is_null() {
        spec["allowedNamespaces"] = allowed;
    }
    if !required.is_empty() {
        spec["requiredKeys"] = json!(required);
    }
    let identity: TerraformClusterIdentity = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "TerraformClusterIdentity",
        "metadata": { "name": name },
        "spec": spec,
    }))
    .unwrap();
    Api::<TerraformClusterIdentity>::all(client.clone())
        .create(&PostParams::default(), &identity)
        .await
        .unwrap();
}

async fn set_allowed(client: &kube::Client, name: &str, allowed: serde_json::Value) {
    Api::<TerraformClusterIdentity>::all(client.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "allowedNamespaces": allowed } })),
        )
        .await
        .unwrap();
}

async fn delete_identity(client: &kube::Client, name: &str) {
    let _ = Api::<TerraformClusterIdentity>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

/// A real object to own the mirror (the garbage collector would remove a
/// mirror whose owners do not exist).
async fn user_object(ns: &TestNamespace, name: &str) -> OwnerReference {
    let cm = ns
        .api::<ConfigMap>()
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: name.into(),
        uid: cm.metadata.uid.unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn by_identity(name: &str) -> IdentityReference {
    IdentityReference {
        kind: None,
        name: name.to_owned(),
    }
}

async fn ensure(
    client: &kube::Client,
    ns: &TestNamespace,
    owner: &OwnerReference,
    identity: &IdentityReference,
) -> Credentials {
    let creds = ensure_credentials(
        client,
        &User {
            namespace: ns.name(),
            owner,
            identity: Some(identity),
        },
    )
    .await;
    for m in [
        &creds.identity_allowed.message,
        &creds.credentials_mirrored.message,
    ] {
        assert!(!m.contains(SECRET_VALUE), "a credential leaked: {m}");
    }
    creds
}

fn reasons_of(c: &Credentials) -> (&str, &str, &str, &str) {
    (
        c.identity_allowed.status.as_str(),
        c.identity_allowed.reason,
        c.credentials_mirrored.status.as_str(),
        c.credentials_mirrored.reason,
    )
}

const ALLOWED_AND_MIRRORED: (&str, &str, &str, &str) =
    ("True", reasons::IDENTITY_ALLOWED, "True", reasons::MIRRORED);

async fn mirror(ns: &TestNamespace, identity: &str) -> Option<Secret> {
    ns.api::<Secret>()
        .get_opt(&format!("captf-creds-{identity}"))
        .await
        .unwrap()
}

fn owner_uids(s: &Secret) -> Vec<String> {
    s.metadata
        .owner_references
        .iter()
        .flatten()
        .map(|o| o.uid.clone())
        .collect()
}

#[tokio::test]
async fn allowed_by_list_mirrors_and_reports_status() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let id = format!("{}-list", ns.name());
    put_source(&ns, "src", &[("AWS_SECRET_ACCESS_KEY", SECRET_VALUE)]).await;
    create_identity(
        &client,
        &id,
        &ns,
        "src",
        json!({ "list": ["elsewhere", ns.name()] }),
        &[],
    )
    .await;
    let owner = user_object(&ns, "cluster-a").await;

    let creds = ensure(&client, &ns, &owner, &by_identity(&id)).await;
    assert_eq!(reasons_of(&creds), ALLOWED_AND_MIRRORED, "{creds:?}");
    let name = format!("captf-creds-{id}");
    assert_eq!(creds.secret.as_deref(), Some(name.as_str()));
    assert_eq!(creds.events, [MirrorEvent::Created(name.clone())]);

    let m = mirror(&ns, &id).await.expect("mirror created");
    assert_eq!(
        m.data,
        Some(bytes(&[("AWS_SECRET_ACCESS_KEY", SECRET_VALUE)]))
    );
    assert_eq!(m.type_.as_deref(), Some("Opaque"));
    let l = m.metadata.labels.as_ref().unwrap();
    assert_eq!(
        (l[labels::MANAGED].as_str(), l[labels::MIRRORED].as_str()),
        ("true", "true")
    );
    let a = m.metadata.annotations.as_ref().unwrap();
    assert_eq!(a[annotations::IDENTITY], id);
    assert_eq!(a[annotations::SOURCE_HASH].len(), 64);
    let refs = m.metadata.owner_references.as_ref().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].uid, owner.uid);
    assert_eq!(refs[0].controller, None);
    assert_eq!(refs[0].block_owner_deletion, None);

    // A second pass finds it current: nothing rewritten, no new event.
    let again = ensure(&client, &ns, &owner, &by_identity(&id)).await;
    assert_eq!(reasons_of(&again), ALLOWED_AND_MIRRORED);
    assert!(again.events.is_empty());
    let same = mirror(&ns, &id).await.unwrap();
    assert_eq!(same.metadata.resource_version, m.metadata.resource_version);

    // The identity reports itself ready and the namespace in use.
    let out = reconcile_identity(&client, &id).await.unwrap().unwrap();
    assert_eq!(
        (out.ready.status.as_str(), out.ready.reason),
        ("True", reasons::SECRET_FOUND)
    );
    assert_eq!(out.namespaces, [ns.name()]);
    assert_eq!(out.event, None, "a first Ready=True is not an event");
    let stored = Api::<TerraformClusterIdentity>::all(client.clone())
        .get(&id)
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(stored.namespaces, Some(vec![ns.name().to_owned()]));
    let ready = &stored.conditions.unwrap()[0];
    assert_eq!(
        (ready.type_.as_str(), ready.status.as_str()),
        ("Ready", "True")
    );
    assert!(
        reconcile_identity(&client, "no-such-identity")
            .await
            .unwrap()
            .is_none()
    );
    delete_identity(&client, &id).await;
}

#[tokio::test]
async fn allowed_by_namespace_selector() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let id = format!("{}-sel", ns.name());
    put_source(&ns, "src", &[("TOKEN", SECRET_VALUE)]).await;
    // Select on a label unique to this test's namespace.
    create_identity(
        &client,
        &id,
        &ns,
        "src",
        json!({ "selector": { "matchLabels": { "captf-test/team": ns.name() } } }),
        &[],
    )
    .await;
    let owner = user_object(&ns, "c").await;

    let before = ensure(&client, &ns, &owner, &by_identity(&id)).await;
    assert_eq!(
        (
            before.identity_allowed.status.as_str(),
            before.identity_allowed.reason
        ),
        ("False", reasons::NAMESPACE_NOT_ALLOWED)
    );
    assert!(mirror(&ns, &id).await.is_none());

    Api::<Namespace>::all(client.clone())
        .patch(
            ns.name(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "captf-test/team": ns.name() } } })),
        )
        .await
        .unwrap();
    let after = ensure(&client, &ns, &owner, &by_identity(&id)).await;
    assert_eq!(reasons_of(&after), ALLOWED_AND_MIRRORED, "{after:?}");
    assert!(mirror(&ns, &id).await.is_some());
    delete_identity(&client, &id).await;
}

#[tokio::test]
async fn not_allowed_then_allowed_then_rotated_then_revoked() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let id = format!("{}-life", ns.name());
    put_source(&ns, "src", &[("KEY", "v1")]).await;
    create_identity(
        &client,
        &id,
        &ns,
        "src",
        json!({ "list": ["someone-else"] }),
        &[],
    )
    .await;
    let owner = user_object(&ns, "c").await;

    // Not allowed: no mirror, nothing to mount, the mirror waits.
    let denied = ensure(&client, &ns, &owner, &by_identity(&id)).await;
    assert_eq!(
        reasons_of(&denied),
        (
            "False",
            reasons::NAMESPACE_NOT_ALLOWED,
            "Unknown",
            reasons::MIRROR_PENDING
        )
    );
    assert!(denied.identity_allowed.message.contains(ns.name()));
    assert_eq!(denied.secret, None);
    assert!(mirror(&ns, &id).await.is_none());

    // Allowed later: the mirror appears with the source's data.
    set_allowed(&client, &id, json!({ "list": ["someone-else", ns.name()] })).await;
    let allowed = ensure(&client, &ns, &owner, &by_identity(&id)).await;
    assert_eq!(reasons_of(&allowed), ALLOWED_AND_MIRRORED);
    let m = mirror(&ns, &id).await.unwrap();
    assert_eq!(m.data, Some(bytes(&[("KEY", "v1")])));
    let hash = m.metadata.annotations.as_ref().unwrap()[annotations::SOURCE_HASH].clone();

    // Rotation: the next pass copies the new data and hash.
    put_source(&ns, "src", &[("KEY", "v2"), ("EXTRA", "x")]).await;
    let rotated = ensure(&client, &ns, &owner, &by_identity(&id)).await;
    assert_eq!(reasons_of(&rotated), ALLOWED_AND_MIRRORED);
    assert!(rotated.events.is_empty(), "a rewrite is not a creation");
    let m = mirror(&ns, &id).await.unwrap();
    assert_eq!(m.data, Some(bytes(&[("EXTRA", "x"), ("KEY", "v2")])));
    assert_ne!(
        m.metadata.annotations.as_ref().unwrap()[annotations::SOURCE_HASH],
        hash
    );

    // Revoked: the namespace leaves the list and the mirror goes.
    set_allowed(&client, &id, json!({ "list": ["someone-else"] })).await;
    let revoked = ensure(&client, &ns, &owner, &by_identity(&id)).await;
    assert_eq!(
        reasons_of(&revoked),
        (
            "False",
            reasons::NAMESPACE_NOT_ALLOWED,
            "Unknown",
            reasons::MIRROR_PENDING
        )
    );
    assert_eq!(
        revoked.events,
        [MirrorEvent::Removed(format!("captf-creds-{id}"))]
    );
    assert!(mirror(&ns, &id).await.is_none());
    let out = reconcile_identity(&client, &id).await.unwrap().unwrap();
    assert!(out.namespaces.is_empty());
    delete_identity(&client, &id).await;
}

#[tokio::test]
async fn shared_mirror_is_released_user_by_user() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let id = format!("{}-shared", ns.name());
    put_source(&ns, "src", &[("KEY", SECRET_VALUE)]).await;
    create_identity(&client, &id, &ns, "src", json!({ "selector": {} }), &[]).await;
    let cluster = user_object(&ns, "cluster").await;
    let machine = user_object(&ns, "machine").await;

    let a = ensure(&client, &ns, &cluster, &by_identity(&id)).await;
    let b = ensure(&client, &ns, &machine, &by_identity(&id)).await;
    assert_eq!(reasons_of(&a), ALLOWED_AND_MIRRORED);
    assert_eq!(reasons_of(&b), ALLOWED_AND_MIRRORED);
    assert_eq!(a.secret, b.secret);
    assert!(
        b.events.is_empty(),
        "the second user joins an existing mirror"
    );
    let m = mirror(&ns, &id).await.unwrap();
    assert_eq!(owner_uids(&m), [cluster.uid.clone(), machine.uid.clone()]);

    // Releasing one keeps the mirror for the other.
    let released = release_credentials(&client, ns.name(), &cluster)
        .await
        .unwrap();
    assert!(released.is_empty());
    let m = mirror(&ns, &id).await.expect("still used by the machine");
    assert_eq!(owner_uids(&m), std::slice::from_ref(&machine.uid));
    // Releasing again is a no-op.
    assert!(
        release_credentials(&client, ns.name(), &cluster)
            .await
            .unwrap()
            .is_empty()
    );

    // Releasing the last user deletes it.
    let released = release_credentials(&client, ns.name(), &machine)
        .await
        .unwrap();
    assert_eq!(
        released,
        [MirrorEvent::Removed(format!("captf-creds-{id}"))]
    );
    assert!(mirror(&ns, &id).await.is_none());
    delete_identity(&client, &id).await;
}

#[tokio::test]
async fn switching_identity_releases_the_old_mirror() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let old = format!("{}-old", ns.name());
    let new = format!("{}-new", ns.name());
    put_source(&ns, "src", &[("KEY", "v")]).await;
    create_identity(
        &client,
        &old,
        &ns,
        "src",
        json!({ "list": [ns.name()] }),
        &[],
    )
    .await;
    create_identity(
        &client,
        &new,
        &ns,
        "src",
        json!({ "list": [ns.name()] }),
        &[],
    )
    .await;
    let owner = user_object(&ns, "c").await;

    ensure(&client, &ns, &owner, &by_identity(&old)).await;
    assert!(mirror(&ns, &old).await.is_some());
    let switched = ensure(&client, &ns, &owner, &by_identity(&new)).await;
    assert_eq!(reasons_of(&switched), ALLOWED_AND_MIRRORED);
    assert_eq!(
        switched.events,
        [
            MirrorEvent::Removed(format!("captf-creds-{old}")),
            MirrorEvent::Created(format!("captf-creds-{new}")),
        ]
    );
    assert!(mirror(&ns, &old).await.is_none());
    assert!(mirror(&ns, &new).await.is_some());
    delete_identity(&client, &old).await;
    delete_identity(&client, &new).await;
}

#[tokio::test]
async fn missing_required_keys_block_without_leaking_values() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let id = format!("{}-keys", ns.name());
    put_source(&ns, "src", &[("AWS_ACCESS_KEY_ID", SECRET_VALUE)]).await;
    create_identity(
        &client,
        &id,
        &ns,
        "src",
        json!({ "list": [ns.name()] }),
        &["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
    )
    .await;
    let owner = user_object(&ns, "c").await;

    let creds = ensure(&client, &ns, &owner, &by_identity(&id)).await;
    assert_eq!(
        reasons_of(&creds),
        (
            "False",
            reasons::CREDENTIALS_INCOMPLETE,
            "Unknown",
            reasons::MIRROR_PENDING
        )
    );
    assert!(
        creds
            .identity_allowed
            .message
            .contains("AWS_SECRET_ACCESS_KEY")
    );
    assert!(
        !creds
            .identity_allowed
            .message
            .contains("AWS_ACCESS_KEY_ID,")
    );
    assert_eq!(creds.secret, None);
    assert!(mirror(&ns, &id).await.is_none());

    let out = reconcile_identity(&client, &id).await.unwrap().unwrap();
    assert_eq!(
        (out.ready.status.as_str(), out.ready.reason),
        ("False", reasons::CREDENTIALS_INCOMPLETE)
    );
    assert!(out.ready.message.contains("AWS_SECRET_ACCESS_KEY"));
    assert!(!out.ready.message.contains(SECRET_VALUE));
    let event = out.event.expect("a first bad Ready is an event");
    assert_eq!(
        (event.reason, event.warning),
        (events::IDENTITY_SECRET_NOT_FOUND, true)
    );
    assert!(!event.note.contains(SECRET_VALUE));
    assert_eq!(out.requeue_after.as_secs(), 30);

    // Completing the Secret unblocks the user and readies the identity.
    put_source(
        &ns,
        "src",
        &[
            ("AWS_ACCESS_KEY_ID", SECRET_VALUE),
            ("AWS_SECRET_ACCESS_KEY", ""),
        ],
    )
    .await;
    let creds = ensure(&client, &ns, &owner, &by_identity(&id)).await;
    assert_eq!(reasons_of(&creds), ALLOWED_AND_MIRRORED);
    let out = reconcile_identity(&client, &id).await.unwrap().unwrap();
    assert_eq!(
        (out.ready.status.as_str(), out.ready.reason),
        ("True", reasons::SECRET_FOUND)
    );
    assert_eq!(
        out.event.map(|e| e.reason),
        Some(events::IDENTITY_SECRET_FOUND)
    );
    assert_eq!(out.requeue_after.as_secs(), 300);
    delete_identity(&client, &id).await;
}

#[tokio::test]
async fn missing_identity_secret_and_foreign_mirror_name() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let owner = user_object(&ns, "c").await;

    let gone = ensure(&client, &ns, &owner, &by_identity("no-such-identity")).await;
    assert_eq!(
        reasons_of(&gone),
        (
            "False",
            reasons::IDENTITY_NOT_FOUND,
            "Unknown",
            reasons::MIRROR_PENDING
        )
    );
    let none = ensure_credentials(
        &client,
        &User {
            namespace: ns.name(),
            owner: &owner,
            identity: None,
        },
    )
    .await;
    assert_eq!(none.identity_allowed.reason, reasons::IDENTITY_NOT_FOUND);

    let id = format!("{}-foreign", ns.name());
    create_identity(
        &client,
        &id,
        &ns,
        "not-there",
        json!({ "list": [ns.name()] }),
        &[],
    )
    .await;
    let no_secret = ensure(&client, &ns, &owner, &by_identity(&id)).await;
    assert_eq!(
        (
            no_secret.identity_allowed.status.as_str(),
            no_secret.identity_allowed.reason
        ),
        ("False", reasons::SECRET_NOT_FOUND)
    );
    assert!(
        no_secret
            .identity_allowed
            .message
            .contains(&format!("{}/not-there", ns.name()))
    );
    let out = reconcile_identity(&client, &id).await.unwrap().unwrap();
    assert_eq!(out.ready.reason, reasons::SECRET_NOT_FOUND);

    // A Secret squatting on the mirror's name is never overwritten.
    put_source(&ns, "not-there", &[("KEY", SECRET_VALUE)]).await;
    let squatter = Secret {
        metadata: ObjectMeta {
            name: Some(format!("captf-creds-{id}")),
            ..Default::default()
        },
        data: Some(bytes(&[("MINE", "keep")])),
        ..Default::default()
    };
    ns.api::<Secret>()
        .create(&PostParams::default(), &squatter)
        .await
        .unwrap();
    let conflict = ensure(&client, &ns, &owner, &by_identity(&id)).await;
    assert_eq!(
        reasons_of(&conflict),
        (
            "True",
            reasons::IDENTITY_ALLOWED,
            "False",
            reasons::MIRROR_FAILED
        )
    );
    assert!(conflict.credentials_mirrored.message.contains(&id));
    assert_eq!(conflict.secret, None);
    let kept = mirror(&ns, &id).await.unwrap();
    assert_eq!(kept.data, Some(bytes(&[("MINE", "keep")])));
    assert!(kept.metadata.owner_references.is_none());
    delete_identity(&client, &id).await;
}

#[tokio::test]
async fn local_secret_is_used_directly() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let client = ns.client();
    let owner = user_object(&ns, "c").await;
    let local = IdentityReference {
        kind: Some(IdentityKind::Secret),
        name: "my-creds".into(),
    };

    let missing = ensure(&client, &ns, &owner, &local).await;
    assert_eq!(
        reasons_of(&missing),
        (
            "False",
            reasons::SECRET_NOT_FOUND,
            "Unknown",
            reasons::MIRROR_PENDING
        )
    );
    put_source(&ns, "my-creds", &[("KEY", SECRET_VALUE)]).await;
    let found = ensure(&client, &ns, &owner, &local).await;
    assert_eq!(
        reasons_of(&found),
        ("True", reasons::LOCAL_SECRET, "True", reasons::MIRRORED)
    );
    assert_eq!(found.secret.as_deref(), Some("my-creds"));
    assert!(found.events.is_empty());
    // No mirror of any kind was made.
    let secrets = ns.api::<Secret>().list(&Default::default()).await.unwrap();
    assert!(
        secrets.items.iter().all(|s| !s
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
            .starts_with("captf-creds-")),
        "a local Secret needs no mirror"
    );
}
