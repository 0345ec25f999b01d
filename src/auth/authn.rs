//! Delegated authentication, as kube-apiserver does it for an aggregated API server.
//!
//! Three authenticators run in order; the first with an answer wins:
//!
//! 1. **Request header (front proxy).** When the connection's client certificate chain verifies
//!    against the request-header CA (`requestheader-client-ca-file`) as a client certificate and its
//!    Common Name is allowed (`requestheader-allowed-names`, empty = any), the user is taken from the
//!    `X-Remote-User`/`X-Remote-Group`/`X-Remote-Extra-*`/`X-Remote-Uid` style headers. Without such
//!    a certificate those headers are ignored entirely.
//! 2. **Client certificate.** A chain verifying against the client CA (`client-ca-file`) is the user
//!    named by the subject's CN, with the subject's O values as groups.
//! 3. **Bearer token.** `Authorization: Bearer …` is sent to a [`TokenReviewer`] (a `TokenReview`
//!    against kube-apiserver); answers are cached briefly under a salted SHA-256 of the token.
//!
//! Authenticated users get `system:authenticated`. The configuration normally comes from the
//! `kube-system/extension-apiserver-authentication` ConfigMap ([`AuthnConfig::from_configmap_data`],
//! [`spawn_configmap_watch`]) and can be swapped at run time ([`Authenticator::update`]).
//!
//! TLS only requests client certificates (see [`crate::tls::DeferredClientCertVerifier`]); the chain
//! is verified here, once per CA bundle, with rustls' webpki verifier.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use futures::future::{BoxFuture, FutureExt as _, Shared};
use futures::StreamExt as _;
use http::header::{HeaderName, AUTHORIZATION};
use http::HeaderMap;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt as _;
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

use crate::tls::PeerCertificates;

/// Group added to every authenticated user.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// Group of unauthenticated users; a user already in it does not get [`AUTHENTICATED_GROUP`].
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The anonymous user's name; it does not get [`AUTHENTICATED_GROUP`].
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// Extra key under which certificate users carry `X509SHA256=<hex of the leaf's SHA-256>`.
pub const CREDENTIAL_ID_EXTRA_KEY: &str = "authentication.kubernetes.io/credential-id";

/// Namespace of the ConfigMap kube-apiserver publishes for extension API servers.
pub const AUTHENTICATION_CONFIGMAP_NAMESPACE: &str = "kube-system";
/// Name of the ConfigMap kube-apiserver publishes for extension API servers.
pub const AUTHENTICATION_CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

/// ConfigMap key: PEM bundle of the CA for client-certificate users.
pub const KEY_CLIENT_CA: &str = "client-ca-file";
/// ConfigMap key: PEM bundle of the front-proxy (request-header) CA.
pub const KEY_REQUESTHEADER_CA: &str = "requestheader-client-ca-file";
/// ConfigMap key: JSON array of allowed front-proxy Common Names.
pub const KEY_REQUESTHEADER_ALLOWED_NAMES: &str = "requestheader-allowed-names";
/// ConfigMap key: JSON array of username headers.
pub const KEY_REQUESTHEADER_USERNAME_HEADERS: &str = "requestheader-username-headers";
/// ConfigMap key: JSON array of group headers.
pub const KEY_REQUESTHEADER_GROUP_HEADERS: &str = "requestheader-group-headers";
/// ConfigMap key: JSON array of extra header prefixes.
pub const KEY_REQUESTHEADER_EXTRA_PREFIXES: &str = "requestheader-extra-headers-prefix";
/// ConfigMap key: JSON array of UID headers.
pub const KEY_REQUESTHEADER_UID_HEADERS: &str = "requestheader-uid-headers";

/// kube's default delegated-authentication token cache TTL (`--authentication-token-webhook-cache-ttl`).
pub const DEFAULT_TOKEN_CACHE_TTL: Duration = Duration::from_secs(10);
/// Default bound on cached token reviews.
pub const DEFAULT_TOKEN_CACHE_CAPACITY: usize = 4096;
/// A token review taking longer than this fails (and is not cached).
pub const TOKEN_REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// OID of the `UID` subject attribute kube reads a certificate user's UID from (1.3.6.1.4.1.57683.2).
const UID_ATTRIBUTE_OID: &[u64] = &[1, 3, 6, 1, 4, 1, 57683, 2];

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// Front-proxy (request header) authentication settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestHeaderConfig {
    /// PEM bundle of the CA(s) that sign the front proxy's client certificate.
    pub ca_pem: String,
    /// Common Names the front proxy's certificate may have; empty allows any.
    pub allowed_names: Vec<String>,
    /// Headers holding the username, in order of preference (e.g. `X-Remote-User`).
    pub username_headers: Vec<String>,
    /// Headers holding groups, every value of each is one group (e.g. `X-Remote-Group`).
    pub group_headers: Vec<String>,
    /// Header name prefixes for extra attributes (e.g. `X-Remote-Extra-`).
    pub extra_header_prefixes: Vec<String>,
    /// Headers holding the user's UID, in order of preference (e.g. `X-Remote-Uid`).
    pub uid_headers: Vec<String>,
}

impl RequestHeaderConfig {
    /// k8s.io/apiserver's delegating defaults for the header names, used when the
    /// front-proxy CA comes from a flag (`--requestheader-client-ca-file`) rather than
    /// from the cluster's ConfigMap. UID headers stay off by default, as in kube.
    pub fn kube_defaults() -> Self {
        Self {
            username_headers: vec!["x-remote-user".to_string()],
            group_headers: vec!["x-remote-group".to_string()],
            extra_header_prefixes: vec!["x-remote-extra-".to_string()],
            ..Default::default()
        }
    }
}

/// Everything the authenticator needs besides the token reviewer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuthnConfig {
    /// Front-proxy authentication; `None` disables it (headers are then never trusted).
    pub request_header: Option<RequestHeaderConfig>,
    /// PEM bundle of the CA(s) for client-certificate users; `None` disables them.
    pub client_ca_pem: Option<String>,
}

/// kube's `deserializeStrings`: empty = none, otherwise a JSON array of strings (`null` = none).
fn json_strings(data: &BTreeMap<String, String>, key: &str) -> anyhow::Result<Vec<String>> {
    match data.get(key).map(|v| v.trim()) {
        None | Some("") => Ok(Vec::new()),
        Some(raw) => {
            let parsed: Option<Vec<String>> =
                serde_json::from_str(raw).with_context(|| format!("{key} is not a JSON array of strings"))?;
            Ok(parsed.unwrap_or_default())
        }
    }
}

fn non_empty_pem(data: &BTreeMap<String, String>, key: &str) -> Option<String> {
    data.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()).map(str::to_string)
}

impl AuthnConfig {
    /// From the data of kube-system/extension-apiserver-authentication: keys client-ca-file,
    /// requestheader-client-ca-file, requestheader-allowed-names, requestheader-username-headers,
    /// requestheader-group-headers, requestheader-extra-headers-prefix, requestheader-uid-headers
    /// (the list values are JSON arrays of strings).
    ///
    /// A missing or blank CA key disables that authenticator (the request-header lists are then
    /// ignored). The PEM is not parsed here; [`Authenticator::new`]/[`update`](Authenticator::update) do.
    pub fn from_configmap_data(data: &BTreeMap<String, String>) -> anyhow::Result<Self> {
        let request_header = match non_empty_pem(data, KEY_REQUESTHEADER_CA) {
            None => None,
            Some(ca_pem) => Some(RequestHeaderConfig {
                ca_pem,
                allowed_names: json_strings(data, KEY_REQUESTHEADER_ALLOWED_NAMES)?,
                username_headers: json_strings(data, KEY_REQUESTHEADER_USERNAME_HEADERS)?,
                group_headers: json_strings(data, KEY_REQUESTHEADER_GROUP_HEADERS)?,
                extra_header_prefixes: json_strings(data, KEY_REQUESTHEADER_EXTRA_PREFIXES)?,
                uid_headers: json_strings(data, KEY_REQUESTHEADER_UID_HEADERS)?,
            }),
        };
        Ok(Self { request_header, client_ca_pem: non_empty_pem(data, KEY_CLIENT_CA) })
    }

    /// `self` (e.g. from the ConfigMap) with the fields set in `overrides` (e.g. from flags) winning.
    ///
    /// * `client_ca_pem`: the override's when it is `Some`.
    /// * `request_header`: as in kube, an override with a CA (`ca_pem` non-blank) replaces the whole
    ///   request-header configuration, lists included (an empty `allowed_names` there means "any").
    ///   An override without a CA only replaces the lists it sets (non-empty ones) in `self`'s.
    pub fn with_overrides(mut self, overrides: &AuthnConfig) -> AuthnConfig {
        if let Some(ca) = &overrides.client_ca_pem {
            self.client_ca_pem = Some(ca.clone());
        }
        if let Some(over) = &overrides.request_header {
            if !over.ca_pem.trim().is_empty() {
                self.request_header = Some(over.clone());
            } else if let Some(base) = &mut self.request_header {
                let pick = |mine: &mut Vec<String>, theirs: &Vec<String>| {
                    if !theirs.is_empty() {
                        mine.clone_from(theirs);
                    }
                };
                pick(&mut base.allowed_names, &over.allowed_names);
                pick(&mut base.username_headers, &over.username_headers);
                pick(&mut base.group_headers, &over.group_headers);
                pick(&mut base.extra_header_prefixes, &over.extra_header_prefixes);
                pick(&mut base.uid_headers, &over.uid_headers);
            }
        }
        self
    }
}

// ---------------------------------------------------------------------------------------------
// Results and the token reviewer
// ---------------------------------------------------------------------------------------------

/// An authenticated user, as kube's `user.Info`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct UserInfo {
    /// The username.
    pub name: String,
    /// The user's UID (may be empty).
    pub uid: String,
    /// Groups, in order.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What [`Authenticator::authenticate`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthnOutcome {
    /// The request is from this user.
    Authenticated(UserInfo),
    /// The request carried no credentials at all: no client certificate, no
    /// bearer token. It may be served as anonymous.
    NoCredentials,
    /// Credentials were presented and refused; `reason` says why (never contains a credential).
    Unauthenticated {
        /// Why each authenticator that had something to look at said no.
        reason: String,
    },
}

/// Decides whether a bearer token is valid.
#[async_trait::async_trait]
pub trait TokenReviewer: Send + Sync {
    /// `Ok(Some(user))`: valid; `Ok(None)`: rejected (cached like a success); `Err`: the review
    /// itself failed (not cached).
    async fn review(&self, token: &str) -> Result<Option<UserInfo>, String>;
}

/// Reviews tokens with `authentication.k8s.io/v1` `TokenReview`s against kube-apiserver.
#[derive(Clone)]
pub struct KubeTokenReviewer {
    client: kube::Client,
}

impl fmt::Debug for KubeTokenReviewer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeTokenReviewer").finish_non_exhaustive()
    }
}

impl KubeTokenReviewer {
    /// A reviewer using `client` (which needs RBAC to create `tokenreviews`).
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

#[async_trait::async_trait]
impl TokenReviewer for KubeTokenReviewer {
    async fn review(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_string()), audiences: None },
            ..Default::default()
        };
        let answer =
            api.create(&PostParams::default(), &review).await.map_err(|err| format!("TokenReview failed: {err}"))?;
        let status = answer.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            // Like kube's webhook authenticator: a rejection that carries an error is an error.
            return match status.error.filter(|e| !e.is_empty()) {
                Some(error) => Err(format!("TokenReview: {error}")),
                None => Ok(None),
            };
        }
        let user = status.user.unwrap_or_default();
        Ok(Some(UserInfo {
            name: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// Certificates
// ---------------------------------------------------------------------------------------------

fn ring_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A CA bundle able to verify client certificate chains.
struct CaBundle {
    verifier: Arc<dyn ClientCertVerifier>,
    /// Subjects of the bundle's certificates, for logs.
    subjects: Vec<String>,
}

impl CaBundle {
    fn from_pem(pem: &str, provider: &Arc<CryptoProvider>) -> anyhow::Result<Self> {
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
    fn verify(&self, end_entity: &CertificateDer<'_>, intermediates: &[CertificateDer<'_>]) -> Result<(), String> {
        self.verifier
            .verify_client_cert(end_entity, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|err| err.to_string())
    }
}

/// The subject fields we use from a (verified) end-entity certificate.
struct Subject {
    /// The last CN, as Go's `pkix.Name.CommonName`; `None` when absent or not a string.
    common_name: Option<String>,
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

fn subject_of(der: &CertificateDer<'_>) -> Result<Subject, String> {
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

struct RequestHeaderAuth {
    ca: CaBundle,
    allowed_names: HashSet<String>,
    username_headers: Vec<HeaderName>,
    group_headers: Vec<HeaderName>,
    /// Lower-cased, non-empty.
    extra_prefixes: Vec<String>,
    uid_headers: Vec<HeaderName>,
}

/// One authenticator's answer.
enum Step {
    User(UserInfo),
    /// Nothing to look at (e.g. no certificate, no username header).
    NoOpinion,
    /// Looked and said no; the reason is reported if nobody else accepts the request.
    Rejected(String),
}

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
    fn compile(config: &RequestHeaderConfig, provider: &Arc<CryptoProvider>) -> anyhow::Result<Self> {
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
        })
    }

    fn authenticate(&self, headers: &HeaderMap, peer: &PeerCertificates) -> Step {
        let Some(end_entity) = peer.end_entity() else { return Step::NoOpinion };
        if let Err(err) = self.ca.verify(end_entity, peer.intermediates()) {
            return Step::Rejected(format!("request-header client certificate: {err}"));
        }
        if !self.allowed_names.is_empty() {
            let common_name = subject_of(end_entity).ok().and_then(|subject| subject.common_name);
            match common_name {
                Some(cn) if self.allowed_names.contains(&cn) => {}
                other => {
                    return Step::Rejected(format!(
                        "request-header client certificate common name {:?} is not allowed",
                        other.unwrap_or_default()
                    ))
                }
            }
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

/// Client-certificate users from the client CA.
fn client_cert_user(ca: &CaBundle, peer: &PeerCertificates) -> Step {
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

struct Compiled {
    config: AuthnConfig,
    request_header: Option<RequestHeaderAuth>,
    client_ca: Option<CaBundle>,
}

impl Compiled {
    fn new(config: AuthnConfig) -> anyhow::Result<Self> {
        let provider = ring_provider();
        let request_header =
            config.request_header.as_ref().map(|rh| RequestHeaderAuth::compile(rh, &provider)).transpose()?;
        let client_ca = config
            .client_ca_pem
            .as_deref()
            .map(|pem| CaBundle::from_pem(pem, &provider).context("client CA bundle"))
            .transpose()?;
        Ok(Self { config, request_header, client_ca })
    }

    /// For logs: what is configured, without the PEM.
    fn summary(&self) -> String {
        let request_header = match (&self.request_header, &self.config.request_header) {
            (Some(compiled), Some(config)) => format!(
                "request-header CA [{}] allowed names {:?} username headers {:?} group headers {:?} \
                 extra prefixes {:?} uid headers {:?}",
                compiled.ca.subjects.join("; "),
                config.allowed_names,
                config.username_headers,
                config.group_headers,
                config.extra_header_prefixes,
                config.uid_headers
            ),
            _ => "request-header authentication disabled".to_string(),
        };
        let client = match &self.client_ca {
            Some(ca) => format!("client CA [{}]", ca.subjects.join("; ")),
            None => "client-certificate authentication disabled".to_string(),
        };
        format!("{request_header}; {client}")
    }
}

// ---------------------------------------------------------------------------------------------
// Token cache
// ---------------------------------------------------------------------------------------------

type TokenKey = [u8; 32];
type ReviewResult = Result<Option<UserInfo>, String>;
type SharedReview = Shared<BoxFuture<'static, ReviewResult>>;

struct CacheEntry {
    user: Option<UserInfo>,
    /// `None`: never (a TTL too large to represent).
    expires: Option<Instant>,
    seq: u64,
}

/// Token review answers by token hash, bounded; the oldest insertion is evicted first.
struct TokenCache {
    capacity: usize,
    entries: HashMap<TokenKey, CacheEntry>,
    /// Insertion order; entries whose `seq` no longer matches the map are stale and skipped.
    order: VecDeque<(TokenKey, u64)>,
    next_seq: u64,
}

impl TokenCache {
    fn new(capacity: usize) -> Self {
        Self { capacity, entries: HashMap::new(), order: VecDeque::new(), next_seq: 0 }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn get(&mut self, key: &TokenKey, now: Instant) -> Option<Option<UserInfo>> {
        let fresh = self.entries.get(key).map(|entry| entry.expires.is_none_or(|expires| now < expires))?;
        if fresh {
            self.entries.get(key).map(|entry| entry.user.clone())
        } else {
            self.entries.remove(key);
            None
        }
    }

    fn insert(&mut self, key: TokenKey, user: Option<UserInfo>, expires: Option<Instant>) {
        if self.capacity == 0 {
            return;
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.entries.insert(key, CacheEntry { user, expires, seq });
        self.order.push_back((key, seq));
        while self.entries.len() > self.capacity {
            let Some((old, old_seq)) = self.order.pop_front() else { break };
            if self.entries.get(&old).is_some_and(|entry| entry.seq == old_seq) {
                self.entries.remove(&old);
            }
        }
        // Re-inserted keys leave stale order records behind; compact them away now and then.
        if self.order.len() > self.capacity.saturating_mul(2).max(16) {
            let entries = &self.entries;
            self.order.retain(|(key, seq)| entries.get(key).is_some_and(|entry| entry.seq == *seq));
        }
    }
}

struct TokenState {
    cache: TokenCache,
    /// Reviews under way, shared by concurrent requests with the same token.
    inflight: HashMap<TokenKey, SharedReview>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded data stays consistent at every step, so a poisoned lock is still usable.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct TokenAuth {
    reviewer: Arc<dyn TokenReviewer>,
    ttl: Duration,
    salt: [u8; 32],
    state: Arc<Mutex<TokenState>>,
}

impl TokenAuth {
    fn key(&self, token: &str) -> TokenKey {
        let mut hasher = Sha256::new();
        hasher.update(self.salt);
        hasher.update(token.as_bytes());
        hasher.finalize().into()
    }

    async fn review(&self, token: &str) -> ReviewResult {
        let key = self.key(token);
        let review = {
            let mut state = lock(&self.state);
            if let Some(cached) = state.cache.get(&key, Instant::now()) {
                return Ok(cached);
            }
            match state.inflight.get(&key) {
                Some(review) => review.clone(),
                None => {
                    let review = self.start_review(key, token);
                    state.inflight.insert(key, review.clone());
                    review
                }
            }
        };
        review.await
    }

    /// The review runs in its own task (when there is a Tokio runtime), so it completes and fills
    /// the cache even if the requests waiting for it go away.
    fn start_review(&self, key: TokenKey, token: &str) -> SharedReview {
        let reviewer = self.reviewer.clone();
        let state = self.state.clone();
        let ttl = self.ttl;
        let token = token.to_string();
        let work = async move {
            let result = match tokio::time::timeout(TOKEN_REVIEW_TIMEOUT, reviewer.review(&token)).await {
                Ok(result) => result,
                Err(_) => Err(format!("token review timed out after {}s", TOKEN_REVIEW_TIMEOUT.as_secs())),
            };
            let mut state = lock(&state);
            state.inflight.remove(&key);
            if let Ok(user) = &result {
                if !ttl.is_zero() {
                    state.cache.insert(key, user.clone(), Instant::now().checked_add(ttl));
                }
            }
            result
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let task = runtime.spawn(work);
                let state = self.state.clone();
                async move {
                    match task.await {
                        Ok(result) => result,
                        Err(err) => {
                            lock(&state).inflight.remove(&key);
                            Err(format!("token review task failed: {err}"))
                        }
                    }
                }
                .boxed()
                .shared()
            }
            Err(_) => work.boxed().shared(),
        }
    }
}

/// kube's bearer token extraction: the first `Authorization` header, trimmed, `Bearer <token>`
/// (scheme case-insensitive, the token ends at the next space).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

// ---------------------------------------------------------------------------------------------
// Authenticator
// ---------------------------------------------------------------------------------------------

/// Authenticates requests; see the module documentation. Cheap to share behind an `Arc`.
pub struct Authenticator {
    current: RwLock<Arc<Compiled>>,
    tokens: Option<TokenAuth>,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("config", &self.compiled().summary())
            .field("tokens", &self.tokens.is_some())
            .finish()
    }
}

/// kube's `AuthenticatedGroupAdder`.
fn with_authenticated_group(mut user: UserInfo) -> UserInfo {
    let already = user.groups.iter().any(|group| group == AUTHENTICATED_GROUP || group == UNAUTHENTICATED_GROUP);
    if user.name != ANONYMOUS_USER && !already {
        user.groups.push(AUTHENTICATED_GROUP.to_string());
    }
    user
}

impl Authenticator {
    /// An authenticator for `config`; bearer tokens go to `tokens` (none: tokens are not accepted),
    /// with answers cached for `token_ttl` (zero disables the cache) in at most
    /// [`DEFAULT_TOKEN_CACHE_CAPACITY`] entries. Fails on unusable CA PEM.
    pub fn new(
        config: AuthnConfig,
        tokens: Option<Arc<dyn TokenReviewer>>,
        token_ttl: Duration,
    ) -> anyhow::Result<Self> {
        let compiled = Compiled::new(config)?;
        tracing::info!(config = compiled.summary(), "authentication configured");
        let tokens = tokens.map(|reviewer| TokenAuth {
            reviewer,
            ttl: token_ttl,
            salt: rand::random(),
            state: Arc::new(Mutex::new(TokenState {
                cache: TokenCache::new(DEFAULT_TOKEN_CACHE_CAPACITY),
                inflight: HashMap::new(),
            })),
        });
        Ok(Self { current: RwLock::new(Arc::new(compiled)), tokens })
    }

    /// Changes the token cache bound (0 disables caching); drops what was cached.
    pub fn with_token_cache_capacity(self, capacity: usize) -> Self {
        if let Some(tokens) = &self.tokens {
            lock(&tokens.state).cache = TokenCache::new(capacity);
        }
        self
    }

    fn compiled(&self) -> Arc<Compiled> {
        self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// The configuration in force.
    pub fn config(&self) -> AuthnConfig {
        self.compiled().config.clone()
    }

    /// Swaps in a new configuration (CA rotation) atomically; bad PEM -> Err and the old config stays.
    pub fn update(&self, config: AuthnConfig) -> anyhow::Result<()> {
        let compiled = Arc::new(Compiled::new(config)?);
        *self.current.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = compiled;
        Ok(())
    }

    /// Removes the front-proxy headers (`X-Remote-User` and the others configured) from a
    /// request once it is authenticated, as kube does, so nothing behind authentication
    /// can mistake them for the caller's identity.
    pub fn clear_request_headers(&self, headers: &mut HeaderMap) {
        let compiled = self.compiled();
        let Some(rh) = &compiled.request_header else { return };
        for name in rh.username_headers.iter().chain(&rh.group_headers).chain(&rh.uid_headers) {
            headers.remove(name);
        }
        if !rh.extra_prefixes.is_empty() {
            let extra: Vec<HeaderName> = headers
                .keys()
                .filter(|name| rh.extra_prefixes.iter().any(|prefix| name.as_str().starts_with(prefix.as_str())))
                .cloned()
                .collect();
            for name in extra {
                headers.remove(&name);
            }
        }
    }

    /// Authenticates a request from its headers and the connection's client certificates.
    pub async fn authenticate(&self, headers: &HeaderMap, peer: &PeerCertificates) -> AuthnOutcome {
        let compiled = self.compiled();
        let mut reasons = Vec::new();
        let mut decide = |step: Step| match step {
            Step::User(user) => Some(user),
            Step::NoOpinion => None,
            Step::Rejected(reason) => {
                reasons.push(reason);
                None
            }
        };

        let mut user = compiled.request_header.as_ref().and_then(|rh| decide(rh.authenticate(headers, peer)));
        if user.is_none() {
            user = compiled.client_ca.as_ref().and_then(|ca| decide(client_cert_user(ca, peer)));
        }
        drop(compiled);
        if let Some(user) = user {
            return AuthnOutcome::Authenticated(with_authenticated_group(user));
        }

        if let Some(token) = bearer_token(headers) {
            match &self.tokens {
                None => reasons.push("bearer tokens are not accepted".to_string()),
                Some(tokens) => match tokens.review(token).await {
                    Ok(Some(user)) if !user.name.is_empty() => {
                        return AuthnOutcome::Authenticated(with_authenticated_group(user))
                    }
                    Ok(Some(_)) => reasons.push("token review returned an empty username".to_string()),
                    Ok(None) => reasons.push("invalid bearer token".to_string()),
                    Err(err) => reasons.push(format!("bearer token: {err}")),
                },
            }
        }

        if reasons.is_empty() {
            return AuthnOutcome::NoCredentials;
        }
        let reason = reasons.join("; ");
        tracing::debug!(reason = %reason, "request not authenticated");
        AuthnOutcome::Unauthenticated { reason }
    }
}

// ---------------------------------------------------------------------------------------------
// ConfigMap
// ---------------------------------------------------------------------------------------------

/// Reads the authentication ConfigMap once (e.g. at startup); `Ok(None)` when it does not exist.
pub async fn fetch_configmap_config(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<AuthnConfig>> {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let Some(configmap) = api.get_opt(name).await.with_context(|| format!("reading ConfigMap {namespace}/{name}"))?
    else {
        return Ok(None);
    };
    AuthnConfig::from_configmap_data(&configmap.data.unwrap_or_default())
        .with_context(|| format!("ConfigMap {namespace}/{name}"))
        .map(Some)
}

/// Applies one version of the ConfigMap; returns whether the configuration changed.
fn apply_configmap(authn: &Authenticator, configmap: ConfigMap, overrides: &AuthnConfig, source: &str) -> bool {
    let data = configmap.data.unwrap_or_default();
    let config = match AuthnConfig::from_configmap_data(&data) {
        Ok(config) => config.with_overrides(overrides),
        Err(err) => {
            tracing::warn!(configmap = source, error = format!("{err:#}"), "ignoring invalid authentication ConfigMap");
            return false;
        }
    };
    if config == authn.config() {
        tracing::debug!(configmap = source, "authentication ConfigMap unchanged");
        return false;
    }
    match authn.update(config) {
        Ok(()) => {
            tracing::info!(configmap = source, config = authn.compiled().summary(), "applied authentication ConfigMap");
            true
        }
        Err(err) => {
            tracing::warn!(
                configmap = source,
                error = format!("{err:#}"),
                "rejected authentication ConfigMap; keeping the current configuration"
            );
            false
        }
    }
}

/// Watches kube-system/extension-apiserver-authentication (or the given namespace/name) with a kube-rs watcher and
/// applies every change with `update`, merged with `overrides` (fields set there win: flags). Logs each applied change.
///
/// A deleted ConfigMap or an invalid version leaves the current configuration in force (as kube
/// does). Watch errors are retried with kube-rs' default backoff; the task runs until aborted.
pub fn spawn_configmap_watch(
    client: kube::Client,
    namespace: String,
    name: String,
    overrides: AuthnConfig,
    authn: Arc<Authenticator>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let source = format!("{namespace}/{name}");
        let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut events = std::pin::pin!(watcher(api, config).default_backoff());
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Apply(configmap) | watcher::Event::InitApply(configmap)) => {
                    apply_configmap(&authn, configmap, &overrides, &source);
                }
                Ok(watcher::Event::Delete(_)) => tracing::warn!(
                    configmap = %source,
                    "authentication ConfigMap deleted; keeping the current configuration"
                ),
                Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
                Err(err) => tracing::warn!(configmap = %source, error = %err, "authentication ConfigMap watch error"),
            }
        }
        tracing::warn!(configmap = %source, "authentication ConfigMap watch ended");
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
        KeyUsagePurpose,
    };
    use std::sync::atomic::{AtomicUsize, Ordering};
    use x509_parser::time::ASN1Time;

    const HOUR: Duration = Duration::from_secs(3600);
    const DAY: Duration = Duration::from_secs(86400);

    struct Ca {
        issuer: Issuer<'static, KeyPair>,
        pem: String,
        der: CertificateDer<'static>,
    }

    fn ca(cn: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let now = ASN1Time::now().to_datetime();
        params.not_before = now - HOUR;
        params.not_after = now + DAY * 365;
        let cert = params.self_signed(&key).unwrap();
        Ca { pem: cert.pem(), der: cert.der().clone(), issuer: Issuer::new(params, key) }
    }

    /// An intermediate CA signed by `parent`.
    fn intermediate(parent: &Ca, cn: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let now = ASN1Time::now().to_datetime();
        params.not_before = now - HOUR;
        params.not_after = now + DAY * 30;
        let cert = params.signed_by(&key, &parent.issuer).unwrap();
        Ca { pem: cert.pem(), der: cert.der().clone(), issuer: Issuer::new(params, key) }
    }

    struct Leaf<'a> {
        cn: Option<&'a str>,
        orgs: &'a [&'a str],
        ekus: Vec<ExtendedKeyUsagePurpose>,
        /// (not_before, not_after) relative to now, in seconds.
        validity: (i64, i64),
    }

    impl<'a> Leaf<'a> {
        fn client(cn: &'a str) -> Self {
            Self { cn: Some(cn), orgs: &[], ekus: vec![ExtendedKeyUsagePurpose::ClientAuth], validity: (-3600, 86400) }
        }
        fn sign(&self, ca: &Ca) -> CertificateDer<'static> {
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

    fn peer(chain: &[&CertificateDer<'static>]) -> PeerCertificates {
        PeerCertificates(Some(Arc::new(chain.iter().map(|c| (*c).clone()).collect())))
    }

    fn no_peer() -> PeerCertificates {
        PeerCertificates(None)
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn rh_config(ca_pem: &str, allowed: &[&str]) -> RequestHeaderConfig {
        RequestHeaderConfig {
            ca_pem: ca_pem.to_string(),
            allowed_names: strings(allowed),
            username_headers: strings(&["X-Remote-User"]),
            group_headers: strings(&["X-Remote-Group"]),
            extra_header_prefixes: strings(&["X-Remote-Extra-"]),
            uid_headers: strings(&["X-Remote-Uid"]),
        }
    }

    fn authn(config: AuthnConfig) -> Authenticator {
        Authenticator::new(config, None, DEFAULT_TOKEN_CACHE_TTL).unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn proxy_headers() -> HeaderMap {
        headers(&[
            ("X-Remote-User", "alice"),
            ("X-Remote-Group", "devs"),
            ("X-Remote-Group", "ops"),
            ("X-Remote-Extra-Scopes", "read"),
            ("X-Remote-Extra-Scopes", "write"),
            ("X-Remote-Extra-Acme.com%2Fproject", "farm"),
            ("X-Remote-Uid", "uid-1"),
        ])
    }

    fn user(outcome: AuthnOutcome) -> UserInfo {
        match outcome {
            AuthnOutcome::Authenticated(user) => user,
            other => panic!("expected a user, got {other:?}"),
        }
    }

    fn reason(outcome: AuthnOutcome) -> String {
        match outcome {
            AuthnOutcome::Unauthenticated { reason } => reason,
            AuthnOutcome::NoCredentials => "no credentials provided".to_string(),
            other => panic!("expected Unauthenticated, got {other:?}"),
        }
    }

    // ---- request header ---------------------------------------------------------------------------

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
                    ("acme.com/project".to_string(), strings(&["farm"])),
                ]),
            }
        );
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
        let why = reason(a.authenticate(&proxy_headers(), &no_peer()).await);
        assert_eq!(why, "no credentials provided");
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
            DEFAULT_TOKEN_CACHE_TTL,
        )
        .unwrap();
        let why = reason(a.authenticate(&headers(&[("X-Remote-Group", "admins")]), &peer(&[&cert])).await);
        assert_eq!(why, "no credentials provided");

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
        assert_eq!(reason(a.authenticate(&HeaderMap::new(), &peer(&[&no_cn])).await), "no credentials provided");
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

    // ---- configuration and rotation -----------------------------------------------------------

    #[tokio::test]
    async fn update_rotates_the_request_header_ca() {
        let old = ca("front-proxy-ca-1");
        let new = ca("front-proxy-ca-2");
        let old_cert = Leaf::client("front-proxy-client").sign(&old);
        let new_cert = Leaf::client("front-proxy-client").sign(&new);
        let a = authn(AuthnConfig { request_header: Some(rh_config(&old.pem, &[])), client_ca_pem: None });
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&old_cert])).await).name, "alice");
        reason(a.authenticate(&proxy_headers(), &peer(&[&new_cert])).await);

        let rotated = AuthnConfig { request_header: Some(rh_config(&new.pem, &[])), client_ca_pem: None };
        a.update(rotated.clone()).unwrap();
        assert_eq!(a.config(), rotated);
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&new_cert])).await).name, "alice");
        reason(a.authenticate(&proxy_headers(), &peer(&[&old_cert])).await);

        // A bundle with both CAs (overlap during rotation) accepts both.
        let both = format!("{}{}", old.pem, new.pem);
        a.update(AuthnConfig { request_header: Some(rh_config(&both, &[])), client_ca_pem: None }).unwrap();
        for cert in [&old_cert, &new_cert] {
            assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[cert])).await).name, "alice");
        }

        // Bad PEM: error, the previous configuration stays.
        let before = a.config();
        for bad in ["", "not pem", "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"] {
            assert!(a.update(AuthnConfig { request_header: Some(rh_config(bad, &[])), client_ca_pem: None }).is_err());
            assert!(a.update(AuthnConfig { request_header: None, client_ca_pem: Some(bad.to_string()) }).is_err());
        }
        let junk_der = "-----BEGIN CERTIFICATE-----\nAAECAwQ=\n-----END CERTIFICATE-----\n";
        assert!(a.update(AuthnConfig { request_header: None, client_ca_pem: Some(junk_der.to_string()) }).is_err());
        assert_eq!(a.config(), before);
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&new_cert])).await).name, "alice");

        // Disabling request-header authentication makes the headers meaningless again.
        a.update(AuthnConfig::default()).unwrap();
        assert_eq!(reason(a.authenticate(&proxy_headers(), &peer(&[&new_cert])).await), "no credentials provided");
    }

    #[test]
    fn new_rejects_bad_pem() {
        let err = Authenticator::new(
            AuthnConfig { request_header: None, client_ca_pem: Some("garbage".into()) },
            None,
            DEFAULT_TOKEN_CACHE_TTL,
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("client CA bundle"), "{err:#}");
    }

    #[test]
    fn from_configmap_data_realistic() {
        let front = ca("front-proxy-ca");
        let client = ca("kubernetes");
        let data = BTreeMap::from([
            (KEY_CLIENT_CA.to_string(), client.pem.clone()),
            (KEY_REQUESTHEADER_CA.to_string(), front.pem.clone()),
            (KEY_REQUESTHEADER_ALLOWED_NAMES.to_string(), r#"["front-proxy-client"]"#.to_string()),
            (KEY_REQUESTHEADER_USERNAME_HEADERS.to_string(), r#"["X-Remote-User"]"#.to_string()),
            (KEY_REQUESTHEADER_GROUP_HEADERS.to_string(), r#"["X-Remote-Group"]"#.to_string()),
            (KEY_REQUESTHEADER_EXTRA_PREFIXES.to_string(), r#"["X-Remote-Extra-"]"#.to_string()),
            (KEY_REQUESTHEADER_UID_HEADERS.to_string(), r#"["X-Remote-Uid"]"#.to_string()),
        ]);
        let config = AuthnConfig::from_configmap_data(&data).unwrap();
        assert_eq!(
            config,
            AuthnConfig {
                request_header: Some(RequestHeaderConfig {
                    ca_pem: front.pem.trim().to_string(),
                    ..rh_config("", &["front-proxy-client"])
                }),
                client_ca_pem: Some(client.pem.trim().to_string()),
            }
        );
        Authenticator::new(config, None, DEFAULT_TOKEN_CACHE_TTL).unwrap();

        // Older clusters: no UID key; empty string and null lists are empty.
        let mut older = data.clone();
        older.remove(KEY_REQUESTHEADER_UID_HEADERS);
        older.insert(KEY_REQUESTHEADER_ALLOWED_NAMES.to_string(), String::new());
        older.insert(KEY_REQUESTHEADER_EXTRA_PREFIXES.to_string(), "null".to_string());
        let config = AuthnConfig::from_configmap_data(&older).unwrap();
        let rh = config.request_header.unwrap();
        assert!(rh.uid_headers.is_empty() && rh.allowed_names.is_empty() && rh.extra_header_prefixes.is_empty());
        assert_eq!(rh.username_headers, strings(&["X-Remote-User"]));

        // Only client-ca-file (no front proxy configured).
        let only_client = BTreeMap::from([
            (KEY_CLIENT_CA.to_string(), client.pem.clone()),
            (KEY_REQUESTHEADER_CA.to_string(), "  \n".to_string()),
            (KEY_REQUESTHEADER_USERNAME_HEADERS.to_string(), r#"["X-Remote-User"]"#.to_string()),
        ]);
        let config = AuthnConfig::from_configmap_data(&only_client).unwrap();
        assert!(config.request_header.is_none());
        assert!(config.client_ca_pem.is_some());
        assert_eq!(AuthnConfig::from_configmap_data(&BTreeMap::new()).unwrap(), AuthnConfig::default());

        // Not JSON arrays of strings.
        for bad in ["X-Remote-User", "[1]", r#"{"a":"b"}"#, r#"["unterminated"#] {
            let mut broken = data.clone();
            broken.insert(KEY_REQUESTHEADER_USERNAME_HEADERS.to_string(), bad.to_string());
            let err = AuthnConfig::from_configmap_data(&broken).unwrap_err();
            assert!(err.to_string().contains(KEY_REQUESTHEADER_USERNAME_HEADERS), "{err}");
        }
    }

    #[test]
    fn overrides_win() {
        let base = AuthnConfig {
            request_header: Some(rh_config("cm-ca", &["front-proxy-client"])),
            client_ca_pem: Some("cm-client-ca".into()),
        };
        assert_eq!(base.clone().with_overrides(&AuthnConfig::default()), base);

        let flags = AuthnConfig { request_header: Some(rh_config("flag-ca", &[])), client_ca_pem: Some("flag".into()) };
        assert_eq!(base.clone().with_overrides(&flags), flags);

        let headers_only = AuthnConfig {
            request_header: Some(RequestHeaderConfig {
                username_headers: strings(&["X-Proxy-User"]),
                ..Default::default()
            }),
            client_ca_pem: None,
        };
        let merged = base.clone().with_overrides(&headers_only);
        let rh = merged.request_header.unwrap();
        assert_eq!(rh.ca_pem, "cm-ca");
        assert_eq!(rh.username_headers, strings(&["X-Proxy-User"]));
        assert_eq!(rh.allowed_names, strings(&["front-proxy-client"]));
        assert_eq!(merged.client_ca_pem.as_deref(), Some("cm-client-ca"));
        // Lists alone cannot enable request-header authentication.
        assert_eq!(AuthnConfig::default().with_overrides(&headers_only), AuthnConfig::default());
    }

    #[tokio::test]
    async fn apply_configmap_updates_only_on_valid_change() {
        let front = ca("front-proxy-ca");
        let cert = Leaf::client("front-proxy-client").sign(&front);
        let a = authn(AuthnConfig::default());
        let configmap = |data: &[(&str, &str)]| ConfigMap {
            data: Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        };
        let good = configmap(&[
            (KEY_REQUESTHEADER_CA, &front.pem),
            (KEY_REQUESTHEADER_USERNAME_HEADERS, r#"["X-Remote-User"]"#),
        ]);
        assert!(apply_configmap(&a, good.clone(), &AuthnConfig::default(), "test"));
        assert!(!apply_configmap(&a, good, &AuthnConfig::default(), "test"), "unchanged");
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&cert])).await).name, "alice");

        let bad_json = configmap(&[(KEY_REQUESTHEADER_CA, &front.pem), (KEY_REQUESTHEADER_USERNAME_HEADERS, "[")]);
        assert!(!apply_configmap(&a, bad_json, &AuthnConfig::default(), "test"));
        let bad_pem = configmap(&[(KEY_REQUESTHEADER_CA, "garbage"), (KEY_REQUESTHEADER_USERNAME_HEADERS, "[]")]);
        assert!(!apply_configmap(&a, bad_pem, &AuthnConfig::default(), "test"));
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&cert])).await).name, "alice");

        // Overrides (flags) win over the ConfigMap.
        let flags = AuthnConfig {
            request_header: Some(RequestHeaderConfig {
                username_headers: strings(&["X-Flag-User"]),
                ..Default::default()
            }),
            client_ca_pem: None,
        };
        let good = configmap(&[
            (KEY_REQUESTHEADER_CA, &front.pem),
            (KEY_REQUESTHEADER_USERNAME_HEADERS, r#"["X-Remote-User"]"#),
        ]);
        assert!(apply_configmap(&a, good, &flags, "test"));
        assert_eq!(reason(a.authenticate(&proxy_headers(), &peer(&[&cert])).await), "no credentials provided");
        let h = headers(&[("X-Flag-User", "flagged")]);
        assert_eq!(user(a.authenticate(&h, &peer(&[&cert])).await).name, "flagged");
    }

    // ---- tokens -------------------------------------------------------------------------------

    #[derive(Default)]
    struct FakeReviewer {
        calls: AtomicUsize,
        delay: Option<Duration>,
    }

    #[async_trait::async_trait]
    impl TokenReviewer for FakeReviewer {
        async fn review(&self, token: &str) -> Result<Option<UserInfo>, String> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if let Some(delay) = self.delay {
                tokio::time::sleep(delay).await;
            }
            match token {
                "good-token" => Ok(Some(UserInfo {
                    name: "token-user".into(),
                    uid: "u-1".into(),
                    groups: strings(&["farmers"]),
                    extra: BTreeMap::from([("scopes".to_string(), strings(&["all"]))]),
                })),
                "anonymous-token" => Ok(Some(UserInfo { name: ANONYMOUS_USER.into(), ..Default::default() })),
                "nameless-token" => Ok(Some(UserInfo::default())),
                "error-token" => Err("apiserver unavailable".into()),
                t if t.starts_with("user-") => Ok(Some(UserInfo { name: t.into(), ..Default::default() })),
                _ => Ok(None),
            }
        }
    }

    impl FakeReviewer {
        fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }
    }

    fn token_authn(reviewer: &Arc<FakeReviewer>, ttl: Duration) -> Authenticator {
        Authenticator::new(AuthnConfig::default(), Some(reviewer.clone() as Arc<dyn TokenReviewer>), ttl).unwrap()
    }

    fn bearer(token: &str) -> HeaderMap {
        headers(&[("Authorization", &format!("Bearer {token}"))])
    }

    #[tokio::test]
    async fn token_user_and_cache() {
        let reviewer = Arc::new(FakeReviewer::default());
        let a = token_authn(&reviewer, Duration::from_millis(1000));
        let first = user(a.authenticate(&bearer("good-token"), &no_peer()).await);
        assert_eq!(first.name, "token-user");
        assert_eq!(first.uid, "u-1");
        assert_eq!(first.groups, strings(&["farmers", AUTHENTICATED_GROUP]));
        assert_eq!(first.extra, BTreeMap::from([("scopes".to_string(), strings(&["all"]))]));
        let second = user(a.authenticate(&bearer("good-token"), &no_peer()).await);
        assert_eq!(second, first);
        assert_eq!(reviewer.calls(), 1, "second request served from the cache");

        // Rejections are cached too.
        for _ in 0..3 {
            let why = reason(a.authenticate(&bearer("bad-token"), &no_peer()).await);
            assert_eq!(why, "invalid bearer token");
            assert!(!why.contains("bad-token"));
        }
        assert_eq!(reviewer.calls(), 2);

        // Review errors are not cached.
        for _ in 0..2 {
            let why = reason(a.authenticate(&bearer("error-token"), &no_peer()).await);
            assert!(why.contains("apiserver unavailable"), "{why}");
        }
        assert_eq!(reviewer.calls(), 4);

        // After the TTL, both are reviewed again.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        user(a.authenticate(&bearer("good-token"), &no_peer()).await);
        reason(a.authenticate(&bearer("bad-token"), &no_peer()).await);
        assert_eq!(reviewer.calls(), 6);
    }

    #[tokio::test]
    async fn token_cache_disabled_with_zero_ttl() {
        let reviewer = Arc::new(FakeReviewer::default());
        let a = token_authn(&reviewer, Duration::ZERO);
        for _ in 0..3 {
            user(a.authenticate(&bearer("good-token"), &no_peer()).await);
        }
        assert_eq!(reviewer.calls(), 3);
    }

    #[tokio::test]
    async fn token_cache_is_bounded() {
        let reviewer = Arc::new(FakeReviewer::default());
        let a = token_authn(&reviewer, DEFAULT_TOKEN_CACHE_TTL).with_token_cache_capacity(8);
        for i in 0..100 {
            user(a.authenticate(&bearer(&format!("user-{i}")), &no_peer()).await);
        }
        let tokens = a.tokens.as_ref().unwrap();
        {
            let state = lock(&tokens.state);
            assert_eq!(state.cache.len(), 8);
            assert!(state.cache.order.len() <= 32);
            assert!(state.inflight.is_empty());
        }
        assert_eq!(reviewer.calls(), 100);
        // The newest are cached, the oldest were evicted.
        user(a.authenticate(&bearer("user-99"), &no_peer()).await);
        assert_eq!(reviewer.calls(), 100);
        user(a.authenticate(&bearer("user-0"), &no_peer()).await);
        assert_eq!(reviewer.calls(), 101);
    }

    #[test]
    fn token_cache_expiry_eviction_and_reinsertion() {
        let mut cache = TokenCache::new(3);
        let now = Instant::now();
        let key = |n: u8| [n; 32];
        let named = |name: &str| Some(UserInfo { name: name.into(), ..Default::default() });
        cache.insert(key(1), named("one"), Some(now + Duration::from_secs(10)));
        cache.insert(key(2), None, Some(now + Duration::from_secs(10)));
        cache.insert(key(3), named("three"), None);
        assert_eq!(cache.get(&key(1), now), Some(named("one")));
        assert_eq!(cache.get(&key(2), now), Some(None));
        // Expired entries are dropped on lookup; never-expiring ones stay.
        assert_eq!(cache.get(&key(1), now + Duration::from_secs(10)), None);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&key(3), now + Duration::from_secs(1 << 40)), Some(named("three")));
        // Re-inserting refreshes the position: 2 is now the newest, so 3 is evicted first.
        cache.insert(key(2), named("two"), None);
        cache.insert(key(4), None, None);
        cache.insert(key(5), None, None);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&key(3), now), None);
        assert_eq!(cache.get(&key(2), now), Some(named("two")));
        // Many re-insertions of one key keep the order queue compact.
        for _ in 0..1000 {
            cache.insert(key(9), None, None);
        }
        assert!(cache.order.len() <= 32, "{}", cache.order.len());
        assert_eq!(cache.len(), 3);
        let mut zero = TokenCache::new(0);
        zero.insert(key(1), None, None);
        assert_eq!(zero.len(), 0);
    }

    #[tokio::test]
    async fn concurrent_identical_tokens_share_one_review() {
        let reviewer = Arc::new(FakeReviewer { delay: Some(Duration::from_millis(100)), ..Default::default() });
        let a = Arc::new(token_authn(&reviewer, DEFAULT_TOKEN_CACHE_TTL));
        let requests = (0..10).map(|_| {
            let a = a.clone();
            async move { a.authenticate(&bearer("good-token"), &no_peer()).await }
        });
        for outcome in futures::future::join_all(requests).await {
            assert_eq!(user(outcome).name, "token-user");
        }
        assert_eq!(reviewer.calls(), 1);

        // A request that gives up does not stop the review from filling the cache.
        let slow = tokio::time::timeout(Duration::from_millis(10), a.authenticate(&bearer("user-x"), &no_peer())).await;
        assert!(slow.is_err());
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(user(a.authenticate(&bearer("user-x"), &no_peer()).await).name, "user-x");
        assert_eq!(reviewer.calls(), 2);
    }

    #[tokio::test]
    async fn bearer_token_parsing() {
        let reviewer = Arc::new(FakeReviewer::default());
        let a = token_authn(&reviewer, DEFAULT_TOKEN_CACHE_TTL);
        for value in ["bearer good-token", "BEARER good-token", "  Bearer good-token  ", "Bearer good-token extra"] {
            let h = headers(&[("Authorization", value)]);
            assert_eq!(user(a.authenticate(&h, &no_peer()).await).name, "token-user", "{value:?}");
        }
        for value in ["Bearer", "Bearer ", "Bearer  good-token", "Basic Z29vZA==", "good-token", ""] {
            let h = headers(&[("Authorization", value)]);
            assert_eq!(reason(a.authenticate(&h, &no_peer()).await), "no credentials provided", "{value:?}");
        }
        // Only the first Authorization header counts.
        let h = headers(&[("Authorization", "Basic x"), ("Authorization", "Bearer good-token")]);
        reason(a.authenticate(&h, &no_peer()).await);
        assert_eq!(reviewer.calls(), 1);
    }

    #[tokio::test]
    async fn token_special_users() {
        let reviewer = Arc::new(FakeReviewer::default());
        let a = token_authn(&reviewer, DEFAULT_TOKEN_CACHE_TTL);
        // kube's AuthenticatedGroupAdder leaves system:anonymous alone.
        let anonymous = user(a.authenticate(&bearer("anonymous-token"), &no_peer()).await);
        assert_eq!(anonymous.groups, Vec::<String>::new());
        let why = reason(a.authenticate(&bearer("nameless-token"), &no_peer()).await);
        assert!(why.contains("empty username"), "{why}");

        // No reviewer: tokens are not accepted.
        let none = authn(AuthnConfig::default());
        assert_eq!(
            reason(none.authenticate(&bearer("good-token"), &no_peer()).await),
            "bearer tokens are not accepted"
        );
    }

    #[tokio::test]
    async fn order_request_header_then_client_cert_then_token() {
        let front = ca("front-proxy-ca");
        let client_ca = ca("kubernetes-ca");
        let reviewer = Arc::new(FakeReviewer::default());
        let a = Authenticator::new(
            AuthnConfig {
                request_header: Some(rh_config(&front.pem, &["front-proxy-client"])),
                client_ca_pem: Some(client_ca.pem.clone()),
            },
            Some(reviewer.clone()),
            DEFAULT_TOKEN_CACHE_TTL,
        )
        .unwrap();
        let proxy_cert = Leaf::client("front-proxy-client").sign(&front);
        let client_cert = Leaf::client("bob").sign(&client_ca);
        let mut h = proxy_headers();
        h.append(AUTHORIZATION, HeaderValue::from_static("Bearer good-token"));
        assert_eq!(user(a.authenticate(&h, &peer(&[&proxy_cert])).await).name, "alice");
        assert_eq!(user(a.authenticate(&h, &peer(&[&client_cert])).await).name, "bob");
        assert_eq!(reviewer.calls(), 0);
        let stranger = Leaf::client("eve").sign(&ca("other"));
        assert_eq!(user(a.authenticate(&h, &peer(&[&stranger])).await).name, "token-user");
        assert_eq!(user(a.authenticate(&h, &no_peer()).await).name, "token-user");

        // All three say no: every reason is reported.
        let why = reason(a.authenticate(&bearer("bad-token"), &peer(&[&stranger])).await);
        assert!(why.contains("request-header client certificate"), "{why}");
        assert!(why.contains("; client certificate"), "{why}");
        assert!(why.ends_with("invalid bearer token"), "{why}");
    }

    #[test]
    fn subject_strings() {
        assert_eq!(bmp_string(&[0, b'h', 0, b'i']), Some("hi".to_string()));
        assert_eq!(bmp_string(&[0, b'h', 0]), None);
        assert_eq!(bmp_string(&[0xd8, 0x00]), None, "lone surrogate");
    }

    // ---- robustness ---------------------------------------------------------------------------

    /// xorshift64*: deterministic pseudo-random bytes.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn bytes(&mut self, max: usize) -> Vec<u8> {
            let len = self.below(max + 1);
            (0..len).map(|_| self.next() as u8).collect()
        }
    }

    #[tokio::test]
    async fn fuzz_headers_and_certificates_never_panic() {
        let front = ca("front-proxy-ca");
        let client_ca = ca("kubernetes-ca");
        let good = Leaf::client("front-proxy-client").sign(&front);
        let client_cert = Leaf { orgs: &["o"], ..Leaf::client("bob") }.sign(&client_ca);
        let reviewer = Arc::new(FakeReviewer::default());
        let a = Authenticator::new(
            AuthnConfig {
                request_header: Some(rh_config(&front.pem, &[])),
                client_ca_pem: Some(client_ca.pem.clone()),
            },
            Some(reviewer),
            DEFAULT_TOKEN_CACHE_TTL,
        )
        .unwrap()
        .with_token_cache_capacity(64);
        let names = [
            "x-remote-user",
            "x-remote-group",
            "x-remote-uid",
            "x-remote-extra-",
            "x-remote-extra-%",
            "x-remote-extra-%2",
            "x-remote-extra-a%2fb",
            "x-remote-extra-%ff%fe",
            "x-remote-extra-k",
            "authorization",
        ];
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        let mut authenticated = 0;
        for round in 0..3000 {
            let mut h = HeaderMap::new();
            for _ in 0..rng.below(8) {
                let name = if rng.below(4) == 0 {
                    let mut random = names[rng.below(names.len())].to_string();
                    random.push_str(&format!("{:x}", rng.next()));
                    random
                } else {
                    names[rng.below(names.len())].to_string()
                };
                let mut value = rng.bytes(40);
                match rng.below(4) {
                    // Printable ASCII, or any byte a header value may hold (obs-text included).
                    0 | 1 => value.iter_mut().for_each(|b| *b = 0x20 + *b % 0x5f),
                    2 => value.iter_mut().for_each(|b| *b = if *b < 0x20 || *b == 0x7f { b'\t' } else { *b }),
                    _ => {}
                }
                if rng.below(3) == 0 {
                    let mut prefixed = b"Bearer ".to_vec();
                    prefixed.append(&mut value);
                    value = prefixed;
                }
                if let (Ok(name), Ok(value)) =
                    (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(&value))
                {
                    h.append(name, value);
                }
            }
            let (chain, corrupted): (Vec<CertificateDer<'static>>, bool) = match round % 5 {
                0 => (vec![], false),
                1 => (vec![CertificateDer::from(rng.bytes(300))], true),
                2 => {
                    let mut bytes = good.as_ref().to_vec();
                    let at = rng.below(bytes.len());
                    bytes[at] ^= 1 << rng.below(8);
                    (vec![CertificateDer::from(bytes)], true)
                }
                3 => {
                    let bytes = client_cert.as_ref();
                    let cut = rng.below(bytes.len());
                    (vec![CertificateDer::from(bytes[..cut].to_vec()), CertificateDer::from(rng.bytes(64))], true)
                }
                _ => (vec![good.clone(), CertificateDer::from(rng.bytes(100))], false),
            };
            let p = if chain.is_empty() { no_peer() } else { PeerCertificates(Some(Arc::new(chain))) };
            let outcome = a.authenticate(&h, &p).await;
            if matches!(outcome, AuthnOutcome::Authenticated(_)) {
                authenticated += 1;
            }
            if corrupted {
                if let AuthnOutcome::Authenticated(user) = &outcome {
                    // Only a (random, hence rejected) bearer token could have authenticated.
                    panic!("round {round}: corrupted certificate authenticated {user:?}");
                }
            }
        }

        // Some rounds had the genuine certificate and a usable X-Remote-User.
        assert!(authenticated > 30, "{authenticated}");

        // Garbage configuration is an error, never a panic.
        for _ in 0..200 {
            let mut pem = b"-----BEGIN CERTIFICATE-----\n".to_vec();
            pem.extend(rng.bytes(200));
            pem.extend(b"\n-----END CERTIFICATE-----\n");
            let pem = String::from_utf8_lossy(&pem).into_owned();
            assert!(a.update(AuthnConfig { request_header: Some(rh_config(&pem, &[])), client_ca_pem: None }).is_err());
        }
        let weird = AuthnConfig {
            request_header: Some(RequestHeaderConfig {
                ca_pem: front.pem.clone(),
                allowed_names: strings(&["", "ü"]),
                username_headers: strings(&["", "bad header", "ü", "X-Remote-User"]),
                group_headers: strings(&["\n"]),
                extra_header_prefixes: strings(&["", "Ü-", "X-"]),
                uid_headers: strings(&[":"]),
            }),
            client_ca_pem: None,
        };
        a.update(weird).unwrap();
        let h = headers(&[("X-Remote-User", "zed"), ("X-Remote-Group", "g")]);
        let got = user(a.authenticate(&h, &peer(&[&Leaf { cn: Some("ü"), ..Leaf::client("") }.sign(&front)])).await);
        assert_eq!(got.name, "zed");
        assert_eq!(got.extra.get("remote-user"), Some(&strings(&["zed"])));
    }
}
