//! State backups and restore end to end (`internals.md` §4 scenario 28 and
//! the restore half of the safety issue): a TerraformCluster applied three
//! times is backed up once per new serial, pruned to `--state-backups=2`
//! and listed newest first; a restore request naming a kept serial runs a
//! restore Job that brings that serial's outputs back, with no apply; a
//! request naming no backup starts nothing; a deletion held by a lost
//! state restores the backup it is asked for, then destroys what the
//! restored state records. Controllers in this process,
//! the real control plane, Cluster API's controllers owning the Cluster,
//! the real node running the real runner and OpenTofu.
//!
//! Cost: a pass over a state serial it saw already makes no backup request;
//! each new serial costs one LIST of the object's backups, one create per
//! chunk and one delete per pruned chunk.

use crate::support;

use std::collections::BTreeSet;

use captf_api::TerraformCluster;
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::clusters::{create_cluster_with_variables, with_cluster_module};
use support::*;

const BACKUP_SELECTOR: &str = "captf.io/state-backup=true";

async fn create(ns: &TestNamespace, name: &str, zone: &str) {
    let image = module_ref("cluster", ns.name());
    let variables = json!({"noop_exports_extra": {"zone": zone}});
    create_cluster_with_variables(ns, name, &image, variables).await;
}

fn status(tc: &TerraformCluster) -> Value {
    serde_json::to_value(tc)
        .unwrap()
        .get("status")
        .cloned()
        .unwrap_or(Value::Null)
}

fn condition(tc: &TerraformCluster, type_: &str) -> Option<(String, String)> {
    let c = tc
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

fn zone(tc: &TerraformCluster) -> Option<String> {
    status(tc)["exports"]["zone"].as_str().map(str::to_owned)
}

/// The cluster once its exports say `zone` and its state serial is seen
/// past `after`; returns that serial.
async fn applied(ns: &TestNamespace, name: &str, zone_now: &str, after: u64) -> u64 {
    let api = ns.api::<TerraformCluster>();
    eventually(
        &format!("zone {zone_now} applied and seen"),
        300,
        || async {
            let tc = api.get(name).await.ok()?;
            let serial = status(&tc)["observedStateSerial"].as_u64()?;
            (zone(&tc).as_deref() == Some(zone_now)
                && serial > after
                && tc.status.as_ref()?.workspace.active_job.is_none())
            .then_some(serial)
        },
    )
    .await
}

async fn set_zone(ns: &TestNamespace, name: &str, zone: &str, annotations: Value) {
    ns.api::<TerraformCluster>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": annotations},
                "spec": {"variables": {"noop_exports_extra": {"zone": zone}}},
            })),
        )
        .await
        .unwrap();
}

/// The backup Secrets, by serial annotation.
async fn backup_serials(ns: &TestNamespace) -> BTreeSet<u64> {
    ns.api::<Secret>()
        .list(&ListParams::default().labels(BACKUP_SELECTOR))
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|s| {
            s.metadata
                .annotations
                .as_ref()?
                .get("captf.io/state-backup-serial")?
                .parse()
                .ok()
        })
        .collect()
}

fn jobs_of_op(jobs: &[Job], op: &str) -> Vec<Job> {
    jobs.iter().filter(|j| job_op(j) == op).cloned().collect()
}

#[tokio::test]
async fn each_new_serial_is_backed_up_once_and_a_restore_brings_its_outputs_back() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    with_cluster_module(env, &ns, tmp.path()).await;
    let manager = start_manager_with(ns.client(), ns.name(), |c| c.state_backups = 2);

    create(&ns, "kept", "a").await;
    let s1 = applied(&ns, "kept", "a", 0).await;
    eventually("the first backup", 60, || async {
        (backup_serials(&ns).await == BTreeSet::from([s1])).then_some(())
    })
    .await;

    set_zone(&ns, "kept", "b", json!({})).await;
    let s2 = applied(&ns, "kept", "b", s1).await;
    set_zone(&ns, "kept", "c", json!({})).await;
    let s3 = applied(&ns, "kept", "c", s2).await;

    // Three serials, three backups taken, the oldest pruned.
    let tc = eventually("two backups, newest first, in status", 60, || async {
        let tc = ns.api::<TerraformCluster>().get("kept").await.ok()?;
        let listed: Vec<u64> = status(&tc)["stateBackups"]
            .as_array()?
            .iter()
            .filter_map(|b| b["serial"].as_u64())
            .collect();
        (listed == [s3, s2] && backup_serials(&ns).await == BTreeSet::from([s2, s3])).then_some(tc)
    })
    .await;
    for b in status(&tc)["stateBackups"].as_array().unwrap() {
        assert!(b["bytes"].as_u64().unwrap() >= 1, "{b}");
        assert!(b["takenAt"].as_str().is_some(), "{b}");
    }
    let metrics = manager.metrics.encode();
    for series in [
        r#"captf_state_backups_total{kind="TerraformCluster",result="taken"} 3"#,
        r#"captf_state_backups_total{kind="TerraformCluster",result="pruned"} 1"#,
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }
    let backups = ns
        .api::<Secret>()
        .list(&ListParams::default().labels(BACKUP_SELECTOR))
        .await
        .unwrap()
        .items;
    for b in &backups {
        let labels = b.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels
                .get("clusterctl.cluster.x-k8s.io/move")
                .map(String::as_str),
            Some("")
        );
        assert_eq!(
            labels
                .get("cluster.x-k8s.io/cluster-name")
                .map(String::as_str),
            Some("kept")
        );
        assert!(
            !labels.contains_key("tfstate"),
            "a backup is no state Secret to the backend"
        );
        let owner = &b.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("TerraformCluster", None)
        );
    }
    let events = ns
        .api::<k8s_openapi::api::events::v1::Event>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let notes: Vec<String> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("StateBackedUp"))
        .map(|e| format!("{:?} x{}", e.note, e.series.as_ref().map_or(1, |s| s.count)))
        .collect();
    let backed_up: i32 = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("StateBackedUp"))
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum();
    assert_eq!(backed_up, 3, "one StateBackedUp per backup: {notes:?}");

    // A request naming no backup starts nothing.
    let jobs = ns.api::<Job>();
    let before = jobs.list(&ListParams::default()).await.unwrap().items.len();
    ns.api::<TerraformCluster>()
        .patch(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"captf.io/restore-state": s1.to_string()}}}),
            ),
        )
        .await
        .unwrap();
    eventually(
        "RestoreBackupNotFound for the pruned serial",
        60,
        || async {
            let tc = ns.api::<TerraformCluster>().get("kept").await.ok()?;
            (condition(&tc, "RestoreJobSucceeded")
                == Some(("False".into(), "RestoreBackupNotFound".into())))
            .then_some(())
        },
    )
    .await;
    assert_eq!(
        jobs.list(&ListParams::default()).await.unwrap().items.len(),
        before
    );
    expect_event_noting(
        &ns,
        "StateRestoreFailed",
        "Warning",
        "TerraformCluster",
        "kept",
        &format!("captf.io/restore-state=\"{s1}\""),
    )
    .await;

    // Back to zone b's inputs, restoring zone b's serial: the restore runs
    // first and leaves nothing to apply.
    let applies_before = jobs_of_op(
        &jobs.list(&ListParams::default()).await.unwrap().items,
        "apply",
    )
    .len();
    set_zone(
        &ns,
        "kept",
        "b",
        json!({"captf.io/restore-state": s2.to_string()}),
    )
    .await;
    let tc = eventually("the restore to succeed", 300, || async {
        let tc = ns.api::<TerraformCluster>().get("kept").await.ok()?;
        (condition(&tc, "RestoreJobSucceeded") == Some(("True".into(), "StateRestored".into()))
            && status(&tc)["lastRestoredSerial"].as_u64() == Some(s2)
            && zone(&tc).as_deref() == Some("b"))
        .then_some(tc)
    })
    .await;
    assert!(
        !tc.metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .contains_key("captf.io/restore-state"),
        "a done restore request is removed"
    );
    let listed = jobs.list(&ListParams::default()).await.unwrap().items;
    let restores = jobs_of_op(&listed, "restore");
    assert_eq!(restores.len(), 1, "one restore Job");
    let restore_serial = restores[0]
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("captf.io/restore-serial"))
        .cloned();
    assert_eq!(restore_serial, Some(s2.to_string()));
    // The restored state is adopted with the backup's inputs hash, which
    // are the inputs now: a pass woken after the restore finds nothing to
    // apply.
    support::touch::touch_cluster_state(&ns, &manager, "kept").await;
    let listed = jobs.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(
        jobs_of_op(&listed, "apply").len(),
        applies_before,
        "no apply after the restore"
    );
    let tc = ns.api::<TerraformCluster>().get("kept").await.unwrap();
    assert_eq!(
        condition(&tc, "InputsApplied").map(|c| c.0),
        Some("True".into())
    );
    assert!(
        manager.metrics.encode().contains(
            r#"captf_state_restores_total{kind="TerraformCluster",result="succeeded"} 1"#
        )
    );
}

/// Scenario 29, the API-error half: the create of the first backup's
/// Secret fails; the serial stays unseen and a later pass (10 s on) takes
/// the backup. Had the failure marked the serial seen, no backup of it
/// would ever exist. With `--state-backups=0` none is taken and the serial
/// is still recorded.
#[tokio::test]
async fn a_backup_lost_to_an_api_error_is_taken_by_a_later_pass_and_none_when_off() {
    use http::Method;
    use support::faults::{Faults, Rule};
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    with_cluster_module(env, &ns, tmp.path()).await;
    // The create right after the first list of backups is the backup's.
    let faults = Faults::new(vec![
        Rule::new(Method::POST, "/secrets", 1).after(Method::GET, "state-backup"),
    ]);
    let _manager = start_manager(faults.client(env.config()), ns.name());
    create(&ns, "retried", "a").await;
    let s1 = applied(&ns, "retried", "a", 0).await;
    eventually("the backup taken after the failure", 90, || async {
        (backup_serials(&ns).await == BTreeSet::from([s1])).then_some(())
    })
    .await;
    assert_eq!(faults.failed.lock().unwrap()[0], 1, "the fault fired");
    drop(_manager);

    // Backups off: the serial is seen, nothing is written.
    let off = env.namespace().await;
    with_cluster_module(env, &off, &tmp.path().join("off")).await;
    let _off = start_manager_with(off.client(), off.name(), |c| c.state_backups = 0);
    create(&off, "unkept", "a").await;
    let serial = applied(&off, "unkept", "a", 0).await;
    assert!(serial >= 1);
    assert!(
        backup_serials(&off).await.is_empty(),
        "no backup with --state-backups=0"
    );
}

/// A restore during deletion (`internals.md` §4 scenario 2, end to end):
/// the state Secret of an applied cluster is lost, so its deletion is held
/// (`DeletionHeld`: nothing to destroy from, and the finalizer stays). A
/// restore request naming a kept backup runs, deletion or not; the restored
/// state is then destroyed and the object goes. Had the deletion ignored
/// the request, the finalizer could only be dropped by hand and the
/// infrastructure would be orphaned.
#[tokio::test]
async fn a_held_deletion_restores_the_requested_backup_then_destroys_it() {
    use captf_manager::names::{WorkloadKind, state_secret, state_suffix};
    use kube::api::DeleteParams;
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    with_cluster_module(env, &ns, tmp.path()).await;
    let _manager = start_manager(ns.client(), ns.name());
    let tcs = ns.api::<TerraformCluster>();

    create(&ns, "lost", "a").await;
    let serial = applied(&ns, "lost", "a", 0).await;
    eventually("the backup", 60, || async {
        (backup_serials(&ns).await == BTreeSet::from([serial])).then_some(())
    })
    .await;

    // The state is lost: the object is held, live and then deleting.
    let suffix = state_suffix(WorkloadKind::Cluster, ns.name(), "lost");
    ns.api::<Secret>()
        .delete(&state_secret(&suffix), &DeleteParams::default())
        .await
        .unwrap();
    eventually("StateLost", 60, || async {
        let tc = tcs.get("lost").await.ok()?;
        (condition(&tc, "StateReadable") == Some(("False".into(), "StateLost".into())))
            .then_some(())
    })
    .await;
    let clusters: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        ns.client(),
        ns.name(),
        &captf_manager::capi::cluster_resource(),
    );
    clusters
        .delete("lost", &DeleteParams::default())
        .await
        .unwrap();
    let tc = support::clusters::deletion_held(&ns, "lost").await;
    assert!(
        tc.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty()),
        "a deletion with its state lost keeps the finalizer"
    );
    let jobs = ns.api::<Job>();
    let listed = jobs.list(&ListParams::default()).await.unwrap().items;
    assert!(
        jobs_of_op(&listed, "destroy").is_empty(),
        "nothing to destroy from"
    );

    // The restore runs, then the destroy, and the object goes.
    ns.api::<TerraformCluster>()
        .patch(
            "lost",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"captf.io/restore-state": serial.to_string()}}}),
            ),
        )
        .await
        .unwrap();
    let ops = std::sync::Mutex::new(Vec::<(String, String)>::new());
    eventually("the object gone", 300, || async {
        // Jobs go with the object: note each one while it is there.
        for j in jobs.list(&ListParams::default()).await.ok()?.items {
            let name = j.metadata.name.clone().unwrap_or_default();
            let mut seen = ops.lock().unwrap();
            if !seen.iter().any(|(n, _)| *n == name) {
                seen.push((name, job_op(&j)));
            }
        }
        tcs.get_opt("lost").await.ok()?.is_none().then_some(())
    })
    .await;
    let seen: Vec<String> = ops.into_inner().unwrap().into_iter().map(|o| o.1).collect();
    let restore = seen.iter().position(|o| o == "restore");
    let destroy = seen.iter().position(|o| o == "destroy");
    assert!(
        restore.is_some() && destroy.is_some() && restore < destroy,
        "a restore, then a destroy: {seen:?}"
    );
    assert_eq!(
        seen.iter().filter(|o| *o == "destroy").count(),
        1,
        "{seen:?}"
    );
    let destroyed = event_notes(&ns, "Destroyed").await;
    assert_eq!(destroyed.len(), 1, "{destroyed:?}");
    let restored = event_notes(&ns, "StateRestored").await;
    assert_eq!(restored.len(), 1, "{restored:?}");
}
