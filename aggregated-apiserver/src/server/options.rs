//! The server's settings, as command-line flags: [`ServerOptions`] composes
//! each concern's own options struct (as k8s.io/apiserver's
//! `RecommendedOptions` composes `SecureServing`, `Authentication`,
//! `Authorization`, `Etcd`...), and each concern is built from its struct
//! alone. An application flattens [`ServerOptions`] into its own command line
//! and may give every flag an environment variable with [`with_env_prefix`].
//! The server's own options are here too: where and how it serves, the
//! cluster it belongs to, and its logs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use tracing_subscriber::EnvFilter;

use crate::admission::options::AdmissionOptions;
use crate::apimachinery::duration::parse_seconds;
use crate::audit::options::AuditOptions;
use crate::auth::options::{AuthenticationOptions, AuthorizationOptions, ReviewOptions};
use crate::endpoints::handlers::ApiSettings;
use crate::filters::options::RequestLimits;
use crate::server::connection::ConnectionLimits;
use crate::storage::options::StorageOptions;

/// Where the server listens, with which certificate, and how it stops.
#[derive(Args, Debug, Clone)]
pub struct ServingOptions {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8443")]
    pub bind: SocketAddr,

    /// Serving certificate (PEM). Without it, a development CA and certificate are made in --cert-dir.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// Private key of the serving certificate (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,

    /// Where development certificates are made and reused (ca.crt is the CA to trust).
    #[arg(long, default_value = "certs")]
    pub cert_dir: PathBuf,

    /// Service name the serving certificate is valid for (<service>.<namespace>.svc).
    #[arg(long, default_value = "apiserver")]
    pub service_name: String,

    /// Namespace of that Service.
    #[arg(long, default_value = "default")]
    pub service_namespace: String,

    /// How often certificate files are checked for changes.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub cert_reload_interval: Duration,

    /// On SIGTERM, how long the server goes on serving with /readyz failing,
    /// before it stops accepting connections: the time load balancers and
    /// EndpointSlices take to stop sending it requests (kube-apiserver's flag).
    #[arg(long, default_value = "0", value_parser = parse_seconds)]
    pub shutdown_delay_duration: Duration,

    /// After the shutdown delay, how long in-flight requests may take to
    /// finish; those still running then are answered 429 with Retry-After.
    #[arg(long, default_value = "30", value_parser = parse_seconds)]
    pub shutdown_grace: Duration,

    /// After the shutdown delay, keep listening while in-flight requests
    /// drain, answering every new request (probes and /metrics excepted) 429
    /// with Retry-After and `Connection: close` (kube-apiserver's flag).
    /// Without it the listener closes and HTTP/2 clients are sent GOAWAY.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub shutdown_send_retry_after: bool,
}

/// The cluster this server belongs to: its reviews, its watches, and the
/// application's own.
#[derive(Args, Debug, Clone)]
pub struct ClusterOptions {
    /// Kubeconfig of the cluster this server belongs to. Default: $KUBECONFIG
    /// or ~/.kube/config, else the in-cluster service account. Without any,
    /// the server still serves what needs no cluster (stored kinds, with every
    /// namespace taken to exist).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// How the server logs: `--log-format` and `--log`.
#[derive(Args, Debug, Clone)]
pub struct LoggingOptions {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter (tracing-subscriber EnvFilter syntax).
    #[arg(long, default_value = "info")]
    pub log: String,
}

impl Default for LoggingOptions {
    /// Text at level info.
    fn default() -> Self {
        Self { log_format: LogFormat::Text, log: "info".into() }
    }
}

impl LoggingOptions {
    /// Installs the process's log subscriber.
    pub fn init(&self) {
        let filter = EnvFilter::try_new(&self.log).unwrap_or_else(|_| EnvFilter::new("info"));
        // Colour only for a person at a terminal: escape codes in a log file or
        // a container log are noise to every reader after.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
        match self.log_format {
            LogFormat::Text => builder.init(),
            LogFormat::Json => builder.json().flatten_event(true).init(),
        }
    }
}

/// Every setting of the server, each concern's apart.
#[derive(Args, Debug, Clone)]
pub struct ServerOptions {
    /// Where and how it serves, and its certificates.
    #[command(flatten)]
    pub serving: ServingOptions,
    /// Connection timeouts and the idle-connection cap.
    #[command(flatten)]
    pub connections: ConnectionLimits,
    /// The cluster it belongs to (`--kubeconfig`).
    #[command(flatten)]
    pub cluster: ClusterOptions,
    /// Delegated authentication.
    #[command(flatten)]
    pub authentication: AuthenticationOptions,
    /// Delegated authorization.
    #[command(flatten)]
    pub authorization: AuthorizationOptions,
    /// How TokenReviews and SubjectAccessReviews are cached and paced.
    #[command(flatten)]
    pub reviews: ReviewOptions,
    /// Memory or etcd.
    #[command(flatten)]
    pub storage: StorageOptions,
    /// Admission plugins and their configuration.
    #[command(flatten)]
    pub admission: AdmissionOptions,
    /// Request bodies, lists and watches.
    #[command(flatten)]
    pub api: ApiSettings,
    /// In-flight limits and the request timeout.
    #[command(flatten)]
    pub limits: RequestLimits,
    /// Logs.
    #[command(flatten)]
    pub logging: LoggingOptions,
    /// Auditing.
    #[command(flatten)]
    pub audit: AuditOptions,
    /// OpenTelemetry tracing.
    #[command(flatten)]
    pub tracing: crate::trace::TracingOptions,
}

/// Gives every flag of `command` (and of its subcommands) that has none an
/// environment variable: `--max-body-bytes` becomes `<PREFIX>_MAX_BODY_BYTES`.
pub fn with_env_prefix(command: clap::Command, prefix: &str) -> clap::Command {
    command
        .mut_args(|arg| {
            let name = match arg.get_long() {
                Some(long) if arg.get_env().is_none() && long != "help" && long != "version" => {
                    format!("{prefix}_{}", long.to_uppercase().replace('-', "_"))
                }
                _ => return arg,
            };
            arg.env(name)
        })
        .mut_subcommands(|sub| with_env_prefix(sub, prefix))
}
