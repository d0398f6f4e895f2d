//! The credentials step of a pass: the identity check and the mirror of its
//! Secret into the object's namespace (see `crate::io::identity`).

use captf_api::common::IdentityReference;
use captf_api::names::{conditions, reasons};
use kube::ResourceExt;

use super::effect::Effect;
use super::pass::event;
use super::status::Draft;
use super::workload::Workload;
use super::{Context, Error};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::identity::Credentials;
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
/// mirror (then the conditions repeat the check). Returns the verdict and
/// the writes a fresh check planned (`plan_check`), for the caller to make.
pub async fn check<K: Workload>(
    ctx: &Context,
    obj: &K,
    identity: Option<&IdentityReference>,
    draft: &mut Draft,
) -> Result<(CredentialsVerdict, Vec<Effect>), Error> {
    let key = memo_key(&obj.namespace().unwrap_or_default(), identity);
    let uid = obj.uid().unwrap_or_default();
    let remembered = || {
        ctx.credentials_ensured
            .fresh(&key, std::time::Instant::now())
            .filter(|c| c.covers(&uid))
    };
    if let Some(c) = remembered() {
        return Ok((repeat(&c, identity, draft), Vec::new()));
    }
    let _writer = ctx.credentials_ensured.writer(&key).await;
    if let Some(c) = remembered() {
        return Ok((repeat(&c, identity, draft), Vec::new()));
    }
    let (planned, checked) = check_now(ctx, obj, identity, draft).await;
    match checked {
        Some(c) => ctx
            .credentials_ensured
            .put(key, c, std::time::Instant::now()),
        // A blocked check is repeated by every user until it clears.
        None => ctx.credentials_ensured.forget(&key),
    }
    Ok((planned.verdict, planned.effects))
}

/// The remembered check, repeated on the draft.
fn repeat(
    c: &Checked,
    identity: Option<&IdentityReference>,
    draft: &mut Draft,
) -> CredentialsVerdict {
    let both = (c.identity_allowed.clone(), c.credentials_mirrored.clone());
    set_conditions(draft, identity.is_some().then_some(both));
    CredentialsVerdict::Ready(c.secret.clone())
}

/// `IdentityAllowed` and `CredentialsMirrored` as given, or both removed
/// (`None`: the object uses no identity).
fn set_conditions(draft: &mut Draft, both: Option<(ConditionValue, ConditionValue)>) {
    match both {
        Some((allowed, mirrored)) => {
            draft.set(conditions::IDENTITY_ALLOWED, &allowed);
            draft.set(conditions::CREDENTIALS_MIRRORED, &mirrored);
        }
        None => {
            draft.remove(conditions::IDENTITY_ALLOWED);
            draft.remove(conditions::CREDENTIALS_MIRRORED);
        }
    }
}

/// What a fresh check makes of the credentials it ensured.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckPlan {
    pub verdict: CredentialsVerdict,
    /// `IdentityAllowed` and `CredentialsMirrored`; `None`: both removed.
    pub conditions: Option<(ConditionValue, ConditionValue)>,
    /// The mirror's events, and the refusal's count when `IdentityAllowed`
    /// turns into it (not on every pass that repeats it).
    pub effects: Vec<Effect>,
}

/// Plans a fresh check from the credentials ensured (`creds`), whether
/// the object names an identity, and `IdentityAllowed` as it was
/// (`before`: its status and reason).
pub fn plan_check(identity: bool, creds: &Credentials, before: Option<(&str, &str)>) -> CheckPlan {
    let mut effects: Vec<Effect> = creds
        .events
        .iter()
        .map(|e| Effect::Event {
            warning: false,
            reason: e.reason(),
            action: "Credentials",
            note: e.note(),
        })
        .collect();
    if !identity {
        return CheckPlan {
            verdict: CredentialsVerdict::Ready(None),
            conditions: None,
            effects,
        };
    }
    let allowed = &creds.identity_allowed;
    let label = match allowed.reason {
        r if r == reasons::IDENTITY_NOT_FOUND => Some("notfound"),
        r if r == reasons::NAMESPACE_NOT_ALLOWED => Some("namespace"),
        _ => None,
    };
    let again = before == Some(("False", allowed.reason));
    if let (Some(label), ConditionStatus::False, false) = (label, allowed.status, again) {
        effects.push(Effect::CountIdentityDenied(label));
    }
    let verdict = if creds.ready() {
        CredentialsVerdict::Ready(creds.secret.clone())
    } else {
        CredentialsVerdict::Blocked
    };
    CheckPlan {
        verdict,
        conditions: Some((allowed.clone(), creds.credentials_mirrored.clone())),
        effects,
    }
}

async fn check_now<K: Workload>(
    ctx: &Context,
    obj: &K,
    identity: Option<&IdentityReference>,
    draft: &mut Draft,
) -> (CheckPlan, Option<Checked>) {
    let ns = obj.namespace().unwrap_or_default();
    let owner = obj.owner_reference();
    let user = User {
        namespace: &ns,
        owner: &owner,
        identity,
    };
    // The probe: only the apiserver knows the identity, its Secret and the
    // mirror (which it makes current).
    let creds = ensure_credentials(&ctx.client, &user).await;
    let before = obj
        .condition(conditions::IDENTITY_ALLOWED)
        .map(|c| (c.status.as_str(), c.reason.as_str()));
    let planned = plan_check(identity.is_some(), &creds, before);
    set_conditions(draft, planned.conditions.clone());
    // A blocked check is not remembered: every user repeats it until it
    // clears.
    let checked = (planned.verdict != CredentialsVerdict::Blocked).then(|| Checked {
        identity_allowed: creds.identity_allowed.clone(),
        credentials_mirrored: creds.credentials_mirrored.clone(),
        secret: creds.secret.clone(),
        mirror_owners: creds.mirror_owners.iter().cloned().collect(),
    });
    (planned, checked)
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

    fn creds(allowed: (&str, &'static str), secret: Option<&str>) -> Credentials {
        let value = |status: &str, reason: &'static str| ConditionValue {
            status: status.parse().unwrap(),
            reason,
            message: String::new(),
        };
        Credentials {
            identity_allowed: value(allowed.0, allowed.1),
            credentials_mirrored: value("True", "Mirrored"),
            secret: secret.map(str::to_owned),
            events: vec![crate::identity::MirrorEvent::Created(
                "captf-creds-a".into(),
            )],
            mirror_owners: Vec::new(),
        }
    }

    /// The plan's writes without their notes.
    fn shape(plan: &CheckPlan) -> Vec<String> {
        plan.effects
            .iter()
            .map(|e| match e {
                Effect::Event { reason, .. } => reason.to_string(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_fresh_check_sets_both_conditions_and_counts_a_refusal_once() {
        let ready = plan_check(
            true,
            &creds(("True", "Allowed"), Some("captf-creds-a")),
            None,
        );
        assert_eq!(
            ready.verdict,
            CredentialsVerdict::Ready(Some("captf-creds-a".into()))
        );
        assert!(ready.conditions.is_some());
        assert_eq!(shape(&ready), ["MirrorCreated"]);
        let refused = creds(("False", reasons::IDENTITY_NOT_FOUND), None);
        let first = plan_check(true, &refused, Some(("True", "Allowed")));
        assert_eq!(first.verdict, CredentialsVerdict::Blocked);
        assert_eq!(
            shape(&first),
            ["MirrorCreated", "CountIdentityDenied(\"notfound\")"]
        );
        let again = plan_check(true, &refused, Some(("False", reasons::IDENTITY_NOT_FOUND)));
        assert_eq!(
            shape(&again),
            ["MirrorCreated"],
            "a refusal that goes on is not counted again"
        );
        let namespace = creds(("False", reasons::NAMESPACE_NOT_ALLOWED), None);
        assert!(
            shape(&plan_check(true, &namespace, None))
                .contains(&"CountIdentityDenied(\"namespace\")".to_owned())
        );
    }

    #[test]
    fn without_an_identity_the_conditions_go_and_jobs_mount_nothing() {
        let plan = plan_check(
            false,
            &creds(("False", reasons::IDENTITY_NOT_FOUND), None),
            None,
        );
        assert_eq!(plan.verdict, CredentialsVerdict::Ready(None));
        assert_eq!(plan.conditions, None);
        assert_eq!(
            shape(&plan),
            ["MirrorCreated"],
            "a mirror left behind is still announced"
        );
    }
}
