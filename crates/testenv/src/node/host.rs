//! What a real node changes on the shared host, and putting it back: the
//! sysctls the kubelet sets, the folders it makes outside its own, the
//! processes of its pods (under the node's own cgroup root), the iptables
//! chains the kubelet, kube-proxy and the CNI plugins add, the CNI bridge
//! (or, for a node in a network namespace of its own, that namespace with
//! all of them inside), the pods' network namespaces and the mounts under
//! the node's folder.
//!
//! The sysctls as they were (and which of the kubelet's host folders were
//! absent) are saved in a file beside the node's folders
//! before anything starts, so a run that died is put back by the next one
//! (`sweep`), whatever it left.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::config::Site;

/// The sysctls the kubelet sets (`protectKernelDefaults: false`).
pub const SYSCTLS: &[&str] = &[
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
];
/// The folders the kubelet makes whatever its root folder.
pub const KUBELET_HOST_DIRS: &[&str] =
    &["/var/lib/kubelet", "/var/log/containers", "/var/log/pods"];

/// Where the host's values wait to be put back (shared by the host's
/// nodes: the first to start saves them, the first to stop puts them back).
pub fn saved_host_file() -> PathBuf {
    std::env::temp_dir().join("captf-node-host")
}

fn sysctl_path(name: &str) -> PathBuf {
    Path::new("/proc/sys").join(name)
}

/// Saves the sysctls' current values and which of the kubelet's host
/// folders are absent, unless a run that died saved them first (those are
/// the host's own).
pub fn save_host() -> std::io::Result<()> {
    let file = saved_host_file();
    if file.exists() {
        return Ok(());
    }
    let mut saved = String::new();
    for name in SYSCTLS {
        let value = std::fs::read_to_string(sysctl_path(name))?;
        saved.push_str(&format!("{name}={}\n", value.trim()));
    }
    for dir in KUBELET_HOST_DIRS.iter().filter(|d| !Path::new(d).exists()) {
        saved.push_str(&format!("absent {dir}\n"));
    }
    std::fs::write(file, saved)
}

/// Puts the saved sysctls back, removes the folders that were absent, and
/// forgets them.
pub fn restore_host() {
    let file = saved_host_file();
    let Ok(saved) = std::fs::read_to_string(&file) else {
        return;
    };
    for line in saved.lines() {
        if let Some(dir) = line.strip_prefix("absent ") {
            let _ = std::fs::remove_dir_all(dir);
        } else if let Some((name, value)) = line.split_once('=') {
            let _ = std::fs::write(sysctl_path(name), value);
        }
    }
    let _ = std::fs::remove_file(file);
}

/// Everything a node of `site` (of this run or of one that died) left: its
/// pods' processes, the processes started under `roots`, its network (the
/// chains and the bridge, or its own network namespace), its pods' network
/// namespaces, the mounts under `roots`, the node's cgroups; then the
/// sysctls and the kubelet's host folders.
pub fn sweep(site: Site, roots: &[&Path]) {
    kill_cgroup_processes(site);
    for root in roots {
        kill_processes_naming(root);
    }
    match site.netns() {
        // Its chains, bridge and veth end go with the namespace.
        Some(netns) => {
            let _ = Command::new("ip")
                .args(["netns", "delete", &netns])
                .output();
            let _ = Command::new("ip")
                .args(["link", "delete", &site.veth().host])
                .output();
        }
        None => {
            remove_chains();
            let _ = Command::new("ip")
                .args(["link", "delete", &site.bridge()])
                .output();
        }
    }
    remove_idle_pod_netns();
    for root in roots {
        unmount_under(root);
    }
    remove_cgroup_root(site);
    restore_host();
}

/// The cgroup hierarchies mounted under `/sys/fs/cgroup` (v1's, and v2's
/// unified one where it is mounted there).
fn mounted_hierarchies() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.is_symlink() && p.join("cgroup.procs").is_file())
        .collect();
    if Path::new("/sys/fs/cgroup/cgroup.procs").is_file() {
        found.push(PathBuf::from("/sys/fs/cgroup"));
    }
    found
}

/// The hierarchies that hold the node's cgroup root.
fn hierarchies(site: Site) -> Vec<PathBuf> {
    mounted_hierarchies()
        .into_iter()
        .filter(|p| p.join(site.cgroup_root()).is_dir())
        .collect()
}

/// Makes the node's cgroup root in every hierarchy before the kubelet
/// starts (it refuses a root that is not there); a new cpuset gets its
/// parent's CPUs and memory nodes, or no process could join it.
pub fn make_cgroup_root(site: Site) -> std::io::Result<()> {
    for h in mounted_hierarchies() {
        let dir = h.join(site.cgroup_root());
        std::fs::create_dir_all(&dir)?;
        for file in ["cpuset.cpus", "cpuset.mems"] {
            if let Ok(value) = std::fs::read_to_string(h.join(file)) {
                std::fs::write(dir.join(file), value.trim())?;
            }
        }
    }
    Ok(())
}

/// Folders under `dir`, deepest first.
fn dirs_deepest_first(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                out.extend(dirs_deepest_first(&p));
            }
        }
    }
    out.push(dir.to_path_buf());
    out
}

fn kill_cgroup_processes(site: Site) {
    for h in hierarchies(site) {
        for dir in dirs_deepest_first(&h.join(site.cgroup_root())) {
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

fn remove_cgroup_root(site: Site) {
    for h in hierarchies(site) {
        for dir in dirs_deepest_first(&h.join(site.cgroup_root())) {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// SIGKILL for every process whose command line names `root` (containerd,
/// its shims, the kubelet of a run that died).
fn kill_processes_naming(root: &Path) {
    let needle = root.display().to_string();
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&needle) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The chains the kubelet (`KUBE-FIREWALL`, `KUBE-KUBELET-CANARY`, ...),
/// kube-proxy (`KUBE-*`) and the CNI plugins (`CNI-*`) added, with every
/// rule that jumps to them, in both families: each table is written back
/// without them.
fn remove_chains() {
    for (save, restore) in [
        ("iptables-save", "iptables-restore"),
        ("ip6tables-save", "ip6tables-restore"),
    ] {
        for table in ["filter", "nat", "mangle"] {
            let Ok(out) = Command::new(save).args(["-t", table]).output() else {
                continue;
            };
            let text = String::from_utf8_lossy(&out.stdout);
            if !text.contains("KUBE-") && !text.contains("CNI-") {
                continue;
            }
            let kept = without_node_chains(&text);
            if let Err(e) = feed(restore, &["-T", table], &kept) {
                eprintln!(
                    "[testenv] {restore} of table {table} without the node's chains: {e}\n{text}"
                );
            }
        }
    }
}

/// Runs `program args` with `input` on its stdin.
fn feed(program: &str, args: &[&str], input: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// An `iptables-save` table without the node's chains and the rules that
/// name them.
pub fn without_node_chains(saved: &str) -> String {
    let ours = |l: &str| l.contains("KUBE-") || l.contains("CNI-");
    saved
        .lines()
        .filter(|l| !ours(l))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The pods' network namespaces containerd 1.6 keeps under
/// `/var/run/netns/cni-*` that no process is in any more: those of the
/// swept node's pods, whose processes are gone, and never those of another
/// node's running pods.
fn remove_idle_pod_netns() {
    let dir = Path::new("/var/run/netns");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let in_use = netns_in_use();
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with("cni-") {
            continue;
        }
        let busy = std::fs::metadata(e.path())
            .map(|m| in_use.contains(&(m.dev(), m.ino())))
            .unwrap_or(false);
        if !busy {
            let _ = nix::mount::umount2(&e.path(), nix::mount::MntFlags::MNT_DETACH);
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The network namespaces (device and inode) the host's processes are in.
fn netns_in_use() -> std::collections::HashSet<(u64, u64)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Default::default();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::metadata(e.path().join("ns/net")).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

/// Unmounts everything mounted under `root`, deepest first.
pub fn unmount_under(root: &Path) {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points = mount_points_under(&mountinfo, root);
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in points {
        let _ = nix::mount::umount2(&p, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// The mount points of a mountinfo text that lie under `root`.
pub fn mount_points_under(mountinfo: &str, root: &Path) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(p.replace("\\040", " ")))
        .filter(|p| p.starts_with(root))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_chains_and_the_rules_naming_them_go_and_the_rest_stays() {
        let saved = "# Generated by iptables-save\n*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n\
                     :KUBE-SERVICES - [0:0]\n:CNI-abc - [0:0]\n-A PREROUTING -j KUBE-SERVICES\n\
                     -A POSTROUTING -s 10.88.0.5/32 -j CNI-abc\n-A POSTROUTING -o eth0 -j MASQUERADE\nCOMMIT\n\
                     # Completed\n";
        assert_eq!(
            without_node_chains(saved),
            "# Generated by iptables-save\n*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n\
             -A POSTROUTING -o eth0 -j MASQUERADE\nCOMMIT\n# Completed\n"
        );
    }

    #[test]
    fn mounts_under_the_node_folder_are_found_and_no_other() {
        let info = "36 35 98:0 / /tmp/t/node/kubelet/pods/x/volumes rw - tmpfs tmpfs rw\n\
                    37 35 98:0 / /tmp/other rw - ext4 /dev/root rw\n\
                    38 35 98:0 / /tmp/t/node/containerd/state/a\\040b rw - overlay overlay rw\n";
        assert_eq!(
            mount_points_under(info, Path::new("/tmp/t/node")),
            vec![
                PathBuf::from("/tmp/t/node/kubelet/pods/x/volumes"),
                PathBuf::from("/tmp/t/node/containerd/state/a b"),
            ]
        );
    }
}
