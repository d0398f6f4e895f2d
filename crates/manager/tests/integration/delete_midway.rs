//! Deleting a TerraformCluster in the middle of something (`internals.md`
//! §4 scenarios 21 and 22). Mid-apply: nothing new starts while the apply
//! runs, the finalizer and the run lease stay, the apply's result is
//! recorded and its inputs promoted, and only then does the destroy run,
//! from those inputs; the object and its run lease go once it succeeded.
//! While a plan awaits approval: the destroy runs without any approval,
//! the TerraformPlan is left to the garbage collector, and no
//! `PlanAwaitingApproval` remains. Controllers in this process, the real
//! control plane, Cluster API's controllers, the real node, the real
//! runner and OpenTofu.

use crate::support;

use captf_api::TerraformCluster;
use captf_api::plan::TerraformPlan;
use captf_manager::leases::run_lease_name;
use captf_manager::names::{WorkloadKind, state_suffix};
use captf_testenv::{TestEnv, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use support::clusters::{condition, create_cluster_with_variables, with_slow_cluster_module};
use support::*;

fn of_op<'a>(jobs: &'a [Job], op: &str) -> Vec<&'a Job> {
    jobs.iter().filter(|j| job_op(j) == op).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_deleted_mid_apply_finishes_the_apply_then_destroys_its_inputs() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let module = with_slow_cluster_module(env, &ns, tmp.path()).await;
    let _manager = start_manager(ns.client(), ns.name());
    let tcs = ns.api::<TerraformCluster>();
    let jobs = ns.api::<Job>();
    let leases = ns.api::<Lease>();
    let run_lease = run_lease_name(&state_suffix(WorkloadKind::Cluster, ns.name(), "prod"));

    create_cluster_with_variables(
        &ns,
        "prod",
        &module,
        json!({"noop_exports_extra": {"zone": "a"}, "noop_apply_seconds": 20}),
    )
    .await;
    let apply = eventually("the first apply running", 120, || async {
        let listed = jobs.list(&ListParams::default()).await.ok()?.items;
        let apply = of_op(&listed, "apply").first().cloned().cloned()?;
        (apply.status.as_ref()?.active.unwrap_or(0) > 0).then_some(apply)
    })
    .await;
    let apply_name = apply.metadata.name.clone().unwrap();
    tcs.delete("prod", &DeleteParams::default()).await.unwrap();

    // While it runs: the finalizer and the run lease hold, nothing else
    // starts.
    for _ in 0..5 {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let tc = tcs.get("prod").await.unwrap();
        let listed = jobs.list(&ListParams::default()).await.unwrap().items;
        let running = jobs.get(&apply_name).await.unwrap();
        if running.status.as_ref().and_then(|s| s.active).unwrap_or(0) == 0 {
            break;
        }
        assert!(tc.metadata.deletion_timestamp.is_some());
        assert!(!tc.finalizers().is_empty(), "the finalizer holds");
        assert_eq!(listed.len(), 1, "no Job starts beside the apply");
        let lease = leases.get(&run_lease).await.unwrap();
        assert_eq!(
            lease.spec.and_then(|s| s.holder_identity).as_deref(),
            Some(apply_name.as_str())
        );
    }

    // The destroy comes after the apply, from the apply's inputs.
    let destroy = eventually("the destroy Job", 240, || async {
        let listed = jobs.list(&ListParams::default()).await.ok()?.items;
        of_op(&listed, "destroy").first().cloned().cloned()
    })
    .await;
    let applied = jobs.get(&apply_name).await.unwrap();
    let finished = applied
        .status
        .as_ref()
        .and_then(|s| s.completion_time.clone())
        .expect("the apply completed")
        .0;
    assert_eq!(applied.status.as_ref().unwrap().succeeded, Some(1));
    assert!(destroy.metadata.creation_timestamp.clone().unwrap().0 >= finished);
    // The apply's inputs were promoted to the applied record, and the
    // destroy's per-run Secret holds exactly them.
    let secrets = ns.api::<Secret>();
    let destroy_name = destroy.metadata.name.clone().unwrap();
    let (record, run) = eventually(
        "the applied record and the destroy's inputs",
        60,
        || async {
            let record = secrets.get_opt("captf-applied-c-prod").await.ok()??;
            let run = secrets
                .get_opt(&format!("captf-run-{destroy_name}"))
                .await
                .ok()??;
            Some((record, run))
        },
    )
    .await;
    assert_eq!(
        record
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("captf.io/job"))
            .map(String::as_str),
        Some(apply_name.as_str())
    );
    let (record, run) = (record.data.unwrap(), run.data.unwrap());
    for file in ["main.tf.json", "terraform.tfvars.json"] {
        assert!(record.contains_key(file), "{file} on record");
        assert_eq!(
            record.get(file),
            run.get(file),
            "the destroy renders the applied {file}"
        );
    }
    eventually(
        "the TerraformCluster and its run lease gone",
        300,
        || async {
            let gone = tcs.get_opt("prod").await.ok()?.is_none();
            let lease_gone = leases.get_opt(&run_lease).await.ok()?.is_none();
            (gone && lease_gone).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_deleted_while_a_plan_awaits_approval_destroys_without_it() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    support::clusters::with_cluster_module(env, &ns, tmp.path()).await;
    let module = module_ref("cluster", ns.name());
    let _manager = start_manager(ns.client(), ns.name());
    let tcs = ns.api::<TerraformCluster>();
    let jobs = ns.api::<Job>();

    create_cluster_with_variables(
        &ns,
        "careful",
        &module,
        json!({"noop_exports_extra": {"zone": "a"}}),
    )
    .await;
    eventually("careful Ready", 240, || async {
        let tc = tcs.get("careful").await.ok()?;
        (condition(&tc, "Ready")?.0 == "True").then_some(())
    })
    .await;
    tcs.patch(
        "careful",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"applyPolicy": "Manual",
            "variables": {"noop_exports_extra": {"zone": "b"}}}})),
    )
    .await
    .unwrap();
    let plan_name = eventually("the plan awaiting approval", 240, || async {
        let tc = tcs.get("careful").await.ok()?;
        let waiting = condition(&tc, "ApplyJobSucceeded")
            == Some(("Unknown".into(), "PlanAwaitingApproval".into()));
        let name = tc.status?.pending_plan_ref?.name;
        waiting.then_some(name)
    })
    .await;
    let plans = ns.api::<TerraformPlan>();
    let before = plans.get(&plan_name).await.unwrap();
    let applies_before = of_op(
        &jobs.list(&ListParams::default()).await.unwrap().items,
        "apply",
    )
    .len();

    tcs.delete("careful", &DeleteParams::default())
        .await
        .unwrap();
    let destroy = eventually("a destroy, unapproved", 240, || async {
        let listed = jobs.list(&ListParams::default()).await.ok()?.items;
        of_op(&listed, "destroy").first().cloned().cloned()
    })
    .await;
    let args = job_args(&destroy);
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--expect-plan") || a.starts_with("--allow-deletes")),
        "{args:?}"
    );
    // The waiting plan was not approved, applied or changed by the
    // deletion, and no apply ran for it.
    let during = plans.get_opt(&plan_name).await.unwrap();
    if let Some(p) = &during {
        assert_eq!(p.spec, before.spec);
        assert_ne!(p.spec.approved, Some(true));
    }
    // The destroy's status write follows its Job (status last): the
    // condition stops naming the plan once it lands.
    eventually(
        "no plan waited for while the cluster is destroyed",
        60,
        || async {
            let Some(tc) = tcs.get_opt("careful").await.ok()? else {
                return Some(());
            };
            let reason = condition(&tc, "ApplyJobSucceeded").map(|c| c.1);
            (reason.as_deref() != Some("PlanAwaitingApproval")).then_some(())
        },
    )
    .await;
    assert_eq!(
        of_op(
            &jobs.list(&ListParams::default()).await.unwrap().items,
            "apply"
        )
        .len(),
        applies_before
    );
    let owners = before.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owners
            .iter()
            .any(|o| o.kind == "TerraformCluster" && o.name == "careful"),
        "the plan goes with its cluster: {owners:?}"
    );
    eventually("the TerraformCluster gone", 300, || async {
        tcs.get_opt("careful").await.ok()?.is_none().then_some(())
    })
    .await;
}
