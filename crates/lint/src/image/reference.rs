//! Image references: `oci:<dir>` for an OCI image layout on disk, or a
//! registry reference `[host[:port]/]repository[:tag][@digest]`.

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Layout(PathBuf),
    Registry(Reference),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// Registry host (and port) as written, Docker Hub's API host for
    /// references without one.
    pub host: String,
    pub repository: String,
    /// A tag or a `sha256:` digest.
    pub reference: String,
}

const DOCKER_HUB: &str = "registry-1.docker.io";

impl Source {
    pub fn parse(s: &str) -> Result<Source, String> {
        if let Some(dir) = s.strip_prefix("oci:") {
            if dir.is_empty() {
                return Err(
                    "invalid image reference \"oci:\": the layout directory is missing".into(),
                );
            }
            return Ok(Source::Layout(PathBuf::from(dir)));
        }
        Reference::parse(s).map(Source::Registry)
    }
}

fn valid_repo_component(c: &str) -> bool {
    !c.is_empty()
        && c.chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
        && c.starts_with(|ch: char| ch.is_ascii_alphanumeric())
        && c.ends_with(|ch: char| ch.is_ascii_alphanumeric())
}

impl Reference {
    pub fn parse(s: &str) -> Result<Reference, String> {
        let invalid = |why: &str| format!("invalid image reference {s:?}: {why}");
        let (name, digest) = match s.split_once('@') {
            Some((n, d)) => {
                let hex = d
                    .strip_prefix("sha256:")
                    .ok_or_else(|| invalid("only sha256 digests are supported"))?;
                if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(invalid("malformed digest"));
                }
                (n, Some(d.to_string()))
            }
            None => (s, None),
        };
        let (host, rest) = match name.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), rest.to_string())
            }
            _ => (DOCKER_HUB.to_string(), name.to_string()),
        };
        // A tag follows the last colon after the last slash.
        let (repo, tag) = match rest.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r.to_string(), Some(t.to_string())),
            _ => (rest.clone(), None),
        };
        let repo = if host == DOCKER_HUB && !repo.contains('/') {
            format!("library/{repo}")
        } else {
            repo
        };
        if !repo.split('/').all(valid_repo_component) {
            return Err(invalid("malformed repository name"));
        }
        if let Some(t) = &tag
            && (t.is_empty()
                || t.len() > 128
                || !t
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)))
        {
            return Err(invalid("malformed tag"));
        }
        let reference = digest.or(tag).unwrap_or_else(|| "latest".into());
        Ok(Reference {
            host,
            repository: repo,
            reference,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_references() {
        let r = Reference::parse("ghcr.io/captf-io/noop-machine:v1.0.0-opentofu").unwrap();
        assert_eq!(
            (r.host.as_str(), r.repository.as_str(), r.reference.as_str()),
            ("ghcr.io", "captf-io/noop-machine", "v1.0.0-opentofu")
        );
        let r = Reference::parse("127.0.0.1:5000/m").unwrap();
        assert_eq!(
            (r.host.as_str(), r.reference.as_str()),
            ("127.0.0.1:5000", "latest")
        );
        let r = Reference::parse("alpine").unwrap();
        assert_eq!(r.repository, "library/alpine");
        let d = format!("localhost/x@sha256:{}", "a".repeat(64));
        assert_eq!(
            Reference::parse(&d).unwrap().reference,
            format!("sha256:{}", "a".repeat(64))
        );
        for bad in ["", "UPPER/case", "x:", "x@sha256:12", "a//b", "x:bad tag"] {
            assert!(Reference::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Source::parse("oci:/tmp/l").unwrap(),
            Source::Layout("/tmp/l".into())
        );
        assert!(Source::parse("oci:").is_err());
    }
}
