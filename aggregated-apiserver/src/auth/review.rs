//! How reviews (TokenReview, SubjectAccessReview) are sent to kube-apiserver: rate limited with a
//! bounded queue, under one deadline, retried with backoff on transient failures.
//!
//! * **Rate limit.** A token bucket of `qps` per second holding up to `burst` (kube's delegating
//!   clients use QPS 200, burst 400). A review finding the bucket empty waits its turn, but at
//!   most `queue` reviews wait at once: beyond that it is refused at once, so a flood of distinct
//!   tokens costs the cluster at most `burst + qps × t` reviews and this server a bounded number
//!   of waiting tasks. A turn that would come after the review's deadline is refused at once too.
//! * **Deadline.** The whole review (waits, attempts, pauses between them) gets `timeout`, 10 s as
//!   kube's `TokenRequestTimeout` / `ClientTimeout`. (kube bounds each SubjectAccessReview
//!   attempt by 10 s rather than the whole series; one bound for all keeps a failing
//!   authorization from holding a request for a minute.)
//! * **Retry.** As k8s.io/apiserver's `webhook.WithExponentialBackoff` with
//!   `DefaultAuthWebhookRetryBackoff` (500 ms, factor 1.5, jitter 0.2, 5 attempts): an attempt
//!   that fails in a retriable way ([`ReviewError::retriable`]) is tried again after a pause;
//!   the last error is returned when attempts run out. Every attempt takes its own turn from the
//!   rate limiter, as client-go's throttle does per request.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Rate limits for the reviews one client sends (`--review-qps`, `--review-burst`, `--review-queue`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReviewLimits {
    /// Reviews per second; not finite or not positive: no limit.
    pub qps: f64,
    /// Reviews that may be sent at once above the rate (at least 1 is used).
    pub burst: u32,
    /// Reviews that may wait for their turn; more are refused at once.
    pub queue: usize,
}

impl Default for ReviewLimits {
    fn default() -> Self {
        Self { qps: 200.0, burst: 400, queue: 1000 }
    }
}

/// Pauses between attempts: kube's `wait.Backoff`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryBackoff {
    /// The first pause.
    pub initial: Duration,
    /// Each pause is the previous one times this.
    pub factor: f64,
    /// Each pause is lengthened by up to this fraction of itself, at random.
    pub jitter: f64,
    /// Attempts in all (at least 1 is made).
    pub steps: u32,
}

impl Default for RetryBackoff {
    /// k8s.io/apiserver's `DefaultAuthWebhookRetryBackoff`.
    fn default() -> Self {
        Self { initial: Duration::from_millis(500), factor: 1.5, jitter: 0.2, steps: 5 }
    }
}

/// Everything about how one client's reviews are sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReviewPolicy {
    pub limits: ReviewLimits,
    pub backoff: RetryBackoff,
    /// The whole review's deadline, waits and retries included.
    pub timeout: Duration,
}

impl Default for ReviewPolicy {
    fn default() -> Self {
        Self { limits: ReviewLimits::default(), backoff: RetryBackoff::default(), timeout: Duration::from_secs(10) }
    }
}

/// A review that failed (as opposed to one that answered no).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewError {
    /// What went wrong, in the words an error answer may carry (never a credential).
    pub message: String,
    /// Whether another attempt may succeed.
    pub retriable: bool,
}

impl ReviewError {
    /// A failure worth another attempt (connection lost, server busy or failing).
    pub fn retriable(message: impl Into<String>) -> Self {
        Self { message: message.into(), retriable: true }
    }

    /// A failure another attempt would repeat (refused, malformed).
    pub fn fatal(message: impl Into<String>) -> Self {
        Self { message: message.into(), retriable: false }
    }

    /// Classifies a kube-rs error as k8s.io/apiserver's `DefaultShouldRetry` does, as far as
    /// kube-rs shows it: connection errors, 429 and 5xx are retried. (kube retries a 503 only
    /// when it carries Retry-After; kube-rs drops that header, and kube-apiserver's own 503s are
    /// transient.) The message is the Status message for API errors, as Go's `StatusError` prints.
    pub fn from_kube(err: &kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => {
                let message = if status.message.is_empty() { err.to_string() } else { status.message.clone() };
                if status.code == 429 || status.code >= 500 {
                    Self::retriable(message)
                } else {
                    Self::fatal(message)
                }
            }
            kube::Error::HyperError(_) | kube::Error::Service(_) => Self::retriable(err.to_string()),
            other => Self::fatal(other.to_string()),
        }
    }
}

impl std::fmt::Display for ReviewError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Token bucket state; `tokens` goes below zero by the turns handed out ahead of time.
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// A token-bucket rate limiter whose waiters are bounded.
pub struct RateLimiter {
    limits: ReviewLimits,
    bucket: Mutex<Bucket>,
}

impl RateLimiter {
    pub fn new(limits: ReviewLimits) -> Self {
        let burst = f64::from(limits.burst.max(1));
        Self { limits, bucket: Mutex::new(Bucket { tokens: burst, last: Instant::now() }) }
    }

    fn unlimited(&self) -> bool {
        !(self.limits.qps.is_finite() && self.limits.qps > 0.0)
    }

    /// Takes a turn: `Ok(at)` when it may go (now or later), `Err` when the queue is full or the
    /// turn would come after `deadline` (then nothing is taken).
    fn reserve(&self, now: Instant, deadline: Instant) -> Result<Instant, String> {
        if self.unlimited() {
            return Ok(now);
        }
        let qps = self.limits.qps;
        let burst = f64::from(self.limits.burst.max(1));
        let mut bucket = self.bucket.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let elapsed = now.saturating_duration_since(bucket.last).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * qps).min(burst);
        bucket.last = now;
        let left = bucket.tokens - 1.0;
        if left >= 0.0 {
            bucket.tokens = left;
            return Ok(now);
        }
        // -left turns are now promised ahead: that many wait, at most `queue`.
        if -left > self.limits.queue as f64 {
            return Err(format!("{} reviews are already waiting for the rate limit", self.limits.queue));
        }
        // Checked: a tiny QPS could put the turn beyond what a Duration or an Instant holds.
        let at = Duration::try_from_secs_f64(-left / qps).ok().and_then(|wait| now.checked_add(wait));
        let Some(at) = at.filter(|at| *at <= deadline) else {
            return Err("the rate limit allows no review before the deadline".to_string());
        };
        bucket.tokens = left;
        Ok(at)
    }

    /// Waits for a turn (see `reserve`).
    pub async fn acquire(&self, deadline: Instant) -> Result<(), String> {
        let at = self.reserve(Instant::now(), deadline)?;
        tokio::time::sleep_until(at).await;
        Ok(())
    }
}

/// Sends one client's reviews by its [`ReviewPolicy`].
pub struct ReviewRunner {
    limiter: RateLimiter,
    backoff: RetryBackoff,
    timeout: Duration,
}

impl ReviewRunner {
    pub fn new(policy: ReviewPolicy) -> Self {
        Self { limiter: RateLimiter::new(policy.limits), backoff: policy.backoff, timeout: policy.timeout }
    }

    /// Runs `attempt` until it succeeds, fails for good, attempts run out or the deadline passes.
    /// Refused by the rate limiter: fails at once, with no retry (the limit is there to shed load).
    pub async fn run<T, F, Fut>(&self, mut attempt: F) -> Result<T, ReviewError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ReviewError>>,
    {
        let far = Duration::from_secs(365 * 24 * 3600);
        let deadline = Instant::now() + self.timeout.min(far);
        let timed_out = |last: Option<&ReviewError>| {
            let mut message = format!("review timed out after {:?}", self.timeout);
            if let Some(last) = last {
                message.push_str(&format!(" (last error: {last})"));
            }
            ReviewError::fatal(message)
        };
        let mut pause = self.backoff.initial;
        let mut last: Option<ReviewError> = None;
        for step in 0..self.backoff.steps.max(1) {
            if step > 0 {
                // Checked arithmetic: odd settings end the retries rather than panic.
                let scale = |d: Duration, by: f64| Duration::try_from_secs_f64(d.as_secs_f64() * by).unwrap_or(far);
                let jittered = scale(pause, 1.0 + self.backoff.jitter.max(0.0) * rand::random::<f64>());
                pause = scale(pause, self.backoff.factor.max(1.0));
                if Instant::now().checked_add(jittered).is_none_or(|end| end >= deadline) {
                    return Err(timed_out(last.as_ref()));
                }
                tokio::time::sleep(jittered).await;
            }
            if let Err(refused) = self.limiter.acquire(deadline).await {
                return Err(ReviewError::fatal(format!("review not sent: {refused}")));
            }
            match tokio::time::timeout_at(deadline, attempt()).await {
                Err(_) => return Err(timed_out(last.as_ref())),
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(err)) if err.retriable => {
                    tracing::debug!(attempt = step + 1, error = %err, "review failed; retrying");
                    last = Some(err);
                }
                Ok(Err(err)) => return Err(err),
            }
        }
        Err(last.unwrap_or_else(|| ReviewError::fatal("review made no attempt")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    const MS: Duration = Duration::from_millis(1);

    fn limiter(qps: f64, burst: u32, queue: usize) -> RateLimiter {
        RateLimiter::new(ReviewLimits { qps, burst, queue })
    }

    #[test]
    fn burst_then_rate_then_refusal_when_the_queue_is_full() {
        let l = limiter(10.0, 3, 2);
        let t0 = Instant::now();
        let far = t0 + Duration::from_secs(60);
        // The burst goes at once.
        for _ in 0..3 {
            assert_eq!(l.reserve(t0, far), Ok(t0));
        }
        // Then one turn per 100 ms, handed out ahead: two may wait.
        assert_eq!(l.reserve(t0, far), Ok(t0 + 100 * MS));
        assert_eq!(l.reserve(t0, far), Ok(t0 + 200 * MS));
        let refused = l.reserve(t0, far).unwrap_err();
        assert!(refused.contains("2 reviews are already waiting"), "{refused}");
        // 100 ms later one waiter has gone: one more may queue, behind the other.
        assert_eq!(l.reserve(t0 + 100 * MS, far), Ok(t0 + 300 * MS));
        assert!(l.reserve(t0 + 100 * MS, far).is_err());
        // After a long pause the bucket is full again, but never above the burst.
        let later = t0 + Duration::from_secs(10);
        for _ in 0..3 {
            assert_eq!(l.reserve(later, far), Ok(later));
        }
        assert_eq!(l.reserve(later, far), Ok(later + 100 * MS));
    }

    #[test]
    fn a_turn_after_the_deadline_is_refused_without_taking_it() {
        let l = limiter(10.0, 1, 100);
        let t0 = Instant::now();
        assert_eq!(l.reserve(t0, t0), Ok(t0));
        let refused = l.reserve(t0, t0 + 50 * MS).unwrap_err();
        assert!(refused.contains("deadline"), "{refused}");
        // Nothing was taken: the next turn is still the first one after the burst.
        assert_eq!(l.reserve(t0, t0 + Duration::from_secs(1)), Ok(t0 + 100 * MS));
    }

    #[test]
    fn zero_queue_allows_only_the_burst_and_no_qps_means_no_limit() {
        let l = limiter(1.0, 2, 0);
        let t0 = Instant::now();
        let far = t0 + Duration::from_secs(60);
        assert!(l.reserve(t0, far).is_ok() && l.reserve(t0, far).is_ok());
        assert!(l.reserve(t0, far).is_err());
        // A QPS so small the next turn is beyond any Instant: refused, no panic.
        let glacial = limiter(1e-300, 1, 10);
        assert!(glacial.reserve(t0, far).is_ok());
        assert!(glacial.reserve(t0, far).is_err());
        for qps in [0.0, -1.0, f64::INFINITY, f64::NAN] {
            let free = limiter(qps, 1, 0);
            for _ in 0..1000 {
                assert_eq!(free.reserve(t0, t0), Ok(t0));
            }
        }
    }

    // Paused time: tokio advances the clock when every task waits, so the
    // timings below are exact, whatever the machine's load.
    #[tokio::test(start_paused = true)]
    async fn admitted_reviews_keep_to_the_rate() {
        // 5 at once, then 50 per second: 30 reviews take about 0.5 s, never less.
        let l = Arc::new(limiter(50.0, 5, 100));
        let started = Instant::now();
        let deadline = started + Duration::from_secs(10);
        let waits = (0..30).map(|_| {
            let l = l.clone();
            async move { l.acquire(deadline).await }
        });
        for result in futures::future::join_all(waits).await {
            assert!(result.is_ok(), "{result:?}");
        }
        let elapsed = started.elapsed();
        assert!(elapsed >= 480 * MS, "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    }

    fn quick(steps: u32, timeout: Duration) -> ReviewRunner {
        ReviewRunner::new(ReviewPolicy {
            limits: ReviewLimits::default(),
            backoff: RetryBackoff { initial: 20 * MS, factor: 2.0, jitter: 0.2, steps },
            timeout,
        })
    }

    /// Fails `failures` times with `error`, then answers 42; counts attempts.
    async fn flaky(calls: &AtomicUsize, failures: usize, error: ReviewError) -> Result<u32, ReviewError> {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        if n < failures {
            Err(error)
        } else {
            Ok(42)
        }
    }

    // Paused time: tokio advances the clock when every task waits, so the
    // timings below are exact, whatever the machine's load.
    #[tokio::test(start_paused = true)]
    async fn retriable_failures_are_retried_with_growing_pauses() {
        let runner = quick(5, Duration::from_secs(10));
        let calls = AtomicUsize::new(0);
        let started = Instant::now();
        let answer = runner.run(|| flaky(&calls, 3, ReviewError::retriable("503"))).await;
        assert_eq!(answer, Ok(42));
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        // Pauses 20, 40, 80 ms, each up to 20 % longer.
        let elapsed = started.elapsed();
        assert!(elapsed >= 140 * MS, "{elapsed:?}");
        assert!(elapsed < 140 * MS * 12 / 10 + 500 * MS, "{elapsed:?}");
    }

    #[tokio::test]
    async fn attempts_run_out_with_the_last_error() {
        let runner = quick(3, Duration::from_secs(10));
        let calls = AtomicUsize::new(0);
        let answer = runner.run(|| flaky(&calls, 100, ReviewError::retriable("connection reset"))).await;
        assert_eq!(answer, Err(ReviewError::retriable("connection reset")));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn fatal_failures_are_not_retried() {
        let runner = quick(5, Duration::from_secs(10));
        let calls = AtomicUsize::new(0);
        let answer = runner.run(|| flaky(&calls, 100, ReviewError::fatal("forbidden"))).await;
        assert_eq!(answer, Err(ReviewError::fatal("forbidden")));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    // Paused time: tokio advances the clock when every task waits, so the
    // timings below are exact, whatever the machine's load.
    #[tokio::test(start_paused = true)]
    async fn the_deadline_covers_attempts_and_pauses() {
        // An attempt that hangs is cut at the deadline.
        let runner = quick(5, 100 * MS);
        let started = Instant::now();
        let answer: Result<(), _> = runner.run(std::future::pending).await;
        let err = answer.unwrap_err();
        assert!(err.message.contains("timed out after 100ms"), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(1));
        // Retries stop when the next pause would pass the deadline, naming the last error.
        let runner = quick(50, 150 * MS);
        let calls = AtomicUsize::new(0);
        let err = runner.run(|| flaky(&calls, 100, ReviewError::retriable("busy"))).await.unwrap_err();
        assert!(err.message.contains("timed out") && err.message.contains("busy"), "{err:?}");
        assert!((2..=4).contains(&calls.load(Ordering::SeqCst)), "{}", calls.load(Ordering::SeqCst));
    }

    // Paused time: tokio advances the clock when every task waits, so the
    // timings below are exact, whatever the machine's load.
    #[tokio::test(start_paused = true)]
    async fn a_full_queue_fails_at_once() {
        let runner = ReviewRunner::new(ReviewPolicy {
            limits: ReviewLimits { qps: 1.0, burst: 1, queue: 0 },
            ..ReviewPolicy::default()
        });
        let calls = AtomicUsize::new(0);
        assert_eq!(runner.run(|| flaky(&calls, 0, ReviewError::fatal("-"))).await, Ok(42));
        let started = Instant::now();
        let err = runner.run(|| flaky(&calls, 0, ReviewError::fatal("-"))).await.unwrap_err();
        assert!(err.message.starts_with("review not sent"), "{err:?}");
        assert!(started.elapsed() < 100 * MS);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn kube_errors_are_classified_like_default_should_retry() {
        let api = |code: u16, message: &str| {
            kube::Error::Api(Box::new(kube::core::Status { code, message: message.to_string(), ..Default::default() }))
        };
        for code in [429, 500, 503, 504] {
            assert!(ReviewError::from_kube(&api(code, "x")).retriable, "{code}");
        }
        let forbidden = ReviewError::from_kube(&api(403, "tokenreviews.authentication.k8s.io is forbidden: no"));
        assert_eq!(forbidden, ReviewError::fatal("tokenreviews.authentication.k8s.io is forbidden: no"));
        assert!(!ReviewError::from_kube(&api(400, "bad")).retriable);
        let service = kube::Error::Service("connection refused".into());
        assert!(ReviewError::from_kube(&service).retriable);
        let decode = kube::Error::SerdeError(serde_json::from_str::<u8>("x").unwrap_err());
        assert!(!ReviewError::from_kube(&decode).retriable);
    }
}
