//! The stream ([`TimedIo`]) that reads as closed once its connection's read deadline passes
//! or the cap closes the connection, both as its [`ConnectionClock`] says: this is where a
//! connection is closed from.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::clock::{ConnectionClock, Open, ReadGate};

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
