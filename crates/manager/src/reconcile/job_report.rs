//! What the Job metrics read of a finished Job beyond its outcome (see
//! `crate::metrics::JobReport`): a pure reading of its result document,
//! its pod's runner start and the object's other Jobs.

use std::time::Duration;

use crate::engine::decide::Op;
use crate::engine::history::{JobRecord, Outcome};
use crate::jobs::observe::ObservedJob;

/// What `captf_job_*` and friends read of a finished Job's result:
/// steps, queueing, the attempt that succeeded (`records` are the
/// object's Jobs), resources changed, drift found and a broken lock.
pub fn job_report(o: &ObservedJob, records: &[JobRecord]) -> crate::metrics::JobReport {
    use crate::metrics::ResourceCounts;
    let result = o.result.as_ref();
    let steps = result.map(|r| r.steps.as_slice()).unwrap_or_default();
    let changed = result.and_then(|r| r.changes).map(|c| ResourceCounts {
        create: c.add,
        update: c.change,
        delete: c.destroy,
        import: c.import,
        replace: 0,
    });
    let drift = result
        .and_then(|r| r.drift.as_ref())
        .filter(|_| o.record.op == Op::Drift)
        .map(|d| ResourceCounts {
            create: d.create,
            update: d.update,
            replace: d.replace,
            delete: d.delete,
            import: 0,
        });
    crate::metrics::JobReport {
        steps: steps
            .iter()
            .map(|s| (s.name.clone(), Duration::from_secs_f64(s.seconds.max(0.0))))
            .collect(),
        queued: o
            .runner_started_at
            .and_then(|s| s.duration_since(o.record.created).ok()),
        attempts: (o.record.outcome == Outcome::Succeeded).then(|| attempts(o, records)),
        changed: changed.filter(|_| matches!(o.record.op, Op::Apply | Op::Destroy)),
        drift,
        force_unlocked: steps
            .iter()
            .any(|s| s.name == "force-unlock" && s.exit == 0),
    }
}

/// 1 plus the failed Jobs of the op finished before this success and after
/// the previous one (interrupted, blocked and plan-changed Jobs are not
/// failures).
fn attempts(o: &ObservedJob, records: &[JobRecord]) -> u32 {
    let done = o.record.finished;
    let mut earlier: Vec<&JobRecord> = records
        .iter()
        .filter(|r| r.op == o.record.op && r.name != o.record.name)
        .filter(|r| r.finished.is_some() && r.finished <= done)
        .collect();
    earlier.sort_by_key(|r| std::cmp::Reverse(r.finished));
    let failures = earlier
        .iter()
        .take_while(|r| r.outcome != Outcome::Succeeded)
        .filter(|r| r.outcome.counts_as_failure())
        .count();
    1 + failures as u32
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::engine::history::JobRecord;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn record(name: &str, op: Op, outcome: Outcome, finished: u64) -> JobRecord {
        JobRecord {
            name: name.into(),
            op,
            attempt: 1,
            outcome,
            created: at(finished.saturating_sub(100)),
            finished: Some(at(finished)),
            remediation: false,
        }
    }

    fn observed(r: JobRecord, result: serde_json::Value, started: Option<u64>) -> ObservedJob {
        ObservedJob {
            record: r,
            result: Some(serde_json::from_value(result).unwrap()),
            result_error: None,
            image_pull_failed: false,
            image_id: None,
            pod_seen: true,
            runner_started: started.is_some(),
            runner_started_at: started.map(at),
            lock_untouched: false,
        }
    }

    #[test]
    fn attempts_count_failures_since_the_previous_success_only() {
        use Outcome::*;
        let records = vec![
            record("a1", Op::Apply, Failed, 10),
            record("a2", Op::Apply, Succeeded, 20),
            record("a3", Op::Apply, Failed, 30),
            record("a4", Op::Apply, Interrupted, 40),
            record("a5", Op::Apply, DeadlineExceeded, 50),
            record("d1", Op::Drift, Failed, 55),
            record("a6", Op::Apply, Succeeded, 60),
        ];
        let cases = [("a2", Some(2)), ("a6", Some(3)), ("a3", None)];
        for (name, want) in cases {
            let r = records.iter().find(|r| r.name == name).unwrap().clone();
            let o = observed(r, serde_json::json!({"version": 1}), None);
            assert_eq!(job_report(&o, &records).attempts, want, "{name}");
        }
    }

    #[test]
    fn the_report_reads_steps_queueing_changes_and_a_broken_lock() {
        let r = record("a1", Op::Apply, Outcome::Succeeded, 500);
        let result = serde_json::json!({
            "version": 1,
            "steps": [
                {"name": "init", "exit": 0, "seconds": 2.5},
                {"name": "force-unlock", "exit": 0, "seconds": 0.4},
                {"name": "apply", "exit": 0, "seconds": 30.0},
            ],
            "changes": {"add": 3, "change": 1, "destroy": 0},
            "drift": {"detected": true, "create": 1},
        });
        let report = job_report(
            &observed(r.clone(), result, Some(430)),
            std::slice::from_ref(&r),
        );
        assert_eq!(report.steps.len(), 3);
        assert_eq!(
            report.steps[0],
            ("init".to_owned(), Duration::from_millis(2500))
        );
        assert_eq!(
            report.queued,
            Some(Duration::from_secs(30)),
            "created at 400, runner at 430"
        );
        assert_eq!(report.attempts, Some(1));
        let changed = report.changed.unwrap();
        assert_eq!((changed.create, changed.update, changed.delete), (3, 1, 0));
        assert!(report.force_unlocked);
        assert_eq!(report.drift, None, "only a drift Job reports drift");

        let d = record("d1", Op::Drift, Outcome::Succeeded, 900);
        let result = serde_json::json!({
            "version": 1,
            "steps": [{"name": "force-unlock", "exit": 1, "seconds": 0.1}],
            "changes": {"add": 1, "change": 0, "destroy": 0},
            "drift": {"detected": true, "replace": 2},
        });
        let report = job_report(&observed(d.clone(), result, None), &[d]);
        assert_eq!(report.drift.unwrap().replace, 2);
        assert_eq!(report.changed, None, "a drift check changes nothing");
        assert_eq!(report.queued, None, "no runner start, no queue time");
        assert!(!report.force_unlocked, "a failed unlock broke no lock");
    }
}
