//! TLS for the aggregated API server.
//!
//! * A certificate resolver that follows the serving cert/key files on disk ([`ReloadingCert`]).
//! * An optional client-certificate verifier that requests, but does not require or chain-verify,
//!   client certificates ([`DeferredClientCertVerifier`]); chain verification is done later by the
//!   authenticator, which needs to know *which* CA signed the certificate.
//! * An axum-server acceptor that hands the peer's certificate chain to every request of the
//!   connection as the [`Peer`] extension ([`PeerCertAcceptor`], [`serve_tls`]).
//!
//! The development certificates served when no pair is given are made in
//! [`crate::server::dev_certs`].
//!
//! Everything here uses rustls' `ring` provider explicitly, so nothing depends on the process-wide
//! default provider.

use std::convert::Infallible;
use std::fmt;
use std::fs;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, RwLock, Weak};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::{ensure, Context as _};
use axum::response::Response;
use axum_server::accept::{Accept, DefaultAcceptor, NoDelayAcceptor};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use http::Request;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ParsedCertificate, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName as TlsDistinguishedName, ServerConfig, SignatureScheme};
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;
use tower::Service;
use x509_parser::certificate::X509Certificate;

use crate::auth::authn::peer::Peer;
use crate::server::connection::{ConnectionLimits, DrainUnreadBody, HasPeer, IdleConnections, TrackedBody};

pub(crate) fn ring_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

pub(crate) fn parse_x509<'a>(der: &'a CertificateDer<'_>) -> anyhow::Result<X509Certificate<'a>> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der.as_ref()).context("parsing X.509 certificate")?;
    ensure!(rest.is_empty(), "trailing data after X.509 certificate");
    Ok(cert)
}

// ---------------------------------------------------------------------------------------------
// Serving certificate with reload
// ---------------------------------------------------------------------------------------------

/// Parses a PEM certificate chain and PEM private key into a [`CertifiedKey`], refusing a key that
/// does not belong to the (first) certificate.
pub(crate) fn certified_key_from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> anyhow::Result<CertifiedKey> {
    let chain =
        CertificateDer::pem_slice_iter(cert_pem).collect::<Result<Vec<_>, _>>().context("parsing certificate PEM")?;
    ensure!(!chain.is_empty(), "no certificate found in PEM");
    let key = PrivateKeyDer::from_pem_slice(key_pem).context("parsing private key PEM")?;
    let signing_key = provider.key_provider.load_private_key(key).context("loading private key")?;
    let certified = CertifiedKey::new(chain, signing_key);
    // Also rejects an unparseable end-entity certificate and keys whose public half is unknown.
    certified.keys_match().context("private key does not match the certificate")?;
    Ok(certified)
}

fn content_digest(cert: &[u8], key: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update((cert.len() as u64).to_le_bytes());
    hasher.update(cert);
    hasher.update(key);
    hasher.finalize().into()
}

fn describe(certified: &CertifiedKey) -> String {
    let Ok(leaf) = certified.end_entity_cert() else { return "<no certificate>".to_string() };
    match parse_x509(leaf) {
        Ok(x) => format!(
            "subject={} issuer={} serial={} not_after={}",
            x.subject(),
            x.issuer(),
            x.raw_serial_as_string(),
            x.validity().not_after
        ),
        Err(_) => "<unparseable certificate>".to_string(),
    }
}

struct Loaded {
    certified: Arc<CertifiedKey>,
    digest: [u8; 32],
}

/// A rustls [`ResolvesServerCert`] serving the cert/key pair from two PEM files, re-read when their
/// contents change.
///
/// Kubernetes Secret volumes update by swapping a symlink, which inotify-style watching misses, so
/// [`spawn_reloader`](Self::spawn_reloader) polls and compares a hash of both files' bytes. A new
/// pair replaces the current one only once both parse and the key matches the certificate; until
/// then (e.g. a new certificate with the old key, half-way through an update) the previous pair
/// keeps being served.
pub struct ReloadingCert {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Loaded>,
}

impl fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingCert").field("cert", &self.cert_path).field("key", &self.key_path).finish()
    }
}

/// What one look at the files found.
#[derive(Debug)]
enum ReloadOutcome {
    Unchanged,
    Reloaded,
    Rejected([u8; 32], anyhow::Error),
}

impl ReloadingCert {
    /// Loads the pair once; fails if the files are unreadable, unparseable or mismatched.
    pub fn load(cert: &Path, key: &Path) -> anyhow::Result<Arc<Self>> {
        let provider = ring_provider();
        let cert_pem = fs::read(cert).with_context(|| format!("reading TLS certificate {}", cert.display()))?;
        let key_pem = fs::read(key).with_context(|| format!("reading TLS key {}", key.display()))?;
        let certified = certified_key_from_pem(&cert_pem, &key_pem, &provider)
            .with_context(|| format!("loading TLS certificate {} and key {}", cert.display(), key.display()))?;
        tracing::info!(cert = %cert.display(), key = %key.display(), certificate = describe(&certified), "loaded serving certificate");
        Ok(Arc::new(Self {
            cert_path: cert.to_path_buf(),
            key_path: key.to_path_buf(),
            provider,
            current: RwLock::new(Loaded {
                certified: Arc::new(certified),
                digest: content_digest(&cert_pem, &key_pem),
            }),
        }))
    }

    /// The pair currently served.
    pub fn current(&self) -> Arc<CertifiedKey> {
        // A poisoned lock still holds a valid, fully written pair.
        self.current.read().unwrap_or_else(|e| e.into_inner()).certified.clone()
    }

    fn current_digest(&self) -> [u8; 32] {
        self.current.read().unwrap_or_else(|e| e.into_inner()).digest
    }

    /// Compares the files' contents with the served pair and swaps in a new valid pair.
    fn reload_from(&self, cert_pem: &[u8], key_pem: &[u8]) -> ReloadOutcome {
        let digest = content_digest(cert_pem, key_pem);
        if digest == self.current_digest() {
            return ReloadOutcome::Unchanged;
        }
        match certified_key_from_pem(cert_pem, key_pem, &self.provider) {
            Ok(certified) => {
                tracing::info!(
                    cert = %self.cert_path.display(),
                    certificate = describe(&certified),
                    "reloaded serving certificate"
                );
                *self.current.write().unwrap_or_else(|e| e.into_inner()) =
                    Loaded { certified: Arc::new(certified), digest };
                ReloadOutcome::Reloaded
            }
            Err(err) => ReloadOutcome::Rejected(digest, err),
        }
    }

    /// Starts a task (on the current Tokio runtime) polling the files every `interval` (at least
    /// 10 ms). The task ends when the `ReloadingCert` is dropped (it only holds a weak reference)
    /// or when aborted through the returned handle.
    pub fn spawn_reloader(self: &Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        let interval = interval.max(Duration::from_millis(10));
        let weak: Weak<Self> = Arc::downgrade(self);
        let cert_path = self.cert_path.clone();
        let key_path = self.key_path.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The first tick is immediate; the files were just loaded.
            ticker.tick().await;
            // Failures are logged once per distinct content (or once per streak of read errors)
            // rather than on every tick.
            let mut rejected: Option<[u8; 32]> = None;
            let mut read_failing = false;
            loop {
                ticker.tick().await;
                let Some(this) = weak.upgrade() else { break };
                let read = async {
                    let cert = tokio::fs::read(&cert_path)
                        .await
                        .with_context(|| format!("reading {}", cert_path.display()))?;
                    let key =
                        tokio::fs::read(&key_path).await.with_context(|| format!("reading {}", key_path.display()))?;
                    anyhow::Ok((cert, key))
                };
                let (cert, key) = match read.await {
                    Ok(files) => {
                        read_failing = false;
                        files
                    }
                    Err(err) => {
                        if !read_failing {
                            tracing::warn!(
                                error = format!("{err:#}"),
                                "cannot read serving certificate files; keeping the current certificate"
                            );
                            read_failing = true;
                        }
                        continue;
                    }
                };
                match this.reload_from(&cert, &key) {
                    ReloadOutcome::Unchanged | ReloadOutcome::Reloaded => rejected = None,
                    ReloadOutcome::Rejected(digest, err) => {
                        if rejected != Some(digest) {
                            tracing::warn!(
                                cert = %cert_path.display(),
                                key = %key_path.display(),
                                error = format!("{err:#}"),
                                "rejected changed serving certificate/key; keeping the current certificate"
                            );
                            rejected = Some(digest);
                        }
                    }
                }
            }
        })
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

// ---------------------------------------------------------------------------------------------
// Client certificates
// ---------------------------------------------------------------------------------------------

/// Requests a client certificate without requiring one and without verifying its chain.
///
/// Why chain verification is deferred: like kube-apiserver, this server trusts two CAs for client
/// certificates with different meanings. A certificate signed by the request-header CA
/// (`requestheader-client-ca-file`) identifies the front proxy (the kube-apiserver aggregator),
/// which may then assert the user through `X-Remote-User`/`X-Remote-Group` headers; a certificate
/// signed by the client CA (`client-ca-file`) authenticates the user named in its subject. A
/// rustls verifier can only say "valid" or "invalid", and failing the handshake for an unknown
/// issuer would also lock out clients that authenticate by bearer token while happening to
/// present a certificate. So the handshake only checks that the certificate is well formed and
/// that the client holds its private key (the CertificateVerify signature, verified below); the
/// authenticator later verifies the chain in [`Peer`] against each CA and learns which
/// one signed it. A connection whose certificate matches neither CA is simply unauthenticated.
///
/// No acceptable-CA names are sent (`root_hint_subjects` is empty), so clients offer whatever
/// certificate they are configured with.
#[derive(Debug)]
pub struct DeferredClientCertVerifier {
    provider: Arc<CryptoProvider>,
}

impl DeferredClientCertVerifier {
    /// A verifier checking handshake signatures with `provider`'s algorithms.
    pub fn new(provider: Arc<CryptoProvider>) -> Self {
        Self { provider }
    }
}

fn bad_encoding() -> rustls::Error {
    rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding)
}

impl ClientCertVerifier for DeferredClientCertVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[TlsDistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        // Syntax only; see the type's documentation for why the chain is not verified here.
        // webpki's parse is what the signature checks below and the authenticator will use.
        ParsedCertificate::try_from(end_entity)?;
        if !std::iter::once(end_entity).chain(intermediates).all(|cert| parse_x509(cert).is_ok()) {
            return Err(bad_encoding());
        }
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

// ---------------------------------------------------------------------------------------------
// Server config, acceptor and serving
// ---------------------------------------------------------------------------------------------

/// Builds the server TLS configuration: ring provider, TLS 1.2 and 1.3, ALPN `h2` then
/// `http/1.1`, the serving certificate from `cert`, and an optional, unverified-chain client
/// certificate ([`DeferredClientCertVerifier`]).
pub fn server_config(cert: Arc<ReloadingCert>) -> anyhow::Result<Arc<ServerConfig>> {
    let provider = ring_provider();
    let verifier = Arc::new(DeferredClientCertVerifier::new(provider.clone()));
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .context("configuring TLS protocol versions")?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(cert);
    // RustlsConfig::from_config does not set ALPN; without it clients fall back to HTTP/1.1.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// An axum-server acceptor: the rustls handshake of [`RustlsAcceptor`], then the peer's
/// certificates attached to every request of the connection as [`Peer`].
#[derive(Clone, Debug)]
pub struct PeerCertAcceptor<A = DefaultAcceptor> {
    inner: RustlsAcceptor<A>,
}

impl PeerCertAcceptor {
    /// An acceptor using `config` (which should come from [`server_config`]).
    pub fn new(config: Arc<ServerConfig>) -> Self {
        Self::from_rustls_config(RustlsConfig::from_config(config))
    }

    /// An acceptor using an axum-server [`RustlsConfig`] (which can be swapped at run time).
    pub fn from_rustls_config(config: RustlsConfig) -> Self {
        Self { inner: RustlsAcceptor::new(config) }
    }

    /// Overrides the TLS handshake timeout (axum-server's default is 10 seconds). Call before
    /// [`acceptor`](Self::acceptor).
    pub fn handshake_timeout(self, timeout: Duration) -> Self {
        Self { inner: self.inner.handshake_timeout(timeout) }
    }
}

impl<A> PeerCertAcceptor<A> {
    /// Replaces the acceptor run before the TLS handshake (e.g. [`NoDelayAcceptor`]).
    pub fn acceptor<B>(self, acceptor: B) -> PeerCertAcceptor<B> {
        PeerCertAcceptor { inner: self.inner.acceptor(acceptor) }
    }
}

type AcceptFuture<St, Sv> = Pin<Box<dyn Future<Output = io::Result<(St, Sv)>> + Send>>;

/// A connection that knows the address of its other end.
pub trait RemoteAddr {
    fn remote_addr(&self) -> Option<SocketAddr>;
}

impl RemoteAddr for tokio::net::TcpStream {
    fn remote_addr(&self) -> Option<SocketAddr> {
        self.peer_addr().ok()
    }
}

impl<A, I, S> Accept<I, S> for PeerCertAcceptor<A>
where
    I: RemoteAddr,
    A: Accept<I, S>,
    A::Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    A::Service: Send + 'static,
    A::Future: Send + 'static,
{
    type Stream = TlsStream<A::Stream>;
    type Service = WithPeer<A::Service>;
    type Future = AcceptFuture<Self::Stream, Self::Service>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let remote = stream.remote_addr();
        let handshake = self.inner.accept(stream, service);
        Box::pin(async move {
            let (stream, service) = handshake.await.inspect_err(|err| {
                // axum-server drops failed connections silently.
                tracing::debug!(error = %err, "TLS handshake failed");
            })?;
            let chain = stream
                .get_ref()
                .1
                .peer_certificates()
                .map(|chain| chain.iter().map(|c| c.clone().into_owned()).collect::<Vec<_>>());
            Ok((stream, WithPeer { inner: service, peer: Peer::new(remote, chain) }))
        })
    }
}

/// A service adding the connection's [`Peer`] to each request's extensions.
#[derive(Clone, Debug)]
pub struct WithPeer<S> {
    inner: S,
    peer: Peer,
}

impl<S> HasPeer for WithPeer<S> {
    fn peer(&self) -> &Peer {
        &self.peer
    }
}

impl<S, B> tower::Service<http::Request<B>> for WithPeer<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        request.extensions_mut().insert(self.peer.clone());
        self.inner.call(request)
    }
}

/// Binds `addr` and serves `app` over TLS (HTTP/1.1 and HTTP/2 by ALPN) until `handle` shuts down
/// (`handle.graceful_shutdown(..)` / `handle.shutdown()`); `handle.listening()` reports the bound
/// address. Handlers can extract `Extension<Peer>`, which holds the client's address too.
/// `limits` (header timeouts, idle timeout, header size) and the connection cap `cap` (from
/// [`ConnectionLimits::idle_connections`]; None: no cap) are applied around the TLS layer by
/// [`crate::server::connection`].
pub async fn serve_tls<S>(
    addr: SocketAddr,
    app: S,
    config: Arc<ServerConfig>,
    handle: axum_server::Handle<SocketAddr>,
    limits: &ConnectionLimits,
    cap: Option<Arc<IdleConnections>>,
) -> anyhow::Result<()>
where
    S: Service<Request<TrackedBody>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let mut acceptor = PeerCertAcceptor::new(config);
    if let Some(timeout) = limits.handshake_timeout() {
        acceptor = acceptor.handshake_timeout(timeout);
    }
    let acceptor = limits.acceptor(acceptor.acceptor(NoDelayAcceptor::new()), cap);
    let mut server = axum_server::bind(addr).acceptor(acceptor).handle(handle);
    limits.configure_http(&mut server);
    server
        .serve(axum::ServiceExt::<Request<hyper::body::Incoming>>::into_make_service(DrainUnreadBody::new(app)))
        .await
        .with_context(|| format!("serving HTTPS on {addr}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::dev_certs::{ca_common_name, ensure_dev_certs, ServingCertPaths};
    use crate::server::Identity;
    use crate::test_pki::{common_name, issuer_common_name, leaf as test_leaf, pem_to_der};
    use axum::routing::get;
    use axum::{Extension, Router};
    use rcgen::{ExtendedKeyUsagePurpose, Issuer, KeyPair};
    use rustls::client::ResolvesClientCert;
    use rustls::pki_types::ServerName;
    use rustls::{ClientConfig, RootCertStore};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpStream;
    use tokio_rustls::client::TlsStream as ClientTlsStream;
    use tokio_rustls::TlsConnector;

    const SERVICE: &str = "sample-apiserver";
    const NAMESPACE: &str = "sample-system";
    const IDENTITY: Identity = Identity { name: "sample-apiserver", version: "0.0.0", git_commit: "" };
    const DAY: Duration = Duration::from_secs(24 * 60 * 60);

    fn init_tracing() {
        // Shown for failing tests only; this module's own logs at debug level.
        let filter = format!("{}=debug", module_path!().trim_end_matches("::tests"));
        let _ = tracing_subscriber::fmt().with_test_writer().with_env_filter(filter).try_init();
    }

    fn read(path: &Path) -> Vec<u8> {
        fs::read(path).unwrap()
    }

    /// A throwaway CA: (issuer, certificate PEM).
    fn test_ca(cn: &str) -> (Issuer<'static, KeyPair>, String) {
        let ca = crate::test_pki::ca(cn);
        (ca.issuer, ca.pem)
    }

    // ---- client certificate verifier ------------------------------------------------------------

    #[test]
    fn client_cert_verifier_is_optional_and_checks_syntax_only() {
        let verifier = DeferredClientCertVerifier::new(ring_provider());
        assert!(verifier.offer_client_auth());
        assert!(!verifier.client_auth_mandatory());
        assert!(verifier.root_hint_subjects().is_empty());
        assert!(!verifier.supported_verify_schemes().is_empty());

        let (ca, ca_pem) = test_ca("unknown-ca");
        let (cert, _) = test_leaf(&ca, "alice", &["alice"], ExtendedKeyUsagePurpose::ClientAuth, DAY);
        let cert = pem_to_der(cert.as_bytes());
        let now = UnixTime::now();
        verifier.verify_client_cert(&cert, &[], now).unwrap();
        verifier.verify_client_cert(&cert, &[pem_to_der(ca_pem.as_bytes())], now).unwrap();

        let garbage = CertificateDer::from(b"definitely not DER".to_vec());
        assert!(verifier.verify_client_cert(&garbage, &[], now).is_err());
        let mut truncated = cert.to_vec();
        truncated.truncate(truncated.len() - 10);
        assert!(verifier.verify_client_cert(&CertificateDer::from(truncated), &[], now).is_err());
        let mut trailing = cert.to_vec();
        trailing.extend_from_slice(b"junk");
        assert!(verifier.verify_client_cert(&CertificateDer::from(trailing), &[], now).is_err());
        assert!(verifier.verify_client_cert(&cert, &[garbage], now).is_err());
    }

    // ---- reloading ----------------------------------------------------------------------------

    async fn wait_for(mut condition: impl FnMut() -> bool) -> bool {
        for _ in 0..200 {
            if condition() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    #[tokio::test]
    async fn reloading_cert_never_serves_a_mismatched_pair() {
        init_tracing();
        let tmp = tempfile::tempdir().unwrap();
        let paths = ensure_dev_certs(tmp.path(), &IDENTITY, SERVICE, NAMESPACE).unwrap();
        assert!(ReloadingCert::load(&paths.cert, tmp.path().join("missing.key").as_path()).is_err());
        let reloading = ReloadingCert::load(&paths.cert, &paths.key).unwrap();
        let original = reloading.current().cert[0].clone();
        let task = reloading.spawn_reloader(Duration::from_millis(20));

        let (ca, _) = test_ca("new-ca");
        let (new_cert, new_key) = test_leaf(&ca, "new", &["localhost"], ExtendedKeyUsagePurpose::ServerAuth, DAY);

        // New certificate, old key: must keep serving the old pair.
        fs::write(&paths.cert, &new_cert).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(reloading.current().cert[0], original);
        // Garbage and a missing file: still the old pair.
        fs::write(&paths.key, b"garbage").unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        fs::remove_file(&paths.key).unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(reloading.current().cert[0], original);

        // The matching key arrives: switch.
        fs::write(&paths.key, &new_key).unwrap();
        let expected = pem_to_der(new_cert.as_bytes());
        assert!(wait_for(|| reloading.current().cert[0] == expected).await, "new pair not picked up");
        reloading.current().keys_match().unwrap();

        // The task stops once the resolver is gone.
        drop(reloading);
        tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
    }

    // ---- a real TLS server ----------------------------------------------------------------------

    async fn whoami(Extension(peer): Extension<Peer>) -> String {
        assert!(peer.remote().is_some_and(|remote| remote.ip().is_loopback()), "{:?}", peer.remote());
        match peer.end_entity() {
            None => "none".to_string(),
            Some(cert) => format!("some {} chain={}", common_name(cert), 1 + peer.intermediates().len()),
        }
    }

    struct TestServer {
        addr: SocketAddr,
        paths: ServingCertPaths,
        handle: axum_server::Handle<SocketAddr>,
        task: tokio::task::JoinHandle<anyhow::Result<()>>,
        _reloader: tokio::task::JoinHandle<()>,
        _dir: tempfile::TempDir,
    }

    async fn start_server() -> TestServer {
        init_tracing();
        let dir = tempfile::tempdir().unwrap();
        let paths = ensure_dev_certs(dir.path(), &IDENTITY, SERVICE, NAMESPACE).unwrap();
        let reloading = ReloadingCert::load(&paths.cert, &paths.key).unwrap();
        let reloader = reloading.spawn_reloader(Duration::from_millis(50));
        let config = server_config(reloading).unwrap();
        let handle = axum_server::Handle::new();
        let app = Router::new().route("/whoami", get(whoami));
        let serving = handle.clone();
        let task = tokio::spawn(async move {
            serve_tls("127.0.0.1:0".parse().unwrap(), app, config, serving, &ConnectionLimits::default(), None).await
        });
        let addr = handle.listening().await.expect("server failed to bind");
        TestServer { addr, paths, handle, task, _reloader: reloader, _dir: dir }
    }

    fn roots(pems: &[&[u8]]) -> Arc<RootCertStore> {
        let mut roots = RootCertStore::empty();
        for pem in pems {
            roots.add(pem_to_der(pem)).unwrap();
        }
        Arc::new(roots)
    }

    fn client_config(
        roots: Arc<RootCertStore>,
        versions: &[&'static rustls::SupportedProtocolVersion],
        alpn: &[&[u8]],
        client_cert: Option<Arc<dyn ResolvesClientCert>>,
    ) -> Arc<ClientConfig> {
        let builder = ClientConfig::builder_with_provider(ring_provider())
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots);
        let mut config = match client_cert {
            Some(resolver) => builder.with_client_cert_resolver(resolver),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    async fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> io::Result<ClientTlsStream<TcpStream>> {
        let tcp = TcpStream::connect(addr).await?;
        TlsConnector::from(config).connect(ServerName::try_from("localhost").unwrap(), tcp).await
    }

    /// One HTTP/1.1 request over an established TLS stream; returns the whole response.
    async fn http1_get(mut stream: ClientTlsStream<TcpStream>) -> io::Result<String> {
        stream.write_all(b"GET /whoami HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok(String::from_utf8_lossy(&response).into_owned())
    }

    #[derive(Debug)]
    struct FixedClientCert(Arc<CertifiedKey>);

    impl ResolvesClientCert for FixedClientCert {
        fn resolve(&self, _hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
            Some(self.0.clone())
        }
        fn has_certs(&self) -> bool {
            true
        }
    }

    fn client_identity(cert_pem: &str, key_pem: &str) -> Arc<dyn ResolvesClientCert> {
        let certified = certified_key_from_pem(cert_pem.as_bytes(), key_pem.as_bytes(), &ring_provider()).unwrap();
        Arc::new(FixedClientCert(Arc::new(certified)))
    }

    #[tokio::test]
    async fn tls_server_exposes_optional_peer_certificates() {
        let server = start_server().await;
        let ca_pem = read(&server.paths.ca_cert);
        let url = format!("https://localhost:{}/whoami", server.addr.port());

        // (a) no client certificate, over HTTP/2 negotiated by ALPN.
        let client = reqwest::Client::builder()
            .no_proxy()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(&ca_pem).unwrap())
            .resolve("localhost", server.addr)
            .build()
            .unwrap();
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(response.text().await.unwrap(), "none");

        // (b) a client certificate signed by a CA the server has never heard of: handshake succeeds
        // and the handler sees the chain.
        let (client_ca, client_ca_pem) = test_ca("some-client-ca");
        let (alice_cert, alice_key) =
            test_leaf(&client_ca, "alice", &["alice.example"], ExtendedKeyUsagePurpose::ClientAuth, DAY);
        let identity =
            reqwest::Identity::from_pem(format!("{alice_cert}{client_ca_pem}{alice_key}").as_bytes()).unwrap();
        let client = reqwest::Client::builder()
            .no_proxy()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(&ca_pem).unwrap())
            .identity(identity)
            .resolve("localhost", server.addr)
            .build()
            .unwrap();
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(response.text().await.unwrap(), "some alice chain=2");
        // Several requests on the same (HTTP/2) connection all carry the extension.
        for _ in 0..3 {
            assert_eq!(client.get(&url).send().await.unwrap().text().await.unwrap(), "some alice chain=2");
        }

        // (c) ALPN: h2 preferred, http/1.1 still available; TLS 1.2 with a client certificate works
        // (exercises verify_tls12_signature).
        let roots_ca = roots(&[&ca_pem]);
        let stream = connect(
            server.addr,
            client_config(roots_ca.clone(), &[&rustls::version::TLS13], &[b"h2", b"http/1.1"], None),
        )
        .await
        .unwrap();
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (bob_cert, bob_key) =
            test_leaf(&client_ca, "bob", &["bob.example"], ExtendedKeyUsagePurpose::ClientAuth, DAY);
        let stream = connect(
            server.addr,
            client_config(
                roots_ca.clone(),
                &[&rustls::version::TLS12],
                &[b"http/1.1"],
                Some(client_identity(&bob_cert, &bob_key)),
            ),
        )
        .await
        .unwrap();
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        assert_eq!(stream.get_ref().1.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_2));
        let response = http1_get(stream).await.unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.ends_with("some bob chain=1"), "{response}");

        // A client presenting a certificate without holding its key is refused (TLS 1.3 and 1.2).
        let (mallory_cert, _) =
            test_leaf(&client_ca, "mallory", &["m.example"], ExtendedKeyUsagePurpose::ClientAuth, DAY);
        let wrong_key = KeyPair::generate().unwrap().serialize_pem();
        for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let provider = ring_provider();
            let signing_key = provider
                .key_provider
                .load_private_key(PrivateKeyDer::from_pem_slice(wrong_key.as_bytes()).unwrap())
                .unwrap();
            let forged = CertifiedKey::new(vec![pem_to_der(mallory_cert.as_bytes())], signing_key);
            let config = client_config(
                roots_ca.clone(),
                &[version],
                &[b"http/1.1"],
                Some(Arc::new(FixedClientCert(Arc::new(forged)))),
            );
            let outcome = match connect(server.addr, config).await {
                Ok(stream) => http1_get(stream).await,
                Err(err) => Err(err),
            };
            // The server rejects the CertificateVerify signature with a decrypt_error alert.
            let err = outcome.expect_err("forged client certificate accepted");
            assert!(err.to_string().contains("DecryptError"), "{version:?}: {err}");
        }

        server.handle.graceful_shutdown(Some(Duration::from_secs(1)));
        tokio::time::timeout(Duration::from_secs(5), server.task).await.unwrap().unwrap().unwrap();
    }

    #[tokio::test]
    async fn tls_server_picks_up_replaced_certificate_files() {
        let server = start_server().await;
        let ca_pem = read(&server.paths.ca_cert);
        let (new_ca, new_ca_pem) = test_ca("replacement-ca");
        let both = roots(&[&ca_pem, new_ca_pem.as_bytes()]);
        let config = client_config(both, &[&rustls::version::TLS13, &rustls::version::TLS12], &[b"h2"], None);
        let served_issuer = |stream: &ClientTlsStream<TcpStream>| {
            let chain = stream.get_ref().1.peer_certificates().unwrap();
            issuer_common_name(&chain[0])
        };

        let stream = connect(server.addr, config.clone()).await.unwrap();
        assert_eq!(served_issuer(&stream), ca_common_name(&IDENTITY));

        let (cert, key) = test_leaf(&new_ca, SERVICE, &["localhost"], ExtendedKeyUsagePurpose::ServerAuth, DAY * 30);
        fs::write(&server.paths.key, &key).unwrap();
        fs::write(&server.paths.cert, &cert).unwrap();

        let expected = pem_to_der(cert.as_bytes());
        let mut switched = false;
        for _ in 0..100 {
            let stream = connect(server.addr, config.clone()).await.unwrap();
            let served = stream.get_ref().1.peer_certificates().unwrap()[0].clone();
            if served == expected {
                assert_eq!(served_issuer(&stream), "replacement-ca");
                switched = true;
                break;
            }
            assert_eq!(served_issuer(&stream), ca_common_name(&IDENTITY));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(switched, "new certificate never served");

        // Only the new CA is needed now.
        let only_new = client_config(roots(&[new_ca_pem.as_bytes()]), &[&rustls::version::TLS13], &[b"http/1.1"], None);
        let response = http1_get(connect(server.addr, only_new).await.unwrap()).await.unwrap();
        assert!(response.ends_with("none"), "{response}");

        server.handle.shutdown();
        tokio::time::timeout(Duration::from_secs(5), server.task).await.unwrap().unwrap().unwrap();
    }
}
