//! Every setting, as a command-line flag with an environment variable and a default.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "farm-apiserver",
    version,
    about = "Kubernetes aggregated API server for farm.example.com",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `serve` is the default subcommand: its flags work without naming it.
    #[command(flatten)]
    pub serve: ServeArgs,
}

// Parsed once at startup; the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve the API (the default).
    Serve(ServeArgs),
    /// Write a CA, a serving certificate and the APIService caBundle for a Service.
    Certs(CertsArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Authentication {
    /// Trust every caller. Development only: refused on a non-loopback address.
    None,
    /// Like any aggregated API server: the aggregator by its front-proxy client
    /// certificate, others by client certificate or bearer token (TokenReview);
    /// every request authorized with SubjectAccessReview.
    Delegated,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StorageBackend {
    /// One replica, in memory: lost on restart.
    Memory,
    /// etcd (--etcd-servers): durable, and shared by every replica.
    Etcd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "FARM_BIND", default_value = "127.0.0.1:8443")]
    pub bind: SocketAddr,

    /// Serving certificate (PEM). Without it, a development CA and certificate are made in --cert-dir.
    #[arg(long, env = "FARM_TLS_CERT_FILE", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// Private key of the serving certificate (PEM).
    #[arg(long, env = "FARM_TLS_PRIVATE_KEY_FILE", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,

    /// Where development certificates are made and reused (ca.crt is the CA to trust).
    #[arg(long, env = "FARM_CERT_DIR", default_value = "certs")]
    pub cert_dir: PathBuf,

    /// Service name the serving certificate is valid for (<service>.<namespace>.svc).
    #[arg(long, env = "FARM_SERVICE_NAME", default_value = "farm-apiserver")]
    pub service_name: String,

    /// Namespace of that Service.
    #[arg(long, env = "FARM_SERVICE_NAMESPACE", default_value = "farm-system")]
    pub service_namespace: String,

    /// How callers are authenticated. Default: `none` on a loopback address,
    /// `delegated` otherwise.
    #[arg(long, env = "FARM_AUTHENTICATION", value_enum)]
    pub authentication: Option<Authentication>,

    /// The ConfigMap (namespace/name) holding the front-proxy and client CAs,
    /// watched so changes apply without a restart.
    #[arg(
        long,
        env = "FARM_AUTHENTICATION_CONFIGMAP",
        default_value = "kube-system/extension-apiserver-authentication"
    )]
    pub authentication_configmap: String,

    /// Front-proxy CA bundle (PEM file); overrides the ConfigMap's.
    #[arg(long, env = "FARM_REQUESTHEADER_CLIENT_CA_FILE")]
    pub requestheader_client_ca_file: Option<PathBuf>,

    /// Common names allowed for front-proxy certificates (comma-separated); overrides the ConfigMap's.
    #[arg(long, env = "FARM_REQUESTHEADER_ALLOWED_NAMES", value_delimiter = ',')]
    pub requestheader_allowed_names: Option<Vec<String>>,

    /// Client CA bundle (PEM file) for client-certificate users; overrides the ConfigMap's.
    #[arg(long, env = "FARM_CLIENT_CA_FILE")]
    pub client_ca_file: Option<PathBuf>,

    /// How long authorization allowals are cached.
    #[arg(long, env = "FARM_AUTHORIZATION_ALLOW_TTL", default_value = "10", value_parser = parse_seconds)]
    pub authorization_allow_ttl: Duration,

    /// How long authorization denials are cached.
    #[arg(long, env = "FARM_AUTHORIZATION_DENY_TTL", default_value = "10", value_parser = parse_seconds)]
    pub authorization_deny_ttl: Duration,

    /// Requests without any credentials are served as `system:anonymous` in the group
    /// `system:unauthenticated` and authorized like anyone else, as kube-apiserver does.
    /// `false` answers them 401.
    #[arg(long, env = "FARM_ANONYMOUS_AUTH", default_value_t = true, action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,

    /// Paths served without authorization (exact paths; a trailing `*` matches a prefix).
    #[arg(
        long,
        env = "FARM_AUTHORIZATION_ALWAYS_ALLOW_PATHS",
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez"
    )]
    pub authorization_always_allow_paths: Vec<String>,

    /// TokenReviews and SubjectAccessReviews sent per second at most (kube's delegating
    /// clients use 200); reviews beyond the burst wait in a bounded queue.
    #[arg(long, env = "FARM_REVIEW_QPS", default_value_t = 200.0)]
    pub review_qps: f64,

    /// Reviews that may be sent at once above the QPS (kube's delegating clients use 400).
    #[arg(long, env = "FARM_REVIEW_BURST", default_value_t = 400)]
    pub review_burst: u32,

    /// Reviews that may wait for the rate limit; beyond it a token is refused (401) and an
    /// authorization fails (500) at once rather than queueing without bound.
    #[arg(long, env = "FARM_REVIEW_QUEUE", default_value_t = 1000)]
    pub review_queue: usize,

    /// How long TokenReview answers are cached.
    #[arg(long, env = "FARM_TOKEN_CACHE_TTL", default_value = "10", value_parser = parse_seconds)]
    pub token_cache_ttl: Duration,

    /// Where Llamas are stored.
    #[arg(long, env = "FARM_STORAGE", value_enum, default_value_t = StorageBackend::Memory)]
    pub storage: StorageBackend,

    /// etcd servers (comma-separated http:// or https:// URLs), for --storage etcd.
    #[arg(long, env = "FARM_ETCD_SERVERS", value_delimiter = ',')]
    pub etcd_servers: Vec<String>,

    /// CA bundle (PEM) that signed the etcd servers' certificates.
    #[arg(long, env = "FARM_ETCD_CAFILE")]
    pub etcd_cafile: Option<PathBuf>,

    /// Client certificate (PEM) presented to etcd (mutual TLS).
    #[arg(long, env = "FARM_ETCD_CERTFILE", requires = "etcd_keyfile")]
    pub etcd_certfile: Option<PathBuf>,

    /// Private key (PEM) of the etcd client certificate.
    #[arg(long, env = "FARM_ETCD_KEYFILE", requires = "etcd_certfile")]
    pub etcd_keyfile: Option<PathBuf>,

    /// Prefix of every key this server writes: <prefix>/<resource>/<namespace>/<name>.
    #[arg(long, env = "FARM_ETCD_PREFIX", default_value = "/registry/farm.example.com")]
    pub etcd_prefix: String,

    /// How long one etcd request may take; a write etcd does not answer in
    /// time fails with 504 (reads keep being served from the watch cache).
    #[arg(long, env = "FARM_ETCD_REQUEST_TIMEOUT", default_value = "10", value_parser = parse_seconds)]
    pub etcd_request_timeout: Duration,

    /// Kubeconfig of the cluster whose Pods FarmPods show. Default: $KUBECONFIG or
    /// ~/.kube/config, else the in-cluster service account. Without any, the server
    /// still serves Llamas and FarmPod requests get 503.
    #[arg(long, env = "FARM_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Namespaces whose Pods are watched (comma-separated). Default: all.
    #[arg(long, env = "FARM_POD_NAMESPACES", value_delimiter = ',')]
    pub pod_namespaces: Vec<String>,

    /// Events kept per kind for watch resumption and consistent paging; older
    /// resourceVersions and continue tokens get 410 Expired.
    #[arg(long, env = "FARM_WATCH_HISTORY", default_value_t = 10_000)]
    pub watch_history: usize,

    /// Bytes of object states the history of each kind may hold (as stored
    /// JSON): the events beyond it are dropped like those beyond
    /// `--watch-history`, so a history of large objects stays bounded.
    #[arg(long, env = "FARM_WATCH_HISTORY_BYTES", default_value_t = 64 << 20)]
    pub watch_history_bytes: usize,

    /// Events a watcher may lag behind before it is closed (it then resumes or re-lists).
    #[arg(long, env = "FARM_WATCH_BUFFER", default_value_t = 4096)]
    pub watch_buffer: usize,

    /// Seconds between BOOKMARK events on watches that allow them.
    #[arg(long, env = "FARM_BOOKMARK_INTERVAL", default_value = "60", value_parser = parse_seconds)]
    pub bookmark_interval: Duration,

    /// Watches without timeoutSeconds end after a random time between this and twice this.
    #[arg(long, env = "FARM_MIN_REQUEST_TIMEOUT", default_value = "1800", value_parser = parse_seconds)]
    pub min_request_timeout: Duration,

    /// Non-long-running requests (all but watches) answer 504 Timeout after this long.
    #[arg(long, env = "FARM_REQUEST_TIMEOUT", default_value = "60", value_parser = parse_seconds)]
    pub request_timeout: Duration,

    /// Read-only requests (get, list) served at once; beyond it 429 with Retry-After.
    /// Watches and health probes are not counted. 0: no limit.
    #[arg(long, env = "FARM_MAX_REQUESTS_INFLIGHT", default_value_t = 400)]
    pub max_requests_inflight: usize,

    /// Mutating requests (create, update, patch, delete) served at once; beyond it 429 with
    /// Retry-After. 0: no limit.
    #[arg(long, env = "FARM_MAX_MUTATING_REQUESTS_INFLIGHT", default_value_t = 200)]
    pub max_mutating_requests_inflight: usize,

    /// Watches open at once on this server; beyond it 429 with Retry-After. 0: no limit.
    #[arg(long, env = "FARM_MAX_WATCHES", default_value_t = 4000)]
    pub max_watches: usize,

    /// Watches one user may have open at once; beyond it 429 with Retry-After. 0: no limit.
    #[arg(long, env = "FARM_MAX_WATCHES_PER_USER", default_value_t = 1000)]
    pub max_watches_per_user: usize,

    /// A connection that has not sent a whole request header in this long is closed
    /// (k8s.io/apiserver's ReadHeaderTimeout).
    #[arg(long, env = "FARM_HTTP_HEADER_READ_TIMEOUT", default_value = "32", value_parser = parse_seconds)]
    pub http_header_read_timeout: Duration,

    /// A connection with no request in flight is closed after this long (k8s.io/apiserver's
    /// IdleTimeout).
    #[arg(long, env = "FARM_HTTP_IDLE_TIMEOUT", default_value = "90", value_parser = parse_seconds)]
    pub http_idle_timeout: Duration,

    /// Largest request header accepted, in bytes, for HTTP/1.1 and HTTP/2 alike
    /// (k8s.io/apiserver's MaxHeaderBytes).
    #[arg(long, env = "FARM_MAX_REQUEST_HEADER_BYTES", default_value_t = 1 << 20)]
    pub max_request_header_bytes: usize,

    /// Connections without a request in flight (in their TLS handshake, before their first
    /// request, idle keep-alive) kept open at once; beyond, the one idle longest is closed to
    /// make room, never one with a request in flight nor the aggregator's. 0: no limit.
    /// 1000 idle TLS connections cost ~35 MiB here, which a 256Mi pod can afford (README).
    #[arg(long, env = "FARM_MAX_CONNECTIONS", default_value_t = 1000)]
    pub max_connections: usize,

    /// Largest accepted request body in bytes (413 beyond).
    #[arg(long, env = "FARM_MAX_BODY_BYTES", default_value_t = 3 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Largest object a write may store, encoded as JSON, in bytes: etcd's
    /// default request limit, which bounds kube-apiserver's objects. A write
    /// past it fails as kube-apiserver's does when etcd refuses it.
    #[arg(long, env = "FARM_MAX_OBJECT_BYTES", default_value_t = crate::storage::DEFAULT_MAX_OBJECT_BYTES)]
    pub max_object_bytes: usize,

    /// On SIGTERM, how long in-flight requests may take to finish.
    #[arg(long, env = "FARM_SHUTDOWN_GRACE", default_value = "30", value_parser = parse_seconds)]
    pub shutdown_grace: Duration,

    /// How often certificate files are checked for changes.
    #[arg(long, env = "FARM_CERT_RELOAD_INTERVAL", default_value = "10", value_parser = parse_seconds)]
    pub cert_reload_interval: Duration,

    /// Log format.
    #[arg(long, env = "FARM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter (tracing-subscriber EnvFilter syntax).
    #[arg(long, env = "FARM_LOG", default_value = "info")]
    pub log: String,
}

#[derive(Args, Debug, Clone)]
pub struct CertsArgs {
    /// Directory to write ca.crt, ca.key, tls.crt, tls.key and cabundle.b64 into.
    #[arg(long, env = "FARM_CERTS_OUT", default_value = "certs")]
    pub out: PathBuf,

    /// Service name the certificate is for.
    #[arg(long, env = "FARM_SERVICE_NAME", default_value = "farm-apiserver")]
    pub service_name: String,

    /// Namespace of the Service.
    #[arg(long, env = "FARM_SERVICE_NAMESPACE", default_value = "farm-system")]
    pub service_namespace: String,
}

impl ServeArgs {
    /// The etcd settings, for --storage etcd.
    pub fn etcd_options(&self) -> crate::storage::etcd::EtcdOptions {
        crate::storage::etcd::EtcdOptions {
            servers: self.etcd_servers.clone(),
            ca_file: self.etcd_cafile.clone(),
            cert_file: self.etcd_certfile.clone(),
            key_file: self.etcd_keyfile.clone(),
            prefix: self.etcd_prefix.clone(),
            request_timeout: self.etcd_request_timeout,
        }
    }

    /// The authentication mode in force: as given, else `none` on loopback and
    /// `delegated` elsewhere.
    pub fn authentication_mode(&self) -> Authentication {
        self.authentication.unwrap_or(if self.bind.ip().is_loopback() {
            Authentication::None
        } else {
            Authentication::Delegated
        })
    }
}

/// Seconds as an integer or a decimal ("0.5").
fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.trim_end_matches('s').parse().map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("{s:?} is not a number of seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}
