//! `captf-demo`: starts a local control plane, a real node beside it (the
//! kubelet, containerd and runc, kube-proxy and the scheduler: the Jobs
//! run there), Cluster API's controllers, the node agent (the stand-in
//! kubelets that register a Node per pool member) and the manager binary, applies the
//! example Cluster, TerraformCluster, MachinePool and TerraformMachinePool,
//! shows their conditions as they converge, and prints them as `kubectl get`
//! does, with the MachinePool's own view of its members.
//! Exits 0 only when every TerraformCluster and TerraformMachinePool is
//! Ready. With `--keep`, everything stays up for exploring until Ctrl-C.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use captf_demo::progress::{self, Tracker};
use captf_demo::{bins, capi, examples, images, install, kube_io};
use captf_testenv::TestEnv;
use captf_testenv::process::Process;
use clap::Parser;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The workspace this binary was built from: the default home of the
/// examples and the no-op modules.
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
/// Field manager of the example objects.
const FIELD_MANAGER: &str = "captf-demo";
/// Label of every Pod and Job the manager runs.
const JOB_SELECTOR: &str = "captf.io/managed=true";
/// How long the manager has to stop (its own graceful shutdown is 20 s).
const MANAGER_STOP_GRACE: Duration = Duration::from_secs(25);
const MANAGER_READY_TIMEOUT: Duration = Duration::from_secs(60);
const LOG_TAIL_LINES: usize = 40;
/// How long Cluster API has to match the pools' members to Nodes once our
/// objects are Ready (its MachinePool controller acts within seconds).
const MATCH_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Run CAPTF locally: control plane, a real node, manager and an example cluster with a machine pool"
)]
struct Args {
    /// Leave everything running afterwards, for exploring with the printed
    /// KUBECONFIG, until Ctrl-C.
    #[arg(long)]
    keep: bool,
    /// How long the example objects have to become Ready (90s, 10m, 1h).
    #[arg(long, default_value = "10m", value_parser = bins::parse_duration)]
    timeout: Duration,
    /// Folder holding the static `runner` and `manager` binaries (the
    /// manager image the node runs has no libc) [default: the folder of
    /// this executable].
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Folder of the example objects to apply.
    #[arg(long, default_value_os_t = Path::new(WORKSPACE).join("examples/demo"))]
    examples: PathBuf,
    /// Folder of the no-op modules the module images are made of.
    #[arg(long, default_value_os_t = Path::new(WORKSPACE).join("modules/noop"))]
    modules: PathBuf,
    /// Install mode: the provider from this `infrastructure-components.yaml`
    /// (`make release`), its manager pod run on the real node from the
    /// image layout of `--manager-image`, rather than the manager binary.
    #[arg(long, requires = "manager_image")]
    install: Option<PathBuf>,
    /// The manager image's OCI layout for `--install` (`out/images/captf-manager`).
    #[arg(long, requires = "install")]
    manager_image: Option<PathBuf>,
}

/// Why the demo ended early.
enum Stop {
    Failed(String),
    Interrupted,
}

impl From<String> for Stop {
    fn from(s: String) -> Self {
        Stop::Failed(s)
    }
}

struct Signals {
    int: Signal,
    term: Signal,
}

impl Signals {
    fn new() -> Result<Self, String> {
        let make = |k| signal(k).map_err(|e| format!("installing a signal handler: {e}"));
        Ok(Signals {
            int: make(SignalKind::interrupt())?,
            term: make(SignalKind::terminate())?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}

/// Prints a progress line with the time since `start`.
fn say(start: Instant, line: &str) {
    println!("[{:>4}s] {line}", start.elapsed().as_secs());
}

/// What runs, for the cleanup at the end.
struct Running {
    work_dir: PathBuf,
    kubeconfig: Option<PathBuf>,
    manager: Option<Process>,
    /// Install mode: the manager runs as the provider's Deployment.
    installed: Option<kube::Client>,
}

impl Running {
    fn manager_log_tail(&self) -> String {
        self.manager
            .as_ref()
            .map(|m| m.log_tail(LOG_TAIL_LINES))
            .unwrap_or_default()
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("captf-demo: building the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(args));
    drop(runtime);
    // exit() runs the test harness's exit hook, which stops the real node
    // (and puts the host back) and the control plane, and removes their
    // folders.
    std::process::exit(code)
}

async fn run(args: Args) -> i32 {
    let mut signals = match Signals::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("captf-demo: {e}");
            return 1;
        }
    };
    let mut running = None;
    let result = demo(&args, &mut signals, &mut running).await;
    let interrupted = matches!(result, Err(Stop::Interrupted));
    let ok = result.is_ok();
    match result {
        Ok(()) => {}
        Err(Stop::Interrupted) => println!("\ninterrupted"),
        Err(Stop::Failed(why)) => {
            eprintln!("\ncaptf-demo: {why}");
            if let Some(r) = &running {
                let tail = r.manager_log_tail();
                if !tail.is_empty() {
                    eprintln!("\n----- manager log (last {LOG_TAIL_LINES} lines) -----\n{tail}");
                }
            }
        }
    }
    let Some(mut r) = running else {
        return if ok { 0 } else { 1 };
    };
    if args.keep && !interrupted {
        if let Some(kubeconfig) = &r.kubeconfig {
            println!("\nEverything keeps running. To explore:\n");
            println!("  export KUBECONFIG={}", kubeconfig.display());
            println!("  kubectl get cluster-api -A");
            println!("\nStop with Ctrl-C.");
        }
        signals.recv().await;
        println!("\nstopping");
    }
    if let Some(m) = r.manager.as_mut() {
        m.stop(MANAGER_STOP_GRACE);
    }
    if let Some(client) = &r.installed
        && let Err(e) = uninstall_manager(client).await
    {
        eprintln!("captf-demo: stopping the manager pod: {e}");
    }
    if ok {
        let _ = std::fs::remove_dir_all(&r.work_dir);
    } else {
        println!(
            "the work folder with the manager log stays: {}",
            r.work_dir.display()
        );
    }
    if ok { 0 } else { 1 }
}

async fn demo(
    args: &Args,
    signals: &mut Signals,
    running: &mut Option<Running>,
) -> Result<(), Stop> {
    // The harness would connect to that cluster instead of starting one.
    if std::env::var("USE_EXISTING_CLUSTER").is_ok_and(|v| v.eq_ignore_ascii_case("true")) {
        return Err(Stop::Failed(
            "USE_EXISTING_CLUSTER=true: the demo always starts its own control plane; unset it"
                .to_owned(),
        ));
    }
    let objects = examples::read_dir(&args.examples)?;
    let targets = capi::infrastructure(&objects);
    if targets.is_empty() {
        return Err(Stop::Failed(format!(
            "{} defines no TerraformCluster or TerraformMachinePool to wait for",
            args.examples.display()
        )));
    }
    let namespace = objects
        .iter()
        .find_map(|o| o.pointer("/metadata/namespace").and_then(Value::as_str))
        .unwrap_or("default")
        .to_owned();
    let bin_dir = bins::locate(args.bin_dir.as_deref())?;
    bins::check_static(&bin_dir)?;
    let tofu = captf_testenv::assets::tofu().map_err(|e| e.to_string())?;
    let tofu_version =
        captf_testenv::assets::version("OPENTOFU_VERSION").map_err(|e| e.to_string())?;

    let work_dir = tempfile::Builder::new()
        .prefix("captf-demo-")
        .tempdir()
        .map_err(|e| format!("creating the work folder: {e}"))?
        .keep();
    *running = Some(Running {
        work_dir: work_dir.clone(),
        kubeconfig: None,
        manager: None,
        installed: None,
    });
    let start = Instant::now();
    say(start, &format!("work folder {}", work_dir.display()));
    let prepared = images::prepare(
        &bin_dir.join("manager"),
        &bin_dir.join("runner"),
        &args.modules,
        &tofu,
        tofu_version,
    )?;

    say(
        start,
        "starting the control plane (etcd, kube-apiserver, kube-controller-manager)",
    );
    let env = tokio::select! {
        env = TestEnv::try_get() => env?,
        _ = signals.recv() => return Err(Stop::Interrupted),
    };
    let kubeconfig = env
        .kubeconfig()
        .ok_or_else(|| "the control plane has no kubeconfig".to_owned())?
        .to_owned();
    running.as_mut().expect("set above").kubeconfig = Some(kubeconfig.clone());
    let client = env.client();
    let node = tokio::select! {
        node = env.try_real_node() => node?,
        _ = signals.recv() => return Err(Stop::Interrupted),
    };
    say(
        start,
        &format!(
            "real node {} Ready in {:.1} s (containerd, runc, the kubelet, kube-proxy, the scheduler)",
            node.name,
            node.started_in.as_secs_f64()
        ),
    );
    for (reference, spec) in &prepared {
        node.try_import(spec, reference)?;
        say(start, &format!("image {reference} in the node's runtime"));
    }

    say(
        start,
        &format!(
            "starting Cluster API v{} (core, kubeadm bootstrap, kubeadm control plane)",
            captf_testenv::assets::version("CLUSTER_API_VERSION").unwrap_or("?")
        ),
    );
    let cluster_api = tokio::select! {
        c = env.try_cluster_api() => c?,
        _ = signals.recv() => return Err(Stop::Interrupted),
    };
    say(
        start,
        "Cluster API ready; node agent registers a Node per pool member",
    );

    if let (Some(components), Some(layout)) = (&args.install, &args.manager_image) {
        let release = install::Release {
            components: components.clone(),
            manager_layout: layout.clone(),
        };
        let image = install::install(env, &release, &work_dir, FIELD_MANAGER).await?;
        running.as_mut().expect("set above").installed = Some(client.clone());
        say(
            start,
            &format!(
                "installed {} (manager image {image}); the real node runs Deployment {}/{}",
                components.display(),
                install::NAMESPACE,
                install::DEPLOYMENT
            ),
        );
        let (pod, node) = tokio::select! {
            ready = install::wait_pod_ready(&client, MANAGER_READY_TIMEOUT) => ready?,
            _ = signals.recv() => return Err(Stop::Interrupted),
        };
        say(
            start,
            &format!("manager pod {pod} Running on node {node}, its readiness probe passing"),
        );
        // The Service's endpoints follow the pod's readiness a moment later.
        let deadline = Instant::now() + Duration::from_secs(30);
        let denial = loop {
            match install::webhook_denial(&client, install::NAMESPACE).await {
                Ok(denial) => break denial,
                Err(e) if Instant::now() > deadline => return Err(Stop::Failed(e)),
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        };
        say(
            start,
            &format!("manager pod ready; its webhook refuses a root Job: {denial}"),
        );
    } else {
        kube_io::install_runner_role(&client, FIELD_MANAGER).await?;
        say(
            start,
            &format!(
                "installed ClusterRole {} and admission policy {}",
                captf_manager::rbac::RUNNER,
                captf_manager::runner_admission::RUNNER_CREATES
            ),
        );
        let health = bins::free_loopback_addr()?;
        let webhooks = captf_demo::webhooks::DemoWebhooks::prepare(&work_dir)?;
        let manager = start_manager(
            &bin_dir,
            &kubeconfig,
            &health,
            &work_dir,
            &webhooks.manager_args(),
        )?;
        let log = manager.log.clone();
        running.as_mut().expect("set above").manager = Some(manager);
        say(start, &format!("manager started, log: {}", log.display()));
        wait_manager_ready(running, &health, signals).await?;
        say(start, &format!("manager ready (health {health})"));
        let manifests = Path::new(WORKSPACE).join("config/webhook/manifests.yaml");
        let denial = webhooks.register(&client, &manifests).await?;
        say(
            start,
            &format!(
                "webhooks registered on port {}; its webhook refuses a root Job: {denial}",
                webhooks.port
            ),
        );
    }

    apply_examples(&client, &objects, cluster_api, start).await?;

    let converged = converge(
        &client,
        &namespace,
        &targets,
        running,
        signals,
        start,
        args.timeout,
    )
    .await;
    let converged = match converged {
        Ok(()) => wait_matched(&client, &namespace, running, signals, start).await,
        other => other,
    };
    // The tables show where things stand, also when they did not converge.
    if !matches!(converged, Err(Stop::Interrupted)) {
        captf_demo::summary::print_tables(&client, &namespace, &targets).await?;
    }
    converged
}

/// Deletes the manager Deployment and waits for its pods to stop, so the
/// manager process ends before the control plane does.
async fn uninstall_manager(client: &kube::Client) -> Result<(), String> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, DeleteParams, ListParams};
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), install::NAMESPACE);
    let _ = deployments
        .delete(install::DEPLOYMENT, &DeleteParams::foreground())
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), install::NAMESPACE);
    let selector = ListParams::default().labels(install::PROVIDER_PODS);
    let deadline = Instant::now() + MANAGER_STOP_GRACE + Duration::from_secs(10);
    while Instant::now() < deadline {
        match pods.list(&selector).await {
            Ok(list) if list.items.is_empty() => return Ok(()),
            Ok(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!(
        "the manager pods were still there after {}s",
        (MANAGER_STOP_GRACE + Duration::from_secs(10)).as_secs()
    ))
}

/// Starts the manager binary against the local control plane, its output
/// in `manager.log` of the work folder, serving its webhooks as `webhook`
/// says (`DemoWebhooks::manager_args`).
fn start_manager(
    bin_dir: &Path,
    kubeconfig: &Path,
    health: &str,
    work_dir: &Path,
    webhook: &[String],
) -> Result<Process, String> {
    let mut args = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--runner-image={}", images::MANAGER_IMAGE),
        format!("--health-addr={health}"),
    ];
    args.extend(webhook.iter().cloned());
    Process::start("manager", &bin_dir.join("manager"), &args, work_dir).map_err(|e| e.to_string())
}

/// Applies the example objects, then the `<cluster>-kubeconfig` Secret of
/// each Cluster: a control plane provider's part (the examples have none),
/// pointing at this control plane, which is the workload cluster too.
async fn apply_examples(
    client: &kube::Client,
    objects: &[Value],
    cluster_api: captf_testenv::ClusterApi,
    start: Instant,
) -> Result<(), String> {
    let name_of = |o: &Value| {
        format!(
            "{}/{}",
            o["kind"].as_str().unwrap_or_default(),
            o["metadata"]["name"].as_str().unwrap_or_default()
        )
    };
    let mut applied = Vec::new();
    for object in objects {
        applied.push(kube_io::apply(client, object, FIELD_MANAGER).await?);
        say(start, &format!("applied {}", name_of(object)));
    }
    for (namespace, name, uid) in capi::clusters(&applied)? {
        let mut secret = serde_json::to_value(cluster_api.kubeconfig_secret(&name, &uid))
            .map_err(|e| e.to_string())?;
        secret["apiVersion"] = "v1".into();
        secret["kind"] = "Secret".into();
        secret["metadata"]["namespace"] = namespace.into();
        kube_io::apply(client, &secret, FIELD_MANAGER).await?;
        say(
            start,
            &format!("as a control plane provider would: wrote Secret {name}-kubeconfig"),
        );
    }
    Ok(())
}

/// Waits until Cluster API has matched every MachinePool's members to
/// their Nodes (its own node matching, after our pool reported them).
async fn wait_matched(
    client: &kube::Client,
    namespace: &str,
    running: &mut Option<Running>,
    signals: &mut Signals,
    start: Instant,
) -> Result<(), Stop> {
    let pools = kube_io::resolve(client, "cluster.x-k8s.io/v1beta2", "MachinePool").await?;
    let machines = kube_io::resolve(client, "cluster.x-k8s.io/v1beta2", "Machine").await?;
    let deployments =
        kube_io::resolve(client, "cluster.x-k8s.io/v1beta2", "MachineDeployment").await?;
    let deadline = Instant::now() + MATCH_TIMEOUT;
    loop {
        check_manager(running)?;
        let listed = kube_io::list(client, &pools, namespace, "").await?;
        let listed_machines = kube_io::list(client, &machines, namespace, "").await?;
        let listed_deployments = kube_io::list(client, &deployments, namespace, "").await?;
        if listed.iter().all(capi::matched)
            && listed_machines.iter().all(capi::machine_matched)
            && listed_deployments.iter().all(capi::deployment_ready)
        {
            for mp in &listed {
                say(
                    start,
                    &format!(
                        "Cluster API matched MachinePool/{} to {} Nodes",
                        mp["metadata"]["name"].as_str().unwrap_or_default(),
                        mp["spec"]["replicas"]
                    ),
                );
            }
            say(
                start,
                &format!(
                    "Cluster API matched {} Machines to their Nodes",
                    listed_machines.len()
                ),
            );
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Stop::Failed(format!(
                "Cluster API did not match the MachinePools and Machines to Nodes within {}s",
                MATCH_TIMEOUT.as_secs()
            )));
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = signals.recv() => return Err(Stop::Interrupted),
        }
    }
}

fn check_manager(running: &mut Option<Running>) -> Result<(), Stop> {
    if let Some(m) = running.as_mut().and_then(|r| r.manager.as_mut())
        && let Some(status) = m.exited()
    {
        return Err(Stop::Failed(format!("the manager exited ({status})")));
    }
    Ok(())
}

/// True when `GET /readyz` on `addr` answers 200.
async fn ready(addr: &str) -> bool {
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return false;
    };
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut response = Vec::new();
    let read =
        tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut response)).await;
    read.is_ok() && (response.starts_with(b"HTTP/1.1 200") || response.starts_with(b"HTTP/1.0 200"))
}

async fn wait_manager_ready(
    running: &mut Option<Running>,
    addr: &str,
    signals: &mut Signals,
) -> Result<(), Stop> {
    let deadline = Instant::now() + MANAGER_READY_TIMEOUT;
    loop {
        check_manager(running)?;
        if ready(addr).await {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Stop::Failed(format!(
                "the manager did not answer /readyz on {addr} within {}s",
                MANAGER_READY_TIMEOUT.as_secs()
            )));
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            _ = signals.recv() => return Err(Stop::Interrupted),
        }
    }
}

/// Polls the infrastructure objects and the Jobs once a second, printing
/// what changed, until every object is Ready=True.
async fn converge(
    client: &kube::Client,
    namespace: &str,
    targets: &[(&'static str, String)],
    running: &mut Option<Running>,
    signals: &mut Signals,
    start: Instant,
    timeout: Duration,
) -> Result<(), Stop> {
    let mut kinds = Vec::new();
    for (kind, name) in targets {
        kinds.push((
            kube_io::resolve(client, captf_api::API_VERSION, kind).await?,
            *kind,
            name.as_str(),
        ));
    }
    let jobs = kube_io::resolve(client, "batch/v1", "Job").await?;
    let deadline = Instant::now() + timeout;
    let mut tracker = Tracker::default();
    let mut last = Vec::new();
    loop {
        check_manager(running)?;
        last.clear();
        for (kind, name, obj_name) in &kinds {
            if let Some(object) = kube_io::get(client, kind, namespace, obj_name).await? {
                for line in tracker.conditions(name, &object) {
                    say(start, &line);
                }
                last.push((*name, object));
            }
        }
        for job in kube_io::list(client, &jobs, namespace, JOB_SELECTOR).await? {
            if let Some(line) = tracker.job(&job) {
                say(start, &line);
            }
        }
        let all_ready = last.len() == kinds.len()
            && last
                .iter()
                .all(|(_, o)| progress::condition_status(o, "Ready") == Some("True"));
        if all_ready {
            say(start, "all infrastructure is Ready");
            return Ok(());
        }
        if Instant::now() > deadline {
            let mut report = format!(
                "not Ready after {}s; the objects' conditions:\n",
                timeout.as_secs()
            );
            for (kind, object) in &last {
                report.push_str(&progress::describe(kind, object));
            }
            return Err(Stop::Failed(report));
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = signals.recv() => return Err(Stop::Interrupted),
        }
    }
}
