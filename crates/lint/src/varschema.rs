//! `tfcapi-lint schema`: the JSON Schema of a module's user variables, the
//! value an image carries as its `io.captf.variables-schema` label. The
//! manager validates `spec.variables`/`variablesFrom` against it, so it must
//! accept every value Terraform would accept and name every required one.
//!
//! The dialect is kept to `type`, `properties`, `required`, `items`,
//! `prefixItems` and `additionalProperties`: what the label's consumers read.

use crate::config::expr::Const;
use crate::config::load::Tree;
use crate::config::model::{self, Variable};
use crate::contract::{self, RESERVED_PREFIX, Role};
use crate::types::{self, Attr, Type};
use serde::Serialize;
use std::collections::BTreeMap;

/// The largest schema `schema` prints, in bytes. Registries and runtimes cap
/// an image config's labels as a whole; a schema past this size is a sign the
/// module takes too much through variables, and is refused rather than cut.
pub const MAX_LABEL_BYTES: usize = 16384;

/// A JSON Schema in the label's dialect. Field order is the JSON key order:
/// the root reads `type`, `additionalProperties`, `properties`, `required`.
/// The empty schema (every field `None`) accepts anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Schema {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub ty: Option<JsonType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_properties: Option<Additional>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub properties: Option<BTreeMap<String, Schema>>,
    /// Present (possibly empty) exactly when `properties` is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub items: Option<Box<Schema>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_items: Option<Vec<Schema>>,
}

/// `"type"`: one JSON type name, or several when a value may also be null.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum JsonType {
    One(&'static str),
    Many(Vec<&'static str>),
}

/// `"additionalProperties"`: closed (`false`) or each value's schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Additional {
    Allowed(bool),
    Each(Box<Schema>),
}

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// A type constraint Terraform would reject too. Only the variable and
    /// the parser's complaint are named, never a default value.
    #[error("{file}:{line}: variable {name}: cannot read its type constraint: {message}")]
    UnreadableType {
        file: String,
        line: usize,
        name: String,
        message: String,
    },
}

impl Schema {
    fn typed(name: &'static str) -> Self {
        Schema {
            ty: Some(JsonType::One(name)),
            ..Schema::default()
        }
    }

    /// Whether the schema constrains nothing (Terraform's `any`).
    pub fn is_anything(&self) -> bool {
        *self == Schema::default()
    }

    /// Adds `"null"` to the allowed types; an untyped schema already takes it.
    fn or_null(mut self) -> Self {
        self.ty = match self.ty {
            Some(JsonType::One(t)) => Some(JsonType::Many(vec![t, "null"])),
            Some(JsonType::Many(mut ts)) => {
                if !ts.contains(&"null") {
                    ts.push("null");
                }
                Some(JsonType::Many(ts))
            }
            None => None,
        };
        self
    }

    /// The compact one-line JSON text, as the label holds it.
    pub fn to_compact_json(&self) -> String {
        // Only strings, booleans, maps and vectors: encoding cannot fail.
        serde_json::to_string(self).expect("a schema always encodes")
    }
}

/// A subschema worth writing: `None` for one that accepts anything, so
/// `list(any)` is a bare array rather than one with `"items":{}`.
fn constraining(schema: Schema) -> Option<Schema> {
    (!schema.is_anything()).then_some(schema)
}

/// The schema of the values a Terraform type constraint accepts. Nested
/// values get no `"null"`: the schema describes what a user should write.
pub fn type_schema(ty: &Type) -> Schema {
    match ty {
        Type::String => Schema::typed("string"),
        Type::Number => Schema::typed("number"),
        Type::Bool => Schema::typed("boolean"),
        Type::Any => Schema::default(),
        Type::List(elem) | Type::Set(elem) => Schema {
            items: constraining(type_schema(elem)).map(Box::new),
            ..Schema::typed("array")
        },
        Type::Tuple(elems) => Schema {
            // The meta-schema wants a non-empty `prefixItems`.
            prefix_items: (!elems.is_empty()).then(|| elems.iter().map(type_schema).collect()),
            ..Schema::typed("array")
        },
        Type::Map(elem) => Schema {
            additional_properties: constraining(type_schema(elem))
                .map(|s| Additional::Each(Box::new(s))),
            ..Schema::typed("object")
        },
        Type::Object(attrs) => object_schema(attrs),
    }
}

/// `object({...})`: every attribute a property, those not wrapped in
/// `optional(...)` required. Left open: Terraform drops unknown attributes
/// when it converts a value to an object type, it does not reject them.
fn object_schema(attrs: &BTreeMap<String, Attr>) -> Schema {
    let properties = attrs
        .iter()
        .map(|(name, a)| (name.clone(), type_schema(&a.ty)))
        .collect();
    let required = attrs
        .iter()
        .filter(|(_, a)| !a.optional)
        .map(|(name, _)| name.clone())
        .collect();
    Schema {
        properties: Some(properties),
        required: Some(required),
        ..Schema::typed("object")
    }
}

/// The variables a user sets: every declared one except the `captf_*`
/// names and the role's contract inputs, which the controller sets.
pub fn user_variables<'a, 'b>(vars: &'b [Variable<'a>], role: Role) -> Vec<&'b Variable<'a>> {
    vars.iter()
        .filter(|v| !v.name.starts_with(RESERVED_PREFIX) && contract::input(role, v.name).is_none())
        .collect()
}

/// One variable's schema. A nullable variable whose default is `null` also
/// takes `null`: a user may write it to mean "the module's default".
pub fn variable_schema(v: &Variable) -> Result<Schema, SchemaError> {
    let schema = match &v.type_src {
        None => Schema::default(),
        Some(src) => {
            let ty = types::parse(src).map_err(|message| SchemaError::UnreadableType {
                file: v.loc.file.clone(),
                line: v.loc.line,
                name: v.name.to_string(),
                message,
            })?;
            type_schema(&ty)
        }
    };
    let null_default = v.default.and_then(|d| d.constant()) == Some(Const::Null);
    Ok(if v.nullable && null_default {
        schema.or_null()
    } else {
        schema
    })
}

/// The root schema of the module's user variables: a closed object, every
/// user variable a property, those without a default required (sorted).
pub fn build(tree: &Tree, role: Role) -> Result<Schema, SchemaError> {
    let vars = model::variables(tree.modules[0].contract_config());
    let mut properties = BTreeMap::new();
    let mut required = Vec::new();
    for v in user_variables(&vars, role) {
        properties.insert(v.name.to_string(), variable_schema(v)?);
        if v.default.is_none() {
            required.push(v.name.to_string());
        }
    }
    required.sort();
    required.dedup();
    Ok(Schema {
        additional_properties: Some(Additional::Allowed(false)),
        properties: Some(properties),
        required: Some(required),
        ..Schema::typed("object")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ir;
    use serde_json::json;

    #[test]
    fn type_mapping_table() {
        let cases = [
            ("string", json!({"type": "string"})),
            ("number", json!({"type": "number"})),
            ("bool", json!({"type": "boolean"})),
            ("any", json!({})),
            (
                "list(string)",
                json!({"type": "array", "items": {"type": "string"}}),
            ),
            (
                "set(number)",
                json!({"type": "array", "items": {"type": "number"}}),
            ),
            ("list(any)", json!({"type": "array"})),
            (
                "list(list(bool))",
                json!({"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}}),
            ),
            (
                "tuple([string, number])",
                json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]}),
            ),
            ("tuple([])", json!({"type": "array"})),
            (
                "map(string)",
                json!({"type": "object", "additionalProperties": {"type": "string"}}),
            ),
            ("map(any)", json!({"type": "object"})),
            (
                "object({host = string, port = optional(number, 443), tags = optional(map(string))})",
                json!({
                    "type": "object",
                    "properties": {
                        "host": {"type": "string"},
                        "port": {"type": "number"},
                        "tags": {"type": "object", "additionalProperties": {"type": "string"}}
                    },
                    "required": ["host"]
                }),
            ),
            (
                "object({})",
                json!({"type": "object", "properties": {}, "required": []}),
            ),
            (
                "list(object({name = string}))",
                json!({"type": "array", "items": {
                    "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]
                }}),
            ),
        ];
        for (src, want) in cases {
            let got = serde_json::to_value(type_schema(&types::parse(src).unwrap())).unwrap();
            assert_eq!(got, want, "{src}");
        }
    }

    fn vars_of(src: &str) -> Vec<ir::Block> {
        ir::parse_native("variables.tf", src).unwrap()
    }

    fn schema_of(decl: &str) -> serde_json::Value {
        let blocks = vars_of(decl);
        let vars = model::variables(&blocks);
        serde_json::to_value(variable_schema(&vars[0]).unwrap()).unwrap()
    }

    #[test]
    fn null_is_allowed_only_for_a_nullable_variable_defaulting_to_null() {
        let cases = [
            (
                "type = string\ndefault = null",
                json!({"type": ["string", "null"]}),
            ),
            (
                "type = list(string)\ndefault = null",
                json!({"type": ["array", "null"], "items": {"type": "string"}}),
            ),
            (
                "type = string\ndefault = null\nnullable = true",
                json!({"type": ["string", "null"]}),
            ),
            (
                "type = string\ndefault = null\nnullable = false",
                json!({"type": "string"}),
            ),
            ("type = string\ndefault = \"x\"", json!({"type": "string"})),
            ("type = string", json!({"type": "string"})),
            ("type = any\ndefault = null", json!({})),
            ("default = null", json!({})),
            ("default = 3", json!({})),
        ];
        for (body, want) in cases {
            let got = schema_of(&format!("variable \"v\" {{\n{body}\n}}\n"));
            assert_eq!(got, want, "{body}");
        }
    }

    #[test]
    fn an_unreadable_type_names_the_variable_and_its_place() {
        let blocks =
            vars_of("\n\nvariable \"size\" {\n  type = strin\n  default = \"s3cret\"\n}\n");
        let vars = model::variables(&blocks);
        let e = variable_schema(&vars[0]).unwrap_err().to_string();
        assert!(
            e.starts_with("variables.tf:3: variable size: cannot read its type constraint"),
            "{e}"
        );
        assert!(!e.contains("s3cret"), "{e}");
    }

    #[test]
    fn user_variables_leave_out_the_contract_inputs() {
        let blocks = vars_of(
            "variable \"captf_tags\" {}\nvariable \"captf_cluster_outputs\" {}\nvariable \"machine_name\" {}\nvariable \"replicas\" {}\nvariable \"size\" {}\n",
        );
        let vars = model::variables(&blocks);
        let names =
            |role| -> Vec<&str> { user_variables(&vars, role).iter().map(|v| v.name).collect() };
        // `replicas` is a pool input, so a machine module's own variable.
        assert_eq!(names(Role::Machine), ["replicas", "size"]);
        assert_eq!(names(Role::MachinePool), ["machine_name", "size"]);
    }

    #[test]
    fn or_null_does_not_repeat_null() {
        let s = Schema {
            ty: Some(JsonType::Many(vec!["string", "null"])),
            ..Schema::default()
        };
        assert_eq!(s.clone().or_null(), s);
        assert_eq!(Schema::default().or_null(), Schema::default());
    }
}
