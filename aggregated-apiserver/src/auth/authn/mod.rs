//! Delegated authentication, as kube-apiserver does it for an aggregated API server.
//!
//! Three authenticators run in order; the first with an answer wins:
//!
//! 1. **Request header (front proxy).** When the connection's client certificate chain verifies
//!    against the request-header CA (`requestheader-client-ca-file`) as a client certificate and its
//!    Common Name is allowed (`requestheader-allowed-names`, empty = any), the user is taken from the
//!    `X-Remote-User`/`X-Remote-Group`/`X-Remote-Extra-*`/`X-Remote-Uid` style headers. Without such
//!    a certificate those headers are ignored entirely.
//! 2. **Client certificate.** A chain verifying against the client CA (`client-ca-file`) is the user
//!    named by the subject's CN, with the subject's O values as groups.
//! 3. **Bearer token.** `Authorization: Bearer …` is sent to a [`TokenReviewer`] (a `TokenReview`
//!    against kube-apiserver); answers are cached briefly under a salted SHA-256 of the token, and
//!    a connection remembers the token it last authenticated with, for as long as that answer is
//!    cached ([`peer`]).
//!
//! Authenticated users get `system:authenticated`. The configuration normally comes from the
//! `kube-system/extension-apiserver-authentication` ConfigMap ([`AuthnConfig::from_configmap_data`],
//! [`spawn_configmap_watch`]) and can be swapped at run time ([`Authenticator::update`]).
//!
//! TLS only requests client certificates (see [`crate::server::tls::DeferredClientCertVerifier`]); the chain
//! is verified here, once per CA bundle, with rustls' webpki verifier.
//!
//! One module per concern: `request_header` (front proxy), `client_cert` (x509 and CA bundles),
//! `token` (bearer tokens and TokenReview), `configmap` (the watched ConfigMap); this one holds
//! the configuration, the user and outcome types, and the [`Authenticator`] running them in order.

mod client_cert;
mod configmap;
pub mod peer;
mod request_header;
#[cfg(test)]
mod test_support;
mod token;

pub use configmap::*;
pub(crate) use request_header::unescape_extra_key;
pub use token::*;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context as _;
use arc_swap::ArcSwap;
use http::header::AUTHORIZATION;
use http::HeaderMap;
use tokio::time::Instant;

use client_cert::{client_cert_user, ring_provider, CaBundle};
use peer::Peer;
use request_header::RequestHeaderAuth;
use token::{bearer_token, TokenAuth};

/// Group added to every authenticated user.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// Group of unauthenticated users; a user already in it does not get [`AUTHENTICATED_GROUP`].
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The anonymous user's name; it does not get [`AUTHENTICATED_GROUP`].
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// Extra key under which certificate users carry `X509SHA256=<hex of the leaf's SHA-256>`.
pub const CREDENTIAL_ID_EXTRA_KEY: &str = "authentication.kubernetes.io/credential-id";

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// Front-proxy (request header) authentication settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestHeaderConfig {
    /// PEM bundle of the CA(s) that sign the front proxy's client certificate.
    pub ca_pem: String,
    /// Common Names the front proxy's certificate may have; empty allows any.
    pub allowed_names: Vec<String>,
    /// Headers holding the username, in order of preference (e.g. `X-Remote-User`).
    pub username_headers: Vec<String>,
    /// Headers holding groups, every value of each is one group (e.g. `X-Remote-Group`).
    pub group_headers: Vec<String>,
    /// Header name prefixes for extra attributes (e.g. `X-Remote-Extra-`).
    pub extra_header_prefixes: Vec<String>,
    /// Headers holding the user's UID, in order of preference (e.g. `X-Remote-Uid`).
    pub uid_headers: Vec<String>,
}

impl RequestHeaderConfig {
    /// k8s.io/apiserver's delegating defaults for the header names, used when the
    /// front-proxy CA comes from a flag (`--requestheader-client-ca-file`) rather than
    /// from the cluster's ConfigMap. UID headers stay off by default, as in kube.
    pub fn kube_defaults() -> Self {
        Self {
            username_headers: vec!["x-remote-user".to_string()],
            group_headers: vec!["x-remote-group".to_string()],
            extra_header_prefixes: vec!["x-remote-extra-".to_string()],
            ..Default::default()
        }
    }
}

/// Everything the authenticator needs besides the token reviewer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuthnConfig {
    /// Front-proxy authentication; `None` disables it (headers are then never trusted).
    pub request_header: Option<RequestHeaderConfig>,
    /// PEM bundle of the CA(s) for client-certificate users; `None` disables them.
    pub client_ca_pem: Option<String>,
}
// ---------------------------------------------------------------------------------------------
// Results and the token reviewer
// ---------------------------------------------------------------------------------------------

/// An authenticated user, as kube's `user.Info`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct UserInfo {
    /// The username.
    pub name: String,
    /// The user's UID (may be empty).
    pub uid: String,
    /// Groups, in order.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The user as the Kubernetes API writes one (`authentication.k8s.io/v1`).
    pub fn to_api(&self) -> k8s_openapi::api::authentication::v1::UserInfo {
        let non_empty = |s: &String| (!s.is_empty()).then(|| s.clone());
        k8s_openapi::api::authentication::v1::UserInfo {
            username: non_empty(&self.name),
            uid: non_empty(&self.uid),
            groups: (!self.groups.is_empty()).then(|| self.groups.clone()),
            extra: (!self.extra.is_empty()).then(|| self.extra.clone()),
        }
    }
}

/// The user a request is served as (authenticated, then impersonated), as
/// the authentication filter puts it in the request's extensions. Shared: a
/// user remembered for a connection or cached for a token is not copied per
/// request.
pub fn request_user(extensions: &http::Extensions) -> Option<&UserInfo> {
    shared_request_user(extensions).map(|user| &**user)
}

/// [`request_user`], as the `Arc` it is shared by (an audit event keeps the
/// user's JSON beside it).
pub fn shared_request_user(extensions: &http::Extensions) -> Option<&Arc<UserInfo>> {
    extensions.get::<Arc<UserInfo>>()
}

/// Makes `user` the one the request is served as (see [`request_user`]).
pub fn set_request_user(extensions: &mut http::Extensions, user: Arc<UserInfo>) {
    extensions.insert(user);
}

/// What [`Authenticator::authenticate`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthnOutcome {
    /// The request is from this user.
    Authenticated(Arc<UserInfo>),
    /// The request presented no credentials at all: no usable client certificate, no front-proxy
    /// identity, no bearer token. kube serves such a request as `system:anonymous` when anonymous
    /// authentication is on, and answers 401 otherwise.
    NoCredentials,
    /// Credentials were presented and rejected (an invalid or unreviewable bearer token, a
    /// certificate failing verification): always 401, anonymous authentication or not, as kube's
    /// `union.NewFailOnError` does. `reason` says why (never contains a credential).
    Unauthenticated {
        /// Why each authenticator that had something to look at said no.
        reason: String,
    },
}

/// One authenticator's answer.
enum Step {
    User(UserInfo),
    /// Nothing to look at (e.g. no certificate, no username header).
    NoOpinion,
    /// Looked and said no; the reason is reported if nobody else accepts the request.
    Rejected(String),
}

struct Compiled {
    config: AuthnConfig,
    request_header: Option<RequestHeaderAuth>,
    client_ca: Option<CaBundle>,
}

impl Compiled {
    fn new(config: AuthnConfig) -> anyhow::Result<Self> {
        let provider = ring_provider();
        let request_header =
            config.request_header.as_ref().map(|rh| RequestHeaderAuth::compile(rh, &provider)).transpose()?;
        let client_ca = config
            .client_ca_pem
            .as_deref()
            .map(|pem| CaBundle::from_pem(pem, &provider).context("client CA bundle"))
            .transpose()?;
        Ok(Self { config, request_header, client_ca })
    }

    /// For logs: what is configured, without the PEM.
    fn summary(&self) -> String {
        let request_header = match (&self.request_header, &self.config.request_header) {
            (Some(compiled), Some(config)) => format!(
                "request-header CA [{}] allowed names {:?} username headers {:?} group headers {:?} \
                 extra prefixes {:?} uid headers {:?}",
                compiled.ca.subjects.join("; "),
                config.allowed_names,
                config.username_headers,
                config.group_headers,
                config.extra_header_prefixes,
                config.uid_headers
            ),
            _ => "request-header authentication disabled".to_string(),
        };
        let client = match &self.client_ca {
            Some(ca) => format!("client CA [{}]", ca.subjects.join("; ")),
            None => "client-certificate authentication disabled".to_string(),
        };
        format!("{request_header}; {client}")
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded data stays consistent at every step, so a poisoned lock is still usable.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

// ---------------------------------------------------------------------------------------------
// Authenticator
// ---------------------------------------------------------------------------------------------

/// Authenticates requests; see the module documentation. Cheap to share behind an `Arc`.
pub struct Authenticator {
    /// Read by every request without a lock; swapped whole when the CAs rotate.
    current: ArcSwap<Compiled>,
    tokens: Option<TokenAuth>,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("config", &self.compiled().summary())
            .field("tokens", &self.tokens.is_some())
            .finish()
    }
}

/// kube's `AuthenticatedGroupAdder`.
fn with_authenticated_group(mut user: UserInfo) -> UserInfo {
    let already = user.groups.iter().any(|group| group == AUTHENTICATED_GROUP || group == UNAUTHENTICATED_GROUP);
    if user.name != ANONYMOUS_USER && !already {
        user.groups.push(AUTHENTICATED_GROUP.to_string());
    }
    user
}

impl Authenticator {
    /// An authenticator for `config`; bearer tokens go to `tokens` (none: tokens are not accepted),
    /// cached, rate limited and retried as `token_options` say. Fails on unusable CA PEM.
    pub fn new(
        config: AuthnConfig,
        tokens: Option<Arc<dyn TokenReviewer>>,
        token_options: TokenOptions,
    ) -> anyhow::Result<Self> {
        let compiled = Compiled::new(config)?;
        tracing::info!(config = compiled.summary(), "authentication configured");
        let tokens = tokens.map(|reviewer| TokenAuth::new(reviewer, &token_options));
        Ok(Self { current: ArcSwap::from_pointee(compiled), tokens })
    }

    fn compiled(&self) -> arc_swap::Guard<Arc<Compiled>> {
        self.current.load()
    }

    /// The configuration in force.
    pub fn config(&self) -> AuthnConfig {
        self.compiled().config.clone()
    }

    /// Swaps in a new configuration (CA rotation) atomically; bad PEM -> Err and the old config stays.
    pub fn update(&self, config: AuthnConfig) -> anyhow::Result<()> {
        let compiled = Arc::new(Compiled::new(config)?);
        self.current.store(compiled);
        Ok(())
    }

    /// Removes the front-proxy headers (`X-Remote-User` and the others configured) from a
    /// request once it is authenticated, as kube does, so nothing behind authentication
    /// can mistake them for the caller's identity.
    pub fn clear_request_headers(&self, headers: &mut HeaderMap) {
        if let Some(rh) = &self.compiled().request_header {
            rh.clear(headers);
        }
    }

    /// Whether a connection's client certificate is the front proxy's (the aggregator's) under
    /// the configuration in force: the test request-header authentication makes before it
    /// reads any `X-Remote-*` header. The connection cap never closes such a connection.
    pub fn is_front_proxy(&self, peer: &Peer) -> bool {
        let compiled = self.compiled();
        compiled.request_header.as_ref().and_then(|rh| rh.check_proxy_certificate(peer)).is_some_and(|ok| ok.is_ok())
    }

    /// Authenticates a request from its headers and the connection's client certificates.
    pub async fn authenticate(&self, headers: &HeaderMap, peer: &Peer) -> AuthnOutcome {
        match self.without_review(headers, peer) {
            Ok(outcome) => outcome,
            Err(reasons) => self.reviewed(headers, peer, reasons).await,
        }
    }

    /// [`Self::authenticate`], when nothing has to be waited for: the
    /// front proxy's identity, a client certificate, a token the connection
    /// remembers, or no token at all. None: the request's bearer token has to
    /// be reviewed (or found in the token cache); [`Self::authenticate`] does.
    pub fn authenticate_at_once(&self, headers: &HeaderMap, peer: &Peer) -> Option<AuthnOutcome> {
        self.without_review(headers, peer).ok()
    }

    /// The outcome without a token review; Err when the bearer token is to
    /// be reviewed, with why the other authenticators refused the request.
    fn without_review(&self, headers: &HeaderMap, peer: &Peer) -> Result<AuthnOutcome, Vec<String>> {
        let compiled = self.compiled();
        let mut reasons = Vec::new();
        let mut decide = |step: Step| match step {
            Step::User(user) => Some(user),
            Step::NoOpinion => None,
            Step::Rejected(reason) => {
                reasons.push(reason);
                None
            }
        };

        let mut user = compiled.request_header.as_ref().and_then(|rh| decide(rh.authenticate(headers, peer)));
        if user.is_none() {
            user = compiled.client_ca.as_ref().and_then(|ca| decide(client_cert_user(ca, peer)));
        }
        drop(compiled);
        if let Some(user) = user {
            return Ok(AuthnOutcome::Authenticated(Arc::new(with_authenticated_group(user))));
        }

        let header = headers.get(AUTHORIZATION).map(|header| header.as_bytes());
        if let (Some(header), Some(_)) = (header, &self.tokens) {
            if let Some(user) = peer.remembered_token().user(header, Instant::now()) {
                return Ok(AuthnOutcome::Authenticated(user));
            }
        }
        if bearer_token(headers).is_some() {
            match &self.tokens {
                None => reasons.push("bearer tokens are not accepted".to_string()),
                Some(_) => return Err(reasons),
            }
        }
        Ok(refused(reasons))
    }

    /// The outcome of a request whose bearer token [`Self::without_review`]
    /// left to review; `reasons`: why the other authenticators refused it.
    async fn reviewed(&self, headers: &HeaderMap, peer: &Peer, mut reasons: Vec<String>) -> AuthnOutcome {
        let header = headers.get(AUTHORIZATION).map(|header| header.as_bytes());
        if let (Some(token), Some(tokens)) = (bearer_token(headers), &self.tokens) {
            match tokens.review(token).await {
                Ok((Some(user), cached_until)) if !user.name.is_empty() => {
                    if let (Some(header), Some(until)) = (header, cached_until) {
                        peer.remembered_token().remember(header, &user, until);
                    }
                    return AuthnOutcome::Authenticated(user);
                }
                Ok((Some(_), _)) => reasons.push("token review returned an empty username".to_string()),
                Ok((None, _)) => reasons.push("invalid bearer token".to_string()),
                Err(err) => reasons.push(format!("bearer token: {err}")),
            }
        }
        refused(reasons)
    }
}

/// No credentials when nothing was refused, else why each authenticator refused.
fn refused(reasons: Vec<String>) -> AuthnOutcome {
    if reasons.is_empty() {
        return AuthnOutcome::NoCredentials;
    }
    let reason = reasons.join("; ");
    tracing::debug!(reason = %reason, "request not authenticated");
    AuthnOutcome::Unauthenticated { reason }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    // ---- configuration and rotation -----------------------------------------------------------

    #[tokio::test]
    async fn a_token_the_connection_remembers_never_outranks_the_front_proxy() {
        let front = ca("front-proxy-ca");
        let cert = Leaf::client("front-proxy-client").sign(&front);
        let reviewer = Arc::new(FakeReviewer::default());
        let config = AuthnConfig { request_header: Some(rh_config(&front.pem, &[])), client_ca_pem: None };
        let a = Authenticator::new(config, Some(reviewer.clone() as Arc<dyn TokenReviewer>), TokenOptions::default())
            .unwrap();
        let connection = peer(&[&cert]);
        for _ in 0..3 {
            assert_eq!(user(a.authenticate(&bearer("good-token"), &connection).await).name, "token-user");
        }
        let mut both = proxy_headers();
        both.extend(bearer("good-token"));
        assert_eq!(user(a.authenticate(&both, &connection).await).name, "alice");
    }

    #[tokio::test]
    async fn update_rotates_the_request_header_ca() {
        let old = ca("front-proxy-ca-1");
        let new = ca("front-proxy-ca-2");
        let old_cert = Leaf::client("front-proxy-client").sign(&old);
        let new_cert = Leaf::client("front-proxy-client").sign(&new);
        let a = authn(AuthnConfig { request_header: Some(rh_config(&old.pem, &[])), client_ca_pem: None });
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&old_cert])).await).name, "alice");
        reason(a.authenticate(&proxy_headers(), &peer(&[&new_cert])).await);

        let rotated = AuthnConfig { request_header: Some(rh_config(&new.pem, &[])), client_ca_pem: None };
        a.update(rotated.clone()).unwrap();
        assert_eq!(a.config(), rotated);
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&new_cert])).await).name, "alice");
        reason(a.authenticate(&proxy_headers(), &peer(&[&old_cert])).await);

        // A bundle with both CAs (overlap during rotation) accepts both.
        let both = format!("{}{}", old.pem, new.pem);
        a.update(AuthnConfig { request_header: Some(rh_config(&both, &[])), client_ca_pem: None }).unwrap();
        for cert in [&old_cert, &new_cert] {
            assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[cert])).await).name, "alice");
        }

        // Bad PEM: error, the previous configuration stays.
        let before = a.config();
        for bad in ["", "not pem", "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"] {
            assert!(a.update(AuthnConfig { request_header: Some(rh_config(bad, &[])), client_ca_pem: None }).is_err());
            assert!(a.update(AuthnConfig { request_header: None, client_ca_pem: Some(bad.to_string()) }).is_err());
        }
        let junk_der = "-----BEGIN CERTIFICATE-----\nAAECAwQ=\n-----END CERTIFICATE-----\n";
        assert!(a.update(AuthnConfig { request_header: None, client_ca_pem: Some(junk_der.to_string()) }).is_err());
        assert_eq!(a.config(), before);
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&new_cert])).await).name, "alice");

        // Disabling request-header authentication makes the headers meaningless again.
        a.update(AuthnConfig::default()).unwrap();
        assert_eq!(a.authenticate(&proxy_headers(), &peer(&[&new_cert])).await, AuthnOutcome::NoCredentials);
    }

    #[test]
    fn the_front_proxy_certificate_is_known_without_a_request() {
        let front = ca("front-proxy-ca");
        let client_ca = ca("kubernetes-ca");
        let a = authn(AuthnConfig {
            request_header: Some(rh_config(&front.pem, &["front-proxy-client"])),
            client_ca_pem: Some(client_ca.pem.clone()),
        });
        let proxy = Leaf::client("front-proxy-client").sign(&front);
        assert!(a.is_front_proxy(&peer(&[&proxy])));
        // Signed by the request-header CA but not an allowed name (a CA shared with ordinary
        // client certificates), a user of the client CA, a stranger, no certificate: no.
        let other_name = Leaf::client("kubelet").sign(&front);
        let user = Leaf::client("bob").sign(&client_ca);
        let stranger = Leaf::client("front-proxy-client").sign(&ca("other"));
        for p in [peer(&[&other_name]), peer(&[&user]), peer(&[&stranger]), no_peer()] {
            assert!(!a.is_front_proxy(&p));
        }
        // The configuration in force decides: any name when none are listed, and a rotated CA.
        a.update(AuthnConfig { request_header: Some(rh_config(&front.pem, &[])), client_ca_pem: None }).unwrap();
        assert!(a.is_front_proxy(&peer(&[&other_name])));
        a.update(AuthnConfig { request_header: Some(rh_config(&ca("new").pem, &[])), client_ca_pem: None }).unwrap();
        assert!(!a.is_front_proxy(&peer(&[&proxy])));
        a.update(AuthnConfig::default()).unwrap();
        assert!(!a.is_front_proxy(&peer(&[&proxy])));
    }

    #[test]
    fn a_verified_connection_is_remembered_only_under_its_configuration() {
        let front = ca("front-proxy-ca");
        let a = authn(AuthnConfig {
            request_header: Some(rh_config(&front.pem, &["front-proxy-client"])),
            client_ca_pem: None,
        });
        let connection = peer(&[&Leaf::client("front-proxy-client").sign(&front)]);
        assert!(a.is_front_proxy(&connection));
        assert!(a.is_front_proxy(&connection), "the same connection again, from the cache");
        let stranger = peer(&[&Leaf::client("front-proxy-client").sign(&ca("other"))]);
        assert!(!a.is_front_proxy(&stranger), "other connections are still checked");
        // A rotated CA compiles a new configuration: the connection is checked again, and refused.
        a.update(AuthnConfig { request_header: Some(rh_config(&ca("new").pem, &[])), client_ca_pem: None }).unwrap();
        assert!(!a.is_front_proxy(&connection));
    }

    #[test]
    fn new_rejects_bad_pem() {
        let err = Authenticator::new(
            AuthnConfig { request_header: None, client_ca_pem: Some("garbage".into()) },
            None,
            TokenOptions::default(),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("client CA bundle"), "{err:#}");
    }

    #[tokio::test]
    async fn no_credentials_is_told_apart_from_rejected_credentials() {
        let client_ca = ca("kubernetes-ca");
        let reviewer = Arc::new(FakeReviewer::default());
        let a = Authenticator::new(
            AuthnConfig { request_header: None, client_ca_pem: Some(client_ca.pem.clone()) },
            Some(reviewer.clone()),
            TokenOptions::default(),
        )
        .unwrap();
        // Nothing presented (an empty or non-bearer Authorization is nothing either).
        for h in [HeaderMap::new(), headers(&[("Authorization", "Bearer ")]), headers(&[("Authorization", "Basic x")])]
        {
            assert_eq!(a.authenticate(&h, &no_peer()).await, AuthnOutcome::NoCredentials, "{h:?}");
        }
        // Presented and rejected: a bad token, a token whose review failed, a foreign certificate.
        assert_eq!(reason(a.authenticate(&bearer("bad-token"), &no_peer()).await), "invalid bearer token");
        assert!(reason(a.authenticate(&bearer("error-token"), &no_peer()).await).contains("apiserver unavailable"));
        let stranger = Leaf::client("eve").sign(&ca("other"));
        assert!(reason(a.authenticate(&HeaderMap::new(), &peer(&[&stranger])).await).contains("client certificate"));
    }

    #[tokio::test]
    async fn order_request_header_then_client_cert_then_token() {
        let front = ca("front-proxy-ca");
        let client_ca = ca("kubernetes-ca");
        let reviewer = Arc::new(FakeReviewer::default());
        let a = Authenticator::new(
            AuthnConfig {
                request_header: Some(rh_config(&front.pem, &["front-proxy-client"])),
                client_ca_pem: Some(client_ca.pem.clone()),
            },
            Some(reviewer.clone()),
            TokenOptions::default(),
        )
        .unwrap();
        let proxy_cert = Leaf::client("front-proxy-client").sign(&front);
        let client_cert = Leaf::client("bob").sign(&client_ca);
        let mut h = proxy_headers();
        h.append(AUTHORIZATION, HeaderValue::from_static("Bearer good-token"));
        assert_eq!(user(a.authenticate(&h, &peer(&[&proxy_cert])).await).name, "alice");
        assert_eq!(user(a.authenticate(&h, &peer(&[&client_cert])).await).name, "bob");
        assert_eq!(reviewer.calls(), 0);
        let stranger = Leaf::client("eve").sign(&ca("other"));
        assert_eq!(user(a.authenticate(&h, &peer(&[&stranger])).await).name, "token-user");
        assert_eq!(user(a.authenticate(&h, &no_peer()).await).name, "token-user");

        // All three say no: every reason is reported.
        let why = reason(a.authenticate(&bearer("bad-token"), &peer(&[&stranger])).await);
        assert!(why.contains("request-header client certificate"), "{why}");
        assert!(why.contains("; client certificate"), "{why}");
        assert!(why.ends_with("invalid bearer token"), "{why}");
    }

    // ---- robustness ---------------------------------------------------------------------------

    /// xorshift64*: deterministic pseudo-random bytes.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn bytes(&mut self, max: usize) -> Vec<u8> {
            let len = self.below(max + 1);
            (0..len).map(|_| self.next() as u8).collect()
        }
    }

    #[tokio::test]
    async fn fuzz_headers_and_certificates_never_panic() {
        let front = ca("front-proxy-ca");
        let client_ca = ca("kubernetes-ca");
        let good = Leaf::client("front-proxy-client").sign(&front);
        let client_cert = Leaf { orgs: &["o"], ..Leaf::client("bob") }.sign(&client_ca);
        let reviewer = Arc::new(FakeReviewer::default());
        let a = Authenticator::new(
            AuthnConfig {
                request_header: Some(rh_config(&front.pem, &[])),
                client_ca_pem: Some(client_ca.pem.clone()),
            },
            Some(reviewer),
            TokenOptions { cache_capacity: 64, ..TokenOptions::default() },
        )
        .unwrap();
        let names = [
            "x-remote-user",
            "x-remote-group",
            "x-remote-uid",
            "x-remote-extra-",
            "x-remote-extra-%",
            "x-remote-extra-%2",
            "x-remote-extra-a%2fb",
            "x-remote-extra-%ff%fe",
            "x-remote-extra-k",
            "authorization",
        ];
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        let mut authenticated = 0;
        for round in 0..3000 {
            let mut h = HeaderMap::new();
            for _ in 0..rng.below(8) {
                let name = if rng.below(4) == 0 {
                    let mut random = names[rng.below(names.len())].to_string();
                    random.push_str(&format!("{:x}", rng.next()));
                    random
                } else {
                    names[rng.below(names.len())].to_string()
                };
                let mut value = rng.bytes(40);
                match rng.below(4) {
                    // Printable ASCII, or any byte a header value may hold (obs-text included).
                    0 | 1 => value.iter_mut().for_each(|b| *b = 0x20 + *b % 0x5f),
                    2 => value.iter_mut().for_each(|b| *b = if *b < 0x20 || *b == 0x7f { b'\t' } else { *b }),
                    _ => {}
                }
                if rng.below(3) == 0 {
                    let mut prefixed = b"Bearer ".to_vec();
                    prefixed.append(&mut value);
                    value = prefixed;
                }
                if let (Ok(name), Ok(value)) =
                    (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(&value))
                {
                    h.append(name, value);
                }
            }
            let (chain, corrupted): (Vec<CertificateDer<'static>>, bool) = match round % 5 {
                0 => (vec![], false),
                1 => (vec![CertificateDer::from(rng.bytes(300))], true),
                2 => {
                    let mut bytes = good.as_ref().to_vec();
                    let at = rng.below(bytes.len());
                    bytes[at] ^= 1 << rng.below(8);
                    (vec![CertificateDer::from(bytes)], true)
                }
                3 => {
                    let bytes = client_cert.as_ref();
                    let cut = rng.below(bytes.len());
                    (vec![CertificateDer::from(bytes[..cut].to_vec()), CertificateDer::from(rng.bytes(64))], true)
                }
                _ => (vec![good.clone(), CertificateDer::from(rng.bytes(100))], false),
            };
            let p = Peer::new(None, Some(chain));
            let outcome = a.authenticate(&h, &p).await;
            if matches!(outcome, AuthnOutcome::Authenticated(_)) {
                authenticated += 1;
            }
            if corrupted {
                if let AuthnOutcome::Authenticated(user) = &outcome {
                    // Only a (random, hence rejected) bearer token could have authenticated.
                    panic!("round {round}: corrupted certificate authenticated {user:?}");
                }
            }
        }

        // Some rounds had the genuine certificate and a usable X-Remote-User.
        assert!(authenticated > 30, "{authenticated}");

        // Garbage configuration is an error, never a panic.
        for _ in 0..200 {
            let mut pem = b"-----BEGIN CERTIFICATE-----\n".to_vec();
            pem.extend(rng.bytes(200));
            pem.extend(b"\n-----END CERTIFICATE-----\n");
            let pem = String::from_utf8_lossy(&pem).into_owned();
            assert!(a.update(AuthnConfig { request_header: Some(rh_config(&pem, &[])), client_ca_pem: None }).is_err());
        }
        let weird = AuthnConfig {
            request_header: Some(RequestHeaderConfig {
                ca_pem: front.pem.clone(),
                allowed_names: strings(&["", "ü"]),
                username_headers: strings(&["", "bad header", "ü", "X-Remote-User"]),
                group_headers: strings(&["\n"]),
                extra_header_prefixes: strings(&["", "Ü-", "X-"]),
                uid_headers: strings(&[":"]),
            }),
            client_ca_pem: None,
        };
        a.update(weird).unwrap();
        let h = headers(&[("X-Remote-User", "zed"), ("X-Remote-Group", "g")]);
        let got = user(a.authenticate(&h, &peer(&[&Leaf { cn: Some("ü"), ..Leaf::client("") }.sign(&front)])).await);
        assert_eq!(got.name, "zed");
        assert_eq!(got.extra.get("remote-user"), Some(&strings(&["zed"])));
    }
}
