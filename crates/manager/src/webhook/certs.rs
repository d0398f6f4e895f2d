//! The serving certificate, read from a directory (`tls.crt` and `tls.key`
//! unless `--webhook-cert-name`/`--webhook-key-name` say otherwise) and
//! swapped in whenever the files change, so a rotated certificate is served
//! without a restart.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";

/// The names of the certificate and key files inside the directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertFiles {
    pub cert: String,
    pub key: String,
}

impl Default for CertFiles {
    fn default() -> Self {
        CertFiles {
            cert: CERT_FILE.to_owned(),
            key: KEY_FILE.to_owned(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("reading {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{path} holds no certificate")]
    NoCertificate { path: PathBuf },
    #[error("the key in {path} is not usable: {message}")]
    Key { path: PathBuf, message: String },
}

/// The certificate currently served, and the file times it was read at.
#[derive(Debug)]
pub struct CertStore {
    dir: PathBuf,
    files: CertFiles,
    current: RwLock<(Arc<CertifiedKey>, Stamp)>,
}

type Stamp = (Option<SystemTime>, Option<SystemTime>);

fn stamp(dir: &Path, files: &CertFiles) -> Stamp {
    let modified = |f: &str| {
        std::fs::metadata(dir.join(f))
            .and_then(|m| m.modified())
            .ok()
    };
    (modified(&files.cert), modified(&files.key))
}

fn load(dir: &Path, files: &CertFiles) -> Result<Arc<CertifiedKey>, CertError> {
    let cert_path = dir.join(&files.cert);
    let key_path = dir.join(&files.key);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| CertError::Read {
            path: cert_path.clone(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(CertError::NoCertificate { path: cert_path });
    }
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| CertError::Read {
        path: key_path.clone(),
        message: e.to_string(),
    })?;
    let signing =
        rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| CertError::Key {
            path: key_path,
            message: e.to_string(),
        })?;
    Ok(Arc::new(CertifiedKey::new(certs, signing)))
}

impl CertStore {
    /// Reads `tls.crt` and `tls.key` in `dir`; both must be usable.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Arc<CertStore>, CertError> {
        CertStore::open_files(dir, CertFiles::default())
    }

    /// Reads the certificate and key named by `files` in `dir`; both must
    /// be usable.
    pub fn open_files(
        dir: impl Into<PathBuf>,
        files: CertFiles,
    ) -> Result<Arc<CertStore>, CertError> {
        let dir = dir.into();
        let before = stamp(&dir, &files);
        let key = load(&dir, &files)?;
        Ok(Arc::new(CertStore {
            dir,
            files,
            current: RwLock::new((key, before)),
        }))
    }

    /// Re-reads the files when their times changed. A half-written or
    /// broken pair keeps the previous certificate and reports why.
    /// Returns whether a new certificate is now served.
    pub fn reload_if_changed(&self) -> Result<bool, CertError> {
        let now = stamp(&self.dir, &self.files);
        if self.current.read().map(|c| c.1 == now).unwrap_or(false) {
            return Ok(false);
        }
        let key = load(&self.dir, &self.files)?;
        if let Ok(mut current) = self.current.write() {
            *current = (key, now);
        }
        Ok(true)
    }

    /// The certificate chain served now.
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        self.current
            .read()
            .map(|c| c.0.cert.clone())
            .unwrap_or_default()
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_cert(dir: &Path, name: &str) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(dir.join(CERT_FILE), cert.pem()).unwrap();
        std::fs::write(dir.join(KEY_FILE), key.serialize_pem()).unwrap();
        cert.der().to_vec()
    }

    #[test]
    fn reloads_when_the_files_change_and_keeps_serving_on_a_broken_pair() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_cert(dir.path(), "first.example");
        let store = CertStore::open(dir.path()).unwrap();
        assert_eq!(store.chain()[0].as_ref(), first.as_slice());
        assert!(!store.reload_if_changed().unwrap());

        // File times have a coarse resolution on some filesystems.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = write_cert(dir.path(), "second.example");
        let file = std::fs::File::options()
            .append(true)
            .open(dir.path().join(CERT_FILE))
            .unwrap();
        file.set_modified(SystemTime::now() + std::time::Duration::from_secs(5))
            .unwrap();
        assert!(store.reload_if_changed().unwrap());
        assert_eq!(store.chain()[0].as_ref(), second.as_slice());

        std::fs::write(dir.path().join(KEY_FILE), "not a key").unwrap();
        let file = std::fs::File::options()
            .append(true)
            .open(dir.path().join(KEY_FILE))
            .unwrap();
        file.set_modified(SystemTime::now() + std::time::Duration::from_secs(10))
            .unwrap();
        assert!(store.reload_if_changed().is_err());
        assert_eq!(store.chain()[0].as_ref(), second.as_slice());
    }

    #[test]
    fn other_file_names_are_read_when_configured() {
        let dir = tempfile::tempdir().unwrap();
        let der = write_cert(dir.path(), "named.example");
        std::fs::rename(dir.path().join(CERT_FILE), dir.path().join("serving.pem")).unwrap();
        std::fs::rename(
            dir.path().join(KEY_FILE),
            dir.path().join("serving-key.pem"),
        )
        .unwrap();
        let files = CertFiles {
            cert: "serving.pem".into(),
            key: "serving-key.pem".into(),
        };
        let store = CertStore::open_files(dir.path(), files).unwrap();
        assert_eq!(store.chain()[0].as_ref(), der.as_slice());
        let err = CertStore::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("tls.crt"), "{err}");
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_file() {
        let err = CertStore::open("/nonexistent/captf-certs").unwrap_err();
        assert!(err.to_string().contains("tls.crt"), "{err}");
    }
}
