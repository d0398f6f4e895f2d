//! What flows through the manager: watch events and the passes they wake,
//! and the requests it sends to the apiserver. These make cost visible: a
//! converged provider shows few passes per event and few requests per Job.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatchLabels {
    controller: &'static str,
    source: &'static str,
    woke: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    controller: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    resource: String,
}

pub(super) struct FlowFamilies {
    watch_events: Family<WatchLabels, Counter>,
    reconciles: Family<ReconcileLabels, Counter>,
    requests: Family<RequestLabels, Counter>,
}

impl FlowFamilies {
    pub(super) fn register(r: &mut Registry) -> FlowFamilies {
        let f = FlowFamilies {
            watch_events: Family::default(),
            reconciles: Family::default(),
            requests: Family::default(),
        };
        r.register(
            "captf_watch_events",
            super::help(
                "Watch events seen per controller and source, and whether they woke an object",
            ),
            f.watch_events.clone(),
        );
        r.register(
            "controller_runtime_reconcile",
            super::help("Reconcile passes per controller and result"),
            f.reconciles.clone(),
        );
        r.register(
            "captf_api_requests",
            super::help("Requests the manager sent to the apiserver, by verb and resource (watches included)"),
            f.requests.clone(),
        );
        f
    }
}

/// The resource names the request counter keeps; any other is `other`, so
/// a path can never grow the label set.
const RESOURCES: &[&str] = &[
    "secrets",
    "configmaps",
    "jobs",
    "pods",
    "leases",
    "events",
    "serviceaccounts",
    "roles",
    "rolebindings",
    "namespaces",
    "clusters",
    "machinepools",
    "machines",
    "terraformclusters",
    "terraformclusters/status",
    "terraformmachinepools",
    "terraformmachinepools/status",
    "terraformmachines",
    "terraformmachines/status",
    "terraformplans",
    "terraformplans/status",
    "terraformclusteridentities",
    "terraformclusteridentities/status",
    "tokenreviews",
    "subjectaccessreviews",
];

/// The verb and resource of a request, as the apiserver counts them: a GET
/// of a collection is LIST, one with `watch=true` is WATCH.
pub fn classify(method: &str, path: &str, query: &str) -> (&'static str, String) {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let prefix = if parts.first() == Some(&"api") { 2 } else { 3 };
    let rest = &parts[prefix.min(parts.len())..];
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        r => r,
    };
    let resource = match rest {
        [r, _, sub, ..] => format!("{r}/{sub}"),
        [r, ..] => (*r).to_owned(),
        [] => String::new(),
    };
    let resource = if RESOURCES.contains(&resource.as_str()) {
        resource
    } else {
        "other".to_owned()
    };
    let watch = query
        .split('&')
        .any(|q| q == "watch=true" || q == "watch=1");
    let verb = match method {
        "GET" if watch => "WATCH",
        "GET" if rest.len() == 1 => "LIST",
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        _ => "OTHER",
    };
    (verb, resource)
}

impl super::Metrics {
    fn flow(&self) -> &FlowFamilies {
        &self.inner.flow
    }

    /// A watch event of `source` reached `controller`'s filter.
    pub fn watch_event(&self, controller: &'static str, source: &'static str, woke: bool) {
        self.flow()
            .watch_events
            .get_or_create(&WatchLabels {
                controller,
                source,
                woke: if woke { "true" } else { "false" },
            })
            .inc();
    }

    /// A reconcile pass of `controller` ended (`success`, `error`,
    /// `requeue_after`).
    pub fn reconciled(&self, controller: &'static str, result: &'static str) {
        self.flow()
            .reconciles
            .get_or_create(&ReconcileLabels { controller, result })
            .inc();
    }

    /// The client sent a request.
    pub fn api_request(&self, method: &str, path: &str, query: &str) {
        let (verb, resource) = classify(method, path, query);
        self.flow()
            .requests
            .get_or_create(&RequestLabels { verb, resource })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_classified_as_the_apiserver_counts_them() {
        let cases = [
            (
                "GET",
                "/api/v1/namespaces/ns/secrets",
                "",
                ("LIST", "secrets"),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/secrets/s",
                "",
                ("GET", "secrets"),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/secrets",
                "labelSelector=a&watch=true",
                ("WATCH", "secrets"),
            ),
            (
                "PATCH",
                "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/namespaces/ns/terraformmachinepools/p/status",
                "",
                ("PATCH", "terraformmachinepools/status"),
            ),
            (
                "POST",
                "/apis/batch/v1/namespaces/ns/jobs",
                "",
                ("POST", "jobs"),
            ),
            (
                "GET",
                "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/terraformclusteridentities/i",
                "",
                ("GET", "terraformclusteridentities"),
            ),
            ("GET", "/api/v1/namespaces/ns", "", ("GET", "namespaces")),
            (
                "GET",
                "/apis/example.com/v1/namespaces/ns/widgets/w",
                "",
                ("GET", "other"),
            ),
        ];
        for (method, path, query, (verb, resource)) in cases {
            assert_eq!(
                classify(method, path, query),
                (verb, resource.to_owned()),
                "{method} {path}?{query}"
            );
        }
    }
}
