//! Typed inputs of each role, exactly as the generated root passes them to
//! the module. One value of these types is rendered to `terraform.tfvars.json`,
//! hashed and stored, so what the module sees is what was hashed.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

pub use crate::bootstrap::{BootstrapData, BootstrapFormat};
use crate::go_json::{html_escape, to_go_string};
use crate::json_text::JsonText;
use crate::names::{MANAGED_BY, TAG_KEYS, input_names};
use crate::raw_json::{Node, node};
use crate::{CONTRACT_VERSION, Role};

/// The owning Cluster API `Cluster` (`captf_cluster`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterRef {
    pub name: String,
    pub namespace: String,
}

/// The Terraform* object itself (`captf_object`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectRef {
    /// `TerraformCluster`, `TerraformMachine` or `TerraformMachinePool`.
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

/// `captf_tags`: the six fixed tag keys. `captf.io/managed-by` is always
/// `captf`, so it is not a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tags {
    /// `captf.io/cluster`: the Cluster name.
    pub cluster: String,
    /// `captf.io/namespace`: namespace of the Terraform* object.
    pub namespace: String,
    /// `captf.io/kind`: kind of the Terraform* object.
    pub kind: String,
    /// `captf.io/name`: name of the Terraform* object.
    pub name: String,
    /// `captf.io/template`: the object's `cluster.x-k8s.io/cloned-from-name`
    /// annotation, or `""`.
    pub template: String,
}

impl Tags {
    /// The tags as a map with the contract's key names.
    pub fn to_map(&self) -> BTreeMap<&'static str, &str> {
        let values = [
            self.cluster.as_str(),
            self.namespace.as_str(),
            self.kind.as_str(),
            self.name.as_str(),
            MANAGED_BY,
            self.template.as_str(),
        ];
        TAG_KEYS.into_iter().zip(values).collect()
    }
}

impl Serialize for Tags {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Tags {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut map = BTreeMap::<String, String>::deserialize(deserializer)?;
        if let Some(extra) = map.keys().find(|k| !TAG_KEYS.contains(&k.as_str())) {
            return Err(D::Error::custom(format!(
                "captf_tags: unknown key {extra:?}"
            )));
        }
        let mut take = |key: &str| {
            map.remove(key)
                .ok_or_else(|| D::Error::custom(format!("captf_tags: missing key {key:?}")))
        };
        let tags = Tags {
            cluster: take(TAG_KEYS[0])?,
            namespace: take(TAG_KEYS[1])?,
            kind: take(TAG_KEYS[2])?,
            name: take(TAG_KEYS[3])?,
            template: take(TAG_KEYS[5])?,
        };
        if take(TAG_KEYS[4])? != MANAGED_BY {
            return Err(D::Error::custom(
                "captf_tags: captf.io/managed-by must be \"captf\"",
            ));
        }
        Ok(tags)
    }
}

/// The inputs every role receives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommonInputs {
    /// Always [`CONTRACT_VERSION`].
    pub captf_contract: String,
    pub captf_cluster: ClusterRef,
    pub captf_object: ObjectRef,
    pub captf_tags: Tags,
}

impl CommonInputs {
    /// Builds the common inputs of a Terraform* object of `role`: the object's
    /// kind and the tags follow from the role and names given.
    pub fn new(
        role: Role,
        cluster: ClusterRef,
        object_name: impl Into<String>,
        object_namespace: impl Into<String>,
        template: Option<String>,
    ) -> Self {
        let object = ObjectRef {
            kind: role.kind().to_owned(),
            name: object_name.into(),
            namespace: object_namespace.into(),
        };
        let tags = Tags {
            cluster: cluster.name.clone(),
            namespace: object.namespace.clone(),
            kind: object.kind.clone(),
            name: object.name.clone(),
            template: template.unwrap_or_default(),
        };
        CommonInputs {
            captf_contract: CONTRACT_VERSION.to_owned(),
            captf_cluster: cluster,
            captf_object: object,
            captf_tags: tags,
        }
    }
}

/// A control-plane endpoint (`host` and `port`, both set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub host: String,
    pub port: i32,
}

/// `cluster_network`, from `Cluster.spec.clusterNetwork`. Unset lists are
/// `[]`, unset scalars `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterNetwork {
    pub pods: Vec<String>,
    pub services: Vec<String>,
    pub service_domain: Option<String>,
    pub api_server_port: Option<i32>,
}

impl ClusterNetwork {
    /// Builds `cluster_network` from the Cluster's fields: `None` when none is
    /// set, otherwise every key present with unset lists as `[]`.
    pub fn from_parts(
        pods: Option<Vec<String>>,
        services: Option<Vec<String>>,
        service_domain: Option<String>,
        api_server_port: Option<i32>,
    ) -> Option<ClusterNetwork> {
        if pods.is_none()
            && services.is_none()
            && service_domain.is_none()
            && api_server_port.is_none()
        {
            return None;
        }
        Some(ClusterNetwork {
            pods: pods.unwrap_or_default(),
            services: services.unwrap_or_default(),
            service_domain,
            api_server_port,
        })
    }
}

/// Inputs of the `cluster` role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterInputs {
    #[serde(flatten)]
    pub common: CommonInputs,
    pub control_plane_endpoint: Option<Endpoint>,
    pub kubernetes_version: Option<String>,
    pub control_plane_initialized: bool,
    pub cluster_network: Option<ClusterNetwork>,
}

/// Inputs of the `machine` role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineInputs {
    #[serde(flatten)]
    pub common: CommonInputs,
    /// The cluster's `exports` output, verbatim (`{}` for an externally
    /// managed cluster).
    pub captf_cluster_outputs: JsonText,
    pub machine_name: String,
    pub bootstrap_data: BootstrapData,
    pub bootstrap_format: BootstrapFormat,
    pub failure_domain: Option<String>,
    pub kubernetes_version: Option<String>,
    pub control_plane: bool,
}

/// `autoscaling`: parsed from the MachinePool's autoscaler annotations;
/// `{false, 0, 0}` when absent or invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Autoscaling {
    pub enabled: bool,
    pub min: i32,
    pub max: i32,
}

/// MachinePool annotation holding the autoscaler's minimum size.
pub const AUTOSCALER_MIN_SIZE_ANNOTATION: &str =
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
/// MachinePool annotation holding the autoscaler's maximum size.
pub const AUTOSCALER_MAX_SIZE_ANNOTATION: &str =
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";

/// How a MachinePool's autoscaler annotations read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoscalingAnnotations {
    /// Neither annotation is set.
    Absent,
    /// Both set, integers, `0 <= min <= max`.
    Valid,
    /// One missing, not an integer, negative, or `min > max`; the pool
    /// still applies with autoscaling off.
    Invalid,
}

impl Autoscaling {
    /// Parses the two autoscaler annotation values (`None` when absent).
    pub fn from_annotations(
        min: Option<&str>,
        max: Option<&str>,
    ) -> (Autoscaling, AutoscalingAnnotations) {
        let off = Autoscaling::default();
        match (min, max) {
            (None, None) => (off, AutoscalingAnnotations::Absent),
            (Some(min), Some(max)) => match (min.parse::<i32>(), max.parse::<i32>()) {
                (Ok(min), Ok(max)) if 0 <= min && min <= max => (
                    Autoscaling {
                        enabled: true,
                        min,
                        max,
                    },
                    AutoscalingAnnotations::Valid,
                ),
                _ => (off, AutoscalingAnnotations::Invalid),
            },
            _ => (off, AutoscalingAnnotations::Invalid),
        }
    }

    /// The `replicas` input for a desired count: clamped into `[min, max]`
    /// when autoscaling is on, unchanged otherwise.
    pub fn clamp(&self, replicas: i32) -> i32 {
        if self.enabled {
            replicas.clamp(self.min, self.max)
        } else {
            replicas
        }
    }
}

/// Inputs of the `machinepool` role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachinePoolInputs {
    #[serde(flatten)]
    pub common: CommonInputs,
    /// The cluster's `exports` output, verbatim.
    pub captf_cluster_outputs: JsonText,
    pub machinepool_name: String,
    pub replicas: i32,
    pub bootstrap_data: BootstrapData,
    pub bootstrap_format: BootstrapFormat,
    pub failure_domains: Vec<String>,
    pub cluster_failure_domains: Vec<String>,
    pub kubernetes_version: Option<String>,
    pub node_labels: BTreeMap<String, String>,
    pub autoscaling: Autoscaling,
}

impl MachinePoolInputs {
    /// What the inputs hash covers: with autoscaling on, `replicas` belongs to
    /// the module and is zeroed.
    pub fn hash_view(&self) -> MachinePoolInputs {
        let mut view = self.clone();
        if view.autoscaling.enabled {
            view.replicas = 0;
        }
        view
    }

    /// What the pool approval hash covers: the hash view with
    /// `bootstrap_data` blanked, so an approval survives token rotation.
    pub fn approval_view(&self) -> MachinePoolInputs {
        let mut view = self.hash_view();
        view.bootstrap_data = BootstrapData::default();
        view
    }
}

/// The inputs of one object, whatever its role.
#[derive(Debug, Clone, PartialEq)]
pub enum RoleInputs {
    Cluster(ClusterInputs),
    Machine(MachineInputs),
    MachinePool(MachinePoolInputs),
}

/// Inputs that do not fit their role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputsError {
    #[error("captf_contract: must be {CONTRACT_VERSION:?}")]
    ContractVersion,
    #[error("captf_object.kind: must be {expected} for the {role} role")]
    KindMismatch { role: Role, expected: &'static str },
    #[error("bootstrap_data: not strict standard padded base64")]
    BootstrapDataEncoding,
    #[error("{role} inputs cannot be read: {message}")]
    Decode { role: Role, message: String },
}

impl RoleInputs {
    /// The role these inputs are for.
    pub fn role(&self) -> Role {
        match self {
            RoleInputs::Cluster(_) => Role::Cluster,
            RoleInputs::Machine(_) => Role::Machine,
            RoleInputs::MachinePool(_) => Role::MachinePool,
        }
    }

    /// The inputs shared by every role.
    pub fn common(&self) -> &CommonInputs {
        match self {
            RoleInputs::Cluster(i) => &i.common,
            RoleInputs::Machine(i) => &i.common,
            RoleInputs::MachinePool(i) => &i.common,
        }
    }

    /// Checks what the types alone cannot: the contract version, the object
    /// kind of the role, and the encoding of `bootstrap_data`.
    pub fn validate(&self) -> Result<(), InputsError> {
        let role = self.role();
        let common = self.common();
        if common.captf_contract != CONTRACT_VERSION {
            return Err(InputsError::ContractVersion);
        }
        if common.captf_object.kind != role.kind() {
            return Err(InputsError::KindMismatch {
                role,
                expected: role.kind(),
            });
        }
        let bootstrap = match self {
            RoleInputs::Cluster(_) => None,
            RoleInputs::Machine(i) => Some(&i.bootstrap_data),
            RoleInputs::MachinePool(i) => Some(&i.bootstrap_data),
        };
        if bootstrap.is_some_and(|b| !b.check()) {
            return Err(InputsError::BootstrapDataEncoding);
        }
        Ok(())
    }

    /// The inputs as a parsed JSON object (keys sorted; numbers in the
    /// exports lose their spelling, see [`JsonText::to_value`]).
    pub fn to_value(&self) -> Value {
        self.to_json_text().to_value()
    }

    /// The inputs as one JSON object: fields in the contract's order, maps
    /// sorted, the exports as written, strings spelled as Go writes them.
    pub fn to_json_text(&self) -> JsonText {
        let text = match self {
            RoleInputs::Cluster(i) => to_go_string(i),
            RoleInputs::Machine(i) => to_go_string(i),
            RoleInputs::MachinePool(i) => to_go_string(i),
        };
        JsonText::parse(&text).expect("serde_json writes valid JSON")
    }

    /// The inputs as `(name, value)` pairs in the contract's order, each
    /// value as the rendered values file spells it: as
    /// [`RoleInputs::to_json_text`] writes it, except that every input of a
    /// pool and a cluster's `cluster_network` are spelled as Go's
    /// `json.Marshal` writes them (`<`, `>`, `&`, U+2028 and U+2029 escaped).
    pub fn fields(&self) -> Vec<(&'static str, JsonText)> {
        let text = self.to_json_text();
        let Ok(Node::Object(members)) = node(text.as_raw()) else {
            unreachable!("inputs serialise to an object")
        };
        let names = input_names(self.role());
        debug_assert_eq!(members.len(), names.len(), "one member per input");
        names
            .iter()
            .zip(members)
            .map(|(name, (key, value))| {
                debug_assert_eq!(*name, key, "inputs serialise in the contract's order");
                let text = if self.html_escaped(name) {
                    html_escape(value.get())
                } else {
                    value.get().to_owned()
                };
                (*name, JsonText::parse(&text).expect("valid JSON"))
            })
            .collect()
    }

    /// True for the inputs whose rendered text escapes `<`, `>`, `&`, U+2028
    /// and U+2029: every input of a pool, and a cluster's `cluster_network`.
    /// The reference implementation's types for these marshal themselves
    /// with `json.Marshal`, which escapes them, and its file encoder copies
    /// that output as it is; rendering the same bytes keeps the inputs
    /// records of both implementations identical. The hashes decode strings,
    /// so they do not depend on this.
    fn html_escaped(&self, name: &str) -> bool {
        match self {
            RoleInputs::MachinePool(_) => true,
            RoleInputs::Cluster(_) => name == "cluster_network",
            RoleInputs::Machine(_) => false,
        }
    }

    /// What the inputs hash covers (see [`MachinePoolInputs::hash_view`]).
    pub fn hash_view(&self) -> RoleInputs {
        match self {
            RoleInputs::MachinePool(i) => RoleInputs::MachinePool(i.hash_view()),
            other => other.clone(),
        }
    }

    /// Reads the inputs of `role` from a JSON object holding exactly the
    /// contract inputs (e.g. a stored `terraform.tfvars.json` without user
    /// variables; keys that are not inputs of the role are ignored).
    pub fn from_value(role: Role, value: Value) -> Result<RoleInputs, InputsError> {
        let decode = |e: serde_json::Error| InputsError::Decode {
            role,
            message: describe_without_values(&e),
        };
        Ok(match role {
            Role::Cluster => RoleInputs::Cluster(serde_json::from_value(value).map_err(decode)?),
            Role::Machine => RoleInputs::Machine(serde_json::from_value(value).map_err(decode)?),
            Role::MachinePool => {
                RoleInputs::MachinePool(serde_json::from_value(value).map_err(decode)?)
            }
        })
    }

    /// Reads the inputs of `role` from JSON text, as [`RoleInputs::from_value`]
    /// does, keeping the exports exactly as written.
    pub fn from_json(role: Role, text: &str) -> Result<RoleInputs, InputsError> {
        let decode = |e: serde_json::Error| InputsError::Decode {
            role,
            message: describe_without_values(&e),
        };
        Ok(match role {
            Role::Cluster => RoleInputs::Cluster(serde_json::from_str(text).map_err(decode)?),
            Role::Machine => RoleInputs::Machine(serde_json::from_str(text).map_err(decode)?),
            Role::MachinePool => {
                RoleInputs::MachinePool(serde_json::from_str(text).map_err(decode)?)
            }
        })
    }
}

/// serde_json's messages quote offending values, which may be secrets; keep
/// only the messages that name a field.
fn describe_without_values(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let names_a_field = [
        "missing field",
        "unknown field",
        "duplicate field",
        "captf_tags:",
    ]
    .iter()
    .any(|p| text.starts_with(p));
    if names_a_field {
        text
    } else {
        "a value does not have the type the contract requires".to_owned()
    }
}

impl From<ClusterInputs> for RoleInputs {
    fn from(i: ClusterInputs) -> Self {
        RoleInputs::Cluster(i)
    }
}

impl From<MachineInputs> for RoleInputs {
    fn from(i: MachineInputs) -> Self {
        RoleInputs::Machine(i)
    }
}

impl From<MachinePoolInputs> for RoleInputs {
    fn from(i: MachinePoolInputs) -> Self {
        RoleInputs::MachinePool(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autoscaling_annotations_table() {
        use AutoscalingAnnotations as A;
        let on = |min, max| Autoscaling {
            enabled: true,
            min,
            max,
        };
        let off = Autoscaling::default();
        let table = [
            (None, None, off, A::Absent),
            (Some("1"), Some("5"), on(1, 5), A::Valid),
            (Some("0"), Some("0"), on(0, 0), A::Valid),
            (Some("3"), None, off, A::Invalid),
            (None, Some("3"), off, A::Invalid),
            (Some("x"), Some("3"), off, A::Invalid),
            (Some("4"), Some("3"), off, A::Invalid),
            (Some("-1"), Some("3"), off, A::Invalid),
            (Some(" 1"), Some("3"), off, A::Invalid),
        ];
        for (min, max, want, reading) in table {
            assert_eq!(
                Autoscaling::from_annotations(min, max),
                (want, reading),
                "{min:?} {max:?}"
            );
        }
    }

    #[test]
    fn cluster_network_is_null_only_when_nothing_is_set() {
        assert_eq!(ClusterNetwork::from_parts(None, None, None, None), None);
        assert_eq!(
            ClusterNetwork::from_parts(None, None, None, Some(6443)),
            Some(ClusterNetwork {
                pods: vec![],
                services: vec![],
                service_domain: None,
                api_server_port: Some(6443),
            })
        );
    }

    #[test]
    fn clamp_applies_only_when_enabled() {
        let on = Autoscaling {
            enabled: true,
            min: 2,
            max: 4,
        };
        assert_eq!([on.clamp(0), on.clamp(3), on.clamp(9)], [2, 3, 4]);
        assert_eq!(Autoscaling::default().clamp(9), 9);
    }

    #[test]
    fn common_inputs_follow_the_role() {
        let c = CommonInputs::new(
            Role::MachinePool,
            ClusterRef {
                name: "prod".into(),
                namespace: "ns".into(),
            },
            "pool",
            "ns",
            None,
        );
        assert_eq!(c.captf_object.kind, "TerraformMachinePool");
        let tags = c.captf_tags.to_map();
        assert_eq!(tags["captf.io/kind"], "TerraformMachinePool");
        assert_eq!(tags["captf.io/managed-by"], "captf");
        assert_eq!(tags["captf.io/template"], "");
        let back: Tags =
            serde_json::from_value(serde_json::to_value(&c.captf_tags).unwrap()).unwrap();
        assert_eq!(back, c.captf_tags);
    }
}
