//! What a machine's outputs call for, as plain values: `OutputsValid`, the
//! set-once `spec.providerID`, the status fields, the provisioned latch and
//! the health reading. No client here; the machine pass applies them.

use captf_api::TerraformMachine;
use captf_contract::health::{Health, HealthState};
use captf_contract::outputs::{MachineContext, decode_machine};
use serde_json::{Value, json};

use super::super::pass::root_outputs;
use crate::adapters::machine::{self as adapter, MachineWrites};
use crate::capi::Machine;
use crate::engine::job_conditions::ConditionValue;
use crate::state::reader::StateSummary;

/// The machine's outputs, read from its state.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputsPlan {
    pub outputs_valid: ConditionValue,
    /// `spec.providerID` to write: only while the field is empty, and only
    /// from the state of a successful apply.
    pub set_provider_id: Option<String>,
    /// The status fields, when the outputs are valid (a contract-breaking
    /// output keeps the previous values).
    pub writes: Option<MachineWrites>,
    pub provisioned: bool,
    pub newly_provisioned: bool,
    pub health: Option<Health>,
    /// `provider_id` reads null or empty.
    pub provider_id_missing: bool,
    /// Valid outputs with a health other than pending or unknown: an apply
    /// with such outputs needs no refresh after it.
    pub definite: bool,
}

/// Plans the writes of the machine's outputs in `state`; `latched` is the
/// provisioned flag before. The Machine (when found) says which failure
/// domain was asked for.
pub fn plan_machine_outputs(
    obj: &TerraformMachine,
    machine: Option<&Machine>,
    state: &StateSummary,
    latched: bool,
) -> OutputsPlan {
    let ctx = MachineContext {
        requested_failure_domain: machine
            .and_then(|m| m.spec.failure_domain.clone())
            .filter(|f| !f.is_empty()),
        recorded_provider_id: obj.spec.provider_id.clone(),
    };
    let decoded = decode_machine(&root_outputs(state), &ctx);
    let outputs = decoded
        .outputs
        .as_ref()
        .filter(|_| decoded.verdict.writable());
    let applied = state.inputs_hash.is_some();
    let provisioned = adapter::provisioned(latched, applied, outputs);
    let provider_id_missing = state
        .outputs
        .get("provider_id")
        .is_some_and(|o| o.value.is_null() || o.value.as_str() == "\"\"");
    OutputsPlan {
        outputs_valid: super::super::pass_conditions::outputs_valid(&decoded.verdict),
        set_provider_id: outputs
            .filter(|_| applied && obj.spec.provider_id.is_none())
            .map(|o| o.provider_id.clone()),
        writes: outputs.map(adapter::writes),
        provisioned,
        newly_provisioned: provisioned && !latched,
        health: decoded.health.clone(),
        provider_id_missing,
        definite: outputs.is_some_and(|o| {
            !matches!(o.health.state, HealthState::Pending | HealthState::Unknown)
        }),
    }
}

/// The merge patch of `spec.providerID`.
pub fn provider_id_patch(provider_id: &str) -> Value {
    json!({"spec": {"providerID": provider_id}})
}

/// The status fields of valid outputs (`interruptible` written `false` when
/// the module does not say).
pub fn status_fields(w: &MachineWrites) -> [(&'static str, Value); 3] {
    [
        ("addresses", json!(w.addresses)),
        ("failureDomain", json!(w.failure_domain)),
        ("interruptible", json!(w.interruptible)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::reader::StateOutput;
    use captf_api::names::reasons;
    use std::collections::BTreeMap;

    fn tm(provider_id: Option<&str>) -> TerraformMachine {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachine",
            "metadata": {"name": "cp-0", "namespace": "team-a"},
            "spec": {"source": {"image": "ghcr.io/captf-io/noop-machine:v1"}, "providerID": provider_id},
        }))
        .unwrap()
    }

    fn machine(failure_domain: Option<&str>) -> Machine {
        serde_json::from_value(
            json!({"metadata": {"name": "m-0"}, "spec": {"failureDomain": failure_domain}}),
        )
        .unwrap()
    }

    fn state(
        inputs_hash: Option<&str>,
        provider_id: Value,
        fd: Value,
        health: &str,
    ) -> StateSummary {
        let out = |v: Value| StateOutput {
            value: v.into(),
            type_: Value::Null,
            sensitive: false,
        };
        let outputs = BTreeMap::from([
            ("provider_id".to_owned(), out(provider_id)),
            (
                "addresses".to_owned(),
                out(
                    json!([{"type": "ExternalIP", "address": "1.2.3.4"}, {"type": "InternalIP", "address": "10.0.0.1"}]),
                ),
            ),
            ("failure_domain".to_owned(), out(fd)),
            ("interruptible".to_owned(), out(Value::Null)),
            (
                "health".to_owned(),
                out(json!({"state": health, "healthy": true})),
            ),
        ]);
        StateSummary {
            serial: 3,
            lineage: "l".into(),
            runtime_version: "1.10.10".into(),
            outputs,
            managed_resources: 1,
            compressed_bytes: 100,
            inputs_hash: inputs_hash.map(str::to_owned),
        }
    }

    #[test]
    fn outputs_table() {
        let id = json!("noop:///team-a/m-0");
        let fd = json!("zone-a");
        let cases = [
            // what, recorded ID, requested FD, state, reason, set ID, provisioned, definite
            (
                "first apply, running",
                None,
                Some("zone-a"),
                state(Some("h2:a"), id.clone(), fd.clone(), "running"),
                reasons::OUTPUTS_VALID,
                Some("noop:///team-a/m-0"),
                true,
                true,
            ),
            (
                "first apply, pending",
                None,
                Some("zone-a"),
                state(Some("h2:a"), id.clone(), fd.clone(), "pending"),
                reasons::OUTPUTS_VALID,
                Some("noop:///team-a/m-0"),
                false,
                false,
            ),
            (
                "an unsuccessful apply sets nothing",
                None,
                Some("zone-a"),
                state(None, id.clone(), fd.clone(), "running"),
                reasons::OUTPUTS_VALID,
                None,
                false,
                true,
            ),
            (
                "already set: written once",
                Some("noop:///team-a/m-0"),
                Some("zone-a"),
                state(Some("h2:a"), id.clone(), fd.clone(), "running"),
                reasons::OUTPUTS_VALID,
                None,
                true,
                true,
            ),
            (
                "a different ID later",
                Some("noop:///team-a/old"),
                Some("zone-a"),
                state(Some("h2:a"), id.clone(), fd.clone(), "running"),
                reasons::PROVIDER_ID_CHANGED,
                None,
                false,
                false,
            ),
            (
                "another failure domain",
                None,
                Some("zone-b"),
                state(Some("h2:a"), id.clone(), fd.clone(), "running"),
                reasons::FAILURE_DOMAIN_MISMATCH,
                None,
                false,
                false,
            ),
            (
                "null failure domain with a request",
                None,
                Some("zone-a"),
                state(Some("h2:a"), id.clone(), Value::Null, "running"),
                reasons::FAILURE_DOMAIN_MISMATCH,
                None,
                false,
                false,
            ),
            (
                "no request, any domain",
                None,
                None,
                state(Some("h2:a"), id.clone(), fd.clone(), "running"),
                reasons::OUTPUTS_VALID,
                Some("noop:///team-a/m-0"),
                true,
                true,
            ),
            (
                "provider ID not known yet",
                None,
                None,
                state(Some("h2:a"), Value::Null, fd.clone(), "running"),
                reasons::OUTPUTS_PENDING,
                None,
                false,
                false,
            ),
        ];
        for (what, recorded, requested, st, reason, set, provisioned, definite) in cases {
            let m = machine(requested);
            let plan = plan_machine_outputs(&tm(recorded), Some(&m), &st, false);
            assert_eq!(plan.outputs_valid.reason, reason, "{what}");
            assert_eq!(plan.set_provider_id.as_deref(), set, "{what}");
            assert_eq!(plan.provisioned, provisioned, "{what}");
            assert_eq!(plan.definite, definite, "{what}");
        }
    }

    #[test]
    fn valid_outputs_write_the_status_in_canonical_order() {
        let st = state(
            Some("h2:a"),
            json!("noop:///team-a/m-0"),
            Value::Null,
            "running",
        );
        let plan = plan_machine_outputs(&tm(None), Some(&machine(None)), &st, false);
        let fields = status_fields(plan.writes.as_ref().unwrap());
        assert_eq!(
            fields[0].1,
            json!([{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "ExternalIP", "address": "1.2.3.4"}]),
            "internal before external"
        );
        assert_eq!(fields[1].1, Value::Null);
        assert_eq!(
            fields[2].1,
            json!(false),
            "a null interruptible is written false"
        );
        let latched = plan_machine_outputs(
            &tm(Some("noop:///team-a/m-0")),
            None,
            &state(Some("h2:a"), Value::Null, Value::Null, "running"),
            true,
        );
        assert!(latched.provisioned, "the latch holds");
        assert!(latched.provider_id_missing);
    }
}
