//! The rendered roots run with the real OpenTofu of the test assets and the
//! noop modules, fully offline.
//!
//! Layout per run (as in a module image): `<tmp>/module` holds a copy of
//! `modules/noop/<role>` and `<tmp>/work/root` the rendered files, so
//! `source = "../../module"` resolves as it does in a Job.
//!
//! The rendered root always names the `kubernetes` backend, which needs an
//! apiserver. `init -backend=false` plus `validate` run on the rendered files
//! exactly as rendered. For `apply`, the test adds an OpenTofu override file
//! (`backend_override.tf.json`) that replaces the backend with `local`; the
//! rendered `main.tf.json` itself is never edited.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use captf_contract::health::{ConditionStatus, HealthState, infrastructure_healthy};
use captf_contract::inputs::RoleInputs;
use captf_contract::outputs::{
    MachineContext, OutputsReason, RootOutputs, decode_cluster, decode_machine, decode_machinepool,
};
use captf_contract::schemas::Direction;
use captf_contract::{RenderedRoot, Role, UserVariables, render_root};
use serde_json::{Value, json};

struct Workspace {
    _dir: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    tofu: PathBuf,
    cli_config: PathBuf,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

impl Workspace {
    fn new(role: Role, rendered: &RenderedRoot) -> Self {
        let tofu = captf_testenv::assets::tofu().unwrap_or_else(|e| {
            panic!("OpenTofu test asset missing: {e} (run hack/test-assets.sh)")
        });
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_path_buf();
        let module_src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../modules/noop")
            .join(role.as_str());
        copy_dir(&module_src, &base.join("module"));
        let root = base.join("work/root");
        std::fs::create_dir_all(&root).unwrap();
        for (name, contents) in rendered.files() {
            std::fs::write(root.join(name), contents).unwrap();
        }
        // An empty CLI config: no credentials, no mirrors, no plugin cache.
        let cli_config = base.join("empty.tfrc");
        std::fs::write(&cli_config, "").unwrap();
        Workspace {
            _dir: dir,
            base,
            root,
            tofu,
            cli_config,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(&self.tofu);
        cmd.args(args).current_dir(&self.root);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("TF_") {
                cmd.env_remove(key);
            }
        }
        cmd.env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("CHECKPOINT_DISABLE", "1");
        cmd.output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "tofu {args:?} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `init -backend=false` and `validate` on the files as rendered.
    fn init_and_validate(&self) {
        self.ok(&["init", "-backend=false", "-no-color"]);
        let v = self.ok(&["validate", "-json", "-no-color"]);
        let v: Value = serde_json::from_str(&v).unwrap();
        assert_eq!(v["valid"], true, "{v}");
        assert_eq!(v["error_count"], 0, "{v}");
    }

    /// Swaps the backend for a local one (override file) and initialises it.
    fn use_local_backend(&self) {
        let state = self.base.join("state/terraform.tfstate");
        let override_json = json!({
            "terraform": {"backend": {"local": {"path": state.to_str().unwrap()}}}
        });
        std::fs::write(
            self.root.join("backend_override.tf.json"),
            serde_json::to_string_pretty(&override_json).unwrap(),
        )
        .unwrap();
        self.ok(&["init", "-reconfigure", "-no-color"]);
    }

    fn apply(&self) -> Output {
        self.run(&[
            "apply",
            "-auto-approve",
            "-no-color",
            "-var-file=terraform.tfvars.json",
        ])
    }

    fn outputs(&self) -> RootOutputs {
        let json: Value = serde_json::from_str(&self.ok(&["output", "-json"])).unwrap();
        RootOutputs::from_output_json(&json).unwrap()
    }
}

fn applied(role: Role, inputs: &RoleInputs, vars: &UserVariables) -> (Workspace, RootOutputs) {
    let ws = Workspace::new(role, &render_root(inputs, vars).unwrap());
    ws.init_and_validate();
    ws.use_local_backend();
    let out = ws.apply();
    assert!(
        out.status.success(),
        "apply failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let outputs = ws.outputs();
    // The outputs also satisfy the role's published output schema.
    let values = outputs.to_document(role);
    let errors = common::schema_errors(&common::validator(role, Direction::Outputs), &values);
    assert!(
        errors.is_empty(),
        "{role} outputs fail the schema at {errors:?}"
    );
    (ws, outputs)
}

#[test]
fn cluster_roots_apply_and_give_valid_outputs() {
    for variant in common::VARIANTS {
        let inputs = common::inputs(Role::Cluster, variant);
        let (ws, outputs) = applied(
            Role::Cluster,
            &inputs,
            &common::variables(Role::Cluster, variant),
        );
        let decoded = decode_cluster(&outputs);
        assert_eq!(
            decoded.verdict.reason(),
            OutputsReason::OutputsValid,
            "{:?}",
            decoded.verdict
        );
        let out = decoded.outputs.unwrap();
        let RoleInputs::Cluster(ci) = &inputs else {
            unreachable!()
        };
        let endpoint = out.control_plane_endpoint.unwrap();
        match &ci.control_plane_endpoint {
            Some(given) => assert_eq!(&endpoint, given),
            None => assert_eq!(
                (endpoint.host.as_str(), endpoint.port),
                ("noop-prod.invalid", 6443)
            ),
        }
        assert_eq!(out.failure_domains.len(), 1);
        assert_eq!(out.failure_domains[0].name, "fd1");
        assert!(out.failure_domains[0].control_plane);
        let exports = out.exports.to_value();
        let backend = exports["backend_id"].as_str().unwrap();
        assert!(backend.starts_with("noop-backend-") && backend.len() > "noop-backend-".len());
        assert!(out.published_exports.is_some());
        assert_eq!(infrastructure_healthy(Some(&out.health)).reason, "Healthy");
        // Re-applying unchanged inputs changes nothing.
        let plan = ws.run(&[
            "plan",
            "-detailed-exitcode",
            "-no-color",
            "-var-file=terraform.tfvars.json",
        ]);
        assert_eq!(
            plan.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&plan.stdout)
        );
    }
}

#[test]
fn machine_roots_apply_and_give_valid_outputs() {
    for variant in common::VARIANTS {
        let inputs = common::inputs(Role::Machine, variant);
        let RoleInputs::Machine(mi) = &inputs else {
            unreachable!()
        };
        let (_ws, outputs) = applied(
            Role::Machine,
            &inputs,
            &common::variables(Role::Machine, variant),
        );
        let ctx = MachineContext {
            requested_failure_domain: mi.failure_domain.clone(),
            recorded_provider_id: None,
        };
        let decoded = decode_machine(&outputs, &ctx);
        assert_eq!(
            decoded.verdict.reason(),
            OutputsReason::OutputsValid,
            "{:?}",
            decoded.verdict
        );
        let out = decoded.outputs.unwrap();
        assert_eq!(
            out.provider_id,
            format!("noop:///team-a/{}", mi.machine_name)
        );
        assert_eq!(out.addresses.len(), 1);
        assert_eq!(out.failure_domain, mi.failure_domain);
        assert!(!out.interruptible);
        // Once recorded, a different provider ID is reported as a change.
        let moved = decode_machine(
            &outputs,
            &MachineContext {
                recorded_provider_id: Some("noop:///elsewhere".into()),
                ..ctx
            },
        );
        assert_eq!(moved.verdict.reason(), OutputsReason::ProviderIDChanged);
    }
}

#[test]
fn machinepool_roots_apply_and_give_valid_outputs() {
    for variant in common::VARIANTS {
        let inputs = common::inputs(Role::MachinePool, variant);
        let (ws, outputs) = applied(
            Role::MachinePool,
            &inputs,
            &common::variables(Role::MachinePool, variant),
        );
        let decoded = decode_machinepool(&outputs);
        assert_eq!(
            decoded.verdict.reason(),
            OutputsReason::OutputsValid,
            "{:?}",
            decoded.verdict
        );
        let out = decoded.outputs.unwrap();
        let RoleInputs::MachinePool(pi) = &inputs else {
            unreachable!()
        };
        // Autoscaling bounds clamp the desired capacity (full: 12 within [2, 10]).
        let expected = if pi.autoscaling.enabled {
            pi.replicas.clamp(pi.autoscaling.min, pi.autoscaling.max)
        } else {
            pi.replicas
        };
        assert_eq!(out.replicas, expected);
        assert_eq!(out.provider_id_list.len(), expected as usize);
        let mut sorted = out.provider_id_list.clone();
        sorted.sort();
        assert_eq!(out.provider_id_list, sorted);
        assert_eq!(out.instances.len(), expected as usize);
        assert!(
            out.instances
                .iter()
                .all(|i| i.state == Some(HealthState::Running))
        );
        assert_eq!(
            out.provider_id.as_deref(),
            Some(format!("noop-group:///team-a/{}", pi.machinepool_name).as_str())
        );
        assert!(out.health.healthy, "{:?}", out.health);
        ws.ok(&[
            "destroy",
            "-auto-approve",
            "-no-color",
            "-var-file=terraform.tfvars.json",
        ]);
    }
}

#[test]
fn forced_health_and_member_states_reach_the_decoder() {
    // A machine forced to degraded.
    let mut vars = UserVariables::new();
    vars.insert(
        Role::Machine,
        "noop_health_state",
        json!("degraded").into(),
        false,
    )
    .unwrap();
    let inputs = common::inputs(Role::Machine, "minimal");
    let (_ws, outputs) = applied(Role::Machine, &inputs, &vars);
    let decoded = decode_machine(&outputs, &MachineContext::default());
    assert_eq!(decoded.verdict.reason(), OutputsReason::OutputsValid);
    let c = infrastructure_healthy(decoded.health.as_ref());
    assert_eq!(
        (c.status, c.reason),
        (ConditionStatus::False, "InstanceDegraded")
    );

    // A pool whose members are stopped: the group reads stopped, one reason
    // per member.
    let mut pool = common::pool_minimal();
    pool.replicas = 3;
    let mut vars = UserVariables::new();
    vars.insert(
        Role::MachinePool,
        "noop_instance_state",
        json!("stopped").into(),
        false,
    )
    .unwrap();
    let (_ws, outputs) = applied(Role::MachinePool, &pool.into(), &vars);
    let decoded = decode_machinepool(&outputs);
    let health = decoded.health.unwrap();
    assert_eq!(health.state, HealthState::Stopped);
    assert!(!health.healthy);
    assert_eq!(
        health.reasons,
        [
            "Stopped:noop:///team-a/prod-pool-0/0",
            "Stopped:noop:///team-a/prod-pool-0/1",
            "Stopped:noop:///team-a/prod-pool-0/2"
        ]
    );

    // Starting members leave the pool running but not healthy.
    let mut pool = common::pool_minimal();
    pool.replicas = 1;
    let mut vars = UserVariables::new();
    vars.insert(
        Role::MachinePool,
        "noop_instance_state",
        json!("pending").into(),
        false,
    )
    .unwrap();
    let (_ws, outputs) = applied(Role::MachinePool, &pool.into(), &vars);
    let health = decode_machinepool(&outputs).health.unwrap();
    assert_eq!(
        (health.state, health.healthy),
        (HealthState::Running, false)
    );
    assert_eq!(health.reasons, ["Starting:noop:///team-a/prod-pool-0/0"]);
}

#[test]
fn forced_apply_failure_fails_after_creating_the_resource() {
    let mut vars = UserVariables::new();
    vars.insert(
        Role::MachinePool,
        "noop_fail_apply",
        json!(true).into(),
        false,
    )
    .unwrap();
    let inputs = common::inputs(Role::MachinePool, "minimal");
    let ws = Workspace::new(Role::MachinePool, &render_root(&inputs, &vars).unwrap());
    ws.init_and_validate();
    ws.use_local_backend();
    let out = ws.apply();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("failing the apply on purpose"), "{stderr}");
    // The failure is a real partial apply: the resource is in state.
    let list = ws.ok(&["state", "list"]);
    assert!(list.contains("module.role.terraform_data.group"), "{list}");
}

#[test]
fn noop_modules_are_formatted() {
    let tofu = captf_testenv::assets::tofu().expect("OpenTofu test asset");
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../modules/noop");
    let out = Command::new(tofu)
        .args(["fmt", "-check", "-recursive", "-diff"])
        .current_dir(&modules)
        .env("TF_IN_AUTOMATION", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
