//! The deadline of non-long-running requests (k8s.io/apiserver
//! `WithRequestDeadline` and `WithTimeoutForNonLongRunningRequests`): every
//! request but a watch answers 504 Timeout once `--request-timeout` has passed,
//! or sooner when the client asks with `?timeout=<Go duration>`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::{answered, passed, Next, Request};
use axum::response::{IntoResponse, Response};
use futures::FutureExt;

use crate::apimachinery::errors::ApiError;
use crate::apimachinery::gofmt::go_parse_duration;
use crate::apimachinery::options::params::Query;
use crate::apimachinery::request_info::RequestInfo;

/// The deadline filter's options.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    /// `--request-timeout`: the longest any non-long-running request may take.
    pub maximum: Duration,
}

pub fn enforce<'a, N: Next + 'a>(
    deadline: &Deadline,
    req: Request,
    next: N,
) -> impl Future<Output = Response> + Send + 'a {
    let long_running = req.extensions().get::<RequestInfo>().is_none_or(super::is_long_running);
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
    let handling = crate::heavy::with_deadline(limit, next.run(req));
    passed(Within { handling, timer: limit.map(|at| tokio::time::sleep_until(at.into())) }.map(move |answer| {
        match answer {
            Some(_) if limit.is_some_and(|at| Instant::now() > at) => ApiError::deadline_exceeded().into_response(),
            Some(response) => response,
            None => ApiError::deadline_exceeded().into_response(),
        }
    }))
}

pin_project_lite::pin_project! {
    /// A request's handling, given up (None) when its timer fires first.
    struct Within<F> {
        #[pin]
        handling: F,
        #[pin]
        timer: Option<tokio::time::Sleep>,
    }
}

impl<F: Future<Output = Response>> Future for Within<F> {
    type Output = Option<Response>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Response>> {
        let this = self.project();
        if let Poll::Ready(response) = this.handling.poll(cx) {
            return Poll::Ready(Some(response));
        }
        match this.timer.as_pin_mut() {
            Some(timer) => timer.poll(cx).map(|()| None),
            None => Poll::Pending,
        }
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
