//! The module contract between CAPTF and Terraform/OpenTofu modules: the roles
//! a module can play and, per role, its inputs and outputs. This crate never
//! depends on Kubernetes crates.

use std::fmt;
use std::str::FromStr;

/// Version of the module contract this crate implements.
pub const CONTRACT_VERSION: &str = "v1alpha1";

/// The role a module plays for Cluster API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Cluster,
    Machine,
    MachinePool,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Cluster, Role::Machine, Role::MachinePool];

    /// The role's name as modules, flags and labels spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Cluster => "cluster",
            Role::Machine => "machine",
            Role::MachinePool => "machinepool",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role name that is not one of `cluster`, `machine`, `machinepool`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role {0:?}: expected one of cluster, machine, machinepool")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownRole(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_names_round_trip() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
        }
    }

    #[test]
    fn unknown_role_is_rejected_by_name() {
        let err = "MachinePool".parse::<Role>().unwrap_err();
        assert_eq!(err, UnknownRole("MachinePool".into()));
        assert!(err.to_string().contains("\"MachinePool\""));
    }
}
