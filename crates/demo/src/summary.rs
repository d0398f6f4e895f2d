//! What the demo prints at its end, as `kubectl get` prints it: each
//! infrastructure kind, the Jobs that ran, Cluster API's machines and
//! pools, the nodes (`-o wide`: the real node's container runtime), and
//! each pool's members as Cluster API matched them and as the module
//! reported them.

use serde_json::Value;

use crate::{capi, kube_io, table};

/// `kubectl get` of each infrastructure kind and of the Jobs that ran,
/// then the pool members the module reported.
pub async fn print_tables(
    client: &kube::Client,
    namespace: &str,
    targets: &[(&'static str, String)],
) -> Result<(), String> {
    let mut shown: Vec<(&str, kube_io::Kind)> = Vec::new();
    for (kind, _) in targets {
        if !shown.iter().any(|(k, _)| k == kind) {
            shown.push((
                kind,
                kube_io::resolve(client, captf_api::API_VERSION, kind).await?,
            ));
        }
    }
    shown.push(("Job", kube_io::resolve(client, "batch/v1", "Job").await?));
    for (_, kind) in &shown {
        let t = kube_io::table(client, kind, namespace).await?;
        println!("\n$ kubectl get {} -n {namespace}", kind.resource.plural);
        print!("{}", table::render(&t, namespace, false)?);
    }
    let pools = kube_io::resolve(client, "cluster.x-k8s.io/v1beta2", "MachinePool").await?;
    for kind in ["MachineDeployment", "Machine", "MachinePool"] {
        let k = kube_io::resolve(client, "cluster.x-k8s.io/v1beta2", kind).await?;
        let t = kube_io::table(client, &k, namespace).await?;
        println!("\n$ kubectl get {} -n {namespace}", k.resource.plural);
        print!("{}", table::render(&t, namespace, false)?);
    }
    // The real node the Jobs ran on (its container runtime shown), beside
    // the node agent's stand-ins for the pools' members.
    let node_kind = kube_io::resolve(client, "v1", "Node").await?;
    let t = kube_io::table(client, &node_kind, namespace).await?;
    println!("\n$ kubectl get nodes -o wide");
    print!("{}", table::render(&t, namespace, true)?);
    let nodes: Vec<Value> = kube::Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .list(&Default::default())
        .await
        .map_err(|e| format!("listing nodes: {e}"))?
        .items
        .into_iter()
        .filter_map(|n| serde_json::to_value(n).ok())
        .collect();
    for mp in kube_io::list(client, &pools, namespace, "").await? {
        let members = capi::members(&mp, &nodes);
        println!(
            "\nMachinePool/{} status.nodeRefs ({}), as Cluster API matched them:",
            mp["metadata"]["name"].as_str().unwrap_or_default(),
            members.len()
        );
        for m in members {
            println!("  {}  {}", m.node, m.provider_id);
        }
    }
    for (kind, name) in targets
        .iter()
        .filter(|(k, _)| *k == captf_api::names::kinds::TERRAFORM_MACHINE_POOL)
    {
        let k = kube_io::resolve(client, captf_api::API_VERSION, kind).await?;
        if let Some(pool) = kube_io::get(client, &k, namespace, name).await? {
            let ids: Vec<&str> = pool
                .pointer("/spec/providerIDList")
                .and_then(Value::as_array)
                .map(|l| l.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            println!("\n{kind}/{name} spec.providerIDList ({}):", ids.len());
            for id in ids {
                println!("  {id}");
            }
        }
    }
    Ok(())
}
