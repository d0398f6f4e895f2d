//! The pool exports guard: an apply that renders a change of the cluster's
//! exports may replace the pool's group, so it runs guarded and a
//! destructive plan waits for `captf.io/approve-destructive-plan` to name
//! the pool's approval hash (the inputs hash with the bootstrap data
//! blanked, so a token rotation does not move it). While such a change
//! waits, the pool holds it: it renders the exports it last applied, so a
//! bootstrap rotation still applies and a refresh does not read the
//! waiting change as drift. Pure over plain data.

use std::time::SystemTime;

use captf_contract::JsonText;

use crate::engine::history::Outcome;

/// What is known of the exports of the pool's last successful apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppliedExports {
    /// The pool never applied: its first apply is no exports change.
    Never,
    /// The exports and their hash.
    Recorded { hash: String, value: JsonText },
    /// Only `captf.io/applied-cluster-outputs-hash`: the value did not fit
    /// the record. Changes stay guarded, but none can be held.
    HashOnly { hash: String },
    /// The pool applied before anything was recorded and no baseline can
    /// be proven: every apply is guarded until one succeeds.
    Unknown,
}

impl AppliedExports {
    fn hash(&self) -> Option<&str> {
        match self {
            AppliedExports::Recorded { hash, .. } | AppliedExports::HashOnly { hash } => Some(hash),
            _ => None,
        }
    }
}

/// Where the baseline comes from, most trusted first.
#[derive(Debug, Clone, Default)]
pub struct Baseline<'a> {
    /// The exports rendered by the applied record (the newest successful
    /// apply), with their hash, and whether that record's inputs hash is
    /// the state's: only then is it provably what the state was made from.
    pub applied_record: Option<(&'a str, &'a JsonText, bool)>,
    /// The attempt record's `applied-cluster-outputs.json`, if it holds one.
    pub recorded_value: Option<&'a JsonText>,
    /// The attempt record's `captf.io/applied-cluster-outputs-hash`.
    pub recorded_hash: Option<&'a str>,
    pub ever_applied: bool,
}

/// The exports the pool last applied, by the first source that proves them.
pub fn applied_exports(b: &Baseline<'_>) -> AppliedExports {
    if let Some((hash, value, true)) = b.applied_record {
        return AppliedExports::Recorded {
            hash: hash.to_owned(),
            value: value.clone(),
        };
    }
    match (b.recorded_value, b.recorded_hash) {
        (Some(value), Some(hash)) => AppliedExports::Recorded {
            hash: hash.to_owned(),
            value: value.clone(),
        },
        (None, Some(hash)) => AppliedExports::HashOnly {
            hash: hash.to_owned(),
        },
        _ if b.ever_applied => AppliedExports::Unknown,
        _ => AppliedExports::Never,
    }
}

/// An apply Job of the pool, as far as the guard cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyJob<'a> {
    pub name: &'a str,
    pub created: SystemTime,
    pub outcome: Outcome,
    /// `captf.io/approval-hash`: the Job ran guarded by this hash.
    pub approval_hash: Option<&'a str>,
    /// `captf.io/held-cluster-outputs`: the Job rendered held exports.
    pub held: bool,
}

/// The Job whose block the current change waits on: the newest Job guarded
/// by `approval_hash`, if it was blocked and only held applies came after
/// it (any other apply since means the change was withdrawn or applied).
pub fn blocking_job<'a>(jobs: &[ApplyJob<'a>], approval_hash: &str) -> Option<&'a str> {
    let guarded = jobs
        .iter()
        .filter(|j| j.approval_hash == Some(approval_hash))
        .max_by_key(|j| j.created)?;
    if guarded.outcome != Outcome::Blocked {
        return None;
    }
    let later_unheld = jobs.iter().any(|j| j.created > guarded.created && !j.held);
    (!later_unheld).then_some(guarded.name)
}

/// Why a waiting change cannot be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unholdable {
    /// An earlier exports change failed part-way: nothing is held until an
    /// apply succeeds.
    Partial,
    /// Only the hash of the applied exports is recorded.
    Unrecorded,
    /// The applied exports are unknown.
    Unknown,
}

/// What the guard makes of the current inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardVerdict {
    /// The exports are as applied (or this is the first apply): render the
    /// current inputs, apply unguarded.
    Unguarded,
    /// An exports change: render the current inputs and apply guarded by
    /// the approval hash; `approved` lets deletes through.
    Guarded { approved: bool },
    /// The change waits for approval after `job` blocked; render the
    /// exports last applied meanwhile.
    Held { job: String, exports: JsonText },
    /// The change waits for approval after `job` blocked and cannot be
    /// held: nothing applies until it is approved or the inputs move on.
    Waiting { job: String, why: Unholdable },
}

/// What the guard decides from.
#[derive(Debug, Clone)]
pub struct GuardInput<'a> {
    pub deleting: bool,
    pub applied: &'a AppliedExports,
    /// Hash of the exports the current inputs render.
    pub current_exports_hash: &'a str,
    pub approval_hash: &'a str,
    /// The value of `captf.io/approve-destructive-plan` on the pool.
    pub approval: Option<&'a str>,
    /// `captf.io/partial-cluster-outputs` is recorded.
    pub partial: bool,
    /// [`blocking_job`] for the approval hash.
    pub blocked_by: Option<&'a str>,
}

/// Applies the guard's rules in order.
pub fn verdict(i: &GuardInput<'_>) -> GuardVerdict {
    // A deleting pool applies nothing; its destroy is never gated.
    if i.deleting || *i.applied == AppliedExports::Never {
        return GuardVerdict::Unguarded;
    }
    if i.applied.hash() == Some(i.current_exports_hash) {
        return GuardVerdict::Unguarded;
    }
    if i.approval == Some(i.approval_hash) {
        return GuardVerdict::Guarded { approved: true };
    }
    let Some(job) = i.blocked_by else {
        return GuardVerdict::Guarded { approved: false };
    };
    let job = job.to_owned();
    match (i.applied, i.partial) {
        (_, true) => GuardVerdict::Waiting {
            job,
            why: Unholdable::Partial,
        },
        (AppliedExports::Recorded { value, .. }, false) => GuardVerdict::Held {
            job,
            exports: value.clone(),
        },
        (AppliedExports::HashOnly { .. }, false) => GuardVerdict::Waiting {
            job,
            why: Unholdable::Unrecorded,
        },
        _ => GuardVerdict::Waiting {
            job,
            why: Unholdable::Unknown,
        },
    }
}

/// Whether a finished apply of an exports change may have changed part of
/// the infrastructure: it failed (not blocked) in its apply step, or left
/// no result at all.
pub fn failed_part_way(outcome: Outcome, failed_step: Option<&str>, has_result: bool) -> bool {
    match outcome {
        Outcome::Failed | Outcome::DeadlineExceeded | Outcome::Interrupted => {
            !has_result || failed_step == Some("apply")
        }
        _ => false,
    }
}

/// The `ApplyJobSucceeded=False/DestructivePlanBlocked` message of a
/// waiting change: what stopped, an approval on the pool that names
/// another hash (ignored, and said so once), and, last, the command that
/// approves it.
pub fn blocked_message(
    pool: &str,
    namespace: &str,
    v: &GuardVerdict,
    approval_hash: &str,
    approval: Option<&str>,
) -> String {
    let (job, tail) = match v {
        GuardVerdict::Held { job, .. } => (
            job,
            "meanwhile the pool keeps the exports it last applied (bootstrap rotations still apply)"
                .to_owned(),
        ),
        GuardVerdict::Waiting { job, why } => (
            job,
            match why {
                Unholdable::Partial => "an earlier exports change failed part-way, so nothing is held: every apply waits for its own approval".to_owned(),
                Unholdable::Unrecorded => "the last applied exports were too large to record, so nothing is held: the pool waits".to_owned(),
                Unholdable::Unknown => "the last applied exports are unknown, so nothing is held: the pool waits".to_owned(),
            },
        ),
        _ => return String::new(),
    };
    let key = captf_api::names::annotations::APPROVE_DESTRUCTIVE_PLAN;
    let ignored = match approval.filter(|a| *a != approval_hash) {
        Some(other) => format!(
            "; {key} names {}, not this change's hash, and is ignored",
            crate::names::quoted_value(other)
        ),
        None => String::new(),
    };
    format!(
        "Job {job} stopped before a plan that deletes or replaces resources for a change of the cluster's exports; nothing was applied; {tail}{ignored}; approve with: kubectl annotate terraformmachinepool {pool} -n {namespace} --overwrite {key}={approval_hash}",
    )
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use serde_json::json;

    use super::*;

    fn at(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(s)
    }

    fn recorded(hash: &str) -> AppliedExports {
        AppliedExports::Recorded {
            hash: hash.into(),
            value: json!({"backend_id": hash}).into(),
        }
    }

    #[test]
    fn the_baseline_comes_from_the_first_source_that_proves_it() {
        let value: JsonText = json!({"subnet": "a"}).into();
        let other: JsonText = json!({"subnet": "b"}).into();
        let rows: Vec<(&str, Baseline<'_>, AppliedExports)> = vec![
            (
                "applied record matching the state",
                Baseline {
                    applied_record: Some(("h2:a", &value, true)),
                    recorded_value: Some(&other),
                    recorded_hash: Some("h2:b"),
                    ever_applied: true,
                },
                AppliedExports::Recorded {
                    hash: "h2:a".into(),
                    value: value.clone(),
                },
            ),
            (
                "applied record not matching the state: the record",
                Baseline {
                    applied_record: Some(("h2:a", &value, false)),
                    recorded_value: Some(&other),
                    recorded_hash: Some("h2:b"),
                    ever_applied: true,
                },
                AppliedExports::Recorded {
                    hash: "h2:b".into(),
                    value: other.clone(),
                },
            ),
            (
                "only the hash",
                Baseline {
                    applied_record: None,
                    recorded_value: None,
                    recorded_hash: Some("h2:b"),
                    ever_applied: true,
                },
                AppliedExports::HashOnly {
                    hash: "h2:b".into(),
                },
            ),
            (
                "applied without any record",
                Baseline {
                    applied_record: Some(("h2:a", &value, false)),
                    ever_applied: true,
                    ..Default::default()
                },
                AppliedExports::Unknown,
            ),
            ("never applied", Baseline::default(), AppliedExports::Never),
        ];
        for (name, b, want) in rows {
            assert_eq!(applied_exports(&b), want, "{name}");
        }
    }

    fn job(
        name: &str,
        s: u64,
        outcome: Outcome,
        hash: Option<&'static str>,
        held: bool,
    ) -> ApplyJob<'static> {
        ApplyJob {
            name: Box::leak(name.to_owned().into_boxed_str()),
            created: at(s),
            outcome,
            approval_hash: hash,
            held,
        }
    }

    #[test]
    fn a_change_waits_on_the_newest_guarded_job_while_only_held_applies_follow() {
        use Outcome::*;
        let rows: Vec<(&str, Vec<ApplyJob<'static>>, Option<&str>)> = vec![
            (
                "no guarded Job",
                vec![job("a", 1, Succeeded, None, false)],
                None,
            ),
            (
                "blocked",
                vec![
                    job("a", 1, Succeeded, None, false),
                    job("g", 2, Blocked, Some("A"), false),
                ],
                Some("g"),
            ),
            (
                "blocked, then a held rotation",
                vec![
                    job("g", 2, Blocked, Some("A"), false),
                    job("r", 3, Succeeded, None, true),
                ],
                Some("g"),
            ),
            (
                "blocked, then an unheld apply (withdrawn and back)",
                vec![
                    job("g", 2, Blocked, Some("A"), false),
                    job("u", 3, Succeeded, None, false),
                ],
                None,
            ),
            (
                "blocked for another approval hash",
                vec![job("g", 2, Blocked, Some("B"), false)],
                None,
            ),
            (
                "blocked, then the approved apply failed",
                vec![
                    job("g", 2, Blocked, Some("A"), false),
                    job("h", 3, Failed, Some("A"), false),
                ],
                None,
            ),
        ];
        for (name, jobs, want) in rows {
            assert_eq!(blocking_job(&jobs, "A"), want, "{name}");
        }
    }

    fn input<'a>(applied: &'a AppliedExports) -> GuardInput<'a> {
        GuardInput {
            deleting: false,
            applied,
            current_exports_hash: "E2",
            approval_hash: "A",
            approval: None,
            partial: false,
            blocked_by: None,
        }
    }

    #[test]
    fn the_guard_rules_in_order() {
        let e1 = recorded("E1");
        let e2 = recorded("E2");
        let hash_only = AppliedExports::HashOnly { hash: "E1".into() };
        let held = GuardVerdict::Held {
            job: "g".into(),
            exports: json!({"backend_id": "E1"}).into(),
        };
        let rows: Vec<(&str, GuardInput<'_>, GuardVerdict)> = vec![
            (
                "first apply",
                input(&AppliedExports::Never),
                GuardVerdict::Unguarded,
            ),
            ("exports as applied", input(&e2), GuardVerdict::Unguarded),
            (
                "deleting",
                GuardInput {
                    deleting: true,
                    blocked_by: Some("g"),
                    ..input(&e1)
                },
                GuardVerdict::Unguarded,
            ),
            (
                "a change runs guarded",
                input(&e1),
                GuardVerdict::Guarded { approved: false },
            ),
            (
                "an approval naming the approval hash",
                GuardInput {
                    approval: Some("A"),
                    blocked_by: Some("g"),
                    ..input(&e1)
                },
                GuardVerdict::Guarded { approved: true },
            ),
            (
                "an approval naming another hash is ignored",
                GuardInput {
                    approval: Some("B"),
                    blocked_by: Some("g"),
                    ..input(&e1)
                },
                held.clone(),
            ),
            (
                "blocked: held",
                GuardInput {
                    blocked_by: Some("g"),
                    ..input(&e1)
                },
                held,
            ),
            (
                "blocked after a partial failure: waits",
                GuardInput {
                    blocked_by: Some("g"),
                    partial: true,
                    ..input(&e1)
                },
                GuardVerdict::Waiting {
                    job: "g".into(),
                    why: Unholdable::Partial,
                },
            ),
            (
                "blocked with only the hash: waits",
                GuardInput {
                    blocked_by: Some("g"),
                    ..input(&hash_only)
                },
                GuardVerdict::Waiting {
                    job: "g".into(),
                    why: Unholdable::Unrecorded,
                },
            ),
            (
                "unknown baseline: guarded",
                input(&AppliedExports::Unknown),
                GuardVerdict::Guarded { approved: false },
            ),
            (
                "unknown baseline, blocked: waits",
                GuardInput {
                    blocked_by: Some("g"),
                    ..input(&AppliedExports::Unknown)
                },
                GuardVerdict::Waiting {
                    job: "g".into(),
                    why: Unholdable::Unknown,
                },
            ),
        ];
        for (name, i, want) in rows {
            assert_eq!(verdict(&i), want, "{name}");
        }
    }

    #[test]
    fn only_a_failure_in_the_apply_step_or_without_result_is_partial() {
        use Outcome::*;
        let rows = [
            (Failed, Some("apply"), true, true),
            (Failed, Some("plan"), true, false),
            (Failed, None, false, true),
            (DeadlineExceeded, Some("apply"), true, true),
            (Interrupted, None, false, true),
            (Blocked, None, true, false),
            (Succeeded, None, true, false),
        ];
        for (outcome, step, result, want) in rows {
            assert_eq!(
                failed_part_way(outcome, step, result),
                want,
                "{outcome:?} {step:?} {result}"
            );
        }
    }

    #[test]
    fn the_blocked_message_names_the_job_and_the_approval_command() {
        let v = GuardVerdict::Held {
            job: "captf-mp-pool-apply-a2-abc123".into(),
            exports: json!({}).into(),
        };
        let m = blocked_message("pool-a", "ns", &v, "h2:feed", None);
        assert!(m.contains("Job captf-mp-pool-apply-a2-abc123"), "{m}");
        let command = "approve with: kubectl annotate terraformmachinepool pool-a -n ns --overwrite captf.io/approve-destructive-plan=h2:feed";
        assert!(m.ends_with(command), "{m}");
        assert!(m.contains("nothing was applied"), "{m}");
        assert!(!m.contains("ignored"), "{m}");
        let w = GuardVerdict::Waiting {
            job: "j".into(),
            why: Unholdable::Partial,
        };
        assert!(blocked_message("p", "n", &w, "h", None).contains("failed part-way"));
        assert_eq!(
            blocked_message("p", "n", &GuardVerdict::Unguarded, "h", None),
            ""
        );

        // An approval naming another hash is named once, before the
        // command, which stays the message's end; the matching one is not.
        let named = |approval: &str| blocked_message("pool-a", "ns", &v, "h2:feed", Some(approval));
        let m = named("h2:0ld");
        assert_eq!(m.matches("h2:0ld").count(), 1, "{m}");
        assert!(
            m.contains("captf.io/approve-destructive-plan names \"h2:0ld\", not this change's hash, and is ignored; approve with"),
            "{m}"
        );
        assert!(m.ends_with(command), "{m}");
        assert_eq!(
            named("h2:feed"),
            blocked_message("pool-a", "ns", &v, "h2:feed", None)
        );
        let long = named(&"x".repeat(500));
        assert!(long.contains(&format!("{:?}…", "x".repeat(100))), "{long}");
        assert!(!long.contains(&"x".repeat(101)), "{long}");
    }
}
