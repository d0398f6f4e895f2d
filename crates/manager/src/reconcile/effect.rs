//! The one vocabulary of the writes a pass plans: bookkeeping's, the
//! outputs', the exports guard's and the cluster's alike. The plans return
//! lists of [`Effect`]; `effects.rs` is their one executor, which makes
//! them in the order listed.

use captf_api::plan::TerraformPlan;
use serde_json::Value;

use crate::records::InputsRecord;
use crate::state::backups::BackupDue;

/// A write a plan asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    // The object and its owner.
    /// A merge patch of the object's own spec or metadata from its
    /// outputs (a machine's provider ID, a pool's provider IDs, the
    /// cluster's endpoint).
    PatchSpec(Value),
    /// A merge patch of the Cluster API owner named `name` (a pool's
    /// MachinePool replicas, a machine's remediation annotations).
    PatchOwner { name: String, patch: Value },
    /// An annotation the pass used up (an approval, a restore request).
    RemoveAnnotation(&'static str),
    Event {
        warning: bool,
        reason: &'static str,
        action: &'static str,
        note: String,
    },

    // The finalizer and what a leaving object leaves behind.
    /// The object's finalizer goes on (the update wakes the next pass).
    AddFinalizer,
    /// The object's finalizer goes, bound to the version the pass read or
    /// last wrote (a 409 runs the pass again; a gone object is done).
    RemoveFinalizer,
    /// Every Secret and Lease the object made goes (safe to repeat).
    DeleteLeftovers,
    /// Deletion under Retain: the state, backups and records stay, unowned
    /// and labeled with the object's UID; what only served the object goes.
    /// The `InfrastructureRetained` event it earns says how many stayed.
    RetainLeftovers,
    /// A deleting object lets go of what an earlier object retained without
    /// touching it: only its own leases, plan key and mirror share go.
    LeaveForeignRetained,
    /// The Secrets the object `uid` retained become this object's; the
    /// `RetainedStateAdopted` event it earns says how many.
    AdoptRetained { uid: String },
    /// The object is gone: its metric series go, and the namespace's
    /// runner leftovers with its last module object.
    ForgetObject,

    // Records and state.
    /// A backup of a state serial the object has not seen yet, then the
    /// pruning. Best effort: a failure is reported in what the executor
    /// learned (the pass goes on and tries again soon).
    BackUpState(Box<BackupDue>),
    /// The attempt record of `job` becomes the applied record, with the
    /// digest its pod ran (announced by the event the promotion earns).
    PromoteRecord {
        job: String,
        inputs_hash: Option<String>,
        image_id: Option<String>,
    },
    /// The state gets the object's owner reference and the inputs hash.
    AdoptState { inputs_hash: Option<String> },
    /// The attempt record as given (the exports guard's, with the exports
    /// fields as they read now).
    WriteAttemptRecord(Box<InputsRecord>),
    /// The attempt record marks `job` as an apply whose outcome is unknown.
    RecordUnconfirmed { job: String },
    /// A restore succeeded after the newest apply: no apply of unknown
    /// outcome is in force any more.
    ClearUnconfirmed,

    // A finished run's leftovers.
    /// The run's inputs Secret goes (gone already is done).
    DeleteRunSecret { job: String },
    /// The run lease (and the Cluster write lease, for a kind that takes
    /// it) goes, if `job` holds it; `version` is the run lease's
    /// resourceVersion the Job carries from its start.
    ReleaseRunLease {
        job: String,
        version: Option<String>,
    },
    /// History pruning (gone already is done).
    DeleteJob { name: String },

    // TerraformPlans.
    /// A TerraformPlan the inputs or the apply policy made moot.
    SupersedePlan(Box<TerraformPlan>),

    // Metrics, counted in order with the writes they go with.
    /// `OutputsValid` turned False for this reason.
    CountOutputsInvalid(&'static str),
    /// A remediation request or withdrawal.
    CountRemediation(&'static str),
    /// A wait for this (`job_slot`, a lease kind) began.
    CountLeaseWait(&'static str),
    /// The inputs hash changed and an apply of the new inputs starts.
    CountInputsChanged,
    /// A restore ended this way (`not_found`: its request named no backup).
    CountRestore(&'static str),
    /// `IdentityAllowed` turned into this refusal (`notfound`,
    /// `namespace`).
    CountIdentityDenied(&'static str),
    /// `StateReadable` turned False for this reason (`lost`, `corrupt`…).
    CountStateReadFailed(&'static str),
}

impl Effect {
    /// An event of the outputs stage.
    pub fn outputs_event(warning: bool, reason: &'static str, note: String) -> Effect {
        Effect::Event {
            warning,
            reason,
            action: "Outputs",
            note,
        }
    }
}
