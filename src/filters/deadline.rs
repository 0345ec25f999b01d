//! The deadline of non-long-running requests (k8s.io/apiserver
//! `WithRequestDeadline` and `WithTimeoutForNonLongRunningRequests`): every
//! request but a watch answers 504 Timeout once `--request-timeout` has passed,
//! or sooner when the client asks with `?timeout=<Go duration>`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::machinery::gofmt::go_quote;
use crate::machinery::request_info::RequestInfo;
use crate::machinery::status::ApiError;

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
    match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::deadline_exceeded().into_response(),
    }
}

/// The `timeout` query parameter (its first value), parsed as Go's
/// `time.ParseDuration`; an unparsable one is kube's 400 wording.
fn requested_timeout(query: Option<&str>) -> Result<Option<Duration>, String> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or("")).unwrap_or_default();
    let Some(value) = pairs.into_iter().find_map(|(k, v)| (k == "timeout").then_some(v)).filter(|v| !v.is_empty())
    else {
        return Ok(None);
    };
    parse_go_duration(&value).map(Some).map_err(|err| format!("invalid timeout specified in the request URL - {err}"))
}

/// Go's `time.ParseDuration`: a signed sequence of decimal numbers, each with
/// a unit (ns, us, µs, ms, s, m, h); "0" alone needs no unit. Negative
/// durations parse (and are then ignored by the caller, as kube ignores them)
/// and come back as zero. Errors are worded as Go's.
fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("time: invalid duration {}", go_quote(text));
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(invalid());
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos_per_unit = match unit {
            "" => return Err(format!("time: missing unit in duration {}", go_quote(text))),
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            other => return Err(format!("time: unknown unit {} in duration {}", go_quote(other), go_quote(text))),
        };
        total += value * nanos_per_unit;
        // Go's limit: durations are int64 nanoseconds.
        if total > i64::MAX as f64 {
            return Err(invalid());
        }
    }
    if negative {
        return Ok(Duration::ZERO);
    }
    Ok(Duration::from_nanos(total as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_and_fail_as_go_does() {
        assert_eq!(parse_go_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_go_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("-5s"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("abc"), Err("time: invalid duration \"abc\"".to_string()));
        assert_eq!(parse_go_duration("10"), Err("time: missing unit in duration \"10\"".to_string()));
        assert_eq!(parse_go_duration("10x"), Err("time: unknown unit \"x\" in duration \"10x\"".to_string()));
        assert_eq!(parse_go_duration(""), Err("time: invalid duration \"\"".to_string()));
        assert_eq!(parse_go_duration("99999999999h"), Err("time: invalid duration \"99999999999h\"".to_string()));
    }

    #[test]
    fn only_the_timeout_parameter_counts() {
        assert_eq!(requested_timeout(Some("limit=5")), Ok(None));
        assert_eq!(requested_timeout(Some("timeout=2s&timeout=9s")), Ok(Some(Duration::from_secs(2))));
        assert!(requested_timeout(Some("timeout=soon")).is_err_and(|e| e.starts_with("invalid timeout specified")));
    }
}
