//! Throwaway certificate authorities for unit tests (the serving-certificate
//! tests in tls.rs and the authenticator's tests).

use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
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
