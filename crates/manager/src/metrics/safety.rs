//! What the safety mechanisms did: TerraformPlan transitions, identity
//! refusals and failed image inspections. Each is counted once per
//! transition or attempt, never per pass that repeats it.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::{KindResultLabels, help, labels, log_refused};

/// `result` of `captf_plan_approvals_total`.
pub const PLAN_RESULTS: [&str; 5] = ["created", "approved", "applied", "superseded", "failed"];

/// `reason` of `captf_identity_denied_total`.
pub const IDENTITY_DENIED_REASONS: [&str; 2] = ["notfound", "namespace"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

pub(super) struct SafetyFamilies {
    plan_approvals: Family<KindResultLabels, Counter>,
    identity_denied: Family<ReasonLabels, Counter>,
    image_inspect_errors: Family<ReasonLabels, Counter>,
}

impl SafetyFamilies {
    pub(super) fn register(r: &mut Registry) -> SafetyFamilies {
        let f = SafetyFamilies {
            plan_approvals: Family::default(),
            identity_denied: Family::default(),
            image_inspect_errors: Family::default(),
        };
        r.register(
            "captf_plan_approvals",
            help("TerraformPlan transitions: created, approved (its apply started), applied, superseded, failed"),
            f.plan_approvals.clone(),
        );
        r.register(
            "captf_identity_denied",
            help("Objects an identity refused: notfound, namespace"),
            f.identity_denied.clone(),
        );
        r.register(
            "captf_image_inspect_errors",
            help("Failed machine-template image inspections: registry, not_allowed, label"),
            f.image_inspect_errors.clone(),
        );
        f
    }
}

/// `reason` of `captf_image_inspect_errors_total`: the registry could not
/// be read, the inspection policy refused the registry, or the image's
/// labels were unusable.
pub const INSPECT_REASONS: [&str; 3] = ["registry", "not_allowed", "label"];

impl super::Metrics {
    /// A TerraformPlan of `kind`'s object moved (`created`, `approved`,
    /// `applied`, `superseded`, `failed`).
    pub fn plan_transition(&self, kind: &str, result: &str) {
        let checked = labels::kind(kind).and_then(|k| {
            let r = PLAN_RESULTS
                .iter()
                .find(|r| **r == result)
                .copied()
                .ok_or_else(|| labels::InvalidLabel {
                    label: "result",
                    value: result.to_owned(),
                })?;
            Ok((k, r))
        });
        match checked {
            Ok((kind, result)) => {
                self.inner
                    .safety
                    .plan_approvals
                    .get_or_create(&KindResultLabels { kind, result })
                    .inc();
            }
            Err(e) => log_refused("captf_plan_approvals_total", &e),
        }
    }

    /// An identity refused an object (`notfound`, `namespace`); once per
    /// transition into the refusal.
    pub fn identity_denied(&self, reason: &str) {
        match IDENTITY_DENIED_REASONS.iter().find(|r| **r == reason) {
            Some(reason) => {
                self.inner
                    .safety
                    .identity_denied
                    .get_or_create(&ReasonLabels { reason })
                    .inc();
            }
            None => log_refused(
                "captf_identity_denied_total",
                &labels::InvalidLabel {
                    label: "reason",
                    value: reason.to_owned(),
                },
            ),
        }
    }

    /// A machine-template image inspection failed (`registry`,
    /// `not_allowed`, `label`).
    pub fn image_inspect_failed(&self, reason: &str) {
        match INSPECT_REASONS.iter().find(|r| **r == reason) {
            Some(reason) => {
                self.inner
                    .safety
                    .image_inspect_errors
                    .get_or_create(&ReasonLabels { reason })
                    .inc();
            }
            None => log_refused(
                "captf_image_inspect_errors_total",
                &labels::InvalidLabel {
                    label: "reason",
                    value: reason.to_owned(),
                },
            ),
        }
    }
}
