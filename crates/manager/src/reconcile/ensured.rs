//! What the manager already made right and need not write again: each
//! object's runner identity (or the consent of the account it names) and
//! each object's credentials. A converged pass
//! skips those writes; they are checked again once the entry is older than
//! the sync period, or at once when something they depend on changed (an
//! identity event forgets the credentials of its users).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Entries of what was ensured, each valid for `ttl`.
#[derive(Debug, Clone)]
pub struct Ensured<V: Clone> {
    entries: Arc<Mutex<HashMap<String, (Instant, V)>>>,
    /// One lock per key, so the passes that find an entry stale at the
    /// same moment (resyncs come together) make it right once, not each.
    writers: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    ttl: Duration,
}

impl<V: Clone> Ensured<V> {
    pub fn new(ttl: Duration) -> Self {
        Ensured {
            entries: Arc::new(Mutex::new(HashMap::new())),
            writers: Arc::new(Mutex::new(HashMap::new())),
            ttl,
        }
    }

    /// Waits for the right to make `key` right: the holder checks `fresh`
    /// again (another pass may have just done it), then writes and `put`s.
    pub async fn writer(&self, key: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = self
            .writers
            .lock()
            .expect("the ensured writers")
            .entry(key.to_owned())
            .or_default()
            .clone();
        lock.lock_owned().await
    }

    /// The value ensured for `key`, unless it is older than the ttl at `now`.
    pub fn fresh(&self, key: &str, now: Instant) -> Option<V> {
        let entries = self.entries.lock().expect("the ensured entries");
        entries
            .get(key)
            .filter(|(at, _)| now.saturating_duration_since(*at) < self.ttl)
            .map(|(_, v)| v.clone())
    }

    /// Remembers that `key` was ensured at `now`.
    pub fn put(&self, key: String, value: V, now: Instant) {
        self.entries
            .lock()
            .expect("the ensured entries")
            .insert(key, (now, value));
    }

    /// Forgets `key`: the next pass writes it again.
    pub fn forget(&self, key: &str) {
        self.entries
            .lock()
            .expect("the ensured entries")
            .remove(key);
    }

    /// Forgets every key for which `matches` holds.
    pub fn forget_where(&self, matches: impl Fn(&str) -> bool) {
        self.entries
            .lock()
            .expect("the ensured entries")
            .retain(|k, _| !matches(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_holds_for_the_ttl_and_can_be_forgotten() {
        let e = Ensured::new(Duration::from_secs(600));
        let t0 = Instant::now();
        assert_eq!(e.fresh("ns-a", t0), None);
        e.put("ns-a".into(), 1, t0);
        assert_eq!(e.fresh("ns-a", t0 + Duration::from_secs(599)), Some(1));
        assert_eq!(
            e.fresh("ns-a", t0 + Duration::from_secs(600)),
            None,
            "stale"
        );
        e.put("ns-b".into(), 2, t0);
        e.forget("ns-a");
        assert_eq!(e.fresh("ns-a", t0), None);
        e.forget_where(|k| k.ends_with("-b"));
        assert_eq!(e.fresh("ns-b", t0), None);
    }

    #[tokio::test]
    async fn passes_finding_an_entry_stale_together_write_it_once() {
        let e: Ensured<u32> = Ensured::new(Duration::from_secs(600));
        let writes = Arc::new(Mutex::new(0));
        let pass = |e: Ensured<u32>, writes: Arc<Mutex<u32>>| async move {
            if e.fresh("ns-a", Instant::now()).is_some() {
                return;
            }
            let _w = e.writer("ns-a").await;
            if e.fresh("ns-a", Instant::now()).is_some() {
                return;
            }
            tokio::task::yield_now().await;
            *writes.lock().unwrap() += 1;
            e.put("ns-a".into(), 1, Instant::now());
        };
        let passes: Vec<_> = (0..8)
            .map(|_| tokio::spawn(pass(e.clone(), writes.clone())))
            .collect();
        for p in passes {
            p.await.unwrap();
        }
        assert_eq!(*writes.lock().unwrap(), 1);
    }
}
