//! Bearer tokens: `Authorization: Bearer …` checked with a `TokenReview` against kube-apiserver,
//! answers cached under a salted SHA-256 of the token, one review in flight per token.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt as _, Shared};
use http::header::AUTHORIZATION;
use http::HeaderMap;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use sha2::{Digest as _, Sha256};

use super::{lock, UserInfo};

/// kube's default delegated-authentication token cache TTL (`--authentication-token-webhook-cache-ttl`).
pub const DEFAULT_TOKEN_CACHE_TTL: Duration = Duration::from_secs(10);
/// Default bound on cached token reviews.
pub const DEFAULT_TOKEN_CACHE_CAPACITY: usize = 4096;
/// A token review taking longer than this fails (and is not cached).
pub const TOKEN_REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// Decides whether a bearer token is valid.
#[async_trait::async_trait]
pub trait TokenReviewer: Send + Sync {
    /// `Ok(Some(user))`: valid; `Ok(None)`: rejected (cached like a success); `Err`: the review
    /// itself failed (not cached).
    async fn review(&self, token: &str) -> Result<Option<UserInfo>, String>;
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
    async fn review(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_string()), audiences: None },
            ..Default::default()
        };
        let answer =
            api.create(&PostParams::default(), &review).await.map_err(|err| format!("TokenReview failed: {err}"))?;
        let status = answer.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            // Like kube's webhook authenticator: a rejection that carries an error is an error.
            return match status.error.filter(|e| !e.is_empty()) {
                Some(error) => Err(format!("TokenReview: {error}")),
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
type ReviewResult = Result<Option<UserInfo>, String>;
type SharedReview = Shared<BoxFuture<'static, ReviewResult>>;

struct CacheEntry {
    user: Option<UserInfo>,
    /// `None`: never (a TTL too large to represent).
    expires: Option<Instant>,
    seq: u64,
}

/// Token review answers by token hash, bounded; the oldest insertion is evicted first.
pub(super) struct TokenCache {
    capacity: usize,
    entries: HashMap<TokenKey, CacheEntry>,
    /// Insertion order; entries whose `seq` no longer matches the map are stale and skipped.
    order: VecDeque<(TokenKey, u64)>,
    next_seq: u64,
}

impl TokenCache {
    pub(super) fn new(capacity: usize) -> Self {
        Self { capacity, entries: HashMap::new(), order: VecDeque::new(), next_seq: 0 }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn get(&mut self, key: &TokenKey, now: Instant) -> Option<Option<UserInfo>> {
        let fresh = self.entries.get(key).map(|entry| entry.expires.is_none_or(|expires| now < expires))?;
        if fresh {
            self.entries.get(key).map(|entry| entry.user.clone())
        } else {
            self.entries.remove(key);
            None
        }
    }

    pub(super) fn insert(&mut self, key: TokenKey, user: Option<UserInfo>, expires: Option<Instant>) {
        if self.capacity == 0 {
            return;
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.entries.insert(key, CacheEntry { user, expires, seq });
        self.order.push_back((key, seq));
        while self.entries.len() > self.capacity {
            let Some((old, old_seq)) = self.order.pop_front() else { break };
            if self.entries.get(&old).is_some_and(|entry| entry.seq == old_seq) {
                self.entries.remove(&old);
            }
        }
        // Re-inserted keys leave stale order records behind; compact them away now and then.
        if self.order.len() > self.capacity.saturating_mul(2).max(16) {
            let entries = &self.entries;
            self.order.retain(|(key, seq)| entries.get(key).is_some_and(|entry| entry.seq == *seq));
        }
    }
}

pub(super) struct TokenState {
    pub(super) cache: TokenCache,
    /// Reviews under way, shared by concurrent requests with the same token.
    pub(super) inflight: HashMap<TokenKey, SharedReview>,
}

pub(super) struct TokenAuth {
    pub(super) reviewer: Arc<dyn TokenReviewer>,
    pub(super) ttl: Duration,
    pub(super) salt: [u8; 32],
    pub(super) state: Arc<Mutex<TokenState>>,
}

impl TokenAuth {
    fn key(&self, token: &str) -> TokenKey {
        let mut hasher = Sha256::new();
        hasher.update(self.salt);
        hasher.update(token.as_bytes());
        hasher.finalize().into()
    }

    pub(super) async fn review(&self, token: &str) -> ReviewResult {
        let key = self.key(token);
        let review = {
            let mut state = lock(&self.state);
            if let Some(cached) = state.cache.get(&key, Instant::now()) {
                return Ok(cached);
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
        review.await
    }

    /// The review runs in its own task (when there is a Tokio runtime), so it completes and fills
    /// the cache even if the requests waiting for it go away.
    fn start_review(&self, key: TokenKey, token: &str) -> SharedReview {
        let reviewer = self.reviewer.clone();
        let state = self.state.clone();
        let ttl = self.ttl;
        let token = token.to_string();
        let work = async move {
            let result = match tokio::time::timeout(TOKEN_REVIEW_TIMEOUT, reviewer.review(&token)).await {
                Ok(result) => result,
                Err(_) => Err(format!("token review timed out after {}s", TOKEN_REVIEW_TIMEOUT.as_secs())),
            };
            let mut state = lock(&state);
            state.inflight.remove(&key);
            if let Ok(user) = &result {
                if !ttl.is_zero() {
                    state.cache.insert(key, user.clone(), Instant::now().checked_add(ttl));
                }
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

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::*;
    use super::*;

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
        let a = token_authn(&reviewer, DEFAULT_TOKEN_CACHE_TTL).with_token_cache_capacity(8);
        for i in 0..100 {
            user(a.authenticate(&bearer(&format!("user-{i}")), &no_peer()).await);
        }
        let tokens = a.tokens.as_ref().unwrap();
        {
            let state = lock(&tokens.state);
            assert_eq!(state.cache.len(), 8);
            assert!(state.cache.order.len() <= 32);
            assert!(state.inflight.is_empty());
        }
        assert_eq!(reviewer.calls(), 100);
        // The newest are cached, the oldest were evicted.
        user(a.authenticate(&bearer("user-99"), &no_peer()).await);
        assert_eq!(reviewer.calls(), 100);
        user(a.authenticate(&bearer("user-0"), &no_peer()).await);
        assert_eq!(reviewer.calls(), 101);
    }

    #[test]
    fn token_cache_expiry_eviction_and_reinsertion() {
        let mut cache = TokenCache::new(3);
        let now = Instant::now();
        let key = |n: u8| [n; 32];
        let named = |name: &str| Some(UserInfo { name: name.into(), ..Default::default() });
        cache.insert(key(1), named("one"), Some(now + Duration::from_secs(10)));
        cache.insert(key(2), None, Some(now + Duration::from_secs(10)));
        cache.insert(key(3), named("three"), None);
        assert_eq!(cache.get(&key(1), now), Some(named("one")));
        assert_eq!(cache.get(&key(2), now), Some(None));
        // Expired entries are dropped on lookup; never-expiring ones stay.
        assert_eq!(cache.get(&key(1), now + Duration::from_secs(10)), None);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&key(3), now + Duration::from_secs(1 << 40)), Some(named("three")));
        // Re-inserting refreshes the position: 2 is now the newest, so 3 is evicted first.
        cache.insert(key(2), named("two"), None);
        cache.insert(key(4), None, None);
        cache.insert(key(5), None, None);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&key(3), now), None);
        assert_eq!(cache.get(&key(2), now), Some(named("two")));
        // Many re-insertions of one key keep the order queue compact.
        for _ in 0..1000 {
            cache.insert(key(9), None, None);
        }
        assert!(cache.order.len() <= 32, "{}", cache.order.len());
        assert_eq!(cache.len(), 3);
        let mut zero = TokenCache::new(0);
        zero.insert(key(1), None, None);
        assert_eq!(zero.len(), 0);
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
            assert_eq!(reason(a.authenticate(&h, &no_peer()).await), "no credentials provided", "{value:?}");
        }
        // Only the first Authorization header counts.
        let h = headers(&[("Authorization", "Basic x"), ("Authorization", "Bearer good-token")]);
        reason(a.authenticate(&h, &no_peer()).await);
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
