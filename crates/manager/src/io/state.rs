//! Reading state from, and adopting, the Secrets the `kubernetes` backend
//! writes. Always read live: the backend writes behind the cache's back.

use std::collections::BTreeMap;

use captf_api::names::annotations;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ListParams, PostParams};

use crate::names::state_secret;
use crate::state::reader::{StateError, StateSecret, StateSummary, read, state_chunks};

/// The backend's labels on every state Secret of `suffix` (workspace
/// `default`).
pub fn state_selector(suffix: &str) -> String {
    format!("tfstate=true,tfstateSecretSuffix={suffix},tfstateWorkspace=default")
}

/// The state Secrets of `suffix`, as the backend labels them.
pub async fn list(
    client: &kube::Client,
    namespace: &str,
    suffix: &str,
) -> Result<Vec<Secret>, kube::Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    Ok(secrets
        .list(&ListParams::default().labels(&state_selector(suffix)))
        .await?
        .items)
}

/// Reads the state of `suffix`: `Err` for an API failure, `Ok(Err)` for a
/// state that is missing or unusable.
pub async fn read_state(
    client: &kube::Client,
    namespace: &str,
    suffix: &str,
) -> Result<Result<StateSummary, StateError>, kube::Error> {
    let secrets = list(client, namespace, suffix).await?;
    Ok(summarize(suffix, &secrets))
}

/// The state the listed Secrets of `suffix` hold.
pub fn summarize(suffix: &str, secrets: &[Secret]) -> Result<StateSummary, StateError> {
    let chunks: Vec<StateSecret> = secrets
        .iter()
        .map(|s| StateSecret {
            name: s.metadata.name.clone().unwrap_or_default(),
            tfstate: s
                .data
                .as_ref()
                .and_then(|d| d.get("tfstate"))
                .map(|b| b.0.clone()),
            inputs_hash: s
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(annotations::INPUTS_HASH))
                .cloned(),
        })
        .collect();
    read(&state_secret(suffix), &chunks)
}

/// Adopts the state after a successful apply or restore: every chunk gets a
/// non-controller owner reference to the object (so it moves and is
/// collected with it, without blocking its deletion) and the state labels
/// it lacks (a chunk written by an older manager, or by hand, has only the
/// backend's own), and the base Secret records the inputs hash it was
/// applied from (`None` removes it). Each write is bound to the
/// resourceVersion just read.
pub async fn adopt(
    client: &kube::Client,
    namespace: &str,
    suffix: &str,
    owner: &OwnerReference,
    state_labels: &BTreeMap<String, String>,
    inputs_hash: Option<&str>,
) -> Result<Adopted, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let base = state_secret(suffix);
    let mut adopted = Adopted::default();
    let owner = OwnerReference {
        controller: None,
        block_owner_deletion: None,
        ..owner.clone()
    };
    let listed = list(client, namespace, suffix).await?;
    // Only the Secrets the state is read from: one planted with the state's
    // labels, or left after a gap, is not made the object's.
    let chunks = state_chunks(&base, &listed, |s| {
        s.metadata.name.as_deref().unwrap_or_default()
    });
    for secret in chunks {
        let mut secret = secret.clone();
        let name = secret.metadata.name.clone().unwrap_or_default();
        let mut changed = false;
        let refs = secret
            .metadata
            .owner_references
            .get_or_insert_with(Vec::new);
        // An earlier object of the same name (moved or re-created) is replaced.
        let before = refs.len();
        refs.retain(|r| !(r.kind == owner.kind && r.name == owner.name && r.uid != owner.uid));
        if refs.len() != before {
            adopted.reowned += 1;
            changed = true;
        }
        if !refs.iter().any(|r| r.uid == owner.uid) {
            refs.push(owner.clone());
            changed = true;
        }
        let labels = secret.metadata.labels.get_or_insert_with(Default::default);
        for (k, v) in state_labels {
            if !labels.contains_key(k) {
                labels.insert(k.clone(), v.clone());
                changed = true;
            }
        }
        if name == base {
            let ann = secret
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            let current = ann.get(annotations::INPUTS_HASH).map(String::as_str);
            if current != inputs_hash {
                match inputs_hash {
                    Some(h) => ann.insert(annotations::INPUTS_HASH.to_owned(), h.to_owned()),
                    None => ann.remove(annotations::INPUTS_HASH),
                };
                adopted.rehashed = true;
                changed = true;
            }
        }
        if changed {
            api.replace(&name, &PostParams::default(), &secret).await?;
        }
    }
    Ok(adopted)
}

/// What an adoption changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Adopted {
    /// The base Secret records another inputs hash now.
    pub rehashed: bool,
    /// Chunks whose reference to an earlier object of the same name (a
    /// restored management cluster's) was replaced by this object's.
    pub reowned: usize,
}
