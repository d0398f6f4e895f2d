//! Running one runtime command under supervision: its own process group,
//! output streamed to the log (redacted) and optionally captured, and a
//! graceful stop when the runner is asked to stop.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::watch;

use crate::redact::Redactor;
use crate::result::truncate_keep_end;
use crate::steps::Stdout;

/// How much of a step's stderr is kept for the failure summary.
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// What a finished (or never started) command left behind.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The exit code; 1 when the command could not start or died of a signal.
    pub exit: i32,
    /// Captured standard output (empty unless capture was asked for).
    pub stdout: String,
    /// The last 64 KiB of standard error.
    pub stderr_tail: String,
    /// Why the command could not start or how it died.
    pub exec_error: Option<String>,
    pub elapsed: Duration,
    /// The stop request arrived while this command ran.
    pub cancelled: bool,
}

/// A stop request shared by the runner's signal handler and every step.
#[derive(Debug, Clone)]
pub struct StopSignal(watch::Receiver<bool>);

impl StopSignal {
    pub fn new() -> (watch::Sender<bool>, StopSignal) {
        let (tx, rx) = watch::channel(false);
        (tx, StopSignal(rx))
    }

    pub fn is_stopped(&self) -> bool {
        *self.0.borrow()
    }

    async fn stopped(&mut self) {
        // An error means the sender is gone: no stop can come any more.
        if self.0.wait_for(|s| *s).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A command to run.
pub struct Invocation<'a> {
    pub program: &'a str,
    pub args: Vec<String>,
    pub cwd: &'a Path,
    pub env: &'a [(String, String)],
    pub stdout: Stdout,
    pub stop_timeout: Duration,
}

/// Runs `inv` to completion. On a stop request the runtime alone gets
/// SIGTERM (its provider plugins are left to it, so it can save state and
/// release the lock); the whole group is killed only after the stop timeout.
pub async fn run(inv: Invocation<'_>, redactor: &Redactor, mut stop: StopSignal) -> Outcome {
    let started = Instant::now();
    let mut cmd = Command::new(inv.program);
    cmd.args(&inv.args)
        .current_dir(inv.cwd)
        .env_clear()
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Outcome {
                exit: 1,
                exec_error: Some(format!("could not start {}: {e}", inv.program)),
                elapsed: started.elapsed(),
                ..Outcome::default()
            };
        }
    };
    let pid = child.id().map(|p| Pid::from_raw(p as i32));
    let out_pipe = child.stdout.take().expect("stdout is piped");
    let err_pipe = child.stderr.take().expect("stderr is piped");
    let mode = inv.stdout;
    let out_redactor = redactor.clone();
    let stdout_task = tokio::spawn(async move {
        let mut captured = Vec::new();
        let mut log = tokio::io::stdout();
        let mut reader = BufReader::new(out_pipe);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).await.unwrap_or(0) > 0 {
            if mode != Stdout::Log {
                captured.extend_from_slice(&line);
            }
            if mode != Stdout::CaptureOnly {
                log_line(&mut log, &out_redactor, &line).await;
            }
            line.clear();
        }
        String::from_utf8_lossy(&captured).into_owned()
    });
    let err_redactor = redactor.clone();
    let stderr_task = tokio::spawn(async move {
        let mut tail = String::new();
        let mut log = tokio::io::stderr();
        let mut reader = BufReader::new(err_pipe);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).await.unwrap_or(0) > 0 {
            log_line(&mut log, &err_redactor, &line).await;
            tail.push_str(&String::from_utf8_lossy(&line));
            if tail.len() > 2 * STDERR_TAIL_BYTES {
                tail = truncate_keep_end(&tail, STDERR_TAIL_BYTES).to_owned();
            }
            line.clear();
        }
        truncate_keep_end(&tail, STDERR_TAIL_BYTES).to_owned()
    });

    let mut cancelled = stop.is_stopped();
    let status = if cancelled {
        graceful_stop(&mut child, pid, inv.stop_timeout).await
    } else {
        tokio::select! {
            s = child.wait() => s,
            _ = stop.stopped() => {
                cancelled = true;
                graceful_stop(&mut child, pid, inv.stop_timeout).await
            }
        }
    };
    // The group may still hold plugins that keep the pipes open.
    if let Some(pid) = pid {
        let _ = killpg(pid, Signal::SIGKILL);
    }
    let stdout = stdout_task.await.unwrap_or_default();
    let stderr_tail = stderr_task.await.unwrap_or_default();
    let (exit, exec_error) = match status {
        Ok(s) => match s.code() {
            Some(code) => (code, None),
            None => {
                use std::os::unix::process::ExitStatusExt;
                (
                    1,
                    Some(format!(
                        "killed by signal {}",
                        s.signal().map(|n| n.to_string()).unwrap_or_default()
                    )),
                )
            }
        },
        Err(e) => (1, Some(format!("waiting for {}: {e}", inv.program))),
    };
    Outcome {
        exit,
        stdout,
        stderr_tail,
        exec_error,
        elapsed: started.elapsed(),
        cancelled,
    }
}

async fn graceful_stop(
    child: &mut tokio::process::Child,
    pid: Option<Pid>,
    stop_timeout: Duration,
) -> std::io::Result<std::process::ExitStatus> {
    if let Some(pid) = pid {
        let _ = kill(pid, Signal::SIGTERM);
    }
    match tokio::time::timeout(stop_timeout, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            if let Some(pid) = pid {
                let _ = killpg(pid, Signal::SIGKILL);
            }
            child.wait().await
        }
    }
}

async fn log_line<W: AsyncWrite + Unpin>(out: &mut W, redactor: &Redactor, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let text = redactor.redact(&text);
    let _ = out.write_all(text.as_bytes()).await;
    let _ = out.flush().await;
}
