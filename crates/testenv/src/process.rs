//! One control-plane process: started with its output in a log file, tied to
//! the life of the test process, stopped gracefully and then by force.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("starting {name} ({path}): {source}")]
    Spawn {
        name: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("creating log file {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug)]
pub struct Process {
    pub name: String,
    pub log: PathBuf,
    child: Child,
}

impl Process {
    /// Starts `binary args...` with stdout and stderr in `<log_dir>/<name>.log`.
    ///
    /// The child gets SIGKILL if the thread that started it ends, so a test
    /// binary that dies abruptly leaves nothing running; callers start
    /// processes from a thread that lives as long as the test process.
    pub fn start(
        name: &str,
        binary: &Path,
        args: &[String],
        log_dir: &Path,
    ) -> Result<Process, ProcessError> {
        let log = log_dir.join(format!("{name}.log"));
        let out = File::create(&log).map_err(|source| ProcessError::Log {
            path: log.clone(),
            source,
        })?;
        let err = out.try_clone().map_err(|source| ProcessError::Log {
            path: log.clone(),
            source,
        })?;
        let mut cmd = Command::new(binary);
        cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
        set_parent_death_signal(&mut cmd);
        let child = cmd.spawn().map_err(|source| ProcessError::Spawn {
            name: name.to_owned(),
            path: binary.to_owned(),
            source,
        })?;
        Ok(Process {
            name: name.to_owned(),
            log,
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM, then SIGKILL after `grace`; reaps the process.
    pub fn stop(&mut self, grace: Duration) {
        if self.exited().is_some() {
            return;
        }
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The last `lines` lines of the process's log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }
}

impl Drop for Process {
    /// A process is never left behind by a start that failed half-way.
    fn drop(&mut self) {
        self.stop(std::time::Duration::from_secs(2));
    }
}

/// The last `lines` lines of a file (empty when unreadable).
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[allow(unsafe_code)]
fn set_parent_death_signal(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent;
    // it is the only call made between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
}
