//! The label values each metric accepts. A value outside its set would
//! create a series no dashboard or alert expects (and, for free text,
//! unbounded cardinality), so every value passes through one of these
//! functions before it becomes a label.

use captf_api::common::Operation;
use captf_api::names::{kinds, reasons};

/// A label value the metrics refuse; the observation is dropped and logged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metric label {label}: {value:?} is not one of the documented values")]
pub struct InvalidLabel {
    pub label: &'static str,
    pub value: String,
}

fn one_of(
    label: &'static str,
    set: &[&'static str],
    value: &str,
) -> Result<&'static str, InvalidLabel> {
    set.iter()
        .find(|v| **v == value)
        .copied()
        .ok_or_else(|| InvalidLabel {
            label,
            value: value.to_owned(),
        })
}

/// The module kinds that run Jobs.
pub const KINDS: [&str; 3] = [
    kinds::TERRAFORM_CLUSTER,
    kinds::TERRAFORM_MACHINE,
    kinds::TERRAFORM_MACHINE_POOL,
];

/// `op` on a decision that starts no Job.
pub const NO_OP: &str = "none";

pub const RESULT_SUCCEEDED: &str = "succeeded";
pub const RESULT_FAILED: &str = "failed";
pub const RESULT_DEADLINE: &str = "deadline";
pub const RESULT_INTERRUPTED: &str = "interrupted";
pub const RESULT_BLOCKED: &str = "blocked";
pub const RESULT_PLAN_CHANGED: &str = "plan_changed";

/// How a Job ended.
pub const RESULTS: [&str; 6] = [
    RESULT_SUCCEEDED,
    RESULT_FAILED,
    RESULT_DEADLINE,
    RESULT_INTERRUPTED,
    RESULT_BLOCKED,
    RESULT_PLAN_CHANGED,
];

/// Runner steps with a series of their own; any other step is `other`.
pub const STEPS: [&str; 11] = [
    "init",
    "force-unlock",
    "validate",
    "plan",
    "show-json",
    "apply",
    "apply-refresh-only",
    "destroy",
    "state-push",
    "state-list",
    "prepare",
];
pub const STEP_OTHER: &str = "other";
/// `step` of a failed Job that names no step.
pub const STEP_NONE: &str = "none";

/// Why a Job did not succeed; anything else is `unknown`.
pub const ERROR_KINDS: [&str; 7] = [
    "step",
    "image-layout",
    "interrupted",
    "blocked",
    "plan-changed",
    "deadline",
    ERROR_KIND_UNKNOWN,
];
pub const ERROR_KIND_UNKNOWN: &str = "unknown";

/// What became of a state backup.
pub const BACKUP_RESULTS: [&str; 3] = ["taken", "pruned", "skipped"];

/// How a requested restore ended.
pub const RESTORE_RESULTS: [&str; 3] = ["succeeded", "failed", "not_found"];

pub fn backup_result(value: &str) -> Result<&'static str, InvalidLabel> {
    one_of("result", &BACKUP_RESULTS, value)
}

pub fn restore_result(value: &str) -> Result<&'static str, InvalidLabel> {
    one_of("result", &RESTORE_RESULTS, value)
}

/// Why a state read turned unreadable.
pub const STATE_READ_REASONS: [&str; 5] =
    ["inconsistent", "encrypted", "corrupt", "lost", "locked"];

/// What an operation started waiting for.
pub const LEASE_WAIT_REASONS: [&str; 4] = [
    "run_lease",
    "cluster_operation",
    "machine_operations",
    "job_slot",
];

/// The reasons that make `OutputsValid` False.
pub const OUTPUTS_INVALID_REASONS: [&str; 4] = [
    reasons::OUTPUTS_MISSING,
    reasons::OUTPUTS_INVALID,
    reasons::FAILURE_DOMAIN_MISMATCH,
    reasons::PROVIDER_ID_CHANGED,
];

/// Longest decision reason accepted; condition reasons are far shorter.
const MAX_REASON_LEN: usize = 64;

pub fn kind(value: &str) -> Result<&'static str, InvalidLabel> {
    one_of("kind", &KINDS, value)
}

pub fn op(value: &str) -> Result<&'static str, InvalidLabel> {
    Operation::ALL
        .iter()
        .map(|o| o.as_str())
        .find(|o| *o == value)
        .ok_or_else(|| InvalidLabel {
            label: "op",
            value: value.to_owned(),
        })
}

/// An operation, or `none` for a reconcile that starts nothing.
pub fn decided_op(value: Option<&str>) -> Result<&'static str, InvalidLabel> {
    match value {
        None => Ok(NO_OP),
        Some(v) => op(v),
    }
}

pub fn result(value: &str) -> Result<&'static str, InvalidLabel> {
    one_of("result", &RESULTS, value)
}

/// Unknown steps are folded into `other`: the runner may grow steps the
/// manager does not know yet.
pub fn step(value: &str) -> &'static str {
    STEPS
        .iter()
        .find(|s| **s == value)
        .copied()
        .unwrap_or(STEP_OTHER)
}

/// Unknown classes are folded into `unknown`, for the same reason.
pub fn error_kind(value: &str) -> &'static str {
    ERROR_KINDS
        .iter()
        .find(|k| **k == value)
        .copied()
        .unwrap_or(ERROR_KIND_UNKNOWN)
}

/// The error class a Job that ended with `result` has when the runner
/// reported none (it crashed, or never ran).
pub fn error_kind_of_result(result: &str) -> &'static str {
    match result {
        RESULT_DEADLINE => "deadline",
        RESULT_INTERRUPTED => "interrupted",
        RESULT_BLOCKED => "blocked",
        RESULT_PLAN_CHANGED => "plan-changed",
        _ => ERROR_KIND_UNKNOWN,
    }
}

pub fn state_read_reason(value: &str) -> Result<&'static str, InvalidLabel> {
    one_of("reason", &STATE_READ_REASONS, value)
}

pub fn lease_wait_reason(value: &str) -> Result<&'static str, InvalidLabel> {
    one_of("reason", &LEASE_WAIT_REASONS, value)
}

pub fn outputs_invalid_reason(value: &str) -> Result<&'static str, InvalidLabel> {
    one_of("reason", &OUTPUTS_INVALID_REASONS, value)
}

/// Decision reasons are an open set of CamelCase words (`UpToDate`,
/// `InputsChanged`, ...); anything shaped otherwise is refused so free
/// text never becomes a series.
pub fn decision_reason(value: &str) -> Result<String, InvalidLabel> {
    let mut chars = value.chars();
    let shaped = value.len() <= MAX_REASON_LEN
        && chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_alphanumeric());
    if shaped {
        Ok(value.to_owned())
    } else {
        Err(InvalidLabel {
            label: "reason",
            value: value.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Check = fn(&str) -> Result<&'static str, InvalidLabel>;

    #[test]
    fn closed_sets_accept_their_values_and_refuse_others() {
        let cases: &[(Check, &str, bool)] = &[
            (kind, "TerraformCluster", true),
            (kind, "TerraformMachinePool", true),
            (kind, "TerraformMachineTemplate", false),
            (kind, "terraformcluster", false),
            (op, "apply", true),
            (op, "restore", true),
            (op, "none", false),
            (op, "Apply", false),
            (result, "plan_changed", true),
            (result, "plan-changed", false),
            (result, "succeeded", true),
            (state_read_reason, "corrupt", true),
            (state_read_reason, "StateCorrupt", false),
            (lease_wait_reason, "job_slot", true),
            (lease_wait_reason, "jobslot", false),
            (outputs_invalid_reason, "OutputsMissing", true),
            (outputs_invalid_reason, "OutputsPending", false),
        ];
        for (check, value, ok) in cases {
            assert_eq!(check(value).is_ok(), *ok, "{value}");
        }
    }

    #[test]
    fn open_values_fold_into_their_catch_all() {
        assert_eq!(step("apply-refresh-only"), "apply-refresh-only");
        assert_eq!(step("state-mv"), STEP_OTHER);
        assert_eq!(step(""), STEP_OTHER);
        assert_eq!(error_kind("image-layout"), "image-layout");
        assert_eq!(error_kind("oom"), ERROR_KIND_UNKNOWN);
    }

    #[test]
    fn a_missing_error_kind_follows_the_result() {
        let cases = [
            ("failed", "unknown"),
            ("deadline", "deadline"),
            ("interrupted", "interrupted"),
            ("blocked", "blocked"),
            ("plan_changed", "plan-changed"),
        ];
        for (result, kind) in cases {
            assert_eq!(error_kind_of_result(result), kind, "{result}");
        }
    }

    #[test]
    fn decision_reasons_must_be_camel_case_words() {
        assert_eq!(decided_op(None).unwrap(), "none");
        assert_eq!(decided_op(Some("drift")).unwrap(), "drift");
        assert!(decided_op(Some("none")).is_err());
        assert!(decision_reason("LastApplyFailedBackoff").is_ok());
        for bad in ["", "upToDate", "Up To Date", "Up-to-date", &"A".repeat(65)] {
            assert!(decision_reason(bad).is_err(), "{bad}");
        }
    }
}
