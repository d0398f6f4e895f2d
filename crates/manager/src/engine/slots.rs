//! Job slots: whether a Job may start under the manager's and the
//! cluster's limits on running Jobs, counting the objects that have waited
//! longer for the same slots so that no waiting object starves.

use crate::engine::decide::Op;

/// Which limit a start waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotScope {
    /// `--max-active-jobs`, across the manager.
    Manager,
    /// `--cluster-max-active-jobs` or the cluster's `spec.maxActiveJobs`: its
    /// own Jobs and its machines' and pools'.
    Cluster,
}

/// One limit as a start sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotUse {
    /// Unfinished Jobs counted against the limit.
    pub running: usize,
    /// 0: no cap.
    pub limit: u32,
    /// Objects that began waiting for this limit before this one and still
    /// wait: the free slots are theirs first.
    pub ahead: usize,
}

/// Drift checks and refreshes wait behind every other op.
pub fn is_background(op: Op) -> bool {
    matches!(op, Op::Refresh | Op::Drift)
}

/// The verdict on a start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    Free,
    Full {
        scope: SlotScope,
        running: usize,
        limit: u32,
    },
}

/// Whether `used` leaves room under `limit`. Background operations (drift,
/// refresh) start only below 80% of it, so applies, destroys, restores and
/// plans always find room first.
fn room(used: usize, limit: u32, background: bool) -> bool {
    if limit == 0 {
        return true;
    }
    let limit = limit as usize;
    if background {
        used * 5 < limit * 4
    } else {
        used < limit
    }
}

/// Decides a start: the manager's limit first, then the cluster's.
pub fn admit(background: bool, manager: SlotUse, cluster: SlotUse) -> Slot {
    for (scope, s) in [(SlotScope::Manager, manager), (SlotScope::Cluster, cluster)] {
        if !room(s.running + s.ahead, s.limit, background) {
            return Slot::Full {
                scope,
                running: s.running,
                limit: s.limit,
            };
        }
    }
    Slot::Free
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(running: usize, limit: u32, ahead: usize) -> SlotUse {
        SlotUse {
            running,
            limit,
            ahead,
        }
    }

    #[test]
    fn a_start_fits_under_both_limits_with_background_ops_below_80_percent() {
        let none = s(0, 0, 0);
        let full = |scope, running, limit| Slot::Full {
            scope,
            running,
            limit,
        };
        let cases = [
            // (background, manager, cluster, verdict)
            (false, s(199, 200, 0), s(0, 20, 0), Slot::Free),
            (
                false,
                s(200, 200, 0),
                s(0, 20, 0),
                full(SlotScope::Manager, 200, 200),
            ),
            (false, s(0, 200, 0), s(19, 20, 0), Slot::Free),
            (
                false,
                s(0, 200, 0),
                s(20, 20, 0),
                full(SlotScope::Cluster, 20, 20),
            ),
            // 80% of 20 is 16: a refresh waits at 16, an apply does not.
            (true, s(0, 200, 0), s(15, 20, 0), Slot::Free),
            (
                true,
                s(0, 200, 0),
                s(16, 20, 0),
                full(SlotScope::Cluster, 16, 20),
            ),
            (false, s(0, 200, 0), s(16, 20, 0), Slot::Free),
            (
                true,
                s(160, 200, 0),
                s(0, 20, 0),
                full(SlotScope::Manager, 160, 200),
            ),
            // With a limit of 1 a background op runs only alone.
            (true, s(0, 0, 0), s(0, 1, 0), Slot::Free),
            (true, s(0, 0, 0), s(1, 1, 0), full(SlotScope::Cluster, 1, 1)),
            // 0 is no cap.
            (false, s(10_000, 0, 0), none, Slot::Free),
            // Those who waited longer take the free slots first.
            (false, s(0, 0, 0), s(4, 5, 0), Slot::Free),
            (
                false,
                s(0, 0, 0),
                s(4, 5, 1),
                full(SlotScope::Cluster, 4, 5),
            ),
            (false, s(3, 5, 1), none, Slot::Free),
            (false, s(3, 5, 2), none, full(SlotScope::Manager, 3, 5)),
        ];
        for (background, manager, cluster, want) in cases {
            assert_eq!(
                admit(background, manager, cluster),
                want,
                "background={background} manager={manager:?} cluster={cluster:?}"
            );
        }
    }
}
