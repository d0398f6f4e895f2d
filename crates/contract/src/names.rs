//! Names the contract reserves: the controller's prefix, each role's input and
//! output names, the module meta-arguments, and the rule a user variable name
//! must follow. Admission rules, the renderer and the linter all read this one
//! list so they cannot disagree.

use crate::Role;

/// Prefix of every name the controller injects into a module.
pub const RESERVED_PREFIX: &str = "captf_";

/// Arguments of a Terraform `module` block; a user variable with one of these
/// names would collide with the generated `module "role"` call.
pub const MODULE_META_ARGUMENTS: [&str; 8] = [
    "source",
    "version",
    "providers",
    "count",
    "for_each",
    "depends_on",
    "lifecycle",
    "locals",
];

/// Most inline user variables (`spec.variables`) an object may set.
pub const MAX_VARIABLES: usize = 256;

/// Most `spec.variablesFrom` sources an object may list.
pub const MAX_VARIABLES_FROM: usize = 16;

/// Keys of `captf_tags`, in the contract's fixed order.
pub const TAG_KEYS: [&str; 6] = [
    "captf.io/cluster",
    "captf.io/namespace",
    "captf.io/kind",
    "captf.io/name",
    "captf.io/managed-by",
    "captf.io/template",
];

/// Value of the `captf.io/managed-by` tag.
pub const MANAGED_BY: &str = "captf";

const COMMON_INPUTS: [&str; 4] = [
    "captf_contract",
    "captf_cluster",
    "captf_object",
    "captf_tags",
];

const CLUSTER_INPUTS: [&str; 8] = [
    "captf_contract",
    "captf_cluster",
    "captf_object",
    "captf_tags",
    "control_plane_endpoint",
    "kubernetes_version",
    "control_plane_initialized",
    "cluster_network",
];

const MACHINE_INPUTS: [&str; 11] = [
    "captf_contract",
    "captf_cluster",
    "captf_object",
    "captf_tags",
    "captf_cluster_outputs",
    "machine_name",
    "bootstrap_data",
    "bootstrap_format",
    "failure_domain",
    "kubernetes_version",
    "control_plane",
];

const MACHINEPOOL_INPUTS: [&str; 14] = [
    "captf_contract",
    "captf_cluster",
    "captf_object",
    "captf_tags",
    "captf_cluster_outputs",
    "machinepool_name",
    "replicas",
    "bootstrap_data",
    "bootstrap_format",
    "failure_domains",
    "cluster_failure_domains",
    "kubernetes_version",
    "node_labels",
    "autoscaling",
];

/// The inputs every role receives, in rendering order.
pub fn common_input_names() -> &'static [&'static str] {
    &COMMON_INPUTS
}

/// Every contract input of `role`, in the contract's order (common inputs
/// first, then the role's own).
pub fn input_names(role: Role) -> &'static [&'static str] {
    match role {
        Role::Cluster => &CLUSTER_INPUTS,
        Role::Machine => &MACHINE_INPUTS,
        Role::MachinePool => &MACHINEPOOL_INPUTS,
    }
}

/// The outputs a module of `role` must declare; the generated root re-exports
/// each of them.
pub fn required_outputs(role: Role) -> &'static [&'static str] {
    match role {
        Role::Cluster => &[
            "control_plane_endpoint",
            "failure_domains",
            "exports",
            "health",
        ],
        Role::Machine => &[
            "provider_id",
            "addresses",
            "failure_domain",
            "interruptible",
            "health",
        ],
        Role::MachinePool => &[
            "provider_id",
            "provider_id_list",
            "replicas",
            "instances",
            "health",
        ],
    }
}

/// Why a user variable name is refused. The error carries the name only,
/// never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VariableNameError {
    #[error("variable {name:?}: name must match ^[a-zA-Z_][a-zA-Z0-9_-]*$")]
    Syntax { name: String },
    #[error("variable {name:?}: names starting with \"captf_\" are reserved for the controller")]
    ReservedPrefix { name: String },
    #[error("variable {name:?}: is a contract input of the {role} role")]
    ContractInput { name: String, role: Role },
    #[error("variable {name:?}: is a module meta-argument")]
    MetaArgument { name: String },
}

impl VariableNameError {
    /// The refused variable name.
    pub fn name(&self) -> &str {
        match self {
            VariableNameError::Syntax { name }
            | VariableNameError::ReservedPrefix { name }
            | VariableNameError::ContractInput { name, .. }
            | VariableNameError::MetaArgument { name } => name,
        }
    }
}

/// True when `name` matches `^[a-zA-Z_][a-zA-Z0-9_-]*$`.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Checks a user variable name for an object of `role`: identifier syntax,
/// not reserved, not one of the role's contract inputs, not a meta-argument.
pub fn check_user_variable_name(role: Role, name: &str) -> Result<(), VariableNameError> {
    let name_owned = || name.to_owned();
    if !is_identifier(name) {
        return Err(VariableNameError::Syntax { name: name_owned() });
    }
    if name.starts_with(RESERVED_PREFIX) {
        return Err(VariableNameError::ReservedPrefix { name: name_owned() });
    }
    if input_names(role).contains(&name) {
        return Err(VariableNameError::ContractInput {
            name: name_owned(),
            role,
        });
    }
    if MODULE_META_ARGUMENTS.contains(&name) {
        return Err(VariableNameError::MetaArgument { name: name_owned() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifier_syntax() {
        for ok in ["a", "_x", "disk_size", "node-pool", "A9"] {
            assert!(is_identifier(ok), "{ok}");
        }
        for bad in ["", "9a", "-a", "a.b", "a b", "ä"] {
            assert!(!is_identifier(bad), "{bad}");
        }
    }

    /// Which error a refused name must give.
    type Expect = fn(&VariableNameError) -> bool;

    #[test]
    fn user_variable_rules_per_role() {
        use VariableNameError as E;
        let cases: &[(Role, &str, Option<Expect>)] = &[
            (Role::Machine, "disk_size", None),
            (
                Role::Machine,
                "captf_anything",
                Some(|e| matches!(e, E::ReservedPrefix { .. })),
            ),
            (
                Role::Machine,
                "machine_name",
                Some(|e| matches!(e, E::ContractInput { .. })),
            ),
            // A cluster has no machine_name input, so it may set one.
            (Role::Cluster, "machine_name", None),
            (
                Role::Cluster,
                "control_plane_initialized",
                Some(|e| matches!(e, E::ContractInput { .. })),
            ),
            (
                Role::MachinePool,
                "replicas",
                Some(|e| matches!(e, E::ContractInput { .. })),
            ),
            (
                Role::MachinePool,
                "count",
                Some(|e| matches!(e, E::MetaArgument { .. })),
            ),
            (
                Role::Cluster,
                "locals",
                Some(|e| matches!(e, E::MetaArgument { .. })),
            ),
            (Role::Cluster, "1x", Some(|e| matches!(e, E::Syntax { .. }))),
        ];
        for (role, name, expect) in cases {
            let got = check_user_variable_name(*role, name);
            match expect {
                None => assert_eq!(got, Ok(()), "{role} {name}"),
                Some(pred) => {
                    let err = got.unwrap_err();
                    assert!(pred(&err), "{role} {name}: {err:?}");
                    assert_eq!(err.name(), *name);
                }
            }
        }
    }

    #[test]
    fn every_role_starts_with_the_common_inputs() {
        for role in Role::ALL {
            assert_eq!(&input_names(role)[..4], common_input_names());
        }
    }
}
