//! The rustls side of [`super::chain`]: a `ServerCertVerifier` trusting what
//! kube-apiserver's Go clients trust, with roots that are a PEM bundle, the
//! system's, or a file read again as it rotates.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, SignatureScheme};

use super::certificate::Certificate;
use super::chain::{Pool, Verification};

/// A rotated CA file is read again after this long, as client-go does for
/// the service account's CA.
const RELOAD_INTERVAL: Duration = Duration::from_secs(60);

/// A refusal of the server's certificate, in Go's words (`x509: ...`); shown
/// after `tls: failed to verify certificate: ` as Go's TLS client shows it.
#[derive(Debug, Clone)]
pub struct CertificateRefused(pub String);

impl std::fmt::Display for CertificateRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CertificateRefused {}

/// Where the trusted certificates come from.
#[derive(Debug, Clone)]
pub enum Roots {
    /// PEM certificates (a caBundle, a kubeconfig's certificate-authority-data).
    Pem(Vec<u8>),
    /// DER certificates (kube's `Config::root_cert`).
    Der(Vec<Vec<u8>>),
    /// The system's roots, as Go uses them when no CA is given.
    System,
    /// A PEM file, read again every minute (the in-cluster CA, which rotates).
    File(PathBuf),
}

/// How a PEM bundle failed to give any certificate, in client-go's words.
#[derive(Debug, thiserror::Error)]
pub enum RootsError {
    #[error("unable to load root certificates: {0}")]
    Pem(String),
    #[error("reading {path}: {error}")]
    Read { path: PathBuf, error: std::io::Error },
}

impl Roots {
    fn load(&self) -> Result<Pool, RootsError> {
        let certificates = match self {
            Roots::Pem(pem) => pem_certificates(pem)?,
            Roots::Der(ders) => ders.iter().filter_map(|der| Certificate::parse(der).ok()).collect(),
            Roots::System => rustls_native_certs::load_native_certs()
                .certs
                .iter()
                .filter_map(|der| Certificate::parse(der).ok())
                .collect(),
            Roots::File(path) => {
                let pem = std::fs::read(path).map_err(|error| RootsError::Read { path: path.clone(), error })?;
                pem_certificates(&pem)?
            }
        };
        Ok(Pool::new(certificates))
    }
}

/// Go's `AppendCertsFromPEM`: every CERTIFICATE block that parses (others
/// are skipped); an error, in client-go's words, when none does.
fn pem_certificates(pem: &[u8]) -> Result<Vec<Certificate>, RootsError> {
    use rustls::pki_types::pem::{PemObject, SectionKind};
    let mut certificates = Vec::new();
    let mut first_problem = None;
    let mut blocks = 0;
    for item in <(SectionKind, Vec<u8>)>::pem_slice_iter(pem) {
        match item {
            Ok((SectionKind::Certificate, der)) => {
                blocks += 1;
                match Certificate::parse(&der) {
                    Ok(certificate) => certificates.push(certificate),
                    Err(e) => {
                        first_problem.get_or_insert(format!("failed to parse certificate: {e}"));
                    }
                }
            }
            Ok(_) => blocks += 1,
            Err(_) => break,
        }
    }
    if !certificates.is_empty() {
        return Ok(certificates);
    }
    Err(RootsError::Pem(match first_problem {
        Some(problem) => problem,
        None if blocks == 0 => "unable to parse bytes as PEM block".into(),
        None => "no valid certificate authority data seen".into(),
    }))
}

/// Verifies servers' certificates as Go's `crypto/tls` client does.
#[derive(Debug)]
pub struct GoVerifier {
    roots: Roots,
    pool: RwLock<(Arc<Pool>, Instant)>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl GoVerifier {
    /// A verifier trusting `roots`; fails when they hold no usable certificate.
    pub fn new(roots: Roots) -> Result<GoVerifier, RootsError> {
        let pool = roots.load()?;
        let algorithms = rustls::crypto::ring::default_provider().signature_verification_algorithms;
        Ok(GoVerifier { roots, pool: RwLock::new((Arc::new(pool), Instant::now())), algorithms })
    }

    fn pool(&self) -> Arc<Pool> {
        let (pool, loaded) = match self.pool.read() {
            Ok(guard) => (guard.0.clone(), guard.1),
            Err(poisoned) => (poisoned.get_ref().0.clone(), Instant::now()),
        };
        if !matches!(self.roots, Roots::File(_)) || loaded.elapsed() < RELOAD_INTERVAL {
            return pool;
        }
        // A file that cannot be read now keeps the roots read before.
        let fresh = self.roots.load().map(Arc::new).unwrap_or(pool);
        if let Ok(mut guard) = self.pool.write() {
            *guard = (fresh.clone(), Instant::now());
        }
        fresh
    }
}

impl ServerCertVerifier for GoVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let refuse = |why: String| {
            rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(CertificateRefused(why)))))
        };
        let leaf = Certificate::parse(end_entity).map_err(refuse)?;
        let intermediates = Pool::new(intermediates.iter().filter_map(|der| Certificate::parse(der).ok()).collect());
        let host = match server_name {
            ServerName::DnsName(name) => name.as_ref().to_string(),
            ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
            _ => return Err(refuse("x509: unsupported server name".into())),
        };
        let roots = self.pool();
        let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        Verification { roots: &roots, intermediates: &intermediates, host: &host, now }
            .verify(&leaf)
            .map_err(refuse)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// What Go's TLS client says of a failed connection when the cause is TLS:
/// `tls: failed to verify certificate: x509: ...` for a refused certificate,
/// `remote error: tls: ...` for an alert the server sent. None when the
/// failure is not TLS's.
pub fn go_tls_error(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source = Some(error);
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<CertificateRefused>() {
            return Some(format!("tls: failed to verify certificate: {refused}"));
        }
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(match tls {
                rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(inner))) => {
                    match inner.downcast_ref::<CertificateRefused>() {
                        Some(refused) => format!("tls: failed to verify certificate: {refused}"),
                        None => format!("tls: failed to verify certificate: {inner}"),
                    }
                }
                rustls::Error::AlertReceived(alert) => format!("remote error: tls: {}", alert_words(*alert)),
                other => format!("tls: {other}"),
            });
        }
        source = match e.downcast_ref::<std::io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as &(dyn std::error::Error + 'static)).or_else(|| e.source()),
            None => e.source(),
        };
    }
    None
}

/// An alert's description as Go's `tls.alert` prints it.
fn alert_words(alert: rustls::AlertDescription) -> String {
    use rustls::AlertDescription as A;
    match alert {
        A::HandshakeFailure => "handshake failure".into(),
        A::BadCertificate => "bad certificate".into(),
        A::UnsupportedCertificate => "unsupported certificate".into(),
        A::CertificateRevoked => "revoked certificate".into(),
        A::CertificateExpired => "expired certificate".into(),
        A::CertificateUnknown => "unknown certificate".into(),
        A::UnknownCA => "unknown certificate authority".into(),
        A::AccessDenied => "access denied".into(),
        A::ProtocolVersion => "protocol version not supported".into(),
        A::InternalError => "internal error".into(),
        A::CertificateRequired => "certificate required".into(),
        A::NoApplicationProtocol => "no application protocol".into(),
        other => format!("{other:?}"),
    }
}
