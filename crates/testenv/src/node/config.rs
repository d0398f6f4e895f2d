//! The real node's configuration files, as plain text from plain values:
//! containerd's, the CNI network's, the kubelet's and kube-proxy's. The
//! settings are the ones this machine needs (a cgroup v1 host whose VM drops
//! CAP_SYS_RESOURCE, no swap accounting, nothing to pull from).

use std::path::{Path, PathBuf};

/// The name the node registers with, and the bridge its pods hang off.
pub const NODE_NAME: &str = "captf-node";
pub const BRIDGE: &str = "captf0";
/// The pods' subnet (host-local IPAM on the bridge).
pub const POD_SUBNET: &str = "10.88.0.0/24";
/// The cgroup the kubelet keeps its pods under (`cgroupRoot`), in each
/// hierarchy: the node's own, so putting the host back touches no other
/// kubelet's pods.
pub const CGROUP_ROOT: &str = "captf-node";
/// The local pause image every pod sandbox runs.
pub const PAUSE_IMAGE: &str = "captf.test/pause:v1";

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
pub fn cni_conflist(paths: &NodePaths) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "captf-test",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET}]],
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
pub fn kubelet_yaml(paths: &NodePaths, address: &str) -> String {
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
        cgroup_root = CGROUP_ROOT,
        socket = show(&paths.socket()),
        pod_logs = show(&paths.pod_logs()),
        plugins = show(&paths.root.join("volume-plugins")),
    )
}

/// kube-proxy in iptables mode for the node.
pub fn kube_proxy_yaml(kubeconfig: &Path) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: {NODE_NAME}
clusterCIDR: {POD_SUBNET}
clientConnection:
  kubeconfig: {kubeconfig}
conntrack:
  maxPerCore: 0
metricsBindAddress: "127.0.0.1:10249"
healthzBindAddress: "127.0.0.1:10256"
"#,
        kubeconfig = show(kubeconfig),
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
        let kubelet = kubelet_yaml(&paths, "192.0.2.2");
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
        let cni: serde_json::Value = serde_json::from_str(&cni_conflist(&paths)).unwrap();
        assert_eq!(cni["plugins"][0]["ipam"]["dataDir"], "/tmp/t/node/cni-ipam");
    }
}
