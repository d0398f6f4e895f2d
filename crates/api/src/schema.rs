//! Hand-written schema fragments the derive cannot express.

use schemars::{Schema, SchemaGenerator, json_schema};

/// Module variables: any JSON object of 1 to 256 keys, kept unpruned.
pub fn variables(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "minProperties": 1,
        "maxProperties": captf_contract::names::MAX_VARIABLES,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Any JSON value, kept unpruned.
pub fn free_form(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
    })
}
