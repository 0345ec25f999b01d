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

mod clock;
mod limits;
mod timed_io;
mod track_requests;
mod unread_body;

pub use clock::{ConnectionClock, Exempt, IdleConnections};
pub use limits::ConnectionLimits;
pub use timed_io::TimedIo;
pub use track_requests::TrackRequests;
pub use unread_body::{DrainUnreadBody, TrackedBody};

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum_server::accept::Accept;
use tokio::time::Instant;

use self::clock::Open;
use crate::auth::authn::peer::Peer;

/// An accepted connection's service that knows the client certificates its TLS handshake saw
/// (`crate::server::tls::WithPeer`).
pub trait HasPeer {
    /// The client's certificate chain as presented (not verified).
    fn peer(&self) -> &Peer;
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
