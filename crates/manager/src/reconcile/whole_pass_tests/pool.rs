//! A TerraformMachinePool's passes, request by request.

use serde_json::{Value, json};

use super::harness::*;
use crate::names::{WorkloadKind, state_secret, state_suffix};

/// A provisioned cluster (its TerraformCluster's state saved), its
/// MachinePool of one and the pool, as Cluster API would leave them.
fn seed(world: &World, refresh_seconds: u64) {
    let fake = &world.fake;
    let labels = json!({"cluster.x-k8s.io/cluster-name": "prod"});
    seed_provisioned_cluster(world);
    let mp = fake.insert(
        MACHINE_POOLS,
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": "pool-a", "namespace": NS, "labels": labels},
            "spec": {"clusterName": "prod", "replicas": 1, "template": {"spec": {
                "clusterName": "prod", "bootstrap": {"dataSecretName": "bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "TerraformMachinePool", "name": "pool-a"},
                "version": "v1.37.2"}}}}),
    );
    fake.insert(
        TERRAFORM_MACHINE_POOLS,
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
            "metadata": {"name": "pool-a", "namespace": NS, "labels": labels,
                "ownerReferences": owned_by("MachinePool", &mp)},
            "spec": {"source": {"image": "registry.example/pool:v1"},
                "identityRef": {"kind": "Secret", "name": "creds"},
                "membershipRefreshIntervalSeconds": refresh_seconds}}),
    );
}

fn pool_outputs() -> Value {
    json!({"provider_id": "noop-group:///ns/pool-a",
        "provider_id_list": ["noop:///ns/pool-a/0"], "replicas": 1,
        "instances": [{"provider_id": "noop:///ns/pool-a/0", "state": "running"}],
        "health": {"state": "running", "healthy": true}})
}

fn condition(world: &World, type_: &str) -> (String, String) {
    let pool = world
        .fake
        .get(TERRAFORM_MACHINE_POOLS, NS, "pool-a")
        .unwrap();
    let found = pool["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .cloned()
        .unwrap_or_default();
    let text = |k: &str| found[k].as_str().unwrap_or_default().to_owned();
    (text("status"), text("reason"))
}

/// Every pass until the pool is Ready, its runner's part played between
/// them: the finalizer, the first apply, the refresh after it.
async fn converged() -> World {
    let mut world = World::new();
    seed(&world, 3600);
    for _ in 0..4 {
        world.pool_pass("pool-a").await;
        world.finish_jobs(WorkloadKind::MachinePool, "pool-a", pool_outputs());
    }
    assert_eq!(condition(&world, "Ready").0, "True");
    world
}

/// The reads of a full pass with nothing to bookkeep: its Jobs, its state,
/// its applied and attempt records, and its cluster's state (the exports).
const READS: [&str; 5] = [
    "LIST jobs",
    "LIST secrets",
    "GET secrets",
    "GET secrets",
    "LIST secrets",
];

/// The first reads of a restarted manager's pass: the identity's checks
/// (the mirrors, the Secret) and the namespace's runner RBAC, once per sync
/// period.
const RESTARTED: [&str; 6] = [
    "LIST jobs",
    "LIST secrets",
    "GET secrets",
    "PATCH serviceaccounts",
    "PATCH roles",
    "PATCH rolebindings",
];

/// What a start sends once the block-move annotation is on the pool: the
/// cluster's operation gate, the run lease, the Job, its per-run inputs
/// Secret, then the status.
const START: [&str; 8] = [
    "GET leases",
    "GET terraformmachinepools",
    "GET clusters",
    "POST leases",
    "GET leases",
    "POST jobs",
    "POST secrets",
    "PATCH terraformmachinepools/status",
];

/// A start that puts the block-move annotation on first (after the run
/// lease's check), before anything else is written.
fn start_with_block_move() -> Vec<&'static str> {
    then(
        &START[..1],
        &then(&["PATCH terraformmachinepools"], &START[1..]),
    )
}

#[tokio::test]
async fn a_converged_pool_pass_only_reads_and_its_resync_sends_nothing() {
    let mut world = converged().await.restart();
    // A restarted manager applies the namespace's runner RBAC once.
    assert_eq!(
        world.pool_pass("pool-a").await,
        then(&RESTARTED, &READS[1..])
    );
    world.forget_settled(TERRAFORM_MACHINE_POOLS, "pool-a");
    assert_eq!(world.pool_pass("pool-a").await, READS, "a full pass");
    assert_eq!(
        world.pool_pass("pool-a").await,
        Vec::<String>::new(),
        "a resync"
    );
}

#[tokio::test]
async fn a_pass_that_bookkeeps_the_first_apply_starts_the_refresh_after_it() {
    let mut world = World::new();
    seed(&world, 3600);
    assert_eq!(
        world.pool_pass("pool-a").await,
        ["LIST jobs", "PATCH terraformmachinepools"],
        "the finalizer first"
    );
    world.pool_pass("pool-a").await;
    world.finish_jobs(WorkloadKind::MachinePool, "pool-a", pool_outputs());
    let bookkeeping = [
        // The finished Job and its pod; the attempt record promoted to the
        // applied one, the run's inputs Secret and lease released.
        "LIST jobs",
        "LIST pods",
        "GET secrets",
        "GET secrets",
        "PATCH secrets",
        "LIST secrets",
        "PUT secrets",
        "DELETE secrets",
        "DELETE leases",
        // The snapshot: credentials, state, records and the variables'
        // sources.
        "LIST secrets",
        "GET secrets",
        "GET secrets",
        "LIST secrets",
        // The plan's effects: the new serial's backup (its list, its set),
        // the outputs written back to the spec, the state Secret adopted.
        "LIST secrets",
        "POST secrets",
        "PATCH terraformmachinepools",
        "PATCH secrets",
    ];
    let mut want = then(&bookkeeping, &routine(&START));
    want.push("PATCH jobs");
    assert_eq!(
        world.pool_pass("pool-a").await,
        want,
        "bookkept, the refresh started, the Job marked bookkept last"
    );
    assert!(
        world
            .fake
            .list(JOBS, NS)
            .iter()
            .any(|j| j["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.contains("-refresh-"))),
        "the refresh after the apply runs"
    );
}

#[tokio::test]
async fn a_refresh_that_falls_due_moves_the_block_first_and_writes_the_status_last() {
    let world = converged().await;
    world.age(TERRAFORM_MACHINE_POOLS, "pool-a", 2);
    let mut world = world.restart();
    let lines = world.pool_pass("pool-a").await;
    let want = then(
        &then(&RESTARTED, &READS[1..]),
        &routine(&start_with_block_move()),
    );
    assert_eq!(lines, want);
    let block = lines
        .iter()
        .position(|l| l == "PATCH terraformmachinepools");
    let job = lines.iter().position(|l| l == "POST jobs");
    assert!(block < job, "block-move before the Job");
}

#[tokio::test]
async fn a_deleted_pool_destroys_then_lets_its_finalizer_go() {
    let mut world = converged().await;
    world.fake.delete(TERRAFORM_MACHINE_POOLS, NS, "pool-a");
    assert_eq!(
        world.pool_pass("pool-a").await,
        then(&READS, &start_with_block_move()),
        "the destroy starts"
    );
    world.finish_jobs(WorkloadKind::MachinePool, "pool-a", pool_outputs());
    let lines = world.pool_pass("pool-a").await;
    assert_eq!(
        lines,
        [
            // Bookkeeping the destroy.
            "LIST jobs",
            "LIST pods",
            "LIST secrets",
            "GET secrets",
            "GET secrets",
            "DELETE secrets",
            "DELETE leases",
            "GET secrets",
            "GET secrets",
            "LIST secrets",
            "PATCH terraformmachinepools/status",
            "PATCH jobs",
            // Cleanup: backups, state chunks, records and leases, then the
            // finalizer; then whether the identity has users left.
            "LIST secrets",
            "DELETE secrets",
            "LIST secrets",
            "DELETE secrets",
            "DELETE secrets",
            "DELETE secrets",
            "DELETE secrets",
            "DELETE secrets",
            "DELETE secrets",
            "LIST secrets",
            "DELETE leases",
            "DELETE leases",
            "PATCH terraformmachinepools",
            "LIST terraformclusters",
            "LIST terraformmachines",
            "LIST terraformmachinepools",
        ]
    );
    assert!(
        world
            .fake
            .get(TERRAFORM_MACHINE_POOLS, NS, "pool-a")
            .is_none(),
        "gone with its finalizer"
    );
    let state = state_secret(&state_suffix(WorkloadKind::MachinePool, NS, "pool-a"));
    assert!(
        world.fake.get(SECRETS, NS, &state).is_none(),
        "its state is gone"
    );
}

#[tokio::test]
async fn an_externally_managed_pool_being_deleted_lets_its_finalizer_go_and_destroys_nothing() {
    let mut world = converged().await;
    world
        .fake
        .update(TERRAFORM_MACHINE_POOLS, NS, "pool-a", |p| {
            p["metadata"]["annotations"]["cluster.x-k8s.io/managed-by"] =
                json!("another-controller");
        });
    world.fake.delete(TERRAFORM_MACHINE_POOLS, NS, "pool-a");
    let before = world.mock.calls().len();
    assert_eq!(
        world.pool_pass("pool-a").await,
        [
            // What the deleting object's opening reads (is there anything
            // to clean up?), then only the finalizer: no Job, no cleanup.
            "LIST jobs",
            "LIST secrets",
            "GET secrets",
            "GET secrets",
            "PATCH terraformmachinepools",
        ]
    );
    assert!(
        world
            .fake
            .get(TERRAFORM_MACHINE_POOLS, NS, "pool-a")
            .is_none(),
        "the finalizer went"
    );
    let announced: Vec<String> = world.mock.calls()[before..]
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/events"))
        .map(|c| {
            let b = &c.body;
            format!(
                "{} {} on {} {}",
                b["type"].as_str().unwrap_or_default(),
                b["reason"].as_str().unwrap_or_default(),
                b["regarding"]["kind"].as_str().unwrap_or_default(),
                b["regarding"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        announced,
        ["Normal ExternallyManagedReleased on TerraformMachinePool pool-a"],
        "the release is announced, and nothing else"
    );
    let destroys = world.fake.list(JOBS, NS).into_iter().filter(|j| {
        j["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.contains("-destroy-"))
    });
    assert_eq!(destroys.count(), 0, "nothing destroyed");
    let state = state_secret(&state_suffix(WorkloadKind::MachinePool, NS, "pool-a"));
    assert!(
        world.fake.get(SECRETS, NS, &state).is_some(),
        "the state is left to the controller that manages the pool"
    );
}
