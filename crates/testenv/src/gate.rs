//! Tests of one binary share its control plane and run side by side. Two
//! kinds of test that cannot overlap share a named lock: many tests of one
//! kind may hold it together, a test of the other kind holds it alone. The
//! rest of the binary never waits for either.
//!
//! Each test takes at most one guard of a lock, at its start, so the lock's
//! fairness (first come, first served) cannot deadlock.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

/// A part of a lock held by one of many tests.
pub type Shared = OwnedRwLockReadGuard<()>;
/// A lock held by one test alone.
pub type Exclusive = OwnedRwLockWriteGuard<()>;

/// The binary's locks, by name.
type Locks = HashMap<&'static str, Arc<RwLock<()>>>;

fn lock(name: &'static str) -> Arc<RwLock<()>> {
    static LOCKS: LazyLock<Mutex<Locks>> = LazyLock::new(Mutex::default);
    LOCKS.lock().unwrap().entry(name).or_default().clone()
}

/// Held by tests that create TerraformClusterIdentities while they run:
/// cluster-scoped, they reach every manager of the binary.
const IDENTITIES: &str = "cluster-scoped identities";

/// For a test that creates TerraformClusterIdentities: waits while a test
/// that must see none runs ([`no_identities_created`]).
pub async fn creating_identities() -> Shared {
    lock(IDENTITIES).read_owned().await
}

/// For a test that counts what its manager sends (every manager reconciles
/// every identity): waits until no test that creates identities runs, and
/// keeps new ones from starting until the guard drops. The identities of a
/// finished test went with its namespace.
pub async fn no_identities_created() -> Exclusive {
    lock(IDENTITIES).write_owned().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    /// What `scale` relies on: it waits for the tests creating identities
    /// to end, and while it waits or runs, no new one starts. Polled by
    /// hand, so no timing decides the outcome.
    #[tokio::test]
    async fn the_counting_test_waits_for_identity_creators_and_holds_new_ones_back() {
        let first = creating_identities().await;
        let second = creating_identities().await;
        let mut counting = Box::pin(no_identities_created());
        assert!((&mut counting).now_or_never().is_none(), "waits for both");
        let mut late = Box::pin(creating_identities());
        assert!((&mut late).now_or_never().is_none(), "queued behind it");
        drop(first);
        assert!((&mut counting).now_or_never().is_none(), "one still runs");
        drop(second);
        let held = (&mut counting).now_or_never().expect("no creator left");
        assert!((&mut late).now_or_never().is_none(), "held back meanwhile");
        drop(held);
        assert!(late.now_or_never().is_some(), "starts once it is done");
    }
}
