//! What a finished apply or restore makes durable, for the effect
//! executor (`effects.rs`): the attempt record promoted into the applied
//! record with the digest its pod ran, and the state adopted (owned by
//! this object, stamped with the inputs hash), each with its event.

use captf_api::names::events;
use kube::ResourceExt;

use super::workload::Workload;
use super::{Context, Error};
use crate::io::records::{read_record, write_record};
use crate::io::state::adopt;
use crate::names::state_suffix;
use crate::records::{
    InputsRecord, applied_record_name, attempt_record_name, record_labels, run_secret_name,
};

/// The state adopted after a successful apply: owned by this object and
/// stamped with the apply's inputs hash, each repair announced.
pub(super) async fn adopt_state<K: Workload>(
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

/// How a promotion went, for its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Promoted {
    /// The applied record pins this digest (`changed`: a new one).
    Pinned { digest: String, changed: bool },
    /// Promoted, but the pod reported no digest and none was kept.
    NoDigest,
    /// Neither the attempt record nor the per-run Secret holds the Job's
    /// inputs: the applied record still describes an older apply.
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

/// Promotes the inputs `job` ran with (its attempt record, or its per-run
/// Secret when a crash came between the Job's create and the record's
/// write) into the applied record, pinning the digest its pod ran.
pub(super) async fn promote<K: Workload>(
    ctx: &Context,
    obj: &K,
    job: &str,
    inputs_hash: Option<&str>,
    image_id: Option<&str>,
) -> Result<Promoted, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let attempt = read_record(&ctx.client, &ns, &attempt_record_name(K::KIND, &name))
        .await?
        .and_then(Result::ok);
    let names_job = attempt.as_ref().is_some_and(|a| a.names_job(job));
    // The per-run Secret is read only when the attempt record does not
    // name the Job: the usual promotion costs no request more.
    let per_run = if names_job {
        None
    } else {
        read_record(&ctx.client, &ns, &run_secret_name(job))
            .await?
            .and_then(Result::ok)
    };
    let Some(source) =
        InputsRecord::promotion_source(job, inputs_hash, attempt.as_ref(), per_run.as_ref())
    else {
        return Ok(Promoted::InputsGone);
    };
    let applied_name = applied_record_name(K::KIND, &name);
    let previous = read_record(&ctx.client, &ns, &applied_name)
        .await?
        .and_then(Result::ok);
    let digest = image_id.and_then(|id| id.split_once('@')).map(|(_, d)| d);
    let applied = source.promote(job, digest, previous.as_ref());
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
