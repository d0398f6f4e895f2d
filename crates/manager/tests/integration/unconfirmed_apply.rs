//! An apply whose outcome is unknown (`internals.md` §4 scenario 14, through
//! the vanished-Job trigger): a TerraformCluster's first apply Job is
//! deleted while it runs, before any state exists. Its pod cannot start (the
//! module image is not on the node yet), which makes the moment
//! deterministic; the manager cannot know that, and holds the object with
//! `StateReadable=False/ApplyOutcomeUnknown` naming the Job: no second
//! apply, and a deletion keeps its finalizer. A confirmation naming another
//! Job is ignored; one naming the Job is consumed and releases the object.
//! A TerraformMachine's vanished first apply is held the same way, and so
//! is a deletion whose owner is gone (scenario 17).
//! Controllers in this process, the real control plane, Cluster API's
//! controllers owning the Cluster, the real node, the real runner.

use crate::support;

use captf_api::{TerraformCluster, TerraformMachine};
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::clusters::create_cluster;
use support::*;

const OP_LABEL: &str = "captf.infrastructure.cluster.x-k8s.io/op";

fn reason(tc: &TerraformCluster, type_: &str) -> Option<(String, String)> {
    let c = tc
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

fn applies(jobs: &[Job]) -> Vec<String> {
    jobs.iter()
        .filter(|j| {
            j.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(OP_LABEL))
                .map(String::as_str)
                == Some("apply")
        })
        .filter_map(|j| j.metadata.name.clone())
        .collect()
}

/// Deletes the first apply Job of `name` while it is running (once its
/// attempt record names it, as it does right after the Job is created), and
/// returns its name.
async fn delete_first_apply(ns: &TestNamespace, name: &str, kind_code: &str) -> String {
    let jobs = ns.api::<Job>();
    let selector = format!("captf.infrastructure.cluster.x-k8s.io/owner-name={name}");
    let job = eventually("the first apply Job", 120, || async {
        let listed = jobs
            .list(&ListParams::default().labels(&selector))
            .await
            .ok()?
            .items;
        applies(&listed).into_iter().next()
    })
    .await;
    let record = format!("captf-inputs-{kind_code}-{name}");
    eventually("the attempt record naming the Job", 60, || async {
        let s = ns.api::<Secret>().get_opt(&record).await.ok()??;
        (s.metadata.annotations?.get("captf.io/job") == Some(&job)).then_some(())
    })
    .await;
    jobs.delete(&job, &DeleteParams::background())
        .await
        .unwrap();
    job
}

/// A TerraformMachine on `image` under the cluster `live`, and the Machine
/// naming it, with the bootstrap data a bootstrap provider would write.
async fn machine(ns: &TestNamespace, name: &str, image: &str) {
    let boot: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-boot"), "labels": {"cluster.x-k8s.io/cluster-name": "live"}},
        "stringData": {"value": "#cloud-config\n", "format": "cloud-config"},
    }))
    .unwrap();
    ns.api::<Secret>()
        .create(&PostParams::default(), &boot)
        .await
        .unwrap();
    let tm: TerraformMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachine",
        "metadata": {"name": name},
        "spec": {"source": {"image": image},
                 "identityRef": {"kind": "Secret", "name": "live-creds"},
                 "drift": {"intervalSeconds": 0}},
    }))
    .unwrap();
    ns.api::<TerraformMachine>()
        .create(&PostParams::default(), &tm)
        .await
        .unwrap();
    let machines: Api<kube::api::DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &captf_manager::capi::machine_resource(),
    );
    let m = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name},
        "spec": {"clusterName": "live", "version": "v1.37.2",
                 "bootstrap": {"dataSecretName": format!("{name}-boot")},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachine", "name": name}},
    }))
    .unwrap();
    machines.create(&PostParams::default(), &m).await.unwrap();
}

async fn annotate(ns: &TestNamespace, name: &str, value: &str) {
    ns.api::<TerraformCluster>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"captf.io/confirm-no-resources": value}}}),
            ),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_first_apply_holds_until_the_operator_confirms_it_created_nothing() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    insert_manager(env, ns.name()).await;
    install_runner_role(&ns.client()).await;
    let manager = start_manager(ns.client(), ns.name());
    let tcs = ns.api::<TerraformCluster>();
    let jobs = ns.api::<Job>();

    // A live object: held, never applied again.
    let module = module_ref("cluster", ns.name());
    create_cluster(&ns, "live", &module).await;
    let lost = delete_first_apply(&ns, "live", "c").await;
    let held = eventually("live held with ApplyOutcomeUnknown", 120, || async {
        let tc = tcs.get("live").await.ok()?;
        (reason(&tc, "StateReadable") == Some(("False".into(), "ApplyOutcomeUnknown".into())))
            .then_some(tc)
    })
    .await;
    let interrupted =
        expect_event(&ns, "JobInterrupted", "Warning", "TerraformCluster", "live").await;
    assert!(interrupted.contains(&lost), "{interrupted}");
    let message = held.status.as_ref().unwrap().conditions.as_ref().unwrap();
    let readable = message.iter().find(|c| c.type_ == "StateReadable").unwrap();
    assert!(readable.message.contains(&lost), "{}", readable.message);
    assert!(
        readable.message.contains("captf.io/confirm-no-resources"),
        "{}",
        readable.message
    );
    // The module can run now: only the hold keeps the apply from starting.
    insert_module(env, &module, module_image(tmp.path(), "cluster", "v1", &[])).await;
    annotate(&ns, "live", "captf-c-live-apply-a9-000000").await;
    // Ignored, and said so by the pass that read it, which started nothing.
    eventually("the other Job's confirmation to be named", 60, || async {
        let tc = tcs.get("live").await.ok()?;
        let c = tc
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "StateReadable")?;
        (c.reason == "ApplyOutcomeUnknown"
            && c.message
                .contains("\"captf-c-live-apply-a9-000000\", not this Job, and is ignored"))
        .then_some(())
    })
    .await;
    let all = jobs.list(&ListParams::default()).await.unwrap().items;
    assert!(
        applies(&all).is_empty(),
        "no second apply: {:?}",
        applies(&all)
    );
    let events = ns
        .api::<k8s_openapi::api::events::v1::Event>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("StateLost")),
        "entering the hold emits StateLost"
    );

    // Naming the Job releases it: the mark and the annotation go, and the
    // apply runs again.
    annotate(&ns, "live", &lost).await;
    let applied = eventually("live applied after the confirmation", 240, || async {
        let tc = tcs.get("live").await.ok()?;
        let ready = reason(&tc, "Ready") == Some(("True".into(), "Ready".into()));
        let consumed = !tc
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("captf.io/confirm-no-resources"));
        (ready && consumed).then_some(tc)
    })
    .await;
    // What the status says of the state it read.
    let status = applied.status.as_ref().unwrap();
    assert_eq!(
        status.workspace.state_secret_suffix.as_deref(),
        Some(captf_manager::names::state_suffix(
            captf_manager::names::WorkloadKind::Cluster,
            ns.name(),
            "live"
        ))
        .as_deref()
    );
    assert!(
        status
            .workspace
            .observed_state_serial
            .is_some_and(|s| s >= 1)
    );
    // The runner stops its runtime within the pod's grace period.
    let all = jobs.list(&ListParams::default()).await.unwrap().items;
    let args = all
        .iter()
        .find(|j| applies(std::slice::from_ref(j)).len() == 1)
        .map(job_args)
        .unwrap_or_default();
    assert!(args.iter().any(|a| a == "--stop-timeout=570s"), "{args:?}");

    // A machine's infrastructure is immutable, but an unknown first apply
    // holds it all the same (scenario 19 as the newest design has it: every
    // kind records it).
    machine(
        &ns,
        "m-0",
        &format!("{}-unpulled", module_ref("machine", ns.name())),
    )
    .await;
    let lost_machine = delete_first_apply(&ns, "m-0", "m").await;
    let tms = ns.api::<TerraformMachine>();
    let held = eventually("the machine held", 120, || async {
        let tm = tms.get("m-0").await.ok()?;
        let c = tm
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "StateReadable")?
            .clone();
        (c.reason == "ApplyOutcomeUnknown").then_some(c)
    })
    .await;
    assert!(held.message.contains(&lost_machine), "{}", held.message);

    // A deleting object keeps its finalizer while held; the confirmation
    // lets it go (no state: nothing to destroy).
    // Its image is one the node never has: its apply cannot start.
    create_cluster(&ns, "gone", &format!("{module}-unpulled")).await;
    let lost = delete_first_apply(&ns, "gone", "c").await;
    eventually("gone held", 120, || async {
        let tc = tcs.get("gone").await.ok()?;
        (reason(&tc, "StateReadable") == Some(("False".into(), "ApplyOutcomeUnknown".into())))
            .then_some(())
    })
    .await;
    let clusters: Api<kube::api::DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &captf_manager::capi::cluster_resource(),
    );
    clusters
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap();
    let tc = eventually("the deletion to wait on the hold", 60, || async {
        let tc = tcs.get("gone").await.ok()?;
        let waits = tc.status.as_ref()?.conditions.as_ref()?.iter().any(|c| {
            c.type_ == "Deleting"
                && c.message
                    .starts_with("the deletion waits, keeping the finalizer")
        });
        waits.then_some(tc)
    })
    .await;
    assert!(
        tc.metadata.deletion_timestamp.is_some(),
        "the deletion is under way"
    );
    assert!(
        tc.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty()),
        "the hold keeps the finalizer"
    );
    annotate(&ns, "gone", &lost).await;
    eventually("gone released", 120, || async {
        tcs.get_opt("gone").await.ok()?.is_none().then_some(())
    })
    .await;

    // Scenario 17: a deletion whose owner is gone (its owner reference
    // removed, as the garbage collector does for an orphaning deletion)
    // keeps the finalizer all the same while an apply of unknown outcome
    // holds it; without an owner the pass would otherwise let go of an
    // object that seems never to have made anything.
    create_cluster(&ns, "orphaned", &format!("{module}-unpulled")).await;
    let lost = delete_first_apply(&ns, "orphaned", "c").await;
    eventually("orphaned held", 120, || async {
        let tc = tcs.get("orphaned").await.ok()?;
        (reason(&tc, "StateReadable") == Some(("False".into(), "ApplyOutcomeUnknown".into())))
            .then_some(())
    })
    .await;
    clusters
        .delete("orphaned", &DeleteParams::default())
        .await
        .unwrap();
    eventually("orphaned deleting", 120, || async {
        let tc = tcs.get("orphaned").await.ok()?;
        tc.metadata.deletion_timestamp.is_some().then_some(())
    })
    .await;
    tcs.patch(
        "orphaned",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"ownerReferences": null}})),
    )
    .await
    .unwrap();
    let tc = tcs.get("orphaned").await.unwrap();
    assert!(
        tc.metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty),
        "{:?}",
        tc.metadata.owner_references
    );
    // A pass woken now, with no owner left, keeps the hold (the object
    // itself is touched: its first apply left no state Secret).
    support::touch::touch_cluster(&ns, &manager, "orphaned").await;
    let tc = tcs.get("orphaned").await.unwrap();
    assert!(
        tc.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty()),
        "the hold keeps an ownerless deletion's finalizer"
    );
    annotate(&ns, "orphaned", &lost).await;
    eventually("orphaned released", 120, || async {
        tcs.get_opt("orphaned").await.ok()?.is_none().then_some(())
    })
    .await;
}

/// An attempt record written by an earlier release, whose mark of a
/// vanished apply is `captf.io/interrupted-apply`: read as the same mark
/// (RESOLUTIONS 26), it holds the object as the current one does; the
/// operator's confirmation releases it, and the rewritten record carries
/// neither key (the old one is not this manager's to drop with its own
/// server-side apply, so it is removed on its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_interrupted_apply_mark_holds_alike_and_goes_on_release() {
    use captf_manager::names::WorkloadKind;
    use captf_manager::records::{InputsRecord, RecordMeta, attempt_record_name, record_labels};
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    insert_manager(env, ns.name()).await;
    install_runner_role(&ns.client()).await;
    let tcs = ns.api::<TerraformCluster>();
    // An image the node never has: whatever apply starts cannot run.
    let image = format!("{}-unpulled", module_ref("cluster", ns.name()));
    create_cluster(&ns, "legacy", &image).await;
    let tc = tcs.get("legacy").await.unwrap();
    let lost = "captf-c-legacy-apply-a1-0a0a0a";
    let record = InputsRecord {
        main_tf_json: "{}".into(),
        tfvars_json: "{}".into(),
        meta: RecordMeta {
            inputs_hash: "h2:0".into(),
            image: image.clone(),
            job: Some(lost.into()),
            ..Default::default()
        },
        exports: Default::default(),
    };
    let (data, mut annotations) = record.to_secret_parts();
    annotations.insert("captf.io/interrupted-apply".into(), lost.into());
    let name = attempt_record_name(WorkloadKind::Cluster, "legacy");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": record_labels(WorkloadKind::Cluster, "legacy"),
                     "annotations": annotations,
                     "ownerReferences": [{"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
                                          "kind": "TerraformCluster", "name": "legacy",
                                          "uid": tc.metadata.uid}]},
        "data": data,
    }))
    .unwrap();
    let secrets = ns.api::<Secret>();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let _manager = start_manager(ns.client(), ns.name());
    let held = eventually("held with ApplyOutcomeUnknown", 120, || async {
        let tc = tcs.get("legacy").await.ok()?;
        let c = tc
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "StateReadable")?;
        (c.status == "False" && c.reason == "ApplyOutcomeUnknown").then_some(c)
    })
    .await;
    assert!(held.message.contains(lost), "{}", held.message);
    let jobs = ns.api::<Job>();
    assert!(
        applies(&jobs.list(&ListParams::default()).await.unwrap().items).is_empty(),
        "no apply while held"
    );

    annotate(&ns, "legacy", lost).await;
    eventually("an apply and a record with neither mark", 120, || async {
        let started = !applies(&jobs.list(&ListParams::default()).await.ok()?.items).is_empty();
        let marks = secrets.get(&name).await.ok()?.metadata.annotations?;
        let unmarked = !marks.contains_key("captf.io/interrupted-apply")
            && !marks.contains_key("captf.io/unconfirmed-apply");
        (started && unmarked).then_some(())
    })
    .await;
}
