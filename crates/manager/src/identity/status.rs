//! The identity's own status: `Ready` from its source Secret, the
//! namespaces that hold a mirror in use, when to look again, and the event
//! a `Ready` change deserves.

use std::time::Duration;

use captf_api::identity::TerraformClusterIdentityStatus;
use captf_api::names::{annotations, conditions, events};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::mirror::{is_mirror_of, mirror_name};
use crate::engine::job_conditions::ConditionValue;

/// Most namespaces `status.namespaces` may list.
const NAMESPACES_MAX: usize = 1000;

/// How long until the source Secret is read again: nothing watches it.
pub fn requeue_after(ready: &ConditionValue) -> Duration {
    if ready.status == "True" {
        Duration::from_secs(300)
    } else {
        Duration::from_secs(30)
    }
}

/// Namespaces holding a well-formed mirror of `identity` that at least one
/// object still owns, sorted. `secrets` may come from every namespace and
/// hold other Secrets.
pub fn namespaces_in_use(identity: &str, secrets: &[Secret]) -> Vec<String> {
    let name = mirror_name(identity);
    let mut out: Vec<String> = secrets
        .iter()
        .filter(|s| s.metadata.name.as_deref() == Some(name.as_str()))
        .filter(|s| is_mirror_of(s, identity))
        .filter(|s| {
            s.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(annotations::SOURCE_HASH))
        })
        .filter(|s| {
            !s.metadata
                .owner_references
                .as_deref()
                .unwrap_or_default()
                .is_empty()
        })
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .filter_map(|s| s.metadata.namespace.clone())
        .collect();
    out.sort();
    out.dedup();
    out.truncate(NAMESPACES_MAX);
    out
}

/// The status to write: `Ready` replaced (its transition time kept while
/// the status stays the same), other conditions left as they are.
pub fn identity_status(
    previous: Option<&TerraformClusterIdentityStatus>,
    ready: &ConditionValue,
    namespaces: Vec<String>,
    generation: Option<i64>,
    now: Timestamp,
) -> TerraformClusterIdentityStatus {
    let old = previous.and_then(|s| s.conditions.as_ref());
    let old_ready = old.and_then(|cs| cs.iter().find(|c| c.type_ == conditions::READY));
    let last_transition_time = match old_ready {
        Some(c) if c.status == ready.status => c.last_transition_time.clone(),
        _ => Time(now),
    };
    let mut conds: Vec<Condition> = old
        .into_iter()
        .flatten()
        .filter(|c| c.type_ != conditions::READY)
        .cloned()
        .collect();
    conds.insert(
        0,
        Condition {
            type_: conditions::READY.to_owned(),
            status: ready.status.as_str().to_owned(),
            reason: ready.reason.to_owned(),
            message: ready.message.clone(),
            observed_generation: generation,
            last_transition_time,
        },
    );
    TerraformClusterIdentityStatus {
        conditions: Some(conds),
        namespaces: (!namespaces.is_empty()).then_some(namespaces),
    }
}

/// An event to record on the identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityEvent {
    pub reason: &'static str,
    pub warning: bool,
    pub note: String,
}

/// The event for a `Ready` change: the Secret appearing (or becoming
/// complete) after being missing, or going missing or incomplete. A first
/// `Ready` that is already True says nothing.
pub fn identity_event(
    previous: Option<&Condition>,
    ready: &ConditionValue,
) -> Option<IdentityEvent> {
    let changed = previous.is_none_or(|p| p.status != ready.status || p.reason != ready.reason);
    if !changed {
        return None;
    }
    if ready.status == "True" {
        previous.map(|_| IdentityEvent {
            reason: events::IDENTITY_SECRET_FOUND,
            warning: false,
            note: ready.message.clone(),
        })
    } else {
        Some(IdentityEvent {
            reason: events::IDENTITY_SECRET_NOT_FOUND,
            warning: true,
            note: ready.message.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use captf_api::names::{labels, reasons};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::identity::mirror::mirror_secret;

    fn cv(status: &'static str, reason: &'static str) -> ConditionValue {
        ConditionValue {
            status: status.parse().unwrap(),
            reason,
            message: format!("{status}/{reason}"),
        }
    }

    fn cond(status: &str, reason: &str, at: &str) -> Condition {
        Condition {
            type_: conditions::READY.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(at.parse().unwrap()),
        }
    }

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "infrastructure.cluster.x-k8s.io/v1alpha1".into(),
            kind: "TerraformCluster".into(),
            name: "c".into(),
            uid: "u".into(),
            ..Default::default()
        }
    }

    #[test]
    fn namespaces_count_only_used_well_formed_mirrors() {
        let used = |ns: &str| mirror_secret("aws", ns, &BTreeMap::new(), vec![owner()]);
        let unused = mirror_secret("aws", "c", &BTreeMap::new(), vec![]);
        let other_identity = mirror_secret("gcp", "d", &BTreeMap::new(), vec![owner()]);
        let mut unlabeled = used("e");
        unlabeled
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .remove(labels::MIRRORED);
        let mut no_hash = used("f");
        no_hash
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(annotations::SOURCE_HASH);
        let mut renamed = used("g");
        renamed.metadata.name = Some("captf-creds-other".into());
        let secrets = [
            used("b"),
            used("a"),
            used("a"),
            unused,
            other_identity,
            unlabeled,
            no_hash,
            renamed,
        ];
        assert_eq!(namespaces_in_use("aws", &secrets), ["a", "b"]);
    }

    #[test]
    fn ready_keeps_its_transition_time_while_the_status_holds() {
        let t0 = "2026-11-29T10:00:00Z";
        let now: Timestamp = "2026-11-29T11:00:00Z".parse().unwrap();
        let prev = TerraformClusterIdentityStatus {
            conditions: Some(vec![cond("False", reasons::SECRET_NOT_FOUND, t0)]),
            namespaces: Some(vec!["old".into()]),
        };
        let same = identity_status(
            Some(&prev),
            &cv("False", reasons::CREDENTIALS_INCOMPLETE),
            vec![],
            Some(3),
            now,
        );
        let c = &same.conditions.as_ref().unwrap()[0];
        assert_eq!(c.last_transition_time, Time(t0.parse().unwrap()));
        assert_eq!(c.reason, reasons::CREDENTIALS_INCOMPLETE);
        assert_eq!(c.observed_generation, Some(3));
        assert_eq!(same.namespaces, None);
        assert_eq!(same.conditions.as_ref().unwrap().len(), 1);

        let flipped = identity_status(
            Some(&prev),
            &cv("True", reasons::SECRET_FOUND),
            vec!["a".into()],
            None,
            now,
        );
        assert_eq!(
            flipped.conditions.as_ref().unwrap()[0].last_transition_time,
            Time(now)
        );
        assert_eq!(flipped.namespaces, Some(vec!["a".into()]));
        assert_eq!(
            identity_status(None, &cv("True", reasons::SECRET_FOUND), vec![], None, now)
                .conditions
                .unwrap()[0]
                .last_transition_time,
            Time(now)
        );
    }

    #[test]
    fn events_table() {
        let t = "2026-11-29T10:00:00Z";
        let found = cond("True", reasons::SECRET_FOUND, t);
        let missing = cond("False", reasons::SECRET_NOT_FOUND, t);
        let cases = [
            (
                "first True is quiet",
                None,
                cv("True", reasons::SECRET_FOUND),
                None,
            ),
            (
                "first False warns",
                None,
                cv("False", reasons::SECRET_NOT_FOUND),
                Some((events::IDENTITY_SECRET_NOT_FOUND, true)),
            ),
            (
                "True to False warns",
                Some(&found),
                cv("False", reasons::SECRET_NOT_FOUND),
                Some((events::IDENTITY_SECRET_NOT_FOUND, true)),
            ),
            (
                "False to True",
                Some(&missing),
                cv("True", reasons::SECRET_FOUND),
                Some((events::IDENTITY_SECRET_FOUND, false)),
            ),
            (
                "steady False is quiet",
                Some(&missing),
                cv("False", reasons::SECRET_NOT_FOUND),
                None,
            ),
            (
                "reason change warns again",
                Some(&missing),
                cv("False", reasons::CREDENTIALS_INCOMPLETE),
                Some((events::IDENTITY_SECRET_NOT_FOUND, true)),
            ),
            (
                "steady True is quiet",
                Some(&found),
                cv("True", reasons::SECRET_FOUND),
                None,
            ),
        ];
        for (name, prev, ready, want) in cases {
            let got = identity_event(prev, &ready).map(|e| (e.reason, e.warning));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn requeue_is_slow_while_ready() {
        assert_eq!(
            requeue_after(&cv("True", reasons::SECRET_FOUND)),
            Duration::from_secs(300)
        );
        assert_eq!(
            requeue_after(&cv("False", reasons::SECRET_NOT_FOUND)),
            Duration::from_secs(30)
        );
    }
}
