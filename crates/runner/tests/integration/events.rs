//! The shape of runner events.

use captf_runner::events::{EventText, EventType, build_event, parse_event_object};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

#[test]
fn event_objects_parse_from_the_right() {
    let o =
        parse_event_object("infrastructure.cluster.x-k8s.io/v1alpha1/TerraformCluster/ns/prod/u-1")
            .unwrap();
    assert_eq!(o.api_version, "infrastructure.cluster.x-k8s.io/v1alpha1");
    assert_eq!(
        (
            o.kind.as_str(),
            o.namespace.as_str(),
            o.name.as_str(),
            o.uid.as_str()
        ),
        ("TerraformCluster", "ns", "prod", "u-1")
    );
    let o = parse_event_object("v1/ConfigMap/ns/n/u").unwrap();
    assert_eq!(o.api_version, "v1");
    for bad in ["", "a/b/c/d", "v1/Kind/ns//uid", "g/v1/Kind/ns/name/"] {
        assert!(parse_event_object(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn events_name_the_object_and_the_job() {
    let o =
        parse_event_object("infrastructure.cluster.x-k8s.io/v1alpha1/TerraformMachine/ns/m1/u-1")
            .unwrap();
    let now = MicroTime("2026-01-02T03:04:05.123456Z".parse().unwrap());
    let e = build_event(
        &o,
        "captf-m-m1-apply-a1-abcdef",
        "pod-x",
        EventText {
            event_type: EventType::Warning,
            reason: "StepFailed",
            action: "Step",
            note: &"n".repeat(2000),
        },
        now.clone(),
    );
    assert!(
        e.metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("captf-m-m1-apply-a1-abcdef.")
    );
    assert_eq!(e.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.reason.as_deref(), Some("StepFailed"));
    assert_eq!(e.action.as_deref(), Some("Step"));
    assert_eq!(e.reporting_controller.as_deref(), Some("captf.io/runner"));
    assert_eq!(e.reporting_instance.as_deref(), Some("pod-x"));
    assert_eq!(e.note.as_deref().unwrap().len(), 1024);
    let reg = e.regarding.unwrap();
    assert_eq!(
        (reg.kind.as_deref(), reg.name.as_deref(), reg.uid.as_deref()),
        (Some("TerraformMachine"), Some("m1"), Some("u-1"))
    );
    let rel = e.related.unwrap();
    assert_eq!(
        (
            rel.kind.as_deref(),
            rel.api_version.as_deref(),
            rel.name.as_deref()
        ),
        (
            Some("Job"),
            Some("batch/v1"),
            Some("captf-m-m1-apply-a1-abcdef")
        )
    );
    let e = build_event(
        &o,
        "",
        "pod-x",
        EventText {
            event_type: EventType::Normal,
            reason: "RunStarted",
            action: "Run",
            note: "x",
        },
        now,
    );
    assert!(e.related.is_none());
    assert!(e.metadata.name.unwrap().starts_with("m1."));
}
