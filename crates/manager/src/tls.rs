//! The TLS settings both HTTPS servers share (the webhook server and the
//! diagnostics endpoint), read from the Kubernetes-style flags
//! `--tls-min-version`, `--tls-cipher-suites` and `--tls-curve-preferences`.
//!
//! The flags name Go's values (cipher suite names as Go's `crypto/tls`
//! spells them, numeric `tls.CurveID`s), so manifests written for Go
//! managers keep working. rustls offers less than Go: TLS 1.2 and 1.3 only,
//! AEAD suites with ECDHE key exchange only, and no P-521. A value Go knows
//! but rustls does not offer refuses start with the reason, rather than
//! serving something weaker or different from what was asked.

use std::sync::Arc;

use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::server::WantsServerCert;
use rustls::{ConfigBuilder, ServerConfig, SupportedCipherSuite, SupportedProtocolVersion};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TlsError {
    #[error(
        "unknown TLS version {0:?}: want VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13"
    )]
    UnknownVersion(String),
    #[error("unknown cipher suite {0:?}")]
    UnknownCipherSuite(String),
    #[error("cipher suite {name} is not supported: {why}")]
    UnsupportedCipherSuite { name: String, why: &'static str },
    #[error("curve {0:?} is not a numeric curve ID (23 P-256, 24 P-384, 29 X25519, ...)")]
    BadCurve(String),
    #[error("curve {id} ({name}) is not supported by this build's TLS library")]
    UnsupportedCurve { id: u16, name: &'static str },
    #[error("unknown curve ID {0}")]
    UnknownCurve(u16),
    #[error("TLS configuration: {0}")]
    Rustls(String),
}

/// The lowest protocol version served (`--tls-min-version`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MinVersion {
    Tls10,
    Tls11,
    #[default]
    Tls12,
    Tls13,
}

impl MinVersion {
    /// Reads Go's constant names, as `k8s.io/component-base/cli/flag` does.
    pub fn parse(s: &str) -> Result<MinVersion, TlsError> {
        match s {
            "VersionTLS10" => Ok(MinVersion::Tls10),
            "VersionTLS11" => Ok(MinVersion::Tls11),
            "VersionTLS12" => Ok(MinVersion::Tls12),
            "VersionTLS13" => Ok(MinVersion::Tls13),
            _ => Err(TlsError::UnknownVersion(s.to_owned())),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MinVersion::Tls10 => "VersionTLS10",
            MinVersion::Tls11 => "VersionTLS11",
            MinVersion::Tls12 => "VersionTLS12",
            MinVersion::Tls13 => "VersionTLS13",
        }
    }

    /// The versions served. rustls has neither TLS 1.0 nor 1.1, so asking
    /// for them serves from TLS 1.2 (see [`TlsOptions::warnings`]).
    pub fn protocol_versions(self) -> &'static [&'static SupportedProtocolVersion] {
        static FROM_TLS12: [&SupportedProtocolVersion; 2] =
            [&rustls::version::TLS13, &rustls::version::TLS12];
        static ONLY_TLS13: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        match self {
            MinVersion::Tls13 => &ONLY_TLS13,
            _ => &FROM_TLS12,
        }
    }
}

/// Every cipher suite name Go's `crypto/tls` knows (its secure and insecure
/// lists, and the two legacy ChaCha20 spellings Kubernetes still accepts),
/// with the IANA code point that identifies it in any TLS library.
const GO_CIPHER_SUITES: &[(&str, u16)] = &[
    ("TLS_RSA_WITH_RC4_128_SHA", 0x0005),
    ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", 0x000a),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", 0x002f),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", 0x0035),
    ("TLS_RSA_WITH_AES_128_CBC_SHA256", 0x003c),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", 0x009c),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", 0x009d),
    ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", 0xc007),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", 0xc009),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", 0xc00a),
    ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", 0xc011),
    ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", 0xc012),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", 0xc013),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", 0xc014),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", 0xc023),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", 0xc027),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", 0xc02b),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", 0xc02c),
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", 0xc02f),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", 0xc030),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", 0xcca8),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", 0xcca8),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", 0xcca9),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", 0xcca9),
    ("TLS_AES_128_GCM_SHA256", 0x1301),
    ("TLS_AES_256_GCM_SHA384", 0x1302),
    ("TLS_CHACHA20_POLY1305_SHA256", 0x1303),
];

/// Go's `tls.CurveID`s and their names, for messages.
const GO_CURVES: &[(u16, &str)] = &[
    (23, "P-256"),
    (24, "P-384"),
    (25, "P-521"),
    (29, "X25519"),
    (4588, "X25519MLKEM768"),
    (25497, "X25519Kyber768Draft00"),
];

/// The crypto provider the manager is built with (`ring`, as everywhere in
/// this crate: the Kubernetes client and the certificate loading use it too).
pub fn base_provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// Why a suite Go knows is missing from rustls, read from its name.
fn missing_because(name: &str) -> &'static str {
    if name.starts_with("TLS_RSA_") {
        "RSA key exchange has no forward secrecy and is not offered; use a TLS_ECDHE_* suite"
    } else if name.contains("RC4") {
        "RC4 is broken and not offered"
    } else if name.contains("CBC") {
        "CBC-mode suites are not offered; use a GCM or CHACHA20_POLY1305 suite"
    } else {
        "the TLS library does not offer it"
    }
}

/// The suite of `provider` a Go cipher suite name stands for.
pub fn cipher_suite(
    provider: &CryptoProvider,
    name: &str,
) -> Result<SupportedCipherSuite, TlsError> {
    let &(_, code) = GO_CIPHER_SUITES
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| TlsError::UnknownCipherSuite(name.to_owned()))?;
    provider
        .cipher_suites
        .iter()
        .find(|s| u16::from(s.suite()) == code)
        .copied()
        .ok_or_else(|| TlsError::UnsupportedCipherSuite {
            name: name.to_owned(),
            why: missing_because(name),
        })
}

/// Reads one `--tls-curve-preferences` entry.
pub fn parse_curve(s: &str) -> Result<u16, TlsError> {
    s.trim()
        .parse::<u16>()
        .map_err(|_| TlsError::BadCurve(s.to_owned()))
}

/// The key exchange group of `provider` a Go curve ID stands for.
pub fn curve(
    provider: &CryptoProvider,
    id: u16,
) -> Result<&'static dyn SupportedKxGroup, TlsError> {
    if let Some(group) = provider
        .kx_groups
        .iter()
        .find(|g| u16::from(g.name()) == id)
    {
        return Ok(*group);
    }
    match GO_CURVES.iter().find(|(known, _)| *known == id) {
        Some(&(id, name)) => Err(TlsError::UnsupportedCurve { id, name }),
        None => Err(TlsError::UnknownCurve(id)),
    }
}

/// What the three flags ask for. Empty lists keep the library's defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    pub min_version: MinVersion,
    /// Go cipher suite names, in order.
    pub cipher_suites: Vec<String>,
    /// Go curve IDs, most preferred first.
    pub curve_preferences: Vec<u16>,
}

impl TlsOptions {
    /// What start should warn about: values served differently from Go.
    pub fn warnings(&self) -> Vec<String> {
        match self.min_version {
            MinVersion::Tls10 | MinVersion::Tls11 => vec![format!(
                "--tls-min-version={}: TLS 1.0 and 1.1 are not supported; serving TLS 1.2 and 1.3",
                self.min_version.as_str()
            )],
            _ => Vec::new(),
        }
    }

    /// `base` narrowed to the suites and groups asked for.
    ///
    /// Go applies a cipher suite list to TLS 1.0–1.2 only and always offers
    /// every TLS 1.3 suite. A list naming TLS 1.2 suites only therefore
    /// keeps all TLS 1.3 suites here too; a list that names TLS 1.3 suites
    /// keeps just those.
    pub fn provider(&self, base: CryptoProvider) -> Result<CryptoProvider, TlsError> {
        let mut provider = base;
        if !self.cipher_suites.is_empty() {
            let mut named = Vec::new();
            for name in &self.cipher_suites {
                let suite = cipher_suite(&provider, name)?;
                if !named.contains(&suite) {
                    named.push(suite);
                }
            }
            let is_tls13 = |s: &SupportedCipherSuite| s.version() == &rustls::version::TLS13;
            if !named.iter().any(is_tls13) {
                named.extend(provider.cipher_suites.iter().filter(|s| is_tls13(s)));
            }
            provider.cipher_suites = named;
        }
        if !self.curve_preferences.is_empty() {
            let mut groups: Vec<&'static dyn SupportedKxGroup> = Vec::new();
            for &id in &self.curve_preferences {
                let group = curve(&provider, id)?;
                if !groups.iter().any(|g| g.name() == group.name()) {
                    groups.push(group);
                }
            }
            provider.kx_groups = groups;
        }
        Ok(provider)
    }

    /// A server configuration builder with these options applied: the one
    /// place both HTTPS servers start from.
    pub fn server_builder(&self) -> Result<ConfigBuilder<ServerConfig, WantsServerCert>, TlsError> {
        let provider = self.provider(base_provider())?;
        let builder = ServerConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(self.min_version.protocol_versions())
            .map_err(|e| TlsError::Rustls(e.to_string()))?;
        Ok(builder.with_no_client_auth())
    }
}

/// ALPN protocols both servers offer: HTTP/2 first, as Go's servers do.
pub fn alpn_protocols() -> Vec<Vec<u8>> {
    vec![b"h2".to_vec(), b"http/1.1".to_vec()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::CipherSuite;
    use rustls::NamedGroup;

    fn suites(options: &TlsOptions) -> Vec<CipherSuite> {
        let provider = options.provider(base_provider()).unwrap();
        provider.cipher_suites.iter().map(|s| s.suite()).collect()
    }

    #[test]
    fn min_versions_read_go_names_and_old_ones_serve_from_tls12() {
        use rustls::version::{TLS12, TLS13};
        let cases: [(&str, MinVersion, &[&SupportedProtocolVersion], bool); 4] = [
            ("VersionTLS10", MinVersion::Tls10, &[&TLS13, &TLS12], true),
            ("VersionTLS11", MinVersion::Tls11, &[&TLS13, &TLS12], true),
            ("VersionTLS12", MinVersion::Tls12, &[&TLS13, &TLS12], false),
            ("VersionTLS13", MinVersion::Tls13, &[&TLS13], false),
        ];
        for (name, want, versions, warns) in cases {
            let got = MinVersion::parse(name).unwrap();
            assert_eq!(got, want, "{name}");
            assert_eq!(got.as_str(), name);
            assert_eq!(got.protocol_versions(), versions, "{name}");
            let options = TlsOptions {
                min_version: got,
                ..Default::default()
            };
            assert_eq!(!options.warnings().is_empty(), warns, "{name}");
        }
        for bad in ["", "TLS12", "VersionTLS14", "versiontls12", "1.2"] {
            assert!(MinVersion::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(MinVersion::default(), MinVersion::Tls12);
    }

    #[test]
    fn go_cipher_suite_names_map_to_the_rustls_suite_of_the_same_code_point() {
        let provider = base_provider();
        let cases = [
            (
                "TLS_AES_128_GCM_SHA256",
                CipherSuite::TLS13_AES_128_GCM_SHA256,
            ),
            (
                "TLS_AES_256_GCM_SHA384",
                CipherSuite::TLS13_AES_256_GCM_SHA384,
            ),
            (
                "TLS_CHACHA20_POLY1305_SHA256",
                CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
            ),
            (
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            ),
            (
                "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            ),
            (
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            ),
            (
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            ),
            (
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
                CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            ),
            (
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
                CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            ),
            (
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
                CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            ),
            (
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
                CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            ),
        ];
        for (name, want) in cases {
            assert_eq!(
                cipher_suite(&provider, name).unwrap().suite(),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn suites_rustls_lacks_and_unknown_names_are_refused_with_the_reason() {
        let provider = base_provider();
        let cases = [
            ("TLS_RSA_WITH_AES_128_GCM_SHA256", "RSA key exchange"),
            ("TLS_RSA_WITH_AES_256_CBC_SHA", "RSA key exchange"),
            ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "CBC"),
            ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "CBC"),
            ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "CBC"),
            ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", "RC4"),
            ("TLS_NOT_A_SUITE", "unknown cipher suite"),
            ("tls_aes_128_gcm_sha256", "unknown cipher suite"),
            // rustls' own spelling is not a Go name.
            ("TLS13_AES_128_GCM_SHA256", "unknown cipher suite"),
        ];
        for (name, why) in cases {
            let err = cipher_suite(&provider, name).unwrap_err().to_string();
            assert!(err.contains(name) && err.contains(why), "{name}: {err}");
        }
    }

    #[test]
    fn a_tls12_only_list_keeps_every_tls13_suite_like_go() {
        let options = TlsOptions {
            cipher_suites: vec!["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into()],
            ..Default::default()
        };
        let got = suites(&options);
        assert_eq!(got[0], CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256);
        assert!(got.contains(&CipherSuite::TLS13_AES_128_GCM_SHA256));
        assert!(got.contains(&CipherSuite::TLS13_AES_256_GCM_SHA384));
        assert!(!got.contains(&CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384));

        let options = TlsOptions {
            cipher_suites: vec![
                "TLS_AES_256_GCM_SHA384".into(),
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".into(),
                "TLS_AES_256_GCM_SHA384".into(),
            ],
            ..Default::default()
        };
        assert_eq!(
            suites(&options),
            [
                CipherSuite::TLS13_AES_256_GCM_SHA384,
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            ]
        );
        assert_eq!(
            suites(&TlsOptions::default()).len(),
            base_provider().cipher_suites.len()
        );
    }

    #[test]
    fn curves_are_go_curve_ids_in_preference_order() {
        let groups = |ids: &[u16]| {
            let options = TlsOptions {
                curve_preferences: ids.to_vec(),
                ..Default::default()
            };
            options
                .provider(base_provider())
                .map(|p| p.kx_groups.iter().map(|g| g.name()).collect::<Vec<_>>())
        };
        assert_eq!(
            groups(&[24, 29]).unwrap(),
            [NamedGroup::secp384r1, NamedGroup::X25519]
        );
        assert_eq!(groups(&[23, 23]).unwrap(), [NamedGroup::secp256r1]);
        assert_eq!(groups(&[]).unwrap().len(), base_provider().kx_groups.len());
        let cases = [
            (25, "P-521"),
            (4588, "X25519MLKEM768"),
            (25497, "X25519Kyber768Draft00"),
            (7, "unknown curve ID 7"),
        ];
        for (id, want) in cases {
            let err = groups(&[29, id]).unwrap_err().to_string();
            assert!(
                err.contains(want) && err.contains(&id.to_string()),
                "{id}: {err}"
            );
        }
        assert_eq!(parse_curve(" 29").unwrap(), 29);
        for bad in ["X25519", "-1", "70000", ""] {
            assert!(parse_curve(bad).is_err(), "{bad}");
        }
    }

    /// What a server built from `options` and a client limited to
    /// `client_versions` agree on: version, suite and key exchange group.
    fn handshake(
        options: &TlsOptions,
        client_versions: &[&'static SupportedProtocolVersion],
    ) -> Result<(rustls::ProtocolVersion, CipherSuite, NamedGroup), String> {
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let cert = generated.cert.der().clone();
        let key =
            rustls_pki_types::PrivateKeyDer::Pkcs8(generated.signing_key.serialize_der().into());
        let server_config = options
            .server_builder()
            .unwrap()
            .with_single_cert(vec![cert.clone()], key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).unwrap();
        let client_config = rustls::ClientConfig::builder_with_provider(Arc::new(base_provider()))
            .with_protocol_versions(client_versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(client_config), name).unwrap();
        let mut server = rustls::ServerConnection::new(Arc::new(server_config)).unwrap();
        let fail = |e: rustls::Error| e.to_string();
        for _ in 0..10 {
            let mut bytes = Vec::new();
            client.write_tls(&mut bytes).unwrap();
            server.read_tls(&mut bytes.as_slice()).unwrap();
            server.process_new_packets().map_err(fail)?;
            let mut bytes = Vec::new();
            server.write_tls(&mut bytes).unwrap();
            client.read_tls(&mut bytes.as_slice()).unwrap();
            client.process_new_packets().map_err(fail)?;
            if !client.is_handshaking() && !server.is_handshaking() {
                return Ok((
                    server.protocol_version().unwrap(),
                    server.negotiated_cipher_suite().unwrap().suite(),
                    server.negotiated_key_exchange_group().unwrap().name(),
                ));
            }
        }
        Err("the handshake did not finish".into())
    }

    #[test]
    fn the_options_decide_what_a_handshake_agrees_on() {
        use rustls::ProtocolVersion::{TLSv1_2, TLSv1_3};
        use rustls::version::{TLS12, TLS13};
        let (version, _, _) = handshake(&TlsOptions::default(), &[&TLS12]).unwrap();
        assert_eq!(version, TLSv1_2);
        let only_13 = TlsOptions {
            min_version: MinVersion::Tls13,
            ..Default::default()
        };
        assert!(handshake(&only_13, &[&TLS12]).is_err());
        assert_eq!(handshake(&only_13, &[&TLS13, &TLS12]).unwrap().0, TLSv1_3);
        let narrowed = TlsOptions {
            min_version: MinVersion::Tls10,
            cipher_suites: vec!["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".into()],
            curve_preferences: vec![24],
        };
        assert_eq!(
            handshake(&narrowed, &[&TLS12]).unwrap(),
            (
                TLSv1_2,
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                NamedGroup::secp384r1
            )
        );
        // A TLS 1.2-only list leaves TLS 1.3 to its own suites.
        let (version, suite, _) = handshake(&narrowed, &[&TLS13]).unwrap();
        assert_eq!(version, TLSv1_3);
        assert!(suite.as_str().unwrap_or_default().starts_with("TLS13_"));
    }

    #[test]
    fn every_accepted_combination_builds_a_server_configuration() {
        let cases = [
            TlsOptions::default(),
            TlsOptions {
                min_version: MinVersion::Tls13,
                cipher_suites: vec!["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into()],
                curve_preferences: vec![23],
            },
            TlsOptions {
                min_version: MinVersion::Tls10,
                cipher_suites: vec!["TLS_AES_128_GCM_SHA256".into()],
                curve_preferences: vec![29, 24],
            },
        ];
        for options in cases {
            assert!(options.server_builder().is_ok(), "{options:?}");
        }
    }
}
