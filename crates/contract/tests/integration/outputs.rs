//! Output decoding: every `OutputsValid` reason, their precedence, defaults
//! and normalisation.

use captf_contract::health::{ConditionStatus, HealthState};
use captf_contract::outputs::{
    AddressType, MAX_POOL_INSTANCES, MachineContext, OutputsReason as R, RootOutputs, decode,
    decode_cluster, decode_machine, decode_machinepool,
};
use captf_contract::{JsonText, Role, exports_hash};
use serde_json::{Value, json};

fn healthy() -> Value {
    json!({"state": "running", "healthy": true})
}

fn outputs(pairs: Value) -> RootOutputs {
    let Value::Object(m) = pairs else { panic!() };
    RootOutputs::declared(m)
}

fn cluster_ok() -> Value {
    json!({
        "control_plane_endpoint": {"host": "lb.example", "port": 6443},
        "failure_domains": [{"name": "fd1"}, {"name": "fd2", "control_plane": false, "attributes": {"zone": "b"}}],
        "exports": {"backend_id": "b-1", "ids": [1, 2]},
        "health": healthy(),
    })
}

fn machine_ok() -> Value {
    json!({
        "provider_id": "noop:///ns/m",
        "addresses": [
            {"type": "Hostname", "address": "m"},
            {"type": "ExternalIP", "address": "1.2.3.4"},
            {"type": "InternalIP", "address": "10.0.0.2"},
            {"type": "InternalIP", "address": "10.0.0.1"}
        ],
        "failure_domain": "fd1",
        "interruptible": null,
        "health": healthy(),
    })
}

fn pool_ok() -> Value {
    json!({
        "provider_id": "",
        "provider_id_list": ["p/2", "p/10", "p/2", "p/1"],
        "replicas": 3,
        "instances": [{"provider_id": "p/1", "instance_id": "", "state": "pending"}],
        "health": {"state": "running", "healthy": false, "message": null, "reasons": ["ScalingInProgress"]},
    })
}

fn with(mut base: Value, key: &str, value: Value) -> Value {
    base[key] = value;
    base
}

fn without(mut base: Value, key: &str) -> Value {
    base.as_object_mut().unwrap().remove(key);
    base
}

#[test]
fn valid_outputs_get_defaults_and_normalisation() {
    let c = decode_cluster(&outputs(cluster_ok()));
    assert_eq!(c.verdict.reason(), R::OutputsValid);
    assert_eq!(c.verdict.status(), ConditionStatus::True);
    let c = c.outputs.unwrap();
    assert!(c.failure_domains[0].control_plane);
    assert!(c.failure_domains[0].attributes.is_empty());
    assert!(!c.failure_domains[1].control_plane);
    assert_eq!(
        c.published_exports.as_deref(),
        Some(r#"{"backend_id":"b-1","ids":[1,2]}"#)
    );
    assert!(c.exports_hash.starts_with("h2:"));

    let m = decode_machine(
        &outputs(machine_ok()),
        &MachineContext {
            requested_failure_domain: Some("fd1".into()),
            recorded_provider_id: Some("noop:///ns/m".into()),
        },
    );
    assert_eq!(m.verdict.reason(), R::OutputsValid, "{:?}", m.verdict);
    let m = m.outputs.unwrap();
    let order: Vec<_> = m
        .addresses
        .iter()
        .map(|a| (a.kind, a.address.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            (AddressType::InternalIP, "10.0.0.1"),
            (AddressType::InternalIP, "10.0.0.2"),
            (AddressType::ExternalIP, "1.2.3.4"),
            (AddressType::Hostname, "m"),
        ]
    );
    assert!(!m.interruptible, "null interruptible reads as false");

    let p = decode_machinepool(&outputs(pool_ok()));
    assert_eq!(p.verdict.reason(), R::OutputsValid, "{:?}", p.verdict);
    let p = p.outputs.unwrap();
    assert_eq!(p.provider_id, None, "\"\" reads as null");
    assert_eq!(
        p.provider_id_list,
        ["p/1", "p/10", "p/2"],
        "sorted and de-duplicated"
    );
    assert_eq!(p.instances[0].instance_id, None);
    assert_eq!(p.instances[0].state, Some(HealthState::Pending));
}

#[test]
fn cluster_nulls_read_as_defaults_not_pending() {
    let c = decode_cluster(&outputs(json!({
        "control_plane_endpoint": null, "failure_domains": null, "exports": null, "health": healthy()
    })));
    assert_eq!(c.verdict.reason(), R::OutputsValid);
    let c = c.outputs.unwrap();
    assert_eq!(c.control_plane_endpoint, None);
    assert!(c.failure_domains.is_empty());
    assert_eq!(c.exports.as_str(), "{}");
    assert_eq!(c.published_exports.as_deref(), Some("{}"));
}

/// A decoding run giving the winning reason.
type Case = Box<dyn Fn() -> R>;

#[test]
fn every_reason_and_its_status() {
    let no_ctx = MachineContext::default();
    let cases: Vec<(&str, R, Case)> = vec![
        (
            "missing health",
            R::OutputsMissing,
            Box::new(|| {
                decode_cluster(&outputs(without(cluster_ok(), "health")))
                    .verdict
                    .reason()
            }),
        ),
        (
            "half-set endpoint",
            R::OutputsInvalid,
            Box::new(|| {
                decode_cluster(&outputs(with(
                    cluster_ok(),
                    "control_plane_endpoint",
                    json!({"host": "lb"}),
                )))
                .verdict
                .reason()
            }),
        ),
        (
            "port out of range",
            R::OutputsInvalid,
            Box::new(|| {
                decode_cluster(&outputs(with(
                    cluster_ok(),
                    "control_plane_endpoint",
                    json!({"host": "lb", "port": 70000}),
                )))
                .verdict
                .reason()
            }),
        ),
        (
            "duplicate failure domain",
            R::OutputsInvalid,
            Box::new(|| {
                decode_cluster(&outputs(with(
                    cluster_ok(),
                    "failure_domains",
                    json!([{"name": "a"}, {"name": "a"}]),
                )))
                .verdict
                .reason()
            }),
        ),
        (
            "too many failure domains",
            R::OutputsInvalid,
            Box::new(|| {
                let fds: Vec<Value> = (0..101)
                    .map(|i| json!({"name": format!("fd{i}")}))
                    .collect();
                decode_cluster(&outputs(with(
                    cluster_ok(),
                    "failure_domains",
                    Value::Array(fds),
                )))
                .verdict
                .reason()
            }),
        ),
        (
            "unknown health state",
            R::OutputsInvalid,
            Box::new(|| {
                decode_cluster(&outputs(with(
                    cluster_ok(),
                    "health",
                    json!({"state": "flourishing", "healthy": true}),
                )))
                .verdict
                .reason()
            }),
        ),
        (
            "health without healthy",
            R::OutputsInvalid,
            Box::new(|| {
                decode_cluster(&outputs(with(
                    cluster_ok(),
                    "health",
                    json!({"state": "running"}),
                )))
                .verdict
                .reason()
            }),
        ),
        (
            "provider id too long",
            R::OutputsInvalid,
            Box::new(move || {
                decode_machine(
                    &outputs(with(machine_ok(), "provider_id", json!("x".repeat(513)))),
                    &MachineContext::default(),
                )
                .verdict
                .reason()
            }),
        ),
        (
            "bad address type",
            R::OutputsInvalid,
            Box::new(|| {
                decode_machine(
                    &outputs(with(
                        machine_ok(),
                        "addresses",
                        json!([{"type": "PrivateIP", "address": "a"}]),
                    )),
                    &MachineContext::default(),
                )
                .verdict
                .reason()
            }),
        ),
        (
            "too many addresses",
            R::OutputsInvalid,
            Box::new(|| {
                let a: Vec<Value> = (0..257).map(|i| json!({"type": "InternalIP", "address": format!("10.0.{}.{}", i / 256, i % 256)})).collect();
                decode_machine(
                    &outputs(with(machine_ok(), "addresses", Value::Array(a))),
                    &MachineContext::default(),
                )
                .verdict
                .reason()
            }),
        ),
        (
            "interruptible wrong type",
            R::OutputsInvalid,
            Box::new(|| {
                decode_machine(
                    &outputs(with(machine_ok(), "interruptible", json!("no"))),
                    &MachineContext::default(),
                )
                .verdict
                .reason()
            }),
        ),
        (
            "replicas wrong type",
            R::OutputsInvalid,
            Box::new(|| {
                decode_machinepool(&outputs(with(pool_ok(), "replicas", json!("3"))))
                    .verdict
                    .reason()
            }),
        ),
        (
            "negative replicas",
            R::OutputsInvalid,
            Box::new(|| {
                decode_machinepool(&outputs(with(pool_ok(), "replicas", json!(-1))))
                    .verdict
                    .reason()
            }),
        ),
        (
            "empty id in list",
            R::OutputsInvalid,
            Box::new(|| {
                decode_machinepool(&outputs(with(
                    pool_ok(),
                    "provider_id_list",
                    json!(["a", ""]),
                )))
                .verdict
                .reason()
            }),
        ),
        (
            "instance without provider id",
            R::OutputsInvalid,
            Box::new(|| {
                decode_machinepool(&outputs(with(
                    pool_ok(),
                    "instances",
                    json!([{"provider_id": ""}]),
                )))
                .verdict
                .reason()
            }),
        ),
        (
            "instance state outside the enum",
            R::OutputsInvalid,
            Box::new(|| {
                decode_machinepool(&outputs(with(
                    pool_ok(),
                    "instances",
                    json!([{"provider_id": "p", "state": "flourishing"}]),
                )))
                .verdict
                .reason()
            }),
        ),
        (
            "failure domain differs",
            R::FailureDomainMismatch,
            Box::new(|| {
                decode_machine(
                    &outputs(with(machine_ok(), "failure_domain", json!("fd2"))),
                    &MachineContext {
                        requested_failure_domain: Some("fd1".into()),
                        recorded_provider_id: None,
                    },
                )
                .verdict
                .reason()
            }),
        ),
        (
            "failure domain null but requested",
            R::FailureDomainMismatch,
            Box::new(|| {
                decode_machine(
                    &outputs(with(machine_ok(), "failure_domain", Value::Null)),
                    &MachineContext {
                        requested_failure_domain: Some("fd1".into()),
                        recorded_provider_id: None,
                    },
                )
                .verdict
                .reason()
            }),
        ),
        (
            "provider id changed",
            R::ProviderIDChanged,
            Box::new(|| {
                decode_machine(
                    &outputs(machine_ok()),
                    &MachineContext {
                        requested_failure_domain: None,
                        recorded_provider_id: Some("noop:///ns/old".into()),
                    },
                )
                .verdict
                .reason()
            }),
        ),
        (
            "provider id null",
            R::OutputsPending,
            Box::new(move || {
                decode_machine(
                    &outputs(with(machine_ok(), "provider_id", Value::Null)),
                    &no_ctx,
                )
                .verdict
                .reason()
            }),
        ),
        (
            "provider id empty",
            R::OutputsPending,
            Box::new(|| {
                decode_machine(
                    &outputs(with(machine_ok(), "provider_id", json!(""))),
                    &MachineContext::default(),
                )
                .verdict
                .reason()
            }),
        ),
        (
            "addresses null",
            R::OutputsPending,
            Box::new(|| {
                decode_machine(
                    &outputs(with(machine_ok(), "addresses", Value::Null)),
                    &MachineContext::default(),
                )
                .verdict
                .reason()
            }),
        ),
        (
            "health null",
            R::OutputsPending,
            Box::new(|| {
                decode_machinepool(&outputs(with(pool_ok(), "health", Value::Null)))
                    .verdict
                    .reason()
            }),
        ),
        (
            "absent from state reads as null",
            R::OutputsPending,
            Box::new(|| {
                let state =
                    json!({"provider_id": {"value": "p", "type": "string", "sensitive": true}});
                decode_machinepool(&RootOutputs::from_output_json(&state).unwrap())
                    .verdict
                    .reason()
            }),
        ),
        (
            "over 1000 instances",
            R::InstancesTruncated,
            Box::new(|| {
                let inst: Vec<Value> = (0..1001)
                    .map(|i| json!({"provider_id": format!("p/{i}")}))
                    .collect();
                decode_machinepool(&outputs(with(pool_ok(), "instances", Value::Array(inst))))
                    .verdict
                    .reason()
            }),
        ),
    ];
    for (name, expected, run) in cases {
        assert_eq!(run(), expected, "{name}");
    }
    assert_eq!(R::InstancesTruncated.status(), ConditionStatus::True);
    assert_eq!(R::OutputsPending.status(), ConditionStatus::Unknown);
    for r in [
        R::OutputsMissing,
        R::OutputsInvalid,
        R::FailureDomainMismatch,
        R::ProviderIDChanged,
    ] {
        assert_eq!(r.status(), ConditionStatus::False, "{r:?}");
    }
}

#[test]
fn truncation_keeps_the_first_thousand_and_still_writes() {
    let inst: Vec<Value> = (0..1500)
        .map(|i| json!({"provider_id": format!("p/{i}")}))
        .collect();
    let d = decode_machinepool(&outputs(with(pool_ok(), "instances", Value::Array(inst))));
    assert!(d.verdict.writable());
    let out = d.outputs.unwrap();
    assert_eq!(out.instances.len(), MAX_POOL_INSTANCES);
    assert_eq!(out.instances[999].provider_id, "p/999");
}

#[test]
fn the_first_reason_wins_and_the_message_lists_every_problem() {
    let mut o = without(machine_ok(), "health");
    o["provider_id"] = Value::Null;
    o["interruptible"] = json!(1);
    let d = decode_machine(
        &outputs(o),
        &MachineContext {
            requested_failure_domain: Some("fd9".into()),
            recorded_provider_id: None,
        },
    );
    assert_eq!(d.verdict.reason(), R::OutputsMissing);
    assert!(d.outputs.is_none());
    let msg = d.verdict.message();
    for part in [
        "health: required output is not declared",
        "provider_id: not known yet",
        "interruptible: must be a bool",
        "failure_domain: does not equal",
    ] {
        assert!(msg.contains(part), "{part} not in {msg}");
    }
    assert_eq!(msg.matches("; ").count(), 3, "{msg}");
}

#[test]
fn messages_never_carry_output_values() {
    let secretish = "s3cr3t-".repeat(80);
    let d = decode_machine(
        &outputs(with(machine_ok(), "provider_id", json!(secretish))),
        &MachineContext::default(),
    );
    assert_eq!(d.verdict.reason(), R::OutputsInvalid);
    assert!(
        !d.verdict.message().contains("s3cr3t"),
        "{}",
        d.verdict.message()
    );
}

#[test]
fn large_exports_are_valid_but_not_published() {
    let big = "x".repeat(70_000);
    let d = decode_cluster(&outputs(with(
        cluster_ok(),
        "exports",
        json!({"blob": big}),
    )));
    assert_eq!(d.verdict.reason(), R::OutputsValid);
    let out = d.outputs.unwrap();
    assert_eq!(out.published_exports, None);
    assert!(out.exports_hash.starts_with("h2:"));
}

#[test]
fn exports_keep_every_number_as_written() {
    // Fractions, exponents and long integers are valid exports: only the
    // inputs hash of a machine or pool consuming them refuses fractions.
    let exports = r#"{"w": 0.50, "n": 123456789012345678901234567890, "e": 1E+3}"#;
    let values = cluster_ok()
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| *name != "exports")
        .map(|(name, value)| (name.clone(), JsonText::from(value)))
        .chain([("exports".to_owned(), JsonText::parse(exports).unwrap())])
        .collect::<Vec<_>>();
    let d = decode_cluster(&RootOutputs::from_state_values(values));
    assert_eq!(
        d.verdict.reason(),
        R::OutputsValid,
        "{}",
        d.verdict.message()
    );
    let out = d.outputs.unwrap();
    // Kept as written, only without the whitespace a state puts in.
    assert_eq!(
        out.exports.as_str(),
        r#"{"w":0.50,"n":123456789012345678901234567890,"e":1E+3}"#
    );
    assert_eq!(out.exports_hash, exports_hash(exports).unwrap());
    assert_eq!(
        out.published_exports.as_deref(),
        Some(r#"{"e":1E+3,"n":123456789012345678901234567890,"w":0.50}"#)
    );
}

#[test]
fn unknown_health_state_is_invalid_and_reads_as_unknown_health() {
    let d = decode(
        Role::Cluster,
        &outputs(with(
            cluster_ok(),
            "health",
            json!({"state": "flourishing", "healthy": true}),
        )),
    );
    let captf_contract::outputs::RoleOutputs::Cluster(d) = d else {
        panic!()
    };
    assert_eq!(d.verdict.reason(), R::OutputsInvalid);
    assert_eq!(d.health, None);
    let c = captf_contract::health::infrastructure_healthy(d.health.as_ref());
    assert_eq!(
        (c.status, c.reason),
        (ConditionStatus::Unknown, "HealthUnknown")
    );
}
