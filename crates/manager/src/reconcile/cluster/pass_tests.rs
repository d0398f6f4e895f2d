//! Whole passes of a TerraformCluster as tables: a snapshot and its plans
//! in, the status draft, the effects and the ending out.

use std::time::SystemTime;

use captf_api::effective::{self, ManagerDefaults};
use serde_json::json;

use super::*;
use crate::adapters::OwnerDecision;
use crate::engine::decide::Reason;
use crate::engine::preamble::OwnerLookup;
use crate::reconcile::pass::Loaded;
use crate::reconcile::settings::PassSettings;
use crate::reconcile::status::Draft;
use crate::reconcile::stored::ReadReport;
use crate::state::reader::{StateError, StateSummary};

const NS: &str = "team-a";

fn terraform_cluster() -> TerraformCluster {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "metadata": {"name": "prod", "namespace": NS, "uid": "uid-tc", "generation": 1,
            "labels": {"cluster.x-k8s.io/cluster-name": "prod"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                "name": "prod", "uid": "uid-prod"}]},
        "spec": {"source": {"image": "registry.example/cluster:1"}},
    }))
    .unwrap()
}

fn cluster() -> Cluster {
    serde_json::from_value(json!({
        "metadata": {"name": "prod", "namespace": NS, "uid": "uid-prod"},
        "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": "prod"}},
    }))
    .unwrap()
}

/// A provisioned cluster's state, applied from inputs `hash`.
fn state(hash: &str) -> StateSummary {
    let outputs = json!({
        "control_plane_endpoint": {"host": "api.prod.example", "port": 6443},
        "failure_domains": [{"name": "fd1", "control_plane": true}],
        "exports": {"subnet": "s-1"},
        "health": {"state": "running", "healthy": true, "message": null, "reasons": []},
    });
    StateSummary::with_outputs(outputs, Some(hash))
}

fn plan_of(inputs_hash: &str) -> TerraformPlan {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformPlan",
        "metadata": {"name": "prod-0123456789", "namespace": NS,
            "ownerReferences": [{"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
                "kind": "TerraformCluster", "name": "prod", "uid": "uid-tc", "controller": true}]},
        "spec": {"targetRef": {"kind": "TerraformCluster", "name": "prod"}, "planHash": "p1",
            "inputsHash": inputs_hash, "reason": "Destructive", "summary": {"delete": 1}},
    }))
    .unwrap()
}

fn snapshot(read: Result<StateSummary, StateError>, dependents: &[&str]) -> ClusterSnapshot {
    ClusterSnapshot {
        stored: Stored {
            ever_applied: read.is_ok(),
            report: ReadReport::for_plan_tests(&read, read.is_ok()),
            read,
            applied: None,
            attempt: None,
            unconfirmed_apply: None,
            origin_unknown: false,
            restore: None,
            effects: Vec::new(),
        },
        sources: Vec::new(),
        dependents: dependents.iter().map(|d| (*d).to_owned()).collect(),
    }
}

fn open_pass(obj: &TerraformCluster, deleting: bool) -> OpenPass {
    let eff = effective::cluster(&obj.spec, &ManagerDefaults::default());
    let shared = PassSettings {
        owner: OwnerDecision {
            lookup: OwnerLookup::Found,
            condition: None,
        },
        paused: false,
        cluster_name: "prod".into(),
        jobs: eff.jobs.clone(),
        drift_interval: None,
        drift_remediate: false,
        identity: None,
        mutable: true,
        membership: None,
        after_apply_refresh: false,
        health_interval: None,
        retain: false,
        cluster_max_active_jobs: 20,
    };
    let loaded = Loaded {
        jobs: Vec::new(),
        observed: Vec::new(),
    };
    OpenPass::for_plan_tests(loaded, shared, deleting)
}

/// One whole pass under `policy`: the plan, the draft, the plans after it.
fn run(
    snap: &ClusterSnapshot,
    plans: Vec<TerraformPlan>,
    policy: ApplyPolicy,
    deleting: bool,
) -> (PassPlan, Draft, Vec<TerraformPlan>) {
    let obj = terraform_cluster();
    let c = cluster();
    let now = SystemTime::now();
    let p = open_pass(&obj, deleting);
    let mut plans = plans;
    let cx = ClusterContext {
        cluster: Some(&c),
        apply_policy: policy,
        now,
    };
    let plan = plan(&obj, &p, Draft::new(&[], 1, now), snap, &mut plans, &cx);
    let status = plan.status.clone();
    (plan, status, plans)
}

fn started(plan: &PassPlan) -> Option<&StartRequest> {
    match &plan.ending {
        PassEnding::Start(req) => Some(req),
        _ => None,
    }
}

fn current_hash() -> String {
    let (plan, _, _) = run(
        &snapshot(Err(StateError::NotFound), &[]),
        Vec::new(),
        ApplyPolicy::Automatic,
        false,
    );
    started(&plan)
        .expect("a first pass applies")
        .inputs_hash
        .clone()
}

#[test]
fn the_first_pass_applies_guarded_by_its_inputs() {
    let (plan, draft, _) = run(
        &snapshot(Err(StateError::NotFound), &[]),
        Vec::new(),
        ApplyPolicy::Automatic,
        false,
    );
    assert_eq!(plan.decision.as_ref().unwrap().reason, Reason::NoState);
    let req = started(&plan).expect("an apply starts");
    assert_eq!(req.op, Op::Apply);
    let guard = req.guard.as_ref().expect("every cluster apply is guarded");
    assert_eq!(guard.inputs_hash, req.inputs_hash);
    assert!(plan.effects.is_empty(), "{:?}", plan.effects);
    assert_eq!(draft.field_value("pendingPlanRef"), Some(Value::Null));
}

#[test]
fn a_live_plan_of_older_inputs_is_superseded_in_the_same_pass() {
    let (plan, draft, plans) = run(
        &snapshot(Ok(state("h2:old")), &[]),
        vec![plan_of("h2:old")],
        ApplyPolicy::Automatic,
        false,
    );
    let superseded: Vec<_> = plan
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::SupersedePlan(p) => Some(p.name_any()),
            _ => None,
        })
        .collect();
    assert_eq!(superseded, vec!["prod-0123456789".to_owned()]);
    assert!(
        plans::live_plan(&plans).is_none(),
        "the gate reads the list as it will be"
    );
    assert_eq!(draft.field_value("pendingPlanRef"), Some(Value::Null));
    assert_eq!(
        plan.decision.as_ref().unwrap().reason,
        Reason::InputsChanged
    );
}

#[test]
fn a_plan_of_the_current_inputs_stays_and_is_the_pending_plan() {
    let hash = current_hash();
    let (plan, draft, _) = run(
        &snapshot(Ok(state("h2:old")), &[]),
        vec![plan_of(&hash)],
        ApplyPolicy::Automatic,
        false,
    );
    assert!(
        !plan
            .effects
            .iter()
            .any(|e| matches!(e, Effect::SupersedePlan(_))),
        "{:?}",
        plan.effects
    );
    assert_eq!(
        draft.field_value("pendingPlanRef"),
        Some(json!({"name": "prod-0123456789"}))
    );
}

#[test]
fn changed_inputs_under_manual_policy_run_a_plan_job() {
    let (plan, _, _) = run(
        &snapshot(Ok(state("h2:old")), &[]),
        Vec::new(),
        ApplyPolicy::Manual,
        false,
    );
    let req = started(&plan).expect("a Job starts");
    assert_eq!(req.op, Op::Plan);
}

#[test]
fn a_deleting_cluster_waits_for_its_pools_without_deciding() {
    let (plan, draft, _) = run(
        &snapshot(Ok(state("h2:old")), &["TerraformMachinePool workers"]),
        Vec::new(),
        ApplyPolicy::Automatic,
        true,
    );
    assert!(plan.decision.is_none());
    assert!(matches!(
        plan.ending,
        PassEnding::Close(Some(d)) if d == DEPENDENTS_REQUEUE
    ));
    let blocked = draft.get(conditions::DELETION_BLOCKED).unwrap();
    assert_eq!(
        (blocked.status.as_str(), blocked.reason.as_str()),
        ("True", reasons::DEPENDENTS_EXIST)
    );
    assert!(blocked.message.contains("TerraformMachinePool workers"));

    let (plan, draft, _) = run(
        &snapshot(Ok(state("h2:old")), &[]),
        Vec::new(),
        ApplyPolicy::Automatic,
        true,
    );
    assert_eq!(started(&plan).map(|r| r.op), Some(Op::Destroy));
    assert_eq!(
        draft.get(conditions::DELETION_BLOCKED).unwrap().status,
        "False"
    );
}

#[test]
fn a_first_readable_state_provisions_the_cluster_and_publishes_its_outputs() {
    let hash = current_hash();
    let (plan, draft, _) = run(
        &snapshot(Ok(state(&hash)), &[]),
        Vec::new(),
        ApplyPolicy::Automatic,
        false,
    );
    assert!(
        plan.effects.iter().any(|e| matches!(
            e,
            Effect::Event { reason, .. } if *reason == events::PROVISIONED
        )),
        "{:?}",
        plan.effects
    );
    assert_eq!(
        draft.field_value("initialization"),
        Some(json!({"provisioned": true}))
    );
    assert_eq!(draft.field_value("exports"), Some(json!({"subnet": "s-1"})));
    assert!(draft.field_value("failureDomains").is_some());
    assert!(
        started(&plan).is_none_or(|r| r.op != Op::Apply),
        "the inputs are current"
    );
}

/// The reasons of the events a plan's effects emit.
fn event_reasons(plan: &PassPlan) -> Vec<&'static str> {
    plan.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Event { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

#[test]
fn failure_domains_are_announced_when_they_change_and_too_large_exports_once_per_state() {
    let hash = current_hash();
    let now = SystemTime::now();
    let c = cluster();
    let cx = ClusterContext {
        cluster: Some(&c),
        apply_policy: ApplyPolicy::Automatic,
        now,
    };
    let pass_over = |status: serde_json::Value, outputs: serde_json::Value| {
        let mut obj = terraform_cluster();
        obj.status = Some(serde_json::from_value(status).unwrap());
        let p = open_pass(&obj, false);
        let snap = snapshot(Ok(StateSummary::with_outputs(outputs, Some(&hash))), &[]);
        let plan = plan(
            &obj,
            &p,
            Draft::new(&[], 1, now),
            &snap,
            &mut Vec::new(),
            &cx,
        );
        event_reasons(&plan)
    };
    let outputs = |fd: &str, exports: serde_json::Value| {
        json!({
            "control_plane_endpoint": {"host": "api.prod.example", "port": 6443},
            "failure_domains": [{"name": fd, "control_plane": true}],
            "exports": exports,
            "health": {"state": "running", "healthy": true, "message": null, "reasons": []},
        })
    };
    let seen = |fd: &str, exports: serde_json::Value, serial: i64| {
        json!({"initialization": {"provisioned": true},
               "failureDomains": [{"name": fd, "controlPlane": true}],
               "exports": exports, "observedStateSerial": serial})
    };
    let small = json!({"subnet": "s-1"});
    let big = json!({"blob": "x".repeat(70 * 1024)});
    let fd_changed = events::FAILURE_DOMAINS_CHANGED;
    let too_large = events::EXPORTS_NOT_PUBLISHED;
    let cases = [
        // (status read, outputs, announced)
        (
            seen("fd1", small.clone(), 1),
            outputs("fd1", small.clone()),
            vec![],
        ),
        (
            seen("fd1", small.clone(), 1),
            outputs("fd2", small.clone()),
            vec![fd_changed],
        ),
        (
            seen("fd1", small.clone(), 1),
            outputs("fd1", big.clone()),
            vec![too_large],
        ),
        // Already cleared for this serial (the state's is 3): nothing new.
        (
            seen("fd1", json!(null), 3),
            outputs("fd1", big.clone()),
            vec![],
        ),
        (
            seen("fd1", json!(null), 2),
            outputs("fd1", big.clone()),
            vec![too_large],
        ),
    ];
    for (status, outs, want) in cases {
        let got: Vec<&str> = pass_over(status.clone(), outs)
            .into_iter()
            .filter(|r| *r == fd_changed || *r == too_large)
            .collect();
        assert_eq!(got, want, "{status}");
    }
}

#[test]
fn a_destroy_of_other_inputs_than_the_state_was_applied_from_warns() {
    let current = current_hash();
    for (state_hash, warned) in [(current.as_str(), false), ("h2:older", true)] {
        let (plan, _, _) = run(
            &snapshot(Ok(state(state_hash)), &[]),
            Vec::new(),
            ApplyPolicy::Automatic,
            true,
        );
        let req = started(&plan).expect("a destroy starts");
        assert_eq!(req.op, Op::Destroy);
        let reasons: Vec<&str> = req.warnings.iter().map(|(r, _)| *r).collect();
        assert_eq!(
            reasons.contains(&events::DESTROY_INPUTS_MISMATCH),
            warned,
            "{state_hash}: {:?}",
            req.warnings
        );
    }
}

/// A deletion after an apply that may have changed infrastructure (it
/// failed in its apply step, after the applied inputs): the destroy renders
/// that apply's own inputs and image, and says so; once a later start has
/// rewritten the attempt record, the applied record is rendered again.
#[test]
fn a_destroy_after_a_partial_apply_renders_that_apply_s_inputs() {
    use crate::records::{InputsRecord, RecordMeta};
    let record = |job: &str, hash: &str, image: &str, unconfirmed: Option<&str>| InputsRecord {
        main_tf_json: format!("{{\"job\":\"{job}\"}}"),
        tfvars_json: "{}".into(),
        meta: RecordMeta {
            inputs_hash: hash.into(),
            image: image.into(),
            job: Some(job.into()),
            unconfirmed_apply: unconfirmed.map(str::to_owned),
            ..RecordMeta::default()
        },
        exports: Default::default(),
    };
    let applied = record("a1", "h2:old", "reg.example/m:v1", None);
    let partial = record("a2", "h2:new", "reg.example/m:v2", Some("a2"));
    let rewritten = record("a3", "h2:newer", "reg.example/m:v3", Some("a2"));
    for (attempt, job, image, warned) in [
        (&partial, "a2", "reg.example/m:v2", true),
        (&rewritten, "a1", "reg.example/m:v1", false),
    ] {
        let mut snap = snapshot(Ok(state("h2:old")), &[]);
        snap.stored.applied = Some(applied.clone());
        snap.stored.attempt = Some(attempt.clone());
        let (plan, _, _) = run(&snap, Vec::new(), ApplyPolicy::Automatic, true);
        let req = started(&plan).expect("a destroy starts");
        assert_eq!(req.op, Op::Destroy);
        assert_eq!(req.files.0, format!("{{\"job\":\"{job}\"}}"), "{job}");
        assert_eq!(req.image, image);
        let mismatch: Vec<&String> = req
            .warnings
            .iter()
            .filter(|(r, _)| *r == events::DESTROY_INPUTS_MISMATCH)
            .map(|(_, note)| note)
            .collect();
        assert_eq!(!mismatch.is_empty(), warned, "{mismatch:?}");
        assert!(
            mismatch.iter().all(|n| n.contains("Job a2")),
            "{mismatch:?}"
        );
    }
}
