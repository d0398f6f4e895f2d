//! Table tests of the pool's output and write-back plans.

use captf_api::TerraformMachinePool;
use captf_api::names::annotations;
use serde_json::{Value, json};

use super::*;
use crate::state::reader::StateSummary;

fn pool(ids: Value) -> TerraformMachinePool {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
        "metadata": {"name": "pool-a", "namespace": "ns"},
        "spec": {"source": {"image": "m:1"}, "providerIDList": ids},
    }))
    .unwrap()
}

/// A state whose outputs are `outputs` (name → value), applied with an
/// inputs hash.
fn state(outputs: Value) -> StateSummary {
    StateSummary::with_outputs(outputs, Some("h2:aa"))
}

fn outputs(ids: &[&str], health: &str) -> Value {
    json!({
        "provider_id": "noop-group:///ns/pool-a",
        "provider_id_list": ids,
        "replicas": ids.len(),
        "instances": ids.iter().map(|i| json!({"provider_id": i, "state": "running"})).collect::<Vec<_>>(),
        "health": {"state": health, "healthy": health == "running", "message": null, "reasons": []},
    })
}

#[test]
fn outputs_write_the_provider_ids_only_when_they_differ() {
    let cases = [
        (
            "first outputs",
            json!(null),
            &["noop:///b", "noop:///a"][..],
            true,
        ),
        (
            "the same, sorted",
            json!(["noop:///a", "noop:///b"]),
            &["noop:///b", "noop:///a"][..],
            false,
        ),
        (
            "one more",
            json!(["noop:///a"]),
            &["noop:///a", "noop:///b"][..],
            true,
        ),
    ];
    for (what, spec_ids, ids, patched) in cases {
        let mut obj = pool(spec_ids);
        obj.spec.provider_id = Some("noop-group:///ns/pool-a".into());
        let p = plan_pool_outputs(&obj, &state(outputs(ids, "running")), false);
        assert_eq!(p.spec_patch.is_some(), patched, "{what}");
        if let Some(patch) = &p.spec_patch {
            let list = patch["spec"]["providerIDList"].as_array().unwrap();
            let mut sorted = list.clone();
            sorted.sort_by_key(|v| v.as_str().unwrap().to_owned());
            assert_eq!(list, &sorted, "{what}: sorted");
        }
        assert_eq!(p.replicas, Some(ids.len() as i32), "{what}");
        assert_eq!(p.outputs_valid.status, "True", "{what}");
    }
}

#[test]
fn the_provisioned_latch_turns_on_once_health_is_past_pending() {
    let obj = pool(json!(null));
    let cases = [
        ("pending", false, false, false),
        ("running", false, true, true),
        ("running, latched", true, true, false),
        ("pending, latched stays", true, true, false),
    ];
    for (what, latched, provisioned, newly) in cases {
        let health = what.split(',').next().unwrap();
        let p = plan_pool_outputs(&obj, &state(outputs(&["noop:///a"], health)), latched);
        assert_eq!(
            (p.provisioned, p.newly_provisioned),
            (provisioned, newly),
            "{what}"
        );
    }
}

#[test]
fn more_instances_than_the_status_holds_are_cut_and_said_so() {
    let obj = pool(json!(null));
    let ids: Vec<String> = (0..1_001).map(|i| format!("noop:///{i:04}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let cases = [
        (1_000, "OutputsValid", 1_000),
        (1_001, "InstancesTruncated", 1_000),
    ];
    for (reported, reason, kept) in cases {
        let p = plan_pool_outputs(&obj, &state(outputs(&refs[..reported], "running")), false);
        assert_eq!(p.outputs_valid.status, "True", "{reported} instances");
        assert_eq!(p.outputs_valid.reason, reason, "{reported} instances");
        assert_eq!(p.instances.unwrap().unwrap().len(), kept, "{reported}");
        // The provider IDs are not cut: Cluster API matches every Node.
        let patch = p.spec_patch.unwrap();
        assert_eq!(
            patch["spec"]["providerIDList"].as_array().unwrap().len(),
            reported
        );
    }
}

#[test]
fn unwritable_outputs_write_nothing_and_say_why() {
    let p = plan_pool_outputs(
        &pool(json!(null)),
        &state(json!({"replicas": "many"})),
        false,
    );
    assert_eq!(p.outputs_valid.status, "False");
    assert_eq!((p.spec_patch, p.replicas), (None, None));
    assert!(!p.provisioned);
}

fn machine_pool(replicas: i32, ann: Value) -> MachinePool {
    MachinePool::from_dynamic(
        &serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": "pool-a", "namespace": "ns", "annotations": ann},
            "spec": {"clusterName": "prod", "replicas": replicas, "template": {"spec": {
                "clusterName": "prod", "bootstrap": {"dataSecretName": "b"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "TerraformMachinePool", "name": "pool-a"}}}},
        }))
        .unwrap(),
    )
    .unwrap()
}

#[test]
fn autoscaling_claims_the_count_and_writes_it_back_once() {
    let bounds = json!({
        annotations::AUTOSCALER_MIN_SIZE: "1",
        annotations::AUTOSCALER_MAX_SIZE: "5",
    });
    // Autoscaling turns on: the annotation is claimed.
    let p = plan_replicas(&machine_pool(2, bounds.clone()), Some(2));
    let patch = p.machine_pool_patch.unwrap();
    assert_eq!(
        patch["metadata"]["annotations"][annotations::REPLICAS_MANAGED_BY],
        annotations::REPLICAS_MANAGER
    );
    assert_eq!(p.condition.status, "True");
    // Claimed, and the module reports 4: written back.
    let mut claimed = bounds.clone();
    claimed[annotations::REPLICAS_MANAGED_BY] = json!(annotations::REPLICAS_MANAGER);
    let p = plan_replicas(&machine_pool(2, claimed.clone()), Some(4));
    assert_eq!(p.written_back, Some(4));
    assert_eq!(p.machine_pool_patch.unwrap()["spec"]["replicas"], 4);
    // Already 4: nothing to write.
    let p = plan_replicas(&machine_pool(4, claimed), Some(4));
    assert_eq!((p.machine_pool_patch, p.written_back), (None, None));
    // No autoscaler bounds: nothing claimed, nothing written.
    let p = plan_replicas(&machine_pool(2, json!({})), Some(2));
    assert_eq!(p.machine_pool_patch, None);
    assert_eq!(p.condition.status, "False");
}
