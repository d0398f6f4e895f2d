//! Every kind and every field of every CRD carries a description, so
//! `kubectl explain` answers for the whole API. A field added without a doc
//! comment fails here, named by its path.

use captf_api::crds;
use serde_json::{Value, json};

/// What kube's derive writes when a kind has no `#[kube(doc = ...)]`.
const PLACEHOLDER: &str = "Auto-generated derived type";

fn described(schema: &Value) -> bool {
    schema
        .get("description")
        .and_then(Value::as_str)
        .is_some_and(|d| !d.trim().is_empty())
}

/// Collects the path of every property under `schema` that has no
/// description. Array items are written `[*]`, map values `{*}`, and the
/// members of `allOf`/`anyOf`/`oneOf` keep the path of their parent, since
/// their properties land on the same object.
fn undescribed(schema: &Value, path: &str, out: &mut Vec<String>) {
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            let at = format!("{path}.{name}");
            if !described(prop) {
                out.push(at.clone());
            }
            undescribed(prop, &at, out);
        }
    }
    match schema.get("items") {
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                undescribed(item, &format!("{path}[{i}]"), out);
            }
        }
        Some(item @ Value::Object(_)) => undescribed(item, &format!("{path}[*]"), out),
        _ => {}
    }
    if let Some(extra @ Value::Object(_)) = schema.get("additionalProperties") {
        undescribed(extra, &format!("{path}{{*}}"), out);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for member in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            undescribed(member, path, out);
        }
    }
}

/// Every problem of every CRD: kinds without a real top-level description
/// and fields without any description.
fn problems() -> Vec<String> {
    let mut problems = Vec::new();
    for crd in crds::all() {
        let kind = &crd.spec.names.kind;
        for version in &crd.spec.versions {
            let schema = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .unwrap_or_else(|| panic!("{kind} {} has no schema", version.name));
            let schema = serde_json::to_value(schema).expect("a schema serialises");
            let top = schema.get("description").and_then(Value::as_str);
            match top {
                Some(d) if d.trim().is_empty() => {
                    problems.push(format!("{kind} {}: empty kind description", version.name))
                }
                Some(d) if d.trim_start().starts_with(PLACEHOLDER) => problems.push(format!(
                    "{kind} {}: kind description is the derive's placeholder",
                    version.name
                )),
                None => problems.push(format!("{kind} {}: no kind description", version.name)),
                Some(_) => {}
            }
            let mut paths = Vec::new();
            undescribed(&schema, "", &mut paths);
            problems.extend(
                paths
                    .into_iter()
                    .map(|p| format!("{kind} {}: {p}", version.name)),
            );
        }
    }
    problems
}

#[test]
fn every_kind_and_field_has_a_description() {
    let problems = problems();
    assert!(
        problems.is_empty(),
        "{} kinds or fields lack a description (add a doc comment to the Rust type or field, then run crdgen):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_walk_reaches_items_maps_and_combinators() {
    let schema = json!({
        "properties": {
            "plain": {"type": "string"},
            "list": {
                "description": "d",
                "items": {"properties": {"inItem": {"type": "string"}}},
            },
            "tuple": {
                "description": "d",
                "items": [{"properties": {"first": {"type": "string"}}}],
            },
            "map": {
                "description": "d",
                "additionalProperties": {"properties": {"inValue": {"type": "string"}}},
            },
            "union": {
                "description": "d",
                "anyOf": [{"properties": {"a": {"description": " "}}}],
                "oneOf": [{"properties": {"b": {}}}],
                "allOf": [{"properties": {"c": {"description": "d"}}}],
            },
        },
    });
    let mut found = Vec::new();
    undescribed(&schema, "", &mut found);
    found.sort();
    assert_eq!(
        found,
        [
            ".list[*].inItem",
            ".map{*}.inValue",
            ".plain",
            ".tuple[0].first",
            ".union.a",
            ".union.b",
        ]
    );
}
