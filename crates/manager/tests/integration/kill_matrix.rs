//! The manager SIGKILLed while each operation runs: apply, destroy, refresh,
//! drift and restore of a TerraformCluster. The manager is the real binary
//! in its own process; it is killed the moment the operation's Job exists
//! (its status patch, its bookkeeping, everything after the create, may not
//! have happened), and a new manager process takes over. Each case ends
//! with exactly one Job for that operation, its result recorded
//! (`status.lastRun` names it), the same or the next state serial, and no
//! run lease, cluster lease or state lock left held. The real control plane,
//! Cluster API's controllers, the real node, the real runner and
//! OpenTofu.

use crate::support;

use std::collections::BTreeMap;

use captf_api::TerraformCluster;
use captf_manager::io::state::read_state;
use captf_manager::leases::{cluster_lease_name, run_lease_name};
use captf_manager::names::{WorkloadKind, state_lock_lease, state_secret, state_suffix};
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::clusters::{condition, create_cluster_with_variables, with_cluster_module, zone};
use support::job_log::JobLog;
use support::manager_process::ManagerProcess;
use support::*;

const NAME: &str = "prod";

struct Case {
    env: &'static TestEnv,
    ns: TestNamespace,
    tmp: tempfile::TempDir,
    jobs: JobLog,
    manager: Option<ManagerProcess>,
}

impl Case {
    async fn new(variables: Value, drift: Value) -> Case {
        let env = TestEnv::get().await;
        let ns = env.namespace().await;
        let tmp = tempfile::tempdir().unwrap();
        with_cluster_module(env, &ns, tmp.path()).await;
        let jobs = JobLog::start(&ns);
        let manager = ManagerProcess::spawn(env, ns.name(), &tmp.path().join("manager.log"));
        let module = module_ref("cluster", ns.name());
        create_cluster_with_variables(&ns, NAME, &module, variables).await;
        if !drift.is_null() {
            ns.api::<TerraformCluster>()
                .patch(
                    NAME,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"drift": drift}})),
                )
                .await
                .unwrap();
        }
        let case = Case {
            env,
            ns,
            tmp,
            jobs,
            manager: Some(manager),
        };
        // With its health held pending an applied cluster is not Ready
        // (before provisioning Ready waits for the infrastructure's
        // health): then its first apply's success is what a case starts on.
        eventually(
            "prod Ready, or applied with its health pending",
            240,
            || async {
                let tc = case.get().await?;
                let is = |type_: &str, status: &str, reason: Option<&str>| {
                    condition(&tc, type_)
                        .is_some_and(|(s, r)| s == status && reason.is_none_or(|want| r == want))
                };
                let pending = is("ApplyJobSucceeded", "True", None)
                    && is("InfrastructureHealthy", "False", Some("Provisioning"))
                    && !is("Ready", "True", None);
                (is("Ready", "True", None) || pending).then_some(())
            },
        )
        .await;
        case
    }

    async fn get(&self) -> Option<TerraformCluster> {
        self.ns
            .api::<TerraformCluster>()
            .get_opt(NAME)
            .await
            .ok()
            .flatten()
    }

    async fn patch(&self, patch: Value) {
        self.ns
            .api::<TerraformCluster>()
            .patch(NAME, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    /// Waits for the next Job of `op` after the `before` already seen,
    /// SIGKILLs the manager the moment it appears, and starts a new one.
    async fn kill_when_started(&mut self, op: &str, before: usize) -> String {
        let job = eventually(&format!("a {op} Job"), 240, || async {
            self.jobs.of_op(op).get(before).cloned()
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

    /// Waits until `status.lastRun` names `job`.
    async fn recorded(&self, job: &str) -> TerraformCluster {
        eventually(&format!("{job} recorded"), 300, || async {
            let tc = self.get().await?;
            (last_run(&tc).as_deref() == Some(job)).then_some(tc)
        })
        .await
    }

    /// Exactly `job` ran for `op` since `before`, and it succeeded; any Job
    /// of `op` after it was created once it had finished (the next one of a
    /// schedule, not a second start of the same run).
    async fn only_job(&self, op: &str, before: usize, job: &str) {
        let ops = self.jobs.of_op(op);
        assert_eq!(ops.get(before).map(String::as_str), Some(job), "{ops:?}");
        let got = self.ns.api::<Job>().get(job).await.unwrap();
        let status = got.status.unwrap_or_default();
        assert_eq!(status.succeeded, Some(1), "{job} succeeded");
        let finished = status.completion_time.expect("a completion time").0;
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

    /// No lease of the object or its cluster is held any more.
    async fn nothing_held(&self) {
        let suffix = state_suffix(WorkloadKind::Cluster, self.ns.name(), NAME);
        let leases = self.ns.api::<Lease>();
        for name in [
            run_lease_name(&suffix),
            cluster_lease_name(self.ns.name(), NAME),
            state_lock_lease(&suffix),
        ] {
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
}

fn last_run(tc: &TerraformCluster) -> Option<String> {
    Some(tc.status.as_ref()?.workspace.last_run.as_ref()?.job.clone())
}

impl Case {
    /// The serial of the state as stored now (the status's observed serial
    /// may trail it by a pass).
    async fn serial(&self) -> u64 {
        let suffix = state_suffix(WorkloadKind::Cluster, self.ns.name(), NAME);
        read_state(&self.ns.client(), self.ns.name(), &suffix)
            .await
            .unwrap()
            .expect("a readable state")
            .serial
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_an_apply() {
    let mut case = Case::new(Value::Null, Value::Null).await;
    let s0 = case.serial().await;
    let before = case.jobs.of_op("apply").len();
    case.patch(json!({"spec": {"variables": {"noop_exports_extra": {"zone": "b"}}}}))
        .await;
    let job = case.kill_when_started("apply", before).await;
    case.recorded(&job).await;
    eventually("zone b applied", 120, || async {
        let tc = case.get().await?;
        (zone(&tc).as_deref() == Some("b")).then_some(())
    })
    .await;
    assert_eq!(case.serial().await, s0 + 1, "the next state serial");
    case.only_job("apply", before, &job).await;
    case.nothing_held().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_a_refresh() {
    // Health reading pending after an apply brings a refresh 30 s later.
    let mut case = Case::new(json!({"noop_health_state": "pending"}), Value::Null).await;
    let job = case.kill_when_started("refresh", 0).await;
    // Read while the Job runs: no other Job of the object writes now.
    let s0 = case.serial().await;
    let tc = case.recorded(&job).await;
    assert!(tc.status.as_ref().unwrap().workspace.last_refresh.is_some());
    let s1 = case.serial().await;
    assert!(s1 == s0 || s1 == s0 + 1, "{s0} then {s1}");
    case.only_job("refresh", 0, &job).await;
    case.nothing_held().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_a_drift_check() {
    let mut case = Case::new(
        Value::Null,
        json!({"intervalSeconds": 20, "action": "Report"}),
    )
    .await;
    let job = case.kill_when_started("drift", 0).await;
    // Read while the Job runs: no other Job of the object writes now.
    let s0 = case.serial().await;
    let tc = case.recorded(&job).await;
    assert!(
        tc.status
            .as_ref()
            .unwrap()
            .workspace
            .last_drift_check
            .is_some()
    );
    assert_eq!(
        condition(&tc, "DriftJobSucceeded"),
        Some(("True".to_owned(), "DriftChecked".to_owned()))
    );
    let s1 = case.serial().await;
    assert!(s1 == s0 || s1 == s0 + 1, "{s0} then {s1}");
    case.only_job("drift", 0, &job).await;
    case.nothing_held().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_a_restore() {
    let mut case = Case::new(Value::Null, Value::Null).await;
    let s1 = eventually("the first backup", 60, || async {
        let tc = case.get().await?;
        let backups = tc.status.as_ref()?.workspace.state_backups.clone()?;
        backups.first().map(|b| b.serial)
    })
    .await;
    case.patch(json!({"spec": {"variables": {"noop_exports_extra": {"zone": "b"}}}}))
        .await;
    eventually("zone b applied and backed up", 240, || async {
        let tc = case.get().await?;
        let backups = tc.status.as_ref()?.workspace.state_backups.clone()?;
        (zone(&tc).as_deref() == Some("b") && backups.iter().any(|b| b.serial > s1)).then_some(())
    })
    .await;
    case.patch(json!({"metadata": {"annotations": {"captf.io/restore-state": s1.to_string()}}}))
        .await;
    let job = case.kill_when_started("restore", 0).await;
    eventually("the restore recorded", 300, || async {
        let tc = case.get().await?;
        (condition(&tc, "RestoreJobSucceeded")
            == Some(("True".to_owned(), "StateRestored".to_owned()))
            && tc.status.as_ref()?.workspace.last_restored_serial == Some(s1))
        .then_some(())
    })
    .await;
    case.only_job("restore", 0, &job).await;
    // The restored inputs are older than the spec: one apply brings zone b
    // back, after which nothing is held.
    eventually("zone b again", 300, || async {
        let tc = case.get().await?;
        (zone(&tc).as_deref() == Some("b")
            && condition(&tc, "Ready").is_some_and(|(s, _)| s == "True"))
        .then_some(())
    })
    .await;
    case.nothing_held().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_during_a_destroy() {
    let mut case = Case::new(Value::Null, Value::Null).await;
    case.ns
        .api::<TerraformCluster>()
        .delete(NAME, &Default::default())
        .await
        .unwrap();
    let job = case.kill_when_started("destroy", 0).await;
    eventually("the TerraformCluster gone", 300, || async {
        case.get().await.is_none().then_some(())
    })
    .await;
    assert_eq!(case.jobs.of_op("destroy"), vec![job.clone()]);
    let suffix = state_suffix(WorkloadKind::Cluster, case.ns.name(), NAME);
    let left: BTreeMap<String, ()> = case
        .ns
        .api::<Secret>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .filter(|n| n.starts_with(&state_secret(&suffix)))
        .map(|n| (n, ()))
        .collect();
    assert!(left.is_empty(), "state Secrets left: {left:?}");
    let destroyed = event_notes(&case.ns, "Destroyed").await;
    assert_eq!(destroyed.len(), 1, "{destroyed:?}");
    assert!(destroyed[0].contains(&job), "{}", destroyed[0]);
    case.nothing_held().await;
}
