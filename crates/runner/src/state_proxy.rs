//! The state proxy: a loopback endpoint between the `kubernetes` backend and
//! the apiserver, so a runner needs no right to list the namespace's Secrets.
//!
//! A runner's Role names its own state Secrets and lock Lease only. The
//! backend lists Secrets by label (OpenTofu at every `init`, for its
//! workspaces; Terraform at every state read, for its chunks), and Kubernetes
//! authorizes a list against `resourceNames` only when it selects one name.
//! So the backend is pointed here: a list of the namespace's Secrets is
//! answered from GETs of the state's own names, filtered by the request's
//! label selector, and every other request goes to the apiserver unchanged,
//! under the pod's own credentials. The proxy grants nothing the token does
//! not already hold; it only keeps the backend's lists within the grant.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// Which objects the proxy serves lists of: the state of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub namespace: String,
    /// The state's Secrets, base first (`state_names::state_secrets`).
    pub secrets: Vec<String>,
    /// Leave out an update of the base Secret that only renumbers the state
    /// the backend read (`state_write::renumbered_only`): set for the
    /// routine runs (refresh, drift), whose rewrite of an unchanged state
    /// is OpenTofu's unordered check results and nothing else.
    pub skip_renumbering: bool,
}

impl Scope {
    /// The scope of the state whose backend config names `secret_suffix`
    /// and `namespace`.
    pub fn of_state(namespace: &str, secret_suffix: &str) -> Self {
        Scope {
            namespace: namespace.to_owned(),
            secrets: captf_contract::state_names::state_secrets(secret_suffix),
            skip_renumbering: false,
        }
    }

    fn base_path(&self) -> String {
        format!(
            "/api/v1/namespaces/{}/secrets/{}",
            self.namespace, self.secrets[0]
        )
    }
}

/// What the proxy does with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A list of the scope namespace's Secrets, with its label selector.
    ListState { selector: String },
    /// A read of the base state Secret: passed on, and its answer kept as
    /// what the backend last read.
    GetBase,
    /// An update of the base state Secret, left out when it only renumbers
    /// what the backend last read (with `Scope::skip_renumbering`).
    UpdateBase,
    /// Anything else: passed to the apiserver as it is.
    Forward,
}

/// Routes one request by method, path and query.
pub fn route(method: &Method, path: &str, query: Option<&str>, scope: &Scope) -> Route {
    let list_path = format!("/api/v1/namespaces/{}/secrets", scope.namespace);
    let params = query.map(query_params).unwrap_or_default();
    let watch = params.get("watch").is_some_and(|v| v == "true" || v == "1");
    let path = path.trim_end_matches('/');
    if method == Method::GET && path == list_path && !watch {
        Route::ListState {
            selector: params.get("labelSelector").cloned().unwrap_or_default(),
        }
    } else if scope.skip_renumbering && path == scope.base_path() && !watch {
        match *method {
            Method::GET => Route::GetBase,
            Method::PUT => Route::UpdateBase,
            _ => Route::Forward,
        }
    } else {
        Route::Forward
    }
}

/// The decoded parameters of a URL query (the last of a repeated name wins).
fn query_params(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes.get(i..i + 3) {
            Some([b'%', h, l]) => hex(*h).zip(hex(*l)).map(|(h, l)| (h * 16 + l) as u8),
            _ => None,
        };
        match (escaped, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, b) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One requirement of an equality-based label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    Absent(String),
}

/// An equality-based label selector (`k=v,k!=v,k,!k`): what both backends
/// send. Set-based terms (`in`, `notin`) are refused rather than misread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let req = if let Some((k, v)) = term.split_once("!=") {
                Requirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if term.contains(['(', ' ']) {
                return Err(format!("set-based label selector term {term:?}"));
            } else if let Some(k) = term.strip_prefix('!') {
                Requirement::Absent(k.trim().into())
            } else {
                Requirement::Exists(term.into())
            };
            reqs.push(req);
        }
        Ok(Selector(reqs))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
        })
    }
}

/// The labels of a Secret as the apiserver returned it.
fn labels_of(secret: &Value) -> BTreeMap<String, String> {
    secret["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The `SecretList` answering a list: `found` are the state's Secrets that
/// exist, base first, without a gap. The list ends at the first the selector
/// refuses: the backend labels every chunk it writes, so an unlabeled one is
/// not part of this state, nor is anything after it (the manager's reader
/// follows the same rule, `state::reader::state_chunks`).
pub fn secret_list(found: Vec<Value>, selector: &Selector) -> Value {
    let items: Vec<Value> = found
        .into_iter()
        .take_while(|s| selector.matches(&labels_of(s)))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "SecretList",
        "metadata": {"resourceVersion": ""},
        "items": items,
    })
}

/// A Kubernetes `Status` body, which client-go turns into its error.
fn status(code: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = json!({
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "message": message,
        "code": code.as_u16(),
    });
    json_response(code, body.to_string().into())
}

fn json_response(code: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// The running proxy; it stops when dropped.
pub struct StateProxy {
    pub address: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StateProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StateProxy {
    /// Listens on a free loopback port and serves `scope` through `client`.
    pub async fn start(client: kube::Client, scope: Scope) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let address = listener.local_addr()?;
        let last_read = LastRead::default();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (client, scope) = (client.clone(), scope.clone());
                let last_read = last_read.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let (client, scope) = (client.clone(), scope.clone());
                        let last_read = last_read.clone();
                        async move {
                            Ok::<_, Infallible>(handle(&client, &scope, &last_read, req).await)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(StateProxy { address, task })
    }

    /// The backend config that sends the backend here instead of to the
    /// apiserver it would find from the pod's environment.
    pub fn backend_config(&self) -> [String; 2] {
        [
            "in_cluster_config=false".to_owned(),
            format!("host=http://{}", self.address),
        ]
    }
}

async fn handle(
    client: &kube::Client,
    scope: &Scope,
    last_read: &LastRead,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let route = route(req.method(), req.uri().path(), req.uri().query(), scope);
    match route {
        Route::ListState { selector } => match Selector::parse(&selector) {
            Ok(selector) => list_state(client, scope, &selector).await,
            Err(e) => status(StatusCode::BAD_REQUEST, &format!("state proxy: {e}")),
        },
        Route::GetBase => get_base(client, last_read, req).await,
        Route::UpdateBase => update_base(client, last_read, req).await,
        Route::Forward => forward(client, req).await,
    }
}

/// GETs the state's Secrets in order, stopping at the first that does not
/// exist (chunks are written in order, so the rest cannot either).
async fn list_state(
    client: &kube::Client,
    scope: &Scope,
    selector: &Selector,
) -> Response<Full<Bytes>> {
    let mut found = Vec::new();
    for name in &scope.secrets {
        let path = format!("/api/v1/namespaces/{}/secrets/{name}", scope.namespace);
        let req = Request::get(path)
            .header(http::header::ACCEPT, "application/json")
            .body(kube::client::Body::empty())
            .expect("a valid request");
        let resp = match client.send(req).await {
            Ok(r) => r,
            Err(e) => return status(StatusCode::BAD_GATEWAY, &format!("state proxy: {e}")),
        };
        let code = resp.status();
        let body = match resp.into_body().collect_bytes().await {
            Ok(b) => b,
            Err(e) => return status(StatusCode::BAD_GATEWAY, &format!("state proxy: {e}")),
        };
        if code == StatusCode::NOT_FOUND {
            break;
        }
        if !code.is_success() {
            // The apiserver's own Status (403, 401, ...) goes back as it is.
            return json_response(code, body);
        }
        match serde_json::from_slice::<Value>(&body) {
            Ok(secret) => found.push(secret),
            Err(e) => {
                return status(
                    StatusCode::BAD_GATEWAY,
                    &format!("state proxy: Secret {name} is not JSON: {e}"),
                );
            }
        }
    }
    json_response(
        StatusCode::OK,
        secret_list(found, selector).to_string().into(),
    )
}

/// Passes a request to the apiserver and its answer back.
async fn forward(client: &kube::Client, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    match body.collect().await {
        Ok(b) => send_upstream(client, parts, b.to_bytes()).await,
        Err(e) => status(StatusCode::BAD_REQUEST, &format!("state proxy: {e}")),
    }
}

/// What the backend last read of the base state Secret.
type LastRead = Arc<Mutex<Option<Value>>>;

/// The body of a response this proxy made (a `Full`, so at hand).
async fn body_of(resp: &Response<Full<Bytes>>) -> Option<Value> {
    let bytes = resp.body().clone().collect().await.ok()?.to_bytes();
    serde_json::from_slice(&bytes).ok()
}

/// Reads the base state Secret for the backend and keeps what it read.
async fn get_base(
    client: &kube::Client,
    last_read: &LastRead,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let resp = forward(client, req).await;
    remember(last_read, &resp).await;
    resp
}

/// Keeps the base Secret an answer carries (a failure keeps nothing).
async fn remember(last_read: &LastRead, resp: &Response<Full<Bytes>>) {
    let secret = if resp.status() == StatusCode::OK {
        body_of(resp).await
    } else {
        None
    };
    *last_read.lock().expect("the last read") = secret;
}

/// Updates the base state Secret, unless the update only renumbers what
/// the backend last read: then the Secret is answered as it stands.
async fn update_base(
    client: &kube::Client,
    last_read: &LastRead,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return status(StatusCode::BAD_REQUEST, &format!("state proxy: {e}")),
    };
    let stored = last_read.lock().expect("the last read").clone();
    if let (Some(stored), Ok(written)) = (&stored, serde_json::from_slice::<Value>(&body))
        && crate::state_write::renumbered_only(stored, &written)
    {
        eprintln!(
            "runner: the state is unchanged but for its serial and the order of its check results; its write is left out"
        );
        return json_response(StatusCode::OK, stored.to_string().into());
    }
    let resp = send_upstream(client, parts, body).await;
    remember(last_read, &resp).await;
    resp
}

/// Sends a request (its parts and collected body) to the apiserver and
/// passes its answer back.
async fn send_upstream(
    client: &kube::Client,
    parts: http::request::Parts,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned());
    let mut upstream = Request::builder().method(parts.method).uri(target);
    for (name, value) in &parts.headers {
        // The client sets its own host, credentials and length.
        if ![
            http::header::HOST,
            http::header::AUTHORIZATION,
            http::header::CONTENT_LENGTH,
            http::header::CONNECTION,
        ]
        .contains(name)
        {
            upstream = upstream.header(name, value);
        }
    }
    let upstream = match upstream.body(kube::client::Body::from(body)) {
        Ok(r) => r,
        Err(e) => return status(StatusCode::BAD_REQUEST, &format!("state proxy: {e}")),
    };
    let resp = match client.send(upstream).await {
        Ok(r) => r,
        Err(e) => return status(StatusCode::BAD_GATEWAY, &format!("state proxy: {e}")),
    };
    let code = resp.status();
    let content_type = resp.headers().get(http::header::CONTENT_TYPE).cloned();
    match resp.into_body().collect_bytes().await {
        Ok(bytes) => {
            let mut out = Response::new(Full::new(bytes));
            *out.status_mut() = code;
            if let Some(ct) = content_type {
                out.headers_mut().insert(http::header::CONTENT_TYPE, ct);
            }
            out
        }
        Err(e) => status(StatusCode::BAD_GATEWAY, &format!("state proxy: {e}")),
    }
}

#[cfg(test)]
#[path = "state_proxy_tests.rs"]
mod tests;
