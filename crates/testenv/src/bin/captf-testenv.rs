//! Starts the test control plane outside of tests (for a local demo or a
//! debugging session) and keeps it running until SIGINT or SIGTERM, then
//! stops it and removes its folder.
//!
//! Prints `KUBECONFIG=<path>` and `PIDS=<etcd> <apiserver> <controller-manager>`
//! once everything is ready.

use captf_testenv::TestEnv;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // Handlers first: a stop may come the moment "ready" is printed.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing the SIGTERM handler");
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .expect("installing the SIGINT handler");
    let env = TestEnv::get().await;
    let kubeconfig = env
        .kubeconfig()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let pids: Vec<String> = env.pids().iter().map(u32::to_string).collect();
    println!("KUBECONFIG={kubeconfig}");
    println!("PIDS={}", pids.join(" "));
    println!("ready; stop with Ctrl-C");

    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    // exit() runs the harness's exit hook, which stops the control plane.
    std::process::exit(0);
}
