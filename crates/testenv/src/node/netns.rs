//! The network namespace of a node beside the host's first one: the
//! namespace, a veth pair to the host with an address at each end, the
//! node's default route through the host, and forwarding for its pods. The
//! node's containerd, kubelet and kube-proxy run inside it (their chains,
//! bridge and ports are its own); they reach the control plane at the host's
//! address, which the apiserver listens on. Removing the namespace
//! (`host::sweep`) removes everything made here.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::config::Site;

/// Runs `ip args`, or says what failed.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("running ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The file that names the namespace, for `nsenter --net`.
pub fn path(netns: &str) -> PathBuf {
    Path::new("/var/run/netns").join(netns)
}

/// Makes the namespace of `site` with its link to the host; returns the
/// node's address in it.
pub fn create(site: Site) -> Result<String, String> {
    let Some(netns) = site.netns() else {
        return Err("the first node runs in the host's namespace".to_owned());
    };
    let veth = site.veth();
    add_namespace(&netns)?;
    ip(&[
        "link", "add", &veth.host, "type", "veth", "peer", "name", &veth.node, "netns", &netns,
    ])?;
    ip(&[
        "addr",
        "add",
        &format!("{}/30", veth.host_address),
        "dev",
        &veth.host,
    ])?;
    ip(&["link", "set", &veth.host, "up"])?;
    let inside = |args: &[&str]| {
        let mut all = vec!["-n", netns.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    };
    inside(&["link", "set", "lo", "up"])?;
    inside(&[
        "addr",
        "add",
        &format!("{}/30", veth.node_address),
        "dev",
        &veth.node,
    ])?;
    inside(&["link", "set", &veth.node, "up"])?;
    inside(&["route", "add", "default", "via", &veth.host_address])?;
    // The pods' packets to the control plane are forwarded from the bridge
    // to the veth (and masqueraded by the CNI bridge on the way).
    let out = Command::new("nsenter")
        .arg(format!("--net={}", path(&netns).display()))
        .args(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        .output()
        .map_err(|e| format!("running nsenter: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "forwarding in {netns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(veth.node_address)
}

/// Makes the named network namespace `ip netns` and `nsenter` find, with
/// `unshare` rather than `ip netns add`: the first time it runs, `ip netns
/// add` turns `/var/run/netns` into a bind mount of itself, and the pod
/// namespaces the first node's containerd had mounted there before are
/// copied into it; containerd then unmounts the copy it sees and cannot
/// remove the file under it (EBUSY), so each of those pods stays Running
/// (or Terminating) for good and its Job never finishes.
fn add_namespace(netns: &str) -> Result<(), String> {
    let file = path(netns);
    let dir = file.parent().expect("a folder for network namespaces");
    std::fs::create_dir_all(dir).map_err(|e| format!("making {}: {e}", dir.display()))?;
    std::fs::File::create(&file).map_err(|e| format!("making {}: {e}", file.display()))?;
    let out = Command::new("unshare")
        .arg(format!("--net={}", file.display()))
        .arg("true")
        .output()
        .map_err(|e| format!("running unshare: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let _ = std::fs::remove_file(&file);
        Err(format!(
            "unshare --net={}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The admin kubeconfig of `kubeconfig` with its server at the host's
/// `address` in place of loopback (the namespace's loopback is its own).
pub fn kubeconfig_for_namespace(kubeconfig: &str, address: &str) -> String {
    kubeconfig.replace("https://127.0.0.1:", &format!("https://{address}:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespaced_nodes_kubeconfig_names_the_host_not_loopback() {
        let text = "clusters:\n- cluster:\n    server: https://127.0.0.1:20017\n";
        assert_eq!(
            kubeconfig_for_namespace(text, "10.0.2.15"),
            "clusters:\n- cluster:\n    server: https://10.0.2.15:20017\n"
        );
    }
}
