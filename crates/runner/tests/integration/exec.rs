//! Process supervision: exit codes, captured output, graceful stop.

use std::path::Path;
use std::time::{Duration, Instant};

use captf_runner::exec::{Invocation, StopSignal, run};
use captf_runner::redact::Redactor;
use captf_runner::steps::Stdout;

fn inv<'a>(script: &str, env: &'a [(String, String)], stop_timeout: Duration) -> Invocation<'a> {
    Invocation {
        program: "/bin/sh",
        args: vec!["-c".to_owned(), script.to_owned()],
        cwd: Path::new("/"),
        env,
        stdout: Stdout::CaptureOnly,
        stop_timeout,
    }
}

#[tokio::test]
async fn exit_codes_output_and_environment() {
    let env = vec![("GREETING".to_owned(), "hello".to_owned())];
    let (_tx, stop) = StopSignal::new();
    let out = run(
        inv(
            "echo $GREETING; echo $HOME; echo oops >&2; exit 3",
            &env,
            Duration::from_secs(1),
        ),
        &Redactor::default(),
        stop,
    )
    .await;
    assert_eq!(out.exit, 3);
    // Only the given environment reaches the command.
    assert_eq!(out.stdout, "hello\n\n");
    assert_eq!(out.stderr_tail, "oops\n");
    assert!(!out.cancelled && out.exec_error.is_none());
}

#[tokio::test]
async fn a_command_that_cannot_start_exits_1() {
    let (_tx, stop) = StopSignal::new();
    let mut i = inv("", &[], Duration::from_secs(1));
    i.program = "/nonexistent/runtime";
    let out = run(i, &Redactor::default(), stop).await;
    assert_eq!(out.exit, 1);
    assert!(out.exec_error.unwrap().contains("could not start"));
}

#[tokio::test]
async fn the_stderr_tail_is_bounded() {
    let (_tx, stop) = StopSignal::new();
    let out = run(
        inv("i=0; while [ $i -lt 3000 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx >&2; i=$((i+1)); done; echo last >&2", &[], Duration::from_secs(1)),
        &Redactor::default(),
        stop,
    )
    .await;
    assert!(out.stderr_tail.len() <= 64 * 1024);
    assert!(out.stderr_tail.ends_with("last\n"));
}

#[tokio::test]
async fn a_stop_sends_sigterm_to_the_runtime_and_waits() {
    let (tx, stop) = StopSignal::new();
    let started = Instant::now();
    let redactor = Redactor::default();
    let work = run(
        inv(
            "trap 'echo got-term; exit 7' TERM; sleep 30 & wait",
            &[],
            Duration::from_secs(10),
        ),
        &redactor,
        stop,
    );
    let stopper = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        tx.send(true).unwrap();
    };
    let (out, ()) = tokio::join!(work, stopper);
    assert!(out.cancelled);
    assert_eq!(out.exit, 7, "the runtime exits by itself after SIGTERM");
    assert_eq!(out.stdout, "got-term\n");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_runtime_that_ignores_sigterm_is_killed_after_the_stop_timeout() {
    let (tx, stop) = StopSignal::new();
    let started = Instant::now();
    let redactor = Redactor::default();
    let work = run(
        inv(
            "trap '' TERM; sleep 30 & wait; sleep 30",
            &[],
            Duration::from_secs(1),
        ),
        &redactor,
        stop,
    );
    let stopper = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        tx.send(true).unwrap();
    };
    let (out, ()) = tokio::join!(work, stopper);
    let took = started.elapsed();
    assert!(out.cancelled);
    assert_eq!(out.exit, 1, "killed by a signal counts as exit 1");
    assert!(out.exec_error.unwrap().contains("signal 9"));
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(10),
        "{took:?}"
    );
}

#[tokio::test]
async fn logged_lines_are_redacted_but_captured_output_is_kept() {
    let (_tx, stop) = StopSignal::new();
    let mut i = inv("echo token=abc-secret-123", &[], Duration::from_secs(1));
    i.stdout = Stdout::CaptureAndLog;
    let out = run(i, &Redactor::new(["abc-secret-123"]), stop).await;
    // Parsing needs the real bytes; only what is printed is masked.
    assert_eq!(out.stdout, "token=abc-secret-123\n");
}
