//! Connection-level protections, after k8s.io/apiserver's secure serving
//! (`pkg/server/secure_serving.go`: `ReadHeaderTimeout: 32s`, `IdleTimeout: 90s`,
//! `MaxHeaderBytes: 1<<20`, and its HTTP/2 settings). Without them a client can hold a
//! connection, and the file descriptor and buffers behind it, forever: by trickling a request
//! header, by never sending one, or simply by staying connected.
//!
//! [`ConnectionLimits::configure_http`] sets the header size limits and HTTP/2 settings on
//! hyper's builder. [`LimitAcceptor`] wraps each accepted connection's stream in [`TimedIo`]
//! and its service in [`TrackRequests`], which share one [`ConnectionClock`] deciding when the
//! connection has been quiet too long, and enters it in the cap's queue ([`IdleConnections`]).
//!
//! # The connection cap: idle connections only, the idlest closed first
//!
//! `--max-connections` bounds the connections that hold a descriptor *without a request in
//! flight*: in their TLS handshake, before their first request, idle HTTP/1.1 keep-alive, or
//! HTTP/2 with no open stream. Past the cap the idlest is closed to make room (see
//! [`IdleConnections`]); never one with a request in flight, nor the aggregator's
//! ([`Exempt`]). The accept loop never waits for the cap.
//!
//! Why not cap every connection, with the accept loop waiting for a slot as Go's
//! `netutil.LimitListener` does: whoever holds the slots locks everyone else out, the
//! aggregator included, and the aggregator locked out is the whole API down. kube-apiserver
//! bounds *work* instead (in-flight limits, per-request deadlines, the timeouts below), and
//! so does this server: the cap bounds only connections that hold a descriptor and do nothing
//! (`crate::server::open_files` checks all the bounds against `RLIMIT_NOFILE`). Why close the
//! idlest rather than refuse the newcomer: a refused newcomer is the same lock-out, while an
//! idle connection's client loses no request and reopens it, as after the idle timeout.
//!
//! # Header read and idle timeouts
//!
//! Go's rules, not hyper's `header_read_timeout` (started right after the previous response
//! on a keep-alive connection, so an idle one would be closed after 32 s instead of 90 s; and
//! nothing for HTTP/2): the first request's header must arrive within the header timeout of
//! accept (TLS handshake included); then the idle timeout covers the wait for the next
//! request's first bytes, and from those on the header timeout applies again (HTTP/1.1). On
//! HTTP/2 only requests count (pings or a trickled HEADERS frame do not, as in Go). From hyper
//! handing a request over until its response body is done or dropped there is no deadline, so
//! a long watch is never cut, by these timeouts nor by the cap. A deadline passed (or the cap)
//! makes the stream report end of file ([`TimedIo`]).

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum_server::accept::Accept;
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

use crate::apimachinery::duration::parse_seconds;
use crate::auth::authn::peer::Peer;

/// HTTP/2 streams one connection may have open at once: Go's http2 default, which
/// k8s.io/apiserver makes explicit ("a malicious client can only open 400 streams before we
/// forcibly close the connection"). hyper's default is 200.
const HTTP2_MAX_CONCURRENT_STREAMS: u32 = 100;
/// Per-stream receive window: k8s.io/apiserver's `MaxUploadBufferPerStream` (256 KiB, "99% of
/// serialized resources in surveyed clusters were smaller"). hyper's default is 1 MiB.
const HTTP2_STREAM_WINDOW: u32 = 256 * 1024;
/// Go's allowance on top of `MaxHeaderBytes` when it advertises SETTINGS_MAX_HEADER_LIST_SIZE
/// (HTTP/2 counts 32 bytes of overhead per field; Go allows for 10 typical fields).
const HTTP2_HEADER_LIST_OVERHEAD: usize = 32 * 10;
/// Go reads up to `MaxHeaderBytes + 4096` before answering 431; hyper's read buffer gets the
/// same slack.
const HTTP1_BUFFER_SLACK: usize = 4096;
/// hyper refuses (panics on) a smaller HTTP/1 buffer.
const HTTP1_MIN_BUFFER: usize = 8192;
/// hyper's default cap on the number of HTTP/1 header fields.
const HTTP1_DEFAULT_MAX_HEADERS: usize = 100;
/// The smallest realistic header line we budget for when turning the byte limit into hyper's
/// field-count limit ("X-Remote-Group: system:masters\r\n" is 32 bytes).
const HTTP1_BYTES_PER_HEADER: usize = 32;

/// The connection limits of the HTTPS server, as flags.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A connection that has not sent a whole request header in this long is closed
    /// (k8s.io/apiserver's ReadHeaderTimeout): of accept for the first request, of its first
    /// bytes for later ones. Zero: no limit.
    #[arg(long = "http-header-read-timeout", value_name = "HTTP_HEADER_READ_TIMEOUT", default_value = "32", value_parser = parse_seconds)]
    pub header_read_timeout: Duration,

    /// A connection with no request in flight is closed after this long (k8s.io/apiserver's
    /// IdleTimeout). Zero: no limit.
    #[arg(long = "http-idle-timeout", value_name = "HTTP_IDLE_TIMEOUT", default_value = "90", value_parser = parse_seconds)]
    pub idle_timeout: Duration,

    /// Largest request header accepted, in bytes, for HTTP/1.1 (431 beyond) and HTTP/2
    /// (SETTINGS_MAX_HEADER_LIST_SIZE) alike (k8s.io/apiserver's MaxHeaderBytes).
    #[arg(long = "max-request-header-bytes", value_name = "MAX_REQUEST_HEADER_BYTES", default_value_t = 1 << 20)]
    pub max_header_bytes: usize,

    /// Connections without a request in flight (in their TLS handshake, before their first
    /// request, idle keep-alive) kept open at once; beyond, the one idle longest is closed to
    /// make room, never one with a request in flight nor the aggregator's. 0: no limit.
    /// 1000 idle TLS connections cost ~35 MiB here, which a 256Mi pod can afford (docs/configuration.md).
    #[arg(long, default_value_t = 1000)]
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    /// k8s.io/apiserver's values, and no connection cap.
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            max_header_bytes: 1 << 20,
            max_connections: 0,
        }
    }
}

impl ConnectionLimits {
    /// The TLS handshake timeout: the handshake is part of the time the first request's header
    /// has (Go bounds it by the smallest of its read timeouts too). None: axum-server's default.
    pub fn handshake_timeout(&self) -> Option<Duration> {
        nonzero(self.header_read_timeout)
    }

    /// Applies the header size limits and HTTP/2 settings to the server's hyper builder.
    pub fn configure_http<A>(&self, server: &mut axum_server::Server<SocketAddr, A>) {
        let builder = server.http_builder();
        let h1_buffer = self.max_header_bytes.saturating_add(HTTP1_BUFFER_SLACK).max(HTTP1_MIN_BUFFER);
        let h1_max_headers = (self.max_header_bytes / HTTP1_BYTES_PER_HEADER).max(HTTP1_DEFAULT_MAX_HEADERS);
        builder
            .http1()
            // The header timeouts are ours (see the module docs); hyper's would also need a timer.
            .header_read_timeout(None)
            // hyper answers 431 when a request head does not fit its read buffer (checked only
            // between reads: TrackRequests makes the limit exact). The buffer also caps how
            // much response hyper queues before pushing back, a bounded 1 MiB.
            .max_buf_size(h1_buffer)
            // Without this hyper refuses more than 100 header fields (431) whatever their size,
            // and a user in many groups gets one X-Remote-Group header per group.
            .max_headers(h1_max_headers);
        let header_list = self.max_header_bytes.saturating_add(HTTP2_HEADER_LIST_OVERHEAD);
        builder
            .http2()
            // hyper's default is 16 KiB; beyond the limit h2 answers 431 and refuses the stream.
            .max_header_list_size(u32::try_from(header_list).unwrap_or(u32::MAX))
            .max_concurrent_streams(HTTP2_MAX_CONCURRENT_STREAMS)
            .initial_stream_window_size(HTTP2_STREAM_WINDOW);
        // Not taken from Go: MaxReadFrameSize 256 KiB. h2 guards against CONTINUATION floods by
        // allowing about max_header_list_size / max_frame_size (+25%) frames per header block,
        // so advertising 256 KiB frames would let a 1 MiB header through only from clients
        // that send frames that large; at the default 16 KiB any client fits. Nor the 25 MiB
        // connection window (100 streams x 256 KiB): hyper's 1 MiB bounds the request bytes a
        // connection can make us buffer, which is what a connection cap is sized by.
    }

    /// The cap's queue of connections without a request in flight, exempting the connections
    /// `exempt` says yes to; None without a cap (`max_connections` zero).
    pub fn idle_connections(&self, exempt: Option<Exempt>) -> Option<Arc<IdleConnections>> {
        (self.max_connections > 0).then(|| Arc::new(IdleConnections::new(self.max_connections, exempt)))
    }

    /// Wraps the acceptor (the TLS handshake) so that each connection gets the timeouts and,
    /// with `cap` (from [`Self::idle_connections`]), a place in the cap's queue.
    pub fn acceptor<A>(&self, inner: A, cap: Option<Arc<IdleConnections>>) -> LimitAcceptor<A> {
        LimitAcceptor {
            inner,
            header_read_timeout: nonzero(self.header_read_timeout),
            idle_timeout: nonzero(self.idle_timeout),
            max_http1_header_bytes: self.max_header_bytes.saturating_add(HTTP1_BUFFER_SLACK),
            cap,
        }
    }
}

fn nonzero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

// ---------------------------------------------------------------------------------------------
// Connection cap
// ---------------------------------------------------------------------------------------------

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

/// An accepted connection's service that knows the client certificates its TLS handshake saw
/// (`crate::server::tls::WithPeer`).
pub trait HasPeer {
    /// The client's certificate chain as presented (not verified).
    fn peer(&self) -> &Peer;
}

/// A connection's place in the cap's queue: handshaking connections first, then by when
/// they last had nothing in flight, oldest first. `seq` is a counter rather than an
/// instant: it orders connections that became idle in the same clock tick, and is unique.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct IdleKey {
    handshake_done: bool,
    seq: u64,
}

/// The connections without a request in flight, in the order the cap closes them, and the
/// cap. Shared by every connection; see the module docs for why the cap counts only these.
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
pub struct IdleConnections {
    cap: usize,
    exempt: Option<Exempt>,
    state: Mutex<IdleState>,
    /// Connections that count against the cap now.
    idle: AtomicUsize,
    /// Places in the queue are handed out in this order.
    next_seq: AtomicU64,
    closed: AtomicU64,
}

struct IdleState {
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

    fn lock(&self) -> MutexGuard<'_, IdleState> {
        // Every step leaves the queue consistent (inserts and removals), so use it after a panic.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn is_exempt(&self, peer: &Peer) -> bool {
        self.exempt.as_ref().is_some_and(|exempt| exempt(peer))
    }

    /// A place behind every connection that had one before.
    fn next_key(&self, handshake_done: bool) -> IdleKey {
        IdleKey { handshake_done, seq: self.next_seq.fetch_add(1, Ordering::Relaxed) }
    }

    /// Starts counting a connection (its state locked as `state`).
    fn count(&self, state: &mut ClockState) {
        if !state.counted {
            state.counted = true;
            self.idle.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Stops counting a connection (its state locked as `state`); its entry, if any, stays
    /// until the queue is next checked.
    fn uncount(&self, state: &mut ClockState) {
        if state.counted {
            state.counted = false;
            self.idle.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Moves `clock`'s entry (whose state is `state`) to the place its state says.
    fn place(queue: &mut IdleState, clock: &Arc<ConnectionClock>, state: &mut ClockState) {
        if let Some(old) = state.queued.take() {
            queue.queue.remove(&old);
        }
        queue.queue.insert(state.place, Arc::downgrade(clock));
        state.queued = Some(state.place);
    }

    /// Removes the entry of a connection (whose state is `state`).
    fn unplace(queue: &mut IdleState, state: &mut ClockState) {
        if let Some(old) = state.queued.take() {
            queue.queue.remove(&old);
        }
    }

    /// Closes the idlest connections, never `spare` (the one room is being made for), until
    /// the cap holds, bringing the entries it meets up to date on the way (see the module
    /// docs). Called with the queue locked and no connection's lock held.
    fn enforce(&self, queue: &mut IdleState, spare: *const ConnectionClock) {
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
struct Open(Arc<ConnectionClock>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.ended();
    }
}

// ---------------------------------------------------------------------------------------------
// Header read and idle timeouts
// ---------------------------------------------------------------------------------------------

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

struct ClockState {
    phase: Phase,
    /// Seen on a request: HTTP/2 bytes say nothing about a request starting.
    http2: bool,
    /// The connection task's waker, from its last read: woken when the deadline changes.
    reader: Option<Waker>,
    /// It counts against the cap: no request in flight, not exempt, open, not closed by it.
    counted: bool,
    /// Its place in the cap's order while it counts.
    place: IdleKey,
    /// Where its entry in the cap's queue is, if it has one (maybe behind `place`).
    queued: Option<IdleKey>,
    /// Its TLS client is exempt from the cap (decided at the end of the handshake).
    exempt: bool,
    /// The cap closed it: its stream reads as closed from now on.
    evicted: bool,
    /// The connection is gone; nothing puts it back in the queue.
    ended: bool,
}

/// What the stream may do at a read.
#[derive(Debug, PartialEq, Eq)]
enum ReadGate {
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
    closing: CancellationToken,
    state: Mutex<ClockState>,
}

impl ConnectionClock {
    fn new(
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

    fn lock(&self) -> MutexGuard<'_, ClockState> {
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
    fn admitted(self: &Arc<Self>) {
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
    fn handshake_done(self: &Arc<Self>, exempt: bool) {
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
    fn ended(&self) {
        let (queue, mut state) = self.lock_both();
        state.ended = true;
        if let Some((cap, mut queue)) = queue {
            cap.uncount(&mut state);
            IdleConnections::unplace(&mut queue, &mut state);
        }
    }

    /// A request was handed over: this connection's lock only (see the module docs).
    fn request_started(&self, http2: bool) {
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
    fn request_finished(self: &Arc<Self>) {
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
    fn bytes_read(&self) {
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
    fn read_gate(&self, waker: &Waker) -> ReadGate {
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
    fn count_closed(&self) {
        if let Some(cap) = &self.cap {
            cap.closed.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn describe(&self) -> &'static str {
        match self.lock().phase {
            Phase::First { .. } => "no request header within the header read timeout of accept",
            Phase::Header { .. } => "request header not complete within the header read timeout",
            Phase::Idle { .. } => "idle timeout",
            Phase::Busy(_) => "busy",
        }
    }
}

/// An axum-server acceptor adding the header read and idle timeouts and the connection cap
/// to each connection that `inner` (the TLS handshake) accepts.
#[derive(Clone, Debug)]
pub struct LimitAcceptor<A> {
    inner: A,
    header_read_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    max_http1_header_bytes: usize,
    cap: Option<Arc<IdleConnections>>,
}

type AcceptFuture<St, Sv> = Pin<Box<dyn Future<Output = io::Result<(St, Sv)>> + Send>>;

impl<A, I, S> Accept<I, S> for LimitAcceptor<A>
where
    A: Accept<I, S>,
    A::Stream: Send + 'static,
    A::Service: HasPeer + Send + 'static,
    A::Future: Send + 'static,
{
    type Stream = TimedIo<A::Stream>;
    type Service = TrackRequests<A::Service>;
    type Future = AcceptFuture<Self::Stream, Self::Service>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        // The clock starts before the TLS handshake, as in Go.
        let clock = Arc::new(ConnectionClock::new(
            Instant::now(),
            self.header_read_timeout,
            self.idle_timeout,
            self.cap.clone(),
        ));
        clock.admitted();
        let open = Open(clock.clone());
        let max_http1_header_bytes = self.max_http1_header_bytes;
        let cap = self.cap.clone();
        let handshake = self.inner.accept(stream, service);
        Box::pin(async move {
            let (stream, service) = tokio::select! {
                biased;
                () = clock.closing.cancelled() => {
                    clock.count_closed();
                    tracing::debug!("closing connection in its TLS handshake: idle connections at --max-connections");
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "closed in the TLS handshake to make room for a new connection (--max-connections)",
                    ));
                }
                accepted = handshake => accepted?,
            };
            let exempt = cap.is_some_and(|cap| cap.is_exempt(service.peer()));
            clock.handshake_done(exempt);
            let io = TimedIo { inner: stream, clock: clock.clone(), sleep: None, expired: false, _open: open };
            Ok((io, TrackRequests { inner: service, clock, max_http1_header_bytes }))
        })
    }
}

/// A connection's stream that reads as closed once the connection's read deadline passes or
/// the cap closes it.
///
/// End of file makes hyper close the connection as if the client had gone (HTTP/1.1 sends
/// TLS close_notify). axum-server owns hyper's connection future, so there is no way to call
/// its `graceful_shutdown` for one connection: an idle HTTP/2 connection is therefore closed
/// without a GOAWAY. Nothing is in flight on it by construction, so no request is lost that
/// the client had been answered for; a request the client sends in the same instant fails as
/// it would against Go's HTTP/1.1 idle close, and clients retry those.
pub struct TimedIo<T> {
    inner: T,
    clock: Arc<ConnectionClock>,
    /// Armed at the current deadline or before it (see `poll_read`); kept to
    /// avoid a new timer entry on every read.
    sleep: Option<Pin<Box<Sleep>>>,
    expired: bool,
    _open: Open,
}

impl<T: AsyncRead + Unpin> AsyncRead for TimedIo<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.expired {
            return Poll::Ready(Ok(()));
        }
        match this.clock.read_gate(cx.waker()) {
            ReadGate::Evicted => {
                this.expired = true;
                this.clock.count_closed();
                tracing::debug!("closing connection: the idlest when idle connections reached --max-connections");
                // End of file: hyper closes the connection as if the client had.
                return Poll::Ready(Ok(()));
            }
            ReadGate::Open(None) => {}
            ReadGate::Open(Some(deadline)) => {
                // The timer moves only to an earlier deadline. Each request
                // makes a later one (its idle and header deadlines), and
                // moving the timer there every time would be a timer-wheel
                // removal and insertion a request; left where it is, it
                // fires early now and then (every header read timeout, on a
                // busy connection), and is moved on when it does.
                let sleep = match &mut this.sleep {
                    Some(sleep) => {
                        if sleep.deadline() > deadline {
                            sleep.as_mut().reset(deadline);
                        }
                        sleep
                    }
                    slot => slot.insert(Box::pin(tokio::time::sleep_until(deadline))),
                };
                while sleep.as_mut().poll(cx).is_ready() {
                    if sleep.deadline() >= deadline || Instant::now() >= deadline {
                        this.expired = true;
                        tracing::debug!(reason = this.clock.describe(), "closing connection");
                        return Poll::Ready(Ok(()));
                    }
                    // Early: wait on for the deadline in force.
                    sleep.as_mut().reset(deadline);
                }
            }
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.clock.bytes_read();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TimedIo<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A connection's service marking each request in flight until its response body is done,
/// and refusing HTTP/1 request heads over the size limit.
///
/// The size check is needed because hyper's `max_buf_size` is a soft limit: hyper checks it
/// only between reads, and one read may fill all the spare capacity its buffer has grown to,
/// so a head of 1.1 MB sent at once is parsed and served under a 1 MiB limit. (hyper still
/// bounds its buffer at about twice the limit.) HTTP/2 needs no check: h2 counts the decoded
/// header list itself and answers 431.
#[derive(Clone)]
pub struct TrackRequests<S> {
    inner: S,
    clock: Arc<ConnectionClock>,
    /// Go's `MaxHeaderBytes + 4096`, on the request line and header lines as sent.
    max_http1_header_bytes: usize,
}

/// The size of an HTTP/1 request's line and header block as sent (give or take optional
/// whitespace), which Go's `MaxHeaderBytes` bounds.
fn http1_head_bytes<B>(request: &http::Request<B>) -> usize {
    let line = request.method().as_str().len() + displayed_len(request.uri()) + " HTTP/1.1\r\n ".len();
    let fields: usize = request.headers().iter().map(|(name, value)| name.as_str().len() + value.len() + 4).sum();
    line + fields + 2
}

/// The length of `value` as displayed, counted without building the string
/// (this runs on every HTTP/1.1 request).
fn displayed_len(value: &impl std::fmt::Display) -> usize {
    struct Count(usize);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = std::fmt::write(&mut count, format_args!("{value}"));
    count.0
}

/// Go's answer to an oversized request head; the connection is closed after it, as Go does.
fn header_too_large<B: From<&'static str>>() -> http::Response<B> {
    let mut response = http::Response::new(B::from("431 Request Header Fields Too Large"));
    *response.status_mut() = http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    response
}

/// One request in flight; its drop (response body finished or dropped, or the request
/// abandoned) ends it.
struct InFlight(Arc<ConnectionClock>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

impl<S, B, RB> tower::Service<http::Request<RB>> for TrackRequests<S>
where
    S: tower::Service<http::Request<RB>, Response = http::Response<B>>,
    B: From<&'static str>,
{
    type Response = http::Response<TrackedBody<B>>;
    type Error = S::Error;
    type Future = Tracked<S::Future, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<RB>) -> Self::Future {
        let http2 = request.version() == http::Version::HTTP_2;
        self.clock.request_started(http2);
        let in_flight = Some(InFlight(self.clock.clone()));
        let head_bytes = if http2 { 0 } else { http1_head_bytes(&request) };
        if head_bytes > self.max_http1_header_bytes {
            tracing::debug!(bytes = head_bytes, "request header too large");
            return Tracked { inner: None, refused: Some(header_too_large::<B>()), in_flight };
        }
        Tracked { inner: Some(self.inner.call(request)), refused: None, in_flight }
    }
}

pin_project_lite::pin_project! {
    /// The answer to a tracked request: the service's, or the refusal of a
    /// head too large; its body keeps the request in flight. A future of its
    /// own rather than a boxed one: one allocation less on every request.
    pub struct Tracked<F, B> {
        #[pin]
        inner: Option<F>,
        refused: Option<http::Response<B>>,
        in_flight: Option<InFlight>,
    }
}

impl<F, B, E> Future for Tracked<F, B>
where
    F: Future<Output = Result<http::Response<B>, E>>,
{
    type Output = Result<http::Response<TrackedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = match (this.inner.as_pin_mut(), this.refused.take()) {
            (Some(inner), _) => std::task::ready!(inner.poll(cx))?,
            (None, Some(refused)) => refused,
            // Polled again after it answered: nothing more to give.
            (None, None) => return Poll::Pending,
        };
        let in_flight = this.in_flight.take();
        Poll::Ready(Ok(response.map(|inner| TrackedBody { inner, _in_flight: in_flight })))
    }
}

/// A response body keeping its request in flight.
pub struct TrackedBody<B> {
    inner: B,
    _in_flight: Option<InFlight>,
}

impl<B: Body + Unpin> Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: Duration = Duration::from_secs(32);
    const IDLE: Duration = Duration::from_secs(90);

    fn waker() -> Waker {
        futures::task::noop_waker()
    }

    /// The read deadline of an open connection.
    fn deadline(clock: &ConnectionClock) -> Option<Instant> {
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

    // ---- the connection cap ----

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

    #[test]
    fn http1_head_bytes_counts_the_head_as_sent() {
        let request = http::Request::get("/apis?watch=1")
            .header("host", "localhost")
            .header("x-remote-group", "system:masters")
            .body(())
            .unwrap();
        let sent = "GET /apis?watch=1 HTTP/1.1\r\nhost: localhost\r\nx-remote-group: system:masters\r\n\r\n";
        let counted = http1_head_bytes(&request);
        assert!(counted >= sent.len() && counted <= sent.len() + 2, "{counted} for {}", sent.len());
    }

    #[test]
    fn limits_come_from_the_flags() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            limits: ConnectionLimits,
        }
        let cli = Cli::try_parse_from(["x", "--http-header-read-timeout", "2.5", "--max-connections", "7"]).unwrap();
        let limits = cli.limits;
        assert_eq!(limits.header_read_timeout, Duration::from_millis(2500));
        assert_eq!(limits.idle_timeout, Duration::from_secs(90));
        assert_eq!(limits.max_header_bytes, 1 << 20);
        assert_eq!(limits.max_connections, 7);
    }
}
