//! Certificates and keys for a throwaway control plane: one CA that signs the
//! apiserver's serving certificate and the admin client certificate, and the
//! service-account signing key. All ECDSA P-256, written as PEM files.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("generating certificate material: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The user the admin client certificate names (its CN): who every test's
/// client is to the apiserver and to the provider's webhooks.
pub const ADMIN_USER: &str = "admin";

/// Paths of the PEM files written by [`Pki::write`].
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    /// Signs service-account tokens (apiserver and controller manager).
    pub service_account_key: PathBuf,
    /// Verifies them (the apiserver wants the public half in its own file).
    pub service_account_pub: PathBuf,
}

fn write(path: PathBuf, contents: &str) -> Result<PathBuf, PkiError> {
    std::fs::write(&path, contents).map_err(|source| PkiError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

impl Pki {
    /// Generates fresh material into `dir`; the apiserver's serving
    /// certificate also names `serving_ips` (the host address pods reach
    /// it on, the `kubernetes` Service's ClusterIP).
    pub fn write(dir: &Path, serving_ips: &[IpAddr]) -> Result<Pki, PkiError> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "captf-testenv-ca");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;

        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(vec![
            "localhost".to_owned(),
            "kubernetes".to_owned(),
            "kubernetes.default.svc".to_owned(),
        ])?;
        serving
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        for ip in serving_ips {
            serving.subject_alt_names.push(SanType::IpAddress(*ip));
        }
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving = serving.signed_by(&serving_key, &ca)?;

        // The apiserver maps CN to the user and O to its groups:
        // system:masters is bound to cluster-admin.
        let admin_key = KeyPair::generate()?;
        let mut admin = CertificateParams::new(Vec::<String>::new())?;
        admin
            .distinguished_name
            .push(DnType::CommonName, ADMIN_USER);
        admin
            .distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin = admin.signed_by(&admin_key, &ca)?;

        let sa_key = KeyPair::generate()?;

        Ok(Pki {
            ca_cert: write(dir.join("ca.crt"), &ca.pem())?,
            serving_cert: write(dir.join("apiserver.crt"), &serving.pem())?,
            serving_key: write(dir.join("apiserver.key"), &serving_key.serialize_pem())?,
            admin_cert: write(dir.join("admin.crt"), &admin.pem())?,
            admin_key: write(dir.join("admin.key"), &admin_key.serialize_pem())?,
            service_account_key: write(dir.join("sa.key"), &sa_key.serialize_pem())?,
            service_account_pub: write(dir.join("sa.pub"), &sa_key.public_key_pem())?,
        })
    }
}

/// A webhook serving certificate for `127.0.0.1` and `localhost`, signed by a
/// CA of its own, written as `tls.crt` and `tls.key` (the controller-runtime
/// names) into `dir`. Returns the CA's PEM: the `caBundle` of the webhook
/// configurations that call this server.
pub fn write_webhook_serving_pair(dir: &Path) -> Result<String, PkiError> {
    write_serving_pair_for(dir, &[])
}

/// [`write_webhook_serving_pair`] for a server reached also by the DNS
/// names `extra_names` (a Service's `<name>.<namespace>.svc`).
pub fn write_serving_pair_for(dir: &Path, extra_names: &[String]) -> Result<String, PkiError> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "captf-testenv-webhook-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
    let key = KeyPair::generate()?;
    let mut names = vec!["localhost".to_owned()];
    names.extend(extra_names.iter().cloned());
    let mut serving = CertificateParams::new(names)?;
    serving
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = serving.signed_by(&key, &ca)?;
    write(dir.join("tls.crt"), &cert.pem())?;
    write(dir.join("tls.key"), &key.serialize_pem())?;
    Ok(ca.pem())
}
