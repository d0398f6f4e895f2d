//! End-to-end: the real `runner` binary drives the real OpenTofu on the
//! fixture module, with state stored through the `kubernetes` backend in
//! the test apiserver (reached through a kubeconfig, not in-cluster).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use captf_runner::plan::EMPTY_PLAN_HASH;
use captf_testenv::{TestEnv, TestNamespace};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, ObjectMeta, PostParams};
use serde_json::{Value, json};

const RUNNER: &str = env!("CARGO_BIN_EXE_runner");
const SECRET_VALUE: &str = "fixture-sensitive-value-0042";
const ENV_TOKEN: &str = "env-token-value-that-must-not-leak";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// One object's state (one backend suffix) and the folders a Job would have.
struct Harness {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    namespace: String,
    suffix: String,
    key_file: PathBuf,
}

/// What one runner invocation left.
struct Run {
    exit: i32,
    result: Value,
    stdout: String,
    stderr: String,
}

impl Harness {
    fn new(env: &TestEnv, ns: &TestNamespace, suffix: &str) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(fixtures().join("module"), dir.path().join("module")).unwrap();
        let key_file = dir.path().join("plan-key");
        std::fs::write(&key_file, [7u8; 32]).unwrap();
        Harness {
            kubeconfig: env.kubeconfig().expect("a local control plane").to_owned(),
            namespace: ns.name().to_owned(),
            suffix: suffix.to_owned(),
            key_file,
            dir,
        }
    }

    fn config_dir(&self, vars: &Value, root: &str) -> PathBuf {
        let config = self.dir.path().join("config");
        let _ = std::fs::remove_dir_all(&config);
        std::fs::create_dir_all(&config).unwrap();
        std::fs::copy(
            fixtures().join(root).join("main.tf.json"),
            config.join("main.tf.json"),
        )
        .unwrap();
        std::fs::write(config.join("terraform.tfvars.json"), vars.to_string()).unwrap();
        config
    }

    fn vars(generation: u32, sleep: u32) -> Value {
        json!({"name": "m1", "generation": generation, "secret": SECRET_VALUE, "sleep_seconds": sleep})
    }

    fn base_args(&self, op: &str, config: &Path) -> Vec<String> {
        let work = self.dir.path().join("work");
        vec![
            "run".into(),
            format!("--op={op}"),
            format!("--bin={}", captf_testenv::assets::tofu().unwrap().display()),
            "--image=example.test/fixture:v1".into(),
            format!("--module={}", self.dir.path().join("module").display()),
            format!("--providers={}", self.dir.path().join("no-providers").display()),
            format!("--workdir={}", work.display()),
            format!("--config={}", config.display()),
            "--lock-timeout=2s".into(),
            "--stop-timeout=20s".into(),
            format!("--backend-config=secret_suffix={}", self.suffix),
            format!("--backend-config=namespace={}", self.namespace),
            format!("--backend-config=config_path={}", self.kubeconfig.display()),
            r#"--backend-config=labels={"captf.io/managed"="true","cluster.x-k8s.io/cluster-name"="c1","clusterctl.cluster.x-k8s.io/move"=""}"#.into(),
            format!("--plan-key-file={}", self.key_file.display()),
            format!("--result={}", self.dir.path().join("result.json").display()),
        ]
    }

    fn command(&self, op: &str, vars: &Value, extra: &[String]) -> Command {
        let root = if op == "restore" {
            "restore-root"
        } else {
            "root"
        };
        let config = self.config_dir(vars, root);
        // A fresh work directory per run, as an emptyDir gives a Job.
        let _ = std::fs::remove_dir_all(self.dir.path().join("work"));
        std::fs::create_dir_all(self.dir.path().join("work")).unwrap();
        let mut cmd = Command::new(RUNNER);
        cmd.args(self.base_args(op, &config))
            .args(extra)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("CHECKPOINT_DISABLE", "1")
            .env("KUBE_NAMESPACE", &self.namespace)
            .env("TF_LOG", "TRACE")
            .env("KUBECONFIG", &self.kubeconfig)
            .env("SERVICE_API_TOKEN", ENV_TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn run(&self, op: &str, vars: &Value, extra: &[&str]) -> Run {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let out = self.command(op, vars, &extra).output().unwrap();
        self.finish(out)
    }

    fn finish(&self, out: Output) -> Run {
        let raw = std::fs::read(self.dir.path().join("result.json")).unwrap();
        assert!(raw.len() <= 4096);
        let run = Run {
            exit: out.status.code().unwrap_or(-1),
            result: serde_json::from_slice(&raw).unwrap(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        for text in [&run.stdout, &run.stderr, &run.result.to_string()] {
            assert!(!text.contains(ENV_TOKEN), "the env token leaked");
            assert!(
                !text.contains(SECRET_VALUE),
                "the sensitive variable leaked"
            );
        }
        run
    }

    fn state_secret_name(&self) -> String {
        format!("tfstate-default-{}", self.suffix)
    }

    fn lock_name(&self) -> String {
        format!("lock-tfstate-default-{}", self.suffix)
    }
}

impl Run {
    #[track_caller]
    fn ok(&self) -> &Self {
        assert_eq!(
            self.exit, 0,
            "result {}\nstderr {}",
            self.result, self.stderr
        );
        assert!(self.result["error"].is_null(), "{}", self.result);
        self
    }

    fn step_names(&self) -> Vec<String> {
        self.result["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    }

    fn kind(&self) -> &str {
        self.result["error"]["kind"].as_str().unwrap_or("")
    }
}

async fn state_json(ns: &TestNamespace, h: &Harness) -> Value {
    let secret = ns
        .api::<Secret>()
        .get(&h.state_secret_name())
        .await
        .unwrap();
    let data = secret.data.unwrap()["tfstate"].0.clone();
    let mut s = String::new();
    flate2::read::GzDecoder::new(&data[..])
        .read_to_string(&mut s)
        .unwrap();
    serde_json::from_str(&s).unwrap()
}

async fn write_state(ns: &TestNamespace, h: &Harness, state: &Value) {
    let api = ns.api::<Secret>();
    let mut secret = api.get(&h.state_secret_name()).await.unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(state.to_string().as_bytes()).unwrap();
    let mut data = secret.data.take().unwrap();
    data.insert(
        "tfstate".into(),
        k8s_openapi::ByteString(gz.finish().unwrap()),
    );
    secret.data = Some(data);
    api.replace(&h.state_secret_name(), &PostParams::default(), &secret)
        .await
        .unwrap();
}

fn managed_addresses(state: &Value) -> Vec<String> {
    state["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["mode"] == "managed")
        .flat_map(|r| {
            let base = format!(
                "{}.{}.{}",
                r["module"].as_str().unwrap_or(""),
                r["type"].as_str().unwrap(),
                r["name"].as_str().unwrap()
            );
            r["instances"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |_| base.clone())
        })
        .collect()
}

async fn lock_holder(ns: &TestNamespace, h: &Harness) -> Option<String> {
    match ns.api::<Lease>().get_opt(&h.lock_name()).await.unwrap() {
        Some(l) => l
            .spec
            .and_then(|s| s.holder_identity)
            .filter(|s| !s.is_empty()),
        None => None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_refresh_drift_guard_and_destroy() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let h = Harness::new(env, &ns, "aaaaaaaaaaaaaaaa-m");

    // Apply creates the state Secret, with the CAPTF labels.
    let r = h.run("apply", &Harness::vars(1, 0), &[]);
    r.ok();
    assert_eq!(r.step_names(), ["init", "validate", "apply"]);
    assert_eq!(
        r.result["changes"],
        json!({"add": 2, "change": 0, "destroy": 0})
    );
    assert_eq!(r.result["op"], "apply");
    assert_eq!(
        r.result["image"],
        json!({"ref": "example.test/fixture:v1", "providersMirror": false})
    );
    assert!(
        r.result["runtime"]["version"]
            .as_str()
            .unwrap()
            .starts_with("1."),
        "{}",
        r.result
    );
    assert!(
        r.stderr
            .contains("Ignoring environment variables the runner owns: TF_LOG")
    );
    let secret = ns
        .api::<Secret>()
        .get(&h.state_secret_name())
        .await
        .unwrap();
    let labels = secret.metadata.labels.unwrap();
    assert_eq!(
        labels.get("captf.io/managed").map(String::as_str),
        Some("true")
    );
    assert_eq!(
        labels
            .get("cluster.x-k8s.io/cluster-name")
            .map(String::as_str),
        Some("c1")
    );
    assert_eq!(
        labels
            .get("clusterctl.cluster.x-k8s.io/move")
            .map(String::as_str),
        Some("")
    );
    assert_eq!(
        labels.get("tfstateSecretSuffix").map(String::as_str),
        Some("aaaaaaaaaaaaaaaa-m")
    );
    assert_eq!(managed_addresses(&state_json(&ns, &h).await).len(), 2);

    // Refresh and drift find nothing.
    let r = h.run("refresh", &Harness::vars(1, 0), &[]);
    r.ok();
    assert_eq!(r.step_names(), ["init", "apply-refresh-only"]);
    let r = h.run("drift", &Harness::vars(1, 0), &[]);
    r.ok();
    assert_eq!(r.step_names(), ["init", "apply-refresh-only", "plan"]);
    assert_eq!(
        r.result["drift"],
        json!({"detected": false, "create": 0, "update": 0, "replace": 0, "delete": 0, "resources": []})
    );

    // Change the state behind the runner's back: drift is found.
    let mut state = state_json(&ns, &h).await;
    state["serial"] = json!(state["serial"].as_u64().unwrap() + 1);
    for r in state["resources"].as_array_mut().unwrap() {
        if r["name"] == "instance" {
            r["instances"][0]["attributes"]["input"] = json!({"value": {"name": "changed-elsewhere"}, "type": ["object", {"name": "string"}]});
        }
    }
    write_state(&ns, &h, &state).await;
    let r = h.run("drift", &Harness::vars(1, 0), &[]);
    r.ok();
    assert_eq!(
        r.step_names(),
        ["init", "apply-refresh-only", "plan", "show-json"]
    );
    assert_eq!(r.result["drift"]["detected"], true, "{}", r.result);
    assert_eq!(
        r.result["drift"]["resources"],
        json!(["module.role.terraform_data.instance"])
    );
    // Put reality back.
    h.run("apply", &Harness::vars(1, 0), &[]).ok();

    // A plain guarded apply without changes succeeds without applying.
    let r = h.run(
        "apply",
        &Harness::vars(1, 0),
        &["--guard-deletes", "--inputs-hash=h2:one"],
    );
    r.ok();
    assert_eq!(r.step_names(), ["init", "validate", "plan"]);
    assert_eq!(
        r.result["changes"],
        json!({"add": 0, "change": 0, "destroy": 0})
    );

    // A guarded apply that replaces a resource is blocked and changes nothing.
    let before = state_json(&ns, &h).await;
    let r = h.run(
        "apply",
        &Harness::vars(2, 0),
        &[
            "--guard-deletes",
            "--inputs-hash=h2:two",
            "--allow-deletes-hash=h2:one",
        ],
    );
    assert_eq!(r.exit, 1, "{}", r.result);
    assert_eq!(r.kind(), "blocked");
    assert!(r.result["error"]["step"].is_null());
    assert_eq!(
        r.result["error"]["tail"],
        "the plan deletes or replaces 1 resource(s): module.role.terraform_data.instance (replace)"
    );
    let blocked_hash = r.result["plan"]["hash"].as_str().unwrap().to_owned();
    assert!(blocked_hash.starts_with("p2:") && blocked_hash != EMPTY_PLAN_HASH);
    assert_eq!(r.result["plan"]["replace"], 1);
    assert_eq!(r.step_names(), ["init", "validate", "plan", "show-json"]);
    assert_eq!(
        state_json(&ns, &h).await["serial"],
        before["serial"],
        "nothing was applied"
    );

    // The plan op sees the same plan and the same hash.
    let r = h.run("plan", &Harness::vars(2, 0), &[]);
    r.ok();
    assert_eq!(r.result["plan"]["hash"], blocked_hash.as_str());
    assert_eq!(
        r.result["plan"]["resources"],
        json!(["module.role.terraform_data.instance (replace)"])
    );

    // Another approved plan: plan-changed, nothing applied.
    let other = "p2:0000000000000000000000000000000000000000000000000000000000000000";
    let r = h.run(
        "apply",
        &Harness::vars(2, 0),
        &[
            "--guard-deletes",
            "--inputs-hash=h2:two",
            &format!("--expect-plan={other}"),
        ],
    );
    assert_eq!(r.exit, 1);
    assert_eq!(r.kind(), "plan-changed", "{}", r.result);
    assert_eq!(r.result["plan"]["hash"], blocked_hash.as_str());
    assert_eq!(state_json(&ns, &h).await["serial"], before["serial"]);

    // Approval naming this plan: applied.
    let r = h.run(
        "apply",
        &Harness::vars(2, 0),
        &[
            "--guard-deletes",
            "--inputs-hash=h2:two",
            &format!("--expect-plan={blocked_hash}"),
        ],
    );
    r.ok();
    assert_eq!(
        r.step_names(),
        ["init", "validate", "plan", "show-json", "apply"]
    );
    assert_eq!(
        r.result["changes"],
        json!({"add": 1, "change": 0, "destroy": 1})
    );

    // Approval by inputs hash (the pool path).
    let r = h.run(
        "apply",
        &Harness::vars(3, 0),
        &[
            "--guard-deletes",
            "--inputs-hash=h2:three",
            "--allow-deletes-hash=h2:three",
        ],
    );
    r.ok();
    assert_eq!(
        r.result["changes"],
        json!({"add": 1, "change": 0, "destroy": 1})
    );

    // An approved empty plan when the plan is not empty: plan-changed.
    let r = h.run(
        "apply",
        &Harness::vars(4, 0),
        &[&format!("--expect-plan={EMPTY_PLAN_HASH}")],
    );
    assert_eq!(r.kind(), "plan-changed");
    // Expecting a non-empty plan when nothing changes: plan-changed too.
    let r = h.run(
        "apply",
        &Harness::vars(3, 0),
        &[&format!("--expect-plan={blocked_hash}")],
    );
    assert_eq!(r.kind(), "plan-changed");
    assert_eq!(r.result["plan"]["hash"], EMPTY_PLAN_HASH);

    // Destroy removes every resource.
    let r = h.run("destroy", &Harness::vars(3, 0), &[]);
    r.ok();
    assert_eq!(
        r.result["changes"],
        json!({"add": 0, "change": 0, "destroy": 2})
    );
    assert!(managed_addresses(&state_json(&ns, &h).await).is_empty());
    assert_eq!(lock_holder(&ns, &h).await, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_interrupts_a_slow_apply_and_releases_the_lock() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let h = Harness::new(env, &ns, "bbbbbbbbbbbbbbbb-m");
    let child = h
        .command("apply", &Harness::vars(1, 120), &[])
        .spawn()
        .unwrap();
    // Wait until the slow resource is being created, so the lock is held.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if lock_holder(&ns, &h).await.is_some()
            && ns
                .api::<Secret>()
                .get_opt(&h.state_secret_name())
                .await
                .unwrap()
                .is_some()
        {
            break;
        }
        assert!(Instant::now() < deadline, "the apply never took the lock");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the runtime stopped within the stop timeout"
    );
    let r = h.finish(status);
    assert_eq!(r.exit, 1, "{}", r.result);
    assert_eq!(r.kind(), "interrupted", "{}", r.result);
    assert_eq!(r.result["error"]["step"], "apply");
    assert!(r.stderr.contains("stop requested"), "{}", r.stderr);
    // The runtime got the signal and shut down gracefully.
    assert!(
        r.stdout.contains("Interrupt received") || r.stderr.contains("Interrupt received"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert_eq!(lock_holder(&ns, &h).await, None, "the lock was released");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_lock_is_force_unlocked() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let h = Harness::new(env, &ns, "cccccccccccccccc-m");
    h.run("apply", &Harness::vars(1, 0), &[]).ok();

    // A lock left by a runner pod that is gone.
    let lock_id = "9d8f6c2e-0000-4000-8000-00000000dead";
    let info = json!({"ID": lock_id, "Operation": "OperationTypeApply", "Info": "", "Who": "runner@captf-m-m1-apply-a1-abcdef-xyz12", "Version": "1.10.10", "Created": "2026-01-01T00:00:00Z", "Path": ""});
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(h.lock_name()),
            annotations: Some([("app.terraform.io/lock-info".to_owned(), info.to_string())].into()),
            labels: Some(
                [(
                    "app.terraform.io/managed-by".to_owned(),
                    "terraform".to_owned(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
            holder_identity: Some(lock_id.to_owned()),
            ..Default::default()
        }),
    };
    let api = ns.api::<Lease>();
    match api.get_opt(&h.lock_name()).await.unwrap() {
        Some(mut existing) => {
            existing.metadata.annotations = lease.metadata.annotations.clone();
            existing.spec = lease.spec.clone();
            api.replace(&h.lock_name(), &PostParams::default(), &existing)
                .await
                .unwrap();
        }
        None => {
            api.create(&PostParams::default(), &lease).await.unwrap();
        }
    }

    // Without force-unlock the run waits for the lock and fails.
    let r = h.run("refresh", &Harness::vars(1, 0), &[]);
    assert_eq!(r.exit, 1);
    assert_eq!(r.kind(), "step", "{}", r.result);
    assert!(
        r.result["error"]["tail"].as_str().unwrap().contains("lock"),
        "{}",
        r.result
    );

    let r = h.run(
        "refresh",
        &Harness::vars(1, 0),
        &[&format!("--force-unlock={lock_id}")],
    );
    r.ok();
    assert_eq!(
        r.step_names(),
        ["init", "force-unlock", "apply-refresh-only"]
    );
    assert_eq!(lock_holder(&ns, &h).await, None);

    // Releasing a lock that is already gone is fine.
    let r = h.run(
        "refresh",
        &Harness::vars(1, 0),
        &[&format!("--force-unlock={lock_id}")],
    );
    r.ok();
    assert_eq!(r.result["steps"][1]["name"], "force-unlock");
}

#[tokio::test(flavor = "multi_thread")]
async fn restore_pushes_a_backup_and_lists_it() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let source = Harness::new(env, &ns, "dddddddddddddddd-m");
    source.run("apply", &Harness::vars(1, 0), &[]).ok();
    let secret = ns
        .api::<Secret>()
        .get(&source.state_secret_name())
        .await
        .unwrap();
    let payload = secret.data.unwrap()["tfstate"].0.clone();

    let target = Harness::new(env, &ns, "eeeeeeeeeeeeeeee-m");
    let restore_dir = target.dir.path().join("config").join("restore");
    let (a, b) = payload.split_at(payload.len() / 2);
    let mut cmd = {
        // The config folder is rebuilt by command(); add the chunks after.
        let c = target.command(
            "restore",
            &json!({}),
            &["--restore-chunks=2".into(), "--restore-resources=2".into()],
        );
        std::fs::create_dir_all(&restore_dir).unwrap();
        std::fs::write(restore_dir.join("0"), a).unwrap();
        std::fs::write(restore_dir.join("1"), b).unwrap();
        c
    };
    let r = target.finish(cmd.output().unwrap());
    r.ok();
    assert_eq!(r.step_names(), ["init", "state-push", "state-list"]);
    assert!(
        r.stdout.contains("module.role.terraform_data.instance"),
        "{}",
        r.stdout
    );
    let restored = state_json(&ns, &target).await;
    assert_eq!(managed_addresses(&restored).len(), 2);

    // A backup with resources that lists none fails the sanity check.
    let empty = json!({"version": 4, "terraform_version": "1.10.10", "serial": 1, "lineage": "x", "outputs": {}, "resources": []});
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(empty.to_string().as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    let third = Harness::new(env, &ns, "ffffffffffffffff-m");
    let mut cmd = third.command(
        "restore",
        &json!({}),
        &["--restore-chunks=1".into(), "--restore-resources=3".into()],
    );
    let dir = third.dir.path().join("config").join("restore");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("0"), &gz).unwrap();
    let r = third.finish(cmd.output().unwrap());
    assert_eq!(r.exit, 1);
    assert_eq!(r.result["error"]["step"], "state-list", "{}", r.result);

    // A chunk that is not gzip fails in prepare, before any command.
    let mut cmd = third.command("restore", &json!({}), &["--restore-chunks=1".into()]);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("0"), b"not gzip").unwrap();
    let r = third.finish(cmd.output().unwrap());
    assert_eq!(r.result["error"]["step"], "prepare");
    assert!(r.step_names().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn failures_preflight_and_events() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let h = Harness::new(env, &ns, "9999999999999999-m");

    // A module folder without module files is an image-layout failure
    // before any step.
    let empty = h.dir.path().join("empty-module");
    std::fs::create_dir_all(&empty).unwrap();
    let mut cmd = h.command(
        "apply",
        &Harness::vars(1, 0),
        &[format!("--module={}", empty.display())],
    );
    let r = h.finish(cmd.output().unwrap());
    assert_eq!((r.exit, r.kind()), (1, "image-layout"));
    assert!(r.step_names().is_empty());

    // A plan without its key fails in prepare.
    let r = h.run(
        "plan",
        &Harness::vars(1, 0),
        &["--plan-key-file=/nonexistent/key"],
    );
    assert_eq!(r.result["error"]["step"], "prepare");
    assert!(
        r.result["error"]["tail"]
            .as_str()
            .unwrap()
            .starts_with("the plan key could not be read")
    );

    // A bad flag: usage exit and a flags result.
    let out = Command::new(RUNNER)
        .args([
            "run",
            "--op=upgrade",
            &format!("--result={}", h.dir.path().join("result.json").display()),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let r = h.finish(out);
    assert_eq!(r.result["error"]["step"], "flags");

    // A failing step: the summary comes from the runtime's error lines, and
    // events are posted on the object.
    let obj = format!(
        "infrastructure.cluster.x-k8s.io/v1alpha1/TerraformMachine/{}/m1/uid-123",
        ns.name()
    );
    let mut bad = Harness::vars(1, 0);
    bad["generation"] = json!("not a number");
    let r = h.run(
        "apply",
        &bad,
        &[
            &format!("--event-object={obj}"),
            "--job-name=captf-m-m1-apply-a1-abcdef",
        ],
    );
    assert_eq!(r.exit, 1);
    assert_eq!(r.kind(), "step");
    assert!(
        r.result["error"]["tail"]
            .as_str()
            .unwrap()
            .starts_with("Error: "),
        "{}",
        r.result
    );
    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .unwrap();
    let reasons: Vec<String> = events
        .items
        .iter()
        .filter_map(|e| e.reason.clone())
        .collect();
    for want in [
        "RunStarted",
        "StepStarted",
        "StepSucceeded",
        "StepFailed",
        "RunFinished",
    ] {
        assert!(
            reasons.iter().any(|r| r == want),
            "{want} missing in {reasons:?}; runner said: {}",
            r.stderr
                .lines()
                .filter(|l| l.contains("event"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    let finished = events
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("RunFinished"))
        .unwrap();
    assert_eq!(finished.type_.as_deref(), Some("Warning"));
    assert_eq!(
        finished.reporting_controller.as_deref(),
        Some("captf.io/runner")
    );
    assert_eq!(
        finished.regarding.as_ref().unwrap().uid.as_deref(),
        Some("uid-123")
    );
    assert_eq!(
        finished.related.as_ref().unwrap().name.as_deref(),
        Some("captf-m-m1-apply-a1-abcdef")
    );
    for e in &events.items {
        assert!(!e.note.clone().unwrap_or_default().contains(SECRET_VALUE));
    }

    // Quiet events: a routine run that succeeds posts none; one that fails
    // posts its failure and its end, and no progress.
    let quiet_obj = format!(
        "infrastructure.cluster.x-k8s.io/v1alpha1/TerraformMachine/{}/m2/uid-456",
        ns.name()
    );
    let quiet = [
        format!("--event-object={quiet_obj}"),
        "--job-name=captf-m-m2-refresh-a1-abcdef".to_owned(),
        "--quiet-events".to_owned(),
    ];
    let quiet: Vec<&str> = quiet.iter().map(String::as_str).collect();
    let r = h.run("refresh", &Harness::vars(1, 0), &quiet);
    assert_eq!(r.exit, 0, "{}", r.stderr);
    let r = h.run("refresh", &bad, &quiet);
    assert_eq!((r.exit, r.kind()), (1, "step"));
    let mut posted: Vec<(String, String)> = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some("uid-456"))
        .map(|e| (e.reason.unwrap_or_default(), e.type_.unwrap_or_default()))
        .collect();
    posted.sort();
    assert_eq!(
        posted,
        [
            ("RunFinished".to_owned(), "Warning".to_owned()),
            ("StepFailed".to_owned(), "Warning".to_owned())
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_in_runtime_output_are_masked_and_the_mirror_is_used() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let h = Harness::new(env, &ns, "8888888888888888-m");
    // An (empty) provider mirror: the runner points the runtime at it.
    std::fs::create_dir_all(h.dir.path().join("no-providers")).unwrap();

    let mut vars = Harness::vars(1, 0);
    vars["leak"] = json!(true);
    let obj = format!(
        "infrastructure.cluster.x-k8s.io/v1alpha1/TerraformMachine/{}/m2/uid-2",
        ns.name()
    );
    // finish() asserts that neither secret appears in the logs, the result
    // or (below) the events.
    let r = h.run("apply", &vars, &[&format!("--event-object={obj}")]);
    assert_eq!(r.exit, 1, "{}", r.result);
    assert_eq!(r.kind(), "step");
    assert_eq!(r.result["error"]["step"], "apply");
    assert_eq!(r.result["image"]["providersMirror"], true);
    let log = format!("{}{}", r.stdout, r.stderr);
    assert!(log.contains("leaked:[REDACTED]:[REDACTED]"), "{log}");
    assert!(log.contains("err:[REDACTED]"), "{log}");
    let tfrc = h.dir.path().join("work/cli.tfrc");
    let text = std::fs::read_to_string(&tfrc).unwrap();
    assert!(text.contains("filesystem_mirror"));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&tfrc).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(!events.items.is_empty());
    for e in &events.items {
        let note = e.note.clone().unwrap_or_default();
        assert!(
            !note.contains(SECRET_VALUE) && !note.contains(ENV_TOKEN),
            "{note}"
        );
    }
}
