//! Getting manifests and blobs: from an OCI image layout directory, or from
//! a registry through the OCI distribution API.

use super::ImageError;
use super::reference::Reference;
use base64::Engine;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::PathBuf;
use std::sync::Mutex;

pub const INDEX_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
pub const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// Largest manifest or config accepted.
const MAX_DOCUMENT: u64 = 4 << 20;

/// A manifest, an index or a config, with its digest.
#[derive(Debug, Clone)]
pub struct Document {
    pub media_type: String,
    pub digest: String,
    pub bytes: Vec<u8>,
}

pub trait Blobs {
    /// What the reference names: an index or a manifest.
    fn top(&self) -> Result<Document, ImageError>;
    fn manifest(&self, digest: &str) -> Result<Document, ImageError>;
    fn blob(&self, digest: &str) -> Result<Box<dyn Read + '_>, ImageError>;
}

pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn check_digest(digest: &str) -> Result<&str, ImageError> {
    match digest.strip_prefix("sha256:") {
        Some(h) if h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()) => Ok(h),
        _ => Err(ImageError::Fetch(format!(
            "unsupported or malformed digest {digest:?}"
        ))),
    }
}

fn media_type_of(bytes: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| v["mediaType"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// An OCI image layout directory, and optionally the tag
/// (`org.opencontainers.image.ref.name`) of one of its images.
pub struct Layout {
    pub dir: PathBuf,
    pub tag: Option<String>,
}

const REF_NAME: &str = "org.opencontainers.image.ref.name";

impl Layout {
    /// `oci:<dir>` or `oci:<dir>:<tag>`; a directory whose own name holds
    /// a colon wins over the tag reading.
    pub fn from_path(path: &std::path::Path) -> Layout {
        if !path.exists()
            && let Some((dir, tag)) = path.to_str().and_then(|s| s.rsplit_once(':'))
            && !tag.is_empty()
            && !tag.contains('/')
            && std::path::Path::new(dir).is_dir()
        {
            return Layout {
                dir: dir.into(),
                tag: Some(tag.to_string()),
            };
        }
        Layout {
            dir: path.to_path_buf(),
            tag: None,
        }
    }
}

impl Layout {
    fn read_blob(&self, digest: &str) -> Result<Vec<u8>, ImageError> {
        let hex = check_digest(digest)?;
        let path = self.dir.join("blobs/sha256").join(hex);
        let bytes = std::fs::read(&path)
            .map_err(|e| ImageError::Fetch(format!("{}: {e}", path.display())))?;
        if sha256_digest(&bytes) != digest {
            return Err(ImageError::Fetch(format!(
                "blob {digest} does not match its digest"
            )));
        }
        Ok(bytes)
    }
}

impl Blobs for Layout {
    fn top(&self) -> Result<Document, ImageError> {
        let path = self.dir.join("index.json");
        let bytes = std::fs::read(&path)
            .map_err(|e| ImageError::Fetch(format!("{}: {e}", path.display())))?;
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| ImageError::Fetch(format!("{}: {e}", path.display())))?;
        if let Some(tag) = &self.tag {
            let entry = v["manifests"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m["annotations"][REF_NAME] == tag.as_str())
                .ok_or_else(|| {
                    ImageError::Fetch(format!("the layout has no image tagged {tag:?}"))
                })?;
            return self.manifest(entry["digest"].as_str().unwrap_or_default());
        }
        // A layout whose index names a single entry means that entry.
        if let Some([only]) = v["manifests"].as_array().map(Vec::as_slice)
            && only["platform"].is_null()
        {
            let digest = only["digest"].as_str().unwrap_or_default();
            return self.manifest(digest);
        }
        Ok(Document {
            media_type: INDEX_TYPES[0].into(),
            digest: sha256_digest(&bytes),
            bytes,
        })
    }

    fn manifest(&self, digest: &str) -> Result<Document, ImageError> {
        let bytes = self.read_blob(digest)?;
        Ok(Document {
            media_type: media_type_of(&bytes),
            digest: digest.to_string(),
            bytes,
        })
    }

    fn blob(&self, digest: &str) -> Result<Box<dyn Read + '_>, ImageError> {
        let hex = check_digest(digest)?;
        let path = self.dir.join("blobs/sha256").join(hex);
        let f = std::fs::File::open(&path)
            .map_err(|e| ImageError::Fetch(format!("{}: {e}", path.display())))?;
        Ok(Box::new(Verified::new(f, digest)))
    }
}

/// A reader that checks, at its end, that what it read has the digest.
pub struct Verified<R> {
    inner: R,
    hasher: Sha256,
    want: String,
}

impl<R: Read> Verified<R> {
    pub fn new(inner: R, digest: &str) -> Self {
        Verified {
            inner,
            hasher: Sha256::new(),
            want: digest.to_string(),
        }
    }
}

impl<R: Read> Read for Verified<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            let got = format!("sha256:{}", hex::encode(self.hasher.clone().finalize()));
            if got != self.want {
                return Err(std::io::Error::other(format!(
                    "blob {} does not match its digest",
                    self.want
                )));
            }
        }
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// A registry speaking the distribution API, with anonymous, basic or
/// bearer-token access.
pub struct Registry {
    agent: ureq::Agent,
    base: String,
    reference: Reference,
    credentials: Option<(String, String)>,
    authorization: Mutex<Option<String>>,
}

impl Registry {
    pub fn new(reference: Reference, insecure: bool) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let credentials = super::auth::credentials(&reference.host);
        Registry::with_agent(reference, insecure, agent, credentials)
    }

    /// A registry reached through `agent` (which must not treat HTTP
    /// statuses as errors) with these credentials, if any.
    pub fn with_agent(
        reference: Reference,
        insecure: bool,
        agent: ureq::Agent,
        credentials: Option<(String, String)>,
    ) -> Self {
        let scheme = if insecure { "http" } else { "https" };
        Registry {
            agent,
            base: format!("{scheme}://{}", reference.host),
            reference,
            credentials,
            authorization: Mutex::new(None),
        }
    }

    fn get(
        &self,
        path: &str,
        accept: &str,
    ) -> Result<ureq::http::Response<ureq::Body>, ImageError> {
        let url = format!("{}/v2/{}/{path}", self.base, self.reference.repository);
        for attempt in 0..2 {
            let mut req = self.agent.get(&url).header("Accept", accept);
            if let Some(a) = self.authorization.lock().unwrap().clone() {
                req = req.header("Authorization", a);
            }
            let resp = req
                .call()
                .map_err(|e| ImageError::Fetch(format!("GET {url}: {e}")))?;
            let status = resp.status().as_u16();
            if status == 401 && attempt == 0 {
                let challenge = resp
                    .headers()
                    .get("www-authenticate")
                    .and_then(|h| h.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                self.authenticate(&challenge)?;
                continue;
            }
            if status != 200 {
                return Err(ImageError::Fetch(format!("GET {url}: status {status}")));
            }
            return Ok(resp);
        }
        Err(ImageError::Fetch(format!("GET {url}: access denied")))
    }

    fn basic(&self) -> Option<String> {
        self.credentials.as_ref().map(|(u, p)| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        })
    }

    fn authenticate(&self, challenge: &str) -> Result<(), ImageError> {
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            let b = self.basic().ok_or_else(|| {
                ImageError::Fetch("registry wants credentials and none are configured".into())
            })?;
            *self.authorization.lock().unwrap() = Some(b);
            return Ok(());
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(ImageError::Fetch(format!(
                "unsupported registry auth scheme {scheme:?}"
            )));
        }
        let param = |name: &str| {
            params.split(',').find_map(|p| {
                let (k, v) = p.trim().split_once('=')?;
                (k == name).then(|| v.trim_matches('"').to_string())
            })
        };
        let realm = param("realm")
            .ok_or_else(|| ImageError::Fetch("bearer challenge without realm".into()))?;
        let mut query = Vec::new();
        if let Some(s) = param("service") {
            query.push(("service", s));
        }
        query.push((
            "scope",
            param("scope")
                .unwrap_or_else(|| format!("repository:{}:pull", self.reference.repository)),
        ));
        let mut req = self.agent.get(&realm);
        for (k, v) in &query {
            req = req.query(*k, v);
        }
        if let Some(b) = self.basic() {
            req = req.header("Authorization", b);
        }
        let resp = req
            .call()
            .map_err(|e| ImageError::Fetch(format!("token request: {e}")))?;
        if resp.status().as_u16() != 200 {
            return Err(ImageError::Fetch(format!(
                "token request: status {}",
                resp.status()
            )));
        }
        let body = resp
            .into_body()
            .with_config()
            .limit(MAX_DOCUMENT)
            .read_to_vec()
            .map_err(|e| ImageError::Fetch(format!("token request: {e}")))?;
        let v: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| ImageError::Fetch(format!("token response: {e}")))?;
        let token = v["token"]
            .as_str()
            .or_else(|| v["access_token"].as_str())
            .ok_or_else(|| ImageError::Fetch("token response without a token".into()))?;
        *self.authorization.lock().unwrap() = Some(format!("Bearer {token}"));
        Ok(())
    }

    fn document(&self, reference: &str) -> Result<Document, ImageError> {
        let accept = [INDEX_TYPES, MANIFEST_TYPES].concat().join(", ");
        let resp = self.get(&format!("manifests/{reference}"), &accept)?;
        let header_type = resp
            .headers()
            .get("content-type")
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let bytes = resp
            .into_body()
            .with_config()
            .limit(MAX_DOCUMENT)
            .read_to_vec()
            .map_err(|e| ImageError::Fetch(format!("manifest {reference}: {e}")))?;
        let digest = sha256_digest(&bytes);
        if reference.starts_with("sha256:") && digest != reference {
            return Err(ImageError::Fetch(format!(
                "manifest {reference} does not match its digest"
            )));
        }
        let from_body = media_type_of(&bytes);
        Ok(Document {
            media_type: if from_body.is_empty() {
                header_type
            } else {
                from_body
            },
            digest,
            bytes,
        })
    }
}

impl Blobs for Registry {
    fn top(&self) -> Result<Document, ImageError> {
        self.document(&self.reference.reference.clone())
    }

    fn manifest(&self, digest: &str) -> Result<Document, ImageError> {
        check_digest(digest)?;
        self.document(digest)
    }

    fn blob(&self, digest: &str) -> Result<Box<dyn Read + '_>, ImageError> {
        check_digest(digest)?;
        let resp = self.get(&format!("blobs/{digest}"), "*/*")?;
        let reader = resp.into_body().into_with_config().limit(u64::MAX).reader();
        Ok(Box::new(Verified::new(reader, digest)))
    }
}

/// Reads a whole small document from a blob.
pub fn read_document(blobs: &dyn Blobs, digest: &str) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::new();
    blobs
        .blob(digest)?
        .take(MAX_DOCUMENT + 1)
        .read_to_end(&mut out)
        .map_err(|e| ImageError::Fetch(format!("blob {digest}: {e}")))?;
    if out.len() as u64 > MAX_DOCUMENT {
        return Err(ImageError::Fetch(format!(
            "blob {digest} is too large for a config"
        )));
    }
    Ok(out)
}
