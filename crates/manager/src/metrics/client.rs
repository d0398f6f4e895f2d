//! Client-go's request metrics, so the dashboards written for Kubernetes
//! controllers read the manager too: `rest_client_requests_total` by
//! status code, method and host, and `rest_client_request_duration_seconds`
//! by verb and host.

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::help;

/// Client-go's latency buckets (5 ms to 60 s).
const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    method: String,
    host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    verb: String,
    host: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

pub(super) struct ClientFamilies {
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram, fn() -> Histogram>,
}

impl ClientFamilies {
    pub(super) fn register(r: &mut Registry) -> ClientFamilies {
        let f = ClientFamilies {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
        };
        r.register(
            "rest_client_requests",
            help("HTTP requests to the apiserver, by status code, method and host"),
            f.requests.clone(),
        );
        r.register(
            "rest_client_request_duration_seconds",
            help("Request latency to the apiserver's response headers, by verb and host"),
            f.latency.clone(),
        );
        f
    }
}

/// A request on its way: what its metrics need once it is answered.
#[derive(Debug, Clone)]
pub struct Sent {
    method: String,
    host: String,
    at: Instant,
}

impl Sent {
    pub fn of<B>(req: &http::Request<B>) -> Sent {
        let uri = req.uri();
        let host = match (uri.host(), uri.port_u16()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_owned(),
            _ => String::new(),
        };
        Sent {
            method: req.method().as_str().to_owned(),
            host,
            at: Instant::now(),
        }
    }
}

impl super::Metrics {
    /// A request was answered with `status`, or failed without an answer
    /// (`None`, counted as code `<error>` as client-go does).
    pub fn rest_request(&self, sent: &Sent, status: Option<u16>) {
        let f = &self.inner.client;
        let code = status.map_or_else(|| "<error>".to_owned(), |s| s.to_string());
        f.requests
            .get_or_create(&RequestLabels {
                code,
                method: sent.method.clone(),
                host: sent.host.clone(),
            })
            .inc();
        f.latency
            .get_or_create(&LatencyLabels {
                verb: sent.method.clone(),
                host: sent.host.clone(),
            })
            .observe(sent.at.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_code_method_and_host() {
        let m = super::super::Metrics::new();
        let req = http::Request::get("https://10.0.0.1:6443/api/v1/namespaces/ns/secrets")
            .body(())
            .unwrap();
        let sent = Sent::of(&req);
        m.rest_request(&sent, Some(200));
        m.rest_request(&sent, Some(200));
        m.rest_request(&sent, None);
        let text = m.encode();
        for line in [
            r#"rest_client_requests_total{code="200",method="GET",host="10.0.0.1:6443"} 2"#,
            r#"rest_client_requests_total{code="<error>",method="GET",host="10.0.0.1:6443"} 1"#,
            r#"rest_client_request_duration_seconds_count{verb="GET",host="10.0.0.1:6443"} 3"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }
}
