//! The Job slots the manager hands out: unfinished Jobs counted from the
//! Job watch (each Job as its namespace, name and cluster, nothing more),
//! and the objects waiting for a slot in the order they began to wait.
//! An admitted start holds its slot (a reservation) until its Job is
//! created or the start gives up, so passes running at once never overshoot
//! a limit together; only two managers at once (never the case under leader
//! election) could.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use captf_api::names::labels;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::runtime::watcher::Event;

use captf_api::names::reasons;

use super::announcements::plan_slot_wait;
use super::effects;
use super::open_pass::Closing;
use super::pass::op_condition;
use super::workload::Workload;
use super::{Context, Error};
use crate::engine::backoff::jitter;
use crate::engine::decide::Op;
use crate::engine::slots::{Slot, SlotScope, SlotUse, admit, is_background};
// A Job holds a slot until it completes or fails.
use crate::jobs::observe::job_finished as finished;

/// A waiter that has not asked again for this long is gone (its op is no
/// longer due, or the object was deleted) and holds no place.
const WAITER_EXPIRY: Duration = Duration::from_secs(60);

/// A reservation whose start neither created a Job nor gave up (a pass that
/// failed on an API error) frees its slot after this long.
const RESERVATION_EXPIRY: Duration = Duration::from_secs(120);

/// The limits a start is checked against (0: no cap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub manager: u32,
    pub cluster: u32,
}

#[derive(Debug)]
struct Waiter {
    cluster: String,
    since: Instant,
    seen: Instant,
    scope: SlotScope,
    background: bool,
}

#[derive(Debug, Default)]
struct Inner {
    /// Unfinished Jobs: `namespace/name` → `namespace/cluster`.
    running: HashMap<String, String>,
    /// The Jobs of a relist under way, swapped in when it ends.
    relist: Option<HashMap<String, String>>,
    /// Objects waiting for a slot, by `Kind/namespace/name`.
    waiters: HashMap<String, Waiter>,
    /// Admitted starts whose Job is not created yet: object → (cluster, when).
    reserved: HashMap<String, (String, Instant)>,
}

/// Shared by every controller of the manager. When a Job finishes, the
/// longest waiter of its cluster (or of the manager's limit) is woken at
/// once rather than at its next requeue, so a free slot is not left idle.
#[derive(Debug, Clone)]
pub struct JobSlots {
    inner: Arc<Mutex<Inner>>,
    wake: tokio::sync::broadcast::Sender<String>,
}

impl Default for JobSlots {
    fn default() -> Self {
        JobSlots {
            inner: Arc::default(),
            wake: tokio::sync::broadcast::channel(256).0,
        }
    }
}

/// `namespace/cluster`: the scope of a cluster's limit.
pub fn cluster_key(namespace: &str, cluster: &str) -> String {
    format!("{namespace}/{cluster}")
}

fn job_key(job: &Job) -> String {
    format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any())
}

fn job_cluster(job: &Job) -> String {
    let cluster = job.labels().get(labels::CLUSTER_NAME).cloned();
    cluster_key(
        &job.namespace().unwrap_or_default(),
        cluster.as_deref().unwrap_or_default(),
    )
}

impl JobSlots {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The keys (`Kind/namespace/name`) of the waiters to run again now.
    pub fn woken(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.wake.subscribe()
    }

    /// A Job of `cluster` left its slot: the longest waiter it concerns
    /// (one of that cluster, or one held by the manager's limit) goes next.
    fn freed(&self, inner: &Inner, cluster: &str) {
        let next = inner
            .waiters
            .iter()
            .filter(|(_, w)| w.cluster == cluster || w.scope == SlotScope::Manager)
            .min_by_key(|(_, w)| (w.background, w.since))
            .map(|(key, _)| key.clone());
        if let Some(key) = next {
            // No receiver (no controller running) is fine: the requeue comes.
            let _ = self.wake.send(key);
        }
    }

    /// Follows the Job watch (a relist replaces what it knew).
    pub fn observe(&self, event: &Event<Job>) {
        let mut inner = self.inner();
        match event {
            Event::Init => inner.relist = Some(HashMap::new()),
            Event::InitApply(job) => {
                if !finished(job) {
                    let (key, cluster) = (job_key(job), job_cluster(job));
                    inner
                        .relist
                        .get_or_insert_with(HashMap::new)
                        .insert(key, cluster);
                }
            }
            Event::InitDone => {
                if let Some(listed) = inner.relist.take() {
                    inner.running = listed;
                }
            }
            Event::Apply(job) if finished(job) => {
                if let Some(cluster) = inner.running.remove(&job_key(job)) {
                    self.freed(&inner, &cluster);
                }
            }
            Event::Apply(job) => {
                let (key, cluster) = (job_key(job), job_cluster(job));
                inner.running.insert(key, cluster);
            }
            Event::Delete(job) => {
                if let Some(cluster) = inner.running.remove(&job_key(job)) {
                    self.freed(&inner, &cluster);
                }
            }
        }
    }

    /// Counts a Job `object` just created (before its watch event) in place
    /// of the object's reservation.
    pub fn started(&self, object: &str, namespace: &str, job: &str, cluster: &str) {
        let mut inner = self.inner();
        inner.reserved.remove(object);
        inner.running.insert(
            format!("{namespace}/{job}"),
            cluster_key(namespace, cluster),
        );
    }

    /// Frees the slot of a start that created no Job.
    pub fn release(&self, object: &str) {
        let mut inner = self.inner();
        if let Some((cluster, _)) = inner.reserved.remove(object) {
            self.freed(&inner, &cluster);
        }
    }

    /// Whether `object` may start a Job of `cluster` now. A refused object
    /// keeps its place in the queue while it asks again; an admitted one
    /// leaves it. Background waiters never hold back an apply, destroy,
    /// restore or plan.
    pub fn check(
        &self,
        object: &str,
        cluster: &str,
        limits: Limits,
        background: bool,
        now: Instant,
    ) -> Slot {
        let mut inner = self.inner();
        inner
            .waiters
            .retain(|_, w| now.saturating_duration_since(w.seen) < WAITER_EXPIRY);
        inner
            .reserved
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < RESERVATION_EXPIRY);
        // An object asking again holds no slot of its own meanwhile.
        inner.reserved.remove(object);
        let since = inner.waiters.get(object).map_or(now, |w| w.since);
        let ahead = |scope: Option<SlotScope>| {
            inner
                .waiters
                .iter()
                .filter(|(key, w)| key.as_str() != object && w.since < since)
                .filter(|(_, w)| background || !w.background)
                .filter(|(_, w)| match scope {
                    Some(s) => w.scope == s,
                    None => w.cluster == cluster,
                })
                .count()
        };
        let in_cluster = |c: &String| c == cluster;
        let manager = SlotUse {
            running: inner.running.len() + inner.reserved.len(),
            limit: limits.manager,
            ahead: ahead(Some(SlotScope::Manager)),
        };
        let cluster_use = SlotUse {
            running: inner.running.values().filter(|c| in_cluster(c)).count()
                + inner
                    .reserved
                    .values()
                    .filter(|(c, _)| in_cluster(c))
                    .count(),
            limit: limits.cluster,
            ahead: ahead(None),
        };
        let verdict = admit(background, manager, cluster_use);
        match verdict {
            Slot::Free => {
                inner.waiters.remove(object);
                inner
                    .reserved
                    .insert(object.to_owned(), (cluster.to_owned(), now));
            }
            Slot::Full { scope, .. } => {
                inner.waiters.insert(
                    object.to_owned(),
                    Waiter {
                        cluster: cluster.to_owned(),
                        since,
                        seen: now,
                        scope,
                        background,
                    },
                );
            }
        }
        verdict
    }
}

/// The key of an object in the slots: `Kind/namespace/name`.
pub fn object_key<K: Workload>(obj: &K) -> String {
    let ns = obj.namespace().unwrap_or_default();
    format!("{}/{ns}/{}", K::KIND.kind(), obj.name_any())
}

/// How long a start waits before asking for a slot again (plus a stable
/// per-object jitter of up to a tenth).
pub const SLOT_REQUEUE: Duration = Duration::from_secs(15);

/// A slot admitted for one start. The start hands it over with its Job
/// ([`SlotReservation::started`]); dropped any other way (the start waited,
/// failed or returned early on an error) it frees the slot at once and
/// wakes the next waiter, so no path has to give it back by hand.
#[must_use = "a reservation dropped at once frees its slot"]
#[derive(Debug)]
pub struct SlotReservation<'a> {
    slots: &'a JobSlots,
    object: String,
    handed_over: bool,
}

impl SlotReservation<'_> {
    /// The Job `job` of `cluster` was created: it holds the slot now.
    pub fn started(mut self, namespace: &str, job: &str, cluster: &str) {
        self.slots.started(&self.object, namespace, job, cluster);
        self.handed_over = true;
    }
}

impl Drop for SlotReservation<'_> {
    fn drop(&mut self) {
        if !self.handed_over {
            self.slots.release(&self.object);
        }
    }
}

/// The slots' answer to a start.
#[derive(Debug)]
pub enum SlotAnswer<'a> {
    /// Start, holding the reservation.
    Admitted(SlotReservation<'a>),
    /// The op's condition says it waits; the pass ends without taking a
    /// lease and looks again after the requeue.
    Wait(Duration),
}

/// Asks for a slot for `op` of `obj` (a probe: only the slots know); a
/// refusal writes what `plan_slot_wait` says.
pub async fn wait_for_slot<'c, K: Workload>(
    ctx: &'c Context,
    obj: &K,
    p: &mut Closing,
    op: Op,
) -> Result<SlotAnswer<'c>, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let object = object_key(obj);
    let limits = Limits {
        manager: ctx.config.max_active_jobs,
        cluster: p.pass.shared.cluster_max_active_jobs,
    };
    let cluster = cluster_key(&ns, &p.pass.shared.cluster_name);
    let now = Instant::now();
    let Slot::Full { scope, limit, .. } =
        ctx.slots
            .check(&object, &cluster, limits, is_background(op), now)
    else {
        return Ok(SlotAnswer::Admitted(SlotReservation {
            slots: &ctx.slots,
            object,
            handed_over: false,
        }));
    };
    let condition = op_condition(op);
    let waiting_already = p
        .status
        .get(condition)
        .is_some_and(|c| c.reason == reasons::WAITING_FOR_JOB_SLOT);
    let (value, writes) = plan_slot_wait(
        op,
        scope,
        limit,
        &p.pass.shared.cluster_name,
        waiting_already,
    );
    p.status.set(condition, &value);
    effects::apply(ctx, obj, &writes).await?;
    let requeue = SLOT_REQUEUE + jitter(&obj.uid().unwrap_or_default(), SLOT_REQUEUE);
    Ok(SlotAnswer::Wait(requeue))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(name: &str, cluster: &str, done: bool) -> Job {
        let conditions = if done {
            json!([{"type": "Complete", "status": "True"}])
        } else {
            json!([])
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {labels::CLUSTER_NAME: cluster}},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    const FIVE: Limits = Limits {
        manager: 0,
        cluster: 5,
    };

    #[test]
    fn running_jobs_follow_the_watch_and_a_relist_replaces_them() {
        let slots = JobSlots::default();
        for i in 0..3 {
            slots.observe(&Event::Apply(job(&format!("j{i}"), "prod", false)));
        }
        slots.observe(&Event::Apply(job("other", "dev", false)));
        slots.observe(&Event::Apply(job("j0", "prod", true)));
        slots.observe(&Event::Delete(job("j1", "prod", false)));
        let count = |s: &JobSlots| s.inner().running.len();
        assert_eq!(count(&slots), 2, "j2 and other run");
        slots.observe(&Event::Init);
        slots.observe(&Event::InitApply(job("j9", "prod", false)));
        slots.observe(&Event::InitApply(job("j8", "prod", true)));
        assert_eq!(count(&slots), 2, "a relist counts only when it ends");
        slots.observe(&Event::InitDone);
        assert_eq!(count(&slots), 1, "only j9 runs after the relist");
    }

    #[test]
    fn a_cluster_at_its_limit_admits_the_longest_waiter_first() {
        let slots = JobSlots::default();
        let prod = cluster_key("ns", "prod");
        let t0 = Instant::now();
        for i in 0..5 {
            slots.started(&format!("o{i}"), "ns", &format!("j{i}"), "prod");
        }
        // Three objects queue up, a, then b, then c.
        for (i, obj) in ["a", "b", "c"].into_iter().enumerate() {
            let at = t0 + Duration::from_secs(i as u64);
            assert!(matches!(
                slots.check(obj, &prod, FIVE, false, at),
                Slot::Full {
                    scope: SlotScope::Cluster,
                    running: 5,
                    ..
                }
            ));
        }
        // Another cluster is not held back by prod's queue.
        let dev = cluster_key("ns", "dev");
        assert_eq!(slots.check("d", &dev, FIVE, false, t0), Slot::Free);
        // One Job ends: the slot is a's, even if c asks first.
        slots.observe(&Event::Apply(job("j0", "prod", true)));
        let later = t0 + Duration::from_secs(10);
        assert!(matches!(
            slots.check("c", &prod, FIVE, false, later),
            Slot::Full { .. }
        ));
        assert_eq!(slots.check("a", &prod, FIVE, false, later), Slot::Free);
        slots.started("a", "ns", "ja", "prod");
        // A waiter that stopped asking gives up its place.
        slots.observe(&Event::Apply(job("j1", "prod", true)));
        let much_later = later + WAITER_EXPIRY;
        assert_eq!(
            slots.check("c", &prod, FIVE, false, much_later),
            Slot::Free,
            "b stopped asking a minute ago"
        );
    }

    #[test]
    fn an_admitted_start_holds_its_slot_until_its_job_exists_or_it_gives_up() {
        let slots = JobSlots::default();
        let prod = cluster_key("ns", "prod");
        let one = Limits {
            manager: 0,
            cluster: 1,
        };
        let now = Instant::now();
        assert_eq!(slots.check("a", &prod, one, false, now), Slot::Free);
        assert!(
            matches!(slots.check("b", &prod, one, false, now), Slot::Full { .. }),
            "a's start is under way"
        );
        slots.release("a");
        assert_eq!(slots.check("b", &prod, one, false, now), Slot::Free);
        slots.started("b", "ns", "jb", "prod");
        assert!(matches!(
            slots.check("a", &prod, one, false, now),
            Slot::Full { .. }
        ));
        // A start lost to an error frees its slot in time.
        slots.observe(&Event::Delete(job("jb", "prod", false)));
        assert_eq!(slots.check("c", &prod, one, false, now), Slot::Free);
        let later = now + RESERVATION_EXPIRY;
        assert_eq!(slots.check("a", &prod, one, false, later), Slot::Free);
    }

    #[test]
    fn a_finished_job_wakes_the_longest_waiter_of_its_cluster() {
        let slots = JobSlots::default();
        let mut woken = slots.woken();
        let prod = cluster_key("ns", "prod");
        let one = Limits {
            manager: 0,
            cluster: 1,
        };
        slots.observe(&Event::Apply(job("j0", "prod", false)));
        let t0 = Instant::now();
        for (i, obj) in ["refresh", "first", "second"].into_iter().enumerate() {
            let background = obj == "refresh";
            let at = t0 + Duration::from_secs(i as u64);
            assert!(matches!(
                slots.check(obj, &prod, one, background, at),
                Slot::Full { .. }
            ));
        }
        slots.observe(&Event::Apply(job("j0", "prod", true)));
        assert_eq!(
            woken.try_recv().unwrap(),
            "first",
            "applies before refreshes"
        );
        assert!(woken.try_recv().is_err(), "one slot, one waiter woken");
    }

    #[test]
    fn background_operations_leave_the_last_fifth_of_a_limit_to_applies() {
        let slots = JobSlots::default();
        let prod = cluster_key("ns", "prod");
        for i in 0..4 {
            slots.started(&format!("o{i}"), "ns", &format!("j{i}"), "prod");
        }
        let now = Instant::now();
        assert!(matches!(
            slots.check("refresh", &prod, FIVE, true, now),
            Slot::Full { .. }
        ));
        assert_eq!(slots.check("apply", &prod, FIVE, false, now), Slot::Free);
    }

    #[test]
    fn a_reservation_frees_its_slot_unless_its_job_started() {
        let slots = JobSlots::default();
        let one = Limits {
            manager: 0,
            cluster: 1,
        };
        let now = Instant::now();
        let reserve = |object: &str| {
            assert_eq!(slots.check(object, "ns/prod", one, false, now), Slot::Free);
            SlotReservation {
                slots: &slots,
                object: object.to_owned(),
                handed_over: false,
            }
        };
        let mut woken = slots.woken();
        let waiting = reserve("a");
        assert!(
            matches!(
                slots.check("b", "ns/prod", one, false, now),
                Slot::Full { .. }
            ),
            "a holds the cluster's one slot"
        );
        drop(waiting);
        assert_eq!(
            woken.try_recv().ok().as_deref(),
            Some("b"),
            "the waiter is woken"
        );
        let started = reserve("b");
        started.started("ns", "jb", "prod");
        assert!(
            matches!(
                slots.check("c", "ns/prod", one, false, now),
                Slot::Full { .. }
            ),
            "a started Job keeps the slot after its reservation is gone"
        );
    }
}
