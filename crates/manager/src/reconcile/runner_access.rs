//! The ServiceAccount an object's Jobs run as: the operator's own, checked
//! for consent, or the object's runner identity, applied at most once per
//! sync period.

use captf_api::effective::EffectiveJobPolicy;
use captf_api::names::reasons;
use kube::ResourceExt;

use super::Context;
use super::workload::Workload;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::io::runner_rbac::ensure_object_runner;

/// The ServiceAccount `obj`'s Jobs run as: the operator's own
/// (`jobs.serviceAccountName`, which must exist and carry
/// `captf.io/runner=true`), or the object's runner identity
/// (`rbac::ObjectRunner`). Either is checked or applied at most once per
/// sync period, so a converged pass writes nothing. `Err` is the
/// `RunnerRBACReady=False` condition that keeps Jobs from starting.
pub(super) async fn ensure_runner<K: Workload>(
    ctx: &Context,
    obj: &K,
    jobs: &EffectiveJobPolicy,
) -> Result<String, ConditionValue> {
    let namespace = obj.namespace().unwrap_or_default();
    let (key, account) = match &jobs.service_account_name {
        Some(own) => (format!("{namespace}/own:{own}"), own.clone()),
        None => {
            let name = object_runner(obj).name();
            (runner_key(&namespace, &name), name)
        }
    };
    let now = std::time::Instant::now;
    if ctx.rbac_ensured.fresh(&key, now()).is_some() {
        return Ok(account);
    }
    let _writer = ctx.rbac_ensured.writer(&key).await;
    if ctx.rbac_ensured.fresh(&key, now()).is_some() {
        return Ok(account);
    }
    if jobs.service_account_name.is_some() {
        check_opted_in(ctx, &namespace, &account).await?;
    } else {
        ensure_object_runner(&ctx.client, &object_runner(obj))
            .await
            .map_err(|e| ConditionValue {
                status: ConditionStatus::False,
                reason: reasons::RBAC_FAILED,
                message: format!("runner ServiceAccount, Role or RoleBinding {account}: {e}"),
            })?;
    }
    ctx.rbac_ensured.put(key, (), now());
    Ok(account)
}

/// An operator's runner ServiceAccount must exist and consent
/// (`captf.io/runner=true`); the manager binds nothing to it.
async fn check_opted_in(
    ctx: &Context,
    namespace: &str,
    account: &str,
) -> Result<(), ConditionValue> {
    use captf_api::names::labels;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let not_opted_in = |message: String| ConditionValue {
        status: ConditionStatus::False,
        reason: reasons::SERVICE_ACCOUNT_NOT_OPTED_IN,
        message,
    };
    let api: kube::Api<ServiceAccount> = kube::Api::namespaced(ctx.client.clone(), namespace);
    match api.get_opt(account).await {
        Ok(Some(sa)) if sa.labels().get(labels::RUNNER).map(String::as_str) == Some("true") => {
            Ok(())
        }
        Ok(Some(_)) => Err(not_opted_in(format!(
            "ServiceAccount {account} lacks the label {}=true",
            labels::RUNNER
        ))),
        Ok(None) => Err(not_opted_in(format!(
            "ServiceAccount {account} does not exist"
        ))),
        Err(e) => Err(ConditionValue {
            status: ConditionStatus::False,
            reason: reasons::RBAC_FAILED,
            message: format!("reading ServiceAccount {account}: {e}"),
        }),
    }
}

/// The runner identity of `obj`.
pub(super) fn object_runner<K: Workload>(obj: &K) -> crate::rbac::ObjectRunner {
    let namespace = obj.namespace().unwrap_or_default();
    crate::rbac::ObjectRunner {
        state_suffix: crate::names::state_suffix(K::KIND, &namespace, &obj.name_any()),
        namespace,
        owner: obj.owner_reference(),
    }
}

/// The memo key of a runner identity: `<namespace>/<name>`.
pub(super) fn runner_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}
