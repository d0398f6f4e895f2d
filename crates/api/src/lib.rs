//! The CAPTF API: the eight kinds of `infrastructure.cluster.x-k8s.io/v1alpha1`,
//! their CRDs, the well-known names the provider writes and reads, the
//! effective configuration of a machine or pool, and the admission rules.

// Each `printcolumn(...)` of a kind repeats keys such as `type_`, which
// clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

pub mod admission;
pub mod cluster;
pub mod common;
pub mod crds;
pub mod effective;
pub mod identity;
pub mod machine;
pub mod machinepool;
pub mod names;
pub mod plan;
mod schema;
pub mod templates;

pub use cluster::{TerraformCluster, TerraformClusterSpec, TerraformClusterStatus};
pub use identity::{TerraformClusterIdentity, TerraformClusterIdentitySpec};
pub use machine::{TerraformMachine, TerraformMachineSpec, TerraformMachineStatus};
pub use machinepool::{TerraformMachinePool, TerraformMachinePoolSpec, TerraformMachinePoolStatus};
pub use plan::{TerraformPlan, TerraformPlanSpec, TerraformPlanStatus};
pub use templates::{
    TerraformClusterTemplate, TerraformMachinePoolTemplate, TerraformMachineTemplate,
};

/// API group of every CAPTF kind.
pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// The one served (and stored) version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of every CAPTF object.
pub const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";

/// Label on each CRD telling Cluster API which of our versions implements
/// its `v1beta2` contract.
pub const CAPI_CONTRACT_LABEL: &str = "cluster.x-k8s.io/v1beta2";

/// Category every kind is listed under (`kubectl get cluster-api`).
pub const CATEGORY: &str = "cluster-api";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_version_is_group_slash_version() {
        assert_eq!(API_VERSION, format!("{GROUP}/{VERSION}"));
    }
}
