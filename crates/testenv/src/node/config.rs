//! The real node's configuration files, as plain text from plain values:
//! containerd's, the CNI network's, the kubelet's and kube-proxy's. The
//! settings are the ones this machine needs (a cgroup v1 host whose VM drops
//! CAP_SYS_RESOURCE, no swap accounting, nothing to pull from).

use std::path::{Path, PathBuf};

/// The local pause image every pod sandbox runs.
pub const PAUSE_IMAGE: &str = "captf.test/pause:v1";

/// Which of the host's nodes this is: the first control plane's node runs
/// in the host's network namespace; every further one in a network
/// namespace of its own (its own chains, bridge and ports), reaching the
/// host through a veth pair. Each has its own name, bridge, pod subnet,
/// cgroup root, folder prefix and host lock, so putting one back touches no
/// other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site {
    pub index: usize,
}

impl Site {
    fn suffix(self) -> String {
        match self.index {
            0 => String::new(),
            i => i.to_string(),
        }
    }
    /// The name the node registers with.
    pub fn node_name(self) -> String {
        format!("captf-node{}", self.suffix())
    }
    /// The bridge its pods hang off.
    pub fn bridge(self) -> String {
        format!("captf{}", self.index)
    }
    /// The pods' subnet (host-local IPAM on the bridge).
    pub fn pod_subnet(self) -> String {
        format!("10.{}.0.0/24", 88 + self.index)
    }
    /// The cgroup the kubelet keeps its pods under (`cgroupRoot`), in each
    /// hierarchy: the node's own, so putting the host back touches no other
    /// kubelet's pods.
    pub fn cgroup_root(self) -> String {
        self.node_name()
    }
    /// Every folder of this node starts with it, so a sweep finds those of
    /// runs that died (and no other node's).
    pub fn folder_prefix(self) -> String {
        format!("{}-", self.node_name())
    }
    /// The file whose lock makes this node the host's only one of its site.
    pub fn lock_file(self) -> PathBuf {
        std::env::temp_dir().join(format!("{}.lock", self.node_name()))
    }
    /// The network namespace the node runs in (`None`: the host's).
    pub fn netns(self) -> Option<String> {
        (self.index > 0).then(|| self.node_name())
    }
    /// The veth pair's host end, its namespace end, and their addresses
    /// (a /30 each: host `.1`, node `.2`).
    pub fn veth(self) -> Veth {
        Veth {
            host: format!("captf-h{}", self.index),
            node: format!("captf-n{}", self.index),
            host_address: format!("10.90.{}.1", self.index),
            node_address: format!("10.90.{}.2", self.index),
        }
    }
}

/// The link between a node's network namespace and the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Veth {
    pub host: String,
    pub node: String,
    pub host_address: String,
    pub node_address: String,
}

/// Where a node keeps its files: everything under one folder of the test.
#[derive(Debug, Clone)]
pub struct NodePaths {
    pub root: PathBuf,
}

impl NodePaths {
    pub fn containerd_dir(&self) -> PathBuf {
        self.root.join("containerd")
    }
    pub fn socket(&self) -> PathBuf {
        self.containerd_dir().join("containerd.sock")
    }
    pub fn cni_conf_dir(&self) -> PathBuf {
        self.root.join("cni")
    }
    pub fn cni_ipam_dir(&self) -> PathBuf {
        self.root.join("cni-ipam")
    }
    pub fn kubelet_dir(&self) -> PathBuf {
        self.root.join("kubelet")
    }
    pub fn pod_logs(&self) -> PathBuf {
        self.root.join("pod-logs")
    }
    /// Where images are written before they are packed.
    pub fn images(&self) -> PathBuf {
        self.root.join("images")
    }
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
}

fn show(p: &Path) -> String {
    p.display().to_string()
}

/// containerd 1.6's configuration: its own root, state and sockets; the
/// CRI with the local pause image, cgroupfs (1.6 has no `RuntimeConfig`,
/// the kubelet uses its own driver) and `restrict_oom_score_adj` (this VM
/// drops CAP_SYS_RESOURCE, so the negative OOM score runc would give the
/// pause container fails).
pub fn containerd_toml(paths: &NodePaths, cni_bin: &Path) -> String {
    let dir = paths.containerd_dir();
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
"#,
        root = show(&dir.join("root")),
        state = show(&dir.join("state")),
        socket = show(&paths.socket()),
        pause = PAUSE_IMAGE,
        cni_bin = show(cni_bin),
        cni_conf = show(&paths.cni_conf_dir()),
    )
}

/// One bridge with host-local addresses, the gateway on the bridge, and
/// masquerade for traffic leaving the pods' subnet; portmap for host ports.
pub fn cni_conflist(paths: &NodePaths, site: Site) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "captf-test",
        "plugins": [
            {
                "type": "bridge",
                "bridge": site.bridge(),
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": site.pod_subnet()}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": show(&paths.cni_ipam_dir()),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    })
    .to_string()
}

/// The kubelet's configuration. Every path is absolute and inside the test
/// folder (a misspelt field is silently ignored, so the test of this file
/// names each one); eviction and image garbage collection are off (a busy
/// shared disk must not evict a test's pods or its imported images).
pub fn kubelet_yaml(paths: &NodePaths, site: Site, address: &str) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://{socket}
podLogsDir: {pod_logs}
volumePluginDir: {plugins}
failSwapOn: false
cgroupRoot: /{cgroup_root}
address: {address}
port: 10250
readOnlyPort: 0
healthzPort: 0
clusterDNS: []
evictionHard:
  memory.available: "0%"
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
"#,
        cgroup_root = site.cgroup_root(),
        socket = show(&paths.socket()),
        pod_logs = show(&paths.pod_logs()),
        plugins = show(&paths.root.join("volume-plugins")),
    )
}

/// kube-proxy in iptables mode for the node.
pub fn kube_proxy_yaml(kubeconfig: &Path, site: Site) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: {name}
clusterCIDR: {subnet}
clientConnection:
  kubeconfig: {kubeconfig}
conntrack:
  maxPerCore: 0
metricsBindAddress: "127.0.0.1:10249"
healthzBindAddress: "127.0.0.1:10256"
"#,
        kubeconfig = show(kubeconfig),
        name = site.node_name(),
        subnet = site.pod_subnet(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_of_the_node_is_inside_its_folder() {
        let paths = NodePaths {
            root: PathBuf::from("/tmp/t/node"),
        };
        let kubelet = kubelet_yaml(&paths, Site { index: 0 }, "192.0.2.2");
        for line in [
            "containerRuntimeEndpoint: unix:///tmp/t/node/containerd/containerd.sock",
            "podLogsDir: /tmp/t/node/pod-logs",
            "volumePluginDir: /tmp/t/node/volume-plugins",
            "failCgroupV1: false",
            "cgroupDriver: cgroupfs",
        ] {
            assert!(kubelet.lines().any(|l| l == line), "{line} in\n{kubelet}");
        }
        let containerd = containerd_toml(&paths, Path::new("/usr/lib/cni"));
        assert!(containerd.contains(r#"root = "/tmp/t/node/containerd/root""#));
        assert!(containerd.contains(r#"conf_dir = "/tmp/t/node/cni""#));
        assert!(containerd.contains("restrict_oom_score_adj = true"));
        let cni: serde_json::Value =
            serde_json::from_str(&cni_conflist(&paths, Site { index: 0 })).unwrap();
        assert_eq!(cni["plugins"][0]["ipam"]["dataDir"], "/tmp/t/node/cni-ipam");
    }

    #[test]
    fn each_site_has_its_own_name_bridge_subnet_cgroup_lock_and_namespace() {
        let (first, second) = (Site { index: 0 }, Site { index: 1 });
        assert_eq!(
            (
                first.node_name(),
                first.bridge(),
                first.pod_subnet(),
                first.netns()
            ),
            (
                "captf-node".to_owned(),
                "captf0".to_owned(),
                "10.88.0.0/24".to_owned(),
                None
            )
        );
        assert_eq!(
            (
                second.node_name(),
                second.bridge(),
                second.pod_subnet(),
                second.netns()
            ),
            (
                "captf-node1".to_owned(),
                "captf1".to_owned(),
                "10.89.0.0/24".to_owned(),
                Some("captf-node1".to_owned())
            )
        );
        // A sweep of one site's folders never matches the other's.
        assert!(!second.folder_prefix().starts_with(&first.folder_prefix()));
        assert!(!first.folder_prefix().starts_with(&second.folder_prefix()));
        assert_ne!(first.lock_file(), second.lock_file());
        assert_ne!(first.cgroup_root(), second.cgroup_root());
        let kubelet = kubelet_yaml(
            &NodePaths {
                root: PathBuf::from("/tmp/n"),
            },
            second,
            "10.90.1.2",
        );
        assert!(
            kubelet.lines().any(|l| l == "cgroupRoot: /captf-node1"),
            "{kubelet}"
        );
        let proxy = kube_proxy_yaml(Path::new("/tmp/k"), second);
        assert!(proxy.contains("hostnameOverride: captf-node1\nclusterCIDR: 10.89.0.0/24"));
    }
}
