//! Writing and reading the inputs records. Records carry bootstrap data and
//! variable values: their contents are never logged.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};

use captf_api::names::annotations;

use crate::records::{InputsRecord, RecordError};

use super::FIELD_MANAGER;

/// The Secret holding `record` under `name`, owned by the object.
fn record_secret(
    name: &str,
    namespace: &str,
    record: &InputsRecord,
    owner: &OwnerReference,
    labels: BTreeMap<String, String>,
) -> Secret {
    let (data, annotations) = record.to_secret_parts();
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                controller: None,
                block_owner_deletion: None,
                ..owner.clone()
            }]),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    }
}

/// Writes (creates or replaces) a record with server-side apply.
pub async fn write_record(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    record: &InputsRecord,
    owner: &OwnerReference,
    labels: BTreeMap<String, String>,
) -> Result<(), kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = record_secret(name, namespace, record, owner, labels);
    // Server-side apply needs the kind on the wire.
    let mut value = serde_json::to_value(&secret).expect("a Secret serializes");
    value["apiVersion"] = "v1".into();
    value["kind"] = "Secret".into();
    let stored = api
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&value),
        )
        .await?;
    // A record an earlier release wrote may carry its `interrupted-apply`
    // mark, which this apply does not own and so cannot remove; the mark
    // now lives under the current key (or was cleared), so the old key
    // goes, with a merge patch, once. Until then it reads as the same mark,
    // never as a less safe state.
    let legacy = annotations::INTERRUPTED_APPLY;
    if stored
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(legacy))
    {
        api.patch(
            name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..Default::default()
            },
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {legacy: null}}})),
        )
        .await?;
    }
    Ok(())
}

/// Reads a record: `Ok(None)` when the Secret does not exist.
pub async fn read_record(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Result<InputsRecord, RecordError>>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    Ok(api.get_opt(name).await?.map(|s| {
        InputsRecord::from_secret_parts(
            &s.data.unwrap_or_default(),
            &s.metadata.annotations.unwrap_or_default(),
        )
    }))
}

/// Sets (`Some`) or clears (`None`) the unknown-outcome mark on the attempt
/// record `name`, rewriting it as its own field manager so a later rewrite
/// removes the mark. Marking needs the record to name `job` (the apply
/// whose outcome is unknown): a record rewritten for a newer apply keeps
/// what it says. `Ok(false)`: no such record, or it names another Job.
pub async fn set_unconfirmed(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    job: Option<&str>,
) -> Result<bool, kube::Error> {
    rewrite(client, namespace, name, |record| {
        if job.is_some() && record.meta.job.as_deref() != job {
            return false;
        }
        record.meta.unconfirmed_apply = job.map(str::to_owned);
        true
    })
    .await
}

/// Adds `image` to the attempt record's unpullable images (at most three,
/// newest last). `Ok(false)`: there is no readable record to remember it in.
pub async fn add_unpullable(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    image: &str,
) -> Result<bool, kube::Error> {
    rewrite(client, namespace, name, |record| {
        record.meta.unpullable_images =
            crate::jobs::recovery::remember_unpullable(&record.meta.unpullable_images, image);
        true
    })
    .await
}

/// Reads the record `name`, lets `edit` change it (false: leave it), and
/// writes it back under its owner and labels. `Ok(false)`: no readable
/// record, or `edit` declined.
async fn rewrite(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    edit: impl FnOnce(&mut InputsRecord) -> bool,
) -> Result<bool, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let Some(secret) = api.get_opt(name).await? else {
        return Ok(false);
    };
    let meta = &secret.metadata;
    let Ok(mut record) = InputsRecord::from_secret_parts(
        secret.data.as_ref().unwrap_or(&BTreeMap::new()),
        meta.annotations.as_ref().unwrap_or(&BTreeMap::new()),
    ) else {
        return Ok(false);
    };
    let Some(owner) = meta.owner_references.as_ref().and_then(|o| o.first()) else {
        return Ok(false);
    };
    if !edit(&mut record) {
        return Ok(false);
    }
    let labels = meta.labels.clone().unwrap_or_default();
    write_record(client, namespace, name, &record, owner, labels).await?;
    Ok(true)
}
