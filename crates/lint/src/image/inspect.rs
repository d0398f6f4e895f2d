//! Reading an image's labels through the registry API without pulling its
//! layers, for the manager's machine templates: the manifest (the `linux`
//! image of an index for the wanted architecture, else its first `linux`
//! image) and the config's labels. The registry's addresses are checked
//! when the connection is made, so a name that resolves to a private
//! address is refused however it was reached.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use super::ImageError;
use super::fetch::{self, Blobs, INDEX_TYPES, Registry};
use super::reference::Reference;

/// Which registries may be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Loopback, link-local, private, unique-local and CGNAT addresses are
    /// allowed too.
    pub allow_private: bool,
    /// `host[:port]` entries; empty allows every host passing the address
    /// check.
    pub allowed_registries: Vec<String>,
}

/// What an inspection found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspected {
    /// Digest of the manifest read (the index's for an index).
    pub digest: String,
    pub labels: BTreeMap<String, String>,
}

/// Why an image was not inspected: a refusal of the policy (never retried
/// for the same reference) or a failure to read it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InspectError {
    #[error("{0}")]
    NotAllowed(String),
    #[error("{0}")]
    Failed(String),
}

/// True for an address a registry on the public internet never has.
pub fn private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| private(IpAddr::V4(v4)))
        }
    }
}

/// Resolves as usual, then refuses every private address unless allowed:
/// the connection only ever goes to an address this returned.
#[derive(Debug)]
struct DialGuard {
    allow_private: bool,
}

impl Resolver for DialGuard {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addrs = DefaultResolver::default().resolve(uri, config, timeout)?;
        if !self.allow_private && addrs.iter().any(|a| private(a.ip())) {
            return Err(ureq::Error::Io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "the registry resolves to a private address, which image inspection may not dial",
            )));
        }
        Ok(addrs)
    }
}

/// Plain HTTP for a registry on the local host (as container tools do for
/// `localhost` and loopback addresses); HTTPS otherwise.
pub fn plain_http(host: &str) -> bool {
    let name = host
        .rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        .map_or(host, |(h, _)| h);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The labels of the image `reference` names, for `arch` (`amd64`, …),
/// authenticated only by `pull_secrets` (the `.dockerconfigjson` documents
/// of the object's image pull Secrets; never the host's own files).
pub fn labels(
    reference: &str,
    arch: &str,
    policy: &Policy,
    pull_secrets: &[serde_json::Value],
) -> Result<Inspected, InspectError> {
    let r = Reference::parse(reference).map_err(InspectError::NotAllowed)?;
    if !policy.allowed_registries.is_empty() && !policy.allowed_registries.contains(&r.host) {
        return Err(InspectError::NotAllowed(format!(
            "registry {} is not in --image-inspect-allowed-registries",
            r.host
        )));
    }
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(30)))
        .build();
    let agent = ureq::Agent::with_parts(
        config,
        DefaultConnector::new(),
        DialGuard {
            allow_private: policy.allow_private,
        },
    );
    let insecure = plain_http(&r.host);
    let credentials = super::auth::credentials_from(pull_secrets, &r.host);
    let registry = Registry::with_agent(r, insecure, agent, credentials);
    read_labels(&registry, arch).map_err(|e| match e {
        ImageError::Fetch(m) if m.contains("private address") => InspectError::NotAllowed(
            "the registry resolves to a private address; --image-inspect-allow-private-registries allows it"
                .into(),
        ),
        other => InspectError::Failed(other.to_string()),
    })
}

/// The labels of the image `blobs` hold, for `arch`.
pub fn read_labels(blobs: &dyn Blobs, arch: &str) -> Result<Inspected, ImageError> {
    let bad = |what: &str, e: &dyn std::fmt::Display| ImageError::Fetch(format!("{what}: {e}"));
    let top = blobs.top()?;
    let manifest = if INDEX_TYPES.contains(&top.media_type.as_str()) {
        let index: serde_json::Value =
            serde_json::from_slice(&top.bytes).map_err(|e| bad("image index", &e))?;
        let linux: Vec<(&str, &str)> = index["manifests"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["platform"]["os"] == "linux")
            .filter_map(|m| {
                Some((
                    m["platform"]["architecture"].as_str()?,
                    m["digest"].as_str()?,
                ))
            })
            .collect();
        let chosen = linux
            .iter()
            .find(|(a, _)| *a == arch)
            .or(linux.first())
            .ok_or_else(|| ImageError::Fetch("the image index has no linux image".into()))?;
        blobs.manifest(chosen.1)?
    } else {
        top.clone()
    };
    let m: serde_json::Value =
        serde_json::from_slice(&manifest.bytes).map_err(|e| bad("image manifest", &e))?;
    let config_digest = m["config"]["digest"]
        .as_str()
        .ok_or_else(|| ImageError::Fetch("image manifest: no config digest".into()))?;
    let config: serde_json::Value =
        serde_json::from_slice(&fetch::read_document(blobs, config_digest)?)
            .map_err(|e| bad("image config", &e))?;
    let labels = config["config"]["Labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect();
    Ok(Inspected {
        digest: top.digest,
        labels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses() {
        let cases = [
            ("127.0.0.1", true),
            ("10.1.2.3", true),
            ("172.16.0.1", true),
            ("192.168.1.1", true),
            ("169.254.169.254", true),
            ("100.64.0.1", true),
            ("100.127.255.255", true),
            ("100.128.0.1", false),
            ("0.0.0.0", true),
            ("8.8.8.8", false),
            ("::1", true),
            ("fd00::1", true),
            ("fe80::1", true),
            ("::ffff:10.0.0.1", true),
            ("2001:4860:4860::8888", false),
        ];
        for (ip, want) in cases {
            assert_eq!(private(ip.parse().unwrap()), want, "{ip}");
        }
    }

    #[test]
    fn plain_http_only_on_the_local_host() {
        for (host, want) in [
            ("localhost:5000", true),
            ("127.0.0.1:5000", true),
            ("[::1]:5000", true),
            ("registry.localhost", true),
            ("ghcr.io", false),
            ("10.0.0.1:5000", false),
        ] {
            assert_eq!(plain_http(host), want, "{host}");
        }
    }

    #[test]
    fn a_registry_off_the_allow_list_is_not_inspected() {
        let policy = Policy {
            allow_private: true,
            allowed_registries: vec!["ghcr.io".into()],
        };
        let err = labels("quay.io/x/y:v1", "amd64", &policy, &[]).unwrap_err();
        assert!(matches!(err, InspectError::NotAllowed(m) if m.contains("quay.io")));
    }

    #[test]
    fn a_loopback_registry_is_refused_at_dial_time_unless_allowed() {
        // Nothing listens there: without the flag the dial is refused before
        // any connection, with it the connection itself fails.
        let refused = labels("127.0.0.1:9/x/y:v1", "amd64", &Policy::default(), &[]).unwrap_err();
        assert!(
            matches!(refused, InspectError::NotAllowed(_)),
            "{refused:?}"
        );
        let allowed = Policy {
            allow_private: true,
            ..Policy::default()
        };
        let failed = labels("127.0.0.1:9/x/y:v1", "amd64", &allowed, &[]).unwrap_err();
        assert!(matches!(failed, InspectError::Failed(_)), "{failed:?}");
    }
}
