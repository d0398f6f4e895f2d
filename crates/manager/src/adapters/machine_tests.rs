use super::*;
use captf_contract::health::HealthState;
use captf_contract::outputs::{Address, AddressType};
use serde_json::json;

fn meta(value: Value) -> ObjectMeta {
    serde_json::from_value(value).unwrap()
}

/// What, the object, its Machine and Cluster, and the reason expected.
type OwnerCase<'a> = (
    &'a str,
    &'a ObjectMeta,
    Option<&'a Machine>,
    Option<&'a Cluster>,
    Option<&'a str>,
);
/// What, the reason and count before, provider ID missing, the health, and
/// the reason and count after.
type SampleCase<'a> = (
    &'a str,
    Option<&'a str>,
    Option<i32>,
    bool,
    Option<&'a Health>,
    &'a str,
    Option<i32>,
);
/// What, the policy, the health reason, the count, the Machine, and what
/// is expected.
type RemediationCase<'a> = (
    &'a str,
    &'a EffectiveRemediation,
    &'a str,
    Option<i32>,
    &'a Machine,
    Option<(&'a str, &'a str)>,
);

fn tm_meta() -> ObjectMeta {
    meta(json!({
        "name": "cp-0", "namespace": "team-a",
        "labels": {"cluster.x-k8s.io/cluster-name": "prod"},
        "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": "m-cp-0", "uid": "uid-m"}],
    }))
}

fn machine() -> Machine {
    serde_json::from_value(json!({
        "metadata": {"name": "m-cp-0", "namespace": "team-a", "uid": "uid-m",
                     "labels": {"cluster.x-k8s.io/control-plane": ""}},
        "spec": {
            "clusterName": "prod",
            "bootstrap": {"dataSecretName": "m-cp-0-bootstrap"},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachine", "name": "cp-0"},
            "version": "v1.36.2+rke2r1",
            "failureDomain": "zone-a",
        },
    }))
    .unwrap()
}

fn cluster(provisioned: bool) -> Cluster {
    serde_json::from_value(json!({
        "metadata": {"name": "prod", "namespace": "team-a", "uid": "uid-prod"},
        "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": "prod"}},
        "status": {"initialization": {"infrastructureProvisioned": provisioned}},
    }))
    .unwrap()
}

#[test]
fn owner_table() {
    let with = |f: &dyn Fn(&mut ObjectMeta)| {
        let mut m = tm_meta();
        f(&mut m);
        m
    };
    let other_machine = |f: &dyn Fn(&mut Machine)| {
        let mut m = machine();
        f(&mut m);
        m
    };
    let kcp_only = with(&|m| {
        m.owner_references.as_mut().unwrap()[0].kind = "KubeadmControlPlane".into();
        m.owner_references.as_mut().unwrap()[0].api_version =
            "controlplane.cluster.x-k8s.io/v1beta2".into();
    });
    let unowned = with(&|m| m.owner_references = None);
    let unlabeled = with(&|m| m.labels = None);
    let renamed = other_machine(&|m| m.spec.infrastructure_ref.name = "cp-1".into());
    let other_uid = other_machine(&|m| m.metadata.uid = Some("uid-other".into()));
    let other_cluster = other_machine(&|m| m.spec.cluster_name = "staging".into());
    let mut not_terraform = cluster(true);
    not_terraform.spec.infrastructure_ref.as_mut().unwrap().kind = "DockerCluster".into();
    let (m, c, tm) = (machine(), cluster(true), tm_meta());
    let cases: Vec<OwnerCase<'_>> = vec![
        ("owned and named back", &tm, Some(&m), Some(&c), None),
        (
            "no owner yet",
            &unowned,
            None,
            None,
            Some(reasons::WAITING_FOR_OWNER),
        ),
        (
            "a control plane owns it first",
            &kcp_only,
            None,
            None,
            Some(reasons::WAITING_FOR_OWNER_MACHINE),
        ),
        (
            "the Machine is gone",
            &tm,
            None,
            Some(&c),
            Some(reasons::OWNER_NOT_FOUND),
        ),
        (
            "the Machine names another object",
            &tm,
            Some(&renamed),
            Some(&c),
            Some(reasons::OWNER_MISMATCH),
        ),
        (
            "the ownerRef UID is another Machine's",
            &tm,
            Some(&other_uid),
            Some(&c),
            Some(reasons::OWNER_MISMATCH),
        ),
        (
            "the Machine is another cluster's",
            &tm,
            Some(&other_cluster),
            Some(&c),
            Some(reasons::OWNER_MISMATCH),
        ),
        (
            "no cluster-name label",
            &unlabeled,
            Some(&m),
            Some(&c),
            Some(reasons::WAITING_FOR_OWNER),
        ),
        (
            "the Cluster is gone",
            &tm,
            Some(&m),
            None,
            Some(reasons::OWNER_NOT_FOUND),
        ),
        (
            "the Cluster's infrastructure is not ours",
            &tm,
            Some(&m),
            Some(&not_terraform),
            Some(reasons::CLUSTER_NOT_TERRAFORM),
        ),
    ];
    for (what, object, machine, cluster, reason) in cases {
        let d = owner(object, machine, cluster);
        assert_eq!(d.condition.as_ref().map(|c| c.reason), reason, "{what}");
    }
}

fn tc(managed_by: bool) -> TerraformCluster {
    let mut tc: TerraformCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformCluster",
        "metadata": {"name": "prod", "namespace": "team-a"},
        "spec": {"source": {"image": "ghcr.io/captf-io/noop-cluster:v1"}, "identityRef": {"kind": "Secret", "name": "creds"}},
    }))
    .unwrap();
    if managed_by {
        tc.metadata.annotations =
            Some([(annotations::MANAGED_BY.to_owned(), "x".to_owned())].into());
    }
    tc
}

#[test]
fn gates_table() {
    let outputs: captf_contract::outputs::ClusterOutputs =
        captf_contract::outputs::ClusterOutputs {
            control_plane_endpoint: None,
            failure_domains: vec![],
            exports: json!({"network_id": "net-1"}).into(),
            exports_hash: "h2:x".into(),
            published_exports: None,
            health: Health::running_healthy(),
        };
    let secret = BootstrapSecret {
        value: Some(b"#cloud-config\n".to_vec()),
        format: Some("ignition".into()),
    };
    let no_value = BootstrapSecret {
        value: None,
        format: None,
    };
    let mut no_secret_name = machine();
    no_secret_name.spec.bootstrap.data_secret_name = None;
    let (m, ours, external) = (machine(), tc(false), tc(true));
    let (up, down) = (cluster(true), cluster(false));
    let readable = ClusterState::Outputs(&outputs);
    let unreadable = ClusterState::Unreadable("the TerraformCluster's state cannot be read");
    let cases: Vec<(&str, GateInput<'_>, Result<Value, &str>)> = vec![
        (
            "everything there",
            GateInput {
                cluster: &up,
                terraform_cluster: Some(&ours),
                cluster_state: readable,
                machine: &m,
                bootstrap_secret: Some(&secret),
            },
            Ok(json!({"network_id": "net-1"})),
        ),
        (
            "the Cluster's infrastructure is not provisioned",
            GateInput {
                cluster: &down,
                terraform_cluster: Some(&ours),
                cluster_state: readable,
                machine: &m,
                bootstrap_secret: Some(&secret),
            },
            Err(reasons::WAITING_FOR_CLUSTER_INFRASTRUCTURE),
        ),
        (
            "no TerraformCluster",
            GateInput {
                cluster: &up,
                terraform_cluster: None,
                cluster_state: readable,
                machine: &m,
                bootstrap_secret: Some(&secret),
            },
            Err(reasons::WAITING_FOR_CLUSTER_INFRASTRUCTURE),
        ),
        (
            "exports unreadable",
            GateInput {
                cluster: &up,
                terraform_cluster: Some(&ours),
                cluster_state: unreadable,
                machine: &m,
                bootstrap_secret: Some(&secret),
            },
            Err(reasons::WAITING_FOR_CLUSTER_EXPORTS),
        ),
        (
            "externally managed cluster: empty exports",
            GateInput {
                cluster: &up,
                terraform_cluster: Some(&external),
                cluster_state: unreadable,
                machine: &m,
                bootstrap_secret: Some(&secret),
            },
            Ok(json!({})),
        ),
        (
            "no bootstrap Secret named yet",
            GateInput {
                cluster: &up,
                terraform_cluster: Some(&ours),
                cluster_state: readable,
                machine: &no_secret_name,
                bootstrap_secret: Some(&secret),
            },
            Err(reasons::WAITING_FOR_BOOTSTRAP_DATA),
        ),
        (
            "bootstrap Secret not found",
            GateInput {
                cluster: &up,
                terraform_cluster: Some(&ours),
                cluster_state: readable,
                machine: &m,
                bootstrap_secret: None,
            },
            Err(reasons::WAITING_FOR_BOOTSTRAP_DATA),
        ),
        (
            "bootstrap Secret without value",
            GateInput {
                cluster: &up,
                terraform_cluster: Some(&ours),
                cluster_state: readable,
                machine: &m,
                bootstrap_secret: Some(&no_value),
            },
            Err(reasons::WAITING_FOR_BOOTSTRAP_DATA),
        ),
    ];
    for (what, input, want) in cases {
        let got = gates(&input)
            .map(|d| d.exports.to_value())
            .map_err(|c| c.reason);
        assert_eq!(got, want, "{what}");
    }
    let d = gates(&GateInput {
        cluster: &up,
        terraform_cluster: Some(&ours),
        cluster_state: readable,
        machine: &m,
        bootstrap_secret: Some(&secret),
    })
    .unwrap();
    assert_eq!(d.bootstrap_format, BootstrapFormat::Ignition);
    assert_eq!(d.bootstrap_data.as_base64(), "I2Nsb3VkLWNvbmZpZwo=");
}

#[test]
fn inputs_come_from_the_machine() {
    let deps = Dependencies {
        exports: json!({"network_id": "net-1"}).into(),
        bootstrap_data: BootstrapData::from_bytes(b"x"),
        bootstrap_format: BootstrapFormat::CloudConfig,
    };
    let i = inputs(&tm_meta(), &machine(), &cluster(true), &deps);
    assert_eq!(
        i.machine_name, "m-cp-0",
        "the Machine's name, not the object's"
    );
    assert_eq!(i.failure_domain.as_deref(), Some("zone-a"));
    assert_eq!(
        i.kubernetes_version.as_deref(),
        Some("v1.36.2+rke2r1"),
        "verbatim"
    );
    assert!(i.control_plane, "the label's presence is enough");
    let mut worker = machine();
    worker.metadata.labels = None;
    worker.spec.failure_domain = Some(String::new());
    let i = inputs(&tm_meta(), &worker, &cluster(true), &deps);
    assert!(!i.control_plane);
    assert_eq!(i.failure_domain, None, "an empty failure domain is none");
}

fn outputs(state: HealthState) -> MachineOutputs {
    MachineOutputs {
        provider_id: "noop:///team-a/m-cp-0".into(),
        addresses: vec![
            Address {
                kind: AddressType::InternalIP,
                address: "10.0.0.1".into(),
            },
            Address {
                kind: AddressType::Hostname,
                address: "cp-0".into(),
            },
        ],
        failure_domain: Some("zone-a".into()),
        interruptible: false,
        health: Health {
            state,
            healthy: true,
            message: None,
            reasons: vec![],
        },
    }
}

#[test]
fn writes_and_the_provisioned_rule() {
    let w = writes(&outputs(HealthState::Running));
    let types: Vec<_> = w
        .addresses
        .unwrap()
        .iter()
        .map(|a| a.address.clone())
        .collect();
    assert_eq!(types, ["10.0.0.1", "cp-0"]);
    let mut none = outputs(HealthState::Running);
    none.addresses.clear();
    assert_eq!(
        writes(&none).addresses,
        None,
        "an empty list clears the field"
    );
    let running = outputs(HealthState::Running);
    let pending = outputs(HealthState::Pending);
    let cases = [
        ("latched stays", true, false, None, true),
        ("applied and running", false, true, Some(&running), true),
        ("applied but pending", false, true, Some(&pending), false),
        ("no successful apply", false, false, Some(&running), false),
        ("outputs not valid", false, true, None, false),
    ];
    for (what, latched, applied, o, want) in cases {
        assert_eq!(provisioned(latched, applied, o), want, "{what}");
    }
}

fn health(state: HealthState, healthy: bool) -> Health {
    Health {
        state,
        healthy,
        message: None,
        reasons: vec![],
    }
}

#[test]
fn samples_table() {
    let running = health(HealthState::Running, true);
    let unhealthy = health(HealthState::Running, false);
    let degraded = health(HealthState::Degraded, false);
    let pending = health(HealthState::Pending, false);
    let terminated = health(HealthState::Terminated, false);
    let cases: Vec<SampleCase<'_>> = vec![
        (
            "healthy resets",
            Some(reasons::INSTANCE_UNHEALTHY),
            Some(2),
            false,
            Some(&running),
            reasons::HEALTHY,
            None,
        ),
        (
            "unhealthy counts from nothing",
            Some(reasons::HEALTHY),
            None,
            false,
            Some(&unhealthy),
            reasons::INSTANCE_UNHEALTHY,
            Some(1),
        ),
        (
            "degraded counts on",
            None,
            Some(2),
            false,
            Some(&degraded),
            reasons::INSTANCE_DEGRADED,
            Some(3),
        ),
        (
            "pending leaves the count",
            None,
            Some(2),
            false,
            Some(&pending),
            reasons::INSTANCE_PENDING,
            Some(2),
        ),
        (
            "unknown leaves the count",
            None,
            Some(1),
            false,
            None,
            reasons::HEALTH_UNKNOWN,
            Some(1),
        ),
        (
            "terminated leaves the count",
            None,
            Some(1),
            false,
            Some(&terminated),
            reasons::INSTANCE_TERMINATED,
            Some(1),
        ),
        (
            "a first missing provider ID",
            Some(reasons::HEALTHY),
            None,
            true,
            Some(&running),
            reasons::PROVIDER_ID_MISSING,
            None,
        ),
        (
            "a second missing provider ID",
            Some(reasons::PROVIDER_ID_MISSING),
            None,
            true,
            Some(&running),
            reasons::INSTANCE_TERMINATED,
            None,
        ),
        (
            "still missing stays terminated",
            Some(reasons::INSTANCE_TERMINATED),
            None,
            true,
            Some(&running),
            reasons::INSTANCE_TERMINATED,
            None,
        ),
    ];
    for (what, previous_reason, previous_count, provider_id_missing, health, reason, count) in cases
    {
        let s = sample(&Sample {
            previous_reason,
            previous_count,
            provider_id_missing,
            health,
        });
        assert_eq!(
            (s.condition.reason, s.unhealthy_samples),
            (reason, count),
            "{what}"
        );
    }
}

#[test]
fn remediation_table() {
    let on = EffectiveRemediation {
        annotate_machine: true,
        unhealthy_threshold: 3,
        health_check_interval_seconds: 300,
    };
    let off = EffectiveRemediation {
        annotate_machine: false,
        ..on
    };
    let plain = machine();
    let annotate = |pairs: &[(&str, &str)]| {
        let mut m = machine();
        m.metadata.annotations = Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        m
    };
    let ours = annotate(&[
        (annotations::REMEDIATE_MACHINE, ""),
        (
            annotations::REMEDIATION_REQUESTED,
            reasons::INSTANCE_UNHEALTHY,
        ),
    ]);
    let theirs = annotate(&[(annotations::REMEDIATE_MACHINE, "")]);
    let mut ours_deleting = ours.clone();
    ours_deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
    );
    let request = |r| Some(("request", r));
    let cases: Vec<RemediationCase<'_>> = vec![
        (
            "below the threshold",
            &on,
            reasons::INSTANCE_UNHEALTHY,
            Some(2),
            &plain,
            None,
        ),
        (
            "at the threshold",
            &on,
            reasons::INSTANCE_UNHEALTHY,
            Some(3),
            &plain,
            request(reasons::INSTANCE_UNHEALTHY),
        ),
        (
            "terminated at once",
            &on,
            reasons::INSTANCE_TERMINATED,
            None,
            &plain,
            request(reasons::INSTANCE_TERMINATED),
        ),
        (
            "off: never",
            &off,
            reasons::INSTANCE_UNHEALTHY,
            Some(9),
            &plain,
            None,
        ),
        (
            "already requested",
            &on,
            reasons::INSTANCE_UNHEALTHY,
            Some(4),
            &ours,
            None,
        ),
        (
            "healthy again withdraws ours",
            &on,
            reasons::HEALTHY,
            None,
            &ours,
            Some(("withdraw", "")),
        ),
        (
            "healthy again withdraws ours even when off",
            &off,
            reasons::HEALTHY,
            None,
            &ours,
            Some(("withdraw", "")),
        ),
        (
            "someone else's annotation stays",
            &on,
            reasons::HEALTHY,
            None,
            &theirs,
            None,
        ),
        (
            "a deleting Machine keeps it",
            &on,
            reasons::HEALTHY,
            None,
            &ours_deleting,
            None,
        ),
        (
            "pending neither requests nor withdraws",
            &on,
            reasons::INSTANCE_PENDING,
            Some(3),
            &ours,
            None,
        ),
    ];
    for (what, policy, reason, count, m, want) in cases {
        let got = remediation(policy, reason, count, m).map(|r| match r {
            Remediation::Request { reason, .. } => ("request", reason),
            Remediation::Withdraw { .. } => ("withdraw", ""),
        });
        assert_eq!(got, want, "{what}");
    }
    let Some(Remediation::Request { patch, .. }) =
        remediation(&on, reasons::INSTANCE_DEGRADED, Some(3), &plain)
    else {
        panic!("a request");
    };
    assert_eq!(
        patch["metadata"]["annotations"],
        json!({annotations::REMEDIATE_MACHINE: "", annotations::REMEDIATION_REQUESTED: reasons::INSTANCE_DEGRADED})
    );
}
