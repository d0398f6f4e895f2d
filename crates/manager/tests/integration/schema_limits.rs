//! The limits the CRDs declare, as the real apiserver enforces them: each
//! one accepted at its bound and refused one past it, naming the field
//! (so a limit that is missing, or tighter than declared, fails). Every
//! write is a dry run on one pool and one machine no controller watches.

use captf_api::{TerraformMachine, TerraformMachinePool};
use captf_testenv::{TestEnv, TestNamespace};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// Where a limit is written: the object's spec (a dry-run merge patch of
/// the object) or its status (of the status subresource).
#[derive(Clone, Copy, Debug)]
enum Part {
    Spec,
    Status,
}

async fn dry_patch<K>(api: &Api<K>, name: &str, part: Part, patch: &Value) -> Result<(), String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let answer = match part {
        Part::Spec => api.patch(name, &params, &Patch::Merge(patch)).await,
        Part::Status => api.patch_status(name, &params, &Patch::Merge(patch)).await,
    };
    match answer {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 422 => Err(s.message),
        Err(e) => panic!("patching {name}: {e}"),
    }
}

fn conditions(n: usize) -> Value {
    (0..n)
        .map(|i| {
            json!({"type": format!("Condition{i}"), "status": "True", "reason": "Set",
                   "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"})
        })
        .collect()
}

fn instances(n: usize, state: &str) -> Value {
    (0..n)
        .map(|i| json!({"providerID": format!("noop:///i-{i}"), "state": state}))
        .collect()
}

fn provider_ids(n: usize) -> Value {
    (0..n).map(|i| format!("noop:///i-{i:05}")).collect()
}

async fn create_objects(ns: &TestNamespace) {
    let post = PostParams::default();
    let pool: TerraformMachinePool = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
        "metadata": {"name": "limits"},
        "spec": {"source": {"image": "registry.example/pool:v1"}},
    }))
    .unwrap();
    ns.api::<TerraformMachinePool>()
        .create(&post, &pool)
        .await
        .unwrap();
    let machine: TerraformMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachine",
        "metadata": {"name": "limits"},
        "spec": {"source": {"image": "registry.example/machine:v1"}},
    }))
    .unwrap();
    ns.api::<TerraformMachine>()
        .create(&post, &machine)
        .await
        .unwrap();
}

#[tokio::test]
async fn each_declared_limit_holds_at_the_apiserver_one_past_its_bound() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    create_objects(&ns).await;
    let pools = ns.api::<TerraformMachinePool>();
    let machines = ns.api::<TerraformMachine>();
    let long = |n: usize| format!("noop:///{}", "x".repeat(n - 8));

    // (what, the pool's or the machine's, where, within, past, field named)
    let cases: Vec<(&str, bool, Part, Value, Value, &str)> = vec![
        (
            "a machine's providerID: 512 characters",
            false,
            Part::Spec,
            json!({"spec": {"providerID": long(512)}}),
            json!({"spec": {"providerID": long(513)}}),
            "spec.providerID",
        ),
        (
            "a pool's providerIDList: 10,000 entries",
            true,
            Part::Spec,
            json!({"spec": {"providerIDList": provider_ids(10_000)}}),
            json!({"spec": {"providerIDList": provider_ids(10_001)}}),
            "spec.providerIDList",
        ),
        (
            "a pool's membership interval: at most 86,400 s",
            true,
            Part::Spec,
            json!({"spec": {"membershipRefreshIntervalSeconds": 86_400}}),
            json!({"spec": {"membershipRefreshIntervalSeconds": 86_401}}),
            "spec.membershipRefreshIntervalSeconds",
        ),
        (
            "a pool's membership interval: at least 15 s",
            true,
            Part::Spec,
            json!({"spec": {"membershipRefreshIntervalSeconds": 15}}),
            json!({"spec": {"membershipRefreshIntervalSeconds": 14}}),
            "spec.membershipRefreshIntervalSeconds",
        ),
        (
            "a pool's status.instances: 1,000 entries",
            true,
            Part::Status,
            json!({"status": {"instances": instances(1_000, "running")}}),
            json!({"status": {"instances": instances(1_001, "running")}}),
            "status.instances",
        ),
        (
            "an instance's state: one of the enum",
            true,
            Part::Status,
            json!({"status": {"instances": instances(1, "degraded")}}),
            json!({"status": {"instances": instances(1, "exploded")}}),
            "status.instances[0].state",
        ),
        (
            "a pool's status.conditions: 32 entries",
            true,
            Part::Status,
            json!({"status": {"conditions": conditions(32)}}),
            json!({"status": {"conditions": conditions(33)}}),
            "status.conditions",
        ),
        (
            "a machine's status.conditions: 32 entries",
            false,
            Part::Status,
            json!({"status": {"conditions": conditions(32)}}),
            json!({"status": {"conditions": conditions(33)}}),
            "status.conditions",
        ),
    ];
    let mut wrong = Vec::new();
    for (what, pool, part, within, past, field) in cases {
        let write = |patch: Value| {
            let (pools, machines) = (pools.clone(), machines.clone());
            async move {
                if pool {
                    dry_patch(&pools, "limits", part, &patch).await
                } else {
                    dry_patch(&machines, "limits", part, &patch).await
                }
            }
        };
        if let Err(message) = write(within).await {
            wrong.push(format!("{what}: at the bound refused: {message}"));
        }
        match write(past).await {
            Ok(()) => wrong.push(format!("{what}: past the bound accepted")),
            Err(message) if !message.contains(field) => {
                wrong.push(format!("{what}: refused without naming {field}: {message}"))
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
