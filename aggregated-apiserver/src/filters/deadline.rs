//! The deadline of non-long-running requests (k8s.io/apiserver
//! `WithRequestDeadline` and `WithTimeoutForNonLongRunningRequests`): every
//! request but a watch answers 504 Timeout once `--request-timeout` has passed,
//! or sooner when the client asks with `?timeout=<Go duration>`. When the
//! server is shutting down and its grace is over, what is still running is
//! answered 429 with Retry-After (kube's words for a server shutting down),
//! not cut off with its connection. With `--shutdown-send-retry-after`, new
//! requests get that answer as soon as the shutdown delay is over, while the
//! ones in flight drain (kube's `WithRetryAfter`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::{answered, passed, Next, Request};
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::apimachinery::errors::ApiError;
use crate::apimachinery::gofmt::go_parse_duration;
use crate::apimachinery::options::params::Query;
use crate::apimachinery::request_info::RequestInfo;

/// The deadline filter's options.
#[derive(Debug, Clone)]
pub struct Deadline {
    /// `--request-timeout`: the longest any non-long-running request may take.
    pub maximum: Duration,
    /// Cancelled when the shutdown grace is over.
    pub grace_over: CancellationToken,
    /// With `--shutdown-send-retry-after` only.
    pub retry_after: Option<Arc<RetryAfter>>,
}

/// `--shutdown-send-retry-after`: once `refusing` is cancelled, new requests
/// are answered 429 while the non-long-running ones in flight are counted
/// down to none.
#[derive(Debug, Default)]
pub struct RetryAfter {
    pub refusing: CancellationToken,
    in_flight: AtomicUsize,
    drained: tokio::sync::Notify,
}

impl RetryAfter {
    /// Returns once no non-long-running request is in flight.
    pub async fn drained(&self) {
        loop {
            let notified = self.drained.notified();
            if self.in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }

    fn count(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }
}

/// One request counted in flight until it is answered.
struct InFlight(Arc<RetryAfter>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.drained.notify_waiters();
        }
    }
}

/// Requests answered even while the server refuses new ones (kube's
/// `isRequestExemptFromRetryAfter`): probes, metrics, and kube-apiserver's own.
fn exempt_from_retry_after(req: &Request) -> bool {
    let path = req.uri().path();
    ["/readyz", "/livez", "/healthz", "/metrics"].iter().any(|prefix| path.starts_with(prefix))
        || req
            .headers()
            .get(http::header::USER_AGENT)
            .and_then(|agent| agent.to_str().ok())
            .is_some_and(|agent| agent.starts_with("kube-apiserver/"))
}

/// kube-apiserver's answer while it shuts down (`WithRetryAfter`): an
/// HTTP/1.1 connection closes after it.
fn shutting_down(version: http::Version) -> Response {
    let mut resp =
        ApiError::too_many_requests("The apiserver is shutting down, please try again later.", 5).into_response();
    if version <= http::Version::HTTP_11 {
        resp.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    }
    resp
}

pub fn enforce<'a, N: Next + 'a>(
    deadline: &'a Deadline,
    req: Request,
    next: N,
) -> impl Future<Output = Response> + Send + 'a {
    let long_running = req.extensions().get::<RequestInfo>().is_none_or(super::is_long_running);
    let counted = match &deadline.retry_after {
        Some(retry_after) if retry_after.refusing.is_cancelled() && !exempt_from_retry_after(&req) => {
            return answered(shutting_down(req.version()));
        }
        Some(retry_after) if !long_running => Some(retry_after.count()),
        _ => None,
    };
    let limit = match long_running || deadline.maximum.is_zero() {
        true => None,
        false => match requested_timeout(req.uri().query()) {
            Ok(asked) => {
                let timeout = asked.filter(|t| !t.is_zero() && *t < deadline.maximum).unwrap_or(deadline.maximum);
                Some(Instant::now() + timeout)
            }
            Err(message) => return answered(ApiError::bad_request(message).into_response()),
        },
    };
    // The rest of the chain under the deadline, if the request has one.
    let version = req.version();
    let handling = crate::heavy::with_deadline(limit, next.run(req));
    // Borrowed, not cloned: no shared count is touched per request.
    let grace = (!long_running).then(|| deadline.grace_over.cancelled());
    let timer = limit.map(|at| tokio::time::sleep_until(at.into()));
    passed(Within { handling, timer, grace }.map(move |answer| {
        drop(counted);
        match answer {
            Ended::Answered(_) if limit.is_some_and(|at| Instant::now() > at) => {
                ApiError::deadline_exceeded().into_response()
            }
            Ended::Answered(response) => response,
            Ended::TimedOut => ApiError::deadline_exceeded().into_response(),
            Ended::GraceOver => shutting_down(version),
        }
    }))
}

/// How a request's handling ended.
enum Ended {
    Answered(Response),
    TimedOut,
    GraceOver,
}

pin_project_lite::pin_project! {
    /// A request's handling, given up when its timer fires first or the
    /// shutdown grace ends.
    struct Within<'a, F> {
        #[pin]
        handling: F,
        #[pin]
        timer: Option<tokio::time::Sleep>,
        #[pin]
        grace: Option<WaitForCancellationFuture<'a>>,
    }
}

impl<F: Future<Output = Response>> Future for Within<'_, F> {
    type Output = Ended;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Ended> {
        let this = self.project();
        if let Poll::Ready(response) = this.handling.poll(cx) {
            return Poll::Ready(Ended::Answered(response));
        }
        if let Some(Poll::Ready(())) = this.timer.as_pin_mut().map(|timer| timer.poll(cx)) {
            return Poll::Ready(Ended::TimedOut);
        }
        if let Some(Poll::Ready(())) = this.grace.as_pin_mut().map(|grace| grace.poll(cx)) {
            return Poll::Ready(Ended::GraceOver);
        }
        Poll::Pending
    }
}

fn requested_timeout(query: Option<&str>) -> Result<Option<Duration>, String> {
    let query = Query::parse(query).unwrap_or_default();
    let Some(value) = query.get("timeout").filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    go_parse_duration(value).map(Some).map_err(|err| format!("invalid timeout specified in the request URL - {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_timeout_parameter_counts() {
        assert_eq!(requested_timeout(Some("limit=5")), Ok(None));
        assert_eq!(requested_timeout(Some("timeout=2s&timeout=9s")), Ok(Some(Duration::from_secs(2))));
        assert!(requested_timeout(Some("timeout=soon")).is_err_and(|e| e.starts_with("invalid timeout specified")));
    }
}
