//! The OCI modules in a scratch copy that the real `oracle/oci` provider can
//! load: `tofu init` allowed to install from the asset cache's filesystem
//! mirror only (no registry, no network). The modules' pin accepts the
//! mirrored build (8.28.0, `hack/test-assets.sh`), the one the module images
//! ship, so the copies are the modules as they are.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The provider constraint every OCI module declares.
pub const PROVIDER_PIN: &str = ">= 8.28.0, < 10.0.0";

/// `modules/oci`: one folder per role.
pub fn oci_modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../modules/oci")
}

pub fn module_source() -> PathBuf {
    oci_modules().join("machinepool")
}

pub fn tofu_binary() -> PathBuf {
    captf_testenv::assets::tofu()
        .unwrap_or_else(|e| panic!("OpenTofu test asset missing: {e} (run hack/test-assets.sh)"))
}

/// The one `oracle/oci` version the mirror holds.
pub fn mirrored_version(mirror: &Path) -> String {
    let dir = mirror.join("registry.opentofu.org/oracle/oci");
    let versions: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        versions.len(),
        1,
        "the mirror must hold exactly one oracle/oci version: {versions:?}"
    );
    versions.into_iter().next().unwrap()
}

/// Copies a module tree, leaving out OpenTofu's working files.
pub fn copy_module(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let name_str = name.to_string_lossy();
        if name_str.starts_with(".terraform") || name_str.starts_with("terraform.tfstate") {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_module(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A copy of a module with its own CLI configuration and home.
pub struct Workspace {
    pub dir: PathBuf,
    pub provider_version: String,
    cli_config: PathBuf,
    home: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Workspace {
    /// A copy of the machine-pool module (not initialised).
    pub fn new() -> Workspace {
        Workspace::role("machinepool")
    }

    /// A copy of every OCI module, working in `role`'s, so tests that run a
    /// sibling module (the machine's run of `../cluster`) find it.
    pub fn role(role: &str) -> Workspace {
        Workspace::copied(&oci_modules(), "oci", role)
    }

    /// A copy of another module tree alone (a deliberately broken copy).
    pub fn of(module: &Path) -> Workspace {
        let name = module.file_name().unwrap().to_string_lossy().into_owned();
        Workspace::copied(module, &name, "")
    }

    /// Copies `tree` to `<tmp>/<into>` and works in its `workdir`.
    fn copied(tree: &Path, into: &str, workdir: &str) -> Workspace {
        let mirror = captf_testenv::assets::oci_provider_mirror();
        let provider_version = mirrored_version(&mirror);
        let tmp = tempfile::tempdir().unwrap();
        copy_module(tree, &tmp.path().join(into));
        let dir = tmp.path().join(into).join(workdir);
        // The mirror and nothing else: no `direct`, so a provider missing
        // from it fails init instead of reaching for a registry.
        let cli_config = tmp.path().join("mirror-only.tfrc");
        std::fs::write(
            &cli_config,
            format!(
                "provider_installation {{\n  filesystem_mirror {{\n    path    = {:?}\n    include = [\"registry.opentofu.org/oracle/oci\"]\n  }}\n}}\n",
                mirror.display().to_string()
            ),
        )
        .unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        Workspace {
            dir,
            provider_version,
            cli_config,
            home,
            _tmp: tmp,
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Runs tofu in the copy, with nothing inherited that could point it
    /// elsewhere: no TF_* or OCI_* variables, a home of its own.
    pub fn tofu(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(tofu_binary());
        cmd.args(args).current_dir(&self.dir);
        for (key, _) in std::env::vars_os() {
            let key_str = key.to_string_lossy();
            if key_str.starts_with("TF_") || key_str.starts_with("OCI_") {
                cmd.env_remove(&key);
            }
        }
        cmd.env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("CHECKPOINT_DISABLE", "1")
            .env("HOME", &self.home)
            .envs(env.iter().copied());
        cmd.output().unwrap()
    }

    /// Runs tofu and panics with its output unless it succeeds; returns stdout.
    pub fn tofu_ok(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let out = self.tofu(args, env);
        assert!(out.status.success(), "tofu {args:?}: {}", describe(&out));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `tofu init` from the mirror; checks that it installed the mirrored
    /// oracle/oci and nothing from anywhere else.
    pub fn init(&self) {
        let out = self.tofu_ok(
            &["init", "-backend=false", "-input=false", "-no-color"],
            &[],
        );
        let installed = format!("Installed oracle/oci v{}", self.provider_version);
        assert!(out.contains(&installed), "tofu init: {out}");
        let lock = std::fs::read_to_string(self.path(".terraform.lock.hcl")).unwrap();
        let providers: Vec<&str> = lock
            .lines()
            .filter_map(|l| l.strip_prefix("provider \""))
            .collect();
        assert_eq!(
            providers,
            ["registry.opentofu.org/oracle/oci\" {"],
            "{lock}"
        );
    }

    /// `tofu validate`: whether it passed, and what it said.
    pub fn validate(&self) -> (bool, String) {
        let out = self.tofu(&["validate", "-no-color"], &[]);
        (out.status.success(), describe(&out))
    }
}

pub fn describe(out: &Output) -> String {
    format!(
        "{}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Plans with the real provider, offline: API-key credentials for a tenancy
/// that does not exist (the provider only needs them to start; nothing is
/// signed because nothing is read), no refresh, and only the managed
/// resources targeted, so the member listing (a data source, which would
/// call OCI) stays out.
pub struct RealPlanner<'a> {
    ws: &'a Workspace,
    env: Vec<(String, String)>,
    inputs: PathBuf,
    step: std::cell::Cell<usize>,
}

pub const MANAGED: &[&str] = &[
    "oci_core_instance_configuration.pool_instance_configuration",
    "oci_core_instance_pool.fixed_instance_pool",
    "oci_core_instance_pool.autoscaled_instance_pool",
    "oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration",
    "terraform_data.kubernetes_version_roll",
];

impl<'a> RealPlanner<'a> {
    /// `inputs`: the module's variables, written as a `.tfvars.json`.
    pub fn new(ws: &'a Workspace, inputs: &serde_json::Value) -> RealPlanner<'a> {
        // The provider parses the key when it starts: it must be a real RSA
        // key, made here so no key lives in the repository.
        let key = ws.home.join("api_key.pem");
        let out = Command::new("openssl")
            .args(["genrsa", "-out"])
            .arg(&key)
            .arg("2048")
            .output()
            .unwrap_or_else(|e| panic!("openssl (to make a throwaway API key): {e}"));
        assert!(out.status.success(), "openssl genrsa: {}", describe(&out));
        let env = [
            ("OCI_TENANCY_OCID", "ocid1.tenancy.oc1..captftest"),
            ("OCI_USER_OCID", "ocid1.user.oc1..captftest"),
            (
                "OCI_FINGERPRINT",
                "00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff",
            ),
            ("OCI_PRIVATE_KEY_PATH", key.to_str().unwrap()),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let path = ws.home.join("inputs.tfvars.json");
        std::fs::write(&path, serde_json::to_vec_pretty(inputs).unwrap()).unwrap();
        RealPlanner {
            ws,
            env,
            inputs: path,
            step: std::cell::Cell::new(0),
        }
    }

    /// Plans with `overrides` over the inputs, against the workspace's
    /// `terraform.tfstate` (none: a plan to create), and returns the plan as
    /// `tofu show -json` renders it.
    pub fn plan(&self, overrides: &serde_json::Value) -> serde_json::Value {
        let (out, plan_file) = self.run_plan(overrides);
        assert!(out.status.success(), "tofu plan: {}", describe(&out));
        let shown = self
            .ws
            .tofu_ok(&["show", "-json", plan_file.to_str().unwrap()], &self.env());
        serde_json::from_str(&shown).unwrap()
    }

    /// Plans with `overrides`, which must fail; returns what tofu said,
    /// with every run of whitespace made one space (tofu wraps its messages).
    pub fn refused(&self, overrides: &serde_json::Value) -> String {
        let (out, _) = self.run_plan(overrides);
        assert!(
            !out.status.success(),
            "tofu plan passed: {}",
            describe(&out)
        );
        describe(&out)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn env(&self) -> Vec<(&str, &str)> {
        self.env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    fn run_plan(&self, overrides: &serde_json::Value) -> (Output, PathBuf) {
        let n = self.step.get() + 1;
        self.step.set(n);
        let extra = self.ws.home.join(format!("step-{n}.tfvars.json"));
        std::fs::write(&extra, serde_json::to_vec(overrides).unwrap()).unwrap();
        let plan_file = self.ws.home.join(format!("step-{n}.plan"));
        let mut args = vec![
            "plan".to_owned(),
            "-refresh=false".into(),
            "-lock=false".into(),
            "-input=false".into(),
            "-no-color".into(),
            format!("-var-file={}", self.inputs.display()),
            format!("-var-file={}", extra.display()),
            format!("-out={}", plan_file.display()),
        ];
        args.extend(MANAGED.iter().map(|a| format!("-target={a}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        (self.ws.tofu(&args, &self.env()), plan_file)
    }

    /// Writes the state a create plan would leave: every planned resource
    /// with a made-up OCID, the references between them filled in, and the
    /// values the module marks sensitive marked so in state too.
    pub fn record_created(&self, create: &serde_json::Value) {
        let state = state_after(create);
        std::fs::write(
            self.ws.path("terraform.tfstate"),
            serde_json::to_vec_pretty(&state).unwrap(),
        )
        .unwrap();
    }
}

fn made_up_id(resource_type: &str) -> String {
    format!("ocid1.{}.oc1..captftest", resource_type.replace('_', ""))
}

/// The paths `after_sensitive` marks, in the state file's path syntax.
fn sensitive_paths(
    mark: &serde_json::Value,
    path: &mut Vec<serde_json::Value>,
    out: &mut Vec<serde_json::Value>,
) {
    use serde_json::json;
    match mark {
        serde_json::Value::Bool(true) => out.push(json!(path.clone())),
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                path.push(json!({ "type": "get_attr", "value": k }));
                sensitive_paths(v, path, out);
                path.pop();
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(json!({ "type": "index", "value": { "value": i, "type": "number" } }));
                sensitive_paths(v, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The type OpenTofu stores beside a dynamic value, read off the JSON (a
/// null attribute is taken for a string, the only nullable leaf the
/// modules record).
fn cty_type(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::{Value, json};
    match v {
        Value::String(_) | Value::Null => json!("string"),
        Value::Number(_) => json!("number"),
        Value::Bool(_) => json!("bool"),
        Value::Array(items) => json!(["tuple", items.iter().map(cty_type).collect::<Vec<_>>()]),
        Value::Object(m) => json!([
            "object",
            m.iter()
                .map(|(k, v)| (k.clone(), cty_type(v)))
                .collect::<serde_json::Map<_, _>>()
        ]),
    }
}

fn state_after(create: &serde_json::Value) -> serde_json::Value {
    use serde_json::json;
    let planned = create["planned_values"]["root_module"]["resources"]
        .as_array()
        .expect("a create plan with planned values");
    let id_of = |ty: &str| made_up_id(ty);
    let mut resources = Vec::new();
    for r in planned.iter().filter(|r| r["mode"] == "managed") {
        let ty = r["type"].as_str().unwrap();
        let mut values = r["values"].clone();
        values["id"] = json!(id_of(ty));
        match ty {
            // Dynamic values are stored with their type.
            "terraform_data" => {
                let v = values["input"].clone();
                let trigger = values["triggers_replace"].clone();
                let typed = |v: &serde_json::Value| {
                    if v.is_null() {
                        v.clone()
                    } else {
                        json!({ "value": v, "type": cty_type(v) })
                    }
                };
                values["input"] = typed(&v);
                values["output"] = typed(&v);
                values["triggers_replace"] = typed(&trigger);
            }
            "oci_core_instance_pool" => {
                values["instance_configuration_id"] =
                    json!(id_of("oci_core_instance_configuration"));
                values["actual_size"] = values["size"].clone();
                values["state"] = json!("RUNNING");
            }
            "oci_autoscaling_auto_scaling_configuration" => {
                values["auto_scaling_resources"][0]["id"] = json!(id_of("oci_core_instance_pool"));
            }
            _ => {}
        }
        let address = r["address"].as_str().unwrap();
        let after_sensitive = create["resource_changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["address"] == address)
            .map(|c| c["change"]["after_sensitive"].clone())
            .unwrap_or_default();
        let mut sensitive = Vec::new();
        sensitive_paths(&after_sensitive, &mut Vec::new(), &mut sensitive);
        let mut instance = json!({
            "schema_version": r["schema_version"],
            "attributes": values,
            "sensitive_attributes": sensitive,
        });
        let mut resource = json!({
            "mode": "managed",
            "type": ty,
            "name": r["name"],
            "provider": format!("provider[\"{}\"]", r["provider_name"].as_str().unwrap()),
        });
        if let Some(index) = r.get("index") {
            instance["index_key"] = index.clone();
            resource["each"] = json!("list");
        }
        resource["instances"] = json!([instance]);
        resources.push(resource);
    }
    json!({
        "version": 4,
        "terraform_version": create["terraform_version"],
        "serial": 1,
        "lineage": "5e0c1f2a-0000-4000-8000-00000000c4f7",
        "outputs": {},
        "resources": resources,
    })
}

/// What `tofu test -json -verbose` reported.
pub struct TestLog {
    /// (file, run, status), in the order reported.
    pub runs: Vec<(String, String, String)>,
    /// (file, run) → the plan of a `command = plan` run.
    pub plans: std::collections::BTreeMap<(String, String), serde_json::Value>,
    /// Errors and warnings, with the run they belong to.
    pub diagnostics: Vec<String>,
    pub summary: serde_json::Value,
}

pub fn read_test_log(stdout: &str) -> TestLog {
    let mut log = TestLog {
        runs: Vec::new(),
        plans: std::collections::BTreeMap::new(),
        diagnostics: Vec::new(),
        summary: serde_json::Value::Null,
    };
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let msg: serde_json::Value = serde_json::from_str(line).unwrap();
        let at = |key: &str| msg[key].as_str().unwrap_or_default().to_owned();
        match msg["type"].as_str() {
            Some("test_run") => log.runs.push((
                msg["test_run"]["path"].as_str().unwrap().to_owned(),
                msg["test_run"]["run"].as_str().unwrap().to_owned(),
                msg["test_run"]["status"].as_str().unwrap().to_owned(),
            )),
            Some("test_plan") => {
                let key = (at("@testfile"), at("@testrun"));
                log.plans.insert(key, msg["test_plan"].clone());
            }
            Some("diagnostic") => log.diagnostics.push(format!(
                "{}/{}: {}: {}",
                at("@testfile"),
                at("@testrun"),
                msg["diagnostic"]["summary"].as_str().unwrap_or_default(),
                msg["diagnostic"]["detail"].as_str().unwrap_or_default(),
            )),
            Some("test_summary") => log.summary = msg["test_summary"].clone(),
            _ => {}
        }
    }
    log
}

/// `run "<name>" {` blocks in the module's test files, so a run that is
/// dropped or skipped fails the count.
pub fn declared_runs(tests: &Path) -> Vec<(String, String)> {
    let mut runs = Vec::new();
    for entry in std::fs::read_dir(tests).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".tftest.hcl") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            if let Some(rest) = line.strip_prefix("run \"") {
                let run = rest.split('"').next().unwrap().to_owned();
                runs.push((format!("tests/{name}"), run));
            }
        }
    }
    runs.sort();
    runs
}

/// Runs the module's whole `tofu test` suite (`-json -verbose`) and checks
/// that it passed run by run: every run declared in `tests/` reported as
/// passing, none skipped, and at least `at_least` of them, so that emptying
/// a file shows. Returns the log for checks of the plans.
pub fn run_whole_suite(ws: &Workspace, at_least: usize) -> TestLog {
    let out = ws.tofu(&["test", "-json", "-verbose", "-no-color"], &[]);
    let log = read_test_log(&String::from_utf8_lossy(&out.stdout));
    let failed: Vec<_> = log.runs.iter().filter(|r| r.2 != "pass").collect();
    assert!(
        out.status.success() && failed.is_empty(),
        "{}; runs not passing: {failed:?}\n{}\n{}",
        out.status,
        log.diagnostics.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut reported: Vec<(String, String)> = log
        .runs
        .iter()
        .map(|(file, run, _)| (file.clone(), run.clone()))
        .collect();
    reported.sort();
    let declared = declared_runs(&ws.path("tests"));
    assert!(
        declared.len() >= at_least,
        "{} runs: {declared:?}",
        declared.len()
    );
    assert_eq!(reported, declared, "every declared run must be reported");
    assert_eq!(log.summary["status"], "pass", "{}", log.summary);
    assert_eq!(log.summary["skipped"], 0, "{}", log.summary);
    assert_eq!(log.summary["passed"], declared.len(), "{}", log.summary);
    log
}

/// `tfcapi-lint module <dir> --role <role> --strict`, which must pass with
/// no allowed warning.
pub fn lint_strict(dir: &Path, role: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_tfcapi-lint"))
        .args(["module", "--role", role, "--strict"])
        .arg(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {}\n{stdout}{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("0 error(s), 0 warning(s)"),
        "{}: {stdout}",
        dir.display()
    );
}
