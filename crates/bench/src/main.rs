//! `captf-bench`: what N machine pools cost. Starts the local control plane,
//! the node agent and the manager binary (build it with `--release`),
//! creates N TerraformMachinePools spread over clusters and namespaces,
//! and prints: time to all Ready, Jobs run, the manager's peak and steady
//! memory, API requests by verb and resource (the manager's own count and
//! the apiserver's), from create to Ready and per converged minute next to
//! the minimum the scheduled Jobs need, passes per watch event, and the
//! latency from a spec change to its Job's creation.

mod figures;
mod load;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use captf_demo::{bins, images};
use captf_testenv::TestEnv;
use captf_testenv::process::Process;
use clap::Parser;
use figures::{Converged, Scrape, delta, percentile, top_lines};

const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

#[derive(Debug, Parser, Clone)]
#[command(
    version,
    about = "Measure the manager with N machine pools on the local control plane"
)]
pub struct Args {
    /// TerraformMachinePools to create.
    #[arg(long, default_value_t = 10)]
    pools: usize,
    /// Clusters they are spread over [default: pools / 10, at least 1].
    #[arg(long)]
    clusters: Option<usize>,
    /// Namespaces the clusters are spread over.
    #[arg(long, default_value_t = 3)]
    namespaces: usize,
    /// Membership refresh interval of every pool (15s .. 24h).
    #[arg(long, default_value = "60s", value_parser = bins::parse_duration)]
    refresh_interval: Duration,
    /// The manager's --drift-default-interval.
    #[arg(long, default_value = "30m", value_parser = bins::parse_duration)]
    drift_interval: Duration,
    /// The manager's --sync-period (every object is resynced this often).
    #[arg(long, default_value = "600s", value_parser = bins::parse_duration)]
    sync_period: Duration,
    /// How long the converged window lasts.
    #[arg(long, default_value = "120s", value_parser = bins::parse_duration)]
    measure: Duration,
    /// Spec changes timed to their Job's creation [default: min(pools, 100)].
    #[arg(long)]
    changes: Option<usize>,
    /// Time between two timed spec changes (spaced so the latency of one
    /// change is measured, not the queue of a burst).
    #[arg(long, default_value = "2s", value_parser = bins::parse_duration)]
    change_every: Duration,
    /// Pools created at a time: the next wave comes once these are Ready
    /// (without Job slots, a thousand Jobs at once would each run OpenTofu
    /// at the same time on this machine).
    #[arg(long, default_value_t = 50)]
    wave: usize,
    /// How long everything has to become Ready.
    #[arg(long, default_value = "60m", value_parser = bins::parse_duration)]
    timeout: Duration,
    /// The manager's --kube-api-qps and --kube-api-burst.
    #[arg(long, default_value_t = 100.0)]
    kube_api_qps: f64,
    #[arg(long, default_value_t = 200)]
    kube_api_burst: u32,
    /// The manager's --terraformmachinepool-concurrency.
    #[arg(long, default_value_t = 10)]
    concurrency: u16,
    /// Folder holding `runner` and `manager` [default: this executable's].
    #[arg(long)]
    bin_dir: Option<PathBuf>,
}

impl Args {
    fn clusters(&self) -> usize {
        self.clusters
            .unwrap_or(self.pools / 10)
            .clamp(1, self.pools.max(1))
    }

    fn namespaces(&self) -> usize {
        self.namespaces.clamp(1, self.clusters())
    }

    fn changes(&self) -> usize {
        self.changes.unwrap_or(self.pools.min(100)).min(self.pools)
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("captf-bench: building the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(run(&args)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("captf-bench: {e}");
            1
        }
    };
    drop(runtime);
    // exit() runs the harness's exit hook, which stops the control plane.
    std::process::exit(code)
}

fn say(start: Instant, line: &str) {
    eprintln!("[{:>5}s] {line}", start.elapsed().as_secs());
}

/// The manager's memory now and at its peak (VmRSS, VmHWM) in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mib = |f| figures::status_kib(&status, f).unwrap_or(0) as f64 / 1024.0;
    (mib("VmRSS"), mib("VmHWM"))
}

const FAMILIES: &[&str] = &[
    "captf_api_requests_total",
    "captf_jobs_total",
    "captf_watch_events_total",
    "controller_runtime_reconcile_total",
    "apiserver_request_total",
];

/// The manager's metrics and the apiserver's, in one scrape.
async fn scrape(client: &kube::Client, diagnostics: &str) -> Result<Scrape, String> {
    let manager = load::http_get(diagnostics, "/metrics").await?;
    let req = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let apiserver = client
        .request_text(req)
        .await
        .map_err(|e| format!("reading the apiserver's metrics: {e}"))?;
    Ok(Scrape::parse(&format!("{manager}\n{apiserver}"), FAMILIES))
}

fn requests(s: &Scrape) -> std::collections::BTreeMap<String, f64> {
    let mut by = s.by("captf_api_requests_total", &["verb", "resource"]);
    by.retain(|k, _| !k.starts_with("WATCH "));
    by
}

fn jobs(s: &Scrape) -> f64 {
    s.sum("captf_jobs_total", &[])
}

async fn run(args: &Args) -> Result<(), String> {
    let start = Instant::now();
    let bin_dir = bins::locate(args.bin_dir.as_deref())?;
    // The runner and the manager run inside the image: static builds.
    bins::check_static(&bin_dir)?;
    let tofu = captf_testenv::assets::tofu().map_err(|e| e.to_string())?;
    let work = tempfile::Builder::new()
        .prefix("captf-bench-")
        .tempdir()
        .map_err(|e| format!("creating the work folder: {e}"))?;
    let tofu_version =
        captf_testenv::assets::version("OPENTOFU_VERSION").map_err(|e| e.to_string())?;
    let prepared = images::prepare(
        &bin_dir.join("manager"),
        &bin_dir.join("runner"),
        &Path::new(WORKSPACE).join("modules/noop"),
        &tofu,
        tofu_version,
    )?;
    say(start, "starting the control plane");
    let env = TestEnv::try_get().await?;
    let client = env.client();
    // The Jobs run on the real node, from the images the release recipes
    // write (each Job asks for little: `load::job_policy`).
    let node = env.try_real_node().await?;
    say(
        start,
        &format!("real node Ready in {:.1} s", node.started_in.as_secs_f64()),
    );
    for (reference, spec) in &prepared {
        node.try_import(spec, reference)?;
    }
    captf_demo::kube_io::install_runner_role(&client, "captf-bench").await?;
    let health = bins::free_loopback_addr()?;
    let diagnostics = bins::free_loopback_addr()?;
    let kubeconfig = env
        .kubeconfig()
        .ok_or("the control plane has no kubeconfig")?;
    let mut manager = start_manager(
        args,
        &bin_dir,
        kubeconfig,
        &health,
        &diagnostics,
        work.path(),
    )?;
    load::wait_ready(&health).await?;
    say(
        start,
        &format!(
            "manager ready; creating {} pools in {} clusters over {} namespaces",
            args.pools,
            args.clusters(),
            args.namespaces
        ),
    );

    let result = measure(args, &client, &diagnostics, manager.pid(), start).await;
    if result.is_err() {
        eprintln!("----- manager log -----\n{}", manager.log_tail(40));
    }
    manager.stop(Duration::from_secs(25));
    result
}

fn start_manager(
    args: &Args,
    bin_dir: &Path,
    kubeconfig: &Path,
    health: &str,
    diagnostics: &str,
    work: &Path,
) -> Result<Process, String> {
    let argv = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--runner-image={}", images::MANAGER_IMAGE),
        format!("--health-addr={health}"),
        "--webhook-port=0".to_owned(),
        format!("--diagnostics-address={diagnostics}"),
        "--insecure-diagnostics".to_owned(),
        format!(
            "--drift-default-interval={}s",
            args.drift_interval.as_secs()
        ),
        format!("--sync-period={}s", args.sync_period.as_secs()),
        format!("--kube-api-qps={}", args.kube_api_qps),
        format!("--kube-api-burst={}", args.kube_api_burst),
        format!("--terraformmachinepool-concurrency={}", args.concurrency),
        "--logging-format=json".to_owned(),
    ];
    Process::start("manager", &bin_dir.join("manager"), &argv, work).map_err(|e| e.to_string())
}

async fn measure(
    args: &Args,
    client: &kube::Client,
    diagnostics: &str,
    pid: u32,
    start: Instant,
) -> Result<(), String> {
    let layout = load::Layout::new(args.clusters(), args.namespaces());
    let jobs_seen = load::JobLog::watch(client.clone());
    let (rss_idle, _) = memory(pid);
    let before = scrape(client, diagnostics).await?;
    let created = Instant::now();
    load::create_clusters(client, &layout).await?;
    let mut peak = 0.0f64;
    let wave = args.wave.max(1);
    for from in (0..args.pools).step_by(wave) {
        let to = (from + wave).min(args.pools);
        load::create_pools(client, &layout, from..to, args.refresh_interval).await?;
        load::wait_ready_pools(client, &layout, to, args.timeout, || {
            peak = peak.max(memory(pid).1);
        })
        .await?;
        say(start, &format!("{to} pools Ready"));
    }
    let to_ready = created.elapsed();
    let at_ready = scrape(client, diagnostics).await?;
    say(
        start,
        &format!("all Ready after {:.1}s", to_ready.as_secs_f64()),
    );

    // Converged: let the first refreshes pass, then measure a window.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let window_start = scrape(client, diagnostics).await?;
    tokio::time::sleep(args.measure).await;
    let window_end = scrape(client, diagnostics).await?;
    let (rss_steady, hwm) = memory(pid);
    let converged = Converged {
        pools: args.pools as u64,
        window: args.measure,
        requests: delta(&requests(&window_start), &requests(&window_end))
            .values()
            .sum(),
        jobs: jobs(&window_end) - jobs(&window_start),
    };

    say(start, &format!("timing {} spec changes", args.changes()));
    let latencies = load::time_spec_changes(
        client,
        &layout,
        args.changes(),
        args.change_every,
        &jobs_seen,
    )
    .await?;
    let after = scrape(client, diagnostics).await?;
    let (_, hwm_end) = memory(pid);

    report(&Report {
        args,
        to_ready,
        rss: (rss_idle, rss_steady, peak.max(hwm).max(hwm_end)),
        before: &before,
        at_ready: &at_ready,
        window: (&window_start, &window_end),
        after: &after,
        converged,
        latencies: &latencies,
    });
    Ok(())
}

struct Report<'a> {
    args: &'a Args,
    to_ready: Duration,
    /// Idle (before any object), steady (after the window), peak, MiB.
    rss: (f64, f64, f64),
    before: &'a Scrape,
    at_ready: &'a Scrape,
    window: (&'a Scrape, &'a Scrape),
    after: &'a Scrape,
    converged: Converged,
    latencies: &'a [Duration],
}

fn report(r: &Report<'_>) {
    let a = r.args;
    let create = delta(&requests(r.before), &requests(r.at_ready));
    let window = delta(&requests(r.window.0), &requests(r.window.1));
    let apiserver = |s: &Scrape| s.by("apiserver_request_total", &["verb", "resource"]);
    let apiserver_window = delta(&apiserver(r.window.0), &apiserver(r.window.1));
    let events = r.window.1.sum("captf_watch_events_total", &[])
        - r.window.0.sum("captf_watch_events_total", &[]);
    let woke = r
        .window
        .1
        .sum("captf_watch_events_total", &["woke=\"true\""])
        - r.window
            .0
            .sum("captf_watch_events_total", &["woke=\"true\""]);
    let passes = r.window.1.sum("controller_runtime_reconcile_total", &[])
        - r.window.0.sum("controller_runtime_reconcile_total", &[]);
    let c = &r.converged;
    let ms = |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{} ms", d.as_millis()));
    println!(
        "## {} pools, {} clusters, {} namespaces",
        a.pools,
        a.clusters(),
        a.namespaces
    );
    println!();
    println!(
        "refresh interval {}s, drift interval {}s, measured window {}s, client {} qps / {} burst, pool concurrency {}, created in waves of {}, a timed spec change every {} ms",
        a.refresh_interval.as_secs(),
        a.drift_interval.as_secs(),
        a.measure.as_secs(),
        a.kube_api_qps,
        a.kube_api_burst,
        a.concurrency,
        a.wave,
        a.change_every.as_millis()
    );
    println!();
    println!("| figure | value |");
    println!("| --- | --- |");
    println!("| time to all Ready | {:.1} s |", r.to_ready.as_secs_f64());
    println!(
        "| Jobs run, create to Ready | {:.0} |",
        jobs(r.at_ready) - jobs(r.before)
    );
    println!(
        "| manager RSS idle / steady / peak | {:.1} / {:.1} / {:.1} MiB |",
        r.rss.0, r.rss.1, r.rss.2
    );
    println!(
        "| manager requests, create to Ready | {:.0} ({:.1} per pool) |",
        create.values().sum::<f64>(),
        create.values().sum::<f64>() / a.pools as f64
    );
    println!(
        "| converged: requests per pool-minute | {:.2} |",
        c.per_pool_minute()
    );
    println!(
        "| converged: minimum of the scheduled Jobs | {:.2} ({:.0} Jobs x {}) |",
        c.minimum_per_pool_minute(),
        c.jobs,
        figures::REQUESTS_PER_JOB
    );
    println!("| converged: requests / minimum | {:.2} |", c.ratio());
    println!(
        "| converged: watch events, woke, passes | {events:.0}, {woke:.0}, {passes:.0} ({:.2} passes per event) |",
        if events > 0.0 { passes / events } else { 0.0 }
    );
    println!(
        "| spec change to Job created, p50 / p99 ({} changes) | {} / {} |",
        r.latencies.len(),
        ms(percentile(r.latencies, 50.0)),
        ms(percentile(r.latencies, 99.0))
    );
    println!(
        "| apiserver requests in the window, all clients | {:.0} |",
        apiserver_window.values().sum::<f64>()
    );
    println!();
    println!(
        "Manager requests, create to Ready: {}",
        top_lines(&create, 12).join("; ")
    );
    println!();
    println!(
        "Manager requests, converged window: {}",
        top_lines(&window, 12).join("; ")
    );
    println!();
    println!(
        "Apiserver requests (every client), converged window: {}",
        top_lines(&apiserver_window, 12).join("; ")
    );
    let total = requests(r.after).values().sum::<f64>();
    println!();
    println!("Manager requests in the whole run: {total:.0}");
}
