//! The credentials mirror: a byte copy of an identity's source Secret in each
//! namespace that uses it, owned (non-controller) by every object using it,
//! and removed with its last user or when the namespace loses access.

use std::collections::BTreeMap;

use captf_api::names::{annotations, labels};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use sha2::{Digest, Sha256};

use crate::names::sha256_hex;

/// Prefix of every mirror Secret's name.
pub const MIRROR_PREFIX: &str = "captf-creds-";

/// Longest Secret name the apiserver accepts.
const SECRET_NAME_MAX: usize = 253;

/// Name of the mirror of `identity`: the prefix and the identity name, or
/// the prefix and 16 hex characters of the name's hash when that is too long
/// for a Secret name.
pub fn mirror_name(identity: &str) -> String {
    let full = format!("{MIRROR_PREFIX}{identity}");
    if full.len() <= SECRET_NAME_MAX {
        full
    } else {
        format!("{MIRROR_PREFIX}{}", &sha256_hex(identity.as_bytes())[..16])
    }
}

/// Hash of a Secret's data, recorded on the mirror so a rotated source is
/// noticed. Each entry is the key, a NUL, the value's length (8 bytes, big
/// endian) and the value, in key order, so no two different maps collide by
/// concatenation.
pub fn source_hash(data: &BTreeMap<String, ByteString>) -> String {
    let mut h = Sha256::new();
    for (k, v) in data {
        h.update(k.as_bytes());
        h.update([0]);
        h.update((v.0.len() as u64).to_be_bytes());
        h.update(&v.0);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `secret` carries the mirror label.
pub fn is_mirror(secret: &Secret) -> bool {
    secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::MIRRORED))
        .is_some_and(|v| v == "true")
}

/// The identity a mirror says it copies.
pub fn mirrored_identity(secret: &Secret) -> Option<&str> {
    secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::IDENTITY))
        .map(String::as_str)
}

/// Whether `secret` is the mirror of `identity` (and so may be rewritten).
pub fn is_mirror_of(secret: &Secret, identity: &str) -> bool {
    is_mirror(secret) && mirrored_identity(secret) == Some(identity)
}

fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Same object, whatever its UID and served version: a ref left by an
/// earlier incarnation (or a restore) names the same user.
fn same_object(a: &OwnerReference, b: &OwnerReference) -> bool {
    a.kind == b.kind && a.name == b.name && api_group(&a.api_version) == api_group(&b.api_version)
}

/// The reference a user gets on a mirror: never a controller, and never
/// blocking the user's deletion.
fn user_ref(user: &OwnerReference) -> OwnerReference {
    OwnerReference {
        controller: None,
        block_owner_deletion: None,
        ..user.clone()
    }
}

/// `owners` with `user` in it exactly once, current; a ref to the same
/// object with another UID is replaced in place.
pub fn owners_with(owners: &[OwnerReference], user: &OwnerReference) -> Vec<OwnerReference> {
    let mut out = Vec::with_capacity(owners.len() + 1);
    let mut placed = false;
    for o in owners {
        if !same_object(o, user) {
            out.push(o.clone());
        } else if !placed {
            out.push(user_ref(user));
            placed = true;
        }
    }
    if !placed {
        out.push(user_ref(user));
    }
    out
}

/// `owners` without any ref to `user`'s object.
pub fn owners_without(owners: &[OwnerReference], user: &OwnerReference) -> Vec<OwnerReference> {
    owners
        .iter()
        .filter(|o| !same_object(o, user))
        .cloned()
        .collect()
}

fn mirror_labels() -> [(&'static str, &'static str); 2] {
    [(labels::MANAGED, "true"), (labels::MIRRORED, "true")]
}

/// A fresh mirror of `identity` in `namespace` holding `data`.
pub fn mirror_secret(
    identity: &str,
    namespace: &str,
    data: &BTreeMap<String, ByteString>,
    owners: Vec<OwnerReference>,
) -> Secret {
    let labels = mirror_labels()
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let annotations = BTreeMap::from([
        (annotations::SOURCE_HASH.to_owned(), source_hash(data)),
        (annotations::IDENTITY.to_owned(), identity.to_owned()),
    ]);
    Secret {
        metadata: ObjectMeta {
            name: Some(mirror_name(identity)),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(owners),
            ..Default::default()
        },
        data: Some(data.clone()),
        type_: Some("Opaque".to_owned()),
        ..Default::default()
    }
}

/// What to do to make the mirror current for one user.
#[derive(Debug, Clone, PartialEq)]
pub enum MirrorPlan {
    /// No Secret of that name yet.
    Create(Secret),
    /// Rewrite the existing mirror (keeps its resourceVersion, so a
    /// concurrent writer makes the write fail with a conflict).
    Replace(Secret),
    /// Already current: labels, annotations, data and the user's ref.
    Current,
    /// A Secret of that name that is not this identity's mirror: never
    /// touched. The text names it and the identity.
    Foreign(String),
}

/// Compares the existing Secret (if any) with what the mirror of `identity`
/// for `user` must be.
pub fn plan_mirror(
    identity: &str,
    namespace: &str,
    source_data: &BTreeMap<String, ByteString>,
    user: &OwnerReference,
    existing: Option<&Secret>,
) -> MirrorPlan {
    let Some(existing) = existing else {
        return MirrorPlan::Create(mirror_secret(
            identity,
            namespace,
            source_data,
            owners_with(&[], user),
        ));
    };
    let name = mirror_name(identity);
    if !is_mirror_of(existing, identity) {
        return MirrorPlan::Foreign(format!(
            "Secret {namespace}/{name} exists and is not a credentials mirror of TerraformClusterIdentity {identity}; it is left untouched"
        ));
    }
    let current_owners = existing
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default();
    let owners = owners_with(current_owners, user);
    let fresh = mirror_secret(identity, namespace, source_data, owners.clone());
    let has_all = |want: &Option<BTreeMap<String, String>>,
                   have: &Option<BTreeMap<String, String>>| {
        want.iter()
            .flatten()
            .all(|(k, v)| have.as_ref().and_then(|h| h.get(k)) == Some(v))
    };
    let current = owners == current_owners
        && has_all(&fresh.metadata.labels, &existing.metadata.labels)
        && has_all(&fresh.metadata.annotations, &existing.metadata.annotations)
        && existing.data.clone().unwrap_or_default() == *source_data
        && existing.type_.as_deref() == Some("Opaque")
        && existing.string_data.is_none();
    if current {
        return MirrorPlan::Current;
    }
    let mut next = existing.clone();
    next.metadata.managed_fields = None;
    let labels = next.metadata.labels.get_or_insert_default();
    labels.extend(fresh.metadata.labels.unwrap_or_default());
    let annotations = next.metadata.annotations.get_or_insert_default();
    annotations.extend(fresh.metadata.annotations.unwrap_or_default());
    next.metadata.owner_references = Some(owners);
    next.data = fresh.data;
    next.string_data = None;
    next.type_ = fresh.type_;
    MirrorPlan::Replace(next)
}

/// What releasing one user does to a mirror.
#[derive(Debug, Clone, PartialEq)]
pub enum ReleasePlan {
    /// The user holds no ref on it.
    Untouched,
    /// Other users remain: drop only this user's ref.
    Replace(Box<Secret>),
    /// The user was the last one: delete the mirror.
    Delete,
}

/// Releasing `user` from `mirror`.
pub fn plan_release(mirror: &Secret, user: &OwnerReference) -> ReleasePlan {
    let owners = mirror
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default();
    if !owners.iter().any(|o| same_object(o, user)) {
        return ReleasePlan::Untouched;
    }
    let rest = owners_without(owners, user);
    if rest.is_empty() {
        return ReleasePlan::Delete;
    }
    let mut next = mirror.clone();
    next.metadata.managed_fields = None;
    next.metadata.owner_references = Some(rest);
    ReleasePlan::Replace(Box::new(next))
}

/// Whether `user` holds a ref on `secret`.
pub fn used_by(secret: &Secret, user: &OwnerReference) -> bool {
    secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| same_object(o, user))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(kind: &str, name: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "infrastructure.cluster.x-k8s.io/v1alpha1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn names_follow_the_identity_and_fit_a_secret_name() {
        assert_eq!(mirror_name("aws-prod"), "captf-creds-aws-prod");
        let exact = "a".repeat(SECRET_NAME_MAX - MIRROR_PREFIX.len());
        assert_eq!(mirror_name(&exact), format!("captf-creds-{exact}"));
        let long = format!("{exact}b");
        let hashed = mirror_name(&long);
        assert_eq!(
            hashed,
            format!("captf-creds-{}", &sha256_hex(long.as_bytes())[..16])
        );
        assert_eq!(hashed.len(), MIRROR_PREFIX.len() + 16);
    }

    #[test]
    fn source_hash_changes_with_any_key_or_value_and_is_unambiguous() {
        let a = source_hash(&data(&[("k", "v"), ("x", "y")]));
        assert_eq!(a.len(), 64);
        assert_eq!(a, source_hash(&data(&[("x", "y"), ("k", "v")])));
        for other in [
            data(&[("k", "v2"), ("x", "y")]),
            data(&[("k", "v")]),
            data(&[("k", "v"), ("x", "y"), ("z", "")]),
            // Moving bytes between key and value must not collide.
            data(&[("kv", ""), ("x", "y")]),
        ] {
            assert_ne!(source_hash(&other), a, "{other:?}");
        }
    }

    #[test]
    fn a_fresh_mirror_is_labeled_annotated_and_owned_by_the_user_only() {
        let d = data(&[("AWS_ACCESS_KEY_ID", "id")]);
        let MirrorPlan::Create(s) =
            plan_mirror("aws", "ns", &d, &user("TerraformCluster", "c", "u1"), None)
        else {
            panic!("no mirror yet must create one");
        };
        assert_eq!(s.metadata.name.as_deref(), Some("captf-creds-aws"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("ns"));
        let l = s.metadata.labels.as_ref().unwrap();
        assert_eq!(l[labels::MANAGED], "true");
        assert_eq!(l[labels::MIRRORED], "true");
        let a = s.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[annotations::IDENTITY], "aws");
        assert_eq!(a[annotations::SOURCE_HASH], source_hash(&d));
        assert_eq!(s.type_.as_deref(), Some("Opaque"));
        assert_eq!(s.data.as_ref(), Some(&d));
        let owners = s.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].uid, "u1");
        assert_eq!(owners[0].controller, None);
        assert_eq!(owners[0].block_owner_deletion, None);
    }

    #[test]
    fn plan_table() {
        let d = data(&[("k", "v")]);
        let c1 = user("TerraformCluster", "c", "u1");
        let m1 = user("TerraformMachine", "m", "u2");
        let current = mirror_secret("aws", "ns", &d, owners_with(&[], &c1));
        let plan = |existing: &Secret, u: &OwnerReference, d: &BTreeMap<String, ByteString>| {
            plan_mirror("aws", "ns", d, u, Some(existing))
        };

        assert_eq!(plan(&current, &c1, &d), MirrorPlan::Current);

        // A second user is added next to the first.
        let MirrorPlan::Replace(s) = plan(&current, &m1, &d) else {
            panic!("a new user must be added");
        };
        let uids: Vec<_> = s
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.as_str())
            .collect();
        assert_eq!(uids, ["u1", "u2"]);
        assert_eq!(plan(&s, &m1, &d), MirrorPlan::Current);
        assert_eq!(plan(&s, &c1, &d), MirrorPlan::Current);

        // Rotated source: data and hash rewritten, owners kept.
        let rotated = data(&[("k", "v2")]);
        let MirrorPlan::Replace(r) = plan(&s, &c1, &rotated) else {
            panic!("rotation must rewrite");
        };
        assert_eq!(r.data.as_ref(), Some(&rotated));
        assert_eq!(
            r.metadata.annotations.as_ref().unwrap()[annotations::SOURCE_HASH],
            source_hash(&rotated)
        );
        assert_eq!(r.metadata.owner_references.as_ref().unwrap().len(), 2);

        // Tampered mirror data is restored even though the hash still matches.
        let mut tampered = current.clone();
        tampered.data = Some(data(&[("k", "x")]));
        assert!(
            matches!(plan(&tampered, &c1, &d), MirrorPlan::Replace(s) if s.data.as_ref() == Some(&d))
        );

        // A ref from an earlier incarnation of the same object is replaced.
        let reborn = user("TerraformCluster", "c", "u9");
        let MirrorPlan::Replace(s) = plan(&current, &reborn, &d) else {
            panic!("a stale UID must be replaced");
        };
        let uids: Vec<_> = s
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.as_str())
            .collect();
        assert_eq!(uids, ["u9"]);

        // A lost label is restored, foreign extra labels kept.
        let mut unlabeled = current.clone();
        let l = unlabeled.metadata.labels.as_mut().unwrap();
        l.remove(labels::MANAGED);
        l.insert("team".into(), "a".into());
        let MirrorPlan::Replace(s) = plan(&unlabeled, &c1, &d) else {
            panic!("a missing label must be restored");
        };
        let l = s.metadata.labels.unwrap();
        assert_eq!(l[labels::MANAGED], "true");
        assert_eq!(l["team"], "a");

        // Not a mirror, or another identity's: never touched.
        let mut foreign = current.clone();
        foreign.metadata.labels = None;
        let MirrorPlan::Foreign(why) = plan(&foreign, &c1, &d) else {
            panic!("a foreign Secret must be left alone");
        };
        assert!(
            why.contains("ns/captf-creds-aws") && why.contains("TerraformClusterIdentity aws"),
            "{why}"
        );
        let other = mirror_secret("gcp", "ns", &d, vec![]);
        assert!(matches!(plan(&other, &c1, &d), MirrorPlan::Foreign(_)));
    }

    #[test]
    fn release_table() {
        let d = data(&[("k", "v")]);
        let c1 = user("TerraformCluster", "c", "u1");
        let m1 = user("TerraformMachine", "m", "u2");
        let stranger = user("TerraformMachine", "other", "u3");
        let both = mirror_secret("aws", "ns", &d, owners_with(&owners_with(&[], &c1), &m1));

        assert_eq!(plan_release(&both, &stranger), ReleasePlan::Untouched);
        let ReleasePlan::Replace(one) = plan_release(&both, &c1) else {
            panic!("another user remains");
        };
        let uids: Vec<_> = one
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.as_str())
            .collect();
        assert_eq!(uids, ["u2"]);
        assert_eq!(plan_release(&one, &m1), ReleasePlan::Delete);
        // Released by object, whatever UID the ref was written with.
        assert_eq!(
            plan_release(&one, &user("TerraformMachine", "m", "u-new")),
            ReleasePlan::Delete
        );
        assert!(used_by(&one, &m1) && !used_by(&one, &c1));
    }

    #[test]
    fn owner_identity_ignores_version_but_not_group_or_kind() {
        let a = user("TerraformCluster", "c", "u1");
        let mut newer = a.clone();
        newer.api_version = "infrastructure.cluster.x-k8s.io/v1beta1".into();
        assert!(same_object(&a, &newer));
        let mut core = a.clone();
        core.api_version = "v1".into();
        assert!(!same_object(&a, &core));
        assert!(!same_object(&a, &user("TerraformMachine", "c", "u1")));
    }
}
