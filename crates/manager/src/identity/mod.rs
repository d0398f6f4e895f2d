//! TerraformClusterIdentity: which namespaces may use an identity, and the
//! credentials mirror each user gets. Pure decisions over plain data; the
//! reads and writes live in `crate::io::identity`.

pub mod access;
pub mod conditions;
pub mod mirror;
pub mod status;

use captf_api::common::{IdentityKind, IdentityReference};
use captf_api::names::events;

use crate::engine::job_conditions::ConditionValue;

/// Where a user's credentials come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// No identity resolves for the object.
    None,
    /// A cluster-scoped TerraformClusterIdentity, mirrored into the
    /// object's namespace.
    Identity(&'a str),
    /// A Secret in the object's own namespace, used as it is.
    LocalSecret(&'a str),
}

/// What an `identityRef` (already resolved through the inheritance chain)
/// points at; an unset kind means a TerraformClusterIdentity.
pub fn target(reference: Option<&IdentityReference>) -> Target<'_> {
    match reference {
        None => Target::None,
        Some(r) => match r.kind {
            Some(IdentityKind::Secret) => Target::LocalSecret(&r.name),
            Some(IdentityKind::TerraformClusterIdentity) | None => Target::Identity(&r.name),
        },
    }
}

/// A mirror change worth an event on the user object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorEvent {
    /// `MirrorCreated`: the mirror Secret was created for this object.
    Created(String),
    /// `MirrorRemoved`: the mirror Secret was deleted (revoked, or the
    /// object was its last user).
    Removed(String),
}

impl MirrorEvent {
    /// The event reason to record on the user object (type Normal).
    pub fn reason(&self) -> &'static str {
        match self {
            MirrorEvent::Created(_) => events::MIRROR_CREATED,
            MirrorEvent::Removed(_) => events::MIRROR_REMOVED,
        }
    }

    /// The event note: names the Secret only.
    pub fn note(&self) -> String {
        match self {
            MirrorEvent::Created(s) => format!("credentials mirror Secret {s} created"),
            MirrorEvent::Removed(s) => format!("credentials mirror Secret {s} deleted"),
        }
    }
}

/// The credentials step's outcome for one user object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub identity_allowed: ConditionValue,
    pub credentials_mirrored: ConditionValue,
    /// The Secret the object's Jobs mount; set only when both conditions
    /// are True.
    pub secret: Option<String>,
    pub events: Vec<MirrorEvent>,
    /// The UIDs the mirror names as its owners once written (empty when
    /// there is no mirror): each of them is known to be on it.
    pub mirror_owners: Vec<String>,
}

impl Credentials {
    /// Not allowed (or not yet known): no mirror to mount.
    pub fn blocked(identity_allowed: ConditionValue) -> Self {
        Credentials {
            identity_allowed,
            credentials_mirrored: conditions::mirror_pending("waiting for IdentityAllowed"),
            secret: None,
            events: Vec::new(),
            mirror_owners: Vec::new(),
        }
    }

    /// Both conditions True: a Job may start with `secret`.
    pub fn ready(&self) -> bool {
        self.secret.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let r = |kind, name: &str| IdentityReference {
            kind,
            name: name.into(),
        };
        assert_eq!(target(None), Target::None);
        assert_eq!(target(Some(&r(None, "aws"))), Target::Identity("aws"));
        assert_eq!(
            target(Some(&r(
                Some(IdentityKind::TerraformClusterIdentity),
                "aws"
            ))),
            Target::Identity("aws")
        );
        assert_eq!(
            target(Some(&r(Some(IdentityKind::Secret), "creds"))),
            Target::LocalSecret("creds")
        );
    }

    #[test]
    fn mirror_events_map_to_their_reasons() {
        let created = MirrorEvent::Created("captf-creds-aws".into());
        assert_eq!(created.reason(), "MirrorCreated");
        assert!(created.note().contains("captf-creds-aws"));
        assert_eq!(
            MirrorEvent::Removed("captf-creds-aws".into()).reason(),
            "MirrorRemoved"
        );
    }

    #[test]
    fn blocked_credentials_mount_nothing() {
        let c = Credentials::blocked(conditions::identity_not_found(Some("x")));
        assert!(!c.ready());
        assert_eq!(c.credentials_mirrored.status, "Unknown");
        assert_eq!(
            c.credentials_mirrored.reason,
            captf_api::names::reasons::MIRROR_PENDING
        );
    }
}
