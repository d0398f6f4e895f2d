//! The metrics of §16 as a user's dashboards and alerts read them, after a
//! bring-up, a failed apply, a drift finding and a deletion: every series
//! that should exist does, with the documented labels and values, and a
//! deleted object leaves no per-object series behind. Controllers in this
//! process, the real control plane, Cluster API's controllers, the real
//! node, the real runner and OpenTofu.

use crate::support;

use captf_api::TerraformCluster;
use captf_testenv::{TestEnv, TestNamespace, eventually};
use kube::api::{DeleteParams, ListParams};
use serde_json::json;
use support::clusters::{
    condition, create_cluster_with_spec, tamper_with_state, with_cluster_module,
};
use support::*;

/// The value of the one sample `series` (name and labels as written), if
/// the scrape has it.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// Every sample line of metric `name` (any labels).
fn samples<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .collect()
}

async fn wait_for_condition(ns: &TestNamespace, name: &str, type_: &str, want: (&str, &str)) {
    let api = ns.api::<TerraformCluster>();
    eventually(&format!("{name} {type_}={want:?}"), 300, || async {
        let tc = api.get(name).await.ok()?;
        (condition(&tc, type_) == Some((want.0.into(), want.1.into()))).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_series_a_bring_up_a_failure_a_drift_and_a_deletion_should_leave() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    with_cluster_module(env, &ns, tmp.path()).await;
    let manager = start_manager(ns.client(), ns.name());
    let module = module_ref("cluster", ns.name());

    // One cluster whose apply fails, one that comes up with drift checks.
    create_cluster_with_spec(
        &ns,
        "broken",
        &module,
        json!({"variables": {"noop_fail_apply": true}}),
    )
    .await;
    create_cluster_with_spec(
        &ns,
        "watched",
        &module,
        json!({"drift": {"intervalSeconds": 5, "action": "Report"}}),
    )
    .await;
    wait_for_condition(&ns, "watched", "DriftDetected", ("False", "NoDrift")).await;
    wait_for_condition(&ns, "broken", "ApplyJobSucceeded", ("False", "ApplyFailed")).await;

    let ns_name = ns.name();
    let watched = format!(r#"kind="TerraformCluster",namespace="{ns_name}",name="watched""#);
    let kind_apply = r#"kind="TerraformCluster",op="apply""#;
    // Outcomes, steps and what the applies did.
    let expected = [
        (format!("captf_jobs_total{{{kind_apply},result=\"succeeded\"}}"), 1.0),
        (format!("captf_jobs_total{{{kind_apply},result=\"failed\"}}"), 1.0),
        (format!("captf_job_duration_seconds_count{{{kind_apply},result=\"succeeded\"}}"), 1.0),
        (format!("captf_job_step_duration_seconds_count{{{kind_apply},step=\"init\"}}"), 1.0),
        (format!("captf_job_step_duration_seconds_count{{{kind_apply},step=\"apply\"}}"), 1.0),
        (format!("captf_job_queue_seconds_count{{{kind_apply}}}"), 1.0),
        (format!("captf_job_attempts_count{{{kind_apply}}}"), 1.0),
        (format!("captf_resources_changed_total{{{kind_apply},action=\"create\"}}"), 1.0),
        (format!("captf_job_errors_total{{{kind_apply},error_kind=\"step\",step=\"apply\"}}"), 1.0),
        (r#"captf_reconcile_op_decisions_total{kind="TerraformCluster",op="apply",reason="NoState"}"#.to_owned(), 1.0),
        (format!("captf_ready{{{watched}}}"), 1.0),
        (format!("captf_state_resources{{{watched}}}"), 1.0),
        (format!("captf_state_bytes{{{watched}}}"), 100.0),
        (format!("captf_inputs_bytes{{{watched}}}"), 100.0),
        (format!("captf_last_success_timestamp_seconds{{{watched},op=\"apply\"}}"), 1.7e9),
        (format!("captf_last_success_timestamp_seconds{{{watched},op=\"drift\"}}"), 1.7e9),
        (r#"controller_runtime_reconcile_total{controller="terraformcluster",result="success"}"#.to_owned(), 1.0),
        (r#"controller_runtime_reconcile_time_seconds_count{controller="terraformcluster"}"#.to_owned(), 1.0),
        (r#"controller_runtime_max_concurrent_reconciles{controller="terraformcluster"}"#.to_owned(), 10.0),
        (r#"workqueue_adds_total{name="terraformcluster",controller="terraformcluster"}"#.to_owned(), 1.0),
    ];
    // The gauges are set as a pass ends, after its status write: the scrape
    // may trail the conditions by a moment.
    let text = eventually("the scrape to show the bring-up", 30, || async {
        let text = manager.metrics.encode();
        expected
            .iter()
            .all(|(series, at_least)| sample(&text, series).is_some_and(|v| v >= *at_least))
            .then_some(text)
    })
    .await;
    for (series, at_least) in expected {
        let v = sample(&text, &series).unwrap_or_else(|| panic!("no {series}:\n{text}"));
        assert!(
            v >= at_least,
            "{series} = {v}, want at least {at_least}\n{text}"
        );
    }
    // The first apply succeeded at once; the failed apply's Job is no
    // success, so it is not an attempt.
    assert_eq!(
        sample(&text, &format!("captf_job_attempts_sum{{{kind_apply}}}")),
        sample(&text, &format!("captf_job_attempts_count{{{kind_apply}}}")),
        "{text}"
    );
    assert_eq!(
        sample(&text, &format!("captf_drift_detected{{{watched}}}")),
        Some(0.0)
    );
    // A cluster whose apply failed is not Ready.
    let broken = format!(r#"kind="TerraformCluster",namespace="{ns_name}",name="broken""#);
    assert_eq!(
        sample(&text, &format!("captf_ready{{{broken}}}")),
        Some(0.0),
        "{text}"
    );
    // Its apply created the resource before the postcondition failed, and
    // the state records it (tainted): a failed apply is sized too.
    assert_eq!(
        sample(&text, &format!("captf_state_resources{{{broken}}}")),
        Some(1.0),
        "{text}"
    );
    // Drift is checked for "watched" only, so only it exports the drift
    // success; "broken" checks nothing.
    assert!(
        sample(
            &text,
            &format!("captf_last_success_timestamp_seconds{{{broken},op=\"drift\"}}")
        )
        .is_none(),
        "{text}"
    );

    // A drift finding.
    tamper_with_state(&ns, "watched").await;
    wait_for_condition(&ns, "watched", "DriftDetected", ("True", "DriftReported")).await;
    // The gauges are set as the pass ends, after its status write: the
    // scrape may trail the condition by a moment.
    let drift_gauge = format!("captf_drift_detected{{{watched}}}");
    let text = eventually("the scrape to show the drift", 30, || async {
        let text = manager.metrics.encode();
        (sample(&text, &drift_gauge) == Some(1.0)).then_some(text)
    })
    .await;
    assert_eq!(
        sample(&text, &format!("captf_drift_detected{{{watched}}}")),
        Some(1.0),
        "{text}"
    );
    let drifted = samples(&text, "captf_drift_resources_total");
    assert!(
        drifted.iter().any(|l| l.starts_with(
            r#"captf_drift_resources_total{kind="TerraformCluster",action="update"}"#
        )),
        "{drifted:#?}"
    );

    // Deletion: both go, and so does every series naming them.
    let tcs = ns.api::<TerraformCluster>();
    for name in ["watched", "broken"] {
        tcs.delete(name, &DeleteParams::default()).await.unwrap();
    }
    eventually("both TerraformClusters gone", 300, || async {
        let left = tcs.list(&ListParams::default()).await.ok()?;
        left.items.is_empty().then_some(())
    })
    .await;
    // The passes that saw the deletions may still be ending.
    let idle = r#"controller_runtime_active_workers{controller="terraformcluster"}"#;
    let text = eventually("the deleted objects' series gone", 30, || async {
        let text = manager.metrics.encode();
        let gone = !text.contains(&format!("namespace=\"{ns_name}\""));
        (gone && sample(&text, idle) == Some(0.0)).then_some(text)
    })
    .await;
    assert!(
        sample(
            &text,
            r#"captf_jobs_total{kind="TerraformCluster",op="destroy",result="succeeded"}"#
        )
        .is_some_and(|v| v >= 1.0),
        "{text}"
    );
    assert_eq!(sample(&text, idle), Some(0.0), "{text}");
}
