//! Entry point of the `runner` binary: dispatches `copy`, `run` and
//! `version`, and always leaves a result document behind for `run`.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use crate::cli::{self, Command, RunArgs, VersionFlag};
use crate::events::{Recorder, parse_event_object};
use crate::exec::StopSignal;
use crate::result::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE, ResultDoc};
use crate::run::Runner;

/// The version the binary reports.
pub const VERSION: &str = concat!("v", env!("CARGO_PKG_VERSION"));

/// Runs the command line `args` (program name first) and returns the exit code.
pub fn main(args: Vec<String>) -> i32 {
    let parsed = match cli::parse(&args) {
        Ok(p) => p,
        Err(e) => {
            use clap::error::ErrorKind as K;
            if matches!(e.kind(), K::DisplayHelp | K::DisplayVersion) {
                let _ = e.print();
                return EXIT_OK;
            }
            let _ = e.print();
            if let Some(path) = cli::result_path_of_bad_args(&args) {
                let doc = ResultDoc::flag_error(&e.to_string());
                let _ = write_result(&path, &doc);
            }
            return EXIT_USAGE;
        }
    };
    match &parsed.global.version {
        None | Some(VersionFlag::False) => {}
        Some(VersionFlag::True) => {
            println!("runner {VERSION}");
            return EXIT_OK;
        }
        Some(VersionFlag::Literal(v)) => {
            println!("runner {v}");
            return EXIT_OK;
        }
        Some(VersionFlag::Raw) => {
            println!("{}", build_info());
            return EXIT_OK;
        }
    }
    match parsed.command {
        None => {
            let mut cmd = <cli::Cli as clap::CommandFactory>::command();
            let _ = writeln!(std::io::stderr(), "{}", cmd.render_usage());
            EXIT_USAGE
        }
        Some(Command::Version) => {
            println!("runner {VERSION} {}", build_info());
            EXIT_OK
        }
        Some(Command::Copy { dest }) => match dest.as_slice() {
            [d] => match copy_self(d) {
                Ok(()) => EXIT_OK,
                Err(e) => {
                    eprintln!("runner copy: {e}");
                    EXIT_FAILURE
                }
            },
            _ => {
                eprintln!(
                    "runner copy: want exactly one destination, got {}",
                    dest.len()
                );
                EXIT_USAGE
            }
        },
        Some(Command::Run(run)) => run_command(*run),
    }
}

fn build_info() -> String {
    serde_json::json!({
        "gitVersion": VERSION,
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
    .to_string()
}

fn copy_self(dest: &str) -> std::io::Result<()> {
    let me = std::env::current_exe()?;
    let tmp = format!("{dest}.tmp");
    std::fs::copy(&me, &tmp)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(&tmp, dest)
}

fn run_command(args: RunArgs) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runner: starting the async runtime: {e}");
            let mut doc = ResultDoc::new(args.op.as_str(), &args.image, &args.bin);
            doc.fail(
                crate::result::ErrorKind::Step,
                Some("prepare"),
                &e.to_string(),
            );
            return finish(&args.result, &doc);
        }
    };
    let doc = rt.block_on(async {
        let (tx, stop) = StopSignal::new();
        // Handlers are installed before anything runs, so an early SIGTERM
        // is a stop request too, never a silent death without a result.
        use tokio::signal::unix::{SignalKind, signal};
        let handlers = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        );
        tokio::spawn(async move {
            let (Ok(mut term), Ok(mut int)) = handlers else {
                eprintln!("runner: cannot install signal handlers");
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            eprintln!("runner: stop requested; asking the runtime to stop");
            let _ = tx.send(true);
            // Keep the sender alive so the stop stays visible.
            std::future::pending::<()>().await;
        });
        let mut events = if args.event_object.is_empty() {
            Recorder::disabled()
        } else {
            match parse_event_object(&args.event_object) {
                Ok(obj) => match Recorder::connect(obj, &args.job_name).await {
                    Ok(r) if args.quiet_events => r.quiet(),
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("runner: events disabled: {e}");
                        Recorder::disabled()
                    }
                },
                Err(e) => {
                    eprintln!("runner: events disabled: {e}");
                    Recorder::disabled()
                }
            }
        };
        let env: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        // The proxy lives until the run ends: the backend talks to it alone.
        let (_proxy, args) = match proxy_the_backend(&args).await {
            Ok(p) => p,
            Err(e) => {
                let mut doc = ResultDoc::new(args.op.as_str(), &args.image, &args.bin);
                doc.fail(crate::result::ErrorKind::Step, Some("prepare"), &e);
                return doc;
            }
        };
        Runner {
            args: &args,
            env,
            stop,
            events: &mut events,
            version: None,
        }
        .run()
        .await
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    finish(&args.result, &doc)
}

/// With `in_cluster_config=true` (what the manager passes), the backend
/// would reach the apiserver with the pod's identity directly; instead the
/// runner starts the state proxy (`state_proxy.rs`) under that identity and
/// points the backend at it. Other backend configs (a kubeconfig, as the
/// runner's own tests use) are left as they are.
async fn proxy_the_backend(
    args: &RunArgs,
) -> Result<(Option<crate::state_proxy::StateProxy>, RunArgs), String> {
    use crate::state_proxy::{Scope, StateProxy};
    if !args
        .backend_config
        .iter()
        .any(|v| v == "in_cluster_config=true")
    {
        return Ok((None, args.clone()));
    }
    let value = |key: &str| {
        args.backend_config
            .iter()
            .find_map(|v| v.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_owned)
    };
    let (Some(suffix), Some(namespace)) = (value("secret_suffix"), value("namespace")) else {
        return Err(
            "state proxy: --backend-config needs secret_suffix and namespace with in_cluster_config=true"
                .to_owned(),
        );
    };
    let config = kube::Config::incluster()
        .map_err(|e| format!("state proxy: reading the in-cluster config: {e}"))?;
    let client = kube::Client::try_from(config)
        .map_err(|e| format!("state proxy: making the API client: {e}"))?;
    let scope = Scope {
        skip_renumbering: matches!(args.op, crate::op::Op::Refresh | crate::op::Op::Drift),
        ..Scope::of_state(&namespace, &suffix)
    };
    let proxy = StateProxy::start(client, scope)
        .await
        .map_err(|e| format!("state proxy: listening on the loopback: {e}"))?;
    let mut proxied = args.clone();
    proxied
        .backend_config
        .retain(|v| v != "in_cluster_config=true");
    proxied.backend_config.extend(proxy.backend_config());
    Ok((Some(proxy), proxied))
}

/// Writes the result and turns it into the exit code; a result that cannot
/// be written is a failure even after a successful run.
fn finish(path: &str, doc: &ResultDoc) -> i32 {
    match write_result(path, doc) {
        Ok(()) => doc.exit_code(),
        Err(e) => {
            eprintln!("runner: writing the result to {path}: {e}");
            EXIT_FAILURE
        }
    }
}

fn write_result(path: &str, doc: &ResultDoc) -> std::io::Result<()> {
    let bytes = doc.encode();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    f.write_all(&bytes)?;
    f.flush()
}
