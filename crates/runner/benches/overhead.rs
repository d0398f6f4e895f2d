//! Prints the runner's overhead over a bare OpenTofu run of the same
//! fixture module: wall time of `runner run --op=apply` (init, validate,
//! apply, plus the runner's own work) against `tofu init` + `tofu validate`
//! + `tofu apply` with the same arguments, state in the test apiserver.
//!
//! `cargo bench -p captf-runner --bench overhead` (ITERATIONS=N to change
//! the number of rounds, default 5).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNNER: &str = env!("CARGO_BIN_EXE_runner");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn prepare(dir: &Path, round: usize) -> (PathBuf, PathBuf) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::create_dir_all(dir.join("work/root")).unwrap();
    std::os::unix::fs::symlink(fixtures().join("module"), dir.join("module")).unwrap();
    let vars = format!(
        r#"{{"name":"bench-{round}","generation":{round},"secret":"s","sleep_seconds":0}}"#
    );
    for d in [dir.join("config"), dir.join("work/root")] {
        std::fs::copy(fixtures().join("root/main.tf.json"), d.join("main.tf.json")).unwrap();
        std::fs::write(d.join("terraform.tfvars.json"), &vars).unwrap();
    }
    (dir.join("config"), dir.join("work"))
}

fn backend_flags(kubeconfig: &Path, ns: &str, suffix: &str) -> Vec<String> {
    vec![
        format!("secret_suffix={suffix}"),
        format!("namespace={ns}"),
        format!("config_path={}", kubeconfig.display()),
    ]
}

fn check(status: std::process::ExitStatus, what: &str) {
    assert!(status.success(), "{what} failed: {status}");
}

fn main() {
    let rounds: usize = std::env::var("ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (kubeconfig, ns) = rt.block_on(async {
        let env = captf_testenv::TestEnv::get().await;
        let ns = env.namespace().await;
        let name = ns.name().to_owned();
        std::mem::forget(ns);
        (env.kubeconfig().unwrap().to_owned(), name)
    });
    let tofu = captf_testenv::assets::tofu().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let env_base: Vec<(&str, String)> = vec![
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("TF_IN_AUTOMATION", "1".into()),
        ("TF_INPUT", "0".into()),
        ("CHECKPOINT_DISABLE", "1".into()),
    ];
    let common = ["-input=false", "-no-color", "-lock-timeout=30s"];
    let mut bare = Duration::ZERO;
    let mut runner = Duration::ZERO;
    // Round 0 warms caches (binaries, apiserver) and is not counted.
    for round in 0..=rounds {
        let counted = round > 0;
        // Bare OpenTofu.
        let dir = tmp.path().join(format!("bare-{round}"));
        let (_, work) = prepare(&dir, round);
        let root = work.join("root");
        let suffix = format!("bench{round:011}-bare");
        let start = Instant::now();
        let mut init = Command::new(&tofu);
        init.arg("init").args(common);
        for b in backend_flags(&kubeconfig, &ns, &suffix) {
            init.arg(format!("-backend-config={b}"));
        }
        let run = |cmd: &mut Command, what: &str| {
            let status = cmd
                .current_dir(&root)
                .env_clear()
                .envs(env_base.iter().map(|(k, v)| (*k, v.as_str())))
                .env("HOME", &work)
                .env("TF_DATA_DIR", work.join(".terraform"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            check(status, what);
        };
        run(&mut init, "tofu init");
        run(
            Command::new(&tofu).args(["validate", "-json", "-no-color"]),
            "tofu validate",
        );
        run(
            Command::new(&tofu)
                .arg("apply")
                .args(common)
                .args(["-auto-approve", "-var-file=terraform.tfvars.json"]),
            "tofu apply",
        );
        if counted {
            bare += start.elapsed();
        }

        // The runner.
        let dir = tmp.path().join(format!("runner-{round}"));
        let (config, work) = prepare(&dir, round);
        let suffix = format!("bench{round:011}-run");
        let mut cmd = Command::new(RUNNER);
        cmd.args([
            "run".to_owned(),
            "--op=apply".to_owned(),
            format!("--bin={}", tofu.display()),
            format!("--module={}", dir.join("module").display()),
            format!("--workdir={}", work.display()),
            format!("--config={}", config.display()),
            "--lock-timeout=30s".to_owned(),
            format!("--result={}", dir.join("result.json").display()),
        ]);
        for b in backend_flags(&kubeconfig, &ns, &suffix) {
            cmd.arg(format!("--backend-config={b}"));
        }
        let start = Instant::now();
        let status = cmd
            .env_clear()
            .envs(env_base.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        if counted {
            runner += start.elapsed();
        }
        check(status, "runner run --op=apply");
    }
    let per = |d: Duration| d.as_secs_f64() / rounds as f64;
    println!("rounds:               {rounds}");
    println!("bare tofu apply:      {:.3} s per round", per(bare));
    println!("runner run --op=apply: {:.3} s per round", per(runner));
    println!(
        "ratio runner / bare:  {:.3} (overhead {:+.3} s)",
        runner.as_secs_f64() / bare.as_secs_f64(),
        per(runner) - per(bare)
    );
}
