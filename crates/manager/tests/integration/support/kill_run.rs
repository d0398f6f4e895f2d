//! A manager the test kills: the real binary in its own process
//! (`ManagerProcess`), SIGKILLed the moment an object's Job of some
//! operation exists and replaced by a new one, and what each kill must
//! leave: the Job run once and bookkept, its leases given back.

use captf_api::names::annotations;
use captf_manager::io::state::read_state;
use captf_manager::leases::{cluster_lease_name, run_lease_name};
use captf_manager::names::{WorkloadKind, state_lock_lease, state_secret, state_suffix};
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::job_log::JobLog;
use super::machines::infra_resource;
use super::manager_process::ManagerProcess;
use super::*;

/// One object of `kind` under a manager that the test kills.
pub struct Run {
    env: &'static TestEnv,
    pub ns: TestNamespace,
    jobs: JobLog,
    // Dropped before `tmp`, which holds its log: a failing test prints
    // the log's tail while it still exists.
    manager: Option<ManagerProcess>,
    tmp: tempfile::TempDir,
    kind: WorkloadKind,
    name: &'static str,
}

impl Run {
    /// A namespace with the noop modules of `roles` and a manager process
    /// watching it; the test then creates the `kind` object `name`.
    pub async fn start(kind: WorkloadKind, name: &'static str, roles: &[&str]) -> Run {
        let env = TestEnv::get().await;
        env.cluster_api().await;
        let ns = env.namespace().await;
        let tmp = tempfile::tempdir().unwrap();
        insert_manager(env, ns.name()).await;
        for role in roles {
            insert_module(
                env,
                &module_ref(role, ns.name()),
                module_image(tmp.path(), role, "v1", &[]),
            )
            .await;
        }
        install_runner_role(&ns.client()).await;
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

    pub fn api(&self) -> Api<DynamicObject> {
        let ar = infra_resource(self.kind.kind());
        Api::namespaced_with(self.ns.client(), self.ns.name(), &ar)
    }

    pub async fn get(&self) -> Option<DynamicObject> {
        self.api().get_opt(self.name).await.ok().flatten()
    }

    pub async fn patch(&self, patch: Value) {
        self.api()
            .patch(self.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    /// The object's Jobs of `op`, in the order they appeared.
    pub fn jobs_of(&self, op: &str) -> Vec<String> {
        let prefix = format!("captf-{}-{}-", self.kind.short(), self.name);
        self.jobs.of_object_op(&prefix, op)
    }

    /// Waits for the object's next Job of `op` after the `before` already
    /// seen, SIGKILLs the manager the moment it appears, and starts a new
    /// one.
    pub async fn kill_when_started(&mut self, op: &str, before: usize) -> String {
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
    pub async fn bookkept(&self, job: &str) {
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
    pub async fn only_job(&self, op: &str, before: usize, job: &str) {
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
    pub async fn killed_once(&mut self, op: &str, before: usize) -> String {
        let job = self.kill_when_started(op, before).await;
        self.ran_once(op, before, &job).await;
        job
    }

    /// `job`, the Job of `op` after the `before` already seen, ran once,
    /// was bookkept, and holds nothing any more.
    pub async fn ran_once(&self, op: &str, before: usize, job: &str) {
        self.bookkept(job).await;
        self.only_job(op, before, job).await;
        self.released_by(job).await;
    }

    /// The manager killed as the object's first apply starts, and again as
    /// the refresh that follows it starts (counted before the apply ends,
    /// which is when it may start); both ran once.
    pub async fn first_apply_and_refresh_killed(&mut self) {
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
    pub async fn released_by(&self, job: &str) {
        for name in self.lease_names() {
            eventually(&format!("{name} released by {job}"), 60, || async {
                let holder = self.holder(&name).await?.unwrap_or_default();
                (!holder.starts_with(job)).then_some(())
            })
            .await;
        }
    }

    /// The holder of lease `name` as read now (`None` inside: no lease, or
    /// one held by nobody); `None` outside when the read failed.
    async fn holder(&self, name: &str) -> Option<Option<String>> {
        let lease = self.ns.api::<Lease>().get_opt(name).await.ok()?;
        Some(
            lease
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
                .filter(|h| !h.is_empty()),
        )
    }

    /// No lease of the object or its cluster is held at all.
    pub async fn nothing_held(&self) {
        for name in self.lease_names() {
            eventually(&format!("{name} released"), 60, || async {
                self.holder(&name).await?.is_none().then_some(())
            })
            .await;
        }
    }

    /// Waits until `status.lastRun` names `job`, and returns the object.
    pub async fn recorded(&self, job: &str) -> DynamicObject {
        eventually(&format!("{job} recorded"), 300, || async {
            let obj = self.get().await?;
            (obj.data["status"]["lastRun"]["job"] == job).then_some(obj)
        })
        .await
    }

    /// The serial of the state as stored now.
    pub async fn serial(&self) -> u64 {
        read_state(&self.ns.client(), self.ns.name(), &self.suffix())
            .await
            .unwrap()
            .expect("a readable state")
            .serial
    }

    /// The serials of the object's state backups.
    pub async fn backups(&self) -> Vec<u64> {
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
    pub async fn restore_killed(&mut self, serial: u64) {
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
    pub async fn destroy_killed(&mut self, owner: Api<DynamicObject>) {
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
pub fn condition<'a>(status: &'a Value, type_: &str) -> Option<(&'a str, &'a str)> {
    let c = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    Some((c["status"].as_str()?, c["reason"].as_str()?))
}
