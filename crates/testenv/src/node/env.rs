//! The test environment's real nodes: one started on first use beside each
//! control plane (the binary's, and the second one a move test starts),
//! stopped by the exit hook before the control planes.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use captf_images::layout::ImageSpec;

use super::Node;
use super::runtime::Runtime;
use crate::TestEnv;

/// The nodes of this test process, for the exit hook.
static NODES_RUNNING: Mutex<Vec<Node>> = Mutex::new(Vec::new());
/// How the one start of each control plane's node went.
static NODES_STARTED: [OnceLock<Result<RealNode, String>>; 2] = [OnceLock::new(), OnceLock::new()];

/// What a test needs of the running node.
#[derive(Debug, Clone)]
pub struct RealNode {
    pub name: String,
    pub address: String,
    pub started_in: Duration,
    runtime: Runtime,
    images: PathBuf,
    logs: PathBuf,
}

impl RealNode {
    /// The last `lines` lines of each of the node's logs, for a failing test.
    pub fn logs(&self, lines: usize) -> String {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&self.logs)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        names.sort();
        names
            .iter()
            .map(|p| {
                format!(
                    "----- {} -----\n{}\n",
                    p.display(),
                    crate::process::tail(p, lines)
                )
            })
            .collect()
    }

    /// Puts `spec` in the node's runtime as `reference` (and by its
    /// digest, `<repository>@sha256:…`); returns the digest. Panics when
    /// it cannot: a test never runs without its images.
    pub fn import(&self, spec: &ImageSpec, reference: &str) -> String {
        self.try_import(spec, reference)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`RealNode::import`] for a program that reports the failure itself.
    pub fn try_import(&self, spec: &ImageSpec, reference: &str) -> Result<String, String> {
        super::images::import(&self.runtime, &self.images, spec, reference)
            .map_err(|e| format!("importing {reference} into the real node: {e}"))
    }

    /// Puts the image of the OCI layout at `layout` (as `make images`
    /// writes it) in the node's runtime as `reference` and by its digest;
    /// returns the digest.
    pub fn import_layout(&self, layout: &Path, reference: &str) -> Result<String, String> {
        super::images::import_layout(&self.runtime, &self.images, layout, reference)
            .map_err(|e| format!("importing {} as {reference}: {e}", layout.display()))
    }

    /// Removes the name `reference` from the node's runtime: a pull of it
    /// then fails, as when a registry collected it.
    pub fn remove_image(&self, reference: &str) {
        self.runtime
            .remove(reference)
            .unwrap_or_else(|e| panic!("removing {reference} from the real node: {e}"));
    }

    /// The processes of pod `namespace/pod`'s running containers, as the
    /// kernel runs them (user, group, root mount, memory limit).
    pub fn pod_processes(&self, namespace: &str, pod: &str) -> Vec<super::runtime::ProcessView> {
        self.runtime
            .pod_processes(namespace, pod)
            .unwrap_or_else(|e| panic!("reading pod {namespace}/{pod} on the real node: {e}"))
    }

    /// SIGKILLs every process of pod `namespace/pod`'s running containers
    /// through the runtime, as the OOM killer would; returns how many ran.
    pub fn kill_pod(&self, namespace: &str, pod: &str) -> usize {
        self.runtime
            .kill_pod(namespace, pod)
            .unwrap_or_else(|e| panic!("killing pod {namespace}/{pod} on the real node: {e}"))
    }
}

/// Stops the nodes that run (from the exit hook), the first control
/// plane's last: the last to stop puts the host's sysctls back.
pub(crate) fn stop_nodes() {
    let mut nodes = std::mem::take(&mut *NODES_RUNNING.lock().unwrap_or_else(|p| p.into_inner()));
    nodes.sort_by_key(|n| std::cmp::Reverse(n.site.index));
    for mut node in nodes {
        node.stop();
    }
}

impl TestEnv {
    /// The real node beside this control plane (one per control plane, test
    /// process and host), started on first use: its pods run on a real
    /// kubelet and container runtime, bound to it by the scheduler.
    pub async fn real_node(&'static self) -> RealNode {
        match self.try_real_node().await {
            Ok(node) => node,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`TestEnv::real_node`] for a program that reports the failure
    /// itself (the local demo).
    pub async fn try_real_node(&'static self) -> Result<RealNode, String> {
        let slot = NODES_STARTED
            .get(self.index())
            .ok_or_else(|| format!("no real node for control plane {}", self.index()))?;
        let started =
            tokio::task::spawn_blocking(move || slot.get_or_init(|| start_on_own_thread(self)))
                .await
                .map_err(|e| format!("starting the real node panicked: {e}"))?;
        started
            .clone()
            .map_err(|e| format!("real node unavailable: {e}"))
    }
}

/// Starts the node from a thread that parks for the rest of the process
/// (its processes die with the thread that started them).
fn start_on_own_thread(env: &'static TestEnv) -> Result<RealNode, String> {
    let kubeconfig = env
        .kubeconfig()
        .ok_or("a real node needs the local control plane (USE_EXISTING_CLUSTER is set)")?
        .to_path_buf();
    let client = env.client();
    let site = super::config::Site { index: env.index() };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(site.node_name())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the node");
            let result = rt
                .block_on(Node::start(site, &kubeconfig, client))
                .and_then(|node| {
                    let handle = RealNode {
                        name: site.node_name(),
                        address: node.address.clone(),
                        started_in: node.started_in,
                        runtime: node.runtime()?,
                        images: node.paths.images(),
                        logs: node.paths.logs(),
                    };
                    NODES_RUNNING
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(node);
                    Ok(handle)
                });
            let _ = tx.send(result);
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| format!("spawning the node thread: {e}"))?;
    rx.recv()
        .map_err(|_| "the node thread ended without a result".to_owned())?
}
