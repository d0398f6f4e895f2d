//! The admission policy that keeps an object's runner to creating its own
//! state's names (`captf_manager::runner_admission`), at the real
//! apiserver: requests made as an object's runner ServiceAccount, bound to
//! the Role the manager makes for it, are refused for every name but its
//! own state Secrets and lock Lease, while an operator's account bound to
//! the namespace-wide role and the manager's own identity are untouched.
//! Every create is a dry run: admission judges it, nothing is stored. (The
//! same from inside a real runner pod: `tests/by_hand/runner_identity.rs`.)

use crate::support;

use captf_manager::names::{WorkloadKind, state_lock_lease, state_secret, state_suffix};
use captf_manager::rbac::ObjectRunner;
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, PostParams};

/// A client acting as ServiceAccount `account` of `ns`.
fn acting_as(env: &TestEnv, ns: &TestNamespace, account: &str) -> kube::Client {
    let mut config = env.config().clone();
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{}:{account}", ns.name()));
    kube::Client::try_from(config).unwrap()
}

/// The HTTP code and message of a dry-run create of `kind` `name` in `ns`.
async fn create(client: &kube::Client, ns: &str, kind: &str, name: &str) -> (u16, String) {
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let object = serde_json::json!({"metadata": {"name": name}});
    let answer = match kind {
        "secret" => Api::<Secret>::namespaced(client.clone(), ns)
            .create(&dry_run, &serde_json::from_value(object).unwrap())
            .await
            .map(drop),
        _ => Api::<Lease>::namespaced(client.clone(), ns)
            .create(&dry_run, &serde_json::from_value(object).unwrap())
            .await
            .map(drop),
    };
    match answer {
        Ok(()) => (201, String::new()),
        Err(kube::Error::Api(s)) => (s.code, s.message),
        Err(e) => panic!("creating {kind} {name}: {e}"),
    }
}

/// The identity the manager makes for `pool`'s runner, made here by hand
/// (no owner: nothing collects it while the test runs).
async fn object_runner(ns: &TestNamespace, pool: &str) -> String {
    let runner = ObjectRunner {
        namespace: ns.name().to_owned(),
        state_suffix: state_suffix(WorkloadKind::MachinePool, ns.name(), pool),
        owner: OwnerReference::default(),
    };
    let post = PostParams::default();
    let mut account = runner.service_account();
    account.metadata.owner_references = None;
    ns.api::<ServiceAccount>()
        .create(&post, &account)
        .await
        .unwrap();
    let mut role = runner.role();
    role.metadata.owner_references = None;
    ns.api::<Role>().create(&post, &role).await.unwrap();
    let mut binding = runner.role_binding();
    binding.metadata.owner_references = None;
    ns.api::<RoleBinding>()
        .create(&post, &binding)
        .await
        .unwrap();
    runner.name()
}

#[tokio::test]
async fn an_object_runner_creates_only_its_own_state_names() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    support::install_runner_role(&ns.client()).await;
    let runner = acting_as(env, &ns, &object_runner(&ns, "pool-a").await);
    support::namespace_wide_runner(&ns, "broad-runner").await;
    let broad = acting_as(env, &ns, "broad-runner");
    let admin = ns.client();

    let own = state_suffix(WorkloadKind::MachinePool, ns.name(), "pool-a");
    let other = state_suffix(WorkloadKind::MachinePool, ns.name(), "pool-b");
    let other_chunk = format!("{}-part-3", state_secret(&other));
    // The policy is read by the apiserver a moment after it is stored.
    eventually("the policy to refuse another state's chunk", 60, || async {
        let (code, message) = create(&runner, ns.name(), "secret", &other_chunk).await;
        (code == 403 && message.contains("only the Secrets of its own state")).then_some(())
    })
    .await;

    let cases: Vec<(&str, &kube::Client, &str, String, u16)> = vec![
        (
            "its base Secret",
            &runner,
            "secret",
            state_secret(&own),
            201,
        ),
        (
            "its last chunk",
            &runner,
            "secret",
            format!("{}-part-7", state_secret(&own)),
            201,
        ),
        (
            "its own lock",
            &runner,
            "lease",
            state_lock_lease(&own),
            201,
        ),
        (
            "a chunk past its grant",
            &runner,
            "secret",
            format!("{}-part-8", state_secret(&own)),
            403,
        ),
        (
            "another state's base",
            &runner,
            "secret",
            state_secret(&other),
            403,
        ),
        (
            "another state's chunk",
            &runner,
            "secret",
            other_chunk.clone(),
            403,
        ),
        (
            "a cluster's kubeconfig",
            &runner,
            "secret",
            "prod-kubeconfig".into(),
            403,
        ),
        (
            "another state's lock",
            &runner,
            "lease",
            state_lock_lease(&other),
            403,
        ),
        (
            "a Lease of any name",
            &runner,
            "lease",
            "leader".into(),
            403,
        ),
        (
            "broad: another state's chunk",
            &broad,
            "secret",
            other_chunk.clone(),
            201,
        ),
        (
            "broad: a cluster's kubeconfig",
            &broad,
            "secret",
            "prod-kubeconfig".into(),
            201,
        ),
        (
            "broad: another state's lock",
            &broad,
            "lease",
            state_lock_lease(&other),
            201,
        ),
        (
            "the manager: another state's chunk",
            &admin,
            "secret",
            other_chunk.clone(),
            201,
        ),
    ];
    let mut wrong = Vec::new();
    for (what, client, kind, name, wanted) in cases {
        let (code, message) = create(client, ns.name(), kind, &name).await;
        if code != wanted {
            wrong.push(format!(
                "{what} ({kind} {name}): {code} {message}, wanted {wanted}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
