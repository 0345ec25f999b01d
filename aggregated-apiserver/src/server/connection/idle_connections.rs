//! The connection cap ([`IdleConnections`]): the queue of connections without a request in
//! flight, in the order the cap closes them, and who is exempt from it. Apart because its
//! order and its locking are a subject of their own; each connection's side of it is kept by
//! its [`ConnectionClock`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::timed_io::{ClockState, ConnectionClock};
use crate::auth::authn::peer::Peer;

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
mod tests {
    use tokio::time::Instant;

    use super::super::timed_io::tests::{deadline, waker, HEADER, IDLE};
    use super::super::timed_io::ReadGate;
    use super::*;

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
