//! A converged object logs nothing at info: over its resyncs (quiet passes)
//! and over a full pass that finds nothing due (woken here by a write to
//! its state Secret from outside the manager), the manager writes no line
//! at info or above. A decision that starts a Job is what info is for.
//!
//! The binary installs its own log subscriber, which captures every line
//! the manager writes at the filter the shipped binary uses (`info`).
//!
//! Cost: beside the passes themselves, one annotation patch of the state
//! Secret.

#[path = "integration/support/mod.rs"]
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use captf_api::TerraformMachinePool;
use captf_manager::names::WorkloadKind;
use captf_testenv::{TestEnv, eventually};
use serde_json::json;
use support::pools::*;
use support::touch::touch_state;
use support::*;

/// Every line the subscriber wrote.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn take(&self) -> String {
        String::from_utf8_lossy(&std::mem::take(&mut *self.0.lock().unwrap())).into_owned()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber before the manager's test helper can
/// install its own (theirs is then refused and ours stays).
fn capture_logs() -> Captured {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "warn,captf_manager=info",
        ))
        .init();
    captured
}

/// Lines at info or above from the manager's own modules.
fn manager_lines(logs: &str) -> Vec<&str> {
    logs.lines()
        .filter(|l| l.contains("captf_manager"))
        .filter(|l| {
            [" INFO ", " WARN ", " ERROR "]
                .iter()
                .any(|lvl| l.contains(lvl))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converged_pool_logs_nothing_at_info_over_its_resyncs_and_a_pass_with_nothing_due() {
    let logs = capture_logs();
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    install_noop_modules(env, &ns, tmp.path()).await;
    let sync = Duration::from_secs(5);
    let manager = start_manager_with(ns.client(), ns.name(), |c| c.sync_period = sync);
    // Refreshes an hour and drift checks a day apart: nothing falls due in
    // the window.
    bring_up_driven(
        &ns,
        1,
        json!({}),
        json!({"membershipRefreshIntervalSeconds": 3600, "drift": {"intervalSeconds": 86400}}),
        Driver::ByHand,
    )
    .await;
    wait_pool(&ns, "the pool Ready", 300, |p| {
        is(p, "Ready", "True") && ids(p).len() == 1
    })
    .await;
    // The bring-up's own lines (its decisions started Jobs) are info.
    eventually("the bring-up to settle", 120, || async {
        let pool = ns.api::<TerraformMachinePool>().get("pool-a").await.ok()?;
        let idle = pool.status.as_ref()?.workspace.active_job.is_none();
        let before = manager.passes.snapshot();
        tokio::time::sleep(2 * sync).await;
        (idle && before == manager.passes.snapshot()).then_some(())
    })
    .await;
    let bring_up = logs.take();
    assert!(
        manager_lines(&bring_up)
            .iter()
            .any(|l| l.contains("decided")),
        "the bring-up's decisions to start Jobs are logged at info:\n{bring_up}"
    );

    // Three sync periods of resyncs, then a full pass with nothing due.
    let quiet_before = manager.quiet_passes.snapshot();
    tokio::time::sleep(3 * sync).await;
    let key = format!("{}/{}/pool-a", WorkloadKind::MachinePool.kind(), ns.name());
    touch_state(
        &ns,
        &manager,
        WorkloadKind::MachinePool,
        "pool-a",
        Duration::from_secs(2),
    )
    .await;

    assert!(
        manager.quiet_passes.snapshot().get(&key) > quiet_before.get(&key),
        "the window held resyncs of the pool"
    );
    let window = logs.take();
    assert_eq!(
        manager_lines(&window),
        Vec::<&str>::new(),
        "a converged pool logged at info"
    );
}
