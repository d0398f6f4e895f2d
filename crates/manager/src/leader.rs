//! Leader election over a coordination Lease, so that of several manager
//! replicas only one reconciles (`--leader-elect`). The webhook and health
//! endpoints serve on every replica; the controllers start on the leader.
//! A leader that cannot renew within the renew deadline stops (its
//! controllers may no longer be alone), and one that stops cleanly gives
//! the Lease up so the next replica takes over at once.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

/// The Lease every replica competes for.
pub const LEASE_NAME: &str = "controller-leader-election-captf";

/// Timing of the election (the flags `--leader-elect-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a holder's claim lasts after its last renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up.
    pub renew_deadline: Duration,
    /// Spacing of attempts and renewals.
    pub retry_period: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl Timing {
    /// The ordering the election needs: retry < renew deadline < duration.
    pub fn validate(&self) -> Result<(), String> {
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return Err("--leader-elect-retry-period must be positive and shorter than --leader-elect-renew-deadline".into());
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(
                "--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration"
                    .into(),
            );
        }
        Ok(())
    }
}

/// What a replica reads of the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Empty when released.
    pub identity: String,
    pub renewed: SystemTime,
    pub duration: Duration,
}

/// What to do with the Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// No Lease yet: create it naming us.
    Create,
    /// Ours: renew it.
    Renew,
    /// Released or expired: take it over (bound to the version read).
    TakeOver,
    /// Another replica holds it: look again later.
    Wait,
}

/// The election rule.
pub fn step(lease: Option<&Holder>, me: &str, now: SystemTime) -> Step {
    let Some(h) = lease else { return Step::Create };
    if h.identity == me {
        return Step::Renew;
    }
    if h.identity.is_empty() || h.renewed + h.duration <= now {
        return Step::TakeOver;
    }
    Step::Wait
}

fn holder(lease: &Lease) -> Option<Holder> {
    let spec = lease.spec.as_ref()?;
    let renewed = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| SystemTime::from(t.0))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    Some(Holder {
        identity: spec.holder_identity.clone().unwrap_or_default(),
        renewed,
        duration: Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64),
    })
}

fn micro(t: SystemTime) -> MicroTime {
    MicroTime(Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// One replica's view of the election.
pub struct Elector {
    api: Api<Lease>,
    identity: String,
    timing: Timing,
}

impl Elector {
    pub fn new(client: kube::Client, namespace: &str, identity: String, timing: Timing) -> Self {
        Elector {
            api: Api::namespaced(client, namespace),
            identity,
            timing,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// One attempt: true when this replica holds the Lease afterwards.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = SystemTime::now();
        let current = self.api.get_opt(LEASE_NAME).await?;
        let seen = current.as_ref().and_then(holder);
        let duration = self.timing.lease_duration.as_secs().max(1) as i32;
        match step(seen.as_ref(), &self.identity, now) {
            Step::Wait => Ok(false),
            Step::Create => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(LEASE_NAME.to_owned()),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.identity.clone()),
                        lease_duration_seconds: Some(duration),
                        acquire_time: Some(micro(now)),
                        renew_time: Some(micro(now)),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
            step @ (Step::Renew | Step::TakeOver) => {
                let lease = current.expect("a holder comes from a Lease");
                let spec = lease.spec.clone().unwrap_or_default();
                let taking = step == Step::TakeOver;
                let patch = serde_json::json!({
                    "metadata": {"resourceVersion": lease.metadata.resource_version},
                    "spec": {
                        "holderIdentity": self.identity,
                        "leaseDurationSeconds": duration,
                        "renewTime": micro(now),
                        "acquireTime": if taking { Some(micro(now)) } else { spec.acquire_time },
                        "leaseTransitions": spec.lease_transitions.unwrap_or(0) + i32::from(taking),
                    },
                });
                match self
                    .api
                    .patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Waits until this replica leads.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "leader election: reading the Lease failed"),
            }
            tokio::time::sleep(self.timing.retry_period).await;
        }
    }

    /// Renews while leading; returns when a renewal could not succeed
    /// within the renew deadline (leadership is lost).
    pub async fn hold(&self) {
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.timing.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewal = tokio::time::Instant::now(),
                Ok(false) => return,
                Err(e) => tracing::warn!(error = %e, "leader election: renewing failed"),
            }
            if last_renewal.elapsed() >= self.timing.renew_deadline {
                return;
            }
        }
    }

    /// Gives the Lease up if this replica still holds it.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(lease) = self.api.get_opt(LEASE_NAME).await? else {
            return Ok(());
        };
        if holder(&lease).is_none_or(|h| h.identity != self.identity) {
            return Ok(());
        }
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 1},
        });
        match self
            .api
            .patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) | Err(kube::Error::Api(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// A replica's identity: the pod name (or host name) and a random part, so
/// a restarted process never mistakes its predecessor's claim for its own.
pub fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "manager".to_owned());
    let mut bytes = [0u8; 8];
    use std::io::Read;
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    let suffix: String = if random {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    } else {
        format!("{}", std::process::id())
    };
    format!("{host}_{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    fn held(by: &str, renewed: u64) -> Holder {
        Holder {
            identity: by.into(),
            renewed: at(renewed),
            duration: Duration::from_secs(15),
        }
    }

    #[test]
    fn the_election_rule() {
        let rows = [
            ("no Lease", None, Step::Create),
            ("ours", Some(held("me", 100)), Step::Renew),
            ("ours, even expired", Some(held("me", 0)), Step::Renew),
            ("another's, fresh", Some(held("other", 100)), Step::Wait),
            (
                "another's, just before expiry",
                Some(held("other", 86)),
                Step::Wait,
            ),
            (
                "another's, expired",
                Some(held("other", 85)),
                Step::TakeOver,
            ),
            ("released", Some(held("", 100)), Step::TakeOver),
        ];
        for (name, lease, want) in rows {
            assert_eq!(step(lease.as_ref(), "me", at(100)), want, "{name}");
        }
    }

    #[test]
    fn timing_must_be_ordered() {
        assert!(Timing::default().validate().is_ok());
        let bad = Timing {
            renew_deadline: Duration::from_secs(15),
            ..Timing::default()
        };
        assert!(bad.validate().unwrap_err().contains("renew-deadline"));
        let bad = Timing {
            retry_period: Duration::from_secs(10),
            ..Timing::default()
        };
        assert!(bad.validate().unwrap_err().contains("retry-period"));
    }

    #[test]
    fn identities_differ_per_process_start() {
        assert_ne!(identity(), identity());
    }
}
