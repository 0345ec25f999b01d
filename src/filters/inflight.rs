//! How much one server takes on at once (k8s.io/apiserver `WithMaxInFlightLimit`):
//! read-only and mutating requests each have a ceiling (`--max-requests-inflight`,
//! `--max-mutating-requests-inflight`); a request over it is answered 429 with
//! `Retry-After` at once, never queued. Watches are long-running and not counted
//! there; they have caps of their own, per server and per user, held for as long
//! as the watch stream is open. Health probes and `system:masters` are never
//! refused, as in kube.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::ready;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::auth::authn::UserInfo;
use crate::auth::authz::SYSTEM_MASTERS;
use crate::machinery::request_info::RequestInfo;
use crate::machinery::status::ApiError;

/// kube's wording (and its one-second `Retry-After`).
const TOO_MANY: &str = "Too many requests, please try again later.";
const RETRY_AFTER_SECONDS: u32 = 1;

/// The limits, from their flags; 0 means no limit.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    pub max_read: usize,
    pub max_mutating: usize,
    pub max_watches: usize,
    pub max_watches_per_user: usize,
}

/// The in-flight filter's state.
pub struct InFlight {
    read: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
    watches: Arc<WatchSlots>,
}

impl InFlight {
    pub fn new(limits: Limits) -> Self {
        let semaphore = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        Self {
            read: semaphore(limits.max_read),
            mutating: semaphore(limits.max_mutating),
            watches: Arc::new(WatchSlots {
                max: limits.max_watches,
                per_user: limits.max_watches_per_user,
                open: Mutex::new(WatchCount::default()),
            }),
        }
    }
}

#[derive(Default)]
struct WatchCount {
    total: usize,
    by_user: HashMap<String, usize>,
}

struct WatchSlots {
    max: usize,
    per_user: usize,
    open: Mutex<WatchCount>,
}

impl WatchSlots {
    fn lock(&self) -> MutexGuard<'_, WatchCount> {
        // Counters only: a poisoned lock still holds consistent numbers.
        self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A slot for one more watch by `user` (None: no per-user cap applies).
    fn acquire(self: &Arc<Self>, user: Option<&str>) -> Option<WatchSlot> {
        let mut open = self.lock();
        if self.max > 0 && open.total >= self.max {
            return None;
        }
        if let Some(user) = user.filter(|_| self.per_user > 0) {
            let mine = open.by_user.entry(user.to_string()).or_default();
            if *mine >= self.per_user {
                return None;
            }
            *mine += 1;
        }
        open.total += 1;
        Some(WatchSlot { slots: self.clone(), user: user.filter(|_| self.per_user > 0).map(str::to_string) })
    }
}

/// One open watch; dropping it (when the stream ends) frees the slot.
struct WatchSlot {
    slots: Arc<WatchSlots>,
    user: Option<String>,
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut open = self.slots.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(user) = &self.user {
            if let Some(mine) = open.by_user.get_mut(user) {
                *mine = mine.saturating_sub(1);
                if *mine == 0 {
                    open.by_user.remove(user);
                }
            }
        }
    }
}

fn too_many() -> Response {
    ApiError::too_many_requests(TOO_MANY, RETRY_AFTER_SECONDS).into_response()
}

/// kube's read-only verbs; everything else counts against the mutating limit.
fn is_mutating(verb: &str) -> bool {
    !matches!(verb, "get" | "list" | "watch" | "head")
}

pub async fn limit(State(inflight): State<Arc<InFlight>>, req: Request, next: Next) -> Response {
    let Some(info) = req.extensions().get::<RequestInfo>() else { return next.run(req).await };
    if crate::ops::health::is_probe_path(&info.path) && !info.is_resource_request {
        return next.run(req).await;
    }
    let user = req.extensions().get::<UserInfo>();
    let privileged = user.is_some_and(|u| u.groups.iter().any(|g| g == SYSTEM_MASTERS));
    if super::is_long_running(info) {
        // Without authentication (`--authentication none`) there is no user to count by.
        let user_name = user.map(|u| u.name.as_str());
        let slot = match privileged {
            true => None,
            false => match inflight.watches.acquire(user_name) {
                Some(slot) => Some(slot),
                None => return too_many(),
            },
        };
        // The slot lives as long as the watch stream.
        return held_until_sent(next.run(req).await, slot);
    }
    let semaphore = if is_mutating(&info.verb) { &inflight.mutating } else { &inflight.read };
    let Some(semaphore) = semaphore else { return next.run(req).await };
    let permit: Option<OwnedSemaphorePermit> = match semaphore.clone().try_acquire_owned() {
        Ok(permit) => Some(permit),
        Err(_) if privileged => None,
        Err(_) => return too_many(),
    };
    held_until_sent(next.run(req).await, permit)
}

/// Keeps `guard` until the response body has been sent (or dropped), as kube
/// holds its in-flight slot while the handler writes: a client that reads a
/// large list slowly keeps its slot, so the bytes waiting for slow readers
/// stay bounded by the limit.
fn held_until_sent<G: Send + Sync + Unpin + 'static>(response: Response, guard: Option<G>) -> Response {
    match guard {
        Some(guard) => response.map(|body| Body::new(HeldBody { inner: body, pending: Bytes::new(), _guard: guard })),
        None => response,
    }
}

/// The largest piece of a body handed to the connection at once. hyper takes a
/// whole data frame as soon as the peer's window has any room, so a list sent
/// as one frame would be "sent" (and its slot freed) while all of it still
/// waits in memory for a slow reader; in pieces, the last one is taken only
/// once the reader has consumed nearly everything.
const PIECE_BYTES: usize = 64 * 1024;

/// A response body that holds a guard until it ends and yields its data in
/// pieces of at most [`PIECE_BYTES`].
struct HeldBody<G> {
    inner: Body,
    pending: Bytes,
    _guard: G,
}

impl<G: Unpin> http_body::Body for HeldBody<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.pending.is_empty() {
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.pending = data,
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                other => return Poll::Ready(other),
            }
        }
        let piece = this.pending.split_to(this.pending.len().min(PIECE_BYTES));
        Poll::Ready(Some(Ok(http_body::Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let inner = self.inner.size_hint();
        let pending = self.pending.len() as u64;
        let mut hint = http_body::SizeHint::new();
        hint.set_lower(inner.lower() + pending);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + pending);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_slots_count_per_server_and_per_user_and_free_on_drop() {
        let inflight = InFlight::new(Limits { max_watches: 3, max_watches_per_user: 2, ..Default::default() });
        let slots = &inflight.watches;
        let a1 = slots.acquire(Some("alice"));
        let a2 = slots.acquire(Some("alice"));
        assert!(a1.is_some() && a2.is_some());
        assert!(slots.acquire(Some("alice")).is_none(), "alice is at her cap");
        let b1 = slots.acquire(Some("bob"));
        assert!(b1.is_some());
        assert!(slots.acquire(Some("carol")).is_none(), "the server is at its cap");
        drop(a1);
        assert!(slots.acquire(Some("carol")).is_some(), "a closed watch frees its slot");
        drop((a2, b1));
        assert_eq!(slots.lock().total, 0);
        assert!(slots.lock().by_user.is_empty(), "no user entries are left behind");
    }
}
