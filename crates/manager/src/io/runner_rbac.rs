//! The runners' access in the apiserver: each object's runner account,
//! Role and binding, and (for the demo and the tests, which run the manager
//! without the components) what the components install for every runner.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams};

use crate::rbac;
use crate::runner_admission as admission;

use super::FIELD_MANAGER;

/// Applies an object's runner ServiceAccount, Role and RoleBinding (three
/// server-side applies; the Role before its binding, so the account never
/// points at a missing Role).
pub async fn ensure_object_runner(
    client: &kube::Client,
    runner: &rbac::ObjectRunner,
) -> Result<(), kube::Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let ns = runner.namespace.as_str();
    let name = runner.name();
    let typed = |value: serde_json::Value, api_version: &str, kind: &str| {
        let mut v = value;
        v["apiVersion"] = api_version.into();
        v["kind"] = kind.into();
        v
    };
    let sa = typed(
        serde_json::to_value(runner.service_account()).expect("serializes"),
        "v1",
        "ServiceAccount",
    );
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .patch(&name, &params, &Patch::Apply(&sa))
        .await?;
    let role = typed(
        serde_json::to_value(runner.role()).expect("serializes"),
        "rbac.authorization.k8s.io/v1",
        "Role",
    );
    Api::<Role>::namespaced(client.clone(), ns)
        .patch(&name, &params, &Patch::Apply(&role))
        .await?;
    let rb = typed(
        serde_json::to_value(runner.role_binding()).expect("serializes"),
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
    );
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .patch(&name, &params, &Patch::Apply(&rb))
        .await?;
    Ok(())
}

/// Installs what the components install for runners, as `field_manager`
/// (server-side apply): the namespace-wide `captf-runner` ClusterRole and
/// the admission policy, with its binding, that keeps each object's runner
/// to creating its own state's names. For the demo and the tests, which run
/// the manager without the components.
pub async fn install_runner_components(
    client: &kube::Client,
    field_manager: &str,
) -> Result<(), kube::Error> {
    let apply = PatchParams::apply(field_manager).force();
    Api::<ClusterRole>::all(client.clone())
        .patch(
            rbac::RUNNER,
            &apply,
            &Patch::Apply(rbac::runner_cluster_role()),
        )
        .await?;
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .patch(
            admission::RUNNER_CREATES,
            &apply,
            &Patch::Apply(admission::runner_create_policy()),
        )
        .await?;
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .patch(
            admission::RUNNER_CREATES,
            &apply,
            &Patch::Apply(admission::runner_create_policy_binding()),
        )
        .await?;
    Ok(())
}
