//! Tests of one binary share its control plane and run side by side. A test
//! whose assertions cannot hold beside others runs alone: it takes
//! [`alone`] first, which waits until no other test holds a namespace and
//! keeps new ones from taking one until it is done. Every test takes its
//! part of the gate with its namespace ([`crate::TestEnv::namespace`]) and
//! gives it back once the namespace is deleted.
//!
//! A test is named by its thread: libtest runs each test on a thread named
//! after it, and a `#[tokio::test]` polls its body on that thread. A test
//! that already holds part of the gate (a second namespace, or the
//! namespaces of a test that runs alone) is never made to wait for it.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use tokio::sync::Notify;

#[derive(Default)]
struct State {
    /// Namespaces held, by test.
    holders: HashMap<String, usize>,
    /// The test running alone.
    alone: Option<String>,
    /// Tests waiting to run alone: while any waits, no other test starts.
    waiting: usize,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(Mutex::default);
static CHANGED: LazyLock<Notify> = LazyLock::new(Notify::new);

fn this_test() -> String {
    let thread = std::thread::current();
    match thread.name() {
        Some(name) => name.to_owned(),
        None => format!("{:?}", thread.id()),
    }
}

/// Waits until `ready` returns true of the state (checked under its lock),
/// without missing a change that lands between the check and the wait.
async fn wait_until(mut ready: impl FnMut(&mut State) -> bool) {
    loop {
        let changed = CHANGED.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if ready(&mut STATE.lock().unwrap()) {
            return;
        }
        changed.await;
    }
}

fn release(update: impl FnOnce(&mut State)) {
    update(&mut STATE.lock().unwrap());
    CHANGED.notify_waiters();
}

/// A namespace's part of the gate, given back when it drops.
#[derive(Debug)]
pub(crate) struct Shared {
    test: String,
}

/// Takes a part of the gate for the calling test: at once when it holds
/// one already or runs alone, else when no test runs or waits to run alone.
pub(crate) async fn shared() -> Shared {
    let test = this_test();
    wait_until(|s| {
        let mine = s.alone.as_deref() == Some(test.as_str()) || s.holders.contains_key(&test);
        let open = s.alone.is_none() && s.waiting == 0;
        if mine || open {
            *s.holders.entry(test.clone()).or_default() += 1;
        }
        mine || open
    })
    .await;
    Shared { test }
}

impl Drop for Shared {
    fn drop(&mut self) {
        release(|s| {
            if let Some(n) = s.holders.get_mut(&self.test) {
                *n -= 1;
                if *n == 0 {
                    s.holders.remove(&self.test);
                }
            }
        });
    }
}

/// The calling test running alone, until this drops.
#[derive(Debug)]
#[must_use = "the test runs alone only while the guard lives"]
pub struct Alone {
    test: String,
}

/// Runs the calling test alone: waits until every other test of the binary
/// has given its namespaces back, and keeps new tests from starting until
/// the guard drops. For tests whose assertions other tests' objects would
/// break (cluster-scoped objects every running manager reconciles); take it
/// before the first namespace.
pub async fn alone() -> Alone {
    let test = this_test();
    STATE.lock().unwrap().waiting += 1;
    wait_until(|s| {
        let free = s.alone.is_none() && s.holders.keys().all(|t| *t == test);
        if free {
            s.alone = Some(test.clone());
            s.waiting -= 1;
        }
        free
    })
    .await;
    Alone { test }
}

impl Drop for Alone {
    fn drop(&mut self) {
        release(|s| {
            if s.alone.as_deref() == Some(self.test.as_str()) {
                s.alone = None;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// One test of this module at a time: they share the process's gate.
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    fn on_thread<F: std::future::Future<Output = ()> + Send + 'static>(
        name: &str,
        f: impl FnOnce() -> F + Send + 'static,
    ) -> std::thread::JoinHandle<()> {
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(f())
            })
            .unwrap()
    }

    #[tokio::test]
    async fn a_test_alone_waits_for_the_others_and_holds_back_new_ones() {
        let _serial = SERIAL.lock().await;
        let (log_tx, log_rx) = std::sync::mpsc::channel::<&'static str>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let first = on_thread("first", {
            let log = log_tx.clone();
            move || async move {
                let held = shared().await;
                log.send("first holds").unwrap();
                let _ = tokio::task::spawn_blocking(move || go_rx.recv()).await;
                log.send("first gives back").unwrap();
                drop(held);
            }
        });
        assert_eq!(log_rx.recv().unwrap(), "first holds");
        let lone = on_thread("lone", {
            let log = log_tx.clone();
            move || async move {
                let alone = alone().await;
                log.send("lone runs").unwrap();
                // Its own namespaces are not held back.
                let own = shared().await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                log.send("lone done").unwrap();
                drop(own);
                drop(alone);
            }
        });
        // The lone test waits for the first; a new test waits for it.
        while STATE.lock().unwrap().waiting == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let late = on_thread("late", {
            let log = log_tx.clone();
            move || async move {
                let _held = shared().await;
                log.send("late holds").unwrap();
            }
        });
        go_tx.send(()).unwrap();
        let order: Vec<_> = (0..4).map(|_| log_rx.recv().unwrap()).collect();
        assert_eq!(
            order,
            ["first gives back", "lone runs", "lone done", "late holds"]
        );
        for t in [first, lone, late] {
            t.join().unwrap();
        }
        let s = STATE.lock().unwrap();
        assert!(s.holders.is_empty() && s.alone.is_none() && s.waiting == 0);
    }

    #[tokio::test]
    async fn a_second_namespace_of_a_running_test_never_waits() {
        let _serial = SERIAL.lock().await;
        let (log_tx, log_rx) = std::sync::mpsc::channel::<&'static str>();
        let busy = on_thread("busy", move || async move {
            let first = shared().await;
            // Someone waits to run alone (as the lone test below would).
            STATE.lock().unwrap().waiting += 1;
            let second = tokio::time::timeout(Duration::from_secs(5), shared()).await;
            STATE.lock().unwrap().waiting -= 1;
            log_tx
                .send(if second.is_ok() {
                    "second at once"
                } else {
                    "stuck"
                })
                .unwrap();
            drop(second);
            drop(first);
        });
        assert_eq!(log_rx.recv().unwrap(), "second at once");
        busy.join().unwrap();
    }
}
