//! `spec.deletionPolicy: Retain`: a deleted object keeps its state,
//! backups and inputs records, unowned and labeled with its UID, so the
//! infrastructure outlives it. A later object of the same kind, namespace
//! and name finds them and holds until it adopts them
//! (`spec.adoptRetainedState`) or someone deletes them.

use captf_api::names::labels;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::workload::Workload;
use super::{Context, Error};
use crate::io::state::state_selector;
use crate::names::{name_label, state_suffix};
use crate::records::{applied_record_name, attempt_record_name};

/// Whether a Secret of the namespace belongs to `obj`'s kept set: a state
/// chunk of its suffix, a backup, or one of its two inputs records.
fn kept<K: Workload>(obj: &K, s: &Secret) -> bool {
    let name = obj.name_any();
    let suffix = state_suffix(K::KIND, &obj.namespace().unwrap_or_default(), &name);
    let l = s.labels();
    let state = l.get("tfstate").map(String::as_str) == Some("true")
        && l.get("tfstateSecretSuffix") == Some(&suffix);
    let backup = s.name_any().starts_with("captf-state-backup-")
        && l.get(labels::OWNER_KIND).map(String::as_str) == Some(K::KIND.kind())
        && l.get(labels::OWNER_NAME) == Some(&name_label(&name));
    let record = [
        attempt_record_name(K::KIND, &name),
        applied_record_name(K::KIND, &name),
    ]
    .contains(&s.name_any());
    state || backup || record
}

async fn candidates<K: Workload>(ctx: &Context, obj: &K) -> Result<Vec<Secret>, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let suffix = state_suffix(K::KIND, &ns, &obj.name_any());
    let mut found = api
        .list(&ListParams::default().labels(&state_selector(&suffix)))
        .await?
        .items;
    let owned = format!(
        "{}={},{}={}",
        labels::OWNER_KIND,
        K::KIND.kind(),
        labels::OWNER_NAME,
        name_label(&obj.name_any())
    );
    found.extend(api.list(&ListParams::default().labels(&owned)).await?.items);
    found.retain(|s| kept(obj, s));
    found.sort_by_key(|s| s.name_any());
    found.dedup_by_key(|s| s.name_any());
    Ok(found)
}

/// The UID of an earlier object whose retained Secrets this one finds.
pub async fn foreign<K: Workload>(ctx: &Context, obj: &K) -> Result<Option<String>, Error> {
    let own = obj.uid().unwrap_or_default();
    Ok(candidates(ctx, obj)
        .await?
        .iter()
        .filter_map(|s| s.labels().get(labels::RETAINED_FROM_UID).cloned())
        .find(|uid| *uid != own))
}

/// Adopts what `uid` retained: the label goes from every Secret carrying
/// it, so the next pass reads them as this object's own. Returns how many.
pub async fn adopt<K: Workload>(ctx: &Context, obj: &K, uid: &str) -> Result<usize, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let selector = format!("{}={uid}", labels::RETAINED_FROM_UID);
    let found = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    let patch = json!({"metadata": {"labels": {labels::RETAINED_FROM_UID: Value::Null}}});
    for s in &found {
        api.patch(
            &s.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    Ok(found.len())
}

/// Keeps the object's state, backups and records (owner reference to it
/// removed, labeled with its UID) and removes what only served it: the
/// plan key, its leases, its share of the credentials mirror. Idempotent.
/// Returns how many Secrets were kept.
pub async fn retain<K: Workload>(ctx: &Context, obj: &K) -> Result<usize, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let uid = obj.uid().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let kept = candidates(ctx, obj).await?;
    for s in &kept {
        let owners: Vec<_> = s
            .owner_references()
            .iter()
            .filter(|r| r.uid != uid)
            .cloned()
            .collect();
        // Bound to the version read: a concurrent write is retried.
        let patch = json!({"metadata": {
            "resourceVersion": s.resource_version(),
            "labels": {labels::RETAINED_FROM_UID: uid},
            "ownerReferences": owners,
        }});
        secrets
            .patch(
                &s.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
    }
    super::cleanup::forget_runs(ctx, obj).await?;
    Ok(kept.len())
}

/// Lets a deleting object go that never owned what it found retained: its
/// own leases, plan key and mirror share go; the retained Secrets stay.
pub async fn release_without_touching<K: Workload>(ctx: &Context, obj: &K) -> Result<(), Error> {
    super::cleanup::forget_runs(ctx, obj).await
}
