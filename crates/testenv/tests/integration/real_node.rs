//! The real node: a pod created through the apiserver is bound by the
//! scheduler to the kubelet's Node and run by containerd and runc, with
//! the security context a CAPTF Job asks for enforced (the user and group,
//! the read-only root, the memory limit in the container's cgroup), and
//! reaches the apiserver through the `kubernetes` Service, as a runner
//! does.

use captf_testenv::node::images::SHELL_IMAGE;
use captf_testenv::{TestEnv, eventually};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, PostParams};
use serde_json::json;

/// What the container finds out about itself, as its termination message.
const SELF_REPORT: &str = r#"
uid=$(id -u); gid=$(id -g)
if touch /probe 2>/dev/null; then root=writable; else root=read-only; fi
limit=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)
if echo | nc -w 5 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT"; then api=connects; else api=unreachable; fi
echo "uid=$uid gid=$gid root=$root memory=$limit api=$api" > /dev/termination-log
"#;

/// The security settings of a CAPTF Job's pod (`jobs/build.rs`).
fn job_like_pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "self-report"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {
                "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
                "seccompProfile": {"type": "RuntimeDefault"}
            },
            "containers": [{
                "name": "source",
                "image": SHELL_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", SELF_REPORT],
                "resources": {"limits": {"memory": "64Mi", "cpu": "100m"}},
                "securityContext": {
                    "runAsNonRoot": true,
                    "readOnlyRootFilesystem": true,
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}
                }
            }]
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn a_pod_runs_on_the_real_kubelet_with_its_security_context_enforced() {
    let env = TestEnv::get().await;
    let pod = runs_a_job_like_pod(env).await;
    // The first node is the host's: its pods are on the first subnet.
    assert!(pod_ip(&pod).starts_with("10.88.0."), "{}", pod_ip(&pod));
}

/// A second control plane (as a move test starts) gets a node of its own,
/// in a network namespace of its own, while the first one's keeps running:
/// its pod runs the same way and reaches its own apiserver. A pod the
/// first node ran while the second one's namespace was made still goes
/// away when deleted (its sandbox's network namespace can be removed).
#[tokio::test]
async fn a_second_control_planes_pod_runs_on_its_own_node_beside_the_first() {
    let first = TestEnv::get().await;
    let first_node = first.real_node().await;
    let earlier_ns = first.namespace().await;
    let earlier = earlier_ns.api::<Pod>();
    earlier
        .create(&PostParams::default(), &sleeping_pod())
        .await
        .unwrap();
    eventually("the earlier pod running", 60, || async {
        let p = earlier.get("sleeper").await.ok()?;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;
    let second = TestEnv::second().await;
    let _ = second.real_node().await;
    earlier
        .delete("sleeper", &Default::default())
        .await
        .unwrap();
    eventually("the earlier pod gone", 60, || async {
        earlier
            .get_opt("sleeper")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let pod = runs_a_job_like_pod(second).await;
    let second_node = second.real_node().await;
    assert_ne!(second_node.name, first_node.name);
    assert!(pod_ip(&pod).starts_with("10.89.0."), "{}", pod_ip(&pod));
    // The first node still runs pods of its own.
    let again = runs_a_job_like_pod(first).await;
    assert!(pod_ip(&again).starts_with("10.88.0."), "{}", pod_ip(&again));
}

/// A pod that runs until it is deleted.
fn sleeping_pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "sleeper"},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "sleeper",
                "image": SHELL_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", "exec sleep 600"]
            }]
        }
    }))
    .unwrap()
}

fn pod_ip(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default()
}

/// Runs the Job-like pod in a namespace of `env` on `env`'s real node and
/// checks what it saw of itself; returns the finished pod.
async fn runs_a_job_like_pod(env: &'static TestEnv) -> Pod {
    let node = env.real_node().await;
    eprintln!("node started in {:.1} s", node.started_in.as_secs_f64());
    let ns = env.namespace().await;
    let pods = ns.api::<Pod>();
    pods.create(&PostParams::default(), &job_like_pod())
        .await
        .unwrap();
    let watched = pods.clone();
    let finished = async move {
        eventually("the pod to finish", 60, || async {
            let p = watched.get("self-report").await.ok()?;
            let phase = p.status.as_ref()?.phase.clone()?;
            (phase == "Succeeded" || phase == "Failed").then_some(p)
        })
        .await
    };
    let pod = match tokio::spawn(finished).await {
        Ok(pod) => pod,
        Err(e) => {
            let now = pods.get("self-report").await.ok();
            panic!(
                "{e}\npod: {}\n{}",
                serde_json::to_string_pretty(&now.and_then(|p| p.status)).unwrap(),
                node.logs(40)
            );
        }
    };
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(
        spec.node_name.as_deref(),
        Some(node.name.as_str()),
        "bound by the scheduler"
    );
    let status = pod.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
    let container = &status.container_statuses.as_ref().unwrap()[0];
    let report = container
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.message.clone())
        .unwrap_or_default();
    assert_eq!(
        report.trim(),
        format!(
            "uid=65532 gid=65532 root=read-only memory={} api=connects",
            64 * 1024 * 1024
        ),
        "what the container saw of itself"
    );
    // What the Service address leads to: the apiserver, advertised on the
    // host's address (busybox's TLS client shares no cipher suite with
    // the apiserver, so the pod only connects).
    let slices: Api<EndpointSlice> = Api::namespaced(env.client(), "default");
    let slice = slices.get("kubernetes").await.unwrap();
    let addresses: Vec<String> = slice
        .endpoints
        .iter()
        .flat_map(|e| e.addresses.clone())
        .collect();
    let host = captf_testenv::control_plane::host_address().unwrap();
    assert_eq!(
        addresses,
        [host.to_string()],
        "the apiserver's advertised address"
    );
    // Imported with its digest: the runtime reports it as a pull would.
    assert!(
        container.image_id.starts_with("captf.test/shell@sha256:"),
        "{}",
        container.image_id
    );
    pod
}
