//! Rules for a Job policy: it may tune the Job but never weaken the
//! hardened security context, never set environment the runner owns, and
//! must let the state lock wait end before the Job's deadline.

use k8s_openapi::api::core::v1::{
    AppArmorProfile, PodSecurityContext, SELinuxOptions, SeccompProfile, SecurityContext,
    WindowsSecurityContextOptions,
};

use super::{ViolationKind, Violations};
use crate::common::JobPolicy;
use crate::effective::{DEFAULT_ACTIVE_DEADLINE_SECONDS, DEFAULT_LOCK_TIMEOUT_SECONDS};

/// Environment names the runner and Job builder own.
pub const RESERVED_ENV_NAMES: &[&str] = &["HOME", "TMPDIR", "CHECKPOINT_DISABLE"];
/// Environment name prefixes the runner and Job builder own.
pub const RESERVED_ENV_PREFIXES: &[&str] = &["TF_", "KUBE_", "KUBERNETES_"];

pub fn is_reserved_env_name(name: &str) -> bool {
    RESERVED_ENV_NAMES.contains(&name) || RESERVED_ENV_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// SELinux types a container may run as.
const ALLOWED_SELINUX_TYPES: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

/// Sysctls of the Pod Security Standards baseline safe set.
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// Every rule for the policy at `field`.
pub(crate) fn check(v: &mut Violations, field: &str, jobs: &JobPolicy) {
    check_timing(v, field, jobs);
    for (i, env) in jobs.env.iter().flatten().enumerate() {
        if is_reserved_env_name(&env.name) {
            v.push(
                format!("{field}.env[{i}].name"),
                ViolationKind::Forbidden,
                "TF_*, KUBE_*, KUBERNETES_*, HOME, TMPDIR and CHECKPOINT_DISABLE are set by the runner",
            );
        }
    }
    if let Some(sc) = &jobs.security_context {
        check_container(v, &format!("{field}.securityContext"), sc);
    }
    if let Some(psc) = &jobs.pod_security_context {
        check_pod(v, &format!("{field}.podSecurityContext"), psc);
    }
}

fn check_timing(v: &mut Violations, field: &str, jobs: &JobPolicy) {
    let deadline = jobs.active_deadline_seconds.filter(|d| *d > 0);
    let lock = jobs.lock_timeout_seconds;
    match (lock, deadline) {
        (Some(lock), Some(deadline)) if i64::from(lock) >= deadline => v.push(
            format!("{field}.lockTimeoutSeconds"),
            ViolationKind::Invalid,
            "must be less than activeDeadlineSeconds",
        ),
        (None, Some(deadline)) if deadline <= i64::from(DEFAULT_LOCK_TIMEOUT_SECONDS) => v.push(
            format!("{field}.activeDeadlineSeconds"),
            ViolationKind::Invalid,
            format!(
                "must be greater than the built-in lockTimeoutSeconds ({DEFAULT_LOCK_TIMEOUT_SECONDS}) when lockTimeoutSeconds is unset"
            ),
        ),
        (Some(lock), None) if i64::from(lock) >= DEFAULT_ACTIVE_DEADLINE_SECONDS => v.push(
            format!("{field}.lockTimeoutSeconds"),
            ViolationKind::Invalid,
            format!(
                "must be less than the built-in activeDeadlineSeconds ({DEFAULT_ACTIVE_DEADLINE_SECONDS}) when activeDeadlineSeconds is unset"
            ),
        ),
        _ => {}
    }
}

fn forbid(v: &mut Violations, field: String, detail: &str) {
    v.push(field, ViolationKind::Forbidden, detail);
}

fn check_container(v: &mut Violations, field: &str, sc: &SecurityContext) {
    if sc.privileged == Some(true) {
        forbid(
            v,
            format!("{field}.privileged"),
            "privileged containers are not allowed",
        );
    }
    if sc.allow_privilege_escalation == Some(true) {
        forbid(
            v,
            format!("{field}.allowPrivilegeEscalation"),
            "privilege escalation is not allowed",
        );
    }
    if sc
        .capabilities
        .as_ref()
        .and_then(|c| c.add.as_ref())
        .is_some_and(|add| !add.is_empty())
    {
        forbid(
            v,
            format!("{field}.capabilities.add"),
            "adding capabilities is not allowed",
        );
    }
    if sc.read_only_root_filesystem == Some(false) {
        forbid(
            v,
            format!("{field}.readOnlyRootFilesystem"),
            "the root filesystem must stay read-only",
        );
    }
    if sc.proc_mount.as_deref() == Some("Unmasked") {
        forbid(
            v,
            format!("{field}.procMount"),
            "an unmasked /proc is not allowed",
        );
    }
    check_shared(
        v,
        field,
        Shared {
            run_as_non_root: sc.run_as_non_root,
            run_as_user: sc.run_as_user,
            seccomp: sc.seccomp_profile.as_ref(),
            app_armor: sc.app_armor_profile.as_ref(),
            se_linux: sc.se_linux_options.as_ref(),
            windows: sc.windows_options.as_ref(),
        },
    );
}

fn check_pod(v: &mut Violations, field: &str, psc: &PodSecurityContext) {
    check_shared(
        v,
        field,
        Shared {
            run_as_non_root: psc.run_as_non_root,
            run_as_user: psc.run_as_user,
            seccomp: psc.seccomp_profile.as_ref(),
            app_armor: psc.app_armor_profile.as_ref(),
            se_linux: psc.se_linux_options.as_ref(),
            windows: psc.windows_options.as_ref(),
        },
    );
    for (i, sysctl) in psc.sysctls.iter().flatten().enumerate() {
        if !SAFE_SYSCTLS.contains(&sysctl.name.as_str()) {
            forbid(
                v,
                format!("{field}.sysctls[{i}].name"),
                "only sysctls of the Pod Security Standards baseline safe set are allowed",
            );
        }
    }
}

/// Settings container and pod security contexts have in common.
struct Shared<'a> {
    run_as_non_root: Option<bool>,
    run_as_user: Option<i64>,
    seccomp: Option<&'a SeccompProfile>,
    app_armor: Option<&'a AppArmorProfile>,
    se_linux: Option<&'a SELinuxOptions>,
    windows: Option<&'a WindowsSecurityContextOptions>,
}

fn check_shared(v: &mut Violations, field: &str, s: Shared<'_>) {
    if s.run_as_non_root == Some(false) {
        forbid(v, format!("{field}.runAsNonRoot"), "must not be false");
    }
    if s.run_as_user == Some(0) {
        forbid(
            v,
            format!("{field}.runAsUser"),
            "running as root (UID 0) is not allowed",
        );
    }
    if s.seccomp.is_some_and(|p| p.type_ == "Unconfined") {
        forbid(
            v,
            format!("{field}.seccompProfile.type"),
            "an Unconfined seccomp profile is not allowed",
        );
    }
    if s.app_armor.is_some_and(|p| p.type_ == "Unconfined") {
        forbid(
            v,
            format!("{field}.appArmorProfile.type"),
            "an Unconfined AppArmor profile is not allowed",
        );
    }
    if let Some(se) = s.se_linux {
        if !ALLOWED_SELINUX_TYPES.contains(&se.type_.as_deref().unwrap_or("")) {
            forbid(
                v,
                format!("{field}.seLinuxOptions.type"),
                "only container_t, container_init_t, container_kvm_t and container_engine_t are allowed",
            );
        }
        if se.user.as_deref().is_some_and(|u| !u.is_empty()) {
            forbid(
                v,
                format!("{field}.seLinuxOptions.user"),
                "setting an SELinux user is not allowed",
            );
        }
        if se.role.as_deref().is_some_and(|r| !r.is_empty()) {
            forbid(
                v,
                format!("{field}.seLinuxOptions.role"),
                "setting an SELinux role is not allowed",
            );
        }
    }
    if s.windows.and_then(|w| w.host_process) == Some(true) {
        forbid(
            v,
            format!("{field}.windowsOptions.hostProcess"),
            "Windows host processes are not allowed",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Capabilities, EnvVar, Sysctl};

    fn fields(jobs: &JobPolicy) -> Vec<String> {
        let mut v = Violations::default();
        check(&mut v, "spec.jobs", jobs);
        v.0.into_iter().map(|x| x.field).collect()
    }

    fn with_container(sc: SecurityContext) -> JobPolicy {
        JobPolicy {
            security_context: Some(sc),
            ..JobPolicy::default()
        }
    }

    fn with_pod(psc: PodSecurityContext) -> JobPolicy {
        JobPolicy {
            pod_security_context: Some(psc),
            ..JobPolicy::default()
        }
    }

    #[test]
    fn hardened_or_tightened_contexts_pass() {
        let sc = SecurityContext {
            privileged: Some(false),
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            run_as_user: Some(1000),
            proc_mount: Some("Default".into()),
            capabilities: Some(Capabilities {
                add: Some(vec![]),
                drop: Some(vec!["ALL".into()]),
            }),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                localhost_profile: None,
            }),
            se_linux_options: Some(SELinuxOptions {
                type_: Some("container_t".into()),
                ..SELinuxOptions::default()
            }),
            ..SecurityContext::default()
        };
        assert!(fields(&with_container(sc)).is_empty());
        let psc = PodSecurityContext {
            run_as_non_root: Some(true),
            fs_group: Some(65532),
            sysctls: Some(vec![Sysctl {
                name: "net.ipv4.tcp_syncookies".into(),
                value: "1".into(),
            }]),
            ..PodSecurityContext::default()
        };
        assert!(fields(&with_pod(psc)).is_empty());
        assert!(fields(&JobPolicy::default()).is_empty());
    }

    #[test]
    fn each_container_weakening_is_refused() {
        let cases: Vec<(SecurityContext, &str)> = vec![
            (
                SecurityContext {
                    privileged: Some(true),
                    ..Default::default()
                },
                "privileged",
            ),
            (
                SecurityContext {
                    allow_privilege_escalation: Some(true),
                    ..Default::default()
                },
                "allowPrivilegeEscalation",
            ),
            (
                SecurityContext {
                    capabilities: Some(Capabilities {
                        add: Some(vec!["NET_ADMIN".into()]),
                        drop: None,
                    }),
                    ..Default::default()
                },
                "capabilities.add",
            ),
            (
                SecurityContext {
                    read_only_root_filesystem: Some(false),
                    ..Default::default()
                },
                "readOnlyRootFilesystem",
            ),
            (
                SecurityContext {
                    proc_mount: Some("Unmasked".into()),
                    ..Default::default()
                },
                "procMount",
            ),
            (
                SecurityContext {
                    run_as_non_root: Some(false),
                    ..Default::default()
                },
                "runAsNonRoot",
            ),
            (
                SecurityContext {
                    run_as_user: Some(0),
                    ..Default::default()
                },
                "runAsUser",
            ),
            (
                SecurityContext {
                    seccomp_profile: Some(SeccompProfile {
                        type_: "Unconfined".into(),
                        localhost_profile: None,
                    }),
                    ..Default::default()
                },
                "seccompProfile.type",
            ),
            (
                SecurityContext {
                    app_armor_profile: Some(AppArmorProfile {
                        type_: "Unconfined".into(),
                        localhost_profile: None,
                    }),
                    ..Default::default()
                },
                "appArmorProfile.type",
            ),
            (
                SecurityContext {
                    se_linux_options: Some(SELinuxOptions {
                        type_: Some("spc_t".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                "seLinuxOptions.type",
            ),
            (
                SecurityContext {
                    se_linux_options: Some(SELinuxOptions {
                        user: Some("system_u".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                "seLinuxOptions.user",
            ),
            (
                SecurityContext {
                    se_linux_options: Some(SELinuxOptions {
                        role: Some("system_r".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                "seLinuxOptions.role",
            ),
            (
                SecurityContext {
                    windows_options: Some(WindowsSecurityContextOptions {
                        host_process: Some(true),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                "windowsOptions.hostProcess",
            ),
        ];
        for (sc, suffix) in cases {
            assert_eq!(
                fields(&with_container(sc)),
                [format!("spec.jobs.securityContext.{suffix}")]
            );
        }
    }

    #[test]
    fn each_pod_weakening_is_refused() {
        let cases: Vec<(PodSecurityContext, &str)> = vec![
            (
                PodSecurityContext {
                    run_as_non_root: Some(false),
                    ..Default::default()
                },
                "runAsNonRoot",
            ),
            (
                PodSecurityContext {
                    run_as_user: Some(0),
                    ..Default::default()
                },
                "runAsUser",
            ),
            (
                PodSecurityContext {
                    seccomp_profile: Some(SeccompProfile {
                        type_: "Unconfined".into(),
                        localhost_profile: None,
                    }),
                    ..Default::default()
                },
                "seccompProfile.type",
            ),
            (
                PodSecurityContext {
                    windows_options: Some(WindowsSecurityContextOptions {
                        host_process: Some(true),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                "windowsOptions.hostProcess",
            ),
            (
                PodSecurityContext {
                    sysctls: Some(vec![Sysctl {
                        name: "kernel.msgmax".into(),
                        value: "1".into(),
                    }]),
                    ..Default::default()
                },
                "sysctls[0].name",
            ),
        ];
        for (psc, suffix) in cases {
            assert_eq!(
                fields(&with_pod(psc)),
                [format!("spec.jobs.podSecurityContext.{suffix}")]
            );
        }
    }

    #[test]
    fn lock_timeout_must_end_before_the_deadline() {
        let policy = |lock: Option<i32>, deadline: Option<i64>| JobPolicy {
            lock_timeout_seconds: lock,
            active_deadline_seconds: deadline,
            ..JobPolicy::default()
        };
        let cases: &[(Option<i32>, Option<i64>, &[&str])] = &[
            (Some(300), Some(3600), &[]),
            (Some(0), Some(1), &[]),
            (Some(600), Some(600), &["spec.jobs.lockTimeoutSeconds"]),
            (None, Some(301), &[]),
            (None, Some(300), &["spec.jobs.activeDeadlineSeconds"]),
            (Some(3599), None, &[]),
            (Some(4000), None, &["spec.jobs.lockTimeoutSeconds"]),
            (None, None, &[]),
        ];
        for &(lock, deadline, want) in cases {
            assert_eq!(
                fields(&policy(lock, deadline)),
                want,
                "{lock:?} {deadline:?}"
            );
        }
    }

    #[test]
    fn reserved_env_names_are_refused() {
        let env = |name: &str| EnvVar {
            name: name.into(),
            value: Some("v".into()),
            value_from: None,
        };
        let jobs = JobPolicy {
            env: Some(
                [
                    "AWS_REGION",
                    "TF_LOG",
                    "KUBE_X",
                    "KUBERNETES_SERVICE_HOST",
                    "HOME",
                    "TMPDIR",
                    "CHECKPOINT_DISABLE",
                    "HOMEDIR",
                ]
                .into_iter()
                .map(env)
                .collect(),
            ),
            ..JobPolicy::default()
        };
        let got = fields(&jobs);
        assert_eq!(got.len(), 6);
        assert!(!got.contains(&"spec.jobs.env[0].name".to_string()));
        assert!(!got.contains(&"spec.jobs.env[7].name".to_string()));
    }
}
