//! Each connection's [`ConnectionClock`] (where the connection is in its life, the read
//! deadline that follows) and the cap on idle connections ([`IdleConnections`]): the queue of
//! connections without a request in flight, in the order the cap closes them, and who is
//! exempt from it. One file because the two are one lock order: the cap moves a connection's
//! clock (to close it), and a connection's clock moves its place in the cap's queue.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Waker;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::auth::authn::peer::Peer;

/// Where a connection is in its life, for the timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Accepted; the first request's header is awaited (until the deadline).
    First { deadline: Option<Instant> },
    /// This many requests are in flight: no deadline.
    Busy(usize),
    /// Nothing in flight since this instant; the idle timeout runs.
    Idle { since: Instant },
    /// HTTP/1.1: the next request's first bytes came; its header is awaited until the deadline.
    Header { deadline: Option<Instant> },
}

pub(super) struct ClockState {
    phase: Phase,
    /// Seen on a request: HTTP/2 bytes say nothing about a request starting.
    http2: bool,
    /// The connection task's waker, from its last read: woken when the deadline changes.
    pub(super) reader: Option<Waker>,
    /// It counts against the cap: no request in flight, not exempt, open, not closed by it.
    pub(super) counted: bool,
    /// Its place in the cap's order while it counts.
    pub(super) place: IdleKey,
    /// Where its entry in the cap's queue is, if it has one (maybe behind `place`).
    pub(super) queued: Option<IdleKey>,
    /// Its TLS client is exempt from the cap (decided at the end of the handshake).
    exempt: bool,
    /// The cap closed it: its stream reads as closed from now on.
    pub(super) evicted: bool,
    /// The connection is gone; nothing puts it back in the queue.
    ended: bool,
}

/// What the stream may do at a read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ReadGate {
    /// Read, until this deadline if any.
    Open(Option<Instant>),
    /// Report end of file now: the cap closed the connection.
    Evicted,
}

/// The shared state of one connection deciding its read deadline, and its place in the cap.
pub struct ConnectionClock {
    header_read_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    cap: Option<Arc<IdleConnections>>,
    /// Cancelled when the cap closes the connection (read during the TLS handshake).
    pub(super) closing: CancellationToken,
    state: Mutex<ClockState>,
}

impl ConnectionClock {
    pub(super) fn new(
        accepted: Instant,
        header_read_timeout: Option<Duration>,
        idle_timeout: Option<Duration>,
        cap: Option<Arc<IdleConnections>>,
    ) -> Self {
        let deadline = header_read_timeout.map(|t| accepted + t);
        Self {
            header_read_timeout,
            idle_timeout,
            cap,
            closing: CancellationToken::new(),
            state: Mutex::new(ClockState {
                phase: Phase::First { deadline },
                http2: false,
                reader: None,
                counted: false,
                place: IdleKey { handshake_done: false, seq: 0 },
                queued: None,
                exempt: false,
                evicted: false,
                ended: false,
            }),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, ClockState> {
        // The state stays consistent across a panic (plain assignments), so use it anyway.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cap's queue (if any) and then this connection's state, in the one lock order.
    fn lock_both(&self) -> (Option<(&IdleConnections, MutexGuard<'_, IdleState>)>, MutexGuard<'_, ClockState>) {
        let queue = self.cap.as_deref().map(|cap| (cap, cap.lock()));
        (queue, self.lock())
    }

    /// Accepted, TLS handshake to come: counts against the cap, which may close the idlest
    /// other connection to make room.
    pub(super) fn admitted(self: &Arc<Self>) {
        let (queue, mut state) = self.lock_both();
        let Some((cap, mut queue)) = queue else { return };
        state.place = cap.next_key(false);
        cap.count(&mut state);
        IdleConnections::place(&mut queue, self, &mut state);
        drop(state);
        cap.enforce(&mut queue, Arc::as_ptr(self));
    }

    /// The TLS handshake is done: an exempt connection leaves the queue for good; the others
    /// keep their age but now come after every connection still handshaking.
    pub(super) fn handshake_done(self: &Arc<Self>, exempt: bool) {
        let (queue, mut state) = self.lock_both();
        let Some((cap, mut queue)) = queue else { return };
        if exempt {
            state.exempt = true;
            cap.uncount(&mut state);
            IdleConnections::unplace(&mut queue, &mut state);
        } else if state.counted {
            state.place.handshake_done = true;
            IdleConnections::place(&mut queue, self, &mut state);
        }
    }

    /// The connection is gone (its stream dropped, or its handshake failed or was abandoned).
    pub(super) fn ended(&self) {
        let (queue, mut state) = self.lock_both();
        state.ended = true;
        if let Some((cap, mut queue)) = queue {
            cap.uncount(&mut state);
            IdleConnections::unplace(&mut queue, &mut state);
        }
    }

    /// A request was handed over: this connection's lock only (see [the module docs](super)).
    pub(super) fn request_started(&self, http2: bool) {
        let mut state = self.lock();
        state.http2 |= http2;
        state.phase = match state.phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            _ => Phase::Busy(1),
        };
        if let Some(cap) = &self.cap {
            // Its entry stays until the queue is next checked.
            cap.uncount(&mut state);
        }
        // Closed by the cap after hyper read this request's last bytes but before it handed it
        // over: a request in flight is never cut, so the connection stays.
        state.evicted = false;
    }

    /// A request's response is done (or dropped): this connection's lock only, unless the
    /// connection needs an entry in the queue or the cap is passed.
    pub(super) fn request_finished(self: &Arc<Self>) {
        let mut state = self.lock();
        state.phase = match state.phase {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Idle { since: Instant::now() },
        };
        // The connection task may be waiting on a read with no deadline: have it set one.
        if let Some(reader) = &state.reader {
            reader.wake_by_ref();
        }
        let Some(cap) = &self.cap else { return };
        if !matches!(state.phase, Phase::Idle { .. }) || state.exempt || state.ended || state.evicted {
            return;
        }
        state.place = cap.next_key(true);
        cap.count(&mut state);
        let needs_entry = state.queued.is_none();
        drop(state);
        if needs_entry || cap.len() > cap.cap {
            let (queue, mut state) = self.lock_both();
            let Some((cap, mut queue)) = queue else { return };
            // Re-checked under both locks: a request may have started meanwhile.
            if state.counted && state.queued.is_none() {
                IdleConnections::place(&mut queue, self, &mut state);
            }
            drop(state);
            cap.enforce(&mut queue, Arc::as_ptr(self));
        }
    }

    /// Application bytes arrived.
    pub(super) fn bytes_read(&self) {
        let mut state = self.lock();
        if !matches!(state.phase, Phase::Idle { .. }) || state.http2 {
            return;
        }
        state.phase = Phase::Header { deadline: self.header_read_timeout.map(|t| Instant::now() + t) };
        // An HTTP/1.1 request is arriving: closing the connection now would cut it, so its
        // place moves behind every other connection (the header timeout bounds how long it
        // may take); its entry follows when the queue is next checked.
        if let Some(cap) = &self.cap {
            if state.counted {
                state.place = cap.next_key(true);
            }
        }
    }

    /// What the stream may do now, remembering `waker` for [`Self::request_finished`] and
    /// for the cap.
    pub(super) fn read_gate(&self, waker: &Waker) -> ReadGate {
        let mut state = self.lock();
        match &mut state.reader {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
        if state.evicted {
            return ReadGate::Evicted;
        }
        ReadGate::Open(match state.phase {
            Phase::First { deadline } | Phase::Header { deadline } => deadline,
            Phase::Busy(_) => None,
            Phase::Idle { since } => self.idle_timeout.map(|t| since + t),
        })
    }

    /// Counts one connection closed by the cap.
    pub(super) fn count_closed(&self) {
        if let Some(cap) = &self.cap {
            cap.closed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Why the connection is being closed, for the log.
    pub(super) fn describe(&self) -> &'static str {
        match self.lock().phase {
            Phase::First { .. } => "no request header within the header read timeout of accept",
            Phase::Header { .. } => "request header not complete within the header read timeout",
            Phase::Idle { .. } => "idle timeout",
            Phase::Busy(_) => "busy",
        }
    }
}

/// Asked once per connection, when its TLS handshake is done, with the client's certificate
/// chain: true for a client the cap must never close and does not count (the aggregator,
/// by its front-proxy certificate).
///
/// The server's predicate is the authenticator's own front-proxy test: the chain leads to the
/// request-header CA *and* has an allowed common name, read from the watched ConfigMap at
/// that moment. The allowed-names check matters where the request-header CA also signs
/// ordinary client certificates; it is what makes a certificate the front proxy's for
/// authentication too. The answer holds for the connection's life: after a front-proxy CA
/// rotation such a connection's requests are refused by authentication anyway, and the idle
/// and header timeouts still close it. Who is behind a connection still in its TLS handshake
/// cannot be known (the client certificate comes at its end), so a flood of new connections
/// faster than `--max-connections` per handshake time can close the aggregator's *new*
/// connection during its handshake; its established ones are safe, and it retries.
pub type Exempt = Arc<dyn Fn(&Peer) -> bool + Send + Sync>;

/// A connection's place in the cap's queue: handshaking connections first, then by when
/// they last had nothing in flight, oldest first. `seq` is a counter rather than an
/// instant: it orders connections that became idle in the same clock tick, and is unique.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct IdleKey {
    pub(super) handshake_done: bool,
    pub(super) seq: u64,
}

/// The connections without a request in flight, in the order the cap closes them, and the
/// cap. Shared by every connection; see [the module docs](super) for why the cap counts only these.
///
/// Order: when a new connection (or one whose last request just finished) would make them
/// more than the cap, the idlest is closed to make room: connections still in their TLS
/// handshake first, oldest first, then the others by how long they have had nothing in flight
/// (a connection that has never sent a request counts from its accept; one whose next
/// HTTP/1.1 request header has begun to arrive counts from then, so that a request on its way
/// is cut only when every quieter connection has gone). Handshaking connections go first
/// because holding one costs an attacker least (a TCP connect, no cryptography) and says
/// nothing about who is there; among the rest, the longest idle has been the least useful.
/// The connection being made room for is never the one closed.
///
/// A connection with a request in flight is bounded by what bounds requests instead
/// (`--max-requests-inflight`, `--max-mutating-requests-inflight`, the watch caps
/// `--max-watches` and `--max-watches-per-user` in `crate::filters::inflight`, and
/// `--request-timeout`). Descriptors in use are then about the cap, plus those limits, plus
/// the requests waiting for a TokenReview before they reach the in-flight filter
/// (`--review-queue`, and those sharing one token's review, bounded in time by the review's
/// deadline, as in kube-apiserver, whose authentication also comes before its in-flight
/// limits), plus requests never refused for load (probes, `system:masters`) and the
/// aggregator's few connections.
///
/// Closing a connection from outside uses the same machinery as the timeouts: during the
/// handshake the accept future is dropped (which closes the socket); afterwards its
/// [`ConnectionClock`] is marked and the reader woken, and [`TimedIo`] reports end of file.
/// Decisions are made under one lock (the queue's, then the connection's), so a connection
/// is chosen only while nothing is in flight on it; should hyper hand it a request parsed
/// from bytes already read before it sees that end of file, the request cancels the close.
///
/// The queue is kept lazily, so that requests take no lock but their own connection's: a
/// request starting or ending, or an HTTP/1.1 header beginning, only updates the
/// connection's own state (whether it counts, and the place it should have) and an atomic
/// count of the connections that count. Entries in the queue may therefore be out of date;
/// when the count passes the cap, the queue's lock is taken and entries are checked in order,
/// the connection's own state deciding: one busy (or gone) leaves the queue, one whose place
/// moved is put back at that place, and the first one in its right place is closed. Only a
/// connection that has no entry at all (new, or taken out while busy) takes the queue's lock
/// to get one.
///
/// Locking: this lock is always taken before a connection's [`ConnectionClock`] lock, never
/// after. Every change of an entry holds both; a connection's own state (whether it counts,
/// its place) changes under its own lock, and `idle` with it. The queue holds at most
/// one entry per open connection, and an entry for every connection that counts, except for
/// the moment between a connection starting to count again and its thread taking this lock
/// to enter it. A second connection's lock is taken only under this lock (to check or close
/// it), which no thread holding only its own connection's lock ever waits for.
///
/// [`TimedIo`]: super::TimedIo
pub struct IdleConnections {
    pub(super) cap: usize,
    exempt: Option<Exempt>,
    state: Mutex<IdleState>,
    /// Connections that count against the cap now.
    idle: AtomicUsize,
    /// Places in the queue are handed out in this order.
    next_seq: AtomicU64,
    pub(super) closed: AtomicU64,
}

pub(super) struct IdleState {
    queue: BTreeMap<IdleKey, Weak<ConnectionClock>>,
}

impl fmt::Debug for IdleConnections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdleConnections")
            .field("cap", &self.cap)
            .field("exempt", &self.exempt.is_some())
            .field("idle", &self.len())
            .field("closed", &self.closed_total())
            .finish()
    }
}

impl IdleConnections {
    /// A queue keeping at most `cap` (at least one) connections without a request in flight.
    pub fn new(cap: usize, exempt: Option<Exempt>) -> Self {
        Self {
            cap: cap.max(1),
            exempt,
            state: Mutex::new(IdleState { queue: BTreeMap::new() }),
            idle: AtomicUsize::new(0),
            next_seq: AtomicU64::new(0),
            closed: AtomicU64::new(0),
        }
    }

    /// Connections now counted against the cap.
    pub fn len(&self) -> usize {
        self.idle.load(Ordering::Acquire)
    }

    /// Whether no connection is counted against the cap.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Connections the cap has closed since start.
    pub fn closed_total(&self) -> u64 {
        self.closed.load(Ordering::Relaxed)
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, IdleState> {
        // Every step leaves the queue consistent (inserts and removals), so use it after a panic.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn is_exempt(&self, peer: &Peer) -> bool {
        self.exempt.as_ref().is_some_and(|exempt| exempt(peer))
    }

    /// A place behind every connection that had one before.
    pub(super) fn next_key(&self, handshake_done: bool) -> IdleKey {
        IdleKey { handshake_done, seq: self.next_seq.fetch_add(1, Ordering::Relaxed) }
    }

    /// Starts counting a connection (its state locked as `state`).
    pub(super) fn count(&self, state: &mut ClockState) {
        if !state.counted {
            state.counted = true;
            self.idle.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Stops counting a connection (its state locked as `state`); its entry, if any, stays
    /// until the queue is next checked.
    pub(super) fn uncount(&self, state: &mut ClockState) {
        if state.counted {
            state.counted = false;
            self.idle.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Moves `clock`'s entry (whose state is `state`) to the place its state says.
    pub(super) fn place(queue: &mut IdleState, clock: &Arc<ConnectionClock>, state: &mut ClockState) {
        if let Some(old) = state.queued.take() {
            queue.queue.remove(&old);
        }
        queue.queue.insert(state.place, Arc::downgrade(clock));
        state.queued = Some(state.place);
    }

    /// Removes the entry of a connection (whose state is `state`).
    pub(super) fn unplace(queue: &mut IdleState, state: &mut ClockState) {
        if let Some(old) = state.queued.take() {
            queue.queue.remove(&old);
        }
    }

    /// Closes the idlest connections, never `spare` (the one room is being made for), until
    /// the cap holds, bringing the entries it meets up to date on the way (see [the module
    /// docs](super)). Called with the queue locked and no connection's lock held.
    pub(super) fn enforce(&self, queue: &mut IdleState, spare: *const ConnectionClock) {
        while self.len() > self.cap {
            let Some((key, entry)) =
                queue.queue.iter().find(|(_, clock)| clock.as_ptr() != spare).map(|(k, c)| (*k, c.clone()))
            else {
                return;
            };
            queue.queue.remove(&key);
            // A connection leaves the queue before its clock goes: a dead entry cannot be
            // met, but must not keep the loop from making room either.
            let Some(victim) = entry.upgrade() else { continue };
            let mut state = victim.lock();
            state.queued = None;
            if !state.counted {
                // Busy (or gone) since it was entered: out of the queue until it is idle again.
                continue;
            }
            if state.place != key {
                // Idle again, or its next HTTP/1.1 request begun, since it was entered.
                state.queued = Some(state.place);
                queue.queue.insert(state.place, entry);
                continue;
            }
            self.uncount(&mut state);
            state.evicted = true;
            // During the handshake: the accept future gives up. Afterwards: the reader sees
            // end of file at its next read, which this wakes it for.
            victim.closing.cancel();
            if let Some(reader) = &state.reader {
                reader.wake_by_ref();
            }
        }
    }
}

/// Keeps a connection in the cap's queue while it is open: dropped with the accept future
/// if the handshake fails or is abandoned, else with the connection's stream.
pub(super) struct Open(pub(super) Arc<ConnectionClock>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.ended();
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(crate) const HEADER: Duration = Duration::from_secs(32);
    pub(crate) const IDLE: Duration = Duration::from_secs(90);

    pub(crate) fn waker() -> Waker {
        futures::task::noop_waker()
    }

    /// The read deadline of an open connection.
    pub(crate) fn deadline(clock: &ConnectionClock) -> Option<Instant> {
        match clock.read_gate(&waker()) {
            ReadGate::Open(deadline) => deadline,
            ReadGate::Evicted => panic!("closed by the cap"),
        }
    }

    #[tokio::test]
    async fn the_first_request_has_the_header_timeout_from_accept() {
        let accepted = Instant::now();
        let clock = Arc::new(ConnectionClock::new(accepted, Some(HEADER), Some(IDLE), None));
        assert_eq!(deadline(&clock), Some(accepted + HEADER));
        // Bytes of the first request do not move it.
        clock.bytes_read();
        assert_eq!(deadline(&clock), Some(accepted + HEADER));
        clock.request_started(false);
        assert_eq!(deadline(&clock), None);
    }

    #[tokio::test]
    async fn http1_idle_then_header_timeout() {
        let clock = Arc::new(ConnectionClock::new(Instant::now(), Some(HEADER), Some(IDLE), None));
        clock.request_started(false);
        let finished = Instant::now();
        clock.request_finished();
        let idle = deadline(&clock).expect("idle deadline");
        assert!(idle >= finished + IDLE && idle <= Instant::now() + IDLE);
        let first_bytes = Instant::now();
        clock.bytes_read();
        let header = deadline(&clock).expect("header deadline");
        assert!(header >= first_bytes + HEADER && header <= Instant::now() + HEADER);
        // More bytes do not extend it: a trickled header is still bounded.
        clock.bytes_read();
        assert_eq!(deadline(&clock), Some(header));
    }

    #[tokio::test]
    async fn http2_bytes_do_not_end_idleness_and_requests_in_flight_have_no_deadline() {
        let clock = Arc::new(ConnectionClock::new(Instant::now(), Some(HEADER), Some(IDLE), None));
        clock.request_started(true);
        clock.request_started(true);
        clock.request_finished();
        assert_eq!(deadline(&clock), None, "one stream still open");
        clock.request_finished();
        let idle = deadline(&clock).expect("idle deadline");
        clock.bytes_read();
        assert_eq!(deadline(&clock), Some(idle));
    }

    #[tokio::test]
    async fn zero_timeouts_mean_none() {
        let clock = Arc::new(ConnectionClock::new(Instant::now(), None, None, None));
        assert_eq!(deadline(&clock), None);
        clock.request_started(false);
        clock.request_finished();
        assert_eq!(deadline(&clock), None);
        clock.bytes_read();
        assert_eq!(deadline(&clock), None);
    }

    /// A connection accepted under `cap`, in its TLS handshake.
    fn accepted(cap: &Arc<IdleConnections>) -> Arc<ConnectionClock> {
        let clock = Arc::new(ConnectionClock::new(Instant::now(), Some(HEADER), Some(IDLE), Some(cap.clone())));
        clock.admitted();
        clock
    }

    /// Whether the cap closed the connection (the handshake gives up, the stream reads EOF).
    fn closed(clock: &ConnectionClock) -> bool {
        let evicted = clock.read_gate(&waker()) == ReadGate::Evicted;
        // (A close cancelled by a request leaves the token cancelled: only read in the handshake.)
        assert!(!evicted || clock.closing.is_cancelled(), "the handshake would go on");
        evicted
    }

    fn one_request(clock: &Arc<ConnectionClock>) {
        clock.request_started(false);
        clock.request_finished();
    }

    #[tokio::test]
    async fn the_cap_closes_handshaking_connections_first_then_the_longest_idle() {
        let cap = Arc::new(IdleConnections::new(3, None));
        let never_asked = accepted(&cap);
        let served = accepted(&cap);
        let handshaking = accepted(&cap);
        never_asked.handshake_done(false);
        served.handshake_done(false);
        one_request(&served);
        assert_eq!(cap.len(), 3);
        assert!([&never_asked, &served, &handshaking].iter().all(|c| !closed(c)), "at the cap, not beyond");

        // Beyond the cap: the connection still in its handshake goes first, although it came
        // after the other two; the newcomer is never the one closed.
        let newcomer = accepted(&cap);
        assert!(closed(&handshaking));
        assert!(!closed(&newcomer) && !closed(&never_asked) && !closed(&served));
        newcomer.handshake_done(false);
        // With none handshaking, the longest without a request in flight: one that never sent
        // one counts from its accept, before `served`, idle since its request.
        let next = accepted(&cap);
        assert!(closed(&never_asked));
        assert!(!closed(&served) && !closed(&newcomer) && !closed(&next));
        // `next` is still handshaking: the next arrival closes it, not the idle ones.
        let last = accepted(&cap);
        assert!(closed(&next));
        assert!(!closed(&served) && !closed(&newcomer) && !closed(&last));
        assert_eq!(cap.len(), 3);
    }

    #[tokio::test]
    async fn an_http1_request_arriving_on_an_idle_connection_puts_it_last() {
        let cap = Arc::new(IdleConnections::new(2, None));
        let older = accepted(&cap);
        let younger = accepted(&cap);
        for c in [&older, &younger] {
            c.handshake_done(false);
            one_request(c);
        }
        // The older one's next request header starts coming in.
        older.bytes_read();
        let newcomer = accepted(&cap);
        assert!(closed(&younger));
        assert!(!closed(&older) && !closed(&newcomer));
        // More bytes of the same header do not move it again: the next to go is `older`.
        older.bytes_read();
        newcomer.handshake_done(false);
        let _next = accepted(&cap);
        assert!(closed(&older) && !closed(&newcomer));
    }

    #[tokio::test]
    async fn busy_and_exempt_connections_are_never_closed_nor_counted() {
        let cap = Arc::new(IdleConnections::new(1, None));
        let watch = accepted(&cap);
        watch.handshake_done(false);
        watch.request_started(false);
        let aggregator = accepted(&cap);
        assert!(!closed(&watch), "a request in flight is never closed");
        aggregator.handshake_done(true);
        one_request(&aggregator);
        assert_eq!(cap.len(), 0, "neither counts");

        let mut churn = Vec::new();
        for _ in 0..10 {
            let c = accepted(&cap);
            c.handshake_done(false);
            churn.push(c);
        }
        assert_eq!(churn.iter().filter(|c| closed(c)).count(), 9);
        assert!(!closed(&watch) && !closed(&aggregator));

        // The watch ends: now idle, it counts, and the cap makes room by closing the other.
        watch.request_finished();
        assert!(closed(&churn[9]) && !closed(&watch));
        assert_eq!(cap.len(), 1);
    }

    #[tokio::test]
    async fn a_request_handed_over_after_the_cap_chose_the_connection_keeps_it_open() {
        let cap = Arc::new(IdleConnections::new(1, None));
        let first = accepted(&cap);
        first.handshake_done(false);
        let second = accepted(&cap);
        assert!(closed(&first));
        // hyper had read the request's last bytes before the close: the request is served and
        // the connection stays open.
        first.request_started(false);
        assert_eq!(deadline(&first), None);
        assert!(!closed(&second));
        first.request_finished();
        assert!(!closed(&first));
        assert!(closed(&second), "the cap holds again once the request is done");
    }

    #[tokio::test]
    async fn ended_connections_leave_the_queue() {
        let cap = Arc::new(IdleConnections::new(2, None));
        let clock = accepted(&cap);
        let open = Open(clock.clone());
        clock.handshake_done(false);
        clock.request_started(false);
        drop(open);
        // A response body dropped after its connection ended does not put it back.
        clock.request_finished();
        assert!(cap.is_empty());
        let handshake_failed = accepted(&cap);
        drop(Open(handshake_failed));
        assert!(cap.is_empty());
    }
}
