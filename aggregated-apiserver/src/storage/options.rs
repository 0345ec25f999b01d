//! Where the kinds a server owns keep their objects, and how much history
//! and size each may hold.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::apimachinery::duration::parse_seconds;
use crate::storage::etcd::EtcdOptions;

/// Where the kinds this server owns are stored (`--storage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StorageBackend {
    /// One replica, in memory: lost on restart.
    Memory,
    /// etcd (--etcd-servers): durable, and shared by every replica.
    Etcd,
}

/// Where and how objects are stored: `--storage`, `--etcd-*`, the watch
/// history and the largest object.
#[derive(Args, Debug, Clone)]
pub struct StorageOptions {
    /// Where the kinds this server owns are stored.
    #[arg(long, value_enum, default_value_t = StorageBackend::Memory)]
    pub storage: StorageBackend,

    /// etcd servers (comma-separated http:// or https:// URLs), for --storage etcd.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,

    /// CA bundle (PEM) that signed the etcd servers' certificates.
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,

    /// Client certificate (PEM) presented to etcd (mutual TLS).
    #[arg(long, requires = "etcd_keyfile")]
    pub etcd_certfile: Option<PathBuf>,

    /// Private key (PEM) of the etcd client certificate.
    #[arg(long, requires = "etcd_certfile")]
    pub etcd_keyfile: Option<PathBuf>,

    /// Prefix of every key this server writes: `<prefix>/<resource>/<namespace>/<name>`.
    #[arg(long, default_value = "/registry")]
    pub etcd_prefix: String,

    /// kube's EncryptionConfiguration (apiserver.config.k8s.io/v1): how the
    /// values of each resource are encrypted in etcd (aesgcm, aescbc,
    /// secretbox, identity). For --storage etcd.
    #[arg(long)]
    pub encryption_provider_config: Option<PathBuf>,

    /// How long one etcd request may take; a write etcd does not answer in
    /// time fails with 504 (reads keep being served from the watch cache).
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub etcd_request_timeout: Duration,

    /// Events kept per kind for watch resumption and consistent paging; older
    /// resourceVersions and continue tokens get 410 Expired.
    #[arg(long, default_value_t = 10_000)]
    pub watch_history: usize,

    /// Bytes of object states the history of each kind may hold (as stored
    /// JSON): the events beyond it are dropped like those beyond
    /// `--watch-history`, so a history of large objects stays bounded.
    #[arg(long, default_value_t = 64 << 20)]
    pub watch_history_bytes: usize,

    /// Events a watcher may lag behind before it is closed (it then resumes or re-lists).
    #[arg(long, default_value_t = 4096)]
    pub watch_buffer: usize,

    /// Largest object a write may store, encoded as JSON, in bytes: etcd's
    /// default request limit, which bounds kube-apiserver's objects. A write
    /// past it fails as kube-apiserver's does when etcd refuses it.
    #[arg(long, default_value_t = crate::storage::DEFAULT_MAX_OBJECT_BYTES)]
    pub max_object_bytes: usize,
}

impl StorageOptions {
    /// The etcd settings, for --storage etcd.
    pub fn etcd_options(&self) -> EtcdOptions {
        EtcdOptions {
            servers: self.etcd_servers.clone(),
            ca_file: self.etcd_cafile.clone(),
            cert_file: self.etcd_certfile.clone(),
            key_file: self.etcd_keyfile.clone(),
            prefix: self.etcd_prefix.clone(),
            request_timeout: self.etcd_request_timeout,
        }
    }
}
