//! A TerraformMachineTemplate's scale-from-zero status: `status.capacity`,
//! `status.nodeInfo` and `status.capacitySource` from `spec.capacity` or the
//! image's `io.captf.capacity` / `io.captf.node-info` labels, with
//! `CapacityResolved` and `VariablesValid`. Pure: the controller inspects
//! the image and writes what this returns.

use std::collections::BTreeMap;

use captf_api::names::reasons;
use captf_api::templates::{
    Architecture, CapacitySource, CapacitySourceKind, NodeInfo, TerraformMachineTemplateStatus,
};
use captf_lint::image::inspect::{InspectError, Inspected};
use captf_lint::image::labels;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use super::condition;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};

pub const CAPACITY_LABEL: &str = "io.captf.capacity";
pub const NODE_INFO_LABEL: &str = "io.captf.node-info";
pub const VARIABLES_SCHEMA_LABEL: &str = "io.captf.variables-schema";

/// The template's variables as merged for the check: its `variablesFrom`
/// sources, then its inline variables.
#[derive(Debug, Clone, PartialEq)]
pub enum TemplateVariables {
    Merged(serde_json::Map<String, Value>),
    /// A source is missing or unlabeled; the message names it.
    SourcePending(String),
    /// A source key or value is unusable; the message names the key.
    Rejected(String),
}

/// What the resolution reads of the template.
#[derive(Debug, Clone, Copy)]
pub struct TemplateView<'a> {
    pub image: &'a str,
    pub spec_capacity: Option<&'a BTreeMap<String, Quantity>>,
    pub status: Option<&'a TerraformMachineTemplateStatus>,
}

/// `VariablesValid` waits for a source (checked again every 30 s).
pub fn variables_pending(status: Option<&TerraformMachineTemplateStatus>) -> bool {
    status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == captf_api::names::conditions::VARIABLES_VALID
                && c.reason == reasons::VARIABLES_SOURCE_PENDING
        })
}

/// Whether the status must be resolved again: a new image, or a
/// `spec.capacity` the status does not reflect. Tags are not polled.
pub fn due(v: &TemplateView<'_>) -> bool {
    let Some(status) = v.status else {
        return true;
    };
    if variables_pending(Some(status)) {
        return true;
    }
    let source = status.capacity_source.as_ref();
    let kind = source.and_then(|s| s.source);
    let inspected = source.and_then(|s| s.image.as_deref()) == Some(v.image);
    match v.spec_capacity {
        Some(cap) => {
            !inspected
                || kind != Some(CapacitySourceKind::Spec)
                || status.capacity.as_ref() != Some(cap)
        }
        None => !inspected || kind == Some(CapacitySourceKind::Spec),
    }
}

/// What a resolution writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub capacity: Option<BTreeMap<String, Quantity>>,
    pub node_info: Option<NodeInfo>,
    pub capacity_source: Option<CapacitySource>,
    pub capacity_resolved: ConditionValue,
    pub variables_valid: ConditionValue,
    /// A failed read, retried with backoff (a policy refusal is not).
    pub retry: bool,
}

fn capacity_label(value: &str) -> Result<BTreeMap<String, Quantity>, String> {
    labels::capacity(value)?;
    let v: BTreeMap<String, String> = serde_json::from_str(value).map_err(|e| e.to_string())?;
    if v.is_empty() {
        return Err("declares no resource".into());
    }
    Ok(v.into_iter().map(|(k, q)| (k, Quantity(q))).collect())
}

fn node_info_label(value: &str) -> Result<NodeInfo, String> {
    labels::node_info(value)?;
    let v: Value = serde_json::from_str(value).map_err(|e| e.to_string())?;
    let architecture = v["architecture"]
        .as_str()
        .map(|a| serde_json::from_value::<Architecture>(Value::from(a)))
        .transpose()
        .map_err(|e| e.to_string())?;
    Ok(NodeInfo {
        architecture,
        operating_system: v["operatingSystem"].as_str().map(str::to_owned),
    })
}

/// Resolves the status from the inspection of the template's image and its
/// variables.
pub fn resolve(
    v: &TemplateView<'_>,
    inspection: &Result<Inspected, InspectError>,
    variables: &TemplateVariables,
) -> Resolution {
    let previous = v.status.cloned().unwrap_or_default();
    let labels = match inspection {
        Ok(i) => &i.labels,
        Err(e) => return not_inspected(v, &previous, e),
    };
    let mut invalid = Vec::new();
    let label_capacity = labels.get(CAPACITY_LABEL).and_then(|l| {
        capacity_label(l)
            .map_err(|e| invalid.push(format!("label {CAPACITY_LABEL}: {e}")))
            .ok()
    });
    let node_info = labels.get(NODE_INFO_LABEL).and_then(|l| {
        node_info_label(l)
            .map_err(|e| invalid.push(format!("label {NODE_INFO_LABEL}: {e}")))
            .ok()
    });
    let declared = labels.contains_key(CAPACITY_LABEL) || labels.contains_key(NODE_INFO_LABEL);
    let (capacity, kind) = match v.spec_capacity {
        Some(cap) => (Some(cap.clone()), CapacitySourceKind::Spec),
        None => (label_capacity, CapacitySourceKind::Image),
    };
    let capacity_resolved = if !invalid.is_empty() {
        condition(
            ConditionStatus::False,
            reasons::CAPACITY_LABEL_INVALID,
            invalid.join("; "),
        )
    } else if v.spec_capacity.is_some() {
        condition(
            ConditionStatus::True,
            reasons::CAPACITY_RESOLVED,
            "capacity from spec.capacity",
        )
    } else if declared {
        condition(
            ConditionStatus::True,
            reasons::CAPACITY_RESOLVED,
            format!("capacity from the labels of {}", v.image),
        )
    } else {
        condition(
            ConditionStatus::True,
            reasons::CAPACITY_NOT_DECLARED,
            format!(
                "{} carries neither {CAPACITY_LABEL} nor {NODE_INFO_LABEL}",
                v.image
            ),
        )
    };
    Resolution {
        capacity,
        node_info,
        capacity_source: Some(CapacitySource {
            source: Some(kind),
            image: Some(v.image.to_owned()),
        }),
        capacity_resolved,
        variables_valid: variables_valid(labels.get(VARIABLES_SCHEMA_LABEL), variables),
        retry: false,
    }
}

/// The image could not be read: `spec.capacity` still stands (with the last
/// node info); without it the previous values are kept.
fn not_inspected(
    v: &TemplateView<'_>,
    previous: &TerraformMachineTemplateStatus,
    e: &InspectError,
) -> Resolution {
    let retry = matches!(e, InspectError::Failed(_));
    let class = match e {
        InspectError::NotAllowed(m) => format!("not allowed: {m}"),
        InspectError::Failed(_) => "the registry could not be read".to_owned(),
    };
    let variables_valid = condition(
        ConditionStatus::Unknown,
        reasons::VARIABLES_SCHEMA_UNAVAILABLE,
        format!("image not inspected ({class})"),
    );
    match v.spec_capacity {
        Some(cap) => Resolution {
            capacity: Some(cap.clone()),
            node_info: previous.node_info.clone(),
            capacity_source: Some(CapacitySource {
                source: Some(CapacitySourceKind::Spec),
                image: None,
            }),
            capacity_resolved: condition(
                ConditionStatus::True,
                reasons::CAPACITY_RESOLVED,
                format!("image not inspected ({class}); capacity from spec.capacity"),
            ),
            variables_valid,
            retry,
        },
        None => Resolution {
            capacity: previous.capacity.clone(),
            node_info: previous.node_info.clone(),
            capacity_source: previous.capacity_source.clone(),
            capacity_resolved: condition(
                ConditionStatus::False,
                reasons::IMAGE_INSPECT_FAILED,
                format!("image {} not inspected: {class}", v.image),
            ),
            variables_valid,
            retry,
        },
    }
}

fn json_type_fits(t: &str, value: &Value) -> bool {
    match t {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|f| f.fract() == 0.0),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    }
}

/// The template's variables against the image's variables schema (a closed
/// object schema: unknown names, required names, top-level types). Messages
/// name variables, never values.
pub fn variables_valid(schema: Option<&String>, variables: &TemplateVariables) -> ConditionValue {
    let not_declared = || {
        condition(
            ConditionStatus::True,
            reasons::VARIABLES_SCHEMA_NOT_DECLARED,
            "the image declares no usable variables schema",
        )
    };
    let Some(schema) = schema.and_then(|s| serde_json::from_str::<Value>(s).ok()) else {
        return not_declared();
    };
    let Some(properties) = schema["properties"].as_object() else {
        return not_declared();
    };
    let vars = match variables {
        TemplateVariables::Merged(vars) => vars,
        TemplateVariables::SourcePending(m) => {
            return condition(
                ConditionStatus::Unknown,
                reasons::VARIABLES_SOURCE_PENDING,
                m.clone(),
            );
        }
        TemplateVariables::Rejected(m) => {
            return condition(
                ConditionStatus::False,
                reasons::VARIABLES_REJECTED,
                m.clone(),
            );
        }
    };
    let mut problems = Vec::new();
    for (name, value) in vars {
        match properties.get(name) {
            None if schema["additionalProperties"] == Value::Bool(false) => {
                problems.push(format!("{name}: not a variable of the module"))
            }
            None => {}
            Some(p) => {
                let types: Vec<&str> = match &p["type"] {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => vec![],
                };
                if !types.is_empty() && !types.iter().any(|t| json_type_fits(t, value)) {
                    problems.push(format!("{name}: must be {}", types.join(" or ")));
                }
            }
        }
    }
    for name in schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !vars.contains_key(name) {
            problems.push(format!("{name}: required and not set"));
        }
    }
    if problems.is_empty() {
        condition(
            ConditionStatus::True,
            reasons::VARIABLES_VALID,
            "the variables fit the image's schema",
        )
    } else {
        condition(
            ConditionStatus::False,
            reasons::VARIABLES_REJECTED,
            problems.join("; "),
        )
    }
}

#[cfg(test)]
#[path = "capacity_tests.rs"]
mod tests;
