//! The Job that runs one operation: a pure function from a request to the
//! `batch/v1` Job, pinned by golden files. An init container copies the
//! runner into the pod; the module image's container runs it.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvFromSource, EnvVar, KeyToPath, LocalObjectReference,
    PodSecurityContext, PodSpec, PodTemplateSpec, ProjectedVolumeSource, ResourceRequirements,
    SeccompProfile, SecretEnvSource, SecretProjection, SecretVolumeSource, SecurityContext, Volume,
    VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use captf_api::admission::is_reserved_env_name;
use captf_api::names::{annotations, labels};

use super::args::{CONFIG_DIR, RunnerArgs};
use crate::engine::decide::Op;
use crate::names::{WorkloadKind, name_label};

/// Pod grace period: the runner stops the runtime 30 s before it ends.
pub const TERMINATION_GRACE_SECONDS: i64 = 600;
/// UID and group of the runner init container and the pod's volumes.
pub const RUNNER_UID: i64 = 65532;
/// The group the Job's processes run with unless the Job policy names one:
/// an image's `65532:65532` reaches the runtime as the UID only, and with
/// no `/etc/passwd` in the image the process would run with group 0.
pub const RUNNER_GID: i64 = 65532;
const BIN_DIR: &str = "/captf/bin";
const WORK_DIR: &str = "/captf/work";
const CREDENTIALS_DIR: &str = "/var/run/captf/credentials";
const PLAN_KEY_DIR: &str = "/captf/plan-key";
const SECRET_MODE: i32 = 0o440;

/// A backup chunk projected into a restore Job's config volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreChunk {
    pub secret: String,
}

/// Everything the Job is built from (the effective policy already resolved).
#[derive(Debug, Clone, PartialEq)]
pub struct JobBlueprint {
    pub kind: WorkloadKind,
    pub owner: OwnerReference,
    pub namespace: String,
    pub cluster_name: String,
    pub job_name: String,
    pub attempt: u32,
    pub runner: RunnerArgs,
    pub runner_image: String,
    pub image_pull_policy: Option<String>,
    pub inputs_hash: Option<String>,
    /// Restore: the backup's serial and chunks, in order.
    pub restore: Option<(u64, Vec<RestoreChunk>)>,
    /// Engine annotations (remediation, approvals, ...).
    pub annotations: BTreeMap<String, String>,
    pub active_deadline_seconds: i64,
    pub service_account: String,
    pub image_pull_secrets: Vec<String>,
    pub resources: Option<ResourceRequirements>,
    pub env: Vec<EnvVar>,
    pub security_context: Option<SecurityContext>,
    pub pod_security_context: Option<PodSecurityContext>,
    /// The credential mirror Secret, when the object uses an identity.
    pub credentials_secret: Option<String>,
    /// The plan key Secret, when this Job mounts it.
    pub plan_key_secret: Option<String>,
}

/// The Job, and the user env names it dropped as reserved.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltJob {
    pub job: Job,
    pub dropped_env: Vec<String>,
}

fn q(s: &str) -> Quantity {
    Quantity(s.to_owned())
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

fn empty_dir(name: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        empty_dir: Some(Default::default()),
        ..Default::default()
    }
}

fn secret_volume(name: &str, secret: &str, items: Option<Vec<KeyToPath>>) -> Volume {
    Volume {
        name: name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_owned()),
            default_mode: Some(SECRET_MODE),
            items,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The hardened defaults of the `source` container, with the user's fields
/// laid over them; dropping every capability is always kept.
fn source_security_context(user: Option<&SecurityContext>) -> SecurityContext {
    let mut sc = user.cloned().unwrap_or_default();
    sc.allow_privilege_escalation.get_or_insert(false);
    sc.read_only_root_filesystem.get_or_insert(true);
    let caps = sc.capabilities.get_or_insert_with(Capabilities::default);
    let drop = caps.drop.get_or_insert_with(Vec::new);
    if !drop.iter().any(|c| c == "ALL") {
        drop.insert(0, "ALL".to_owned());
    }
    sc
}

/// The pod's defaults (seccomp, the user and group of its processes and
/// the group of mounted files), with the user's fields laid over them. The
/// user is set with the group: containerd refuses to start a pod whose
/// group is given without a user ("user group is specified without user").
fn pod_security_context(user: Option<&PodSecurityContext>) -> PodSecurityContext {
    let mut sc = user.cloned().unwrap_or_default();
    sc.seccomp_profile.get_or_insert(SeccompProfile {
        type_: "RuntimeDefault".to_owned(),
        ..Default::default()
    });
    sc.fs_group.get_or_insert(RUNNER_GID);
    sc.run_as_user.get_or_insert(RUNNER_UID);
    sc.run_as_group.get_or_insert(RUNNER_GID);
    sc
}

fn default_resources() -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(
            [
                ("cpu".to_owned(), q("250m")),
                ("memory".to_owned(), q("2Gi")),
            ]
            .into(),
        ),
        limits: Some([("memory".to_owned(), q("2Gi"))].into()),
        ..Default::default()
    }
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..Default::default()
    }
}

/// Builds the Job of `req`.
pub fn build(req: &JobBlueprint) -> BuiltJob {
    let op = req.runner.op;
    let mut labels = BTreeMap::from([
        (labels::OWNER_KIND.to_owned(), req.kind.kind().to_owned()),
        (labels::OWNER_NAME.to_owned(), name_label(&req.owner.name)),
        (
            labels::CLUSTER_NAME.to_owned(),
            name_label(&req.cluster_name),
        ),
        (labels::MANAGED.to_owned(), "true".to_owned()),
        (labels::JOB_OP.to_owned(), op.as_str().to_owned()),
        (labels::JOB_ATTEMPT.to_owned(), req.attempt.to_string()),
    ]);
    labels.retain(|_, v| !v.is_empty());

    let mut annotations = req.annotations.clone();
    if matches!(op, Op::Apply | Op::Restore | Op::Plan)
        && let Some(h) = &req.inputs_hash
    {
        annotations.insert(annotations::INPUTS_HASH.to_owned(), h.clone());
    }
    if let Some((serial, _)) = &req.restore {
        annotations.insert(annotations::RESTORE_SERIAL.to_owned(), serial.to_string());
    }
    let pod_annotations = matches!(op, Op::Apply | Op::Destroy | Op::Restore)
        .then(|| BTreeMap::from([(annotations::SAFE_TO_EVICT.to_owned(), "false".to_owned())]));

    let mut env_vars = vec![
        env("TF_IN_AUTOMATION", "1"),
        env("TF_INPUT", "0"),
        env("HOME", WORK_DIR),
        env("TMPDIR", "/tmp"),
        env("KUBE_NAMESPACE", &req.namespace),
        env("CHECKPOINT_DISABLE", "1"),
    ];
    let mut dropped_env = Vec::new();
    for e in &req.env {
        if is_reserved_env_name(&e.name) {
            dropped_env.push(e.name.clone());
        } else {
            env_vars.push(e.clone());
        }
    }

    let run_secret = format!("captf-run-{}", req.job_name);
    let config = match &req.restore {
        None => secret_volume("config", &run_secret, None),
        Some((_, chunks)) => {
            let mut sources = vec![VolumeProjection {
                secret: Some(SecretProjection {
                    name: run_secret.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            }];
            sources.extend(chunks.iter().enumerate().map(|(i, c)| VolumeProjection {
                secret: Some(SecretProjection {
                    name: c.secret.clone(),
                    items: Some(vec![KeyToPath {
                        key: "tfstate".to_owned(),
                        path: format!("restore/{i}"),
                        mode: None,
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            }));
            Volume {
                name: "config".to_owned(),
                projected: Some(ProjectedVolumeSource {
                    default_mode: Some(SECRET_MODE),
                    sources: Some(sources),
                }),
                ..Default::default()
            }
        }
    };
    let mut volumes = vec![
        empty_dir("runner"),
        empty_dir("work"),
        empty_dir("tmp"),
        config,
    ];
    let mut mounts = vec![
        mount("runner", BIN_DIR, true),
        mount("work", WORK_DIR, false),
        mount("tmp", "/tmp", false),
        mount("config", CONFIG_DIR, true),
    ];
    let mut env_from = None;
    if let Some(creds) = &req.credentials_secret {
        volumes.push(secret_volume("creds", creds, None));
        mounts.push(mount("creds", CREDENTIALS_DIR, true));
        env_from = Some(vec![EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: creds.clone(),
                optional: None,
            }),
            ..Default::default()
        }]);
    }
    if let Some(key) = &req.plan_key_secret {
        let items = vec![KeyToPath {
            key: "key".to_owned(),
            path: "key".to_owned(),
            mode: None,
        }];
        volumes.push(secret_volume("plan-key", key, Some(items)));
        mounts.push(mount("plan-key", PLAN_KEY_DIR, true));
    }

    // De-duplicated in the user's order, empties dropped.
    let mut pull_secrets: Vec<String> = Vec::new();
    for s in &req.image_pull_secrets {
        if !s.is_empty() && !pull_secrets.contains(s) {
            pull_secrets.push(s.clone());
        }
    }

    let runner_container = Container {
        name: "runner".to_owned(),
        image: Some(req.runner_image.clone()),
        command: Some(vec![
            "/runner".to_owned(),
            "copy".to_owned(),
            format!("{BIN_DIR}/runner"),
        ]),
        resources: Some(ResourceRequirements {
            requests: Some(
                [
                    ("cpu".to_owned(), q("10m")),
                    ("memory".to_owned(), q("32Mi")),
                ]
                .into(),
            ),
            limits: Some(
                [
                    ("cpu".to_owned(), q("100m")),
                    ("memory".to_owned(), q("64Mi")),
                ]
                .into(),
            ),
            ..Default::default()
        }),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(RUNNER_UID),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                add: None,
            }),
            ..Default::default()
        }),
        volume_mounts: Some(vec![mount("runner", BIN_DIR, false)]),
        ..Default::default()
    };
    let source = Container {
        name: "source".to_owned(),
        image: Some(req.runner.image.clone()),
        image_pull_policy: req.image_pull_policy.clone(),
        command: Some(vec![format!("{BIN_DIR}/runner"), "run".to_owned()]),
        args: Some(req.runner.to_args()),
        env: Some(env_vars),
        env_from,
        resources: Some(req.resources.clone().unwrap_or_else(default_resources)),
        security_context: Some(source_security_context(req.security_context.as_ref())),
        termination_message_policy: Some("File".to_owned()),
        volume_mounts: Some(mounts),
        ..Default::default()
    };

    let job = Job {
        metadata: ObjectMeta {
            name: Some(req.job_name.clone()),
            namespace: Some(req.namespace.clone()),
            labels: Some(labels.clone()),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![OwnerReference {
                controller: Some(true),
                block_owner_deletion: Some(true),
                ..req.owner.clone()
            }]),
            ..Default::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: Some(req.active_deadline_seconds),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: pod_annotations,
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_owned()),
                    termination_grace_period_seconds: Some(TERMINATION_GRACE_SECONDS),
                    service_account_name: Some(req.service_account.clone()),
                    image_pull_secrets: (!pull_secrets.is_empty()).then(|| {
                        pull_secrets
                            .into_iter()
                            .map(|name| LocalObjectReference { name })
                            .collect()
                    }),
                    security_context: Some(pod_security_context(req.pod_security_context.as_ref())),
                    init_containers: Some(vec![runner_container]),
                    containers: vec![source],
                    volumes: Some(volumes),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    };
    BuiltJob { job, dropped_env }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;

    fn request(op: Op) -> JobBlueprint {
        let job_name = "captf-mp-pool-a-apply-a1-abcdef".to_owned();
        JobBlueprint {
            kind: WorkloadKind::MachinePool,
            owner: OwnerReference {
                api_version: "infrastructure.cluster.x-k8s.io/v1alpha1".into(),
                kind: "TerraformMachinePool".into(),
                name: "pool-a".into(),
                uid: "uid-1".into(),
                ..Default::default()
            },
            namespace: "team-a".into(),
            cluster_name: "prod".into(),
            job_name: job_name.clone(),
            attempt: 1,
            runner: RunnerArgs {
                op,
                image: "ghcr.io/captf-io/oci-machinepool:v1.0.0-tofu".into(),
                namespace: "team-a".into(),
                state_suffix: "0123456789abcdef-mp".into(),
                state_labels: BTreeMap::from([("captf.io/managed".into(), "true".into())]),
                lock_timeout: Duration::from_secs(300),
                stop_timeout: Duration::from_secs(570),
                force_unlock: None,
                guard: None,
                guard_deletes: false,
                restore: None,
                plan_key: false,
                event_object: None,
                quiet_events: false,
            },
            runner_image: "ghcr.io/captf-io/captf-manager:v0.1.0".into(),
            image_pull_policy: Some("IfNotPresent".into()),
            inputs_hash: Some("h2:abc".into()),
            restore: None,
            annotations: BTreeMap::new(),
            active_deadline_seconds: 3600,
            service_account: "captf-runner".into(),
            image_pull_secrets: vec![
                "regcred".into(),
                "".into(),
                "regcred".into(),
                "other".into(),
            ],
            resources: None,
            env: vec![
                env("OCI_REGION", "eu-frankfurt-1"),
                env("TF_LOG", "DEBUG"),
                env("HOME", "/root"),
            ],
            security_context: None,
            pod_security_context: None,
            credentials_secret: Some("captf-creds-oci".into()),
            plan_key_secret: None,
        }
    }

    fn golden(name: &str, job: &Job) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/jobs/testdata")
            .join(name);
        let got = serde_yaml::to_string(job).unwrap();
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, &got).unwrap();
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
        assert_eq!(
            got,
            want,
            "{} differs (UPDATE_GOLDEN=1 rewrites it)",
            path.display()
        );
    }

    #[test]
    fn pool_apply_job() {
        let built = build(&request(Op::Apply));
        assert_eq!(built.dropped_env, ["TF_LOG", "HOME"]);
        golden("pool-apply.yaml", &built.job);
    }

    #[test]
    fn restore_job_projects_backup_chunks() {
        let mut req = request(Op::Restore);
        req.runner.restore = Some((2, 4));
        req.restore = Some((
            17,
            vec![
                RestoreChunk {
                    secret: "captf-state-backup-0123456789abcdef-mp-17".into(),
                },
                RestoreChunk {
                    secret: "captf-state-backup-0123456789abcdef-mp-17-part-1".into(),
                },
            ],
        ));
        golden("pool-restore.yaml", &build(&req).job);
    }

    #[test]
    fn plan_job_mounts_the_plan_key_and_is_evictable() {
        let mut req = request(Op::Plan);
        req.runner.plan_key = true;
        req.plan_key_secret = Some("captf-plankey-mp-pool-a".into());
        let job = build(&req).job;
        let pod = job.spec.as_ref().unwrap().template.clone();
        assert_eq!(pod.metadata.unwrap().annotations, None);
        let spec = pod.spec.unwrap();
        let source = &spec.containers[0];
        assert!(
            source
                .args
                .as_ref()
                .unwrap()
                .contains(&"--plan-key-file=/captf/plan-key/key".to_owned())
        );
        let mounts: Vec<&str> = source
            .volume_mounts
            .as_ref()
            .unwrap()
            .iter()
            .map(|m| m.mount_path.as_str())
            .collect();
        assert!(mounts.contains(&"/captf/plan-key"));
        let key = spec
            .volumes
            .unwrap()
            .into_iter()
            .find(|v| v.name == "plan-key")
            .unwrap();
        let secret = key.secret.unwrap();
        assert_eq!(secret.default_mode, Some(0o440));
        assert_eq!(secret.items.unwrap()[0].key, "key");
    }

    #[test]
    fn user_security_fields_overlay_the_defaults_but_never_regain_capabilities() {
        let mut req = request(Op::Destroy);
        req.security_context = Some(SecurityContext {
            run_as_user: Some(1000),
            read_only_root_filesystem: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["NET_RAW".into()]),
                add: None,
            }),
            ..Default::default()
        });
        req.pod_security_context = Some(PodSecurityContext {
            fs_group: Some(2000),
            run_as_group: Some(3000),
            ..Default::default()
        });
        let job = build(&req).job;
        let spec = job.spec.unwrap().template.spec.unwrap();
        let sc = spec.containers[0].security_context.clone().unwrap();
        assert_eq!(sc.run_as_user, Some(1000));
        assert_eq!(sc.read_only_root_filesystem, Some(false));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.capabilities.unwrap().drop.unwrap(), ["ALL", "NET_RAW"]);
        let pod = spec.security_context.unwrap();
        assert_eq!(pod.fs_group, Some(2000));
        assert_eq!(pod.run_as_group, Some(3000));
        assert_eq!(pod.seccomp_profile.unwrap().type_, "RuntimeDefault");
    }

    #[test]
    fn the_pod_runs_as_65532_in_group_65532_unless_the_policy_names_them() {
        let job = build(&request(Op::Apply)).job;
        let pod = job.spec.unwrap().template.spec.unwrap();
        let sc = pod.security_context.unwrap();
        assert_eq!(sc.fs_group, Some(RUNNER_GID));
        // Never a group without a user: containerd refuses that pod.
        assert_eq!(
            (sc.run_as_user, sc.run_as_group),
            (Some(RUNNER_UID), Some(RUNNER_GID))
        );
        let mut req = request(Op::Apply);
        req.pod_security_context = Some(PodSecurityContext {
            run_as_user: Some(1000),
            ..Default::default()
        });
        let sc = build(&req)
            .job
            .spec
            .unwrap()
            .template
            .spec
            .unwrap()
            .security_context
            .unwrap();
        assert_eq!(
            (sc.run_as_user, sc.run_as_group),
            (Some(1000), Some(RUNNER_GID))
        );
    }
}
