//! The dependency gates machines and pools share: the cluster's exports and
//! the bootstrap data. Each returns what the inputs need, or the
//! `DependenciesReady` to report while it is missing.

use captf_api::TerraformCluster;
use captf_api::names::{annotations, reasons};
use captf_contract::JsonText;
use captf_contract::inputs::{BootstrapData, BootstrapFormat};
use captf_contract::outputs::ClusterOutputs;

use super::{annotation, condition};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};

/// What the caller could read of the cluster's state.
#[derive(Debug, Clone, Copy)]
pub enum ClusterState<'a> {
    /// Decoded outputs the verdict lets be used.
    Outputs(&'a ClusterOutputs),
    /// No usable outputs; the text says why, without any value.
    Unreadable(&'a str),
}

/// The bootstrap data Secret's two keys.
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapSecret {
    pub value: Option<Vec<u8>>,
    pub format: Option<String>,
}

impl std::fmt::Debug for BootstrapSecret {
    // The payload is a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapSecret")
            .field("value", &self.value.as_ref().map(|v| v.len()))
            .field("format", &self.format)
            .finish()
    }
}

/// Why the cluster's outputs cannot be used, in words the gates report.
pub const OUTPUTS_NOT_VALID: &str = "the TerraformCluster's outputs are not valid";
pub const STATE_UNREADABLE: &str = "the TerraformCluster's state cannot be read";
pub const NO_STATE_READ: &str = "no TerraformCluster state was read";

pub(crate) fn waiting(reason: &'static str, message: impl Into<String>) -> ConditionValue {
    condition(ConditionStatus::Unknown, reason, message)
}

/// The cluster's exports and failure-domain names, once its outputs can be
/// read. An externally managed cluster has no state to read: its exports
/// are empty and its failure domains are whatever its status says.
pub fn exports(
    tc: &TerraformCluster,
    state: ClusterState<'_>,
) -> Result<(JsonText, Vec<String>), ConditionValue> {
    let status = tc.status.as_ref();
    if annotation(&tc.metadata, annotations::MANAGED_BY).is_some() {
        let names = status
            .and_then(|s| s.failure_domains.as_ref())
            .map(|fds| fds.iter().map(|fd| fd.name.clone()).collect())
            .unwrap_or_default();
        return Ok((JsonText::empty_object(), names));
    }
    match state {
        ClusterState::Outputs(o) => Ok((
            o.exports.clone(),
            o.failure_domains.iter().map(|fd| fd.name.clone()).collect(),
        )),
        ClusterState::Unreadable(why) => Err(waiting(
            reasons::WAITING_FOR_CLUSTER_EXPORTS,
            format!(
                "exports of TerraformCluster {} cannot be read: {why}",
                tc.metadata.name.as_deref().unwrap_or_default()
            ),
        )),
    }
}

/// The bootstrap data the owner (`owner`, e.g. "Machine m-1") names in
/// `secret_name`, read from `secret` (`None`: not found).
pub fn bootstrap(
    owner: &str,
    secret_name: Option<&str>,
    secret: Option<&BootstrapSecret>,
) -> Result<(BootstrapData, BootstrapFormat), ConditionValue> {
    let Some(secret_name) = secret_name.filter(|n| !n.is_empty()) else {
        return Err(waiting(
            reasons::WAITING_FOR_BOOTSTRAP_DATA,
            format!("{owner} has no bootstrap data Secret yet"),
        ));
    };
    let Some(secret) = secret else {
        return Err(waiting(
            reasons::WAITING_FOR_BOOTSTRAP_DATA,
            format!("bootstrap data Secret {secret_name} not found"),
        ));
    };
    let Some(value) = &secret.value else {
        return Err(waiting(
            reasons::WAITING_FOR_BOOTSTRAP_DATA,
            format!("bootstrap data Secret {secret_name} has no value key"),
        ));
    };
    let format = BootstrapFormat::from_secret_value(secret.format.as_deref()).map_err(|e| {
        waiting(
            reasons::WAITING_FOR_BOOTSTRAP_DATA,
            format!("bootstrap data Secret {secret_name}: {e}"),
        )
    })?;
    Ok((BootstrapData::from_bytes(value), format))
}
