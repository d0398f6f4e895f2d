//! State backups and restore requests in a pass: a backup of each new state
//! serial (pruned to `--state-backups`, listed in `status.stateBackups`),
//! and the backup a `captf.io/restore-state` annotation names. The choices
//! are in `state/backups.rs`; this is their shell.
//!
//! Cost: a pass whose state serial was seen already and that carries no
//! restore request makes no request here. A new serial costs one LIST of
//! the object's backups; when it holds a new state (not the newest backup's
//! renumbered, as a refresh that found nothing writes it), one create per
//! chunk and one delete per pruned chunk. A restore request costs one GET
//! of the object and one LIST until it is consumed.

use captf_api::names::{annotations, conditions, events, reasons};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use super::effect::Effect;
use super::open_pass::{Closing, OpenPass};
use super::pass;
use super::status::Draft;
use super::workload::Workload;
use super::{Context, Error};
use crate::engine::decide::Op;
use crate::engine::history::Outcome;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::io::backups::{delete_chunks, list_chunks, write_set};
use crate::names::{state_labels, state_suffix};
use crate::state::backups::{
    self as plan, BackupChunk, BackupDue, BackupPlan, BackupSecret, BackupSet, MAX_STATUS_ENTRIES,
    RestoreRequest, RestoreTarget, StateCopy,
};
use crate::state::reader::{StateError, StateSummary};

/// How soon a pass tries again a backup that failed on an API error.
pub const BACKUP_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

/// `status.stateBackups`: the complete sets, newest first.
fn status_entries(sets: &[BackupSet]) -> serde_json::Value {
    let entries: Vec<serde_json::Value> = sets
        .iter()
        .filter(|s| s.complete && s.bytes >= 1)
        .take(MAX_STATUS_ENTRIES)
        .map(|s| serde_json::json!({"serial": s.serial, "takenAt": s.taken_at, "bytes": s.bytes}))
        .collect();
    if entries.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::Value::Array(entries)
    }
}

/// The Job that wrote the state last, if this pass knows it.
fn source_job(p: &OpenPass) -> Option<String> {
    let ops = [Op::Apply, Op::Destroy, Op::Refresh, Op::Drift, Op::Restore];
    p.loaded
        .newest_finished(&ops)
        .filter(|o| o.record.outcome == Outcome::Succeeded)
        .map(|o| o.record.name.clone())
}

/// How a backup went, for the status.
#[derive(Debug, Clone, PartialEq)]
pub enum BackupOutcome {
    /// The serial is seen (backed up, or skipped for a reason a retry
    /// would not change); `state_backups` is `status.stateBackups` after
    /// a write and its pruning.
    Done {
        serial: u64,
        state_backups: Option<serde_json::Value>,
    },
    /// A write failed: the serial stays unseen and a pass tries again soon.
    Failed,
}

/// What a state read owes: a backup, or (a serial that needs none) the
/// serial to record as seen in `status.observedStateSerial` at once.
#[derive(Debug, Default)]
pub struct OwedBackup {
    pub due: Option<BackupDue>,
    pub seen_serial: Option<u64>,
}

/// The backup the state read owes, if any.
pub fn owed_backup<K: Workload>(
    obj: &K,
    p: &OpenPass,
    backups_kept: bool,
    read: &Result<StateSummary, StateError>,
    secrets: &[Secret],
) -> OwedBackup {
    let Ok(state) = read.as_ref() else {
        return OwedBackup::default();
    };
    // While a Job runs the serial it writes is not adopted yet (no inputs
    // hash on it): it is backed up once the Job is bookkept.
    if state.serial < 1 || p.active.is_some() {
        return OwedBackup::default();
    }
    let seen = obj
        .workspace_status()
        .and_then(|s| s.observed_state_serial)
        .map(|s| s.max(0) as u64);
    // A restore's push writes the next serial (the backend counts every
    // write): a version of its own, backed up like any other.
    if !plan::backup_due(state.serial, seen, backups_kept, p.deleting()) {
        let unseen = seen != Some(state.serial) && !p.deleting();
        return OwedBackup {
            due: None,
            seen_serial: unseen.then_some(state.serial),
        };
    }
    let suffix = state_suffix(
        K::KIND,
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
    );
    let due = BackupDue {
        serial: state.serial,
        lineage: state.lineage.clone(),
        resources: state.managed_resources as u32,
        inputs_hash: state.inputs_hash.clone(),
        source_job: source_job(p),
        payloads: payloads(&suffix, secrets),
    };
    OwedBackup {
        due: Some(due),
        seen_serial: None,
    }
}

/// Takes the backup `due` owes and prunes. A write that fails is logged
/// and reported as [`BackupOutcome::Failed`]: the pass itself goes on.
pub async fn back_up<K: Workload>(ctx: &Context, obj: &K, due: &BackupDue) -> BackupOutcome {
    match take(ctx, obj, due).await {
        Ok(state_backups) => BackupOutcome::Done {
            serial: due.serial,
            state_backups,
        },
        Err(e) => {
            tracing::warn!(name = obj.name_any(), serial = due.serial, error = %e,
                "could not back up the state; the next pass tries again");
            BackupOutcome::Failed
        }
    }
}

/// What a backup's outcome puts in the status: the serial seen and the
/// backups listed, or a retry soon.
pub fn record_backup(c: &mut Closing, outcome: Option<&BackupOutcome>) {
    match outcome {
        None => {}
        Some(BackupOutcome::Done {
            serial,
            state_backups,
        }) => {
            if let Some(listed) = state_backups {
                c.status.field("stateBackups", listed.clone());
            }
            c.status.field("observedStateSerial", *serial);
        }
        Some(BackupOutcome::Failed) => c.retry_after = Some(BACKUP_RETRY),
    }
}

/// The state chunks' payloads, in chunk order (`None` when the base has
/// none): the chunks the state is read from (`reader::state_chunks`), up to
/// the first without a payload, as the reader reads them.
fn payloads(suffix: &str, secrets: &[Secret]) -> Option<Vec<Vec<u8>>> {
    let base = crate::names::state_secret(suffix);
    let chunks = crate::state::reader::state_chunks(&base, secrets, |s| {
        s.metadata.name.as_deref().unwrap_or_default()
    });
    let payload = |s: &Secret| Some(s.data.as_ref()?.get("tfstate")?.0.clone());
    let (first, rest) = chunks.split_first()?;
    let mut out = vec![payload(first)?];
    out.extend(rest.iter().map_while(|s| payload(s)));
    Some(out)
}

/// Writes the backup set of `due` unless it is there already, then
/// prunes; `status.stateBackups` after the pruning, `None` when nothing
/// was written or kept (skipped).
async fn take<K: Workload>(
    ctx: &Context,
    obj: &K,
    due: &BackupDue,
) -> Result<Option<serde_json::Value>, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let suffix = state_suffix(K::KIND, &ns, &name);
    let kind = K::KIND.kind();
    let Some(payloads) = &due.payloads else {
        ctx.metrics.state_backups(kind, "skipped", 1);
        tracing::info!(name, "state chunks changed while read; no backup this pass");
        return Ok(None);
    };
    let (chunks, chunk_payloads) = list_chunks(&ctx.client, &ns, &suffix).await?;
    let listed = plan::sets(&chunks);
    let newest = newest_payloads(&listed, chunk_payloads);
    let taken_at = taken_at_now();
    let copy = StateCopy {
        suffix: &suffix,
        serial: due.serial,
        lineage: &due.lineage,
        resources: due.resources,
        inputs_hash: due.inputs_hash.as_deref(),
        source_job: due.source_job.as_deref(),
        taken_at: &taken_at,
        payloads,
    };
    let (set, written) = match plan::plan_backup(&copy, &listed, newest.as_deref()) {
        skip @ (BackupPlan::Unchanged { .. } | BackupPlan::Conflict { .. }) => {
            not_taken(ctx, kind, &name, due.serial, &skip);
            return Ok(None);
        }
        BackupPlan::AlreadyTaken { set } => (set, Vec::new()),
        BackupPlan::Write { set, secrets } => {
            let cluster = crate::adapters::cluster_name_label(obj.meta()).unwrap_or_default();
            let labels = state_labels(K::KIND, &name, cluster);
            write_set(
                &ctx.client,
                &ns,
                &suffix,
                &secrets,
                &labels,
                &obj.owner_reference(),
            )
            .await?;
            (set, secrets)
        }
    };
    let (doomed, listed) = prune_backups(ctx, obj, chunks, &written).await?;
    if !written.is_empty() {
        ctx.metrics.state_backups(kind, "taken", 1);
        let bytes: usize = payloads.iter().map(Vec::len).sum();
        let note = format!(
            "state serial {} backed up as {set} ({bytes} bytes)",
            due.serial
        );
        pass::event(ctx, obj, false, events::STATE_BACKED_UP, "Backup", note).await;
    }
    if !doomed.is_empty() {
        ctx.metrics
            .state_backups(kind, "pruned", doomed.len() as u64);
        tracing::info!(name, pruned = ?doomed, "pruned state backups");
    }
    Ok(Some(listed))
}

/// Counts and logs a backup not taken: the serial only renumbers the
/// newest backup, or both names it may use hold other content.
fn not_taken(ctx: &Context, kind: &str, name: &str, serial: u64, plan: &BackupPlan) {
    ctx.metrics.state_backups(kind, "skipped", 1);
    match plan {
        BackupPlan::Unchanged { set } => tracing::info!(
            name,
            serial,
            set,
            "the new serial holds the state of the newest backup; none taken"
        ),
        BackupPlan::Conflict { set } => tracing::warn!(
            name,
            serial,
            set,
            "a backup Secret of this serial holds other content; none taken"
        ),
        _ => {}
    }
}

/// The payloads of the newest complete set, in chunk order, from those
/// listed (`None` when a chunk came without one).
fn newest_payloads(
    listed: &[BackupSet],
    mut payloads: std::collections::BTreeMap<String, Vec<u8>>,
) -> Option<Vec<Vec<u8>>> {
    let set = plan::newest_complete(listed)?;
    set.chunk_names.iter().map(|n| payloads.remove(n)).collect()
}

/// Now in whole seconds, RFC 3339: sets are ordered by this text.
fn taken_at_now() -> String {
    let now = super::status::time(std::time::SystemTime::now()).0;
    k8s_openapi::jiff::Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}

/// The backups after this pass's write, pruned to the configured count
/// (sparing the set a pending restore names). Returns the sets pruned and
/// `status.stateBackups`, which lists those kept.
async fn prune_backups<K: Workload>(
    ctx: &Context,
    obj: &K,
    mut chunks: Vec<BackupChunk>,
    written: &[BackupSecret],
) -> Result<(Vec<String>, serde_json::Value), Error> {
    let ns = obj.namespace().unwrap_or_default();
    for s in written {
        chunks.retain(|c| c.name != s.name);
        chunks.extend(plan::chunk_of(
            &s.name,
            &s.annotations,
            s.payload.len() as u64,
        ));
    }
    let sets = plan::sets(&chunks);
    let target = requested_set(obj, &sets);
    let doomed = plan::prune(&sets, ctx.config.state_backups as usize, target.as_deref());
    let doomed_chunks: Vec<String> = sets
        .iter()
        .filter(|s| doomed.contains(&s.name))
        .flat_map(|s| s.chunk_names.clone())
        .collect();
    delete_chunks(&ctx.client, &ns, &doomed_chunks).await?;
    let kept: Vec<BackupSet> = sets
        .into_iter()
        .filter(|s| !doomed.contains(&s.name))
        .collect();
    Ok((doomed, status_entries(&kept)))
}

/// The set a pending restore names (spared by pruning).
fn requested_set<K: Workload>(obj: &K, sets: &[BackupSet]) -> Option<String> {
    let value = obj.annotations().get(annotations::RESTORE_STATE)?;
    match plan::restore_target(value, sets, None) {
        Ok(RestoreRequest::Restore(s)) => Some(s.name.clone()),
        _ => None,
    }
}

/// The serial of the last consumed restore: this pass's bookkeeping first,
/// then the object as read live.
fn last_restored<K: Workload>(draft: &Draft, live: &K) -> Option<u64> {
    draft.stamps().last_restored_serial.or_else(|| {
        live.workspace_status()
            .and_then(|s| s.last_restored_serial)
            .map(|s| s.max(0) as u64)
    })
}

/// What a restore request asks for: the backup to restore, or (naming no
/// complete backup) its condition and writes (`plan_restore_not_found`).
#[derive(Debug, Default)]
pub struct RequestedRestore {
    pub target: Option<RestoreTarget>,
    pub not_found: Option<ConditionValue>,
    pub writes: Vec<Effect>,
}

/// The backup a `captf.io/restore-state` annotation asks to restore, read
/// live (a stale cache must not run a consumed restore again); a request
/// naming no complete backup starts nothing. `opened_status`: the status
/// as the opening left it (bookkeeping may have recorded a restore).
pub async fn requested_restore<K: Workload>(
    ctx: &Context,
    obj: &K,
    opened_status: &Draft,
) -> Result<RequestedRestore, Error> {
    let none = || Ok(RequestedRestore::default());
    let Some(cached) = obj.annotations().get(annotations::RESTORE_STATE) else {
        return none();
    };
    // A request consumed already (a failed restore keeps its annotation)
    // costs nothing more: the cache can only lag behind that, never lead.
    if cached
        .trim()
        .parse::<u64>()
        .ok()
        .is_some_and(|s| last_restored(opened_status, obj) == Some(s))
    {
        return none();
    }
    let ns = obj.namespace().unwrap_or_default();
    let api: kube::Api<K> = kube::Api::namespaced(ctx.client.clone(), &ns);
    let Some(live) = api.get_opt(&obj.name_any()).await? else {
        return none();
    };
    let Some(value) = live.annotations().get(annotations::RESTORE_STATE).cloned() else {
        return none();
    };
    let suffix = state_suffix(K::KIND, &ns, &obj.name_any());
    let sets = plan::sets(&list_chunks(&ctx.client, &ns, &suffix).await?.0);
    match plan::restore_target(&value, &sets, last_restored(opened_status, &live)) {
        Ok(RestoreRequest::Restore(set)) => Ok(RequestedRestore {
            target: Some(RestoreTarget::of(set)),
            ..RequestedRestore::default()
        }),
        Ok(RestoreRequest::AlreadyRestored) => none(),
        Err(e) => {
            let before = obj.condition(conditions::RESTORE_JOB_SUCCEEDED);
            let reported = before.map(|c| (c.reason.as_str(), c.message.as_str()));
            let (v, writes) = plan_restore_not_found(&value, &e.to_string(), reported);
            Ok(RequestedRestore {
                target: None,
                not_found: Some(v),
                writes,
            })
        }
    }
}

/// `RestoreJobSucceeded=False/RestoreBackupNotFound` for a request `value`
/// that names no complete backup (`why`), and, when the condition did not
/// say so already (`reported`: its reason and message), the count and the
/// warning.
pub fn plan_restore_not_found(
    value: &str,
    why: &str,
    reported: Option<(&str, &str)>,
) -> (ConditionValue, Vec<Effect>) {
    let v = ConditionValue {
        status: ConditionStatus::False,
        reason: reasons::RESTORE_BACKUP_NOT_FOUND,
        message: format!("{}={value:?}: {why}", annotations::RESTORE_STATE),
    };
    let again = reported == Some((v.reason, v.message.as_str()));
    let writes = if again {
        Vec::new()
    } else {
        vec![
            Effect::CountRestore("not_found"),
            Effect::Event {
                warning: true,
                reason: events::STATE_RESTORE_FAILED,
                action: "Restore",
                note: v.message.clone(),
            },
        ]
    };
    (v, writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_naming_no_backup_is_reported_once_per_value() {
        let (v, first) = plan_restore_not_found("7", "no complete backup of serial 7", None);
        assert_eq!(v.status, ConditionStatus::False);
        assert_eq!(v.reason, reasons::RESTORE_BACKUP_NOT_FOUND);
        assert_eq!(
            v.message,
            format!(
                "{}=\"7\": no complete backup of serial 7",
                annotations::RESTORE_STATE
            )
        );
        assert!(matches!(
            &first[..],
            [Effect::CountRestore("not_found"), Effect::Event { warning: true, reason, .. }]
                if *reason == events::STATE_RESTORE_FAILED
        ));
        let same = Some((v.reason, v.message.as_str()));
        assert!(
            plan_restore_not_found("7", "no complete backup of serial 7", same)
                .1
                .is_empty()
        );
        let other_value = plan_restore_not_found("8", "no complete backup of serial 8", same);
        assert_eq!(other_value.1.len(), 2, "a new value is news again");
    }
}
