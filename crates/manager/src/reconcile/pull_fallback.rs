//! A destroy, refresh, drift or restore Job whose module image cannot be
//! pulled (a pinned digest the registry collected, a tag that is gone):
//! once it has had no ready pod for two minutes it is deleted, the image is
//! remembered as unpullable on the attempt record, and the op starts again
//! on the next image that may have written the state (no failure counted).
//! On the last image, or with no record to remember it in, the Job is left
//! to its deadline and the op's condition says `ImagePullFailed` at once.
//! Apply and plan never fall back. Cost: one LIST of the Job's pods per
//! pass, only for such a Job older than two minutes.

use std::time::SystemTime;

use captf_api::names::{events, reasons};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::open_pass::Closing;
use super::workload::Workload;
use super::{Context, Error};
use crate::engine::decide::Op;
use crate::engine::history::JobRecord;
use crate::engine::job_conditions::{ConditionStatus, ConditionValue};
use crate::io::records::add_unpullable;
use crate::jobs::recovery::{
    PULL_FALLBACK_AFTER, PullFailure, job_images, pull_failure, pull_stuck,
};
use crate::records::attempt_record_name;

/// Checks the active Job; true when it was deleted for a fallback (the
/// pass clears `activeJob` and comes back at once).
pub async fn check<K: Workload>(
    ctx: &Context,
    obj: &K,
    p: &mut Closing,
    active: &JobRecord,
    now: SystemTime,
) -> Result<bool, Error> {
    let age = now.duration_since(active.created).unwrap_or_default();
    if matches!(active.op, Op::Apply | Op::Plan) || age < PULL_FALLBACK_AFTER {
        return Ok(false);
    }
    let Some(job) = p.pass.loaded.job(&active.name) else {
        return Ok(false);
    };
    if job.metadata.deletion_timestamp.is_some() {
        // Deleted by an earlier pass: the start waits until it is gone.
        return Ok(true);
    }
    let Some((image, fallbacks)) = job_images(job) else {
        return Ok(false);
    };
    let ns = obj.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let selector = format!("batch.kubernetes.io/job-name={}", active.name);
    let listed = pods.list(&ListParams::default().labels(&selector)).await?;
    if !pull_stuck(&listed.items) {
        return Ok(false);
    }
    let candidates: Vec<String> = std::iter::once(image.clone()).chain(fallbacks).collect();
    let next = match pull_failure(active.op, &image, &candidates, &[], age, true) {
        PullFailure::Wait => return Ok(false),
        PullFailure::FallBack { next, .. } => Some(next),
        PullFailure::Exhausted => None,
    };
    let record = attempt_record_name(K::KIND, &obj.name_any());
    let remembered = match &next {
        Some(_) => add_unpullable(&ctx.client, &ns, &record, &image).await?,
        None => false,
    };
    let Some(next) = next.filter(|_| remembered) else {
        p.status.set(
            super::pass::op_condition(active.op),
            &ConditionValue {
                status: ConditionStatus::False,
                reason: reasons::IMAGE_PULL_FAILED,
                message: format!(
                    "Job {} cannot pull its image {image} and no other image is left to try; \
                     it runs until its deadline",
                    active.name
                ),
            },
        );
        return Ok(false);
    };
    super::pass::withdraw_job(ctx, obj, &active.name).await?;
    super::pass::event(
        ctx,
        obj,
        true,
        events::IMAGE_PULL_FALLBACK,
        active.op.as_str(),
        format!(
            "Job {} could not pull {image} for {} minutes; {} starts again on {next}",
            active.name,
            PULL_FALLBACK_AFTER.as_secs() / 60,
            active.op.as_str()
        ),
    )
    .await;
    Ok(true)
}
