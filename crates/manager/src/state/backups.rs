//! State backups: a copy of every state chunk each time a new serial is
//! seen, kept as complete sets per object, pruned to a limit, listed in
//! status and restorable by serial. Pure over the listed backup Secrets.

use std::collections::BTreeMap;

use captf_api::names::annotations as ann;

/// Most chunks a set may have (as for state).
/// A backup the pass owes: a state serial the object has not seen yet,
/// with its chunks' payloads (kept for this pass only; `None` when the
/// chunks changed while read).
#[derive(Debug, Clone, PartialEq)]
pub struct BackupDue {
    pub serial: u64,
    pub lineage: String,
    pub resources: u32,
    pub inputs_hash: Option<String>,
    /// The Job that wrote the state, when this pass knows it.
    pub source_job: Option<String>,
    pub payloads: Option<Vec<Vec<u8>>>,
}

pub const MAX_CHUNKS: u32 = 32;
/// Most sets listed in `status.stateBackups`.
pub const MAX_STATUS_ENTRIES: usize = 16;

/// Name of a backup set's first Secret: `captf-state-backup-<suffix>-<serial>`,
/// with `-<digest8>` when another set of that serial holds other content.
pub fn set_name(suffix: &str, serial: u64, digest8: Option<&str>) -> String {
    match digest8 {
        Some(d) => format!("captf-state-backup-{suffix}-{serial}-{d}"),
        None => format!("captf-state-backup-{suffix}-{serial}"),
    }
}

/// Name of chunk `index` of a set (0 is the set's own name).
pub fn chunk_name(set: &str, index: u32) -> String {
    if index == 0 {
        set.to_owned()
    } else {
        format!("{set}-part-{index}")
    }
}

/// One backup Secret as listed, reduced to its annotations.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BackupChunk {
    pub name: String,
    pub set: String,
    pub serial: u64,
    pub index: u32,
    pub chunks: u32,
    /// RFC 3339, as written in `captf.io/state-backup-taken-at`.
    pub taken_at: String,
    pub bytes: u64,
    /// `captf.io/state-backup-digest`: sha256 of the set's payload.
    pub digest: String,
    /// `captf.io/inputs-hash` (chunk 0 only).
    pub inputs_hash: Option<String>,
    /// `captf.io/state-backup-resources`.
    pub resources: u32,
}

/// A backup set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSet {
    pub name: String,
    pub serial: u64,
    pub taken_at: String,
    pub bytes: u64,
    /// Chunk Secret names, in index order.
    pub chunk_names: Vec<String>,
    pub complete: bool,
    pub digest: String,
    /// The inputs hash the backed-up state was applied from, if it had one.
    pub inputs_hash: Option<String>,
    /// Managed resources of the backed-up state.
    pub resources: u32,
}

/// The backup a requested restore pushes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreTarget {
    pub serial: u64,
    pub set: String,
    pub chunk_names: Vec<String>,
    /// The inputs hash the backed-up state was applied from ("" if none).
    pub inputs_hash: String,
    pub resources: u32,
}

impl RestoreTarget {
    pub fn of(set: &BackupSet) -> Self {
        RestoreTarget {
            serial: set.serial,
            set: set.name.clone(),
            chunk_names: set.chunk_names.clone(),
            inputs_hash: set.inputs_hash.clone().unwrap_or_default(),
            resources: set.resources,
        }
    }
}

/// Groups chunks into sets, newest first (by time taken, then serial).
pub fn sets(chunks: &[BackupChunk]) -> Vec<BackupSet> {
    let mut by_set: BTreeMap<&str, Vec<&BackupChunk>> = BTreeMap::new();
    for c in chunks {
        by_set.entry(&c.set).or_default().push(c);
    }
    let mut out: Vec<BackupSet> = by_set
        .into_iter()
        .map(|(name, mut members)| {
            members.sort_by_key(|c| c.index);
            let first = members[0];
            let expected = first.chunks;
            let complete = (1..=MAX_CHUNKS).contains(&expected)
                && first.serial >= 1
                && members.len() == expected as usize
                && members.iter().enumerate().all(|(i, c)| {
                    c.index == i as u32 && c.chunks == expected && c.serial == first.serial
                });
            BackupSet {
                name: name.to_owned(),
                serial: first.serial,
                taken_at: first.taken_at.clone(),
                bytes: members.iter().map(|c| c.bytes).sum(),
                chunk_names: members.iter().map(|c| c.name.clone()).collect(),
                complete,
                digest: first.digest.clone(),
                inputs_hash: first.inputs_hash.clone(),
                resources: first.resources,
            }
        })
        .collect();
    out.sort_by(|a, b| b.taken_at.cmp(&a.taken_at).then(b.serial.cmp(&a.serial)));
    out
}

/// Sets to delete: complete sets beyond `keep` (newest kept first), and
/// every incomplete set but the newest set overall, which may still be
/// being written. The set a pending restore names is never deleted and does
/// not count toward the limit.
pub fn prune(sets: &[BackupSet], keep: usize, restore_target: Option<&str>) -> Vec<String> {
    let mut kept = 0;
    let mut doomed = Vec::new();
    for (i, s) in sets.iter().enumerate() {
        if Some(s.name.as_str()) == restore_target {
            continue;
        }
        if !s.complete {
            if i != 0 {
                doomed.push(s.name.clone());
            }
            continue;
        }
        kept += 1;
        if kept > keep {
            doomed.push(s.name.clone());
        }
    }
    doomed
}

/// Why a restore request cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreTargetError {
    #[error("captf.io/restore-state must be a state serial")]
    NotASerial,
    #[error("no complete backup of serial {0} exists")]
    NotFound(u64),
}

/// What a `captf.io/restore-state` value asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreRequest<'a> {
    /// Restore this set.
    Restore(&'a BackupSet),
    /// That serial was restored already; nothing to do.
    AlreadyRestored,
}

/// Resolves a restore request against the complete sets (the newest set of
/// that serial wins).
pub fn restore_target<'a>(
    value: &str,
    sets: &'a [BackupSet],
    last_restored: Option<u64>,
) -> Result<RestoreRequest<'a>, RestoreTargetError> {
    let serial: u64 = value
        .trim()
        .parse()
        .map_err(|_| RestoreTargetError::NotASerial)?;
    if last_restored == Some(serial) {
        return Ok(RestoreRequest::AlreadyRestored);
    }
    sets.iter()
        .find(|s| s.complete && s.serial == serial)
        .map(RestoreRequest::Restore)
        .ok_or(RestoreTargetError::NotFound(serial))
}

/// Whether a state read at `serial` is backed up now.
pub fn backup_due(serial: u64, last_seen: Option<u64>, enabled: bool, deleting: bool) -> bool {
    enabled && !deleting && serial >= 1 && last_seen != Some(serial)
}

/// The state a backup copies, as read this pass.
#[derive(Debug, Clone)]
pub struct StateCopy<'a> {
    pub suffix: &'a str,
    pub serial: u64,
    pub lineage: &'a str,
    pub resources: u32,
    pub inputs_hash: Option<&'a str>,
    /// The Job that wrote this serial, when known.
    pub source_job: Option<&'a str>,
    /// RFC 3339.
    pub taken_at: &'a str,
    /// Each state chunk's compressed payload, in chunk order.
    pub payloads: &'a [Vec<u8>],
}

/// One Secret of a backup set to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSecret {
    pub name: String,
    pub annotations: BTreeMap<String, String>,
    pub payload: Vec<u8>,
}

/// What taking a backup of a state comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackupPlan {
    /// Write these Secrets (creating one that exists already is done: it is
    /// an interrupted write of the same content being finished).
    Write {
        set: String,
        secrets: Vec<BackupSecret>,
    },
    /// A complete set of this serial and content exists.
    AlreadyTaken { set: String },
    /// Both names this serial may use hold other content.
    Conflict { set: String },
    /// The newest complete set holds this state under an older serial (the
    /// runtime renumbered it without changing it): nothing to copy.
    Unchanged { set: String },
}

/// sha256 over the concatenated payloads, lower-case hex.
pub fn digest(payloads: &[Vec<u8>]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in payloads {
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The newest complete set of those listed (newest first), which a new
/// serial is compared with.
pub fn newest_complete(listed: &[BackupSet]) -> Option<&BackupSet> {
    listed.iter().find(|s| s.complete)
}

/// Plans the backup of `copy` next to the sets listed: the plain name, or
/// the digest-suffixed one when the plain name holds other content of the
/// same serial (a restore pushed an older serial back). `newest` is the
/// payloads of [`newest_complete`], when they were read: a state that only
/// renumbers it (same lineage, content and inputs hash, an older serial) is
/// not copied again.
pub fn plan_backup(
    copy: &StateCopy<'_>,
    listed: &[BackupSet],
    newest: Option<&[Vec<u8>]>,
) -> BackupPlan {
    let digest = digest(copy.payloads);
    if let Some(same) = listed
        .iter()
        .find(|s| s.complete && s.serial == copy.serial && s.digest == digest)
    {
        return BackupPlan::AlreadyTaken {
            set: same.name.clone(),
        };
    }
    if let (Some(set), Some(payloads)) = (newest_complete(listed), newest)
        && set.serial < copy.serial
        && set.inputs_hash.as_deref() == copy.inputs_hash
        && captf_contract::state_content::same_state(payloads, copy.payloads)
    {
        return BackupPlan::Unchanged {
            set: set.name.clone(),
        };
    }
    let plain = set_name(copy.suffix, copy.serial, None);
    let suffixed = set_name(copy.suffix, copy.serial, Some(&digest[..8]));
    let free = |name: &str| {
        listed
            .iter()
            .find(|s| s.name == name)
            .is_none_or(|s| s.digest == digest)
    };
    let set = if free(&plain) {
        plain
    } else if free(&suffixed) {
        suffixed
    } else {
        return BackupPlan::Conflict { set: suffixed };
    };
    let chunks = copy.payloads.len() as u32;
    let secrets = copy
        .payloads
        .iter()
        .enumerate()
        .map(|(i, payload)| {
            let mut a = BTreeMap::from([
                (ann::STATE_BACKUP_SERIAL, copy.serial.to_string()),
                (ann::STATE_BACKUP_LINEAGE, copy.lineage.to_owned()),
                (ann::STATE_BACKUP_TAKEN_AT, copy.taken_at.to_owned()),
                (ann::STATE_BACKUP_DIGEST, digest.clone()),
                (ann::STATE_BACKUP_RESOURCES, copy.resources.to_string()),
                (ann::STATE_BACKUP_SET, set.clone()),
                (ann::STATE_BACKUP_CHUNK, i.to_string()),
                (ann::STATE_BACKUP_CHUNKS, chunks.to_string()),
            ]);
            if let Some(job) = copy.source_job {
                a.insert(ann::STATE_BACKUP_SOURCE_JOB, job.to_owned());
            }
            if let (0, Some(h)) = (i, copy.inputs_hash) {
                a.insert(ann::INPUTS_HASH, h.to_owned());
            }
            BackupSecret {
                name: chunk_name(&set, i as u32),
                annotations: a.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
                payload: payload.clone(),
            }
        })
        .collect();
    BackupPlan::Write { set, secrets }
}

/// A backup Secret's annotations read back into a chunk (`None`: not a
/// chunk this implementation can use).
pub fn chunk_of(
    name: &str,
    annotations: &BTreeMap<String, String>,
    bytes: u64,
) -> Option<BackupChunk> {
    let get = |k: &str| annotations.get(k).map(String::as_str);
    Some(BackupChunk {
        name: name.to_owned(),
        set: get(ann::STATE_BACKUP_SET)?.to_owned(),
        serial: get(ann::STATE_BACKUP_SERIAL)?.parse().ok()?,
        index: get(ann::STATE_BACKUP_CHUNK)?.parse().ok()?,
        chunks: get(ann::STATE_BACKUP_CHUNKS)?.parse().ok()?,
        taken_at: get(ann::STATE_BACKUP_TAKEN_AT)
            .unwrap_or_default()
            .to_owned(),
        bytes,
        digest: get(ann::STATE_BACKUP_DIGEST).unwrap_or_default().to_owned(),
        inputs_hash: get(ann::INPUTS_HASH).map(str::to_owned),
        resources: get(ann::STATE_BACKUP_RESOURCES)
            .and_then(|r| r.parse().ok())
            .unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(set: &str, serial: u64, index: u32, chunks: u32, at: &str) -> BackupChunk {
        BackupChunk {
            name: chunk_name(set, index),
            set: set.into(),
            serial,
            index,
            chunks,
            taken_at: at.into(),
            bytes: 100,
            ..Default::default()
        }
    }

    #[test]
    fn names() {
        assert_eq!(set_name("abc-c", 7, None), "captf-state-backup-abc-c-7");
        assert_eq!(
            set_name("abc-c", 7, Some("0badf00d")),
            "captf-state-backup-abc-c-7-0badf00d"
        );
        assert_eq!(chunk_name("s", 0), "s");
        assert_eq!(chunk_name("s", 2), "s-part-2");
    }

    #[test]
    fn sets_are_grouped_checked_and_ordered() {
        let chunks = vec![
            chunk("b5", 5, 1, 2, "2026-11-29T10:05:00Z"),
            chunk("b5", 5, 0, 2, "2026-11-29T10:05:00Z"),
            chunk("b6", 6, 0, 3, "2026-11-29T10:06:00Z"), // missing two chunks
            chunk("b4", 4, 0, 1, "2026-11-29T10:04:00Z"),
            chunk("b0", 0, 0, 1, "2026-11-29T10:00:00Z"), // serial 0 is no backup
        ];
        let s = sets(&chunks);
        let view: Vec<(&str, bool, u64)> = s
            .iter()
            .map(|s| (s.name.as_str(), s.complete, s.bytes))
            .collect();
        assert_eq!(
            view,
            [
                ("b6", false, 100),
                ("b5", true, 200),
                ("b4", true, 100),
                ("b0", false, 100)
            ]
        );
        assert_eq!(s[1].chunk_names, ["b5", "b5-part-1"]);
    }

    #[test]
    fn pruning_keeps_the_newest_complete_sets_and_a_set_in_progress() {
        let mut chunks = vec![chunk("inflight", 9, 0, 2, "2026-11-29T10:09:00Z")];
        for (i, serial) in (1..=8).enumerate() {
            chunks.push(chunk(
                &format!("s{serial}"),
                serial,
                0,
                1,
                &format!("2026-11-29T10:0{i}:00Z"),
            ));
        }
        chunks.push(chunk("stale", 3, 0, 2, "2026-11-29T09:00:00Z"));
        let s = sets(&chunks);
        let mut doomed = prune(&s, 5, None);
        doomed.sort();
        assert_eq!(doomed, ["s1", "s2", "s3", "stale"]);
        // A pending restore keeps its set and does not use up the limit.
        let mut doomed = prune(&s, 5, Some("s2"));
        doomed.sort();
        assert_eq!(doomed, ["s1", "s3", "stale"]);
    }

    #[test]
    fn restore_requests() {
        let s = sets(&[
            chunk("s4", 4, 0, 1, "2026-11-29T10:04:00Z"),
            chunk("s4-d", 4, 0, 1, "2026-11-29T10:07:00Z"),
            chunk("s5", 5, 0, 2, "2026-11-29T10:05:00Z"),
        ]);
        assert_eq!(
            restore_target("4", &s, None).map(|r| match r {
                RestoreRequest::Restore(set) => set.name.clone(),
                RestoreRequest::AlreadyRestored => "skip".into(),
            }),
            Ok("s4-d".into())
        );
        assert_eq!(
            restore_target("4", &s, Some(4)),
            Ok(RestoreRequest::AlreadyRestored)
        );
        assert_eq!(
            restore_target("5", &s, None),
            Err(RestoreTargetError::NotFound(5))
        );
        assert_eq!(
            restore_target("latest", &s, None),
            Err(RestoreTargetError::NotASerial)
        );
    }

    #[test]
    fn backups_are_taken_for_new_serials_only() {
        assert!(backup_due(3, Some(2), true, false));
        assert!(backup_due(3, None, true, false));
        assert!(!backup_due(3, Some(3), true, false));
        assert!(!backup_due(0, None, true, false));
        assert!(!backup_due(3, Some(2), false, false));
        assert!(!backup_due(3, Some(2), true, true));
    }

    fn copy<'a>(serial: u64, payloads: &'a [Vec<u8>]) -> StateCopy<'a> {
        StateCopy {
            suffix: "abc-c",
            serial,
            lineage: "l-1",
            resources: 3,
            inputs_hash: Some("h2:aa"),
            source_job: Some("captf-c-x-apply-1"),
            taken_at: "2026-12-02T01:00:00Z",
            payloads,
        }
    }

    /// The set a plan writes, as listed once written.
    fn written(plan: &BackupPlan) -> Vec<BackupSet> {
        let BackupPlan::Write { secrets, .. } = plan else {
            panic!("{plan:?}")
        };
        let chunks: Vec<BackupChunk> = secrets
            .iter()
            .map(|s| chunk_of(&s.name, &s.annotations, s.payload.len() as u64).unwrap())
            .collect();
        sets(&chunks)
    }

    fn gzip(text: &str) -> Vec<Vec<u8>> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        vec![gz.finish().unwrap()]
    }

    #[test]
    fn a_new_serial_that_only_renumbers_the_newest_backup_is_not_copied() {
        let doc = |serial: u64, id: &str, checks: &str| {
            gzip(&format!(
                r#"{{"version":4,"serial":{serial},"lineage":"l-1","resources":[{{"id":"{id}"}}],"check_results":[{checks}]}}"#
            ))
        };
        let (a, b) = (r#"{"config_addr":"var.a"}"#, r#"{"config_addr":"var.b"}"#);
        let backed_up = doc(7, "x", &format!("{a},{b}"));
        let listed = written(&plan_backup(&copy(7, &backed_up), &[], None));
        let renumbered = doc(8, "x", &format!("{b},{a}"));
        assert_eq!(
            plan_backup(&copy(8, &renumbered), &listed, Some(&backed_up)),
            BackupPlan::Unchanged {
                set: "captf-state-backup-abc-c-7".into()
            }
        );
        // Copied: a changed state, another inputs hash, the newest set's
        // payloads not read, a serial not newer than the set's.
        let changed = doc(8, "y", a);
        assert!(matches!(
            plan_backup(&copy(8, &changed), &listed, Some(&backed_up)),
            BackupPlan::Write { .. }
        ));
        let mut rehashed = copy(8, &renumbered);
        rehashed.inputs_hash = Some("h2:bb");
        assert!(matches!(
            plan_backup(&rehashed, &listed, Some(&backed_up)),
            BackupPlan::Write { .. }
        ));
        assert!(matches!(
            plan_backup(&copy(8, &renumbered), &listed, None),
            BackupPlan::Write { .. }
        ));
        let older = doc(6, "x", a);
        assert!(matches!(
            plan_backup(&copy(6, &older), &listed, Some(&backed_up)),
            BackupPlan::Write { .. }
        ));
    }

    #[test]
    fn a_backup_is_a_labelled_copy_of_every_chunk_and_reads_back_complete() {
        let payloads = vec![b"first".to_vec(), b"second".to_vec()];
        let plan = plan_backup(&copy(7, &payloads), &[], None);
        let BackupPlan::Write { set, secrets } = &plan else {
            panic!("{plan:?}")
        };
        assert_eq!(set, "captf-state-backup-abc-c-7");
        assert_eq!(secrets[1].name, "captf-state-backup-abc-c-7-part-1");
        assert_eq!(secrets[1].payload, b"second");
        assert_eq!(secrets[0].annotations[ann::INPUTS_HASH], "h2:aa");
        assert!(!secrets[1].annotations.contains_key(ann::INPUTS_HASH));
        assert_eq!(
            secrets[0].annotations[ann::STATE_BACKUP_SOURCE_JOB],
            "captf-c-x-apply-1"
        );
        let listed = written(&plan);
        assert_eq!(listed.len(), 1);
        let s = &listed[0];
        assert!(s.complete);
        assert_eq!((s.serial, s.bytes, s.resources), (7, 11, 3));
        assert_eq!(s.inputs_hash.as_deref(), Some("h2:aa"));
        assert_eq!(s.digest, digest(&payloads));
    }

    #[test]
    fn the_same_serial_and_content_is_taken_once() {
        let payloads = vec![b"state".to_vec()];
        let listed = written(&plan_backup(&copy(7, &payloads), &[], None));
        assert_eq!(
            plan_backup(&copy(7, &payloads), &listed, None),
            BackupPlan::AlreadyTaken {
                set: "captf-state-backup-abc-c-7".into()
            }
        );
    }

    #[test]
    fn other_content_of_a_backed_up_serial_gets_the_digest_suffix_then_conflicts() {
        let old = vec![b"before the restore".to_vec()];
        let new = vec![b"pushed back by a restore".to_vec()];
        let mut listed = written(&plan_backup(&copy(7, &old), &[], None));
        let plan = plan_backup(&copy(7, &new), &listed, None);
        let suffixed = format!("captf-state-backup-abc-c-7-{}", &digest(&new)[..8]);
        assert!(matches!(&plan, BackupPlan::Write { set, .. } if *set == suffixed));
        // A content whose digest-suffixed name holds other content too (a
        // collision of the first 8 digits) is refused, never overwritten.
        let third = vec![b"third".to_vec()];
        let mut squatter = written(&plan_backup(&copy(7, &new), &[], None));
        squatter[0].name = format!("captf-state-backup-abc-c-7-{}", &digest(&third)[..8]);
        listed.extend(squatter);
        assert!(matches!(
            plan_backup(&copy(7, &third), &listed, None),
            BackupPlan::Conflict { .. }
        ));
    }

    #[test]
    fn an_interrupted_write_of_the_same_content_is_finished() {
        let payloads = vec![b"a".to_vec(), b"b".to_vec()];
        let mut listed = written(&plan_backup(&copy(7, &payloads), &[], None));
        listed[0].complete = false;
        listed[0].chunk_names.pop();
        assert!(matches!(
            plan_backup(&copy(7, &payloads), &listed, None),
            BackupPlan::Write { .. }
        ));
    }

    #[test]
    fn a_secret_without_backup_annotations_is_no_chunk() {
        assert_eq!(chunk_of("x", &BTreeMap::new(), 1), None);
    }
}
