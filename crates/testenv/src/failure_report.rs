//! What a failed test's namespace held when it failed: its Jobs, its pods
//! (with each container's state) and its latest events. A test that timed
//! out waiting on a Job says only that it waited; this says whether the Job
//! ran, where its pod stood and what the kubelet or the job controller said.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod};
use kube::Api;
use kube::api::ListParams;

/// Events printed, newest last.
const EVENTS_SHOWN: usize = 40;

/// One block of text naming every Job and pod of `namespace` and its last
/// events; a list that cannot be read says so in its place.
pub async fn namespace_report(client: &kube::Client, namespace: &str) -> String {
    let jobs = Api::<Job>::namespaced(client.clone(), namespace);
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    let events = Api::<Event>::namespaced(client.clone(), namespace);
    let lp = ListParams::default();
    let mut out = format!("----- namespace {namespace}: Jobs -----\n");
    match jobs.list(&lp).await {
        Ok(list) => list.items.iter().for_each(|j| out.push_str(&job_line(j))),
        Err(e) => out.push_str(&format!("(Jobs unreadable: {e})\n")),
    }
    out.push_str(&format!("----- namespace {namespace}: pods -----\n"));
    match pods.list(&lp).await {
        Ok(list) => list.items.iter().for_each(|p| out.push_str(&pod_line(p))),
        Err(e) => out.push_str(&format!("(pods unreadable: {e})\n")),
    }
    out.push_str(&format!("----- namespace {namespace}: events -----\n"));
    match events.list(&lp).await {
        Ok(list) => out.push_str(&event_lines(list.items)),
        Err(e) => out.push_str(&format!("(events unreadable: {e})\n")),
    }
    out
}

fn job_line(job: &Job) -> String {
    let name = job.metadata.name.as_deref().unwrap_or("?");
    let created = job
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    let status = job.status.clone().unwrap_or_default();
    let conditions: Vec<String> = status
        .conditions
        .unwrap_or_default()
        .iter()
        .filter(|c| c.status == "True")
        .map(|c| c.type_.clone())
        .collect();
    format!(
        "{name} created={created} active={} succeeded={} failed={} conditions={conditions:?}\n",
        status.active.unwrap_or(0),
        status.succeeded.unwrap_or(0),
        status.failed.unwrap_or(0),
    )
}

fn pod_line(pod: &Pod) -> String {
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    let spec_node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let status = pod.status.clone().unwrap_or_default();
    let containers: Vec<String> = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
        .map(container_state)
        .collect();
    format!(
        "{name} node={} phase={} containers={containers:?}\n",
        spec_node.as_deref().unwrap_or("-"),
        status.phase.as_deref().unwrap_or("-"),
    )
}

fn container_state(c: &ContainerStatus) -> String {
    let state = c.state.clone().unwrap_or_default();
    let now = if let Some(w) = state.waiting {
        format!("waiting {}", w.reason.unwrap_or_default())
    } else if let Some(r) = state.running {
        format!("running since {:?}", r.started_at.map(|t| t.0.to_string()))
    } else if let Some(t) = state.terminated {
        format!("exited {} {}", t.exit_code, t.reason.unwrap_or_default())
    } else {
        "no state".to_owned()
    };
    format!("{}: {now}", c.name)
}

fn event_lines(mut events: Vec<Event>) -> String {
    let when = |e: &Event| {
        e.last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or_else(|| e.event_time.as_ref().map(|t| t.0))
    };
    events.sort_by_key(when);
    let skip = events.len().saturating_sub(EVENTS_SHOWN);
    events
        .iter()
        .skip(skip)
        .map(|e| {
            let message: String = e
                .message
                .as_deref()
                .unwrap_or("")
                .chars()
                .take(200)
                .collect();
            format!(
                "{} {} {}/{} {}: {message}\n",
                when(e).map(|t| t.to_string()).unwrap_or_default(),
                e.type_.as_deref().unwrap_or("-"),
                e.involved_object.kind.as_deref().unwrap_or("-"),
                e.involved_object.name.as_deref().unwrap_or("-"),
                e.reason.as_deref().unwrap_or("-"),
            )
        })
        .collect()
}
