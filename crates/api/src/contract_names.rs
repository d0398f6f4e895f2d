//! Names the module contract reserves, as admission needs them: the
//! `captf_` prefix, each role's contract inputs and the module
//! meta-arguments. The contract crate owns the same lists; the two must be
//! unified into one definition.

/// Prefix of every input the controller injects.
pub const RESERVED_PREFIX: &str = "captf_";

/// Most inline variables an object may set.
pub const MAX_VARIABLES: usize = 256;

/// Which module role an object runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Cluster,
    Machine,
    MachinePool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Cluster => "cluster",
            Role::Machine => "machine",
            Role::MachinePool => "machinepool",
        }
    }
}

const COMMON_INPUTS: &[&str] = &[
    "captf_contract",
    "captf_cluster",
    "captf_object",
    "captf_tags",
];

const CLUSTER_INPUTS: &[&str] = &[
    "control_plane_endpoint",
    "kubernetes_version",
    "control_plane_initialized",
    "cluster_network",
];

const MACHINE_INPUTS: &[&str] = &[
    "captf_cluster_outputs",
    "machine_name",
    "bootstrap_data",
    "bootstrap_format",
    "failure_domain",
    "kubernetes_version",
    "control_plane",
];

const MACHINEPOOL_INPUTS: &[&str] = &[
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

/// Every input the contract passes to a module of `role`, common ones first.
pub fn input_names(role: Role) -> impl Iterator<Item = &'static str> {
    let specific = match role {
        Role::Cluster => CLUSTER_INPUTS,
        Role::Machine => MACHINE_INPUTS,
        Role::MachinePool => MACHINEPOOL_INPUTS,
    };
    COMMON_INPUTS.iter().chain(specific.iter()).copied()
}

/// Arguments of a Terraform `module` block, which a variable cannot shadow.
pub const META_ARGUMENTS: &[&str] = &[
    "source",
    "version",
    "providers",
    "count",
    "for_each",
    "depends_on",
    "lifecycle",
    "locals",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_inputs_are_the_contract_lists() {
        let pool: Vec<_> = input_names(Role::MachinePool).collect();
        assert_eq!(pool.len(), 14);
        assert!(pool.contains(&"replicas") && pool.contains(&"node_labels"));
        assert!(!pool.contains(&"machine_name"));
        let machine: Vec<_> = input_names(Role::Machine).collect();
        assert!(machine.contains(&"machine_name") && machine.contains(&"control_plane"));
        let cluster: Vec<_> = input_names(Role::Cluster).collect();
        assert!(cluster.contains(&"control_plane_initialized"));
        assert!(!cluster.contains(&"captf_cluster_outputs"));
        assert!(!cluster.contains(&"machine_name"));
    }

    #[test]
    fn every_injected_input_carries_the_prefix_or_is_a_role_input() {
        for role in [Role::Cluster, Role::Machine, Role::MachinePool] {
            for name in input_names(role).filter(|n| n.starts_with("captf")) {
                assert!(name.starts_with(RESERVED_PREFIX), "{name}");
            }
        }
        assert_eq!(META_ARGUMENTS.len(), 8);
    }
}
