//! The connection limits as flags ([`ConnectionLimits`]) and what they configure: hyper's
//! header size limits and HTTP/2 settings, the TLS handshake timeout, the cap's queue and
//! the acceptor. Apart from the machinery they set up, which knows nothing of flags.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::{Exempt, IdleConnections, LimitAcceptor};
use crate::apimachinery::duration::parse_seconds;

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
            // The header timeouts are ours (see the `connection` module docs); hyper's would also need a timer.
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

#[cfg(test)]
mod tests {
    use super::*;

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
