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
    use std::time::Duration;

    #[tokio::test]
    async fn the_exclusive_side_waits_for_the_shared_one_and_holds_it_back() {
        let name = "a lock of this test";
        let first = lock(name).read_owned().await;
        let second = lock(name).read_owned().await;
        let counting = tokio::spawn(async move {
            let held = lock(name).write_owned().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(held);
        });
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        // While the exclusive side waits, a new shared one waits too.
        let late = tokio::spawn(async move { lock(name).read_owned().await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!counting.is_finished() && !late.is_finished());
        drop((first, second));
        counting.await.unwrap();
        let late = tokio::time::timeout(Duration::from_secs(5), late).await;
        assert!(
            late.is_ok_and(|r| r.is_ok()),
            "the late reader got the lock"
        );
    }
}
