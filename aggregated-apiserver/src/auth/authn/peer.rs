//! What the server knows of the client at the other end of a request's
//! connection: its address (auditing's source IP), the certificates it
//! presented in its TLS handshake, which the server's TLS acceptor
//! ([`crate::server::tls`]) records and the authenticators verify; when they
//! were last verified as the front proxy's; and the bearer token it last
//! authenticated with.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use tokio::time::Instant;

use super::UserInfo;

/// A connection's client, added as a request extension to every request of
/// the connection by the server's TLS acceptor. Cloning it is one reference
/// count: every request of the connection shares it.
///
/// The address travels here rather than as axum's `ConnectInfo`, an
/// extension of its own: each extension is a box and a slot in the request's
/// map, whose first table holds three; a fourth entry makes it allocate a
/// larger one and move the entries over.
#[derive(Clone, Debug, Default)]
pub struct Peer(Arc<PeerState>);

#[derive(Debug, Default)]
struct PeerState {
    /// The address of the connection's other end; None for a request made
    /// without a connection (tests).
    remote: Option<SocketAddr>,
    /// The client's certificate chain (end-entity first) as presented, not
    /// verified beyond syntax and proof of key possession; empty when the
    /// client sent none.
    chain: Vec<CertificateDer<'static>>,
    front_proxy: VerifiedFrontProxy,
    token: RememberedToken,
}

impl Peer {
    /// A client at `remote` that presented `chain` (None or empty: no certificate).
    pub fn new(remote: Option<SocketAddr>, chain: Option<Vec<CertificateDer<'static>>>) -> Self {
        Self(Arc::new(PeerState {
            remote,
            chain: chain.unwrap_or_default(),
            front_proxy: VerifiedFrontProxy::default(),
            token: RememberedToken::default(),
        }))
    }

    /// The address of the connection's other end.
    pub fn remote(&self) -> Option<SocketAddr> {
        self.0.remote
    }

    /// The client's end-entity certificate, if any.
    pub fn end_entity(&self) -> Option<&CertificateDer<'static>> {
        self.0.chain.first()
    }

    /// The certificates after the end-entity one (possibly empty).
    pub fn intermediates(&self) -> &[CertificateDer<'static>] {
        self.0.chain.get(1..).unwrap_or(&[])
    }

    pub(super) fn verified_front_proxy(&self) -> &VerifiedFrontProxy {
        &self.0.front_proxy
    }

    pub(super) fn remembered_token(&self) -> &RememberedToken {
        &self.0.token
    }
}

/// When the connection's certificate was last verified as the front proxy's
/// (the aggregator's), and by which request-header configuration.
///
/// Why: every request the aggregator proxies comes with its certificate, and
/// verifying the chain (a signature check, and parsing the certificate for its
/// common name) costs more than the rest of a GET (measured:
/// docs/performance.md, "Authentication and authorization lookups"). A
/// connection's chain cannot change and a new request-header CA or
/// allowed-name list is a new configuration, so only time can change the
/// answer: it holds for a TTL. Atomics rather than a lock: the aggregator
/// multiplexes every proxied request over a few HTTP/2 connections, read by
/// every worker thread at once and written once a TTL.
#[derive(Debug, Default)]
pub(super) struct VerifiedFrontProxy {
    /// The configuration that verified it (0: none has).
    configuration: AtomicU64,
    /// When, in milliseconds since [`CLOCK_BASE`].
    at_ms: AtomicU64,
}

/// What [`VerifiedFrontProxy`] counts its milliseconds from.
static CLOCK_BASE: LazyLock<std::time::Instant> = LazyLock::new(std::time::Instant::now);

fn millis_of(at: std::time::Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(*CLOCK_BASE).as_millis()).unwrap_or(u64::MAX)
}

impl VerifiedFrontProxy {
    /// Whether `configuration` verified the certificate less than `ttl` before `now`.
    pub(super) fn holds(&self, configuration: u64, now: std::time::Instant, ttl: Duration) -> bool {
        // Read in the order opposite to the writes: a time read after its
        // configuration is that configuration's, or later.
        configuration != 0
            && self.configuration.load(Ordering::Acquire) == configuration
            && millis_of(now).saturating_sub(self.at_ms.load(Ordering::Acquire)) < ttl.as_millis() as u64
    }

    /// Remembers that `configuration` verified the certificate at `now`.
    pub(super) fn remember(&self, configuration: u64, now: std::time::Instant) {
        self.at_ms.store(millis_of(now), Ordering::Release);
        self.configuration.store(configuration, Ordering::Release);
    }
}

/// The `Authorization` header a connection's last token-authenticated
/// request sent, the user it was and until when the token cache vouches for
/// it. A client sends the same token on every request of a keep-alive
/// connection: the next request with the same header bytes is that user
/// without hashing the token for the shared cache (a salted SHA-256 of ~1 KB)
/// or taking the cache's lock. Only this connection's client, who sent the
/// token, can reach it; the shared cache still holds no token, only its hash.
#[derive(Default)]
pub(super) struct RememberedToken(Mutex<Option<Remembered>>);

struct Remembered {
    header: Box<[u8]>,
    user: Arc<UserInfo>,
    until: Instant,
}

impl std::fmt::Debug for RememberedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.write_str("RememberedToken")
    }
}

impl RememberedToken {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Remembered>> {
        // Replaced whole under the lock: a poisoned one is still consistent.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The user of `header` if it is the remembered one and the cache's answer
    /// for it has not expired at `now`.
    pub(super) fn user(&self, header: &[u8], now: Instant) -> Option<Arc<UserInfo>> {
        let remembered = self.lock();
        let remembered = remembered.as_ref()?;
        (now < remembered.until && *remembered.header == *header).then(|| remembered.user.clone())
    }

    /// Remembers that `header` is `user` until `until`, in place of what was remembered.
    pub(super) fn remember(&self, header: &[u8], user: &Arc<UserInfo>, until: Instant) {
        let mut remembered = self.lock();
        match remembered.as_mut() {
            Some(same) if *same.header == *header => {
                same.user = user.clone();
                same.until = until;
            }
            _ => *remembered = Some(Remembered { header: header.into(), user: user.clone(), until }),
        }
    }
}
