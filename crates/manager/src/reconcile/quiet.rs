//! Quiet resyncs. A pass that ended with no Job running and nothing to do
//! is remembered with what it saw of the object; the resyncs that follow
//! (every `--sync-period`) cost no request of their own while nothing the
//! pass reads has changed and nothing falls due.
//!
//! What a pass reads either changes the object itself (its fingerprint is
//! kept) or reaches it as a routed watch event: every mapper in
//! `controllers.rs` forgets the entries of the objects it wakes, so the
//! next pass of a woken object is a full one. What no watch covers is
//! checked on every resync through the memo that already bounds its cost:
//! the credentials (per namespace and identity, so one read per sync period
//! serves all their users). The runner identity is not: a settled object
//! runs no Job, and the full pass before its next Job applies it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use captf_api::common::IdentityReference;
use captf_api::names::conditions;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::credentials::{self, CredentialsVerdict};
use super::routing::{self, Fingerprint};
use super::status::Draft;
use super::workload::{Workload, object_key_of};
use super::{Context, Error};

/// How long one quiet pass may stand in for full ones: a resync after that
/// reads everything again, whatever the watches said (a bound on what a
/// missed watch event could hide). The bound stretches by at most one more
/// sync period to meet the object's own requeue, so that an object due for
/// its refresh just after the bound (refresh intervals carry a jitter of up
/// to a tenth) is not read in full twice within minutes.
pub const MAX_QUIET_SYNC_PERIODS: u32 = 6;

/// What a quiet pass saw and left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    uid: String,
    own: Fingerprint,
    /// When the pass asked to look again (the next refresh or drift check).
    due: Option<Instant>,
    /// The credentials verdict of the pass; `None` when it checked none
    /// (paused, or a deletion that runs no Job).
    credentials: Option<CredentialsVerdict>,
}

/// Where an object stands: a full pass is running (`Pending`), or its
/// last pass settled.
#[derive(Debug, Clone)]
enum Entry {
    Pending,
    Settled(Instant, Settled),
}

/// The quiet passes, keyed `Kind/namespace/name`. A full pass marks its
/// object pending when it begins and settles it when it ends; an event
/// that wakes the object meanwhile clears the mark, so a pass that read
/// the world before the event never settles on it.
#[derive(Debug, Clone)]
pub struct QuietPasses {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    max_age: Duration,
    /// How far past `max_age` an entry may stand to meet its own requeue.
    stretch: Duration,
}

impl QuietPasses {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().expect("the quiet passes")
    }

    /// The settled pass of `key`, unless past its bound at `now`.
    fn settled(&self, key: &str, now: Instant) -> Option<Settled> {
        match self.lock().get(key) {
            Some(Entry::Settled(at, s)) if now < self.expiry(*at, s.due) => Some(s.clone()),
            _ => None,
        }
    }

    /// When an entry settled `at` stops standing: the bound, or its own
    /// requeue if that comes within `stretch` after the bound.
    fn expiry(&self, at: Instant, due: Option<Instant>) -> Instant {
        let bound = at + self.max_age;
        match due {
            Some(due) if due > bound && due <= bound + self.stretch => due,
            _ => bound,
        }
    }

    fn begin(&self, key: String) {
        self.lock().insert(key, Entry::Pending);
    }

    /// Settles `key` if no event woke it since its pass began.
    fn settle(&self, key: &str, settled: Settled, now: Instant) -> bool {
        let mut entries = self.lock();
        match entries.get_mut(key) {
            Some(e @ Entry::Pending) => {
                *e = Entry::Settled(now, settled);
                true
            }
            _ => false,
        }
    }

    /// An event woke `key`: neither its settled pass nor the one running
    /// may stand for the next.
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }
}

pub fn memo(sync_period: Duration) -> QuietPasses {
    QuietPasses {
        entries: Arc::new(Mutex::new(HashMap::new())),
        max_age: sync_period * MAX_QUIET_SYNC_PERIODS,
        stretch: sync_period,
    }
}

/// A pass ended with no Job running: the resyncs until `requeue` may
/// stand on it.
pub fn settle<K: Workload>(
    ctx: &Context,
    obj: &K,
    requeue: Option<Duration>,
    credentials: Option<CredentialsVerdict>,
) {
    let now = Instant::now();
    let entry = Settled {
        uid: obj.uid().unwrap_or_default(),
        own: routing::own_object(obj.meta()),
        due: requeue.map(|r| now + r),
        credentials,
    };
    let settled = ctx.quiet.settle(&object_key_of(obj), entry, now);
    tracing::debug!(key = %object_key_of(obj), settled, ?requeue, "settled");
}

/// A full pass begins: whatever it ends with replaces the entry, and an
/// error leaves none.
pub fn unsettle<K: Workload>(ctx: &Context, obj: &K) {
    ctx.quiet.begin(object_key_of(obj));
    super::pass::begin_writes(ctx, obj);
}

/// Whether an entry still stands for `obj` at `now` (pure: the object, the
/// entry and the clock).
pub fn stands<K: Workload>(entry: &Settled, obj: &K, now: Instant) -> bool {
    entry.uid == obj.uid().unwrap_or_default()
        && entry.own == routing::own_object(obj.meta())
        && entry.due.is_none_or(|due| now < due)
}

/// The requeue of a quiet resync: at the pass's own due time, and at the
/// latest after one sync period.
fn requeue(entry: &Settled, now: Instant, sync_period: Duration) -> Action {
    let until_due = entry
        .due
        .map_or(sync_period, |due| due.saturating_duration_since(now));
    Action::requeue(until_due.min(sync_period).max(Duration::from_millis(200)))
}

/// A resync of a settled object: the credentials are checked through
/// their memo, and when it says what the settled pass saw, the pass ends
/// here. `None`: run the full pass.
pub async fn resync<K: Workload>(
    ctx: &Context,
    obj: &K,
    identity: Option<&IdentityReference>,
) -> Result<Option<Action>, Error> {
    let now = Instant::now();
    let Some(entry) = ctx.quiet.settled(&object_key_of(obj), now) else {
        return Ok(None);
    };
    if !stands(&entry, obj, now) {
        return Ok(None);
    }
    if let Some(settled) = &entry.credentials {
        let generation = obj.meta().generation.unwrap_or(0);
        let mut draft = Draft::new(obj.conditions(), generation, SystemTime::now());
        let (verdict, writes) = credentials::check(ctx, obj, identity, &mut draft).await?;
        super::effects::apply(ctx, obj, &writes).await?;
        if verdict != *settled || !same_credentials_conditions(obj, &draft) {
            return Ok(None);
        }
    }
    tracing::debug!(key = %object_key_of(obj), "resync answered by the settled pass");
    ctx.quiet_passes.count(
        K::KIND.kind(),
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
    );
    Ok(Some(requeue(&entry, now, ctx.config.sync_period)))
}

/// The credentials conditions the check would write are those the object
/// carries (a revoked namespace or a failed mirror is a full pass).
fn same_credentials_conditions<K: Workload>(obj: &K, draft: &Draft) -> bool {
    [
        conditions::IDENTITY_ALLOWED,
        conditions::CREDENTIALS_MIRRORED,
    ]
    .into_iter()
    .all(|t| {
        let now = draft.get(t).map(|c| (&c.status, &c.reason, &c.message));
        let was = obj.condition(t).map(|c| (&c.status, &c.reason, &c.message));
        now == was
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use captf_api::TerraformMachinePool;
    use kube::Resource;

    fn pool(generation: i64, annotations: serde_json::Value) -> TerraformMachinePool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "generation": generation,
                         "resourceVersion": format!("{generation}"), "annotations": annotations},
            "spec": {"source": {"image": "m:1"}},
        }))
        .unwrap()
    }

    fn settled(obj: &TerraformMachinePool, due: Option<Instant>) -> Settled {
        Settled {
            uid: obj.uid().unwrap(),
            own: routing::own_object(obj.meta()),
            due,
            credentials: Some(CredentialsVerdict::Ready(None)),
        }
    }

    #[test]
    fn an_entry_stands_until_the_object_changes_or_its_due_time() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(60);
        let obj = pool(1, serde_json::json!({}));
        let entry = settled(&obj, Some(later));
        assert!(stands(&entry, &obj, t0), "nothing changed, nothing due");
        assert!(!stands(&entry, &obj, later), "the refresh fell due");
        let mut status_only = obj.clone();
        status_only.metadata.resource_version = Some("9".into());
        assert!(
            stands(&entry, &status_only, t0),
            "our own status write is not a change"
        );
        assert!(
            !stands(&entry, &pool(2, serde_json::json!({})), t0),
            "a spec change (new generation)"
        );
        assert!(
            !stands(
                &entry,
                &pool(1, serde_json::json!({"captf.io/paused": ""})),
                t0
            ),
            "an annotation"
        );
        let mut recreated = obj.clone();
        recreated.metadata.uid = Some("u2".into());
        assert!(!stands(&entry, &recreated, t0), "a new object of the name");
        assert!(
            stands(&settled(&obj, None), &obj, later),
            "a pass with nothing scheduled stands until the memo's own age"
        );
    }

    #[test]
    fn a_quiet_resync_requeues_at_the_due_time_or_the_sync_period() {
        let t0 = Instant::now();
        let sync = Duration::from_secs(600);
        let obj = pool(1, serde_json::json!({}));
        let soon = settled(&obj, Some(t0 + Duration::from_secs(42)));
        assert_eq!(
            requeue(&soon, t0, sync),
            Action::requeue(Duration::from_secs(42))
        );
        let far = settled(&obj, Some(t0 + Duration::from_secs(7200)));
        assert_eq!(requeue(&far, t0, sync), Action::requeue(sync));
        assert_eq!(
            requeue(&settled(&obj, None), t0, sync),
            Action::requeue(sync)
        );
    }

    #[test]
    fn a_pass_settles_only_when_nothing_woke_its_object_meanwhile() {
        let sync = Duration::from_secs(600);
        let m = memo(sync);
        let t0 = Instant::now();
        let obj = pool(1, serde_json::json!({}));
        assert!(
            !m.settle("k", settled(&obj, None), t0),
            "no pass began: nothing to settle"
        );
        m.begin("k".into());
        assert!(m.settled("k", t0).is_none(), "a pass is running");
        assert!(m.settle("k", settled(&obj, None), t0));
        assert!(m.settled("k", t0 + sync * 5).is_some());
        assert!(
            m.settled("k", t0 + sync * MAX_QUIET_SYNC_PERIODS).is_none(),
            "the bound"
        );
        m.begin("k".into());
        m.forget("k");
        assert!(
            !m.settle("k", settled(&obj, None), t0),
            "an event came while the pass ran: it read the world before it"
        );
        assert!(m.settled("k", t0).is_none());
    }

    #[test]
    fn the_bound_stretches_at_most_one_period_to_meet_the_own_requeue() {
        let sync = Duration::from_secs(600);
        let bound = sync * MAX_QUIET_SYNC_PERIODS;
        let obj = pool(1, serde_json::json!({}));
        let t0 = Instant::now();
        // (own requeue after settling, a time after settling, the entry
        // still stands); a requeue that has come is `stands`'s business.
        let table = [
            (None, bound - Duration::from_secs(1), true),
            (None, bound, false),
            (Some(bound + sync / 2), bound + Duration::from_secs(1), true),
            (Some(bound + sync / 2), bound + sync / 2, false),
            (
                Some(bound + sync),
                bound + sync - Duration::from_secs(1),
                true,
            ),
            (Some(bound + sync * 2), bound, false),
            (Some(bound - sync), bound - sync, true),
            (Some(bound - sync), bound, false),
        ];
        for (due, at, stands) in table {
            let m = memo(sync);
            m.begin("k".into());
            assert!(m.settle("k", settled(&obj, due.map(|d| t0 + d)), t0));
            assert_eq!(
                m.settled("k", t0 + at).is_some(),
                stands,
                "due {due:?}, at {at:?}"
            );
        }
    }
}
