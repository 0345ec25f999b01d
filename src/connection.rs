//! Connection-level protections, after k8s.io/apiserver's secure serving
//! (`pkg/server/secure_serving.go`: `ReadHeaderTimeout: 32s`, `IdleTimeout: 90s`,
//! `MaxHeaderBytes: 1<<20`, and its HTTP/2 settings).
//!
//! Without them a client can hold a connection, and the file descriptor and buffers behind
//! it, forever: by trickling a request header, by never sending one, or simply by staying
//! connected. Each protection is a small piece plugged into axum-server:
//!
//! * [`ConnectionLimits::configure_http`]: header size limits and HTTP/2 settings on hyper's
//!   builder.
//! * [`LimitConnections`]: a make-service whose `poll_ready` waits for a free connection slot.
//!   axum-server asks it before spawning each connection, so at the cap the accept loop stops
//!   and further connections wait in the kernel's listen backlog (what Go's
//!   `netutil.LimitListener` does) rather than being accepted and closed: a client retrying
//!   on a refused connection would only add load, and a waiting one is served as soon as
//!   another connection ends.
//! * [`LimitAcceptor`]: wraps each accepted connection's stream in [`TimedIo`] and its
//!   service in [`TrackRequests`], which share one [`ConnectionClock`] deciding when the
//!   connection has been quiet too long; [`TrackRequests`] also answers 431 to HTTP/1 request
//!   heads over the limit that hyper's soft buffer limit let through.
//!
//! Why not hyper's own `header_read_timeout`: hyper (1.x, `proto/h1/conn.rs`) starts it when
//! it begins to read a request head, which on a keep-alive connection is right after the
//! previous response, so an idle keep-alive connection would be closed after 32 s instead of
//! 90 s, and it does nothing for HTTP/2. Go's rules are kept here instead: the first
//! request's header must arrive within the header timeout of accept (TLS handshake
//! included); afterwards the idle timeout covers the wait for the next request's first
//! bytes, and from those bytes on the header timeout applies again (HTTP/1.1). On HTTP/2
//! only requests count: pings or a HEADERS frame trickled in pieces do not keep an idle
//! connection open, as in Go's HTTP/2 server, whose idle timer too runs while no stream is
//! open.
//!
//! A connection is busy while any request on it is in flight: from hyper handing the
//! request to the service until the response body is finished or dropped. So a long watch
//! is never cut by these timeouts.
//!
//! Closing: when a deadline passes, the stream reports end of file to hyper, which closes
//! the connection as if the client had gone (HTTP/1.1 sends TLS close_notify). axum-server
//! owns hyper's connection future, so there is no way to call its `graceful_shutdown` for one
//! connection: an idle HTTP/2 connection is therefore closed without a GOAWAY. Nothing is in
//! flight on it by construction, so no request is lost that the client had been answered
//! for; a request the client sends in the same instant fails as it would against Go's
//! HTTP/1.1 idle close, and clients retry those.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum_server::accept::Accept;
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::PollSemaphore;

use crate::config::ServeArgs;

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

/// The connection limits of the HTTPS server, from the `serve` flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A connection must deliver a whole request header within this long: of accept for the
    /// first request, of its first bytes for later ones. Zero: no limit.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight is closed after this long. Zero: no limit.
    pub idle_timeout: Duration,
    /// Largest request header, for HTTP/1.1 (431 beyond) and HTTP/2 (SETTINGS_MAX_HEADER_LIST_SIZE).
    pub max_header_bytes: usize,
    /// Connections served at once; zero: no limit.
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

impl From<&ServeArgs> for ConnectionLimits {
    fn from(args: &ServeArgs) -> Self {
        Self {
            header_read_timeout: args.http_header_read_timeout,
            idle_timeout: args.http_idle_timeout,
            max_header_bytes: args.max_request_header_bytes,
            max_connections: args.max_connections,
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

    /// Wraps the make-service so that at most `max_connections` connections are served at once.
    pub fn limit_connections<M>(&self, inner: M) -> LimitConnections<M> {
        let semaphore = (self.max_connections > 0)
            .then(|| PollSemaphore::new(Arc::new(Semaphore::new(self.max_connections.min(Semaphore::MAX_PERMITS)))));
        LimitConnections { inner, semaphore, permit: None }
    }

    /// Wraps the acceptor (the TLS handshake) so that each connection gets the timeouts.
    pub fn acceptor<A>(&self, inner: A) -> LimitAcceptor<A> {
        LimitAcceptor {
            inner,
            header_read_timeout: nonzero(self.header_read_timeout),
            idle_timeout: nonzero(self.idle_timeout),
            max_http1_header_bytes: self.max_header_bytes.saturating_add(HTTP1_BUFFER_SLACK),
        }
    }
}

fn nonzero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

// ---------------------------------------------------------------------------------------------
// Connection cap
// ---------------------------------------------------------------------------------------------

/// A make-service that is ready only while a connection slot is free. The slot is held by
/// the connection's service ([`Permitted`]) and all its clones, which hyper drops when the
/// connection ends (or axum-server when the TLS handshake fails).
pub struct LimitConnections<M> {
    inner: M,
    semaphore: Option<PollSemaphore>,
    permit: Option<OwnedSemaphorePermit>,
}

impl<M: Clone> Clone for LimitConnections<M> {
    fn clone(&self) -> Self {
        // A permit belongs to the poll_ready that acquired it, never to a clone.
        Self { inner: self.inner.clone(), semaphore: self.semaphore.clone(), permit: None }
    }
}

impl<M, T> tower::Service<T> for LimitConnections<M>
where
    M: tower::Service<T>,
    M::Future: Send + 'static,
{
    type Response = Permitted<M::Response>;
    type Error = M::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if let (Some(semaphore), None) = (&mut self.semaphore, &self.permit) {
            match semaphore.poll_acquire(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(permit) => {
                    // None only if the semaphore were closed, which nothing does; then serve
                    // rather than stop accepting forever.
                    self.permit = permit;
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, target: T) -> Self::Future {
        let permit = self.permit.take().map(Arc::new);
        let make = self.inner.call(target);
        Box::pin(async move { make.await.map(|inner| Permitted { inner, _permit: permit }) })
    }
}

/// A connection's service holding its connection slot.
#[derive(Clone, Debug)]
pub struct Permitted<S> {
    inner: S,
    _permit: Option<Arc<OwnedSemaphorePermit>>,
}

impl<S, R> tower::Service<R> for Permitted<S>
where
    S: tower::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.inner.call(request)
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
}

/// The shared state of one connection deciding its read deadline.
pub struct ConnectionClock {
    header_read_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    state: Mutex<ClockState>,
}

impl ConnectionClock {
    fn new(accepted: Instant, header_read_timeout: Option<Duration>, idle_timeout: Option<Duration>) -> Self {
        let deadline = header_read_timeout.map(|t| accepted + t);
        Self {
            header_read_timeout,
            idle_timeout,
            state: Mutex::new(ClockState { phase: Phase::First { deadline }, http2: false, reader: None }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ClockState> {
        // The state stays consistent across a panic (plain assignments), so use it anyway.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn request_started(&self, http2: bool) {
        let mut state = self.lock();
        state.http2 |= http2;
        state.phase = match state.phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            _ => Phase::Busy(1),
        };
    }

    fn request_finished(&self) {
        let mut state = self.lock();
        state.phase = match state.phase {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Idle { since: Instant::now() },
        };
        // The connection task may be waiting on a read with no deadline: have it set one.
        if let Some(reader) = &state.reader {
            reader.wake_by_ref();
        }
    }

    /// Application bytes arrived.
    fn bytes_read(&self) {
        let mut state = self.lock();
        if let Phase::Idle { .. } = state.phase {
            if !state.http2 {
                state.phase = Phase::Header { deadline: self.header_read_timeout.map(|t| Instant::now() + t) };
            }
        }
    }

    /// The current read deadline, remembering `waker` for [`Self::request_finished`].
    fn deadline(&self, waker: &Waker) -> Option<Instant> {
        let mut state = self.lock();
        match &mut state.reader {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
        match state.phase {
            Phase::First { deadline } | Phase::Header { deadline } => deadline,
            Phase::Busy(_) => None,
            Phase::Idle { since } => self.idle_timeout.map(|t| since + t),
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

/// An axum-server acceptor adding the header read and idle timeouts to each connection that
/// `inner` (the TLS handshake) accepts.
#[derive(Clone, Debug)]
pub struct LimitAcceptor<A> {
    inner: A,
    header_read_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    max_http1_header_bytes: usize,
}

type AcceptFuture<St, Sv> = Pin<Box<dyn Future<Output = io::Result<(St, Sv)>> + Send>>;

impl<A, I, S> Accept<I, S> for LimitAcceptor<A>
where
    A: Accept<I, S>,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
    A::Future: Send + 'static,
{
    type Stream = TimedIo<A::Stream>;
    type Service = TrackRequests<A::Service>;
    type Future = AcceptFuture<Self::Stream, Self::Service>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        // The clock starts before the TLS handshake, as in Go.
        let clock = Arc::new(ConnectionClock::new(Instant::now(), self.header_read_timeout, self.idle_timeout));
        let max_http1_header_bytes = self.max_http1_header_bytes;
        let handshake = self.inner.accept(stream, service);
        Box::pin(async move {
            let (stream, service) = handshake.await?;
            let io = TimedIo { inner: stream, clock: clock.clone(), sleep: None, expired: false };
            Ok((io, TrackRequests { inner: service, clock, max_http1_header_bytes }))
        })
    }
}

/// A connection's stream that reads as closed once the connection's read deadline passes.
pub struct TimedIo<T> {
    inner: T,
    clock: Arc<ConnectionClock>,
    /// Armed at the current deadline; kept to avoid a new timer entry on every read.
    sleep: Option<Pin<Box<Sleep>>>,
    expired: bool,
}

impl<T: AsyncRead + Unpin> AsyncRead for TimedIo<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.expired {
            return Poll::Ready(Ok(()));
        }
        if let Some(deadline) = this.clock.deadline(cx.waker()) {
            let sleep = match &mut this.sleep {
                Some(sleep) => {
                    if sleep.deadline() != deadline {
                        sleep.as_mut().reset(deadline);
                    }
                    sleep
                }
                slot => slot.insert(Box::pin(tokio::time::sleep_until(deadline))),
            };
            if sleep.as_mut().poll(cx).is_ready() {
                this.expired = true;
                tracing::debug!(reason = this.clock.describe(), "closing connection");
                // End of file: hyper closes the connection as if the client had.
                return Poll::Ready(Ok(()));
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
    let line = request.method().as_str().len() + request.uri().to_string().len() + " HTTP/1.1\r\n ".len();
    let fields: usize = request.headers().iter().map(|(name, value)| name.as_str().len() + value.len() + 4).sum();
    line + fields + 2
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
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: From<&'static str> + Send + 'static,
{
    type Response = http::Response<TrackedBody<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<RB>) -> Self::Future {
        let http2 = request.version() == http::Version::HTTP_2;
        self.clock.request_started(http2);
        let in_flight = InFlight(self.clock.clone());
        if !http2 && http1_head_bytes(&request) > self.max_http1_header_bytes {
            tracing::debug!(bytes = http1_head_bytes(&request), "request header too large");
            let response = header_too_large::<B>().map(|inner| TrackedBody { inner, _in_flight: in_flight });
            return Box::pin(std::future::ready(Ok(response)));
        }
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|inner| TrackedBody { inner, _in_flight: in_flight }))
        })
    }
}

/// A response body keeping its request in flight.
pub struct TrackedBody<B> {
    inner: B,
    _in_flight: InFlight,
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

    #[tokio::test]
    async fn the_first_request_has_the_header_timeout_from_accept() {
        let accepted = Instant::now();
        let clock = ConnectionClock::new(accepted, Some(HEADER), Some(IDLE));
        assert_eq!(clock.deadline(&waker()), Some(accepted + HEADER));
        // Bytes of the first request do not move it.
        clock.bytes_read();
        assert_eq!(clock.deadline(&waker()), Some(accepted + HEADER));
        clock.request_started(false);
        assert_eq!(clock.deadline(&waker()), None);
    }

    #[tokio::test]
    async fn http1_idle_then_header_timeout() {
        let clock = ConnectionClock::new(Instant::now(), Some(HEADER), Some(IDLE));
        clock.request_started(false);
        let finished = Instant::now();
        clock.request_finished();
        let idle = clock.deadline(&waker()).expect("idle deadline");
        assert!(idle >= finished + IDLE && idle <= Instant::now() + IDLE);
        let first_bytes = Instant::now();
        clock.bytes_read();
        let header = clock.deadline(&waker()).expect("header deadline");
        assert!(header >= first_bytes + HEADER && header <= Instant::now() + HEADER);
        // More bytes do not extend it: a trickled header is still bounded.
        clock.bytes_read();
        assert_eq!(clock.deadline(&waker()), Some(header));
    }

    #[tokio::test]
    async fn http2_bytes_do_not_end_idleness_and_requests_in_flight_have_no_deadline() {
        let clock = ConnectionClock::new(Instant::now(), Some(HEADER), Some(IDLE));
        clock.request_started(true);
        clock.request_started(true);
        clock.request_finished();
        assert_eq!(clock.deadline(&waker()), None, "one stream still open");
        clock.request_finished();
        let idle = clock.deadline(&waker()).expect("idle deadline");
        clock.bytes_read();
        assert_eq!(clock.deadline(&waker()), Some(idle));
    }

    #[tokio::test]
    async fn zero_timeouts_mean_none() {
        let clock = ConnectionClock::new(Instant::now(), None, None);
        assert_eq!(clock.deadline(&waker()), None);
        clock.request_started(false);
        clock.request_finished();
        assert_eq!(clock.deadline(&waker()), None);
        clock.bytes_read();
        assert_eq!(clock.deadline(&waker()), None);
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
            serve: ServeArgs,
        }
        let cli = Cli::try_parse_from(["x", "--http-header-read-timeout", "2.5", "--max-connections", "7"]).unwrap();
        let limits = ConnectionLimits::from(&cli.serve);
        assert_eq!(limits.header_read_timeout, Duration::from_millis(2500));
        assert_eq!(limits.idle_timeout, Duration::from_secs(90));
        assert_eq!(limits.max_header_bytes, 1 << 20);
        assert_eq!(limits.max_connections, 7);
    }
}
