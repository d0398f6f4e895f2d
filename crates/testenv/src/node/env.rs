//! The test environment's real node: started on first use beside the
//! binary's control plane, stopped by the exit hook before the control
//! plane.

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use captf_images::layout::ImageSpec;

use super::Node;
use crate::TestEnv;

/// The node of this test process, for the exit hook.
static NODE_RUNNING: Mutex<Option<Node>> = Mutex::new(None);
/// How the one start went.
static NODE_STARTED: OnceLock<Result<RealNode, String>> = OnceLock::new();

/// What a test needs of the running node.
#[derive(Debug, Clone)]
pub struct RealNode {
    pub name: &'static str,
    pub address: String,
    pub started_in: Duration,
    socket: PathBuf,
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

    /// Imports `spec` into the node's runtime as `reference` (and by its
    /// digest); returns the digest.
    pub fn import(&self, spec: &ImageSpec, reference: &str) -> Result<String, String> {
        let ctr = crate::assets::host_tool("ctr").map_err(|e| e.to_string())?;
        super::images::import(&ctr, &self.socket, &self.images, spec, reference)
    }
}

/// Stops the node, if one runs (from the exit hook).
pub(crate) fn stop_node() {
    let node = NODE_RUNNING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    if let Some(mut node) = node {
        node.stop();
    }
}

impl TestEnv {
    /// The real node beside this control plane (one per test process and
    /// per host), started on first use: its pods run on a real kubelet and
    /// container runtime, bound to it by the scheduler.
    pub async fn real_node(&'static self) -> RealNode {
        let started = tokio::task::spawn_blocking(move || {
            NODE_STARTED.get_or_init(|| start_on_own_thread(self))
        })
        .await
        .expect("starting the real node panicked");
        match started {
            Ok(node) => node.clone(),
            Err(e) => panic!("real node unavailable: {e}"),
        }
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
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("captf-node".to_owned())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the node");
            let result = rt.block_on(Node::start(&kubeconfig, client)).map(|node| {
                let handle = RealNode {
                    name: super::config::NODE_NAME,
                    address: node.address.clone(),
                    started_in: node.started_in,
                    socket: node.paths.socket(),
                    images: node.paths.root.join("images"),
                    logs: node.paths.logs(),
                };
                *NODE_RUNNING.lock().unwrap_or_else(|p| p.into_inner()) = Some(node);
                handle
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
