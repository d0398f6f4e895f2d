//! The writes bookkeeping plans (`bookkeeping.rs`), made in the order
//! planned: the record promotion with its digest pin, the state adoption,
//! the run lease given back, the per-run Secret and old Jobs deleted.

use captf_api::names::{annotations, events};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};

use super::bookkeeping::{BookkeepingEffect, BookkeepingPolicy, Bookkept, plan_bookkeeping};
use super::pass::Loaded;
use super::status::Draft;
use super::workload::Workload;
use super::{Context, Error};
use crate::io::leases::release_if_held;
use crate::io::records::{read_record, set_unconfirmed, write_record};
use crate::io::state::adopt;
use crate::leases::run_lease_name;
use crate::names::state_suffix;
use crate::records::{applied_record_name, attempt_record_name, record_labels, run_secret_name};

/// Applies the bookkeeping writes in the order planned (a write that finds
/// its object gone is done).
/// Returns whether it gave the run lease back (deleted it for its holder).
pub async fn execute_bookkeeping<K: Workload>(
    ctx: &Context,
    obj: &K,
    effects: &[BookkeepingEffect],
) -> Result<bool, Error> {
    let mut run_lease_released = false;
    let ns = obj.namespace().unwrap_or_default();
    let suffix = state_suffix(K::KIND, &ns, &obj.name_any());
    let gone_is_done = |r: Result<(), kube::Error>| match r {
        Ok(()) | Err(kube::Error::Api(_)) => Ok(()),
        Err(e) => Err(Error::from(e)),
    };
    for effect in effects {
        match effect {
            BookkeepingEffect::PromoteRecord {
                job,
                inputs_hash,
                image_id,
            } => {
                let promoted =
                    promote(ctx, obj, job, inputs_hash.as_deref(), image_id.as_deref()).await?;
                let (reason, warning, note) = promoted.event(job);
                if let Some(reason) = reason {
                    super::pass::event(ctx, obj, warning, reason, "Apply", note).await;
                }
            }
            BookkeepingEffect::AdoptState { inputs_hash } => {
                adopt_state(ctx, obj, inputs_hash.as_deref()).await?
            }
            BookkeepingEffect::DeleteRunSecret { job } => {
                let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
                let r = secrets
                    .delete(&run_secret_name(job), &DeleteParams::default())
                    .await;
                gone_is_done(r.map(drop))?
            }
            BookkeepingEffect::ReleaseRunLease { job } => {
                run_lease_released =
                    release_if_held(&ctx.client, &ns, &run_lease_name(&suffix), job).await?;
                if let Some(name) = obj.cluster_write_lease() {
                    // The cluster write lease its apply, destroy or restore took.
                    release_if_held(&ctx.client, &ns, &name, job).await?;
                }
            }
            BookkeepingEffect::RecordUnconfirmed { job } => {
                let record = attempt_record_name(K::KIND, &obj.name_any());
                set_unconfirmed(&ctx.client, &ns, &record, Some(job)).await?;
            }
            BookkeepingEffect::ClearUnconfirmed => {
                let record = attempt_record_name(K::KIND, &obj.name_any());
                set_unconfirmed(&ctx.client, &ns, &record, None).await?;
            }
            BookkeepingEffect::ClearRestoreRequest => {
                let patch = serde_json::json!({"metadata": {"annotations": {annotations::RESTORE_STATE: null}}});
                super::pass::patch_own(ctx, obj, &patch).await?;
            }
            BookkeepingEffect::DeleteJob { name } => {
                let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
                gone_is_done(
                    jobs.delete(name, &DeleteParams::background())
                        .await
                        .map(drop),
                )?
            }
        }
    }
    Ok(run_lease_released)
}

/// The state adopted after a successful apply: owned by this object and
/// stamped with the apply's inputs hash, each repair announced.
async fn adopt_state<K: Workload>(
    ctx: &Context,
    obj: &K,
    inputs_hash: Option<&str>,
) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let suffix = state_suffix(K::KIND, &ns, &obj.name_any());
    let cluster = crate::adapters::cluster_name_label(obj.meta()).unwrap_or_default();
    let adopted = adopt(
        &ctx.client,
        &ns,
        &suffix,
        &obj.owner_reference(),
        &crate::names::state_labels(K::KIND, &obj.name_any(), cluster),
        inputs_hash,
    )
    .await?;
    if let (true, Some(hash)) = (adopted.rehashed, inputs_hash) {
        let note = format!("the state now records inputs hash {hash}");
        super::pass::event(ctx, obj, false, events::STATE_ADOPTED, "Apply", note).await;
    }
    if adopted.reowned > 0 {
        let note = format!(
            "{} state Secrets referred to an earlier object of this name; they are owned by this one now",
            adopted.reowned
        );
        super::pass::event(
            ctx,
            obj,
            false,
            events::OWNER_REFERENCES_REPAIRED,
            "Apply",
            note,
        )
        .await;
    }
    Ok(())
}

/// Bookkeeping of every finished Job not yet bookkept: the plan, then its
/// writes.
pub async fn bookkeep<K: Workload>(
    ctx: &Context,
    obj: &K,
    loaded: &Loaded,
    draft: &mut Draft,
    policy: &BookkeepingPolicy,
) -> Result<Bookkept, Error> {
    let mut plan = plan_bookkeeping(loaded, draft, policy);
    plan.booked.run_lease_released = execute_bookkeeping(ctx, obj, &plan.effects).await?;
    Ok(plan.booked)
}

/// How a promotion went, for its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Promoted {
    /// The applied record pins this digest (`changed`: a new one).
    Pinned { digest: String, changed: bool },
    /// Promoted, but the pod reported no digest and none was kept.
    NoDigest,
    /// The attempt record is gone or names a newer apply: the applied
    /// record still describes an older one.
    InputsGone,
}

impl Promoted {
    /// The event a promotion of `job` announces (`None`: none).
    pub fn event(&self, job: &str) -> (Option<&'static str>, bool, String) {
        match self {
            Promoted::Pinned { changed: false, .. } => (None, false, String::new()),
            Promoted::Pinned { digest, .. } => (
                Some(events::DIGEST_PINNED),
                false,
                format!("Job {job} ran image digest {digest}; later Jobs run it"),
            ),
            Promoted::NoDigest => (
                Some(events::DIGEST_UNKNOWN),
                true,
                format!("Job {job} reported no image digest; later Jobs run the image reference"),
            ),
            Promoted::InputsGone => (
                Some(events::APPLIED_INPUTS_UNKNOWN),
                true,
                format!(
                    "Job {job} succeeded but its inputs are no longer on record; the applied record describes an older apply"
                ),
            ),
        }
    }
}

/// Promotes the attempt record written for `job` into the applied record,
/// pinning the digest its pod ran.
async fn promote<K: Workload>(
    ctx: &Context,
    obj: &K,
    job: &str,
    inputs_hash: Option<&str>,
    image_id: Option<&str>,
) -> Result<Promoted, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let Some(Ok(attempt)) =
        read_record(&ctx.client, &ns, &attempt_record_name(K::KIND, &name)).await?
    else {
        return Ok(Promoted::InputsGone);
    };
    if inputs_hash.is_some_and(|h| h != attempt.meta.inputs_hash) {
        // The attempt record moved on to a newer apply already.
        return Ok(Promoted::InputsGone);
    }
    let applied_name = applied_record_name(K::KIND, &name);
    let previous = read_record(&ctx.client, &ns, &applied_name)
        .await?
        .and_then(Result::ok);
    let digest = image_id.and_then(|id| id.split_once('@')).map(|(_, d)| d);
    let applied = attempt.promote(job, digest, previous.as_ref());
    let labels = record_labels(K::KIND, &name);
    write_record(
        &ctx.client,
        &ns,
        &applied_name,
        &applied,
        &obj.owner_reference(),
        labels,
    )
    .await?;
    Ok(match applied.meta.image_digest {
        Some(digest) => Promoted::Pinned {
            changed: previous.and_then(|p| p.meta.image_digest).as_deref() != Some(digest.as_str()),
            digest,
        },
        None => Promoted::NoDigest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn bookkeeping_writes_in_plan_order_and_a_gone_object_is_done() {
        use crate::reconcile::mock_api::{Call, MockApi, status};
        use crate::reconcile::{Config, Context};
        // The per-run Secret is already gone; the lease is held by the Job.
        let mock = MockApi::new(|c: &Call| match c.line().as_str() {
            "DELETE secrets" => status(404, "NotFound"),
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
        });
        let ctx = Context::new(mock.client(), Config::new("registry.example/m:dev"));
        let obj: captf_api::TerraformMachinePool = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "TerraformMachinePool",
            "metadata": {"name": "pool-a", "namespace": "ns", "uid": "u"},
            "spec": {"source": {"image": "m:1"}},
        }))
        .unwrap();
        let effects = vec![
            BookkeepingEffect::DeleteRunSecret {
                job: "refresh-1".into(),
            },
            BookkeepingEffect::ReleaseRunLease {
                job: "refresh-1".into(),
            },
            BookkeepingEffect::DeleteJob {
                name: "refresh-0".into(),
            },
        ];
        execute_bookkeeping(&ctx, &obj, &effects).await.unwrap();
        assert_eq!(
            mock.lines(),
            vec![
                "DELETE secrets",
                "GET leases",
                "DELETE leases",
                "DELETE jobs"
            ]
        );
        assert!(mock.calls()[3].path.ends_with("/jobs/refresh-0"));
    }

    #[test]
    fn a_promotion_announces_a_new_digest_a_missing_one_or_lost_inputs() {
        let job = "captf-c-prod-apply-a1-abcdef";
        let pinned = |changed| Promoted::Pinned {
            digest: "sha256:aa".into(),
            changed,
        };
        let cases = [
            (pinned(true), Some(("DigestPinned", false))),
            (pinned(false), None),
            (Promoted::NoDigest, Some(("DigestUnknown", true))),
            (Promoted::InputsGone, Some(("AppliedInputsUnknown", true))),
        ];
        for (promoted, want) in cases {
            let (reason, warning, note) = promoted.event(job);
            assert_eq!(reason.map(|r| (r, warning)), want, "{promoted:?}");
            if reason.is_some() {
                assert!(note.contains(job), "{note}");
            }
        }
    }
}
