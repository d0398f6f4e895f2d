//! The operations a runner can perform.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Apply,
    Destroy,
    Refresh,
    Drift,
    Restore,
    Plan,
}

impl Op {
    pub const ALL: [Op; 6] = [
        Op::Apply,
        Op::Destroy,
        Op::Refresh,
        Op::Drift,
        Op::Restore,
        Op::Plan,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Apply => "apply",
            Op::Destroy => "destroy",
            Op::Refresh => "refresh",
            Op::Drift => "drift",
            Op::Restore => "restore",
            Op::Plan => "plan",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Op {
    type Err = String;

    fn from_str(s: &str) -> Result<Op, String> {
        Op::ALL
            .into_iter()
            .find(|op| op.as_str() == s)
            .ok_or_else(|| {
                format!("unknown --op {s:?}: want apply, destroy, refresh, drift, restore or plan")
            })
    }
}
