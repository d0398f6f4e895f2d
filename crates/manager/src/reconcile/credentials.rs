//! The credentials step of a pass: the identity check and the mirror of its
//! Secret into the object's namespace (see `crate::io::identity`).

use captf_api::common::IdentityReference;
use captf_api::names::conditions;
use kube::ResourceExt;

use super::pass::event;
use super::status::Draft;
use super::workload::Workload;
use super::{Context, Error};
use crate::io::identity::{User, ensure_credentials, release_credentials};

/// Whether Jobs may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on; the Secret a Job mounts, if any.
    Ready(Option<String>),
    /// The identity stops the object (the conditions say why).
    Blocked,
}

pub async fn check<K: Workload>(
    ctx: &Context,
    obj: &K,
    identity: Option<&IdentityReference>,
    draft: &mut Draft,
) -> Result<Verdict, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let owner = obj.owner_reference();
    let creds = ensure_credentials(
        &ctx.client,
        &User {
            namespace: &ns,
            owner: &owner,
            identity,
        },
    )
    .await;
    for e in &creds.events {
        event(ctx, obj, false, e.reason(), "Credentials", e.note()).await;
    }
    if identity.is_none() {
        draft.remove(conditions::IDENTITY_ALLOWED);
        draft.remove(conditions::CREDENTIALS_MIRRORED);
        return Ok(Verdict::Ready(None));
    }
    draft.set(conditions::IDENTITY_ALLOWED, &creds.identity_allowed);
    draft.set(
        conditions::CREDENTIALS_MIRRORED,
        &creds.credentials_mirrored,
    );
    if creds.ready() {
        Ok(Verdict::Ready(creds.secret))
    } else {
        Ok(Verdict::Blocked)
    }
}

/// The object leaves: its ownerReference leaves the mirror (the mirror
/// goes with its last user).
pub async fn release<K: Workload>(ctx: &Context, obj: &K) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    for e in release_credentials(&ctx.client, &ns, &obj.owner_reference()).await? {
        event(ctx, obj, false, e.reason(), "Credentials", e.note()).await;
    }
    Ok(())
}
