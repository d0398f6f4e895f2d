//! Versioned hashes over canonical JSON: the inputs hash (`h2:`), the pool
//! approval hash and the exports hash.
//!
//! The inputs hash covers an envelope object holding the scheme, the
//! contract version, the role, the image reference as written and the hash
//! view of the inputs. When user variables are set it also holds one string,
//! `variables`: the canonical JSON of
//! `{"sensitive":[<sorted names>],"values":{<name>:<value>}}`, numbers as
//! written. Objects without variables thus hash exactly as before variables
//! existed, and hashes agree with those other implementations of the
//! contract record on their states.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::canonical::{NotCanonical, NumberPolicy, to_canonical_string};
use crate::go_json::{push_go_string, to_go_string};
use crate::inputs::{MachinePoolInputs, RoleInputs};
use crate::json_text::{InvalidJson, JsonText};
use crate::variables::UserVariables;
use crate::{CONTRACT_VERSION, Role};

/// The current hash scheme; every hash starts with `h2:`.
pub const HASH_SCHEME: &str = "h2";

/// A value that cannot be hashed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// A controller-built value holds a non-integer number; `path` points into
    /// the inputs (e.g. `/captf_cluster_outputs/weight`).
    #[error("inputs cannot be hashed: non-integer number {literal} at {path}")]
    NonIntegerNumber { path: String, literal: String },
    /// A string escapes a lone surrogate; `path` points into the hashed value.
    #[error("cannot be hashed: the string at {path} escapes a lone surrogate")]
    Undecodable { path: String },
    /// The exports are not JSON.
    #[error("exports cannot be hashed: {0}")]
    InvalidJson(#[from] InvalidJson),
}

impl From<NotCanonical> for HashError {
    fn from(e: NotCanonical) -> Self {
        match e {
            NotCanonical::NonInteger { path, literal } => {
                HashError::NonIntegerNumber { path, literal }
            }
            NotCanonical::Undecodable { path } => HashError::Undecodable { path },
        }
    }
}

/// `h2:` + hex sha256 of `bytes`.
fn sum(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(HASH_SCHEME.len() + 1 + 64);
    out.push_str(HASH_SCHEME);
    out.push(':');
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// The canonical bytes the inputs hash of `inputs` is computed over. Exposed
/// so golden tests and debugging tools can see exactly what is hashed.
pub fn inputs_hash_payload(
    image: &str,
    inputs: &RoleInputs,
    variables: &UserVariables,
) -> Result<Vec<u8>, HashError> {
    let role: Role = inputs.role();
    // Controller-built values, cluster exports included, must be
    // integer-only; user variables are hashed as given.
    let view = to_canonical_string(
        &inputs.hash_view().to_json_text(),
        NumberPolicy::IntegersOnly,
    )?;
    let variables = canonical_variables(variables)?;

    // The envelope's keys, written in byte order as canonical JSON sorts them.
    let mut out = String::with_capacity(view.len() + 256);
    out.push_str("{\"contract\":");
    push_go_string(&mut out, CONTRACT_VERSION);
    out.push_str(",\"image\":");
    push_go_string(&mut out, image);
    out.push_str(",\"inputs\":");
    out.push_str(&view);
    out.push_str(",\"role\":");
    push_go_string(&mut out, role.as_str());
    out.push_str(",\"scheme\":");
    push_go_string(&mut out, HASH_SCHEME);
    if let Some(variables) = variables {
        out.push_str(",\"variables\":");
        push_go_string(&mut out, &variables);
    }
    out.push('}');
    Ok(out.into_bytes())
}

/// The canonical JSON (any number) of the user variables' names, sensitivity
/// and values, or `None` when there are none.
fn canonical_variables(variables: &UserVariables) -> Result<Option<String>, HashError> {
    #[derive(Serialize)]
    struct Envelope<'a> {
        sensitive: Vec<&'a str>,
        values: BTreeMap<&'a str, &'a RawValue>,
    }
    if variables.is_empty() {
        return Ok(None);
    }
    let envelope = Envelope {
        sensitive: variables
            .iter()
            .filter(|(_, v)| v.sensitive)
            .map(|(name, _)| name)
            .collect(),
        values: variables
            .iter()
            .map(|(name, v)| (name, v.value.as_raw()))
            .collect(),
    };
    let text = JsonText::parse(&to_go_string(&envelope)).expect("serde_json writes valid JSON");
    let canonical = to_canonical_string(&text, NumberPolicy::Any).map_err(|e| match e {
        NotCanonical::NonInteger { .. } => unreachable!("any number is accepted"),
        NotCanonical::Undecodable { path } => HashError::Undecodable {
            path: format!("/variables{path}"),
        },
    })?;
    Ok(Some(canonical))
}

/// The inputs hash (`captf.io/inputs-hash`) of an object whose
/// `spec.source.image` is `image`.
pub fn inputs_hash(
    image: &str,
    inputs: &RoleInputs,
    variables: &UserVariables,
) -> Result<String, HashError> {
    Ok(sum(&inputs_hash_payload(image, inputs, variables)?))
}

/// The approval hash of a pool: its inputs hash computed over the approval
/// view (bootstrap data blanked), so an approval survives token rotation.
pub fn approval_hash(
    image: &str,
    inputs: &MachinePoolInputs,
    variables: &UserVariables,
) -> Result<String, HashError> {
    inputs_hash(
        image,
        &RoleInputs::MachinePool(inputs.approval_view()),
        variables,
    )
}

/// The hash of a cluster's `exports` as rendered into `captf_cluster_outputs`
/// (`captf.io/cluster-outputs-hash` and friends): `h2:` + sha256 of their
/// canonical JSON with numbers as written. Empty text, whitespace and `null`
/// hash as `{}`, the exports of a module that set none.
pub fn exports_hash(exports: &str) -> Result<String, HashError> {
    let trimmed = exports.trim();
    let text = if trimmed.is_empty() || trimmed == "null" {
        JsonText::empty_object()
    } else {
        JsonText::parse(exports)?
    };
    Ok(sum(
        to_canonical_string(&text, NumberPolicy::Any)?.as_bytes()
    ))
}
