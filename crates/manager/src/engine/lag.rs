//! Cache lag: the Job cache can trail the apiserver. Before the engine
//! concludes that no Job runs (and clears block-move or `status.activeJob`,
//! or drops the finalizer), it checks the two places a newer Job shows first.

/// What a live read found about a Job the cache does not list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveJob {
    /// It exists and belongs to this object.
    Ours,
    /// It exists but belongs to another object.
    Foreign,
    Absent,
}

/// Whether the run lease needs reading: only when its answer matters.
pub fn lease_matters(block_move: bool, active_job_in_status: bool, deleting: bool) -> bool {
    block_move || active_job_in_status || deleting
}

/// Whether the cache lags: `status.activeJob` names a Job the cache does not
/// list but the apiserver has, or the live run lease's holder is such a Job
/// of this object. `None` for a check that did not apply.
pub fn cache_lags(status_active_job: Option<LiveJob>, lease_holder: Option<LiveJob>) -> bool {
    status_active_job == Some(LiveJob::Ours)
        || status_active_job == Some(LiveJob::Foreign)
        || lease_holder == Some(LiveJob::Ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_table() {
        let cases = [
            (None, None, false),
            (Some(LiveJob::Absent), None, false),
            (Some(LiveJob::Ours), None, true),
            (Some(LiveJob::Foreign), None, true),
            (None, Some(LiveJob::Ours), true),
            (None, Some(LiveJob::Foreign), false),
            (None, Some(LiveJob::Absent), false),
            (Some(LiveJob::Absent), Some(LiveJob::Absent), false),
        ];
        for (active, holder, want) in cases {
            assert_eq!(cache_lags(active, holder), want, "{active:?} {holder:?}");
        }
    }

    #[test]
    fn the_lease_is_read_only_when_it_matters() {
        assert!(!lease_matters(false, false, false));
        assert!(lease_matters(true, false, false));
        assert!(lease_matters(false, true, false));
        assert!(lease_matters(false, false, true));
    }
}
