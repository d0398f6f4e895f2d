//! Shared by the end-to-end tests: the images their Jobs run on the real
//! node and the controllers running in the test process.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use captf_images::layout::ImageSpec;
use captf_images::recipes;
use captf_manager::rbac;
use captf_manager::reconcile::{Config, Context, controllers};
use kube::api::Api;

/// The manager (runner) image of one test namespace: each namespace has
/// references of its own, so no test's image removal reaches another's.
pub fn manager_ref(namespace: &str) -> String {
    format!("local.test/{namespace}/captf-manager:v1")
}

/// A noop module image of `role` for one test namespace (a repository of
/// the namespace's own: the `<repository>@<digest>` names the pinned Jobs
/// run differ between tests even when the content is the same).
pub fn module_ref(role: &str, namespace: &str) -> String {
    format!("local.test/{namespace}/noop-{role}:v1")
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The runner binary, built once per test process
/// (`captf_testenv::binaries`).
pub fn runner_binary() -> PathBuf {
    captf_testenv::binaries::debug("runner")
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name().to_string_lossy().starts_with(".terraform") {
            continue;
        }
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// The manager image as `make images` builds it: the static `manager` and
/// `runner` binaries.
pub fn manager_image() -> ImageSpec {
    recipes::manager_image(
        &captf_testenv::binaries::static_linked("manager"),
        &captf_testenv::binaries::static_linked("runner"),
        &recipes::Provenance::default(),
    )
}

/// Puts the manager image on the real node as [`manager_ref`] of
/// `namespace`.
pub async fn insert_manager(env: &'static captf_testenv::TestEnv, namespace: &str) {
    env.real_node()
        .await
        .import(&manager_image(), &manager_ref(namespace));
}

/// A module image as `make images` builds it: `modules/noop/<role>` (plus
/// `extra` files, in a copy under `tmp`) at `/captf/module` and OpenTofu
/// at `/captf/runtime`; with a shell when an extra file runs a
/// `local-exec` provisioner.
pub fn module_image(tmp: &Path, role: &str, tag: &str, extra: &[(&str, &str)]) -> ImageSpec {
    let mut module = workspace().join("modules/noop").join(role);
    if !extra.is_empty() {
        let copy = tmp.join(format!("module-{role}-{tag}"));
        copy_dir(&module, &copy);
        for (name, text) in extra {
            std::fs::write(copy.join(name), text).unwrap();
        }
        module = copy;
    }
    let tofu = captf_testenv::assets::tofu().expect("the OpenTofu test asset");
    let version = captf_testenv::assets::version("OPENTOFU_VERSION").expect("the OpenTofu version");
    let spec = recipes::module_image(
        role,
        &module,
        &tofu,
        version,
        &recipes::Provenance::default(),
    )
    .expect("a noop module image");
    if extra.iter().any(|(_, text)| text.contains("local-exec")) {
        captf_testenv::node::images::with_shell(spec)
    } else {
        spec
    }
}

/// Installs what the components install for runners: the namespace-wide
/// ClusterRole and the admission policy that keeps each object's runner to
/// creating its own state's names.
pub async fn install_runner_role(client: &kube::Client) {
    captf_manager::io::runner_rbac::install_runner_components(client, "captf-e2e")
        .await
        .unwrap();
}

/// A ServiceAccount `name` bound to the namespace-wide `captf-runner`
/// ClusterRole (every Secret of the namespace), as earlier releases and
/// the reference made `captf-runner` in each namespace, and as an operator
/// may still bind an account of their own.
pub async fn namespace_wide_runner(ns: &captf_testenv::TestNamespace, name: &str) {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::RoleBinding;
    use kube::api::PostParams;
    let account: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    ns.api::<ServiceAccount>()
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": rbac::RUNNER},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns.name()}],
    }))
    .unwrap();
    ns.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// The controllers, watching `namespace`, until the handle drops.
pub struct Manager {
    stop: tokio::sync::watch::Sender<bool>,
    /// What the controllers counted (the `/metrics` body).
    #[allow(dead_code)]
    pub metrics: captf_manager::metrics::Metrics,
    /// Full passes run per object.
    pub passes: captf_manager::reconcile::PassCounter,
    /// Resyncs a quiet pass answered, per object.
    pub quiet_passes: captf_manager::reconcile::PassCounter,
}

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        // Every test running the manager fails when it asked to publish an
        // event reason the documented list does not name.
        let unlisted = captf_manager::recorder::unlisted_reasons();
        if !std::thread::panicking() {
            assert!(
                unlisted.is_empty(),
                "event reasons outside captf_api::names::events::MANAGER: {unlisted:?}"
            );
        }
    }
}

pub fn start_manager(client: kube::Client, namespace: &str) -> Manager {
    start_manager_with(client, namespace, |_| {})
}

/// The controllers with the test's `Config` changes.
pub fn start_manager_with(
    client: kube::Client,
    namespace: &str,
    configure: impl FnOnce(&mut Config),
) -> Manager {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "warn,captf_manager=info",
        ))
        .try_init();
    let mut config = Config::new(manager_ref(namespace));
    config.namespace = Some(namespace.to_owned());
    configure(&mut config);
    let ctx = Arc::new(Context::new(client, config));
    let metrics = ctx.metrics.clone();
    let passes = ctx.passes.clone();
    let quiet_passes = ctx.quiet_passes.clone();
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(controllers::run_all(ctx, rx));
    Manager {
        stop: tx,
        metrics,
        passes,
        quiet_passes,
    }
}

/// Puts a module image on the real node as `reference` and as
/// `<repository>@<digest>` (what non-apply Jobs run once the digest is
/// pinned); returns the digest.
pub async fn insert_module(
    env: &'static captf_testenv::TestEnv,
    reference: &str,
    image: ImageSpec,
) -> String {
    env.real_node().await.import(&image, reference)
}
/// A Job's op label (empty when it has none).
pub fn job_op(job: &k8s_openapi::api::batch::v1::Job) -> String {
    job.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("captf.infrastructure.cluster.x-k8s.io/op"))
        .cloned()
        .unwrap_or_default()
}

/// The names of the namespace's apply Jobs (one list of Jobs).
pub async fn apply_job_names(ns: &captf_testenv::TestNamespace) -> Vec<String> {
    ns.api::<k8s_openapi::api::batch::v1::Job>()
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|j| job_op(j) == "apply")
        .filter_map(|j| j.metadata.name.clone())
        .collect()
}

/// Every argument of a Job's containers (init containers first).
pub fn job_args(job: &k8s_openapi::api::batch::v1::Job) -> Vec<String> {
    job.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| {
            p.init_containers
                .iter()
                .chain(std::iter::once(&p.containers))
                .flatten()
                .flat_map(|c| c.args.clone().unwrap_or_default())
                .collect()
        })
        .unwrap_or_default()
}

pub mod clusters;
pub mod faults;
pub mod job_log;
pub mod kill_run;
pub mod machines;
pub mod manager_process;
pub mod many_pools;
pub mod moving;
pub mod pools;
pub mod requests;
pub mod touch;
pub mod webhooks;

/// A classic Cluster as a user writes it, its infrastructure the
/// TerraformCluster of the same name, for the harness's Cluster API
/// managers (started if they are not yet), with the `<name>-kubeconfig`
/// Secret its control plane provider would write.
pub async fn create_capi_cluster(
    ns: &captf_testenv::TestNamespace,
    name: &str,
) -> kube::api::DynamicObject {
    let cluster_api = captf_testenv::TestEnv::get().await.cluster_api().await;
    let clusters: Api<kube::api::DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &captf_manager::capi::cluster_resource(),
    );
    let cluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": name}},
    }))
    .unwrap();
    let cluster = clusters
        .create(&kube::api::PostParams::default(), &cluster)
        .await
        .unwrap();
    let uid = cluster.metadata.uid.clone().unwrap();
    ns.api::<k8s_openapi::api::core::v1::Secret>()
        .create(
            &kube::api::PostParams::default(),
            &cluster_api.kubeconfig_secret(name, &uid),
        )
        .await
        .unwrap();
    cluster
}

/// Changes the attributes of `resource` in the state of `kind` `name` with
/// `change` (and bumps the serial), as a change made to the
/// infrastructure behind the manager's back shows at the next refresh;
/// returns the state Secret's name.
#[allow(dead_code)]
pub async fn tamper_with_resource(
    ns: &captf_testenv::TestNamespace,
    kind: captf_manager::names::WorkloadKind,
    name: &str,
    resource: &str,
    change: impl FnOnce(&mut serde_json::Value),
) -> String {
    use k8s_openapi::api::core::v1::Secret;
    use std::io::{Read, Write};
    let secrets: kube::Api<Secret> = ns.api();
    let suffix = captf_manager::names::state_suffix(kind, ns.name(), name);
    let state_name = captf_manager::names::state_secret(&suffix);
    let secret = secrets.get(&state_name).await.expect("the state Secret");
    let mut text = String::new();
    flate2::read::GzDecoder::new(&secret.data.as_ref().unwrap()["tfstate"].0[..])
        .read_to_string(&mut text)
        .unwrap();
    let mut state: serde_json::Value = serde_json::from_str(&text).unwrap();
    state["serial"] = serde_json::json!(state["serial"].as_u64().unwrap() + 1);
    let found = state["resources"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["mode"] == "managed" && r["name"] == resource)
        .unwrap_or_else(|| panic!("resource {resource} in the state"));
    change(&mut found["instances"][0]["attributes"]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(state.to_string().as_bytes()).unwrap();
    let mut changed = secret.clone();
    changed.data.as_mut().unwrap().insert(
        "tfstate".into(),
        k8s_openapi::ByteString(gz.finish().unwrap()),
    );
    secrets
        .replace(&state_name, &kube::api::PostParams::default(), &changed)
        .await
        .unwrap();
    state_name
}

/// The note of an event of `reason` and `type_` about `kind` `name`, once
/// there is one (the manager's go out before the status showing their
/// cause; the runner's while its Job runs).
#[allow(dead_code)]
pub async fn expect_event(
    ns: &captf_testenv::TestNamespace,
    reason: &str,
    type_: &str,
    kind: &str,
    name: &str,
) -> String {
    expect_event_noting(ns, reason, type_, kind, name, "").await
}

/// [`expect_event`] for an event whose note contains `text`.
#[allow(dead_code)]
pub async fn expect_event_noting(
    ns: &captf_testenv::TestNamespace,
    reason: &str,
    type_: &str,
    kind: &str,
    name: &str,
    text: &str,
) -> String {
    let what = format!("a {type_} {reason} event about {kind} {name} noting {text:?}");
    captf_testenv::eventually(&what, 30, || async {
        ns.api::<k8s_openapi::api::events::v1::Event>()
            .list(&kube::api::ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.type_.as_deref() == Some(type_)
                    && e.regarding.as_ref().is_some_and(|r| {
                        r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                    })
                    && e.note.as_deref().unwrap_or_default().contains(text)
            })
            .map(|e| e.note.unwrap_or_default())
    })
    .await
}

/// The notes of the namespace's events of `reason`.
pub async fn event_notes(ns: &captf_testenv::TestNamespace, reason: &str) -> Vec<String> {
    ns.api::<k8s_openapi::api::events::v1::Event>()
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.note)
        .collect()
}
