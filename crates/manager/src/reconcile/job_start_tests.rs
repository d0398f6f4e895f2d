//! The start plan by table, and the start's request sequence against a
//! scripted apiserver: block-move first, the pause handshake, the lease,
//! the Job, then its per-run inputs and the attempt record.

use std::time::{Duration, SystemTime};

use captf_api::TerraformMachinePool;
use captf_api::effective::job_policy;
use captf_api::names::{annotations, conditions, reasons};
use serde_json::{Value, json};

use super::*;
use crate::engine::decide::Op;
use crate::engine::history::{JobRecord, Outcome};
use crate::reconcile::mock_api::{Call, MockApi, status};
use crate::reconcile::status::Draft;
use crate::reconcile::{Config, Context};
use crate::records::RecordMeta;

fn pool() -> TerraformMachinePool {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
        "metadata": {"name": "pool-a", "namespace": "ns", "uid": "pool-uid", "resourceVersion": "7",
            "labels": {"cluster.x-k8s.io/cluster-name": "prod"}},
        "spec": {"source": {"image": "registry.example/pool:v1"}},
    }))
    .unwrap()
}

fn request(op: Op, remediation: bool) -> StartRequest {
    StartRequest {
        op,
        approval: None,
        remediation,
        files: ("{\"main\":1}".into(), "{\"vars\":1}".into()),
        inputs_hash: "h2:abc".into(),
        tick: String::new(),
        image: "registry.example/pool:v1".into(),
        attempt_record: (op == Op::Apply).then(|| InputsRecord {
            main_tf_json: "{\"main\":1}".into(),
            tfvars_json: "{\"vars\":1}".into(),
            meta: RecordMeta {
                inputs_hash: "h2:abc".into(),
                image: "registry.example/pool:v1".into(),
                image_digest: None,
                identity: None,
                identity_kind: None,
                job: None,
                unconfirmed_apply: None,
                unpullable_images: Vec::new(),
            },
            exports: Default::default(),
        }),
        guard: None,
        plan_key_secret: None,
        cluster_name: "prod".into(),
        jobs: job_policy(None, None),
        credentials_secret: None,
        annotations: Default::default(),
        force_unlock: None,
        restore: None,
        warnings: Vec::new(),
    }
}

const CONFIG: StartSettings<'static> = StartSettings {
    runner_image: "registry.example/captf-manager:dev",
    runner_events: crate::jobs::args::RunnerEvents::Notable,
    cluster_gate: true,
};

fn finished(op: Op, attempt: u32) -> JobRecord {
    JobRecord {
        name: format!("old-{attempt}"),
        op,
        attempt,
        outcome: Outcome::Failed,
        created: SystemTime::UNIX_EPOCH,
        finished: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(5)),
        remediation: false,
    }
}

#[test]
fn the_plan_names_the_job_its_attempt_lease_and_record() {
    let cases = [
        ("first apply", Op::Apply, vec![], false, 1),
        (
            "after two failed applies",
            Op::Apply,
            vec![finished(Op::Apply, 1), finished(Op::Apply, 2)],
            false,
            3,
        ),
        (
            "a refresh after applies",
            Op::Refresh,
            vec![finished(Op::Apply, 1)],
            false,
            1,
        ),
        ("a remediation", Op::Apply, vec![], true, 1),
    ];
    for (what, op, records, remediation, attempt) in cases {
        let p = plan_start(&pool(), &records, request(op, remediation), &CONFIG);
        assert_eq!(p.attempt, attempt, "{what}");
        assert_eq!(
            p.job.metadata.name.as_deref(),
            Some(p.job_name.as_str()),
            "{what}"
        );
        assert_eq!(p.lease.job, p.job_name, "{what}: the lease names the Job");
        let suffix = state_suffix(crate::names::WorkloadKind::MachinePool, "ns", "pool-a");
        assert_eq!(p.lease.name, run_lease_name(&suffix), "{what}");
        assert_eq!(
            p.lease
                .labels
                .get("cluster.x-k8s.io/cluster-name")
                .map(String::as_str),
            Some("prod"),
            "{what}"
        );
        let ann = p.job.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            ann.contains_key(annotations::DRIFT_REMEDIATION),
            remediation,
            "{what}: the remediation mark"
        );
        assert_eq!(
            p.attempt_record
                .as_ref()
                .and_then(|r| r.meta.job.as_deref()),
            (op == Op::Apply).then_some(p.job_name.as_str()),
            "{what}: only an apply writes the attempt record, naming its Job"
        );
        let owner = &p.job.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller),
            ("pool-uid", Some(true)),
            "{what}"
        );
    }
}

/// Answers a start's requests as an apiserver with no lease, no Job and no
/// per-run Secret yet would; `lease_holder` makes another Job hold the lease.
fn apiserver(lease_holder: Option<&'static str>) -> impl Fn(&Call) -> (u16, Value) + Send + Sync {
    move |c: &Call| match (c.method.as_str(), c.line().as_str()) {
        ("PATCH", "PATCH terraformmachinepools") | ("GET", "GET terraformmachinepools") => {
            (200, serde_json::to_value(pool()).unwrap())
        }
        ("GET", "GET clusters") => (
            200,
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Cluster", "metadata": {"name": "prod", "namespace": "ns"}, "spec": {}}),
        ),
        ("GET", "GET leases") => match lease_holder {
            None => status(404, "NotFound"),
            Some(holder) => (
                200,
                json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": c.name(), "namespace": "ns", "resourceVersion": "3"},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": 3600,
                    "renewTime": "2099-01-01T00:00:00.000000Z", "acquireTime": "2099-01-01T00:00:00.000000Z"}}),
            ),
        },
        ("POST", "POST leases") if lease_holder.is_some() => status(409, "AlreadyExists"),
        // The holder runs.
        ("GET", "GET jobs") if lease_holder.is_some_and(|h| c.name() == h) => (
            200,
            json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": c.name(), "namespace": "ns"},
            "status": {"active": 1}}),
        ),
        ("GET", "GET jobs") => {
            let mut job = c.body.clone();
            job["apiVersion"] = json!("batch/v1");
            job["kind"] = json!("Job");
            job["metadata"] = json!({"name": c.name(), "namespace": "ns", "uid": "job-uid"});
            (200, job)
        }
        ("GET", "GET secrets") => status(404, "NotFound"),
        (_, line) if line.starts_with("POST ") || line.starts_with("PATCH ") => {
            let mut echo = c.body.clone();
            if echo["metadata"].is_object() {
                echo["metadata"]["uid"] = json!("new-uid");
            }
            (201, echo)
        }
        _ => status(404, "NotFound"),
    }
}

async fn run_start(mock: &MockApi, block_move: bool) -> (StartOutcome, Draft, bool) {
    run_start_on(mock, &pool(), block_move).await
}

/// Executes an apply start of `obj`; `block_move` is what the pass knows of
/// the annotation.
async fn run_start_on(
    mock: &MockApi,
    obj: &TerraformMachinePool,
    block_move: bool,
) -> (StartOutcome, Draft, bool) {
    let ctx = Context::new(mock.client(), Config::new(CONFIG.runner_image));
    let planned = plan_start(obj, &[], request(Op::Apply, false), &CONFIG);
    let mut draft = Draft::new(&[], 1, SystemTime::UNIX_EPOCH);
    let mut present = block_move;
    let outcome = execute_start(
        &ctx,
        obj,
        &planned,
        &mut draft,
        &mut present,
        SystemTime::now(),
    )
    .await
    .unwrap();
    (outcome, draft, present)
}

#[tokio::test]
async fn a_start_writes_in_the_crash_safe_order() {
    let mock = MockApi::new(apiserver(None));
    let (outcome, draft, present) = run_start(&mock, false).await;
    assert!(
        matches!(outcome, StartOutcome::Started { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        mock.lines(),
        vec![
            "PATCH terraformmachinepools", // block-move, before anything runs
            "GET terraformmachinepools",   // the pause handshake, live
            "GET clusters",
            "POST leases", // the run lease: none is there, the create takes it
            "GET leases",  // the cluster write lease (the operation gate): free
            "POST jobs",
            "POST secrets",  // the per-run Secret, owned by the created Job's UID
            "PATCH secrets", // the attempt record, last
        ]
    );
    let calls = mock.calls();
    let run_secret = calls.iter().find(|c| c.line() == "POST secrets").unwrap();
    assert_eq!(
        run_secret.body["metadata"]["ownerReferences"][0]["uid"],
        "new-uid"
    );
    let block_move = &mock.calls()[0].body["metadata"]["annotations"];
    assert_eq!(block_move[annotations::BLOCK_MOVE], "true");
    assert!(present, "the pass knows block-move is set");
    assert!(draft.field_value("activeJob").is_some());
    let c = draft.get(conditions::APPLY_JOB_SUCCEEDED).unwrap();
    assert_eq!(c.reason, reasons::NO_APPLY_YET);
}

#[tokio::test]
async fn block_move_is_set_again_after_this_pass_removed_it() {
    // The object was read with block-move; the pass removed it when it saw
    // the previous Job finish. The start must set it again.
    let mut read = pool();
    read.metadata.annotations =
        Some([(annotations::BLOCK_MOVE.to_owned(), "true".to_owned())].into());
    let mock = MockApi::new(apiserver(None));
    let (_, _, present) = run_start_on(&mock, &read, false).await;
    assert_eq!(mock.lines()[0], "PATCH terraformmachinepools");
    assert_eq!(
        mock.calls()[0].body["metadata"]["annotations"][annotations::BLOCK_MOVE],
        "true"
    );
    assert!(present);
    // Still set (the Job of an earlier pass runs on): no second write.
    let mock = MockApi::new(apiserver(None));
    run_start(&mock, true).await;
    assert_eq!(
        mock.lines()[0],
        "GET terraformmachinepools",
        "no block-move write"
    );
}

#[tokio::test]
async fn a_lease_held_by_a_running_job_starts_nothing() {
    let mock = MockApi::new(apiserver(Some("other-job")));
    let (outcome, draft, _) = run_start(&mock, false).await;
    assert_eq!(
        outcome,
        StartOutcome::Waiting {
            requeue: crate::reconcile::pass::LEASE_REQUEUE
        }
    );
    let lines = mock.lines();
    assert!(!lines.contains(&"POST jobs".to_owned()), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("secrets")), "{lines:?}");
    let c = draft.get(conditions::APPLY_JOB_SUCCEEDED).unwrap();
    assert_eq!(c.reason, reasons::WAITING_FOR_RUN_LEASE);
    assert!(c.message.contains("other-job"), "{}", c.message);
}

#[test]
fn a_pass_trails_when_the_live_object_names_a_job_its_cached_one_does_not() {
    let cases = [
        // (cached activeJob, live activeJob, the Job the pass missed)
        (None, None, None),
        (None, Some("j-1"), Some("j-1")), // the start's status write not yet cached
        (Some("j-1"), Some("j-1"), None), // a pass that bookkept j-1 starts the next
        (Some("j-1"), None, None),        // a later pass cleared it: nothing runs
        (Some("j-1"), Some("j-2"), Some("j-2")),
    ];
    for (cached, live, missed) in cases {
        assert_eq!(trails_live(cached, live), missed, "{cached:?} / {live:?}");
    }
}

#[tokio::test]
async fn a_start_on_a_cached_object_older_than_its_live_status_starts_nothing() {
    // The live object names the Job an earlier pass started; the cache the
    // pass decided on does not have that status write yet. Were that Job
    // deleted meanwhile, starting would create its name again.
    let live = || {
        let mut p = serde_json::to_value(pool()).unwrap();
        p["status"] = json!({"activeJob": {"name": "captf-mp-pool-a-apply-a1-000000",
            "operation": "apply", "attempt": 1}});
        p
    };
    let server = apiserver(None);
    let mock = MockApi::new(move |c: &Call| match c.line().as_str() {
        "GET terraformmachinepools" => (200, live()),
        _ => server(c),
    });
    let (outcome, _, _) = run_start(&mock, true).await;
    assert_eq!(
        outcome,
        StartOutcome::Waiting {
            requeue: START_DEFERRED_REQUEUE
        }
    );
    assert_eq!(
        mock.lines(),
        vec!["GET terraformmachinepools"],
        "nothing written"
    );
}
