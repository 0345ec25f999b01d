//! The request path around every handler, in kube-apiserver's filter order
//! (k8s.io/apiserver `DefaultBuildHandlerChain`), outermost first:
//!
//! ```text
//! recovery        a panic becomes a 500 Status, never a dropped connection
//! request info    verb, resource, namespace, name: read by everything below
//! observe         request metrics and the request log (sees every answer, 401s and 429s too)
//! deadline        504 for non-long-running requests after --request-timeout (or ?timeout=)
//! authentication  front-proxy, client certificate, bearer token, else anonymous
//! impersonation   Impersonate-* headers, each checked with a SubjectAccessReview
//! in-flight       --max-requests-inflight / --max-mutating-requests-inflight, watch caps
//! authorization   SubjectAccessReview (cached), the always-allowed probe paths
//! compression     gzip for answers over 128 KiB when the client accepts it
//! ```
//!
//! Each filter is an axum middleware (a tower layer) over state built from its
//! own options; the user they establish travels in the request's extensions as
//! [`crate::auth::authn::UserInfo`].

pub mod authentication;
pub mod authorization;
pub mod compression;
pub mod deadline;
pub mod impersonation;
pub mod inflight;
pub mod options;
pub mod recovery;

/// Whether a request is long-running (kube's `LongRunningRequestCheck`): only
/// watches here. Long-running requests have no deadline and are not counted by
/// the in-flight limits (watches have caps of their own).
pub fn is_long_running(info: &crate::endpoints::request_info::RequestInfo) -> bool {
    info.is_resource_request && info.verb == "watch"
}

/// Classifies the request once (kube's `WithRequestInfo`); every filter after
/// this one reads the [`RequestInfo`](crate::endpoints::request_info::RequestInfo)
/// from the request's extensions.
pub async fn request_info(mut req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let info = crate::endpoints::request_info::classify(req.method(), req.uri().path(), req.uri().query());
    req.extensions_mut().insert(info);
    next.run(req).await
}
