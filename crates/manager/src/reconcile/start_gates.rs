//! The waits of a Job start: for the object's run lease, and the cluster
//! operation gate between a cluster's mutating Jobs and its members'.

use std::time::{Duration, SystemTime};

use captf_api::names::reasons;

use super::pass::{LEASE_REQUEUE, START_DEFERRED_REQUEUE, op_condition};
use super::status::Draft;
use super::workload::Workload;
use super::{Context, Error};
use crate::engine::decide::Op;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::io::leases::{Acquire, LeaseRequest, acquire, release_if_held};
use kube::ResourceExt;

/// What a start waits for.
#[derive(Debug, Clone, Copy)]
pub(super) enum Wait {
    RunLease,
    ClusterOperation,
    MachineOperations,
}

/// The start waits: the op's condition says for what (the metric counts
/// the wait once, when it begins).
pub(super) fn lease_wait<K: Workload>(
    ctx: &Context,
    draft: &mut Draft,
    op: Op,
    wait: Wait,
    message: String,
) -> Duration {
    let (reason, metric) = match wait {
        Wait::RunLease => (reasons::WAITING_FOR_RUN_LEASE, "run_lease"),
        Wait::ClusterOperation => (reasons::WAITING_FOR_CLUSTER_OPERATION, "cluster_operation"),
        Wait::MachineOperations => (
            reasons::WAITING_FOR_MACHINE_OPERATIONS,
            "machine_operations",
        ),
    };
    let waiting_already = draft
        .get(op_condition(op))
        .is_some_and(|c| c.reason == reason);
    if !waiting_already {
        ctx.metrics.lease_wait_started(K::KIND.kind(), metric);
    }
    let v = ConditionValue {
        status: ConditionStatus::Unknown,
        reason,
        message,
    };
    draft.set(op_condition(op), &v);
    LEASE_REQUEUE
}

/// What the gate needs of a planned start.
pub(super) struct GatedStart<'a> {
    pub op: Op,
    pub job: &'a str,
    pub run_lease: &'a str,
    /// The run lease's resourceVersion as this start took it.
    pub run_lease_version: &'a str,
    pub cluster_name: &'a str,
    /// The cluster write lease a cluster's mutating Job takes.
    pub cluster_lease: Option<&'a LeaseRequest>,
    /// The cluster write lease a member's Job waits on.
    pub gated_by: Option<&'a str>,
}

/// The cluster operation gate, once the run lease is held. A cluster's
/// apply, destroy or restore takes the cluster write lease, then waits
/// (keeping both leases, so no new member write starts meanwhile) while
/// machines or pools of the cluster run a mutating op. A machine's or
/// pool's apply, destroy or restore gives its run lease back and waits
/// while the cluster write lease is live; its refreshes, drift checks and
/// plans pass no gate. Each side writes its lease before reading the
/// other's, so one of them always sees the other. Costs: the cluster's
/// start one lease write and one LIST of run leases (plus a GET per member
/// holder); a member's mutating start one GET of the cluster lease (and of
/// its holder Job).
pub(super) async fn cluster_gate<K: Workload>(
    ctx: &Context,
    obj: &K,
    start: &GatedStart<'_>,
    draft: &mut Draft,
    now: SystemTime,
) -> Result<Option<Duration>, Error> {
    let ns = obj.namespace().unwrap_or_default();
    if let Some(req) = start.cluster_lease {
        match acquire(&ctx.client, req, now).await? {
            Acquire::Acquired { .. } => {}
            Acquire::Held { holder } => {
                let message = format!(
                    "Job {holder} holds the write lease of cluster {}",
                    start.cluster_name
                );
                return wait_for_cluster::<K>(ctx, &ns, start, draft, message).await;
            }
            Acquire::LostRace => {
                return Ok(Some(START_DEFERRED_REQUEUE));
            }
        }
        let members =
            crate::io::leases::live_member_operations(&ctx.client, &ns, start.cluster_name, now)
                .await?;
        if !members.is_empty() {
            let shown: Vec<&str> = members.iter().take(5).map(String::as_str).collect();
            let more = members.len().saturating_sub(shown.len());
            let message = format!(
                "{} machine and pool Jobs change the cluster: {}{}; this Job starts once they are done",
                members.len(),
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            );
            return Ok(Some(lease_wait::<K>(
                ctx,
                draft,
                start.op,
                Wait::MachineOperations,
                message,
            )));
        }
    } else if let Some(name) = start.gated_by
        && let Some(holder) = crate::io::leases::live_holder(&ctx.client, &ns, name, now).await?
    {
        let message = format!(
            "the cluster's Job {holder} is changing cluster {}; this Job starts after it",
            start.cluster_name
        );
        return wait_for_cluster::<K>(ctx, &ns, start, draft, message).await;
    }
    Ok(None)
}

/// The start gives its run lease back and waits for the cluster's write
/// lease to be free.
async fn wait_for_cluster<K: Workload>(
    ctx: &Context,
    ns: &str,
    start: &GatedStart<'_>,
    draft: &mut Draft,
    message: String,
) -> Result<Option<Duration>, Error> {
    let version = Some(start.run_lease_version);
    release_if_held(&ctx.client, ns, start.run_lease, start.job, version).await?;
    Ok(Some(lease_wait::<K>(
        ctx,
        draft,
        start.op,
        Wait::ClusterOperation,
        message,
    )))
}
