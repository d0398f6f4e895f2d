//! Reading, writing and pruning an object's state backup Secrets. What to
//! write and what to prune is decided in `state/backups.rs`.

use std::collections::BTreeMap;

use captf_api::names::labels;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};

use crate::state::backups::{BackupChunk, BackupSecret, chunk_of};

/// The labels that find the backups of `suffix`.
pub fn backup_selector(suffix: &str) -> String {
    format!(
        "{}=true,{}={suffix}",
        labels::STATE_BACKUP,
        labels::STATE_BACKUP_SUFFIX
    )
}

/// The backup chunks of `suffix` (one LIST), with each chunk's payload by
/// name. A labelled Secret without the annotations of a chunk is no backup
/// and is left alone.
pub async fn list_chunks(
    client: &kube::Client,
    namespace: &str,
    suffix: &str,
) -> Result<(Vec<BackupChunk>, BTreeMap<String, Vec<u8>>), kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let listed = api
        .list(&ListParams::default().labels(&backup_selector(suffix)))
        .await?;
    let mut chunks = Vec::new();
    let mut payloads = BTreeMap::new();
    for s in listed.items {
        let payload = s
            .data
            .and_then(|mut d| d.remove("tfstate"))
            .map(|b| b.0)
            .unwrap_or_default();
        let (Some(name), Some(annotations)) = (s.metadata.name, s.metadata.annotations) else {
            continue;
        };
        if let Some(chunk) = chunk_of(&name, &annotations, payload.len() as u64) {
            chunks.push(chunk);
            payloads.insert(name, payload);
        }
    }
    Ok((chunks, payloads))
}

/// Creates the Secrets of a backup set, owned (not as controller) by the
/// object so they go with it but survive the state. One that exists already
/// is an interrupted write of the same set being finished.
pub async fn write_set(
    client: &kube::Client,
    namespace: &str,
    suffix: &str,
    secrets: &[BackupSecret],
    state_labels: &BTreeMap<String, String>,
    owner: &OwnerReference,
) -> Result<(), kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut labels = state_labels.clone();
    labels.insert(labels::STATE_BACKUP.to_owned(), "true".to_owned());
    labels.insert(labels::STATE_BACKUP_SUFFIX.to_owned(), suffix.to_owned());
    let owner = OwnerReference {
        controller: None,
        block_owner_deletion: None,
        ..owner.clone()
    };
    for s in secrets {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(s.name.clone()),
                namespace: Some(namespace.to_owned()),
                labels: Some(labels.clone()),
                annotations: Some(s.annotations.clone()),
                owner_references: Some(vec![owner.clone()]),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(
                "tfstate".to_owned(),
                ByteString(s.payload.clone()),
            )])),
            immutable: Some(true),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &secret).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Deletes the named chunk Secrets (one already gone is done).
pub async fn delete_chunks(
    client: &kube::Client,
    namespace: &str,
    names: &[String],
) -> Result<(), kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for name in names {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
