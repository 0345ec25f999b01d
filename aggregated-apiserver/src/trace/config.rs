//! `--tracing-config-file`: kube's `TracingConfiguration`
//! (`apiserver.config.k8s.io/v1`, `v1beta1` or `v1alpha1`), in YAML or JSON,
//! checked as kube-apiserver checks it.
//!
//! ```yaml
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: TracingConfiguration
//! # An OTLP gRPC collector: host:port, dns:///host:port or unix:///path.
//! endpoint: otel-collector.observability:4317
//! # Traces this server starts itself; a trusted caller's choice is kept.
//! samplingRatePerMillion: 10000
//! ```

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use serde::Deserialize;

/// kube's default collector: an OpenTelemetry Collector beside the server.
const DEFAULT_ENDPOINT: &str = "localhost:4317";

const VERSIONS: [&str; 3] =
    ["apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1alpha1"];

/// OpenTelemetry tracing: `--tracing-config-file`.
#[derive(Args, Debug, Clone, Default)]
pub struct TracingOptions {
    /// kube's TracingConfiguration (apiserver.config.k8s.io/v1): the OTLP
    /// gRPC collector to send spans to and how many of the traces this server
    /// starts are sampled. Without it nothing is traced.
    #[arg(long)]
    pub tracing_config_file: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    api_version: String,
    kind: String,
    endpoint: Option<String>,
    sampling_rate_per_million: Option<i64>,
}

/// Where spans go, and how often this server starts a sampled trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TracingConfig {
    pub endpoint: Endpoint,
    /// Of the traces this server starts (no trusted parent), the sampled
    /// fraction; 0 samples only what a trusted caller sampled.
    pub sampling_ratio: f64,
}

/// An OTLP gRPC collector's address, as gRPC names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `host:port`, reached over plain TCP (kube's exporter is insecure too).
    Tcp(String),
    /// A Unix socket's path.
    Unix(PathBuf),
}

impl TracingConfig {
    /// Reads and checks the file; a bad one stops the server at start.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading --tracing-config-file {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("--tracing-config-file {}", path.display()))
    }

    fn parse(text: &str) -> anyhow::Result<Self> {
        let file: File = serde_norway::from_str(text).context("not a TracingConfiguration")?;
        if !VERSIONS.contains(&file.api_version.as_str()) || file.kind != "TracingConfiguration" {
            bail!(
                "apiVersion {:?} and kind {:?}: expected TracingConfiguration of {}",
                file.api_version,
                file.kind,
                VERSIONS.join(", ")
            );
        }
        let rate = file.sampling_rate_per_million.unwrap_or(0);
        if rate < 0 {
            bail!("samplingRatePerMillion: Invalid value: {rate}: sampling rate must be positive");
        }
        if rate > 1_000_000 {
            bail!(
                "samplingRatePerMillion: Invalid value: {rate}: sampling rate per million must be less than or equal to one million"
            );
        }
        let endpoint = endpoint(file.endpoint.as_deref().unwrap_or(DEFAULT_ENDPOINT))?;
        Ok(Self { endpoint, sampling_ratio: rate as f64 / 1_000_000.0 })
    }
}

/// An endpoint in gRPC's naming (kube's check): `host:port`,
/// `dns:[//authority/]host:port` or `unix:path` / `unix:///path`.
fn endpoint(text: &str) -> anyhow::Result<Endpoint> {
    let invalid = |why: &str| anyhow::anyhow!("endpoint: Invalid value: {text:?}: {why}");
    let (scheme, rest) = match text.split_once(':') {
        Some((scheme @ ("dns" | "unix" | "unix-abstract"), rest)) => (scheme, rest),
        Some((other, rest)) if rest.starts_with("//") => {
            return Err(invalid(&format!(
                "unsupported scheme: {other}.  Options are none, dns, unix, or unix-abstract.  See https://github.com/grpc/grpc/blob/master/doc/naming.md"
            )))
        }
        _ => ("dns", text),
    };
    match scheme {
        "unix" => {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(invalid("a unix endpoint needs a socket path"));
            }
            Ok(Endpoint::Unix(PathBuf::from(path)))
        }
        "unix-abstract" => Err(invalid("abstract unix sockets are not supported by this server")),
        _ => {
            // dns:///host:port or dns://authority/host:port: the part after
            // the authority names the collector.
            let target = match rest.strip_prefix("//") {
                Some(after) => after.split_once('/').map_or(after, |(_, target)| target),
                None => rest,
            };
            let (host, port) = target.rsplit_once(':').ok_or_else(|| invalid("a port is required"))?;
            if host.is_empty() || port.parse::<u16>().is_err() {
                return Err(invalid("expected host:port"));
            }
            Ok(Endpoint::Tcp(target.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<TracingConfig, String> {
        TracingConfig::parse(text).map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn kubes_three_versions_are_read_with_kubes_defaults() {
        for version in VERSIONS {
            let config = parse(&format!("apiVersion: {version}\nkind: TracingConfiguration\n")).unwrap();
            assert_eq!(config, TracingConfig { endpoint: Endpoint::Tcp("localhost:4317".into()), sampling_ratio: 0.0 });
        }
        let config = parse(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: collector:4317\nsamplingRatePerMillion: 250000\n",
        )
        .unwrap();
        assert_eq!(config, TracingConfig { endpoint: Endpoint::Tcp("collector:4317".into()), sampling_ratio: 0.25 });
    }

    #[test]
    fn endpoints_are_named_as_grpc_names_them() {
        assert_eq!(endpoint("dns:///collector:4317").unwrap(), Endpoint::Tcp("collector:4317".into()));
        assert_eq!(endpoint("dns://8.8.8.8/collector:4317").unwrap(), Endpoint::Tcp("collector:4317".into()));
        assert_eq!(endpoint("[::1]:4317").unwrap(), Endpoint::Tcp("[::1]:4317".into()));
        assert_eq!(endpoint("unix:///run/otel.sock").unwrap(), Endpoint::Unix("/run/otel.sock".into()));
        assert_eq!(endpoint("unix:otel.sock").unwrap(), Endpoint::Unix("otel.sock".into()));
        for (bad, why) in [
            ("http://collector:4317", "unsupported scheme: http."),
            ("collector", "a port is required"),
            ("collector:port", "expected host:port"),
            ("unix:", "needs a socket path"),
        ] {
            let e = endpoint(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("endpoint: Invalid value: {bad:?}")) && e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_files_are_refused_in_kubes_words() {
        let v1 = "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n";
        let e = parse(&format!("{v1}samplingRatePerMillion: 1000001\n")).unwrap_err();
        assert!(e.contains("sampling rate per million must be less than or equal to one million"), "{e}");
        let e = parse(&format!("{v1}samplingRatePerMillion: -1\n")).unwrap_err();
        assert!(e.contains("sampling rate must be positive"), "{e}");
        let e = parse("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n").unwrap_err();
        assert!(e.contains("expected TracingConfiguration"), "{e}");
        let e = parse("endpoint: [").unwrap_err();
        assert!(e.contains("not a TracingConfiguration"), "{e}");
    }
}
