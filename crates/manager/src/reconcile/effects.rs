//! The one executor of planned writes ([`Effect`], `effect.rs`): makes
//! them in the order the plan listed them, before the pass ends with its
//! Job start and its status.

use captf_api::names::events;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::adoption::{adopt_state, promote};
use super::backups::{BackupOutcome, back_up};
use super::effect::Effect;
use super::pass;
use super::plans;
use super::workload::Workload;
use super::{Context, Error};
use crate::io::leases::release_if_held;
use crate::io::records::{set_unconfirmed, write_record};
use crate::leases::run_lease_name;
use crate::names::state_suffix;
use crate::records::{attempt_record_name, record_labels, run_secret_name};

/// What the writes learned that the rest of the pass needs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Applied {
    /// The run lease was given back (deleted for its holder).
    pub run_lease_released: bool,
    /// How the state backup went, when one was owed.
    pub backup: Option<BackupOutcome>,
}

/// What one effect learned.
enum Learned {
    Nothing,
    RunLeaseReleased,
    Backup(BackupOutcome),
}

/// Makes `effects` in order; the first failure stops the rest (the next
/// pass plans them again from what it reads).
pub async fn apply<K: Workload>(
    ctx: &Context,
    obj: &K,
    effects: &[Effect],
) -> Result<Applied, Error> {
    let mut applied = Applied::default();
    for effect in effects {
        match apply_one(ctx, obj, effect).await? {
            Learned::Nothing => {}
            Learned::RunLeaseReleased => applied.run_lease_released = true,
            Learned::Backup(outcome) => applied.backup = Some(outcome),
        }
    }
    Ok(applied)
}

/// Makes one effect, and says what it learned.
async fn apply_one<K: Workload>(ctx: &Context, obj: &K, effect: &Effect) -> Result<Learned, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    match effect {
        Effect::PatchSpec(patch) => pass::patch_own(ctx, obj, patch).await?,
        Effect::PatchOwner { name, patch } => patch_owner::<K>(ctx, &ns, name, patch).await?,
        Effect::RemoveAnnotation(key) => {
            let patch = json!({"metadata": {"annotations": {*key: Value::Null}}});
            pass::patch_own(ctx, obj, &patch).await?
        }
        Effect::Event {
            warning,
            reason,
            action,
            note,
        } => pass::event(ctx, obj, *warning, reason, action, note.clone()).await,
        Effect::AddFinalizer => pass::add_finalizer(ctx, obj).await?,
        Effect::RemoveFinalizer => pass::remove_finalizer(ctx, obj).await?,
        Effect::DeleteLeftovers => super::cleanup::cleanup(ctx, obj).await?,
        Effect::RetainLeftovers => retain_leftovers(ctx, obj).await?,
        Effect::LeaveForeignRetained => super::retain::release_without_touching(ctx, obj).await?,
        Effect::AdoptRetained { uid } => adopt_retained(ctx, obj, uid).await?,
        Effect::ForgetObject => {
            ctx.metrics.forget(K::KIND.kind(), &ns, &name);
            super::cleanup::sweep_namespace(ctx, &ns, K::KIND, &name).await
        }
        // Best effort: a failed backup does not stop the writes after it.
        Effect::BackUpState(due) => return Ok(Learned::Backup(back_up(ctx, obj, due).await)),
        Effect::PromoteRecord {
            job,
            inputs_hash,
            image_id,
        } => {
            let promoted =
                promote(ctx, obj, job, inputs_hash.as_deref(), image_id.as_deref()).await?;
            if let (Some(reason), warning, note) = promoted.event(job) {
                pass::event(ctx, obj, warning, reason, "Apply", note).await;
            }
        }
        Effect::AdoptState { inputs_hash } => adopt_state(ctx, obj, inputs_hash.as_deref()).await?,
        Effect::WriteAttemptRecord(_)
        | Effect::RecordUnconfirmed { .. }
        | Effect::ClearUnconfirmed => write_attempt_record(ctx, obj, effect).await?,
        Effect::DeleteRunSecret { job } => {
            let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
            let secret = run_secret_name(job);
            gone_is_done(secrets.delete(&secret, &DeleteParams::default()).await)?
        }
        Effect::ReleaseRunLease { job, version } => {
            if release_leases(ctx, obj, job, version.as_deref()).await? {
                return Ok(Learned::RunLeaseReleased);
            }
        }
        Effect::DeleteJob { name } => {
            let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
            gone_is_done(jobs.delete(name, &DeleteParams::background()).await)?
        }
        Effect::SupersedePlan(plan) => {
            let why = "the inputs or the apply policy changed since it was made";
            plans::supersede(ctx, obj, plan, why).await?
        }
        Effect::CountOutputsInvalid(_)
        | Effect::CountRemediation(_)
        | Effect::CountLeaseWait(_)
        | Effect::CountInputsChanged
        | Effect::CountRestore(_)
        | Effect::CountIdentityDenied(_)
        | Effect::CountStateReadFailed(_) => count::<K>(ctx, effect),
    }
    Ok(Learned::Nothing)
}

/// Writes the attempt record, or its mark of an apply of unknown outcome.
async fn write_attempt_record<K: Workload>(
    ctx: &Context,
    obj: &K,
    effect: &Effect,
) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    match effect {
        Effect::WriteAttemptRecord(record) => {
            let record_name = attempt_record_name(K::KIND, &name);
            let labels = record_labels(K::KIND, &name);
            let owner = obj.owner_reference();
            write_record(&ctx.client, &ns, &record_name, record, &owner, labels).await?;
        }
        Effect::RecordUnconfirmed { job } => {
            let record = attempt_record_name(K::KIND, &name);
            set_unconfirmed(&ctx.client, &ns, &record, Some(job)).await?;
        }
        Effect::ClearUnconfirmed => {
            let record = attempt_record_name(K::KIND, &name);
            set_unconfirmed(&ctx.client, &ns, &record, None).await?;
        }
        // Not a record write: `apply_one` makes it.
        _ => {}
    }
    Ok(())
}

/// Moves the counter a count effect names.
fn count<K: Workload>(ctx: &Context, effect: &Effect) {
    match effect {
        Effect::CountOutputsInvalid(reason) => ctx.metrics.outputs_invalid(K::KIND.kind(), reason),
        Effect::CountRemediation(action) => ctx.metrics.remediation_request(action),
        Effect::CountLeaseWait(what) => ctx.metrics.lease_wait_started(K::KIND.kind(), what),
        Effect::CountInputsChanged => ctx.metrics.inputs_hash_changed(K::KIND.kind()),
        Effect::CountRestore(result) => ctx.metrics.state_restore(K::KIND.kind(), result),
        Effect::CountIdentityDenied(reason) => ctx.metrics.identity_denied(reason),
        Effect::CountStateReadFailed(reason) => {
            ctx.metrics.state_read_failed(K::KIND.kind(), reason)
        }
        // Not a count: `apply_one` makes it.
        _ => {}
    }
}

/// Deletion under Retain, announced with how many Secrets stayed.
async fn retain_leftovers<K: Workload>(ctx: &Context, obj: &K) -> Result<(), Error> {
    let kept = super::retain::retain(ctx, obj).await?;
    let note = format!(
        "deletionPolicy Retain: nothing destroyed; kept {kept} Secrets (state, backups, inputs records) labeled {}={}",
        captf_api::names::labels::RETAINED_FROM_UID,
        obj.uid().unwrap_or_default()
    );
    pass::event(
        ctx,
        obj,
        false,
        events::INFRASTRUCTURE_RETAINED,
        "Delete",
        note,
    )
    .await;
    Ok(())
}

/// An earlier object's retained Secrets adopted, announced with how many.
async fn adopt_retained<K: Workload>(ctx: &Context, obj: &K, uid: &str) -> Result<(), Error> {
    let n = super::retain::adopt(ctx, obj, uid).await?;
    let note = format!("adopted {n} Secrets retained by object {uid}");
    pass::event(
        ctx,
        obj,
        false,
        events::RETAINED_STATE_ADOPTED,
        "Adopt",
        note,
    )
    .await;
    Ok(())
}

/// A merge patch of the object's Cluster API owner.
async fn patch_owner<K: Workload>(
    ctx: &Context,
    ns: &str,
    name: &str,
    patch: &Value,
) -> Result<(), Error> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), ns, &K::owner_resource());
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// The run lease `job` holds goes (conditioned on `version`, the one its
/// start took, when the Job carries it), with the Cluster write lease its
/// apply, destroy or restore took; true when the run lease was given back.
async fn release_leases<K: Workload>(
    ctx: &Context,
    obj: &K,
    job: &str,
    version: Option<&str>,
) -> Result<bool, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let suffix = state_suffix(K::KIND, &ns, &obj.name_any());
    let run_lease = run_lease_name(&suffix);
    let released = release_if_held(&ctx.client, &ns, &run_lease, job, version).await?;
    if let Some(name) = obj.cluster_write_lease() {
        release_if_held(&ctx.client, &ns, &name, job, None).await?;
    }
    Ok(released)
}

/// A delete that finds its object gone is done.
fn gone_is_done<T>(r: Result<T, kube::Error>) -> Result<(), Error> {
    match r {
        Ok(_) | Err(kube::Error::Api(_)) => Ok(()),
        Err(e) => Err(Error::from(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn effects_are_made_in_plan_order_and_a_gone_object_is_done() {
        use crate::reconcile::mock_api::{Call, MockApi, status};
        use crate::reconcile::{Config, Context};
        // The per-run Secret is already gone; the lease is held by the Job
        // at resourceVersion 4.
        let mock = || {
            MockApi::new(|c: &Call| match c.line().as_str() {
                "DELETE secrets" => status(404, "NotFound"),
                "DELETE leases"
                    if c.body["preconditions"]["resourceVersion"].as_str() != Some("4") =>
                {
                    status(409, "Conflict")
                }
                "GET leases" => (
                    200,
                    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": c.name(), "namespace": "ns", "resourceVersion": "4", "uid": "l"},
                        "spec": {"holderIdentity": "refresh-1"}}),
                ),
                _ => (
                    200,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
                ),
            })
        };
        let obj: captf_api::TerraformMachinePool = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
            "metadata": {"name": "pool-a", "namespace": "ns", "uid": "u"},
            "spec": {"source": {"image": "m:1"}},
        }))
        .unwrap();
        let effects = |version: Option<&str>| {
            vec![
                Effect::DeleteRunSecret {
                    job: "refresh-1".into(),
                },
                Effect::ReleaseRunLease {
                    job: "refresh-1".into(),
                    version: version.map(str::to_owned),
                },
                Effect::DeleteJob {
                    name: "refresh-0".into(),
                },
            ]
        };
        // The version the Job carries: one conditioned delete. None, or
        // one the lease has moved on from: the lease is read first.
        for (version, lease_lines) in [
            (Some("4"), vec!["DELETE leases"]),
            (None, vec!["GET leases", "DELETE leases"]),
            (
                Some("3"),
                vec!["DELETE leases", "GET leases", "DELETE leases"],
            ),
        ] {
            let mock = mock();
            let ctx = Context::new(mock.client(), Config::new("registry.example/m:dev"));
            let applied = apply(&ctx, &obj, &effects(version)).await.unwrap();
            assert!(applied.run_lease_released, "the Job held the run lease");
            let mut want = vec!["DELETE secrets"];
            want.extend(lease_lines);
            want.push("DELETE jobs");
            assert_eq!(mock.lines(), want, "{version:?}");
            let last = mock.calls().pop().unwrap();
            assert!(last.path.ends_with("/jobs/refresh-0"));
        }
    }
}
