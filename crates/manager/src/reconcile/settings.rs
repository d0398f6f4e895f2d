//! What a kind resolves for its pass before the shared stages: owner,
//! pause, Job policy, drift, identity, membership and retention.

use std::time::Duration;

use captf_api::common::IdentityReference;
use captf_api::effective::{self, EffectiveJobPolicy};

use super::Context;
use super::bookkeeping::BookkeepingPolicy;
use crate::adapters::OwnerDecision;
use crate::engine::decide::Membership;

/// The settings a kind resolved for this pass before the shared stages
/// (owner, pause, Job policy, drift, identity, membership, retention).
#[derive(Debug, Clone)]
pub struct PassSettings {
    pub owner: OwnerDecision,
    pub paused: bool,
    pub cluster_name: String,
    pub jobs: EffectiveJobPolicy,
    pub drift_interval: Option<Duration>,
    pub drift_remediate: bool,
    pub identity: Option<IdentityReference>,
    pub mutable: bool,
    pub membership: Option<Membership>,
    /// A refresh follows every successful apply (pools; machines unless
    /// the apply's own outputs gave a definite health reading).
    pub after_apply_refresh: bool,
    /// Periodic health refreshes (a provisioned machine whose Machine is
    /// annotated on remediation).
    pub health_interval: Option<Duration>,
    /// `deletionPolicy: Retain` is in effect.
    pub retain: bool,
    /// Unfinished Jobs the object's cluster may have (0: no cap).
    pub cluster_max_active_jobs: u32,
}

/// The Job limit of a machine's or pool's cluster: its TerraformCluster's
/// `spec.maxActiveJobs`, else `--cluster-max-active-jobs`.
pub fn cluster_job_limit(ctx: &Context, tc: Option<&captf_api::TerraformCluster>) -> u32 {
    let limit = match tc {
        Some(tc) => effective::cluster(&tc.spec, &ctx.config.defaults).max_active_jobs,
        None => ctx.config.defaults.cluster_max_active_jobs,
    };
    limit.max(0) as u32
}

/// The bookkeeping stage's policy from the pass settings.
pub fn bookkeeping_policy(shared: &PassSettings) -> BookkeepingPolicy {
    BookkeepingPolicy {
        history_limits: (
            shared.jobs.successful_jobs_history_limit.max(0) as u32,
            shared.jobs.failed_jobs_history_limit.max(0) as u32,
        ),
        drift_enabled: shared.drift_interval.is_some(),
        drift_remediate: shared.drift_remediate,
    }
}
