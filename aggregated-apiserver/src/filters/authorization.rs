//! Authorization (k8s.io/apiserver `WithAuthorization`): every request but the
//! always-allowed paths is decided with a SubjectAccessReview for the user the
//! filters before established. A denial is kube's 403; a review that could not
//! be made is kube's 500, never a 403 that hides the failure.

use std::future::Future;
use std::sync::{Arc, LazyLock};

use super::{passed, waiting, Next, Request};
use axum::response::{IntoResponse, Response};

use crate::apimachinery::errors::ApiError;
use crate::apimachinery::request_info::RequestInfo;
use crate::audit::AuditContext;
use crate::auth::authn::request_user;
use crate::auth::authz::{self, Attributes, AttributesRef, Authorizer, Decision};
use crate::endpoints::handlers::ServedKinds;

/// `--authorization-always-allow-paths` (kube's delegating default: `/healthz`,
/// `/readyz`, `/livez`): exact paths, or prefixes when they end in `*`.
#[derive(Debug, Clone, Default)]
pub struct AlwaysAllowPaths {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl AlwaysAllowPaths {
    pub fn new(paths: &[String]) -> Self {
        let mut allowed = Self::default();
        for path in paths.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            match path.strip_suffix('*') {
                Some(prefix) => allowed.prefixes.push(prefix.to_string()),
                None => allowed.exact.push(path.to_string()),
            }
        }
        allowed
    }

    pub fn allows(&self, path: &str) -> bool {
        self.exact.iter().any(|p| p == path) || self.prefixes.iter().any(|p| path.starts_with(p.as_str()))
    }
}

const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";
const DECISION_ALLOW: &str = "allow";
const DECISION_FORBID: &str = "forbid";

/// The decisions as annotation values, shared by every request's event.
static ALLOWED: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(DECISION_ALLOW));
static FORBIDDEN: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(DECISION_FORBID));
static NO_REASON: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(""));

/// The decision and its reason, on the request's audit event (kube's
/// `WithAuthorization` annotations); nothing when the request is not audited.
fn annotate(req: &Request, decision: &Arc<str>, reason: &Arc<str>) {
    if let Some(audit) = req.extensions().get::<AuditContext>() {
        audit.add_shared_annotation(DECISION_ANNOTATION, decision);
        audit.add_shared_annotation(REASON_ANNOTATION, reason);
    }
}

/// Put into a non-resource request's extensions when its caller was
/// authorized for it by a review (or is a `system:masters` member), not merely
/// let through on an always-allowed path: health checks show their failure
/// reasons only then.
#[derive(Debug, Clone, Copy)]
pub struct Authorized;

/// The authorization filter's state.
pub struct Authorization {
    pub authorizer: Arc<Authorizer>,
    pub always_allow: AlwaysAllowPaths,
    /// To find what else a kind requires (a read of a view of Pods is also a Pod read).
    pub resources: Arc<ServedKinds>,
}

pub fn authorize<'a, N: Next + 'a>(
    authz: &'a Authorization,
    mut req: Request,
    next: N,
) -> impl Future<Output = Response> + Send + 'a {
    if allowed_at_once(authz, &mut req) {
        return passed(next.run(req));
    }
    waiting(async move {
        match authorized(authz, req).await {
            Ok(req) => next.run(req).await,
            Err(refused) => refused,
        }
    })
}

/// What a resource request must be allowed: its own attributes (borrowed
/// from its description, so that a cache hit copies nothing), and those of
/// what its kind also requires (a read of a view of Pods is also a Pod read).
fn wanted<'r>(authz: &Authorization, info: &'r RequestInfo) -> (AttributesRef<'r>, Vec<Attributes>) {
    let attrs = AttributesRef::from_request(info);
    let also_requires = authz
        .resources
        .find(info.api_group(), info.api_version(), info.resource())
        .filter(|_| info.is_resource_request)
        .map(|r| r.kind.also_requires())
        .unwrap_or(&[]);
    let also = also_requires.iter().map(|(group, resource)| attrs.for_resource(group, resource)).collect();
    (attrs, also)
}

/// Whether the request is allowed without waiting: an always-allowed path,
/// or every decision it needs allowed by the cache (or the user a
/// `system:masters` member); then it is marked and annotated as
/// [`authorized`] would. False sends it to [`authorized`]: a decision to
/// review, a denial, anything to refuse.
fn allowed_at_once(authz: &Authorization, req: &mut Request) -> bool {
    let Some(info) = req.extensions().get::<RequestInfo>() else { return false };
    if !info.is_resource_request && authz.always_allow.allows(info.path()) {
        // kube's path authorizer allows these with no reason.
        annotate(req, &ALLOWED, &NO_REASON);
        return true;
    }
    let Some(user) = request_user(req.extensions()) else { return false };
    let resource = info.is_resource_request;
    let (attrs, also) = wanted(authz, info);
    let mut allowed_because = None;
    for attrs in std::iter::once(attrs).chain(also.iter().map(Attributes::view)) {
        match authz.authorizer.decided(user, attrs) {
            Some(Decision::Allow { reason }) => {
                allowed_because.get_or_insert(reason);
            }
            _ => return false,
        }
    }
    allowed(req, allowed_because.as_ref(), resource);
    true
}

/// Marks and annotates a request allowed, `because` its own decision's
/// reason. Only a path's answer (a health check's) reads the mark: a
/// resource request is not given one, which would be one more entry in its
/// extensions (a fifth, past what their map holds before it grows).
fn allowed(req: &mut Request, because: Option<&Arc<str>>, resource: bool) {
    annotate(req, &ALLOWED, because.unwrap_or(&NO_REASON));
    if !resource {
        req.extensions_mut().insert(Authorized);
    }
}

/// The request, once authorized; or the refusal. Only for what
/// [`allowed_at_once`] did not allow (never an always-allowed path).
async fn authorized(authz: &Authorization, mut req: Request) -> Result<Request, Response> {
    let Some(info) = req.extensions().get::<RequestInfo>() else {
        return Err(ApiError::internal_error("no request info found: the filter chain is wrong").into_response());
    };
    let Some(user) = request_user(req.extensions()) else {
        return Err(ApiError::internal_error("no user found for request").into_response());
    };
    let resource = info.is_resource_request;
    let (attrs, also) = wanted(authz, info);
    let wanted = std::iter::once(attrs).chain(also.iter().map(Attributes::view));
    let uri = req.uri().path_and_query().map_or_else(|| req.uri().path(), |pq| pq.as_str());
    // The reason of the request's own decision (not of what it also requires).
    let mut allowed_because: Option<Arc<str>> = None;
    for attrs in wanted {
        match authz.authorizer.authorize(user, attrs).await {
            Decision::Allow { reason } => {
                allowed_because.get_or_insert(reason);
            }
            Decision::Deny { reason } => {
                annotate(&req, &FORBIDDEN, &Arc::from(reason.as_str()));
                return Err(authz::forbidden(user, &attrs.to_owned(), &reason).into_response());
            }
            Decision::Error { message } => {
                if let Some(audit) = req.extensions().get::<AuditContext>() {
                    audit.add_annotation(REASON_ANNOTATION, "internal error");
                }
                return Err(authz::internal_error(uri, &message).into_response());
            }
        }
    }
    allowed(&mut req, allowed_because.as_ref(), resource);
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_allowed_paths_are_exact_unless_they_end_in_a_star() {
        let paths = AlwaysAllowPaths::new(&["/healthz".into(), "/readyz".into(), "/livez".into(), "/debug/*".into()]);
        for allowed in ["/healthz", "/readyz", "/livez", "/debug/", "/debug/pprof"] {
            assert!(paths.allows(allowed), "{allowed}");
        }
        for refused in ["/healthz/", "/readyz/etcd", "/livez/ping", "/healthzx", "/debug", "/metrics", "/", "/apis"] {
            assert!(!paths.allows(refused), "{refused}");
        }
        assert!(!AlwaysAllowPaths::new(&[]).allows("/healthz"), "an empty list allows nothing");
    }
}
