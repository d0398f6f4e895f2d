//! A scripted apiserver for request-sequence tests of the execute stages:
//! it answers each request from a responder the test writes and records
//! every request in order (method, path, body), in the manner of kube-rs
//! `controller-rs`. Test-only.

use std::sync::{Arc, Mutex};

use http::{Request, Response};
use http_body_util::BodyExt;
use serde_json::{Value, json};

/// One request as the manager sent it.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub path: String,
    /// The query string, undecoded ("" when none).
    pub query: String,
    /// The request's content type ("" when none): the patch type.
    pub content_type: String,
    pub body: Value,
}

impl Call {
    /// `VERB resource` as the apiserver counts it (`LIST secrets`,
    /// `PATCH terraformmachinepools`), for asserting sequences.
    pub fn line(&self) -> String {
        let (verb, resource) = crate::metrics::flow::classify(&self.method, &self.path, "");
        format!("{verb} {resource}")
    }

    /// The last path segment (the object's name for a named request).
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or_default()
    }
}

type Responder = dyn Fn(&Call) -> (u16, Value) + Send + Sync;

/// The mock and what it saw.
#[derive(Clone)]
pub struct MockApi {
    calls: Arc<Mutex<Vec<Call>>>,
    respond: Arc<Responder>,
}

/// A `Status` answer of `code` (404 NotFound, 409 AlreadyExists, ...).
pub fn status(code: u16, reason: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": reason, "code": code, "message": reason}),
    )
}

impl MockApi {
    pub fn new(respond: impl Fn(&Call) -> (u16, Value) + Send + Sync + 'static) -> Self {
        MockApi {
            calls: Arc::new(Mutex::new(Vec::new())),
            respond: Arc::new(respond),
        }
    }

    /// A client whose every request this mock answers.
    pub fn client(&self) -> kube::Client {
        let mock = self.clone();
        let service = tower::service_fn(move |req: Request<kube::client::Body>| {
            let mock = mock.clone();
            async move {
                let (parts, body) = req.into_parts();
                let bytes = body.collect().await?.to_bytes();
                let content_type = parts
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                let call = Call {
                    method: parts.method.to_string(),
                    path: parts.uri.path().to_owned(),
                    query: parts.uri.query().unwrap_or_default().to_owned(),
                    content_type: content_type.to_owned(),
                    body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                };
                let (code, answer) = (mock.respond)(&call);
                mock.calls.lock().expect("the mock's calls").push(call);
                let response = Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(answer.to_string().into_bytes()))
                    .expect("a response");
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
            }
        });
        kube::Client::new(service, "default")
    }

    /// The requests so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("the mock's calls").clone()
    }

    /// The requests so far as `VERB resource` lines, events left out (the
    /// recorder sends them on its own schedule).
    pub fn lines(&self) -> Vec<String> {
        self.calls()
            .iter()
            .map(Call::line)
            .filter(|l| !l.ends_with(" events"))
            .collect()
    }
}
