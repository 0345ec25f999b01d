//! The server's settings, as command-line flags: [`ServerOptions`] composes
//! each concern's own options struct (as k8s.io/apiserver's
//! `RecommendedOptions` composes `SecureServing`, `Authentication`,
//! `Authorization`, `Etcd`...), and each concern is built from its struct
//! alone. An application flattens [`ServerOptions`] into its own command line
//! and may give every flag an environment variable with [`with_env_prefix`].

use clap::Args;

pub mod values;

use crate::admission::options::AdmissionOptions;
use crate::audit::options::AuditOptions;
use crate::auth::options::{AuthenticationOptions, AuthorizationOptions, ReviewOptions};
use crate::endpoints::handlers::ApiSettings;
use crate::filters::options::RequestLimits;
use crate::server::connection::ConnectionLimits;
use crate::server::options::{ClusterOptions, LoggingOptions, ServingOptions};
use crate::storage::options::StorageOptions;

/// Every setting of the server, each concern's apart.
#[derive(Args, Debug, Clone)]
pub struct ServerOptions {
    #[command(flatten)]
    pub serving: ServingOptions,
    #[command(flatten)]
    pub connections: ConnectionLimits,
    #[command(flatten)]
    pub cluster: ClusterOptions,
    #[command(flatten)]
    pub authentication: AuthenticationOptions,
    #[command(flatten)]
    pub authorization: AuthorizationOptions,
    #[command(flatten)]
    pub reviews: ReviewOptions,
    #[command(flatten)]
    pub storage: StorageOptions,
    #[command(flatten)]
    pub admission: AdmissionOptions,
    #[command(flatten)]
    pub api: ApiSettings,
    #[command(flatten)]
    pub limits: RequestLimits,
    #[command(flatten)]
    pub logging: LoggingOptions,
    #[command(flatten)]
    pub audit: AuditOptions,
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
