//! The control plane leaves nothing behind: stopped gracefully (folder
//! removed) when its process exits, killed when its process is killed.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

struct Started {
    child: Child,
    kubeconfig: PathBuf,
    pids: Vec<i32>,
}

fn start() -> Started {
    let mut child = Command::new(env!("CARGO_BIN_EXE_captf-testenv"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut kubeconfig = None;
    let mut pids = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(k) = line.strip_prefix("KUBECONFIG=") {
            kubeconfig = Some(PathBuf::from(k));
        } else if let Some(p) = line.strip_prefix("PIDS=") {
            pids = p.split(' ').map(|p| p.parse().unwrap()).collect();
        } else if line.starts_with("ready") {
            break;
        }
    }
    assert_eq!(
        pids.len(),
        3,
        "etcd, kube-apiserver, kube-controller-manager"
    );
    Started {
        child,
        kubeconfig: kubeconfig.expect("the kubeconfig path is printed"),
        pids,
    }
}

fn alive(pid: i32) -> bool {
    // A zombie still answers kill(0); it is reaped by init once its parent
    // is gone, so check the process state too.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    kill(Pid::from_raw(pid), None).is_ok() && !stat.contains(") Z ")
}

fn wait_until_gone(pids: &[i32]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while pids.iter().any(|&p| alive(p)) {
        assert!(
            Instant::now() < deadline,
            "processes still running: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_normal_exit_stops_every_process_and_removes_the_folder() {
    let mut s = start();
    assert!(s.pids.iter().all(|&p| alive(p)));
    assert!(s.kubeconfig.exists());
    kill(Pid::from_raw(s.child.id() as i32), Signal::SIGTERM).unwrap();
    assert!(s.child.wait().unwrap().success());
    wait_until_gone(&s.pids);
    let root = s.kubeconfig.parent().unwrap();
    assert!(!root.exists(), "{} left behind", root.display());
}

#[test]
fn a_killed_harness_takes_its_processes_with_it() {
    let mut s = start();
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    wait_until_gone(&s.pids);
    // No exit hook runs on SIGKILL; the folder is all that remains.
    let _ = std::fs::remove_dir_all(s.kubeconfig.parent().unwrap());
}

#[test]
fn a_missing_asset_fails_loudly_with_the_way_to_get_it() {
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_captf-testenv"))
        .env("KUBEBUILDER_ASSETS", empty.path())
        .env_remove("USE_EXISTING_CLUSTER")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("test asset etcd not found")
            && stderr.contains("hack/test-assets.sh")
            && stderr.contains("KUBEBUILDER_ASSETS"),
        "{stderr}"
    );
}
