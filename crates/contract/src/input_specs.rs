//! How the generated root declares each contract input. The renderer and the
//! linter's type check read the same table.

use crate::Role;
use crate::names::input_names;

/// Declaration of one contract input in the generated root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputSpec {
    /// The variable name (same in root and module).
    pub name: &'static str,
    /// The root's type expression. Inputs whose precise shape the module
    /// declares itself are `any` here.
    pub type_expr: &'static str,
    /// Whether the root declares `default = null`.
    pub nullable: bool,
    /// Whether the root declares `sensitive = true`.
    pub sensitive: bool,
}

const fn spec(name: &'static str, type_expr: &'static str, nullable: bool) -> InputSpec {
    InputSpec {
        name,
        type_expr,
        nullable,
        sensitive: false,
    }
}

const ALL_SPECS: [InputSpec; 20] = [
    spec("captf_contract", "string", false),
    spec("captf_cluster", "any", false),
    spec("captf_object", "any", false),
    spec("captf_tags", "map(string)", false),
    spec("captf_cluster_outputs", "any", false),
    spec(
        "control_plane_endpoint",
        "object({host=string, port=number})",
        true,
    ),
    spec("kubernetes_version", "string", true),
    spec("control_plane_initialized", "bool", false),
    spec(
        "cluster_network",
        "object({pods=list(string), services=list(string), service_domain=string, api_server_port=number})",
        true,
    ),
    spec("machine_name", "string", false),
    InputSpec {
        name: "bootstrap_data",
        type_expr: "string",
        nullable: false,
        sensitive: true,
    },
    spec("bootstrap_format", "string", false),
    spec("failure_domain", "string", true),
    spec("control_plane", "bool", false),
    spec("machinepool_name", "string", false),
    spec("replicas", "number", false),
    spec("failure_domains", "list(string)", false),
    spec("cluster_failure_domains", "list(string)", false),
    spec("node_labels", "map(string)", false),
    spec(
        "autoscaling",
        "object({enabled=bool, min=number, max=number})",
        false,
    ),
];

/// The declaration of input `name`, whatever role has it.
pub fn input_spec(name: &str) -> Option<&'static InputSpec> {
    ALL_SPECS.iter().find(|s| s.name == name)
}

/// The declarations of every input of `role`, in the contract's order.
pub fn input_specs(role: Role) -> Vec<&'static InputSpec> {
    input_names(role)
        .iter()
        .map(|name| input_spec(name).expect("every input name has a spec"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_input_has_exactly_one_spec() {
        for role in Role::ALL {
            assert_eq!(input_specs(role).len(), input_names(role).len());
        }
        let mut names: Vec<_> = ALL_SPECS.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ALL_SPECS.len());
    }

    #[test]
    fn only_bootstrap_data_is_sensitive_and_nullables_match_the_contract() {
        let sensitive: Vec<_> = ALL_SPECS
            .iter()
            .filter(|s| s.sensitive)
            .map(|s| s.name)
            .collect();
        assert_eq!(sensitive, ["bootstrap_data"]);
        let nullable: Vec<_> = ALL_SPECS
            .iter()
            .filter(|s| s.nullable)
            .map(|s| s.name)
            .collect();
        assert_eq!(
            nullable,
            [
                "control_plane_endpoint",
                "kubernetes_version",
                "cluster_network",
                "failure_domain"
            ]
        );
    }
}
