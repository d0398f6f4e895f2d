//! Identity reconciliation and the credentials mirror Secrets, against the
//! apiserver. Every decision is made in `crate::identity`; this only reads
//! and writes. Secret data is copied, never logged or put in a message.

use std::collections::BTreeMap;
use std::time::Duration;

use captf_api::TerraformClusterIdentity;
use captf_api::common::IdentityReference;
use captf_api::names::{conditions as condition_types, kinds, labels};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};

use crate::engine::job_conditions::ConditionValue;
use crate::identity::access::{Access, namespace_access, needs_namespace_labels};
use crate::identity::conditions::{
    allowed_by_source, check_failed, check_source, identity_not_found, identity_ready,
    local_not_mirrored, local_secret, mirror_failed, mirrored, namespace_not_allowed,
};
use crate::identity::mirror::{
    MirrorPlan, ReleasePlan, is_mirror_of, mirror_name, plan_mirror, plan_release, used_by,
};
use crate::identity::status::{
    IdentityEvent, identity_event, identity_status, namespaces_in_use, requeue_after,
};
use crate::identity::{Credentials, MirrorEvent, Target, target};

use super::FIELD_MANAGER;

/// Attempts at a read-modify-write of a mirror before giving up on
/// conflicting writers (other users of the same mirror).
const WRITE_ATTEMPTS: usize = 5;

fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..Default::default()
    }
}

fn mirror_selector() -> ListParams {
    ListParams::default().labels(&format!("{}=true", labels::MIRRORED))
}

/// What one identity reconcile found and wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityOutcome {
    /// The `Ready` condition written.
    pub ready: ConditionValue,
    /// `status.namespaces` written.
    pub namespaces: Vec<String>,
    /// When to reconcile again: the source Secret is not watched.
    pub requeue_after: Duration,
    /// The event to record on the identity, if `Ready` changed.
    pub event: Option<IdentityEvent>,
}

/// Reconciles one TerraformClusterIdentity: reads its source Secret and the
/// mirrors in every namespace, and writes `status` when it changed.
/// `Ok(None)` when the identity does not exist.
pub async fn reconcile_identity(
    client: &kube::Client,
    name: &str,
) -> Result<Option<IdentityOutcome>, kube::Error> {
    let identities: Api<TerraformClusterIdentity> = Api::all(client.clone());
    let Some(identity) = identities.get_opt(name).await? else {
        return Ok(None);
    };
    let spec = &identity.spec;
    let source = match &spec.secret_ref {
        Some(r) => {
            Api::<Secret>::namespaced(client.clone(), &r.namespace)
                .get_opt(&r.name)
                .await?
        }
        None => None,
    };
    let verdict = check_source(
        spec.secret_ref.as_ref(),
        spec.required_keys.as_deref(),
        source.as_ref(),
    );
    let ready = identity_ready(&verdict);

    // Metadata only: the mirrors' data is not needed to count them.
    let mirrors: Vec<Secret> = Api::<Secret>::all(client.clone())
        .list_metadata(&mirror_selector())
        .await?
        .items
        .into_iter()
        .map(|m| Secret {
            metadata: m.metadata,
            ..Default::default()
        })
        .collect();
    let namespaces = namespaces_in_use(name, &mirrors);

    let previous = identity.status.as_ref();
    let previous_ready = previous
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == condition_types::READY));
    let event = identity_event(previous_ready, &ready);
    let status = identity_status(
        previous,
        &ready,
        namespaces.clone(),
        identity.metadata.generation,
        Timestamp::now(),
    );
    if previous != Some(&status) {
        let mut body = serde_json::to_value(&status).expect("a status serializes");
        // A merge patch only removes a field it names as null.
        if status.namespaces.is_none() {
            body["namespaces"] = serde_json::Value::Null;
        }
        identities
            .patch_status(
                name,
                &PatchParams {
                    field_manager: Some(FIELD_MANAGER.to_owned()),
                    ..Default::default()
                },
                &Patch::Merge(serde_json::json!({ "status": body })),
            )
            .await?;
    }
    Ok(Some(IdentityOutcome {
        requeue_after: requeue_after(&ready),
        ready,
        namespaces,
        event,
    }))
}

/// One object that uses credentials.
#[derive(Debug, Clone, Copy)]
pub struct User<'a> {
    /// The object's namespace (where its Jobs run and its mirror lives).
    pub namespace: &'a str,
    /// A reference to the object; it goes on the mirror as a non-controller
    /// owner.
    pub owner: &'a OwnerReference,
    /// The identity resolved for the object (own, then the cluster's
    /// defaults, then the cluster's own); `None` when none resolves.
    pub identity: Option<&'a IdentityReference>,
}

/// The credentials step for one object, run on every pass of a live
/// object and just before a deleting object's Job starts: checks the
/// identity allows the namespace, makes the mirror current with the object
/// among its owners (revoking it when the namespace lost access), and drops
/// the object from mirrors of identities it no longer uses. Never fails:
/// read and write errors become condition values (`IdentityCheckFailed`,
/// `MirrorFailed`) for the caller to report and retry.
pub async fn ensure_credentials(client: &kube::Client, user: &User<'_>) -> Credentials {
    let to = target(user.identity);
    let keep = match to {
        Target::Identity(name) => Some(mirror_name(name)),
        Target::None | Target::LocalSecret(_) => None,
    };
    // Housekeeping: a failure here must not hold the object's own
    // credentials back; it is retried on the next pass.
    let released = match release_mirrors(client, user.namespace, user.owner, keep.as_deref()).await
    {
        Ok(events) => events,
        Err(e) => {
            tracing::warn!(namespace = user.namespace, error = %e, "releasing unused credential mirrors failed");
            Vec::new()
        }
    };
    let mut out = match to {
        Target::None => Credentials::blocked(identity_not_found(None)),
        Target::LocalSecret(name) => local_credentials(client, user.namespace, name).await,
        Target::Identity(name) => identity_credentials(client, user, name).await,
    };
    out.events.splice(0..0, released);
    out
}

async fn local_credentials(client: &kube::Client, namespace: &str, name: &str) -> Credentials {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    match secrets.get_metadata_opt(name).await {
        Err(e) => Credentials::blocked(check_failed(
            &format!("Secret {namespace}/{name}"),
            &e.to_string(),
        )),
        Ok(None) => Credentials::blocked(local_secret(name, namespace, false)),
        Ok(Some(_)) => Credentials {
            identity_allowed: local_secret(name, namespace, true),
            credentials_mirrored: local_not_mirrored(namespace, name),
            secret: Some(name.to_owned()),
            events: Vec::new(),
            mirror_owners: Vec::new(),
        },
    }
}

async fn identity_credentials(client: &kube::Client, user: &User<'_>, name: &str) -> Credentials {
    let ns = user.namespace;
    let what = format!("{} {name}", kinds::TERRAFORM_CLUSTER_IDENTITY);
    let identity = match Api::<TerraformClusterIdentity>::all(client.clone())
        .get_opt(name)
        .await
    {
        Err(e) => return Credentials::blocked(check_failed(&what, &e.to_string())),
        Ok(None) => {
            let mut out = Credentials::blocked(identity_not_found(Some(name)));
            out.events.extend(revoke(client, ns, name).await);
            return out;
        }
        Ok(Some(i)) => i,
    };
    let spec = &identity.spec;
    let allowed = spec.allowed_namespaces.as_ref();
    let labels = if needs_namespace_labels(allowed, ns) {
        match Api::<Namespace>::all(client.clone())
            .get_metadata_opt(ns)
            .await
        {
            Err(e) => {
                return Credentials::blocked(check_failed(
                    &format!("Namespace {ns}"),
                    &e.to_string(),
                ));
            }
            Ok(n) => n.map(|n| n.metadata.labels.unwrap_or_default()),
        }
    } else {
        None
    };
    if let Access::Denied(why) = namespace_access(allowed, ns, labels.as_ref()) {
        let mut out = Credentials::blocked(namespace_not_allowed(name, ns, &why));
        out.events.extend(revoke(client, ns, name).await);
        return out;
    }

    let source = match &spec.secret_ref {
        None => None,
        Some(r) => match Api::<Secret>::namespaced(client.clone(), &r.namespace)
            .get_opt(&r.name)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                return Credentials::blocked(check_failed(
                    &format!("Secret {}/{}", r.namespace, r.name),
                    &e.to_string(),
                ));
            }
        },
    };
    let verdict = check_source(
        spec.secret_ref.as_ref(),
        spec.required_keys.as_deref(),
        source.as_ref(),
    );
    let identity_allowed = allowed_by_source(name, ns, &verdict);
    if identity_allowed.status != "True" {
        return Credentials::blocked(identity_allowed);
    }
    let data = source.and_then(|s| s.data).unwrap_or_default();
    let secret = mirror_name(name);
    match write_mirror(client, ns, name, &data, user.owner).await {
        Ok((created, mirror_owners)) => Credentials {
            identity_allowed,
            credentials_mirrored: mirrored(ns, &secret, name),
            mirror_owners,
            events: created
                .then(|| MirrorEvent::Created(secret.clone()))
                .into_iter()
                .collect(),
            secret: Some(secret),
        },
        Err(message) => Credentials {
            identity_allowed,
            credentials_mirrored: mirror_failed(message),
            secret: None,
            events: Vec::new(),
            mirror_owners: Vec::new(),
        },
    }
}

/// Makes the mirror of `identity` in `namespace` current with `user` among
/// its owners: whether it was created, and the UIDs of its owners. The
/// error is the condition message (names only).
async fn write_mirror(
    client: &kube::Client,
    namespace: &str,
    identity: &str,
    data: &BTreeMap<String, ByteString>,
    user: &OwnerReference,
) -> Result<(bool, Vec<String>), String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let uids = |s: &Secret| {
        s.metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.clone())
            .collect::<Vec<_>>()
    };
    let name = mirror_name(identity);
    let failed =
        |verb: &str, e: &kube::Error| format!("{verb} Secret {namespace}/{name} failed: {e}");
    for _ in 0..WRITE_ATTEMPTS {
        let existing = secrets
            .get_opt(&name)
            .await
            .map_err(|e| failed("reading", &e))?;
        match plan_mirror(identity, namespace, data, user, existing.as_ref()) {
            MirrorPlan::Current => {
                return Ok((false, existing.as_ref().map(uids).unwrap_or_default()));
            }
            MirrorPlan::Foreign(message) => {
                tracing::warn!(namespace, secret = %name, identity, "a Secret that is not a credentials mirror holds the mirror's name");
                return Err(message);
            }
            MirrorPlan::Create(s) => match secrets.create(&post_params(), &s).await {
                Ok(_) => return Ok((true, uids(&s))),
                // Another user created it first: read it again.
                Err(e) if is_code(&e, 409) => continue,
                Err(e) => return Err(failed("creating", &e)),
            },
            MirrorPlan::Replace(s) => match secrets.replace(&name, &post_params(), &s).await {
                Ok(_) => return Ok((false, uids(&s))),
                Err(e) if is_code(&e, 409) || is_code(&e, 404) => continue,
                Err(e) => return Err(failed("updating", &e)),
            },
        }
    }
    Err(format!(
        "updating Secret {namespace}/{name} kept conflicting with other writers"
    ))
}

/// Deletes the mirror of `identity` in `namespace` (the namespace lost
/// access, or the identity is gone). A failure is logged and retried on the
/// next pass; the user's Jobs are blocked by `IdentityAllowed` meanwhile.
async fn revoke(client: &kube::Client, namespace: &str, identity: &str) -> Option<MirrorEvent> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let name = mirror_name(identity);
    let result = async {
        let Some(existing) = secrets.get_metadata_opt(&name).await? else {
            return Ok(false);
        };
        let as_secret = Secret {
            metadata: existing.metadata,
            ..Default::default()
        };
        if !is_mirror_of(&as_secret, identity) {
            return Ok(false);
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: as_secret.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match secrets.delete(&name, &dp).await {
            Ok(_) => Ok(true),
            Err(e) if is_code(&e, 404) => Ok(false),
            Err(e) => Err(e),
        }
    }
    .await;
    match result {
        Ok(true) => Some(MirrorEvent::Removed(name)),
        Ok(false) => None,
        Err(e) => {
            tracing::warn!(namespace, secret = %name, identity, error = %e, "revoking a credentials mirror failed");
            None
        }
    }
}

/// Drops `owner` from every credentials mirror in `namespace` except the
/// one named `keep`, deleting a mirror it was the last user of. Conflicts
/// with other writers are retried a few times, then returned (requeue).
async fn release_mirrors(
    client: &kube::Client,
    namespace: &str,
    owner: &OwnerReference,
    keep: Option<&str>,
) -> Result<Vec<MirrorEvent>, kube::Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let listed = secrets.list_metadata(&mirror_selector()).await?;
    let mut events = Vec::new();
    for m in listed.items {
        let Some(name) = m.metadata.name.clone() else {
            continue;
        };
        let meta_only = Secret {
            metadata: m.metadata,
            ..Default::default()
        };
        if Some(name.as_str()) == keep || !used_by(&meta_only, owner) {
            continue;
        }
        if release_one(&secrets, &name, owner).await? {
            events.push(MirrorEvent::Removed(name));
        }
    }
    Ok(events)
}

/// Drops `owner` from the mirror `name`; `Ok(true)` when that deleted it.
async fn release_one(
    secrets: &Api<Secret>,
    name: &str,
    owner: &OwnerReference,
) -> Result<bool, kube::Error> {
    let mut last_conflict = None;
    for _ in 0..WRITE_ATTEMPTS {
        let Some(mirror) = secrets.get_opt(name).await? else {
            return Ok(false);
        };
        let outcome = match plan_release(&mirror, owner) {
            ReleasePlan::Untouched => return Ok(false),
            ReleasePlan::Replace(next) => secrets
                .replace(name, &post_params(), &next)
                .await
                .map(|_| false),
            // Only the version read may go: a user added meanwhile keeps it.
            ReleasePlan::Delete => {
                let dp = DeleteParams {
                    preconditions: Some(Preconditions {
                        resource_version: mirror.metadata.resource_version.clone(),
                        uid: None,
                    }),
                    ..Default::default()
                };
                secrets.delete(name, &dp).await.map(|_| true)
            }
        };
        match outcome {
            Ok(deleted) => return Ok(deleted),
            Err(e) if is_code(&e, 404) => return Ok(false),
            Err(e) if is_code(&e, 409) => last_conflict = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_conflict.expect("only conflicts repeat the loop"))
}

/// Releases an object from the credentials mirrors of its namespace, on
/// deletion cleanup: its ref is removed and a mirror it was the last user
/// of is deleted. The events are `MirrorRemoved` for each deleted mirror.
/// An error (a conflict that kept repeating included) means: requeue.
pub async fn release_credentials(
    client: &kube::Client,
    namespace: &str,
    owner: &OwnerReference,
) -> Result<Vec<MirrorEvent>, kube::Error> {
    release_mirrors(client, namespace, owner, None).await
}
