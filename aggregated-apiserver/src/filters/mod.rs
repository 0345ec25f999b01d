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
//! trace           with a tracing configuration, the request's span (trace.rs)
//! audit policy    the policy evaluated for the authenticated user; RequestReceived
//! impersonation   Impersonate-* headers, each checked with a SubjectAccessReview
//! in-flight       API Priority and Fairness, else --max-requests-inflight /
//!                 --max-mutating-requests-inflight; watch caps
//! authorization   SubjectAccessReview (cached), the always-allowed probe paths
//! compression     gzip for answers over 128 KiB when the client accepts it
//! ```
//!
//! Each filter is a function of its state, the request and what comes after
//! it ([`Next`]), in a file of its own: it does at once what it can and
//! returns a small future for the rest ([`Filtered`]). The user they
//! establish travels in the request's extensions as
//! [`crate::auth::authn::UserInfo`]. [`Chain`] calls them in the order
//! above: one future for the whole chain, allocated once per request, and
//! once more only when a filter has to wait (a review the caches cannot
//! answer, an audit backend).

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
pub mod request_metrics;
pub mod status_encoding;
pub mod trace;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::future::{BoxFuture, Either, Ready};
use futures::FutureExt;
use tower::{Service, ServiceExt};

use crate::apimachinery::request_info::RequestVerb;
use crate::apimachinery::resource::Verb;
use crate::auth::options::{AuthenticationOptions, AuthorizationOptions};
use crate::auth::Guard;
use crate::endpoints::handlers::ServedKinds;

/// A request as the filters see it.
pub type Request = http::Request<Body>;

/// What comes after a filter: the rest of the chain, run at most once with
/// the request to pass on. A closure naming the next filter is one.
pub trait Next: Send {
    type Future: Future<Output = Response> + Send;
    fn run(self, req: Request) -> Self::Future;
}

impl<F, Fut> Next for F
where
    F: FnOnce(Request) -> Fut + Send,
    Fut: Future<Output = Response> + Send,
{
    type Future = Fut;
    fn run(self, req: Request) -> Fut {
        self(req)
    }
}

/// A filter's future, for filters that decide most requests at once.
///
/// A filter runs what it can at once, when the chain is built for a request,
/// and returns one of these: the rest of the chain's future (in a `map` when
/// it has something to do with the answer), an answer of its own, or, when it
/// has to wait (a token or access review, an audit backend), a boxed future
/// that does the rest. As `async fn`s the filters would each hold the
/// request and their own state beside the next filter's future, making a
/// GET's future several kilobytes, copied into its box and moved again
/// between filters on every request (measured: docs/performance.md, "The
/// filter chain and the handler's futures").
pub type Filtered<'a, F> = Either<F, Either<Ready<Response>, BoxFuture<'a, Response>>>;

/// The rest of the chain, run at once.
pub fn passed<'a, F>(next: F) -> Filtered<'a, F> {
    Either::Left(next)
}

/// The filter's own answer; the rest of the chain is not run.
pub fn answered<'a, F>(resp: Response) -> Filtered<'a, F> {
    Either::Right(Either::Left(futures::future::ready(resp)))
}

/// The rest of the filter's work and of the chain, once what it waits for is there.
pub fn waiting<'a, F>(rest: impl Future<Output = Response> + Send + 'a) -> Filtered<'a, F> {
    Either::Right(Either::Right(Box::pin(rest)))
}

/// The options the filters are built from.
pub struct FilterOptions<'a> {
    pub limits: &'a options::RequestLimits,
    pub authentication: &'a AuthenticationOptions,
    pub authorization: &'a AuthorizationOptions,
}

/// What the filters share with the rest of the server.
pub struct Shared {
    pub resources: Arc<ServedKinds>,
    pub requests: Arc<request_metrics::RequestMetrics>,
    /// With an audit policy and a backend only.
    pub auditor: Option<Arc<crate::audit::Auditor>>,
    /// With `--tracing-config-file` only.
    pub tracing: Option<Arc<crate::trace::Tracing>>,
    /// With API Priority and Fairness on and a cluster to read it from.
    pub flow_control: Option<Arc<crate::flowcontrol::FlowControl>>,
    /// The shutdown grace is over: what is still in flight is answered.
    pub grace_over: tokio_util::sync::CancellationToken,
    /// With `--shutdown-send-retry-after`: new requests refused after the shutdown delay.
    pub retry_after: Option<Arc<deadline::RetryAfter>>,
}

/// The state of each filter of the request path, each from its own options.
pub struct Filters {
    /// With an audit policy and a backend only.
    audit: Option<Arc<crate::audit::Auditor>>,
    observe: Arc<observe::Observe>,
    deadline: Arc<deadline::Deadline>,
    /// With delegated authentication only, as are impersonation and authorization.
    authentication: Option<Arc<authentication::Authentication>>,
    /// With `--tracing-config-file` only.
    tracing: Option<Arc<crate::trace::Tracing>>,
    impersonation: Option<Arc<crate::auth::authz::Authorizer>>,
    inflight: Arc<inflight::InFlight>,
    authorization: Option<Arc<authorization::Authorization>>,
}

impl Filters {
    /// `guard` is None with `--authentication none`: then nobody is
    /// authenticated, impersonation is not offered, and nothing is authorized.
    pub fn new(options: FilterOptions<'_>, guard: Option<&Guard>, shared: Shared) -> Self {
        let Shared { resources, requests, auditor, tracing, flow_control, grace_over, retry_after } = shared;
        let limits = options.limits;
        let always_allow =
            authorization::AlwaysAllowPaths::new(&options.authorization.authorization_always_allow_paths);
        Self {
            audit: auditor,
            observe: Arc::new(observe::Observe { requests, resources: resources.clone() }),
            deadline: Arc::new(deadline::Deadline { maximum: limits.request_timeout, grace_over, retry_after }),
            authentication: guard.map(|guard| {
                Arc::new(authentication::Authentication {
                    authenticator: guard.authn.clone(),
                    anonymous: options.authentication.anonymous_auth,
                    anonymous_paths: always_allow.clone(),
                })
            }),
            tracing,
            impersonation: guard.map(|guard| guard.authz.clone()),
            inflight: Arc::new(inflight::InFlight::new(
                inflight::Limits {
                    max_read: limits.max_requests_inflight,
                    max_mutating: limits.max_mutating_requests_inflight,
                    max_watches: limits.max_watches,
                    max_watches_per_user: limits.max_watches_per_user,
                },
                flow_control,
                Some(resources.clone()),
            )),
            authorization: guard.map(|guard| {
                Arc::new(authorization::Authorization { authorizer: guard.authz.clone(), always_allow, resources })
            }),
        }
    }

    /// `endpoint` inside every filter, the outermost first, as a request
    /// meets them; compression is the innermost, around the endpoint alone.
    pub fn around<E: Clone>(self: &Arc<Self>, endpoint: E) -> Chain<E> {
        Chain { filters: self.clone(), endpoint: compression::Compression::new(endpoint) }
    }
}

/// The filters around an endpoint, as one service.
///
/// Each filter calls the next directly, so a request's whole way through
/// the chain is one future, boxed once (see [`Filtered`] for the
/// exceptions). Built as tower layers with axum's `from_fn` instead, each
/// filter would box the rest of the chain, a clone of it and two futures
/// for every request (measured: docs/performance.md, "The filter chain and
/// the handler's futures").
pub struct Chain<E> {
    filters: Arc<Filters>,
    endpoint: compression::Compression<E>,
}

impl<E: Clone> Clone for Chain<E> {
    fn clone(&self) -> Self {
        Self { filters: self.filters.clone(), endpoint: self.endpoint.clone() }
    }
}

impl<E, B> Service<http::Request<B>> for Chain<E>
where
    E: Service<Request, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    E::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let chain = self.clone();
        let req = req.map(Body::new);
        Box::pin(async move { Ok(chain.serve(req).await) })
    }
}

/// The stages of [`Chain`], each naming the filter it runs and the stage after it.
///
/// Plain functions returning the filter's future rather than `async fn`s: an
/// `async fn`'s future holds its arguments twice (as given and as moved into
/// its body), and the request is 240 bytes at every stage of a future that
/// is moved whole into its box on every request. The filters are written the
/// same way (see [`Filtered`]).
impl<E> Chain<E>
where
    E: Service<Request, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    E::Future: Send,
{
    fn serve(&self, req: Request) -> impl Future<Output = Response> + Send + '_ {
        status_encoding::status_in_accepted_encoding(req, move |req| {
            recovery::recover(req, move |req| request_info(req, move |req| self.audited(req)))
        })
    }

    fn audited(&self, req: Request) -> impl Future<Output = Response> + Send + '_ {
        match &self.filters.audit {
            // Boxed: an audited request allocates its record anyway, and the
            // audit filter's state would otherwise be carried, and moved, by
            // every request's future.
            Some(auditor) => Either::Left(audit::audit(auditor, req, move |req| self.observed(req)).boxed()),
            None => Either::Right(self.observed(req)),
        }
    }

    fn observed(&self, req: Request) -> impl Future<Output = Response> + Send + '_ {
        let filters = &*self.filters;
        observe::observe(&filters.observe, req, move |req| {
            deadline::enforce(&filters.deadline, req, move |req| self.authenticated(req))
        })
    }

    fn authenticated(&self, req: Request) -> impl Future<Output = Response> + Send + '_ {
        match &self.filters.authentication {
            Some(authn) => Either::Left(authentication::authenticate(authn, req, move |req| self.traced(req))),
            None => Either::Right(self.traced(req)),
        }
    }

    fn traced(&self, req: Request) -> impl Future<Output = Response> + Send + '_ {
        match &self.filters.tracing {
            // Boxed: a traced request carries its span's context anyway, and
            // the tracing filter's state would otherwise be carried by every
            // request's future. A request that cannot be sampled skips both.
            Some(tracing) if trace::may_trace(tracing, &req) => {
                Either::Left(trace::trace(tracing, req, move |req| self.policy_evaluated(req)).boxed())
            }
            _ => Either::Right(self.policy_evaluated(req)),
        }
    }

    fn policy_evaluated(&self, req: Request) -> impl Future<Output = Response> + Send + '_ {
        match &self.filters.audit {
            Some(_) => Either::Left(audit::evaluate_policy(req, move |req| self.impersonated(req))),
            None => Either::Right(self.impersonated(req)),
        }
    }

    fn impersonated(&self, req: Request) -> impl Future<Output = Response> + Send + '_ {
        match &self.filters.impersonation {
            Some(authz) => Either::Left(impersonation::impersonate(authz, req, move |req| self.limited(req))),
            None => Either::Right(self.limited(req)),
        }
    }

    fn limited(&self, req: Request) -> impl Future<Output = Response> + Send + '_ {
        inflight::limit(&self.filters.inflight, req, move |req| self.authorized(req))
    }

    fn authorized(&self, req: Request) -> impl Future<Output = Response> + Send + '_ {
        match &self.filters.authorization {
            Some(authz) => Either::Left(authorization::authorize(authz, req, move |req| self.endpoint.serve(req))),
            None => Either::Right(self.endpoint.serve(req)),
        }
    }
}

/// A tower service's answer when it cannot fail.
///
/// Not an `async fn`: its future would hold the service and the request
/// beside the call's own future, which holds them too until it is called.
pub(crate) fn infallible<S, R>(service: S, req: Request) -> impl Future<Output = R>
where
    S: Service<Request, Response = R, Error = Infallible>,
{
    service.oneshot(req).map(|answer| match answer {
        Ok(resp) => resp,
        Err(never) => match never {},
    })
}

/// Whether a request is long-running (kube's `LongRunningRequestCheck`): a
/// watch, or a request to a subresource kube names long-running (a log, a
/// connection to an object). Long-running requests have no deadline and are
/// not counted by the in-flight limits (they take a slot of the watches' cap).
pub fn is_long_running(info: &crate::apimachinery::request_info::RequestInfo) -> bool {
    const LONG_RUNNING_SUBRESOURCES: [&str; 5] = ["attach", "exec", "proxy", "log", "portforward"];
    info.is_resource_request
        && (info.verb == RequestVerb::Resource(Verb::Watch) || LONG_RUNNING_SUBRESOURCES.contains(&info.subresource()))
}

/// Classifies the request once (kube's `WithRequestInfo`); every filter after
/// this one reads the [`RequestInfo`](crate::apimachinery::request_info::RequestInfo)
/// from the request's extensions.
///
/// It also echoes the `Audit-ID` the request came with (the aggregator's), as
/// kube's `WithAuditInit` does whether or not anything is audited. Here rather
/// than in a filter of its own: with auditing off this is all auditing does
/// (a lookup and a clone of the header's shared bytes).
pub fn request_info<N: Next>(mut req: Request, next: N) -> impl Future<Output = Response> + Send {
    let info = crate::apimachinery::request_info::classify(req.method(), req.uri().path(), req.uri().query());
    req.extensions_mut().insert(info);
    let audit_id = audit::sent_audit_id(&req);
    next.run(req).map(move |mut resp| {
        if let Some(id) = audit_id {
            audit::echo(&mut resp, id);
        }
        resp
    })
}
