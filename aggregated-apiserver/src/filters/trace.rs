//! The request's server span (kube's `WithTracing`), just after
//! authentication: the user decides whether the trace context the request
//! came with is continued (see [`crate::trace`]).

use std::future::Future;
use std::sync::Arc;

use axum::response::Response;
use futures::future::Either;
use futures::FutureExt as _;
use opentelemetry::trace::{Status, TraceContextExt};
use opentelemetry::KeyValue;

use super::{Next, Request};
use crate::apimachinery::request_info::RequestInfo;
use crate::audit::AuditContext;
use crate::auth::authn::request_user;
use crate::trace::{trusts, FutureExt as _, Tracing};

/// Whether `req` may be sampled by `tracing`: when not, [`trace`] only runs
/// the rest of the chain, and the chain need not make room for a span.
pub fn may_trace(tracing: &Tracing, req: &Request) -> bool {
    tracing.may_sample(req.headers(), trusted(req))
}

/// Whether the caller's trace is continued: only a `system:masters` or
/// `system:monitoring` user's.
fn trusted(req: &Request) -> bool {
    request_user(req.extensions()).is_some_and(|user| trusts(&user.groups))
}

/// Runs the rest of the chain within the request's span, and ends the span
/// with the answer's code.
pub fn trace<'a, N: Next + 'a>(
    tracing: &'a Arc<Tracing>,
    req: Request,
    next: N,
) -> impl Future<Output = Response> + Send + 'a {
    let trusted = trusted(&req);
    if !tracing.may_sample(req.headers(), trusted) {
        return Either::Left(next.run(req));
    }
    let name = span_name(&req);
    let mut attributes = vec![
        KeyValue::new("http.request.method", req.method().as_str().to_string()),
        KeyValue::new("http.target", req.uri().path_and_query().map_or("/", |p| p.as_str()).to_string()),
        KeyValue::new("network.protocol.version", protocol(req.version())),
    ];
    if let Some(agent) = req.headers().get(http::header::USER_AGENT).and_then(|v| v.to_str().ok()) {
        attributes.push(KeyValue::new("user_agent.original", agent.to_string()));
    }
    let audit_id = req
        .extensions()
        .get::<AuditContext>()
        .map(|audit| audit.audit_id().clone())
        .or_else(|| super::audit::sent_audit_id(&req));
    if let Some(id) = audit_id.as_ref().and_then(|id| id.to_str().ok()) {
        attributes.push(KeyValue::new("audit-id", id.to_string()));
    }
    let cx = tracing.request_span(req.headers(), trusted, name, attributes);
    if !cx.span().is_recording() {
        // Not sampled: nothing to record, and nothing for the work below to find.
        return Either::Right(Either::Left(next.run(req)));
    }
    let served = next.run(req).with_context(cx.clone());
    Either::Right(Either::Right(served.map(move |resp| {
        let span = cx.span();
        let code = resp.status().as_u16();
        span.set_attribute(KeyValue::new("http.response.status_code", i64::from(code)));
        if code >= 500 {
            span.set_status(Status::error(resp.status().canonical_reason().unwrap_or_default()));
        }
        span.end();
        resp
    })))
}

/// kube's span name: the method and, for a resource request, its path with
/// the namespace and name left out (`GET
/// /apis/farm.example.com/v1beta1/namespaces/{:namespace}/llamas/{:name}`).
fn span_name(req: &Request) -> String {
    let method = req.method().as_str();
    let Some(info) = req.extensions().get::<RequestInfo>().filter(|info| info.is_resource_request) else {
        return method.to_string();
    };
    let mut name = String::with_capacity(96);
    name.push_str(method);
    name.push_str(if info.api_group().is_empty() { " /api" } else { " /apis/" });
    name.push_str(info.api_group());
    name.push('/');
    name.push_str(info.api_version());
    if !info.namespace().is_empty() {
        name.push_str("/namespaces/{:namespace}");
    }
    name.push('/');
    name.push_str(info.resource());
    if !info.name().is_empty() {
        name.push_str("/{:name}");
    }
    if !info.subresource().is_empty() {
        name.push('/');
        name.push_str(info.subresource());
    }
    name
}

fn protocol(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_10 => "1.0",
        _ => "1.1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(method: &str, path: &str) -> String {
        let method: http::Method = method.parse().unwrap();
        let mut req =
            http::Request::builder().method(method.clone()).uri(path).body(axum::body::Body::empty()).unwrap();
        let info = crate::apimachinery::request_info::classify(&method, path, None);
        req.extensions_mut().insert(info);
        span_name(&req)
    }

    #[test]
    fn spans_are_named_as_kube_names_them() {
        assert_eq!(
            name_of("GET", "/apis/farm.example.com/v1beta1/namespaces/ns/llamas/dolly"),
            "GET /apis/farm.example.com/v1beta1/namespaces/{:namespace}/llamas/{:name}"
        );
        assert_eq!(
            name_of("PATCH", "/apis/farm.example.com/v1beta1/namespaces/ns/llamas/dolly/status"),
            "PATCH /apis/farm.example.com/v1beta1/namespaces/{:namespace}/llamas/{:name}/status"
        );
        assert_eq!(
            name_of("GET", "/apis/farm.example.com/v1beta1/llamas"),
            "GET /apis/farm.example.com/v1beta1/llamas"
        );
        assert_eq!(name_of("GET", "/apis/farm.example.com/v1beta1"), "GET");
        assert_eq!(name_of("GET", "/readyz"), "GET");
    }
}
