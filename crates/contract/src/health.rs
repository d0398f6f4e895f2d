//! The `health` output every role reports, and how it reads as the
//! `InfrastructureHealthy` condition.

use std::fmt;
use std::str::FromStr;

/// Status of a Kubernetes condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    /// `"True"`, `"False"` or `"Unknown"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl FromStr for ConditionStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "True" => Ok(ConditionStatus::True),
            "False" => Ok(ConditionStatus::False),
            "Unknown" => Ok(ConditionStatus::Unknown),
            other => Err(format!(
                "condition status {other:?} is not True, False or Unknown"
            )),
        }
    }
}

impl PartialEq<&str> for ConditionStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<ConditionStatus> for String {
    fn eq(&self, other: &ConditionStatus) -> bool {
        self == other.as_str()
    }
}

/// The closed set of `health.state` values, in the contract's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HealthState {
    Pending,
    Running,
    Degraded,
    Stopped,
    Terminated,
    Unknown,
}

impl HealthState {
    pub const ALL: [HealthState; 6] = [
        HealthState::Pending,
        HealthState::Running,
        HealthState::Degraded,
        HealthState::Stopped,
        HealthState::Terminated,
        HealthState::Unknown,
    ];

    /// The state as modules spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Pending => "pending",
            HealthState::Running => "running",
            HealthState::Degraded => "degraded",
            HealthState::Stopped => "stopped",
            HealthState::Terminated => "terminated",
            HealthState::Unknown => "unknown",
        }
    }
}

impl fmt::Display for HealthState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for HealthState {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        HealthState::ALL
            .into_iter()
            .find(|h| h.as_str() == s)
            .ok_or(())
    }
}

/// A decoded `health` output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub state: HealthState,
    /// Consulted only when `state` is `running`.
    pub healthy: bool,
    pub message: Option<String>,
    pub reasons: Vec<String>,
}

impl Health {
    /// `{state = "running", healthy = true}`.
    pub fn running_healthy() -> Self {
        Health {
            state: HealthState::Running,
            healthy: true,
            message: None,
            reasons: Vec::new(),
        }
    }
}

/// The `InfrastructureHealthy` condition a health reading gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCondition {
    pub status: ConditionStatus,
    pub reason: &'static str,
    pub message: String,
}

/// Maps a health reading to `InfrastructureHealthy`. `None` stands for a null
/// or unreadable `health` output (including an unknown state string).
pub fn infrastructure_healthy(health: Option<&Health>) -> HealthCondition {
    use ConditionStatus as S;
    let Some(h) = health else {
        return HealthCondition {
            status: S::Unknown,
            reason: "HealthUnknown",
            message: "HealthUnknown".into(),
        };
    };
    let (status, reason) = match (h.state, h.healthy) {
        (HealthState::Pending, _) => (S::False, "InstancePending"),
        (HealthState::Running, true) => (S::True, "Healthy"),
        (HealthState::Running, false) => (S::False, "InstanceUnhealthy"),
        (HealthState::Degraded, _) => (S::False, "InstanceDegraded"),
        (HealthState::Stopped, _) => (S::False, "InstanceStopped"),
        (HealthState::Terminated, _) => (S::False, "InstanceTerminated"),
        (HealthState::Unknown, _) => (S::Unknown, "HealthUnknown"),
    };
    HealthCondition {
        status,
        reason,
        message: health_message(h, reason),
    }
}

/// `<message>; reasons: a, b`, each part left out when empty; the reason
/// itself when both are.
fn health_message(h: &Health, reason: &str) -> String {
    let mut parts = Vec::new();
    if let Some(m) = h.message.as_deref().filter(|m| !m.is_empty()) {
        parts.push(m.to_owned());
    }
    if !h.reasons.is_empty() {
        parts.push(format!("reasons: {}", h.reasons.join(", ")));
    }
    if parts.is_empty() {
        reason.to_owned()
    } else {
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(state: HealthState, healthy: bool) -> Health {
        Health {
            state,
            healthy,
            message: None,
            reasons: vec![],
        }
    }

    #[test]
    fn condition_table() {
        use ConditionStatus as S;
        use HealthState as H;
        let table = [
            (H::Pending, true, S::False, "InstancePending"),
            (H::Running, true, S::True, "Healthy"),
            (H::Running, false, S::False, "InstanceUnhealthy"),
            (H::Degraded, true, S::False, "InstanceDegraded"),
            (H::Stopped, false, S::False, "InstanceStopped"),
            (H::Terminated, true, S::False, "InstanceTerminated"),
            (H::Unknown, true, S::Unknown, "HealthUnknown"),
        ];
        for (state, healthy, status, reason) in table {
            let c = infrastructure_healthy(Some(&h(state, healthy)));
            assert_eq!((c.status, c.reason), (status, reason), "{state} {healthy}");
            assert_eq!(c.message, reason);
        }
        assert_eq!(infrastructure_healthy(None).reason, "HealthUnknown");
    }

    #[test]
    fn message_joins_message_and_reasons() {
        let mut x = h(HealthState::Degraded, false);
        x.reasons = vec!["Degraded:i-1".into(), "Degraded:i-2".into()];
        assert_eq!(
            infrastructure_healthy(Some(&x)).message,
            "reasons: Degraded:i-1, Degraded:i-2"
        );
        x.message = Some("2 of 3 members degraded".into());
        assert_eq!(
            infrastructure_healthy(Some(&x)).message,
            "2 of 3 members degraded; reasons: Degraded:i-1, Degraded:i-2"
        );
    }

    #[test]
    fn states_round_trip() {
        for s in HealthState::ALL {
            assert_eq!(s.as_str().parse::<HealthState>(), Ok(s));
        }
        assert!("flourishing".parse::<HealthState>().is_err());
    }
}
