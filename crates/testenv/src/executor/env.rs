//! A container's environment as a kubelet builds it: `envFrom` first, then
//! `env` in order (later entries win), plus the service variables that let
//! in-cluster configuration find the apiserver.

use k8s_openapi::api::core::v1::{Container, Pod};

use super::pod::Node;
use super::volumes::{self, Lookup};

fn set(env: &mut Vec<(String, String)>, name: String, value: String) {
    match env.iter_mut().find(|(k, _)| *k == name) {
        Some(slot) => slot.1 = value,
        None => env.push((name, value)),
    }
}

fn utf8(source: &str, key: &str, bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|_| format!("{source} key {key:?} is not UTF-8"))
}

pub async fn resolve(
    c: &Container,
    pod: &Pod,
    lookup: &Lookup,
    node: &Node,
) -> Result<Vec<(String, String)>, String> {
    let mut env = vec![
        (
            "HOSTNAME".to_owned(),
            pod.metadata.name.clone().unwrap_or_default(),
        ),
        ("KUBERNETES_SERVICE_HOST".to_owned(), node.api_host.clone()),
        (
            "KUBERNETES_SERVICE_PORT".to_owned(),
            node.api_port.to_string(),
        ),
    ];
    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let (source, data, optional) = if let Some(s) = &from.secret_ref {
            (
                format!("Secret {}", s.name),
                lookup.secret(&s.name).await?,
                s.optional.unwrap_or(false),
            )
        } else if let Some(cm) = &from.config_map_ref {
            (
                format!("ConfigMap {}", cm.name),
                lookup.config_map(&cm.name).await?,
                cm.optional.unwrap_or(false),
            )
        } else {
            continue;
        };
        match data {
            Some(data) => {
                for (k, v) in data {
                    let value = utf8(&source, &k, v)?;
                    set(&mut env, format!("{prefix}{k}"), value);
                }
            }
            None if optional => {}
            None => return Err(format!("{source} not found (envFrom)")),
        }
    }
    for var in c.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(v), _) => v.clone(),
            (None, None) => String::new(),
            (None, Some(from)) => {
                if let Some(r) = &from.secret_key_ref {
                    let source = format!("Secret {}", r.name);
                    match lookup
                        .secret(&r.name)
                        .await?
                        .and_then(|mut d| d.remove(&r.key))
                    {
                        Some(v) => utf8(&source, &r.key, v)?,
                        None if r.optional.unwrap_or(false) => continue,
                        None => {
                            return Err(format!(
                                "env {}: {source} has no key {:?}",
                                var.name, r.key
                            ));
                        }
                    }
                } else if let Some(r) = &from.config_map_key_ref {
                    let source = format!("ConfigMap {}", r.name);
                    match lookup
                        .config_map(&r.name)
                        .await?
                        .and_then(|mut d| d.remove(&r.key))
                    {
                        Some(v) => utf8(&source, &r.key, v)?,
                        None if r.optional.unwrap_or(false) => continue,
                        None => {
                            return Err(format!(
                                "env {}: {source} has no key {:?}",
                                var.name, r.key
                            ));
                        }
                    }
                } else if let Some(f) = &from.field_ref {
                    volumes::pod_field(pod, &f.field_path)
                        .map_err(|e| format!("env {}: {e}", var.name))?
                } else {
                    return Err(format!("env {}: unsupported valueFrom", var.name));
                }
            }
        };
        set(&mut env, var.name.clone(), value);
    }
    Ok(env)
}
