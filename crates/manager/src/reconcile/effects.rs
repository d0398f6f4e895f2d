//! The writes a machine's or a pool's plan asks for, and their execution in
//! the order planned (before the pass ends with its Job start and status).

use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::exports::{self, GuardWrite};
use super::pass;
use super::workload::Workload;
use super::{Context, Error};

/// A write the plan asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedEffect {
    /// The object's own spec from its outputs (a machine's provider ID, a
    /// pool's provider IDs).
    PatchSpec(Value),
    /// The Cluster API owner (a pool's MachinePool replicas, a machine's
    /// remediation annotations).
    PatchOwner { name: String, patch: Value },
    Event {
        warning: bool,
        reason: &'static str,
        action: &'static str,
        note: String,
    },
    /// `OutputsValid` turned False for `reason` (a metric).
    CountOutputsInvalid(&'static str),
    /// A remediation request or withdrawal (a metric).
    CountRemediation(&'static str),
    /// The pool exports guard's writes.
    Guard(GuardWrite),
}

/// Makes `effects` in order; `owner` is the resource of the object's owner.
pub async fn apply<K: Workload>(
    ctx: &Context,
    obj: &K,
    owner: &ApiResource,
    effects: &[OwnedEffect],
) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    for e in effects {
        match e {
            OwnedEffect::PatchSpec(patch) => pass::patch_own(ctx, obj, patch).await?,
            OwnedEffect::PatchOwner { name, patch } => {
                let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, owner);
                api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await?;
            }
            OwnedEffect::Event {
                warning,
                reason,
                action,
                note,
            } => pass::event(ctx, obj, *warning, reason, action, note.clone()).await,
            OwnedEffect::CountOutputsInvalid(reason) => {
                ctx.metrics.outputs_invalid(K::KIND.kind(), reason)
            }
            OwnedEffect::CountRemediation(action) => ctx.metrics.remediation_request(action),
            OwnedEffect::Guard(w) => exports::write(ctx, obj, w).await?,
        }
    }
    Ok(())
}
