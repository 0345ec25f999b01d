//! Whether a certificate is for the host a client dialed, by Go's rules
//! (`(*x509.Certificate).VerifyHostname`): an IP address matches IP SANs only,
//! a name matches DNS SANs (case-insensitively, with a whole left-most `*`
//! label as a wildcard), and the legacy common name never matches. The
//! refusal reads as Go's `HostnameError`.

use std::net::IpAddr;

use super::certificate::Certificate;

/// Go names the SANs in its refusal up to this many.
const MAX_NAMES_SHOWN: usize = 100;

/// Ok when `certificate` is valid for `host`, else Go's words for why not.
pub(super) fn verify_hostname(certificate: &Certificate, host: &str) -> Result<(), String> {
    let candidate_ip =
        host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).filter(|h| !h.is_empty()).unwrap_or(host);
    if let Ok(ip) = candidate_ip.parse::<IpAddr>() {
        if certificate.ip_addresses.iter().any(|san| same_ip(*san, ip)) {
            return Ok(());
        }
        return Err(hostname_error(certificate, candidate_ip));
    }
    let candidate = host.to_ascii_lowercase();
    let valid_candidate = valid_hostname(&candidate, false);
    let host_parts = split_hostname(&candidate);
    for pattern in &certificate.dns_names {
        let matched = if valid_candidate && valid_hostname(pattern, true) {
            match_hostnames(pattern, &host_parts)
        } else {
            match_exactly(pattern, &candidate)
        };
        if matched {
            return Ok(());
        }
    }
    Err(hostname_error(certificate, host))
}

/// Go's `net.IP.Equal`: an IPv4 address equals its IPv4-mapped IPv6 form.
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    let canonical = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    canonical(a) == canonical(b)
}

/// Go's `HostnameError.Error()`.
fn hostname_error(certificate: &Certificate, host: &str) -> String {
    if !certificate.has_san && match_hostnames(&certificate.common_name, &split_hostname(host)) {
        return "x509: certificate relies on legacy Common Name field, use SANs instead".into();
    }
    let valid = if host.parse::<IpAddr>().is_ok() {
        let ips = &certificate.ip_addresses;
        if ips.is_empty() {
            return format!("x509: cannot validate certificate for {host} because it doesn't contain any IP SANs");
        }
        if ips.len() >= MAX_NAMES_SHOWN {
            return format!("x509: certificate is valid for {} IP SANs, but none matched {host}", ips.len());
        }
        ips.iter().map(go_ip_string).collect::<Vec<_>>().join(", ")
    } else {
        let names = &certificate.dns_names;
        if names.len() >= MAX_NAMES_SHOWN {
            return format!("x509: certificate is valid for {} names, but none matched {host}", names.len());
        }
        names.join(", ")
    };
    if valid.is_empty() {
        return format!("x509: certificate is not valid for any names, but wanted to match {host}");
    }
    format!("x509: certificate is valid for {valid}, not {host}")
}

/// An IP as Go's `net.IP.String` prints it (IPv4-mapped addresses as IPv4).
pub(super) fn go_ip_string(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or_else(|| v6.to_string(), |v4| v4.to_string()),
        IpAddr::V4(v4) => v4.to_string(),
    }
}

/// Go's `validHostname`: RFC 6125 names, with `_` allowed and, in a
/// pattern, a whole left-most `*` label.
fn valid_hostname(host: &str, is_pattern: bool) -> bool {
    let host = if is_pattern { host } else { host.strip_suffix('.').unwrap_or(host) };
    if host.is_empty() || host == "*" {
        return false;
    }
    for (i, part) in host.split('.').enumerate() {
        if part.is_empty() {
            return false;
        }
        if is_pattern && i == 0 && part == "*" {
            continue;
        }
        for (j, c) in part.chars().enumerate() {
            let ok = c.is_ascii_alphanumeric() || (c == '-' && j != 0) || c == '_';
            if !ok {
                return false;
            }
        }
    }
    true
}

fn match_exactly(a: &str, b: &str) -> bool {
    if a.is_empty() || a == "." || b.is_empty() || b == "." {
        return false;
    }
    a.eq_ignore_ascii_case(b)
}

fn match_hostnames(pattern: &str, host_parts: &[String]) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    if pattern.is_empty() || host_parts.is_empty() {
        return false;
    }
    let pattern_parts: Vec<&str> = pattern.split('.').collect();
    if pattern_parts.len() != host_parts.len() {
        return false;
    }
    pattern_parts.iter().zip(host_parts).enumerate().all(|(i, (p, h))| (i == 0 && *p == "*") || p == h)
}

fn split_hostname(host: &str) -> Vec<String> {
    let host = host.strip_suffix('.').unwrap_or(host);
    host.to_ascii_lowercase().split('.').map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(dns: &[&str], ips: &[&str], cn: &str) -> Certificate {
        let mut params = rcgen::CertificateParams::new(dns.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        for ip in ips {
            params.subject_alt_names.push(rcgen::SanType::IpAddress(ip.parse().unwrap()));
        }
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Certificate::parse(cert.der()).unwrap()
    }

    #[test]
    fn names_match_as_go_matches_them() {
        let cert =
            certificate(&["webhook.example.com", "*.svc.example", "under_score.local"], &["10.0.0.1", "::1"], "x");
        for ok in [
            "webhook.example.com",
            "WEBHOOK.example.com",
            "webhook.example.com.",
            "a.svc.example",
            "10.0.0.1",
            "[::1]",
            "::1",
            "under_score.local",
        ] {
            assert_eq!(verify_hostname(&cert, ok), Ok(()), "{ok}");
        }
        for refused in ["example.com", "a.b.svc.example", "svc.example", "10.0.0.2", "other"] {
            assert!(verify_hostname(&cert, refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn refusals_read_as_gos() {
        let dns_only = certificate(&["localhost", "webhook"], &[], "x");
        assert_eq!(
            verify_hostname(&dns_only, "127.0.0.1").unwrap_err(),
            "x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs"
        );
        assert_eq!(
            verify_hostname(&dns_only, "other.example").unwrap_err(),
            "x509: certificate is valid for localhost, webhook, not other.example"
        );
        let ips = certificate(&[], &["10.0.0.1", "::ffff:10.0.0.2"], "x");
        assert_eq!(
            verify_hostname(&ips, "127.0.0.1").unwrap_err(),
            "x509: certificate is valid for 10.0.0.1, 10.0.0.2, not 127.0.0.1"
        );
        assert_eq!(verify_hostname(&ips, "10.0.0.2"), Ok(()));
        let cn_only = certificate(&[], &[], "localhost");
        assert_eq!(
            verify_hostname(&cn_only, "localhost").unwrap_err(),
            "x509: certificate relies on legacy Common Name field, use SANs instead"
        );
        assert_eq!(
            verify_hostname(&cn_only, "other").unwrap_err(),
            "x509: certificate is not valid for any names, but wanted to match other"
        );
    }
}
