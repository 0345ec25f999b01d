//! What authentication knows of the client at the other end of a request's
//! connection: the certificates it presented in its TLS handshake, which the
//! server's TLS acceptor ([`crate::server::tls`]) records and the
//! authenticators verify, and the bearer token it last authenticated with.

use std::sync::{Arc, Mutex};

use rustls::pki_types::CertificateDer;
use tokio::time::Instant;

use super::UserInfo;

/// A connection's client, added as a request extension to every request of
/// the connection by the server's TLS acceptor. Cloning it is one reference
/// count: every request of the connection shares it.
#[derive(Clone, Debug, Default)]
pub struct Peer(Arc<PeerState>);

#[derive(Debug, Default)]
struct PeerState {
    /// The client's certificate chain (end-entity first) as presented, not
    /// verified beyond syntax and proof of key possession; `None` when the
    /// client sent none.
    chain: Option<Arc<Vec<CertificateDer<'static>>>>,
    token: RememberedToken,
}

impl Peer {
    /// A client that presented `chain` (None or empty: no certificate).
    pub fn new(chain: Option<Vec<CertificateDer<'static>>>) -> Self {
        let chain = chain.filter(|chain| !chain.is_empty()).map(Arc::new);
        Self(Arc::new(PeerState { chain, token: RememberedToken::default() }))
    }

    /// The presented chain, shared: the front-proxy check remembers a verified
    /// chain by its identity for as long as the connection holds it.
    pub fn chain(&self) -> Option<&Arc<Vec<CertificateDer<'static>>>> {
        self.0.chain.as_ref()
    }

    /// The client's end-entity certificate, if any.
    pub fn end_entity(&self) -> Option<&CertificateDer<'static>> {
        self.chain().and_then(|chain| chain.first())
    }

    /// The certificates after the end-entity one (possibly empty).
    pub fn intermediates(&self) -> &[CertificateDer<'static>] {
        self.chain().and_then(|chain| chain.get(1..)).unwrap_or(&[])
    }

    pub(super) fn remembered_token(&self) -> &RememberedToken {
        &self.0.token
    }
}

/// The `Authorization` header a connection's last token-authenticated
/// request sent, the user it was and until when the token cache vouches for
/// it. A client sends the same token on every request of a keep-alive
/// connection: the next request with the same header bytes is that user
/// without hashing the token for the shared cache (a salted SHA-256 of ~1 KB,
/// a few percent of a GET) or taking the cache's lock. Only this connection's
/// client, who sent the token, can reach it; the shared cache still holds no
/// token, only its hash.
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
