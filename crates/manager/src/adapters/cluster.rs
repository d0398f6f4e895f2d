//! The TerraformCluster adapter: its owner `Cluster`, the `cluster` role
//! inputs, and what its outputs write.

use captf_api::TerraformCluster;
use captf_api::cluster::{ApiEndpoint as SpecEndpoint, FailureDomain as SpecFailureDomain};
use captf_api::names::{annotations, kinds, reasons};
use captf_contract::Role;
use captf_contract::health::HealthState;
use captf_contract::inputs::{ClusterInputs, ClusterNetwork, ClusterRef, CommonInputs, Endpoint};
use captf_contract::outputs::{ClusterOutputs, FailureDomain};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::{
    OwnerDecision, annotation, back_reference_checks, capi_owner_ref, condition, names_captf_kind,
};
use crate::capi::{self, Cluster};
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};

pub use captf_api::names::annotations::{ENDPOINT_SOURCE_MODULE, ENDPOINT_SOURCE_USER};

/// Decides whether the Cluster that `object`'s ownerReference names may be
/// used. `cluster` is that Cluster as fetched (`None`: not found); the
/// caller finds its name with [`capi_owner_ref`]`(meta, "Cluster")`.
pub fn owner(object: &ObjectMeta, cluster: Option<&Cluster>) -> OwnerDecision {
    let Some(owner_ref) = capi_owner_ref(object, capi::CLUSTER_KIND) else {
        return OwnerDecision::missing(
            ConditionStatus::Unknown,
            reasons::WAITING_FOR_OWNER,
            "no Cluster references this TerraformCluster yet",
        );
    };
    let Some(cluster) = cluster else {
        return OwnerDecision::missing(
            ConditionStatus::False,
            reasons::OWNER_NOT_FOUND,
            format!("Cluster {} not found", owner_ref.name),
        );
    };
    let own_name = object.name.as_deref().unwrap_or_default();
    let cluster_name = cluster.metadata.name.as_deref().unwrap_or_default();
    match &cluster.spec.infrastructure_ref {
        None => {
            return OwnerDecision::gated(
                reasons::OWNER_MISMATCH,
                format!("Cluster {cluster_name} has no spec.infrastructureRef"),
            );
        }
        Some(r) if !names_captf_kind(r, kinds::TERRAFORM_CLUSTER) => {
            return OwnerDecision::gated(
                reasons::CLUSTER_NOT_TERRAFORM,
                format!(
                    "Cluster {cluster_name} uses infrastructure {} of group {:?}, not a TerraformCluster",
                    r.kind, r.api_group
                ),
            );
        }
        Some(r) if r.name != own_name => {
            return OwnerDecision::gated(
                reasons::OWNER_MISMATCH,
                format!(
                    "Cluster {cluster_name} references TerraformCluster {}, not this one",
                    r.name
                ),
            );
        }
        Some(_) => {}
    }
    match back_reference_checks(owner_ref, &cluster.metadata, object, cluster_name) {
        Ok(()) => OwnerDecision::found(),
        Err(why) => OwnerDecision::gated(reasons::OWNER_MISMATCH, why),
    }
}

/// A complete endpoint with values the contract accepts.
fn valid_endpoint(host: Option<&str>, port: Option<i32>) -> Option<Endpoint> {
    let (host, port) = (host?, port?);
    let host_ok = (1..=512).contains(&host.chars().count());
    (host_ok && (1..=65535).contains(&port)).then(|| Endpoint {
        host: host.to_owned(),
        port,
    })
}

fn cluster_endpoint(cluster: &Cluster) -> Option<Endpoint> {
    let e = cluster.spec.control_plane_endpoint.as_ref()?;
    valid_endpoint(e.host.as_deref(), e.port)
}

fn spec_endpoint(object: &TerraformCluster) -> Option<Endpoint> {
    let e = object.spec.control_plane_endpoint.as_ref()?;
    valid_endpoint(e.host.as_deref(), e.port)
}

/// The `control_plane_endpoint` input: the endpoint the module does not own.
/// Null for good once the endpoint came from the module.
pub fn endpoint_input(object: &TerraformCluster, cluster: &Cluster) -> Option<Endpoint> {
    if annotation(&object.metadata, annotations::ENDPOINT_SOURCE) == Some(ENDPOINT_SOURCE_MODULE) {
        return None;
    }
    cluster_endpoint(cluster).or_else(|| spec_endpoint(object))
}

/// The `captf.io/endpoint-source: user` annotation to write before the first
/// apply, when a user endpoint exists then and nothing is recorded yet.
pub fn endpoint_source_before_first_apply(
    object: &TerraformCluster,
    cluster: &Cluster,
    ever_applied: bool,
) -> Option<&'static str> {
    let recorded = annotation(&object.metadata, annotations::ENDPOINT_SOURCE).is_some();
    (!recorded && !ever_applied && endpoint_input(object, cluster).is_some())
        .then_some(ENDPOINT_SOURCE_USER)
}

/// Builds the `cluster` role inputs. `recorded_control_plane_initialized`
/// is the value the attempt record last rendered: once true, it stays true
/// (a moved Cluster loses its status).
pub fn inputs(
    object: &TerraformCluster,
    cluster: &Cluster,
    recorded_control_plane_initialized: bool,
) -> ClusterInputs {
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
    let network = cluster.spec.cluster_network.as_ref();
    ClusterInputs {
        common: CommonInputs::new(
            Role::Cluster,
            cluster_ref,
            object.metadata.name.clone().unwrap_or_default(),
            namespace,
            template,
        ),
        control_plane_endpoint: endpoint_input(object, cluster),
        kubernetes_version: cluster
            .spec
            .topology
            .as_ref()
            .and_then(|t| t.version.clone()),
        control_plane_initialized: cluster.control_plane_initialized()
            || recorded_control_plane_initialized,
        cluster_network: network.and_then(|n| {
            ClusterNetwork::from_parts(
                n.pods.as_ref().map(|p| p.cidr_blocks.clone()),
                n.services.as_ref().map(|s| s.cidr_blocks.clone()),
                n.service_domain.clone(),
                n.api_server_port,
            )
        }),
    }
}

/// What reading a cluster's state gives to map onto the objects.
#[derive(Debug, Clone, Copy)]
pub struct OutputsReading<'a> {
    /// The decoded outputs when the verdict lets them be written.
    pub outputs: Option<&'a ClusterOutputs>,
    /// The state carries the inputs hash of a successful apply.
    pub successful_apply: bool,
    /// The applied record rendered `control_plane_endpoint` as null.
    pub applied_endpoint_input_null: bool,
    /// `status.initialization.provisioned` already latched.
    pub provisioned: bool,
}

/// `status.exports` to write.
#[derive(Debug, Clone, PartialEq)]
pub enum ExportsWrite {
    /// Keep what is there (outputs not writable).
    Keep,
    /// Publish this value.
    Publish(Value),
    /// Too large: clear the field and emit `ExportsNotPublished`.
    ClearTooLarge,
}

/// What the outputs of one pass write to the TerraformCluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterWrites {
    /// Write to `spec.controlPlaneEndpoint`, with
    /// `captf.io/endpoint-source: module` (once).
    pub control_plane_endpoint: Option<SpecEndpoint>,
    /// `status.failureDomains`: `None` keeps it, `Some(None)` clears it.
    pub failure_domains: Option<Option<Vec<SpecFailureDomain>>>,
    pub exports: ExportsWrite,
    /// `status.initialization.provisioned` after this pass.
    pub provisioned: bool,
    /// `EndpointAvailable`; `None` before provisioning.
    pub endpoint_available: Option<ConditionValue>,
}

fn spec_failure_domain(fd: &FailureDomain) -> SpecFailureDomain {
    SpecFailureDomain {
        name: fd.name.clone(),
        control_plane: Some(fd.control_plane),
        attributes: (!fd.attributes.is_empty()).then(|| fd.attributes.clone()),
    }
}

/// Maps a state reading onto the TerraformCluster.
pub fn writes(
    object: &TerraformCluster,
    cluster: &Cluster,
    r: &OutputsReading<'_>,
) -> ClusterWrites {
    let spec_complete = object
        .spec
        .control_plane_endpoint
        .as_ref()
        .is_some_and(SpecEndpoint::is_complete);
    let control_plane_endpoint = r
        .outputs
        .and_then(|o| o.control_plane_endpoint.as_ref())
        .filter(|_| !spec_complete && r.applied_endpoint_input_null)
        .map(|e| SpecEndpoint {
            host: Some(e.host.clone()),
            port: Some(e.port),
        });
    let failure_domains = r.outputs.map(|o| {
        (!o.failure_domains.is_empty())
            .then(|| o.failure_domains.iter().map(spec_failure_domain).collect())
    });
    let exports = match r.outputs {
        None => ExportsWrite::Keep,
        // The apiserver keeps parsed JSON, so the value is published parsed.
        Some(o) if o.published_exports.is_some() => ExportsWrite::Publish(o.exports.to_value()),
        Some(_) => ExportsWrite::ClearTooLarge,
    };
    let provisioned = r.provisioned
        || (r.successful_apply
            && r.outputs
                .is_some_and(|o| o.health.state != HealthState::Pending));
    let endpoint_available = provisioned.then(|| {
        let module = r.outputs.and_then(|o| o.control_plane_endpoint.clone());
        match module
            .or_else(|| cluster_endpoint(cluster))
            .or_else(|| spec_endpoint(object))
        {
            Some(e) => condition(
                ConditionStatus::True,
                reasons::ENDPOINT_AVAILABLE,
                format!("control plane endpoint {}:{}", e.host, e.port),
            ),
            None => condition(
                ConditionStatus::False,
                reasons::WAITING_FOR_ENDPOINT,
                "neither the module output nor Cluster.spec.controlPlaneEndpoint holds a valid endpoint",
            ),
        }
    });
    ClusterWrites {
        control_plane_endpoint,
        failure_domains,
        exports,
        provisioned,
        endpoint_available,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::capi::{ApiEndpoint, ClusterInitialization, ClusterStatus, ObjectReference};
    use captf_api::TerraformClusterSpec;
    use captf_api::common::{Source, WorkspaceSpec};
    use captf_contract::health::Health;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn tc() -> TerraformCluster {
        let mut tc = TerraformCluster::new(
            "prod",
            TerraformClusterSpec {
                workspace: WorkspaceSpec {
                    source: Source {
                        image: "ghcr.io/captf-io/noop-cluster:v1-tofu".into(),
                        image_pull_policy: None,
                    },
                    identity_ref: None,
                    jobs: None,
                    variables: None,
                    variables_from: None,
                    deletion_policy: None,
                    adopt_retained_state: None,
                },
                control_plane_endpoint: None,
                drift: None,
                apply_policy: None,
                max_active_jobs: None,
                defaults: None,
            },
        );
        tc.metadata.namespace = Some("team-a".into());
        tc.metadata.labels = Some(BTreeMap::from([(
            "cluster.x-k8s.io/cluster-name".into(),
            "prod".into(),
        )]));
        tc.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "cluster.x-k8s.io/v1beta2".into(),
            kind: "Cluster".into(),
            name: "prod".into(),
            uid: "uid-prod".into(),
            ..Default::default()
        }]);
        tc
    }

    fn cluster() -> Cluster {
        Cluster {
            metadata: ObjectMeta {
                name: Some("prod".into()),
                namespace: Some("team-a".into()),
                uid: Some("uid-prod".into()),
                ..Default::default()
            },
            spec: capi::ClusterSpec {
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

    #[test]
    fn owner_table() {
        type Edit = fn(&mut TerraformCluster, &mut Option<Cluster>);
        let cases: Vec<(&str, Edit, &str, Option<&str>)> = vec![
            ("references back", |_, _| {}, "Found", None),
            (
                "no ownerRef",
                |t, _| t.metadata.owner_references = None,
                "Missing",
                Some("WaitingForOwner"),
            ),
            (
                "ownerRef of another group",
                |t, _| {
                    t.metadata.owner_references.as_mut().unwrap()[0].api_version =
                        "example.com/v1".into()
                },
                "Missing",
                Some("WaitingForOwner"),
            ),
            (
                "owner gone",
                |_, c| *c = None,
                "Missing",
                Some("OwnerNotFound"),
            ),
            (
                "infrastructureRef of another provider",
                |_, c| {
                    let r = c
                        .as_mut()
                        .unwrap()
                        .spec
                        .infrastructure_ref
                        .as_mut()
                        .unwrap();
                    r.api_group = "infrastructure.cluster.x-k8s.io".into();
                    r.kind = "AWSCluster".into();
                },
                "Gated",
                Some("ClusterNotTerraform"),
            ),
            (
                "right kind in another group",
                |_, c| {
                    c.as_mut()
                        .unwrap()
                        .spec
                        .infrastructure_ref
                        .as_mut()
                        .unwrap()
                        .api_group = "example.com".into()
                },
                "Gated",
                Some("ClusterNotTerraform"),
            ),
            (
                "infrastructureRef names another TerraformCluster",
                |_, c| {
                    c.as_mut()
                        .unwrap()
                        .spec
                        .infrastructure_ref
                        .as_mut()
                        .unwrap()
                        .name = "other".into()
                },
                "Gated",
                Some("OwnerMismatch"),
            ),
            (
                "no infrastructureRef",
                |_, c| c.as_mut().unwrap().spec.infrastructure_ref = None,
                "Gated",
                Some("OwnerMismatch"),
            ),
            (
                "stale UID",
                |_, c| c.as_mut().unwrap().metadata.uid = Some("uid-new".into()),
                "Gated",
                Some("OwnerMismatch"),
            ),
            (
                "ownerRef without UID",
                |t, c| {
                    t.metadata.owner_references.as_mut().unwrap()[0].uid = String::new();
                    c.as_mut().unwrap().metadata.uid = Some("uid-new".into());
                },
                "Found",
                None,
            ),
            (
                "cluster-name label disagrees",
                |t, _| {
                    t.metadata
                        .labels
                        .as_mut()
                        .unwrap()
                        .insert("cluster.x-k8s.io/cluster-name".into(), "staging".into());
                },
                "Gated",
                Some("OwnerMismatch"),
            ),
            (
                "no cluster-name label",
                |t, _| t.metadata.labels = None,
                "Found",
                None,
            ),
        ];
        for (name, edit, lookup, reason) in cases {
            let (mut t, mut c) = (tc(), Some(cluster()));
            edit(&mut t, &mut c);
            let d = owner(&t.metadata, c.as_ref());
            let got = match d.lookup {
                crate::engine::preamble::OwnerLookup::Found => "Found",
                crate::engine::preamble::OwnerLookup::Missing => "Missing",
                crate::engine::preamble::OwnerLookup::Gated(r) => {
                    assert_eq!(Some(r), reason, "{name}");
                    "Gated"
                }
            };
            assert_eq!(got, lookup, "{name}");
            assert_eq!(d.condition.as_ref().map(|c| c.reason), reason, "{name}");
        }
    }

    fn endpoint(host: &str, port: i32) -> Option<Endpoint> {
        Some(Endpoint {
            host: host.into(),
            port,
        })
    }

    #[test]
    fn endpoint_input_table() {
        type Edit = fn(&mut TerraformCluster, &mut Cluster);
        fn cluster_ep(c: &mut Cluster, host: Option<&str>, port: Option<i32>) {
            c.spec.control_plane_endpoint = Some(ApiEndpoint {
                host: host.map(Into::into),
                port,
            })
        }
        fn spec_ep(t: &mut TerraformCluster, host: &str, port: i32) {
            t.spec.control_plane_endpoint = Some(SpecEndpoint {
                host: Some(host.into()),
                port: Some(port),
            })
        }
        let cases: Vec<(&str, Edit, Option<Endpoint>)> = vec![
            ("none anywhere", |_, _| {}, None),
            (
                "Cluster's wins",
                |t, c| {
                    cluster_ep(c, Some("lb.example.com"), Some(6443));
                    spec_ep(t, "other.example.com", 443);
                },
                endpoint("lb.example.com", 6443),
            ),
            (
                "half-set Cluster endpoint falls to the TerraformCluster's",
                |t, c| {
                    cluster_ep(c, Some("lb.example.com"), None);
                    spec_ep(t, "own.example.com", 443);
                },
                endpoint("own.example.com", 443),
            ),
            (
                "out-of-range port is not valid",
                |_, c| cluster_ep(c, Some("lb.example.com"), Some(0)),
                None,
            ),
            (
                "empty host is not valid",
                |_, c| cluster_ep(c, Some(""), Some(6443)),
                None,
            ),
            (
                "always null once the module set it",
                |t, c| {
                    cluster_ep(c, Some("lb.example.com"), Some(6443));
                    t.metadata.annotations = Some(BTreeMap::from([(
                        "captf.io/endpoint-source".into(),
                        "module".into(),
                    )]));
                },
                None,
            ),
            (
                "a user source keeps rendering it",
                |t, c| {
                    cluster_ep(c, Some("lb.example.com"), Some(6443));
                    t.metadata.annotations = Some(BTreeMap::from([(
                        "captf.io/endpoint-source".into(),
                        "user".into(),
                    )]));
                },
                endpoint("lb.example.com", 6443),
            ),
        ];
        for (name, edit, want) in cases {
            let (mut t, mut c) = (tc(), cluster());
            edit(&mut t, &mut c);
            assert_eq!(endpoint_input(&t, &c), want, "{name}");
        }
    }

    #[test]
    fn endpoint_source_before_first_apply_table() {
        let mut with_ep = cluster();
        with_ep.spec.control_plane_endpoint = Some(ApiEndpoint {
            host: Some("lb".into()),
            port: Some(6443),
        });
        let mut recorded = tc();
        recorded.metadata.annotations = Some(BTreeMap::from([(
            "captf.io/endpoint-source".into(),
            "user".into(),
        )]));
        let cases = [
            (tc(), with_ep.clone(), false, Some("user")),
            (tc(), with_ep.clone(), true, None),
            (tc(), cluster(), false, None),
            (recorded, with_ep, false, None),
        ];
        for (i, (t, c, applied, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                endpoint_source_before_first_apply(&t, &c, applied),
                want,
                "case {i}"
            );
        }
    }

    #[test]
    fn inputs_table() {
        let base = inputs(&tc(), &cluster(), false);
        assert_eq!(base.common.captf_cluster.name, "prod");
        assert_eq!(base.common.captf_cluster.namespace, "team-a");
        assert_eq!(base.common.captf_object.kind, "TerraformCluster");
        assert_eq!(base.common.captf_tags.template, "");
        assert_eq!(base.kubernetes_version, None);
        assert!(!base.control_plane_initialized);
        assert_eq!(base.cluster_network, None);

        let mut t = tc();
        t.metadata.annotations = Some(BTreeMap::from([(
            "cluster.x-k8s.io/cloned-from-name".into(),
            "prod-template".into(),
        )]));
        let mut c = cluster();
        c.spec.topology = Some(capi::Topology {
            version: Some("v1.33.1+rke2r1".into()),
        });
        c.spec.cluster_network = Some(capi::ClusterNetwork {
            pods: Some(capi::NetworkRanges {
                cidr_blocks: vec!["192.168.0.0/16".into()],
            }),
            ..Default::default()
        });
        c.status = Some(ClusterStatus {
            initialization: Some(ClusterInitialization {
                control_plane_initialized: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        });
        let full = inputs(&t, &c, false);
        assert_eq!(full.common.captf_tags.template, "prod-template");
        assert_eq!(full.kubernetes_version.as_deref(), Some("v1.33.1+rke2r1"));
        assert!(full.control_plane_initialized);
        assert_eq!(
            full.cluster_network,
            Some(ClusterNetwork {
                pods: vec!["192.168.0.0/16".into()],
                services: vec![],
                service_domain: None,
                api_server_port: None,
            })
        );
        // The latch: a moved Cluster without status still renders true.
        assert!(inputs(&tc(), &cluster(), true).control_plane_initialized);
    }

    fn outputs(health: HealthState, endpoint: Option<Endpoint>) -> ClusterOutputs {
        ClusterOutputs {
            control_plane_endpoint: endpoint,
            failure_domains: vec![FailureDomain {
                name: "fd-1".into(),
                control_plane: true,
                attributes: BTreeMap::new(),
            }],
            exports: serde_json::json!({"vcn_id": "ocid1.vcn"}).into(),
            exports_hash: "h2:x".into(),
            published_exports: Some("{\"vcn_id\":\"ocid1.vcn\"}".into()),
            health: Health {
                state: health,
                ..Health::running_healthy()
            },
        }
    }

    fn reading(o: Option<&ClusterOutputs>) -> OutputsReading<'_> {
        OutputsReading {
            outputs: o,
            successful_apply: true,
            applied_endpoint_input_null: true,
            provisioned: false,
        }
    }

    #[test]
    fn endpoint_is_written_once_from_an_apply_that_rendered_none() {
        let o = outputs(HealthState::Running, endpoint("lb.example.com", 6443));
        let want = Some(SpecEndpoint {
            host: Some("lb.example.com".into()),
            port: Some(6443),
        });
        assert_eq!(
            writes(&tc(), &cluster(), &reading(Some(&o))).control_plane_endpoint,
            want
        );

        let mut half = tc();
        half.spec.control_plane_endpoint = Some(SpecEndpoint {
            host: Some("lb.example.com".into()),
            port: None,
        });
        assert_eq!(
            writes(&half, &cluster(), &reading(Some(&o))).control_plane_endpoint,
            want,
            "a half-set endpoint stays completable"
        );

        let mut set = tc();
        set.spec.control_plane_endpoint = want.clone();
        assert_eq!(
            writes(&set, &cluster(), &reading(Some(&o))).control_plane_endpoint,
            None
        );

        let user_input = OutputsReading {
            applied_endpoint_input_null: false,
            ..reading(Some(&o))
        };
        assert_eq!(
            writes(&tc(), &cluster(), &user_input).control_plane_endpoint,
            None
        );

        let none = outputs(HealthState::Running, None);
        assert_eq!(
            writes(&tc(), &cluster(), &reading(Some(&none))).control_plane_endpoint,
            None
        );
        assert_eq!(
            writes(&tc(), &cluster(), &reading(None)).control_plane_endpoint,
            None
        );
    }

    #[test]
    fn failure_domains_and_exports_table() {
        let o = outputs(HealthState::Running, None);
        let w = writes(&tc(), &cluster(), &reading(Some(&o)));
        assert_eq!(
            w.failure_domains,
            Some(Some(vec![SpecFailureDomain {
                name: "fd-1".into(),
                control_plane: Some(true),
                attributes: None,
            }]))
        );
        assert_eq!(
            w.exports,
            ExportsWrite::Publish(serde_json::json!({"vcn_id": "ocid1.vcn"}))
        );

        let mut empty = o.clone();
        empty.failure_domains.clear();
        empty.published_exports = None;
        let w = writes(&tc(), &cluster(), &reading(Some(&empty)));
        assert_eq!(w.failure_domains, Some(None), "[] clears the field");
        assert_eq!(w.exports, ExportsWrite::ClearTooLarge);

        let w = writes(&tc(), &cluster(), &reading(None));
        assert_eq!(
            w.failure_domains, None,
            "invalid outputs keep what is there"
        );
        assert_eq!(w.exports, ExportsWrite::Keep);
    }

    #[test]
    fn provisioned_latch_table() {
        let running = outputs(HealthState::Running, None);
        let pending = outputs(HealthState::Pending, None);
        let degraded = outputs(HealthState::Degraded, None);
        let cases = [
            (
                "running after a successful apply",
                reading(Some(&running)),
                true,
            ),
            ("degraded still provisions", reading(Some(&degraded)), true),
            ("pending does not", reading(Some(&pending)), false),
            ("invalid outputs do not", reading(None), false),
            (
                "no successful apply",
                OutputsReading {
                    successful_apply: false,
                    ..reading(Some(&running))
                },
                false,
            ),
            (
                "latched stays",
                OutputsReading {
                    provisioned: true,
                    ..reading(None)
                },
                true,
            ),
        ];
        for (name, r, want) in cases {
            assert_eq!(writes(&tc(), &cluster(), &r).provisioned, want, "{name}");
        }
    }

    #[test]
    fn endpoint_available_table() {
        let with = outputs(HealthState::Running, endpoint("lb", 6443));
        let without = outputs(HealthState::Running, None);
        let pending = outputs(HealthState::Pending, endpoint("lb", 6443));
        let mut cluster_with = cluster();
        cluster_with.spec.control_plane_endpoint = Some(ApiEndpoint {
            host: Some("cp".into()),
            port: Some(443),
        });
        let cases = [
            (
                "module output",
                cluster(),
                reading(Some(&with)),
                Some("EndpointAvailable"),
            ),
            (
                "Cluster's endpoint",
                cluster_with,
                reading(Some(&without)),
                Some("EndpointAvailable"),
            ),
            (
                "none",
                cluster(),
                reading(Some(&without)),
                Some("WaitingForEndpoint"),
            ),
            (
                "not before provisioning",
                cluster(),
                reading(Some(&pending)),
                None,
            ),
        ];
        for (name, c, r, want) in cases {
            let got = writes(&tc(), &c, &r).endpoint_available;
            assert_eq!(got.as_ref().map(|c| c.reason), want, "{name}");
            if let Some(got) = got {
                let status = if want == Some("EndpointAvailable") {
                    "True"
                } else {
                    "False"
                };
                assert_eq!(got.status, status, "{name}");
            }
        }
    }
}
