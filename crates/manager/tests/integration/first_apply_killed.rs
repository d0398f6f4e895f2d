//! A first apply killed without a result (`internals.md` §4 scenario 14,
//! through the OOM trigger): the node agent SIGKILLs every process of the
//! first apply's pod while OpenTofu holds the state lock, as the kernel's
//! OOM killer would. The state holds only the empty snapshot the backend
//! wrote at `init`; nothing says what the provider created. Every kind is
//! then held with `StateReadable=False/ApplyOutcomeUnknown` naming the
//! killed Job: no second apply, and a deleting pool keeps its finalizer. A
//! confirmation naming another Job is ignored; one naming the killed Job is
//! consumed and releases the object: a cluster applies again, a deleting
//! pool is destroyed (its next Job releasing the dead runner's lock) and
//! goes. Controllers in this process, the real control plane, Cluster API's
//! controllers owning the objects, the real node, the real runner and
//! OpenTofu.
//!
//! Cost: the hold adds no request to a pass; the kill's bookkeeping writes
//! the attempt record's mark once (one PATCH of the record Secret).

use crate::support;

use captf_api::{TerraformCluster, TerraformMachine, TerraformMachinePool};
use captf_manager::names::{WorkloadKind, state_lock_lease, state_suffix};
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use support::clusters::{SLOW_APPLY, create_cluster_with_variables, is_ready};
use support::pools::{Driver, bring_up_with, setup};
use support::*;

const CONFIRM: &str = "captf.io/confirm-no-resources";

/// A module file for the noop machine and machine-pool modules: a first
/// apply with `noop_apply_seconds` above zero sleeps that long under the
/// state lock, beside the module's own resources.
const SLOW_FIRST_APPLY: &str = r#"
variable "noop_apply_seconds" {
  type    = number
  default = 0
}

resource "terraform_data" "slow" {
  count = var.noop_apply_seconds > 0 ? 1 : 0
  provisioner "local-exec" {
    command = "sleep ${var.noop_apply_seconds}"
  }
}
"#;

/// The apply Jobs of one object.
async fn applies_of(ns: &TestNamespace, name: &str) -> Vec<String> {
    let selector = format!("captf.infrastructure.cluster.x-k8s.io/owner-name={name}");
    ns.api::<Job>()
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .iter()
        .filter(|j| job_op(j) == "apply")
        .filter_map(|j| j.metadata.name.clone())
        .collect()
}

/// Waits for the first apply of `name` to hold its state lock in the apply
/// step, kills every process of its pod, and returns the killed Job.
async fn kill_first_apply(ns: &TestNamespace, kind: WorkloadKind, name: &str) -> String {
    let lock = state_lock_lease(&state_suffix(kind, ns.name(), name));
    let leases = ns.api::<Lease>();
    let pod = eventually(&format!("{name}'s apply holding the lock"), 240, || async {
        let lease = leases.get_opt(&lock).await.ok()??;
        let info: Value = serde_json::from_str(
            lease
                .metadata
                .annotations?
                .get("app.terraform.io/lock-info")?,
        )
        .ok()?;
        (info["Operation"] == "OperationTypeApply")
            .then(|| info["Who"].as_str()?.rsplit('@').next().map(str::to_owned))
            .flatten()
    })
    .await;
    let killed = TestEnv::get()
        .await
        .real_node()
        .await
        .kill_pod(ns.name(), &pod);
    assert!(killed >= 2, "the runner and OpenTofu die, not {killed}");
    let job = pod.rsplit_once('-').unwrap().0.to_owned();
    assert_eq!(
        applies_of(ns, name).await,
        std::slice::from_ref(&job),
        "a first apply"
    );
    job
}

/// The object's `StateReadable` condition now: its reason and message.
async fn state_readable<K>(ns: &TestNamespace, name: &str) -> Option<(String, String)>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + DeserializeOwned
        + Clone
        + std::fmt::Debug
        + serde::Serialize,
{
    let obj = serde_json::to_value(ns.api::<K>().get(name).await.ok()?).ok()?;
    let readable = obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "StateReadable")?
        .clone();
    (readable["status"] == "False").then_some(())?;
    Some((
        readable["reason"].as_str()?.to_owned(),
        readable["message"].as_str()?.to_owned(),
    ))
}

/// Waits for the object to be held as `ApplyOutcomeUnknown`; returns the
/// condition's message.
async fn held<K>(ns: &TestNamespace, name: &str) -> String
where
    K: Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + DeserializeOwned
        + Clone
        + std::fmt::Debug
        + serde::Serialize,
{
    eventually(&format!("{name} held"), 180, || async {
        let (reason, message) = state_readable::<K>(ns, name).await?;
        (reason == "ApplyOutcomeUnknown").then_some(message)
    })
    .await
}

async fn annotate<K>(ns: &TestNamespace, name: &str, value: &str)
where
    K: Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    ns.api::<K>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {CONFIRM: value}}})),
        )
        .await
        .unwrap();
}

/// A TerraformMachine under the cluster `prod` whose first apply is slow,
/// and the Machine naming it, with the bootstrap data a bootstrap provider
/// would write.
async fn slow_machine(ns: &TestNamespace, name: &str) {
    let boot: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-boot"), "labels": {"cluster.x-k8s.io/cluster-name": "prod"}},
        "stringData": {"value": "#cloud-config\n", "format": "cloud-config"},
    }))
    .unwrap();
    ns.api::<Secret>()
        .create(&PostParams::default(), &boot)
        .await
        .unwrap();
    let tm: TerraformMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachine",
        "metadata": {"name": name},
        "spec": {"source": {"image": module_ref("machine", ns.name())},
                 "identityRef": {"kind": "Secret", "name": "creds"},
                 "variables": {"noop_apply_seconds": 600},
                 "drift": {"intervalSeconds": 0}},
    }))
    .unwrap();
    ns.api::<TerraformMachine>()
        .create(&PostParams::default(), &tm)
        .await
        .unwrap();
    let machines: Api<DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &captf_manager::capi::machine_resource(),
    );
    let m = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name},
        "spec": {"clusterName": "prod", "version": "v1.37.2",
                 "bootstrap": {"dataSecretName": format!("{name}-boot")},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachine", "name": name}},
    }))
    .unwrap();
    machines.create(&PostParams::default(), &m).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_apply_killed_without_a_result_holds_every_kind_until_confirmed() {
    let env = captf_testenv::TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), Driver::ClusterApi).await;
    // Every module of this namespace can be slowed down by its variables.
    insert_module(
        env,
        &module_ref("cluster", ns.name()),
        module_image(tmp.path(), "cluster", "slow", &[("slow.tf", SLOW_APPLY)]),
    )
    .await;
    for role in ["machinepool", "machine"] {
        insert_module(
            env,
            &module_ref(role, ns.name()),
            module_image(tmp.path(), role, "slow", &[("slow.tf", SLOW_FIRST_APPLY)]),
        )
        .await;
    }

    // `prod` applies at once; its pool's and machine's first applies sleep.
    bring_up_with(
        &ns,
        2,
        json!({}),
        json!({"variables": {"noop_apply_seconds": 600}}),
    )
    .await;
    slow_machine(&ns, "m-0").await;
    // A second cluster whose first apply sleeps.
    create_cluster_with_variables(
        &ns,
        "lost",
        &module_ref("cluster", ns.name()),
        json!({"noop_apply_seconds": 600, "noop_exports_extra": {"zone": "a"}}),
    )
    .await;

    let lost_cluster = kill_first_apply(&ns, WorkloadKind::Cluster, "lost").await;
    let lost_pool = kill_first_apply(&ns, WorkloadKind::MachinePool, "pool-a").await;
    let lost_machine = kill_first_apply(&ns, WorkloadKind::Machine, "m-0").await;

    // Each kind is held, naming its Job and how to release it.
    for (message, job) in [
        (held::<TerraformCluster>(&ns, "lost").await, &lost_cluster),
        (
            held::<TerraformMachinePool>(&ns, "pool-a").await,
            &lost_pool,
        ),
        (held::<TerraformMachine>(&ns, "m-0").await, &lost_machine),
    ] {
        assert!(message.contains(job.as_str()), "{message}");
        assert!(message.contains(CONFIRM), "{message}");
    }

    // A confirmation naming another Job is ignored, and the hold says so
    // (the pass that read it wrote that, and started nothing); nothing
    // applies again.
    let wrong_cluster = "captf-c-lost-apply-a9-000000";
    let wrong_pool = "captf-mp-pool-a-apply-a9-000000";
    annotate::<TerraformCluster>(&ns, "lost", wrong_cluster).await;
    annotate::<TerraformMachinePool>(&ns, "pool-a", wrong_pool).await;
    let ignored = |wrong: &str| format!("{CONFIRM} names {wrong:?}, not this Job, and is ignored");
    eventually("the wrong confirmations to be named", 120, || async {
        let (cluster_reason, cluster) = state_readable::<TerraformCluster>(&ns, "lost").await?;
        let (pool_reason, pool) = state_readable::<TerraformMachinePool>(&ns, "pool-a").await?;
        (cluster_reason == "ApplyOutcomeUnknown"
            && pool_reason == "ApplyOutcomeUnknown"
            && cluster.contains(&ignored(wrong_cluster))
            && pool.contains(&ignored(wrong_pool)))
        .then_some(())
    })
    .await;
    for (name, job) in [
        ("lost", &lost_cluster),
        ("pool-a", &lost_pool),
        ("m-0", &lost_machine),
    ] {
        assert_eq!(
            applies_of(&ns, name).await,
            std::slice::from_ref(job),
            "{name}"
        );
    }

    // A deleting pool keeps its finalizer while held.
    let machine_pools: Api<DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &captf_manager::capi::machine_pool_resource(),
    );
    machine_pools
        .delete("pool-a", &DeleteParams::default())
        .await
        .unwrap();
    let pools = ns.api::<TerraformMachinePool>();
    // The pass that saw the deletion says it waits (and started nothing).
    let p = eventually("the pool's deletion to wait on the hold", 120, || async {
        let p = pools.get("pool-a").await.ok()?;
        let deleting = p.status.as_ref()?.conditions.as_ref()?.iter().any(|c| {
            c.type_ == "Deleting"
                && c.message.contains(
                    "the deletion waits, keeping the finalizer: StateReadable=ApplyOutcomeUnknown",
                )
        });
        (p.metadata.deletion_timestamp.is_some() && deleting).then_some(p)
    })
    .await;
    assert!(
        p.finalizers()
            .iter()
            .any(|f| f.starts_with("terraformmachinepool.")),
        "the hold keeps the finalizer: {:?}",
        p.finalizers()
    );
    assert_eq!(
        applies_of(&ns, "pool-a").await,
        std::slice::from_ref(&lost_pool)
    );

    // The confirmation releases each: the pool is destroyed (its destroy
    // first releasing the dead runner's lock) and goes; the cluster, its
    // inputs made quick, applies again.
    annotate::<TerraformMachinePool>(&ns, "pool-a", &lost_pool).await;
    ns.api::<TerraformCluster>()
        .patch(
            "lost",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {CONFIRM: lost_cluster}},
                "spec": {"variables": {"noop_apply_seconds": 0}},
            })),
        )
        .await
        .unwrap();
    eventually("the pool gone", 240, || async {
        pools.get_opt("pool-a").await.ok()?.is_none().then_some(())
    })
    .await;
    let tcs = ns.api::<TerraformCluster>();
    let tc = eventually("lost applied after the confirmation", 240, || async {
        let tc = tcs.get("lost").await.ok()?;
        (is_ready(&tc) && !tc.annotations().contains_key(CONFIRM)).then_some(tc)
    })
    .await;
    assert!(
        tc.status
            .as_ref()
            .and_then(|s| s.workspace.observed_state_serial)
            .is_some_and(|s| s >= 1)
    );
    assert_eq!(applies_of(&ns, "lost").await.len(), 2, "one apply more");
    // Each released object's next Job freed the lock its dead runner left.
    let unlocked = event_notes(&ns, "ForceUnlocked").await;
    for name in ["pool-a", "lost"] {
        assert!(
            unlocked.iter().any(|n| n.contains(&format!("-{name}-"))),
            "{name}'s next Job released the dead runner's lock: {unlocked:?}"
        );
    }
    // The machine is still held: nobody confirmed it.
    let message = held::<TerraformMachine>(&ns, "m-0").await;
    assert!(message.contains(&lost_machine), "{message}");
}
