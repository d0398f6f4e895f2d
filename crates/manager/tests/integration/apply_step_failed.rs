//! An apply that failed in its apply step with no state saved
//! (`internals.md` §4 scenario 16). While the first apply's apply step
//! runs (it holds the state lock and sleeps in a provisioner), the
//! object's runner Role loses `update` on Secrets, as when the apiserver refuses
//! the state write: `init` had created the backend's empty state, the apply
//! step creates the module's resources, and saving them fails. The runner reports a
//! failure in step `apply`; the state records nothing. The object is held
//! with `StateReadable=False/ApplyOutcomeUnknown` naming the Job: no second
//! apply (which would create everything again), and its deletion keeps the
//! finalizer. The operator's confirmation releases it: the apply runs
//! again (the role whole by then) and the object becomes Ready; deleted, it
//! goes. Controllers in this process, the real control plane, Cluster API's
//! controllers, the real node, the real runner and OpenTofu.

use crate::support;

use captf_api::TerraformCluster;
use captf_manager::names::{WorkloadKind, state_lock_lease, state_suffix};
use captf_testenv::{TestEnv, eventually};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role};
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::clusters::{condition, create_cluster_with_variables, with_slow_cluster_module};
use support::*;

/// Replaces the rules of the object's runner Role (`captf-runner-<suffix>`)
/// and returns those it had.
async fn set_runner_rules(
    ns: &captf_testenv::TestNamespace,
    rules: Option<Vec<PolicyRule>>,
) -> Option<Vec<PolicyRule>> {
    let name = captf_manager::rbac::object_runner_name(&state_suffix(
        WorkloadKind::Cluster,
        ns.name(),
        "prod",
    ));
    let roles = ns.api::<Role>();
    let mut role = roles.get(&name).await.unwrap();
    let had = std::mem::replace(&mut role.rules, rules);
    roles
        .replace(&name, &PostParams::default(), &role)
        .await
        .unwrap();
    had
}

/// The object's runner Role without `update` on Secrets; returns the
/// rules it had.
async fn refuse_state_writes(ns: &captf_testenv::TestNamespace) -> Option<Vec<PolicyRule>> {
    let name = captf_manager::rbac::object_runner_name(&state_suffix(
        WorkloadKind::Cluster,
        ns.name(),
        "prod",
    ));
    let role = ns.api::<Role>().get(&name).await.unwrap();
    let mut rules = role.rules.clone().unwrap_or_default();
    for rule in &mut rules {
        if rule.resources.iter().flatten().any(|r| r == "secrets") {
            rule.verbs.retain(|v| v != "update" && v != "patch");
        }
    }
    set_runner_rules(ns, Some(rules)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_step_that_saved_no_state_holds_until_the_operator_confirms() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let module = with_slow_cluster_module(env, &ns, tmp.path()).await;
    let _manager = start_manager(ns.client(), ns.name());
    let tcs = ns.api::<TerraformCluster>();
    let variables = json!({"noop_apply_seconds": 15, "noop_exports_extra": {"zone": "a"}});
    create_cluster_with_variables(&ns, "prod", &module, variables).await;

    // The apply step holds the lock and sleeps: the state write at its end
    // is refused from now on.
    let lock = state_lock_lease(&state_suffix(WorkloadKind::Cluster, ns.name(), "prod"));
    eventually("the apply step holding the lock", 120, || async {
        let lease = ns.api::<Lease>().get_opt(&lock).await.ok()??;
        let info = lease
            .metadata
            .annotations?
            .get("app.terraform.io/lock-info")?
            .clone();
        info.contains("OperationTypeApply").then_some(())
    })
    .await;
    let whole = refuse_state_writes(&ns).await;

    let held = eventually("prod held with ApplyOutcomeUnknown", 240, || async {
        let tc = tcs.get("prod").await.ok()?;
        (condition(&tc, "StateReadable") == Some(("False".into(), "ApplyOutcomeUnknown".into())))
            .then_some(tc)
    })
    .await;
    let first = apply_job_names(&ns).await;
    assert_eq!(first.len(), 1, "{first:?}");
    let readable = held
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "StateReadable").cloned())
        .unwrap();
    assert!(readable.message.contains(&first[0]), "{}", readable.message);
    let last_run = held.status.as_ref().unwrap().workspace.last_run.clone();
    let failed_step = last_run
        .and_then(|r| r.error)
        .and_then(|e| e.step)
        .unwrap_or_default();
    assert_eq!(failed_step, "apply", "the runner reports the failed step");

    // The role is whole again; the hold alone keeps the apply from running,
    // and a deletion keeps the finalizer.
    set_runner_rules(&ns, whole).await;
    tcs.delete("prod", &DeleteParams::default()).await.unwrap();
    let tc = support::clusters::deletion_held(&ns, "prod").await;
    assert!(!tc.finalizers().is_empty());
    assert_eq!(
        apply_job_names(&ns).await,
        first,
        "no second apply while held"
    );

    // Confirmed: the hold ends; with nothing recorded, the deletion's
    // destroy finds nothing and the object goes.
    tcs.patch(
        "prod",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
            "captf.io/confirm-no-resources": first[0]}}})),
    )
    .await
    .unwrap();
    eventually("prod gone after the confirmation", 240, || async {
        tcs.get_opt("prod")
            .await
            .ok()
            .and_then(|o| o.is_none().then_some(()))
    })
    .await;
}
