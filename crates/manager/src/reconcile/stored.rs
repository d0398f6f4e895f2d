//! What a pass reads of the object's state and durable inputs records,
//! with `StateReadable` and the lock and unknown-apply checks around it.

use captf_api::names::{annotations, conditions, events, reasons};
use kube::ResourceExt;

use super::effect::Effect;
use super::open_pass::{EarlyReads, Measured, OpenPass, Records};
use super::status::Draft;
use super::workload::Workload;
use super::{Context, Error};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::io::records::read_record;
use crate::records::{InputsRecord, applied_record_name, attempt_record_name};
use crate::state::reader::{StateError, StateSummary};

/// The object's applied record (`None`: none, or unreadable).
pub async fn applied_record<K: Workload>(
    ctx: &Context,
    obj: &K,
) -> Result<Option<InputsRecord>, Error> {
    named_record(ctx, obj, &applied_record_name(K::KIND, &obj.name_any())).await
}

/// The object's attempt record (`None`: none, or unreadable).
pub async fn attempt_record<K: Workload>(
    ctx: &Context,
    obj: &K,
) -> Result<Option<InputsRecord>, Error> {
    named_record(ctx, obj, &attempt_record_name(K::KIND, &obj.name_any())).await
}

async fn named_record<K: Workload>(
    ctx: &Context,
    obj: &K,
    name: &str,
) -> Result<Option<InputsRecord>, Error> {
    let ns = obj.namespace().unwrap_or_default();
    Ok(read_record(&ctx.client, &ns, name)
        .await?
        .and_then(Result::ok))
}

/// The object's two inputs records, read together.
pub(super) async fn read_records<K: Workload>(ctx: &Context, obj: &K) -> Result<Records, Error> {
    Ok(Records {
        applied: applied_record(ctx, obj).await?,
        attempt: attempt_record(ctx, obj).await?,
    })
}

/// What a pass reads of the object's state and durable inputs.
pub struct Stored {
    pub read: Result<StateSummary, StateError>,
    pub applied: Option<InputsRecord>,
    pub attempt: Option<InputsRecord>,
    pub ever_applied: bool,
    /// The apply whose outcome is unknown and still in force, if any.
    pub unconfirmed_apply: Option<String>,
    /// A provisioned machine's state carries no inputs hash: nothing says
    /// it was applied from the machine's inputs, so it is held as lost
    /// (RESOLUTIONS 32) and never applied over.
    pub origin_unknown: bool,
    /// The backup a live `captf.io/restore-state` request asks to restore.
    pub restore: Option<crate::state::backups::RestoreTarget>,
    /// What the reads put in the status (the plan sets it first).
    pub report: ReadReport,
    /// The writes what was read asks for (an operator's confirmation
    /// consumed, a newly unreadable state reported): the kind's plan
    /// lists them first.
    pub effects: Vec<Effect>,
}

/// What the state and records reads put in the status: the state's
/// suffix, `StateReadable`, the serial seen without a backup, and a restore
/// request that names no backup.
#[derive(Debug, Clone)]
pub struct ReadReport {
    pub suffix: String,
    pub readable: ConditionValue,
    /// `status.observedStateSerial`, when a serial needs no backup.
    pub seen_serial: Option<u64>,
    /// `RestoreJobSucceeded=False/RestoreBackupNotFound`.
    pub restore_not_found: Option<ConditionValue>,
}

impl Stored {
    /// Puts what the reads found in the status; what the state read
    /// measured, for the gauges.
    pub fn report(&self, draft: &mut Draft) -> Measured {
        let report = &self.report;
        // Informational: the backend's suffix, and the serial the outputs come from.
        draft.field("stateSecretSuffix", report.suffix.clone());
        if let Some(serial) = report.seen_serial {
            draft.field("observedStateSerial", serial);
        }
        if let Some(v) = &report.restore_not_found {
            draft.set(conditions::RESTORE_JOB_SUCCEEDED, v);
        }
        draft.set(conditions::STATE_READABLE, &report.readable);
        let mut measured = Measured::default();
        measured.state_read(&self.read);
        measured
    }
}

#[cfg(test)]
impl ReadReport {
    /// What a plain read of `read` reports, for tests of the plans.
    pub fn for_plan_tests(read: &Result<StateSummary, StateError>, ever_applied: bool) -> Self {
        ReadReport {
            suffix: "test".into(),
            readable: readable_condition(read, ever_applied, None, None),
            seen_serial: None,
            restore_not_found: None,
        }
    }
}

/// Reads the state and the records (or takes the opening's early reads),
/// with what they report.
pub async fn read_stored<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &OpenPass,
    opened_status: &Draft,
    early: EarlyReads,
) -> Result<Stored, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let suffix = crate::names::state_suffix(K::KIND, &ns, &obj.name_any());
    // The chunks themselves are kept for this pass only, for a backup.
    let (read, chunks) = match early.state {
        Some(read) => (read, Vec::new()),
        None => {
            let chunks = crate::io::state::list(&ctx.client, &ns, &suffix).await?;
            (crate::io::state::summarize(&suffix, &chunks), chunks)
        }
    };
    let Records {
        applied,
        mut attempt,
    } = match early.records {
        Some(records) => records,
        None => read_records(ctx, obj).await?,
    };
    let ever_applied =
        obj.provisioned() || InputsRecord::ever_applied(applied.as_ref(), attempt.as_ref());
    let mut unconfirmed = InputsRecord::unconfirmed_in_force(attempt.as_ref(), applied.as_ref());
    let mut effects = Vec::new();
    if let Some(job) = &unconfirmed
        && confirmed_no_resources(obj, job)
    {
        // The record's mark goes before the annotation, so a crash between
        // them leaves an annotation that names nothing recorded (ignored).
        effects.push(Effect::ClearUnconfirmed);
        effects.push(Effect::RemoveAnnotation(annotations::CONFIRM_NO_RESOURCES));
        if let Some(a) = attempt.as_mut() {
            a.meta.unconfirmed_apply = None;
        }
        unconfirmed = None;
    }
    let (readable, origin_unknown) =
        readable_of(obj, p, &read, ever_applied, unconfirmed.as_deref());
    let readable = unless_locked_by_other(ctx, obj, readable).await?;
    let backups_kept = ctx.config.state_backups > 0;
    let owed = super::backups::owed_backup(obj, p, backups_kept, &read, &chunks);
    drop(chunks);
    // Taken first when the plan's effects are made, as when it was read.
    effects.splice(0..0, owed.due.map(|due| Effect::BackUpState(Box::new(due))));
    let requested = super::backups::requested_restore(ctx, obj, opened_status).await?;
    effects.extend(requested.writes);
    effects.extend(unreadable_report(obj, &readable));
    let report = ReadReport {
        suffix,
        readable,
        seen_serial: owed.seen_serial,
        restore_not_found: requested.not_found,
    };
    let restore = requested.target;
    Ok(Stored {
        read,
        applied,
        attempt,
        ever_applied,
        unconfirmed_apply: unconfirmed,
        origin_unknown,
        restore,
        report,
        effects,
    })
}

/// `StateReadable` from the state read, whether the object ever applied,
/// the apply of unknown outcome still in force, if any, and the object's
/// `captf.io/confirm-no-resources` (one naming another Job is ignored, and
/// said so).
pub(super) fn readable_condition(
    read: &Result<StateSummary, StateError>,
    ever_applied: bool,
    unconfirmed: Option<&str>,
    confirmation: Option<&str>,
) -> ConditionValue {
    // The backend writes an empty state at `init`: one that records
    // nothing holds no more than none.
    let no_record = match read {
        Err(StateError::NotFound) => true,
        Ok(s) => s.records_nothing(),
        Err(_) => false,
    };
    match unconfirmed {
        Some(job) if no_record && !ever_applied => {
            let key = annotations::CONFIRM_NO_RESOURCES;
            let ignored = match confirmation.filter(|c| *c != job) {
                Some(other) => format!(
                    " {key} names {}, not this Job, and is ignored.",
                    crate::names::quoted_value(other)
                ),
                None => String::new(),
            };
            ConditionValue {
                status: ConditionStatus::False,
                reason: reasons::APPLY_OUTCOME_UNKNOWN,
                message: format!(
                    "apply Job {job} ended without a result, failed in its apply step, or disappeared, and no state records anything: it may have created resources nothing records.{ignored} \
                     Check the infrastructure, then set {key}={job} (or restore a backup, or delete with deletionPolicy Retain)"
                ),
            }
        }
        _ => state_readable(read, ever_applied),
    }
}

/// `readable`, or `StateLocked` when a lock reported held by someone else
/// still is: looked at again each pass until it is gone (one GET while it
/// lasts; none otherwise).
async fn unless_locked_by_other<K: Workload>(
    ctx: &Context,
    obj: &K,
    readable: ConditionValue,
) -> Result<ConditionValue, Error> {
    let was_locked = obj
        .condition(conditions::STATE_READABLE)
        .is_some_and(|c| c.reason == reasons::STATE_LOCKED);
    if was_locked && readable.status == ConditionStatus::True {
        Ok(locked_by_other(obj, &read_lock(ctx, obj).await?.verdict).unwrap_or(readable))
    } else {
        Ok(readable)
    }
}

/// `StateReadable` from what was read, and whether the state's origin is
/// unknown (a provisioned machine's state without an inputs hash).
fn readable_of<K: Workload>(
    obj: &K,
    p: &OpenPass,
    read: &Result<StateSummary, StateError>,
    ever_applied: bool,
    unconfirmed: Option<&str>,
) -> (ConditionValue, bool) {
    if origin_unknown(obj, p, read) {
        return (state_of_unknown_origin(), true);
    }
    let confirmation = obj.annotations().get(annotations::CONFIRM_NO_RESOURCES);
    let readable = readable_condition(
        read,
        ever_applied,
        unconfirmed,
        confirmation.map(String::as_str),
    );
    (readable, false)
}

/// Whether the object is a provisioned machine whose state carries no
/// inputs hash. Not in a pass that books a Job: it may be adopting the
/// state with its hash now.
fn origin_unknown<K: Workload>(
    obj: &K,
    p: &OpenPass,
    read: &Result<StateSummary, StateError>,
) -> bool {
    !p.shared.mutable
        && obj.provisioned()
        && p.booked.newly.is_empty()
        && read.as_ref().is_ok_and(|s| s.inputs_hash.is_none())
}

/// `StateReadable` of a provisioned machine whose state carries no inputs
/// hash: lost, with the ways out.
fn state_of_unknown_origin() -> ConditionValue {
    ConditionValue {
        status: ConditionStatus::False,
        reason: reasons::STATE_LOST,
        message: format!(
            "the state carries no inputs hash, so nothing shows it was applied from this machine's inputs; a provisioned machine is never applied over it. \
             Restore a backup ({}) or delete the machine with deletionPolicy Retain",
            annotations::RESTORE_STATE
        ),
    }
}

/// The `StateReadable` condition of a read.
fn state_readable(read: &Result<StateSummary, StateError>, ever_applied: bool) -> ConditionValue {
    match read {
        Ok(s) => ConditionValue {
            status: ConditionStatus::True,
            reason: reasons::STATE_READ,
            message: format!(
                "serial {}, {} managed resources",
                s.serial, s.managed_resources
            ),
        },
        Err(StateError::NotFound) if ever_applied => ConditionValue {
            status: ConditionStatus::False,
            reason: reasons::STATE_LOST,
            message: "the state Secret is gone although the object applied before".into(),
        },
        Err(StateError::NotFound) => ConditionValue {
            status: ConditionStatus::Unknown,
            reason: reasons::STATE_NOT_FOUND,
            message: "no state yet".into(),
        },
        Err(e) => ConditionValue {
            status: ConditionStatus::False,
            reason: e.reason(),
            message: e.to_string(),
        },
    }
}

/// The metric and, for a lost state, the event of a `StateReadable=False`
/// newly reported (a pass that repeats the same reason reports nothing).
fn unreadable_report<K: Workload>(obj: &K, readable: &ConditionValue) -> Vec<Effect> {
    let before = obj.condition(conditions::STATE_READABLE);
    let again = before.is_some_and(|c| c.status == "False" && c.reason == readable.reason);
    let mut effects = Vec::new();
    if readable.status != ConditionStatus::False || again {
        return effects;
    }
    let reason = match readable.reason {
        reasons::STATE_INCONSISTENT => Some("inconsistent"),
        reasons::STATE_ENCRYPTED => Some("encrypted"),
        reasons::STATE_CORRUPT => Some("corrupt"),
        reasons::STATE_LOST => Some("lost"),
        reasons::STATE_LOCKED => Some("locked"),
        _ => None,
    };
    effects.extend(reason.map(Effect::CountStateReadFailed));
    if matches!(
        readable.reason,
        reasons::STATE_LOST | reasons::APPLY_OUTCOME_UNKNOWN
    ) {
        effects.push(Effect::Event {
            warning: true,
            reason: events::STATE_LOST,
            action: "Reconcile",
            note: readable.message.clone(),
        });
    }
    effects
}

/// How the object's state lock reads now (see `io::locks`).
pub(super) async fn read_lock<K: Workload>(
    ctx: &Context,
    obj: &K,
) -> Result<crate::io::locks::StateLock, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let suffix = crate::names::state_suffix(K::KIND, &ns, &name);
    Ok(crate::io::locks::read_state_lock(&ctx.client, &ns, &suffix, K::KIND, &name).await?)
}

/// The `StateLocked` condition of a lock held by someone other than the
/// object's own runners.
pub(super) fn locked_by_other<K: Workload>(
    obj: &K,
    verdict: &crate::leases::LockVerdict,
) -> Option<ConditionValue> {
    let crate::leases::LockVerdict::Foreign {
        who,
        operation,
        created,
    } = verdict
    else {
        return None;
    };
    let ns = obj.namespace().unwrap_or_default();
    let suffix = crate::names::state_suffix(K::KIND, &ns, &obj.name_any());
    let lease = crate::names::state_lock_lease(&suffix);
    Some(crate::leases::locked_condition(
        who, operation, created, &ns, &lease,
    ))
}

/// Whether `captf.io/confirm-no-resources` names the apply whose outcome
/// is unknown (`job`): the operator checked that it created nothing. Any
/// other value is ignored and logged.
fn confirmed_no_resources<K: Workload>(obj: &K, job: &str) -> bool {
    let Some(named) = obj.annotations().get(annotations::CONFIRM_NO_RESOURCES) else {
        return false;
    };
    let name = obj.name_any();
    if named != job {
        tracing::info!(
            name,
            named,
            recorded = job,
            "confirm-no-resources names another Job; ignored"
        );
        return false;
    }
    tracing::info!(
        name,
        job,
        "the operator confirmed that the unknown apply created nothing"
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use captf_api::TerraformMachinePool;

    #[test]
    fn state_readable_holds_an_unknown_apply_only_while_no_state_records_anything() {
        let missing = Err(StateError::NotFound);
        let corrupt = Err(StateError::Corrupt("bad".into()));
        type Read = Result<StateSummary, StateError>;
        let cases: [(&Read, bool, Option<&str>, &str, &str); 6] = [
            (
                &missing,
                false,
                Some("apply-1"),
                "False",
                reasons::APPLY_OUTCOME_UNKNOWN,
            ),
            (
                &missing,
                true,
                Some("apply-1"),
                "False",
                reasons::STATE_LOST,
            ),
            (&missing, false, None, "Unknown", reasons::STATE_NOT_FOUND),
            (&missing, true, None, "False", reasons::STATE_LOST),
            (
                &corrupt,
                false,
                Some("apply-1"),
                "False",
                reasons::STATE_CORRUPT,
            ),
            (&corrupt, true, None, "False", reasons::STATE_CORRUPT),
        ];
        for (read, ever_applied, unconfirmed, status, reason) in cases {
            let c = readable_condition(read, ever_applied, unconfirmed, None);
            assert_eq!(
                (c.status.as_str(), c.reason),
                (status, reason),
                "{read:?} {ever_applied} {unconfirmed:?}"
            );
        }
        let held = readable_condition(&missing, false, Some("apply-1"), None);
        assert!(held.message.contains("apply-1"), "{}", held.message);
        assert!(held.message.contains(annotations::CONFIRM_NO_RESOURCES));
        assert!(!held.message.contains("ignored"), "{}", held.message);
        // A confirmation naming another Job is named once, and the way out
        // stays the message's end; the matching one is not mentioned.
        let other = readable_condition(&missing, false, Some("apply-1"), Some("apply-0"));
        assert_eq!(
            other.message.matches("apply-0").count(),
            1,
            "{}",
            other.message
        );
        assert!(
            other.message.contains(
                "captf.io/confirm-no-resources names \"apply-0\", not this Job, and is ignored."
            ),
            "{}",
            other.message
        );
        assert!(
            other
                .message
                .ends_with(&held.message[held.message.find(" Check").unwrap()..])
        );
        let same = readable_condition(&missing, false, Some("apply-1"), Some("apply-1"));
        assert_eq!(same.message, held.message);
    }

    fn pool(
        annotations: serde_json::Value,
        readable: Option<(&str, &str)>,
    ) -> TerraformMachinePool {
        let conditions: Vec<serde_json::Value> = readable
            .into_iter()
            .map(|(status, reason)| {
                serde_json::json!({"type": "StateReadable", "status": status,
                "reason": reason, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
            "metadata": {"name": "pool-a", "namespace": "ns", "uid": "u", "annotations": annotations},
            "spec": {"source": {"image": "m:1"}},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn a_newly_unreadable_state_is_counted_and_a_lost_one_announced_once() {
        let lost = state_readable(&Err(StateError::NotFound), true);
        let corrupt = state_readable(&Err(StateError::Corrupt("bad".into())), true);
        let read = ConditionValue {
            status: ConditionStatus::True,
            reason: reasons::STATE_READ,
            message: String::new(),
        };
        let event = |e: &Effect| matches!(e, Effect::Event { reason, warning: true, .. } if *reason == events::STATE_LOST);
        let fresh = pool(serde_json::json!({}), None);
        let report = unreadable_report(&fresh, &lost);
        assert_eq!(report[0], Effect::CountStateReadFailed("lost"));
        assert!(report.len() == 2 && event(&report[1]), "{report:?}");
        assert_eq!(
            unreadable_report(&fresh, &corrupt),
            vec![Effect::CountStateReadFailed("corrupt")]
        );
        assert!(unreadable_report(&fresh, &read).is_empty());
        // The same reason as the object already shows: nothing again.
        let shown = pool(serde_json::json!({}), Some(("False", reasons::STATE_LOST)));
        assert!(unreadable_report(&shown, &lost).is_empty());
        assert_eq!(unreadable_report(&shown, &corrupt).len(), 1);
    }

    #[test]
    fn only_a_confirmation_naming_the_unknown_apply_counts() {
        let key = annotations::CONFIRM_NO_RESOURCES;
        let cases = [
            (serde_json::json!({key: "apply-1"}), true),
            (serde_json::json!({key: "apply-0"}), false),
            (serde_json::json!({}), false),
        ];
        for (annotations, want) in cases {
            let obj = pool(annotations.clone(), None);
            assert_eq!(
                confirmed_no_resources(&obj, "apply-1"),
                want,
                "{annotations}"
            );
        }
    }
}
