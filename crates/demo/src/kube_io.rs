//! The demo's few apiserver calls, on untyped objects: server-side apply of
//! the examples, reads by kind, and server-side tables.

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiResource, Scope};
use serde_json::Value;

use crate::table::ACCEPT_TABLE;

/// A resolved kind: its resource and whether it lives in a namespace.
#[derive(Debug, Clone)]
pub struct Kind {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// Looks `apiVersion`/`kind` up in the apiserver's discovery.
pub async fn resolve(client: &kube::Client, api_version: &str, kind: &str) -> Result<Kind, String> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("the apiserver does not serve {api_version} {kind}: {e}"))?;
    Ok(Kind {
        resource,
        namespaced: caps.scope == Scope::Namespaced,
    })
}

fn api(client: &kube::Client, kind: &Kind, namespace: Option<&str>) -> Api<DynamicObject> {
    match (kind.namespaced, namespace) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &kind.resource),
        (true, None) => Api::default_namespaced_with(client.clone(), &kind.resource),
        (false, _) => Api::all_with(client.clone(), &kind.resource),
    }
}

fn describe(object: &Value) -> String {
    format!(
        "{} {}",
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Server-side applies `object` as `field_manager` (forcing conflicts, as
/// `kubectl apply --server-side --force-conflicts` does) and returns what
/// the apiserver stored.
pub async fn apply(
    client: &kube::Client,
    object: &Value,
    field_manager: &str,
) -> Result<Value, String> {
    let kind = resolve(
        client,
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
    )
    .await?;
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = object["metadata"]["namespace"].as_str();
    let params = PatchParams::apply(field_manager).force();
    let stored = api(client, &kind, namespace)
        .patch(name, &params, &Patch::Apply(object))
        .await
        .map_err(|e| format!("applying {}: {e}", describe(object)))?;
    serde_json::to_value(stored).map_err(|e| format!("reading back {}: {e}", describe(object)))
}

/// One object, `None` when it does not exist.
pub async fn get(
    client: &kube::Client,
    kind: &Kind,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, String> {
    let found = api(client, kind, Some(namespace))
        .get_opt(name)
        .await
        .map_err(|e| format!("reading {} {name}: {e}", kind.resource.kind))?;
    found
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| e.to_string())
}

/// The objects of `kind` in `namespace` that match `selector`.
pub async fn list(
    client: &kube::Client,
    kind: &Kind,
    namespace: &str,
    selector: &str,
) -> Result<Vec<Value>, String> {
    let list = api(client, kind, Some(namespace))
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| format!("listing {}: {e}", kind.resource.plural))?;
    list.items
        .into_iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())
}

/// The server-side Table of `kind` in `namespace`, as `kubectl get` asks for it.
pub async fn table(client: &kube::Client, kind: &Kind, namespace: &str) -> Result<Value, String> {
    let r = &kind.resource;
    let base = if r.group.is_empty() {
        format!("/api/{}", r.version)
    } else {
        format!("/apis/{}/{}", r.group, r.version)
    };
    let path = if !kind.namespaced {
        format!("{base}/{}", r.plural)
    } else {
        format!("{base}/namespaces/{namespace}/{}", r.plural)
    };
    let request = http::Request::get(&path)
        .header(http::header::ACCEPT, ACCEPT_TABLE)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    client
        .request::<Value>(request)
        .await
        .map_err(|e| format!("GET {path} as a Table: {e}"))
}

/// Installs what the components install for runners: the ClusterRole the
/// manager binds to each namespace's runner account, and the admission
/// policy that keeps each object's runner to creating its own state's
/// names; as `field_manager`.
pub async fn install_runner_role(client: &kube::Client, field_manager: &str) -> Result<(), String> {
    captf_manager::io::runner_rbac::install_runner_components(client, field_manager)
        .await
        .map_err(|e| format!("installing the runner's ClusterRole and admission policy: {e}"))
}
