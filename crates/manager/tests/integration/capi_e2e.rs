//! The provider driven by Cluster API's own controllers: the core manager
//! (and the kubeadm providers) as processes against the real control plane,
//! this provider's controllers in the test process, the real node
//! running the real runner and OpenTofu, and the node agent standing in for
//! the kubelets of the pool's members. Nothing here plays Cluster API: the
//! owner references, cluster-name labels, the MachinePool's provider ID list,
//! node references and the deletion cascade all come from its controllers.
//! The test only writes what a user (and, for the kubeconfig Secret, a
//! control plane provider) would.

use crate::support;

use std::collections::BTreeSet;

use captf_api::{
    TerraformCluster, TerraformClusterIdentity, TerraformMachine, TerraformMachinePool,
};
use captf_manager::capi;
use captf_testenv::{TestEnv, TestNamespace, eventually};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::pools::bring_up;
use support::webhooks::serve_our_webhooks;
use support::*;

async fn create(ns: &TestNamespace, ar: &kube::api::ApiResource, obj: Value) -> DynamicObject {
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), ar);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(obj).unwrap(),
    )
    .await
    .unwrap()
}

fn machine_pools(ns: &TestNamespace) -> Api<DynamicObject> {
    Api::namespaced_with(ns.client(), ns.name(), &capi::machine_pool_resource())
}

fn clusters(ns: &TestNamespace) -> Api<DynamicObject> {
    Api::namespaced_with(ns.client(), ns.name(), &capi::cluster_resource())
}

fn machines(ns: &TestNamespace) -> Api<DynamicObject> {
    Api::namespaced_with(ns.client(), ns.name(), &capi::machine_resource())
}

/// The MachinePool as Cluster API sees it: provider IDs, node references
/// (by provider ID of the node they name), ready replicas counted from
/// nodes, and the phase.
#[derive(Debug, PartialEq)]
struct PoolView {
    provider_ids: BTreeSet<String>,
    node_provider_ids: BTreeSet<String>,
    node_ready_replicas: i64,
    phase: String,
}

async fn pool_view(ns: &TestNamespace) -> Option<PoolView> {
    let mp = machine_pools(ns).get("pool-a").await.ok()?;
    let strings = |v: &Value| -> BTreeSet<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let nodes: Api<Node> = Api::all(ns.client());
    let mut node_provider_ids = BTreeSet::new();
    for r in mp.data["status"]["nodeRefs"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let node = nodes.get(r["name"].as_str()?).await.ok()?;
        node_provider_ids.insert(node.spec?.provider_id?);
    }
    Some(PoolView {
        provider_ids: strings(&mp.data["spec"]["providerIDList"]),
        node_provider_ids,
        node_ready_replicas: mp.data["status"]["deprecated"]["v1beta1"]["readyReplicas"]
            .as_i64()
            .unwrap_or(0),
        phase: mp.data["status"]["phase"].as_str().unwrap_or("").to_owned(),
    })
}

/// Waits until Cluster API's view of the pool has `replicas` members, each
/// matched to a Ready node, and our pool reports the same members.
async fn wait_matched(ns: &TestNamespace, replicas: usize, secs: u64) -> PoolView {
    let last = std::sync::Mutex::new(String::new());
    eventually(
        &format!("the MachinePool matched to {replicas} nodes"),
        secs,
        || async {
            let view = pool_view(ns).await?;
            let pool = ns.api::<TerraformMachinePool>().get("pool-a").await.ok()?;
            let ours: BTreeSet<String> = pool
                .spec
                .provider_id_list
                .clone()
                .unwrap_or_default()
                .into_iter()
                .collect();
            let seen = format!("{view:?} ours={ours:?}");
            let mut l = last.lock().unwrap();
            if *l != seen {
                eprintln!("pool-a: {seen}");
                *l = seen;
            }
            (view.provider_ids.len() == replicas
                && view.provider_ids == ours
                && view.node_provider_ids == view.provider_ids
                && view.node_ready_replicas == replicas as i64
                && view.phase == "Running")
                .then_some(view)
        },
    )
    .await
}

fn owner_kinds(meta: &kube::api::ObjectMeta) -> Vec<String> {
    meta.owner_references
        .iter()
        .flatten()
        .map(|o| o.kind.clone())
        .collect()
}

fn cluster_label(meta: &kube::api::ObjectMeta) -> Option<String> {
    meta.labels
        .as_ref()?
        .get("cluster.x-k8s.io/cluster-name")
        .cloned()
}

/// Everything the provider and Cluster API made in `ns` that is still there:
/// Jobs, the provider's Secrets, Leases, the Cluster API objects (Clusters,
/// MachinePools, Machines), ours, our nodes.
async fn leftovers(ns: &TestNamespace) -> Option<Vec<String>> {
    let mut left = Vec::new();
    for j in ns.api::<Job>().list(&ListParams::default()).await.ok()? {
        left.push(format!("Job/{}", j.metadata.name?));
    }
    for s in ns.api::<Secret>().list(&ListParams::default()).await.ok()? {
        let name = s.metadata.name?;
        if name.starts_with("captf-")
            || name.starts_with("tfstate-")
            || name.ends_with("-kubeconfig")
        {
            left.push(format!("Secret/{name}"));
        }
    }
    for l in ns.api::<Lease>().list(&ListParams::default()).await.ok()? {
        left.push(format!("Lease/{}", l.metadata.name?));
    }
    for o in clusters(ns).list(&ListParams::default()).await.ok()? {
        left.push(format!("Cluster/{}", o.metadata.name?));
    }
    for o in machine_pools(ns).list(&ListParams::default()).await.ok()? {
        left.push(format!("MachinePool/{}", o.metadata.name?));
    }
    for o in machines(ns).list(&ListParams::default()).await.ok()? {
        left.push(format!("Machine/{}", o.metadata.name?));
    }
    for o in ns
        .api::<TerraformCluster>()
        .list(&ListParams::default())
        .await
        .ok()?
    {
        left.push(format!("TerraformCluster/{}", o.metadata.name?));
    }
    for o in ns
        .api::<TerraformMachinePool>()
        .list(&ListParams::default())
        .await
        .ok()?
    {
        left.push(format!("TerraformMachinePool/{}", o.metadata.name?));
    }
    for o in ns
        .api::<TerraformMachine>()
        .list(&ListParams::default())
        .await
        .ok()?
    {
        left.push(format!("TerraformMachine/{}", o.metadata.name?));
    }
    let nodes: Api<Node> = Api::all(ns.client());
    let prefix = format!("noop:///{}/", ns.name());
    for n in nodes.list(&ListParams::default()).await.ok()? {
        if n.spec
            .and_then(|s| s.provider_id)
            .is_some_and(|id| id.starts_with(&prefix))
        {
            left.push(format!("Node/{}", n.metadata.name?));
        }
    }
    Some(left)
}

/// Waits until [`leftovers`] finds nothing; panics naming what is left.
async fn wait_all_gone(ns: &TestNamespace, secs: u64) {
    let last = std::sync::Mutex::new(Vec::new());
    let waited = tokio::time::timeout(std::time::Duration::from_secs(secs), async {
        loop {
            if let Some(left) = leftovers(ns).await {
                if left.is_empty() {
                    return;
                }
                *last.lock().unwrap() = left;
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "still there after the Cluster's deletion: {:?}",
        last.lock().unwrap()
    );
}

async fn set_replicas(ns: &TestNamespace, replicas: i32) {
    machine_pools(ns)
        .patch(
            "pool-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

const ALL_ROLES: [&str; 3] = ["cluster", "machine", "machinepool"];

/// The manager of `ns`, its runner role, and the noop module images of
/// `roles` on the real node.
async fn setup(
    env: &'static TestEnv,
    ns: &TestNamespace,
    tmp: &std::path::Path,
    roles: &[&str],
) -> Manager {
    insert_manager(env, ns.name()).await;
    for &role in roles {
        insert_module(
            env,
            &module_ref(role, ns.name()),
            module_image(tmp, role, "v1", &[]),
        )
        .await;
    }
    install_runner_role(&ns.client()).await;
    start_manager(ns.client(), ns.name())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_api_drives_a_classic_cluster_with_a_pool_from_creation_to_deletion() {
    let env = TestEnv::get().await;
    env.cluster_api().await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), &ALL_ROLES).await;

    // What a user writes (and the kubeconfig Secret of a control plane
    // provider): no owner references, no cluster-name labels.
    bring_up(&ns, 3, json!({})).await;

    // Cluster API's controllers adopt our objects: owner references and
    // the cluster-name label are theirs.
    let tc = eventually("Cluster API owns the TerraformCluster", 60, || async {
        let tc = ns.api::<TerraformCluster>().get("prod").await.ok()?;
        owner_kinds(&tc.metadata)
            .contains(&"Cluster".to_owned())
            .then_some(tc)
    })
    .await;
    assert_eq!(owner_kinds(&tc.metadata), ["Cluster"]);
    let pool = eventually("Cluster API owns the TerraformMachinePool", 60, || async {
        let p = ns.api::<TerraformMachinePool>().get("pool-a").await.ok()?;
        owner_kinds(&p.metadata)
            .contains(&"MachinePool".to_owned())
            .then_some(p)
    })
    .await;
    assert_eq!(cluster_label(&pool.metadata).as_deref(), Some("prod"));

    // The cluster is provisioned in Cluster API's eyes.
    eventually("the Cluster is Provisioned", 120, || async {
        let c = clusters(&ns).get("prod").await.ok()?;
        let st = &c.data["status"];
        (st["initialization"]["infrastructureProvisioned"] == json!(true)
            && st["phase"] == json!("Provisioned"))
        .then_some(())
    })
    .await;

    // Three members, each matched by Cluster API to its node.
    let view = wait_matched(&ns, 3, 180).await;
    let mp = machine_pools(&ns).get("pool-a").await.unwrap();
    assert_eq!(mp.data["status"]["replicas"], json!(3));
    assert_eq!(mp.data["status"]["readyReplicas"], json!(3));
    assert!(
        view.provider_ids
            .iter()
            .all(|id| id.starts_with(&format!("noop:///{}/pool-a/", ns.name()))),
        "{view:?}"
    );

    // Scaling flows to the module and back; retired members' nodes go.
    set_replicas(&ns, 1).await;
    wait_matched(&ns, 1, 180).await;
    let nodes: Api<Node> = Api::all(ns.client());
    let prefix = format!("noop:///{}/", ns.name());
    eventually(
        "the retired members' nodes are deleted by Cluster API",
        60,
        || async {
            let ours = nodes
                .list(&ListParams::default())
                .await
                .ok()?
                .into_iter()
                .filter(|n| {
                    n.spec
                        .as_ref()
                        .and_then(|s| s.provider_id.as_ref())
                        .is_some_and(|id| id.starts_with(&prefix))
                })
                .count();
            (ours == 1).then_some(())
        },
    )
    .await;
    set_replicas(&ns, 0).await;
    eventually("the MachinePool scaled to zero", 180, || async {
        let view = pool_view(&ns).await?;
        let mp = machine_pools(&ns).get("pool-a").await.ok()?;
        (view.provider_ids.is_empty()
            && view.node_provider_ids.is_empty()
            && mp.data["status"]["replicas"] == json!(0))
        .then_some(())
    })
    .await;

    // Deleting the Cluster through Cluster API removes everything.
    clusters(&ns)
        .delete("prod", &DeleteParams::default())
        .await
        .unwrap();
    wait_all_gone(&ns, 240).await;
}

/// The Secret `creds` the templates' identity refers to.
async fn create_credentials(ns: &TestNamespace) {
    let creds: Secret = serde_json::from_value(
        json!({"metadata": {"name": "creds"}, "stringData": {"token": "x"}}),
    )
    .unwrap();
    ns.api::<Secret>()
        .create(&PostParams::default(), &creds)
        .await
        .unwrap();
}

fn dynamic_api(ns: &TestNamespace, group: &str, version: &str, kind: &str) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let ar = kube::api::ApiResource::from_gvk(&gvk);
    Api::namespaced_with(ns.client(), ns.name(), &ar)
}

fn infra(ns: &TestNamespace, kind: &str) -> Api<DynamicObject> {
    dynamic_api(ns, "infrastructure.cluster.x-k8s.io", "v1alpha1", kind)
}

/// A ClusterClass built from this provider's templates (and the kubeadm
/// providers' for the control plane and the pool's bootstrap), with a `zone`
/// variable patched into the TerraformCluster's module variables.
async fn cluster_class(ns: &TestNamespace) {
    let templates = [
        (
            infra(ns, "TerraformClusterTemplate"),
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformClusterTemplate",
                "metadata": {"name": "cluster"},
                "spec": {"template": {"spec": {"source": {"image": module_ref("cluster", ns.name())},
                    "identityRef": {"kind": "Secret", "name": "creds"}, "drift": {"intervalSeconds": 0}}}}}),
        ),
        (
            infra(ns, "TerraformMachineTemplate"),
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachineTemplate",
                "metadata": {"name": "control-plane"},
                "spec": {"template": {"spec": {"source": {"image": module_ref("machine", ns.name())},
                    "identityRef": {"kind": "Secret", "name": "creds"}}}}}),
        ),
        (
            infra(ns, "TerraformMachinePoolTemplate"),
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePoolTemplate",
                "metadata": {"name": "workers"},
                "spec": {"template": {"spec": {"source": {"image": module_ref("machinepool", ns.name())},
                    "identityRef": {"kind": "Secret", "name": "creds"}, "membershipRefreshIntervalSeconds": 15}}}}),
        ),
        (
            dynamic_api(
                ns,
                "controlplane.cluster.x-k8s.io",
                "v1beta2",
                "KubeadmControlPlaneTemplate",
            ),
            json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate",
                "metadata": {"name": "control-plane"},
                "spec": {"template": {"spec": {"kubeadmConfigSpec": {"format": "cloud-config"}}}}}),
        ),
        (
            dynamic_api(
                ns,
                "bootstrap.cluster.x-k8s.io",
                "v1beta2",
                "KubeadmConfigTemplate",
            ),
            json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
                "metadata": {"name": "workers"}, "spec": {"template": {"spec": {"format": "cloud-config"}}}}),
        ),
    ];
    for (api, obj) in templates {
        api.create(
            &PostParams::default(),
            &serde_json::from_value(obj).unwrap(),
        )
        .await
        .unwrap();
    }
    let infra_ref = |kind: &str, name: &str| json!({"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": kind, "name": name}});
    let class = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass",
        "metadata": {"name": "terraform"},
        "spec": {
            "infrastructure": infra_ref("TerraformClusterTemplate", "cluster"),
            "controlPlane": {
                "templateRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate", "name": "control-plane"},
                "machineInfrastructure": infra_ref("TerraformMachineTemplate", "control-plane"),
            },
            "workers": {"machinePools": [{
                "class": "default",
                "bootstrap": {"templateRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate", "name": "workers"}},
                "infrastructure": infra_ref("TerraformMachinePoolTemplate", "workers"),
            }]},
            "variables": [{"name": "zone", "required": true, "schema": {"openAPIV3Schema": {"type": "string"}}}],
            "patches": [{"name": "zone", "definitions": [{
                "selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformClusterTemplate",
                             "matchResources": {"infrastructureCluster": true}},
                "jsonPatches": [{"op": "add", "path": "/spec/template/spec/variables",
                                 "valueFrom": {"template": "noop_exports_extra:\n  zone: \"{{ .zone }}\"\n"}}],
            }]}],
        },
    });
    dynamic_api(ns, "cluster.x-k8s.io", "v1beta2", "ClusterClass")
        .create(
            &PostParams::default(),
            &serde_json::from_value(class).unwrap(),
        )
        .await
        .unwrap();
}

/// Waits until the topology's one pool reports `replicas` members and its
/// MachinePool counts as many ready replicas from matched Nodes.
async fn topology_pool_matched(ns: &TestNamespace, replicas: usize) -> TerraformMachinePool {
    let pools = ns.api::<TerraformMachinePool>();
    let last = std::sync::Mutex::new(String::new());
    eventually(
        &format!("the topology's pool matched to {replicas} nodes"),
        300,
        || async {
            let pool = pools
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .next()?;
            let mp = machine_pools(ns)
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .next()?;
            let ours = pool.spec.provider_id_list.clone().unwrap_or_default().len();
            let listed = mp.data["spec"]["providerIDList"]
                .as_array()
                .map_or(0, Vec::len);
            let ready = mp.data["status"]["deprecated"]["v1beta1"]["readyReplicas"]
                .as_i64()
                .unwrap_or(0);
            let seen = format!(
                "ours={ours} listed={listed} ready={ready} conditions={:?}",
                pool.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .map(|cs| cs
                        .iter()
                        .filter(|c| c.status != "True")
                        .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
                        .collect::<Vec<_>>())
            );
            let mut l = last.lock().unwrap();
            if *l != seen {
                eprintln!("topology pool: {seen}");
                *l = seen;
            }
            (ours == replicas && listed == replicas && ready == replicas as i64).then_some(pool)
        },
    )
    .await
}

fn exported_zone(tc: &TerraformCluster) -> Option<String> {
    tc.status.as_ref()?.exports.as_ref()?["zone"]
        .as_str()
        .map(str::to_owned)
}

fn is_ready(tc: &TerraformCluster) -> bool {
    tc.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_class_topology_creates_our_objects_from_our_templates() {
    let env = TestEnv::get().await;
    let cluster_api = env.cluster_api().await;
    serve_our_webhooks(env).await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), &ALL_ROLES).await;
    create_credentials(&ns).await;
    cluster_class(&ns).await;

    let cluster = create(&ns, &capi::cluster_resource(), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "topo"},
        "spec": {"topology": {
            "classRef": {"name": "terraform"},
            "version": "v1.37.2",
            "controlPlane": {"replicas": 1},
            "workers": {"machinePools": [{"class": "default", "name": "workers", "replicas": 2}]},
            "variables": [{"name": "zone", "value": "a"}],
        }},
    }))
    .await;
    let uid = cluster.metadata.uid.clone().unwrap();
    ns.api::<Secret>()
        .create(
            &PostParams::default(),
            &cluster_api.kubeconfig_secret("topo", &uid),
        )
        .await
        .unwrap();

    // The topology controller creates the TerraformCluster from our template
    // (after its dry runs passed our webhooks), patched with the variable.
    let tcs = ns.api::<TerraformCluster>();
    let tc = eventually("a Ready TerraformCluster exporting zone a", 240, || async {
        let list = tcs.list(&ListParams::default()).await.ok()?.items;
        let tc = list.into_iter().next()?;
        (is_ready(&tc) && exported_zone(&tc).as_deref() == Some("a")).then_some(tc)
    })
    .await;
    let tc_name = tc.metadata.name.clone().unwrap();
    // (The topology controller also owns new objects by a shim Secret
    // until the Cluster references them.)
    assert!(
        owner_kinds(&tc.metadata).contains(&"Cluster".to_owned()),
        "{:?}",
        tc.metadata.owner_references
    );
    assert_eq!(cluster_label(&tc.metadata).as_deref(), Some("topo"));
    assert_eq!(
        tc.spec.workspace.source.image,
        module_ref("cluster", ns.name())
    );
    eventually("the topology Cluster is Provisioned", 120, || async {
        let c = clusters(&ns).get("topo").await.ok()?;
        (c.data["status"]["initialization"]["infrastructureProvisioned"] == json!(true))
            .then_some(())
    })
    .await;

    // The control plane and its machine infrastructure come from the class:
    // the KubeadmControlPlane points at a clone of our machine template.
    let kcps = dynamic_api(
        &ns,
        "controlplane.cluster.x-k8s.io",
        "v1beta2",
        "KubeadmControlPlane",
    );
    let kcp = eventually("the KubeadmControlPlane", 120, || async {
        kcps.list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .next()
    })
    .await;
    let machine_template = kcp.data["spec"]["machineTemplate"]["spec"]["infrastructureRef"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let cloned = infra(&ns, "TerraformMachineTemplate")
        .get(&machine_template)
        .await
        .unwrap();
    assert_eq!(
        cloned.data["spec"]["template"]["spec"]["source"]["image"],
        json!(module_ref("machine", ns.name()))
    );

    // The control plane's machine runs on our machine module: the node
    // agent registers its Node and plays `kubeadm init` for it, so the
    // kubeadm control plane provider marks the control plane initialized.
    let tms = ns.api::<TerraformMachine>();
    let cp = eventually(
        "the control plane's TerraformMachine provisioned",
        240,
        || async {
            let tm = tms
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .next()?;
            tm.status
                .as_ref()?
                .workspace
                .initialization
                .as_ref()?
                .provisioned?
                .then_some(tm)
        },
    )
    .await;
    assert!(owner_kinds(&cp.metadata).contains(&"Machine".to_owned()));
    eventually("the control plane initialized", 180, || async {
        let kcp = kcps.get(kcp.metadata.name.as_deref()?).await.ok()?;
        (kcp.data["status"]["initialization"]["controlPlaneInitialized"] == json!(true))
            .then_some(())
    })
    .await;

    // The topology's MachinePool gets its TerraformMachinePool from our
    // template and, once the bootstrap provider writes its join data,
    // converges with Cluster API matching both members to Nodes.
    let pool = topology_pool_matched(&ns, 2).await;
    assert!(owner_kinds(&pool.metadata).contains(&"MachinePool".to_owned()));
    assert_eq!(
        pool.spec.workspace.source.image,
        module_ref("machinepool", ns.name())
    );
    let mp_name = pool
        .metadata
        .owner_references
        .as_ref()
        .unwrap()
        .iter()
        .find(|o| o.kind == "MachinePool")
        .unwrap()
        .name
        .clone();
    let mp = machine_pools(&ns).get(&mp_name).await.unwrap();
    assert_eq!(
        mp.data["spec"]["template"]["spec"]["bootstrap"]["configRef"]["kind"],
        json!("KubeadmConfig")
    );

    // A topology replicas change reaches the module: the topology controller
    // scales the MachinePool, and the pool applies a third member.
    clusters(&ns)
        .patch(
            "topo",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"topology": {"workers": {"machinePools": [
                {"class": "default", "name": "workers", "replicas": 3}]}}}})),
        )
        .await
        .unwrap();
    let pool = topology_pool_matched(&ns, 3).await;
    assert_eq!(pool.status.as_ref().and_then(|s| s.replicas), Some(3));

    // Our template immutability holds for what the class references.
    let refused = infra(&ns, "TerraformClusterTemplate")
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"template": {"spec": {"drift": {"intervalSeconds": 60}}}}}),
            ),
        )
        .await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.code == 422 || s.code == 403),
        "a template is immutable: {refused:?}"
    );

    // A topology variable change reaches the module: the TerraformCluster is
    // patched in place and re-applies with the new value.
    clusters(&ns)
        .patch(
            "topo",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"topology": {"variables": [{"name": "zone", "value": "b"}]}}}),
            ),
        )
        .await
        .unwrap();
    let tc = eventually("the TerraformCluster to export zone b", 240, || async {
        let tc = tcs.get(&tc_name).await.ok()?;
        (is_ready(&tc) && exported_zone(&tc).as_deref() == Some("b")).then_some(tc)
    })
    .await;
    assert_eq!(
        tc.spec.workspace.variables.as_ref().unwrap()["noop_exports_extra"]["zone"],
        json!("b")
    );

    // Deleting the Cluster removes everything the topology made.
    clusters(&ns)
        .delete("topo", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the topology's objects to be gone", 240, || async {
        let left = leftovers(&ns).await?;
        let kcp_left = kcps.list(&ListParams::default()).await.ok()?.items.len();
        (left.is_empty() && kcp_left == 0).then_some(())
    })
    .await;
}

/// A clusterctl provider repository for this provider, as a release would
/// publish it: `metadata.yaml`, the components built by kustomize from
/// `config/default`, and the cluster templates. Returns the clusterctl
/// configuration file that names it.
fn clusterctl_repository(root: &std::path::Path) -> std::path::PathBuf {
    let version = env!("CARGO_PKG_VERSION");
    let release = root.join(format!("repository/infrastructure-terraform/v{version}"));
    std::fs::create_dir_all(&release).unwrap();
    std::fs::copy(
        workspace().join("metadata.yaml"),
        release.join("metadata.yaml"),
    )
    .unwrap();
    for t in std::fs::read_dir(workspace().join("templates")).unwrap() {
        let t = t.unwrap();
        std::fs::copy(t.path(), release.join(t.file_name())).unwrap();
    }
    let kustomize = captf_testenv::assets::kustomize().expect("the kustomize test asset");
    let built = std::process::Command::new(kustomize)
        .arg("build")
        .arg(workspace().join("config/default"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "kustomize build config/default: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let components = release.join("infrastructure-components.yaml");
    std::fs::write(&components, built.stdout).unwrap();
    let config = root.join("clusterctl.yaml");
    std::fs::write(
        &config,
        format!(
            "providers:\n- name: terraform\n  url: file://{}\n  type: InfrastructureProvider\n",
            components.display()
        ),
    )
    .unwrap();
    config
}

/// clusterctl with `args`, offline: its configuration under `root`, no
/// kubeconfig (so it looks nothing up in a management cluster: the
/// ClusterClass comes from the repository), no version check, and `vars`.
fn clusterctl(root: &std::path::Path, args: &[&str], vars: &[(&str, String)]) -> String {
    let clusterctl =
        captf_testenv::assets::capi_binary("clusterctl").expect("the clusterctl test asset");
    let out = std::process::Command::new(clusterctl)
        .args(args)
        .env("HOME", root)
        .env("KUBECONFIG", root.join("no-kubeconfig"))
        .env("CLUSTERCTL_DISABLE_VERSIONCHECK", "true")
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "clusterctl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `clusterctl generate cluster` of `flavor` (None: the default template)
/// with one control-plane machine and one worker, the module images of
/// `ns` and the TerraformClusterIdentity `identity`.
fn generate_cluster(
    root: &std::path::Path,
    config: &std::path::Path,
    ns: &TestNamespace,
    identity: &str,
    name: &str,
    flavor: Option<&str>,
) -> String {
    let infrastructure = format!("--infrastructure=terraform:v{}", env!("CARGO_PKG_VERSION"));
    let config = format!("--config={}", config.display());
    let namespace = format!("--target-namespace={}", ns.name());
    let flavor = flavor.map(|f| format!("--flavor={f}"));
    let mut args = vec![
        "generate",
        "cluster",
        name,
        &infrastructure,
        &config,
        &namespace,
        "--kubernetes-version=v1.37.2",
        "--worker-machine-count=1",
        "--control-plane-machine-count=1",
    ];
    args.extend(flavor.as_deref());
    let vars = [
        ("TERRAFORM_IDENTITY_NAME", identity.to_owned()),
        ("TERRAFORM_CLUSTER_IMAGE", module_ref("cluster", ns.name())),
        ("TERRAFORM_MACHINE_IMAGE", module_ref("machine", ns.name())),
    ];
    clusterctl(root, &args, &vars)
}

/// `templates/identity.yaml` as an admin renders it with `clusterctl
/// generate yaml`: the identity `name` for `ns`, its Secret in `ns` (so the
/// namespace's cleanup finds the identity).
fn generate_identity(root: &std::path::Path, ns: &TestNamespace, name: &str) -> String {
    let from = workspace().join("templates/identity.yaml");
    let vars = [
        ("TERRAFORM_IDENTITY_NAME", name.to_owned()),
        ("NAMESPACE", ns.name().to_owned()),
        ("TERRAFORM_IDENTITY_SECRET_NAMESPACE", ns.name().to_owned()),
    ];
    clusterctl(
        root,
        &["generate", "yaml", "--from", from.to_str().unwrap()],
        &vars,
    )
}

/// Server-side applies every document of `yaml`, as `kubectl apply
/// --server-side` would; returns `kind/name` of each.
async fn apply_yaml(client: &kube::Client, yaml: &str) -> Vec<String> {
    use serde::Deserialize as _;
    let mut applied = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let value = Value::deserialize(doc).unwrap();
        if value.is_null() {
            continue;
        }
        let obj: DynamicObject = serde_json::from_value(value).unwrap();
        let types = obj.types.clone().unwrap();
        let gvk = kube::api::GroupVersionKind::try_from(&types).unwrap();
        let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
        let name = obj.metadata.name.clone().unwrap();
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                obj.metadata.namespace.as_deref().unwrap(),
                &ar,
            ),
            kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        api.patch(
            &name,
            &PatchParams::apply("clusterctl-output"),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {}/{name}: {e}", types.kind));
        applied.push(format!("{}/{name}", types.kind));
    }
    applied
}

/// `status/reason` of the condition `type_` of one of our objects.
fn condition_of<T: serde::Serialize>(obj: &T, type_: &str) -> Option<String> {
    let value = serde_json::to_value(obj).ok()?;
    let c = value["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    Some(format!(
        "{}/{}",
        c["status"].as_str().unwrap_or_default(),
        c["reason"].as_str().unwrap_or_default()
    ))
}

fn has_label(meta: &kube::api::ObjectMeta, key: &str) -> bool {
    meta.labels.as_ref().is_some_and(|l| l.contains_key(key))
}

fn cloned_from(meta: &kube::api::ObjectMeta) -> Option<String> {
    meta.annotations
        .as_ref()?
        .get("cluster.x-k8s.io/cloned-from-name")
        .cloned()
}

fn of_cluster(cluster: &str) -> ListParams {
    ListParams::default().labels(&format!("cluster.x-k8s.io/cluster-name={cluster}"))
}

/// Waits until `cluster` has `count` Machines, each Running with the
/// provider ID of the Node Cluster API matched it to; returns them.
async fn machines_matched(
    ns: &TestNamespace,
    cluster: &str,
    count: usize,
    secs: u64,
) -> Vec<DynamicObject> {
    let nodes: Api<Node> = Api::all(ns.client());
    let last = std::sync::Mutex::new(String::new());
    eventually(
        &format!("the {count} Machines of {cluster} matched to Nodes"),
        secs,
        || async {
            let list = machines(ns).list(&of_cluster(cluster)).await.ok()?.items;
            let mut seen = Vec::new();
            let mut matched = 0;
            for m in &list {
                let id = m.data["spec"]["providerID"].as_str();
                let node = m.data["status"]["nodeRef"]["name"].as_str();
                let phase = m.data["status"]["phase"].as_str().unwrap_or_default();
                let node_id = match node {
                    Some(n) => nodes.get(n).await.ok().and_then(|n| n.spec?.provider_id),
                    None => None,
                };
                if id.is_some() && node_id.as_deref() == id && phase == "Running" {
                    matched += 1;
                }
                let waiting: Vec<String> = m.data["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| c["status"] != "True")
                    .map(|c| format!("{}={}/{}", c["type"], c["status"], c["reason"]))
                    .collect();
                seen.push(format!(
                    "{}: phase={phase} providerID={id:?} node={node:?} {waiting:?}",
                    m.metadata.name.as_deref().unwrap_or_default()
                ));
            }
            let seen = seen.join("\n  ");
            let mut l = last.lock().unwrap();
            if *l != seen {
                eprintln!("{cluster} machines:\n  {seen}");
                *l = seen;
            }
            (list.len() == count && matched == count).then_some(list)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusterctl_generate_cluster_renders_our_templates_which_converge() {
    // Its cluster-scoped identity reaches every running manager.
    let _identities = captf_testenv::gate::creating_identities().await;
    let env = TestEnv::get().await;
    let cluster_api = env.cluster_api().await;
    serve_our_webhooks(env).await;
    let ns = env.namespace().await;
    let tmp = tempfile::tempdir().unwrap();
    let _manager = setup(env, &ns, tmp.path(), &["cluster", "machine"]).await;
    let config = clusterctl_repository(tmp.path());

    // The admin's part: the identity of identity.yaml, allowing this
    // namespace. (Its Secret, named after it, is the admin's: not one of
    // the `captf-` names the leftovers check counts.)
    let identity = format!("id-{}", ns.name());
    let applied = apply_yaml(&ns.client(), &generate_identity(tmp.path(), &ns, &identity)).await;
    assert_eq!(
        applied,
        [
            format!("Secret/{identity}"),
            format!("TerraformClusterIdentity/{identity}")
        ]
    );
    let identity_ref = json!({"kind": "TerraformClusterIdentity", "name": identity});
    let machine_image = module_ref("machine", ns.name());

    // The default flavor: its output applies, and the kubeadm control plane's
    // machine and the MachineDeployment's converge under Cluster API.
    let classic = generate_cluster(tmp.path(), &config, &ns, &identity, "gen", None);
    let applied = apply_yaml(&ns.client(), &classic).await;
    assert_eq!(
        applied,
        [
            "Cluster/gen",
            "TerraformCluster/gen",
            "KubeadmControlPlane/gen-control-plane",
            "TerraformMachineTemplate/gen-control-plane",
            "MachineDeployment/gen-md-0",
            "TerraformMachineTemplate/gen-md-0",
            "KubeadmConfigTemplate/gen-md-0",
            "MachineHealthCheck/gen-md-0",
            "MachineHealthCheck/gen-control-plane",
        ]
    );
    let cluster = clusters(&ns).get("gen").await.unwrap();
    ns.api::<Secret>()
        .create(
            &PostParams::default(),
            &cluster_api.kubeconfig_secret("gen", &cluster.metadata.uid.unwrap()),
        )
        .await
        .unwrap();
    let matched = machines_matched(&ns, "gen", 2, 300).await;
    let control_plane: Vec<String> = matched
        .iter()
        .filter(|m| has_label(&m.metadata, "cluster.x-k8s.io/control-plane"))
        .filter_map(|m| m.metadata.name.clone())
        .collect();
    let workers: Vec<String> = matched
        .iter()
        .filter(|m| {
            m.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("cluster.x-k8s.io/deployment-name"))
                .is_some_and(|d| d == "gen-md-0")
        })
        .filter_map(|m| m.metadata.name.clone())
        .collect();
    assert_eq!((control_plane.len(), workers.len()), (1, 1), "{matched:?}");

    // Ours: the cluster and both machines Ready on the identity, the
    // machines cloned from the two templates with the machine image and
    // no identity of their own (the cluster's default).
    let tc = eventually("the TerraformCluster gen Ready", 120, || async {
        let tc = ns.api::<TerraformCluster>().get("gen").await.ok()?;
        is_ready(&tc).then_some(tc)
    })
    .await;
    assert_eq!(
        condition_of(&tc, "IdentityAllowed").as_deref(),
        Some("True/IdentityAllowed")
    );
    let tms = eventually("both TerraformMachines of gen Ready", 120, || async {
        let list = ns
            .api::<TerraformMachine>()
            .list(&of_cluster("gen"))
            .await
            .ok()?
            .items;
        (list.len() == 2
            && list
                .iter()
                .all(|m| condition_of(m, "Ready").as_deref() == Some("True/Ready")))
        .then_some(list)
    })
    .await;
    let mut templates = BTreeSet::new();
    for tm in &tms {
        assert_eq!(tm.spec.workspace.source.image, machine_image);
        assert!(tm.spec.workspace.identity_ref.is_none(), "{:?}", tm.spec);
        assert_eq!(
            condition_of(tm, "IdentityAllowed").as_deref(),
            Some("True/IdentityAllowed"),
            "{:?}",
            tm.metadata.name
        );
        templates.extend(cloned_from(&tm.metadata));
    }
    assert_eq!(
        templates,
        BTreeSet::from(["gen-control-plane".to_owned(), "gen-md-0".to_owned()])
    );
    ns.api::<Secret>()
        .get(&format!("captf-creds-{identity}"))
        .await
        .expect("the identity's Secret mirrored into the namespace");

    // Each MachineHealthCheck finds its machine, healthy.
    let health_checks = dynamic_api(&ns, "cluster.x-k8s.io", "v1beta2", "MachineHealthCheck");
    for (name, targets) in [
        ("gen-control-plane", &control_plane),
        ("gen-md-0", &workers),
    ] {
        let last = std::sync::Mutex::new(Value::Null);
        let waited = tokio::time::timeout(std::time::Duration::from_secs(120), async {
            loop {
                if let Ok(mhc) = health_checks.get(name).await {
                    let status = mhc.data["status"].clone();
                    if status["expectedMachines"] == json!(1)
                        && status["currentHealthy"] == json!(1)
                        && status["targets"] == json!(targets)
                    {
                        return;
                    }
                    *last.lock().unwrap() = status;
                }
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "MachineHealthCheck {name} never found {targets:?} healthy: {}",
            last.lock().unwrap()
        );
    }

    // The clusterclass flavor: clusterctl adds the ClusterClass `noop` from
    // the repository; the topology makes our objects from its templates
    // with the variables patched in.
    let topology = generate_cluster(
        tmp.path(),
        &config,
        &ns,
        &identity,
        "gen-topo",
        Some("clusterclass"),
    );
    let applied = apply_yaml(&ns.client(), &topology).await;
    assert_eq!(
        applied,
        [
            "TerraformClusterTemplate/noop",
            "KubeadmControlPlaneTemplate/noop-control-plane",
            "TerraformMachineTemplate/noop-control-plane",
            "TerraformMachineTemplate/noop-worker",
            "KubeadmConfigTemplate/noop-worker",
            "ClusterClass/noop",
            "Cluster/gen-topo",
        ]
    );
    let cluster = clusters(&ns).get("gen-topo").await.unwrap();
    ns.api::<Secret>()
        .create(
            &PostParams::default(),
            &cluster_api.kubeconfig_secret("gen-topo", &cluster.metadata.uid.unwrap()),
        )
        .await
        .unwrap();
    let tc = eventually("the topology's TerraformCluster Ready", 240, || async {
        let list = ns
            .api::<TerraformCluster>()
            .list(&of_cluster("gen-topo"))
            .await
            .ok()?;
        let tc = list.items.into_iter().next()?;
        is_ready(&tc).then_some(tc)
    })
    .await;
    assert_eq!(cloned_from(&tc.metadata).as_deref(), Some("noop"));
    let spec = serde_json::to_value(&tc.spec).unwrap();
    assert_eq!(
        spec["source"]["image"],
        json!(module_ref("cluster", ns.name())),
        "clusterImage"
    );
    assert_eq!(spec["identityRef"], identity_ref, "identityName");
    assert_eq!(
        spec["defaults"]["identityRef"], identity_ref,
        "identityName"
    );
    assert_eq!(
        condition_of(&tc, "IdentityAllowed").as_deref(),
        Some("True/IdentityAllowed")
    );

    // The control plane's machine and the worker's are made from the
    // topology's clones of the class's two machine templates, which carry
    // machineImage (the class's own hold a placeholder).
    let tms = eventually(
        "a control-plane and a worker TerraformMachine of gen-topo",
        240,
        || async {
            let list = ns
                .api::<TerraformMachine>()
                .list(&of_cluster("gen-topo"))
                .await
                .ok()?
                .items;
            let cp = list
                .iter()
                .filter(|m| has_label(&m.metadata, "cluster.x-k8s.io/control-plane"))
                .count();
            (list.len() == 2 && cp == 1).then_some(list)
        },
    )
    .await;
    let machine_templates = infra(&ns, "TerraformMachineTemplate");
    let mut class_templates = BTreeSet::new();
    for tm in &tms {
        assert_eq!(tm.spec.workspace.source.image, machine_image);
        let from = cloned_from(&tm.metadata).expect("cloned from a template");
        let template = machine_templates.get(&from).await.unwrap();
        assert_eq!(
            template.data["spec"]["template"]["spec"]["source"]["image"],
            json!(machine_image),
            "{from}"
        );
        class_templates.extend(cloned_from(&template.metadata));
    }
    assert_eq!(
        class_templates,
        BTreeSet::from(["noop-control-plane".to_owned(), "noop-worker".to_owned()])
    );
    // The topology's health checks, from the flavor's timeouts.
    let mut startup: Vec<i64> =
        eventually("the topology's two MachineHealthChecks", 120, || async {
            let list = health_checks
                .list(&of_cluster("gen-topo"))
                .await
                .ok()?
                .items;
            (list.len() == 2).then_some(list)
        })
        .await
        .iter()
        .map(|m| {
            m.data["spec"]["checks"]["nodeStartupTimeoutSeconds"]
                .as_i64()
                .unwrap_or_default()
        })
        .collect();
    startup.sort_unstable();
    assert_eq!(startup, [1200, 1800]);

    for name in ["gen", "gen-topo"] {
        clusters(&ns)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    wait_all_gone(&ns, 300).await;

    // Nothing uses the identity any more, so it may be deleted. Its status
    // may still list this namespace's mirror (the controller reads the
    // mirrors again only every few minutes): a touch makes it look now.
    let identities: Api<TerraformClusterIdentity> = Api::all(ns.client());
    let touches = std::sync::atomic::AtomicU32::new(0);
    eventually("the unused identity deleted", 60, || async {
        match identities.delete(&identity, &DeleteParams::default()).await {
            Ok(_) => Some(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Some(()),
            Err(e) => {
                let n = touches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                eprintln!("deleting identity {identity}: {e}");
                let touch =
                    json!({"metadata": {"annotations": {"captf.io/test-touch": n.to_string()}}});
                let _ = identities
                    .patch(&identity, &PatchParams::default(), &Patch::Merge(&touch))
                    .await;
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                None
            }
        }
    })
    .await;
}
