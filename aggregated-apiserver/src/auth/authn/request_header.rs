//! Front-proxy (request header) authentication: a client certificate from the request-header CA
//! with an allowed Common Name makes the `X-Remote-*` style headers the user.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use http::header::HeaderName;
use http::HeaderMap;
use rustls::crypto::CryptoProvider;

use super::client_cert::{subject_of, CaBundle};
use super::peer::Peer;
use super::{RequestHeaderConfig, Step, UserInfo};

// ---------------------------------------------------------------------------------------------
// Compiled configuration
// ---------------------------------------------------------------------------------------------

/// Header names from configuration; unusable ones are skipped (they could never match a header).
fn header_names(list: &[String], what: &str) -> Vec<HeaderName> {
    list.iter()
        .filter(|name| !name.trim().is_empty())
        .filter_map(|name| match HeaderName::from_bytes(name.trim().as_bytes()) {
            Ok(header) => Some(header),
            Err(_) => {
                tracing::warn!(header = %name, "ignoring invalid {what} header name");
                None
            }
        })
        .collect()
}

pub(super) struct RequestHeaderAuth {
    pub(super) ca: CaBundle,
    allowed_names: HashSet<String>,
    username_headers: Vec<HeaderName>,
    group_headers: Vec<HeaderName>,
    /// Lower-cased, non-empty.
    extra_prefixes: Vec<String>,
    uid_headers: Vec<HeaderName>,
    /// This configuration's number (from 1), under which connections are
    /// remembered as verified.
    configuration: u64,
}

/// How long a connection's front-proxy certificate counts as checked (see
/// [`super::peer::VerifiedFrontProxy`]): its chain is verified again after
/// this (a certificate that expires meanwhile is refused at most this late),
/// as the token and authorization caches hold their answers (10 s).
const VERIFIED_TTL: Duration = Duration::from_secs(10);

/// Numbers each compiled configuration, so that a connection verified under
/// one is checked again under the next.
static CONFIGURATIONS: AtomicU64 = AtomicU64::new(0);

/// Values of a header as strings; values that are not valid UTF-8 are skipped.
fn header_strings<'a>(headers: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = &'a str> + 'a {
    headers.get_all(name).iter().filter_map(|value| std::str::from_utf8(value.as_bytes()).ok())
}

/// kube's `headerValue`: the first value of the first header (in order) whose first value is non-empty.
fn first_header_value(headers: &HeaderMap, names: &[HeaderName]) -> Option<String> {
    names
        .iter()
        .filter_map(|name| headers.get(name))
        .filter_map(|value| std::str::from_utf8(value.as_bytes()).ok())
        .find(|value| !value.is_empty())
        .map(str::to_string)
}

/// kube's `unescapeExtraKey` (`url.PathUnescape`): `%XX` decoded; a malformed escape (or a result
/// that is not UTF-8) leaves the key as it is.
pub(crate) fn unescape_extra_key(raw: &str) -> String {
    fn hex(digit: u8) -> Option<u8> {
        char::from(digit).to_digit(16).and_then(|d| u8::try_from(d).ok())
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            match (bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
                (Some(high), Some(low)) => {
                    out.push(high << 4 | low);
                    i += 3;
                }
                _ => return raw.to_string(),
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| raw.to_string())
}

impl RequestHeaderAuth {
    /// Removes every header this configuration reads identities from.
    pub(super) fn clear(&self, headers: &mut HeaderMap) {
        // A request from anyone but the front proxy has none of them: one
        // pass over its header names tells, where removing each costs a lookup.
        let read_here = |name: &HeaderName| {
            self.username_headers.iter().chain(&self.group_headers).chain(&self.uid_headers).any(|n| n == name)
                || self.extra_prefixes.iter().any(|prefix| name.as_str().starts_with(prefix.as_str()))
        };
        if !headers.keys().any(read_here) {
            return;
        }
        for name in self.username_headers.iter().chain(&self.group_headers).chain(&self.uid_headers) {
            headers.remove(name);
        }
        if !self.extra_prefixes.is_empty() {
            let extra: Vec<HeaderName> = headers
                .keys()
                .filter(|name| self.extra_prefixes.iter().any(|prefix| name.as_str().starts_with(prefix.as_str())))
                .cloned()
                .collect();
            for name in extra {
                headers.remove(&name);
            }
        }
    }

    pub(super) fn compile(config: &RequestHeaderConfig, provider: &Arc<CryptoProvider>) -> anyhow::Result<Self> {
        Ok(Self {
            ca: CaBundle::from_pem(&config.ca_pem, provider).context("request-header CA bundle")?,
            allowed_names: config.allowed_names.iter().cloned().collect(),
            username_headers: header_names(&config.username_headers, "request-header username"),
            group_headers: header_names(&config.group_headers, "request-header group"),
            extra_prefixes: config
                .extra_header_prefixes
                .iter()
                .map(|prefix| prefix.trim().to_lowercase())
                .filter(|prefix| !prefix.is_empty())
                .collect(),
            uid_headers: header_names(&config.uid_headers, "request-header UID"),
            configuration: CONFIGURATIONS.fetch_add(1, Ordering::Relaxed) + 1,
        })
    }

    /// Whether the connection's client certificate is the front proxy's: it chains to the
    /// request-header CA and, when allowed names are configured, has one of them as its common
    /// name. None: no certificate; Err: why not.
    pub(super) fn check_proxy_certificate(&self, peer: &Peer) -> Option<Result<(), String>> {
        let end_entity = peer.end_entity()?;
        let now = Instant::now();
        let verified = peer.verified_front_proxy();
        if verified.holds(self.configuration, now, VERIFIED_TTL) {
            return Some(Ok(()));
        }
        let checked = self.verify_proxy_certificate(end_entity, peer);
        if checked.is_ok() {
            verified.remember(self.configuration, now);
        }
        Some(checked)
    }

    fn verify_proxy_certificate(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'static>,
        peer: &Peer,
    ) -> Result<(), String> {
        if let Err(err) = self.ca.verify(end_entity, peer.intermediates()) {
            return Err(format!("request-header client certificate: {err}"));
        }
        if !self.allowed_names.is_empty() {
            let common_name = subject_of(end_entity).ok().and_then(|subject| subject.common_name);
            match common_name {
                Some(cn) if self.allowed_names.contains(&cn) => {}
                other => {
                    return Err(format!(
                        "request-header client certificate common name {:?} is not allowed",
                        other.unwrap_or_default()
                    ))
                }
            }
        }
        Ok(())
    }

    pub(super) fn authenticate(&self, headers: &HeaderMap, peer: &Peer) -> Step {
        match self.check_proxy_certificate(peer) {
            None => return Step::NoOpinion,
            Some(Err(reason)) => return Step::Rejected(reason),
            Some(Ok(())) => {}
        }
        let Some(name) = first_header_value(headers, &self.username_headers) else { return Step::NoOpinion };
        let uid = first_header_value(headers, &self.uid_headers).unwrap_or_default();
        let groups = self
            .group_headers
            .iter()
            .flat_map(|header| header_strings(headers, header))
            .filter(|group| !group.is_empty())
            .map(str::to_string)
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for prefix in &self.extra_prefixes {
            for header in headers.keys() {
                let Some(rest) = header.as_str().strip_prefix(prefix.as_str()) else { continue };
                let key = unescape_extra_key(rest);
                if key.is_empty() {
                    continue;
                }
                let values: Vec<String> = header_strings(headers, header).map(str::to_string).collect();
                extra.entry(key).or_default().extend(values);
            }
        }
        Step::User(UserInfo { name, uid, groups, extra })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::*;
    use super::*;
    use std::time::Instant;

    // ---- request header ---------------------------------------------------------------------------

    #[test]
    fn a_connection_is_verified_again_after_the_ttl_or_under_another_configuration() {
        let front = ca("front-proxy-ca");
        let cert = Leaf::client("front-proxy-client").sign(&front);
        let connection = peer(&[&cert]);
        let verified = connection.verified_front_proxy();
        let now = Instant::now();
        assert!(!verified.holds(1, now, VERIFIED_TTL), "never verified");
        verified.remember(1, now);
        assert!(verified.holds(1, now + Duration::from_secs(9), VERIFIED_TTL));
        assert!(!verified.holds(1, now + VERIFIED_TTL, VERIFIED_TTL), "verified again after the TTL");
        assert!(!verified.holds(2, now, VERIFIED_TTL), "another configuration checks for itself");
        let same_bytes = peer(&[&cert]);
        assert!(!same_bytes.verified_front_proxy().holds(1, now, VERIFIED_TTL), "by connection, not by bytes");
    }

    #[test]
    fn front_proxy_headers_are_cleared_after_authentication() {
        let front = ca("front-proxy-ca");
        let a = authn(AuthnConfig { request_header: Some(rh_config(&front.pem, &[])), client_ca_pem: None });
        let mut h = proxy_headers();
        h.append("accept", HeaderValue::from_static("application/json"));
        a.clear_request_headers(&mut h);
        let left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["accept"], "only the front-proxy headers go");
    }

    #[tokio::test]
    async fn request_header_user_from_headers() {
        let front = ca("front-proxy-ca");
        let cert = Leaf::client("front-proxy-client").sign(&front);
        let a = authn(AuthnConfig {
            request_header: Some(rh_config(&front.pem, &["front-proxy-client"])),
            client_ca_pem: None,
        });
        let got = user(a.authenticate(&proxy_headers(), &peer(&[&cert])).await);
        assert_eq!(
            got,
            UserInfo {
                name: "alice".into(),
                uid: "uid-1".into(),
                groups: strings(&["devs", "ops", AUTHENTICATED_GROUP]),
                extra: BTreeMap::from([
                    ("scopes".to_string(), strings(&["read", "write"])),
                    ("acme.com/project".to_string(), strings(&["demo"])),
                ]),
            }
        );
    }

    #[tokio::test]
    async fn request_header_details() {
        let front = ca("front-proxy-ca");
        let cert = Leaf::client("front-proxy-client").sign(&front);
        let mut config = rh_config(&front.pem, &[]);
        config.username_headers = strings(&["X-Remote-User", "X-Other-User"]);
        config.group_headers = strings(&["X-Remote-Group", "X-Other-Group"]);
        config.extra_header_prefixes = strings(&["x-remote-extra-", "X-Other-Extra-"]);
        let a = authn(AuthnConfig { request_header: Some(config), client_ca_pem: None });
        let p = peer(&[&cert]);

        // The first header whose first value is non-empty wins; empty groups are dropped; groups
        // keep header order then value order; system:authenticated is not added twice; a malformed
        // escape keeps the key as it is; extra values of both prefixes are merged.
        let h = headers(&[
            ("X-Remote-User", ""),
            ("X-Other-User", "bob"),
            ("X-Other-Group", "g3"),
            ("X-Remote-Group", "g1"),
            ("X-Remote-Group", ""),
            ("X-Remote-Group", AUTHENTICATED_GROUP),
            ("X-Remote-Extra-Bad%zzKey", "v"),
            ("X-Remote-Extra-Both", "1"),
            ("X-Other-Extra-Both", "2"),
            ("X-Remote-Extra-", "ignored: empty key"),
            ("X-Remote-Extra-Empty", ""),
        ]);
        let got = user(a.authenticate(&h, &p).await);
        assert_eq!(got.name, "bob");
        assert_eq!(got.uid, "");
        assert_eq!(got.groups, strings(&["g1", AUTHENTICATED_GROUP, "g3"]));
        assert_eq!(
            got.extra,
            BTreeMap::from([
                ("bad%zzkey".to_string(), strings(&["v"])),
                ("both".to_string(), strings(&["1", "2"])),
                ("empty".to_string(), strings(&[""])),
            ])
        );

        // A username value that is not UTF-8 is skipped.
        let mut h = HeaderMap::new();
        h.append("x-remote-user", HeaderValue::from_bytes(b"\xff\xfe").unwrap());
        h.append("x-other-user", HeaderValue::from_static("carol"));
        assert_eq!(user(a.authenticate(&h, &p).await).name, "carol");
    }

    #[test]
    fn unescape_extra_keys_like_url_path_unescape() {
        assert_eq!(unescape_extra_key("acme.com%2fproject"), "acme.com/project");
        assert_eq!(unescape_extra_key("acme.com%2Fproject"), "acme.com/project");
        assert_eq!(unescape_extra_key("a%20b+c"), "a b+c");
        assert_eq!(unescape_extra_key("caf%c3%a9"), "café");
        assert_eq!(unescape_extra_key("bad%2"), "bad%2");
        assert_eq!(unescape_extra_key("bad%g1"), "bad%g1");
        assert_eq!(unescape_extra_key("%ff"), "%ff", "not UTF-8: kept as is");
        assert_eq!(unescape_extra_key("%"), "%");
        assert_eq!(unescape_extra_key(""), "");
    }

    #[tokio::test]
    async fn forged_headers_without_a_certificate_are_ignored() {
        let front = ca("front-proxy-ca");
        let a = authn(AuthnConfig { request_header: Some(rh_config(&front.pem, &[])), client_ca_pem: None });
        assert_eq!(a.authenticate(&proxy_headers(), &no_peer()).await, AuthnOutcome::NoCredentials);
    }

    #[tokio::test]
    async fn forged_headers_with_a_certificate_from_another_ca_are_ignored() {
        let front = ca("front-proxy-ca");
        let other = ca("other-ca");
        let cert = Leaf::client("front-proxy-client").sign(&other);
        let a = authn(AuthnConfig {
            request_header: Some(rh_config(&front.pem, &["front-proxy-client"])),
            client_ca_pem: None,
        });
        let why = reason(a.authenticate(&proxy_headers(), &peer(&[&cert])).await);
        assert!(why.contains("request-header client certificate"), "{why}");
        assert!(!why.contains("alice"), "{why}");
    }

    #[tokio::test]
    async fn request_header_cn_must_be_allowed_unless_list_empty() {
        let front = ca("front-proxy-ca");
        let cert = Leaf::client("someone-else").sign(&front);
        let restricted = authn(AuthnConfig {
            request_header: Some(rh_config(&front.pem, &["front-proxy-client", "aggregator"])),
            client_ca_pem: None,
        });
        let why = reason(restricted.authenticate(&proxy_headers(), &peer(&[&cert])).await);
        assert!(why.contains("\"someone-else\" is not allowed"), "{why}");

        let no_cn = Leaf { cn: None, ..Leaf::client("") }.sign(&front);
        reason(restricted.authenticate(&proxy_headers(), &peer(&[&no_cn])).await);

        let open = authn(AuthnConfig { request_header: Some(rh_config(&front.pem, &[])), client_ca_pem: None });
        assert_eq!(user(open.authenticate(&proxy_headers(), &peer(&[&cert])).await).name, "alice");
        assert_eq!(user(open.authenticate(&proxy_headers(), &peer(&[&no_cn])).await).name, "alice");
    }

    #[tokio::test]
    async fn request_header_rejects_expired_not_yet_valid_and_server_only_certs() {
        let front = ca("front-proxy-ca");
        let a = authn(AuthnConfig { request_header: Some(rh_config(&front.pem, &[])), client_ca_pem: None });
        let expired = Leaf { validity: (-2 * 86400, -86400), ..Leaf::client("front-proxy-client") }.sign(&front);
        let future = Leaf { validity: (86400, 2 * 86400), ..Leaf::client("front-proxy-client") }.sign(&front);
        let server_only =
            Leaf { ekus: vec![ExtendedKeyUsagePurpose::ServerAuth], ..Leaf::client("front-proxy-client") }.sign(&front);
        for (what, cert) in [("expired", &expired), ("not yet valid", &future), ("serverAuth only", &server_only)] {
            let why = reason(a.authenticate(&proxy_headers(), &peer(&[cert])).await);
            assert!(why.contains("request-header client certificate"), "{what}: {why}");
        }

        // No EKU at all is fine (any usage), as is clientAuth next to serverAuth.
        let no_eku = Leaf { ekus: vec![], ..Leaf::client("front-proxy-client") }.sign(&front);
        let both = Leaf {
            ekus: vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth],
            ..Leaf::client("front-proxy-client")
        }
        .sign(&front);
        for cert in [&no_eku, &both] {
            assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[cert])).await).name, "alice");
        }
    }

    /// Deviation from Go's crypto/x509: webpki does not treat anyExtendedKeyUsage as clientAuth.
    #[tokio::test]
    async fn any_extended_key_usage_alone_is_rejected_by_webpki() {
        let front = ca("front-proxy-ca");
        let a = authn(AuthnConfig { request_header: Some(rh_config(&front.pem, &[])), client_ca_pem: None });
        let any = Leaf { ekus: vec![ExtendedKeyUsagePurpose::Any], ..Leaf::client("front-proxy-client") }.sign(&front);
        reason(a.authenticate(&proxy_headers(), &peer(&[&any])).await);
    }

    #[tokio::test]
    async fn request_header_without_username_header_falls_through() {
        let front = ca("front-proxy-ca");
        let cert = Leaf::client("front-proxy-client").sign(&front);
        let reviewer = Arc::new(FakeReviewer::default());
        let a = Authenticator::new(
            AuthnConfig { request_header: Some(rh_config(&front.pem, &[])), client_ca_pem: None },
            Some(reviewer.clone()),
            TokenOptions::default(),
        )
        .unwrap();
        let outcome = a.authenticate(&headers(&[("X-Remote-Group", "admins")]), &peer(&[&cert])).await;
        assert_eq!(outcome, AuthnOutcome::NoCredentials);

        // …to the token authenticator.
        let h = headers(&[("X-Remote-Group", "admins"), ("Authorization", "Bearer good-token")]);
        let got = user(a.authenticate(&h, &peer(&[&cert])).await);
        assert_eq!(got.name, "token-user");
        assert!(!got.groups.contains(&"admins".to_string()));
    }

    #[tokio::test]
    async fn chains_through_intermediates() {
        let root = ca("front-proxy-root");
        let mid = intermediate(&root, "front-proxy-intermediate");
        let cert = Leaf::client("front-proxy-client").sign(&mid);
        let a = authn(AuthnConfig {
            request_header: Some(rh_config(&root.pem, &["front-proxy-client"])),
            client_ca_pem: None,
        });
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&cert, &mid.der])).await).name, "alice");
        // Without the intermediate the chain cannot be built.
        reason(a.authenticate(&proxy_headers(), &peer(&[&cert])).await);
        // The intermediate itself as the bundle works too (it is a trust anchor then).
        let b = authn(AuthnConfig { request_header: Some(rh_config(&mid.pem, &[])), client_ca_pem: None });
        assert_eq!(user(b.authenticate(&proxy_headers(), &peer(&[&cert])).await).name, "alice");
        // A CA certificate presented as the end entity is rejected.
        reason(a.authenticate(&proxy_headers(), &peer(&[&mid.der])).await);
        assert_ne!(root.der, mid.der);
    }
}
