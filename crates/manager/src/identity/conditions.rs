//! The source Secret check shared by the identity's `Ready` and its users'
//! `IdentityAllowed`, and the `IdentityAllowed` / `CredentialsMirrored`
//! values a user object gets. Messages name Secrets and keys, never values.

use std::collections::BTreeMap;

use captf_api::identity::SecretReference;
use captf_api::names::{kinds, reasons};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use crate::engine::job_conditions::{ConditionStatus, ConditionValue};

fn value(status: ConditionStatus, reason: &'static str, message: String) -> ConditionValue {
    ConditionValue {
        status,
        reason,
        message,
    }
}

/// The `requiredKeys` that `data` lacks, sorted and without repeats. An
/// empty value counts as present.
pub fn missing_keys(
    required: Option<&[String]>,
    data: Option<&BTreeMap<String, ByteString>>,
) -> Vec<String> {
    let mut missing: Vec<String> = required
        .unwrap_or_default()
        .iter()
        .filter(|k| !data.is_some_and(|d| d.contains_key(k.as_str())))
        .cloned()
        .collect();
    missing.sort();
    missing.dedup();
    missing
}

/// What the identity's source Secret looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceVerdict {
    /// Present with every required key.
    Found {
        secret: String,
    },
    /// `spec.secretRef` is not set.
    NotSet,
    NotFound {
        secret: String,
    },
    Incomplete {
        secret: String,
        missing: Vec<String>,
    },
}

/// Judges the source Secret (`None` when it does not exist).
pub fn check_source(
    secret_ref: Option<&SecretReference>,
    required: Option<&[String]>,
    source: Option<&Secret>,
) -> SourceVerdict {
    let Some(r) = secret_ref else {
        return SourceVerdict::NotSet;
    };
    let secret = format!("{}/{}", r.namespace, r.name);
    let Some(source) = source else {
        return SourceVerdict::NotFound { secret };
    };
    let missing = missing_keys(required, source.data.as_ref());
    if missing.is_empty() {
        SourceVerdict::Found { secret }
    } else {
        SourceVerdict::Incomplete { secret, missing }
    }
}

/// The identity's own `Ready` (never Unknown).
pub fn identity_ready(verdict: &SourceVerdict) -> ConditionValue {
    match verdict {
        SourceVerdict::Found { secret } => value(
            ConditionStatus::True,
            reasons::SECRET_FOUND,
            format!("Secret {secret} found"),
        ),
        SourceVerdict::NotSet => value(
            ConditionStatus::False,
            reasons::SECRET_NOT_FOUND,
            "spec.secretRef is not set".to_owned(),
        ),
        SourceVerdict::NotFound { secret } => value(
            ConditionStatus::False,
            reasons::SECRET_NOT_FOUND,
            format!("Secret {secret} not found"),
        ),
        SourceVerdict::Incomplete { secret, missing } => value(
            ConditionStatus::False,
            reasons::CREDENTIALS_INCOMPLETE,
            format!(
                "Secret {secret} lacks required keys: {}",
                missing.join(", ")
            ),
        ),
    }
}

fn identity(name: &str) -> String {
    format!("{} {name}", kinds::TERRAFORM_CLUSTER_IDENTITY)
}

/// `IdentityAllowed` for a user whose namespace is allowed, from the source
/// Secret's verdict.
pub fn allowed_by_source(
    identity_name: &str,
    namespace: &str,
    verdict: &SourceVerdict,
) -> ConditionValue {
    let id = identity(identity_name);
    match verdict {
        SourceVerdict::Found { .. } => value(
            ConditionStatus::True,
            reasons::IDENTITY_ALLOWED,
            format!("{id} allows namespace {namespace}"),
        ),
        SourceVerdict::NotSet => value(
            ConditionStatus::False,
            reasons::SECRET_NOT_FOUND,
            format!("{id}: spec.secretRef is not set"),
        ),
        SourceVerdict::NotFound { secret } => value(
            ConditionStatus::False,
            reasons::SECRET_NOT_FOUND,
            format!("{id}: Secret {secret} not found"),
        ),
        SourceVerdict::Incomplete { secret, missing } => value(
            ConditionStatus::False,
            reasons::CREDENTIALS_INCOMPLETE,
            format!(
                "{id}: Secret {secret} lacks required keys: {}",
                missing.join(", ")
            ),
        ),
    }
}

/// `IdentityAllowed` when no identity resolves (`None`) or the named one
/// does not exist.
pub fn identity_not_found(identity_name: Option<&str>) -> ConditionValue {
    let message = match identity_name {
        None => "no identityRef is set on the object, in the TerraformCluster's spec.defaults or on the TerraformCluster".to_owned(),
        Some(name) => format!("{} not found", identity(name)),
    };
    value(ConditionStatus::False, reasons::IDENTITY_NOT_FOUND, message)
}

/// `IdentityAllowed` when the identity excludes the namespace.
pub fn namespace_not_allowed(identity_name: &str, namespace: &str, why: &str) -> ConditionValue {
    value(
        ConditionStatus::False,
        reasons::NAMESPACE_NOT_ALLOWED,
        format!(
            "{} does not allow namespace {namespace}: {why}",
            identity(identity_name)
        ),
    )
}

/// `IdentityAllowed` when a read needed to decide failed; retried.
pub fn check_failed(what: &str, error: &str) -> ConditionValue {
    value(
        ConditionStatus::Unknown,
        reasons::IDENTITY_CHECK_FAILED,
        format!("reading {what} failed: {error}"),
    )
}

/// `IdentityAllowed` for `identityRef.kind: Secret`.
pub fn local_secret(name: &str, namespace: &str, exists: bool) -> ConditionValue {
    if exists {
        value(
            ConditionStatus::True,
            reasons::LOCAL_SECRET,
            format!("Secret {namespace}/{name} is used directly"),
        )
    } else {
        value(
            ConditionStatus::False,
            reasons::SECRET_NOT_FOUND,
            format!("Secret {namespace}/{name} not found"),
        )
    }
}

/// `CredentialsMirrored` while no mirror can be made yet.
pub fn mirror_pending(why: &str) -> ConditionValue {
    value(
        ConditionStatus::Unknown,
        reasons::MIRROR_PENDING,
        why.to_owned(),
    )
}

/// `CredentialsMirrored` once the mirror is current.
pub fn mirrored(namespace: &str, secret: &str, identity_name: &str) -> ConditionValue {
    value(
        ConditionStatus::True,
        reasons::MIRRORED,
        format!(
            "Secret {namespace}/{secret} mirrors {}",
            identity(identity_name)
        ),
    )
}

/// `CredentialsMirrored` for a local Secret: nothing to mirror, the Secret
/// is mounted as it is.
pub fn local_not_mirrored(namespace: &str, name: &str) -> ConditionValue {
    value(
        ConditionStatus::True,
        reasons::MIRRORED,
        format!("Secret {namespace}/{name} is used directly; no mirror needed"),
    )
}

/// `CredentialsMirrored` when writing the mirror failed.
pub fn mirror_failed(message: String) -> ConditionValue {
    value(ConditionStatus::False, reasons::MIRROR_FAILED, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(keys: &[&str]) -> BTreeMap<String, ByteString> {
        keys.iter()
            .map(|k| ((*k).to_owned(), ByteString(b"s3cr3t-value".to_vec())))
            .collect()
    }

    fn keys(ks: &[&str]) -> Vec<String> {
        ks.iter().map(|k| (*k).to_owned()).collect()
    }

    fn sref() -> SecretReference {
        SecretReference {
            name: "aws-creds".into(),
            namespace: "captf-system".into(),
        }
    }

    /// Name, required keys, Secret data, keys reported missing.
    type Case<'a> = (
        &'a str,
        Option<Vec<String>>,
        Option<BTreeMap<String, ByteString>>,
        Vec<&'a str>,
    );

    #[test]
    fn missing_keys_table() {
        let mut with_empty = data(&["A"]);
        with_empty.insert("EMPTY".into(), ByteString(vec![]));
        let cases: Vec<Case<'_>> = vec![
            ("no requirement", None, Some(data(&[])), vec![]),
            ("empty requirement", Some(vec![]), None, vec![]),
            (
                "all present",
                Some(keys(&["A", "B"])),
                Some(data(&["A", "B", "C"])),
                vec![],
            ),
            (
                "empty value counts",
                Some(keys(&["EMPTY"])),
                Some(with_empty),
                vec![],
            ),
            (
                "some missing, sorted, deduped",
                Some(keys(&["Z", "A", "Z", "B"])),
                Some(data(&["A"])),
                vec!["B", "Z"],
            ),
            ("no data at all", Some(keys(&["A"])), None, vec!["A"]),
        ];
        for (name, required, d, want) in cases {
            assert_eq!(
                missing_keys(required.as_deref(), d.as_ref()),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn source_verdicts_and_their_conditions() {
        let required = keys(&["KEY_ID", "SECRET"]);
        let secret = |ks: &[&str]| Secret {
            data: Some(data(ks)),
            ..Default::default()
        };
        let full = secret(&["KEY_ID", "SECRET"]);
        let partial = secret(&["KEY_ID"]);
        let cases = [
            (
                check_source(Some(&sref()), Some(&required), Some(&full)),
                "True",
                reasons::SECRET_FOUND,
                "True",
                reasons::IDENTITY_ALLOWED,
            ),
            (
                check_source(Some(&sref()), Some(&required), None),
                "False",
                reasons::SECRET_NOT_FOUND,
                "False",
                reasons::SECRET_NOT_FOUND,
            ),
            (
                check_source(Some(&sref()), Some(&required), Some(&partial)),
                "False",
                reasons::CREDENTIALS_INCOMPLETE,
                "False",
                reasons::CREDENTIALS_INCOMPLETE,
            ),
            (
                check_source(None, None, None),
                "False",
                reasons::SECRET_NOT_FOUND,
                "False",
                reasons::SECRET_NOT_FOUND,
            ),
        ];
        for (verdict, ready_status, ready_reason, user_status, user_reason) in cases {
            let ready = identity_ready(&verdict);
            assert_eq!(
                (ready.status.as_str(), ready.reason),
                (ready_status, ready_reason),
                "{verdict:?}"
            );
            let user = allowed_by_source("aws", "team-a", &verdict);
            assert_eq!(
                (user.status.as_str(), user.reason),
                (user_status, user_reason),
                "{verdict:?}"
            );
            for m in [&ready.message, &user.message] {
                assert!(!m.contains("s3cr3t"), "a secret value leaked: {m}");
            }
        }
        let incomplete = identity_ready(&check_source(
            Some(&sref()),
            Some(&required),
            Some(&partial),
        ));
        assert_eq!(
            incomplete.message,
            "Secret captf-system/aws-creds lacks required keys: SECRET"
        );
        let not_found =
            allowed_by_source("aws", "team-a", &check_source(Some(&sref()), None, None));
        assert_eq!(
            not_found.message,
            "TerraformClusterIdentity aws: Secret captf-system/aws-creds not found"
        );
    }

    #[test]
    fn other_user_conditions() {
        let c = namespace_not_allowed(
            "aws",
            "team-b",
            "namespace team-b is not in spec.allowedNamespaces.list",
        );
        assert_eq!(
            (c.status.as_str(), c.reason),
            ("False", reasons::NAMESPACE_NOT_ALLOWED)
        );
        assert!(
            c.message
                .starts_with("TerraformClusterIdentity aws does not allow namespace team-b: ")
        );
        assert_eq!(
            identity_not_found(Some("gone")).message,
            "TerraformClusterIdentity gone not found"
        );
        assert_eq!(identity_not_found(None).reason, reasons::IDENTITY_NOT_FOUND);
        let f = check_failed("Namespace team-a", "timeout");
        assert_eq!(
            (f.status.as_str(), f.reason),
            ("Unknown", reasons::IDENTITY_CHECK_FAILED)
        );
        assert_eq!(
            local_secret("creds", "ns", true).reason,
            reasons::LOCAL_SECRET
        );
        let missing = local_secret("creds", "ns", false);
        assert_eq!(
            (missing.status.as_str(), missing.reason),
            ("False", reasons::SECRET_NOT_FOUND)
        );
        assert_eq!(mirror_pending("x").status, "Unknown");
        assert_eq!(
            mirrored("ns", "captf-creds-aws", "aws").message,
            "Secret ns/captf-creds-aws mirrors TerraformClusterIdentity aws"
        );
    }
}
