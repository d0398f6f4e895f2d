//! What a pool's outputs and its MachinePool call for, as plain values: the
//! status fields and conditions, the spec patch of the provider IDs, the
//! MachinePool patch of autoscaling mode and the events. No client here;
//! the pool pass applies them.

use captf_api::TerraformMachinePool;
use captf_api::machinepool::MachinePoolInstance;
use captf_api::names::{annotations, events, reasons};
use captf_contract::Role;
use captf_contract::health::Health;
use captf_contract::outputs::RoleOutputs;
use serde_json::{Value, json};

use super::super::pass::decode_outputs;
use crate::adapters::pool as adapter;
use crate::capi::MachinePool;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::state::reader::StateSummary;

/// The pool's outputs, read from its state.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputsPlan {
    pub outputs_valid: ConditionValue,
    /// The merge patch of `spec.providerID` and `spec.providerIDList`, when
    /// they differ from the outputs.
    pub spec_patch: Option<Value>,
    /// `status.replicas` and `status.instances`, when the outputs are
    /// writable.
    pub replicas: Option<i32>,
    pub instances: Option<Option<Vec<MachinePoolInstance>>>,
    /// The provisioned latch after these outputs.
    pub provisioned: bool,
    /// The latch turned on now (`Provisioned` event).
    pub newly_provisioned: bool,
    pub health: Option<Health>,
}

/// Plans the writes of the pool's outputs in `state`; `latched` is the
/// provisioned flag before.
pub fn plan_pool_outputs(
    obj: &TerraformMachinePool,
    state: &StateSummary,
    latched: bool,
) -> OutputsPlan {
    let decoded = match decode_outputs(Role::MachinePool, state) {
        RoleOutputs::MachinePool(d) => d,
        _ => unreachable!("pool outputs decode as pool outputs"),
    };
    let outputs = decoded
        .outputs
        .as_ref()
        .filter(|_| decoded.verdict.writable());
    let mut plan = OutputsPlan {
        outputs_valid: super::super::pass_conditions::outputs_valid(&decoded.verdict),
        spec_patch: None,
        replicas: None,
        instances: None,
        provisioned: false,
        newly_provisioned: false,
        health: decoded.health.clone(),
    };
    if let Some(o) = outputs {
        let w = adapter::writes(o, false);
        if w.instances_truncated {
            plan.outputs_valid = ConditionValue {
                status: ConditionStatus::True,
                reason: reasons::INSTANCES_TRUNCATED,
                message: "more instances than status.instances holds".into(),
            };
        }
        let spec_list = obj.spec.provider_id_list.clone().unwrap_or_default();
        if spec_list != w.provider_id_list || obj.spec.provider_id != w.provider_id {
            plan.spec_patch = Some(json!({"spec": {
                "providerID": w.provider_id,
                "providerIDList": w.provider_id_list,
            }}));
        }
        plan.replicas = Some(w.replicas);
        plan.instances = Some(w.instances);
    }
    plan.provisioned = adapter::provisioned(latched, state.inputs_hash.is_some(), outputs);
    plan.newly_provisioned = plan.provisioned && !latched;
    plan
}

/// Autoscaling mode: the module owns the count, which goes back to the
/// MachinePool.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicasPlan {
    /// `AutoscalingActive`.
    pub condition: ConditionValue,
    /// The MachinePool's merge patch (the replicas-managed-by annotation,
    /// `spec.replicas`), when something changes.
    pub machine_pool_patch: Option<Value>,
    /// The count written back (`ReplicasWrittenBack` event).
    pub written_back: Option<i32>,
}

/// Plans the write-back of `observed` replicas to `mp`.
pub fn plan_replicas(mp: &MachinePool, observed: Option<i32>) -> ReplicasPlan {
    let sync = adapter::replicas_sync(mp, observed);
    let mut patch = serde_json::Map::new();
    if sync.claim {
        patch.insert(
            "metadata".into(),
            json!({"annotations": {annotations::REPLICAS_MANAGED_BY: annotations::REPLICAS_MANAGER}}),
        );
    } else if sync.release {
        patch.insert(
            "metadata".into(),
            json!({"annotations": {annotations::REPLICAS_MANAGED_BY: Value::Null}}),
        );
    }
    let written_back = sync.replicas.filter(|r| mp.spec.replicas != Some(*r));
    if let Some(r) = written_back {
        patch.insert("spec".into(), json!({"replicas": r}));
    }
    ReplicasPlan {
        condition: sync.condition,
        machine_pool_patch: (!patch.is_empty()).then_some(Value::Object(patch)),
        written_back,
    }
}

/// The event of a written-back count.
pub fn written_back_note(replicas: i32) -> (&'static str, String) {
    (
        events::REPLICAS_WRITTEN_BACK,
        format!("MachinePool.spec.replicas set to {replicas}"),
    )
}

#[cfg(test)]
#[path = "outputs_tests.rs"]
mod tests;
