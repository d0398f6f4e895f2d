//! The manager binary as its own process, started the way a Deployment
//! would start it (flags only, out of cluster through the test control
//! plane's kubeconfig), so a test can SIGKILL it: nothing it held in memory
//! survives, and nothing runs after the signal.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use captf_testenv::TestEnv;

pub struct ManagerProcess {
    child: Child,
    log: PathBuf,
}

impl ManagerProcess {
    /// Starts a manager for `namespace`, its log appended to `log`.
    pub fn spawn(env: &TestEnv, namespace: &str, log: &Path) -> ManagerProcess {
        let kubeconfig = env
            .kubeconfig()
            .expect("a local control plane with a kubeconfig");
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_manager"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--namespace={namespace}"))
            .arg(format!("--runner-image={}", super::manager_ref(namespace)))
            .args([
                "--health-addr=127.0.0.1:0",
                "--webhook-port=0",
                "--diagnostics-address=0",
            ])
            .env("RUST_LOG", "warn,captf_manager=info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("starting the manager binary");
        ManagerProcess {
            child,
            log: log.to_owned(),
        }
    }

    /// SIGKILL, and waits until the process is gone.
    pub fn kill(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ManagerProcess {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            for line in tail.into_iter().rev() {
                eprintln!("[manager] {line}");
            }
        }
    }
}
