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
pub enum CredentialsVerdict {
    /// Go on; the Secret a Job mounts, if any.
    Ready(Option<String>),
    /// The identity stops the object (the conditions say why).
    Blocked,
}

/// A check that let Jobs start, remembered for the sync period per
/// namespace and identity: one check reads the identity, its Secret and
/// the mirror for every object of the namespace that uses it, and a
/// converged pass neither reads them again nor rewrites the mirror.
#[derive(Debug, Clone)]
pub struct Checked {
    identity_allowed: ConditionValue,
    credentials_mirrored: ConditionValue,
    secret: Option<String>,
    /// The objects the mirror named as owners after the check: the memo
    /// answers only for them (a new user puts itself on the mirror first).
    mirror_owners: std::collections::BTreeSet<String>,
}

impl Checked {
    /// Whether the check holds for the object with `uid`.
    fn covers(&self, uid: &str) -> bool {
        self.mirror_owners.is_empty() || self.mirror_owners.contains(uid)
    }
}

/// The memo key: the namespace and the identity, so a changed identityRef
/// is checked at once.
fn memo_key(namespace: &str, identity: Option<&IdentityReference>) -> String {
    format!("{namespace}|{:?}", identity.map(|i| (&i.kind, &i.name)))
}

/// An identity changed: every object using it checks again.
pub fn forget_identity_users(memo: &super::ensured::Ensured<Checked>, identity: &str) {
    let needle = format!("\"{identity}\")");
    memo.forget_where(|k| k.contains(&needle));
}

/// Checks the identity and keeps the mirror, unless that was done within
/// the sync period for this namespace and identity with the object on the
/// mirror (then the conditions repeat the check).
pub async fn check<K: Workload>(
    ctx: &Context,
    obj: &K,
    identity: Option<&IdentityReference>,
    draft: &mut Draft,
) -> Result<CredentialsVerdict, Error> {
    let key = memo_key(&obj.namespace().unwrap_or_default(), identity);
    let uid = obj.uid().unwrap_or_default();
    let remembered = || {
        ctx.credentials_ensured
            .fresh(&key, std::time::Instant::now())
            .filter(|c| c.covers(&uid))
    };
    if let Some(c) = remembered() {
        return Ok(repeat(&c, identity, draft));
    }
    let _writer = ctx.credentials_ensured.writer(&key).await;
    if let Some(c) = remembered() {
        return Ok(repeat(&c, identity, draft));
    }
    let (verdict, checked) = check_now(ctx, obj, identity, draft).await?;
    match checked {
        Some(c) => ctx
            .credentials_ensured
            .put(key, c, std::time::Instant::now()),
        // A blocked check is repeated by every user until it clears.
        None => ctx.credentials_ensured.forget(&key),
    }
    Ok(verdict)
}

/// The remembered check, repeated on the draft.
fn repeat(
    c: &Checked,
    identity: Option<&IdentityReference>,
    draft: &mut Draft,
) -> CredentialsVerdict {
    if identity.is_none() {
        draft.remove(conditions::IDENTITY_ALLOWED);
        draft.remove(conditions::CREDENTIALS_MIRRORED);
    } else {
        draft.set(conditions::IDENTITY_ALLOWED, &c.identity_allowed);
        draft.set(conditions::CREDENTIALS_MIRRORED, &c.credentials_mirrored);
    }
    CredentialsVerdict::Ready(c.secret.clone())
}

async fn check_now<K: Workload>(
    ctx: &Context,
    obj: &K,
    identity: Option<&IdentityReference>,
    draft: &mut Draft,
) -> Result<(CredentialsVerdict, Option<Checked>), Error> {
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
        mirror_owners: creds.mirror_owners.iter().cloned().collect(),
    };
    if identity.is_none() {
        draft.remove(conditions::IDENTITY_ALLOWED);
        draft.remove(conditions::CREDENTIALS_MIRRORED);
        return Ok((CredentialsVerdict::Ready(None), Some(checked)));
    }
    count_denial(ctx, obj, &creds.identity_allowed);
    draft.set(conditions::IDENTITY_ALLOWED, &creds.identity_allowed);
    draft.set(
        conditions::CREDENTIALS_MIRRORED,
        &creds.credentials_mirrored,
    );
    if creds.ready() {
        Ok((CredentialsVerdict::Ready(creds.secret), Some(checked)))
    } else {
        Ok((CredentialsVerdict::Blocked, None))
    }
}

/// Counts an identity's refusal (`captf_identity_denied_total`) when the
/// object's `IdentityAllowed` turns into it, not on every pass that
/// repeats it.
fn count_denial<K: Workload>(ctx: &Context, obj: &K, allowed: &ConditionValue) {
    use captf_api::names::reasons;
    let label = match allowed.reason {
        r if r == reasons::IDENTITY_NOT_FOUND => "notfound",
        r if r == reasons::NAMESPACE_NOT_ALLOWED => "namespace",
        _ => return,
    };
    let before = obj.condition(conditions::IDENTITY_ALLOWED);
    let again = before.is_some_and(|c| c.status == "False" && c.reason == allowed.reason);
    if allowed.status == "False" && !again {
        ctx.metrics.identity_denied(label);
    }
}

/// The object leaves: its ownerReference leaves the mirror (the mirror
/// goes with its last user).
pub async fn forget_object<K: Workload>(ctx: &Context, obj: &K) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    // The mirrors of the namespace lose an owner: their next user checks.
    let prefix = format!("{ns}|");
    ctx.credentials_ensured
        .forget_where(|k| k.starts_with(&prefix));
    for e in release_credentials(&ctx.client, &ns, &obj.owner_reference()).await? {
        event(ctx, obj, false, e.reason(), "Credentials", e.note()).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::job_conditions::ConditionStatus;
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
                status: ConditionStatus::True,
                reason: "IdentityAllowed",
                message: String::new(),
            },
            credentials_mirrored: ConditionValue {
                status: ConditionStatus::True,
                reason: "Mirrored",
                message: String::new(),
            },
            secret: Some("captf-creds-a".into()),
            mirror_owners: ["uid-a".to_owned()].into(),
        };
        let (_, ra) = pool("a", "team-a");
        let (_, rb) = pool("b", "team-b");
        let (ka, kb) = (memo_key("ns", Some(&ra)), memo_key("ns", Some(&rb)));
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
            memo_key("ns", Some(&other)),
            "a changed identityRef is a new key"
        );
    }

    #[test]
    fn a_check_answers_for_the_mirror_owners_only() {
        let (a, _) = pool("a", "team-a");
        let (b, _) = pool("b", "team-a");
        let value = |status: &'static str| ConditionValue {
            status: status.parse().unwrap(),
            reason: "R",
            message: String::new(),
        };
        let checked = Checked {
            identity_allowed: value("True"),
            credentials_mirrored: value("True"),
            secret: Some("captf-creds-team-a".into()),
            mirror_owners: ["uid-a".to_owned()].into(),
        };
        assert!(checked.covers(&a.uid().unwrap()));
        assert!(
            !checked.covers(&b.uid().unwrap()),
            "a new user of the identity puts itself on the mirror first"
        );
        let local = Checked {
            mirror_owners: Default::default(),
            ..checked
        };
        assert!(
            local.covers(&b.uid().unwrap()),
            "no mirror (a local Secret): the check holds for the namespace"
        );
    }
}
