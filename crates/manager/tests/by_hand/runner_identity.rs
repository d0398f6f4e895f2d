//! A module is third-party code: from inside its runner pod, with the pod's
//! own token, it must reach its own state and nothing else of the namespace.
//!
//! A probe module (the noop pool module plus a `local-exec` step running
//! `captf-probe`, on the real node) asks the apiserver, with the token
//! mounted in its pod, for another pool's state
//! Secret, its credentials mirror, the bootstrap Secret, the cluster's
//! kubeconfig Secret, the namespace's Secret list and its own state; tries
//! to create another pool's state chunk, a future cluster's kubeconfig, a
//! lock Lease for a state not its own and a chunk of its own; and writes the
//! HTTP codes it got into a chunk of its own state (RBAC cannot scope
//! `create` by name; the components' admission policy,
//! `captf_manager::runner_admission`, does). Under the pool's own identity
//! every foreign read and create is 403 and its apply and destroy work;
//! under a broad ServiceAccount the same probe reads the other pool's state
//! and makes the same creates, so the probe can tell the difference.
//! The cluster and pools are made by hand, in a binary of its own, so no
//! Cluster API controller reacts to them.

use crate::support;

use std::collections::BTreeMap;

use captf_api::TerraformMachinePool;
use captf_images::layout::{Content, Entry, ImageSpec};
use captf_manager::capi;
use captf_manager::names::{WorkloadKind, state_secret, state_suffix};
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::pools::*;
use support::{insert_module, module_image};

/// Where the probe (`captf-probe`, static) sits in the probe module's image.
const PROBE_BINARY: &str = "/captf/probe";

/// What a probe asks for: Secrets to read, and Secrets and Leases to create.
struct Probe<'a> {
    namespace: &'a str,
    /// Where it writes its codes.
    result: &'a str,
    reads: &'a [String],
    secret_creates: &'a [String],
    lease_creates: &'a [String],
}

/// `probe.tf`: a `terraform_data` whose creation runs the probe in the
/// runner's pod (no shell: the probe is the `local-exec` interpreter, the
/// names it reads its last argument).
fn probe_tf(p: &Probe<'_>) -> String {
    format!(
        "resource \"terraform_data\" \"probe\" {{\n  provisioner \"local-exec\" {{\n    \
         interpreter = [{}, {}, {}, {}, {}]\n    command = {}\n  }}\n}}\n",
        json!(PROBE_BINARY),
        json!(p.namespace),
        json!(p.result),
        json!(p.secret_creates.join(",")),
        json!(p.lease_creates.join(",")),
        json!(p.reads.join(","))
    )
}

/// The probe module's image: the noop pool module with `probe.tf`, and
/// the probe binary.
fn probe_image(tmp: &std::path::Path, pool: &str, probe: &str) -> ImageSpec {
    let mut image = module_image(tmp, "machinepool", pool, &[("probe.tf", probe)]);
    image.entries.push(Entry {
        path: PROBE_BINARY.to_owned(),
        content: Content::HostFile(captf_testenv::binaries::static_linked("captf-probe")),
        mode: 0o755,
        owner: 0,
    });
    image
}

/// A MachinePool and its TerraformMachinePool `name`, owned and labeled as
/// Cluster API would, running `image` with `spec` merged in.
async fn create_pool(ns: &TestNamespace, name: &str, image: &str, spec: Value) {
    let mp = create(ns, &capi::machine_pool_resource(), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "prod"}},
        "spec": {"clusterName": "prod", "replicas": 1, "template": {"spec": {
            "clusterName": "prod",
            "bootstrap": {"dataSecretName": "pool-bootstrap"},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachinePool", "name": name},
            "version": "v1.37.2",
        }}},
    }))
    .await;
    let mut full = json!({"source": {"image": image}, "membershipRefreshIntervalSeconds": 15});
    for (k, v) in spec.as_object().into_iter().flatten() {
        full[k] = v.clone();
    }
    let pool: TerraformMachinePool = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "prod"},
                     "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
                                          "name": name, "uid": mp.metadata.uid}]},
        "spec": full,
    }))
    .unwrap();
    ns.api::<TerraformMachinePool>()
        .create(&PostParams::default(), &pool)
        .await
        .unwrap();
}

/// Waits for pool `name` to apply, failing with its conditions when the
/// apply fails (a probe that could not write its result fails the apply).
async fn wait_applied(ns: &TestNamespace, name: &str) {
    let api = ns.api::<TerraformMachinePool>();
    eventually(&format!("pool {name} to apply"), 300, || async {
        let p = api.get(name).await.ok()?;
        let conditions = p.status.as_ref()?.conditions.clone().unwrap_or_default();
        if let Some(c) = conditions
            .iter()
            .find(|c| c.type_ == "ApplyJobSucceeded" && c.status == "False")
        {
            panic!("pool {name}: apply failed: {}: {}", c.reason, c.message);
        }
        conditions
            .iter()
            .any(|c| c.type_ == "ApplyJobSucceeded" && c.status == "True")
            .then_some(())
    })
    .await;
}

/// The HTTP codes a probe wrote, by what it asked for.
async fn probe_codes(ns: &TestNamespace, result: &str) -> BTreeMap<String, u16> {
    let secret = ns.api::<Secret>().get(result).await.unwrap();
    let codes = &secret.data.unwrap()["codes"].0;
    serde_json::from_slice(codes).unwrap()
}

#[tokio::test]
async fn a_module_reaches_its_own_state_and_nothing_else_of_the_namespace() {
    let env = TestEnv::get().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), Driver::ByHand).await;
    // The victim: pool-a, applied first so its state Secret exists.
    bring_up_driven(&ns, 1, json!({}), json!({}), Driver::ByHand).await;
    wait_pool(&ns, "pool-a to be Ready", 300, |p| is(p, "Ready", "True")).await;
    let secrets = ns.api::<Secret>();
    secrets
        .create(
            &PostParams::default(),
            &plain_secret(
                "prod-kubeconfig",
                &[("value", "apiVersion: v1\nkind: Config\n")],
                json!({"cluster.x-k8s.io/cluster-name": "prod"}),
            ),
        )
        .await
        .unwrap();
    // An identity whose mirror the probing pool's own Jobs mount.
    let identity = format!("{}-id", ns.name());
    let identities: Api<captf_api::TerraformClusterIdentity> = Api::all(ns.client());
    identities
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
                "kind": "TerraformClusterIdentity",
                "metadata": {"name": identity},
                "spec": {"secretRef": {"name": "creds", "namespace": ns.name()},
                         "allowedNamespaces": {"list": [ns.name()]}},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let victim_state = state_secret(&state_suffix(
        WorkloadKind::MachinePool,
        ns.name(),
        "pool-a",
    ));
    let mirror = format!("captf-creds-{identity}");
    let foreign = [
        victim_state.clone(),
        mirror.clone(),
        "pool-bootstrap".to_owned(),
        "prod-kubeconfig".to_owned(),
    ];
    // What no pool's runner may create: another pool's chunk, a future
    // cluster's kubeconfig, the lock of a state not its own.
    let future = state_suffix(WorkloadKind::MachinePool, ns.name(), "pool-future");
    let foreign_secrets = [
        format!("{victim_state}-part-3"),
        "future-kubeconfig".to_owned(),
    ];
    let foreign_leases = [captf_manager::names::state_lock_lease(&future)];
    let created = |kind: &str, name: &str| format!("create {kind} {name}");
    let probe = |pool: &str| {
        let own = state_secret(&state_suffix(WorkloadKind::MachinePool, ns.name(), pool));
        let mut reads = foreign.to_vec();
        reads.push(own.clone());
        let mut secret_creates = foreign_secrets.to_vec();
        secret_creates.push(format!("{own}-part-6"));
        // The codes go into a chunk of its own state too: unlabeled and
        // after a gap, it is no part of the state.
        let result = format!("{own}-part-7");
        let text = probe_tf(&Probe {
            namespace: ns.name(),
            result: &result,
            reads: &reads,
            secret_creates: &secret_creates,
            lease_creates: &foreign_leases,
        });
        let reference = format!("local.test/probe-{pool}:{}", ns.name());
        (reference, probe_image(tmp.path(), pool, &text), own)
    };

    // The probing pool, under its own identity.
    let (image, spec, own_state) = probe("prober");
    insert_module(env, &image, spec).await;
    create_pool(
        &ns,
        "prober",
        &image,
        json!({"identityRef": {"kind": "TerraformClusterIdentity", "name": identity}}),
    )
    .await;
    wait_applied(&ns, "prober").await;
    assert!(
        secrets.get_opt(&mirror).await.unwrap().is_some(),
        "the prober's credentials mirror exists"
    );
    let codes = probe_codes(&ns, &format!("{own_state}-part-7")).await;
    eprintln!("prober saw {codes:?}");
    let mut denied = foreign.to_vec();
    denied.push("list".to_owned());
    denied.extend(foreign_secrets.iter().map(|n| created("secret", n)));
    denied.extend(foreign_leases.iter().map(|n| created("lease", n)));
    for name in &denied {
        assert_eq!(codes.get(name), Some(&403), "{name}: {codes:?}");
    }
    assert_eq!(
        codes.get(&own_state),
        Some(&200),
        "its own state: {codes:?}"
    );
    assert_eq!(
        codes.get(&created("secret", &format!("{own_state}-part-6"))),
        Some(&201),
        "a chunk of its own state: {codes:?}"
    );
    for name in &foreign_secrets {
        assert!(
            secrets.get_opt(name).await.unwrap().is_none(),
            "{name} was not created"
        );
    }
    let runner = format!(
        "captf-runner-{}",
        state_suffix(WorkloadKind::MachinePool, ns.name(), "prober")
    );
    let role = ns.api::<Role>().get(&runner).await.unwrap();
    assert!(
        role.rules
            .unwrap()
            .iter()
            .all(|r| !r.verbs.contains(&"list".to_owned())),
        "the runner's Role lists nothing"
    );

    // The same probe under a broad grant (an operator's ServiceAccount bound
    // to the namespace-wide runner role) reads the other pool's state: what
    // the scoped identity denies is a real difference.
    // It must consent first: unlabeled, no Job runs as it.
    support::namespace_wide_runner(&ns, "broad-runner").await;
    let accounts = ns.api::<ServiceAccount>();
    let (image, spec, _) = probe("broad");
    insert_module(env, &image, spec).await;
    create_pool(
        &ns,
        "broad",
        &image,
        json!({"identityRef": {"kind": "Secret", "name": "creds"},
               "jobs": {"serviceAccountName": "broad-runner"}}),
    )
    .await;
    let pools = ns.api::<TerraformMachinePool>();
    eventually("the broad pool to wait for consent", 120, || async {
        let p = pools.get("broad").await.ok()?;
        let c = p
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "RunnerRBACReady")?
            .clone();
        (c.status == "False" && c.reason == "ServiceAccountNotOptedIn").then_some(())
    })
    .await;
    let jobs: Vec<String> = ns
        .api::<Job>()
        .list(
            &ListParams::default().labels("captf.infrastructure.cluster.x-k8s.io/owner-name=broad"),
        )
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|j| j.metadata.name.clone())
        .collect();
    assert_eq!(jobs, Vec::<String>::new(), "no Job before consent");
    accounts
        .patch(
            "broad-runner",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"captf.io/runner": "true"}}})),
        )
        .await
        .unwrap();
    wait_applied(&ns, "broad").await;
    let broad_state = state_secret(&state_suffix(WorkloadKind::MachinePool, ns.name(), "broad"));
    let codes = probe_codes(&ns, &format!("{broad_state}-part-7")).await;
    eprintln!("broad saw {codes:?}");
    assert_eq!(codes.get(&victim_state), Some(&200), "{codes:?}");
    assert_eq!(codes.get("list"), Some(&200), "{codes:?}");
    // The admission policy holds only objects' own runner accounts: an
    // operator's account keeps what its binding grants.
    for name in foreign_secrets
        .iter()
        .map(|n| created("secret", n))
        .chain(foreign_leases.iter().map(|n| created("lease", n)))
    {
        assert_eq!(codes.get(&name), Some(&201), "{name}: {codes:?}");
    }

    // The prober's destroy runs under its own identity too, and the
    // identity goes with the pool.
    ns.api::<TerraformMachinePool>()
        .delete("prober", &DeleteParams::background())
        .await
        .unwrap();
    eventually("the prober and its runner identity to go", 300, || async {
        let pools = ns.api::<TerraformMachinePool>();
        let gone = pools.get_opt("prober").await.ok()?.is_none()
            && ns
                .api::<ServiceAccount>()
                .get_opt(&runner)
                .await
                .ok()?
                .is_none()
            && ns.api::<Role>().get_opt(&runner).await.ok()?.is_none()
            && ns
                .api::<RoleBinding>()
                .get_opt(&runner)
                .await
                .ok()?
                .is_none();
        gone.then_some(())
    })
    .await;
    assert!(
        secrets.get_opt(&own_state).await.unwrap().is_none(),
        "the destroy removed the prober's state"
    );
}
