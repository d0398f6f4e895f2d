//! A pod's volumes as folders on the host: emptyDirs, Secrets, ConfigMaps and
//! projected volumes (including the service-account token the apiserver's
//! admission adds to every pod).

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, KeyToPath, Pod, Secret, ServiceAccount, Volume};
use kube::api::{Api, PostParams};

/// One file to write into a volume folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeFile {
    pub path: String,
    pub data: Vec<u8>,
    pub mode: u32,
}

const DEFAULT_MODE: i32 = 0o644;

/// The files of a Secret or ConfigMap source: every key, or the listed
/// `items` (each key must exist unless the source is optional).
pub fn key_files(
    source: &str,
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    default_mode: Option<i32>,
    optional: bool,
) -> Result<Vec<VolumeFile>, String> {
    let mode = default_mode.unwrap_or(DEFAULT_MODE) as u32;
    let Some(items) = items else {
        return Ok(data
            .iter()
            .map(|(k, v)| VolumeFile {
                path: k.clone(),
                data: v.clone(),
                mode,
            })
            .collect());
    };
    let mut files = Vec::new();
    for item in items {
        match data.get(&item.key) {
            Some(v) => files.push(VolumeFile {
                path: item.path.clone(),
                data: v.clone(),
                mode: item.mode.map_or(mode, |m| m as u32),
            }),
            None if optional => {}
            None => return Err(format!("{source} has no key {:?}", item.key)),
        }
    }
    Ok(files)
}

fn secret_data(secret: Option<Secret>) -> Option<BTreeMap<String, Vec<u8>>> {
    secret.map(|s| {
        s.data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect()
    })
}

fn config_map_data(cm: Option<ConfigMap>) -> Option<BTreeMap<String, Vec<u8>>> {
    cm.map(|cm| {
        let mut data: BTreeMap<String, Vec<u8>> = cm
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.into_bytes()))
            .collect();
        data.extend(
            cm.binary_data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0)),
        );
        data
    })
}

/// Reads the objects a pod's volumes and env refer to.
pub struct Lookup {
    pub client: kube::Client,
    pub namespace: String,
}

impl Lookup {
    pub async fn secret(&self, name: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>, String> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        api.get_opt(name)
            .await
            .map(secret_data)
            .map_err(|e| format!("reading Secret {name}: {e}"))
    }

    pub async fn config_map(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, String> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        api.get_opt(name)
            .await
            .map(config_map_data)
            .map_err(|e| format!("reading ConfigMap {name}: {e}"))
    }

    /// A token for the pod's service account, bound to the pod, as the
    /// kubelet requests it for a projected `serviceAccountToken` source.
    async fn token(
        &self,
        pod: &Pod,
        expiration: Option<i64>,
        audience: Option<&str>,
    ) -> Result<Vec<u8>, String> {
        let sa = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".to_owned());
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &self.namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: audience.map(|a| vec![a.to_owned()]).unwrap_or_default(),
                expiration_seconds: expiration,
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".to_owned()),
                    kind: Some("Pod".to_owned()),
                    name: pod.metadata.name.clone(),
                    uid: pod.metadata.uid.clone(),
                }),
            },
            ..Default::default()
        };
        let created = api
            .create_token_request(&sa, &PostParams::default(), &request)
            .await
            .map_err(|e| format!("requesting a token for ServiceAccount {sa}: {e}"))?;
        Ok(created
            .status
            .map(|s| s.token.into_bytes())
            .unwrap_or_default())
    }
}

fn field_value(pod: &Pod, path: &str) -> Result<String, String> {
    let meta = &pod.metadata;
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.serviceAccountName" => pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "spec.nodeName" => pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
        "status.podIP" | "status.hostIP" => "127.0.0.1".to_owned(),
        other => {
            return Err(format!(
                "field {other} is not supported by the local executor"
            ));
        }
    })
}

/// The value of a `fieldRef` path.
pub fn pod_field(pod: &Pod, path: &str) -> Result<String, String> {
    field_value(pod, path)
}

async fn volume_files(
    lookup: &Lookup,
    pod: &Pod,
    volume: &Volume,
) -> Result<Vec<VolumeFile>, String> {
    if let Some(s) = &volume.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        let optional = s.optional.unwrap_or(false);
        return match lookup.secret(&name).await? {
            Some(data) => key_files(
                &format!("Secret {name}"),
                &data,
                s.items.as_deref(),
                s.default_mode,
                optional,
            ),
            None if optional => Ok(Vec::new()),
            None => Err(format!("Secret {name} not found")),
        };
    }
    if let Some(c) = &volume.config_map {
        let name = c.name.clone();
        let optional = c.optional.unwrap_or(false);
        return match lookup.config_map(&name).await? {
            Some(data) => key_files(
                &format!("ConfigMap {name}"),
                &data,
                c.items.as_deref(),
                c.default_mode,
                optional,
            ),
            None if optional => Ok(Vec::new()),
            None => Err(format!("ConfigMap {name} not found")),
        };
    }
    let Some(projected) = &volume.projected else {
        return Err(format!(
            "volume {}: only emptyDir, secret, configMap and projected volumes are supported",
            volume.name
        ));
    };
    let mut files = Vec::new();
    let default_mode = projected.default_mode;
    for source in projected.sources.iter().flatten() {
        if let Some(s) = &source.secret {
            let optional = s.optional.unwrap_or(false);
            match lookup.secret(&s.name).await? {
                Some(data) => files.extend(key_files(
                    &format!("Secret {}", s.name),
                    &data,
                    s.items.as_deref(),
                    default_mode,
                    optional,
                )?),
                None if optional => {}
                None => return Err(format!("Secret {} not found", s.name)),
            }
        } else if let Some(c) = &source.config_map {
            let optional = c.optional.unwrap_or(false);
            match lookup.config_map(&c.name).await? {
                Some(data) => files.extend(key_files(
                    &format!("ConfigMap {}", c.name),
                    &data,
                    c.items.as_deref(),
                    default_mode,
                    optional,
                )?),
                None if optional => {}
                None => return Err(format!("ConfigMap {} not found", c.name)),
            }
        } else if let Some(t) = &source.service_account_token {
            let token = lookup
                .token(pod, t.expiration_seconds, t.audience.as_deref())
                .await?;
            files.push(VolumeFile {
                path: t.path.clone(),
                data: token,
                mode: default_mode.unwrap_or(DEFAULT_MODE) as u32,
            });
        } else if let Some(d) = &source.downward_api {
            for item in d.items.iter().flatten() {
                let Some(field) = &item.field_ref else {
                    return Err(format!(
                        "volume {}: only fieldRef downward API items are supported",
                        volume.name
                    ));
                };
                files.push(VolumeFile {
                    path: item.path.clone(),
                    data: field_value(pod, &field.field_path)?.into_bytes(),
                    mode: item.mode.or(default_mode).unwrap_or(DEFAULT_MODE) as u32,
                });
            }
        } else {
            return Err(format!(
                "volume {}: unsupported projected source",
                volume.name
            ));
        }
    }
    Ok(files)
}

fn write_files(dir: &Path, files: &[VolumeFile]) -> Result<(), String> {
    for f in files {
        if f.path.split('/').any(|p| p == "..") || f.path.starts_with('/') {
            return Err(format!("volume file path {:?} leaves its volume", f.path));
        }
        let path = dir.join(&f.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&path, &f.data).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(f.mode))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Creates a folder per volume of `pod` under `dir`, filled as a kubelet
/// would; returns volume name → folder.
pub async fn prepare(
    lookup: &Lookup,
    pod: &Pod,
    dir: &Path,
) -> Result<HashMap<String, PathBuf>, String> {
    let mut out = HashMap::new();
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let path = dir.join(&volume.name);
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if volume.empty_dir.is_none() {
            write_files(&path, &volume_files(lookup, pod, volume).await?)?;
        }
        out.insert(volume.name.clone(), path);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> BTreeMap<String, Vec<u8>> {
        [("a", "1"), ("b", "2")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.as_bytes().to_vec()))
            .collect()
    }

    fn item(key: &str, path: &str, mode: Option<i32>) -> KeyToPath {
        KeyToPath {
            key: key.into(),
            path: path.into(),
            mode,
        }
    }

    #[test]
    fn every_key_becomes_a_file_with_the_default_mode() {
        let files = key_files("s", &data(), None, Some(0o440), false).unwrap();
        let got: Vec<_> = files.iter().map(|f| (f.path.as_str(), f.mode)).collect();
        assert_eq!(got, [("a", 0o440), ("b", 0o440)]);
    }

    #[test]
    fn items_pick_keys_rename_them_and_may_set_their_mode() {
        let items = [item("b", "restore/0", Some(0o400))];
        let files = key_files("s", &data(), Some(&items), None, false).unwrap();
        assert_eq!(
            files,
            [VolumeFile {
                path: "restore/0".into(),
                data: b"2".to_vec(),
                mode: 0o400
            }]
        );
    }

    #[test]
    fn a_missing_item_key_fails_unless_optional() {
        let items = [item("zz", "x", None)];
        let err = key_files("Secret s", &data(), Some(&items), None, false).unwrap_err();
        assert_eq!(err, "Secret s has no key \"zz\"");
        assert!(
            key_files("s", &data(), Some(&items), None, true)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn file_paths_cannot_escape_the_volume() {
        let tmp = tempfile::tempdir().unwrap();
        for path in ["../x", "/etc/x", "a/../../x"] {
            let f = VolumeFile {
                path: path.into(),
                data: vec![],
                mode: 0o644,
            };
            assert!(write_files(tmp.path(), &[f]).is_err(), "{path}");
        }
    }
}
