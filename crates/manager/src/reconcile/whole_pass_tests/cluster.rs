//! A TerraformCluster's passes, request by request.

use serde_json::{Value, json};

use super::harness::*;
use crate::names::{WorkloadKind, state_secret, state_suffix};

/// The identity Secret, the Cluster and its TerraformCluster, as Cluster
/// API would leave them.
fn seed(world: &World) {
    let fake = &world.fake;
    let labels = json!({"cluster.x-k8s.io/cluster-name": "prod"});
    let cluster = seed_identity_and_cluster(fake);
    fake.insert(
        TERRAFORM_CLUSTERS,
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
            "metadata": {"name": "prod", "namespace": NS, "labels": labels,
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                    "name": "prod", "uid": cluster["metadata"]["uid"]}]},
            "spec": {"source": {"image": "registry.example/cluster:v1"},
                "identityRef": {"kind": "Secret", "name": "creds"},
                "drift": {"intervalSeconds": 3600}}}),
    );
}

fn cluster_outputs() -> Value {
    json!({"exports": {"backend_id": "b-1"},
        "control_plane_endpoint": {"host": "prod.invalid", "port": 6443},
        "failure_domains": [{"name": "fd1", "control_plane": true}],
        "health": {"state": "running", "healthy": true}})
}

/// Every pass until the TerraformCluster is Ready: the finalizer, the
/// apply, its bookkeeping (the endpoint written to the spec), the status of
/// that new generation.
async fn converged() -> World {
    let mut world = World::new();
    seed(&world);
    for _ in 0..4 {
        world.cluster_pass("prod").await;
        world.finish_jobs(WorkloadKind::Cluster, "prod", cluster_outputs());
    }
    world
}

/// The reads of a full pass with nothing to bookkeep: the owner Cluster
/// (read live), its Jobs, its plans, its state and its applied and attempt
/// records.
const READS: [&str; 6] = [
    "GET clusters",
    "LIST jobs",
    "LIST terraformplans",
    "LIST secrets",
    "GET secrets",
    "GET secrets",
];

/// The first requests of a restarted manager's pass: the identity's checks
/// and the namespace's runner RBAC, once per sync period.
const RESTARTED: [&str; 7] = [
    "GET clusters",
    "LIST jobs",
    "LIST secrets",
    "GET secrets",
    "PATCH serviceaccounts",
    "PATCH roles",
    "PATCH rolebindings",
];

#[tokio::test]
async fn a_converged_cluster_pass_only_reads_and_its_resync_sends_nothing() {
    let mut world = converged().await.restart();
    assert_eq!(
        world.cluster_pass("prod").await,
        then(&RESTARTED, &READS[2..])
    );
    world.forget_settled(TERRAFORM_CLUSTERS, "prod");
    assert_eq!(world.cluster_pass("prod").await, READS, "a full pass");
    assert_eq!(
        world.cluster_pass("prod").await,
        Vec::<String>::new(),
        "a resync"
    );
}

#[tokio::test]
async fn a_drift_check_that_falls_due_moves_the_block_first_and_writes_the_status_last() {
    let world = converged().await;
    world.age(TERRAFORM_CLUSTERS, "prod", 2);
    let mut world = world.restart();
    let start = [
        "GET leases",
        "PATCH terraformclusters",
        "GET terraformclusters",
        "GET clusters",
        "POST leases",
        "POST jobs",
        "POST secrets",
        "PATCH terraformclusters/status",
    ];
    let lines = world.cluster_pass("prod").await;
    assert_eq!(lines, then(&then(&RESTARTED, &READS[2..]), &start));
    let drift = world.fake.list(JOBS, NS);
    assert!(
        drift.iter().any(|j| j["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.contains("-drift-"))),
        "a drift check runs"
    );
}

#[tokio::test]
async fn a_pass_that_bookkeeps_an_apply_starts_the_next_for_new_inputs() {
    let mut world = World::new();
    seed(&world);
    assert_eq!(
        world.cluster_pass("prod").await,
        ["GET clusters", "LIST jobs", "PATCH terraformclusters"],
        "the finalizer first"
    );
    world.cluster_pass("prod").await;
    world.finish_jobs(WorkloadKind::Cluster, "prod", cluster_outputs());
    world.fake.update(TERRAFORM_CLUSTERS, NS, "prod", |tc| {
        tc["spec"]["variables"] = json!({"size": "large"});
    });
    assert_eq!(
        world.cluster_pass("prod").await,
        [
            // The finished apply and its pod; records promoted, the run's
            // inputs Secret, run lease and state lock released.
            "GET clusters",
            "LIST jobs",
            "LIST pods",
            "GET secrets",
            "GET secrets",
            "PATCH secrets",
            "LIST secrets",
            "PUT secrets",
            "DELETE secrets",
            "DELETE leases",
            "GET leases",
            "DELETE leases",
            // Plans, state and records; the new serial's backup.
            "LIST terraformplans",
            "LIST secrets",
            "GET secrets",
            "GET secrets",
            "LIST secrets",
            "POST secrets",
            // The endpoint written to the spec; the next apply's start.
            "PATCH terraformclusters",
            "GET secrets",
            "GET leases",
            "GET terraformclusters",
            "GET clusters",
            "POST leases",
            "POST leases",
            "LIST leases",
            "POST jobs",
            "POST secrets",
            "PATCH secrets",
            "PATCH terraformclusters/status",
            // The finished Job marked bookkept last.
            "PATCH jobs",
        ]
    );
    let applies = world.fake.list(JOBS, NS);
    assert_eq!(applies.len(), 2, "the second apply runs");
}

#[tokio::test]
async fn a_deleted_cluster_destroys_then_lets_its_finalizer_go() {
    let mut world = converged().await;
    world.fake.delete(TERRAFORM_CLUSTERS, NS, "prod");
    assert_eq!(
        world.cluster_pass("prod").await,
        [
            "GET clusters",
            "LIST jobs",
            "LIST secrets",
            "GET secrets",
            "GET secrets",
            "LIST terraformplans",
            // No machine or pool of the cluster is left.
            "LIST terraformmachinepools",
            "LIST terraformmachines",
            "GET leases",
            "PATCH terraformclusters",
            "GET terraformclusters",
            "GET clusters",
            "POST leases",
            "POST leases",
            "LIST leases",
            "POST jobs",
            "POST secrets",
            "PATCH terraformclusters/status",
        ],
        "the destroy starts"
    );
    world.finish_jobs(WorkloadKind::Cluster, "prod", cluster_outputs());
    assert_eq!(
        world.cluster_pass("prod").await,
        [
            // Bookkeeping the destroy.
            "GET clusters",
            "LIST jobs",
            "LIST pods",
            "LIST secrets",
            "GET secrets",
            "GET secrets",
            "DELETE secrets",
            "DELETE leases",
            "GET leases",
            "DELETE leases",
            "LIST terraformplans",
            "GET secrets",
            "GET secrets",
            "LIST terraformmachinepools",
            "LIST terraformmachines",
            "PATCH terraformclusters/status",
            "PATCH jobs",
            // Cleanup: backups, state chunks, records and leases, the
            // finalizer; the identity's users; the namespace's runner RBAC,
            // whose last user this was.
            "LIST secrets",
            "DELETE secrets",
            "LIST secrets",
            "DELETE secrets",
            "DELETE secrets",
            "DELETE secrets",
            "DELETE secrets",
            "DELETE secrets",
            "DELETE secrets",
            "DELETE secrets",
            "LIST secrets",
            "DELETE leases",
            "DELETE leases",
            "DELETE leases",
            "PATCH terraformclusters",
            "LIST terraformclusters",
            "LIST terraformmachines",
            "LIST terraformmachinepools",
            "LIST serviceaccounts",
            "DELETE serviceaccounts",
            "LIST rolebindings",
            "DELETE rolebindings",
            "LIST roles",
            "DELETE roles",
            "LIST leases",
        ]
    );
    assert!(
        world.fake.get(TERRAFORM_CLUSTERS, NS, "prod").is_none(),
        "gone with its finalizer"
    );
    let state = state_secret(&state_suffix(WorkloadKind::Cluster, NS, "prod"));
    assert!(
        world.fake.get(SECRETS, NS, &state).is_none(),
        "its state is gone"
    );
}

/// State Secrets that still name an earlier TerraformCluster of the same
/// name (a restored management cluster's) are made this one's when its
/// next apply is adopted, and a Normal event on it says so.
#[tokio::test]
async fn an_apply_reowns_state_left_by_an_earlier_object_of_the_name_and_says_so() {
    let world = converged().await;
    let state = state_secret(&state_suffix(WorkloadKind::Cluster, NS, "prod"));
    world.fake.update(SECRETS, NS, &state, |s| {
        s["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
            "kind": "TerraformCluster", "name": "prod", "uid": "an-earlier-uid"}]);
    });
    world.fake.update(TERRAFORM_CLUSTERS, NS, "prod", |tc| {
        tc["spec"]["variables"] = json!({"size": "large"});
    });
    let mut world = world.restart();
    let before = world.mock.calls().len();
    for _ in 0..3 {
        world.cluster_pass("prod").await;
        world.finish_jobs(WorkloadKind::Cluster, "prod", cluster_outputs());
    }
    let announced: Vec<String> = world.mock.calls()[before..]
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/events"))
        .filter(|c| c.body["reason"] == "OwnerReferencesRepaired")
        .map(|c| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            format!(
                "{} on {} {}",
                text(&c.body["type"]),
                text(&c.body["regarding"]["kind"]),
                text(&c.body["regarding"]["name"])
            )
        })
        .collect();
    assert_eq!(announced, ["Normal on TerraformCluster prod"]);
    let uid = world.fake.get(TERRAFORM_CLUSTERS, NS, "prod").unwrap()["metadata"]["uid"].clone();
    let owners =
        world.fake.get(SECRETS, NS, &state).unwrap()["metadata"]["ownerReferences"].clone();
    let uids: Vec<&Value> = owners
        .as_array()
        .unwrap()
        .iter()
        .map(|o| &o["uid"])
        .collect();
    assert_eq!(uids, [&uid], "owned by this object alone");
}
