//! Installing CustomResourceDefinitions from folders of YAML files and
//! waiting until the apiserver serves them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use serde::Deserialize;

use crate::Error;

const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// Every CRD in the `*.yaml` files of `dir` (multi-document files allowed),
/// in file-name order.
pub fn read_dir(dir: &Path) -> Result<Vec<CustomResourceDefinition>, Error> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("reading {}", dir.display()), e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    let mut crds = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| Error::io(format!("reading {}", file.display()), e))?;
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value = serde_yaml::Value::deserialize(doc).map_err(|e| Error::Crd {
                file: file.clone(),
                message: e.to_string(),
            })?;
            if value.is_null() {
                continue;
            }
            let crd: CustomResourceDefinition =
                serde_yaml::from_value(value).map_err(|e| Error::Crd {
                    file: file.clone(),
                    message: e.to_string(),
                })?;
            crds.push(crd);
        }
    }
    Ok(crds)
}

fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// Server-side applies `crds` and waits until each is `Established`.
pub async fn install(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("captf-testenv").force();
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(crd)).await?;
    }
    let deadline = Instant::now() + ESTABLISH_TIMEOUT;
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        loop {
            if established(&api.get(&name).await?) {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::NotReady {
                    what: format!("CRD {name} not Established after {ESTABLISH_TIMEOUT:?}"),
                    logs: String::new(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}
