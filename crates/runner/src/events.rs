//! Progress events (events.k8s.io/v1) on the object a run works for.
//! Best effort: a failing apiserver never fails or slows the run much.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

use crate::result::truncate_keep_start;

pub const REPORTING_CONTROLLER: &str = "captf.io/runner";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_CONSECUTIVE_FAILURES: u32 = 3;
/// The apiserver refuses notes above 1 KiB.
const MAX_NOTE_BYTES: usize = 1024;

/// The object named by `--event-object`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventObject {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// Parses `<apiVersion>/<kind>/<namespace>/<name>/<uid>`; the API version
/// may itself contain a slash (`group/version`).
pub fn parse_event_object(s: &str) -> Result<EventObject, String> {
    let parts: Vec<&str> = s.rsplitn(5, '/').collect();
    if parts.len() != 5 || parts.iter().any(|p| p.is_empty()) {
        return Err(format!(
            "--event-object {s:?} is not <apiVersion>/<kind>/<namespace>/<name>/<uid>"
        ));
    }
    Ok(EventObject {
        uid: parts[0].to_owned(),
        name: parts[1].to_owned(),
        namespace: parts[2].to_owned(),
        kind: parts[3].to_owned(),
        api_version: parts[4].to_owned(),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// Every reason the runner posts, the documented list
/// (`captf_api::names::events::RUNNER`): a reason outside it does not
/// compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    RunStarted,
    StepStarted,
    StepSucceeded,
    StepFailed,
    PlanSummary,
    ResourcesChanged,
    RunFinished,
}

impl Reason {
    pub const ALL: [Reason; 7] = [
        Reason::RunStarted,
        Reason::StepStarted,
        Reason::StepSucceeded,
        Reason::StepFailed,
        Reason::PlanSummary,
        Reason::ResourcesChanged,
        Reason::RunFinished,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::RunStarted => "RunStarted",
            Reason::StepStarted => "StepStarted",
            Reason::StepSucceeded => "StepSucceeded",
            Reason::StepFailed => "StepFailed",
            Reason::PlanSummary => "PlanSummary",
            Reason::ResourcesChanged => "ResourcesChanged",
            Reason::RunFinished => "RunFinished",
        }
    }
}

impl Reason {
    /// Whether an event of this reason and type only reports progress: a
    /// quiet recorder leaves it out (a routine run that changed nothing
    /// posts nothing), and keeps failures, findings and changes.
    pub fn is_progress(self, event_type: EventType) -> bool {
        match self {
            Reason::RunStarted | Reason::StepStarted | Reason::StepSucceeded => true,
            Reason::RunFinished => event_type == EventType::Normal,
            Reason::StepFailed | Reason::PlanSummary | Reason::ResourcesChanged => false,
        }
    }
}

/// What one event says.
#[derive(Debug, Clone, Copy)]
pub struct EventText<'a> {
    pub event_type: EventType,
    pub reason: &'a str,
    pub action: &'a str,
    pub note: &'a str,
}

/// Builds one event (pure, so its shape is testable).
pub fn build_event(
    object: &EventObject,
    job_name: &str,
    instance: &str,
    text: EventText<'_>,
    now: MicroTime,
) -> Event {
    let EventText {
        event_type,
        reason,
        action,
        note,
    } = text;
    let related = (!job_name.is_empty()).then(|| ObjectReference {
        api_version: Some("batch/v1".to_owned()),
        kind: Some("Job".to_owned()),
        namespace: Some(object.namespace.clone()),
        name: Some(job_name.to_owned()),
        ..ObjectReference::default()
    });
    let base = if job_name.is_empty() {
        &object.name
    } else {
        job_name
    };
    // Named like client-go's recorder: `<name>.<hex nanoseconds>`.
    let nanos = now.0.as_nanosecond();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{}.{nanos:x}", truncate_keep_start(base, 200))),
            namespace: Some(object.namespace.clone()),
            ..ObjectMeta::default()
        },
        event_time: Some(now),
        reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
        reporting_instance: Some(truncate_keep_start(instance, 128).to_owned()),
        action: Some(action.to_owned()),
        reason: Some(reason.to_owned()),
        type_: Some(
            match event_type {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_owned(),
        ),
        note: Some(truncate_keep_start(note, MAX_NOTE_BYTES).to_owned()),
        regarding: Some(ObjectReference {
            api_version: Some(object.api_version.clone()),
            kind: Some(object.kind.clone()),
            namespace: Some(object.namespace.clone()),
            name: Some(object.name.clone()),
            uid: Some(object.uid.clone()),
            ..ObjectReference::default()
        }),
        related,
        ..Event::default()
    }
}

/// Posts events; silent after three failures in a row.
pub struct Recorder {
    target: Option<(Api<Event>, EventObject)>,
    job_name: String,
    instance: String,
    failures: u32,
    /// Progress events left out (`--quiet-events`).
    quiet: bool,
}

impl Recorder {
    /// A recorder that does nothing.
    pub fn disabled() -> Recorder {
        Recorder {
            target: None,
            job_name: String::new(),
            instance: String::new(),
            failures: 0,
            quiet: false,
        }
    }

    /// This recorder, posting no progress event ([`Reason::is_progress`]).
    pub fn quiet(self) -> Recorder {
        Recorder {
            quiet: true,
            ..self
        }
    }

    /// A recorder for `object` through the in-cluster (or `KUBECONFIG`)
    /// client; disabled, with the reason, when no client can be made.
    pub async fn connect(object: EventObject, job_name: &str) -> Result<Recorder, String> {
        let config = tokio::time::timeout(REQUEST_TIMEOUT, kube::Config::infer())
            .await
            .map_err(|_| "timed out loading the Kubernetes client configuration".to_owned())?
            .map_err(|e| format!("loading the Kubernetes client configuration: {e}"))?;
        let client = kube::Client::try_from(config).map_err(|e| format!("{e}"))?;
        let api = Api::namespaced(client, &object.namespace);
        let instance = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .or_else(|| {
                nix::unistd::gethostname()
                    .ok()
                    .map(|h| h.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "runner".to_owned());
        Ok(Recorder {
            target: Some((api, object)),
            job_name: job_name.to_owned(),
            instance,
            failures: 0,
            quiet: false,
        })
    }

    pub async fn emit(&mut self, event_type: EventType, reason: Reason, action: &str, note: &str) {
        if self.quiet && reason.is_progress(event_type) {
            return;
        }
        let reason = reason.as_str();
        if self.failures >= MAX_CONSECUTIVE_FAILURES {
            return;
        }
        let Some((api, object)) = &self.target else {
            return;
        };
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let text = EventText {
            event_type,
            reason,
            action,
            note,
        };
        let ev = build_event(object, &self.job_name, &self.instance, text, now);
        match tokio::time::timeout(REQUEST_TIMEOUT, api.create(&PostParams::default(), &ev)).await {
            Ok(Ok(_)) => self.failures = 0,
            Ok(Err(e)) => {
                self.failures += 1;
                let e = e.to_string();
                eprintln!(
                    "runner: posting event {reason} failed: {}",
                    truncate_keep_start(&e, 300)
                );
            }
            Err(_) => {
                self.failures += 1;
                eprintln!("runner: posting event {reason} timed out");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runners_reasons_are_the_documented_list() {
        let ours: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(ours, captf_api::names::events::RUNNER);
    }
}

#[cfg(test)]
mod quiet_tests {
    use super::*;

    #[test]
    fn a_quiet_run_posts_failures_findings_and_changes_only() {
        use EventType::{Normal, Warning};
        let table = [
            (Reason::RunStarted, Normal, true),
            (Reason::StepStarted, Normal, true),
            (Reason::StepSucceeded, Normal, true),
            (Reason::RunFinished, Normal, true),
            (Reason::RunFinished, Warning, false),
            (Reason::StepFailed, Warning, false),
            (Reason::PlanSummary, Normal, false),
            (Reason::ResourcesChanged, Normal, false),
        ];
        for (reason, ty, progress) in table {
            assert_eq!(reason.is_progress(ty), progress, "{reason:?} {ty:?}");
        }
        // Every reason is in the table.
        for reason in Reason::ALL {
            assert!(table.iter().any(|(r, _, _)| *r == reason), "{reason:?}");
        }
    }
}
