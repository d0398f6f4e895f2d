//! The `Ready` summary of a Job-running object: True when every input
//! condition is good, False when one is bad, Unknown otherwise, with a
//! message naming the inputs that decided it.

use super::job_conditions::ConditionStatus;

/// What the summary needs of one condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConditionView<'a> {
    pub type_: &'a str,
    /// `True`, `False` or `Unknown`.
    pub status: &'a str,
    pub reason: &'a str,
}

/// How a summary input reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Health {
    Bad,
    Unknown,
    Good,
}

/// One input of the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SummaryInput<'a> {
    pub type_: &'a str,
    /// True is the bad state (`Deleting`).
    pub negative: bool,
    /// A missing condition is ignored rather than counted as Unknown.
    pub optional: bool,
}

/// The computed `Ready` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub status: ConditionStatus,
    pub reason: &'static str,
    pub message: String,
}

fn health(c: Option<&ConditionView<'_>>, input: &SummaryInput<'_>) -> Option<Health> {
    let Some(c) = c else {
        return (!input.optional).then_some(Health::Unknown);
    };
    Some(match (c.status, input.negative) {
        ("True", false) | ("False", true) => Health::Good,
        ("False", false) | ("True", true) => Health::Bad,
        _ => Health::Unknown,
    })
}

/// Summarizes `conditions` over `inputs`.
pub fn summarize(inputs: &[SummaryInput<'_>], conditions: &[ConditionView<'_>]) -> Summary {
    let mut worst = Health::Good;
    let mut named: Vec<(Health, String)> = Vec::new();
    for input in inputs {
        let c = conditions.iter().find(|c| c.type_ == input.type_);
        let Some(h) = health(c, input) else { continue };
        worst = worst.min(h);
        if h != Health::Good {
            let text = match c {
                Some(c) => format!("{} is {} ({})", c.type_, c.status, c.reason),
                None => format!("{} is not reported yet", input.type_),
            };
            named.push((h, text));
        }
    }
    let (status, reason) = match worst {
        Health::Good => (ConditionStatus::True, "Ready"),
        Health::Bad => (ConditionStatus::False, "NotReady"),
        Health::Unknown => (ConditionStatus::Unknown, "ReadyUnknown"),
    };
    // Name what decided it: the bad inputs when any, else the unknown ones.
    let message = named
        .into_iter()
        .filter(|(h, _)| *h == worst)
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join("; ");
    Summary {
        status,
        reason,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INPUTS: &[SummaryInput<'static>] = &[
        SummaryInput {
            type_: "ApplyJobSucceeded",
            negative: false,
            optional: false,
        },
        SummaryInput {
            type_: "InfrastructureHealthy",
            negative: false,
            optional: false,
        },
        SummaryInput {
            type_: "Deleting",
            negative: true,
            optional: true,
        },
    ];

    fn c<'a>(type_: &'a str, status: &'a str, reason: &'a str) -> ConditionView<'a> {
        ConditionView {
            type_,
            status,
            reason,
        }
    }

    #[test]
    fn summary_table() {
        let cases: Vec<(Vec<ConditionView>, &str, &str, &str)> = vec![
            (
                vec![
                    c("ApplyJobSucceeded", "True", "ApplySucceeded"),
                    c("InfrastructureHealthy", "True", "Healthy"),
                ],
                "True",
                "Ready",
                "",
            ),
            (
                vec![
                    c("ApplyJobSucceeded", "True", "ApplySucceeded"),
                    c("InfrastructureHealthy", "True", "Healthy"),
                    c("Deleting", "False", "NotDeleting"),
                ],
                "True",
                "Ready",
                "",
            ),
            (
                vec![
                    c("ApplyJobSucceeded", "False", "ApplyFailed"),
                    c("InfrastructureHealthy", "Unknown", "HealthPending"),
                ],
                "False",
                "NotReady",
                "ApplyJobSucceeded is False (ApplyFailed)",
            ),
            (
                vec![c("ApplyJobSucceeded", "True", "ApplySucceeded")],
                "Unknown",
                "ReadyUnknown",
                "InfrastructureHealthy is not reported yet",
            ),
            (
                vec![
                    c("ApplyJobSucceeded", "True", "ApplySucceeded"),
                    c("InfrastructureHealthy", "True", "Healthy"),
                    c("Deleting", "True", "Deleting"),
                ],
                "False",
                "NotReady",
                "Deleting is True (Deleting)",
            ),
            (
                vec![
                    c("ApplyJobSucceeded", "Unknown", "ApplyPending"),
                    c("InfrastructureHealthy", "Unknown", "HealthPending"),
                ],
                "Unknown",
                "ReadyUnknown",
                "ApplyJobSucceeded is Unknown (ApplyPending); InfrastructureHealthy is Unknown (HealthPending)",
            ),
        ];
        for (conditions, status, reason, message) in cases {
            let s = summarize(INPUTS, &conditions);
            assert_eq!(
                (s.status.as_str(), s.reason, s.message.as_str()),
                (status, reason, message),
                "{conditions:?}"
            );
        }
    }
}
