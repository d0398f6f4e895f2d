//! The manager's crash windows, opened by a client layer that fails chosen
//! requests: what a pass did before the failure must be picked up by the
//! next pass, never repeated or lost. Cluster API's controllers own the
//! clusters.

use crate::support;

use captf_api::TerraformCluster;
use captf_testenv::{TestEnv, TestNamespace, eventually};
use http::Method;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Secret};
use kube::api::{ListParams, PostParams};
use serde_json::json;
use support::faults::{Faults, Rule};
use support::*;

async fn create_cluster(ns: &TestNamespace, name: &str) {
    create_capi_cluster(ns, name).await;
    let creds: Secret = serde_json::from_value(
        json!({"metadata": {"name": "creds"}, "stringData": {"token": "x"}}),
    )
    .unwrap();
    let _ = ns
        .api::<Secret>()
        .create(&PostParams::default(), &creds)
        .await;
    let tc: TerraformCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "metadata": {"name": name},
        "spec": {"source": {"image": module_ref("cluster", ns.name())}, "identityRef": {"kind": "Secret", "name": "creds"}, "drift": {"intervalSeconds": 0}},
    }))
    .unwrap();
    ns.api::<TerraformCluster>()
        .create(&PostParams::default(), &tc)
        .await
        .unwrap();
}

async fn ready(ns: &TestNamespace, name: &str, secs: u64) -> TerraformCluster {
    let api = ns.api::<TerraformCluster>();
    eventually("the cluster to become Ready", secs, || async {
        let tc = api.get(name).await.ok()?;
        let ready = tc
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        (ready && tc.status.as_ref()?.workspace.active_job.is_none()).then_some(tc)
    })
    .await
}

async fn with_faults(
    rules: Vec<Rule>,
) -> (
    &'static TestEnv,
    TestNamespace,
    tempfile::TempDir,
    Faults,
    Manager,
) {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    insert_manager(env, ns.name()).await;
    insert_module(
        env,
        &module_ref("cluster", ns.name()),
        module_image(tmp.path(), "cluster", "v1", &[]),
    )
    .await;
    install_runner_role(&ns.client()).await;
    let faults = Faults::new(rules);
    let manager = start_manager(faults.client(env.config()), ns.name());
    (env, ns, tmp, faults, manager)
}

#[tokio::test]
async fn a_status_patch_lost_after_the_job_create_adopts_the_same_job() {
    let rule =
        Rule::new(Method::PATCH, "/terraformclusters/one/status", 1).after(Method::POST, "/jobs");
    let (_env, ns, _tmp, faults, _m) = with_faults(vec![rule]).await;
    create_cluster(&ns, "one").await;
    ready(&ns, "one", 240).await;
    assert_eq!(faults.failed.lock().unwrap()[0], 1, "the fault fired");
    let jobs = ns
        .api::<Job>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(
        jobs.len(),
        1,
        "one Job in total: {:?}",
        jobs.iter()
            .map(|j| j.metadata.name.clone())
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_job_without_its_run_secret_is_deleted_and_started_again() {
    // The per-run Secret create is lost right after the Job create.
    let rule = Rule::new(Method::POST, "/secrets", 1).after(Method::POST, "/jobs");
    let (_env, ns, _tmp, faults, _m) = with_faults(vec![rule]).await;
    create_cluster(&ns, "two").await;
    ready(&ns, "two", 300).await;
    assert_eq!(faults.failed.lock().unwrap()[0], 1, "the fault fired");
    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("StuckJobDeleted")),
        "the Job that could never start was deleted"
    );
    let jobs = ns
        .api::<Job>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(jobs.len(), 1, "only the restarted Job remains");
}

#[tokio::test]
async fn a_finished_job_whose_status_patch_failed_is_counted_once() {
    // Bookkeeping reads the finished Job's pod, then its status patch is lost.
    let rule =
        Rule::new(Method::PATCH, "/terraformclusters/three/status", 1).after(Method::GET, "/pods");
    let (_env, ns, _tmp, faults, _m) = with_faults(vec![rule]).await;
    create_cluster(&ns, "three").await;
    let tc = ready(&ns, "three", 240).await;
    assert_eq!(faults.failed.lock().unwrap()[0], 1, "the fault fired");
    // Bookkeeping marks the Job after its status write: wait for the mark.
    let jobs = eventually("the Job marked bookkept", 60, || async {
        let jobs = ns
            .api::<Job>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items;
        let marked = jobs.iter().any(|j| {
            j.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key("captf.io/bookkept"))
        });
        marked.then_some(jobs)
    })
    .await;
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    let name = job.metadata.name.clone().unwrap();
    assert!(
        job.metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key("captf.io/bookkept")
    );
    assert_eq!(tc.status.unwrap().workspace.last_run.unwrap().job, name);
    // Promoted once: the applied record names the Job.
    let applied = ns
        .api::<Secret>()
        .get("captf-applied-c-three")
        .await
        .unwrap();
    assert_eq!(applied.metadata.annotations.unwrap()["captf.io/job"], name);
    // Announced once: events go out only after the status patch landed
    // (and may trail it by a moment).
    let announced: i32 = eventually("JobSucceeded published", 60, || async {
        let n: i32 = ns
            .api::<k8s_openapi::api::events::v1::Event>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .iter()
            .filter(|e| {
                e.reason.as_deref() == Some("JobSucceeded")
                    && e.note.as_deref().is_some_and(|n| n.contains(&name))
            })
            .map(|e| e.series.as_ref().map_or(1, |s| s.count))
            .sum();
        (n > 0).then_some(n)
    })
    .await;
    assert_eq!(announced, 1, "JobSucceeded for {name} is published once");
}

#[tokio::test]
async fn an_apply_whose_attempt_record_was_never_written_is_promoted_from_its_run_secret() {
    // The attempt record's write is lost right after the Job create (as if
    // the manager died there): the Job runs, and its success is promoted
    // from its per-run Secret, so a destroy still renders what was applied.
    let rule =
        Rule::new(Method::PATCH, "/secrets/captf-inputs-c-four", 1).after(Method::POST, "/jobs");
    let (_env, ns, _tmp, faults, _m) = with_faults(vec![rule]).await;
    create_cluster(&ns, "four").await;
    ready(&ns, "four", 240).await;
    assert_eq!(faults.failed.lock().unwrap()[0], 1, "the fault fired");
    let jobs = ns.api::<Job>().list(&ListParams::default()).await.unwrap();
    let [job] = jobs.items.as_slice() else {
        panic!("one Job: {:?}", jobs.items.len());
    };
    let job_name = job.metadata.name.clone().unwrap();
    let applied = eventually("the applied record", 60, || async {
        ns.api::<Secret>()
            .get_opt("captf-applied-c-four")
            .await
            .ok()
            .flatten()
    })
    .await;
    let ann = applied.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(ann["captf.io/job"], job_name);
    let job_ann = job.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(ann["captf.io/inputs-hash"], job_ann["captf.io/inputs-hash"]);
    let files = applied.data.unwrap_or_default();
    assert!(files.contains_key("main.tf.json") && files.contains_key("terraform.tfvars.json"));
    let unknown = event_notes(&ns, "AppliedInputsUnknown").await;
    assert!(unknown.is_empty(), "{unknown:?}");

    // Deleted, it is destroyed from those inputs and goes.
    let clusters: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        ns.client(),
        ns.name(),
        &captf_manager::capi::cluster_resource(),
    );
    clusters
        .delete("four", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    eventually("the cluster gone", 240, || async {
        let gone = ns.api::<TerraformCluster>().get_opt("four").await.ok()?;
        gone.is_none().then_some(())
    })
    .await;
    // Its destroy ran (its Job may be collected with the object already).
    let note = expect_event(&ns, "Destroyed", "Normal", "TerraformCluster", "four").await;
    assert!(note.contains("destroy"), "{note}");
}
