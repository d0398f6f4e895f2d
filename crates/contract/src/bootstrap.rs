//! The bootstrap inputs of machines and pools: the payload's format and the
//! payload itself, base64-encoded and never shown.

use std::fmt;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// Format of the bootstrap payload (the bootstrap Secret's `format` key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum BootstrapFormat {
    #[default]
    #[serde(rename = "cloud-config")]
    CloudConfig,
    #[serde(rename = "ignition")]
    Ignition,
}

impl BootstrapFormat {
    /// Parses the bootstrap Secret's `format` value; `None` means absent,
    /// which reads as `cloud-config`.
    pub fn from_secret_value(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("cloud-config") => Ok(BootstrapFormat::CloudConfig),
            Some("ignition") => Ok(BootstrapFormat::Ignition),
            Some(other) => Err(format!(
                "bootstrap format {other:?} is not one of cloud-config, ignition"
            )),
        }
    }
}

/// `bootstrap_data`: standard padded base64 of the bootstrap payload. The
/// payload is a secret, so `Debug` never shows it.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BootstrapData(String);

impl BootstrapData {
    /// Encodes the raw bytes of the bootstrap Secret's `value` key.
    pub fn from_bytes(raw: &[u8]) -> Self {
        BootstrapData(base64::engine::general_purpose::STANDARD.encode(raw))
    }

    /// Wraps an already encoded value; [`BootstrapData::check`] tells whether
    /// it is strict standard padded base64.
    pub fn from_base64(encoded: impl Into<String>) -> Self {
        BootstrapData(encoded.into())
    }

    /// The base64 text.
    pub fn as_base64(&self) -> &str {
        &self.0
    }

    /// True when the value decodes as strict, standard, padded base64.
    pub fn check(&self) -> bool {
        base64::engine::general_purpose::STANDARD
            .decode(&self.0)
            .is_ok()
    }
}

impl fmt::Debug for BootstrapData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BootstrapData(<{} bytes redacted>)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_format_from_secret() {
        assert_eq!(
            BootstrapFormat::from_secret_value(None),
            Ok(BootstrapFormat::CloudConfig)
        );
        assert_eq!(
            BootstrapFormat::from_secret_value(Some("ignition")),
            Ok(BootstrapFormat::Ignition)
        );
        assert!(BootstrapFormat::from_secret_value(Some("shell")).is_err());
    }
}
