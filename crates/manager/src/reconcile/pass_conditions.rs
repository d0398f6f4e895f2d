//! The conditions every kind sets the same way: `OutputsValid`,
//! `InfrastructureHealthy` before and after a state read, `Paused`,
//! `Deleting` and the `Ready` summary.

use captf_api::names::{conditions, reasons};

use super::open_pass::OpenPass;
use super::status::Draft;
use super::workload::Workload;
use crate::engine::decide::Op;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::engine::ready::{SummaryInput, summarize};

/// `OutputsValid` from a decoder's verdict.
pub fn outputs_valid(v: &captf_contract::outputs::OutputsVerdict) -> ConditionValue {
    ConditionValue {
        status: v.status(),
        reason: v.reason().as_str(),
        message: v.message(),
    }
}

/// `InfrastructureHealthy` from the module's health once state was read;
/// true when health reads `pending`.
pub fn record_health(
    status: &mut Draft,
    provisioned: bool,
    health: Option<&captf_contract::health::Health>,
) -> bool {
    let phase = if provisioned {
        crate::adapters::Provisioning::Provisioned
    } else {
        crate::adapters::Provisioning::InProgress
    };
    status.set(
        conditions::INFRASTRUCTURE_HEALTHY,
        &crate::adapters::infrastructure_healthy(phase, health),
    );
    health.is_some_and(|h| h.state == captf_contract::health::HealthState::Pending)
}

/// `InfrastructureHealthy` before any state was read: waiting for the first
/// apply, or provisioning once one ran.
pub fn not_yet_healthy(p: &OpenPass) -> ConditionValue {
    let phase = if p.loaded.observed.iter().any(|o| o.record.op == Op::Apply) {
        crate::adapters::Provisioning::InProgress
    } else {
        crate::adapters::Provisioning::NotStarted
    };
    crate::adapters::infrastructure_healthy(phase, None)
}

pub(super) fn deleting_condition(deleting: bool, paused: bool) -> ConditionValue {
    match (deleting, paused) {
        (false, _) => ConditionValue {
            status: ConditionStatus::False,
            reason: reasons::NOT_DELETING,
            message: String::new(),
        },
        (true, true) => ConditionValue {
            status: ConditionStatus::True,
            reason: reasons::DELETING,
            message: "deletion waits until the object is unpaused".into(),
        },
        (true, false) => ConditionValue {
            status: ConditionStatus::True,
            reason: reasons::DELETING,
            message: "destroying the infrastructure".into(),
        },
    }
}

pub(super) fn paused_condition(paused: bool) -> ConditionValue {
    if paused {
        ConditionValue {
            status: ConditionStatus::True,
            reason: reasons::PAUSED,
            message: "paused: bookkeeping only, no new Job".into(),
        }
    } else {
        ConditionValue {
            status: ConditionStatus::False,
            reason: reasons::NOT_PAUSED,
            message: String::new(),
        }
    }
}

/// `Ready` from the kind's inputs.
pub fn set_ready<K: Workload>(draft: &mut Draft, provisioned: bool) {
    let i = |type_, negative, optional| SummaryInput {
        type_,
        negative,
        optional,
    };
    let inputs: Vec<SummaryInput<'_>> = if provisioned {
        let mut v = vec![
            i(conditions::INFRASTRUCTURE_HEALTHY, false, false),
            i(conditions::DELETING, true, true),
        ];
        if K::READY_READS_APPLY_ONCE_PROVISIONED {
            v.push(i(conditions::APPLY_JOB_SUCCEEDED, false, false));
        }
        v
    } else {
        vec![
            i(conditions::DEPENDENCIES_READY, false, false),
            i(conditions::IDENTITY_ALLOWED, false, true),
            i(conditions::CREDENTIALS_MIRRORED, false, true),
            i(conditions::RUNNER_RBAC_READY, false, true),
            i(conditions::APPLY_JOB_SUCCEEDED, false, false),
            i(conditions::STATE_READABLE, false, false),
            i(conditions::OUTPUTS_VALID, false, true),
            i(conditions::DELETING, true, true),
        ]
    };
    let s = summarize(&inputs, &draft.views());
    draft.set(
        conditions::READY,
        &ConditionValue {
            status: s.status,
            reason: s.reason,
            message: s.message,
        },
    );
}
