//! The image-pull fallback (scenario of `concepts.md` §6.8): a cluster's
//! pinned module digest disappears from the registry after its apply. Its
//! next drift check cannot pull it; after two minutes without a ready pod
//! the Job is deleted (`ImagePullFallback`, no failure counted), the digest
//! is remembered on the attempt record, and the check runs again on the
//! recorded tag, which works. Later checks start on the tag at once. The
//! fallback costs one LIST of the Job's pods per pass past two minutes.
//! Controllers in this process, the real control plane, Cluster API's
//! controllers, the real node, the real runner and OpenTofu.

use crate::support;

use captf_api::TerraformCluster;
use captf_testenv::{TestEnv, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use support::clusters::create_cluster;
use support::*;

fn source_image(job: &Job) -> String {
    job.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .find(|c| c.name == "source")
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drift_check_whose_pinned_digest_is_gone_runs_on_the_recorded_tag() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    insert_manager(env, ns.name()).await;
    let module = module_ref("cluster", ns.name());
    let image = module_image(tmp.path(), "cluster", "v1", &[]);
    let digest = insert_module(env, &module, image).await;
    let pinned = format!("{}@{}", module.rsplit_once(':').unwrap().0, digest);
    install_runner_role(&ns.client()).await;
    let _manager = start_manager(ns.client(), ns.name());
    let tcs = ns.api::<TerraformCluster>();

    create_cluster(&ns, "prod", &module).await;
    let secrets = ns.api::<Secret>();
    eventually("prod applied with its digest pinned", 240, || async {
        let applied = secrets.get_opt("captf-applied-c-prod").await.ok()??;
        let annotations = applied.metadata.annotations?;
        let digest = annotations.get("captf.io/image-digest")?;
        digest.starts_with("sha256:").then_some(())
    })
    .await;
    // The registry collects the digest; the tag stays.
    env.real_node().await.remove_image(&pinned);
    tcs.patch(
        "prod",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"drift": {"intervalSeconds": 5, "action": "Report"}}})),
    )
    .await
    .unwrap();

    let jobs = ns.api::<Job>();
    let drifts = || async {
        let listed = jobs.list(&ListParams::default()).await.unwrap().items;
        listed
            .into_iter()
            .filter(|j| job_op(j) == "drift")
            .collect::<Vec<_>>()
    };
    let first = eventually("a drift Job on the pinned digest", 120, || async {
        drifts().await.into_iter().next()
    })
    .await;
    assert_eq!(source_image(&first), pinned);
    let fallbacks = first
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("captf.io/image-fallbacks"))
        .cloned();
    assert_eq!(
        fallbacks.as_deref(),
        Some(format!("[\"{module}\"]").as_str())
    );

    // Two minutes on, it is replaced by a check on the tag that succeeds.
    let tc = eventually("the drift check on the tag recorded", 420, || async {
        let tc = tcs.get("prod").await.ok()?;
        let ok = tc.status.as_ref()?.workspace.last_drift_check.is_some();
        ok.then_some(tc)
    })
    .await;
    let run = tc
        .status
        .as_ref()
        .unwrap()
        .workspace
        .last_run
        .clone()
        .unwrap();
    let ran = jobs.get(&run.job).await.unwrap();
    assert_eq!(
        source_image(&ran),
        module,
        "the check ran on the recorded tag"
    );
    assert!(
        jobs.get_opt(first.metadata.name.as_deref().unwrap())
            .await
            .unwrap()
            .is_none()
            || run.job == first.metadata.name.clone().unwrap(),
        "the stuck Job was deleted"
    );
    let notes = event_notes(&ns, "ImagePullFallback").await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains(&pinned) && notes[0].contains(&module),
        "{}",
        notes[0]
    );
    assert_eq!(
        tc.status
            .as_ref()
            .unwrap()
            .workspace
            .last_run
            .as_ref()
            .unwrap()
            .error,
        None
    );
    let drift = tc
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "DriftJobSucceeded"))
        .map(|c| c.status.clone());
    assert_eq!(drift.as_deref(), Some("True"), "no failure is counted");
    let record = ns.api::<Secret>().get("captf-inputs-c-prod").await.unwrap();
    let unpullable = record
        .metadata
        .annotations
        .unwrap_or_default()
        .get("captf.io/unpullable-images")
        .cloned();
    assert_eq!(unpullable, Some(format!("[\"{pinned}\"]")));

    // The next check starts on the tag at once.
    let next = eventually("the next drift Job", 120, || async {
        drifts().await.into_iter().find(|j| {
            j.metadata.name.as_deref() != Some(run.job.as_str())
                && Some(j.metadata.name.clone().unwrap()) != first.metadata.name
        })
    })
    .await;
    assert_eq!(source_image(&next), module);
}
