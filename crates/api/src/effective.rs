//! Effective configuration: the policy a module object actually runs with,
//! resolved field by field from the object, its TerraformCluster's
//! `spec.defaults`, the cluster's own fields (where the chain has that
//! step) and built-in defaults. Pure; nothing here is ever written back.

use k8s_openapi::api::core::v1::{
    EnvVar, LocalObjectReference, PodSecurityContext, ResourceRequirements, SecurityContext,
};

use crate::cluster::TerraformClusterSpec;
use crate::common::{
    ApplyPolicy, DeletionPolicy, DriftAction, IdentityReference, JobPolicy, MachineRemediation,
};
use crate::machine::TerraformMachineSpec;
use crate::machinepool::TerraformMachinePoolSpec;

/// Built-in Job policy values.
pub const DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT: i32 = 3;
pub const DEFAULT_FAILED_JOBS_HISTORY_LIMIT: i32 = 3;
pub const DEFAULT_ACTIVE_DEADLINE_SECONDS: i64 = 3600;
pub const DEFAULT_LOCK_TIMEOUT_SECONDS: i32 = 300;
/// Built-in pool membership refresh interval.
pub const DEFAULT_MEMBERSHIP_REFRESH_INTERVAL_SECONDS: i32 = 60;
/// Built-in remediation values.
pub const DEFAULT_UNHEALTHY_THRESHOLD: i32 = 3;
pub const DEFAULT_HEALTH_CHECK_INTERVAL_SECONDS: i32 = 300;
/// Default of `--drift-default-interval` (30 minutes).
pub const DEFAULT_DRIFT_INTERVAL_SECONDS: i32 = 1800;
/// Default of `--cluster-max-active-jobs`.
pub const DEFAULT_CLUSTER_MAX_ACTIVE_JOBS: i32 = 20;

/// Defaults that come from manager flags rather than from the code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManagerDefaults {
    pub drift_interval_seconds: i32,
    pub cluster_max_active_jobs: i32,
}

impl Default for ManagerDefaults {
    fn default() -> Self {
        ManagerDefaults {
            drift_interval_seconds: DEFAULT_DRIFT_INTERVAL_SECONDS,
            cluster_max_active_jobs: DEFAULT_CLUSTER_MAX_ACTIVE_JOBS,
        }
    }
}

/// A Job policy with every scalar resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveJobPolicy {
    pub successful_jobs_history_limit: i32,
    pub failed_jobs_history_limit: i32,
    pub active_deadline_seconds: i64,
    pub lock_timeout_seconds: i32,
    /// `None`: the controller's own `captf-runner` ServiceAccount.
    pub service_account_name: Option<String>,
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// `None`: the Job builder's resources.
    pub resources: Option<ResourceRequirements>,
    pub env: Vec<EnvVar>,
    /// Overlaid on the hardened defaults by the Job builder.
    pub security_context: Option<SecurityContext>,
    pub pod_security_context: Option<PodSecurityContext>,
}

impl EffectiveJobPolicy {
    /// The lock wait must end before the Job's deadline; a merged policy
    /// that breaks this starts no Job (`JobPolicyInvalid`).
    pub fn lock_timeout_within_deadline(&self) -> bool {
        i64::from(self.lock_timeout_seconds) < self.active_deadline_seconds
    }
}

/// Merges `own` over `inherited` and the built-in values: scalars field by
/// field, `env` by name (own entries win, then the inherited remainder),
/// pull secrets as a union (own first), the rest as whole values.
pub fn job_policy(own: Option<&JobPolicy>, inherited: Option<&JobPolicy>) -> EffectiveJobPolicy {
    let empty = JobPolicy::default();
    let own = own.unwrap_or(&empty);
    let inh = inherited.unwrap_or(&empty);

    let mut env: Vec<EnvVar> = own.env.clone().unwrap_or_default();
    for e in inh.env.iter().flatten() {
        if !env.iter().any(|o| o.name == e.name) {
            env.push(e.clone());
        }
    }
    let mut image_pull_secrets: Vec<LocalObjectReference> =
        own.image_pull_secrets.clone().unwrap_or_default();
    for s in inh.image_pull_secrets.iter().flatten() {
        if !image_pull_secrets.contains(s) {
            image_pull_secrets.push(s.clone());
        }
    }

    EffectiveJobPolicy {
        successful_jobs_history_limit: own
            .successful_jobs_history_limit
            .or(inh.successful_jobs_history_limit)
            .unwrap_or(DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT),
        failed_jobs_history_limit: own
            .failed_jobs_history_limit
            .or(inh.failed_jobs_history_limit)
            .unwrap_or(DEFAULT_FAILED_JOBS_HISTORY_LIMIT),
        // 0 can never be stored; read it as unset all the same.
        active_deadline_seconds: positive(own.active_deadline_seconds)
            .or(positive(inh.active_deadline_seconds))
            .unwrap_or(DEFAULT_ACTIVE_DEADLINE_SECONDS),
        lock_timeout_seconds: own
            .lock_timeout_seconds
            .or(inh.lock_timeout_seconds)
            .unwrap_or(DEFAULT_LOCK_TIMEOUT_SECONDS),
        service_account_name: own
            .service_account_name
            .clone()
            .or_else(|| inh.service_account_name.clone()),
        image_pull_secrets,
        resources: own.resources.clone().or_else(|| inh.resources.clone()),
        env,
        security_context: own
            .security_context
            .clone()
            .or_else(|| inh.security_context.clone()),
        pod_security_context: own
            .pod_security_context
            .clone()
            .or_else(|| inh.pod_security_context.clone()),
    }
}

fn positive<T: Default + PartialOrd>(v: Option<T>) -> Option<T> {
    v.filter(|v| *v > T::default())
}

/// What a TerraformCluster runs with. `spec.defaults` never applies to the
/// cluster itself.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveCluster {
    pub jobs: EffectiveJobPolicy,
    /// `None`: drift checks (and post-provisioning health samples) are off.
    pub drift_interval_seconds: Option<i32>,
    pub drift_action: DriftAction,
    pub apply_policy: ApplyPolicy,
    pub deletion_policy: DeletionPolicy,
    pub max_active_jobs: i32,
}

pub fn cluster(spec: &TerraformClusterSpec, manager: &ManagerDefaults) -> EffectiveCluster {
    let drift = spec.drift.as_ref();
    let interval = drift
        .and_then(|d| d.interval_seconds)
        .unwrap_or(manager.drift_interval_seconds);
    EffectiveCluster {
        jobs: job_policy(spec.workspace.jobs.as_ref(), None),
        drift_interval_seconds: positive(Some(interval)),
        drift_action: drift.and_then(|d| d.action).unwrap_or(DriftAction::Report),
        apply_policy: spec.apply_policy.unwrap_or(ApplyPolicy::Automatic),
        deletion_policy: spec
            .workspace
            .deletion_policy
            .unwrap_or(DeletionPolicy::Destroy),
        max_active_jobs: positive(spec.max_active_jobs).unwrap_or(manager.cluster_max_active_jobs),
    }
}

/// Identity of a machine or pool: own, then the cluster's default for its
/// children, then the cluster's own identity.
pub fn identity(
    own: Option<&IdentityReference>,
    cluster: Option<&TerraformClusterSpec>,
) -> Option<IdentityReference> {
    own.cloned()
        .or_else(|| cluster.and_then(|c| c.defaults.as_ref()?.identity_ref.clone()))
        .or_else(|| cluster.and_then(|c| c.workspace.identity_ref.clone()))
}

/// Deletion policy a machine or pool inherits when it sets none; `None`
/// when no step of the chain has one and the cluster is unknown.
fn inherited_deletion_policy(
    own: Option<DeletionPolicy>,
    cluster: Option<&TerraformClusterSpec>,
) -> Option<DeletionPolicy> {
    own.or_else(|| {
        let c = cluster?;
        Some(
            c.defaults
                .as_ref()
                .and_then(|d| d.deletion_policy)
                .or(c.workspace.deletion_policy)
                .unwrap_or(DeletionPolicy::Destroy),
        )
    })
}

/// Remediation of a machine with every field resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EffectiveRemediation {
    pub annotate_machine: bool,
    pub unhealthy_threshold: i32,
    pub health_check_interval_seconds: i32,
}

/// What a TerraformMachine runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveMachine {
    /// `None`: no identity resolves (`IdentityNotFound`).
    pub identity: Option<IdentityReference>,
    pub jobs: EffectiveJobPolicy,
    /// `None`: drift checks are off.
    pub drift_interval_seconds: Option<i32>,
    pub remediation: EffectiveRemediation,
    /// `None`: the machine sets none and its cluster cannot be found; a
    /// deleting machine then holds (`DeletionPolicyUnresolved`).
    pub deletion_policy: Option<DeletionPolicy>,
}

pub fn machine(
    spec: &TerraformMachineSpec,
    cluster: Option<&TerraformClusterSpec>,
    manager: &ManagerDefaults,
) -> EffectiveMachine {
    let defaults = cluster.and_then(|c| c.defaults.as_ref());
    let interval = spec
        .drift
        .as_ref()
        .and_then(|d| d.interval_seconds)
        .or_else(|| defaults?.drift.as_ref()?.interval_seconds)
        .unwrap_or(manager.drift_interval_seconds);
    let empty = MachineRemediation::default();
    let own = spec.remediation.as_ref().unwrap_or(&empty);
    let inh = defaults
        .and_then(|d| d.remediation.as_ref())
        .unwrap_or(&empty);
    EffectiveMachine {
        identity: identity(spec.workspace.identity_ref.as_ref(), cluster),
        jobs: job_policy(
            spec.workspace.jobs.as_ref(),
            defaults.and_then(|d| d.jobs.as_ref()),
        ),
        drift_interval_seconds: positive(Some(interval)),
        remediation: EffectiveRemediation {
            annotate_machine: own
                .annotate_machine
                .or(inh.annotate_machine)
                .unwrap_or(false),
            unhealthy_threshold: positive(own.unhealthy_threshold)
                .or(positive(inh.unhealthy_threshold))
                .unwrap_or(DEFAULT_UNHEALTHY_THRESHOLD),
            health_check_interval_seconds: positive(own.health_check_interval_seconds)
                .or(positive(inh.health_check_interval_seconds))
                .unwrap_or(DEFAULT_HEALTH_CHECK_INTERVAL_SECONDS),
        },
        deletion_policy: inherited_deletion_policy(spec.workspace.deletion_policy, cluster),
    }
}

/// What a TerraformMachinePool runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveMachinePool {
    pub identity: Option<IdentityReference>,
    pub jobs: EffectiveJobPolicy,
    /// Always positive: a pool's drift cannot be turned off.
    pub drift_interval_seconds: i32,
    pub drift_action: DriftAction,
    pub membership_refresh_interval_seconds: i32,
    /// A pool is never held over its policy: without a cluster it destroys.
    pub deletion_policy: DeletionPolicy,
}

pub fn machine_pool(
    spec: &TerraformMachinePoolSpec,
    cluster: Option<&TerraformClusterSpec>,
    manager: &ManagerDefaults,
) -> EffectiveMachinePool {
    let defaults = cluster.and_then(|c| c.defaults.as_ref());
    let own_drift = spec.drift.as_ref();
    let default_drift = defaults.and_then(|d| d.drift.as_ref());
    EffectiveMachinePool {
        identity: identity(spec.workspace.identity_ref.as_ref(), cluster),
        jobs: job_policy(
            spec.workspace.jobs.as_ref(),
            defaults.and_then(|d| d.jobs.as_ref()),
        ),
        // An inherited 0 would turn drift off; for a pool it is ignored.
        drift_interval_seconds: positive(own_drift.and_then(|d| d.interval_seconds))
            .or(positive(default_drift.and_then(|d| d.interval_seconds)))
            .or(positive(Some(manager.drift_interval_seconds)))
            .unwrap_or(DEFAULT_DRIFT_INTERVAL_SECONDS),
        drift_action: own_drift
            .and_then(|d| d.action)
            .or(default_drift.and_then(|d| d.action))
            .or(cluster.and_then(|c| c.drift.as_ref()?.action))
            .unwrap_or(DriftAction::Report),
        membership_refresh_interval_seconds: positive(spec.membership_refresh_interval_seconds)
            .or(positive(
                defaults.and_then(|d| d.membership_refresh_interval_seconds),
            ))
            .unwrap_or(DEFAULT_MEMBERSHIP_REFRESH_INTERVAL_SECONDS),
        deletion_policy: inherited_deletion_policy(spec.workspace.deletion_policy, cluster)
            .unwrap_or(DeletionPolicy::Destroy),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::TerraformClusterDefaults;
    use crate::common::{
        DriftPolicy, IdentityKind, MachineDriftPolicy, MachinePoolDriftPolicy, WorkspaceSpec,
    };

    fn id(name: &str) -> IdentityReference {
        IdentityReference {
            kind: None,
            name: name.into(),
        }
    }

    fn cluster_spec(defaults: Option<TerraformClusterDefaults>) -> TerraformClusterSpec {
        let mut workspace = WorkspaceSpec::from_image("c:v1");
        workspace.identity_ref = Some(id("cluster-own"));
        TerraformClusterSpec {
            workspace,
            control_plane_endpoint: None,
            drift: None,
            apply_policy: None,
            max_active_jobs: None,
            defaults,
        }
    }

    fn pool_spec() -> TerraformMachinePoolSpec {
        TerraformMachinePoolSpec {
            provider_id: None,
            provider_id_list: None,
            workspace: WorkspaceSpec::from_image("p:v1"),
            drift: None,
            membership_refresh_interval_seconds: None,
        }
    }

    fn machine_spec() -> TerraformMachineSpec {
        TerraformMachineSpec {
            provider_id: None,
            workspace: WorkspaceSpec::from_image("m:v1"),
            drift: None,
            remediation: None,
        }
    }

    fn env(name: &str, value: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: Some(value.into()),
            value_from: None,
        }
    }

    fn secret(name: &str) -> LocalObjectReference {
        LocalObjectReference { name: name.into() }
    }

    #[test]
    fn job_policy_merges_field_by_field_over_defaults_then_built_ins() {
        let own = JobPolicy {
            lock_timeout_seconds: Some(0),
            env: Some(vec![env("A", "own")]),
            image_pull_secrets: Some(vec![secret("own"), secret("shared")]),
            ..JobPolicy::default()
        };
        let inherited = JobPolicy {
            lock_timeout_seconds: Some(100),
            active_deadline_seconds: Some(1200),
            successful_jobs_history_limit: Some(0),
            service_account_name: Some("inherited-sa".into()),
            env: Some(vec![env("A", "inherited"), env("B", "inherited")]),
            image_pull_secrets: Some(vec![secret("shared"), secret("inherited")]),
            ..JobPolicy::default()
        };
        let p = job_policy(Some(&own), Some(&inherited));
        assert_eq!(p.lock_timeout_seconds, 0, "own 0 is a value");
        assert_eq!(p.active_deadline_seconds, 1200);
        assert_eq!(p.successful_jobs_history_limit, 0);
        assert_eq!(
            p.failed_jobs_history_limit,
            DEFAULT_FAILED_JOBS_HISTORY_LIMIT
        );
        assert_eq!(p.service_account_name.as_deref(), Some("inherited-sa"));
        assert_eq!(p.env, vec![env("A", "own"), env("B", "inherited")]);
        assert_eq!(
            p.image_pull_secrets,
            vec![secret("own"), secret("shared"), secret("inherited")]
        );

        let built_in = job_policy(None, None);
        assert_eq!(
            built_in.active_deadline_seconds,
            DEFAULT_ACTIVE_DEADLINE_SECONDS
        );
        assert_eq!(built_in.lock_timeout_seconds, DEFAULT_LOCK_TIMEOUT_SECONDS);
        assert_eq!(built_in.successful_jobs_history_limit, 3);
        assert!(built_in.lock_timeout_within_deadline());
    }

    #[test]
    fn merged_policy_with_lock_past_deadline_is_invalid() {
        let own = JobPolicy {
            active_deadline_seconds: Some(200),
            ..JobPolicy::default()
        };
        // Own deadline 200 with the built-in lock timeout 300.
        assert!(!job_policy(Some(&own), None).lock_timeout_within_deadline());
    }

    #[test]
    fn identity_falls_back_own_then_defaults_then_cluster() {
        let with_default = cluster_spec(Some(TerraformClusterDefaults {
            identity_ref: Some(id("children")),
            ..TerraformClusterDefaults::default()
        }));
        let without_default = cluster_spec(None);
        let m = ManagerDefaults::default();
        let mut own = pool_spec();
        own.workspace.identity_ref = Some(IdentityReference {
            kind: Some(IdentityKind::Secret),
            name: "own".into(),
        });
        let cases = [
            (own.clone(), Some(&with_default), Some("own")),
            (pool_spec(), Some(&with_default), Some("children")),
            (pool_spec(), Some(&without_default), Some("cluster-own")),
            (pool_spec(), None, None),
        ];
        for (spec, cluster, want) in cases {
            let got = machine_pool(&spec, cluster, &m).identity;
            assert_eq!(got.as_ref().map(|i| i.name.as_str()), want);
        }
    }

    #[test]
    fn pool_drift_cannot_be_turned_off_by_an_inherited_zero() {
        let m = ManagerDefaults {
            drift_interval_seconds: 1234,
            cluster_max_active_jobs: 20,
        };
        let zero = cluster_spec(Some(TerraformClusterDefaults {
            drift: Some(DriftPolicy {
                interval_seconds: Some(0),
                action: None,
            }),
            ..TerraformClusterDefaults::default()
        }));
        let six_hundred = cluster_spec(Some(TerraformClusterDefaults {
            drift: Some(DriftPolicy {
                interval_seconds: Some(600),
                action: None,
            }),
            ..TerraformClusterDefaults::default()
        }));
        let mut own = pool_spec();
        own.drift = Some(MachinePoolDriftPolicy {
            interval_seconds: Some(900),
            action: None,
        });
        let cases = [
            (pool_spec(), Some(&zero), 1234),
            (pool_spec(), Some(&six_hundred), 600),
            (own.clone(), Some(&six_hundred), 900),
            (pool_spec(), None, 1234),
        ];
        for (spec, cluster, want) in cases {
            assert_eq!(
                machine_pool(&spec, cluster, &m).drift_interval_seconds,
                want
            );
        }
        // The same inherited 0 does turn a machine's drift off.
        assert_eq!(
            machine(&machine_spec(), Some(&zero), &m).drift_interval_seconds,
            None
        );
        let mut own_machine = machine_spec();
        own_machine.drift = Some(MachineDriftPolicy {
            interval_seconds: Some(0),
        });
        assert_eq!(
            machine(&own_machine, Some(&six_hundred), &m).drift_interval_seconds,
            None
        );
        assert_eq!(
            machine(&machine_spec(), None, &m).drift_interval_seconds,
            Some(1234)
        );
    }

    #[test]
    fn pool_drift_action_falls_back_to_the_cluster_drift_action() {
        let m = ManagerDefaults::default();
        let mut c = cluster_spec(None);
        c.drift = Some(DriftPolicy {
            interval_seconds: Some(0),
            action: Some(DriftAction::Remediate),
        });
        assert_eq!(
            machine_pool(&pool_spec(), Some(&c), &m).drift_action,
            DriftAction::Remediate
        );
        c.defaults = Some(TerraformClusterDefaults {
            drift: Some(DriftPolicy {
                interval_seconds: None,
                action: Some(DriftAction::Report),
            }),
            ..TerraformClusterDefaults::default()
        });
        assert_eq!(
            machine_pool(&pool_spec(), Some(&c), &m).drift_action,
            DriftAction::Report
        );
        // The cluster's own interval is not inherited by a pool.
        assert_eq!(
            machine_pool(&pool_spec(), Some(&c), &m).drift_interval_seconds,
            DEFAULT_DRIFT_INTERVAL_SECONDS
        );
        assert_eq!(
            machine_pool(&pool_spec(), None, &m).drift_action,
            DriftAction::Report
        );
    }

    #[test]
    fn membership_interval_own_then_defaults_then_sixty() {
        let m = ManagerDefaults::default();
        let c = cluster_spec(Some(TerraformClusterDefaults {
            membership_refresh_interval_seconds: Some(120),
            ..TerraformClusterDefaults::default()
        }));
        let mut own = pool_spec();
        own.membership_refresh_interval_seconds = Some(30);
        assert_eq!(
            machine_pool(&own, Some(&c), &m).membership_refresh_interval_seconds,
            30
        );
        assert_eq!(
            machine_pool(&pool_spec(), Some(&c), &m).membership_refresh_interval_seconds,
            120
        );
        assert_eq!(
            machine_pool(&pool_spec(), None, &m).membership_refresh_interval_seconds,
            60
        );
    }

    #[test]
    fn deletion_policy_chain_and_the_missing_cluster() {
        let m = ManagerDefaults::default();
        let mut retain_cluster = cluster_spec(None);
        retain_cluster.workspace.deletion_policy = Some(DeletionPolicy::Retain);
        let mut defaults_destroy = retain_cluster.clone();
        defaults_destroy.defaults = Some(TerraformClusterDefaults {
            deletion_policy: Some(DeletionPolicy::Destroy),
            ..TerraformClusterDefaults::default()
        });
        assert_eq!(
            machine_pool(&pool_spec(), Some(&retain_cluster), &m).deletion_policy,
            DeletionPolicy::Retain
        );
        assert_eq!(
            machine_pool(&pool_spec(), Some(&defaults_destroy), &m).deletion_policy,
            DeletionPolicy::Destroy
        );
        // A pool without a cluster destroys; a machine stays unresolved.
        assert_eq!(
            machine_pool(&pool_spec(), None, &m).deletion_policy,
            DeletionPolicy::Destroy
        );
        assert_eq!(machine(&machine_spec(), None, &m).deletion_policy, None);
        let mut own = machine_spec();
        own.workspace.deletion_policy = Some(DeletionPolicy::Retain);
        assert_eq!(
            machine(&own, None, &m).deletion_policy,
            Some(DeletionPolicy::Retain)
        );
        assert_eq!(
            machine(&machine_spec(), Some(&cluster_spec(None)), &m).deletion_policy,
            Some(DeletionPolicy::Destroy)
        );
    }

    #[test]
    fn machine_jobs_inherit_defaults_but_not_the_cluster_own_jobs() {
        let m = ManagerDefaults::default();
        let mut c = cluster_spec(Some(TerraformClusterDefaults {
            jobs: Some(JobPolicy {
                failed_jobs_history_limit: Some(7),
                ..JobPolicy::default()
            }),
            ..TerraformClusterDefaults::default()
        }));
        c.workspace.jobs = Some(JobPolicy {
            service_account_name: Some("cluster-sa".into()),
            ..JobPolicy::default()
        });
        let got = machine(&machine_spec(), Some(&c), &m).jobs;
        assert_eq!(got.failed_jobs_history_limit, 7);
        assert_eq!(got.service_account_name, None);
        // The cluster itself uses its own jobs and ignores its defaults.
        let own = cluster(&c, &m).jobs;
        assert_eq!(own.service_account_name.as_deref(), Some("cluster-sa"));
        assert_eq!(own.failed_jobs_history_limit, 3);
    }

    #[test]
    fn remediation_own_false_beats_inherited_true() {
        let m = ManagerDefaults::default();
        let c = cluster_spec(Some(TerraformClusterDefaults {
            remediation: Some(MachineRemediation {
                annotate_machine: Some(true),
                unhealthy_threshold: Some(5),
                health_check_interval_seconds: None,
            }),
            ..TerraformClusterDefaults::default()
        }));
        let mut own = machine_spec();
        own.remediation = Some(MachineRemediation {
            annotate_machine: Some(false),
            ..MachineRemediation::default()
        });
        let r = machine(&own, Some(&c), &m).remediation;
        assert!(!r.annotate_machine);
        assert_eq!(r.unhealthy_threshold, 5);
        assert_eq!(r.health_check_interval_seconds, 300);
        assert!(
            machine(&machine_spec(), Some(&c), &m)
                .remediation
                .annotate_machine
        );
        assert!(
            !machine(&machine_spec(), None, &m)
                .remediation
                .annotate_machine
        );
    }

    #[test]
    fn cluster_defaults_and_disabled_drift() {
        let m = ManagerDefaults::default();
        let mut c = cluster_spec(None);
        let e = cluster(&c, &m);
        assert_eq!(
            e.drift_interval_seconds,
            Some(DEFAULT_DRIFT_INTERVAL_SECONDS)
        );
        assert_eq!(e.apply_policy, ApplyPolicy::Automatic);
        assert_eq!(e.deletion_policy, DeletionPolicy::Destroy);
        assert_eq!(e.max_active_jobs, DEFAULT_CLUSTER_MAX_ACTIVE_JOBS);
        c.drift = Some(DriftPolicy {
            interval_seconds: Some(0),
            action: None,
        });
        c.max_active_jobs = Some(4);
        let e = cluster(&c, &m);
        assert_eq!(e.drift_interval_seconds, None);
        assert_eq!(e.max_active_jobs, 4);
    }
}
