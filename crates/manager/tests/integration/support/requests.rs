//! A client layer that records every request the manager sends (method,
//! path, query), so tests can count what a pass or a minute costs.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::Request;
use tower::{Layer, Service};

/// One request as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub method: String,
    pub path: String,
    pub query: String,
}

impl Sent {
    /// A watch (a long-running stream, not the cost of a pass).
    pub fn is_watch(&self) -> bool {
        self.verb() == "WATCH"
    }

    /// A request that changes something.
    pub fn is_write(&self) -> bool {
        !matches!(self.method.as_str(), "GET" | "HEAD" | "OPTIONS")
    }

    /// The verb and resource as the apiserver counts them (a GET of a
    /// collection is LIST), classified as the manager's own counter does.
    fn classified(&self) -> (&'static str, String) {
        captf_manager::metrics::flow::classify(&self.method, &self.path, &self.query)
    }

    pub fn verb(&self) -> &'static str {
        self.classified().0
    }

    pub fn resource(&self) -> String {
        self.classified().1
    }
}

#[derive(Debug, Clone, Default)]
pub struct Requests {
    log: Arc<Mutex<Vec<Sent>>>,
}

impl Requests {
    pub fn client(&self, config: &kube::Config) -> kube::Client {
        kube::client::ClientBuilder::try_from(config.clone())
            .expect("a client builder from the test config")
            .with_layer(self)
            .build()
    }

    /// How many requests were sent so far (a mark to slice the log at).
    pub fn mark(&self) -> usize {
        self.log.lock().unwrap().len()
    }

    /// The requests sent since `mark`, watches left out.
    pub fn since(&self, mark: usize) -> Vec<Sent> {
        self.log.lock().unwrap()[mark..]
            .iter()
            .filter(|s| !s.is_watch())
            .cloned()
            .collect()
    }
}

/// `VERB resource: count` lines, most frequent first (for failure messages
/// and the figures a test prints).
pub fn tally(sent: &[Sent]) -> String {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for s in sent {
        *counts
            .entry(format!("{} {}", s.verb(), s.resource()))
            .or_default() += 1;
    }
    let mut v: Vec<_> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl<S> Layer<S> for Requests {
    type Service = Recorded<S>;
    fn layer(&self, inner: S) -> Recorded<S> {
        Recorded {
            inner,
            requests: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Recorded<S> {
    inner: S,
    requests: Requests,
}

impl<S, B> Service<Request<B>> for Recorded<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        self.requests.log.lock().unwrap().push(Sent {
            method: req.method().to_string(),
            path: req.uri().path().to_owned(),
            query: req.uri().query().unwrap_or_default().to_owned(),
        });
        self.inner.call(req)
    }
}
