//! The contract the checks compare modules with, read from the project's
//! contract crate (the same tables the renderer uses): per role, the inputs
//! the generated root declares and the outputs a module must declare.

use captf_contract::{input_specs, names};

pub use captf_contract::Role;
pub use captf_contract::input_specs::InputSpec;

pub const CONTRACT_VERSIONS: &[&str] = &[captf_contract::CONTRACT_VERSION];
pub const RESERVED_PREFIX: &str = names::RESERVED_PREFIX;
pub const TAGS_INPUT: &str = "captf_tags";
pub const CLUSTER_OUTPUTS_INPUT: &str = "captf_cluster_outputs";

/// The role's inputs: the common ones first, then the role's own.
pub fn inputs(role: Role) -> Vec<InputSpec> {
    input_specs::input_specs(role)
        .into_iter()
        .copied()
        .collect()
}

pub fn input(role: Role, name: &str) -> Option<InputSpec> {
    inputs(role).into_iter().find(|i| i.name == name)
}

pub fn required_outputs(role: Role) -> &'static [&'static str] {
    names::required_outputs(role)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_expression_parses() {
        for role in Role::ALL {
            for i in inputs(role) {
                assert!(crate::types::parse(i.type_expr).is_ok(), "{}", i.name);
                assert!(input(role, i.name).is_some());
            }
        }
    }

    #[test]
    fn names_the_checks_rely_on() {
        assert!(input(Role::Cluster, CLUSTER_OUTPUTS_INPUT).is_none());
        assert!(input(Role::Machine, CLUSTER_OUTPUTS_INPUT).is_some());
        assert!(input(Role::MachinePool, TAGS_INPUT).is_some());
        assert!(
            input(Role::MachinePool, "bootstrap_data")
                .unwrap()
                .sensitive
        );
        assert!(required_outputs(Role::MachinePool).contains(&"provider_id_list"));
    }
}
