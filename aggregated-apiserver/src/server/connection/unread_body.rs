//! Request bodies left unread by an answer, as Go's HTTP/1.1 server treats
//! them: before the answer goes out, up to 256 KiB of what remains is read
//! and dropped so the connection can serve the next request; a body larger
//! than that is not read, and the answer says `Connection: close`.
//!
//! Without this, an answer given before the body is read (405, 415, 404, a
//! 400 for a missing name, a 504 at the deadline) leaves bytes on the wire
//! that are not a request: the connection has to close, and a client that
//! was not told (no `Connection: close`) fails the next request it sends on
//! it.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::response::Response;
use bytes::Bytes;
use futures::future::{BoxFuture, Either};
use http::header::{HeaderValue, CONNECTION};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::oneshot;
use tower::Service;

/// How much of an unread body is read and dropped to keep the connection
/// (Go's `maxPostHandlerReadBytes`).
pub const MAX_DRAINED_BYTES: u64 = 256 << 10;

/// How long the rest of a body may take to arrive before the connection is
/// closed instead.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// A request body that, when dropped before its end, hands what remains to
/// [`DrainUnreadBody`].
pub struct TrackedBody {
    /// None only once handed on.
    inner: Option<Incoming>,
    unread: Option<oneshot::Sender<Incoming>>,
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let Some(inner) = self.inner.as_mut() else { return Poll::Ready(None) };
        let polled = Pin::new(inner).poll_frame(cx);
        if let Poll::Ready(None | Some(Err(_))) = polled {
            // Read to its end (or broken, and hyper closes the connection).
            self.unread = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Incoming::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.as_ref().map_or_else(|| SizeHint::with_exact(0), Incoming::size_hint)
    }
}

impl Drop for TrackedBody {
    fn drop(&mut self) {
        if let (Some(unread), Some(rest)) = (self.unread.take(), self.inner.take()) {
            if !rest.is_end_stream() {
                let _ = unread.send(rest);
            }
        }
    }
}

/// A service whose HTTP/1.1 requests' unread bodies are drained, or their
/// connections closed with notice, after `inner` answers.
#[derive(Clone, Debug)]
pub struct DrainUnreadBody<S> {
    inner: S,
}

impl<S> DrainUnreadBody<S> {
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S> Service<http::Request<Incoming>> for DrainUnreadBody<S>
where
    S: Service<http::Request<TrackedBody>, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Incoming>) -> Self::Future {
        // HTTP/2 ends an unread body's stream alone; a request without a body
        // leaves nothing on the wire.
        if req.version() > http::Version::HTTP_11 || req.body().is_end_stream() {
            return Either::Left(self.inner.call(req.map(|inner| TrackedBody { inner: Some(inner), unread: None })));
        }
        let (unread, mut rest) = oneshot::channel();
        let answer = self.inner.call(req.map(|inner| TrackedBody { inner: Some(inner), unread: Some(unread) }));
        Either::Right(Box::pin(async move {
            let mut resp = answer.await?;
            // Dropped unread: drain it, unless the connection closes anyway.
            // (Read to its end, or still held by a streaming answer: nothing
            // to do.)
            let closing = resp.headers().get(CONNECTION).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
            if let (false, Ok(body)) = (closing, rest.try_recv()) {
                if let Some(body) = drain(body).await {
                    resp.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
                    tokio::spawn(linger(body));
                }
            }
            Ok(resp)
        }))
    }
}

/// Reads and drops `body` to its end, if that is at most
/// [`MAX_DRAINED_BYTES`] arriving within [`DRAIN_TIMEOUT`]; what is left of
/// it when not.
async fn drain(mut body: Incoming) -> Option<Incoming> {
    if body.size_hint().lower() > MAX_DRAINED_BYTES {
        return Some(body);
    }
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, discard(&mut body, MAX_DRAINED_BYTES)).await;
    match drained {
        Ok(Some(true)) => None,
        _ => Some(body),
    }
}

/// How long, and how much more, the rest of a body too large to drain is
/// still read after the answer that closes its connection: the client is
/// then still sending, and a connection closed with unread bytes is reset,
/// which can take the answer with it before the client reads it (Go's
/// server waits likewise before it closes).
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: u64 = 8 << 20;

/// Reads and drops the rest of `body` for a while, so the connection closes
/// after the client has read the answer rather than under it.
async fn linger(mut body: Incoming) {
    let _ = tokio::time::timeout(LINGER, discard(&mut body, LINGER_BYTES)).await;
}

/// Reads and drops `body` to its end (Some(true)), unless it holds more than
/// `limit` bytes (Some(false)) or breaks (None).
async fn discard(body: &mut Incoming, limit: u64) -> Option<bool> {
    let mut read = 0u64;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await {
        if let Some(data) = frame.ok()?.data_ref() {
            read += data.len() as u64;
            if read > limit {
                return Some(false);
            }
        }
    }
    Some(true)
}
