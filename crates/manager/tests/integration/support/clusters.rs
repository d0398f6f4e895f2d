//! A TerraformCluster as a user creates it, with its Cluster (owned by
//! Cluster API's controllers) and credentials.

use captf_api::TerraformCluster;
use captf_testenv::TestNamespace;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use serde_json::json;

use super::create_capi_cluster;

/// A TerraformCluster on `image` (one the node may not have yet).
pub async fn create_cluster(ns: &TestNamespace, name: &str, image: &str) {
    create_cluster_with_variables(ns, name, image, serde_json::Value::Null).await;
}

/// [`create_cluster`] with `spec.variables` (`null`: none).
pub async fn create_cluster_with_variables(
    ns: &TestNamespace,
    name: &str,
    image: &str,
    variables: serde_json::Value,
) {
    let spec = if variables.is_null() {
        json!({})
    } else {
        json!({ "variables": variables })
    };
    create_cluster_with_spec(ns, name, image, spec).await;
}

/// [`create_cluster`] with more `spec` fields (merged over the defaults).
pub async fn create_cluster_with_spec(
    ns: &TestNamespace,
    name: &str,
    image: &str,
    extra: serde_json::Value,
) {
    create_capi_cluster(ns, name).await;
    let creds: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-creds")}, "stringData": {"token": "x"},
    }))
    .unwrap();
    ns.api::<Secret>()
        .create(&PostParams::default(), &creds)
        .await
        .unwrap();
    let mut tc = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "metadata": {"name": name},
        "spec": {"source": {"image": image},
                 "identityRef": {"kind": "Secret", "name": format!("{name}-creds")},
                 "drift": {"intervalSeconds": 0}},
    });
    for (key, value) in extra.as_object().into_iter().flatten() {
        tc["spec"][key] = value.clone();
    }
    let tc: TerraformCluster = serde_json::from_value(tc).unwrap();
    ns.api::<TerraformCluster>()
        .create(&PostParams::default(), &tc)
        .await
        .unwrap();
}

/// The manager image and the noop cluster module on the real node, and the
/// runner's role: what a test of one TerraformCluster needs.
pub async fn with_cluster_module(
    env: &'static captf_testenv::TestEnv,
    ns: &TestNamespace,
    tmp: &std::path::Path,
) {
    use super::*;
    insert_manager(env, ns.name()).await;
    insert_module(
        env,
        &module_ref("cluster", ns.name()),
        module_image(tmp, "cluster", "v1", &[]),
    )
    .await;
    install_runner_role(&ns.client()).await;
}

/// [`with_cluster_module`] with [`SLOW_APPLY`] in the module (tag `slow`):
/// an apply can be caught in its apply step. Returns the module reference.
pub async fn with_slow_cluster_module(
    env: &'static captf_testenv::TestEnv,
    ns: &TestNamespace,
    tmp: &std::path::Path,
) -> String {
    use super::*;
    insert_manager(env, ns.name()).await;
    let module = module_ref("cluster", ns.name());
    insert_module(
        env,
        &module,
        module_image(tmp, "cluster", "slow", &[("slow.tf", SLOW_APPLY)]),
    )
    .await;
    install_runner_role(&ns.client()).await;
    module
}

/// A module file for the noop cluster module: an apply that adds a key to
/// `noop_exports_extra` takes `noop_apply_seconds` under the state lock (a
/// create, which a cluster's guarded apply lets through).
pub const SLOW_APPLY: &str = r#"
variable "noop_apply_seconds" {
  type    = number
  default = 0
}

resource "terraform_data" "slow" {
  for_each = var.noop_exports_extra
  input    = each.value
  provisioner "local-exec" {
    command = "sleep ${var.noop_apply_seconds}"
  }
}
"#;

/// A condition's status and reason.
pub fn condition(tc: &TerraformCluster, type_: &str) -> Option<(String, String)> {
    let c = tc
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

pub fn is_ready(tc: &TerraformCluster) -> bool {
    condition(tc, "Ready").is_some_and(|(s, _)| s == "True")
}

/// `status.exports.zone`, which the noop module's `noop_exports_extra` sets.
pub fn zone(tc: &TerraformCluster) -> Option<String> {
    tc.status.as_ref()?.exports.as_ref()?["zone"]
        .as_str()
        .map(str::to_owned)
}

/// Changes one attribute of the `load_balancer` resource in the state, as
/// someone editing the infrastructure behind the manager's back would;
/// returns the state Secret's name.
pub async fn tamper_with_state(ns: &TestNamespace, cluster: &str) -> String {
    super::tamper_with_resource(
        ns,
        captf_manager::names::WorkloadKind::Cluster,
        cluster,
        "load_balancer",
        |attributes| {
            attributes["input"] = serde_json::json!({"value": {"name": "changed-elsewhere"}, "type": ["object", {"name": "string"}]});
        },
    )
    .await
}

/// Waits for the pass that decided to hold `name`'s deletion: its
/// `Deleting` condition says the deletion waits (a pass writes its status
/// last, after any Job it started, so what it did not start by then it
/// decided not to).
#[allow(dead_code)]
pub async fn deletion_held(ns: &TestNamespace, name: &str) -> TerraformCluster {
    captf_testenv::eventually(&format!("{name}'s deletion held"), 120, || async {
        let tc = ns.api::<TerraformCluster>().get(name).await.ok()?;
        let held = tc
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Deleting" && c.message.starts_with("the deletion waits"));
        held.then_some(tc)
    })
    .await
}

/// Waits for a pass of `name` that saw its current generation (its status
/// written for it: a pass writes its status last, after any Job it
/// started).
#[allow(dead_code)]
pub async fn generation_seen(ns: &TestNamespace, name: &str) -> TerraformCluster {
    captf_testenv::eventually(&format!("a pass of {name}'s generation"), 120, || async {
        let tc = ns.api::<TerraformCluster>().get(name).await.ok()?;
        let generation = tc.metadata.generation?;
        (tc.status.as_ref()?.workspace.observed_generation == Some(generation)).then_some(tc)
    })
    .await
}
