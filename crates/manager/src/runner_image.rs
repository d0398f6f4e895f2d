//! Which image the Jobs' runner init container comes from: `--runner-image`
//! (or `CAPTF_MANAGER_IMAGE`) when given, else the image the manager's own
//! pod runs. Reading the pod is what lets `clusterctl`'s image overrides
//! (which rewrite container images, never flags or environment) move the
//! runner along with the manager: each Job then runs the runner of the
//! manager that created it.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;

/// The manager's container in the shipped Deployment.
pub const MANAGER_CONTAINER: &str = "manager";

/// Checks a runner image reference as given on the command line.
pub fn validate(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("--runner-image (or CAPTF_MANAGER_IMAGE) must not be empty".into());
    }
    if s.contains(char::is_whitespace) || !s.contains('/') {
        return Err(format!(
            "--runner-image {s:?} is not a normalized image reference"
        ));
    }
    Ok(s.to_owned())
}

/// The image of the manager container in `pod` (the only container when
/// the pod has one), checked like the flag.
pub fn from_pod(pod: &Pod) -> Result<String, String> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let container = containers
        .iter()
        .find(|c| c.name == MANAGER_CONTAINER)
        .or(match containers {
            [only] => Some(only),
            _ => None,
        })
        .ok_or_else(|| {
            format!("pod {name} has no container named {MANAGER_CONTAINER:?} to take the runner image from: set --runner-image")
        })?;
    let image = container.image.as_deref().unwrap_or_default();
    validate(image).map_err(|e| {
        format!(
            "the image of pod {name}'s {} container: {e}",
            container.name
        )
    })
}

/// Where the manager runs, from the downward API (`POD_NAMESPACE`,
/// `POD_NAME`), when it runs in a pod.
pub fn own_pod() -> Option<(String, String)> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    Some((var("POD_NAMESPACE")?, var("POD_NAME")?))
}

/// The runner image: the flag's value, else the manager pod's image (one
/// GET at start).
pub async fn resolve(
    flag: Option<&str>,
    own_pod: Option<(String, String)>,
    client: &kube::Client,
) -> Result<String, String> {
    if let Some(image) = flag {
        return validate(image);
    }
    let Some((namespace, name)) = own_pod else {
        return Err("set --runner-image (or CAPTF_MANAGER_IMAGE): outside a pod (no POD_NAMESPACE and POD_NAME) the manager cannot take it from its own image".into());
    };
    let pod = Api::<Pod>::namespaced(client.clone(), &namespace)
        .get(&name)
        .await
        .map_err(|e| {
            format!("reading the manager's pod {namespace}/{name} for the runner image: {e}")
        })?;
    from_pod(&pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(containers: &[(&str, &str)]) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "captf-controller-manager-abc" },
            "spec": { "containers": containers.iter().map(|(n, i)| serde_json::json!({"name": n, "image": i})).collect::<Vec<_>>() },
        }))
        .unwrap()
    }

    #[test]
    fn the_runner_image_comes_from_the_manager_container() {
        type Containers = &'static [(&'static str, &'static str)];
        let table: &[(Containers, Result<&str, &str>)] = &[
            (
                &[("manager", "reg.example/captf-manager:v1")],
                Ok("reg.example/captf-manager:v1"),
            ),
            // An override rewrote the image: the runner follows.
            (
                &[
                    ("sidecar", "reg.example/proxy:v9"),
                    ("manager", "mirror.example/captf/captf-manager:v1"),
                ],
                Ok("mirror.example/captf/captf-manager:v1"),
            ),
            (
                &[("renamed", "reg.example/captf-manager:v1")],
                Ok("reg.example/captf-manager:v1"),
            ),
            (
                &[("a", "reg.example/a:1"), ("b", "reg.example/b:1")],
                Err("no container named"),
            ),
            (
                &[("manager", "captf-manager")],
                Err("not a normalized image reference"),
            ),
            (&[], Err("no container named")),
        ];
        for (containers, want) in table {
            let got = from_pod(&pod(containers));
            match want {
                Ok(image) => assert_eq!(got.as_deref(), Ok(*image), "{containers:?}"),
                Err(part) => assert!(
                    got.as_ref().is_err_and(|e| e.contains(part)),
                    "{containers:?}: {got:?}"
                ),
            }
        }
    }

    #[test]
    fn a_given_flag_is_checked() {
        assert!(validate("reg.example/captf-manager:v1").is_ok());
        assert!(validate("").is_err());
        assert!(validate("captf-manager").is_err());
        assert!(validate("reg.example/a b").is_err());
    }
}
