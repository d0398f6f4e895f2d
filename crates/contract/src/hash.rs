//! Versioned hashes over canonical JSON: the inputs hash (`h2:`), the pool
//! approval hash and the exports hash.
//!
//! The inputs hash covers an envelope object holding the scheme, the
//! contract version, the role, the image reference as written and the hash
//! view of the inputs; when user variables are set it also holds their values
//! and the sorted names of the sensitive ones. Objects without variables thus
//! hash exactly as before variables existed.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::canonical::{NotCanonical, NumberPolicy, find_non_integer, to_canonical_vec};
use crate::inputs::{MachinePoolInputs, RoleInputs};
use crate::variables::UserVariables;
use crate::{CONTRACT_VERSION, Role};

/// The current hash scheme; every hash starts with `h2:`.
pub const HASH_SCHEME: &str = "h2";

/// A value that cannot be hashed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// A controller-built value holds a non-integer number; `path` points into
    /// the inputs (e.g. `/captf_cluster_outputs/weight`).
    #[error("inputs cannot be hashed: non-integer number at {path}")]
    NonIntegerNumber { path: String },
}

impl From<NotCanonical> for HashError {
    fn from(e: NotCanonical) -> Self {
        HashError::NonIntegerNumber { path: e.path }
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
    let view = inputs.hash_view().to_value();
    // Controller-built values must be integer-only; user variables are hashed
    // as given, so they are checked separately below.
    if let Some(path) = find_non_integer(&view) {
        return Err(HashError::NonIntegerNumber { path });
    }
    let mut envelope = Map::new();
    envelope.insert("scheme".into(), HASH_SCHEME.into());
    envelope.insert("contract".into(), CONTRACT_VERSION.into());
    envelope.insert("role".into(), role.as_str().into());
    envelope.insert("image".into(), image.into());
    envelope.insert("inputs".into(), view);
    if !variables.is_empty() {
        let values: Map<String, Value> = variables
            .iter()
            .map(|(k, v)| (k.to_owned(), v.value.clone()))
            .collect();
        let sensitive: Vec<Value> = variables
            .iter()
            .filter(|(_, v)| v.sensitive)
            .map(|(k, _)| Value::from(k))
            .collect();
        envelope.insert("variables".into(), Value::Object(values));
        envelope.insert("sensitive_variables".into(), Value::Array(sensitive));
    }
    Ok(to_canonical_vec(
        &Value::Object(envelope),
        NumberPolicy::Any,
    )?)
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
/// (`captf.io/cluster-outputs-hash` and friends): `h2:` + sha256 of its
/// canonical JSON.
pub fn exports_hash(exports: &Value) -> Result<String, HashError> {
    Ok(sum(&to_canonical_vec(exports, NumberPolicy::IntegersOnly)?))
}
