//! Bearer tokens: `Authorization: Bearer …` checked with a `TokenReview` against kube-apiserver,
//! answers cached under a salted SHA-256 of the token, one review in flight per token.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt as _, Shared};
use http::header::AUTHORIZATION;
use http::HeaderMap;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

use super::{lock, with_authenticated_group, UserInfo};
use crate::auth::cache::TtlCache;
use crate::auth::review::{ReviewError, ReviewPolicy, ReviewRunner};

/// kube's default delegated-authentication token cache TTL (`--authentication-token-webhook-cache-ttl`).
pub const DEFAULT_TOKEN_CACHE_TTL: Duration = Duration::from_secs(10);
/// Default bound on cached token reviews.
pub const DEFAULT_TOKEN_CACHE_CAPACITY: usize = 4096;

/// How bearer tokens are checked: the answer cache and how reviews are sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenOptions {
    /// How long an answer (valid or invalid) is cached; zero disables the cache.
    pub cache_ttl: Duration,
    /// Answers cached at most; zero disables the cache.
    pub cache_capacity: usize,
    /// Rate limit, deadline and retries of the TokenReviews.
    pub review: ReviewPolicy,
}

impl Default for TokenOptions {
    fn default() -> Self {
        Self {
            cache_ttl: DEFAULT_TOKEN_CACHE_TTL,
            cache_capacity: DEFAULT_TOKEN_CACHE_CAPACITY,
            review: ReviewPolicy::default(),
        }
    }
}

/// Decides whether a bearer token is valid.
#[async_trait::async_trait]
pub trait TokenReviewer: Send + Sync {
    /// `Ok(Some(user))`: valid; `Ok(None)`: rejected (cached like a success); `Err`: the review
    /// itself failed (not cached; retried when retriable).
    async fn review(&self, token: &str) -> Result<Option<UserInfo>, ReviewError>;
}

/// Reviews tokens with `authentication.k8s.io/v1` `TokenReview`s against kube-apiserver.
#[derive(Clone)]
pub struct KubeTokenReviewer {
    client: kube::Client,
}

impl fmt::Debug for KubeTokenReviewer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeTokenReviewer").finish_non_exhaustive()
    }
}

impl KubeTokenReviewer {
    /// A reviewer using `client` (which needs RBAC to create `tokenreviews`).
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

#[async_trait::async_trait]
impl TokenReviewer for KubeTokenReviewer {
    async fn review(&self, token: &str) -> Result<Option<UserInfo>, ReviewError> {
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let review = TokenReview { spec: review_spec(token), ..Default::default() };
        let answer = api.create(&PostParams::default(), &review).await.map_err(|err| ReviewError::from_kube(&err))?;
        let status = answer.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            // Like kube's webhook authenticator: a rejection that carries an error is an error.
            return match status.error.filter(|e| !e.is_empty()) {
                Some(error) => Err(ReviewError::fatal(format!("TokenReview: {error}"))),
                None => Ok(None),
            };
        }
        let user = status.user.unwrap_or_default();
        Ok(Some(UserInfo {
            name: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// Token cache
// ---------------------------------------------------------------------------------------------

type TokenKey = [u8; 32];
/// A token's user (already in `system:authenticated`), or None when the token was rejected.
type TokenUser = Option<Arc<UserInfo>>;
type ReviewResult = Result<TokenUser, String>;
type SharedReview = Shared<BoxFuture<'static, ReviewResult>>;

pub(super) struct TokenState {
    pub(super) cache: TtlCache<TokenKey, TokenUser>,
    /// Reviews under way, shared by concurrent requests with the same token.
    pub(super) inflight: HashMap<TokenKey, SharedReview>,
}

pub(super) struct TokenAuth {
    reviewer: Arc<dyn TokenReviewer>,
    ttl: Duration,
    salt: [u8; 32],
    /// Shared by every review of this authenticator: one rate limit for all tokens.
    runner: Arc<ReviewRunner>,
    pub(super) state: Arc<Mutex<TokenState>>,
}

impl TokenAuth {
    pub(super) fn new(reviewer: Arc<dyn TokenReviewer>, options: &TokenOptions) -> Self {
        Self {
            reviewer,
            ttl: options.cache_ttl,
            salt: rand::random(),
            runner: Arc::new(ReviewRunner::new(options.review)),
            state: Arc::new(Mutex::new(TokenState {
                cache: TtlCache::new(options.cache_capacity),
                inflight: HashMap::new(),
            })),
        }
    }

    fn key(&self, token: &str) -> TokenKey {
        let mut hasher = Sha256::new();
        hasher.update(self.salt);
        hasher.update(token.as_bytes());
        hasher.finalize().into()
    }

    /// The token's user, and until when the cache vouches for it when the
    /// answer came from the cache.
    pub(super) async fn review(&self, token: &str) -> Result<(TokenUser, Option<Instant>), String> {
        let key = self.key(token);
        let review = {
            let mut state = lock(&self.state);
            if let Some((cached, until)) = state.cache.get_until(&key, Instant::now()) {
                return Ok((cached, Some(until)));
            }
            match state.inflight.get(&key) {
                Some(review) => review.clone(),
                None => {
                    let review = self.start_review(key, token);
                    state.inflight.insert(key, review.clone());
                    review
                }
            }
        };
        Ok((review.await?, None))
    }

    /// The review runs in its own task (when there is a Tokio runtime), so it completes and fills
    /// the cache even if the requests waiting for it go away.
    fn start_review(&self, key: TokenKey, token: &str) -> SharedReview {
        let reviewer = self.reviewer.clone();
        let state = self.state.clone();
        let ttl = self.ttl;
        let runner = self.runner.clone();
        let token = token.to_string();
        let work = async move {
            // Rate limited, retried, under one deadline; errors are never cached.
            let result = runner
                .run(|| reviewer.review(&token))
                .await
                .map(|user| user.map(|user| Arc::new(with_authenticated_group(user))))
                .map_err(|err| err.message);
            let mut state = lock(&state);
            state.inflight.remove(&key);
            if let Ok(user) = &result {
                state.cache.insert(key, user.clone(), ttl, Instant::now());
            }
            result
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let task = runtime.spawn(work);
                let state = self.state.clone();
                async move {
                    match task.await {
                        Ok(result) => result,
                        Err(err) => {
                            lock(&state).inflight.remove(&key);
                            Err(format!("token review task failed: {err}"))
                        }
                    }
                }
                .boxed()
                .shared()
            }
            Err(_) => work.boxed().shared(),
        }
    }
}

/// kube's bearer token extraction: the first `Authorization` header, trimmed, `Bearer <token>`
/// (scheme case-insensitive, the token ends at the next space).
pub(super) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

// A TokenReview's token is optional in k8s-openapi's types before Kubernetes
// 1.37 and required from it on; the application's choice of version decides.
k8s_openapi::k8s_if_le_1_36! {
    fn review_spec(token: &str) -> TokenReviewSpec {
        TokenReviewSpec { token: Some(token.to_string()), audiences: None }
    }
}
k8s_openapi::k8s_if_ge_1_37! {
    fn review_spec(token: &str) -> TokenReviewSpec {
        TokenReviewSpec { token: token.to_string(), audiences: None }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::*;
    use super::*;
    use crate::auth::review::ReviewLimits;

    #[tokio::test]
    async fn token_user_and_cache() {
        let reviewer = Arc::new(FakeReviewer::default());
        let a = token_authn(&reviewer, Duration::from_millis(1000));
        let first = user(a.authenticate(&bearer("good-token"), &no_peer()).await);
        assert_eq!(first.name, "token-user");
        assert_eq!(first.uid, "u-1");
        assert_eq!(first.groups, strings(&["farmers", AUTHENTICATED_GROUP]));
        assert_eq!(first.extra, BTreeMap::from([("scopes".to_string(), strings(&["all"]))]));
        let second = user(a.authenticate(&bearer("good-token"), &no_peer()).await);
        assert_eq!(second, first);
        assert_eq!(reviewer.calls(), 1, "second request served from the cache");

        // Rejections are cached too.
        for _ in 0..3 {
            let why = reason(a.authenticate(&bearer("bad-token"), &no_peer()).await);
            assert_eq!(why, "invalid bearer token");
            assert!(!why.contains("bad-token"));
        }
        assert_eq!(reviewer.calls(), 2);

        // Review errors are not cached.
        for _ in 0..2 {
            let why = reason(a.authenticate(&bearer("error-token"), &no_peer()).await);
            assert!(why.contains("apiserver unavailable"), "{why}");
        }
        assert_eq!(reviewer.calls(), 4);

        // After the TTL, both are reviewed again.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        user(a.authenticate(&bearer("good-token"), &no_peer()).await);
        reason(a.authenticate(&bearer("bad-token"), &no_peer()).await);
        assert_eq!(reviewer.calls(), 6);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_remembers_its_token_only_while_the_cache_vouches_for_it() {
        let reviewer = Arc::new(FakeReviewer::default());
        let a = token_authn(&reviewer, Duration::from_secs(10));
        let connection = no_peer();
        for _ in 0..3 {
            assert_eq!(user(a.authenticate(&bearer("good-token"), &connection).await).name, "token-user");
        }
        assert_eq!(reviewer.calls(), 1);
        // With the shared cache emptied, the connection still knows its user; another does not.
        lock(&a.tokens.as_ref().unwrap().state).cache = TtlCache::new(DEFAULT_TOKEN_CACHE_CAPACITY);
        let remembered = user(a.authenticate(&bearer("good-token"), &connection).await);
        assert_eq!(remembered.groups, strings(&["farmers", AUTHENTICATED_GROUP]));
        assert_eq!(reviewer.calls(), 1, "answered by the connection");
        user(a.authenticate(&bearer("good-token"), &no_peer()).await);
        assert_eq!(reviewer.calls(), 2, "another connection asks the cache");
        // Another token on the connection is looked up for itself.
        assert_eq!(user(a.authenticate(&bearer("user-b"), &connection).await).name, "user-b");
        assert_eq!(user(a.authenticate(&bearer("good-token"), &connection).await).name, "token-user");
        // Revoked: once the cache's answer has expired, the connection's next
        // request is reviewed again, and refused.
        user(a.authenticate(&bearer("good-token"), &connection).await);
        reviewer.revoked.store(true, Ordering::SeqCst);
        tokio::time::advance(Duration::from_secs(11)).await;
        let calls = reviewer.calls();
        assert!(reason(a.authenticate(&bearer("good-token"), &connection).await).contains("invalid bearer token"));
        assert_eq!(reviewer.calls(), calls + 1);
    }

    #[tokio::test]
    async fn token_cache_disabled_with_zero_ttl() {
        let reviewer = Arc::new(FakeReviewer::default());
        let a = token_authn(&reviewer, Duration::ZERO);
        for _ in 0..3 {
            user(a.authenticate(&bearer("good-token"), &no_peer()).await);
        }
        assert_eq!(reviewer.calls(), 3);
    }

    #[tokio::test]
    async fn token_cache_is_bounded() {
        let reviewer = Arc::new(FakeReviewer::default());
        let options = TokenOptions { cache_capacity: 8, ..token_options(DEFAULT_TOKEN_CACHE_TTL) };
        let a = Authenticator::new(AuthnConfig::default(), Some(reviewer.clone()), options).unwrap();
        for i in 0..100 {
            user(a.authenticate(&bearer(&format!("user-{i}")), &no_peer()).await);
        }
        let tokens = a.tokens.as_ref().unwrap();
        {
            let state = lock(&tokens.state);
            assert_eq!(state.cache.len(), 8);
            assert!(state.inflight.is_empty());
        }
        assert_eq!(reviewer.calls(), 100);
        // The newest are cached, the oldest were evicted.
        user(a.authenticate(&bearer("user-99"), &no_peer()).await);
        assert_eq!(reviewer.calls(), 100);
        user(a.authenticate(&bearer("user-0"), &no_peer()).await);
        assert_eq!(reviewer.calls(), 101);
    }

    #[tokio::test]
    async fn retriable_review_failures_are_retried_then_rejected_uncached() {
        let reviewer = Arc::new(FakeReviewer::default());
        let a = token_authn(&reviewer, DEFAULT_TOKEN_CACHE_TTL);
        let why = reason(a.authenticate(&bearer("busy-token"), &no_peer()).await);
        assert!(why.contains("unable to handle the request"), "{why}");
        assert_eq!(reviewer.calls(), 5, "kube's DefaultAuthWebhookRetryBackoff makes 5 attempts");
        reason(a.authenticate(&bearer("busy-token"), &no_peer()).await);
        assert_eq!(reviewer.calls(), 10, "errors are not cached");
        // A fatal failure is tried once.
        reason(a.authenticate(&bearer("error-token"), &no_peer()).await);
        assert_eq!(reviewer.calls(), 11);
    }

    #[tokio::test]
    async fn reviews_beyond_the_queue_are_refused_at_once() {
        // A burst of 1, then 2 per second, one may wait: of 20 distinct tokens at once, one is
        // reviewed now, one half a second later, and 18 are refused at once without a review.
        let reviewer = Arc::new(FakeReviewer::default());
        let mut options = token_options(DEFAULT_TOKEN_CACHE_TTL);
        options.review.limits = ReviewLimits { qps: 2.0, burst: 1, queue: 1 };
        let a = Arc::new(Authenticator::new(AuthnConfig::default(), Some(reviewer.clone()), options).unwrap());
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let a = a.clone();
                tokio::spawn(async move { a.authenticate(&bearer(&format!("bad-{i}")), &no_peer()).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let done = tasks.iter().filter(|t| t.is_finished()).count();
        assert_eq!(done, 19, "all but the queued review answered at once");
        let (mut refused, mut reviewed) = (0, 0);
        for task in tasks {
            match task.await.unwrap() {
                AuthnOutcome::Unauthenticated { reason } if reason.contains("review not sent") => refused += 1,
                AuthnOutcome::Unauthenticated { reason } if reason == "invalid bearer token" => reviewed += 1,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!((refused, reviewed), (18, 2));
        assert_eq!(reviewer.calls(), 2);
    }

    #[tokio::test]
    async fn concurrent_identical_tokens_share_one_review() {
        let reviewer = Arc::new(FakeReviewer { delay: Some(Duration::from_millis(100)), ..Default::default() });
        let a = Arc::new(token_authn(&reviewer, DEFAULT_TOKEN_CACHE_TTL));
        let requests = (0..10).map(|_| {
            let a = a.clone();
            async move { a.authenticate(&bearer("good-token"), &no_peer()).await }
        });
        for outcome in futures::future::join_all(requests).await {
            assert_eq!(user(outcome).name, "token-user");
        }
        assert_eq!(reviewer.calls(), 1);

        // A request that gives up does not stop the review from filling the cache.
        let slow = tokio::time::timeout(Duration::from_millis(10), a.authenticate(&bearer("user-x"), &no_peer())).await;
        assert!(slow.is_err());
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(user(a.authenticate(&bearer("user-x"), &no_peer()).await).name, "user-x");
        assert_eq!(reviewer.calls(), 2);
    }

    #[tokio::test]
    async fn bearer_token_parsing() {
        let reviewer = Arc::new(FakeReviewer::default());
        let a = token_authn(&reviewer, DEFAULT_TOKEN_CACHE_TTL);
        for value in ["bearer good-token", "BEARER good-token", "  Bearer good-token  ", "Bearer good-token extra"] {
            let h = headers(&[("Authorization", value)]);
            assert_eq!(user(a.authenticate(&h, &no_peer()).await).name, "token-user", "{value:?}");
        }
        for value in ["Bearer", "Bearer ", "Bearer  good-token", "Basic Z29vZA==", "good-token", ""] {
            let h = headers(&[("Authorization", value)]);
            assert_eq!(a.authenticate(&h, &no_peer()).await, AuthnOutcome::NoCredentials, "{value:?}");
        }
        // Only the first Authorization header counts.
        let h = headers(&[("Authorization", "Basic x"), ("Authorization", "Bearer good-token")]);
        assert_eq!(a.authenticate(&h, &no_peer()).await, AuthnOutcome::NoCredentials);
        assert_eq!(reviewer.calls(), 1);
    }

    #[tokio::test]
    async fn token_special_users() {
        let reviewer = Arc::new(FakeReviewer::default());
        let a = token_authn(&reviewer, DEFAULT_TOKEN_CACHE_TTL);
        // kube's AuthenticatedGroupAdder leaves system:anonymous alone.
        let anonymous = user(a.authenticate(&bearer("anonymous-token"), &no_peer()).await);
        assert_eq!(anonymous.groups, Vec::<String>::new());
        let why = reason(a.authenticate(&bearer("nameless-token"), &no_peer()).await);
        assert!(why.contains("empty username"), "{why}");

        // No reviewer: tokens are not accepted.
        let none = authn(AuthnConfig::default());
        assert_eq!(
            reason(none.authenticate(&bearer("good-token"), &no_peer()).await),
            "bearer tokens are not accepted"
        );
    }
}
