use super::*;
use kube::runtime::watcher::Event;

fn lines_of<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .collect()
}

/// An unfinished Job of ours, as the Job watch delivers it.
fn running_job(name: &str, kind: &str, op: &str) -> k8s_openapi::api::batch::v1::Job {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "labels": {
            captf_api::names::labels::OWNER_KIND: kind,
            captf_api::names::labels::JOB_OP: op,
        }},
    }))
    .unwrap()
}

fn has(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

/// A registry where every family has a series.
fn exercised() -> Metrics {
    let m = Metrics::new();
    m.job_finished(
        "TerraformCluster",
        "apply",
        "failed",
        Duration::from_secs(1),
        None,
    );
    m.observe_job(&Event::Apply(running_job("a", "TerraformCluster", "apply")));
    m.decided("TerraformCluster", None, "UpToDate");
    m.inputs_hash_changed("TerraformCluster");
    m.lease_wait_started("TerraformCluster", "run_lease");
    m.state_read_failed("TerraformCluster", "corrupt");
    m.outputs_invalid("TerraformCluster", "OutputsMissing");
    m.remediation_request("requested");
    m.object("TerraformCluster", "ns", "c", &gauges());
    m.object("TerraformMachine", "ns", "m", &gauges());
    m.state_backups("TerraformCluster", "taken", 1);
    m.state_restore("TerraformCluster", "succeeded");
    m.job_report("TerraformCluster", "apply", &report());
    m.job_report("TerraformCluster", "drift", &report());
    m.plan_transition("TerraformCluster", "created");
    m.identity_denied("namespace");
    m.image_inspect_failed("registry");
    let queue = m.queue("terraformcluster", 10);
    queue.woke("ns", "c");
    drop(queue.started("ns", "c"));
    m.reconciled("terraformcluster", "success");
    let req = http::Request::get("https://10.0.0.1:6443/api")
        .body(())
        .unwrap();
    m.rest_request(&client::Sent::of(&req), Some(200));
    m
}

/// Every metric name the shipped Grafana dashboard queries is one the
/// manager serves (a renamed metric would leave its panel empty).
#[test]
fn the_dashboard_queries_only_served_metrics() {
    let dashboard = include_str!("../../../../config/prometheus/dashboard.json");
    // Sample names, and family names (which descriptions may mention).
    let text = exercised().encode();
    let served: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| match l.strip_prefix("# TYPE ") {
            Some(family) => family.split(' ').next(),
            None => l.split(['{', ' ']).next(),
        })
        .collect();
    let prefixes = [
        "captf_",
        "controller_runtime_",
        "workqueue_",
        "rest_client_",
    ];
    let mut queried = std::collections::BTreeSet::new();
    let bytes = dashboard.as_bytes();
    for (at, _) in dashboard.match_indices(|c: char| c.is_ascii_lowercase()) {
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let rest = &dashboard[at..];
        if !prefixes.iter().any(|p| rest.starts_with(p)) {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        queried.insert(&rest[..end]);
    }
    assert!(queried.len() > 30, "the dashboard queries {queried:?}");
    let missing: Vec<_> = queried.iter().filter(|q| !served.contains(*q)).collect();
    assert!(missing.is_empty(), "queried but not served: {missing:?}");
}

#[test]
fn every_metric_has_alpha_help_and_its_type() {
    // Like client_golang, a family without series is not written at all,
    // so each gets one first.
    let m = exercised();
    let text = m.encode();
    let families = [
        ("captf_job_step_duration_seconds", "histogram"),
        ("captf_job_queue_seconds", "histogram"),
        ("captf_job_attempts", "histogram"),
        ("captf_resources_changed", "counter"),
        ("captf_drift_resources", "counter"),
        ("captf_lock_force_unlocks", "counter"),
        ("captf_state_backups", "counter"),
        ("captf_state_restores", "counter"),
        ("captf_unhealthy_samples", "gauge"),
        ("captf_plan_approvals", "counter"),
        ("captf_identity_denied", "counter"),
        ("captf_image_inspect_errors", "counter"),
        ("controller_runtime_reconcile_errors", "counter"),
        ("controller_runtime_active_workers", "gauge"),
        ("controller_runtime_max_concurrent_reconciles", "gauge"),
        ("workqueue_depth", "gauge"),
        ("workqueue_adds", "counter"),
        ("workqueue_queue_duration_seconds", "histogram"),
        ("workqueue_work_duration_seconds", "histogram"),
        ("controller_runtime_reconcile", "counter"),
        ("controller_runtime_reconcile_time_seconds", "histogram"),
        ("rest_client_requests", "counter"),
        ("rest_client_request_duration_seconds", "histogram"),
        ("captf_jobs", "counter"),
        ("captf_job_duration_seconds", "histogram"),
        ("captf_job_errors", "counter"),
        ("captf_jobs_active", "gauge"),
        ("captf_reconcile_op_decisions", "counter"),
        ("captf_inputs_hash_changes", "counter"),
        ("captf_lease_waits", "counter"),
        ("captf_state_read_errors", "counter"),
        ("captf_outputs_invalid", "counter"),
        ("captf_remediation_requests", "counter"),
        ("captf_ready", "gauge"),
        ("captf_infrastructure_healthy", "gauge"),
        ("captf_drift_detected", "gauge"),
        ("captf_state_resources", "gauge"),
        ("captf_state_bytes", "gauge"),
        ("captf_inputs_bytes", "gauge"),
        ("captf_last_success_timestamp_seconds", "gauge"),
        ("captf_build_info", "gauge"),
    ];
    for (name, kind) in families {
        assert!(
            text.contains(&format!("# HELP {name} [ALPHA] ")),
            "{name} help:\n{text}"
        );
        assert!(
            has(&text, &format!("# TYPE {name} {kind}")),
            "{name} type:\n{text}"
        );
    }
    let helps = text.lines().filter(|l| l.starts_with("# HELP ")).count();
    assert_eq!(helps, families.len(), "{text}");
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn build_info_names_version_commit_and_contract() {
    let text = Metrics::new().encode();
    let want = format!(
        "captf_build_info{{version=\"{}\",commit=\"{}\",contract=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        COMMIT,
        captf_contract::CONTRACT_VERSION
    );
    assert!(has(&text, &want), "{text}");
}

#[test]
fn a_failed_job_counts_its_result_duration_and_error() {
    let m = Metrics::new();
    m.job_finished(
        "TerraformCluster",
        "apply",
        "failed",
        Duration::from_secs(40),
        Some(JobError {
            kind: "step",
            step: Some("plan"),
        }),
    );
    let text = m.encode();
    let job = r#"kind="TerraformCluster",op="apply",result="failed""#;
    assert!(
        has(&text, &format!("captf_jobs_total{{{job}}} 1")),
        "{text}"
    );
    assert!(
        has(
            &text,
            &format!("captf_job_duration_seconds_count{{{job}}} 1")
        ),
        "{text}"
    );
    assert!(
        has(
            &text,
            &format!("captf_job_duration_seconds_sum{{{job}}} 40.0")
        ),
        "{text}"
    );
    // 40 s falls above the 15 s bucket and inside the next one.
    assert!(
        has(
            &text,
            &format!("captf_job_duration_seconds_bucket{{le=\"15.0\",{job}}} 0")
        ),
        "{text}"
    );
    assert!(
        has(
            &text,
            &format!("captf_job_duration_seconds_bucket{{le=\"7200.0\",{job}}} 1")
        ),
        "{text}"
    );
    assert!(
        has(
            &text,
            r#"captf_job_errors_total{kind="TerraformCluster",op="apply",error_kind="step",step="plan"} 1"#
        ),
        "{text}"
    );
}

#[test]
fn job_duration_buckets_run_from_15_seconds_to_2_hours() {
    let b = job_duration_buckets();
    assert_eq!(b.len(), 10);
    assert_eq!(b[0], 15.0);
    assert_eq!(b[9], 7200.0);
    assert!(b.windows(2).all(|w| w[0] < w[1]), "{b:?}");
}

#[test]
fn a_succeeded_job_counts_no_error() {
    let m = Metrics::new();
    m.job_finished(
        "TerraformMachine",
        "destroy",
        "succeeded",
        Duration::from_secs(20),
        Some(JobError {
            kind: "step",
            step: Some("apply"),
        }),
    );
    let text = m.encode();
    assert!(
        has(
            &text,
            r#"captf_jobs_total{kind="TerraformMachine",op="destroy",result="succeeded"} 1"#
        ),
        "{text}"
    );
    assert!(
        lines_of(&text, "captf_job_errors_total").is_empty(),
        "{text}"
    );
}

#[test]
fn unknown_steps_and_error_kinds_fold_into_their_catch_alls() {
    let m = Metrics::new();
    let error = |kind, step| {
        Some(JobError {
            kind,
            step: Some(step),
        })
    };
    let d = Duration::from_secs(1);
    m.job_finished(
        "TerraformCluster",
        "plan",
        "failed",
        d,
        error("step", "state-mv"),
    );
    m.job_finished(
        "TerraformCluster",
        "plan",
        "failed",
        d,
        error("oom", "init"),
    );
    // No error reported: the class follows the result, the step is `none`.
    m.job_finished("TerraformCluster", "plan", "deadline", d, None);
    let text = m.encode();
    for line in [
        r#"captf_job_errors_total{kind="TerraformCluster",op="plan",error_kind="step",step="other"} 1"#,
        r#"captf_job_errors_total{kind="TerraformCluster",op="plan",error_kind="unknown",step="init"} 1"#,
        r#"captf_job_errors_total{kind="TerraformCluster",op="plan",error_kind="deadline",step="none"} 1"#,
    ] {
        assert!(has(&text, line), "{line}\n{text}");
    }
}

#[test]
fn values_outside_the_documented_sets_record_nothing() {
    let m = Metrics::new();
    let d = Duration::from_secs(1);
    m.job_finished("TerraformPlan", "apply", "failed", d, None);
    m.job_finished("TerraformCluster", "import", "failed", d, None);
    m.job_finished("TerraformCluster", "apply", "crashed", d, None);
    m.decided("TerraformCluster", Some("none"), "UpToDate");
    m.decided("TerraformCluster", None, "the state is up to date");
    m.lease_wait_started("TerraformMachine", "slot");
    m.state_read_failed("TerraformMachine", "StateCorrupt");
    m.outputs_invalid("TerraformMachine", "whatever");
    m.inputs_hash_changed("TerraformClusterIdentity");
    m.observe_job(&Event::Apply(running_job("x", "TerraformMachine", "none")));
    m.object(
        "TerraformMachineTemplate",
        "ns",
        "a",
        &ObjectGauges {
            ready: ConditionValue::True,
            infrastructure_healthy: None,
            drift_detected: false,
            state: Observed::Value(StateSize {
                resources: 1,
                bytes: 2,
            }),
            inputs_bytes: Observed::Value(3),
            unhealthy_samples: Some(1),
            last_success: vec![],
        },
    );
    let text = m.encode();
    let samples: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("captf_build_info"))
        .collect();
    assert!(samples.is_empty(), "{samples:#?}");
}

#[test]
fn counters_for_decisions_waits_and_transitions() {
    let m = Metrics::new();
    m.decided("TerraformCluster", Some("apply"), "InputsChanged");
    m.decided("TerraformCluster", None, "UpToDate");
    m.decided("TerraformCluster", None, "UpToDate");
    m.inputs_hash_changed("TerraformMachinePool");
    m.lease_wait_started("TerraformMachine", "job_slot");
    m.state_read_failed("TerraformCluster", "lost");
    m.outputs_invalid("TerraformMachine", "ProviderIDChanged");
    m.observe_job(&Event::Apply(running_job(
        "d1",
        "TerraformMachinePool",
        "drift",
    )));
    m.observe_job(&Event::Apply(running_job(
        "d2",
        "TerraformMachinePool",
        "drift",
    )));
    let text = m.encode();
    for line in [
        r#"captf_reconcile_op_decisions_total{kind="TerraformCluster",op="apply",reason="InputsChanged"} 1"#,
        r#"captf_reconcile_op_decisions_total{kind="TerraformCluster",op="none",reason="UpToDate"} 2"#,
        r#"captf_inputs_hash_changes_total{kind="TerraformMachinePool"} 1"#,
        r#"captf_lease_waits_total{kind="TerraformMachine",reason="job_slot"} 1"#,
        r#"captf_state_read_errors_total{kind="TerraformCluster",reason="lost"} 1"#,
        r#"captf_outputs_invalid_total{kind="TerraformMachine",reason="ProviderIDChanged"} 1"#,
        r#"captf_jobs_active{kind="TerraformMachinePool",op="drift"} 2"#,
    ] {
        assert!(has(&text, line), "{line}\n{text}");
    }
}

fn report() -> JobReport {
    JobReport {
        steps: vec![
            ("init".into(), Duration::from_secs(3)),
            ("apply".into(), Duration::from_secs(40)),
            ("custom".into(), Duration::from_secs(1)),
        ],
        queued: Some(Duration::from_secs(7)),
        attempts: Some(2),
        changed: Some(ResourceCounts {
            create: 2,
            delete: 1,
            ..Default::default()
        }),
        drift: Some(ResourceCounts {
            replace: 1,
            ..Default::default()
        }),
        force_unlocked: true,
    }
}

#[test]
fn a_job_report_fills_steps_queue_attempts_changes_drift_and_unlocks() {
    let m = Metrics::new();
    m.job_report("TerraformMachinePool", "apply", &report());
    let text = m.encode();
    let ko = r#"kind="TerraformMachinePool",op="apply""#;
    for line in [
        format!("captf_job_step_duration_seconds_count{{{ko},step=\"init\"}} 1"),
        format!("captf_job_step_duration_seconds_count{{{ko},step=\"other\"}} 1"),
        format!("captf_job_step_duration_seconds_bucket{{le=\"30.0\",{ko},step=\"apply\"}} 0"),
        format!("captf_job_step_duration_seconds_bucket{{le=\"60.0\",{ko},step=\"apply\"}} 1"),
        format!("captf_job_queue_seconds_bucket{{le=\"10.0\",{ko}}} 1"),
        format!("captf_job_queue_seconds_bucket{{le=\"5.0\",{ko}}} 0"),
        format!("captf_job_attempts_sum{{{ko}}} 2.0"),
        format!("captf_resources_changed_total{{{ko},action=\"create\"}} 2"),
        format!("captf_resources_changed_total{{{ko},action=\"delete\"}} 1"),
        r#"captf_drift_resources_total{kind="TerraformMachinePool",action="replace"} 1"#.to_owned(),
        r#"captf_lock_force_unlocks_total{kind="TerraformMachinePool"} 1"#.to_owned(),
    ] {
        assert!(has(&text, &line), "{line}\n{text}");
    }
    // Nothing changed is no series, and the 300 s boundary the queue alert
    // reads exists.
    assert!(!text.contains(r#"action="update""#), "{text}");
    assert!(
        text.contains(r#"captf_job_queue_seconds_bucket{le="300.0""#),
        "{text}"
    );
}

#[test]
fn the_queue_counts_each_waiting_object_once_and_times_its_passes() {
    let m = Metrics::new();
    let q = m.queue("terraformmachinepool", 10);
    q.woke("ns", "a");
    q.woke("ns", "a");
    q.woke("ns", "b");
    let labels = r#"name="terraformmachinepool",controller="terraformmachinepool""#;
    let text = m.encode();
    assert!(
        has(&text, &format!("workqueue_adds_total{{{labels}}} 2")),
        "{text}"
    );
    assert!(
        has(&text, &format!("workqueue_depth{{{labels}}} 2")),
        "{text}"
    );
    let pass = q.started("ns", "a");
    let text = m.encode();
    assert!(
        has(&text, &format!("workqueue_depth{{{labels}}} 1")),
        "{text}"
    );
    assert!(
        has(
            &text,
            r#"controller_runtime_active_workers{controller="terraformmachinepool"} 1"#
        ),
        "{text}"
    );
    q.failed();
    drop(pass);
    let text = m.encode();
    for line in [
        r#"controller_runtime_active_workers{controller="terraformmachinepool"} 0"#.to_owned(),
        r#"controller_runtime_reconcile_errors_total{controller="terraformmachinepool"} 1"#
            .to_owned(),
        r#"controller_runtime_reconcile_time_seconds_count{controller="terraformmachinepool"} 1"#
            .to_owned(),
        r#"controller_runtime_max_concurrent_reconciles{controller="terraformmachinepool"} 10"#
            .to_owned(),
        format!("workqueue_queue_duration_seconds_count{{{labels}}} 1"),
        format!("workqueue_work_duration_seconds_count{{{labels}}} 1"),
    ] {
        assert!(has(&text, &line), "{line}\n{text}");
    }
    // The same controller's queue is one queue, wherever it is asked for.
    m.queue("terraformmachinepool", 10).started("ns", "b");
    assert!(has(&m.encode(), &format!("workqueue_depth{{{labels}}} 0")));
}

#[test]
fn safety_counters_refuse_undocumented_values() {
    let m = Metrics::new();
    m.plan_transition("TerraformCluster", "approved");
    m.plan_transition("TerraformCluster", "rejected");
    m.identity_denied("notfound");
    m.identity_denied("expired");
    m.image_inspect_failed("label");
    m.image_inspect_failed("timeout");
    let text = m.encode();
    for line in [
        r#"captf_plan_approvals_total{kind="TerraformCluster",result="approved"} 1"#,
        r#"captf_identity_denied_total{reason="notfound"} 1"#,
        r#"captf_image_inspect_errors_total{reason="label"} 1"#,
    ] {
        assert!(has(&text, line), "{line}\n{text}");
    }
    for refused in ["rejected", "expired", "timeout"] {
        assert!(!text.contains(refused), "{refused}: {text}");
    }
}

fn gauges() -> ObjectGauges {
    ObjectGauges {
        ready: ConditionValue::Unknown,
        infrastructure_healthy: Some(ConditionValue::False),
        drift_detected: true,
        state: Observed::Value(StateSize {
            resources: 12,
            bytes: 4096,
        }),
        inputs_bytes: Observed::Value(900),
        unhealthy_samples: Some(2),
        last_success: vec![
            ("apply".into(), 1_700_000_000.0),
            ("drift".into(), 1_700_000_600.5),
        ],
    }
}

#[test]
fn per_object_gauges_carry_kind_namespace_and_name() {
    let m = Metrics::new();
    m.object("TerraformMachine", "team-a", "m-0", &gauges());
    let text = m.encode();
    let id = r#"kind="TerraformMachine",namespace="team-a",name="m-0""#;
    for line in [
        format!("captf_ready{{{id}}} -1"),
        format!("captf_infrastructure_healthy{{{id}}} 0"),
        format!("captf_drift_detected{{{id}}} 1"),
        format!("captf_state_resources{{{id}}} 12"),
        format!("captf_state_bytes{{{id}}} 4096"),
        format!("captf_inputs_bytes{{{id}}} 900"),
        format!("captf_last_success_timestamp_seconds{{{id},op=\"apply\"}} 1700000000.0"),
        format!("captf_last_success_timestamp_seconds{{{id},op=\"drift\"}} 1700000600.5"),
    ] {
        assert!(has(&text, &line), "{line}\n{text}");
    }
}

#[test]
fn an_update_drops_series_no_longer_known() {
    let m = Metrics::new();
    m.object("TerraformCluster", "ns", "c", &gauges());
    let mut later = gauges();
    later.ready = ConditionValue::True;
    later.infrastructure_healthy = None;
    later.state = Observed::Absent;
    later.inputs_bytes = Observed::Unread;
    later.last_success.retain(|(op, _)| op == "apply");
    m.object("TerraformCluster", "ns", "c", &later);
    let text = m.encode();
    // A pass that did not render the inputs leaves their size as it was.
    assert!(
        has(
            &text,
            r#"captf_inputs_bytes{kind="TerraformCluster",namespace="ns",name="c"} 900"#
        ),
        "{text}"
    );
    assert!(
        lines_of(&text, "captf_state_resources").is_empty(),
        "{text}"
    );
    assert!(
        has(
            &text,
            r#"captf_ready{kind="TerraformCluster",namespace="ns",name="c"} 1"#
        ),
        "{text}"
    );
    assert!(
        lines_of(&text, "captf_infrastructure_healthy").is_empty(),
        "{text}"
    );
    assert!(lines_of(&text, "captf_state_bytes").is_empty(), "{text}");
    assert_eq!(
        lines_of(&text, "captf_last_success_timestamp_seconds").len(),
        1,
        "{text}"
    );
}

#[test]
fn forget_removes_every_series_of_that_object_only() {
    let m = Metrics::new();
    m.object("TerraformCluster", "ns", "gone", &gauges());
    m.object("TerraformCluster", "ns", "kept", &gauges());
    m.object("TerraformMachine", "ns", "gone", &gauges());
    m.forget("TerraformCluster", "ns", "gone");
    let text = m.encode();
    let per_object = text
        .lines()
        .filter(|l| l.contains("namespace=\"ns\""))
        .collect::<Vec<_>>();
    assert!(
        per_object
            .iter()
            .all(|l| !l.contains(r#"kind="TerraformCluster",namespace="ns",name="gone""#)),
        "{per_object:#?}"
    );
    // Eight series each for the two objects left, and the machine's
    // unhealthy samples.
    assert_eq!(per_object.len(), 17, "{per_object:#?}");
}

#[test]
fn condition_status_strings_map_to_gauge_values() {
    assert_eq!(ConditionValue::from_status(Some("True")).gauge(), 1);
    assert_eq!(ConditionValue::from_status(Some("False")).gauge(), 0);
    assert_eq!(ConditionValue::from_status(Some("Unknown")).gauge(), -1);
    assert_eq!(ConditionValue::from_status(None).gauge(), -1);
}

#[test]
fn clones_share_one_registry() {
    let m = Metrics::new();
    let other = m.clone();
    other.inputs_hash_changed("TerraformCluster");
    assert!(has(
        &m.encode(),
        r#"captf_inputs_hash_changes_total{kind="TerraformCluster"} 1"#
    ));
}
