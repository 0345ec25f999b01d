//! farm-apiserver's command line: the library's server options, flattened,
//! plus what only FarmPods need; every flag also reads `FARM_<FLAG>` from the
//! environment.

use std::path::PathBuf;

use aggregated_apiserver::ServerOptions;
use clap::{Args, CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// `--version`: `0.1.0 (rev 92fa3f0, 2026-11-26)`, after the name (build.rs
/// says where the revision comes from).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " ", env!("FARM_VERSION_DETAIL"));

/// The source revision the binary was built from, or `unknown`.
pub const SOURCE_REVISION: &str = env!("FARM_SOURCE_REVISION_RESOLVED");

#[derive(Parser, Debug)]
#[command(
    name = "farm-apiserver",
    version = VERSION,
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

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    #[command(flatten)]
    pub server: ServerOptions,

    /// Namespaces whose Pods are watched (comma-separated). Default: all.
    #[arg(long, value_delimiter = ',')]
    pub pod_namespaces: Vec<String>,
}

#[derive(Args, Debug, Clone)]
pub struct CertsArgs {
    /// Directory to write ca.crt, ca.key, tls.crt, tls.key and cabundle.b64 into.
    #[arg(long, env = "FARM_CERTS_OUT", default_value = "certs")]
    pub out: PathBuf,

    /// Service name the certificate is for.
    #[arg(long, env = "FARM_SERVICE_NAME", default_value = SERVICE_NAME)]
    pub service_name: String,

    /// Namespace of the Service.
    #[arg(long, env = "FARM_SERVICE_NAMESPACE", default_value = SERVICE_NAMESPACE)]
    pub service_namespace: String,
}

const SERVICE_NAME: &str = "farm-apiserver";
const SERVICE_NAMESPACE: &str = "farm-system";

/// The library's defaults that name this server: its Service and its etcd keys.
fn farm_defaults(command: clap::Command) -> clap::Command {
    command
        .mut_arg("service_name", |a| a.default_value(SERVICE_NAME))
        .mut_arg("service_namespace", |a| a.default_value(SERVICE_NAMESPACE))
        .mut_arg("etcd_prefix", |a| a.default_value("/registry/farm.example.com"))
}

impl Cli {
    /// The command line as clap describes it, with this server's defaults
    /// and environment variables.
    pub fn command_line() -> clap::Command {
        let command = farm_defaults(Self::command()).mut_subcommand("serve", farm_defaults);
        aggregated_apiserver::with_env_prefix(command, "FARM")
    }

    /// Parses the process's arguments (exits with clap's message on an error).
    pub fn parse_args() -> Self {
        let matches = Self::command_line().get_matches();
        Self::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }
}
