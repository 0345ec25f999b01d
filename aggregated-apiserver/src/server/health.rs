//! `/healthz`, `/livez` and `/readyz` with kube-apiserver's conventions:
//! `?verbose` lists every check, `?exclude=name` skips one, `/readyz/<name>`
//! runs one, and a failure answers 500 with the failing check named.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use http::{header, HeaderValue, StatusCode};

/// One named check. `Err` carries the reason, shown in logs and verbose output.
pub trait Check: Send + Sync {
    /// The check's name: `/readyz/<name>` and the verbose listing.
    fn name(&self) -> &str;
    /// Ok when it passes, else why not.
    fn check(&self) -> Result<(), String>;
    /// Extra words for the verbose listing of a passing check (e.g. staleness).
    fn detail(&self) -> Option<String> {
        None
    }
}

/// A check from a closure.
pub struct FnCheck<F>(pub &'static str, pub F);

/// A check from a closure, with a closure giving the verbose detail.
pub struct DetailedCheck<F, D>(pub &'static str, pub F, pub D);

impl<F, D> Check for DetailedCheck<F, D>
where
    F: Fn() -> Result<(), String> + Send + Sync,
    D: Fn() -> Option<String> + Send + Sync,
{
    fn name(&self) -> &str {
        self.0
    }
    fn check(&self) -> Result<(), String> {
        (self.1)()
    }
    fn detail(&self) -> Option<String> {
        (self.2)()
    }
}

impl<F: Fn() -> Result<(), String> + Send + Sync> Check for FnCheck<F> {
    fn name(&self) -> &str {
        self.0
    }
    fn check(&self) -> Result<(), String> {
        (self.1)()
    }
}

#[derive(Default, Clone)]
pub struct Health {
    pub live: Vec<Arc<dyn Check>>,
    pub ready: Vec<Arc<dyn Check>>,
}

impl Health {
    /// Serves `/healthz`, `/livez`, `/readyz` and their `/<check>` sub-paths.
    /// `reveal`: whether failure reasons may be shown. As kube, verbose output
    /// says `reason withheld` to callers who reached it only because probes are
    /// always allowed; callers authorized for the path see the reasons.
    pub fn serve(&self, path: &str, query: Option<&str>, reveal: bool) -> Option<Response> {
        let (endpoint, rest) = match path.trim_start_matches('/').split_once('/') {
            Some((e, r)) => (e, Some(r)),
            None => (path.trim_start_matches('/'), None),
        };
        let checks = match endpoint {
            "healthz" | "livez" => &self.live,
            "readyz" => &self.ready,
            _ => return None,
        };
        let params: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or("")).unwrap_or_default();
        let verbose = params.iter().any(|(k, _)| k == "verbose");
        let excluded: Vec<&str> = params.iter().filter(|(k, _)| k == "exclude").map(|(_, v)| v.as_str()).collect();
        let mut lines = String::new();
        let mut failed = Vec::new();
        let mut ran = 0;
        for c in std::iter::once(None).chain(checks.iter().map(Some)) {
            let (name, result, detail) = match c {
                None => ("ping", Ok(()), None),
                Some(c) => (c.name(), c.check(), c.detail()),
            };
            if rest.is_some_and(|r| r != name) || excluded.contains(&name) {
                continue;
            }
            ran += 1;
            match result {
                Ok(()) => match detail {
                    Some(d) => lines.push_str(&format!("[+]{name} ok ({d})\n")),
                    None => lines.push_str(&format!("[+]{name} ok\n")),
                },
                Err(why) => {
                    tracing::info!(check = name, endpoint, reason = %why, "health check failed");
                    if reveal {
                        lines.push_str(&format!("[-]{name} failed: {why}\n"));
                    } else {
                        lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
                    }
                    failed.push(name.to_string());
                }
            }
        }
        if ran == 0 {
            return Some(text(StatusCode::NOT_FOUND, "404 page not found\n".into()));
        }
        for e in &excluded {
            lines.push_str(&format!("excluded: {e} ok\n"));
        }
        if failed.is_empty() {
            let body =
                if verbose || rest.is_some() { format!("{lines}{endpoint} check passed\n") } else { "ok".into() };
            Some(text(StatusCode::OK, body))
        } else {
            Some(text(StatusCode::INTERNAL_SERVER_ERROR, format!("{lines}{endpoint} check failed\n")))
        }
    }
}

fn text(code: StatusCode, body: String) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = code;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r.headers_mut().insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    r
}
