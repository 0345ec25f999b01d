//! Client identities for tests of authentication: certificates signed by the
//! control plane's CAs (or by a foreign one), and HTTPS clients presenting them.

use std::path::Path;
use std::time::Duration;

use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use serde_json::Value;

use super::cluster::ControlPlane;
use super::Server;

pub fn path_of(cp: &ControlPlane, key: &str) -> String {
    cp.info[key].as_str().unwrap_or_else(|| panic!("{key} in {}", cp.info)).to_string()
}

/// An HTTPS client presenting `cert_pem`+`key_pem`, trusting the server's CA.
pub fn client_with_identity(server: &Server, cert_pem: &[u8], key_pem: &[u8]) -> reqwest::Client {
    let mut identity = cert_pem.to_vec();
    identity.push(b'\n');
    identity.extend_from_slice(key_pem);
    let ca = std::fs::read(&server.ca_file).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .identity(reqwest::Identity::from_pem(&identity).unwrap())
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

pub fn files(cp: &ControlPlane, cert: &str, key: &str) -> (Vec<u8>, Vec<u8>) {
    (std::fs::read(path_of(cp, cert)).unwrap(), std::fs::read(path_of(cp, key)).unwrap())
}

/// A client certificate signed by `issuer`.
pub fn leaf(issuer: &Issuer<'_, KeyPair>, cn: &str) -> (Vec<u8>, Vec<u8>) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem().into_bytes(), key.serialize_pem().into_bytes())
}

pub fn new_ca(cn: &str) -> (Issuer<'static, KeyPair>, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    (Issuer::new(params, key), cert.pem())
}

pub fn existing_ca(cert: &Path, key: &Path) -> Issuer<'static, KeyPair> {
    // The control plane writes PKCS#1 RSA keys; rcgen reads PKCS#8.
    let out =
        std::process::Command::new("openssl").args(["pkcs8", "-topk8", "-nocrypt", "-in"]).arg(key).output().unwrap();
    assert!(out.status.success(), "openssl pkcs8: {}", String::from_utf8_lossy(&out.stderr));
    let key = KeyPair::from_pem(&String::from_utf8(out.stdout).unwrap()).unwrap();
    Issuer::from_ca_cert_pem(&std::fs::read_to_string(cert).unwrap(), key).unwrap()
}

pub async fn status_of(resp: reqwest::Response) -> (u16, Value) {
    let code = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}
