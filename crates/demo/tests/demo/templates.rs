//! The cluster templates of a release as clusterctl renders them, offline
//! (no management cluster): both flavors and the identity take the
//! variables the specification names, refuse to render without a required
//! one, default the optional ones to its values, and make the objects it
//! lists. Whether Cluster API accepts and runs what they make is the
//! manager's end-to-end test's part (`capi_e2e`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::{Value, json};

const NAMESPACE: &str = "team-a";
const IDENTITY: &str = "team-a-cloud";
const CLUSTER_IMAGE: &str = "registry.example.com/modules/noop-cluster:v1";
const MACHINE_IMAGE: &str = "registry.example.com/modules/noop-machine:v1";

/// The variables both flavors require beyond what the command's arguments
/// set.
const REQUIRED: [(&str, &str); 3] = [
    ("TERRAFORM_IDENTITY_NAME", IDENTITY),
    ("TERRAFORM_CLUSTER_IMAGE", CLUSTER_IMAGE),
    ("TERRAFORM_MACHINE_IMAGE", MACHINE_IMAGE),
];

fn release_version() -> String {
    format!("v{}", env!("CARGO_PKG_VERSION"))
}

/// A clusterctl repository holding a release as `hack/release-manifests.sh`
/// writes it, and the clusterctl configuration naming it.
struct Repository {
    root: tempfile::TempDir,
}

impl Repository {
    fn new() -> Self {
        let root = tempfile::tempdir().expect("a temporary folder");
        let release = root
            .path()
            .join("repository/infrastructure-terraform")
            .join(release_version());
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/release-manifests.sh");
        let kustomize = captf_testenv::assets::kustomize().expect("the kustomize test asset");
        let run = Command::new("bash")
            .arg(script)
            .arg(&release)
            .arg("ghcr.io/captf-io/captf-manager:v0.1.0")
            .env("KUSTOMIZE", kustomize)
            .output()
            .expect("running hack/release-manifests.sh");
        assert!(
            run.status.success(),
            "hack/release-manifests.sh: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let config = format!(
            "providers:\n- name: terraform\n  url: file://{}\n  type: InfrastructureProvider\n",
            release.join("infrastructure-components.yaml").display()
        );
        std::fs::write(root.path().join("clusterctl.yaml"), config).expect("clusterctl.yaml");
        Repository { root }
    }

    fn release_file(&self, name: &str) -> PathBuf {
        self.root
            .path()
            .join("repository/infrastructure-terraform")
            .join(release_version())
            .join(name)
    }

    /// clusterctl with `args` and no environment but `vars`: no variable
    /// of the test's own environment, no kubeconfig (so nothing is looked
    /// up in a management cluster), no version check.
    fn clusterctl(&self, args: &[&str], vars: &[(&str, &str)]) -> Result<String, String> {
        let clusterctl =
            captf_testenv::assets::capi_binary("clusterctl").expect("the clusterctl test asset");
        let home = self.root.path();
        let out = Command::new(clusterctl)
            .args(args)
            .env_clear()
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("KUBECONFIG", home.join("no-kubeconfig"))
            .env("CLUSTERCTL_DISABLE_VERSIONCHECK", "true")
            .envs(vars.iter().copied())
            .output()
            .expect("running clusterctl");
        if out.status.success() {
            Ok(String::from_utf8(out.stdout).expect("UTF-8 output"))
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// `clusterctl generate cluster prod` of `flavor` (None: the default
    /// template): three control-plane machines, two workers.
    fn generate(&self, flavor: Option<&str>, vars: &[(&str, &str)]) -> Result<String, String> {
        let infrastructure = format!("--infrastructure=terraform:{}", release_version());
        let config = format!(
            "--config={}",
            self.root.path().join("clusterctl.yaml").display()
        );
        let namespace = format!("--target-namespace={NAMESPACE}");
        let flavor = flavor.map(|f| format!("--flavor={f}"));
        let mut args = vec![
            "generate",
            "cluster",
            "prod",
            &infrastructure,
            &config,
            &namespace,
            "--kubernetes-version=v1.33.0",
            "--control-plane-machine-count=3",
            "--worker-machine-count=2",
        ];
        args.extend(flavor.as_deref());
        self.clusterctl(&args, vars)
    }

    /// `clusterctl generate yaml --from identity.yaml`.
    fn identity(&self, vars: &[(&str, &str)]) -> Result<String, String> {
        let from = self.release_file("identity.yaml");
        let from = from.to_str().expect("a UTF-8 path");
        self.clusterctl(&["generate", "yaml", "--from", from], vars)
    }
}

fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|d| Value::deserialize(d).expect("valid YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

/// `Kind/name` of each object, in order.
fn names(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["kind"].as_str().unwrap_or("?"),
                d["metadata"]["name"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

fn object<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} in {:?}", names(docs)))
}

/// A MachineHealthCheck's checks as the templates write them.
fn checks(node_startup: u64, unhealthy: u64) -> Value {
    json!({
        "nodeStartupTimeoutSeconds": node_startup,
        "unhealthyMachineConditions": [
            {"type": "InfrastructureReady", "status": "False", "timeoutSeconds": unhealthy}
        ],
    })
}

#[test]
fn the_default_flavor_makes_a_kubeadm_cluster_on_our_kinds_with_the_specs_defaults() {
    let repo = Repository::new();
    let docs = documents(&repo.generate(None, &REQUIRED).expect("the default flavor"));
    assert_eq!(
        names(&docs),
        [
            "Cluster/prod",
            "TerraformCluster/prod",
            "KubeadmControlPlane/prod-control-plane",
            "TerraformMachineTemplate/prod-control-plane",
            "MachineDeployment/prod-md-0",
            "TerraformMachineTemplate/prod-md-0",
            "KubeadmConfigTemplate/prod-md-0",
            "MachineHealthCheck/prod-md-0",
            "MachineHealthCheck/prod-control-plane",
        ]
    );
    for d in &docs {
        assert_eq!(d["metadata"]["namespace"], NAMESPACE, "{d}");
    }

    let cluster = &object(&docs, "Cluster", "prod")["spec"];
    assert_eq!(
        cluster["clusterNetwork"],
        json!({"pods": {"cidrBlocks": ["192.168.0.0/16"]}, "services": {"cidrBlocks": ["10.128.0.0/12"]}})
    );
    assert_eq!(
        cluster["infrastructureRef"],
        json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": "prod"})
    );
    assert_eq!(
        cluster["controlPlaneRef"],
        json!({"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "prod-control-plane"})
    );

    let identity = json!({"kind": "TerraformClusterIdentity", "name": IDENTITY});
    let tc = &object(&docs, "TerraformCluster", "prod")["spec"];
    assert_eq!(tc["source"]["image"], CLUSTER_IMAGE);
    assert_eq!(tc["identityRef"], identity);
    assert_eq!(tc["defaults"]["identityRef"], identity);

    let kcp = &object(&docs, "KubeadmControlPlane", "prod-control-plane")["spec"];
    assert_eq!(kcp["replicas"], 3);
    assert_eq!(kcp["version"], "v1.33.0");
    assert_eq!(
        kcp["machineTemplate"]["spec"]["infrastructureRef"],
        json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachineTemplate", "name": "prod-control-plane"})
    );
    for template in ["prod-control-plane", "prod-md-0"] {
        let t = &object(&docs, "TerraformMachineTemplate", template)["spec"]["template"]["spec"];
        assert_eq!(
            t,
            &json!({"source": {"image": MACHINE_IMAGE}}),
            "{template}"
        );
    }

    let md = &object(&docs, "MachineDeployment", "prod-md-0")["spec"];
    assert_eq!(md["clusterName"], "prod");
    assert_eq!(md["replicas"], 2);
    assert_eq!(md["template"]["spec"]["version"], "v1.33.0");
    assert_eq!(
        md["template"]["spec"]["infrastructureRef"]["name"],
        "prod-md-0"
    );
    assert_eq!(
        md["template"]["spec"]["bootstrap"]["configRef"],
        json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "prod-md-0"})
    );

    let workers = &object(&docs, "MachineHealthCheck", "prod-md-0")["spec"];
    assert_eq!(workers["clusterName"], "prod");
    assert_eq!(
        workers["selector"],
        json!({"matchLabels": {"cluster.x-k8s.io/deployment-name": "prod-md-0"}})
    );
    assert_eq!(workers["checks"], checks(1200, 1800));
    let control_plane = &object(&docs, "MachineHealthCheck", "prod-control-plane")["spec"];
    assert_eq!(
        control_plane["selector"],
        json!({"matchLabels": {"cluster.x-k8s.io/control-plane": ""}})
    );
    assert_eq!(control_plane["checks"], checks(1800, 3600));
}

/// The optional variables, set: what each of them sets in both flavors.
const OVERRIDES: [(&str, &str); 6] = [
    ("POD_CIDR", "10.1.0.0/16"),
    ("SERVICE_CIDR", "10.2.0.0/16"),
    ("TERRAFORM_NODE_STARTUP_TIMEOUT", "600"),
    ("TERRAFORM_UNHEALTHY_TIMEOUT", "900"),
    ("TERRAFORM_CP_NODE_STARTUP_TIMEOUT", "700"),
    ("TERRAFORM_CP_UNHEALTHY_TIMEOUT", "1000"),
];

#[test]
fn the_optional_variables_set_the_network_and_the_health_checks_of_both_flavors() {
    let repo = Repository::new();
    let vars: Vec<(&str, &str)> = REQUIRED.iter().chain(&OVERRIDES).copied().collect();
    let network = json!({"pods": {"cidrBlocks": ["10.1.0.0/16"]}, "services": {"cidrBlocks": ["10.2.0.0/16"]}});

    let docs = documents(&repo.generate(None, &vars).expect("the default flavor"));
    assert_eq!(
        object(&docs, "Cluster", "prod")["spec"]["clusterNetwork"],
        network
    );
    assert_eq!(
        object(&docs, "MachineHealthCheck", "prod-md-0")["spec"]["checks"],
        checks(600, 900)
    );
    assert_eq!(
        object(&docs, "MachineHealthCheck", "prod-control-plane")["spec"]["checks"],
        checks(700, 1000)
    );

    let docs = documents(
        &repo
            .generate(Some("clusterclass"), &vars)
            .expect("the clusterclass flavor"),
    );
    let cluster = &object(&docs, "Cluster", "prod")["spec"];
    assert_eq!(cluster["clusterNetwork"], network);
    let topology = &cluster["topology"];
    assert_eq!(
        topology["controlPlane"]["healthCheck"]["checks"],
        checks(700, 1000)
    );
    assert_eq!(
        topology["workers"]["machineDeployments"][0]["healthCheck"]["checks"],
        checks(600, 900)
    );
}

#[test]
fn the_clusterclass_flavor_brings_the_noop_class_and_fills_its_variables() {
    let repo = Repository::new();
    let docs = documents(
        &repo
            .generate(Some("clusterclass"), &REQUIRED)
            .expect("the clusterclass flavor"),
    );
    // clusterctl puts the class's file before the Cluster.
    assert_eq!(
        names(&docs),
        [
            "TerraformClusterTemplate/noop",
            "KubeadmControlPlaneTemplate/noop-control-plane",
            "TerraformMachineTemplate/noop-control-plane",
            "TerraformMachineTemplate/noop-worker",
            "KubeadmConfigTemplate/noop-worker",
            "ClusterClass/noop",
            "Cluster/prod",
        ]
    );
    for d in &docs {
        assert_eq!(d["metadata"]["namespace"], NAMESPACE, "{d}");
    }

    let topology = &object(&docs, "Cluster", "prod")["spec"]["topology"];
    assert_eq!(topology["classRef"], json!({"name": "noop"}));
    assert_eq!(topology["version"], "v1.33.0");
    assert_eq!(topology["controlPlane"]["replicas"], 3);
    assert_eq!(
        topology["controlPlane"]["healthCheck"]["checks"],
        checks(1800, 3600)
    );
    let workers = topology["workers"]["machineDeployments"]
        .as_array()
        .expect("machine deployments");
    assert_eq!(workers.len(), 1);
    assert_eq!(workers[0]["class"], "default-worker");
    assert_eq!(workers[0]["replicas"], 2);
    assert_eq!(workers[0]["healthCheck"]["checks"], checks(1200, 1800));
    assert_eq!(
        topology["variables"],
        json!([
            {"name": "identityName", "value": IDENTITY},
            {"name": "clusterImage", "value": CLUSTER_IMAGE},
            {"name": "machineImage", "value": MACHINE_IMAGE},
        ])
    );

    // The class declares the three variables, required strings, and every
    // template it names is in its file.
    let class = &object(&docs, "ClusterClass", "noop")["spec"];
    let declared: Vec<(&str, &Value, &Value)> = class["variables"]
        .as_array()
        .expect("variables")
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap_or("?"),
                &v["required"],
                &v["schema"]["openAPIV3Schema"]["type"],
            )
        })
        .collect();
    let yes = json!(true);
    let string = json!("string");
    assert_eq!(
        declared,
        [
            ("identityName", &yes, &string),
            ("clusterImage", &yes, &string),
            ("machineImage", &yes, &string),
        ]
    );
    let refs = [
        &class["infrastructure"]["templateRef"],
        &class["controlPlane"]["templateRef"],
        &class["controlPlane"]["machineInfrastructure"]["templateRef"],
        &class["workers"]["machineDeployments"][0]["bootstrap"]["templateRef"],
        &class["workers"]["machineDeployments"][0]["infrastructure"]["templateRef"],
    ];
    for r in refs {
        let kind = r["kind"].as_str().expect("a kind");
        let name = r["name"].as_str().expect("a name");
        assert_eq!(object(&docs, kind, name)["apiVersion"], r["apiVersion"]);
    }
    assert_eq!(
        class["workers"]["machineDeployments"][0]["class"],
        "default-worker"
    );

    // The class's own templates carry the generated cluster's images, so
    // the manager can inspect its machine templates; each clone's comes
    // from the patches below.
    for (kind, name, image) in [
        ("TerraformClusterTemplate", "noop", CLUSTER_IMAGE),
        (
            "TerraformMachineTemplate",
            "noop-control-plane",
            MACHINE_IMAGE,
        ),
        ("TerraformMachineTemplate", "noop-worker", MACHINE_IMAGE),
    ] {
        assert_eq!(
            object(&docs, kind, name)["spec"]["template"]["spec"]["source"]["image"],
            image,
            "{kind}/{name}"
        );
    }

    // The machine image reaches both machine templates, so a new value
    // rolls the control plane and the workers.
    let patch = class["patches"]
        .as_array()
        .expect("patches")
        .iter()
        .find(|p| p["name"] == "machineImage")
        .expect("the machineImage patch");
    let definition = &patch["definitions"][0];
    assert_eq!(definition["selector"]["kind"], "TerraformMachineTemplate");
    assert_eq!(
        definition["selector"]["matchResources"],
        json!({"controlPlane": true, "machineDeploymentClass": {"names": ["default-worker"]}})
    );
    assert_eq!(
        definition["jsonPatches"],
        json!([{"op": "replace", "path": "/spec/template/spec/source/image", "valueFrom": {"variable": "machineImage"}}])
    );
}

#[test]
fn a_flavor_without_a_required_variable_does_not_render_and_names_it() {
    let repo = Repository::new();
    for flavor in [None, Some("clusterclass")] {
        for (missing, _) in REQUIRED {
            let vars: Vec<(&str, &str)> = REQUIRED
                .iter()
                .filter(|(name, _)| *name != missing)
                .copied()
                .collect();
            let err = repo
                .generate(flavor, &vars)
                .expect_err("a required variable is missing");
            assert!(
                err.contains(&format!("[{missing}]")),
                "{flavor:?} without {missing}: {err}"
            );
        }
    }
}

#[test]
fn the_identity_names_its_secret_and_allows_the_namespace() {
    let repo = Repository::new();
    let vars = [
        ("TERRAFORM_IDENTITY_NAME", IDENTITY),
        ("NAMESPACE", NAMESPACE),
    ];
    let docs = documents(&repo.identity(&vars).expect("identity.yaml"));
    assert_eq!(
        names(&docs),
        [
            format!("Secret/{IDENTITY}"),
            format!("TerraformClusterIdentity/{IDENTITY}"),
        ]
    );
    let secret = object(&docs, "Secret", IDENTITY);
    assert_eq!(secret["metadata"]["namespace"], "captf-system");
    let identity = object(&docs, "TerraformClusterIdentity", IDENTITY);
    assert!(identity["metadata"].get("namespace").is_none());
    assert_eq!(
        identity["spec"]["secretRef"],
        json!({"name": IDENTITY, "namespace": "captf-system"})
    );
    assert_eq!(
        identity["spec"]["allowedNamespaces"],
        json!({"list": [NAMESPACE]})
    );

    // The Secret may live elsewhere.
    let elsewhere = [
        ("TERRAFORM_IDENTITY_NAME", IDENTITY),
        ("NAMESPACE", NAMESPACE),
        ("TERRAFORM_IDENTITY_SECRET_NAMESPACE", "credentials"),
    ];
    let docs = documents(&repo.identity(&elsewhere).expect("identity.yaml"));
    assert_eq!(
        object(&docs, "Secret", IDENTITY)["metadata"]["namespace"],
        "credentials"
    );
    assert_eq!(
        object(&docs, "TerraformClusterIdentity", IDENTITY)["spec"]["secretRef"]["namespace"],
        "credentials"
    );

    for missing in ["TERRAFORM_IDENTITY_NAME", "NAMESPACE"] {
        let vars: Vec<(&str, &str)> = vars
            .iter()
            .filter(|(n, _)| *n != missing)
            .copied()
            .collect();
        let err = repo
            .identity(&vars)
            .expect_err("a required variable is missing");
        assert!(
            err.contains(&format!("[{missing}]")),
            "without {missing}: {err}"
        );
    }
}
