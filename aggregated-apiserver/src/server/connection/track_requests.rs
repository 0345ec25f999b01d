//! The request tracking ([`TrackRequests`]): each connection's service, marking every
//! request in flight on the connection's clock until its response body is done, and
//! refusing HTTP/1 request heads over the size limit. Apart because it sits on the request
//! path, where the rest sits on the connection's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::body::{Body, Frame, SizeHint};

use super::clock::ConnectionClock;

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
    pub(super) inner: S,
    pub(super) clock: Arc<ConnectionClock>,
    /// Go's `MaxHeaderBytes + 4096`, on the request line and header lines as sent.
    pub(super) max_http1_header_bytes: usize,
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
}
