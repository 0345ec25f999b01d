//! X.509 client certificates: CA bundles that verify a peer's chain, the subject fields kube
//! reads a user from, and the client-CA authenticator itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{ensure, Context as _};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use sha2::{Digest as _, Sha256};
use x509_parser::certificate::X509Certificate;
use x509_parser::der_parser::asn1_rs::Tag;
use x509_parser::x509::AttributeTypeAndValue;

use super::peer::Peer;
use super::{Step, UserInfo, CREDENTIAL_ID_EXTRA_KEY};

/// OID of the `UID` subject attribute kube reads a certificate user's UID from (1.3.6.1.4.1.57683.2).
const UID_ATTRIBUTE_OID: &[u64] = &[1, 3, 6, 1, 4, 1, 57683, 2];

// ---------------------------------------------------------------------------------------------
// Certificates
// ---------------------------------------------------------------------------------------------

pub(super) fn ring_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A CA bundle able to verify client certificate chains.
pub(super) struct CaBundle {
    pub(super) verifier: Arc<dyn ClientCertVerifier>,
    /// Subjects of the bundle's certificates, for logs.
    pub(super) subjects: Vec<String>,
}

impl CaBundle {
    pub(super) fn from_pem(pem: &str, provider: &Arc<CryptoProvider>) -> anyhow::Result<Self> {
        let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("parsing certificate PEM")?;
        ensure!(!certs.is_empty(), "no certificate found in the PEM bundle");
        let mut roots = RootCertStore::empty();
        let mut subjects = Vec::with_capacity(certs.len());
        for (index, cert) in certs.into_iter().enumerate() {
            let subject = match x509_parser::parse_x509_certificate(cert.as_ref()) {
                Ok((_, parsed)) => parsed.subject().to_string(),
                Err(err) => anyhow::bail!("certificate #{index} of the bundle: {err}"),
            };
            roots.add(cert).with_context(|| format!("certificate #{index} ({subject}) as a trust anchor"))?;
            subjects.push(subject);
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .context("building the certificate verifier")?;
        Ok(Self { verifier, subjects })
    }

    /// Verifies the peer's chain as a client certificate valid now, chaining to this bundle.
    pub(super) fn verify(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
    ) -> Result<(), String> {
        self.verifier
            .verify_client_cert(end_entity, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|err| err.to_string())
    }
}

/// The subject fields we use from a (verified) end-entity certificate.
pub(super) struct Subject {
    /// The last CN, as Go's `pkix.Name.CommonName`; `None` when absent or not a string.
    pub(super) common_name: Option<String>,
    organizations: Vec<String>,
    uid: Result<String, String>,
    sha256_hex: String,
}

fn bmp_string(data: &[u8]) -> Option<String> {
    let pairs = data.chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return None;
    }
    let units = pairs.map(|pair| u16::from_be_bytes([pair[0], pair[1]]));
    char::decode_utf16(units).collect::<Result<String, _>>().ok()
}

/// A string-valued attribute (UTF8, Printable, IA5, Numeric, BMP; T61 when it is valid UTF-8).
fn attribute_string(attr: &AttributeTypeAndValue<'_>) -> Option<String> {
    let value = attr.attr_value();
    match value.header.tag() {
        Tag::BmpString => bmp_string(value.data),
        Tag::T61String => std::str::from_utf8(value.data).ok().map(str::to_string),
        _ => attr.as_str().ok().map(str::to_string),
    }
}

pub(super) fn subject_of(der: &CertificateDer<'_>) -> Result<Subject, String> {
    let (_, cert): (_, X509Certificate<'_>) =
        x509_parser::parse_x509_certificate(der.as_ref()).map_err(|err| format!("parsing certificate: {err}"))?;
    let subject = cert.subject();
    let common_name = subject.iter_common_name().last().and_then(attribute_string);
    let organizations = subject.iter_organization().filter_map(attribute_string).collect();
    let uid = {
        let mut uids = subject
            .iter_attributes()
            .filter(|attr| attr.attr_type().iter().is_some_and(|arcs| arcs.eq(UID_ATTRIBUTE_OID.iter().copied())));
        match (uids.next(), uids.next()) {
            (None, _) => Ok(String::new()),
            (Some(attr), None) => attribute_string(attr).ok_or_else(|| "UID attribute is not a string".to_string()),
            (Some(_), Some(_)) => Err("certificate has more than one UID attribute".to_string()),
        }
    };
    let sha256_hex = Sha256::digest(der.as_ref()).iter().map(|b| format!("{b:02x}")).collect();
    Ok(Subject { common_name, organizations, uid, sha256_hex })
}

/// Client-certificate users from the client CA.
pub(super) fn client_cert_user(ca: &CaBundle, peer: &Peer) -> Step {
    let Some(end_entity) = peer.end_entity() else { return Step::NoOpinion };
    if let Err(err) = ca.verify(end_entity, peer.intermediates()) {
        return Step::Rejected(format!("client certificate: {err}"));
    }
    let subject = match subject_of(end_entity) {
        Ok(subject) => subject,
        Err(err) => return Step::Rejected(format!("client certificate: {err}")),
    };
    let Some(name) = subject.common_name.filter(|cn| !cn.is_empty()) else { return Step::NoOpinion };
    let uid = match subject.uid {
        Ok(uid) => uid,
        Err(err) => return Step::Rejected(format!("client certificate: {err}")),
    };
    let extra =
        BTreeMap::from([(CREDENTIAL_ID_EXTRA_KEY.to_string(), vec![format!("X509SHA256={}", subject.sha256_hex)])]);
    Step::User(UserInfo { name, uid, groups: subject.organizations, extra })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::*;
    use super::*;

    // ---- client certificates ------------------------------------------------------------------

    #[tokio::test]
    async fn client_cert_user_from_subject() {
        let client_ca = ca("kubernetes-ca");
        let cert = Leaf { orgs: &["system:masters", "farmers"], ..Leaf::client("kubernetes-admin") }.sign(&client_ca);
        let a = authn(AuthnConfig { request_header: None, client_ca_pem: Some(client_ca.pem.clone()) });
        let got = user(a.authenticate(&HeaderMap::new(), &peer(&[&cert])).await);
        assert_eq!(got.name, "kubernetes-admin");
        assert_eq!(got.uid, "");
        assert_eq!(got.groups, strings(&["system:masters", "farmers", AUTHENTICATED_GROUP]));
        let fingerprint: String = Sha256::digest(cert.as_ref()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            got.extra,
            BTreeMap::from([(CREDENTIAL_ID_EXTRA_KEY.to_string(), vec![format!("X509SHA256={fingerprint}")])])
        );

        // Headers mean nothing to client-certificate users.
        let got = user(a.authenticate(&proxy_headers(), &peer(&[&cert])).await);
        assert_eq!(got.name, "kubernetes-admin");

        // No CN: no opinion. Expired: rejected.
        let no_cn = Leaf { cn: None, ..Leaf::client("") }.sign(&client_ca);
        assert_eq!(a.authenticate(&HeaderMap::new(), &peer(&[&no_cn])).await, AuthnOutcome::NoCredentials);
        let expired = Leaf { validity: (-2 * 86400, -86400), ..Leaf::client("old") }.sign(&client_ca);
        assert!(reason(a.authenticate(&HeaderMap::new(), &peer(&[&expired])).await).contains("client certificate"));
    }

    #[tokio::test]
    async fn front_proxy_cert_is_not_a_client_cert_user() {
        let front = ca("front-proxy-ca");
        let client_ca = ca("kubernetes-ca");
        let proxy_cert = Leaf::client("front-proxy-client").sign(&front);
        let a = authn(AuthnConfig {
            request_header: Some(rh_config(&front.pem, &["front-proxy-client"])),
            client_ca_pem: Some(client_ca.pem.clone()),
        });
        // Without username headers the proxy's certificate does not make it "front-proxy-client".
        let why = reason(a.authenticate(&HeaderMap::new(), &peer(&[&proxy_cert])).await);
        assert!(why.contains("client certificate"), "{why}");
        // With them it is the asserted user.
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&proxy_cert])).await).name, "alice");

        // A client-CA user cannot assert headers.
        let client_cert = Leaf::client("bob").sign(&client_ca);
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&client_cert])).await).name, "bob");
    }

    #[tokio::test]
    async fn same_ca_for_both_falls_through_to_client_cert_when_cn_not_allowed() {
        let shared = ca("shared-ca");
        let a = authn(AuthnConfig {
            request_header: Some(rh_config(&shared.pem, &["front-proxy-client"])),
            client_ca_pem: Some(shared.pem.clone()),
        });
        let kubelet = Leaf { orgs: &["system:nodes"], ..Leaf::client("system:node:n1") }.sign(&shared);
        let got = user(a.authenticate(&proxy_headers(), &peer(&[&kubelet])).await);
        assert_eq!(got.name, "system:node:n1");
        assert_eq!(got.groups, strings(&["system:nodes", AUTHENTICATED_GROUP]));
    }

    #[test]
    fn subject_strings() {
        assert_eq!(bmp_string(&[0, b'h', 0, b'i']), Some("hi".to_string()));
        assert_eq!(bmp_string(&[0, b'h', 0]), None);
        assert_eq!(bmp_string(&[0xd8, 0x00]), None, "lone surrogate");
    }
}
