//! The Leases that keep one Job per object (run lease) and order a
//! cluster's writes before its machines' (cluster write lease), and the
//! Terraform state lock the runtime holds: when a lease is free, and when a
//! state lock is stale enough for the next Job to force-unlock it.

use std::time::{Duration, SystemTime};

use serde::Deserialize;

use crate::engine::decide::Op;
use crate::names::{WorkloadKind, sha256_hex};

/// Grace after which a lease whose holder Job never appeared is free.
pub const HOLDER_GRACE: Duration = Duration::from_secs(60);
/// Added to a Job's deadline to get a lease's backstop: the pod's grace
/// period plus slack.
pub const BACKSTOP_SLACK: Duration = Duration::from_secs(600 + 300);

/// `captf-run-<suffix>`.
pub fn run_lease_name(suffix: &str) -> String {
    format!("captf-run-{suffix}")
}

/// `captf-cluster-<16 hex of sha256("<namespace>/<cluster>")>`.
pub fn cluster_lease_name(namespace: &str, cluster: &str) -> String {
    let digest = &sha256_hex(format!("{namespace}/{cluster}").as_bytes())[..16];
    format!("captf-cluster-{digest}")
}

/// The backstop of a lease taken for a Job with this deadline.
pub fn backstop(active_deadline: Duration) -> Duration {
    active_deadline + BACKSTOP_SLACK
}

/// What a live read of the holder Job found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderJob {
    Running,
    Finished,
    Absent,
}

/// A lease as read live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseView {
    pub holder: Option<String>,
    pub acquired_at: SystemTime,
    pub duration: Duration,
}

/// Whether this pass may take (or keep) the lease for `job`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseVerdict {
    /// No lease yet: create it.
    Create,
    /// Ours already: refresh the acquire time.
    Refresh,
    /// Free: take it over (update with the resourceVersion just read).
    TakeOver,
    /// Another live Job holds it.
    Held { holder: String },
}

/// Decides about a lease for `job`. `holder_job` is the live state of the
/// current holder's Job (ignored when there is none).
pub fn lease_verdict(
    lease: Option<&LeaseView>,
    job: &str,
    holder_job: HolderJob,
    now: SystemTime,
) -> LeaseVerdict {
    let Some(lease) = lease else {
        return LeaseVerdict::Create;
    };
    let Some(holder) = lease.holder.as_deref().filter(|h| !h.is_empty()) else {
        return LeaseVerdict::TakeOver;
    };
    if holder == job {
        return LeaseVerdict::Refresh;
    }
    let age = now
        .duration_since(lease.acquired_at)
        .unwrap_or(Duration::ZERO);
    let free = match holder_job {
        HolderJob::Finished => true,
        HolderJob::Absent => age >= HOLDER_GRACE,
        HolderJob::Running => false,
    } || age >= lease.duration;
    if free {
        LeaseVerdict::TakeOver
    } else {
        LeaseVerdict::Held {
            holder: holder.to_owned(),
        }
    }
}

/// Whether a cluster op takes the cluster write lease too.
pub fn takes_cluster_lease(kind: WorkloadKind, op: Op, gate_enabled: bool) -> bool {
    gate_enabled
        && kind == WorkloadKind::Cluster
        && matches!(op, Op::Apply | Op::Destroy | Op::Restore)
}

/// Whether a machine's or pool's op reads the cluster write lease and waits
/// while it is live: its writes only (plans, refreshes and drift checks
/// take the run lease alone).
pub fn waits_on_cluster_lease(kind: WorkloadKind, op: Op, gate_enabled: bool) -> bool {
    gate_enabled
        && kind != WorkloadKind::Cluster
        && matches!(op, Op::Apply | Op::Destroy | Op::Restore)
}

/// Terraform's lock info (`app.terraform.io/lock-info`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LockInfo {
    #[serde(rename = "ID", default)]
    pub id: String,
    #[serde(rename = "Operation", default)]
    pub operation: String,
    #[serde(rename = "Who", default)]
    pub who: String,
    #[serde(rename = "Created", default)]
    pub created: String,
}

/// How the state lock reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockVerdict {
    Unlocked,
    /// Held by one of this object's pods that is gone or finished: the
    /// next Job force-unlocks this ID.
    Stale {
        id: String,
    },
    /// Held by a live pod of ours (a Job still running).
    Live,
    /// Held by someone else, or unreadable: never unlocked by us.
    Foreign {
        who: String,
        operation: String,
        created: String,
    },
}

/// `StateReadable` while someone other than the object's own runners holds
/// its state lock: who, doing what, since when, and how to release it once
/// they are known to be done. Jobs still start and wait for the lock.
pub fn locked_condition(
    who: &str,
    operation: &str,
    created: &str,
    namespace: &str,
    lock_lease: &str,
) -> crate::engine::job_conditions::ConditionValue {
    let or_unknown = |s: &str| {
        if s.is_empty() {
            "unknown".to_owned()
        } else {
            s.to_owned()
        }
    };
    crate::engine::job_conditions::ConditionValue {
        status: crate::engine::job_conditions::ConditionStatus::False,
        reason: captf_api::names::reasons::STATE_LOCKED,
        message: format!(
            "the state lock is held by {} (operation {}, since {}), not by a runner of this object; \
             Jobs wait for it up to their lock timeout. Once that holder is known to be done, release it with \
             `kubectl delete lease -n {namespace} {lock_lease}`",
            or_unknown(who),
            or_unknown(operation),
            or_unknown(created),
        ),
    }
}

/// Whether `pod` is a pod of one of this object's Jobs: a Job name of this
/// kind and object (any op and attempt) followed by `-` and five characters.
pub fn is_own_pod(pod: &str, kind: WorkloadKind, object: &str) -> bool {
    let ks = kind.short();
    let hashed = &sha256_hex(object.as_bytes())[..16];
    [object, hashed].into_iter().any(|name| {
        let Some(rest) = pod.strip_prefix(&format!("captf-{ks}-{name}-")) else {
            return false;
        };
        Op::ALL.into_iter().any(|op| {
            let Some(rest) = rest.strip_prefix(&format!("{}-a", op.as_str())) else {
                return false;
            };
            let mut parts = rest.split('-');
            let (Some(attempt), Some(hash6), Some(pod5), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return false;
            };
            !attempt.is_empty()
                && attempt.bytes().all(|b| b.is_ascii_digit())
                && hash6.len() == 6
                && hash6.bytes().all(|b| b.is_ascii_hexdigit())
                && pod5.len() == 5
                && pod5.bytes().all(|b| b.is_ascii_alphanumeric())
        })
    })
}

/// Reads the state lock. `holder` is the Lease's holder identity,
/// `lock_info` its lock-info annotation, and `pod_alive` tells whether a pod
/// (by name, read live) exists and has not finished.
pub fn lock_verdict(
    holder: Option<&str>,
    lock_info: Option<&str>,
    kind: WorkloadKind,
    object: &str,
    pod_alive: impl Fn(&str) -> bool,
) -> LockVerdict {
    let holder = holder.filter(|h| !h.is_empty());
    let Some(holder) = holder else {
        return LockVerdict::Unlocked;
    };
    let info: Option<LockInfo> = lock_info.and_then(|i| serde_json::from_str(i).ok());
    let Some(info) = info else {
        return LockVerdict::Foreign {
            who: holder.to_owned(),
            operation: String::new(),
            created: String::new(),
        };
    };
    let host = info.who.rsplit('@').next().unwrap_or("");
    if !is_own_pod(host, kind, object) {
        return LockVerdict::Foreign {
            who: info.who,
            operation: info.operation,
            created: info.created,
        };
    }
    if pod_alive(host) {
        return LockVerdict::Live;
    }
    let id = if info.id.is_empty() {
        holder.to_owned()
    } else {
        info.id
    };
    LockVerdict::Stale { id }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::job_name;

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn names() {
        assert_eq!(run_lease_name("0123-c"), "captf-run-0123-c");
        let c = cluster_lease_name("team-a", "prod");
        assert_eq!(c.len(), "captf-cluster-".len() + 16);
        assert_ne!(c, cluster_lease_name("team-b", "prod"));
        assert_eq!(
            backstop(Duration::from_secs(3600)),
            Duration::from_secs(4500)
        );
    }

    #[test]
    fn lease_verdicts() {
        let lease = |holder: Option<&str>, at: u64| LeaseView {
            holder: holder.map(str::to_owned),
            acquired_at: t(at),
            duration: Duration::from_secs(4500),
        };
        let now = t(10_000);
        let held = LeaseVerdict::Held {
            holder: "job-a".into(),
        };
        let cases = [
            (None, HolderJob::Absent, LeaseVerdict::Create),
            (
                Some(lease(None, 9_000)),
                HolderJob::Absent,
                LeaseVerdict::TakeOver,
            ),
            (
                Some(lease(Some("job-b"), 9_990)),
                HolderJob::Running,
                LeaseVerdict::Refresh,
            ),
            (
                Some(lease(Some("job-a"), 9_990)),
                HolderJob::Running,
                held.clone(),
            ),
            (
                Some(lease(Some("job-a"), 9_990)),
                HolderJob::Finished,
                LeaseVerdict::TakeOver,
            ),
            (
                Some(lease(Some("job-a"), 9_990)),
                HolderJob::Absent,
                held.clone(),
            ),
            (
                Some(lease(Some("job-a"), 9_940)),
                HolderJob::Absent,
                LeaseVerdict::TakeOver,
            ),
            (
                Some(lease(Some("job-a"), 5_500)),
                HolderJob::Running,
                LeaseVerdict::TakeOver,
            ),
            (Some(lease(Some("job-a"), 5_501)), HolderJob::Running, held),
        ];
        for (l, holder_job, want) in cases {
            assert_eq!(
                lease_verdict(l.as_ref(), "job-b", holder_job, now),
                want,
                "{l:?} {holder_job:?}"
            );
        }
    }

    #[test]
    fn only_cluster_writes_take_the_cluster_lease() {
        assert!(takes_cluster_lease(WorkloadKind::Cluster, Op::Apply, true));
        assert!(takes_cluster_lease(
            WorkloadKind::Cluster,
            Op::Restore,
            true
        ));
        assert!(!takes_cluster_lease(WorkloadKind::Cluster, Op::Drift, true));
        assert!(!takes_cluster_lease(
            WorkloadKind::Cluster,
            Op::Apply,
            false
        ));
        assert!(!takes_cluster_lease(
            WorkloadKind::MachinePool,
            Op::Apply,
            true
        ));
    }

    #[test]
    fn only_member_writes_wait_on_the_cluster_lease() {
        use WorkloadKind::{Cluster, Machine, MachinePool};
        let cases = [
            (MachinePool, Op::Apply, true, true),
            (Machine, Op::Destroy, true, true),
            (MachinePool, Op::Restore, true, true),
            (MachinePool, Op::Refresh, true, false),
            (Machine, Op::Drift, true, false),
            (MachinePool, Op::Plan, true, false),
            (MachinePool, Op::Apply, false, false),
            (Cluster, Op::Apply, true, false),
        ];
        for (kind, op, gate, waits) in cases {
            assert_eq!(
                waits_on_cluster_lease(kind, op, gate),
                waits,
                "{kind:?} {op:?} gate {gate}"
            );
        }
    }

    #[test]
    fn own_pods_are_recognised_by_their_job_name() {
        let job = job_name(
            WorkloadKind::MachinePool,
            "pool-a",
            Op::Refresh,
            12,
            "h2:x",
            "t",
        );
        assert!(is_own_pod(
            &format!("{job}-x7k2p"),
            WorkloadKind::MachinePool,
            "pool-a"
        ));
        assert!(!is_own_pod(&job, WorkloadKind::MachinePool, "pool-a"));
        assert!(!is_own_pod(
            &format!("{job}-x7k2p"),
            WorkloadKind::MachinePool,
            "pool"
        ));
        assert!(!is_own_pod(
            &format!("{job}-x7k2p"),
            WorkloadKind::Machine,
            "pool-a"
        ));
        let long = "a-very-long-machine-pool-name-that-goes-on-and-on";
        let job = job_name(WorkloadKind::MachinePool, long, Op::Apply, 1, "h2:x", "");
        assert!(is_own_pod(
            &format!("{job}-abcde"),
            WorkloadKind::MachinePool,
            long
        ));
    }

    #[test]
    fn lock_verdicts() {
        let job = job_name(WorkloadKind::Cluster, "prod", Op::Apply, 3, "h2:x", "");
        let pod = format!("{job}-q8w2z");
        let info = |who: &str| {
            format!(
                r#"{{"ID":"lock-1","Operation":"OperationTypeApply","Who":"{who}","Version":"1.10.10","Created":"2026-11-29T10:00:00Z"}}"#
            )
        };
        let ours = info(&format!("root@{pod}"));
        let alive = |p: &str| p.ends_with("alive");
        assert_eq!(
            lock_verdict(None, None, WorkloadKind::Cluster, "prod", alive),
            LockVerdict::Unlocked
        );
        assert_eq!(
            lock_verdict(
                Some("lock-1"),
                Some(&ours),
                WorkloadKind::Cluster,
                "prod",
                alive
            ),
            LockVerdict::Stale {
                id: "lock-1".into()
            }
        );
        let live = info(&format!("root@{job}-alive"));
        assert_eq!(
            lock_verdict(
                Some("lock-1"),
                Some(&live),
                WorkloadKind::Cluster,
                "prod",
                alive
            ),
            LockVerdict::Live
        );
        let foreign = info("alice@laptop");
        assert!(matches!(
            lock_verdict(Some("lock-1"), Some(&foreign), WorkloadKind::Cluster, "prod", alive),
            LockVerdict::Foreign { who, .. } if who == "alice@laptop"
        ));
        assert!(matches!(
            lock_verdict(
                Some("lock-1"),
                Some("not json"),
                WorkloadKind::Cluster,
                "prod",
                alive
            ),
            LockVerdict::Foreign { .. }
        ));
        let no_id = ours.replace("\"ID\":\"lock-1\",", "");
        assert_eq!(
            lock_verdict(
                Some("holder-9"),
                Some(&no_id),
                WorkloadKind::Cluster,
                "prod",
                alive
            ),
            LockVerdict::Stale {
                id: "holder-9".into()
            }
        );
    }

    #[test]
    fn a_foreign_lock_names_its_holder_and_the_release_command() {
        let v = locked_condition(
            "alice@ws",
            "OperationTypeApply",
            "",
            "team-a",
            "lock-tfstate-default-x",
        );
        assert_eq!((v.status.as_str(), v.reason), ("False", "StateLocked"));
        assert!(v.message.contains("alice@ws"), "{}", v.message);
        assert!(v.message.contains("since unknown"), "{}", v.message);
        assert!(
            v.message
                .contains("kubectl delete lease -n team-a lock-tfstate-default-x"),
            "{}",
            v.message
        );
    }
}
