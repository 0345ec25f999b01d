//! Throwaway certificate authorities and certificates for unit tests (the
//! development-certificate tests in dev_certs.rs, the serving tests in tls.rs
//! and the authenticator's tests).

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;
use x509_parser::time::ASN1Time;

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86400);

/// A CA: its issuer (to sign with), certificate PEM and DER.
pub(crate) struct TestCa {
    pub(crate) issuer: Issuer<'static, KeyPair>,
    pub(crate) pem: String,
    pub(crate) der: CertificateDer<'static>,
}

fn ca_params(cn: &str, days: u32) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let now = ASN1Time::now().to_datetime();
    params.not_before = now - HOUR;
    params.not_after = now + DAY * days;
    params
}

/// A self-signed root CA valid from an hour ago for a year.
pub(crate) fn ca(cn: &str) -> TestCa {
    let key = KeyPair::generate().unwrap();
    let params = ca_params(cn, 365);
    let cert = params.self_signed(&key).unwrap();
    TestCa { pem: cert.pem(), der: cert.der().clone(), issuer: Issuer::new(params, key) }
}

/// An intermediate CA signed by `parent`, valid for 30 days.
pub(crate) fn intermediate(parent: &TestCa, cn: &str) -> TestCa {
    let key = KeyPair::generate().unwrap();
    let params = ca_params(cn, 30);
    let cert = params.signed_by(&key, &parent.issuer).unwrap();
    TestCa { pem: cert.pem(), der: cert.der().clone(), issuer: Issuer::new(params, key) }
}

/// A leaf signed by `ca`, valid from an hour ago for `validity`: (certificate PEM, key PEM).
pub(crate) fn leaf(
    ca: &Issuer<'static, KeyPair>,
    cn: &str,
    sans: &[&str],
    eku: ExtendedKeyUsagePurpose,
    validity: Duration,
) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![eku];
    let now = ASN1Time::now().to_datetime();
    params.not_before = now - HOUR;
    params.not_after = now + validity;
    let cert = params.signed_by(&key, ca).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// The first certificate of a PEM text.
pub(crate) fn pem_to_der(pem: &[u8]) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem).unwrap()
}

/// The certificate's subject common name.
pub(crate) fn common_name(der: &CertificateDer<'_>) -> String {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
    let cn = cert.subject().iter_common_name().next().unwrap().as_str().unwrap().to_string();
    cn
}

/// The certificate's issuer common name.
pub(crate) fn issuer_common_name(der: &CertificateDer<'_>) -> String {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
    let cn = cert.issuer().iter_common_name().next().unwrap().as_str().unwrap().to_string();
    cn
}
