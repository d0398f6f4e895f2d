//! The manager SIGKILLed while each operation of a TerraformMachinePool and
//! of a TerraformMachine runs: apply, refresh, drift, restore and destroy,
//! one object taken through all of them in turn (one bring-up per kind).
//! As in `kill_matrix.rs`, the manager is the real binary in its own
//! process, killed the moment the operation's Job exists, and a new one
//! takes over. Each operation ends with exactly one Job of its own (any
//! later one of the same operation created after it finished), that Job
//! succeeded and bookkept by the new manager, and no run lease, cluster
//! lease or state lock still held by it (after the destroy, none held at
//! all). The real control plane, Cluster API's controllers, the real node,
//! the real runner and OpenTofu.

use crate::support;

use captf_api::names::annotations;
use captf_manager::capi;
use captf_manager::io::state::read_state;
use captf_manager::leases::{cluster_lease_name, run_lease_name};
use captf_manager::names::{WorkloadKind, state_lock_lease, state_secret, state_suffix};
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::job_log::JobLog;
use support::machines::{cluster, infra_resource, machine_pair, machines};
use support::manager_process::ManagerProcess;
use support::pools::{bring_up_with, install_noop_modules, scale};
use support::*;

/// One object of `kind` under a manager that the test kills.
struct Run {
    env: &'static TestEnv,
    ns: TestNamespace,
    tmp: tempfile::TempDir,
    jobs: JobLog,
    manager: Option<ManagerProcess>,
    kind: WorkloadKind,
    name: &'static str,
}

impl Run {
    /// A namespace with the noop modules and a manager process watching it;
    /// the test then creates the `kind` object `name`.
    async fn start(kind: WorkloadKind, name: &'static str) -> Run {
        let env = TestEnv::get().await;
        env.cluster_api().await;
        let ns = env.namespace().await;
        let tmp = tempfile::tempdir().unwrap();
        install_noop_modules(env, &ns, tmp.path()).await;
        if kind == WorkloadKind::Machine {
            insert_module(
                env,
                &module_ref("machine", ns.name()),
                module_image(tmp.path(), "machine", "v1", &[]),
            )
            .await;
        }
        let jobs = JobLog::start(&ns);
        let manager = ManagerProcess::spawn(env, ns.name(), &tmp.path().join("manager.log"));
        Run {
            env,
            ns,
            tmp,
            jobs,
            manager: Some(manager),
            kind,
            name,
        }
    }

    fn api(&self) -> Api<DynamicObject> {
        let ar = infra_resource(self.kind.kind());
        Api::namespaced_with(self.ns.client(), self.ns.name(), &ar)
    }

    async fn get(&self) -> Option<DynamicObject> {
        self.api().get_opt(self.name).await.ok().flatten()
    }

    async fn patch(&self, patch: Value) {
        self.api()
            .patch(self.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    /// The object's Jobs of `op`, in the order they appeared.
    fn jobs_of(&self, op: &str) -> Vec<String> {
        let prefix = format!("captf-{}-{}-", self.kind.short(), self.name);
        self.jobs.of_object_op(&prefix, op)
    }

    /// Waits for the object's next Job of `op` after the `before` already
    /// seen, SIGKILLs the manager the moment it appears, and starts a new
    /// one.
    async fn kill_when_started(&mut self, op: &str, before: usize) -> String {
        let job = eventually(&format!("a {op} Job of {}", self.name), 240, || async {
            self.jobs_of(op).get(before).cloned()
        })
        .await;
        self.manager.take().expect("a running manager").kill();
        self.manager = Some(ManagerProcess::spawn(
            self.env,
            self.ns.name(),
            &self.tmp.path().join("manager.log"),
        ));
        job
    }

    /// `job` succeeded and the new manager bookkept it (its status written
    /// first: the mark is the last write of the bookkeeping).
    async fn bookkept(&self, job: &str) {
        let jobs = self.ns.api::<Job>();
        eventually(&format!("{job} bookkept"), 300, || async {
            let got = jobs.get(job).await.ok()?;
            let marked = got
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(annotations::BOOKKEPT));
            marked.then_some(())
        })
        .await;
        let status = jobs.get(job).await.unwrap().status.unwrap_or_default();
        assert_eq!(status.succeeded, Some(1), "{job} succeeded");
    }

    /// Exactly `job` ran for `op` since `before`; any later Job of `op` was
    /// created once it had finished (the next one of a schedule, not a
    /// second start of the same run).
    async fn only_job(&self, op: &str, before: usize, job: &str) {
        let ops = self.jobs_of(op);
        assert_eq!(ops.get(before).map(String::as_str), Some(job), "{ops:?}");
        let got = self.ns.api::<Job>().get(job).await.unwrap();
        let finished = got.status.unwrap().completion_time.expect("finished").0;
        for later in &ops[before + 1..] {
            let Ok(j) = self.ns.api::<Job>().get(later).await else {
                continue;
            };
            let created = j.metadata.creation_timestamp.unwrap().0;
            assert!(
                created >= finished,
                "{later} ({op}) started at {created} while {job} ran until {finished}"
            );
        }
    }

    /// The Job of `op` after the `before` already seen, killed at its
    /// start: it ran once, was bookkept, and holds nothing any more.
    async fn killed_once(&mut self, op: &str, before: usize) -> String {
        let job = self.kill_when_started(op, before).await;
        self.ran_once(op, before, &job).await;
        job
    }

    /// `job`, the Job of `op` after the `before` already seen, ran once,
    /// was bookkept, and holds nothing any more.
    async fn ran_once(&self, op: &str, before: usize, job: &str) {
        self.bookkept(job).await;
        self.only_job(op, before, job).await;
        self.released_by(job).await;
    }

    /// The manager killed as the object's first apply starts, and again as
    /// the refresh that follows it starts (counted before the apply ends,
    /// which is when it may start); both ran once.
    async fn first_apply_and_refresh_killed(&mut self) {
        let apply = self.kill_when_started("apply", 0).await;
        let refresh = self.kill_when_started("refresh", 0).await;
        // Read while the refresh runs: no other Job of the object writes now.
        let s0 = self.serial().await;
        self.ran_once("apply", 0, &apply).await;
        self.ran_once("refresh", 0, &refresh).await;
        let s1 = self.serial().await;
        assert!(s1 == s0 || s1 == s0 + 1, "{s0} then {s1}");
    }

    fn suffix(&self) -> String {
        state_suffix(self.kind, self.ns.name(), self.name)
    }

    /// The leases of the object and its cluster: run lease, cluster write
    /// lease, state lock.
    fn lease_names(&self) -> [String; 3] {
        let suffix = self.suffix();
        [
            run_lease_name(&suffix),
            cluster_lease_name(self.ns.name(), "prod"),
            state_lock_lease(&suffix),
        ]
    }

    /// No lease of the object or its cluster is held by `job` or its pod
    /// (a later Job of a schedule may hold one).
    async fn released_by(&self, job: &str) {
        let leases = self.ns.api::<Lease>();
        for name in self.lease_names() {
            eventually(&format!("{name} released by {job}"), 60, || async {
                let lease = leases.get_opt(&name).await.ok()?;
                let holder = lease
                    .and_then(|l| l.spec)
                    .and_then(|s| s.holder_identity)
                    .unwrap_or_default();
                (!holder.starts_with(job)).then_some(())
            })
            .await;
        }
    }

    /// No lease of the object or its cluster is held at all.
    async fn nothing_held(&self) {
        let leases = self.ns.api::<Lease>();
        for name in self.lease_names() {
            eventually(&format!("{name} released"), 60, || async {
                let lease = leases.get_opt(&name).await.ok()?;
                let holder = lease
                    .and_then(|l| l.spec)
                    .and_then(|s| s.holder_identity)
                    .filter(|h| !h.is_empty());
                holder.is_none().then_some(())
            })
            .await;
        }
    }

    /// The serial of the state as stored now.
    async fn serial(&self) -> u64 {
        read_state(&self.ns.client(), self.ns.name(), &self.suffix())
            .await
            .unwrap()
            .expect("a readable state")
            .serial
    }

    /// The serials of the object's state backups.
    async fn backups(&self) -> Vec<u64> {
        let obj = self.get().await.expect("the object");
        obj.data["status"]["stateBackups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b["serial"].as_u64())
            .collect()
    }

    /// A restore of backup `serial` killed at its start: it ran once, is
    /// recorded as succeeded, and nothing is left held.
    async fn restore_killed(&mut self, serial: u64) {
        let before = self.jobs_of("restore").len();
        self.patch(
            json!({"metadata": {"annotations": {"captf.io/restore-state": serial.to_string()}}}),
        )
        .await;
        let job = self.killed_once("restore", before).await;
        eventually("the restore recorded", 120, || async {
            let obj = self.get().await?;
            let status = &obj.data["status"];
            (condition(status, "RestoreJobSucceeded") == Some(("True", "StateRestored"))
                && status["lastRestoredSerial"].as_u64() == Some(serial))
            .then_some(())
        })
        .await;
        expect_event_noting(
            &self.ns,
            "StateRestored",
            "Normal",
            self.kind.kind(),
            self.name,
            &job,
        )
        .await;
    }

    /// The object deleted through `owner` (its Cluster API object), the
    /// destroy killed at its start: the object is gone with its state, one
    /// `Destroyed` event names the Job, and nothing is left held.
    async fn destroy_killed(&mut self, owner: Api<DynamicObject>) {
        owner
            .delete(self.name, &DeleteParams::default())
            .await
            .unwrap();
        let job = self.kill_when_started("destroy", 0).await;
        eventually(&format!("{} gone", self.name), 300, || async {
            self.get().await.is_none().then_some(())
        })
        .await;
        assert_eq!(self.jobs_of("destroy"), vec![job.clone()]);
        let state = state_secret(&self.suffix());
        let left: Vec<String> = self
            .ns
            .api::<Secret>()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|s| s.metadata.name)
            .filter(|n| n.starts_with(&state))
            .collect();
        assert!(left.is_empty(), "state Secrets left: {left:?}");
        let note = expect_event(&self.ns, "Destroyed", "Normal", self.kind.kind(), self.name).await;
        assert!(note.contains(&job), "{note}");
        let destroyed = event_notes(&self.ns, "Destroyed").await;
        assert_eq!(destroyed.len(), 1, "{destroyed:?}");
        self.nothing_held().await;
    }
}

/// `(status, reason)` of the condition `type_` in a status.
fn condition<'a>(status: &'a Value, type_: &str) -> Option<(&'a str, &'a str)> {
    let c = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    Some((c["status"].as_str()?, c["reason"].as_str()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_each_operation_of_a_pool() {
    let mut run = Run::start(WorkloadKind::MachinePool, "pool-a").await;
    // Membership refreshes only right after an apply: every refresh Job of
    // the test is one the test is waiting for.
    bring_up_with(
        &run.ns,
        2,
        json!({}),
        json!({"membershipRefreshIntervalSeconds": 3600}),
    )
    .await;

    run.first_apply_and_refresh_killed().await;

    let before = run.jobs_of("drift").len();
    run.patch(json!({"spec": {"drift": {"intervalSeconds": 20, "action": "Report"}}}))
        .await;
    let drift = run.killed_once("drift", before).await;
    let pool = run.get().await.unwrap();
    assert!(pool.data["status"]["lastDriftCheck"].is_string(), "{drift}");
    assert_eq!(
        condition(&pool.data["status"], "DriftDetected"),
        Some(("False", "NoDrift"))
    );
    // Drift every day from here on: the restore below is the next Job.
    run.patch(json!({"spec": {"drift": {"intervalSeconds": 86400}}}))
        .await;

    // A second serial to go back from: the pool scaled to 3.
    let first = run.backups().await.into_iter().min().expect("a backup");
    scale(&run.ns, 3).await;
    eventually("3 members applied and backed up", 240, || async {
        let pool = run.get().await?;
        let ids = pool.data["spec"]["providerIDList"].as_array()?.len();
        (ids == 3 && run.backups().await.iter().any(|&s| s > first)).then_some(())
    })
    .await;
    run.restore_killed(first).await;
    // The restored inputs are older than the spec: an apply brings the
    // third member back.
    eventually("3 members again", 300, || async {
        let pool = run.get().await?;
        let ids = pool.data["spec"]["providerIDList"].as_array()?.len();
        (ids == 3 && condition(&pool.data["status"], "Ready").is_some_and(|(s, _)| s == "True"))
            .then_some(())
    })
    .await;

    let machine_pools = Api::namespaced_with(
        run.ns.client(),
        run.ns.name(),
        &capi::machine_pool_resource(),
    );
    run.destroy_killed(machine_pools).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_each_operation_of_a_machine() {
    let mut run = Run::start(WorkloadKind::Machine, "m-0").await;
    cluster(&run.ns).await;
    // Health reading pending: a refresh follows the apply 30 s later.
    machine_pair(
        &run.ns,
        "m-0",
        false,
        json!({"variables": {"noop_health_state": "pending"}}),
    )
    .await;

    run.first_apply_and_refresh_killed().await;

    let before = run.jobs_of("drift").len();
    run.patch(json!({"spec": {"drift": {"intervalSeconds": 20}}}))
        .await;
    run.killed_once("drift", before).await;
    let machine = run.get().await.unwrap();
    assert!(machine.data["status"]["lastDriftCheck"].is_string());
    run.patch(json!({"spec": {"drift": {"intervalSeconds": 0}}}))
        .await;

    // A machine's inputs are immutable, so no apply makes an older serial;
    // the newest backup is restored (a state push of it all the same).
    let newest = run.backups().await.into_iter().max().expect("a backup");
    run.restore_killed(newest).await;

    run.destroy_killed(machines(&run.ns)).await;
}
