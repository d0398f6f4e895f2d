//! What a converged provider costs, on the real control plane with the
//! controllers in this process, the real node and the real runner and
//! OpenTofu: ten pools of one cluster, a client layer counting every
//! request the manager sends. One event wakes one pool; a pass with
//! nothing due writes nothing; a converged minute costs what its scheduled
//! refresh Jobs need, within 20%.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use captf_api::TerraformMachinePool;
use captf_manager::names::{self, WorkloadKind};
use captf_testenv::{TestEnv, TestNamespace, eventually};
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use support::many_pools::{add_pool, bring_up_cluster};
use support::pools::install_noop_modules;
use support::requests::{Requests, Sent, tally};
use support::touch::touch_state;
use support::*;

const POOLS: usize = 10;

fn ready(p: &TerraformMachinePool) -> bool {
    let status = p.status.as_ref();
    let is_ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let idle = status.is_some_and(|s| s.workspace.active_job.is_none());
    is_ready
        && idle
        && status
            .and_then(|s| s.workspace.last_refresh.as_ref())
            .is_some()
}

/// Waits until every pool is Ready with no Job running and the manager's
/// passes stop for `quiet`.
async fn converge(ns: &TestNamespace, manager: &Manager, quiet: Duration) {
    let api = ns.api::<TerraformMachinePool>();
    eventually("every pool Ready and idle", 600, || async {
        let pools = api.list(&Default::default()).await.ok()?.items;
        (pools.len() == POOLS && pools.iter().all(ready)).then_some(())
    })
    .await;
    eventually("the passes to stop", 300, || async {
        let before = manager.passes.snapshot();
        tokio::time::sleep(quiet).await;
        (before == manager.passes.snapshot()).then_some(())
    })
    .await;
}

/// [`touch_state`] of `name`, three seconds of settling, and the requests
/// the manager sent meanwhile.
async fn touch_and_record(
    ns: &TestNamespace,
    manager: &Manager,
    requests: &Requests,
    kind: WorkloadKind,
    name: &str,
) -> (BTreeMap<String, u64>, Vec<Sent>) {
    let mark = requests.mark();
    let woken = touch_state(ns, manager, kind, name, Duration::from_secs(3)).await;
    (woken, requests.since(mark))
}

/// Each pool's base state Secret and its resourceVersion.
async fn state_versions(ns: &TestNamespace) -> BTreeMap<String, String> {
    let secrets = ns.api::<k8s_openapi::api::core::v1::Secret>();
    let mut versions = BTreeMap::new();
    for i in 0..POOLS {
        let pool = format!("pool-{i}");
        let suffix = names::state_suffix(WorkloadKind::MachinePool, ns.name(), &pool);
        let secret = secrets.get(&names::state_secret(&suffix)).await.unwrap();
        versions.insert(pool, secret.metadata.resource_version.unwrap_or_default());
    }
    versions
}

fn count(sent: &[Sent], method: &str, resource: &str) -> usize {
    sent.iter()
        .filter(|s| s.method == method && s.resource() == resource)
        .count()
}

/// The requests a refresh Job needs of the manager, every one of them
/// necessary, over the two passes that start it and bookkeep it.
///
/// Start (13): read the object's Jobs (list), its state (list), both
/// durable inputs records (get, get) and the cluster's state for its
/// exports (list); the state lock (get); set block-move (patch); the pause
/// handshake (get the object, get the Cluster, after the block-move write:
/// a pause landing right after it must stop the start); the run lease
/// (create: none is left between Jobs; a refresh takes no part in the
/// cluster operation gate); the Job (create; a routine Job's creation is
/// not announced by an event); the per-run Secret (create, owned by the UID
/// the Job's create answered); `status.activeJob` (patch).
const START_REQUESTS: usize = 13;
/// Bookkeeping (11): read the Jobs (list) and the finished Job's pod
/// (list); give the run lease back (one delete, conditioned on the
/// resourceVersion the Job carries from its start); delete the per-run
/// Secret; read the state (list), both records (get, get) and the cluster's
/// state (list); write the status (patch); mark the Job bookkept (patch);
/// drop block-move (patch). A refresh that found nothing leaves the serial
/// as it was (the runner leaves out OpenTofu's rewrite of it with its check
/// results in another order), so there is no backup to consider.
const BOOKKEEPING_REQUESTS: usize = 11;

#[tokio::test]
async fn one_event_wakes_one_pool_and_a_converged_minute_costs_what_its_jobs_need() {
    // Its manager counts every request it sends, and every manager
    // reconciles every identity: none may be created meanwhile.
    let _no_identities = captf_testenv::gate::no_identities_created().await;
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    install_noop_modules(env, &ns, tmp.path()).await;
    let requests = Requests::default();
    let manager = start_manager(requests.client(env.config()), ns.name());
    bring_up_cluster(&ns).await;
    for i in 0..POOLS {
        // No membership refresh is due in the first phase.
        add_pool(&ns, i, 86400).await;
    }
    converge(&ns, &manager, Duration::from_secs(5)).await;

    // A write to one pool's state Secret wakes that pool, and only it; its
    // pass finds nothing due and writes nothing. The same for the
    // TerraformCluster.
    for (kind, name) in [
        (WorkloadKind::MachinePool, "pool-3"),
        (WorkloadKind::Cluster, "prod"),
    ] {
        let (woken, sent) = touch_and_record(&ns, &manager, &requests, kind, name).await;
        let key = format!("{}/{}/{name}", kind.kind(), ns.name());
        assert_eq!(
            woken.keys().collect::<Vec<_>>(),
            vec![&key],
            "only {key} was reconciled: {woken:?}"
        );
        assert!(
            !sent.iter().any(Sent::is_write),
            "a converged pass of {key} writes nothing; it sent:\n{}",
            tally(&sent)
        );
        eprintln!(
            "converged pass of {key} ({} passes): {} reads\n{}",
            woken[&key],
            sent.len(),
            tally(&sent)
        );
    }

    // Resyncs cost nothing per object: a manager resyncing every 20 s
    // answers each resync of a settled object from its quiet pass. What a
    // resync still reads is per namespace (the runner RBAC) and per
    // namespace and identity (the credentials), once per sync period.
    drop(manager);
    let sync = Duration::from_secs(20);
    let manager = start_manager_with(requests.client(env.config()), ns.name(), |c| {
        c.sync_period = sync
    });
    converge(&ns, &manager, Duration::from_secs(5)).await;
    let (full, quiet) = (manager.passes.snapshot(), manager.quiet_passes.snapshot());
    let mark = requests.mark();
    let window = Duration::from_secs(60);
    tokio::time::sleep(window).await;
    let sent = requests.since(mark);
    let resynced = |before: &BTreeMap<String, u64>, after: BTreeMap<String, u64>| {
        after
            .into_iter()
            .filter(|(k, n)| before.get(k) != Some(n))
            .count()
    };
    let answered = resynced(&quiet, manager.quiet_passes.snapshot());
    eprintln!(
        "{}s of resyncs every {}s: {answered} objects answered quietly; {} requests\n{}",
        window.as_secs(),
        sync.as_secs(),
        sent.len(),
        tally(&sent)
    );
    assert_eq!(
        answered,
        POOLS + 1,
        "every pool and the cluster resynced quietly"
    );
    assert_eq!(
        resynced(&full, manager.passes.snapshot()),
        0,
        "no resync ran a full pass"
    );
    // Per sync period: two RBAC applies and two credentials reads (the
    // Secret and the mirrors to release) for the one namespace; at most
    // four periods fall in the window.
    let periods = (window.as_secs() / sync.as_secs() + 1) as usize;
    assert!(
        sent.len() <= periods * 4,
        "resyncs read per namespace, not per object ({} requests):\n{}",
        sent.len(),
        tally(&sent)
    );
    assert_eq!(
        sent.iter()
            .filter(|s| ["jobs", "terraformmachinepools"].contains(&s.resource().as_str()))
            .count(),
        0,
        "no object's Jobs or object read:\n{}",
        tally(&sent)
    );

    // Refreshes every minute: a converged minute costs what the refresh
    // Jobs need, resyncs included. (Changing the interval wakes each pool
    // once.)
    for i in 0..POOLS {
        ns.api::<TerraformMachinePool>()
            .patch(
                &format!("pool-{i}"),
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"membershipRefreshIntervalSeconds": 60}})),
            )
            .await
            .unwrap();
    }
    // The first round of refreshes runs at once; measure after it.
    tokio::time::sleep(Duration::from_secs(45)).await;
    let states_before = state_versions(&ns).await;
    let mark = requests.mark();
    let window_start = k8s_openapi::jiff::Timestamp::now();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let sent = requests.since(mark);
    // Refreshes that changed nothing leave no event, the manager's or the
    // runners', and no backup: a Secret created is a per-run Secret, one
    // deleted is one of those going with its bookkept Job.
    for method in ["POST", "PATCH"] {
        assert_eq!(
            count(&sent, method, "events"),
            0,
            "the manager wrote an event of a routine Job:\n{}",
            tally(&sent)
        );
    }
    let started = count(&sent, "POST", "jobs");
    let bookkept = count(&sent, "PATCH", "jobs");
    assert!(
        count(&sent, "POST", "secrets") <= started && count(&sent, "DELETE", "secrets") <= bookkept,
        "a routine refresh backed up its state:\n{}",
        tally(&sent)
    );
    let backups_taken = ns
        .api::<k8s_openapi::api::core::v1::Secret>()
        .list(&ListParams::default().labels("captf.io/state-backup=true"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|s| {
            s.metadata
                .creation_timestamp
                .as_ref()
                .is_some_and(|t| t.0 >= window_start)
        })
        .count();
    assert_eq!(backups_taken, 0, "no backup of a renumbered state");
    // Nor did a refresh rewrite its state: the runner's state proxy left
    // out each write that only renumbered the state it read.
    assert_eq!(
        state_versions(&ns).await,
        states_before,
        "the refreshes rewrote no state Secret"
    );
    let posted: Vec<String> = ns
        .api::<k8s_openapi::api::events::v1::Event>()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.metadata
                .creation_timestamp
                .as_ref()
                .is_some_and(|t| t.0 >= window_start)
        })
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("TerraformMachinePool")
        })
        .map(|e| format!("{:?} {:?}", e.reason, e.note))
        .collect();
    assert!(
        posted.is_empty(),
        "events of routine refreshes: {posted:#?}"
    );
    let minimum = started * START_REQUESTS + bookkept * BOOKKEEPING_REQUESTS;
    eprintln!(
        "a converged minute of {POOLS} pools: {} requests; {started} Jobs started, {bookkept} bookkept; minimum {minimum}\n{}",
        sent.len(),
        tally(&sent)
    );
    assert!(
        started >= POOLS / 2,
        "the refreshes run every minute: {started} started"
    );
    // The runner RBAC (ServiceAccount, Role, RoleBinding) is applied at
    // most once per object per sync period. This test's 20 s period is
    // shorter than the refresh interval, so it falls on nearly every start:
    // a cost of the period, not of the Job, bounded on its own.
    let rbac_applies = count(&sent, "PATCH", "serviceaccounts");
    for resource in ["roles", "rolebindings"] {
        assert_eq!(
            count(&sent, "PATCH", resource),
            rbac_applies,
            "each RBAC apply writes all three objects:\n{}",
            tally(&sent)
        );
    }
    let minute_periods = (60 / sync.as_secs() + 1) as usize;
    assert!(
        rbac_applies <= (POOLS + 1) * minute_periods,
        "{rbac_applies} RBAC applies in a minute of {POOLS} pools and a cluster:\n{}",
        tally(&sent)
    );
    let job_requests = sent.len() - 3 * rbac_applies;
    assert!(
        job_requests * 10 <= minimum * 12,
        "{job_requests} requests in a converged minute beside {rbac_applies} RBAC applies; the scheduled Jobs need {minimum}:\n{}",
        tally(&sent)
    );
}
