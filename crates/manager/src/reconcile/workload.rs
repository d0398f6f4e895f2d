//! What the shared pass reads of every Job-running kind.

use std::fmt::Debug;

use captf_api::common::{WorkspaceSpec, WorkspaceStatus};
use captf_api::names::finalizers;
use captf_api::{TerraformCluster, TerraformMachine, TerraformMachinePool};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};
use kube::api::ApiResource;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::names::WorkloadKind;

pub trait Workload:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    const KIND: WorkloadKind;
    const FINALIZER: &'static str;
    /// Whether this kind's apply, destroy and restore Jobs hold the
    /// Cluster's write lease (a TerraformCluster's do; its machines and
    /// pools wait on it instead).
    const HOLDS_CLUSTER_WRITE_LEASE: bool = false;
    /// Whether `Ready` keeps reading `ApplyJobSucceeded` once provisioned:
    /// a pool applies again on every membership change, so its last apply
    /// stays part of its readiness.
    const READY_READS_APPLY_ONCE_PROVISIONED: bool = false;
    fn workspace(&self) -> &WorkspaceSpec;
    /// The Cluster API kind that owns objects of this kind (a Cluster, a
    /// Machine, a MachinePool).
    fn owner_resource() -> ApiResource;
    fn workspace_status(&self) -> Option<&WorkspaceStatus>;
    fn conditions(&self) -> &[Condition];

    /// The controller owner reference Jobs and records point back with.
    fn owner_reference(&self) -> OwnerReference {
        self.controller_owner_ref(&())
            .expect("a stored object has a name and UID")
    }

    fn provisioned(&self) -> bool {
        self.workspace_status()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.provisioned)
            .unwrap_or(false)
    }

    fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions().iter().find(|c| c.type_ == type_)
    }

    fn has_finalizer(&self) -> bool {
        self.finalizers().iter().any(|f| f == Self::FINALIZER)
    }

    /// The Cluster write lease this object's Jobs hold, by name; `None`
    /// for the kinds that take none, or before the object names its
    /// Cluster (no Job takes the lease then).
    fn cluster_write_lease(&self) -> Option<String> {
        if !Self::HOLDS_CLUSTER_WRITE_LEASE {
            return None;
        }
        let ns = self.namespace().unwrap_or_default();
        crate::adapters::cluster_name_label(self.meta())
            .map(|cluster| crate::leases::cluster_lease_name(&ns, cluster))
    }

    /// A TerraformMachine's `status.unhealthySamples`; `None` for the
    /// kinds that have none.
    fn unhealthy_samples(&self) -> Option<u32> {
        None
    }
}

impl Workload for TerraformCluster {
    const KIND: WorkloadKind = WorkloadKind::Cluster;
    const FINALIZER: &'static str = finalizers::TERRAFORM_CLUSTER;
    const HOLDS_CLUSTER_WRITE_LEASE: bool = true;
    fn owner_resource() -> ApiResource {
        crate::capi::cluster_resource()
    }
    fn workspace(&self) -> &WorkspaceSpec {
        &self.spec.workspace
    }
    fn workspace_status(&self) -> Option<&WorkspaceStatus> {
        self.status.as_ref().map(|s| &s.workspace)
    }
    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default()
    }
}

impl Workload for TerraformMachinePool {
    const KIND: WorkloadKind = WorkloadKind::MachinePool;
    const FINALIZER: &'static str = finalizers::TERRAFORM_MACHINE_POOL;
    const READY_READS_APPLY_ONCE_PROVISIONED: bool = true;
    fn owner_resource() -> ApiResource {
        crate::capi::machine_pool_resource()
    }
    fn workspace(&self) -> &WorkspaceSpec {
        &self.spec.workspace
    }
    fn workspace_status(&self) -> Option<&WorkspaceStatus> {
        self.status.as_ref().map(|s| &s.workspace)
    }
    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default()
    }
}

impl Workload for TerraformMachine {
    const KIND: WorkloadKind = WorkloadKind::Machine;
    const FINALIZER: &'static str = finalizers::TERRAFORM_MACHINE;
    fn unhealthy_samples(&self) -> Option<u32> {
        Some(
            self.status
                .as_ref()
                .and_then(|s| s.unhealthy_samples)
                .unwrap_or(0)
                .max(0) as u32,
        )
    }
    fn owner_resource() -> ApiResource {
        crate::capi::machine_resource()
    }
    fn workspace(&self) -> &WorkspaceSpec {
        &self.spec.workspace
    }
    fn workspace_status(&self) -> Option<&WorkspaceStatus> {
        self.status.as_ref().map(|s| &s.workspace)
    }
    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default()
    }
}

/// The key an object goes by in the manager's own memos (quiet resyncs,
/// its last write): `kind/namespace/name`.
pub fn object_key(kind: &str, namespace: &str, name: &str) -> String {
    format!("{kind}/{namespace}/{name}")
}

/// [`object_key`] of a workload object.
pub fn object_key_of<K: Workload>(obj: &K) -> String {
    object_key(
        K::KIND.kind(),
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
    )
}
