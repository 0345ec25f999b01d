//! Development certificates: a self-signed CA named after the application plus a serving
//! certificate signed by it, made (or reused) in a directory ([`ensure_dev_certs`]) when no
//! serving pair is given, and by an application's `certs` command with the APIService caBundle
//! beside them ([`write_cert_bundle`]).
//!
//! Apart from serving (tls.rs) because nothing here runs per connection: this is a one-time PKI
//! for a development setup, whose output tls.rs then serves like any other pair.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _};
use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyIdMethod, KeyPair, KeyUsagePurpose, PublicKeyData as _,
};
use rustls::client::danger::ServerCertVerifier as _;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::time::ASN1Time;
use x509_parser::x509::X509Name;

use crate::server::tls::{certified_key_from_pem, parse_x509, ring_provider};
use crate::server::Identity;

/// File name of the CA bundle written by [`write_cert_bundle`].
pub const CA_BUNDLE_FILE: &str = "cabundle.b64";

const CA_CERT_FILE: &str = "ca.crt";
const CA_KEY_FILE: &str = "ca.key";
const SERVING_CERT_FILE: &str = "tls.crt";
const SERVING_KEY_FILE: &str = "tls.key";

const DAY: Duration = Duration::from_secs(24 * 60 * 60);
const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);
const SERVING_VALIDITY: Duration = Duration::from_secs(365 * 24 * 60 * 60);
/// Certificates expiring within this window are regenerated.
const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// Backdating of `notBefore`, to tolerate clock skew between machines.
const BACKDATE: Duration = Duration::from_secs(60 * 60);

/// Where the serving certificate material lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServingCertPaths {
    /// The CA certificate (PEM) that signed `cert`; clients trust this.
    pub ca_cert: PathBuf,
    /// The serving certificate (PEM).
    pub cert: PathBuf,
    /// The serving private key (PEM, PKCS#8).
    pub key: PathBuf,
}

/// The names the development serving certificate is valid for.
fn serving_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// The development CA's common name: the application's name and `-ca` (`sample-apiserver-ca`
/// for `sample-apiserver`), so a person trusting it sees whose it is.
pub fn ca_common_name(identity: &Identity) -> String {
    format!("{}-ca", identity.name)
}

/// Makes sure `dir` holds ca.crt, ca.key, tls.crt, tls.key: a self-signed CA (named by
/// [`ca_common_name`]) and a serving cert signed by it with SANs localhost, 127.0.0.1, ::1, `<service>`,
/// `<service>.<namespace>`, `<service>.<namespace>.svc`, `<service>.<namespace>.svc.cluster.local`.
///
/// Existing files are reused. The serving certificate alone is regenerated when it is unreadable,
/// does not match its key, does not cover the requested names, is not signed by the CA, or expires
/// within 30 days (the CA is reused when its files are valid). Everything is regenerated when the
/// CA is missing, unreadable, not a CA, mismatched with its key, or expires within 30 days. Key
/// files are written with mode 0600. The directory is created if needed.
pub fn ensure_dev_certs(
    dir: &Path,
    identity: &Identity,
    service: &str,
    namespace: &str,
) -> anyhow::Result<ServingCertPaths> {
    ensure!(!service.is_empty(), "service name must not be empty");
    ensure!(!namespace.is_empty(), "namespace must not be empty");
    fs::create_dir_all(dir).with_context(|| format!("creating certificate directory {}", dir.display()))?;

    let paths = ServingCertPaths {
        ca_cert: dir.join(CA_CERT_FILE),
        cert: dir.join(SERVING_CERT_FILE),
        key: dir.join(SERVING_KEY_FILE),
    };
    let ca_key_path = dir.join(CA_KEY_FILE);
    let names = serving_names(service, namespace);
    let common_name = format!("{service}.{namespace}.svc");
    let provider = ring_provider();

    match load_ca(&paths.ca_cert, &ca_key_path) {
        Ok(ca) => {
            match check_serving(&paths, &ca, &names, &provider) {
                Ok(()) => {
                    tracing::debug!(dir = %dir.display(), "reusing existing development certificates");
                    return Ok(paths);
                }
                Err(reason) => {
                    tracing::info!(dir = %dir.display(), reason = format!("{reason:#}"), "regenerating serving certificate")
                }
            }
            match issue_serving(&ca, &names, &common_name, &provider) {
                Ok(serving) => {
                    write_serving(&paths, &serving)?;
                    tracing::info!(cert = %paths.cert.display(), "wrote new serving certificate (reused CA)");
                    return Ok(paths);
                }
                Err(err) => tracing::warn!(
                    dir = %dir.display(),
                    error = format!("{err:#}"),
                    "existing CA cannot issue a verifiable serving certificate; regenerating the CA"
                ),
            }
        }
        Err(reason) => {
            tracing::info!(dir = %dir.display(), reason = format!("{reason:#}"), "generating a new development CA")
        }
    }

    let (ca, ca_key_pem) = generate_ca(&ca_common_name(identity))?;
    let serving =
        issue_serving(&ca, &names, &common_name, &provider).context("issuing serving certificate from the new CA")?;
    write_file(&ca_key_path, ca_key_pem.as_bytes(), true)?;
    write_file(&paths.ca_cert, ca.cert_pem.as_bytes(), false)?;
    write_serving(&paths, &serving)?;
    tracing::info!(dir = %dir.display(), "wrote new development CA and serving certificate");
    Ok(paths)
}

/// For an application's `certs --out DIR` command: same as the development certificates `run` makes, and also writes
/// `cabundle.b64` (base64 of ca.crt's PEM bytes, no trailing newline, as an APIService
/// `spec.caBundle` wants).
pub fn write_cert_bundle(
    out: &Path,
    identity: &Identity,
    service: &str,
    namespace: &str,
) -> crate::error::Result<ServingCertPaths> {
    Ok(write_bundle(out, identity, service, namespace)?)
}

fn write_bundle(out: &Path, identity: &Identity, service: &str, namespace: &str) -> anyhow::Result<ServingCertPaths> {
    let paths = ensure_dev_certs(out, identity, service, namespace)?;
    let ca_pem = fs::read(&paths.ca_cert).with_context(|| format!("reading {}", paths.ca_cert.display()))?;
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    write_file(&out.join(CA_BUNDLE_FILE), bundle.as_bytes(), false)?;
    Ok(paths)
}

/// A CA able to sign serving certificates.
struct LoadedCa {
    cert_der: CertificateDer<'static>,
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

struct ServingPair {
    cert_pem: String,
    key_pem: String,
}

fn write_serving(paths: &ServingCertPaths, serving: &ServingPair) -> anyhow::Result<()> {
    // Key first: a watcher that reads in between sees a mismatched pair and keeps the old one.
    write_file(&paths.key, serving.key_pem.as_bytes(), true)?;
    write_file(&paths.cert, serving.cert_pem.as_bytes(), false)
}

fn unix_now() -> i64 {
    ASN1Time::now().timestamp()
}

fn generate_ca(common_name: &str) -> anyhow::Result<(LoadedCa, String)> {
    let key = KeyPair::generate().context("generating CA key")?;
    // x509-parser hands us rcgen's `time::OffsetDateTime` (avoids a direct `time` dependency).
    let now = ASN1Time::now().to_datetime();
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params.not_before = now - BACKDATE;
    params.not_after = now + CA_VALIDITY;
    let cert = params.self_signed(&key).context("self-signing CA certificate")?;
    let key_pem = key.serialize_pem();
    let ca = LoadedCa { cert_der: cert.der().clone(), cert_pem: cert.pem(), issuer: Issuer::new(params, key) };
    Ok((ca, key_pem))
}

fn issue_serving(
    ca: &LoadedCa,
    names: &[String],
    common_name: &str,
    provider: &Arc<CryptoProvider>,
) -> anyhow::Result<ServingPair> {
    let key = KeyPair::generate().context("generating serving key")?;
    // x509-parser hands us rcgen's `time::OffsetDateTime` (avoids a direct `time` dependency).
    let now = ASN1Time::now().to_datetime();
    let mut params = CertificateParams::new(names.to_vec()).context("building serving certificate parameters")?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::ExplicitNoCa;
    // ECDSA key: signatures only (KeyEncipherment is for RSA key transport).
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = now - BACKDATE;
    params.not_after = now + SERVING_VALIDITY;
    let cert = params.signed_by(&key, &ca.issuer).context("signing serving certificate")?;
    verify_chain(&ca.cert_der, cert.der(), provider).context("verifying the freshly issued serving certificate")?;
    Ok(ServingPair { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

/// Loads and validates the CA from disk.
fn load_ca(cert_path: &Path, key_path: &Path) -> anyhow::Result<LoadedCa> {
    let cert_pem = fs::read_to_string(cert_path).with_context(|| format!("reading {}", cert_path.display()))?;
    let key_pem = fs::read_to_string(key_path).with_context(|| format!("reading {}", key_path.display()))?;
    let cert_der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
        .with_context(|| format!("parsing PEM in {}", cert_path.display()))?;
    let x509 = parse_x509(&cert_der).with_context(|| format!("parsing {}", cert_path.display()))?;
    ensure!(x509.is_ca(), "{} is not a CA certificate", cert_path.display());
    ensure_not_expiring(&x509).with_context(|| format!("checking validity of {}", cert_path.display()))?;
    let key = KeyPair::from_pem(&key_pem).with_context(|| format!("parsing {}", key_path.display()))?;
    ensure!(
        key.subject_public_key_info() == x509.public_key().raw,
        "{} does not match {}",
        key_path.display(),
        cert_path.display()
    );

    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name_of(x509.subject()).context("reading the CA subject")?;
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    if let Some(ski) = subject_key_identifier(&x509) {
        params.key_identifier_method = KeyIdMethod::PreSpecified(ski);
    }
    Ok(LoadedCa { cert_der, cert_pem, issuer: Issuer::new(params, key) })
}

/// Checks that the serving cert/key on disk are usable as they are.
fn check_serving(
    paths: &ServingCertPaths,
    ca: &LoadedCa,
    names: &[String],
    provider: &Arc<CryptoProvider>,
) -> anyhow::Result<()> {
    let cert_pem = fs::read(&paths.cert).with_context(|| format!("reading {}", paths.cert.display()))?;
    let key_pem = fs::read(&paths.key).with_context(|| format!("reading {}", paths.key.display()))?;
    let certified = certified_key_from_pem(&cert_pem, &key_pem, provider)?;
    let leaf = certified.end_entity_cert().context("empty certificate chain")?;
    let x509 = parse_x509(leaf)?;
    ensure_not_expiring(&x509)?;
    let missing = missing_names(&x509, names)?;
    ensure!(missing.is_empty(), "serving certificate does not cover {}", missing.join(", "));
    verify_chain(&ca.cert_der, leaf, provider).context("serving certificate is not signed by the CA")?;
    Ok(())
}

/// Verifies `leaf` as a TLS server certificate for "localhost" chaining to `ca`, as a client would.
fn verify_chain(
    ca: &CertificateDer<'static>,
    leaf: &CertificateDer<'_>,
    provider: &Arc<CryptoProvider>,
) -> anyhow::Result<()> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).context("using the CA as a trust anchor")?;
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .context("building verifier")?;
    let name = ServerName::try_from("localhost").context("server name")?;
    verifier.verify_server_cert(leaf, &[], &name, &[], UnixTime::now()).context("verifying certificate chain")?;
    Ok(())
}

fn ensure_not_expiring(cert: &X509Certificate<'_>) -> anyhow::Result<()> {
    let not_after = cert.validity().not_after.timestamp();
    let deadline = unix_now().saturating_add(RENEW_BEFORE.as_secs() as i64);
    ensure!(
        not_after > deadline,
        "certificate expires at {} (within {} days)",
        cert.validity().not_after,
        RENEW_BEFORE.as_secs() / DAY.as_secs()
    );
    Ok(())
}

/// Names from `wanted` that the certificate's subjectAltName does not cover.
fn missing_names(cert: &X509Certificate<'_>, wanted: &[String]) -> anyhow::Result<Vec<String>> {
    let mut dns = HashSet::new();
    let mut ips = HashSet::new();
    if let Some(san) = cert.subject_alternative_name().context("parsing subjectAltName")? {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(d) => {
                    dns.insert(d.to_ascii_lowercase());
                }
                GeneralName::IPAddress(raw) => {
                    if let Ok(octets) = <[u8; 4]>::try_from(*raw) {
                        ips.insert(IpAddr::from(octets));
                    } else if let Ok(octets) = <[u8; 16]>::try_from(*raw) {
                        ips.insert(IpAddr::from(octets));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(wanted
        .iter()
        .filter(|name| match name.parse::<IpAddr>() {
            Ok(ip) => !ips.contains(&ip),
            Err(_) => !dns.contains(&name.to_ascii_lowercase()),
        })
        .cloned()
        .collect())
}

fn subject_key_identifier(cert: &X509Certificate<'_>) -> Option<Vec<u8>> {
    cert.iter_extensions().find_map(|ext| match ext.parsed_extension() {
        ParsedExtension::SubjectKeyIdentifier(kid) => Some(kid.0.to_vec()),
        _ => None,
    })
}

/// Rebuilds an rcgen distinguished name from a parsed one, keeping the string types so that the
/// issuer name of certificates we sign matches the CA's subject byte for byte. (Anything odd is
/// caught afterwards by verifying the issued certificate against the CA.)
fn distinguished_name_of(name: &X509Name<'_>) -> anyhow::Result<DistinguishedName> {
    use x509_parser::der_parser::asn1_rs::Tag;
    let mut dn = DistinguishedName::new();
    for attr in name.iter_attributes() {
        let oid: Vec<u64> = attr.attr_type().iter().context("attribute OID component out of range")?.collect();
        let text = attr.as_str().context("attribute value is not a string")?;
        let value = match attr.attr_value().header.tag() {
            Tag::Utf8String => DnValue::Utf8String(text.to_string()),
            Tag::PrintableString => DnValue::PrintableString(text.try_into().context("PrintableString")?),
            Tag::Ia5String => DnValue::Ia5String(text.try_into().context("IA5String")?),
            other => bail!("unsupported string type {other} in distinguished name"),
        };
        dn.push(DnType::from_oid(&oid), value);
    }
    Ok(dn)
}

/// Writes `contents` to `path` atomically (temporary file + rename); `private` files get mode 0600.
fn write_file(path: &Path, contents: &[u8], private: bool) -> anyhow::Result<()> {
    let file_name =
        path.file_name().and_then(|n| n.to_str()).with_context(|| format!("bad path {}", path.display()))?;
    let tmp = path.with_file_name(format!(".{file_name}.tmp"));
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    let mode = if private { 0o600 } else { 0o644 };
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = private;
    let result = (|| -> io::Result<()> {
        let mut file = options.open(&tmp)?;
        #[cfg(unix)]
        {
            // The mode above only applies when the file is created.
            use std::os::unix::fs::PermissionsExt as _;
            file.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        file.write_all(contents)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pki::{common_name, issuer_common_name, leaf as test_leaf, pem_to_der};
    use std::os::unix::fs::PermissionsExt as _;

    const SERVICE: &str = "sample-apiserver";
    const NAMESPACE: &str = "sample-system";
    const IDENTITY: Identity = Identity { name: "sample-apiserver", version: "0.0.0", git_commit: "" };
    const DEV_CA_COMMON_NAME: &str = "sample-apiserver-ca";

    fn read(path: &Path) -> Vec<u8> {
        fs::read(path).unwrap()
    }

    fn snapshot(dir: &Path) -> Vec<Vec<u8>> {
        [CA_CERT_FILE, CA_KEY_FILE, SERVING_CERT_FILE, SERVING_KEY_FILE].iter().map(|f| read(&dir.join(f))).collect()
    }

    /// A throwaway CA: (issuer, certificate PEM).
    fn test_ca(cn: &str) -> (Issuer<'static, KeyPair>, String) {
        let ca = crate::test_pki::ca(cn);
        (ca.issuer, ca.pem)
    }

    #[test]
    fn the_ca_is_named_after_the_application() {
        assert_eq!(ca_common_name(&IDENTITY), DEV_CA_COMMON_NAME);
        let other = Identity { name: "greetings-apiserver", ..IDENTITY };
        let tmp = tempfile::tempdir().unwrap();
        let paths = ensure_dev_certs(tmp.path(), &other, SERVICE, NAMESPACE).unwrap();
        assert_eq!(common_name(&pem_to_der(&read(&paths.ca_cert))), "greetings-apiserver-ca");
        assert_eq!(issuer_common_name(&pem_to_der(&read(&paths.cert))), "greetings-apiserver-ca");
    }

    #[test]
    fn ensure_dev_certs_creates_then_reuses() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("nested/certs");
        let paths = ensure_dev_certs(&dir, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        assert_eq!(paths.ca_cert, dir.join("ca.crt"));
        assert_eq!(paths.cert, dir.join("tls.crt"));
        assert_eq!(paths.key, dir.join("tls.key"));
        for key in [dir.join("ca.key"), dir.join("tls.key")] {
            assert_eq!(fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600, "{}", key.display());
        }

        let ca = pem_to_der(&read(&paths.ca_cert));
        assert_eq!(common_name(&ca), DEV_CA_COMMON_NAME);
        let ca_x509 = parse_x509(&ca).unwrap();
        assert!(ca_x509.is_ca());
        let ca_days = (ca_x509.validity().not_after.timestamp() - unix_now()) / 86400;
        assert!((3649..=3650).contains(&ca_days), "CA valid for 10 years, not {ca_days} days");

        let leaf = pem_to_der(&read(&paths.cert));
        assert_eq!(issuer_common_name(&leaf), DEV_CA_COMMON_NAME);
        let leaf_x509 = parse_x509(&leaf).unwrap();
        assert!(missing_names(&leaf_x509, &serving_names(SERVICE, NAMESPACE)).unwrap().is_empty());
        let leaf_days = (leaf_x509.validity().not_after.timestamp() - unix_now()) / 86400;
        assert!((364..=365).contains(&leaf_days), "{leaf_days}");
        verify_chain(&ca, &leaf, &ring_provider()).unwrap();
        certified_key_from_pem(&read(&paths.cert), &read(&paths.key), &ring_provider()).unwrap();

        let before = snapshot(&dir);
        let again = ensure_dev_certs(&dir, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        assert_eq!(again, paths);
        assert_eq!(snapshot(&dir), before, "second call must reuse every file byte for byte");
    }

    #[test]
    fn ensure_dev_certs_regenerates_serving_cert_for_new_service_and_keeps_ca() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        ensure_dev_certs(dir, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        let before = snapshot(dir);

        let paths = ensure_dev_certs(dir, &IDENTITY, "other-svc", NAMESPACE).unwrap();
        let after = snapshot(dir);
        assert_eq!(after[0], before[0], "ca.crt kept");
        assert_eq!(after[1], before[1], "ca.key kept");
        assert_ne!(after[2], before[2], "tls.crt regenerated");
        assert_ne!(after[3], before[3], "tls.key regenerated");

        let leaf = pem_to_der(&after[2]);
        let leaf_x509 = parse_x509(&leaf).unwrap();
        assert!(missing_names(&leaf_x509, &serving_names("other-svc", NAMESPACE)).unwrap().is_empty());
        assert!(!missing_names(&leaf_x509, &serving_names(SERVICE, NAMESPACE)).unwrap().is_empty());
        verify_chain(&pem_to_der(&after[0]), &leaf, &ring_provider()).unwrap();
        certified_key_from_pem(&read(&paths.cert), &read(&paths.key), &ring_provider()).unwrap();
    }

    #[test]
    fn ensure_dev_certs_repairs_bad_serving_pair_and_expiring_cert_but_keeps_ca() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let paths = ensure_dev_certs(dir, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        let original = snapshot(dir);

        // A key that does not match tls.crt.
        fs::write(&paths.key, KeyPair::generate().unwrap().serialize_pem()).unwrap();
        ensure_dev_certs(dir, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        let repaired = snapshot(dir);
        assert_eq!(repaired[..2], original[..2], "CA kept");
        assert_ne!(repaired[2], original[2]);
        certified_key_from_pem(&repaired[2], &repaired[3], &ring_provider()).unwrap();

        // A valid pair from the same CA that expires in 10 days.
        let ca = load_ca(&paths.ca_cert, &dir.join(CA_KEY_FILE)).unwrap();
        let all_names = serving_names(SERVICE, NAMESPACE);
        let names: Vec<&str> = all_names.iter().map(String::as_str).collect();
        let (cert, key) = test_leaf(&ca.issuer, SERVICE, &names, ExtendedKeyUsagePurpose::ServerAuth, DAY * 10);
        fs::write(&paths.cert, &cert).unwrap();
        fs::write(&paths.key, &key).unwrap();
        assert!(check_serving(&paths, &ca, &serving_names(SERVICE, NAMESPACE), &ring_provider())
            .unwrap_err()
            .to_string()
            .contains("expires"));
        ensure_dev_certs(dir, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        let renewed = snapshot(dir);
        assert_eq!(renewed[..2], original[..2], "CA kept");
        assert_ne!(renewed[2], cert.as_bytes());
        let days =
            (parse_x509(&pem_to_der(&renewed[2])).unwrap().validity().not_after.timestamp() - unix_now()) / 86400;
        assert!(days >= 364, "{days}");

        // A valid pair signed by some other CA is replaced too.
        let (other_ca, _) = test_ca("someone-else");
        let (cert, key) = test_leaf(&other_ca, SERVICE, &names, ExtendedKeyUsagePurpose::ServerAuth, DAY * 365);
        fs::write(&paths.cert, &cert).unwrap();
        fs::write(&paths.key, &key).unwrap();
        ensure_dev_certs(dir, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        let resigned = snapshot(dir);
        assert_eq!(resigned[..2], original[..2], "CA kept");
        assert_eq!(issuer_common_name(&pem_to_der(&resigned[2])), DEV_CA_COMMON_NAME);
    }

    #[test]
    fn ensure_dev_certs_regenerates_everything_when_ca_is_missing_or_garbage() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        ensure_dev_certs(dir, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        let first = snapshot(dir);

        fs::remove_file(dir.join(CA_KEY_FILE)).unwrap();
        ensure_dev_certs(dir, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        let second = snapshot(dir);
        for (i, (a, b)) in first.iter().zip(&second).enumerate() {
            assert_ne!(a, b, "file {i} regenerated");
        }

        fs::write(dir.join(CA_CERT_FILE), b"not a certificate").unwrap();
        let paths = ensure_dev_certs(dir, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        let third = snapshot(dir);
        assert_ne!(third[1], second[1]);
        let ca = pem_to_der(&third[0]);
        verify_chain(&ca, &pem_to_der(&read(&paths.cert)), &ring_provider()).unwrap();
        for key in [dir.join("ca.key"), dir.join("tls.key")] {
            assert_eq!(fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }

    #[test]
    fn ensure_dev_certs_reuses_a_ca_with_printable_string_subject() {
        // A CA not made by us (PrintableString attributes, several RDNs): the issuer name of the
        // serving certificate must still match it byte for byte.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CountryName, DnValue::PrintableString("DE".try_into().unwrap()));
        params.distinguished_name.push(DnType::OrganizationName, DnValue::PrintableString("Demo".try_into().unwrap()));
        params.distinguished_name.push(DnType::CommonName, "custom-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let now = ASN1Time::now().to_datetime();
        params.not_before = now - BACKDATE;
        params.not_after = now + DAY * 400;
        let ca = params.self_signed(&key).unwrap();
        fs::write(dir.join(CA_CERT_FILE), ca.pem()).unwrap();
        fs::write(dir.join(CA_KEY_FILE), key.serialize_pem()).unwrap();

        let paths = ensure_dev_certs(dir, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        assert_eq!(read(&paths.ca_cert), ca.pem().as_bytes(), "CA reused");
        let leaf = pem_to_der(&read(&paths.cert));
        assert_eq!(issuer_common_name(&leaf), "custom-ca");
        verify_chain(ca.der(), &leaf, &ring_provider()).unwrap();
    }

    #[test]
    fn write_cert_bundle_writes_base64_ca_without_newline() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let paths = write_cert_bundle(&out, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        let bundle = fs::read_to_string(out.join(CA_BUNDLE_FILE)).unwrap();
        assert!(!bundle.ends_with('\n') && !bundle.contains('\n'));
        let decoded = base64::engine::general_purpose::STANDARD.decode(bundle.as_bytes()).unwrap();
        assert_eq!(decoded, read(&paths.ca_cert));
        assert!(decoded.starts_with(b"-----BEGIN CERTIFICATE-----"));
        // Idempotent like ensure_dev_certs.
        let before = snapshot(&out);
        write_cert_bundle(&out, &IDENTITY, SERVICE, NAMESPACE).unwrap();
        assert_eq!(snapshot(&out), before);
    }
}
