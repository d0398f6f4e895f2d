//! The end of a pass: its status patch, conditional on the version the
//! pass read or last wrote, then the Jobs it accounted for marked
//! bookkept with the events and metrics their bookkeeping announced.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::bookkeeping::Mark;
use super::pass::{event, written_key, wrote};
use super::status::Draft;
use super::workload::Workload;
use super::{Context, Error};
use crate::io::jobs::mark_bookkept;

/// Writes the status, then marks the Jobs it accounted for as bookkept.
pub async fn write_status<K: Workload>(
    ctx: &Context,
    obj: &K,
    draft: &Draft,
    marks: &[Mark],
) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let current = serde_json::to_value(obj)
        .ok()
        .and_then(|mut v| v.get_mut("status").map(serde_json::Value::take))
        .unwrap_or(serde_json::Value::Null);
    // A quiet pass writes nothing: the patch goes only when it changes
    // something.
    if !draft.unchanged_from(&current) {
        let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
        let mut patch = draft.patch();
        // Conditional on the version this pass read or last wrote: a
        // status computed from a cache older than that is refused (409)
        // and the pass runs again.
        let expected = ctx
            .written
            .get(&written_key(obj))
            .or_else(|| obj.meta().resource_version.clone());
        if let Some(rv) = expected {
            patch["metadata"] = json!({"resourceVersion": rv});
        }
        let announced = crate::engine::transitions::transition_events(
            |t| obj.condition(t),
            &draft.conditions(),
        );
        let after = api
            .patch_status(
                &obj.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        wrote(ctx, &after);
        // Once the change is written: a refused patch announces nothing,
        // and the pass that writes it does.
        for e in announced {
            event(ctx, obj, e.warning, e.reason, "Reconcile", e.note).await;
        }
    }
    for m in marks {
        for e in &m.events {
            event(ctx, obj, e.warning, &e.reason, &e.action, e.note.clone()).await;
        }
        if let Some(c) = &m.counted {
            let error = c
                .error
                .as_ref()
                .map(|(kind, step)| crate::metrics::JobError {
                    kind,
                    step: step.as_deref(),
                });
            ctx.metrics
                .job_finished(K::KIND.kind(), c.op, c.result, c.duration, error);
            ctx.metrics.job_report(K::KIND.kind(), c.op, &c.report);
        }
        if let Some(result) = m.restore_result {
            ctx.metrics.state_restore(K::KIND.kind(), result);
        }
        if let Err(e) =
            mark_bookkept(&ctx.client, &ns, &m.job, m.outcome, m.plan_hash.as_deref()).await
        {
            tracing::warn!(job = m.job, error = %e, "could not mark a Job bookkept; it is read again next pass");
        }
    }
    Ok(())
}
