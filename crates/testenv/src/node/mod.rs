//! A real node beside a test control plane: containerd with its own root,
//! state and socket under the node's folder, a CNI bridge, the kubelet,
//! kube-proxy, the scheduler that binds pods to the node, and the node
//! lifecycle controller that lifts the `not-ready` taint the kubelet
//! registers the node with (a second controller manager, so a control plane
//! without a node never runs it). Settings and pitfalls: `config.rs`; what
//! it changes on the host and how that is put back: `host.rs`.
//!
//! One node per site (`config::Site`) per host: the first control plane's
//! node uses the host's ports and iptables chains; a further control
//! plane's node runs in a network namespace of its own (`netns.rs`). Each
//! keeps its pods' cgroups under a root of its own. A run that died is swept
//! by the next.

pub mod config;
mod env;
pub mod host;
pub mod images;
mod netns;
pub mod runtime;

pub use env::RealNode;
pub(crate) use env::stop_nodes;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::api::Api;

use crate::assets;
use crate::process::Process;
use config::{NodePaths, Site};

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A running node.
#[derive(Debug)]
pub struct Node {
    /// The host-wide lock of the one node a host runs at this site, held
    /// for the node's life (the kernel lets it go if the process dies).
    _host_lock: nix::fcntl::Flock<std::fs::File>,
    pub site: Site,
    pub paths: NodePaths,
    /// The address the kubelet serves on and reports: the host's, or the
    /// node's end of the veth pair.
    pub address: String,
    /// Started order: containerd, kubelet, kube-proxy, scheduler, node
    /// lifecycle controller.
    processes: Vec<Process>,
    /// How long the node took from nothing to Ready.
    pub started_in: Duration,
    stopped: bool,
}

fn write(path: PathBuf, text: &str) -> Result<PathBuf, String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

/// The folders of `site`'s nodes whose runs died (no process of this run
/// has them).
fn earlier_folders(site: Site) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    let prefix = site.folder_prefix();
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect()
}

/// Takes the host's lock of `site`, waiting for another test process's
/// node there.
fn lock_host(site: Site) -> Result<nix::fcntl::Flock<std::fs::File>, String> {
    let path = site.lock_file();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("opening {}: {e}", path.display()))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| format!("locking {}: {e}", path.display()))
}

fn sweep_earlier_runs(site: Site) {
    let earlier = earlier_folders(site);
    let roots: Vec<&Path> = earlier.iter().map(PathBuf::as_path).collect();
    host::sweep(site, &roots);
    for dir in &earlier {
        let _ = std::fs::remove_dir_all(dir);
    }
}

impl Node {
    /// Starts the node of `site` registered with the control plane of
    /// `kubeconfig` and waits until it is Ready. Must run on a thread that
    /// outlives the node (see [`Process::start`]).
    pub async fn start(
        site: Site,
        kubeconfig: &Path,
        client: kube::Client,
    ) -> Result<Node, String> {
        let host_lock = tokio::task::spawn_blocking(move || lock_host(site))
            .await
            .map_err(|e| e.to_string())??;
        let began = Instant::now();
        // With the lock held, any folder of this site is a dead run's.
        sweep_earlier_runs(site);
        host::save_host().map_err(|e| format!("saving the host's sysctls: {e}"))?;
        host::make_cgroup_root(site).map_err(|e| format!("making the node's cgroup root: {e}"))?;
        let root = tempfile::Builder::new()
            .prefix(&site.folder_prefix())
            .tempdir()
            .map_err(|e| format!("creating the node's folder: {e}"))?
            .keep();
        let host_address = crate::control_plane::host_address()
            .ok_or("the host has no address on a default route for the kubelet")?
            .to_string();
        let mut node = Node {
            _host_lock: host_lock,
            site,
            paths: NodePaths { root },
            address: host_address.clone(),
            processes: Vec::new(),
            started_in: Duration::ZERO,
            stopped: false,
        };
        let kubeconfig = match site.netns() {
            None => kubeconfig.to_path_buf(),
            Some(_) => {
                node.address = netns::create(site)?;
                let text = std::fs::read_to_string(kubeconfig)
                    .map_err(|e| format!("reading {}: {e}", kubeconfig.display()))?;
                let text = netns::kubeconfig_for_namespace(&text, &host_address);
                write(node.paths.root.join("kubeconfig"), &text)?
            }
        };
        node.start_runtime()?;
        node.start_agents(&kubeconfig)?;
        node.wait_ready(client).await?;
        node.started_in = began.elapsed();
        eprintln!(
            "[testenv] real node {} Ready in {:.1} s",
            site.node_name(),
            node.started_in.as_secs_f64()
        );
        Ok(node)
    }

    fn tool(name: &'static str) -> Result<PathBuf, String> {
        assets::host_tool(name).map_err(|e| e.to_string())
    }

    /// `ctr` on this node's containerd.
    pub fn runtime(&self) -> Result<runtime::Runtime, String> {
        Ok(runtime::Runtime {
            ctr: Self::tool("ctr")?,
            socket: self.paths.socket(),
        })
    }

    fn binary(name: &'static str) -> Result<PathBuf, String> {
        assets::node_binary(name).map_err(|e| e.to_string())
    }

    fn start_process(&mut self, name: &str, binary: &Path, args: &[String]) -> Result<(), String> {
        let logs = self.paths.logs();
        std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
        let p = Process::start(name, binary, args, &logs).map_err(|e| e.to_string())?;
        self.processes.push(p);
        Ok(())
    }

    /// [`Node::start_process`] inside the node's network namespace, if it
    /// has one (`nsenter` enters it and execs the binary, so the process is
    /// the binary itself).
    fn start_networked(
        &mut self,
        name: &str,
        binary: &Path,
        args: &[String],
    ) -> Result<(), String> {
        let Some(netns) = self.site.netns() else {
            return self.start_process(name, binary, args);
        };
        let mut all = vec![
            format!("--net={}", netns::path(&netns).display()),
            "--".to_owned(),
            binary.display().to_string(),
        ];
        all.extend_from_slice(args);
        self.start_process(name, &Self::tool("nsenter")?, &all)
    }

    /// containerd, up with the base images.
    fn start_runtime(&mut self) -> Result<(), String> {
        let cni_bin = PathBuf::from("/usr/lib/cni");
        if !cni_bin.join("bridge").is_file() {
            return Err(assets::AssetError::MissingTool("containernetworking-plugins").to_string());
        }
        let toml = config::containerd_toml(&self.paths, &cni_bin);
        let conf = write(self.paths.containerd_dir().join("config.toml"), &toml)?;
        write(
            self.paths.cni_conf_dir().join("10-captf.conflist"),
            &config::cni_conflist(&self.paths, self.site),
        )?;
        let containerd = Self::tool("containerd")?;
        self.start_networked(
            "containerd",
            &containerd,
            &["--config".to_owned(), conf.display().to_string()],
        )?;
        let socket = self.paths.socket();
        let deadline = Instant::now() + READY_TIMEOUT;
        while !socket.exists() {
            if Instant::now() > deadline {
                return Err(format!("containerd did not open {}", socket.display()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        images::import_base(&self.runtime()?, &self.paths.images())
    }

    /// The kubelet, kube-proxy, the scheduler and the node lifecycle
    /// controller, all with the control plane's admin credentials.
    fn start_agents(&mut self, kubeconfig: &Path) -> Result<(), String> {
        let kubeconfig = kubeconfig.display().to_string();
        let kubelet_conf = write(
            self.paths.root.join("kubelet.yaml"),
            &config::kubelet_yaml(&self.paths, self.site, &self.address),
        )?;
        let kubelet_args = vec![
            format!("--config={}", kubelet_conf.display()),
            format!("--kubeconfig={kubeconfig}"),
            format!("--root-dir={}", self.paths.kubelet_dir().display()),
            format!("--hostname-override={}", self.site.node_name()),
            format!("--node-ip={}", self.address),
            "--v=1".to_owned(),
        ];
        self.start_networked("kubelet", &Self::binary("kubelet")?, &kubelet_args)?;
        let proxy_conf = write(
            self.paths.root.join("kube-proxy.yaml"),
            &config::kube_proxy_yaml(Path::new(&kubeconfig), self.site),
        )?;
        let proxy_args = vec![format!("--config={}", proxy_conf.display())];
        self.start_networked("kube-proxy", &Self::binary("kube-proxy")?, &proxy_args)?;
        let scheduler_args = vec![
            format!("--kubeconfig={kubeconfig}"),
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
            "--leader-elect=false".to_owned(),
            "--secure-port=0".to_owned(),
        ];
        self.start_process(
            "kube-scheduler",
            &Self::binary("kube-scheduler")?,
            &scheduler_args,
        )?;
        let kcm =
            assets::control_plane_binary("kube-controller-manager").map_err(|e| e.to_string())?;
        let lifecycle_args = vec![
            format!("--kubeconfig={kubeconfig}"),
            "--controllers=node-lifecycle-controller,endpointslice-controller".to_owned(),
            // The workload clusters' member Nodes (the node agent's, with no
            // kubelet to renew them) stay as registered for a whole run.
            "--node-monitor-grace-period=1h".to_owned(),
            "--node-startup-grace-period=1h".to_owned(),
            "--leader-elect=false".to_owned(),
            "--secure-port=0".to_owned(),
        ];
        self.start_process("node-lifecycle", &kcm, &lifecycle_args)
    }

    /// Until the Node reports Ready and carries no `not-ready` taint.
    async fn wait_ready(&mut self, client: kube::Client) -> Result<(), String> {
        let nodes: Api<KubeNode> = Api::all(client);
        let name = self.site.node_name();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(n) = nodes.get_opt(&name).await.map_err(|e| e.to_string())?
                && schedulable(&n)
            {
                return Ok(());
            }
            if let Some(p) = self
                .processes
                .iter_mut()
                .find_map(|p| p.exited().map(|_| p))
            {
                return Err(format!("{} exited:\n{}", p.name, p.log_tail(30)));
            }
            if Instant::now() > deadline {
                return Err(format!("node {name} not Ready in time:\n{}", self.logs(30)));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The last lines of each process's log.
    pub fn logs(&self, lines: usize) -> String {
        self.processes
            .iter()
            .map(|p| format!("----- {} -----\n{}\n", p.name, p.log_tail(lines)))
            .collect()
    }

    /// Stops the agents, the pods and the runtime, puts the host back and
    /// removes the node's folder.
    pub fn stop(&mut self) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        while let Some(mut p) = self.processes.pop() {
            p.stop(STOP_GRACE);
        }
        host::sweep(self.site, &[self.paths.root.as_path()]);
        let _ = std::fs::remove_dir_all(&self.paths.root);
    }
}

impl Drop for Node {
    /// A start that failed half-way leaves the host as it found it.
    fn drop(&mut self) {
        self.stop();
    }
}

/// Ready, and without the taint the kubelet registers the node with.
fn schedulable(n: &KubeNode) -> bool {
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let tainted = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == "node.kubernetes.io/not-ready"));
    ready && !tainted
}
