//! The options of delegated authentication and authorization, and of the
//! review clients both use.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::apimachinery::duration::parse_seconds;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Authentication {
    /// Trust every caller. Development only: refused on a non-loopback address.
    None,
    /// Like any aggregated API server: the aggregator by its front-proxy client
    /// certificate, others by client certificate or bearer token (TokenReview);
    /// every request authorized with SubjectAccessReview.
    Delegated,
}

#[derive(Args, Debug, Clone)]
pub struct AuthenticationOptions {
    /// How callers are authenticated. Default: `none` on a loopback address,
    /// `delegated` otherwise.
    #[arg(long, value_enum)]
    pub authentication: Option<Authentication>,

    /// The ConfigMap (namespace/name) holding the front-proxy and client CAs,
    /// watched so changes apply without a restart.
    #[arg(long, default_value = "kube-system/extension-apiserver-authentication")]
    pub authentication_configmap: String,

    /// Front-proxy CA bundle (PEM file); overrides the ConfigMap's.
    #[arg(long)]
    pub requestheader_client_ca_file: Option<PathBuf>,

    /// Common names allowed for front-proxy certificates (comma-separated); overrides the ConfigMap's.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_allowed_names: Option<Vec<String>>,

    /// Client CA bundle (PEM file) for client-certificate users; overrides the ConfigMap's.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,

    /// Requests without any credentials are served as `system:anonymous` in the group
    /// `system:unauthenticated` and authorized like anyone else, as kube-apiserver does.
    /// `false` answers them 401.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,

    /// How long TokenReview answers are cached.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub token_cache_ttl: Duration,
}

impl AuthenticationOptions {
    /// The authentication mode in force: as given, else `none` on a loopback
    /// `bind` address and `delegated` elsewhere.
    pub fn mode(&self, bind: SocketAddr) -> Authentication {
        self.authentication.unwrap_or(if bind.ip().is_loopback() {
            Authentication::None
        } else {
            Authentication::Delegated
        })
    }
}

#[derive(Args, Debug, Clone)]
pub struct AuthorizationOptions {
    /// How long authorization allowals are cached.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub authorization_allow_ttl: Duration,

    /// How long authorization denials are cached.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub authorization_deny_ttl: Duration,

    /// Paths served without authorization (exact paths; a trailing `*` matches a prefix).
    #[arg(long, value_delimiter = ',', default_value = "/healthz,/readyz,/livez")]
    pub authorization_always_allow_paths: Vec<String>,
}

/// TokenReviews and SubjectAccessReviews each get a rate limiter with these.
#[derive(Args, Debug, Clone)]
pub struct ReviewOptions {
    /// TokenReviews and SubjectAccessReviews sent per second at most (kube's delegating
    /// clients use 200); reviews beyond the burst wait in a bounded queue.
    #[arg(long, default_value_t = 200.0)]
    pub review_qps: f64,

    /// Reviews that may be sent at once above the QPS (kube's delegating clients use 400).
    #[arg(long, default_value_t = 400)]
    pub review_burst: u32,

    /// Reviews that may wait for the rate limit; beyond it a token is refused (401) and an
    /// authorization fails (500) at once rather than queueing without bound.
    #[arg(long, default_value_t = 1000)]
    pub review_queue: usize,
}
