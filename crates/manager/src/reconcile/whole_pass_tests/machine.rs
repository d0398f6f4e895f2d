//! A TerraformMachine's passes, request by request.

use serde_json::{Value, json};

use super::harness::*;
use crate::names::{WorkloadKind, state_secret, state_suffix};

/// A provisioned cluster, its worker Machine `m-1` and the TerraformMachine,
/// as Cluster API would leave them.
fn seed(world: &World) {
    let fake = &world.fake;
    let labels = json!({"cluster.x-k8s.io/cluster-name": "prod"});
    seed_provisioned_cluster(world);
    let machine = fake.insert(
        MACHINES,
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m-1", "namespace": NS, "labels": labels},
            "spec": {"clusterName": "prod", "bootstrap": {"dataSecretName": "bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "TerraformMachine", "name": "m-1"},
                "version": "v1.37.2"}}),
    );
    fake.insert(
        TERRAFORM_MACHINES,
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachine",
            "metadata": {"name": "m-1", "namespace": NS, "labels": labels,
                "ownerReferences": owned_by("Machine", &machine)},
            "spec": {"source": {"image": "registry.example/machine:v1"},
                "identityRef": {"kind": "Secret", "name": "creds"},
                "drift": {"intervalSeconds": 3600}}}),
    );
}

fn machine_outputs() -> Value {
    json!({"provider_id": "noop:///ns/m-1",
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
        "failure_domain": null, "interruptible": false,
        "health": {"state": "running", "healthy": true}})
}

/// Every pass until the machine is Ready: the finalizer, the apply, its
/// bookkeeping (the provider ID written to the spec), the status of that
/// new generation.
async fn converged() -> World {
    let mut world = World::new();
    seed(&world);
    for _ in 0..4 {
        world.machine_pass("m-1").await;
        world.finish_jobs(WorkloadKind::Machine, "m-1", machine_outputs());
    }
    world
}

/// The reads of a full pass with nothing to bookkeep: its Jobs, its state
/// and its applied and attempt records.
const READS: [&str; 4] = ["LIST jobs", "LIST secrets", "GET secrets", "GET secrets"];

/// The first requests of a restarted manager's pass: the identity's checks
/// and the namespace's runner RBAC, once per sync period.
const RESTARTED: [&str; 6] = [
    "LIST jobs",
    "LIST secrets",
    "GET secrets",
    "PATCH serviceaccounts",
    "PATCH roles",
    "PATCH rolebindings",
];

/// A start: the run lease's check, the block-move annotation, the cluster's
/// operation gate, the run lease, the Job, its per-run inputs Secret, then
/// the status.
const START: [&str; 9] = [
    "GET leases",
    "PATCH terraformmachines",
    "GET terraformmachines",
    "GET clusters",
    "POST leases",
    "GET leases",
    "POST jobs",
    "POST secrets",
    "PATCH terraformmachines/status",
];

#[tokio::test]
async fn a_converged_machine_pass_only_reads_and_its_resync_sends_nothing() {
    let mut world = converged().await.restart();
    assert_eq!(
        world.machine_pass("m-1").await,
        then(&RESTARTED, &READS[1..])
    );
    world.forget_settled(TERRAFORM_MACHINES, "m-1");
    assert_eq!(world.machine_pass("m-1").await, READS, "a full pass");
    assert_eq!(
        world.machine_pass("m-1").await,
        Vec::<String>::new(),
        "a resync"
    );
}

#[tokio::test]
async fn a_drift_check_that_falls_due_moves_the_block_first_and_writes_the_status_last() {
    let world = converged().await;
    world.age(TERRAFORM_MACHINES, "m-1", 2);
    let mut world = world.restart();
    let want = then(&then(&RESTARTED, &READS[1..]), &routine(&START));
    assert_eq!(world.machine_pass("m-1").await, want);
    let drift = world.fake.list(JOBS, NS);
    assert!(
        drift.iter().any(|j| j["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.contains("-drift-"))),
        "a drift check runs"
    );
}

#[tokio::test]
async fn a_pass_that_bookkeeps_an_apply_without_a_health_reading_starts_a_refresh() {
    let mut world = World::new();
    seed(&world);
    assert_eq!(
        world.machine_pass("m-1").await,
        ["LIST jobs", "PATCH terraformmachines"],
        "the finalizer first"
    );
    world.machine_pass("m-1").await;
    let mut outputs = machine_outputs();
    outputs.as_object_mut().unwrap().remove("health");
    world.finish_jobs(WorkloadKind::Machine, "m-1", outputs);
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
        // The snapshot: state, records and the variables' sources.
        "LIST secrets",
        "GET secrets",
        "GET secrets",
        "LIST secrets",
        // The plan's first effect: the new serial's backup (its list, its
        // set).
        "LIST secrets",
        "POST secrets",
    ];
    // The block-move annotation is still on from the apply's start.
    let start: Vec<&str> = START
        .iter()
        .copied()
        .filter(|l| *l != "PATCH terraformmachines")
        .collect();
    let mut want = then(&bookkeeping, &routine(&start));
    want.push("PATCH jobs");
    assert_eq!(
        world.machine_pass("m-1").await,
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
async fn a_deleted_machine_destroys_then_lets_its_finalizer_go() {
    let mut world = converged().await;
    world.fake.delete(TERRAFORM_MACHINES, NS, "m-1");
    assert_eq!(
        world.machine_pass("m-1").await,
        then(&READS, &START),
        "the destroy starts"
    );
    world.finish_jobs(WorkloadKind::Machine, "m-1", machine_outputs());
    assert_eq!(
        world.machine_pass("m-1").await,
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
            "PATCH terraformmachines/status",
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
            "PATCH terraformmachines",
            "LIST terraformclusters",
            "LIST terraformmachines",
            "LIST terraformmachinepools",
        ]
    );
    assert!(
        world.fake.get(TERRAFORM_MACHINES, NS, "m-1").is_none(),
        "gone with its finalizer"
    );
    let state = state_secret(&state_suffix(WorkloadKind::Machine, NS, "m-1"));
    assert!(
        world.fake.get(SECRETS, NS, &state).is_none(),
        "its state is gone"
    );
}

/// RESOLUTIONS 32: a provisioned machine whose state carries no inputs hash
/// (nothing shows it was applied from the machine's inputs) is held as
/// lost, said once with a Warning, and no Job runs over it.
#[tokio::test]
async fn a_provisioned_machine_whose_state_has_no_inputs_hash_is_held_as_lost() {
    let world = converged().await;
    let state = state_secret(&state_suffix(WorkloadKind::Machine, NS, "m-1"));
    world.fake.update(SECRETS, NS, &state, |s| {
        s["metadata"]["annotations"] = json!({});
    });
    world.forget_settled(TERRAFORM_MACHINES, "m-1");
    let mut world = world;
    let announced = |world: &World, from: usize| -> Vec<String> {
        world.mock.calls()[from..]
            .iter()
            .filter(|c| c.method == "POST" && c.path.ends_with("/events"))
            .map(|c| c.body["reason"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let before = world.mock.calls().len();
    let first = world.machine_pass("m-1").await;
    assert!(!first.contains(&"POST jobs".to_owned()), "{first:?}");
    assert_eq!(announced(&world, before), ["StateLost"]);
    let machine = world.fake.get(TERRAFORM_MACHINES, NS, "m-1").unwrap();
    let readable = machine["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "StateReadable")
        .unwrap()
        .clone();
    assert_eq!(
        (readable["status"].as_str(), readable["reason"].as_str()),
        (Some("False"), Some("StateLost")),
        "{readable}"
    );
    assert!(
        readable["message"]
            .as_str()
            .unwrap()
            .contains("no inputs hash"),
        "{readable}"
    );
    // Held: a later pass, even one past the drift interval, starts nothing
    // and says nothing new.
    world.age(TERRAFORM_MACHINES, "m-1", 2);
    world.forget_settled(TERRAFORM_MACHINES, "m-1");
    let before = world.mock.calls().len();
    let again = world.machine_pass("m-1").await;
    assert!(!again.contains(&"POST jobs".to_owned()), "{again:?}");
    assert_eq!(announced(&world, before), Vec::<String>::new());
}

/// A stored Job policy with reserved env names (admitted by an older
/// manager, before the webhook refused them): the Job runs without them,
/// keeps the others, and a Warning on the machine says which were dropped.
#[tokio::test]
async fn a_stored_policy_with_reserved_env_names_runs_without_them_and_says_so() {
    let mut world = World::new();
    seed(&world);
    world.fake.update(TERRAFORM_MACHINES, NS, "m-1", |m| {
        m["spec"]["jobs"] = json!({"env": [
            {"name": "TF_LOG", "value": "DEBUG"},
            {"name": "PLAIN", "value": "1"},
        ]});
    });
    let before = world.mock.calls().len();
    for _ in 0..4 {
        if !world.fake.list(JOBS, NS).is_empty() {
            break;
        }
        world.machine_pass("m-1").await;
    }
    let jobs = world.fake.list(JOBS, NS);
    assert_eq!(jobs.len(), 1, "the apply started");
    let env: Vec<String> = jobs[0]["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["env"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["name"].as_str().map(str::to_owned))
        .collect();
    assert!(env.contains(&"PLAIN".to_owned()), "{env:?}");
    assert!(!env.contains(&"TF_LOG".to_owned()), "{env:?}");
    let dropped: Vec<(String, String, String)> = world.mock.calls()[before..]
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/events"))
        .filter(|c| c.body["reason"] == "ReservedEnvDropped")
        .map(|c| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            let regarding = format!(
                "{} {}",
                text(&c.body["regarding"]["kind"]),
                text(&c.body["regarding"]["name"])
            );
            (text(&c.body["type"]), regarding, text(&c.body["note"]))
        })
        .collect();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    let (type_, regarding, note) = &dropped[0];
    assert_eq!(
        (type_.as_str(), regarding.as_str()),
        ("Warning", "TerraformMachine m-1")
    );
    assert!(note.contains("TF_LOG") && !note.contains("PLAIN"), "{note}");
}

/// The events a pass sent from call `from` on, as "type reason on kind
/// name".
fn announced(world: &World, from: usize) -> Vec<String> {
    world.mock.calls()[from..]
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/events"))
        .map(|c| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            format!(
                "{} {} on {} {}",
                text(&c.body["type"]),
                text(&c.body["reason"]),
                text(&c.body["regarding"]["kind"]),
                text(&c.body["regarding"]["name"])
            )
        })
        .collect()
}

/// A machine whose instance reads degraded asks its Machine for
/// remediation (at a threshold of one sample); once a later check reads it
/// healthy, it withdraws the request, and each step says so on the machine.
#[tokio::test]
async fn a_remediation_request_is_withdrawn_when_the_instance_reads_healthy() {
    let mut world = World::new();
    seed(&world);
    world.fake.update(TERRAFORM_MACHINES, NS, "m-1", |m| {
        m["spec"]["remediation"] = json!({"annotateMachine": true, "unhealthyThreshold": 1});
    });
    let mut degraded = machine_outputs();
    degraded["health"] = json!({"state": "degraded", "healthy": false});
    let before = world.mock.calls().len();
    for _ in 0..4 {
        world.machine_pass("m-1").await;
        world.finish_jobs(WorkloadKind::Machine, "m-1", degraded.clone());
    }
    let asked = |world: &World| {
        world.fake.get(MACHINES, NS, "m-1").unwrap()["metadata"]["annotations"]
            ["cluster.x-k8s.io/remediate-machine"]
            .is_string()
    };
    assert!(asked(&world), "the Machine is asked to remediate");
    let requested = "Warning RemediationRequested on TerraformMachine m-1".to_owned();
    assert!(announced(&world, before).contains(&requested));

    // The next check, past the drift interval, reads the instance healthy.
    world.age(TERRAFORM_MACHINES, "m-1", 2);
    let mut world = world.restart();
    let before = world.mock.calls().len();
    for _ in 0..3 {
        world.machine_pass("m-1").await;
        world.finish_jobs(WorkloadKind::Machine, "m-1", machine_outputs());
    }
    assert!(!asked(&world), "the request is withdrawn");
    let withdrawn = "Normal RemediationWithdrawn on TerraformMachine m-1".to_owned();
    assert!(
        announced(&world, before).contains(&withdrawn),
        "{:?}",
        announced(&world, before)
    );
}
