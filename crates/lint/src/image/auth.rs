//! Registry credentials from the usual container tool files: the Docker
//! config (`$DOCKER_CONFIG/config.json` or `~/.docker/config.json`), else
//! `$REGISTRY_AUTH_FILE` or `$XDG_RUNTIME_DIR/containers/auth.json`.
//! Credential helpers are not run.

use base64::Engine;
use std::path::PathBuf;

fn candidate_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    match std::env::var_os("DOCKER_CONFIG") {
        Some(d) => out.push(PathBuf::from(d).join("config.json")),
        None => {
            if let Some(h) = std::env::var_os("HOME") {
                out.push(PathBuf::from(h).join(".docker/config.json"));
            }
        }
    }
    if let Some(f) = std::env::var_os("REGISTRY_AUTH_FILE") {
        out.push(PathBuf::from(f));
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        out.push(PathBuf::from(d).join("containers/auth.json"));
    }
    out
}

/// Username and password for `host`, when a config file holds them.
pub fn credentials(host: &str) -> Option<(String, String)> {
    credentials_in(&candidate_files(), host)
}

/// Username and password for `host` from the first of `files` that has an
/// entry for it.
pub fn credentials_in(files: &[PathBuf], host: &str) -> Option<(String, String)> {
    let configs: Vec<serde_json::Value> = files
        .iter()
        .filter_map(|f| std::fs::read(f).ok())
        .filter_map(|b| serde_json::from_slice(&b).ok())
        .collect();
    credentials_from(&configs, host)
}

/// Username and password for `host` from the first of `configs` (Docker
/// config documents: `{"auths": {...}}`, as a `.dockerconfigjson` holds)
/// that has an entry for it.
pub fn credentials_from(configs: &[serde_json::Value], host: &str) -> Option<(String, String)> {
    let keys = if host == "registry-1.docker.io" {
        vec![
            "https://index.docker.io/v1/".to_string(),
            "docker.io".to_string(),
            host.to_string(),
        ]
    } else {
        vec![
            host.to_string(),
            format!("https://{host}"),
            format!("http://{host}"),
        ]
    };
    for v in configs {
        for k in &keys {
            let entry = &v["auths"][k.as_str()];
            if let Some(auth) = entry["auth"].as_str() {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(auth)
                    .ok()?;
                let text = String::from_utf8(decoded).ok()?;
                let (u, p) = text.split_once(':')?;
                return Some((u.to_string(), p.to_string()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_auths_entries() {
        let dir = std::env::temp_dir().join(format!("tfcapi-lint-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let docker = dir.join("config.json");
        let podman = dir.join("auth.json");
        let enc = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        std::fs::write(
            &docker,
            format!(
                r#"{{"auths":{{"ghcr.io":{{"auth":"{}"}},"https://index.docker.io/v1/":{{"auth":"{}"}}}}}}"#,
                enc("u:p:with:colons"),
                enc("hub:secret")
            ),
        )
        .unwrap();
        std::fs::write(
            &podman,
            format!(r#"{{"auths":{{"quay.io":{{"auth":"{}"}}}}}}"#, enc("q:r")),
        )
        .unwrap();
        let files = vec![dir.join("missing.json"), docker, podman];
        assert_eq!(
            credentials_in(&files, "ghcr.io"),
            Some(("u".into(), "p:with:colons".into()))
        );
        assert_eq!(
            credentials_in(&files, "registry-1.docker.io"),
            Some(("hub".into(), "secret".into()))
        );
        assert_eq!(
            credentials_in(&files, "quay.io"),
            Some(("q".into(), "r".into()))
        );
        assert_eq!(credentials_in(&files, "example.com"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
