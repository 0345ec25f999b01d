//! Authentication (k8s.io/apiserver `WithAuthentication`): establishes who is
//! asking and puts the [`UserInfo`] into the request's extensions. A request
//! with no credentials at all is `system:anonymous` in `system:unauthenticated`
//! (then authorized like anyone else); credentials that are presented and
//! refused are a 401, anonymous or not. Once a request is authenticated its
//! `Authorization` and front-proxy (`X-Remote-*`) headers are removed.

use std::future::Future;
use std::sync::{Arc, LazyLock};

use super::{answered, passed, waiting, Filtered, Next, Request};
use axum::response::{IntoResponse, Response};
use http::header::AUTHORIZATION;

use crate::apimachinery::errors::ApiError;
use crate::auth::authn::peer::Peer;
use crate::auth::authn::{
    set_request_user, Authenticator, AuthnOutcome, UserInfo, ANONYMOUS_USER, UNAUTHENTICATED_GROUP,
};

use super::authorization::AlwaysAllowPaths;

/// The authentication filter's state.
pub struct Authentication {
    pub authenticator: Arc<Authenticator>,
    /// `--anonymous-auth`: serve requests without credentials as `system:anonymous`.
    pub anonymous: bool,
    /// With anonymous requests turned off, these (the probe paths) still accept
    /// them, as kube's anonymous-authentication conditions are commonly set:
    /// the kubelet probes without credentials.
    pub anonymous_paths: AlwaysAllowPaths,
}

/// kube's anonymous user, made once and shared by every anonymous request
/// (the kubelet's probes among them).
fn anonymous_user() -> Arc<UserInfo> {
    static ANONYMOUS: LazyLock<Arc<UserInfo>> = LazyLock::new(|| {
        Arc::new(UserInfo {
            name: ANONYMOUS_USER.to_string(),
            groups: vec![UNAUTHENTICATED_GROUP.to_string()],
            ..Default::default()
        })
    });
    ANONYMOUS.clone()
}

pub fn authenticate<'a, N: Next + 'a>(
    authn: &'a Authentication,
    req: Request,
    next: N,
) -> impl Future<Output = Response> + Send + 'a {
    let known = on_peer(&req, |peer| authn.authenticator.authenticate_at_once(req.headers(), peer));
    match known {
        Some(outcome) => as_authenticated(authn, req, outcome, next),
        // A token to review: its request's first steps are made again there
        // (a certificate already verified is remembered by the connection).
        None => waiting(async move {
            let outcome = match req.extensions().get::<Peer>() {
                Some(peer) => authn.authenticator.authenticate(req.headers(), peer).await,
                None => authn.authenticator.authenticate(req.headers(), &Peer::default()).await,
            };
            as_authenticated(authn, req, outcome, next).await
        }),
    }
}

/// `f` of the connection the request came on (a request built without one,
/// in tests, has no certificates and remembers no token).
fn on_peer<R>(req: &Request, f: impl FnOnce(&Peer) -> R) -> R {
    match req.extensions().get::<Peer>() {
        Some(peer) => f(peer),
        None => f(&Peer::default()),
    }
}

/// The rest of the chain as the user `outcome` names, or the refusal.
fn as_authenticated<'a, N: Next + 'a>(
    authn: &Authentication,
    mut req: Request,
    outcome: AuthnOutcome,
    next: N,
) -> Filtered<'a, N::Future> {
    let user = match outcome {
        AuthnOutcome::Authenticated(user) => {
            req.headers_mut().remove(AUTHORIZATION);
            user
        }
        AuthnOutcome::NoCredentials if authn.anonymous || authn.anonymous_paths.allows(req.uri().path()) => {
            anonymous_user()
        }
        AuthnOutcome::NoCredentials => {
            tracing::debug!(path = %req.uri().path(), "anonymous request refused (--anonymous-auth=false)");
            return answered(ApiError::unauthorized("Unauthorized").into_response());
        }
        AuthnOutcome::Unauthenticated { reason } => {
            tracing::debug!(path = %req.uri().path(), %reason, "unauthenticated request");
            return answered(ApiError::unauthorized("Unauthorized").into_response());
        }
    };
    authn.authenticator.clear_request_headers(req.headers_mut());
    set_request_user(req.extensions_mut(), user);
    passed(next.run(req))
}
