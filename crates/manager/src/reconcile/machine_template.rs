//! The TerraformMachineTemplate pass: its scale-from-zero status, resolved
//! once per image reference (and per `spec.capacity`) by inspecting the
//! image's labels through the registry API, with a backoff of 30 s doubling
//! to 10 min after a failed read. A template whose status is current costs
//! nothing: no read, no write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use captf_api::names::{conditions, events};
use captf_api::templates::TerraformMachineTemplate;
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::status::Draft;
use super::{Context, ERROR_REQUEUE, Error};
use crate::adapters::capacity::{self, TemplateVariables, TemplateView};

/// First and longest wait after a failed inspection.
pub const INSPECT_RETRY_FIRST: Duration = Duration::from_secs(30);
pub const INSPECT_RETRY_MAX: Duration = Duration::from_secs(600);

/// The wait after `failures` failed inspections in a row.
pub fn retry_delay(failures: u32) -> Duration {
    let doubled = INSPECT_RETRY_FIRST.saturating_mul(1 << failures.saturating_sub(1).min(10));
    doubled.min(INSPECT_RETRY_MAX)
}

/// Failed inspections per template, keyed by UID, with what was inspected
/// (a changed image or capacity starts over).
#[derive(Debug, Clone, Default)]
pub struct Inspections(Arc<Mutex<HashMap<String, Failed>>>);

#[derive(Debug, Clone)]
struct Failed {
    what: String,
    failures: u32,
    retry_at: Instant,
}

impl Inspections {
    /// How long the inspection of `what` must still wait, if it failed.
    fn wait(&self, uid: &str, what: &str, now: Instant) -> Option<Duration> {
        let map = self.0.lock().expect("the inspection backoff");
        let f = map.get(uid).filter(|f| f.what == what)?;
        f.retry_at.checked_duration_since(now)
    }

    fn failed(&self, uid: &str, what: &str, now: Instant) -> Duration {
        let mut map = self.0.lock().expect("the inspection backoff");
        let failures = map
            .get(uid)
            .filter(|f| f.what == what)
            .map_or(1, |f| f.failures + 1);
        let delay = retry_delay(failures);
        map.insert(
            uid.to_owned(),
            Failed {
                what: what.to_owned(),
                failures,
                retry_at: now + delay,
            },
        );
        delay
    }

    /// Refused by the policy: not tried again for the same image and
    /// capacity.
    fn refused(&self, uid: &str, what: &str, now: Instant) {
        self.0.lock().expect("the inspection backoff").insert(
            uid.to_owned(),
            Failed {
                what: what.to_owned(),
                failures: 0,
                retry_at: now + Duration::from_secs(100 * 365 * 24 * 3600),
            },
        );
    }

    fn succeeded(&self, uid: &str) {
        self.0.lock().expect("the inspection backoff").remove(uid);
    }
}

/// The manager's architecture as images name it.
fn architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

fn view(t: &TerraformMachineTemplate) -> TemplateView<'_> {
    TemplateView {
        image: &t.spec.template.spec.workspace.source.image,
        spec_capacity: t.spec.capacity.as_ref(),
        status: t.status.as_ref(),
    }
}

/// How long a template waits for a missing variables source.
pub const VARIABLES_SOURCE_REQUEUE: Duration = Duration::from_secs(30);

/// The template's variables for the schema check: its `variablesFrom`
/// sources (read live, as a machine's pass reads them), then its inline
/// variables.
async fn variables(
    ctx: &Context,
    obj: &TerraformMachineTemplate,
) -> Result<TemplateVariables, Error> {
    let workspace = &obj.spec.template.spec.workspace;
    let sources = workspace.variables_from.clone().unwrap_or_default();
    let read = super::variables::read_variable_sources(
        ctx,
        &obj.namespace().unwrap_or_default(),
        &sources,
    )
    .await?;
    let merged = crate::adapters::variables::merge(
        captf_contract::Role::Machine,
        workspace.variables.as_ref(),
        &read,
    );
    Ok(match merged {
        Ok(vars) => TemplateVariables::Merged(
            vars.iter()
                .map(|(k, v)| (k.to_owned(), v.value.to_value()))
                .collect(),
        ),
        Err(c) if c.reason == captf_api::names::reasons::VARIABLES_SOURCE_NOT_FOUND => {
            TemplateVariables::SourcePending(c.message)
        }
        Err(c) => TemplateVariables::Rejected(c.message),
    })
}

/// The Docker configs of the template's own image pull Secrets (its
/// `spec.template.spec.jobs.imagePullSecrets`, in its namespace): the only
/// credentials an inspection uses. A missing Secret or key is skipped.
async fn pull_secrets(
    ctx: &Context,
    obj: &TerraformMachineTemplate,
) -> Result<Vec<serde_json::Value>, Error> {
    let names: Vec<String> = obj
        .spec
        .template
        .spec
        .workspace
        .jobs
        .as_ref()
        .and_then(|j| j.image_pull_secrets.as_ref())
        .into_iter()
        .flatten()
        .map(|r| r.name.clone())
        .collect();
    let api: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let mut configs = Vec::new();
    for name in names {
        let Some(secret) = api.get_opt(&name).await? else {
            continue;
        };
        let doc = secret
            .data
            .as_ref()
            .and_then(|d| d.get(".dockerconfigjson"))
            .and_then(|b| serde_json::from_slice(&b.0).ok());
        configs.extend(doc);
    }
    Ok(configs)
}

/// The pass: nothing while the status is current; else inspect (off the
/// async workers: the registry client blocks), resolve, write the status.
pub async fn reconcile(
    obj: Arc<TerraformMachineTemplate>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    ctx.passes.count(
        "TerraformMachineTemplate",
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
    );
    let v = view(&obj);
    if !capacity::due(&v) {
        return Ok(Action::await_change());
    }
    let uid = obj.uid().unwrap_or_default();
    let what = serde_json::to_string(&json!([v.image, v.spec_capacity])).unwrap_or_default();
    if let Some(wait) = ctx.inspections.wait(&uid, &what, Instant::now()) {
        return Ok(Action::requeue(wait.min(INSPECT_RETRY_MAX)));
    }
    let (image, policy) = (v.image.to_owned(), ctx.config.image_inspect.clone());
    let pull_secrets = pull_secrets(&ctx, &obj).await?;
    let inspection = tokio::task::spawn_blocking(move || {
        captf_lint::image::inspect::labels(&image, architecture(), &policy, &pull_secrets)
    })
    .await
    .map_err(|e| Error::Invalid(format!("image inspection: {e}")))?;
    if let Err(e) = &inspection {
        tracing::info!(template = %obj.name_any(), namespace = ?obj.namespace(), error = %e, "image not inspected");
        ctx.metrics.image_inspect_failed(match e {
            captf_lint::image::inspect::InspectError::NotAllowed(_) => "not_allowed",
            captf_lint::image::inspect::InspectError::Failed(_) => "registry",
        });
    }
    let vars = variables(&ctx, &obj).await?;
    let r = capacity::resolve(&v, &inspection, &vars);
    if inspection.is_ok()
        && r.capacity_resolved.reason == captf_api::names::reasons::CAPACITY_LABEL_INVALID
    {
        ctx.metrics.image_inspect_failed("label");
    }
    patch_template_status(&ctx, &obj, &r).await?;
    announce(&ctx, &obj, &inspection, &r).await;
    let now = Instant::now();
    match (&inspection, r.retry) {
        (Err(_), true) => Ok(Action::requeue(ctx.inspections.failed(&uid, &what, now))),
        (Err(_), false) => {
            // A refusal of the policy holds until the image or capacity
            // changes (or the manager restarts with other flags).
            ctx.inspections.refused(&uid, &what, now);
            Ok(Action::await_change())
        }
        (Ok(_), _) => {
            ctx.inspections.succeeded(&uid);
            Ok(match vars {
                TemplateVariables::SourcePending(_) => Action::requeue(VARIABLES_SOURCE_REQUEUE),
                _ => Action::await_change(),
            })
        }
    }
}

/// The resolution into the template's status (conditions, capacity, node
/// info and its source) in one merge patch.
async fn patch_template_status(
    ctx: &Context,
    obj: &TerraformMachineTemplate,
    r: &capacity::Resolution,
) -> Result<(), Error> {
    let current = obj
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut draft = Draft::new(
        &current,
        obj.meta().generation.unwrap_or(0),
        SystemTime::now(),
    );
    draft.set(conditions::CAPACITY_RESOLVED, &r.capacity_resolved);
    draft.set(conditions::VARIABLES_VALID, &r.variables_valid);
    draft.field("capacity", &r.capacity);
    draft.field("nodeInfo", &r.node_info);
    draft.field("capacitySource", &r.capacity_source);
    // The template's status has no observedGeneration.
    let mut patch = draft.patch();
    if let Some(s) = patch["status"].as_object_mut() {
        s.remove("observedGeneration");
    }
    let api: Api<TerraformMachineTemplate> =
        Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    api.patch_status(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// `ImageInspectFailed` on the first failure of a kind (the condition's
/// reason changes into it), `CapacityResolved` when the capacity or the
/// node info the template publishes changes.
async fn announce<E: std::fmt::Display>(
    ctx: &Context,
    obj: &TerraformMachineTemplate,
    inspection: &Result<impl Sized, E>,
    r: &capacity::Resolution,
) {
    let before = obj
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == conditions::CAPACITY_RESOLVED));
    let reason = r.capacity_resolved.reason;
    match inspection {
        Err(e) if before.is_none_or(|c| c.reason != reason) => {
            let note = format!(
                "image {} could not be inspected ({reason}): {e}",
                obj.spec.template.spec.workspace.source.image
            );
            super::pass::event(
                ctx,
                obj,
                true,
                events::IMAGE_INSPECT_FAILED,
                "Inspect",
                note,
            )
            .await;
        }
        Err(_) => {}
        Ok(_) => {
            let status = obj.status.as_ref();
            fn json(v: impl serde::Serialize) -> serde_json::Value {
                serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
            }
            let was = (
                json(status.and_then(|s| s.capacity.as_ref())),
                json(status.and_then(|s| s.node_info.as_ref())),
            );
            let now = (json(r.capacity.as_ref()), json(r.node_info.as_ref()));
            if was != now {
                let note = format!("capacity {} and node info {} ({reason})", now.0, now.1);
                super::pass::event(ctx, obj, false, events::CAPACITY_RESOLVED, "Inspect", note)
                    .await;
            }
        }
    }
}

fn error_policy(obj: Arc<TerraformMachineTemplate>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(template = %obj.name_any(), namespace = ?obj.namespace(), error = %err, "template reconcile failed; retrying");
    Action::requeue(ERROR_REQUEUE)
}

/// Runs the TerraformMachineTemplate controller until `shutdown` resolves.
/// It watches only the templates: their status depends on nothing else
/// the cluster holds.
pub async fn run(
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<TerraformMachineTemplate> = match &ctx.config.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    const CONTROLLER: &str = "terraformmachinetemplate";
    let concurrency = ctx.config.concurrency.machine_templates;
    let queue = ctx.metrics.queue(CONTROLLER, concurrency);
    let config = kube::runtime::controller::Config::default().concurrency(concurrency);
    Controller::new(api, super::controller_runtime::primary_watch(&ctx))
        .with_config(config)
        .graceful_shutdown_on(shutdown)
        .run(
            super::controller_runtime::instrumented(CONTROLLER, queue, reconcile),
            error_policy,
            ctx,
        )
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_inspections_back_off_from_30s_to_10m() {
        let delays: Vec<u64> = (1..=7).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(delays, [30, 60, 120, 240, 480, 600, 600]);
        let i = Inspections::default();
        let now = Instant::now();
        assert_eq!(i.failed("u", "a", now), Duration::from_secs(30));
        assert_eq!(i.failed("u", "a", now), Duration::from_secs(60));
        assert!(i.wait("u", "a", now).is_some());
        assert!(i.wait("u", "b", now).is_none(), "another image starts over");
        assert_eq!(i.failed("u", "b", now), Duration::from_secs(30));
        i.succeeded("u");
        assert!(i.wait("u", "b", now).is_none());
    }
}
