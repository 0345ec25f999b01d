//! How this server reaches other servers over TLS (admission and audit
//! webhooks, etcd, the cluster's API): trusting what kube-apiserver's Go
//! clients trust, and refusing what they refuse in their words.
//!
//! rustls' own verifier (webpki) is stricter than Go's `crypto/x509` in ways
//! that break common cluster setups: it refuses a server whose certificate is
//! itself the trusted one when that certificate says `CA:TRUE` (what
//! `openssl req -x509` makes, the way most webhook tutorials make one), and a
//! leaf marked `CA:TRUE` under a CA. So every outbound client here verifies
//! with [`GoVerifier`], which follows Go's `Verify` (see `chain.rs`).

mod certificate;
mod chain;
mod hostname;
mod kube_client;
mod verifier;

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub use kube_client::kube_client;
pub use verifier::{go_tls_error, GoVerifier, Roots};

/// A TLS client configuration trusting `roots` as Go does, presenting
/// `identity` (a certificate chain and its key) when given, offering `alpn`.
pub fn client_config(
    roots: Roots,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    alpn: &[&[u8]],
) -> anyhow::Result<rustls::ClientConfig> {
    let verifier = Arc::new(GoVerifier::new(roots)?);
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => builder.with_client_auth_cert(chain, key)?,
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}
