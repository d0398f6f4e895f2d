//! The local Job executor, a stand-in: what a scheduler and a kubelet would
//! do for Pods, in a control plane without the real node (the second
//! control plane of the `clusterctl move` test, the scale benchmark).
//!
//! It registers a `Node`, watches Pods that carry the executor's label
//! selector (by default `captf.io/managed=true`, the label of every CAPTF
//! Job's Pod), binds each new one to its node through `pods/binding`, and
//! runs its containers for real: each in its own mount namespace, rooted in a
//! copy of a local folder that stands in for the container image (see
//! [`ImageMap`]), with the pod's volumes (Secrets, projected service-account
//! tokens, emptyDirs...) mounted where the spec says. It reports the pod's
//! status (running, then terminated with exit code, termination message and
//! `imageID`) so the real job controller completes or fails the Job, and it
//! answers a deletion with SIGTERM, SIGKILL after the grace period, and the
//! final zero-grace delete.
//!
//! Not emulated: user ids (containers run as the test process's user),
//! resource limits, probes, `subPath`, image entrypoints (containers must
//! have a `command`), restarts.

pub mod env;
pub mod images;
pub mod pod;
pub mod sandbox;
pub mod status;
pub mod volumes;

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node as NodeObject, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use tokio::sync::watch;

pub use images::{ImageMap, LocalImage};
pub use pod::Node;

/// Label selector of the pods the executor runs unless told otherwise.
pub const DEFAULT_SELECTOR: &str = "captf.io/managed=true";
/// Name of the node the executor registers.
pub const NODE_NAME: &str = "captf-local-executor";

async fn register_node(client: &kube::Client) -> Result<(), kube::Error> {
    let nodes: Api<NodeObject> = Api::all(client.clone());
    // Unschedulable: the executor binds its pods itself; a scheduler (the
    // real node's) must not bind pods here, which the executor then skips.
    let node: NodeObject = serde_json::from_value(serde_json::json!({
        "metadata": {"name": NODE_NAME, "labels": {"kubernetes.io/hostname": NODE_NAME}},
        "spec": {"unschedulable": true},
    }))
    .expect("static node");
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e),
    }
    let status = serde_json::json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "LocalExecutorReady",
                        "message": "the local Job executor runs this node's pods"}],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
    }});
    nodes
        .patch_status(NODE_NAME, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// Runs the executor until the future is dropped: registers the node, then
/// runs every matching pod that is not yet bound to a node.
pub async fn run(
    client: kube::Client,
    images: ImageMap,
    node: Node,
    selector: &str,
) -> Result<(), kube::Error> {
    register_node(&client).await?;
    let pods: Api<Pod> = Api::all(client.clone());
    let config = watcher::Config::default().labels(selector);
    let mut events = watcher(pods, config).boxed();
    // uid -> the sender that tells a running pod it is being deleted.
    let mut running: HashMap<String, watch::Sender<Option<Duration>>> = HashMap::new();
    while let Some(event) = events.next().await {
        let pod = match event {
            Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => pod,
            Ok(watcher::Event::Delete(pod)) => {
                if let Some(uid) = &pod.metadata.uid {
                    running.remove(uid);
                }
                continue;
            }
            Ok(_) => continue,
            Err(e) => {
                if crate::stopping() {
                    return Ok(());
                }
                eprintln!("[local-executor] watch error: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        if let Some(tx) = running.get(&uid) {
            if deleting && tx.borrow().is_none() {
                let _ = tx.send(Some(pod::grace_period(&pod)));
            }
            continue;
        }
        if node_name.is_some() || deleting {
            continue; // someone else's, or gone before it started
        }
        let (tx, rx) = watch::channel(None);
        running.insert(uid, tx);
        let run = pod::PodRun {
            client: client.clone(),
            images: images.clone(),
            node: node.clone(),
            pod,
            terminate: rx,
        };
        tokio::spawn(run.run());
    }
    Ok(())
}
