//! Test helpers shared by the authenticator's unit tests: CAs and leaf certificates, headers,
//! and a fake token reviewer.

#![allow(dead_code)]

pub(super) use std::collections::BTreeMap;
pub(super) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
pub(super) use std::sync::Arc;
pub(super) use std::time::Duration;

pub(super) use http::header::{HeaderName, AUTHORIZATION};
pub(super) use http::{HeaderMap, HeaderValue};
pub(super) use rcgen::ExtendedKeyUsagePurpose;
use rcgen::{CertificateParams, DistinguishedName, DnType, IsCa, KeyPair};
pub(super) use rustls::pki_types::CertificateDer;
use x509_parser::time::ASN1Time;

use super::{
    Authenticator, AuthnConfig, AuthnOutcome, RequestHeaderConfig, TokenOptions, TokenReviewer, UserInfo,
    ANONYMOUS_USER,
};
pub(super) use crate::auth::authn::peer::Peer;
pub(super) use crate::auth::review::ReviewError;

pub(super) const HOUR: Duration = Duration::from_secs(3600);
pub(super) const DAY: Duration = Duration::from_secs(86400);

pub(super) use crate::test_pki::{ca, intermediate, TestCa as Ca};

pub(super) struct Leaf<'a> {
    pub(super) cn: Option<&'a str>,
    pub(super) orgs: &'a [&'a str],
    pub(super) ekus: Vec<ExtendedKeyUsagePurpose>,
    /// (not_before, not_after) relative to now, in seconds.
    pub(super) validity: (i64, i64),
}

impl<'a> Leaf<'a> {
    pub(super) fn client(cn: &'a str) -> Self {
        Self { cn: Some(cn), orgs: &[], ekus: vec![ExtendedKeyUsagePurpose::ClientAuth], validity: (-3600, 86400) }
    }
    pub(super) fn sign(&self, ca: &Ca) -> CertificateDer<'static> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        if let Some(cn) = self.cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        // rcgen keeps one value per DnType; the custom type with O's OID adds a second O.
        for (i, org) in self.orgs.iter().enumerate() {
            let ty = if i == 0 { DnType::OrganizationName } else { DnType::CustomDnType(vec![2, 5, 4, 10]) };
            params.distinguished_name.push(ty, *org);
        }
        params.is_ca = IsCa::ExplicitNoCa;
        params.extended_key_usages = self.ekus.clone();
        let now = ASN1Time::now().to_datetime();
        let at = |secs: i64| {
            let span = Duration::from_secs(secs.unsigned_abs());
            if secs < 0 {
                now - span
            } else {
                now + span
            }
        };
        params.not_before = at(self.validity.0);
        params.not_after = at(self.validity.1);
        params.signed_by(&key, &ca.issuer).unwrap().der().clone()
    }
}

pub(super) fn peer(chain: &[&CertificateDer<'static>]) -> Peer {
    Peer::new(None, Some(chain.iter().map(|c| (*c).clone()).collect()))
}

pub(super) fn no_peer() -> Peer {
    Peer::new(None, None)
}

pub(super) fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

pub(super) fn rh_config(ca_pem: &str, allowed: &[&str]) -> RequestHeaderConfig {
    RequestHeaderConfig {
        ca_pem: ca_pem.to_string(),
        allowed_names: strings(allowed),
        username_headers: strings(&["X-Remote-User"]),
        group_headers: strings(&["X-Remote-Group"]),
        extra_header_prefixes: strings(&["X-Remote-Extra-"]),
        uid_headers: strings(&["X-Remote-Uid"]),
    }
}

pub(super) fn authn(config: AuthnConfig) -> Authenticator {
    Authenticator::new(config, None, TokenOptions::default()).unwrap()
}

pub(super) fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_str(value).unwrap());
    }
    map
}

pub(super) fn proxy_headers() -> HeaderMap {
    headers(&[
        ("X-Remote-User", "alice"),
        ("X-Remote-Group", "devs"),
        ("X-Remote-Group", "ops"),
        ("X-Remote-Extra-Scopes", "read"),
        ("X-Remote-Extra-Scopes", "write"),
        ("X-Remote-Extra-Acme.com%2Fproject", "demo"),
        ("X-Remote-Uid", "uid-1"),
    ])
}

pub(super) fn user(outcome: AuthnOutcome) -> UserInfo {
    match outcome {
        AuthnOutcome::Authenticated(user) => UserInfo::clone(&user),
        other => panic!("expected a user, got {other:?}"),
    }
}

pub(super) fn reason(outcome: AuthnOutcome) -> String {
    match outcome {
        AuthnOutcome::Unauthenticated { reason } => reason,
        other => panic!("expected Unauthenticated, got {other:?}"),
    }
}

// ---- tokens -------------------------------------------------------------------------------

#[derive(Default)]
pub(super) struct FakeReviewer {
    pub(super) calls: AtomicUsize,
    pub(super) delay: Option<Duration>,
    /// "good-token" is refused from now on.
    pub(super) revoked: AtomicBool,
}

#[async_trait::async_trait]
impl TokenReviewer for FakeReviewer {
    async fn review(&self, token: &str) -> Result<Option<UserInfo>, ReviewError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        match token {
            "good-token" if self.revoked.load(Ordering::SeqCst) => Ok(None),
            "good-token" => Ok(Some(UserInfo {
                name: "token-user".into(),
                uid: "u-1".into(),
                groups: strings(&["farmers"]),
                extra: BTreeMap::from([("scopes".to_string(), strings(&["all"]))]),
            })),
            "anonymous-token" => Ok(Some(UserInfo { name: ANONYMOUS_USER.into(), ..Default::default() })),
            "nameless-token" => Ok(Some(UserInfo::default())),
            "error-token" => Err(ReviewError::fatal("apiserver unavailable")),
            "busy-token" => Err(ReviewError::retriable("the server is currently unable to handle the request")),
            t if t.starts_with("user-") => Ok(Some(UserInfo { name: t.into(), ..Default::default() })),
            _ => Ok(None),
        }
    }
}

impl FakeReviewer {
    pub(super) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// Token options for tests: `ttl`, and retries 10 ms apart so that they take no time.
pub(super) fn token_options(ttl: Duration) -> TokenOptions {
    let mut options = TokenOptions { cache_ttl: ttl, ..TokenOptions::default() };
    options.review.backoff.initial = Duration::from_millis(10);
    options
}

pub(super) fn token_authn(reviewer: &Arc<FakeReviewer>, ttl: Duration) -> Authenticator {
    Authenticator::new(AuthnConfig::default(), Some(reviewer.clone() as Arc<dyn TokenReviewer>), token_options(ttl))
        .unwrap()
}

pub(super) fn bearer(token: &str) -> HeaderMap {
    headers(&[("Authorization", &format!("Bearer {token}"))])
}
