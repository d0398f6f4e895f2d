//! The credentials step of a pass: the identity check and the mirror of its
//! Secret into the object's namespace (see `crate::io::identity`).

use captf_api::common::IdentityReference;
use captf_api::names::conditions;
use kube::ResourceExt;

use super::pass::event;
use super::status::Draft;
use super::workload::Workload;
use super::{Context, Error};
use crate::engine::job_conditions::ConditionValue;
use crate::io::identity::{User, ensure_credentials, release_credentials};

/// Whether Jobs may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on; the Secret a Job mounts, if any.
    Ready(Option<String>),
    /// The identity stops the object (the conditions say why).
    Blocked,
}

/// A check that let Jobs start, remembered for the sync period so a
/// converged pass neither reads the identity again nor rewrites the mirror.
#[derive(Debug, Clone)]
pub struct Checked {
    identity_allowed: ConditionValue,
    credentials_mirrored: ConditionValue,
    secret: Option<String>,
}

/// The memo key: the object (by UID) and the identity it uses, so a
/// changed identityRef is checked at once.
fn memo_key<K: Workload>(obj: &K, identity: Option<&IdentityReference>) -> String {
    format!(
        "{}/{}/{}/{}|{:?}",
        K::KIND.kind(),
        obj.namespace().unwrap_or_default(),
        obj.name_any(),
        obj.uid().unwrap_or_default(),
        identity.map(|i| (&i.kind, &i.name))
    )
}

/// An identity changed: every object using it checks again.
pub fn forget_identity_users(memo: &super::ensured::Ensured<Checked>, identity: &str) {
    let needle = format!("\"{identity}\")");
    memo.forget_where(|k| k.contains(&needle));
}

/// Checks the identity and keeps the mirror, unless that was done within
/// the sync period with the same outcome (then the conditions repeat it).
pub async fn check<K: Workload>(
    ctx: &Context,
    obj: &K,
    identity: Option<&IdentityReference>,
    draft: &mut Draft,
) -> Result<Verdict, Error> {
    let key = memo_key(obj, identity);
    let now = std::time::Instant::now();
    if let Some(c) = ctx.credentials_ensured.fresh(&key, now) {
        if identity.is_none() {
            draft.remove(conditions::IDENTITY_ALLOWED);
            draft.remove(conditions::CREDENTIALS_MIRRORED);
        } else {
            draft.set(conditions::IDENTITY_ALLOWED, &c.identity_allowed);
            draft.set(conditions::CREDENTIALS_MIRRORED, &c.credentials_mirrored);
        }
        return Ok(Verdict::Ready(c.secret));
    }
    let (verdict, checked) = check_now(ctx, obj, identity, draft).await?;
    if let Some(c) = checked {
        ctx.credentials_ensured.put(key, c, now);
    }
    Ok(verdict)
}

async fn check_now<K: Workload>(
    ctx: &Context,
    obj: &K,
    identity: Option<&IdentityReference>,
    draft: &mut Draft,
) -> Result<(Verdict, Option<Checked>), Error> {
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
    let checked = Checked {
        identity_allowed: creds.identity_allowed.clone(),
        credentials_mirrored: creds.credentials_mirrored.clone(),
        secret: creds.secret.clone(),
    };
    if identity.is_none() {
        draft.remove(conditions::IDENTITY_ALLOWED);
        draft.remove(conditions::CREDENTIALS_MIRRORED);
        return Ok((Verdict::Ready(None), Some(checked)));
    }
    draft.set(conditions::IDENTITY_ALLOWED, &creds.identity_allowed);
    draft.set(
        conditions::CREDENTIALS_MIRRORED,
        &creds.credentials_mirrored,
    );
    if creds.ready() {
        Ok((Verdict::Ready(creds.secret), Some(checked)))
    } else {
        Ok((Verdict::Blocked, None))
    }
}

/// The object leaves: its ownerReference leaves the mirror (the mirror
/// goes with its last user).
pub async fn forget_object<K: Workload>(ctx: &Context, obj: &K) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let uid = obj.uid().unwrap_or_default();
    ctx.credentials_ensured
        .forget_where(|k| k.split('|').next().is_some_and(|o| o.ends_with(&uid)));
    for e in release_credentials(&ctx.client, &ns, &obj.owner_reference()).await? {
        event(ctx, obj, false, e.reason(), "Credentials", e.note()).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn pool(name: &str, identity: &str) -> (captf_api::TerraformMachinePool, IdentityReference) {
        let p: captf_api::TerraformMachinePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {"source": {"image": "m:1"}, "identityRef": {"name": identity}},
        }))
        .unwrap();
        let r = p.spec.workspace.identity_ref.clone().unwrap();
        (p, r)
    }

    #[test]
    fn an_identity_event_forgets_exactly_its_users() {
        let memo = super::super::ensured::Ensured::new(Duration::from_secs(600));
        let now = Instant::now();
        let checked = Checked {
            identity_allowed: ConditionValue {
                status: "True",
                reason: "IdentityAllowed",
                message: String::new(),
            },
            credentials_mirrored: ConditionValue {
                status: "True",
                reason: "Mirrored",
                message: String::new(),
            },
            secret: Some("captf-creds-a".into()),
        };
        let (a, ra) = pool("a", "team-a");
        let (b, rb) = pool("b", "team-b");
        let (ka, kb) = (memo_key(&a, Some(&ra)), memo_key(&b, Some(&rb)));
        memo.put(ka.clone(), checked.clone(), now);
        memo.put(kb.clone(), checked, now);
        forget_identity_users(&memo, "team-a");
        assert!(
            memo.fresh(&ka, now).is_none(),
            "a user of team-a checks again"
        );
        assert!(
            memo.fresh(&kb, now).is_some(),
            "team-b's user keeps its check"
        );
        let (_, other) = pool("a", "team-c");
        assert_ne!(
            ka,
            memo_key(&a, Some(&other)),
            "a changed identityRef is a new key"
        );
    }
}
