//! A client layer that makes chosen requests fail, to open the crash
//! windows of the manager: a request that fails is one the manager never
//! saw answered, as when it dies right before or after sending it.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Method, Request};
use tower::{BoxError, Layer, Service};

/// One kind of failure: requests of `method` whose path (with its query)
/// contains `path` fail `times` times, once `armed`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub method: Method,
    pub path: String,
    pub times: usize,
    /// Armed at once, or only after a request matching this (method, path)
    /// went through.
    pub after: Option<(Method, String)>,
    armed: bool,
}

impl Rule {
    pub fn new(method: Method, path: &str, times: usize) -> Self {
        Rule {
            method,
            path: path.to_owned(),
            times,
            after: None,
            armed: true,
        }
    }

    pub fn after(mut self, method: Method, path: &str) -> Self {
        self.after = Some((method, path.to_owned()));
        self.armed = false;
        self
    }
}

/// Something done once, right after a request of `method` whose path ends
/// with `path_end` was answered and before the manager sees the answer:
/// another actor's write landing in that exact window.
pub struct Hook {
    pub method: Method,
    pub path_end: String,
    pub action: BoxFuture<'static, ()>,
}

#[derive(Clone, Default)]
pub struct Faults {
    rules: Arc<Mutex<Vec<Rule>>>,
    /// How many requests failed, per rule index.
    pub failed: Arc<Mutex<Vec<usize>>>,
    hook: Arc<Mutex<Option<Hook>>>,
}

impl Faults {
    pub fn new(rules: Vec<Rule>) -> Self {
        let n = rules.len();
        Faults {
            rules: Arc::new(Mutex::new(rules)),
            failed: Arc::new(Mutex::new(vec![0; n])),
            hook: Arc::default(),
        }
    }

    /// Arms `hook` (replacing one not yet run).
    pub fn arm(&self, hook: Hook) {
        *self.hook.lock().unwrap() = Some(hook);
    }

    /// The armed hook's action when `req` is its request (it runs once).
    fn take_hook(&self, method: &Method, path: &str) -> Option<BoxFuture<'static, ()>> {
        let mut slot = self.hook.lock().unwrap();
        let due = slot
            .as_ref()
            .is_some_and(|h| h.method == *method && path.ends_with(&h.path_end));
        due.then(|| slot.take().expect("checked").action)
    }

    /// Whether `req` fails; arms rules waiting for it.
    fn judge(&self, method: &Method, path: &str) -> bool {
        let mut rules = self.rules.lock().unwrap();
        let mut fail = false;
        for (i, r) in rules.iter_mut().enumerate() {
            if r.armed && r.times > 0 && r.method == *method && path.contains(&r.path) && !fail {
                r.times -= 1;
                self.failed.lock().unwrap()[i] += 1;
                fail = true;
            }
        }
        if !fail {
            for r in rules.iter_mut() {
                if let Some((m, p)) = &r.after
                    && m == method
                    && path.contains(p.as_str())
                {
                    r.armed = true;
                }
            }
        }
        fail
    }

    pub fn client(&self, config: &kube::Config) -> kube::Client {
        kube::client::ClientBuilder::try_from(config.clone())
            .expect("a client builder from the test config")
            .with_layer(self)
            .build()
    }
}

impl<S> Layer<S> for Faults {
    type Service = FaultService<S>;
    fn layer(&self, inner: S) -> FaultService<S> {
        FaultService {
            inner,
            faults: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct FaultService<S> {
    inner: S,
    faults: Faults,
}

impl<S, B> Service<Request<B>> for FaultService<S>
where
    S: Service<Request<B>> + Send,
    S::Future: Send + 'static,
    S::Response: Send,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // The query counts too: a list is told apart by its selector.
        let target = req
            .uri()
            .path_and_query()
            .map_or("", |p| p.as_str())
            .to_owned();
        if self.faults.judge(req.method(), &target) {
            let what = format!("{} {}", req.method(), req.uri().path());
            return Box::pin(async move { Err(format!("injected fault: {what}").into()) });
        }
        let hook = self.faults.take_hook(req.method(), req.uri().path());
        let fut = self.inner.call(req);
        Box::pin(async move {
            let answer = fut.await.map_err(Into::into);
            if let Some(action) = hook {
                action.await;
            }
            answer
        })
    }
}
