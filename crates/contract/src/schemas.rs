//! JSON Schemas (draft 2020-12) of every role's inputs and outputs, embedded
//! in the crate, with a valid and an invalid example of each. Input schemas
//! are closed at every level; output schemas are open and describe outputs
//! after normalisation (`""` identifiers read as null).
//!
//! Some rules are enforced by the decoder only: unique failure-domain names,
//! the machine's failure domain matching its request, and list ordering.

use crate::Role;

/// Base of every schema `$id`.
pub const SCHEMA_BASE_URI: &str = "https://captf.io/schemas/v1alpha1/";

/// Whether a schema describes what a module receives or what it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Inputs,
    Outputs,
}

impl Direction {
    pub const ALL: [Direction; 2] = [Direction::Inputs, Direction::Outputs];

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Inputs => "inputs",
            Direction::Outputs => "outputs",
        }
    }
}

/// One embedded schema file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaFile {
    /// File name, e.g. `machine-inputs.json`; the `$id` is
    /// [`SCHEMA_BASE_URI`] + `name`.
    pub name: &'static str,
    /// The schema text.
    pub text: &'static str,
}

impl SchemaFile {
    /// The schema's `$id`.
    pub fn id(&self) -> String {
        format!("{SCHEMA_BASE_URI}{}", self.name)
    }
}

macro_rules! file {
    ($name:literal) => {
        SchemaFile {
            name: $name,
            text: include_str!(concat!("../schemas/", $name)),
        }
    };
}

/// The shared definitions every role schema refers to.
pub const DEFINITIONS: SchemaFile = file!("definitions.json");

const ROLE_SCHEMAS: [SchemaFile; 6] = [
    file!("cluster-inputs.json"),
    file!("cluster-outputs.json"),
    file!("machine-inputs.json"),
    file!("machine-outputs.json"),
    file!("machinepool-inputs.json"),
    file!("machinepool-outputs.json"),
];

const EXAMPLES: [(SchemaFile, SchemaFile); 6] = [
    (
        file!("examples/cluster-inputs.valid.json"),
        file!("examples/cluster-inputs.invalid.json"),
    ),
    (
        file!("examples/cluster-outputs.valid.json"),
        file!("examples/cluster-outputs.invalid.json"),
    ),
    (
        file!("examples/machine-inputs.valid.json"),
        file!("examples/machine-inputs.invalid.json"),
    ),
    (
        file!("examples/machine-outputs.valid.json"),
        file!("examples/machine-outputs.invalid.json"),
    ),
    (
        file!("examples/machinepool-inputs.valid.json"),
        file!("examples/machinepool-inputs.invalid.json"),
    ),
    (
        file!("examples/machinepool-outputs.valid.json"),
        file!("examples/machinepool-outputs.invalid.json"),
    ),
];

fn index(role: Role, direction: Direction) -> usize {
    let r = match role {
        Role::Cluster => 0,
        Role::Machine => 1,
        Role::MachinePool => 2,
    };
    r * 2 + usize::from(direction == Direction::Outputs)
}

/// The schema of `role`'s inputs or outputs.
pub fn schema(role: Role, direction: Direction) -> SchemaFile {
    ROLE_SCHEMAS[index(role, direction)]
}

/// Every schema file, definitions first (register them all before building a
/// validator, since role schemas refer to the definitions by `$id`).
pub fn all() -> Vec<SchemaFile> {
    std::iter::once(DEFINITIONS).chain(ROLE_SCHEMAS).collect()
}

/// The example document of `role`/`direction` that the schema accepts
/// (`valid`) or refuses.
pub fn example(role: Role, direction: Direction, valid: bool) -> SchemaFile {
    let (ok, bad) = EXAMPLES[index(role, direction)];
    if valid { ok } else { bad }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_match_file_names_and_all_files_parse() {
        for file in all() {
            let v: serde_json::Value = serde_json::from_str(file.text).unwrap();
            assert_eq!(v["$id"], file.id(), "{}", file.name);
        }
        for role in Role::ALL {
            for d in Direction::ALL {
                let name = schema(role, d).name;
                assert_eq!(name, format!("{}-{}.json", role.as_str(), d.as_str()));
                for valid in [true, false] {
                    let ex = example(role, d, valid);
                    assert!(ex.name.starts_with(&format!(
                        "examples/{}-{}.",
                        role.as_str(),
                        d.as_str()
                    )));
                    serde_json::from_str::<serde_json::Value>(ex.text).unwrap();
                }
            }
        }
    }
}
