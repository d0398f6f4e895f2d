//! Admission rules as pure functions. Each kind's check returns every
//! violation of an object at once, each as a field path and a reason; no
//! message ever repeats a submitted value.

mod image;
mod jobs;
mod kinds;
mod lookups;
mod meta;
mod variables;

pub use image::{check_image_reference, is_image_reference, repository};
pub use jobs::{RESERVED_ENV_NAMES, RESERVED_ENV_PREFIXES, is_reserved_env_name};
pub use kinds::*;
pub use lookups::*;
pub use meta::{label_key_problem, label_value_problem};
pub use variables::is_identifier;

use std::fmt;

/// The kind of problem, as Kubernetes names field errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViolationKind {
    Required,
    Invalid,
    Forbidden,
    NotSupported,
    TooMany,
}

impl ViolationKind {
    /// The `StatusCause.reason` Kubernetes uses for this kind.
    pub fn cause_reason(self) -> &'static str {
        match self {
            ViolationKind::Required => "FieldValueRequired",
            ViolationKind::Invalid => "FieldValueInvalid",
            ViolationKind::Forbidden => "FieldValueForbidden",
            ViolationKind::NotSupported => "FieldValueNotSupported",
            ViolationKind::TooMany => "FieldValueTooMany",
        }
    }

    fn label(self) -> &'static str {
        match self {
            ViolationKind::Required => "Required value",
            ViolationKind::Invalid => "Invalid value",
            ViolationKind::Forbidden => "Forbidden",
            ViolationKind::NotSupported => "Unsupported value",
            ViolationKind::TooMany => "Too many",
        }
    }
}

/// One broken rule: where, what kind, and why. Never the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub field: String,
    pub kind: ViolationKind,
    pub detail: String,
}

impl Violation {
    pub fn new(field: impl Into<String>, kind: ViolationKind, detail: impl Into<String>) -> Self {
        Violation {
            field: field.into(),
            kind,
            detail: detail.into(),
        }
    }

    /// `<field>: <kind>: <detail>`, the message of one cause.
    pub fn message(&self) -> String {
        format!("{}: {}", self.kind.label(), self.detail)
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

/// What admission decided: every violation (empty: allowed) and warnings
/// shown to the user either way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub violations: Vec<Violation>,
    pub warnings: Vec<String>,
}

impl Verdict {
    pub fn allowed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The operation under review.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

/// Facts about the request the rules need besides the objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub operation: Operation,
    /// Username of the requester.
    pub username: String,
    /// Username of the manager's ServiceAccount, when known.
    pub manager_username: Option<String>,
    /// A ClusterClass topology dry-run, exempt from template immutability.
    pub topology_dry_run: bool,
}

impl Request {
    pub fn create(username: &str) -> Request {
        Request {
            operation: Operation::Create,
            username: username.to_string(),
            manager_username: None,
            topology_dry_run: false,
        }
    }

    pub fn update(username: &str) -> Request {
        Request {
            operation: Operation::Update,
            ..Request::create(username)
        }
    }

    fn by_manager(&self) -> bool {
        self.manager_username.as_deref() == Some(self.username.as_str())
    }
}

/// Collects violations under a field path.
#[derive(Default, Debug)]
pub(crate) struct Violations(Vec<Violation>);

impl Violations {
    pub(crate) fn push(
        &mut self,
        field: impl Into<String>,
        kind: ViolationKind,
        detail: impl Into<String>,
    ) {
        self.0.push(Violation::new(field, kind, detail));
    }

    pub(crate) fn into_verdict(self, warnings: Vec<String>) -> Verdict {
        Verdict {
            violations: self.0,
            warnings,
        }
    }
}

#[cfg(test)]
mod tests;
