//! The TerraformMachinePool adapter: its owner `MachinePool` and Cluster,
//! the dependency gates, the `machinepool` role inputs, and what its outputs
//! write, including the replica write-back of autoscaling mode.

use captf_api::common::{HealthState as ApiHealthState, MachineAddress, MachineAddressType};
use captf_api::machinepool::MachinePoolInstance;
use captf_api::names::{annotations, kinds, reasons};
use captf_api::{TerraformCluster, TerraformMachinePool};
use captf_contract::health::HealthState;
use captf_contract::inputs::{
    Autoscaling, AutoscalingAnnotations, BootstrapData, BootstrapFormat, ClusterRef, CommonInputs,
    MachinePoolInputs,
};
use captf_contract::outputs::{
    AddressType, MAX_POOL_INSTANCES, MAX_PROVIDER_IDS, MachinePoolOutputs, PoolInstance,
};
use captf_contract::{JsonText, Role};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{
    OwnerDecision, annotation, back_reference_checks, capi_owner_ref, condition, gates,
    names_captf_kind,
};
use crate::capi::{self, Cluster, MachinePool};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};

pub use captf_api::names::annotations::REPLICAS_MANAGER;

/// Decides whether the owning MachinePool and the Cluster may be used.
/// `machine_pool` is the MachinePool the ownerReference names, as fetched
/// (`None`: not found; find its name with
/// [`capi_owner_ref`]`(meta, "MachinePool")`); `cluster` is the Cluster named
/// by the object's `cluster.x-k8s.io/cluster-name` label (`None`: not found).
pub fn owner(
    object: &ObjectMeta,
    machine_pool: Option<&MachinePool>,
    cluster: Option<&Cluster>,
) -> OwnerDecision {
    let Some(owner_ref) = capi_owner_ref(object, capi::MACHINE_POOL_KIND) else {
        let has_other_owners = object
            .owner_references
            .as_ref()
            .is_some_and(|r| !r.is_empty());
        return if has_other_owners {
            OwnerDecision::missing(
                ConditionStatus::Unknown,
                reasons::WAITING_FOR_OWNER_MACHINE_POOL,
                "owned, but not by a MachinePool yet",
            )
        } else {
            OwnerDecision::missing(
                ConditionStatus::Unknown,
                reasons::WAITING_FOR_OWNER,
                "no MachinePool references this TerraformMachinePool yet",
            )
        };
    };
    let Some(mp) = machine_pool else {
        return OwnerDecision::missing(
            ConditionStatus::False,
            reasons::OWNER_NOT_FOUND,
            format!("MachinePool {} not found", owner_ref.name),
        );
    };
    let own_name = object.name.as_deref().unwrap_or_default();
    let mp_name = mp.metadata.name.as_deref().unwrap_or_default();
    let infra = &mp.spec.template.spec.infrastructure_ref;
    if !names_captf_kind(infra, kinds::TERRAFORM_MACHINE_POOL) || infra.name != own_name {
        return OwnerDecision::gated(
            reasons::OWNER_MISMATCH,
            format!(
                "MachinePool {mp_name}: spec.template.spec.infrastructureRef does not name this TerraformMachinePool"
            ),
        );
    }
    if let Err(why) = back_reference_checks(owner_ref, &mp.metadata, object, &mp.spec.cluster_name)
    {
        return OwnerDecision::gated(reasons::OWNER_MISMATCH, why);
    }
    super::cluster_owner(object, cluster)
}

/// The TerraformCluster the Cluster names, once it names one.
pub fn terraform_cluster_name(cluster: &Cluster) -> Option<&str> {
    cluster
        .spec
        .infrastructure_ref
        .as_ref()
        .filter(|r| names_captf_kind(r, kinds::TERRAFORM_CLUSTER))
        .map(|r| r.name.as_str())
}

pub use super::gates::{BootstrapSecret, ClusterState};

/// What the gates read. The caller fetches the TerraformCluster named by the
/// Cluster, its state (skipped for an externally managed one), and the
/// Secret the MachinePool's template names.
#[derive(Debug, Clone, Copy)]
pub struct GateInput<'a> {
    /// `None`: the Cluster names no TerraformCluster yet, or it was not found.
    pub terraform_cluster: Option<&'a TerraformCluster>,
    pub cluster_state: ClusterState<'a>,
    pub machine_pool: &'a MachinePool,
    /// `None`: the Secret was not found.
    pub bootstrap_secret: Option<&'a BootstrapSecret>,
}

/// What the gates let through into the inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Dependencies {
    /// `captf_cluster_outputs`, as the cluster's module wrote them.
    pub exports: JsonText,
    pub cluster_failure_domains: Vec<String>,
    pub bootstrap_data: BootstrapData,
    pub bootstrap_format: BootstrapFormat,
}

/// The dependency gates in order: a provisioned TerraformCluster, its
/// exports, the bootstrap data. `Err` is the `DependenciesReady` to report;
/// `Ok` carries what the inputs need (and `DependenciesReady=True` is
/// [`super::dependencies_ready`]).
pub fn gates(i: &GateInput<'_>) -> Result<Dependencies, ConditionValue> {
    let Some(tc) = i.terraform_cluster else {
        return Err(gates::waiting(
            reasons::WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            "the Cluster's TerraformCluster does not exist yet",
        ));
    };
    let provisioned = tc
        .status
        .as_ref()
        .and_then(|s| s.workspace.initialization.as_ref())
        .and_then(|i| i.provisioned)
        == Some(true);
    if !provisioned {
        return Err(gates::waiting(
            reasons::WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            format!(
                "TerraformCluster {} is not provisioned yet",
                tc.metadata.name.as_deref().unwrap_or_default()
            ),
        ));
    }
    let (exports, cluster_failure_domains) = gates::exports(tc, i.cluster_state)?;
    let mp = i.machine_pool;
    let (bootstrap_data, bootstrap_format) = gates::bootstrap(
        &format!(
            "MachinePool {}",
            mp.metadata.name.as_deref().unwrap_or_default()
        ),
        mp.spec.template.spec.bootstrap.data_secret_name.as_deref(),
        i.bootstrap_secret,
    )?;
    Ok(Dependencies {
        exports,
        cluster_failure_domains,
        bootstrap_data,
        bootstrap_format,
    })
}

/// How the MachinePool's autoscaler annotations read.
pub fn autoscaling(mp: &MachinePool) -> (Autoscaling, AutoscalingAnnotations) {
    Autoscaling::from_annotations(
        mp.annotation(annotations::AUTOSCALER_MIN_SIZE),
        mp.annotation(annotations::AUTOSCALER_MAX_SIZE),
    )
}

/// The `replicas` input: the MachinePool's count (1 when unset) with
/// autoscaling off; with it on, the last observed count when there is one,
/// clamped into the bounds.
pub fn replicas_input(mp: &MachinePool, observed: Option<i32>, scaling: &Autoscaling) -> i32 {
    let desired = mp.spec.replicas.unwrap_or(1);
    if scaling.enabled {
        scaling.clamp(observed.unwrap_or(desired))
    } else {
        desired
    }
}

/// Builds the `machinepool` role inputs.
pub fn inputs(
    object: &TerraformMachinePool,
    mp: &MachinePool,
    cluster: &Cluster,
    deps: &Dependencies,
) -> MachinePoolInputs {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let cluster_ref = ClusterRef {
        name: cluster.metadata.name.clone().unwrap_or_default(),
        namespace: cluster
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| namespace.clone()),
    };
    let template = annotation(&object.metadata, annotations::CLONED_FROM_NAME).map(str::to_owned);
    let (scaling, _) = autoscaling(mp);
    let observed = object.status.as_ref().and_then(|s| s.replicas);
    let template_spec = &mp.spec.template.spec;
    MachinePoolInputs {
        common: CommonInputs::new(
            Role::MachinePool,
            cluster_ref,
            object.metadata.name.clone().unwrap_or_default(),
            namespace,
            template,
        ),
        captf_cluster_outputs: deps.exports.clone(),
        machinepool_name: mp.metadata.name.clone().unwrap_or_default(),
        replicas: replicas_input(mp, observed, &scaling),
        bootstrap_data: deps.bootstrap_data.clone(),
        bootstrap_format: deps.bootstrap_format,
        failure_domains: mp.spec.failure_domains.clone().unwrap_or_default(),
        cluster_failure_domains: deps.cluster_failure_domains.clone(),
        kubernetes_version: template_spec.version.clone(),
        node_labels: mp
            .spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default(),
        autoscaling: scaling,
    }
}

/// What valid pool outputs write.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolWrites {
    /// `spec.providerID`; `None` leaves the field as it is.
    pub provider_id: Option<String>,
    /// `spec.providerIDList`: sorted, without duplicates, at most
    /// [`MAX_PROVIDER_IDS`].
    pub provider_id_list: Vec<String>,
    /// `status.replicas` (written even when 0).
    pub replicas: i32,
    /// `status.instances`; `None` clears the field (it holds at least one).
    pub instances: Option<Vec<MachinePoolInstance>>,
    /// More instances were reported than are kept.
    pub instances_truncated: bool,
}

pub(crate) fn address_type(t: AddressType) -> MachineAddressType {
    match t {
        AddressType::InternalIP => MachineAddressType::InternalIP,
        AddressType::InternalDNS => MachineAddressType::InternalDNS,
        AddressType::ExternalIP => MachineAddressType::ExternalIP,
        AddressType::ExternalDNS => MachineAddressType::ExternalDNS,
        AddressType::Hostname => MachineAddressType::Hostname,
    }
}

pub(crate) fn health_state(s: HealthState) -> ApiHealthState {
    match s {
        HealthState::Pending => ApiHealthState::Pending,
        HealthState::Running => ApiHealthState::Running,
        HealthState::Degraded => ApiHealthState::Degraded,
        HealthState::Stopped => ApiHealthState::Stopped,
        HealthState::Terminated => ApiHealthState::Terminated,
        HealthState::Unknown => ApiHealthState::Unknown,
    }
}

fn instance(i: &PoolInstance) -> MachinePoolInstance {
    MachinePoolInstance {
        provider_id: i.provider_id.clone(),
        instance_id: i.instance_id.clone(),
        addresses: (!i.addresses.is_empty()).then(|| {
            i.addresses
                .iter()
                .map(|a| MachineAddress {
                    type_: address_type(a.kind),
                    address: a.address.clone(),
                })
                .collect()
        }),
        failure_domain: i.failure_domain.clone(),
        state: i.state.map(health_state),
    }
}

/// Maps valid pool outputs onto the TerraformMachinePool. `reported_truncated`
/// is the verdict's `InstancesTruncated` (the decoder already cut the list).
pub fn writes(outputs: &MachinePoolOutputs, reported_truncated: bool) -> PoolWrites {
    let mut ids = outputs.provider_id_list.clone();
    ids.sort();
    ids.dedup();
    ids.truncate(MAX_PROVIDER_IDS);
    let kept = &outputs.instances[..outputs.instances.len().min(MAX_POOL_INSTANCES)];
    PoolWrites {
        provider_id: outputs.provider_id.clone(),
        provider_id_list: ids,
        replicas: outputs.replicas,
        instances: (!kept.is_empty()).then(|| kept.iter().map(instance).collect()),
        instances_truncated: reported_truncated || outputs.instances.len() > MAX_POOL_INSTANCES,
    }
}

/// `status.initialization.provisioned` (and `status.ready`) after this pass:
/// latched, or the state carries a successful apply and the valid outputs
/// report a health other than `pending`. An empty member list is fine.
pub fn provisioned(
    latched: bool,
    successful_apply: bool,
    outputs: Option<&MachinePoolOutputs>,
) -> bool {
    latched || (successful_apply && outputs.is_some_and(|o| o.health.state != HealthState::Pending))
}

/// Membership has not converged: the list's length is not the group's
/// desired count. Unknown (`None`) counts reads as converged.
pub fn membership_converging(provider_id_list_len: usize, replicas: Option<i32>) -> bool {
    replicas.is_some_and(|r| usize::try_from(r).ok() != Some(provider_id_list_len))
}

/// What autoscaling mode writes to the MachinePool in one pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicasSync {
    /// Set `cluster.x-k8s.io/replicas-managed-by: captf`.
    pub claim: bool,
    /// Remove our `replicas-managed-by: captf` (autoscaling off).
    pub release: bool,
    /// Write this to `MachinePool.spec.replicas` (unclamped observed count).
    pub replicas: Option<i32>,
    /// `AutoscalingActive`.
    pub condition: ConditionValue,
}

/// Decides the write-back of autoscaling mode. `observed` is the pool's
/// `status.replicas` after this pass.
pub fn replicas_sync(mp: &MachinePool, observed: Option<i32>) -> ReplicasSync {
    let managed_by = mp.annotation(annotations::REPLICAS_MANAGED_BY);
    let ours = managed_by == Some(REPLICAS_MANAGER);
    let off = |reason: &'static str, message: &str| ReplicasSync {
        claim: false,
        release: ours,
        replicas: None,
        condition: condition(ConditionStatus::False, reason, message),
    };
    let (scaling, reading) = autoscaling(mp);
    match reading {
        AutoscalingAnnotations::Absent => {
            return off(
                reasons::AUTOSCALING_DISABLED,
                "no autoscaler annotations on the MachinePool",
            );
        }
        AutoscalingAnnotations::Invalid => {
            return off(
                reasons::AUTOSCALING_ANNOTATIONS_INVALID,
                "the autoscaler annotations need both sizes as integers with 0 <= min <= max; the pool applies without autoscaling",
            );
        }
        AutoscalingAnnotations::Valid => {}
    }
    // Absent or the literal "false" is free to claim; any other value
    // belongs to someone else.
    if let Some(other) = managed_by.filter(|v| *v != REPLICAS_MANAGER && *v != "false") {
        return ReplicasSync {
            claim: false,
            release: false,
            replicas: None,
            condition: condition(
                ConditionStatus::False,
                reasons::REPLICAS_MANAGED_EXTERNALLY,
                format!(
                    "{} is {other:?}: replicas are not written back",
                    annotations::REPLICAS_MANAGED_BY
                ),
            ),
        };
    }
    let replicas = observed.filter(|n| Some(*n) != mp.spec.replicas);
    ReplicasSync {
        claim: !ours,
        release: false,
        replicas,
        condition: condition(
            ConditionStatus::True,
            reasons::REPLICAS_MANAGED_BY_MODULE,
            format!(
                "the module owns the count within [{}, {}]; observed replicas are written to MachinePool.spec.replicas",
                scaling.min, scaling.max
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::capi::{Bootstrap, ClusterSpec, MachineSpec, MachineTemplateSpec, ObjectReference};
    use captf_api::common::{Initialization, Source, WorkspaceSpec, WorkspaceStatus};
    use captf_api::{TerraformClusterSpec, TerraformClusterStatus, TerraformMachinePoolSpec};
    use captf_contract::health::Health;
    use captf_contract::outputs::{Address, ClusterOutputs, FailureDomain};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use crate::engine::preamble::OwnerLookup;

    fn workspace() -> WorkspaceSpec {
        WorkspaceSpec {
            source: Source {
                image: "ghcr.io/captf-io/noop-machinepool:v1-tofu".into(),
                image_pull_policy: None,
            },
            identity_ref: None,
            jobs: None,
            variables: None,
            variables_from: None,
            deletion_policy: None,
            adopt_retained_state: None,
        }
    }

    fn tmp() -> TerraformMachinePool {
        let mut t = TerraformMachinePool::new(
            "workers",
            TerraformMachinePoolSpec {
                provider_id: None,
                provider_id_list: None,
                workspace: workspace(),
                drift: None,
                membership_refresh_interval_seconds: None,
            },
        );
        t.metadata.namespace = Some("team-a".into());
        t.metadata.labels = Some(BTreeMap::from([(
            "cluster.x-k8s.io/cluster-name".into(),
            "prod".into(),
        )]));
        t.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "cluster.x-k8s.io/v1beta2".into(),
            kind: "MachinePool".into(),
            name: "mp-workers".into(),
            uid: "uid-mp".into(),
            ..Default::default()
        }]);
        t
    }

    fn mp() -> MachinePool {
        MachinePool {
            metadata: ObjectMeta {
                name: Some("mp-workers".into()),
                namespace: Some("team-a".into()),
                uid: Some("uid-mp".into()),
                ..Default::default()
            },
            spec: capi::MachinePoolSpec {
                cluster_name: "prod".into(),
                replicas: Some(3),
                failure_domains: None,
                provider_id_list: None,
                template: MachineTemplateSpec {
                    metadata: None,
                    spec: MachineSpec {
                        cluster_name: "prod".into(),
                        bootstrap: Bootstrap {
                            data_secret_name: Some("workers-bootstrap".into()),
                        },
                        infrastructure_ref: ObjectReference {
                            api_group: "infrastructure.cluster.x-k8s.io".into(),
                            kind: "TerraformMachinePool".into(),
                            name: "workers".into(),
                        },
                        version: None,
                        ..Default::default()
                    },
                },
            },
        }
    }

    fn cluster() -> Cluster {
        Cluster {
            metadata: ObjectMeta {
                name: Some("prod".into()),
                namespace: Some("team-a".into()),
                uid: Some("uid-prod".into()),
                ..Default::default()
            },
            spec: ClusterSpec {
                infrastructure_ref: Some(ObjectReference {
                    api_group: "infrastructure.cluster.x-k8s.io".into(),
                    kind: "TerraformCluster".into(),
                    name: "prod".into(),
                }),
                ..Default::default()
            },
            status: None,
        }
    }

    type OwnerEdit = fn(&mut TerraformMachinePool, &mut Option<MachinePool>, &mut Option<Cluster>);

    #[test]
    fn owner_table() {
        let cases: Vec<(&str, OwnerEdit, &str, Option<&str>)> = vec![
            ("references back", |_, _, _| {}, "Found", None),
            (
                "no ownerRef",
                |t, _, _| t.metadata.owner_references = None,
                "Missing",
                Some("WaitingForOwner"),
            ),
            (
                "owned by something else",
                |t, _, _| {
                    t.metadata.owner_references.as_mut().unwrap()[0].kind = "MachineSet".into()
                },
                "Missing",
                Some("WaitingForOwnerMachinePool"),
            ),
            (
                "MachinePool gone",
                |_, m, _| *m = None,
                "Missing",
                Some("OwnerNotFound"),
            ),
            (
                "template names another pool",
                |_, m, _| {
                    m.as_mut()
                        .unwrap()
                        .spec
                        .template
                        .spec
                        .infrastructure_ref
                        .name = "other".into()
                },
                "Gated",
                Some("OwnerMismatch"),
            ),
            (
                "template names another kind",
                |_, m, _| {
                    m.as_mut()
                        .unwrap()
                        .spec
                        .template
                        .spec
                        .infrastructure_ref
                        .kind = "AWSMachinePool".into()
                },
                "Gated",
                Some("OwnerMismatch"),
            ),
            (
                "stale UID",
                |_, m, _| m.as_mut().unwrap().metadata.uid = Some("uid-new".into()),
                "Gated",
                Some("OwnerMismatch"),
            ),
            (
                "MachinePool of another cluster",
                |_, m, _| m.as_mut().unwrap().spec.cluster_name = "staging".into(),
                "Gated",
                Some("OwnerMismatch"),
            ),
            (
                "no cluster-name label yet",
                |t, _, _| t.metadata.labels = None,
                "Missing",
                Some("WaitingForOwner"),
            ),
            (
                "Cluster gone",
                |_, _, c| *c = None,
                "Missing",
                Some("OwnerNotFound"),
            ),
            (
                "Cluster of another provider",
                |_, _, c| {
                    c.as_mut()
                        .unwrap()
                        .spec
                        .infrastructure_ref
                        .as_mut()
                        .unwrap()
                        .kind = "AWSCluster".into()
                },
                "Gated",
                Some("ClusterNotTerraform"),
            ),
            (
                "Cluster without infrastructureRef is left to the gates",
                |_, _, c| c.as_mut().unwrap().spec.infrastructure_ref = None,
                "Found",
                None,
            ),
        ];
        for (name, edit, lookup, reason) in cases {
            let (mut t, mut m, mut c) = (tmp(), Some(mp()), Some(cluster()));
            edit(&mut t, &mut m, &mut c);
            let d = owner(&t.metadata, m.as_ref(), c.as_ref());
            let got = match d.lookup {
                OwnerLookup::Found => "Found",
                OwnerLookup::Missing => "Missing",
                OwnerLookup::Gated(r) => {
                    assert_eq!(Some(r), reason, "{name}");
                    "Gated"
                }
            };
            assert_eq!(got, lookup, "{name}");
            assert_eq!(d.condition.as_ref().map(|c| c.reason), reason, "{name}");
            if let Some(c) = &d.condition {
                let status = if reason == Some("WaitingForOwner")
                    || reason == Some("WaitingForOwnerMachinePool")
                {
                    "Unknown"
                } else {
                    "False"
                };
                assert_eq!(c.status, status, "{name}");
            }
        }
        assert_eq!(terraform_cluster_name(&cluster()), Some("prod"));
        let mut other = cluster();
        other.spec.infrastructure_ref.as_mut().unwrap().kind = "AWSCluster".into();
        assert_eq!(terraform_cluster_name(&other), None);
    }

    fn tc(provisioned: bool) -> TerraformCluster {
        let mut tc = TerraformCluster::new(
            "prod",
            TerraformClusterSpec {
                workspace: workspace(),
                control_plane_endpoint: None,
                drift: None,
                apply_policy: None,
                max_active_jobs: None,
                defaults: None,
            },
        );
        tc.status = Some(TerraformClusterStatus {
            workspace: WorkspaceStatus {
                initialization: Some(Initialization {
                    provisioned: Some(provisioned),
                }),
                ..Default::default()
            },
            failure_domains: Some(vec![captf_api::cluster::FailureDomain {
                name: "status-fd".into(),
                control_plane: None,
                attributes: None,
            }]),
            ..Default::default()
        });
        tc
    }

    fn cluster_outputs() -> ClusterOutputs {
        ClusterOutputs {
            control_plane_endpoint: None,
            failure_domains: vec![FailureDomain {
                name: "state-fd".into(),
                control_plane: true,
                attributes: BTreeMap::new(),
            }],
            exports: serde_json::json!({"subnet": "s-1"}).into(),
            exports_hash: "h2:x".into(),
            published_exports: None,
            health: Health::running_healthy(),
        }
    }

    fn secret() -> BootstrapSecret {
        BootstrapSecret {
            value: Some(b"#cloud-config\n".to_vec()),
            format: None,
        }
    }

    #[test]
    fn gates_table() {
        let outputs = cluster_outputs();
        let (up, down) = (tc(true), tc(false));
        let mut external = tc(true);
        external.metadata.annotations = Some(BTreeMap::from([(
            "cluster.x-k8s.io/managed-by".into(),
            "someone".into(),
        )]));
        let (pool, ok_secret) = (mp(), secret());
        let mut no_name = mp();
        no_name.spec.template.spec.bootstrap.data_secret_name = Some(String::new());
        let no_value = BootstrapSecret {
            value: None,
            format: None,
        };
        let bad_format = BootstrapSecret {
            format: Some("shell".into()),
            ..secret()
        };
        let ignition = BootstrapSecret {
            format: Some("ignition".into()),
            ..secret()
        };
        let good = GateInput {
            terraform_cluster: Some(&up),
            cluster_state: ClusterState::Outputs(&outputs),
            machine_pool: &pool,
            bootstrap_secret: Some(&ok_secret),
        };
        let cases: Vec<(&str, GateInput, Option<&str>)> = vec![
            ("all open", good, None),
            (
                "no TerraformCluster",
                GateInput {
                    terraform_cluster: None,
                    ..good
                },
                Some("WaitingForClusterInfrastructure"),
            ),
            (
                "cluster not provisioned comes first",
                GateInput {
                    terraform_cluster: Some(&down),
                    cluster_state: ClusterState::Unreadable("no state"),
                    bootstrap_secret: None,
                    ..good
                },
                Some("WaitingForClusterInfrastructure"),
            ),
            (
                "exports unreadable",
                GateInput {
                    cluster_state: ClusterState::Unreadable("non-integer number at /w"),
                    bootstrap_secret: None,
                    ..good
                },
                Some("WaitingForClusterExports"),
            ),
            (
                "externally managed cluster needs no state",
                GateInput {
                    terraform_cluster: Some(&external),
                    cluster_state: ClusterState::Unreadable("no state"),
                    ..good
                },
                None,
            ),
            (
                "no bootstrap Secret name",
                GateInput {
                    machine_pool: &no_name,
                    ..good
                },
                Some("WaitingForBootstrapData"),
            ),
            (
                "bootstrap Secret not found",
                GateInput {
                    bootstrap_secret: None,
                    ..good
                },
                Some("WaitingForBootstrapData"),
            ),
            (
                "bootstrap Secret without value",
                GateInput {
                    bootstrap_secret: Some(&no_value),
                    ..good
                },
                Some("WaitingForBootstrapData"),
            ),
            (
                "unknown bootstrap format",
                GateInput {
                    bootstrap_secret: Some(&bad_format),
                    ..good
                },
                Some("WaitingForBootstrapData"),
            ),
            (
                "ignition",
                GateInput {
                    bootstrap_secret: Some(&ignition),
                    ..good
                },
                None,
            ),
        ];
        for (name, input, want) in cases {
            match (gates(&input), want) {
                (Ok(_), None) => {}
                (Err(c), Some(reason)) => {
                    assert_eq!((c.status.as_str(), c.reason), ("Unknown", reason), "{name}");
                    assert!(!c.message.contains("cloud-config\n"), "{name}");
                }
                (got, _) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }

        let deps = gates(&good).unwrap();
        assert_eq!(
            deps.exports.to_value(),
            serde_json::json!({"subnet": "s-1"})
        );
        assert_eq!(deps.cluster_failure_domains, ["state-fd"]);
        assert_eq!(deps.bootstrap_data.as_base64(), "I2Nsb3VkLWNvbmZpZwo=");
        assert_eq!(deps.bootstrap_format, BootstrapFormat::CloudConfig);
        let ext = gates(&GateInput {
            terraform_cluster: Some(&external),
            ..good
        })
        .unwrap();
        assert_eq!(ext.exports.as_str(), "{}");
        assert_eq!(ext.cluster_failure_domains, ["status-fd"]);
        assert_eq!(
            gates(&GateInput {
                bootstrap_secret: Some(&ignition),
                ..good
            })
            .unwrap()
            .bootstrap_format,
            BootstrapFormat::Ignition
        );
    }

    fn with_annotations(mut m: MachinePool, pairs: &[(&str, &str)]) -> MachinePool {
        m.metadata.annotations = Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        m
    }

    const MIN: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
    const MAX: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";
    const MANAGED_BY: &str = "cluster.x-k8s.io/replicas-managed-by";

    #[test]
    fn replicas_input_table() {
        let mut unset = mp();
        unset.spec.replicas = None;
        let scaled = with_annotations(mp(), &[(MIN, "2"), (MAX, "4")]);
        let mut scaled_unset = scaled.clone();
        scaled_unset.spec.replicas = None;
        let half = with_annotations(mp(), &[(MIN, "2")]);
        let cases = [
            ("fixed size", mp(), Some(7), 3),
            ("fixed size, unset", unset, None, 1),
            ("fixed size, zero", with_replicas(mp(), 0), Some(2), 0),
            ("autoscaled: observed", scaled.clone(), Some(3), 3),
            ("autoscaled: observed above max", scaled.clone(), Some(9), 4),
            (
                "autoscaled: first apply from spec",
                with_replicas(scaled.clone(), 1),
                None,
                2,
            ),
            (
                "autoscaled: unset spec reads 1, clamped",
                scaled_unset,
                None,
                2,
            ),
            ("invalid annotations: fixed size", half, Some(9), 3),
        ];
        for (name, m, observed, want) in cases {
            let (scaling, _) = autoscaling(&m);
            assert_eq!(replicas_input(&m, observed, &scaling), want, "{name}");
        }
    }

    fn with_replicas(mut m: MachinePool, n: i32) -> MachinePool {
        m.spec.replicas = Some(n);
        m
    }

    fn deps() -> Dependencies {
        Dependencies {
            exports: serde_json::json!({"subnet": "s-1"}).into(),
            cluster_failure_domains: vec!["state-fd".into()],
            bootstrap_data: BootstrapData::from_bytes(b"x"),
            bootstrap_format: BootstrapFormat::Ignition,
        }
    }

    #[test]
    fn inputs_table() {
        let base = inputs(&tmp(), &mp(), &cluster(), &deps());
        assert_eq!(base.common.captf_object.kind, "TerraformMachinePool");
        assert_eq!(base.common.captf_object.name, "workers");
        assert_eq!(base.common.captf_cluster.name, "prod");
        assert_eq!(base.machinepool_name, "mp-workers");
        assert_eq!(base.replicas, 3);
        assert_eq!(
            base.captf_cluster_outputs.to_value(),
            serde_json::json!({"subnet": "s-1"})
        );
        assert_eq!(base.cluster_failure_domains, ["state-fd"]);
        assert_eq!(base.bootstrap_format, BootstrapFormat::Ignition);
        assert!(base.failure_domains.is_empty());
        assert!(base.node_labels.is_empty());
        assert_eq!(base.kubernetes_version, None);
        assert_eq!(base.autoscaling, Autoscaling::default());
        assert!(captf_contract::RoleInputs::from(base).validate().is_ok());

        let mut m = with_annotations(mp(), &[(MIN, "1"), (MAX, "5")]);
        m.spec.failure_domains = Some(vec!["fd-b".into(), "fd-a".into()]);
        m.spec.template.spec.version = Some("v1.33.1".into());
        m.spec.template.metadata = Some(capi::TemplateMetadata {
            labels: Some(BTreeMap::from([("pool".into(), "workers".into())])),
            annotations: None,
        });
        let mut t = tmp();
        t.status = Some(captf_api::TerraformMachinePoolStatus {
            replicas: Some(4),
            ..Default::default()
        });
        let full = inputs(&t, &m, &cluster(), &deps());
        assert_eq!(full.failure_domains, ["fd-b", "fd-a"], "kept as written");
        assert_eq!(full.kubernetes_version.as_deref(), Some("v1.33.1"));
        assert_eq!(full.node_labels["pool"], "workers");
        assert_eq!(
            full.autoscaling,
            Autoscaling {
                enabled: true,
                min: 1,
                max: 5
            }
        );
        assert_eq!(full.replicas, 4, "the observed count while autoscaling");
    }

    fn pool_outputs(ids: &[&str], replicas: i32, instances: usize) -> MachinePoolOutputs {
        MachinePoolOutputs {
            provider_id: Some("oci://pool-1".into()),
            provider_id_list: ids.iter().map(|s| s.to_string()).collect(),
            replicas,
            instances: (0..instances)
                .map(|n| PoolInstance {
                    provider_id: format!("oci://i-{n}"),
                    instance_id: Some(format!("i-{n}")),
                    addresses: vec![Address {
                        kind: AddressType::InternalIP,
                        address: "10.0.0.1".into(),
                    }],
                    failure_domain: None,
                    state: Some(HealthState::Running),
                })
                .collect(),
            health: Health::running_healthy(),
        }
    }

    #[test]
    fn writes_table() {
        let w = writes(&pool_outputs(&["c", "a", "b", "a"], 3, 2), false);
        assert_eq!(w.provider_id.as_deref(), Some("oci://pool-1"));
        assert_eq!(w.provider_id_list, ["a", "b", "c"]);
        assert_eq!(w.replicas, 3);
        let inst = w.instances.unwrap();
        assert_eq!(inst.len(), 2);
        assert_eq!(inst[0].provider_id, "oci://i-0");
        assert_eq!(inst[0].state, Some(ApiHealthState::Running));
        assert_eq!(
            inst[0].addresses.as_ref().unwrap()[0].type_,
            MachineAddressType::InternalIP
        );
        assert!(!w.instances_truncated);

        let zero = writes(&pool_outputs(&[], 0, 0), false);
        assert_eq!((zero.replicas, zero.instances), (0, None));
        assert!(zero.provider_id_list.is_empty());

        let mut no_group = pool_outputs(&[], 0, 0);
        no_group.provider_id = None;
        assert_eq!(writes(&no_group, false).provider_id, None);

        let big = writes(&pool_outputs(&[], 1001, MAX_POOL_INSTANCES + 1), false);
        assert_eq!(big.instances.unwrap().len(), MAX_POOL_INSTANCES);
        assert!(big.instances_truncated);
        assert!(writes(&pool_outputs(&[], 0, 1), true).instances_truncated);

        let many: Vec<String> = (0..MAX_PROVIDER_IDS + 5)
            .map(|n| format!("id-{n:06}"))
            .collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            writes(&pool_outputs(&refs, 0, 0), false)
                .provider_id_list
                .len(),
            MAX_PROVIDER_IDS
        );
    }

    #[test]
    fn provisioned_table() {
        let running = pool_outputs(&[], 0, 0);
        let pending = MachinePoolOutputs {
            health: Health {
                state: HealthState::Pending,
                ..Health::running_healthy()
            },
            ..running.clone()
        };
        let cases = [
            ("scaled to zero, running", false, true, Some(&running), true),
            ("pending", false, true, Some(&pending), false),
            ("no successful apply", false, false, Some(&running), false),
            ("invalid outputs", false, true, None, false),
            ("latched", true, false, None, true),
        ];
        for (name, latched, applied, outputs, want) in cases {
            assert_eq!(provisioned(latched, applied, outputs), want, "{name}");
        }
    }

    #[test]
    fn membership_converging_table() {
        let cases = [
            (3, Some(3), false),
            (2, Some(3), true),
            (4, Some(3), true),
            (0, Some(0), false),
            (0, None, false),
            (2, None, false),
        ];
        for (len, replicas, want) in cases {
            assert_eq!(
                membership_converging(len, replicas),
                want,
                "{len} {replicas:?}"
            );
        }
    }

    #[test]
    fn replicas_sync_table() {
        struct Case {
            name: &'static str,
            annotations: &'static [(&'static str, &'static str)],
            observed: Option<i32>,
            claim: bool,
            release: bool,
            replicas: Option<i32>,
            status: &'static str,
            reason: &'static str,
        }
        let cases = [
            Case {
                name: "disabled",
                annotations: &[],
                observed: Some(5),
                claim: false,
                release: false,
                replicas: None,
                status: "False",
                reason: "AutoscalingDisabled",
            },
            Case {
                name: "disabled releases our claim",
                annotations: &[(MANAGED_BY, "captf")],
                observed: Some(5),
                claim: false,
                release: true,
                replicas: None,
                status: "False",
                reason: "AutoscalingDisabled",
            },
            Case {
                name: "disabled leaves another claim",
                annotations: &[(MANAGED_BY, "external-autoscaler")],
                observed: Some(5),
                claim: false,
                release: false,
                replicas: None,
                status: "False",
                reason: "AutoscalingDisabled",
            },
            Case {
                name: "invalid pair",
                annotations: &[(MIN, "5"), (MAX, "2"), (MANAGED_BY, "captf")],
                observed: Some(5),
                claim: false,
                release: true,
                replicas: None,
                status: "False",
                reason: "AutoscalingAnnotationsInvalid",
            },
            Case {
                name: "claims and writes back unclamped",
                annotations: &[(MIN, "1"), (MAX, "4")],
                observed: Some(6),
                claim: true,
                release: false,
                replicas: Some(6),
                status: "True",
                reason: "ReplicasManagedByModule",
            },
            Case {
                name: "\"false\" is free to claim",
                annotations: &[(MIN, "1"), (MAX, "4"), (MANAGED_BY, "false")],
                observed: Some(2),
                claim: true,
                release: false,
                replicas: Some(2),
                status: "True",
                reason: "ReplicasManagedByModule",
            },
            Case {
                name: "already claimed, same count",
                annotations: &[(MIN, "1"), (MAX, "4"), (MANAGED_BY, "captf")],
                observed: Some(3),
                claim: false,
                release: false,
                replicas: None,
                status: "True",
                reason: "ReplicasManagedByModule",
            },
            Case {
                name: "nothing observed yet",
                annotations: &[(MIN, "1"), (MAX, "4"), (MANAGED_BY, "captf")],
                observed: None,
                claim: false,
                release: false,
                replicas: None,
                status: "True",
                reason: "ReplicasManagedByModule",
            },
            Case {
                name: "another manager",
                annotations: &[(MIN, "1"), (MAX, "4"), (MANAGED_BY, "external-autoscaler")],
                observed: Some(6),
                claim: false,
                release: false,
                replicas: None,
                status: "False",
                reason: "ReplicasManagedExternally",
            },
        ];
        for c in cases {
            let m = with_annotations(mp(), c.annotations);
            let s = replicas_sync(&m, c.observed);
            assert_eq!(
                (s.claim, s.release, s.replicas),
                (c.claim, c.release, c.replicas),
                "{}",
                c.name
            );
            assert_eq!(
                (s.condition.status.as_str(), s.condition.reason),
                (c.status, c.reason),
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn bootstrap_secret_debug_hides_the_payload() {
        assert!(!format!("{:?}", secret()).contains("cloud-config"));
    }
}
