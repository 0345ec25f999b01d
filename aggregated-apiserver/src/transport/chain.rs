//! Verifying a server's certificate chain as Go's `(*x509.Certificate).Verify`
//! does for `crypto/tls`, the client kube-apiserver calls webhooks, etcd and
//! other servers with: the leaf's validity and host first, then a chain to a
//! trusted certificate (a leaf that is itself trusted is a chain of one, which
//! is how a self-signed `openssl req -x509` certificate given as a caBundle
//! works), then the chain's key usage and name constraints. Where it refuses,
//! it says why in Go's words (`x509: certificate signed by unknown
//! authority`, `x509: certificate has expired or is not yet valid: ...`).
//!
//! Certificate policies (RFC 5280 6.1, which Go also evaluates) are not: a
//! chain that requires explicit policies is accepted here where Go may
//! refuse it. Constraints on e-mail addresses and URIs are not evaluated
//! either, and a chain that would need them is refused.

use std::net::IpAddr;

use super::certificate::{Certificate, Curve, NameConstraints, PublicKey};
use super::hostname::{go_ip_string, verify_hostname};

/// Go gives up after this many signature checks while building chains.
const MAX_SIGNATURE_CHECKS: usize = 100;

/// The certificates trusted as roots, parsed once.
#[derive(Debug, Default)]
pub(super) struct Pool {
    certificates: Vec<Certificate>,
}

impl Pool {
    pub fn new(certificates: Vec<Certificate>) -> Pool {
        Pool { certificates }
    }

    fn contains(&self, certificate: &Certificate) -> bool {
        self.certificates.iter().any(|c| c.der == certificate.der)
    }

    /// The certificates that may have issued `child`, most likely first (Go's
    /// `findPotentialParents`: by subject, then by key identifiers).
    fn potential_parents<'a>(&'a self, child: &Certificate) -> Vec<&'a Certificate> {
        let mut matching = Vec::new();
        let mut one_id = Vec::new();
        let mut mismatch = Vec::new();
        for candidate in self.certificates.iter().filter(|c| c.raw_subject == child.raw_issuer) {
            let (skid, akid) = (&candidate.subject_key_id, &child.authority_key_id);
            if skid == akid {
                matching.push(candidate);
            } else if skid.is_empty() != akid.is_empty() {
                one_id.push(candidate);
            } else {
                mismatch.push(candidate);
            }
        }
        matching.extend(one_id);
        matching.extend(mismatch);
        matching
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    Intermediate,
    Root,
}

/// What one verification is given.
pub(super) struct Verification<'a> {
    pub roots: &'a Pool,
    pub intermediates: &'a Pool,
    /// The host dialed: a DNS name or an IP address.
    pub host: &'a str,
    /// Seconds since the epoch.
    pub now: i64,
}

impl Verification<'_> {
    /// Ok when `leaf` chains to a root and is valid for the host, else Go's
    /// words for the first thing wrong.
    pub fn verify(&self, leaf: &Certificate) -> Result<(), String> {
        is_valid(leaf, None, &[], self.now)?;
        verify_hostname(leaf, self.host)?;
        let chains = if self.roots.contains(leaf) {
            vec![vec![leaf.clone()]]
        } else {
            let mut checks = 0;
            self.build_chains(std::slice::from_ref(leaf), &mut checks)?
        };
        let mut incompatible_usage = false;
        let mut constraint_error = None;
        for chain in &chains {
            if !chain_allows_server_auth(chain) {
                incompatible_usage = true;
                continue;
            }
            match check_name_constraints(chain) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    constraint_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = constraint_error {
            return Err(format!(
                "x509: a root or intermediate certificate is not authorized to sign for this name: {e}"
            ));
        }
        if incompatible_usage {
            return Err("x509: certificate specifies an incompatible key usage".into());
        }
        Err("x509: certificate signed by unknown authority".into())
    }

    /// Go's `buildChains`: every chain from the end of `chain` to a root,
    /// through the intermediates the server sent.
    fn build_chains(&self, chain: &[Certificate], checks: &mut usize) -> Result<Vec<Vec<Certificate>>, String> {
        let Some(child) = chain.last() else {
            return Err("x509: certificate signed by unknown authority".into());
        };
        let mut chains = Vec::new();
        let mut hint: Option<(String, String)> = None;
        let mut error = None;
        'candidates: for (role, pool) in [(Role::Root, self.roots), (Role::Intermediate, self.intermediates)] {
            for candidate in pool.potential_parents(child) {
                *checks += 1;
                if *checks > MAX_SIGNATURE_CHECKS {
                    error =
                        Some("x509: signature check attempts limit reached while verifying certificate chain".into());
                    break 'candidates;
                }
                if already_in_chain(candidate, chain) {
                    continue;
                }
                if let Err(e) = check_signature_from(child, candidate) {
                    hint.get_or_insert((e, candidate.display_name()));
                    continue;
                }
                // As in Go, a candidate's own fault is what the chain fails
                // with, unless a later candidate succeeds.
                if let Err(e) = is_valid(candidate, Some(role), chain, self.now) {
                    hint.get_or_insert((e.clone(), candidate.display_name()));
                    error = Some(e);
                    continue;
                }
                let mut longer = chain.to_vec();
                longer.push(candidate.clone());
                match role {
                    Role::Root => chains.push(longer),
                    Role::Intermediate => match self.build_chains(&longer, checks) {
                        Ok(found) => {
                            chains.extend(found);
                            error = None;
                        }
                        Err(e) => error = Some(e),
                    },
                }
            }
        }
        if !chains.is_empty() {
            return Ok(chains);
        }
        if let Some(e) = error {
            return Err(e);
        }
        Err(match hint {
            None => "x509: certificate signed by unknown authority".into(),
            Some((why, name)) => format!(
                "x509: certificate signed by unknown authority (possibly because of {why:?} while trying to verify candidate authority certificate {name:?})"
            ),
        })
    }
}

/// Go's `isValid`: critical extensions, the issuer's name, the validity
/// period, and for an issuer its right to sign and its path length.
fn is_valid(cert: &Certificate, role: Option<Role>, chain: &[Certificate], now: i64) -> Result<(), String> {
    if cert.unhandled_critical_extension {
        return Err("x509: unhandled critical extension".into());
    }
    if let Some(child) = chain.last() {
        if child.raw_issuer != cert.raw_subject {
            return Err("x509: issuer name does not match subject from issuing certificate".into());
        }
    }
    if now < cert.not_before {
        return Err(format!(
            "x509: certificate has expired or is not yet valid: current time {} is before {}",
            rfc3339(now),
            rfc3339(cert.not_before)
        ));
    }
    if now > cert.not_after {
        return Err(format!(
            "x509: certificate has expired or is not yet valid: current time {} is after {}",
            rfc3339(now),
            rfc3339(cert.not_after)
        ));
    }
    if role == Some(Role::Intermediate) && !matches!(cert.basic_constraints, Some((true, _))) {
        return Err("x509: certificate is not authorized to sign other certificates".into());
    }
    if let Some((_, Some(max_path_len))) = cert.basic_constraints {
        let intermediates = chain.len().saturating_sub(1);
        if intermediates > max_path_len as usize {
            return Err("x509: too many intermediates for path length constraint".into());
        }
    }
    Ok(())
}

/// Go's loop guard: a certificate with the same subject, key and SANs as one
/// already in the chain (a cross-signed CA) is not followed again.
fn already_in_chain(candidate: &Certificate, chain: &[Certificate]) -> bool {
    chain.iter().any(|c| {
        c.raw_subject == candidate.raw_subject && c.raw_spki == candidate.raw_spki && c.raw_san == candidate.raw_san
    })
}

/// Go's `CheckSignatureFrom`: whether `parent` may sign and did sign `child`.
fn check_signature_from(child: &Certificate, parent: &Certificate) -> Result<(), String> {
    if !parent.may_sign_certificates() {
        return Err("x509: invalid signature: parent certificate cannot sign this kind of certificate".into());
    }
    use ring::signature as sig;
    let unsupported = || Err("x509: cannot verify signature: algorithm unimplemented".to_string());
    let insecure = |name: &str| Err(format!("x509: cannot verify signature: insecure algorithm {name}"));
    let verify = |algorithm: &'static dyn sig::VerificationAlgorithm, key: &[u8], failure: &str| {
        sig::UnparsedPublicKey::new(algorithm, key)
            .verify(&child.tbs, &child.signature)
            .map_err(|_| failure.to_string())
    };
    const RSA_FAILURE: &str = "crypto/rsa: verification error";
    const ECDSA_FAILURE: &str = "x509: ECDSA verification failure";
    let expects = |kind: &str| {
        Err(format!("x509: signature algorithm specifies an {kind} public key, but have public key of another type"))
    };
    match (child.signature_algorithm.as_str(), &parent.public_key) {
        ("1.2.840.113549.1.1.4", _) => insecure("MD5-RSA"),
        ("1.2.840.113549.1.1.5", _) => insecure("SHA1-RSA"),
        ("1.2.840.10045.4.1", _) => insecure("ECDSA-SHA1"),
        (rsa @ ("1.2.840.113549.1.1.11" | "1.2.840.113549.1.1.12" | "1.2.840.113549.1.1.13"), key) => {
            let PublicKey::Rsa { der, .. } = key else { return expects("RSA") };
            let algorithm: &'static dyn sig::VerificationAlgorithm = match rsa {
                "1.2.840.113549.1.1.11" => &sig::RSA_PKCS1_2048_8192_SHA256,
                "1.2.840.113549.1.1.12" => &sig::RSA_PKCS1_2048_8192_SHA384,
                _ => &sig::RSA_PKCS1_2048_8192_SHA512,
            };
            verify(algorithm, der, RSA_FAILURE)
        }
        ("1.2.840.113549.1.1.10", key) => {
            let PublicKey::Rsa { der, .. } = key else { return expects("RSA") };
            let algorithm: &'static dyn sig::VerificationAlgorithm = match child.pss_hash.as_deref() {
                Some("2.16.840.1.101.3.4.2.1") => &sig::RSA_PSS_2048_8192_SHA256,
                Some("2.16.840.1.101.3.4.2.2") => &sig::RSA_PSS_2048_8192_SHA384,
                Some("2.16.840.1.101.3.4.2.3") => &sig::RSA_PSS_2048_8192_SHA512,
                _ => return unsupported(),
            };
            verify(algorithm, der, RSA_FAILURE)
        }
        (ecdsa @ ("1.2.840.10045.4.3.2" | "1.2.840.10045.4.3.3"), key) => {
            let PublicKey::Ecdsa { point, curve } = key else { return expects("ECDSA") };
            let algorithm: &'static dyn sig::VerificationAlgorithm = match (curve, ecdsa == "1.2.840.10045.4.3.2") {
                (Curve::P256, true) => &sig::ECDSA_P256_SHA256_ASN1,
                (Curve::P256, false) => &sig::ECDSA_P256_SHA384_ASN1,
                (Curve::P384, true) => &sig::ECDSA_P384_SHA256_ASN1,
                (Curve::P384, false) => &sig::ECDSA_P384_SHA384_ASN1,
            };
            verify(algorithm, point, ECDSA_FAILURE)
        }
        ("1.3.101.112", key) => {
            let PublicKey::Ed25519(public) = key else { return expects("Ed25519") };
            verify(&sig::ED25519, public, "x509: Ed25519 verification failure")
        }
        _ => unsupported(),
    }
}

/// Go's `checkChainForKeyUsage` for a server: every certificate that lists
/// extended key usages lists serverAuth or any.
fn chain_allows_server_auth(chain: &[Certificate]) -> bool {
    chain.iter().all(|c| match c.ext_key_usage {
        None => true,
        Some((any, server_auth)) => any || server_auth,
    })
}

/// Go's `checkChainConstraints`: the names of every certificate below a
/// constrained one (its DNS and IP SANs) are within its constraints.
fn check_name_constraints(chain: &[Certificate]) -> Result<(), String> {
    for (i, constrained) in chain.iter().enumerate() {
        let Some(constraints) = &constrained.name_constraints else { continue };
        for below in chain[..i].iter().filter(|c| c.has_san) {
            if constraints.other_kinds && below.has_other_sans {
                return Err("e-mail address and URI constraints are not supported".into());
            }
            for ip in &below.ip_addresses {
                check_ip(constraints, ip)?;
            }
            for name in &below.dns_names {
                check_dns(constraints, name)?;
            }
        }
    }
    Ok(())
}

fn check_ip(constraints: &NameConstraints, ip: &IpAddr) -> Result<(), String> {
    let bytes: Vec<u8> = match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    };
    let contains = |(network, mask): &(Vec<u8>, Vec<u8>)| {
        network.len() == bytes.len() && bytes.iter().zip(network).zip(mask).all(|((b, n), m)| b & m == n & m)
    };
    let shown = go_ip_string(ip);
    let family: Vec<_> = constraints.permitted_ip.iter().filter(|(n, _)| n.len() == bytes.len()).collect();
    if !constraints.permitted_ip.is_empty() && !family.iter().any(|c| contains(c)) {
        return Err(format!("IP address {shown:?} is not permitted by any constraint"));
    }
    if let Some((network, mask)) = constraints.excluded_ip.iter().find(|c| contains(c)) {
        return Err(format!("IP address {shown:?} is excluded by constraint {:?}", ip_network(network, mask)));
    }
    Ok(())
}

/// A network as Go's `net.IPNet.String` prints it.
fn ip_network(network: &[u8], mask: &[u8]) -> String {
    let ip = match network.len() {
        4 => <[u8; 4]>::try_from(network).map(IpAddr::from).ok(),
        _ => <[u8; 16]>::try_from(network).map(IpAddr::from).ok(),
    };
    let ones: u32 = mask.iter().map(|b| b.count_ones()).sum();
    ip.map_or_else(|| "<nil>".into(), |ip| format!("{}/{ones}", go_ip_string(&ip)))
}

fn check_dns(constraints: &NameConstraints, name: &str) -> Result<(), String> {
    if !constraints.permitted_dns.is_empty() && !constraints.permitted_dns.iter().any(|c| dns_within(c, name)) {
        return Err(format!("DNS name {name:?} is not permitted by any constraint"));
    }
    let excluded = constraints.excluded_dns.iter().find(|c| {
        dns_within(c, name)
            // A wildcard name is excluded by a constraint on one of the names it covers.
            || (name.starts_with('*')
                && !trim_first_label(c).is_empty()
                && trim_first_label(c).eq_ignore_ascii_case(trim_first_label(name)))
    });
    if let Some(constraint) = excluded {
        return Err(format!("DNS name {name:?} is excluded by constraint {constraint:?}"));
    }
    Ok(())
}

/// Go's `dnsHasSuffix`: `name` is `constraint` or below it; a constraint
/// starting with `.` covers only names below it; an empty one covers all.
fn dns_within(constraint: &str, name: &str) -> bool {
    if constraint.is_empty() {
        return true;
    }
    let (c, n) = (constraint.as_bytes(), name.as_bytes());
    if c.len() > n.len() || !n[n.len() - c.len()..].eq_ignore_ascii_case(c) {
        return false;
    }
    c[0] == b'.' || n.len() == c.len() || n[n.len() - c.len() - 1] == b'.'
}

fn trim_first_label(name: &str) -> &str {
    name.split_once('.').map_or("", |(_, rest)| rest)
}

/// A time as Go's `time.RFC3339` prints a UTC time.
fn rfc3339(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map_or_else(|| seconds.to_string(), |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
}

#[cfg(test)]
mod tests {
    use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, SanType};

    use super::*;

    struct Made {
        certificate: Certificate,
        issuer: Issuer<'static, KeyPair>,
    }

    fn params(cn: &str, sans: &[&str], is_ca: IsCa) -> CertificateParams {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        for san in sans {
            params.subject_alt_names.push(match san.parse() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName((*san).try_into().unwrap()),
            });
        }
        params.distinguished_name.push(DnType::CommonName, cn);
        params.is_ca = is_ca;
        params
    }

    fn made(params: CertificateParams, signer: Option<&Issuer<'static, KeyPair>>) -> Made {
        let key = KeyPair::generate().unwrap();
        let cert = match signer {
            None => params.self_signed(&key).unwrap(),
            Some(issuer) => params.signed_by(&key, issuer).unwrap(),
        };
        Made { certificate: Certificate::parse(cert.der()).unwrap(), issuer: Issuer::new(params, key) }
    }

    fn ca(cn: &str) -> Made {
        made(params(cn, &[], IsCa::Ca(BasicConstraints::Unconstrained)), None)
    }

    fn verify(leaf: &Made, roots: &[&Made], intermediates: &[&Made], host: &str) -> Result<(), String> {
        let pool = |made: &[&Made]| Pool::new(made.iter().map(|m| m.certificate.clone()).collect());
        let (roots, intermediates) = (pool(roots), pool(intermediates));
        let now = chrono::Utc::now().timestamp();
        Verification { roots: &roots, intermediates: &intermediates, host, now }.verify(&leaf.certificate)
    }

    #[test]
    fn a_trusted_self_signed_certificate_is_its_own_chain_even_when_it_says_ca() {
        // What `openssl req -x509` makes: CA:TRUE, self-signed, given as the caBundle.
        let both =
            made(params("webhook", &["localhost", "127.0.0.1"], IsCa::Ca(BasicConstraints::Unconstrained)), None);
        assert_eq!(verify(&both, &[&both], &[], "127.0.0.1"), Ok(()));
        assert_eq!(verify(&both, &[&both], &[], "localhost"), Ok(()));
        // Its host is still checked, and trust still needs it in the pool.
        assert_eq!(
            verify(&both, &[&both], &[], "other.example").unwrap_err(),
            "x509: certificate is valid for localhost, not other.example"
        );
        assert_eq!(
            verify(&both, &[&ca("other")], &[], "localhost").unwrap_err(),
            "x509: certificate signed by unknown authority"
        );
        let explicit_leaf = made(params("webhook", &["localhost"], IsCa::ExplicitNoCa), None);
        assert_eq!(verify(&explicit_leaf, &[&explicit_leaf], &[], "localhost"), Ok(()));
    }

    #[test]
    fn chains_go_through_the_intermediates_the_server_sent() {
        let root = ca("root");
        let intermediate =
            made(params("intermediate", &[], IsCa::Ca(BasicConstraints::Unconstrained)), Some(&root.issuer));
        let leaf = made(params("leaf", &["localhost"], IsCa::NoCa), Some(&intermediate.issuer));
        assert_eq!(verify(&leaf, &[&root], &[&intermediate], "localhost"), Ok(()));
        assert_eq!(
            verify(&leaf, &[&root], &[], "localhost").unwrap_err(),
            "x509: certificate signed by unknown authority"
        );
        // A leaf that says CA:TRUE under a CA is still a leaf to Go.
        let ca_leaf =
            made(params("leaf", &["localhost"], IsCa::Ca(BasicConstraints::Unconstrained)), Some(&intermediate.issuer));
        assert_eq!(verify(&ca_leaf, &[&root], &[&intermediate], "localhost"), Ok(()));
    }

    #[test]
    fn a_parent_that_may_not_sign_or_did_not_sign_is_named_in_the_hint() {
        let root = ca("root");
        let not_a_ca = made(params("not-a-ca", &[], IsCa::ExplicitNoCa), Some(&root.issuer));
        let leaf = made(params("leaf", &["localhost"], IsCa::NoCa), Some(&not_a_ca.issuer));
        assert_eq!(
            verify(&leaf, &[&root], &[&not_a_ca], "localhost").unwrap_err(),
            "x509: certificate signed by unknown authority (possibly because of \"x509: invalid signature: parent \
             certificate cannot sign this kind of certificate\" while trying to verify candidate authority certificate \
             \"not-a-ca\")"
        );
        // Another CA of the same name: its signature does not verify.
        let real = ca("shared-name");
        let impostor = ca("shared-name");
        let signed = made(params("leaf", &["localhost"], IsCa::NoCa), Some(&real.issuer));
        assert_eq!(
            verify(&signed, &[&impostor], &[], "localhost").unwrap_err(),
            "x509: certificate signed by unknown authority (possibly because of \"x509: ECDSA verification failure\" \
             while trying to verify candidate authority certificate \"shared-name\")"
        );
    }

    #[test]
    fn validity_is_checked_on_the_leaf_first_and_on_each_parent() {
        let root = ca("root");
        let mut expired = params("leaf", &["localhost"], IsCa::NoCa);
        expired.not_before = rcgen::date_time_ymd(2020, 1, 1);
        expired.not_after = rcgen::date_time_ymd(2021, 1, 1);
        let expired = made(expired, Some(&root.issuer));
        let refused = verify(&expired, &[&root], &[], "other-host").unwrap_err();
        assert!(refused.starts_with("x509: certificate has expired or is not yet valid: current time 20"), "{refused}");
        assert!(refused.ends_with(" is after 2021-01-01T00:00:00Z"), "{refused}");
        let mut old_ca = params("old-root", &[], IsCa::Ca(BasicConstraints::Unconstrained));
        old_ca.not_before = rcgen::date_time_ymd(2020, 1, 1);
        old_ca.not_after = rcgen::date_time_ymd(2021, 1, 1);
        let old_ca = made(old_ca, None);
        let leaf = made(params("leaf", &["localhost"], IsCa::NoCa), Some(&old_ca.issuer));
        let refused = verify(&leaf, &[&old_ca], &[], "localhost").unwrap_err();
        assert!(refused.ends_with(" is after 2021-01-01T00:00:00Z"), "{refused}");
    }

    #[test]
    fn a_leaf_for_clients_only_is_refused_for_its_usage() {
        let root = ca("root");
        let mut client_only = params("leaf", &["localhost"], IsCa::NoCa);
        client_only.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let leaf = made(client_only, Some(&root.issuer));
        assert_eq!(
            verify(&leaf, &[&root], &[], "localhost").unwrap_err(),
            "x509: certificate specifies an incompatible key usage"
        );
        let mut both = params("leaf", &["localhost"], IsCa::NoCa);
        both.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth, ExtendedKeyUsagePurpose::ServerAuth];
        assert_eq!(verify(&made(both, Some(&root.issuer)), &[&root], &[], "localhost"), Ok(()));
    }

    #[test]
    fn name_constraints_bind_the_names_below_them() {
        let mut constrained = params("constrained", &[], IsCa::Ca(BasicConstraints::Unconstrained));
        constrained.name_constraints = Some(rcgen::NameConstraints {
            permitted_subtrees: vec![
                rcgen::GeneralSubtree::DnsName("svc.example".into()),
                rcgen::GeneralSubtree::IpAddress(rcgen::CidrSubnet::V4([10, 0, 0, 0], [255, 0, 0, 0])),
            ],
            excluded_subtrees: vec![rcgen::GeneralSubtree::DnsName("secret.svc.example".into())],
        });
        let root = made(constrained, None);
        let inside = made(params("leaf", &["hook.svc.example", "10.1.2.3"], IsCa::NoCa), Some(&root.issuer));
        assert_eq!(verify(&inside, &[&root], &[], "hook.svc.example"), Ok(()));
        let outside = made(params("leaf", &["hook.svc.example", "hook.other"], IsCa::NoCa), Some(&root.issuer));
        assert_eq!(
            verify(&outside, &[&root], &[], "hook.svc.example").unwrap_err(),
            "x509: a root or intermediate certificate is not authorized to sign for this name: DNS name \
             \"hook.other\" is not permitted by any constraint"
        );
        let excluded = made(params("leaf", &["a.secret.svc.example"], IsCa::NoCa), Some(&root.issuer));
        assert_eq!(
            verify(&excluded, &[&root], &[], "a.secret.svc.example").unwrap_err(),
            "x509: a root or intermediate certificate is not authorized to sign for this name: DNS name \
             \"a.secret.svc.example\" is excluded by constraint \"secret.svc.example\""
        );
        let wrong_ip = made(params("leaf", &["192.168.0.1"], IsCa::NoCa), Some(&root.issuer));
        assert_eq!(
            verify(&wrong_ip, &[&root], &[], "192.168.0.1").unwrap_err(),
            "x509: a root or intermediate certificate is not authorized to sign for this name: IP address \
             \"192.168.0.1\" is not permitted by any constraint"
        );
    }
}
