//! `clusterctl move` between two management clusters, each a real control
//! plane running Cluster API's managers, this provider's webhooks and its
//! controllers. A converged cluster (its TerraformCluster, a control-plane
//! TerraformMachine and a TerraformMachinePool of 2, on the noop modules) is
//! moved by the real `clusterctl move` while a Job of the pool runs: the
//! move waits for the block-move annotation, the paused source starts no
//! Job, state and records move with the objects, and on the target the
//! objects are Ready again from their state alone: no apply Job, the same
//! state serials. Deleting the Cluster on the target then destroys through
//! the moved state.
//!
//! The workload cluster stays the first control plane (the moved
//! `prod-kubeconfig` Secret points at it), so the target's Cluster API
//! matches the same Nodes the first cluster's node agent registered.

use crate::support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use captf_api::{TerraformCluster, TerraformMachine, TerraformMachinePool};
use captf_manager::capi;
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use support::moving::*;
use support::*;

/// What `clusterctl move` reads to find the Secrets a user wants moved.
const MOVE_LABEL: &str = "clusterctl.cluster.x-k8s.io/move";

/// A user's cluster: a classic Cluster and its TerraformCluster, a
/// control-plane Machine and its TerraformMachine, a MachinePool of 2 and
/// its TerraformMachinePool. The credentials and bootstrap Secrets are the
/// user's own and carry the move label, as `clusterctl move` asks of Secrets
/// nothing owns.
async fn user_cluster(ns: &TestNamespace) {
    let secret = |name: &str, data: Value| -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {MOVE_LABEL: "", "cluster.x-k8s.io/cluster-name": "prod"}},
            "stringData": data,
        }))
        .unwrap()
    };
    let secrets = ns.api::<Secret>();
    for s in [
        secret("creds", json!({"token": "x"})),
        secret(
            "bootstrap",
            json!({"value": "#cloud-config\n", "format": "cloud-config"}),
        ),
    ] {
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }
    create_capi_cluster(ns, "prod").await;
    let source = |role: &str| json!({"image": module_ref(role, ns.name())});
    let identity = json!({"kind": "Secret", "name": "creds"});
    let infra = |kind: &str| dynamic(ns.client(), ns.name(), &infra_resource(kind));
    create(&infra("TerraformCluster"), json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "metadata": {"name": "prod"},
        "spec": {"source": source("cluster"), "identityRef": identity, "drift": {"intervalSeconds": 0}},
    }))
    .await;
    create(&infra("TerraformMachine"), json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachine",
        "metadata": {"name": "cp-0"},
        "spec": {"source": source("machine"), "identityRef": identity, "drift": {"intervalSeconds": 0}},
    }))
    .await;
    let bootstrap = json!({"dataSecretName": "bootstrap"});
    create(&dynamic(ns.client(), ns.name(), &capi::machine_resource()), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": "cp-0", "labels": {"cluster.x-k8s.io/control-plane": ""}},
        "spec": {
            "clusterName": "prod", "bootstrap": bootstrap, "version": "v1.37.2",
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachine", "name": "cp-0"},
        },
    }))
    .await;
    create(&dynamic(ns.client(), ns.name(), &capi::machine_pool_resource()), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": "pool-a"},
        "spec": {"clusterName": "prod", "replicas": 2, "template": {"spec": {
            "clusterName": "prod", "bootstrap": bootstrap, "version": "v1.37.2",
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachinePool", "name": "pool-a"},
        }}},
    }))
    .await;
    create(&infra("TerraformMachinePool"), json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
        "metadata": {"name": "pool-a"},
        "spec": {"source": source("machinepool"), "identityRef": identity, "membershipRefreshIntervalSeconds": 15},
    }))
    .await;
}

fn ready(
    conditions: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
) -> bool {
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn applied(
    conditions: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
) -> Option<String> {
    conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "ApplyJobSucceeded")
        .map(|c| format!("{}/{}", c.status, c.reason))
}

/// Waits until the three objects are Ready, Cluster API has matched the
/// control-plane Machine and both pool members to Nodes, and the Cluster's
/// control plane is initialized (what `clusterctl move` checks before it
/// starts). Returns each object's `ApplyJobSucceeded` condition.
async fn converged(client: kube::Client, ns: &str, secs: u64) -> BTreeMap<&'static str, String> {
    let last = Mutex::new(String::new());
    eventually("the cluster converged", secs, || async {
        let tc = Api::<TerraformCluster>::namespaced(client.clone(), ns)
            .get("prod")
            .await
            .ok()?;
        let tm = Api::<TerraformMachine>::namespaced(client.clone(), ns)
            .get("cp-0")
            .await
            .ok()?;
        let pool = Api::<TerraformMachinePool>::namespaced(client.clone(), ns)
            .get("pool-a")
            .await
            .ok()?;
        let machine = dynamic(client.clone(), ns, &capi::machine_resource())
            .get("cp-0")
            .await
            .ok()?;
        let mp = dynamic(client.clone(), ns, &capi::machine_pool_resource())
            .get("pool-a")
            .await
            .ok()?;
        let cluster = dynamic(client.clone(), ns, &capi::cluster_resource())
            .get("prod")
            .await
            .ok()?;
        let state = (
            ready(tc.status.as_ref().and_then(|s| s.conditions.as_ref())),
            ready(tm.status.as_ref().and_then(|s| s.conditions.as_ref())),
            ready(pool.status.as_ref().and_then(|s| s.conditions.as_ref())),
            machine.data["status"]["nodeRef"]["name"].is_string(),
            mp.data["status"]["readyReplicas"].as_i64(),
            cluster.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "ControlPlaneInitialized" && c["status"] == "True"),
        );
        let seen = format!("{state:?}");
        let mut l = last.lock().unwrap();
        if *l != seen {
            eprintln!(
                "{ns}: ready tc/tm/pool, nodeRef, pool ready replicas, cp initialized: {seen}"
            );
            *l = seen;
        }
        (state == (true, true, true, true, Some(2), true)).then(|| {
            BTreeMap::from([
                (
                    "TerraformCluster",
                    applied(tc.status.as_ref().and_then(|s| s.conditions.as_ref()))
                        .unwrap_or_default(),
                ),
                (
                    "TerraformMachine",
                    applied(tm.status.as_ref().and_then(|s| s.conditions.as_ref()))
                        .unwrap_or_default(),
                ),
                (
                    "TerraformMachinePool",
                    applied(pool.status.as_ref().and_then(|s| s.conditions.as_ref()))
                        .unwrap_or_default(),
                ),
            ])
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusterctl_move_carries_a_converged_cluster_to_a_new_management_cluster_without_a_re_apply()
 {
    let source_env = TestEnv::get().await;
    let target_env = TestEnv::second().await;
    let ns = source_env.namespace().await;
    let target_ns = target_env.namespace_named(ns.name()).await;
    let tmp = tempfile::tempdir().unwrap();
    let images = images(&ns, tmp.path());
    let _source_manager = management_cluster(source_env, &ns, &images).await;
    let _target_manager = management_cluster(target_env, &target_ns, &images).await;

    user_cluster(&ns).await;
    let before = converged(ns.client(), ns.name(), 300).await;
    for (kind, condition) in &before {
        assert_eq!(condition, "True/ApplySucceeded", "{kind} before the move");
    }
    // One apply per object, and the cluster's one re-apply when its
    // control plane came up (`control_plane_initialized` is an input).
    let applies = eventually("the applies done", 120, || async {
        let jobs = ns
            .api::<Job>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items;
        let done = jobs.iter().all(|j| {
            j.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(OP_LABEL))
                .map(String::as_str)
                != Some("apply")
                || j.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0) > 0
        });
        let applies = applies_by_kind(&jobs);
        (done && applies.get("TerraformCluster") == Some(&2)).then_some(applies)
    })
    .await;
    assert_eq!(
        applies,
        BTreeMap::from([
            ("TerraformCluster".to_owned(), 2),
            ("TerraformMachine".to_owned(), 1),
            ("TerraformMachinePool".to_owned(), 1),
        ])
    );

    // Start the move while the pool's membership refresh runs, so the
    // handshake has a Job to wait for.
    let running = eventually("a pool refresh Job running", 60, || async {
        let jobs = ns
            .api::<Job>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items;
        jobs.into_iter().find(|j| {
            j.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(OP_LABEL))
                .map(String::as_str)
                == Some("refresh")
                && j.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0
        })
    })
    .await
    .metadata
    .name
    .unwrap();

    let log = Arc::new(Mutex::new(SourceLog::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = tokio::spawn(watch_source(
        ns.client(),
        ns.name().to_owned(),
        log.clone(),
        stop.clone(),
    ));
    let (src, dst, name) = (source_env, target_env, ns.name().to_owned());
    let moved = tokio::task::spawn_blocking(move || clusterctl_move(src, dst, &name))
        .await
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    watcher.await.unwrap();
    assert!(
        moved.status.success(),
        "clusterctl move failed:\n{}\n{}",
        String::from_utf8_lossy(&moved.stdout),
        String::from_utf8_lossy(&moved.stderr)
    );
    let log = std::mem::take(&mut *log.lock().unwrap());

    // The handshake: the Job running at the pause finished before its
    // object left, and the paused source started nothing new.
    let paused_at = log.paused_at.expect("clusterctl paused the source Cluster");
    let refresh = log
        .jobs
        .get(&running)
        .expect("the running refresh Job was seen");
    assert_eq!(refresh.op, "refresh");
    assert!(
        refresh.succeeded,
        "the Job under way finished before the move: {log:?}"
    );
    let late: Vec<_> = log
        .jobs
        .iter()
        .filter(|(_, j)| j.created > paused_at + std::time::Duration::from_secs(2))
        .collect();
    assert!(
        late.is_empty(),
        "Jobs started on the paused source: {late:?}"
    );
    let source_serials = log.serials.clone().expect("the source's state was read");
    // The state arrived as it left: read before the target ran any Job
    // (the moved Cluster stays paused until the move's last step).
    let target_jobs = target_ns
        .api::<Job>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let moved_serials = serials(&target_ns.client(), target_ns.name())
        .await
        .expect("the moved state reads");
    assert!(
        target_jobs.is_empty(),
        "no Job on the target yet: {:?}",
        jobs_by_op(&target_jobs)
    );
    assert_eq!(moved_serials, source_serials, "the same state serials");

    // The source keeps nothing of the objects.
    for kind in [
        "TerraformCluster",
        "TerraformMachine",
        "TerraformMachinePool",
    ] {
        let left = dynamic(ns.client(), ns.name(), &infra_resource(kind))
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        assert!(left.is_empty(), "{kind} left on the source");
    }

    // On the target: Ready again from the moved state, with no apply.
    let target_jobs_seen = Arc::new(Mutex::new(BTreeMap::<String, String>::new()));
    let after = {
        let seen = target_jobs_seen.clone();
        let jobs = target_ns.api::<Job>();
        let record = tokio::spawn(async move {
            loop {
                if let Ok(list) = jobs.list(&ListParams::default()).await {
                    let mut seen = seen.lock().unwrap();
                    for j in list.items {
                        let op = job_op(&j);
                        seen.insert(j.metadata.name.unwrap_or_default(), op);
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        });
        let after = converged(target_ns.client(), target_ns.name(), 180).await;
        // A membership refresh on the target reads the moved state too.
        eventually("a pool refresh on the target", 60, || async {
            let jobs = target_ns
                .api::<Job>()
                .list(&ListParams::default())
                .await
                .ok()?
                .items;
            jobs.iter()
                .any(|j| {
                    j.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(OP_LABEL))
                        .map(String::as_str)
                        == Some("refresh")
                        && j.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0) > 0
                })
                .then_some(())
        })
        .await;
        record.abort();
        after
    };
    for (kind, condition) in &after {
        assert_eq!(condition, "True/ApplySucceeded", "{kind} on the target");
    }
    let target_ops: Vec<String> = target_jobs_seen.lock().unwrap().values().cloned().collect();
    assert!(
        !target_ops.iter().any(|op| op == "apply"),
        "no apply on the target: {target_ops:?}"
    );
    let target_serials = serials(&target_ns.client(), target_ns.name())
        .await
        .expect("the moved state reads");
    // Only the pool's membership refreshes wrote state since.
    for name in ["prod", "cp-0"] {
        assert_eq!(
            target_serials[name], moved_serials[name],
            "{name} wrote no state"
        );
    }
    assert!(target_serials["pool-a"] >= moved_serials["pool-a"]);
    // The moved records stand in for the first apply on the target.
    for (kind, name) in OBJECTS {
        let applied = target_ns
            .api::<Secret>()
            .get_opt(&captf_manager::records::applied_record_name(kind, name))
            .await
            .unwrap();
        assert!(applied.is_some(), "the applied record of {name} moved");
    }

    // The moved state is the one the target destroys through.
    dynamic(
        target_ns.client(),
        target_ns.name(),
        &capi::cluster_resource(),
    )
    .delete("prod", &DeleteParams::default())
    .await
    .unwrap();
    eventually("every object destroyed on the target", 240, || async {
        let mut left = 0;
        for kind in [
            "TerraformCluster",
            "TerraformMachine",
            "TerraformMachinePool",
        ] {
            left += dynamic(target_ns.client(), target_ns.name(), &infra_resource(kind))
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .len();
        }
        (left == 0).then_some(())
    })
    .await;
    let destroys = jobs_by_op(
        &target_ns
            .api::<Job>()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items,
    );
    let state_left: Vec<String> = target_ns
        .api::<Secret>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .filter(|n| {
            n.starts_with("tfstate-")
                || n.starts_with("captf-inputs-")
                || n.starts_with("captf-applied-")
        })
        .collect();
    assert!(
        state_left.is_empty(),
        "state and records left after the destroy: {state_left:?} ({destroys:?})"
    );
}
