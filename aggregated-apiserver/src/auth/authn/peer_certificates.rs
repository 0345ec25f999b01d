//! What authentication reads of the connection: the certificates the client
//! presented in its TLS handshake. The server's TLS acceptor
//! ([`crate::server::tls`]) records them; the authenticators verify them.

use std::sync::Arc;

use rustls::pki_types::CertificateDer;

/// The client's certificate chain (end-entity first) as presented in the TLS handshake, not
/// verified beyond syntax and proof of key possession; `None` when the client sent none. Added as
/// a request extension to every request of the connection by the server's TLS acceptor.
#[derive(Clone, Debug, Default)]
pub struct PeerCertificates(pub Option<Arc<Vec<CertificateDer<'static>>>>);

impl PeerCertificates {
    /// The client's end-entity certificate, if any.
    pub fn end_entity(&self) -> Option<&CertificateDer<'static>> {
        self.0.as_ref().and_then(|chain| chain.first())
    }

    /// The certificates after the end-entity one (possibly empty).
    pub fn intermediates(&self) -> &[CertificateDer<'static>] {
        self.0.as_ref().and_then(|chain| chain.get(1..)).unwrap_or(&[])
    }
}
