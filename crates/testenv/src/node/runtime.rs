//! The node's container runtime as tests reach it: containerd's own client,
//! `ctr`, on the node's socket in the kubelet's namespace (`k8s.io`).
//! Images are imported, tagged and removed here, and faults are injected
//! here as a runtime would see them (a SIGKILL of a container's every
//! process, as the kernel's OOM killer does), not by scanning `/proc`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The kubelet's containerd namespace.
const NAMESPACE: &str = "k8s.io";

/// `ctr` on one node's socket.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub ctr: PathBuf,
    pub socket: PathBuf,
}

impl Runtime {
    /// Runs `ctr <args>`; its stdout, or why it failed (with its stderr).
    pub fn ctr(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.ctr)
            .args(["--address", &self.socket.display().to_string()])
            .args(["--namespace", NAMESPACE])
            .args(args)
            .output()
            .map_err(|e| format!("running {}: {e}", self.ctr.display()))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "ctr {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    pub fn import_archive(&self, archive: &Path) -> Result<(), String> {
        self.ctr(&["images", "import", &archive.display().to_string()])
            .map(drop)
    }

    /// Names the image `from` also `to` (replacing what `to` named).
    pub fn tag(&self, from: &str, to: &str) -> Result<(), String> {
        if from == to {
            return Ok(());
        }
        self.ctr(&["images", "tag", "--force", from, to]).map(drop)
    }

    /// Removes the name `reference`; the content goes once no name keeps it,
    /// as a registry's garbage collection would make a pull of it fail.
    pub fn remove(&self, reference: &str) -> Result<(), String> {
        self.ctr(&["images", "rm", reference]).map(drop)
    }

    /// The ids of the application containers (not the sandbox) of pod
    /// `namespace/pod`, by the labels the kubelet's runtime gives them.
    pub fn pod_containers(&self, namespace: &str, pod: &str) -> Result<Vec<String>, String> {
        let filter = format!(
            "labels.\"io.kubernetes.pod.name\"=={pod},\
             labels.\"io.kubernetes.pod.namespace\"=={namespace},\
             labels.\"io.cri-containerd.kind\"==container"
        );
        let listed = self.ctr(&["containers", "list", "--quiet", &filter])?;
        Ok(listed.lines().map(str::to_owned).collect())
    }

    /// The process ids of a container's running task (none once it exited).
    fn task_pids(&self, container: &str) -> Vec<u32> {
        let Ok(listed) = self.ctr(&["tasks", "ps", container]) else {
            return Vec::new();
        };
        listed
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect()
    }

    /// What the kernel says of each process running in pod
    /// `namespace/pod`'s containers: the view from inside a container,
    /// read from the host.
    pub fn pod_processes(&self, namespace: &str, pod: &str) -> Result<Vec<ProcessView>, String> {
        let mut seen = Vec::new();
        for container in self.pod_containers(namespace, pod)? {
            for pid in self.task_pids(&container) {
                // A process may end between the listing and the reading.
                if let Some(view) = ProcessView::read(pid) {
                    seen.push(view);
                }
            }
        }
        Ok(seen)
    }

    /// SIGKILLs every process of every running container of pod
    /// `namespace/pod` at once, through the runtime, as the OOM killer would
    /// end a pod over its limit; returns how many processes were running.
    /// The kubelet then reports each container terminated with exit code
    /// 137.
    pub fn kill_pod(&self, namespace: &str, pod: &str) -> Result<usize, String> {
        let mut killed = 0;
        for container in self.pod_containers(namespace, pod)? {
            let pids = self.task_pids(&container);
            if pids.is_empty() {
                continue;
            }
            self.ctr(&["tasks", "kill", "--all", "--signal", "SIGKILL", &container])?;
            killed += pids.len();
        }
        Ok(killed)
    }
}

/// One container process as the kernel runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessView {
    pub pid: u32,
    /// The command name (`/proc/<pid>/comm`).
    pub command: String,
    /// Real user and group ids.
    pub uid: u32,
    pub gid: u32,
    /// Whether the process's `/` is mounted read-only.
    pub read_only_root: bool,
    /// The memory limit of its cgroup, in bytes (`None`: unlimited).
    pub memory_limit: Option<u64>,
}

impl ProcessView {
    fn read(pid: u32) -> Option<ProcessView> {
        let proc_file = |name: &str| std::fs::read_to_string(format!("/proc/{pid}/{name}")).ok();
        let status = proc_file("status")?;
        let id = |key: &str| -> Option<u32> {
            let line = status.lines().find(|l| l.starts_with(key))?;
            line.split_whitespace().nth(1)?.parse().ok()
        };
        Some(ProcessView {
            pid,
            command: proc_file("comm")?.trim().to_owned(),
            uid: id("Uid:")?,
            gid: id("Gid:")?,
            read_only_root: root_read_only(&proc_file("mountinfo")?),
            memory_limit: memory_limit(&proc_file("cgroup")?),
        })
    }
}

/// Whether the mount at `/` in a `mountinfo` is read-only.
fn root_read_only(mountinfo: &str) -> bool {
    mountinfo
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .rfind(|fields| fields.get(4) == Some(&"/"))
        .and_then(|fields| {
            fields
                .get(5)
                .map(|options| options.split(',').any(|o| o == "ro"))
        })
        .unwrap_or(false)
}

/// The memory limit of the cgroup a `/proc/<pid>/cgroup` names (v1's
/// memory controller, or v2's unified hierarchy).
fn memory_limit(cgroup: &str) -> Option<u64> {
    let text = std::fs::read_to_string(memory_limit_file(cgroup)?).ok()?;
    limit_value(&text)
}

/// The file holding the memory limit of the cgroup a `/proc/<pid>/cgroup`
/// text names.
fn memory_limit_file(cgroup: &str) -> Option<String> {
    cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == "memory") {
            Some(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"))
        } else if controllers.is_empty() {
            Some(format!("/sys/fs/cgroup{path}/memory.max"))
        } else {
            None
        }
    })
}

/// A limit file's value; `None` for no limit (v2's `max`, or the huge
/// page-rounded number v1 writes for an unlimited cgroup).
fn limit_value(text: &str) -> Option<u64> {
    text.trim().parse::<u64>().ok().filter(|n| *n < 1 << 62)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_mount_options_tell_a_read_only_root() {
        let ro = "1102 1090 0:123 / / ro,relatime master:1 - overlay overlay rw,lowerdir=a\n\
                  1103 1102 0:124 / /proc rw,nosuid - proc proc rw\n";
        let rw = "1102 1090 0:123 / / rw,relatime - overlay overlay rw\n";
        assert!(root_read_only(ro));
        assert!(!root_read_only(rw));
        assert!(!root_read_only(""));
    }

    #[test]
    fn the_memory_limit_is_read_from_the_memory_controller_s_cgroup() {
        let v1 = "12:cpuset:/captf-node/kubepods/pod1/c1\n\
                  7:memory:/captf-node/kubepods/pod1/c1\n\
                  1:name=systemd:/x\n";
        assert_eq!(
            memory_limit_file(v1).as_deref(),
            Some("/sys/fs/cgroup/memory/captf-node/kubepods/pod1/c1/memory.limit_in_bytes")
        );
        let v2 = "0::/captf-node/kubepods/pod1/c1\n";
        assert_eq!(
            memory_limit_file(v2).as_deref(),
            Some("/sys/fs/cgroup/captf-node/kubepods/pod1/c1/memory.max")
        );
        assert_eq!(memory_limit_file("3:cpu,cpuacct:/x\n"), None);
        assert_eq!(limit_value("2147483648\n"), Some(2 << 30));
        assert_eq!(limit_value("9223372036854771712\n"), None, "v1's unlimited");
        assert_eq!(limit_value("max\n"), None, "v2's unlimited");
    }
}
