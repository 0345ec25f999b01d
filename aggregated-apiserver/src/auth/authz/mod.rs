//! Authorization the way a delegating aggregated API server does it
//! (k8s.io/apiserver `DelegatingAuthorizationOptions`): members of
//! `system:masters` are let through without asking anyone (the probe paths
//! are the authorization filter's business); everything else is decided by the cluster through a
//! `SubjectAccessReview`, whose answers are cached for a while (allowed and
//! denied answers with separate TTLs, like the webhook authorizer). A refusal
//! is answered with the same 403 `Status` kube-apiserver writes; a review that
//! fails (after its retries) with the 500 kube's `WithAuthorization` writes.
//!
//! `sar` is the SubjectAccessReview client, `responses` the 403 and 500 in
//! kube's words; the cache is [`crate::auth::cache`] (its key and a borrowed
//! view of it in `cache_key`), the rate limit and retries [`crate::auth::review`].

mod cache_key;
mod responses;
mod sar;

pub use responses::{forbidden, internal_error};
pub use sar::KubeAccessReviewer;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use super::cache::TtlCache;
use super::review::{ReviewError, ReviewPolicy, ReviewRunner};
use crate::apimachinery::request_info::RequestInfo;
use cache_key::{CacheKey, KeyView};

/// The group whose members are allowed everything without a review
/// (`user.SystemPrivilegedGroup`).
pub const SYSTEM_MASTERS: &str = "system:masters";

/// How many answers the cache keeps at most.
pub const DEFAULT_CACHE_CAPACITY: usize = 10_000;

/// Requests whose requester-controlled attributes add up to this many bytes or
/// more are never cached (the webhook authorizer's `shouldCache`): a client
/// must not be able to fill the cache with huge keys.
const MAX_CACHED_ATTRIBUTE_BYTES: usize = 10_000;

/// Who is asking: the user authentication established.
pub use super::authn::UserInfo as User;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, with the authorizer's reason (RBAC names the binding; kube
    /// writes it into the audit annotation `authorization.k8s.io/reason`).
    /// Shared, so that a cached decision is handed out without copying it.
    Allow { reason: Arc<str> },
    /// Refused: answer 403 with [`forbidden`].
    Deny { reason: String },
    /// No decision could be had (the review failed, after its retries): answer 500 with
    /// [`internal_error`], as kube's `WithAuthorization` does. Never cached.
    Error { message: String },
}

impl Decision {
    pub fn allow(reason: &str) -> Self {
        Self::Allow { reason: Arc::from(reason) }
    }
}

/// Asks whether a user may do something: the cluster, or a fake in tests.
#[async_trait::async_trait]
pub trait AccessReviewer: Send + Sync {
    /// Ok(Allow or Deny), or Err when the review itself failed (retried when retriable).
    async fn review(&self, user: &User, attrs: &Attributes) -> Result<Decision, ReviewError>;
}

/// How the authorizer caches and sends its reviews.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AuthzOptions {
    /// How long an allowal is cached (zero: not cached).
    pub allow_ttl: Duration,
    /// How long a denial is cached (zero: not cached).
    pub deny_ttl: Duration,
    /// Decisions cached at most.
    pub cache_capacity: usize,
    /// Rate limit, deadline and retries of the SubjectAccessReviews.
    pub review: ReviewPolicy,
}

impl Default for AuthzOptions {
    /// kube's defaults: 10 s for both TTLs (`--authorization-webhook-cache-authorized-ttl` /
    /// `-unauthorized-ttl`).
    fn default() -> Self {
        Self {
            allow_ttl: Duration::from_secs(10),
            deny_ttl: Duration::from_secs(10),
            cache_capacity: DEFAULT_CACHE_CAPACITY,
            review: ReviewPolicy::default(),
        }
    }
}

/// What is being done, as a SubjectAccessReview sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attributes {
    pub verb: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub path: String,
    pub resource_request: bool,
}

/// [`Attributes`] borrowed, from a request's description or from owned
/// attributes: what a cache lookup reads, without a copy of each string
/// (a request's own check is one lookup, and a copy is seven allocations).
/// Hashes and compares as the owned attributes do (same fields, same order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttributesRef<'a> {
    pub verb: &'a str,
    pub api_group: &'a str,
    pub api_version: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub path: &'a str,
    pub resource_request: bool,
}

impl<'a> AttributesRef<'a> {
    pub fn from_request(info: &'a RequestInfo) -> Self {
        Self {
            verb: info.verb.as_str(),
            api_group: info.api_group(),
            api_version: info.api_version(),
            resource: info.resource(),
            subresource: info.subresource(),
            namespace: info.namespace(),
            name: info.name(),
            path: info.path(),
            resource_request: info.is_resource_request,
        }
    }

    pub fn to_owned(self) -> Attributes {
        Attributes {
            verb: self.verb.to_string(),
            api_group: self.api_group.to_string(),
            api_version: self.api_version.to_string(),
            resource: self.resource.to_string(),
            subresource: self.subresource.to_string(),
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
            path: self.path.to_string(),
            resource_request: self.resource_request,
        }
    }

    /// The same request against another resource, e.g. the `pods` (group "")
    /// behind a view of Pods: same verb, namespace, name and subresource (a
    /// view's `log` is its Pod's `pods/log`). The
    /// version is kept when the group is unchanged, is `v1` for the core group
    /// and empty (any version; RBAC ignores it) otherwise. The path is cleared:
    /// a review of a resource request does not look at it.
    pub fn for_resource(self, api_group: &str, resource: &str) -> Attributes {
        let api_version = if api_group == self.api_group {
            self.api_version
        } else if api_group.is_empty() {
            "v1"
        } else {
            ""
        };
        AttributesRef { api_group, api_version, resource, path: "", resource_request: true, ..self }.to_owned()
    }

    /// The bytes a client controls, as the webhook authorizer counts them.
    fn controlled_size(&self) -> usize {
        [
            self.namespace,
            self.verb,
            self.api_group,
            self.api_version,
            self.resource,
            self.subresource,
            self.name,
            self.path,
        ]
        .iter()
        .map(|s| s.len())
        .sum()
    }
}

impl Attributes {
    pub fn view(&self) -> AttributesRef<'_> {
        AttributesRef {
            verb: &self.verb,
            api_group: &self.api_group,
            api_version: &self.api_version,
            resource: &self.resource,
            subresource: &self.subresource,
            namespace: &self.namespace,
            name: &self.name,
            path: &self.path,
            resource_request: self.resource_request,
        }
    }
}

type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// Decides whether a request may proceed.
pub struct Authorizer {
    reviewer: Arc<dyn AccessReviewer>,
    allow_ttl: Duration,
    deny_ttl: Duration,
    /// Read by every request at once (a lookup only reads); written on a miss.
    cache: RwLock<TtlCache<CacheKey, Decision>>,
    runner: ReviewRunner,
    clock: Clock,
}

impl Authorizer {
    pub fn new(reviewer: Arc<dyn AccessReviewer>, options: AuthzOptions) -> Self {
        Self::with_clock(reviewer, options, Arc::new(Instant::now))
    }

    fn with_clock(reviewer: Arc<dyn AccessReviewer>, options: AuthzOptions, clock: Clock) -> Self {
        Self {
            reviewer,
            allow_ttl: options.allow_ttl,
            deny_ttl: options.deny_ttl,
            cache: RwLock::new(TtlCache::new(options.cache_capacity)),
            runner: ReviewRunner::new(options.review),
            clock,
        }
    }

    fn cached(&self) -> std::sync::RwLockReadGuard<'_, TtlCache<CacheKey, Decision>> {
        self.cache.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn cache_mut(&self) -> std::sync::RwLockWriteGuard<'_, TtlCache<CacheKey, Decision>> {
        self.cache.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The decision when it needs no review: a `system:masters` member, or
    /// one the cache holds.
    pub fn decided(&self, user: &User, attrs: AttributesRef<'_>) -> Option<Decision> {
        if user.groups.iter().any(|g| g == SYSTEM_MASTERS) {
            // kube's privileged-group authorizer gives no reason.
            static NO_REASON: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| Arc::from(""));
            return Some(Decision::Allow { reason: NO_REASON.clone() });
        }
        if attrs.controlled_size() >= MAX_CACHED_ATTRIBUTE_BYTES {
            return None;
        }
        let key: &dyn KeyView = &(user, attrs);
        self.cached().get_borrowed(key, (self.clock)())
    }

    /// `system:masters` members are allowed without a review (the probe paths
    /// are the authorization filter's business). Otherwise the reviewer decides
    /// (rate limited, retried, under a deadline); its allowed and denied answers
    /// are cached (per user and attributes) for `allow_ttl` / `deny_ttl`. A
    /// review that fails is [`Decision::Error`], not cached. The attributes
    /// are copied only for a review and into the cache, when the cache does
    /// not have the answer.
    pub async fn authorize(&self, user: &User, attrs: AttributesRef<'_>) -> Decision {
        if let Some(decision) = self.decided(user, attrs) {
            return decision;
        }
        let cacheable = attrs.controlled_size() < MAX_CACHED_ATTRIBUTE_BYTES;
        let attrs = attrs.to_owned();
        // Boxed: a review's future is large, and every request's future
        // through the filters would carry it for the rare miss.
        let review: futures::future::BoxFuture<'_, _> =
            Box::pin(self.runner.run(|| self.reviewer.review(user, &attrs)));
        match review.await {
            Ok(Decision::Error { message }) => Decision::Error { message },
            Ok(decision) => {
                if cacheable {
                    let ttl = if matches!(decision, Decision::Allow { .. }) { self.allow_ttl } else { self.deny_ttl };
                    let now = (self.clock)();
                    let key: CacheKey = (user.clone(), attrs);
                    self.cache_mut().insert(key, decision.clone(), ttl, now);
                }
                decision
            }
            Err(err) => {
                tracing::warn!(user = %user.name, verb = %attrs.verb, error = %err, "access review failed");
                Decision::Error { message: err.message }
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::request_info::classify;
    use http::Method;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    pub(super) const GROUP: &str = "example.com";

    pub(super) fn user(name: &str) -> User {
        User { name: name.to_string(), ..Default::default() }
    }

    pub(super) fn res(verb: &str, resource: &str, subresource: &str, namespace: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.to_string(),
            api_group: GROUP.to_string(),
            api_version: "v1alpha".to_string(),
            resource: resource.to_string(),
            subresource: subresource.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            path: String::new(),
            resource_request: true,
        }
    }

    pub(super) fn non_res(verb: &str, path: &str) -> Attributes {
        Attributes {
            verb: verb.to_string(),
            api_group: String::new(),
            api_version: String::new(),
            resource: String::new(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
            path: path.to_string(),
            resource_request: false,
        }
    }

    // ---- Authorizer ----

    type Answer = Box<dyn Fn(&User, &Attributes) -> Result<Decision, ReviewError> + Send + Sync>;

    struct FakeReviewer {
        calls: AtomicUsize,
        answer: Answer,
    }

    impl FakeReviewer {
        fn new(
            answer: impl Fn(&User, &Attributes) -> Result<Decision, ReviewError> + Send + Sync + 'static,
        ) -> Arc<Self> {
            Arc::new(Self { calls: AtomicUsize::new(0), answer: Box::new(answer) })
        }
        fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }
    }

    #[async_trait::async_trait]
    impl AccessReviewer for FakeReviewer {
        async fn review(&self, user: &User, attrs: &Attributes) -> Result<Decision, ReviewError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            (self.answer)(user, attrs)
        }
    }

    /// A clock the test moves by hand.
    #[derive(Clone)]
    struct FakeClock {
        base: Instant,
        offset_ms: Arc<AtomicU64>,
    }

    impl FakeClock {
        fn new() -> Self {
            Self { base: Instant::now(), offset_ms: Arc::new(AtomicU64::new(0)) }
        }
        fn advance(&self, d: Duration) {
            self.offset_ms.fetch_add(d.as_millis() as u64, Ordering::SeqCst);
        }
        fn clock(&self) -> Clock {
            let me = self.clone();
            Arc::new(move || me.base + Duration::from_millis(me.offset_ms.load(Ordering::SeqCst)))
        }
    }

    /// Options for tests: TTLs in seconds, retries 10 ms apart so that they take no time.
    fn options(allow: u64, deny: u64) -> AuthzOptions {
        let mut options = AuthzOptions {
            allow_ttl: Duration::from_secs(allow),
            deny_ttl: Duration::from_secs(deny),
            ..AuthzOptions::default()
        };
        options.review.backoff.initial = Duration::from_millis(10);
        options
    }

    fn authorizer(reviewer: Arc<FakeReviewer>, allow: u64, deny: u64, clock: &FakeClock) -> Authorizer {
        Authorizer::with_clock(reviewer, options(allow, deny), clock.clock())
    }

    pub(super) fn deny(reason: &str) -> Decision {
        Decision::Deny { reason: reason.to_string() }
    }

    #[tokio::test]
    async fn allow_is_cached_for_allow_ttl() {
        let reviewer = FakeReviewer::new(|_, _| Ok(Decision::allow("")));
        let clock = FakeClock::new();
        let authz = authorizer(reviewer.clone(), 10, 3, &clock);
        let (u, a) = (user("u"), res("get", "widgets", "", "ns", "x"));
        assert_eq!(authz.authorize(&u, a.view()).await, Decision::allow(""));
        assert_eq!(authz.authorize(&u, a.view()).await, Decision::allow(""));
        assert_eq!(reviewer.calls(), 1);
        clock.advance(Duration::from_millis(9_999));
        assert_eq!(authz.authorize(&u, a.view()).await, Decision::allow(""));
        assert_eq!(reviewer.calls(), 1, "still cached just before allow_ttl");
        clock.advance(Duration::from_millis(1));
        assert_eq!(authz.authorize(&u, a.view()).await, Decision::allow(""));
        assert_eq!(reviewer.calls(), 2, "reviewed again once allow_ttl has passed");
    }

    #[tokio::test]
    async fn deny_is_cached_with_its_own_ttl() {
        let reviewer = FakeReviewer::new(|_, a| if a.verb == "get" { Ok(Decision::allow("")) } else { Ok(deny("no")) });
        let clock = FakeClock::new();
        let authz = authorizer(reviewer.clone(), 10, 3, &clock);
        let u = user("u");
        let (get, del) = (res("get", "widgets", "", "ns", "x"), res("delete", "widgets", "", "ns", "x"));
        assert_eq!(authz.authorize(&u, del.view()).await, deny("no"));
        assert_eq!(authz.authorize(&u, get.view()).await, Decision::allow(""));
        assert_eq!(authz.authorize(&u, del.view()).await, deny("no"));
        assert_eq!(reviewer.calls(), 2);
        clock.advance(Duration::from_secs(3));
        // the denial expired after deny_ttl, the allow (10 s) did not
        assert_eq!(authz.authorize(&u, del.view()).await, deny("no"));
        assert_eq!(authz.authorize(&u, get.view()).await, Decision::allow(""));
        assert_eq!(reviewer.calls(), 3);
        clock.advance(Duration::from_secs(7));
        assert_eq!(authz.authorize(&u, get.view()).await, Decision::allow(""));
        assert_eq!(reviewer.calls(), 4);
    }

    #[tokio::test]
    async fn entries_are_per_user_and_attributes() {
        let reviewer = FakeReviewer::new(|u, _| if u.name == "alice" { Ok(Decision::allow("")) } else { Ok(deny("")) });
        let clock = FakeClock::new();
        let authz = authorizer(reviewer.clone(), 10, 10, &clock);
        let a = res("get", "widgets", "", "ns", "x");
        assert_eq!(authz.authorize(&user("alice"), a.view()).await, Decision::allow(""));
        assert_eq!(authz.authorize(&user("bob"), a.view()).await, deny(""));
        assert_eq!(reviewer.calls(), 2);
        // same name, other groups / uid / extra: other users
        let mut alice2 = user("alice");
        alice2.groups = vec!["farmers".into()];
        authz.authorize(&alice2, a.view()).await;
        let mut alice3 = user("alice");
        alice3.uid = "1".into();
        authz.authorize(&alice3, a.view()).await;
        let mut alice4 = user("alice");
        alice4.extra.insert("scopes".into(), vec!["x".into()]);
        authz.authorize(&alice4, a.view()).await;
        assert_eq!(reviewer.calls(), 5);
        // every attribute is part of the key
        let variants = [
            res("list", "widgets", "", "ns", "x"),
            res("get", "podviews", "", "ns", "x"),
            res("get", "widgets", "status", "ns", "x"),
            res("get", "widgets", "", "other", "x"),
            res("get", "widgets", "", "ns", "y"),
            Attributes { api_group: "other.example.com".into(), ..a.clone() },
            Attributes { api_version: "v1".into(), ..a.clone() },
            Attributes { path: "/p".into(), ..a.clone() },
        ];
        for v in &variants {
            authz.authorize(&user("alice"), v.view()).await;
        }
        assert_eq!(reviewer.calls(), 5 + variants.len());
        // and the first answers are still there
        assert_eq!(authz.authorize(&user("alice"), a.view()).await, Decision::allow(""));
        assert_eq!(authz.authorize(&user("bob"), a.view()).await, deny(""));
        assert_eq!(reviewer.calls(), 5 + variants.len());
    }

    #[tokio::test]
    async fn review_errors_are_errors_and_are_not_cached() {
        let reviewer = FakeReviewer::new(|_, _| Err(ReviewError::fatal("subjectaccessreviews is forbidden")));
        let clock = FakeClock::new();
        let authz = authorizer(reviewer.clone(), 10, 10, &clock);
        let (u, a) = (user("u"), res("get", "widgets", "", "ns", "x"));
        let error = Decision::Error { message: "subjectaccessreviews is forbidden".into() };
        assert_eq!(authz.authorize(&u, a.view()).await, error);
        assert_eq!(authz.authorize(&u, a.view()).await, error);
        assert_eq!(reviewer.calls(), 2, "one attempt each: not retriable, not cached");
        assert_eq!(authz.cached().len(), 0);
    }

    #[tokio::test]
    async fn retriable_review_errors_are_retried() {
        let attempts = Arc::new(AtomicUsize::new(0));
        let seen = attempts.clone();
        let reviewer = FakeReviewer::new(move |_, _| {
            if seen.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(ReviewError::retriable("connection reset by peer"))
            } else {
                Ok(Decision::allow(""))
            }
        });
        let clock = FakeClock::new();
        let authz = authorizer(reviewer.clone(), 10, 10, &clock);
        let (u, a) = (user("u"), res("get", "widgets", "", "ns", "x"));
        assert_eq!(authz.authorize(&u, a.view()).await, Decision::allow(""));
        assert_eq!(reviewer.calls(), 3);
        // Always failing: 5 attempts, then the last error.
        let failing = FakeReviewer::new(|_, _| Err(ReviewError::retriable("etcdserver: request timed out")));
        let authz = authorizer(failing.clone(), 10, 10, &clock);
        assert_eq!(
            authz.authorize(&u, a.view()).await,
            Decision::Error { message: "etcdserver: request timed out".into() }
        );
        assert_eq!(failing.calls(), 5);
    }

    #[tokio::test]
    async fn system_masters_skip_the_review() {
        let reviewer = FakeReviewer::new(|_, _| Ok(deny("no")));
        let clock = FakeClock::new();
        let authz = authorizer(reviewer.clone(), 10, 10, &clock);
        let mut admin = user("kubernetes-admin");
        admin.groups = vec!["system:authenticated".into(), SYSTEM_MASTERS.into()];
        assert_eq!(authz.authorize(&admin, res("delete", "widgets", "", "ns", "x").view()).await, Decision::allow(""));
        assert_eq!(authz.authorize(&admin, non_res("get", "/metrics").view()).await, Decision::allow(""));
        assert_eq!(reviewer.calls(), 0);
        // a group of a similar name is nothing special
        let mut other = user("u");
        other.groups = vec!["system:masters-not".into()];
        assert_eq!(authz.authorize(&other, non_res("get", "/metrics").view()).await, deny("no"));
        assert_eq!(reviewer.calls(), 1);
    }

    #[tokio::test]
    async fn oversized_attributes_are_not_cached() {
        let reviewer = FakeReviewer::new(|_, _| Ok(Decision::allow("")));
        let clock = FakeClock::new();
        let authz = authorizer(reviewer.clone(), 10, 10, &clock);
        let u = user("u");
        let big = res("get", "widgets", "", "ns", &"x".repeat(MAX_CACHED_ATTRIBUTE_BYTES));
        assert_eq!(authz.authorize(&u, big.view()).await, Decision::allow(""));
        assert_eq!(authz.authorize(&u, big.view()).await, Decision::allow(""));
        assert_eq!(reviewer.calls(), 2);
        assert_eq!(authz.cached().len(), 0);
    }

    #[tokio::test]
    async fn cache_is_bounded_evicting_expired_then_oldest() {
        let reviewer =
            FakeReviewer::new(|_, a| if a.name.starts_with('d') { Ok(deny("")) } else { Ok(Decision::allow("")) });
        let clock = FakeClock::new();
        let authz = Authorizer::with_clock(
            reviewer.clone(),
            AuthzOptions { cache_capacity: 3, ..options(60, 5) },
            clock.clock(),
        );
        let u = user("u");
        let get = |n: &str| res("get", "widgets", "", "ns", n);
        authz.authorize(&u, get("a1").view()).await;
        authz.authorize(&u, get("d1").view()).await;
        authz.authorize(&u, get("a2").view()).await;
        assert_eq!(authz.cached().len(), 3);
        // full, nothing expired: the oldest (a1) goes
        authz.authorize(&u, get("a3").view()).await;
        assert_eq!(authz.cached().len(), 3);
        assert_eq!(reviewer.calls(), 4);
        authz.authorize(&u, get("a2").view()).await;
        authz.authorize(&u, get("a3").view()).await;
        assert_eq!(reviewer.calls(), 4, "a2 and a3 are still cached");
        // full, d1 has expired: it goes first, before the older-than-a3 a2
        clock.advance(Duration::from_secs(5));
        authz.authorize(&u, get("a4").view()).await;
        assert_eq!(reviewer.calls(), 5);
        authz.authorize(&u, get("a2").view()).await;
        authz.authorize(&u, get("a3").view()).await;
        authz.authorize(&u, get("a4").view()).await;
        assert_eq!(reviewer.calls(), 5, "a2, a3 and a4 are cached");
        authz.authorize(&u, get("a1").view()).await;
        assert_eq!(reviewer.calls(), 6, "a1 was evicted");
    }

    #[tokio::test]
    async fn zero_ttl_does_not_cache() {
        let reviewer = FakeReviewer::new(|_, _| Ok(Decision::allow("")));
        let clock = FakeClock::new();
        let authz = authorizer(reviewer.clone(), 0, 0, &clock);
        let (u, a) = (user("u"), res("get", "widgets", "", "ns", "x"));
        authz.authorize(&u, a.view()).await;
        authz.authorize(&u, a.view()).await;
        assert_eq!(reviewer.calls(), 2);
    }

    #[tokio::test]
    async fn real_clock_constructor_caches() {
        let reviewer = FakeReviewer::new(|_, _| Ok(Decision::allow("")));
        let authz = Authorizer::new(reviewer.clone(), AuthzOptions::default());
        let (u, a) = (user("u"), res("get", "widgets", "", "ns", "x"));
        assert_eq!(authz.authorize(&u, a.view()).await, Decision::allow(""));
        assert_eq!(authz.authorize(&u, a.view()).await, Decision::allow(""));
        assert_eq!(reviewer.calls(), 1);
    }

    #[test]
    fn authorize_future_is_send() {
        fn assert_send<T: Send>(_: &T) {}
        let authz = Authorizer::new(FakeReviewer::new(|_, _| Ok(Decision::allow(""))), options(0, 0));
        let (u, a) = (user("u"), res("get", "widgets", "", "ns", "x"));
        assert_send(&authz.authorize(&u, a.view()));
    }

    // ---- Attributes ----

    fn attrs(method: Method, path: &str, query: Option<&str>) -> Attributes {
        AttributesRef::from_request(&classify(&method, path, query)).to_owned()
    }

    #[test]
    fn attributes_from_requests() {
        let base = "/apis/example.com/v1alpha";
        let list = attrs(Method::GET, &format!("{base}/namespaces/ns/widgets"), None);
        assert_eq!(
            list,
            Attributes { path: format!("{base}/namespaces/ns/widgets"), ..res("list", "widgets", "", "ns", "") }
        );

        let get = attrs(Method::GET, &format!("{base}/namespaces/ns/widgets/x"), None);
        assert_eq!(
            get,
            Attributes { path: format!("{base}/namespaces/ns/widgets/x"), ..res("get", "widgets", "", "ns", "x") }
        );

        let watch = attrs(Method::GET, &format!("{base}/widgets"), Some("watch=true"));
        assert_eq!(watch, Attributes { path: format!("{base}/widgets"), ..res("watch", "widgets", "", "", "") });
        let watch_path = attrs(Method::GET, &format!("{base}/watch/namespaces/ns/widgets"), None);
        assert_eq!((watch_path.verb.as_str(), watch_path.namespace.as_str()), ("watch", "ns"));

        let create = attrs(Method::POST, &format!("{base}/namespaces/ns/podviews"), None);
        assert_eq!(
            create,
            Attributes { path: format!("{base}/namespaces/ns/podviews"), ..res("create", "podviews", "", "ns", "") }
        );

        let status = attrs(Method::PUT, &format!("{base}/namespaces/ns/widgets/x/status"), None);
        assert_eq!(
            status,
            Attributes {
                path: format!("{base}/namespaces/ns/widgets/x/status"),
                ..res("update", "widgets", "status", "ns", "x")
            }
        );

        let disco = attrs(Method::GET, "/apis", None);
        assert_eq!(disco, non_res("get", "/apis"));
        let health = attrs(Method::GET, "/readyz", None);
        assert_eq!(health, non_res("get", "/readyz"));
        assert!(!attrs(Method::GET, base, None).resource_request);
    }

    #[test]
    fn for_resource_pods() {
        let fp = Attributes {
            path: "/apis/example.com/v1alpha/namespaces/ns/podviews/p/log".into(),
            ..res("get", "podviews", "log", "ns", "p")
        };
        assert_eq!(
            fp.view().for_resource("", "pods"),
            Attributes {
                verb: "get".into(),
                api_group: String::new(),
                api_version: "v1".into(),
                resource: "pods".into(),
                subresource: "log".into(),
                namespace: "ns".into(),
                name: "p".into(),
                path: String::new(),
                resource_request: true,
            }
        );
        let list = res("list", "podviews", "", "ns", "").view().for_resource("", "pods");
        assert_eq!((list.verb.as_str(), list.name.as_str(), list.namespace.as_str()), ("list", "", "ns"));
        // same group keeps the version; another group leaves it open
        assert_eq!(fp.view().for_resource(GROUP, "widgets").api_version, "v1alpha");
        assert_eq!(fp.view().for_resource("apps", "deployments").api_version, "");
    }
}
