//! One pod's life on the local executor: bind, materialize volumes, run the
//! init containers in order and then the main containers, report status as a
//! kubelet would, and honour deletion with SIGTERM and a grace period.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Binding, Container, ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::sync::watch;

use super::images::{self, ImageMap};
use super::sandbox::{self, BindMount};
use super::status::{self, ContainerReport, Observed};
use super::volumes::{self, Lookup};

const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// How often a pod whose volumes cannot be built yet tries again.
const VOLUME_RETRY: Duration = Duration::from_secs(1);

/// What the executor knows about the cluster it runs pods for.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    /// `KUBERNETES_SERVICE_HOST` / `_PORT` given to every container, so
    /// in-cluster configuration reaches the apiserver.
    pub api_host: String,
    pub api_port: u16,
    pub work_dir: PathBuf,
}

pub struct PodRun {
    pub client: kube::Client,
    pub images: ImageMap,
    pub node: Node,
    pub pod: Pod,
    /// Flips to `Some(grace)` when the pod is being deleted.
    pub terminate: watch::Receiver<Option<Duration>>,
}

struct Progress {
    init: Vec<ContainerReport>,
    main: Vec<ContainerReport>,
    started: Timestamp,
}

impl PodRun {
    fn name(&self) -> String {
        self.pod.metadata.name.clone().unwrap_or_default()
    }

    fn namespace(&self) -> String {
        self.pod.metadata.namespace.clone().unwrap_or_default()
    }

    fn api(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace())
    }

    async fn bind(&self) -> Result<(), kube::Error> {
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(self.name()),
                ..Default::default()
            },
            target: ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Node".to_owned()),
                name: Some(self.node.name.clone()),
                ..Default::default()
            },
        };
        let _: serde_json::Value = self
            .api()
            .create_subresource("binding", &self.name(), &PostParams::default(), &binding)
            .await?;
        Ok(())
    }

    async fn report(&self, progress: &Progress) {
        let status = status::pod_status(
            &progress.init,
            &progress.main,
            "127.0.0.1",
            progress.started,
        );
        let patch = serde_json::json!({ "status": status });
        if let Err(e) = self
            .api()
            .patch_status(&self.name(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing_log(&format!(
                "pod {}/{}: status update failed: {e}",
                self.namespace(),
                self.name()
            ));
        }
    }

    /// Runs the pod to its end. Errors are reported in the pod status.
    pub async fn run(mut self) {
        if let Err(e) = self.bind().await {
            tracing_log(&format!(
                "pod {}/{}: binding failed: {e}",
                self.namespace(),
                self.name()
            ));
            return;
        }
        let spec = self.pod.spec.clone().unwrap_or_default();
        let mut progress = Progress {
            init: Vec::new(),
            main: Vec::new(),
            started: Timestamp::now(),
        };
        let uid = self.pod.metadata.uid.clone().unwrap_or_default();
        let pod_dir = self.node.work_dir.join(format!(
            "{}-{}-{}",
            self.namespace(),
            self.name(),
            &uid[..uid.len().min(8)]
        ));
        let lookup = Lookup {
            client: self.client.clone(),
            namespace: self.namespace(),
        };
        // Like a kubelet, keep trying while a volume's Secret or ConfigMap
        // is missing: it may be created right after the pod.
        let mut reported = String::new();
        let volumes = loop {
            match volumes::prepare(&lookup, &self.pod, &pod_dir.join("volumes")).await {
                Ok(v) => break v,
                Err(message) => {
                    if message != reported {
                        progress.main = spec
                            .containers
                            .iter()
                            .map(|c| self.waiting(c, "CreateContainerConfigError", &message))
                            .collect();
                        self.report(&progress).await;
                        reported = message;
                    }
                    if self.terminating() {
                        return self.finish_deletion().await;
                    }
                    tokio::select! {
                        _ = self.terminate.changed() => {}
                        _ = tokio::time::sleep(VOLUME_RETRY) => {}
                    }
                }
            }
        };
        // The waiting entries stood for containers that had not started;
        // each container now reports for itself.
        progress.main.clear();
        self.report(&progress).await;

        for c in spec.init_containers.iter().flatten() {
            let report = self
                .run_container(c, &volumes, &pod_dir, &lookup, &mut progress, true)
                .await;
            let ok = matches!(report.observed, Observed::Exited { exit_code: 0, .. });
            *progress.init.last_mut().expect("pushed by run_container") = report;
            self.report(&progress).await;
            if !ok || self.terminating() {
                return self.finish_deletion().await;
            }
        }
        // Main containers: one per CAPTF Job; run them in order of the spec.
        for c in &spec.containers {
            let report = self
                .run_container(c, &volumes, &pod_dir, &lookup, &mut progress, false)
                .await;
            *progress.main.last_mut().expect("pushed by run_container") = report;
            self.report(&progress).await;
        }
        let _ = std::fs::remove_dir_all(&pod_dir);
        self.finish_deletion().await;
    }

    fn terminating(&self) -> bool {
        self.terminate.borrow().is_some()
    }

    fn waiting(&self, c: &Container, reason: &str, message: &str) -> ContainerReport {
        ContainerReport {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            image_id: String::new(),
            observed: Observed::Waiting {
                reason: reason.to_owned(),
                message: message.to_owned(),
            },
        }
    }

    /// A pod being deleted is removed for good once its containers stopped,
    /// as a kubelet confirms with a zero grace period.
    async fn finish_deletion(&mut self) {
        if self.terminate.borrow().is_none() {
            // Wait: a pod that never ran (bad image) still needs its deletion
            // confirmed when it comes.
            if self.terminate.changed().await.is_err() {
                return;
            }
        }
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        let _ = self.api().delete(&self.name(), &dp).await;
    }

    async fn run_container(
        &self,
        c: &Container,
        volumes: &HashMap<String, PathBuf>,
        pod_dir: &Path,
        lookup: &Lookup,
        progress: &mut Progress,
        init: bool,
    ) -> ContainerReport {
        let image_ref = c.image.clone().unwrap_or_default();
        let slot = |p: &mut Progress, r: ContainerReport| {
            if init { p.init.push(r) } else { p.main.push(r) }
        };
        let Some(image) = self.images.get(&image_ref) else {
            let r = self.waiting(
                c,
                "ErrImagePull",
                &format!("image {image_ref} is not in the local executor's image map"),
            );
            slot(progress, r.clone());
            return r;
        };
        let prepared = self
            .prepare_container(c, &image.root, volumes, pod_dir, lookup)
            .await;
        let (mut child, rootfs) = match prepared {
            Ok(v) => v,
            Err(message) => {
                let r = self.waiting(c, "CreateContainerConfigError", &message);
                slot(progress, r.clone());
                return r;
            }
        };
        let image_id = images::image_id(&image_ref, &image.digest);
        let started = Timestamp::now();
        slot(
            progress,
            ContainerReport {
                name: c.name.clone(),
                image: image_ref.clone(),
                image_id: image_id.clone(),
                observed: Observed::Running { started },
            },
        );
        self.report(progress).await;

        let pid = child.id().map(|p| p as i32);
        let status = tokio::select! {
            status = child.wait() => status,
            grace = wait_terminate(self.terminate.clone()) => {
                if let Some(pid) = pid {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
                }
                match tokio::time::timeout(grace, child.wait()).await {
                    Ok(status) => status,
                    Err(_) => {
                        if let Some(pid) = pid {
                            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
                        }
                        child.wait().await
                    }
                }
            }
        };
        let exit_code = match status {
            Ok(s) => s.code().unwrap_or_else(|| {
                128 + std::os::unix::process::ExitStatusExt::signal(&s).unwrap_or(0)
            }),
            Err(_) => 128,
        };
        let message_path = c
            .termination_message_path
            .clone()
            .unwrap_or_else(|| DEFAULT_TERMINATION_MESSAGE_PATH.to_owned());
        let message = sandbox::inside(&rootfs, &message_path)
            .ok()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        ContainerReport {
            name: c.name.clone(),
            image: image_ref,
            image_id,
            observed: Observed::Exited {
                started,
                finished: Timestamp::now(),
                exit_code,
                message,
            },
        }
    }

    async fn prepare_container(
        &self,
        c: &Container,
        image_root: &Path,
        volumes: &HashMap<String, PathBuf>,
        pod_dir: &Path,
        lookup: &Lookup,
    ) -> Result<(tokio::process::Child, PathBuf), String> {
        let rootfs = pod_dir.join("containers").join(&c.name);
        images::materialize(image_root, &rootfs)
            .map_err(|e| format!("preparing the image: {e}"))?;
        let mut mounts = sandbox::system_mounts(&rootfs)?;
        for vm in c.volume_mounts.iter().flatten() {
            if vm.sub_path.is_some() || vm.sub_path_expr.is_some() {
                return Err(format!(
                    "volume mount {}: subPath is not supported by the local executor",
                    vm.name
                ));
            }
            let source = volumes
                .get(&vm.name)
                .ok_or_else(|| format!("volume mount {}: no such volume", vm.name))?;
            mounts.push(sandbox::volume_mount(
                &rootfs,
                BindMount {
                    source: source.clone(),
                    target: vm.mount_path.clone(),
                    read_only: vm.read_only.unwrap_or(false),
                    recursive: false,
                },
            )?);
        }
        let message_path = c
            .termination_message_path
            .clone()
            .unwrap_or_else(|| DEFAULT_TERMINATION_MESSAGE_PATH.to_owned());
        let message_file = sandbox::inside(&rootfs, &message_path)?;
        if let Some(parent) = message_file.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&message_file, b"")
            .map_err(|e| format!("{}: {e}", message_file.display()))?;

        let env = super::env::resolve(c, &self.pod, lookup, &self.node).await?;
        let argv: Vec<String> = c
            .command
            .iter()
            .flatten()
            .chain(c.args.iter().flatten())
            .cloned()
            .collect();
        let workdir = c.working_dir.clone().unwrap_or_else(|| "/".to_owned());
        // A kubelet's choice: `spec.hostname`, else the pod's name.
        let hostname = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.hostname.clone())
            .unwrap_or_else(|| self.name());
        let mut cmd = sandbox::command(&rootfs, &hostname, mounts, &argv, &env, &workdir)?;
        let log = pod_dir.join(format!("{}.log", c.name));
        let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        cmd.stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = tokio::process::Command::from(cmd)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", argv.join(" ")))?;
        Ok((child, rootfs))
    }
}

/// Resolves when the pod is marked for deletion, with its grace period.
async fn wait_terminate(mut rx: watch::Receiver<Option<Duration>>) -> Duration {
    loop {
        if let Some(grace) = *rx.borrow() {
            return grace;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The grace period of a pod being deleted.
pub fn grace_period(pod: &Pod) -> Duration {
    pod.metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .map_or(DEFAULT_GRACE, |s| Duration::from_secs(s.max(0) as u64))
}

fn tracing_log(message: &str) {
    eprintln!("[local-executor] {message}");
}
