//! The deadline of non-long-running requests (k8s.io/apiserver
//! `WithRequestDeadline` and `WithTimeoutForNonLongRunningRequests`): every
//! request but a watch answers 504 Timeout once `--request-timeout` has passed,
//! or sooner when the client asks with `?timeout=<Go duration>`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::apimachinery::errors::ApiError;
use crate::apimachinery::gofmt::go_parse_duration;
use crate::apimachinery::options::params::Query;
use crate::endpoints::request_info::RequestInfo;

/// The deadline filter's options.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    /// `--request-timeout`: the longest any non-long-running request may take.
    pub maximum: Duration,
}

pub async fn enforce(State(deadline): State<Arc<Deadline>>, req: Request, next: Next) -> Response {
    let long_running = req.extensions().get::<RequestInfo>().is_none_or(super::is_long_running);
    if long_running || deadline.maximum.is_zero() {
        return next.run(req).await;
    }
    let asked = match requested_timeout(req.uri().query()) {
        Ok(asked) => asked,
        Err(message) => return ApiError::bad_request(message).into_response(),
    };
    // As kube: a requested timeout only ever shortens the deadline.
    let timeout = asked.filter(|t| !t.is_zero() && *t < deadline.maximum).unwrap_or(deadline.maximum);
    let deadline = Instant::now() + timeout;
    match tokio::time::timeout_at(deadline.into(), crate::heavy::with_deadline(deadline, next.run(req))).await {
        // A computation holds its thread, the timer's too, until it ends:
        // one that ended past the deadline is answered as the timer would
        // have answered at it (kube's handler keeps running too, its answer
        // unseen).
        Ok(_) if Instant::now() > deadline => ApiError::deadline_exceeded().into_response(),
        Ok(response) => response,
        Err(_) => ApiError::deadline_exceeded().into_response(),
    }
}

/// The `timeout` query parameter (its first value), parsed as Go's
/// `time.ParseDuration`; an unparsable one is kube's 400 wording.
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
