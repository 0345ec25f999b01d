//! Request metrics and the request log: every answer is counted and logged
//! here, the other filters' refusals (401, 403, 429, 504) included, with
//! label values of bounded cardinality.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::response::Response;
use futures::FutureExt;

use super::{Next, Request};

use super::request_metrics::RequestMetrics;
use crate::apimachinery::request_info::{RequestInfo, RequestVerb};
use crate::endpoints::handlers::ServedKinds;

/// What the filter counts into, and the served resources it names.
pub struct Observe {
    pub requests: Arc<RequestMetrics>,
    pub resources: Arc<ServedKinds>,
}

/// Counts and logs every answer, the filters' refusals included.
pub fn observe<'a, N: Next + 'a>(
    observed: &'a Observe,
    req: Request,
    next: N,
) -> impl Future<Output = Response> + Send + 'a {
    let started = Instant::now();
    // Kept for the log line: a method and a URI parsed by hyper clone without
    // copying (the URI shares the request's bytes), where `path().to_string()`
    // allocated on every request.
    let method = req.method().clone();
    let uri = req.uri().clone();
    let (verb, resource) = req
        .extensions()
        .get::<RequestInfo>()
        .map_or(("other", "other"), |info| metric_labels(&observed.resources, info));
    next.run(req).map(move |resp| {
        let code = resp.status().as_u16();
        let elapsed = started.elapsed();
        observed.requests.observe(verb, resource, code, elapsed.as_secs_f64());
        let path = uri.path();
        if code >= 500 {
            tracing::warn!(%method, %path, code, ?elapsed, "request failed");
        } else {
            tracing::debug!(%method, %path, code, ?elapsed, "request");
        }
        resp
    })
}

/// Label values with bounded cardinality: only served resources and known
/// verbs are named; everything else counts as "other".
fn metric_labels(resources: &ServedKinds, info: &RequestInfo) -> (&'static str, &'static str) {
    if !info.is_resource_request {
        return ("nonresource", "");
    }
    let verb = match &info.verb {
        RequestVerb::Resource(verb) => verb.as_str(),
        RequestVerb::Method(_) => "other",
    };
    let resource = resources
        .find(info.api_group(), info.api_version(), info.resource())
        .map(|r| r.kind.names().plural)
        .unwrap_or("other");
    (verb, resource)
}
