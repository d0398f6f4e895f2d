//! Table tests of the bookkeeping plan: finished Jobs in, the status they
//! leave, the marks and the writes out, without a cluster.

use std::time::{Duration, SystemTime};

use captf_api::names::{annotations, conditions};
use captf_contract::result::ResultDoc;
use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};

use super::*;
use crate::engine::decide::Op;
use crate::engine::history::{JobRecord, Outcome};
use crate::jobs::observe::ObservedJob;
use crate::reconcile::pass::Loaded;
use crate::reconcile::status::Draft;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
}

/// A Job of `op` created at `t`, finished at `t + 5` unless running, with
/// its annotations.
fn job(name: &str, op: Op, outcome: Outcome, t: u64, ann: Value) -> (Job, ObservedJob) {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": ann},
    }))
    .unwrap();
    let finished = (outcome != Outcome::Running).then(|| at(t + 5));
    let result: Option<ResultDoc> = (outcome != Outcome::Running).then(|| {
        serde_json::from_value(json!({"version": 1, "op": op.as_str(), "steps": []})).unwrap()
    });
    let observed = ObservedJob {
        record: JobRecord {
            name: name.into(),
            op,
            attempt: 1,
            outcome,
            created: at(t),
            finished,
            remediation: false,
        },
        result,
        result_error: None,
        image_pull_failed: false,
        image_id: Some("registry.example/m@sha256:abc".into()),
        pod_seen: true,
        runner_started_at: None,
        runner_started: true,
        lock_untouched: false,
    };
    (job, observed)
}

fn loaded(jobs: Vec<(Job, ObservedJob)>) -> Loaded {
    let (jobs, observed) = jobs.into_iter().unzip();
    Loaded { jobs, observed }
}

const POLICY: BookkeepingPolicy = BookkeepingPolicy {
    history_limits: (3, 3),
    drift_enabled: true,
    drift_remediate: false,
};

fn plan(l: &Loaded) -> (Draft, BookkeepingPlan) {
    let mut draft = Draft::new(&[], 1, at(100));
    let plan = plan_bookkeeping(l, &mut draft, &POLICY);
    (draft, plan)
}

fn bookkept() -> Value {
    json!({annotations::BOOKKEPT: "succeeded"})
}

#[test]
fn a_successful_apply_promotes_adopts_and_releases_in_that_order() {
    let l = loaded(vec![job(
        "apply-1",
        Op::Apply,
        Outcome::Succeeded,
        0,
        json!({annotations::INPUTS_HASH: "h2:aa"}),
    )]);
    let (draft, p) = plan(&l);
    assert_eq!(
        p.effects,
        vec![
            Effect::PromoteRecord {
                job: "apply-1".into(),
                inputs_hash: Some("h2:aa".into()),
                image_id: Some("registry.example/m@sha256:abc".into()),
            },
            Effect::AdoptState {
                inputs_hash: Some("h2:aa".into())
            },
            Effect::DeleteRunSecret {
                job: "apply-1".into()
            },
            Effect::ReleaseRunLease {
                job: "apply-1".into(),
                version: None,
            },
        ]
    );
    let c = draft.get(conditions::APPLY_JOB_SUCCEEDED).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "ApplySucceeded")
    );
    assert_eq!(p.booked.marks.len(), 1);
    assert_eq!(p.booked.marks[0].events[0].reason, "JobSucceeded");
    assert_eq!(draft.field_value("lastRun").unwrap()["job"], "apply-1");
    assert!(p.booked.active.is_none());
}

#[test]
fn finished_jobs_are_bookkept_once_and_oldest_first() {
    type Case = (&'static str, Vec<(Job, ObservedJob)>, Vec<&'static str>);
    let cases: [Case; 4] = [
        (
            "nothing finished",
            vec![job("r-1", Op::Refresh, Outcome::Running, 0, json!({}))],
            vec![],
        ),
        (
            "already bookkept",
            vec![job("r-1", Op::Refresh, Outcome::Succeeded, 0, bookkept())],
            vec![],
        ),
        (
            "two new, in finishing order",
            vec![
                job("r-2", Op::Refresh, Outcome::Succeeded, 20, json!({})),
                job("r-1", Op::Refresh, Outcome::Failed, 10, json!({})),
            ],
            vec!["r-1", "r-2"],
        ),
        (
            "a bookkept one beside a new one",
            vec![
                job("r-1", Op::Refresh, Outcome::Succeeded, 10, bookkept()),
                job("r-2", Op::Refresh, Outcome::Succeeded, 20, json!({})),
            ],
            vec!["r-2"],
        ),
    ];
    for (what, jobs, want) in cases {
        let (_, p) = plan(&loaded(jobs));
        let marked: Vec<&str> = p.booked.marks.iter().map(|m| m.job.as_str()).collect();
        assert_eq!(marked, want, "{what}");
        let released: Vec<&str> = p
            .effects
            .iter()
            .filter_map(|e| match e {
                Effect::ReleaseRunLease { job, .. } => Some(job.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            released, want,
            "{what}: each finished run gives its lease back"
        );
    }
}

#[test]
fn a_refresh_or_drift_check_writes_its_time_and_no_record() {
    let (draft, p) = plan(&loaded(vec![job(
        "refresh-1",
        Op::Refresh,
        Outcome::Succeeded,
        0,
        json!({}),
    )]));
    assert!(draft.field_value("lastRefresh").is_some());
    assert!(
        !p.effects
            .iter()
            .any(|e| matches!(e, Effect::PromoteRecord { .. } | Effect::AdoptState { .. })),
        "a refresh changes no inputs record: {:?}",
        p.effects
    );
    let c = draft.get(conditions::DRIFT_JOB_SUCCEEDED).unwrap();
    assert_eq!(c.status, "True");

    let (mut d, mut observed) = job("drift-1", Op::Drift, Outcome::Succeeded, 0, json!({}));
    observed.result.as_mut().unwrap().drift = Some(
        serde_json::from_value(
            json!({"detected": true, "create": 1, "update": 0, "replace": 0, "delete": 0}),
        )
        .unwrap(),
    );
    d.metadata.name = Some("drift-1".into());
    let (draft, p) = plan(&loaded(vec![(d, observed)]));
    assert!(draft.field_value("lastDriftCheck").is_some());
    let c = draft.get(conditions::DRIFT_DETECTED).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "DriftReported")
    );
    let events: Vec<&str> = p.booked.marks[0]
        .events
        .iter()
        .map(|e| e.reason.as_str())
        .collect();
    assert_eq!(
        events,
        vec!["DriftDetected"],
        "a warning when drift is first seen"
    );
}

#[test]
fn history_beyond_the_limits_is_pruned() {
    let mut jobs: Vec<(Job, ObservedJob)> = (0..5)
        .map(|i| {
            job(
                &format!("refresh-{i}"),
                Op::Refresh,
                Outcome::Succeeded,
                i * 100,
                bookkept(),
            )
        })
        .collect();
    jobs.push(job(
        "refresh-5",
        Op::Refresh,
        Outcome::Running,
        600,
        json!({}),
    ));
    let (_, p) = plan(&loaded(jobs));
    let mut pruned: Vec<&str> = p
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::DeleteJob { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    pruned.sort();
    assert_eq!(
        pruned,
        vec!["refresh-0", "refresh-1"],
        "the newest three successful kept"
    );
    assert_eq!(
        p.booked.active.map(|a| a.name),
        Some("refresh-5".to_owned()),
        "the running Job is the active one"
    );
    assert!(p.booked.marks.is_empty(), "nothing new to bookkeep");
}

#[test]
fn a_failed_remediation_keeps_the_drift_pending() {
    let (draft, p) = plan(&loaded(vec![job(
        "apply-2",
        Op::Apply,
        Outcome::Failed,
        0,
        json!({annotations::DRIFT_REMEDIATION: "true"}),
    )]));
    let c = draft.get(conditions::DRIFT_DETECTED).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "DriftPending")
    );
    let c = draft.get(conditions::APPLY_JOB_SUCCEEDED).unwrap();
    assert_eq!(c.status, "False");
    assert_eq!(p.booked.marks[0].events[0].reason, "JobFailed");
    assert!(
        !p.effects
            .iter()
            .any(|e| matches!(e, Effect::PromoteRecord { .. })),
        "a failed apply is not promoted"
    );
}

/// Scenario 18: a successful restore newer than the newest apply clears the
/// hold of an apply of unknown outcome; an older one clears nothing. Either
/// way the serial is consumed and the request ends only on success.
#[test]
fn a_restore_is_bookkept_by_its_outcome_and_its_age_against_the_applies() {
    let restore_ann =
        |hash: &str| json!({annotations::RESTORE_SERIAL: "4", annotations::INPUTS_HASH: hash});
    // (restore outcome, restore start, apply start, hash, clears unconfirmed, adopts with)
    let cases = [
        (
            Outcome::Succeeded,
            100,
            Some(0),
            "h2:old",
            true,
            Some(Some("h2:old")),
        ),
        (Outcome::Succeeded, 100, None, "", true, Some(None)),
        // The apply started after the restore finished: it is newer.
        (
            Outcome::Succeeded,
            0,
            Some(100),
            "h2:old",
            false,
            Some(Some("h2:old")),
        ),
        (Outcome::Failed, 100, Some(0), "h2:old", false, None),
    ];
    for (outcome, restore_at, apply_at, hash, clears, adopts) in cases {
        let mut jobs = vec![job(
            "restore-1",
            Op::Restore,
            outcome,
            restore_at,
            restore_ann(hash),
        )];
        if let Some(t) = apply_at {
            let mut ann = bookkept();
            ann[annotations::INPUTS_HASH] = json!("h2:new");
            jobs.push(job("apply-1", Op::Apply, Outcome::Failed, t, ann));
        }
        let l = loaded(jobs);
        let (draft, plan) = plan(&l);
        let case = format!("{outcome:?} restore at {restore_at}, apply at {apply_at:?}");
        assert_eq!(
            draft.field_value("lastRestoredSerial"),
            Some(json!(4)),
            "{case}"
        );
        let adopted = plan.effects.iter().find_map(|e| match e {
            Effect::AdoptState { inputs_hash } => Some(inputs_hash.as_deref()),
            _ => None,
        });
        assert_eq!(adopted, adopts, "{case}");
        assert_eq!(
            plan.effects.contains(&Effect::ClearUnconfirmed),
            clears,
            "{case}"
        );
        let ends = plan
            .effects
            .contains(&Effect::RemoveAnnotation(annotations::RESTORE_STATE));
        assert_eq!(ends, outcome == Outcome::Succeeded, "{case}");
        let c = draft.get(conditions::RESTORE_JOB_SUCCEEDED).unwrap();
        let expected = if outcome == Outcome::Succeeded {
            ("True", "StateRestored")
        } else {
            ("False", "RestoreFailed")
        };
        assert_eq!((c.status.as_str(), c.reason.as_str()), expected, "{case}");
        let mark = plan
            .booked
            .marks
            .iter()
            .find(|m| m.job == "restore-1")
            .unwrap();
        let result = if outcome == Outcome::Succeeded {
            "succeeded"
        } else {
            "failed"
        };
        assert_eq!(mark.restore_result, Some(result), "{case}");
    }
}
