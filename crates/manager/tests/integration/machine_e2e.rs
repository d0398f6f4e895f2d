//! TerraformMachines driven by Cluster API's own controllers: control-plane
//! Machines and a MachineDeployment of workers on the noop machine module,
//! with the real runner and OpenTofu on the real node and the node agent
//! registering a Node per provider ID, so Cluster API's node matching runs.
//! Cluster API sets the owner references, the cluster-name labels, clones the
//! template per Machine, copies `spec.providerID` to the Machine and deletes
//! in order; the test writes only what a user would.

use crate::support;

use std::collections::BTreeMap;

use captf_api::{TerraformCluster, TerraformMachine};
use captf_manager::capi;
use captf_manager::names::WorkloadKind;
use captf_manager::records::{applied_record_name, attempt_record_name};
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::machines::{cluster, machine_pair, machine_spec, machines};
use support::webhooks::serve_our_webhooks;
use support::*;

fn dynamic(ns: &TestNamespace, ar: &kube::api::ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(ns.client(), ns.name(), ar)
}

fn capi_api(ns: &TestNamespace, kind: &str) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk(capi::GROUP, capi::VERSION, kind);
    dynamic(ns, &kube::api::ApiResource::from_gvk(&gvk))
}

fn machine_templates(ns: &TestNamespace) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk(
        "infrastructure.cluster.x-k8s.io",
        "v1alpha1",
        "TerraformMachineTemplate",
    );
    dynamic(ns, &kube::api::ApiResource::from_gvk(&gvk))
}

async fn create(api: &Api<DynamicObject>, obj: Value) -> DynamicObject {
    api.create(
        &PostParams::default(),
        &serde_json::from_value(obj).unwrap(),
    )
    .await
    .unwrap()
}

async fn setup(env: &'static TestEnv, ns: &TestNamespace, tmp: &std::path::Path) -> Manager {
    setup_with(env, ns, tmp, ns.client()).await
}

/// [`setup`] with the manager on `client` (a recording one, say).
async fn setup_with(
    env: &'static TestEnv,
    ns: &TestNamespace,
    tmp: &std::path::Path,
    client: kube::Client,
) -> Manager {
    env.cluster_api().await;
    serve_our_webhooks(env).await;
    insert_manager(env, ns.name()).await;
    for role in ["cluster", "machine"] {
        insert_module(
            env,
            &module_ref(role, ns.name()),
            module_image(tmp, role, "v1", &[]),
        )
        .await;
    }
    install_runner_role(&ns.client()).await;
    start_manager(client, ns.name())
}

async fn machine_template(ns: &TestNamespace, name: &str) {
    create(
        &machine_templates(ns),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachineTemplate",
            "metadata": {"name": name},
            "spec": {"template": {"spec": machine_spec(ns, json!({}))}},
        }),
    )
    .await;
}

fn condition<'a>(m: &'a TerraformMachine, type_: &str) -> Option<&'a str> {
    m.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.reason.as_str())
}

fn summary(m: &TerraformMachine) -> String {
    let conditions = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    format!(
        "{} id={:?} {conditions}",
        m.metadata.name.as_deref().unwrap_or_default(),
        m.spec.provider_id
    )
}

/// Waits until `count` TerraformMachines are provisioned and Ready, and
/// returns them by name.
async fn wait_provisioned(
    ns: &TestNamespace,
    count: usize,
    secs: u64,
    keep: impl Fn(&TerraformMachine) -> bool,
) -> BTreeMap<String, TerraformMachine> {
    let last = std::sync::Mutex::new(String::new());
    eventually(
        &format!("{count} Ready TerraformMachines"),
        secs,
        || async {
            let list = ns
                .api::<TerraformMachine>()
                .list(&ListParams::default())
                .await
                .ok()?;
            let mut seen: Vec<String> = list.items.iter().map(summary).collect();
            for m in machines(ns).list(&ListParams::default()).await.ok()? {
                let conditions: Vec<String> = m.data["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| c["status"] != "True")
                    .map(|c| {
                        format!(
                            "{}={}/{}: {}",
                            c["type"], c["status"], c["reason"], c["message"]
                        )
                    })
                    .collect();
                seen.push(format!(
                    "Machine {}: {conditions:?}",
                    m.metadata.name.unwrap_or_default()
                ));
            }
            let seen = seen.join("\n  ");
            let mut l = last.lock().unwrap();
            if *l != seen {
                eprintln!("machines:\n  {seen}");
                *l = seen;
            }
            let ready: BTreeMap<String, TerraformMachine> = list
                .items
                .into_iter()
                .filter(|m| keep(m) && m.metadata.deletion_timestamp.is_none())
                .filter(|m| condition(m, "Ready") == Some("Ready"))
                .map(|m| (m.metadata.name.clone().unwrap(), m))
                .collect();
            (ready.len() == count).then_some(ready)
        },
    )
    .await
}

/// The Machine owning `m`.
fn owner_machine(m: &TerraformMachine) -> String {
    m.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.kind == "Machine")
        .map(|r| r.name.clone())
        .expect("Cluster API owns the TerraformMachine by its Machine")
}

/// Apply Jobs per owner name.
async fn jobs_by_owner(ns: &TestNamespace) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for j in ns.api::<Job>().list(&ListParams::default()).await.unwrap() {
        let op = j
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("captf.infrastructure.cluster.x-k8s.io/op"))
            .cloned()
            .unwrap_or_default();
        let owner = j
            .metadata
            .owner_references
            .iter()
            .flatten()
            .next()
            .map(|r| format!("{}/{}", r.kind, r.name))
            .unwrap_or_default();
        out.entry(owner).or_default().push(op);
    }
    for ops in out.values_mut() {
        ops.sort();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_api_runs_a_control_plane_machine_and_a_machine_deployment() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let manager = setup(env, &ns, tmp.path()).await;
    cluster(&ns).await;
    // Scenario 3's bring-up: three control-plane machines and three workers.
    for cp in ["cp-0", "cp-1", "cp-2"] {
        machine_pair(&ns, cp, true, json!({})).await;
    }
    machine_template(&ns, "workers-v1").await;
    create(
        &capi_api(&ns, "MachineDeployment"),
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": "workers"},
            "spec": {
                "clusterName": "prod",
                "replicas": 3,
                "template": {"spec": {
                    "clusterName": "prod",
                    "bootstrap": {"dataSecretName": "machine-bootstrap"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachineTemplate", "name": "workers-v1"},
                    "version": "v1.37.2",
                }},
            },
        }),
    )
    .await;

    // Three machines, each provisioned once with its provider ID, addresses
    // and failure domain.
    let ready = wait_provisioned(&ns, 6, 300, |_| true).await;
    let prefix = format!("noop:///{}/", ns.name());
    for (name, m) in &ready {
        let owner = owner_machine(m);
        assert_eq!(
            m.spec.provider_id.as_deref(),
            Some(format!("{prefix}{owner}").as_str()),
            "{name}: the module's provider ID, from the Machine's name"
        );
        let status = m.status.as_ref().unwrap();
        let addresses: Vec<_> = status
            .addresses
            .iter()
            .flatten()
            .map(|a| a.address.clone())
            .collect();
        assert_eq!(addresses, ["10.0.0.1"], "{name}");
        assert_eq!(status.interruptible, Some(false), "{name}");
        assert_eq!(
            condition(m, "InputsApplied"),
            Some("InputsApplied"),
            "{name}"
        );
        assert_eq!(condition(m, "OutputsValid"), Some("OutputsValid"), "{name}");
    }
    let cp = &ready["cp-0"];
    assert_eq!(
        cp.status.as_ref().unwrap().failure_domain.as_deref(),
        Some("fd1")
    );

    // Cluster API copies each provider ID to its Machine and matches the
    // Node the agent registered for it.
    let nodes: Api<Node> = Api::all(ns.client());
    for m in ready.values() {
        let owner = owner_machine(m);
        let id = m.spec.provider_id.clone().unwrap();
        eventually(
            &format!("Machine {owner} matched to its Node"),
            120,
            || async {
                let machine = machines(&ns).get(&owner).await.ok()?;
                let node = machine.data["status"]["nodeRef"]["name"]
                    .as_str()?
                    .to_owned();
                let node = nodes.get(&node).await.ok()?;
                (machine.data["spec"]["providerID"] == json!(id)
                    && node.spec?.provider_id.as_deref() == Some(id.as_str())
                    && machine.data["status"]["phase"] == json!("Running"))
                .then_some(())
            },
        )
        .await;
    }

    // The control-plane machine's node initializes the control plane, whose
    // flag reaches the cluster's inputs: one more cluster apply. Scenario 3
    // of the bring-up Job count, 8 Jobs: every apply's own outputs were
    // definite, so no machine needed a refresh after it.
    eventually(
        "the TerraformCluster applied control_plane_initialized",
        120,
        || async {
            let jobs = jobs_by_owner(&ns).await;
            (jobs.get("TerraformCluster/prod")? == &["apply", "apply"]).then_some(())
        },
    )
    .await;
    let jobs = jobs_by_owner(&ns).await;
    let machine_jobs: Vec<&Vec<String>> = jobs
        .iter()
        .filter(|(owner, _)| owner.starts_with("TerraformMachine/"))
        .map(|(_, ops)| ops)
        .collect();
    assert_eq!(machine_jobs, vec![&vec!["apply".to_owned()]; 6], "{jobs:?}");
    assert_eq!(jobs.values().map(Vec::len).sum::<usize>(), 8, "{jobs:?}");

    // The machines' inputs are pinned at their first apply: a change of the
    // cluster's exports re-applies the cluster only.
    ns.api::<TerraformCluster>()
        .patch(
            "prod",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"variables": {"noop_exports_extra": {"zone": "b"}}}})),
        )
        .await
        .unwrap();
    eventually("the cluster exports zone b", 120, || async {
        let tc = ns.api::<TerraformCluster>().get("prod").await.ok()?;
        let exports = tc.status?.exports?;
        (exports["zone"] == json!("b")).then_some(())
    })
    .await;
    // A pass of each machine woken after the change starts nothing.
    for owner in jobs.keys() {
        if let Some(name) = owner.strip_prefix("TerraformMachine/") {
            support::touch::touch_state(
                &ns,
                &manager,
                WorkloadKind::Machine,
                name,
                std::time::Duration::ZERO,
            )
            .await;
        }
    }
    let after = jobs_by_owner(&ns).await;
    assert_eq!(
        after.get("TerraformCluster/prod").map(Vec::len),
        Some(3),
        "{after:?}"
    );
    for (owner, ops) in &after {
        if owner.starts_with("TerraformMachine/") {
            assert_eq!(ops, &["apply"], "{owner} applied once: {after:?}");
        }
    }

    // Immutable infrastructure: the spec's message.
    let tms = ns.api::<TerraformMachine>();
    let err = tms
        .patch(
            "cp-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"source": {"image": "example.com/other:v2"}}})),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "TerraformMachine spec.source is immutable; create a new TerraformMachine instead"
        ),
        "{err}"
    );
    // Deleting a TerraformMachine its live Machine still names is refused.
    let err = tms
        .delete("cp-0", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Machine cp-0 references this TerraformMachine; delete that Machine instead"),
        "{err}"
    );

    // A template change rolls new machines, which apply once each; the old
    // ones are destroyed.
    machine_template(&ns, "workers-v2").await;
    capi_api(&ns, "MachineDeployment")
        .patch(
            "workers",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"infrastructureRef": {"name": "workers-v2"}}}}})),
        )
        .await
        .unwrap();
    let cloned_from_v2 = |m: &TerraformMachine| {
        m.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("cluster.x-k8s.io/cloned-from-name"))
            .is_some_and(|n| n == "workers-v2")
    };
    // One machine at a time (maxSurge 1): three applies and three
    // destroys in turn, which under a loaded CI took over 300 s once.
    let rolled = wait_provisioned(&ns, 3, 480, cloned_from_v2).await;
    let old: Vec<String> = ready
        .keys()
        .filter(|n| !n.starts_with("cp-"))
        .cloned()
        .collect();
    eventually("the old workers destroyed and gone", 180, || async {
        let names: Vec<String> = tms
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter_map(|m| m.metadata.name)
            .collect();
        old.iter().all(|o| !names.contains(o)).then_some(())
    })
    .await;
    let jobs = jobs_by_owner(&ns).await;
    for name in rolled.keys() {
        assert_eq!(
            jobs.get(&format!("TerraformMachine/{name}")),
            Some(&vec!["apply".to_owned()]),
            "{jobs:?}"
        );
    }

    // Deleting a Machine destroys its machine's infrastructure first.
    machines(&ns)
        .delete("cp-0", &DeleteParams::default())
        .await
        .unwrap();
    eventually("cp-0 destroyed and gone", 180, || async {
        tms.get_opt("cp-0").await.ok()?.is_none().then_some(())
    })
    .await;
    let state = format!(
        "tfstate-default-{}",
        captf_manager::names::state_suffix(WorkloadKind::Machine, ns.name(), "cp-0")
    );
    assert!(ns.api::<Secret>().get_opt(&state).await.unwrap().is_none());
    assert!(
        ns.api::<Secret>()
            .get_opt(&applied_record_name(WorkloadKind::Machine, "cp-0"))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhealthy_machine_asks_for_remediation_at_the_threshold_and_not_before() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path()).await;
    cluster(&ns).await;
    // Each drift check is a health sample; the apply's own reading is the
    // first.
    machine_pair(
        &ns,
        "sick",
        false,
        json!({
            "variables": {"noop_health_state": "degraded"},
            "drift": {"intervalSeconds": 3},
            "remediation": {"annotateMachine": true, "unhealthyThreshold": 3},
        }),
    )
    .await;
    let tms = ns.api::<TerraformMachine>();
    let seen = std::sync::Mutex::new(Vec::new());
    let annotated = eventually("the Machine annotated for remediation", 240, || async {
        let m = tms.get("sick").await.ok()?;
        let count = m.status.as_ref().and_then(|s| s.unhealthy_samples);
        let machine = machines(&ns).get("sick").await.ok()?;
        let annotations = machine.metadata.annotations.clone().unwrap_or_default();
        let asked = annotations.contains_key("cluster.x-k8s.io/remediate-machine");
        let mut seen = seen.lock().unwrap();
        if seen.last() != Some(&(count, asked)) {
            seen.push((count, asked));
        }
        asked.then_some(annotations)
    })
    .await;
    let seen = seen.into_inner().unwrap();
    // The pass annotates the Machine before it writes its own status (status
    // last), so the reading that saw the annotation may hold the previous
    // count for a moment: wait for the status of that same pass.
    let count = eventually("the threshold sample in the status", 30, || async {
        let m = tms.get("sick").await.ok()?;
        let count = m.status.as_ref().and_then(|s| s.unhealthy_samples)?;
        (count >= 3).then_some(count)
    })
    .await;
    assert_eq!(count, 3, "annotated at the threshold: {seen:?}");
    assert_eq!(
        annotated
            .get("captf.io/remediation-requested")
            .map(String::as_str),
        Some("InstanceDegraded")
    );
    // Each reading takes the status before the Machine, and the annotation is
    // written before the status: a count of 2 read with no annotation after
    // it proves the second sample did not annotate.
    assert!(
        seen.contains(&(Some(2), false)),
        "the second sample asked for nothing: {seen:?}"
    );
    let note = expect_event(
        &ns,
        "RemediationRequested",
        "Warning",
        "TerraformMachine",
        "sick",
    )
    .await;
    assert!(
        note.contains("Machine sick annotated cluster.x-k8s.io/remediate-machine"),
        "{note}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_that_reads_pending_is_followed_by_one_refresh() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path()).await;
    cluster(&ns).await;
    // Scenario 3's other count: an apply whose outputs read pending gives
    // no definite health reading, so one refresh follows it (six machines:
    // 6 applies + 6 refreshes + the cluster's 2 = 14 Jobs).
    machine_pair(
        &ns,
        "slow",
        true,
        json!({"variables": {"noop_health_state": "pending"}}),
    )
    .await;
    let tms = ns.api::<TerraformMachine>();
    eventually("the refresh after the apply", 240, || async {
        let m = tms.get("slow").await.ok()?;
        m.status.as_ref()?.workspace.last_refresh.as_ref().map(drop)
    })
    .await;
    let jobs = jobs_by_owner(&ns).await;
    assert_eq!(
        jobs.get("TerraformMachine/slow"),
        Some(&vec!["apply".to_owned(), "refresh".to_owned()]),
        "{jobs:?}"
    );
    let m = tms.get("slow").await.unwrap();
    assert_eq!(
        condition(&m, "InfrastructureHealthy"),
        Some("Provisioning"),
        "{}",
        summary(&m)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_without_its_durable_inputs_runs_no_check() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let manager = setup(env, &ns, tmp.path()).await;
    cluster(&ns).await;
    machine_pair(&ns, "m-0", false, json!({"drift": {"intervalSeconds": 3}})).await;
    wait_provisioned(&ns, 1, 240, |_| true).await;
    // Scenario 26: the pinned inputs are gone, and a machine never renders
    // new ones, so no refresh or drift check can run.
    for record in [
        applied_record_name(WorkloadKind::Machine, "m-0"),
        attempt_record_name(WorkloadKind::Machine, "m-0"),
    ] {
        ns.api::<Secret>()
            .delete(&record, &DeleteParams::default())
            .await
            .unwrap();
    }
    let tms = ns.api::<TerraformMachine>();
    let m = eventually(
        "DriftJobSucceeded reads DurableInputsMissing",
        60,
        || async {
            let m = tms.get("m-0").await.ok()?;
            (condition(&m, "DriftJobSucceeded") == Some("DurableInputsMissing")).then_some(m)
        },
    )
    .await;
    let message = m
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "DriftJobSucceeded")
        .unwrap()
        .message;
    assert!(message.contains("captf-inputs-m-m-0"), "{message}");
    // The check stays due: a pass woken now finds it due and starts
    // nothing (the pass that wrote the condition did not either).
    let before = jobs_by_owner(&ns).await;
    support::touch::touch_state(
        &ns,
        &manager,
        WorkloadKind::Machine,
        "m-0",
        std::time::Duration::ZERO,
    )
    .await;
    assert_eq!(
        jobs_by_owner(&ns).await,
        before,
        "no Job starts without the durable inputs"
    );
    let m = tms.get("m-0").await.unwrap();
    assert_eq!(
        condition(&m, "Ready"),
        Some("Ready"),
        "a missing check never makes Ready false"
    );
}

/// A provisioned machine's pass with nothing due writes nothing: its status
/// holds every field the pass would write (a field the schema lacks, pruned
/// by the apiserver, would make every pass patch the status again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioned_machine_with_nothing_due_is_not_written() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let requests = support::requests::Requests::default();
    let manager = setup_with(env, &ns, tmp.path(), requests.client(env.config())).await;
    cluster(&ns).await;
    machine_pair(
        &ns,
        "steady",
        false,
        json!({"drift": {"intervalSeconds": 86400}}),
    )
    .await;
    wait_provisioned(&ns, 1, 240, |m| {
        m.status
            .as_ref()
            .is_some_and(|s| s.workspace.active_job.is_none())
    })
    .await;
    let set = expect_event(&ns, "ProviderIDSet", "Normal", "TerraformMachine", "steady").await;
    assert!(set.contains("noop://"), "{set}");
    eventually("the passes to stop", 120, || async {
        let before = manager.passes.snapshot();
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        (before == manager.passes.snapshot()).then_some(())
    })
    .await;

    let mark = requests.mark();
    let woken = support::touch::touch_state(
        &ns,
        &manager,
        WorkloadKind::Machine,
        "steady",
        std::time::Duration::from_secs(3),
    )
    .await;
    let sent = requests.since(mark);
    let key = format!("{}/{}/steady", WorkloadKind::Machine.kind(), ns.name());
    assert!(woken.contains_key(&key), "{woken:?}");
    assert!(
        !sent.iter().any(support::requests::Sent::is_write),
        "a provisioned machine's pass with nothing due wrote:\n{}",
        support::requests::tally(&sent)
    );
}
