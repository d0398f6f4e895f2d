//! Test harness: one real control plane per test binary (etcd,
//! kube-apiserver, kube-controller-manager) with this project's and Cluster
//! API's CRDs installed, and a namespace per test. Tests that move objects
//! between management clusters get a second, independent control plane
//! from [`TestEnv::second`].
//!
//! ```no_run
//! # async fn t() {
//! let env = captf_testenv::TestEnv::get().await;
//! let ns = env.namespace().await;
//! let client = ns.client();
//! # }
//! ```
//!
//! With `USE_EXISTING_CLUSTER=true` the harness uses the cluster of
//! `KUBECONFIG` instead of starting one.
//!
//! The control plane is started by a dedicated thread that lives as long as
//! the test process: its children are killed if the test process dies, and
//! stopped gracefully (and their folder removed) when it exits normally.

pub mod assets;
pub mod binaries;
pub mod capi;
pub mod control_plane;
pub mod crds;
mod failure_report;
pub mod gate;
pub mod node;
pub mod nodes;
pub mod pki;
pub mod process;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use control_plane::ControlPlane;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Asset(#[from] assets::AssetError),
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    #[error(transparent)]
    Process(#[from] process::ProcessError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("CRD file {file}: {message}")]
    Crd { file: PathBuf, message: String },
    #[error("{what}\n{logs}")]
    NotReady { what: String, logs: String },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

/// Where the cluster under test comes from.
#[derive(Debug)]
enum Cluster {
    /// Started by this harness; the control plane is shared with the exit hook.
    Local {
        kubeconfig: PathBuf,
        /// The same kubeconfig with inline certificates.
        inline_kubeconfig: String,
        /// The control plane's folder.
        root: PathBuf,
        logs: Vec<(String, PathBuf)>,
        pids: Vec<u32>,
    },
    /// `USE_EXISTING_CLUSTER=true`: the cluster of `KUBECONFIG`.
    Existing,
}

/// A cluster of this test binary.
#[derive(Debug)]
pub struct TestEnv {
    config: kube::Config,
    cluster: Cluster,
    /// 0 for the binary's cluster ([`TestEnv::get`]), 1 for the second
    /// ([`TestEnv::second`]).
    index: usize,
    /// Whether Cluster API's managers started (once).
    cluster_api: OnceLock<Result<(), String>>,
    /// Their logs, for a failing test.
    capi_logs: Mutex<Vec<(String, PathBuf)>>,
}

static ENV: OnceLock<Result<TestEnv, String>> = OnceLock::new();
static SECOND: OnceLock<Result<TestEnv, String>> = OnceLock::new();
/// The running control planes, for the exit hook.
static RUNNING: Mutex<Vec<ControlPlane>> = Mutex::new(Vec::new());
/// The Cluster API managers, for the exit hook.
static CAPI_RUNNING: Mutex<Vec<process::Process>> = Mutex::new(Vec::new());
/// Set when the exit hook starts: the node agents, which outlive the control plane on threads of their own, then stop reporting
/// the connection errors of a control plane that is going away.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// True once the process is stopping its control planes.
pub(crate) fn stopping() -> bool {
    STOPPING.load(std::sync::atomic::Ordering::SeqCst)
}

fn use_existing_cluster() -> bool {
    std::env::var("USE_EXISTING_CLUSTER").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

impl TestEnv {
    /// The shared environment, started on first use. Panics with the reason
    /// (missing asset, a process that failed, its log) when it cannot start:
    /// a test never runs without its cluster.
    pub async fn get() -> &'static TestEnv {
        match Self::try_get().await {
            Ok(env) => env,
            Err(e) => panic!("test environment unavailable: {e}"),
        }
    }

    /// Like [`TestEnv::get`], but returns why the environment could not
    /// start instead of panicking: for programs (the local demo) that
    /// report the failure themselves.
    pub async fn try_get() -> Result<&'static TestEnv, String> {
        let env = tokio::task::spawn_blocking(|| ENV.get_or_init(|| start(0)))
            .await
            .map_err(|e| format!("starting the test environment panicked: {e}"))?;
        env.as_ref().map_err(Clone::clone)
    }

    /// A second control plane of its own (etcd, apiserver, controller
    /// manager, the same CRDs), started on first use: the target of a
    /// `clusterctl move`. Not available with `USE_EXISTING_CLUSTER`, which
    /// names one cluster only.
    pub async fn second() -> &'static TestEnv {
        let env = tokio::task::spawn_blocking(|| {
            SECOND.get_or_init(|| {
                if use_existing_cluster() {
                    return Err("a second management cluster needs the local control plane \
                                (USE_EXISTING_CLUSTER names one cluster)"
                        .to_owned());
                }
                start(1)
            })
        })
        .await
        .expect("starting the second control plane panicked");
        match env {
            Ok(env) => env,
            Err(e) => panic!("second test environment unavailable: {e}"),
        }
    }

    /// 0 for the binary's cluster, 1 for the second: for harness parts
    /// that run once per cluster.
    pub fn index(&self) -> usize {
        self.index
    }

    /// A new client. Each test gets its own: a client is bound to the runtime
    /// it was made on, and every `#[tokio::test]` has its own runtime.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config.clone()).expect("client from a valid config")
    }

    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// The admin kubeconfig of a local control plane.
    pub fn kubeconfig(&self) -> Option<&Path> {
        match &self.cluster {
            Cluster::Local { kubeconfig, .. } => Some(kubeconfig),
            Cluster::Existing => None,
        }
    }

    /// Process ids of etcd, kube-apiserver and kube-controller-manager (empty
    /// for an existing cluster).
    pub fn pids(&self) -> &[u32] {
        match &self.cluster {
            Cluster::Local { pids, .. } => pids,
            Cluster::Existing => &[],
        }
    }

    /// The last `lines` lines of each control-plane log and of each Cluster
    /// API manager's (empty for an existing cluster).
    pub fn logs(&self, lines: usize) -> String {
        let managers = self
            .capi_logs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match &self.cluster {
            Cluster::Local { logs, .. } => logs
                .iter()
                .chain(managers.iter())
                .map(|(name, path)| {
                    format!(
                        "----- {name} ({}) -----\n{}\n",
                        path.display(),
                        process::tail(path, lines)
                    )
                })
                .collect(),
            Cluster::Existing => String::new(),
        }
    }

    /// Cluster API's controllers (see [`capi`]) and the node agent (see
    /// [`nodes`]), started on first use and running until the test process
    /// exits. Panics with the reason (a missing asset, a manager that
    /// failed, its log) when they cannot start. Against an existing cluster
    /// nothing is started: that cluster is expected to run Cluster API.
    ///
    /// The second control plane runs no node agent: the workload clusters of
    /// the objects moved to it stay where their kubeconfig Secrets point,
    /// the first control plane, whose agent keeps their nodes.
    pub async fn cluster_api(&'static self) -> ClusterApi {
        match self.try_cluster_api().await {
            Ok(c) => c,
            Err(e) => panic!("Cluster API unavailable: {e}"),
        }
    }

    /// Whether Cluster API's managers were started on this cluster. Tests
    /// that play Cluster API's part by hand assert they were not: its
    /// managers watch every namespace and would answer in their place.
    pub fn cluster_api_started(&self) -> bool {
        self.cluster_api.get().is_some()
    }

    /// Like [`TestEnv::cluster_api`], but returns why Cluster API could not
    /// start instead of panicking (for the local demo).
    pub async fn try_cluster_api(&'static self) -> Result<ClusterApi, String> {
        tokio::task::spawn_blocking(move || {
            self.cluster_api
                .get_or_init(|| self.start_cluster_api())
                .clone()
        })
        .await
        .map_err(|e| format!("starting Cluster API panicked: {e}"))??;
        Ok(ClusterApi { env: self })
    }

    fn start_cluster_api(&'static self) -> Result<(), String> {
        let Cluster::Local {
            kubeconfig, root, ..
        } = &self.cluster
        else {
            return Ok(());
        };
        let (kubeconfig, dir) = (kubeconfig.clone(), capi::root_dir(root));
        let config = self.config.clone();
        let node_agent = self.index == 0;
        let (tx, rx) = std::sync::mpsc::channel();
        // Like the control plane's, this thread outlives its processes (they
        // die with it); it goes on to run the node agent.
        std::thread::Builder::new()
            .name("captf-cluster-api".to_owned())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for Cluster API");
                rt.block_on(async move {
                    let client =
                        kube::Client::try_from(config).expect("client from a valid config");
                    let started = start_managers(self, &client, &kubeconfig, &dir).await;
                    let ok = started.is_ok();
                    let _ = tx.send(started.map_err(|e| e.to_string()));
                    if ok && node_agent {
                        nodes::run(client).await;
                    }
                });
                loop {
                    std::thread::park();
                }
            })
            .map_err(|e| format!("spawning the Cluster API thread: {e}"))?;
        rx.recv()
            .map_err(|_| "the Cluster API thread ended without a result".to_owned())?
    }

    /// A fresh namespace for one test, deleted when the guard drops. If the
    /// test is failing (panicking) at that point, the control plane's logs
    /// are printed with the failure.
    pub async fn namespace(&'static self) -> TestNamespace {
        self.create_namespace(ObjectMeta {
            generate_name: Some("captf-test-".to_owned()),
            ..Default::default()
        })
        .await
    }

    /// A namespace of the given name (the one a test uses in another
    /// cluster), deleted when the guard drops.
    pub async fn namespace_named(&'static self, name: &str) -> TestNamespace {
        self.create_namespace(ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        })
        .await
    }

    async fn create_namespace(&'static self, metadata: ObjectMeta) -> TestNamespace {
        let client = self.client();
        let api: Api<Namespace> = Api::all(client.clone());
        let ns = Namespace {
            metadata,
            ..Default::default()
        };
        let created = api
            .create(&PostParams::default(), &ns)
            .await
            .expect("creating the test namespace");
        TestNamespace {
            name: created
                .metadata
                .name
                .expect("apiserver names the namespace"),
            client,
            env: self,
        }
    }
}

async fn start_managers(
    env: &TestEnv,
    client: &kube::Client,
    kubeconfig: &Path,
    dir: &Path,
) -> Result<(), Error> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    for component in capi::COMPONENTS {
        let process = capi::start(component, client, kubeconfig, dir).await?;
        env.capi_logs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((process.name.clone(), process.log.clone()));
        CAPI_RUNNING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(process);
    }
    Ok(())
}

/// Cluster API running against the test cluster.
#[derive(Clone, Copy)]
pub struct ClusterApi {
    env: &'static TestEnv,
}

impl ClusterApi {
    /// The `<cluster>-kubeconfig` Secret a control plane provider would
    /// write, pointing at the test control plane itself (the workload
    /// cluster of every test), owned by the Cluster so it goes with it.
    pub fn kubeconfig_secret(
        &self,
        cluster: &str,
        cluster_uid: &str,
    ) -> k8s_openapi::api::core::v1::Secret {
        let value = match &self.env.cluster {
            Cluster::Local {
                inline_kubeconfig, ..
            } => inline_kubeconfig.clone(),
            Cluster::Existing => String::new(),
        };
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": format!("{cluster}-kubeconfig"),
                "labels": {"cluster.x-k8s.io/cluster-name": cluster},
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                     "name": cluster, "uid": cluster_uid}],
            },
            "type": "cluster.x-k8s.io/secret",
            "stringData": {"value": value},
        }))
        .expect("a static secret")
    }
}

/// Polls `check` every 200 ms until it yields a value; panics naming `what`
/// after `secs` seconds. For tests that wait on controllers.
pub async fn eventually<T, F, Fut>(what: &str, secs: u64, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// A namespace that belongs to one test.
pub struct TestNamespace {
    name: String,
    client: kube::Client,
    env: &'static TestEnv,
}

impl TestNamespace {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// A namespaced API for this test's namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "test in namespace {} failed; control plane logs:\n{}",
                self.name,
                self.env.logs(60)
            );
        }
        // Deletion needs a runtime, and Drop may run inside one: use a thread.
        let name = self.name.clone();
        let config = self.env.config.clone();
        let failed = std::thread::panicking();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for namespace cleanup");
            rt.block_on(async move {
                if let Ok(client) = kube::Client::try_from(config) {
                    if failed {
                        eprintln!("{}", failure_report::namespace_report(&client, &name).await);
                    }
                    delete_identities_of(&client, &name).await;
                    let api: Api<Namespace> = Api::all(client);
                    let _ = api.delete(&name, &DeleteParams::background()).await;
                }
            });
        })
        .join();
    }
}

/// Deletes the TerraformClusterIdentities whose source Secret lives in
/// `namespace`: cluster-scoped, they would outlive the test's namespace,
/// and every manager the binary's other tests run would go on reconciling
/// them. Read untyped, so that no identity of another shape stops the
/// cleanup; finalizers are dropped (the test's managers are stopping) until
/// none of them is left.
async fn delete_identities_of(client: &kube::Client, namespace: &str) {
    use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
    let resource = ApiResource::erase::<captf_api::TerraformClusterIdentity>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let unfinalized = serde_json::json!({"metadata": {"finalizers": null}});
    for _ in 0..30 {
        let Ok(list) = api.list(&ListParams::default()).await else {
            return;
        };
        let mine: Vec<DynamicObject> = list
            .items
            .into_iter()
            .filter(|i| i.data["spec"]["secretRef"]["namespace"] == namespace)
            .collect();
        if mine.is_empty() {
            return;
        }
        for identity in mine {
            let name = identity.metadata.name.clone().unwrap_or_default();
            if identity
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
            {
                let _ = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&unfinalized))
                    .await;
            }
            if identity.metadata.deletion_timestamp.is_none() {
                let _ = api.delete(&name, &DeleteParams::background()).await;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Starts (or connects to) cluster `index` and installs the CRDs. Runs once
/// per cluster.
fn start(index: usize) -> Result<TestEnv, String> {
    if use_existing_cluster() {
        return start_existing().map_err(|e| e.to_string());
    }
    let (tx, rx) = std::sync::mpsc::channel();
    // The thread that starts the processes must outlive them (they die with
    // it), so it parks for the rest of the test process.
    std::thread::Builder::new()
        .name("captf-testenv".to_owned())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the control plane");
            let result = rt.block_on(start_local(index));
            let _ = tx.send(result.map_err(|e| e.to_string()));
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| format!("spawning the control-plane thread: {e}"))?;
    rx.recv()
        .map_err(|_| "the control-plane thread ended without a result".to_owned())?
}

async fn start_local(index: usize) -> Result<TestEnv, Error> {
    let root = tempfile::Builder::new()
        .prefix("captf-testenv-")
        .tempdir()
        .map_err(|e| Error::io("creating the control-plane folder", e))?
        .keep();
    register_exit_hook();
    let mut started = ControlPlane::start(&root).await;
    if started.as_ref().is_err_and(control_plane::lost_port_race) {
        // The processes that did start were stopped when dropped; etcd's data
        // folder of the failed attempt must not carry over.
        let _ = std::fs::remove_dir_all(root.join("etcd"));
        started = ControlPlane::start(&root).await;
    }
    let cp = match started {
        Ok(cp) => cp,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&root);
            return Err(e);
        }
    };
    let kubeconfig = cp.kubeconfig.clone();
    let inline_kubeconfig = cp.inline_kubeconfig.clone();
    let root = cp.root.clone();
    let logs = cp
        .processes
        .iter()
        .map(|p| (p.name.clone(), p.log.clone()))
        .collect();
    let pids = cp.processes.iter().map(|p| p.pid()).collect();
    RUNNING.lock().unwrap_or_else(|p| p.into_inner()).push(cp);
    let config = control_plane::config_from(&kubeconfig).await?;
    install_crds(&config).await?;
    Ok(TestEnv::new(
        config,
        Cluster::Local {
            kubeconfig,
            inline_kubeconfig,
            root,
            logs,
            pids,
        },
        index,
    ))
}

impl TestEnv {
    fn new(config: kube::Config, cluster: Cluster, index: usize) -> TestEnv {
        TestEnv {
            config,
            cluster,
            index,
            cluster_api: OnceLock::new(),
            capi_logs: Mutex::new(Vec::new()),
        }
    }
}

fn start_existing() -> Result<TestEnv, Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("building a runtime", e))?;
    rt.block_on(async {
        let config = kube::Config::infer()
            .await
            .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        install_crds(&config).await?;
        Ok(TestEnv::new(config, Cluster::Existing, 0))
    })
}

/// Cluster API's CRDs (with clusterctl's inventory CRD) and ours, each
/// labelled `clusterctl.cluster.x-k8s.io` the way `clusterctl init` labels
/// what it installs: `clusterctl move` discovers the kinds it moves by it.
async fn install_crds(config: &kube::Config) -> Result<(), Error> {
    let client = kube::Client::try_from(config.clone())?;
    let mut all = crds::read_dir(&assets::capi_crds()?)?;
    all.extend(crds::read_dir(&assets::project_crds())?);
    for crd in &mut all {
        crd.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(CLUSTERCTL_LABEL.to_owned(), String::new());
    }
    crds::install(&client, &all).await
}

/// The label `clusterctl init` puts on every object it installs.
pub const CLUSTERCTL_LABEL: &str = "clusterctl.cluster.x-k8s.io";

fn register_exit_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[allow(unsafe_code)]
        // SAFETY: registers a plain extern "C" function with no captured state.
        unsafe {
            libc::atexit(stop_at_exit);
        }
    });
}

/// Runs when the test process exits: stop the control plane gracefully and
/// remove its folder.
extern "C" fn stop_at_exit() {
    STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
    // The node first: its kubelet reports to the control plane to the end.
    node::stop_nodes();
    let managers = std::mem::take(&mut *CAPI_RUNNING.lock().unwrap_or_else(|p| p.into_inner()));
    for mut p in managers.into_iter().rev() {
        p.stop(std::time::Duration::from_secs(5));
    }
    let running = std::mem::take(&mut *RUNNING.lock().unwrap_or_else(|p| p.into_inner()));
    for mut cp in running {
        cp.stop();
        let _ = std::fs::remove_dir_all(&cp.root);
    }
}
