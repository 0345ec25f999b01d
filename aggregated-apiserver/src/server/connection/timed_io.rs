//! The timed I/O: each connection's [`ConnectionClock`] (where the connection is in its
//! life, the read deadline that follows, and its state in the cap) and the stream
//! ([`TimedIo`]) that reads as closed once that deadline passes or the cap closes the
//! connection. Apart because this is where a connection is closed from; the clock is shared
//! with the request tracking and the cap, which move it on.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

use super::idle_connections::{IdleConnections, IdleKey, IdleState, Open};

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

    fn describe(&self) -> &'static str {
        match self.lock().phase {
            Phase::First { .. } => "no request header within the header read timeout of accept",
            Phase::Header { .. } => "request header not complete within the header read timeout",
            Phase::Idle { .. } => "idle timeout",
            Phase::Busy(_) => "busy",
        }
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
    pub(super) inner: T,
    pub(super) clock: Arc<ConnectionClock>,
    /// Armed at the current deadline or before it (see `poll_read`); kept to
    /// avoid a new timer entry on every read.
    pub(super) sleep: Option<Pin<Box<Sleep>>>,
    pub(super) expired: bool,
    pub(super) _open: Open,
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
}
