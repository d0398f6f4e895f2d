//! The module contract between CAPTF and Terraform/OpenTofu modules: the roles
//! a module can play and, per role, its inputs and outputs. This crate never
//! depends on Kubernetes crates.
//!
//! - [`inputs`]: typed inputs per role; [`variables`]: user variables;
//! - [`render`]: the generated root module and its values;
//! - [`canonical`] and [`hash`]: canonical JSON and the versioned hashes;
//! - [`json_text`]: JSON values kept as written (user variables, exports);
//! - [`outputs`] and [`health`]: decoding outputs and the conditions they give;
//! - [`names`] and [`input_specs`]: reserved names and root declarations;
//! - [`schemas`]: the JSON Schemas of every role's inputs and outputs.

mod bootstrap;
pub mod canonical;
mod go_json;
pub mod hash;
pub mod health;
pub mod input_specs;
pub mod inputs;
pub mod json_text;
pub mod names;
pub mod outputs;
mod raw_json;
pub mod render;
pub mod result;
pub mod schemas;
pub mod state_content;
pub mod state_names;
pub mod variables;

pub use hash::{HASH_SCHEME, approval_hash, exports_hash, inputs_hash};
pub use inputs::RoleInputs;
pub use json_text::JsonText;
pub use render::{
    RenderError, RenderedRoot, parse_rendered_root, render_backend_root, render_root,
};
pub use variables::UserVariables;

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

    /// The Terraform* kind that plays this role.
    pub fn kind(self) -> &'static str {
        match self {
            Role::Cluster => "TerraformCluster",
            Role::Machine => "TerraformMachine",
            Role::MachinePool => "TerraformMachinePool",
        }
    }

    /// The short kind code used in Secret names (`c`, `m`, `mp`).
    pub fn kind_short(self) -> &'static str {
        match self {
            Role::Cluster => "c",
            Role::Machine => "m",
            Role::MachinePool => "mp",
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
