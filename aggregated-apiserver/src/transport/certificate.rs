//! A certificate as Go's `crypto/x509` sees it when it verifies a chain: the
//! fields its checks read, parsed once from DER. A certificate Go's parser
//! would refuse is refused here with the parser's words where they matter
//! (the rest read `x509: malformed certificate`).

use std::net::IpAddr;

use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, X509Certificate};

/// The extensions Go's parser understands; any other one marked critical
/// makes the certificate unusable (`x509: unhandled critical extension`).
const HANDLED_EXTENSIONS: &[&str] = &[
    "2.5.29.14",         // subjectKeyIdentifier
    "2.5.29.15",         // keyUsage
    "2.5.29.17",         // subjectAltName
    "2.5.29.19",         // basicConstraints
    "2.5.29.30",         // nameConstraints
    "2.5.29.31",         // cRLDistributionPoints
    "2.5.29.32",         // certificatePolicies
    "2.5.29.33",         // policyMappings
    "2.5.29.35",         // authorityKeyIdentifier
    "2.5.29.36",         // policyConstraints
    "2.5.29.37",         // extKeyUsage
    "2.5.29.54",         // inhibitAnyPolicy
    "1.3.6.1.5.5.7.1.1", // authorityInfoAccess
];

/// keyUsage's keyCertSign bit, in x509-parser's flag order.
const KEY_CERT_SIGN: u16 = 1 << 5;

/// Name constraints of one kind (RFC 5280 4.2.1.10), as Go enforces them.
#[derive(Debug, Default, Clone)]
pub(super) struct NameConstraints {
    pub permitted_dns: Vec<String>,
    pub excluded_dns: Vec<String>,
    /// (network address, mask), each 4 or 16 bytes.
    pub permitted_ip: Vec<(Vec<u8>, Vec<u8>)>,
    pub excluded_ip: Vec<(Vec<u8>, Vec<u8>)>,
    /// Constraints on e-mail addresses or URIs, which are not evaluated here:
    /// a chain that would need them is refused.
    pub other_kinds: bool,
}

/// The public key of a certificate, as its signature check needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PublicKey {
    /// The DER RSAPublicKey and its modulus length in bits.
    Rsa {
        der: Vec<u8>,
        bits: usize,
    },
    /// An uncompressed point on P-256 or P-384.
    Ecdsa {
        point: Vec<u8>,
        curve: Curve,
    },
    Ed25519(Vec<u8>),
    /// A key type or curve Go or ring does not verify with.
    Unsupported,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Curve {
    P256,
    P384,
}

/// One certificate, with what chain building, hostname and usage checks read.
#[derive(Debug, Clone)]
pub(super) struct Certificate {
    pub der: Vec<u8>,
    pub raw_subject: Vec<u8>,
    pub raw_issuer: Vec<u8>,
    pub raw_spki: Vec<u8>,
    pub version: u32,
    /// Seconds since the epoch.
    pub not_before: i64,
    pub not_after: i64,
    pub subject_key_id: Vec<u8>,
    pub authority_key_id: Vec<u8>,
    /// Some((is_ca, max_path_len)) when basicConstraints is present.
    pub basic_constraints: Option<(bool, Option<u32>)>,
    /// The keyUsage flags, 0 when absent.
    pub key_usage: u16,
    /// None: no extKeyUsage. Some((any, server_auth)).
    pub ext_key_usage: Option<(bool, bool)>,
    pub has_san: bool,
    /// The SAN extension's raw value, for Go's loop check between cross-signed CAs.
    pub raw_san: Option<Vec<u8>>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
    pub has_other_sans: bool,
    pub common_name: String,
    pub organization: Option<String>,
    /// The serial number in decimal, as Go prints a `*big.Int`.
    pub serial: String,
    pub unhandled_critical_extension: bool,
    pub name_constraints: Option<NameConstraints>,
    pub public_key: PublicKey,
    /// The signature algorithm's OID, and for RSASSA-PSS its hash's.
    pub signature_algorithm: String,
    pub pss_hash: Option<String>,
    pub signature: Vec<u8>,
    pub tbs: Vec<u8>,
}

impl Certificate {
    /// Parses one DER certificate. The error is Go's text for a certificate
    /// it cannot parse.
    pub fn parse(der: &[u8]) -> Result<Certificate, String> {
        let (rest, cert) = X509Certificate::from_der(der).map_err(|e| format!("x509: malformed certificate: {e}"))?;
        if !rest.is_empty() {
            return Err("x509: trailing data".into());
        }
        let tbs = &cert.tbs_certificate;
        let mut parsed = Certificate {
            der: der.to_vec(),
            raw_subject: tbs.subject.as_raw().to_vec(),
            raw_issuer: tbs.issuer.as_raw().to_vec(),
            raw_spki: tbs.subject_pki.raw.to_vec(),
            version: tbs.version.0 + 1,
            not_before: tbs.validity.not_before.timestamp(),
            not_after: tbs.validity.not_after.timestamp(),
            subject_key_id: Vec::new(),
            authority_key_id: Vec::new(),
            basic_constraints: None,
            key_usage: 0,
            ext_key_usage: None,
            has_san: false,
            raw_san: None,
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            has_other_sans: false,
            common_name: tbs
                .subject
                .iter_common_name()
                .last()
                .and_then(|cn| cn.as_str().ok())
                .unwrap_or_default()
                .to_string(),
            organization: tbs.subject.iter_organization().next().and_then(|o| o.as_str().ok()).map(str::to_string),
            serial: tbs.serial.to_string(),
            unhandled_critical_extension: false,
            name_constraints: None,
            public_key: public_key(&cert),
            signature_algorithm: cert.signature_algorithm.algorithm.to_id_string(),
            pss_hash: pss_hash(&cert),
            signature: cert.signature_value.data.to_vec(),
            tbs: tbs.as_ref().to_vec(),
        };
        for extension in tbs.extensions() {
            let oid = extension.oid.to_id_string();
            let mut handled = HANDLED_EXTENSIONS.contains(&oid.as_str());
            match extension.parsed_extension() {
                ParsedExtension::SubjectKeyIdentifier(id) => parsed.subject_key_id = id.0.to_vec(),
                ParsedExtension::AuthorityKeyIdentifier(aki) => {
                    parsed.authority_key_id = aki.key_identifier.as_ref().map(|id| id.0.to_vec()).unwrap_or_default();
                }
                ParsedExtension::BasicConstraints(bc) => {
                    parsed.basic_constraints = Some((bc.ca, bc.path_len_constraint));
                }
                ParsedExtension::KeyUsage(usage) => parsed.key_usage = usage.flags,
                ParsedExtension::ExtendedKeyUsage(eku) => parsed.ext_key_usage = Some((eku.any, eku.server_auth)),
                ParsedExtension::SubjectAlternativeName(san) => {
                    parsed.has_san = true;
                    parsed.raw_san = Some(extension.value.to_vec());
                    for name in &san.general_names {
                        match name {
                            GeneralName::DNSName(dns) => parsed.dns_names.push((*dns).to_string()),
                            GeneralName::IPAddress(bytes) => match ip_address(bytes) {
                                Some(ip) => parsed.ip_addresses.push(ip),
                                None => return Err(format!("x509: invalid IP length {}", bytes.len())),
                            },
                            GeneralName::RFC822Name(_) | GeneralName::URI(_) => parsed.has_other_sans = true,
                            _ => {}
                        }
                    }
                    // Go handles a SAN extension only when it names something it knows.
                    handled = !parsed.dns_names.is_empty() || !parsed.ip_addresses.is_empty() || parsed.has_other_sans;
                }
                ParsedExtension::NameConstraints(constraints) => {
                    parsed.name_constraints = Some(name_constraints(constraints));
                }
                ParsedExtension::ParseError { error } => {
                    return Err(format!("x509: malformed extension {oid}: {error}"));
                }
                _ => {}
            }
            if extension.critical && !handled {
                parsed.unhandled_critical_extension = true;
            }
        }
        Ok(parsed)
    }

    /// Whether this certificate's key may sign others (Go's `CheckSignatureFrom`
    /// preconditions on the parent).
    pub fn may_sign_certificates(&self) -> bool {
        match self.basic_constraints {
            Some((is_ca, _)) => is_ca && (self.key_usage == 0 || self.key_usage & KEY_CERT_SIGN != 0),
            // Only a v1 or v2 certificate may sign without basicConstraints.
            None => self.version < 3 && (self.key_usage == 0 || self.key_usage & KEY_CERT_SIGN != 0),
        }
    }

    /// The name Go shows for a certificate in a hint: its common name, else
    /// its first organization, else its serial number.
    pub fn display_name(&self) -> String {
        if !self.common_name.is_empty() {
            return self.common_name.clone();
        }
        match &self.organization {
            Some(organization) => organization.clone(),
            None => format!("serial:{}", self.serial),
        }
    }
}

fn ip_address(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => None,
    }
}

fn public_key(cert: &X509Certificate<'_>) -> PublicKey {
    let spki = &cert.tbs_certificate.subject_pki;
    let key = spki.subject_public_key.data.to_vec();
    match spki.algorithm.algorithm.to_id_string().as_str() {
        "1.2.840.113549.1.1.1" => match spki.parsed() {
            Ok(x509_parser::public_key::PublicKey::RSA(rsa)) => PublicKey::Rsa { bits: rsa.key_size(), der: key },
            _ => PublicKey::Unsupported,
        },
        "1.2.840.10045.2.1" => {
            let curve = spki.algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok()).map(|o| o.to_id_string());
            match curve.as_deref() {
                Some("1.2.840.10045.3.1.7") => PublicKey::Ecdsa { point: key, curve: Curve::P256 },
                Some("1.3.132.0.34") => PublicKey::Ecdsa { point: key, curve: Curve::P384 },
                _ => PublicKey::Unsupported,
            }
        }
        "1.3.101.112" => PublicKey::Ed25519(key),
        _ => PublicKey::Unsupported,
    }
}

fn pss_hash(cert: &X509Certificate<'_>) -> Option<String> {
    use x509_parser::signature_algorithm::SignatureAlgorithm;
    match SignatureAlgorithm::try_from(&cert.signature_algorithm) {
        Ok(SignatureAlgorithm::RSASSA_PSS(params)) => Some(params.hash_algorithm_oid().to_id_string()),
        _ => None,
    }
}

fn name_constraints(constraints: &x509_parser::extensions::NameConstraints<'_>) -> NameConstraints {
    let mut out = NameConstraints::default();
    let mut take = |subtrees: &Option<Vec<x509_parser::extensions::GeneralSubtree<'_>>>, permitted: bool| {
        for subtree in subtrees.iter().flatten() {
            match &subtree.base {
                GeneralName::DNSName(dns) => {
                    let list = if permitted { &mut out.permitted_dns } else { &mut out.excluded_dns };
                    list.push((*dns).to_string());
                }
                GeneralName::IPAddress(bytes) if bytes.len() == 8 || bytes.len() == 32 => {
                    let (address, mask) = bytes.split_at(bytes.len() / 2);
                    let list = if permitted { &mut out.permitted_ip } else { &mut out.excluded_ip };
                    list.push((address.to_vec(), mask.to_vec()));
                }
                _ => out.other_kinds = true,
            }
        }
    };
    take(&constraints.permitted_subtrees, true);
    take(&constraints.excluded_subtrees, false);
    out
}
