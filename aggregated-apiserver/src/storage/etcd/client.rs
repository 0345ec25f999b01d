//! Connecting to etcd: endpoints, mutual TLS (kube-apiserver's `--etcd-cafile`,
//! `--etcd-certfile`, `--etcd-keyfile`), timeouts and keep-alives, checked at
//! start so a bad flag is a clear error there rather than a failing request later.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use std::sync::Arc;

use etcd_client::{Channel, Client, ConnectOptions, Identity, TlsOptions};

use crate::transport::{GoVerifier, Roots};

/// The largest answer accepted from etcd. A list page or a watch catching up
/// carries many objects of up to etcd's 1.5 MiB each; kube-apiserver lifts the
/// gRPC limit the same way.
pub const MAX_MESSAGE_BYTES: usize = 1 << 31;

/// Where etcd is and how to reach it.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// `http://host:port` or `https://host:port`.
    pub servers: Vec<String>,
    /// The CA that signed etcd's serving certificate (`--etcd-cafile`).
    pub ca_file: Option<PathBuf>,
    /// The client certificate presented to etcd (`--etcd-certfile`).
    pub cert_file: Option<PathBuf>,
    /// Its key (`--etcd-keyfile`).
    pub key_file: Option<PathBuf>,
    /// Keys are `<prefix>/<resource>/<namespace>/<name>`.
    pub prefix: String,
    /// How long one etcd request may take before it fails (the write then
    /// answers 504, as kube-apiserver does when etcd does not answer in time).
    pub request_timeout: Duration,
}

impl EtcdOptions {
    /// The prefix without a trailing slash, refused when it cannot be a key prefix.
    pub(crate) fn checked_prefix(&self) -> anyhow::Result<String> {
        let prefix = self.prefix.trim_end_matches('/');
        if !self.prefix.starts_with('/') || prefix.is_empty() {
            bail!(
                "--etcd-prefix {:?} must start with '/' and name a directory, e.g. /registry/example.com",
                self.prefix
            );
        }
        if prefix.contains("//") || prefix.chars().any(|c| c.is_control() || c.is_whitespace()) {
            bail!("--etcd-prefix {:?} must not contain empty segments, spaces or control characters", self.prefix);
        }
        Ok(prefix.to_string())
    }

    /// A client for these servers. Connections are made lazily: an unreachable
    /// etcd shows in readiness and in failing writes, not here.
    pub(crate) async fn connect(&self) -> anyhow::Result<Client> {
        if self.servers.is_empty() {
            bail!("--storage etcd needs --etcd-servers");
        }
        let mut schemes = std::collections::BTreeSet::new();
        for server in &self.servers {
            let uri: http::Uri = server.parse().with_context(|| format!("--etcd-servers: {server:?} is not a URL"))?;
            match uri.scheme_str() {
                Some(scheme @ ("https" | "http")) => schemes.insert(scheme.to_string()),
                _ => bail!("--etcd-servers: {server:?} must start with http:// or https://"),
            };
            if uri.host().is_none() {
                bail!("--etcd-servers: {server:?} has no host");
            }
        }
        if schemes.len() > 1 {
            bail!("--etcd-servers mixes http:// and https:// URLs: use one for all");
        }
        let tls_wanted = schemes.contains("https");
        let keep_alive = (Duration::from_secs(5), Duration::from_secs(3));
        let connect_timeout = self.request_timeout.min(Duration::from_secs(5));
        let options = ConnectOptions::new()
            .with_timeout(self.request_timeout)
            .with_connect_timeout(connect_timeout)
            // Notice a dead or partitioned etcd on idle connections too.
            .with_keep_alive(keep_alive.0, keep_alive.1)
            .with_keep_alive_while_idle(true)
            .with_require_leader(true);
        if !tls_wanted {
            if self.ca_file.is_some() || self.cert_file.is_some() {
                bail!("--etcd-cafile/--etcd-certfile are given but --etcd-servers are not https:// URLs");
            }
            return Client::connect(&self.servers, Some(options)).await.context("connecting to etcd");
        }
        // TLS is set up here rather than by etcd-client, so that etcd's
        // certificate is verified as kube-apiserver's Go client verifies it.
        let (tls, verifier) = self.tls()?;
        let (channel, endpoints) = tonic::transport::Channel::balance_channel(64);
        for server in &self.servers {
            let endpoint = tonic::transport::Endpoint::from_shared(server.clone())
                .with_context(|| format!("--etcd-servers: {server:?} is not a URL"))?
                .tls_config_with_verifier(tls.clone(), verifier.clone())
                .with_context(|| format!("--etcd-servers: TLS for {server:?}"))?
                .keep_alive_while_idle(true)
                .http2_keep_alive_interval(keep_alive.0)
                .keep_alive_timeout(keep_alive.1)
                .timeout(self.request_timeout)
                .connect_timeout(connect_timeout);
            let change = tonic::transport::channel::Change::Insert(endpoint.uri().clone(), endpoint);
            endpoints.send(change).await.context("adding an etcd endpoint")?;
        }
        Client::from_channel(Channel::Tonic(channel), Some(options)).await.context("connecting to etcd")
    }

    /// etcd's TLS: the client certificate, and a verifier trusting --etcd-cafile.
    fn tls(&self) -> anyhow::Result<(TlsOptions, Arc<GoVerifier>)> {
        let read = |flag: &str, path: &PathBuf| {
            std::fs::read(path).with_context(|| format!("{flag}: reading {}", path.display()))
        };
        let ca = self
            .ca_file
            .as_ref()
            .context("https etcd servers need --etcd-cafile (the CA that signed etcd's certificate)")?;
        let ca_pem = read("--etcd-cafile", ca)?;
        if !String::from_utf8_lossy(&ca_pem).contains("-----BEGIN CERTIFICATE-----") {
            bail!("--etcd-cafile {} holds no PEM certificate", ca.display());
        }
        let verifier =
            GoVerifier::new(Roots::Pem(ca_pem)).with_context(|| format!("--etcd-cafile {}", ca.display()))?;
        let mut tls = TlsOptions::new();
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                let cert_pem = read("--etcd-certfile", cert)?;
                let key_pem = read("--etcd-keyfile", key)?;
                tls = tls.identity(Identity::from_pem(cert_pem, key_pem));
            }
            (None, None) => {}
            _ => bail!("--etcd-certfile and --etcd-keyfile go together"),
        }
        Ok((tls, Arc::new(verifier)))
    }
}
