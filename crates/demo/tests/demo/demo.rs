//! The demo end to end, as `make demo` runs it (minus the Makefile): the
//! workspace builds the runner, the manager (static) and the demo, and the
//! demo brings up the control plane, a real node (the Jobs' pods run on its
//! kubelet and containerd), Cluster API's controllers, the node agent and
//! the manager, and converges the example cluster and machine pool on
//! the no-op modules with the real runner and OpenTofu, Cluster API making
//! the owner references and matching the pool's members to Nodes. This is
//! the demo CI runs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The folder of the runner, the manager and the demo, built once per
/// test process (`captf_testenv::binaries`).
fn build() -> PathBuf {
    captf_testenv::binaries::debug("captf-demo")
        .parent()
        .expect("the target folder")
        .to_path_buf()
}

/// The row of `name` in the table printed after `$ kubectl get <resource>`,
/// as (header, cells).
fn row(output: &str, resource: &str, name: &str) -> Option<Vec<(String, String)>> {
    let mut lines = output
        .lines()
        .skip_while(|l| !l.starts_with(&format!("$ kubectl get {resource} ")))
        .skip(1);
    let header = lines.next()?;
    let cells = lines
        .take_while(|l| !l.is_empty())
        .find(|l| l.split_whitespace().next() == Some(name))?;
    // Columns start where the header's names start.
    let starts: Vec<usize> = header
        .char_indices()
        .filter(|&(i, c)| c != ' ' && (i == 0 || header.as_bytes()[i - 1] == b' '))
        .map(|(i, _)| i)
        .collect();
    let field = |s: &str, k: usize| {
        let end = starts.get(k + 1).copied().unwrap_or(s.len()).min(s.len());
        s.get(starts[k].min(s.len())..end)
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    Some(
        (0..starts.len())
            .map(|k| (field(header, k), field(cells, k)))
            .collect(),
    )
}

/// One demo at a time: both modes' managers serve on the host's ports.
static ONE_DEMO: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs the demo with `args`; returns its stdout and stderr once it
/// succeeded.
fn run_demo(bin_dir: &Path, args: &[&std::ffi::OsStr]) -> (String, String) {
    let _one = ONE_DEMO.lock().unwrap_or_else(|p| p.into_inner());
    // The runner and the manager as `make demo` builds them: static, for
    // the manager image the node runs.
    let static_dir = captf_testenv::binaries::static_linked("runner")
        .parent()
        .expect("the static target folder")
        .to_path_buf();
    let output = Command::new(bin_dir.join("captf-demo"))
        .args(["--timeout", "8m"])
        .arg("--bin-dir")
        .arg(&static_dir)
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("running captf-demo");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "captf-demo failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    (stdout, stderr)
}

#[test]
fn the_demo_converges_and_prints_ready_infrastructure() {
    let bin_dir = build();
    let (stdout, stderr) = run_demo(&bin_dir, &[]);
    // The provider's webhooks are registered as an installation has them:
    // a bad object is refused before anything is applied.
    assert!(
        stdout.contains("its webhook refuses a root Job: admission webhook \"validation.terraformcluster.infrastructure.cluster.x-k8s.io\" denied the request"),
        "{stdout}"
    );
    check_converged(&stdout, &stderr);
}

/// Install mode, as `make demo-install` runs it: the release built the way
/// `make release` builds it (static binaries, the image layout, the
/// components of `hack/release-manifests.sh`), the manager pod run on the
/// real node from that layout (Ready by its own readiness probe), its
/// webhook answering through its Service with the demo's certificate, and
/// the examples converging under it.
#[test]
fn the_demo_in_install_mode_runs_the_manager_from_its_image() {
    let bin_dir = build();
    let out = tempfile::tempdir().unwrap();
    let image = "local.demo/captf-manager:v0.1.0";
    let manager = captf_testenv::binaries::static_linked("manager");
    let runner = captf_testenv::binaries::static_linked("runner");
    let layout = out.path().join("images/captf-manager");
    let provenance = captf_images::recipes::Provenance {
        version: "v0.1.0".into(),
        ..Default::default()
    };
    let spec = captf_images::recipes::manager_image(&manager, &runner, &provenance);
    captf_images::layout::write_layout(&layout, &spec, Some("v0.1.0")).unwrap();
    let kustomize = captf_testenv::assets::kustomize().expect("the kustomize test asset");
    let release = Command::new("bash")
        .arg(workspace().join("hack/release-manifests.sh"))
        .arg(out.path())
        .arg(image)
        .env("KUSTOMIZE", kustomize)
        .current_dir(workspace())
        .output()
        .unwrap();
    assert!(release.status.success(), "{release:?}");

    let components = out.path().join("infrastructure-components.yaml");
    let (stdout, stderr) = run_demo(
        &bin_dir,
        &[
            "--install".as_ref(),
            components.as_os_str(),
            "--manager-image".as_ref(),
            layout.as_os_str(),
        ],
    );
    assert!(
        stdout.contains(&format!("(manager image {image}); the real node runs Deployment captf-system/captf-controller-manager")),
        "{stdout}"
    );
    assert!(
        stdout.contains("Running on node captf-node, its readiness probe passing"),
        "{stdout}"
    );
    assert!(
        stdout.contains("its webhook refuses a root Job: admission webhook \"validation.terraformcluster.infrastructure.cluster.x-k8s.io\" denied the request"),
        "{stdout}"
    );
    check_converged(&stdout, &stderr);
}

/// What a converged demo prints, in either mode.
fn check_converged(stdout: &str, stderr: &str) {
    // It stops cleanly: no agent reports the control plane it outlived.
    // (A watch that expired mid-run and was listed again is not noise.)
    assert!(
        !stderr.contains("client error (Connect)"),
        "the demo's end reports connection errors:\n{stderr}"
    );
    let pool = row(stdout, "terraformmachinepools", "demo-workers")
        .unwrap_or_else(|| panic!("no TerraformMachinePool row in:\n{stdout}"));
    let get = |col: &str| {
        pool.iter()
            .find(|(h, _)| h == col)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {col} column in {pool:?}"))
    };
    assert_eq!(get("READY"), "True", "{stdout}");
    assert_eq!(get("CLUSTER"), "demo");
    assert_eq!(get("MACHINEPOOL"), "demo-workers");
    assert_eq!(get("REPLICAS"), "3");

    let cluster = row(stdout, "terraformclusters", "demo")
        .unwrap_or_else(|| panic!("no TerraformCluster row in:\n{stdout}"));
    let ready = cluster
        .iter()
        .find(|(h, _)| h == "READY")
        .map(|(_, v)| v.as_str());
    assert_eq!(ready, Some("True"), "{stdout}");

    // Cluster API's own view of the pool: three members matched to Nodes.
    let mp = row(stdout, "machinepools", "demo-workers")
        .unwrap_or_else(|| panic!("no MachinePool row in:\n{stdout}"));
    let mp_get = |col: &str| {
        mp.iter()
            .find(|(h, _)| h == col)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {col} column in {mp:?}"))
    };
    assert_eq!(mp_get("DESIRED"), "3", "{stdout}");
    assert_eq!(mp_get("READY"), "3", "{stdout}");
    assert_eq!(mp_get("PHASE"), "Running", "{stdout}");
    let matched: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.contains("MachinePool/demo-workers status.nodeRefs (3)"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert!(
        stdout.contains("Cluster API matched MachinePool/demo-workers to 3 Nodes"),
        "{stdout}"
    );

    // The module's three members, sorted.
    let ids: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.contains("spec.providerIDList (3)"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    assert_eq!(ids.len(), 3, "{stdout}");
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted);
    assert_eq!(
        matched, ids,
        "each member has the Node Cluster API matched:\n{stdout}"
    );

    // The control-plane machine and the MachineDeployment's two workers:
    // provisioned with provider IDs, each Machine matched to its Node.
    let cell = |resource: &str, name: &str, col: &str| -> String {
        let r = row(stdout, resource, name)
            .unwrap_or_else(|| panic!("no {resource} row {name} in:\n{stdout}"));
        r.iter()
            .find(|(h, _)| h == col)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {col} column in {r:?}"))
    };
    assert_eq!(
        cell("terraformmachines", "demo-cp-0", "READY"),
        "True",
        "{stdout}"
    );
    assert_eq!(
        cell("terraformmachines", "demo-cp-0", "PROVIDERID"),
        "noop:///captf-demo/demo-cp-0"
    );
    assert_eq!(
        cell("machines", "demo-cp-0", "PHASE"),
        "Running",
        "{stdout}"
    );
    assert_eq!(
        cell("machinedeployments", "demo-md", "READY"),
        "2",
        "{stdout}"
    );
    assert!(
        stdout.contains("Cluster API matched 3 Machines to their Nodes"),
        "{stdout}"
    );

    // The Jobs ran on a real node: its kubelet's Node, with its container
    // runtime.
    let node = row(stdout, "nodes", "captf-node")
        .unwrap_or_else(|| panic!("no Node row captf-node in:\n{stdout}"));
    let node_get = |col: &str| {
        node.iter()
            .find(|(h, _)| h == col)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {col} column in {node:?}"))
    };
    assert_eq!(node_get("STATUS"), "Ready", "{stdout}");
    assert!(
        node_get("CONTAINER-RUNTIME").starts_with("containerd://"),
        "{stdout}"
    );
}

#[test]
fn the_table_reader_finds_cells_by_header() {
    let out = "x\n$ kubectl get terraformmachinepools -n ns\nNAME   CLUSTER   REPLICAS   READY\na      demo                 True\n\nrest\n";
    let r = row(out, "terraformmachinepools", "a").unwrap();
    assert_eq!(
        r,
        [
            ("NAME".to_owned(), "a".to_owned()),
            ("CLUSTER".to_owned(), "demo".to_owned()),
            ("REPLICAS".to_owned(), String::new()),
            ("READY".to_owned(), "True".to_owned()),
        ]
    );
    assert!(row(out, "terraformmachinepools", "b").is_none());
    assert!(row(out, "terraformclusters", "a").is_none());
}
