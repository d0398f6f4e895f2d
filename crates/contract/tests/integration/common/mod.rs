//! Fixed inputs shared by the integration tests: a minimal and a full set per
//! role.
#![allow(dead_code)]

use std::collections::BTreeMap;

use captf_contract::inputs::{
    Autoscaling, BootstrapData, BootstrapFormat, ClusterInputs, ClusterNetwork, ClusterRef,
    CommonInputs, Endpoint, MachineInputs, MachinePoolInputs,
};
use captf_contract::{Role, RoleInputs, UserVariables};
use serde_json::json;

pub const IMAGE: &str = "ghcr.io/captf-io/noop-machinepool:v0.1.0-opentofu";

/// The variants every role is rendered in.
pub const VARIANTS: [&str; 2] = ["minimal", "full"];

fn common(role: Role, name: &str, template: Option<&str>) -> CommonInputs {
    CommonInputs::new(
        role,
        ClusterRef {
            name: "prod".into(),
            namespace: "team-a".into(),
        },
        name,
        "team-a",
        template.map(str::to_owned),
    )
}

pub fn cluster_minimal() -> ClusterInputs {
    ClusterInputs {
        common: common(Role::Cluster, "prod", None),
        control_plane_endpoint: None,
        kubernetes_version: None,
        control_plane_initialized: false,
        cluster_network: Some(ClusterNetwork::default()),
    }
}

pub fn cluster_full() -> ClusterInputs {
    ClusterInputs {
        common: common(Role::Cluster, "prod", Some("prod-cluster-template")),
        control_plane_endpoint: Some(Endpoint {
            host: "api.prod.example.com".into(),
            port: 6443,
        }),
        kubernetes_version: Some("v1.33.4+rke2r1".into()),
        control_plane_initialized: true,
        cluster_network: Some(ClusterNetwork {
            pods: vec!["192.168.0.0/16".into()],
            services: vec!["10.96.0.0/12".into()],
            service_domain: Some("cluster.local".into()),
            api_server_port: Some(6443),
        }),
    }
}

pub fn machine_minimal() -> MachineInputs {
    MachineInputs {
        common: common(Role::Machine, "prod-md-0-abcde", None),
        captf_cluster_outputs: json!({}).into(),
        machine_name: "prod-md-0-abcde".into(),
        bootstrap_data: BootstrapData::from_bytes(b"{}"),
        bootstrap_format: BootstrapFormat::Ignition,
        failure_domain: None,
        kubernetes_version: None,
        control_plane: false,
    }
}

pub fn machine_full() -> MachineInputs {
    MachineInputs {
        common: common(Role::Machine, "prod-cp-x7k2p", Some("prod-control-plane")),
        // Module-authored bytes such as `<`, `>`, `&` stay as they are.
        captf_cluster_outputs: json!({
            "network_id": "net-1",
            "subnets": ["a", "b"],
            "backend_id": "noop-backend-<lb>&1",
            "ports": {"api": 6443}
        })
        .into(),
        machine_name: "prod-cp-x7k2p".into(),
        bootstrap_data: BootstrapData::from_bytes(b"#cloud-config"),
        bootstrap_format: BootstrapFormat::CloudConfig,
        failure_domain: Some("fd1".into()),
        kubernetes_version: Some("v1.36.2+rke2r1".into()),
        control_plane: true,
    }
}

pub fn pool_minimal() -> MachinePoolInputs {
    MachinePoolInputs {
        common: common(Role::MachinePool, "prod-pool-0", None),
        captf_cluster_outputs: json!({}).into(),
        machinepool_name: "prod-pool-0".into(),
        replicas: 0,
        bootstrap_data: BootstrapData::from_bytes(b"{}"),
        bootstrap_format: BootstrapFormat::Ignition,
        failure_domains: vec![],
        cluster_failure_domains: vec![],
        kubernetes_version: None,
        node_labels: BTreeMap::new(),
        autoscaling: Autoscaling::default(),
    }
}

pub fn pool_full() -> MachinePoolInputs {
    MachinePoolInputs {
        common: common(Role::MachinePool, "prod-pool-1", Some("prod-pool")),
        captf_cluster_outputs: json!({"backend_id": "noop-backend-smoke"}).into(),
        machinepool_name: "prod-pool-1".into(),
        replicas: 12,
        bootstrap_data: BootstrapData::from_bytes(b"#cloud-config\n"),
        bootstrap_format: BootstrapFormat::CloudConfig,
        failure_domains: vec!["fd1".into(), "fd2".into()],
        cluster_failure_domains: vec!["fd1".into(), "fd2".into(), "fd3".into()],
        kubernetes_version: Some("v1.34.1".into()),
        node_labels: BTreeMap::from([
            ("node-role.kubernetes.io/worker".into(), "".into()),
            ("tier".into(), "batch".into()),
        ]),
        autoscaling: Autoscaling {
            enabled: true,
            min: 2,
            max: 10,
        },
    }
}

/// The inputs of `role` in `variant`.
pub fn inputs(role: Role, variant: &str) -> RoleInputs {
    match (role, variant) {
        (Role::Cluster, "minimal") => cluster_minimal().into(),
        (Role::Cluster, "full") => cluster_full().into(),
        (Role::Machine, "minimal") => machine_minimal().into(),
        (Role::Machine, "full") => machine_full().into(),
        (Role::MachinePool, "minimal") => pool_minimal().into(),
        (Role::MachinePool, "full") => pool_full().into(),
        _ => panic!("unknown variant {variant}"),
    }
}

/// User variables of `variant`: none for minimal; for full, one from a Secret
/// and values of several types, as the noop modules declare them.
pub fn variables(role: Role, variant: &str) -> UserVariables {
    let mut vars = UserVariables::new();
    if variant == "full" {
        vars.insert(role, "noop_health_state", json!("running").into(), false)
            .unwrap();
        vars.insert(role, "noop_fail_apply", json!(false).into(), true)
            .unwrap();
        if role == Role::MachinePool {
            vars.insert(role, "noop_instance_state", json!("running").into(), false)
                .unwrap();
        }
    }
    vars
}

/// A validator for the schema of `role`/`direction`, with every embedded
/// schema registered (no retrieval: the definitions resolve locally).
pub fn validator(
    role: Role,
    direction: captf_contract::schemas::Direction,
) -> jsonschema::Validator {
    use captf_contract::schemas;
    let mut builder = jsonschema::Registry::new();
    for file in schemas::all() {
        let contents: serde_json::Value = serde_json::from_str(file.text).unwrap();
        builder = builder.add(file.id(), contents).unwrap();
    }
    let registry = builder.prepare().unwrap();
    let root: serde_json::Value =
        serde_json::from_str(schemas::schema(role, direction).text).unwrap();
    jsonschema::options()
        .with_registry(&registry)
        .build(&root)
        .unwrap_or_else(|e| panic!("schema {role} {}: {e}", direction.as_str()))
}

/// Instance paths of every schema violation in `instance`.
pub fn schema_errors(v: &jsonschema::Validator, instance: &serde_json::Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| e.instance_path().to_string())
        .collect()
}
