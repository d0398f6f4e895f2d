//! The layers of the manager's API client: every request counted
//! (`captf_api_requests_total`, and client-go's `rest_client_requests_total`
//! and `rest_client_request_duration_seconds`), and client-side rate limiting
//! (`--kube-api-qps`, `--kube-api-burst`): a token bucket in front of the
//! client, so a storm of passes queues in the manager instead of loading
//! the apiserver. Long-running watches take a token to start, like any
//! request.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tower::{Layer, Service};

/// A token bucket: `burst` tokens at most, refilled at `qps` per second.
#[derive(Debug, Clone)]
pub struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// A full bucket. `qps <= 0` disables the limit.
    pub fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        Bucket {
            qps,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes a token at `now`, or says how long until one is there.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        if self.qps <= 0.0 {
            return Ok(());
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

/// The layer the client is built with.
#[derive(Debug, Clone)]
pub struct Throttle {
    bucket: Arc<Mutex<Bucket>>,
}

impl Throttle {
    pub fn new(qps: f64, burst: u32) -> Self {
        Throttle {
            bucket: Arc::new(Mutex::new(Bucket::new(qps, burst, Instant::now()))),
        }
    }
}

impl<S> Layer<S> for Throttle {
    type Service = Throttled<S>;
    fn layer(&self, inner: S) -> Throttled<S> {
        Throttled {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            holds_token: false,
        }
    }
}

/// A service that is ready only once it holds a token.
pub struct Throttled<S> {
    inner: S,
    bucket: Arc<Mutex<Bucket>>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    holds_token: bool,
}

impl<S, R> Service<R> for Throttled<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        while !self.holds_token {
            if let Some(wait) = self.wait.as_mut() {
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
            }
            let taken = self
                .bucket
                .lock()
                .expect("the token bucket")
                .take(Instant::now());
            match taken {
                Ok(()) => self.holds_token = true,
                Err(after) => self.wait = Some(Box::pin(tokio::time::sleep(after))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> S::Future {
        self.holds_token = false;
        self.inner.call(req)
    }
}

/// Builds the manager's client: requests counted into `metrics`, then
/// limited to `qps` with `burst`.
pub fn build(
    config: kube::Config,
    metrics: &crate::metrics::Metrics,
    qps: f64,
    burst: u32,
) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&Throttle::new(qps, burst))
        .with_layer(&Counted {
            metrics: metrics.clone(),
        })
        .build())
}

/// Counts every request the client sends.
#[derive(Debug, Clone)]
pub struct Counted {
    metrics: crate::metrics::Metrics,
}

impl<S> Layer<S> for Counted {
    type Service = CountedService<S>;
    fn layer(&self, inner: S) -> CountedService<S> {
        CountedService {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

pub struct CountedService<S> {
    inner: S,
    metrics: crate::metrics::Metrics,
}

impl<S, B, R> Service<http::Request<B>> for CountedService<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let uri = req.uri();
        self.metrics.api_request(
            req.method().as_str(),
            uri.path(),
            uri.query().unwrap_or_default(),
        );
        let sent = crate::metrics::client::Sent::of(&req);
        let metrics = self.metrics.clone();
        let response = self.inner.call(req);
        Box::pin(async move {
            let out = response.await;
            // A watch's response arrives when its stream opens: the time is
            // to the headers, as client-go measures it.
            metrics.rest_request(&sent, out.as_ref().ok().map(|r| r.status().as_u16()));
            out
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10.0, 3, t0);
        for i in 0..3 {
            assert_eq!(b.take(t0), Ok(()), "burst token {i}");
        }
        let wait = b.take(t0).unwrap_err();
        assert!(
            (wait.as_secs_f64() - 0.1).abs() < 1e-9,
            "one token every 100 ms: {wait:?}"
        );
        assert_eq!(b.take(t0 + Duration::from_millis(100)), Ok(()));
        // A long idle refills to the burst, not beyond.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(b.take(later), Ok(()));
        }
        assert!(b.take(later).is_err());
    }

    #[test]
    fn no_rate_means_no_limit() {
        let t0 = Instant::now();
        let mut b = Bucket::new(0.0, 1, t0);
        for _ in 0..1000 {
            assert_eq!(b.take(t0), Ok(()));
        }
    }
}
