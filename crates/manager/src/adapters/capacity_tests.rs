use super::*;
use serde_json::json;

fn inspected(pairs: &[(&str, &str)]) -> Result<Inspected, InspectError> {
    Ok(Inspected {
        digest: "sha256:x".into(),
        labels: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    })
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

const IMAGE: &str = "registry.example/noop-machine:v1";

fn view<'a>(
    spec: Option<&'a BTreeMap<String, Quantity>>,
    status: Option<&'a TerraformMachineTemplateStatus>,
) -> TemplateView<'a> {
    TemplateView {
        image: IMAGE,
        spec_capacity: spec,
        status,
    }
}

#[test]
fn resolution_table() {
    let spec = quantities(&[("cpu", "2")]);
    let label_cap = r#"{"cpu":"4","memory":"16Gi"}"#;
    let label_ni = r#"{"architecture":"arm64","operatingSystem":"linux"}"#;
    let previous = TerraformMachineTemplateStatus {
        capacity: Some(quantities(&[("cpu", "1")])),
        node_info: Some(NodeInfo {
            architecture: Some(Architecture::Amd64),
            operating_system: None,
        }),
        capacity_source: Some(CapacitySource {
            source: Some(CapacitySourceKind::Image),
            image: Some("old:v0".into()),
        }),
        ..Default::default()
    };
    let failed = Err(InspectError::Failed(
        "GET https://registry.example/v2/...: status 500".into(),
    ));
    let refused = Err(InspectError::NotAllowed("registry is not allowed".into()));
    struct Case<'a> {
        what: &'a str,
        spec: Option<&'a BTreeMap<String, Quantity>>,
        inspection: Result<Inspected, InspectError>,
        reason: &'a str,
        capacity: Option<BTreeMap<String, Quantity>>,
        source: Option<(CapacitySourceKind, Option<&'a str>)>,
        arch: Option<Architecture>,
        retry: bool,
    }
    let cases = [
        Case {
            what: "both labels",
            spec: None,
            inspection: inspected(&[(CAPACITY_LABEL, label_cap), (NODE_INFO_LABEL, label_ni)]),
            reason: reasons::CAPACITY_RESOLVED,
            capacity: Some(quantities(&[("cpu", "4"), ("memory", "16Gi")])),
            source: Some((CapacitySourceKind::Image, Some(IMAGE))),
            arch: Some(Architecture::Arm64),
            retry: false,
        },
        Case {
            what: "spec.capacity replaces the label wholesale",
            spec: Some(&spec),
            inspection: inspected(&[(CAPACITY_LABEL, label_cap), (NODE_INFO_LABEL, label_ni)]),
            reason: reasons::CAPACITY_RESOLVED,
            capacity: Some(spec.clone()),
            source: Some((CapacitySourceKind::Spec, Some(IMAGE))),
            arch: Some(Architecture::Arm64),
            retry: false,
        },
        Case {
            what: "no labels",
            spec: None,
            inspection: inspected(&[]),
            reason: reasons::CAPACITY_NOT_DECLARED,
            capacity: None,
            source: Some((CapacitySourceKind::Image, Some(IMAGE))),
            arch: None,
            retry: false,
        },
        Case {
            what: "an invalid label: unset, not retried",
            spec: None,
            inspection: inspected(&[(CAPACITY_LABEL, r#"{"cpu":"lots"}"#)]),
            reason: reasons::CAPACITY_LABEL_INVALID,
            capacity: None,
            source: Some((CapacitySourceKind::Image, Some(IMAGE))),
            arch: None,
            retry: false,
        },
        Case {
            what: "unreadable: the previous values kept, retried",
            spec: None,
            inspection: failed.clone(),
            reason: reasons::IMAGE_INSPECT_FAILED,
            capacity: previous.capacity.clone(),
            source: Some((CapacitySourceKind::Image, Some("old:v0"))),
            arch: Some(Architecture::Amd64),
            retry: true,
        },
        Case {
            what: "unreadable with spec.capacity: still resolved",
            spec: Some(&spec),
            inspection: failed,
            reason: reasons::CAPACITY_RESOLVED,
            capacity: Some(spec.clone()),
            source: Some((CapacitySourceKind::Spec, None)),
            arch: Some(Architecture::Amd64),
            retry: true,
        },
        Case {
            what: "refused by policy: not retried",
            spec: None,
            inspection: refused,
            reason: reasons::IMAGE_INSPECT_FAILED,
            capacity: previous.capacity.clone(),
            source: Some((CapacitySourceKind::Image, Some("old:v0"))),
            arch: Some(Architecture::Amd64),
            retry: false,
        },
    ];
    for c in cases {
        let r = resolve(
            &view(c.spec, Some(&previous)),
            &c.inspection,
            &TemplateVariables::Merged(Default::default()),
        );
        assert_eq!(r.capacity_resolved.reason, c.reason, "{}", c.what);
        assert_eq!(r.capacity, c.capacity, "{}", c.what);
        let source = r
            .capacity_source
            .as_ref()
            .map(|s| (s.source.unwrap(), s.image.as_deref()));
        assert_eq!(source, c.source, "{}", c.what);
        assert_eq!(
            r.node_info.and_then(|n| n.architecture),
            c.arch,
            "{}",
            c.what
        );
        assert_eq!(r.retry, c.retry, "{}", c.what);
    }
    let merged = TemplateVariables::Merged(Default::default());
    let with_spec = resolve(
        &view(Some(&spec), None),
        &Err(InspectError::Failed("x".into())),
        &merged,
    );
    assert!(
        with_spec
            .capacity_resolved
            .message
            .starts_with("image not inspected"),
        "{:?}",
        with_spec.capacity_resolved
    );
    let failed = resolve(
        &view(None, None),
        &Err(InspectError::Failed("GET https://user:secret@r/...".into())),
        &merged,
    );
    assert!(
        !failed.capacity_resolved.message.contains("secret"),
        "names the failure class only"
    );
}

#[test]
fn resolution_is_due_once_per_image_and_capacity() {
    let spec = quantities(&[("cpu", "2")]);
    let from_image = TerraformMachineTemplateStatus {
        capacity_source: Some(CapacitySource {
            source: Some(CapacitySourceKind::Image),
            image: Some(IMAGE.into()),
        }),
        ..Default::default()
    };
    let from_spec = TerraformMachineTemplateStatus {
        capacity: Some(spec.clone()),
        capacity_source: Some(CapacitySource {
            source: Some(CapacitySourceKind::Spec),
            image: Some(IMAGE.into()),
        }),
        ..Default::default()
    };
    let other = quantities(&[("cpu", "8")]);
    let cases = [
        ("never resolved", None, None, true),
        ("resolved for this image", None, Some(&from_image), false),
        (
            "spec.capacity set since",
            Some(&spec),
            Some(&from_image),
            true,
        ),
        (
            "spec.capacity as resolved",
            Some(&spec),
            Some(&from_spec),
            false,
        ),
        (
            "spec.capacity changed",
            Some(&other),
            Some(&from_spec),
            true,
        ),
        ("spec.capacity removed", None, Some(&from_spec), true),
    ];
    for (what, spec, status, want) in cases {
        assert_eq!(due(&view(spec, status)), want, "{what}");
    }
    let mut pending = from_image.clone();
    pending.conditions = Some(vec![
        serde_json::from_value(json!({
            "type": "VariablesValid", "status": "Unknown",
            "reason": reasons::VARIABLES_SOURCE_PENDING, "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }))
        .unwrap(),
    ]);
    assert!(
        due(&view(None, Some(&pending))),
        "a variables source is awaited"
    );
    let mut new_image = view(None, Some(&from_image));
    new_image.image = "registry.example/noop-machine:v2";
    assert!(due(&new_image), "a new image");
}

#[test]
fn variables_against_the_schema() {
    let schema = json!({"type": "object", "additionalProperties": false,
        "properties": {"size": {"type": "string"}, "count": {"type": ["integer", "null"]}},
        "required": ["size"]})
    .to_string();
    let vars = |v: Value| TemplateVariables::Merged(v.as_object().unwrap().clone());
    let cases = [
        (
            "fits",
            Some(&schema),
            vars(json!({"size": "m", "count": 2})),
            reasons::VARIABLES_VALID,
        ),
        (
            "unknown name",
            Some(&schema),
            vars(json!({"size": "m", "zone": "a"})),
            reasons::VARIABLES_REJECTED,
        ),
        (
            "required unset",
            Some(&schema),
            vars(json!({"count": 1})),
            reasons::VARIABLES_REJECTED,
        ),
        (
            "wrong type",
            Some(&schema),
            vars(json!({"size": 3})),
            reasons::VARIABLES_REJECTED,
        ),
        (
            "no schema",
            None,
            vars(json!({"anything": 1})),
            reasons::VARIABLES_SCHEMA_NOT_DECLARED,
        ),
        (
            "a source missing",
            Some(&schema),
            TemplateVariables::SourcePending("spec.variablesFrom[0]: ConfigMap sizes".into()),
            reasons::VARIABLES_SOURCE_PENDING,
        ),
        (
            "a source key unusable",
            Some(&schema),
            TemplateVariables::Rejected("spec.variablesFrom[0] key 1x".into()),
            reasons::VARIABLES_REJECTED,
        ),
    ];
    for (what, schema, v, reason) in cases {
        assert_eq!(
            variables_valid(schema.map(|s| s as &String), &v).reason,
            reason,
            "{what}"
        );
    }
    let c = variables_valid(
        Some(&schema),
        &vars(json!({"size": "top-secret-value", "zone": "a"})),
    );
    assert!(
        c.message.contains("zone") && !c.message.contains("top-secret-value"),
        "{}",
        c.message
    );
}
