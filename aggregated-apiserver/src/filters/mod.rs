//! The request path around every handler, in kube-apiserver's filter order
//! (k8s.io/apiserver `DefaultBuildHandlerChain`), outermost first:
//!
//! ```text
//! status encoding errors in the encoding the client accepts (YAML or JSON)
//! recovery        a panic becomes a 500 Status, never a dropped connection
//! request info    verb, resource, namespace, name: read by everything below
//! audit           with a policy, each request's audit events, the Audit-ID made or reused (audit.rs)
//! observe         request metrics and the request log (sees every answer, 401s and 429s too)
//! deadline        504 for non-long-running requests after --request-timeout (or ?timeout=)
//! authentication  front-proxy, client certificate, bearer token, else anonymous
//! audit policy    the policy evaluated for the authenticated user; RequestReceived
//! impersonation   Impersonate-* headers, each checked with a SubjectAccessReview
//! in-flight       --max-requests-inflight / --max-mutating-requests-inflight, watch caps
//! authorization   SubjectAccessReview (cached), the always-allowed probe paths
//! compression     gzip for answers over 128 KiB when the client accepts it
//! ```
//!
//! Each filter is an axum middleware (a tower layer) over state built from its
//! own options; the user they establish travels in the request's extensions as
//! [`crate::auth::authn::UserInfo`]. [`Filters::around`] assembles them, in
//! the order above.

pub mod audit;
pub mod authentication;
pub mod authorization;
pub mod compression;
pub mod deadline;
pub mod impersonation;
pub mod inflight;
pub mod observe;
pub mod options;
pub mod recovery;
pub mod status_encoding;

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::Response;
use axum::Router;
use http::Request;
use tower::{Service, ServiceBuilder};

use crate::auth::Guard;
use crate::endpoints::handlers::ServedKinds;
use crate::endpoints::request_info::RequestVerb;
use crate::options::ServerOptions;
use crate::registry::kind::Verb;
use crate::server::metrics::Metrics;

/// The state of each filter of the request path, each from its own options.
pub struct Filters {
    /// With an audit policy and a backend only.
    audit: Option<Arc<crate::audit::Auditor>>,
    observe: Arc<observe::Observe>,
    deadline: Arc<deadline::Deadline>,
    /// With delegated authentication only, as are impersonation and authorization.
    authentication: Option<Arc<authentication::Authentication>>,
    impersonation: Option<Arc<crate::auth::authz::Authorizer>>,
    inflight: Arc<inflight::InFlight>,
    authorization: Option<Arc<authorization::Authorization>>,
}

impl Filters {
    /// `guard` is None with `--authentication none`: then nobody is
    /// authenticated, impersonation is not offered, and nothing is authorized.
    pub fn new(
        options: &ServerOptions,
        guard: Option<&Guard>,
        resources: Arc<ServedKinds>,
        metrics: Arc<Metrics>,
        auditor: Option<Arc<crate::audit::Auditor>>,
    ) -> Self {
        let limits = &options.limits;
        let always_allow =
            authorization::AlwaysAllowPaths::new(&options.authorization.authorization_always_allow_paths);
        Self {
            audit: auditor,
            observe: Arc::new(observe::Observe { metrics, resources: resources.clone() }),
            deadline: Arc::new(deadline::Deadline { maximum: limits.request_timeout }),
            authentication: guard.map(|guard| {
                Arc::new(authentication::Authentication {
                    authenticator: guard.authn.clone(),
                    anonymous: options.authentication.anonymous_auth,
                    anonymous_paths: always_allow.clone(),
                })
            }),
            impersonation: guard.map(|guard| guard.authz.clone()),
            inflight: Arc::new(inflight::InFlight::new(inflight::Limits {
                max_read: limits.max_requests_inflight,
                max_mutating: limits.max_mutating_requests_inflight,
                max_watches: limits.max_watches,
                max_watches_per_user: limits.max_watches_per_user,
            })),
            authorization: guard.map(|guard| {
                Arc::new(authorization::Authorization { authorizer: guard.authz.clone(), always_allow, resources })
            }),
        }
    }

    /// `endpoint` inside every filter, the outermost first, as a request
    /// meets them; compression is the innermost, around the endpoint alone.
    ///
    /// The chain is one service of nested concrete types. Added with
    /// `Router::layer` instead, each filter would be a boxed route of its
    /// own, and axum's `from_fn` clones the service inside it on every
    /// request: each filter cloned every box below it, ~50 allocations per
    /// request, measured as a fifth of a GET's CPU.
    pub fn around(
        &self,
        endpoint: Router,
    ) -> impl Service<Request<Body>, Response = Response, Error = Infallible, Future: Send> + Clone + Send + 'static
    {
        ServiceBuilder::new()
            .layer(from_fn(status_encoding::status_in_accepted_encoding))
            .layer(from_fn(recovery::recover))
            .layer(from_fn(request_info))
            .option_layer(self.audit.clone().map(audit::AuditLayer))
            .layer(from_fn_with_state(self.observe.clone(), observe::observe))
            .layer(from_fn_with_state(self.deadline.clone(), deadline::enforce))
            .option_layer(
                self.authentication.clone().map(|authn| from_fn_with_state(authn, authentication::authenticate)),
            )
            .option_layer(self.audit.as_ref().map(|_| audit::EvaluatePolicyLayer))
            .option_layer(self.impersonation.clone().map(|authz| from_fn_with_state(authz, impersonation::impersonate)))
            .layer(from_fn_with_state(self.inflight.clone(), inflight::limit))
            .option_layer(self.authorization.clone().map(|authz| from_fn_with_state(authz, authorization::authorize)))
            .service(compression::compress(endpoint))
    }
}

/// Whether a request is long-running (kube's `LongRunningRequestCheck`): only
/// watches here. Long-running requests have no deadline and are not counted by
/// the in-flight limits (watches have caps of their own).
pub fn is_long_running(info: &crate::endpoints::request_info::RequestInfo) -> bool {
    info.is_resource_request && info.verb == RequestVerb::Resource(Verb::Watch)
}

/// Classifies the request once (kube's `WithRequestInfo`); every filter after
/// this one reads the [`RequestInfo`](crate::endpoints::request_info::RequestInfo)
/// from the request's extensions.
///
/// It also echoes the `Audit-ID` the request came with (the aggregator's), as
/// kube's `WithAuditInit` does whether or not anything is audited. Here rather
/// than in a layer of its own: each `from_fn` layer costs two allocations per
/// request, and with auditing off this is all auditing does (a lookup and a
/// clone of the header's shared bytes).
pub async fn request_info(mut req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let info = crate::endpoints::request_info::classify(req.method(), req.uri().path(), req.uri().query());
    req.extensions_mut().insert(info);
    let audit_id = audit::sent_audit_id(&req);
    let mut resp = next.run(req).await;
    if let Some(id) = audit_id {
        audit::echo(&mut resp, id);
    }
    resp
}
