//! The CAPTF API: the group and version every kind is served under, and the
//! Cluster API contract label its CRDs carry. The kinds themselves, their
//! constants, admission rules and effective configuration live here too.

/// API group of every CAPTF kind.
pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// The one served (and stored) version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of every CAPTF object.
pub const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";

/// Label on each CRD telling Cluster API which of our versions implements
/// its `v1beta2` contract.
pub const CAPI_CONTRACT_LABEL: &str = "cluster.x-k8s.io/v1beta2";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_version_is_group_slash_version() {
        assert_eq!(API_VERSION, format!("{GROUP}/{VERSION}"));
    }
}
