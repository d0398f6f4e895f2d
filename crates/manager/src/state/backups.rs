//! State backups: a copy of every state chunk each time a new serial is
//! seen, kept as complete sets per object, pruned to a limit, listed in
//! status and restorable by serial. Pure over the listed backup Secrets.

use std::collections::BTreeMap;

/// Most chunks a set may have (as for state).
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupChunk {
    pub name: String,
    pub set: String,
    pub serial: u64,
    pub index: u32,
    pub chunks: u32,
    /// RFC 3339, as written in `captf.io/state-backup-taken-at`.
    pub taken_at: String,
    pub bytes: u64,
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
pub fn backup_due(
    serial: u64,
    last_seen: Option<u64>,
    enabled: bool,
    deleting: bool,
    restoring: bool,
) -> bool {
    enabled && !deleting && !restoring && serial >= 1 && last_seen != Some(serial)
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
        assert!(backup_due(3, Some(2), true, false, false));
        assert!(backup_due(3, None, true, false, false));
        assert!(!backup_due(3, Some(3), true, false, false));
        assert!(!backup_due(0, None, true, false, false));
        assert!(!backup_due(3, Some(2), false, false, false));
        assert!(!backup_due(3, Some(2), true, true, false));
        assert!(!backup_due(3, Some(2), true, false, true));
    }
}
