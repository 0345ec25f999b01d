//! How much one server takes on at once (k8s.io/apiserver `WithMaxInFlightLimit`):
//! read-only and mutating requests each have a ceiling (`--max-requests-inflight`,
//! `--max-mutating-requests-inflight`); a request over it is answered 429 with
//! `Retry-After` at once, never queued. Watches are long-running and not counted
//! there; they have caps of their own, per server and per user, held for as long
//! as the watch stream is open. Health probes and `system:masters` are never
//! refused, as in kube.
//!
//! One user may hold at most a quarter of the read slots and a quarter of the
//! mutating slots at once ([`USER_SHARE_DIVISOR`]): kube-apiserver keeps one
//! flow from starving the others with API Priority and Fairness; without its
//! queues, this share is what leaves room for everyone else when one user
//! floods the server (the user it floods with gets 429 beyond its share).
//!
//! With API Priority and Fairness in force ([`crate::flowcontrol`]), the
//! cluster's FlowSchemas and PriorityLevelConfigurations decide instead, for
//! every request but a watch: the request runs, waits in its flow's queue,
//! or is answered 429.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{answered, passed, waiting, Next, Request};
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{ready, FutureExt};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::apimachinery::errors::ApiError;
use crate::apimachinery::request_info::RequestInfo;
use crate::auth::authn::request_user;
use crate::auth::authz::SYSTEM_MASTERS;
use crate::auth::cache::KeyHasher;
use crate::flowcontrol::{Classification, Decision, FlowControl, Queued, Seat};

/// kube's wording (and its one-second `Retry-After`).
const TOO_MANY: &str = "Too many requests, please try again later.";
const RETRY_AFTER_SECONDS: u32 = 1;

/// One user's share of each in-flight limit: the limit divided by this.
pub const USER_SHARE_DIVISOR: usize = 4;

/// Shards of the per-user counts, so that requests of different users rarely
/// wait for the same lock.
const USER_SHARDS: usize = 16;

/// Users holding no slot whose entries a shard keeps, so that a user who
/// sends one request after another (a slot taken and freed each time) finds
/// its entry instead of making and dropping it (a name's allocation, a map
/// insert and removal on every request). Past this,
/// the shard drops its idle entries: memory stays bounded whatever the
/// number of users.
const IDLE_USERS_PER_SHARD: usize = 64;

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
    read: Option<Class>,
    mutating: Option<Class>,
    watches: Arc<WatchSlots>,
    /// With API Priority and Fairness on.
    flow_control: Option<Arc<FlowControl>>,
    /// The served kinds, whose object counts size a list's seats.
    resources: Option<Arc<crate::endpoints::handlers::ServedKinds>>,
}

/// The slots of read-only or of mutating requests, and who holds them.
struct Class {
    slots: Arc<Semaphore>,
    users: Arc<UserCounts>,
}

impl Class {
    fn new(limit: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(limit)),
            users: Arc::new(UserCounts {
                share: (limit / USER_SHARE_DIVISOR).max(1),
                shards: std::array::from_fn(|_| Mutex::new(HashMap::with_hasher(KeyHasher::new()))),
            }),
        }
    }

    /// A slot for one request of `user` (None: not counted per user), or
    /// None when the server or the user's share is full.
    fn acquire(&self, user: Option<&str>) -> Option<Slot> {
        let user = match user {
            Some(name) => Some(self.users.acquire(name)?),
            None => None,
        };
        let permit = self.slots.clone().try_acquire_owned().ok()?;
        Some(Slot { _permit: permit, user })
    }
}

/// How many slots each user holds now. A user's name is kept once, shared by
/// the map and the slots it holds: taking a slot allocates only for a user
/// the shard has no entry for (see [`IDLE_USERS_PER_SHARD`]).
struct UserCounts {
    share: usize,
    shards: [Mutex<HashMap<Arc<str>, usize, KeyHasher>>; USER_SHARDS],
}

impl UserCounts {
    fn shard_of(user: &str) -> usize {
        user.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(usize::from(b))) % USER_SHARDS
    }

    fn lock(&self, shard: usize) -> MutexGuard<'_, HashMap<Arc<str>, usize, KeyHasher>> {
        // Counters only: a poisoned lock still holds consistent numbers.
        self.shards[shard].lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn acquire(self: &Arc<Self>, user: &str) -> Option<UserSlot> {
        let shard = Self::shard_of(user);
        let mut counts = self.lock(shard);
        let name = match counts.get_key_value(user) {
            Some((_, &held)) if held >= self.share => return None,
            Some((name, _)) => name.clone(),
            None => Arc::from(user),
        };
        *counts.entry(name.clone()).or_default() += 1;
        Some(UserSlot { counts: self.clone(), shard, user: name })
    }
}

/// One request's place in its user's share; freed on drop.
struct UserSlot {
    counts: Arc<UserCounts>,
    shard: usize,
    user: Arc<str>,
}

impl Drop for UserSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock(self.shard);
        if let Some(mine) = counts.get_mut(&*self.user) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 && counts.len() > IDLE_USERS_PER_SHARD {
                counts.retain(|_, held| *held > 0);
            }
        }
    }
}

/// An in-flight request's slot: the server's, and its user's.
struct Slot {
    _permit: OwnedSemaphorePermit,
    user: Option<UserSlot>,
}

impl InFlight {
    pub fn new(
        limits: Limits,
        flow_control: Option<Arc<FlowControl>>,
        resources: Option<Arc<crate::endpoints::handlers::ServedKinds>>,
    ) -> Self {
        let class = |n: usize| (n > 0).then(|| Class::new(n));
        Self {
            flow_control,
            resources,
            read: class(limits.max_read),
            mutating: class(limits.max_mutating),
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

fn too_many(classification: Option<&Classification>) -> Response {
    let mut response = ApiError::too_many_requests(TOO_MANY, RETRY_AFTER_SECONDS).into_response();
    if let Some(classification) = classification {
        classification.write(response.headers_mut());
    }
    response
}

/// kube's read-only verbs; everything else counts against the mutating limit.
fn is_mutating(verb: &str) -> bool {
    !matches!(verb, "get" | "list" | "watch" | "head")
}

pub fn limit<'a, N: Next + 'a>(
    inflight: &InFlight,
    req: Request,
    next: N,
) -> impl Future<Output = Response> + Send + 'a {
    match admit(inflight, &req) {
        Admit::Now(admitted) => passed(run(admitted, req, next)),
        Admit::Wait(queued, admitted) => waiting(async move {
            match queued.seat().await {
                Some(seat) => run(Admitted { held: Held::Seat(seat), ..admitted }, req, next).await,
                None => too_many(admitted.classification.as_ref()),
            }
        }),
        Admit::Refused(classification) => answered(too_many(classification.as_ref())),
    }
}

/// The rest of the chain for an admitted request, which holds what it was
/// given until its answer is sent.
fn run<N: Next>(admitted: Admitted, req: Request, next: N) -> impl Future<Output = Response> + Send {
    let Admitted { held, flow, classification } = admitted;
    crate::heavy::with_flow(flow, next.run(req)).map(move |mut response| {
        if let Some(classification) = &classification {
            classification.write(response.headers_mut());
        }
        match held {
            Held::Nothing => response,
            Held::Request(slot) => held_until_sent(response, slot),
            Held::Seat(seat) => held_until_sent(response, seat),
            // The slot lives as long as the watch stream.
            Held::Watch(slot) => held_until_sent(response, slot),
        }
    })
}

/// What an admitted request holds until its answer is sent, the name its
/// large computations take turns under (crate::heavy), and, under API
/// Priority and Fairness, what classified it.
struct Admitted {
    held: Held,
    flow: Option<Arc<str>>,
    classification: Option<Classification>,
}

enum Held {
    /// Probes, privileged users over the limit, and classes without a limit.
    Nothing,
    Request(Slot),
    Seat(Seat),
    Watch(WatchSlot),
}

/// What the filter decided.
enum Admit {
    Now(Admitted),
    /// Queued at its priority level.
    Wait(Queued, Admitted),
    Refused(Option<Classification>),
}

/// Admits the request, queues it, or refuses it.
fn admit(inflight: &InFlight, req: &Request) -> Admit {
    let nothing = || Admitted { held: Held::Nothing, flow: None, classification: None };
    let Some(info) = req.extensions().get::<RequestInfo>() else { return Admit::Now(nothing()) };
    if crate::apimachinery::request_info::is_probe_path(info.path()) && !info.is_resource_request {
        return Admit::Now(nothing());
    }
    let user = request_user(req.extensions());
    let privileged = user.is_some_and(|u| u.groups.iter().any(|g| g == SYSTEM_MASTERS));
    if super::is_long_running(info) {
        if privileged {
            return Admit::Now(nothing());
        }
        // Without authentication (`--authentication none`) there is no user to count by.
        return match inflight.watches.acquire(user.map(|u| u.name.as_str())) {
            Some(slot) => Admit::Now(Admitted { held: Held::Watch(slot), ..nothing() }),
            None => Admit::Refused(None),
        };
    }
    let flow = || user.map(|u| Arc::from(u.name.as_str()));
    if let Some(flow_control) = inflight.flow_control.as_ref().filter(|fc| fc.in_force()) {
        let anonymous = crate::auth::authn::UserInfo::default();
        let objects = || {
            let reg = inflight.resources.as_ref()?.find(info.api_group(), info.api_version(), info.resource())?;
            Some(reg.store.len())
        };
        let limit = || {
            let query = crate::apimachinery::options::params::Query::parse(req.uri().query()).ok()?;
            query.get("limit")?.parse().ok()
        };
        let width = crate::flowcontrol::width(objects, info, if info.verb == "list" { limit() } else { None });
        match flow_control.decide(user.unwrap_or(&anonymous), info, width) {
            Some(Decision::Run(seat, classification)) => {
                let held = Held::Seat(seat);
                return Admit::Now(Admitted { held, flow: flow(), classification: Some(classification) });
            }
            Some(Decision::Wait(queued, classification)) => {
                let admitted = Admitted { held: Held::Nothing, flow: flow(), classification: Some(classification) };
                return Admit::Wait(queued, admitted);
            }
            Some(Decision::Reject(classification)) => return Admit::Refused(Some(classification)),
            // No schema matched: the in-flight limits below.
            None => {}
        }
    }
    let class = if is_mutating(info.verb.as_str()) { &inflight.mutating } else { &inflight.read };
    let slot = match class.as_ref().map(|class| class.acquire(user.map(|u| u.name.as_str()))) {
        Some(None) if !privileged => return Admit::Refused(None),
        Some(slot) => slot,
        None => None,
    };
    // The name the slot already holds, when it holds one.
    let flow = match slot.as_ref().and_then(|slot| slot.user.as_ref()) {
        Some(held) => Some(held.user.clone()),
        None => flow(),
    };
    Admit::Now(Admitted { held: slot.map_or(Held::Nothing, Held::Request), flow, classification: None })
}

/// Keeps `guard` until the response body has been sent (or dropped), as kube
/// holds its in-flight slot while the handler writes: a client that reads a
/// large list slowly keeps its slot, so the bytes waiting for slow readers
/// stay bounded by the limit.
fn held_until_sent<G: Send + Sync + Unpin + 'static>(response: Response, guard: G) -> Response {
    response.map(|body| Body::new(HeldBody { inner: body, pending: Bytes::new(), _guard: guard }))
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
    fn one_user_holds_at_most_a_share_of_the_slots() {
        let class = Class::new(8);
        let alice: Vec<_> = (0..2).map(|_| class.acquire(Some("alice"))).collect();
        assert!(alice.iter().all(Option::is_some));
        assert!(class.acquire(Some("alice")).is_none(), "alice holds her quarter");
        let others: Vec<_> = (0..6).map(|i| class.acquire(Some(&format!("user-{i}")))).collect();
        assert!(others.iter().all(Option::is_some), "everyone else still gets the rest");
        assert!(class.acquire(Some("bob")).is_none(), "the server is full");
        drop(alice);
        assert!(class.acquire(Some("alice")).is_some(), "freed slots are hers again");
        drop(others);
        let held = |class: &Class| {
            class
                .users
                .shards
                .iter()
                .flat_map(|s| s.lock().unwrap().values().copied().collect::<Vec<_>>())
                .sum::<usize>()
        };
        assert_eq!(held(&class), 0, "every slot is freed");
        // Idle users' entries are kept up to a bound, then dropped.
        let users = USER_SHARDS * IDLE_USERS_PER_SHARD * 4;
        for i in 0..users {
            drop(class.acquire(Some(&format!("many-{i}"))));
        }
        let entries: usize = class.users.shards.iter().map(|s| s.lock().unwrap().len()).sum();
        assert!(entries <= USER_SHARDS * (IDLE_USERS_PER_SHARD + 1), "{entries} entries kept for {users} users");
        assert_eq!(held(&class), 0);
        // Without an identity (no authentication) only the server's limit applies.
        let anonymous: Vec<_> = (0..8).map(|_| class.acquire(None)).collect();
        assert!(anonymous.iter().all(Option::is_some));
    }

    #[test]
    fn watch_slots_count_per_server_and_per_user_and_free_on_drop() {
        let inflight =
            InFlight::new(Limits { max_watches: 3, max_watches_per_user: 2, ..Default::default() }, None, None);
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
