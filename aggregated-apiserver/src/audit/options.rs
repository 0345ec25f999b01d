//! kube-apiserver's audit flags (k8s.io/apiserver `pkg/server/options/audit.go`),
//! with its names and defaults. Durations read as Go durations (`30s`, `1m`),
//! as kube's do.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::apimachinery::gofmt::go_parse_duration;

/// How a backend's events are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Buffered and written asynchronously in batches; when the buffer is
    /// full, events are dropped (and counted), never waited for.
    Batch,
    /// Written while the request is served; a failure is counted and logged,
    /// the request carries on.
    Blocking,
    /// As blocking, but a failure to write the RequestReceived event fails the request (500).
    BlockingStrict,
}

/// Batching and throttling of one backend in batch mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchConfig {
    pub buffer_size: usize,
    pub max_batch_size: usize,
    pub max_batch_wait: Duration,
    pub throttle_enable: bool,
    pub throttle_qps: f32,
    pub throttle_burst: usize,
}

/// Truncation of events and batches of one backend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TruncateConfig {
    pub enabled: bool,
    pub max_batch_size: usize,
    pub max_event_size: usize,
}

fn duration(s: &str) -> Result<Duration, String> {
    go_parse_duration(s)
}

#[derive(Args, Debug, Clone)]
pub struct AuditOptions {
    /// Path to the file that defines the audit policy configuration (audit.k8s.io/v1 Policy).
    /// Without it nothing is audited.
    #[arg(long)]
    pub audit_policy_file: Option<PathBuf>,

    /// If set, all requests coming to the apiserver will be logged to this file. '-' means standard out.
    #[arg(long)]
    pub audit_log_path: Option<String>,

    /// The maximum number of days to retain old audit log files based on the timestamp encoded in their filename.
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxage: u32,

    /// The maximum number of old audit log files to retain. Setting a value of 0 will mean there's no
    /// restriction on the number of files.
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxbackup: u32,

    /// The maximum size in megabytes of the audit log file before it gets rotated (0: 100, as kube's lumberjack).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxsize: u32,

    /// Format of saved audits. "legacy" indicates 1-line text format for each event. "json" indicates
    /// structured json format.
    #[arg(long, default_value = "json", value_parser = ["json", "legacy"])]
    pub audit_log_format: String,

    /// If set, the rotated log files will be compressed using gzip.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub audit_log_compress: bool,

    /// Strategy for sending audit events to the log: blocking, batch or blocking-strict.
    #[arg(long, value_enum, default_value_t = Mode::Blocking)]
    pub audit_log_mode: Mode,

    /// The size of the buffer to store events before batching and writing. Only used in batch mode.
    #[arg(long, default_value_t = 10_000)]
    pub audit_log_batch_buffer_size: usize,

    /// The maximum size of a batch. Only used in batch mode.
    #[arg(long, default_value_t = 1)]
    pub audit_log_batch_max_size: usize,

    /// The amount of time to wait before force writing the batch that hadn't reached the max size.
    /// Only used in batch mode.
    #[arg(long, default_value = "0s", value_parser = duration)]
    pub audit_log_batch_max_wait: Duration,

    /// Whether batching throttling is enabled. Only used in batch mode.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub audit_log_batch_throttle_enable: bool,

    /// Maximum average number of batches per second. Only used in batch mode.
    #[arg(long, default_value_t = 0.0)]
    pub audit_log_batch_throttle_qps: f32,

    /// Maximum number of requests sent at the same moment if ThrottleQPS was not utilized before.
    /// Only used in batch mode.
    #[arg(long, default_value_t = 0)]
    pub audit_log_batch_throttle_burst: usize,

    /// Whether event and batch truncating is enabled.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub audit_log_truncate_enabled: bool,

    /// Maximum size of the batch sent to the underlying backend. If a batch exceeds this limit, it is
    /// split into several batches of smaller size.
    #[arg(long, default_value_t = 10 * 1024 * 1024)]
    pub audit_log_truncate_max_batch_size: usize,

    /// Maximum size of the audit event sent to the underlying backend. If the size of an event is greater
    /// than this number, first request and response are removed, and if this doesn't reduce the size
    /// enough, event is discarded.
    #[arg(long, default_value_t = 100 * 1024)]
    pub audit_log_truncate_max_event_size: usize,

    /// Path to a kubeconfig formatted file that defines the audit webhook configuration.
    #[arg(long)]
    pub audit_webhook_config_file: Option<PathBuf>,

    /// The amount of time to wait before retrying the first failed request.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub audit_webhook_initial_backoff: Duration,

    /// Strategy for sending audit events to the webhook: blocking, batch or blocking-strict.
    #[arg(long, value_enum, default_value_t = Mode::Batch)]
    pub audit_webhook_mode: Mode,

    /// The size of the buffer to store events before batching and writing. Only used in batch mode.
    #[arg(long, default_value_t = 10_000)]
    pub audit_webhook_batch_buffer_size: usize,

    /// The maximum size of a batch. Only used in batch mode.
    #[arg(long, default_value_t = 400)]
    pub audit_webhook_batch_max_size: usize,

    /// The amount of time to wait before force writing the batch that hadn't reached the max size.
    /// Only used in batch mode.
    #[arg(long, default_value = "30s", value_parser = duration)]
    pub audit_webhook_batch_max_wait: Duration,

    /// Whether batching throttling is enabled. Only used in batch mode.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub audit_webhook_batch_throttle_enable: bool,

    /// Maximum average number of batches per second. Only used in batch mode.
    #[arg(long, default_value_t = 10.0)]
    pub audit_webhook_batch_throttle_qps: f32,

    /// Maximum number of requests sent at the same moment if ThrottleQPS was not utilized before.
    /// Only used in batch mode.
    #[arg(long, default_value_t = 15)]
    pub audit_webhook_batch_throttle_burst: usize,

    /// Whether event and batch truncating is enabled.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub audit_webhook_truncate_enabled: bool,

    /// Maximum size of the batch sent to the underlying backend. If a batch exceeds this limit, it is
    /// split into several batches of smaller size.
    #[arg(long, default_value_t = 10 * 1024 * 1024)]
    pub audit_webhook_truncate_max_batch_size: usize,

    /// Maximum size of the audit event sent to the underlying backend. If the size of an event is greater
    /// than this number, first request and response are removed, and if this doesn't reduce the size
    /// enough, event is discarded.
    #[arg(long, default_value_t = 100 * 1024)]
    pub audit_webhook_truncate_max_event_size: usize,
}

impl AuditOptions {
    pub fn log_batch(&self) -> BatchConfig {
        BatchConfig {
            buffer_size: self.audit_log_batch_buffer_size,
            max_batch_size: self.audit_log_batch_max_size,
            max_batch_wait: self.audit_log_batch_max_wait,
            throttle_enable: self.audit_log_batch_throttle_enable,
            throttle_qps: self.audit_log_batch_throttle_qps,
            throttle_burst: self.audit_log_batch_throttle_burst,
        }
    }

    pub fn webhook_batch(&self) -> BatchConfig {
        BatchConfig {
            buffer_size: self.audit_webhook_batch_buffer_size,
            max_batch_size: self.audit_webhook_batch_max_size,
            max_batch_wait: self.audit_webhook_batch_max_wait,
            throttle_enable: self.audit_webhook_batch_throttle_enable,
            throttle_qps: self.audit_webhook_batch_throttle_qps,
            throttle_burst: self.audit_webhook_batch_throttle_burst,
        }
    }

    pub fn log_truncate(&self) -> TruncateConfig {
        TruncateConfig {
            enabled: self.audit_log_truncate_enabled,
            max_batch_size: self.audit_log_truncate_max_batch_size,
            max_event_size: self.audit_log_truncate_max_event_size,
        }
    }

    pub fn webhook_truncate(&self) -> TruncateConfig {
        TruncateConfig {
            enabled: self.audit_webhook_truncate_enabled,
            max_batch_size: self.audit_webhook_truncate_max_batch_size,
            max_event_size: self.audit_webhook_truncate_max_event_size,
        }
    }

    /// kube's `AuditOptions.Validate`, in its words.
    pub fn validate(&self) -> anyhow::Result<()> {
        let mut errors = Vec::new();
        if self.audit_log_path.as_deref().is_some_and(|p| !p.is_empty()) {
            validate_backend("log", self.audit_log_mode, &self.log_batch(), &self.log_truncate(), &mut errors);
        }
        if self.audit_webhook_config_file.is_some() {
            validate_backend(
                "webhook",
                self.audit_webhook_mode,
                &self.webhook_batch(),
                &self.webhook_truncate(),
                &mut errors,
            );
        }
        if errors.is_empty() {
            Ok(())
        } else {
            anyhow::bail!("{}", errors.join("; "))
        }
    }
}

fn validate_backend(
    plugin: &str,
    mode: Mode,
    batch: &BatchConfig,
    truncate: &TruncateConfig,
    errors: &mut Vec<String>,
) {
    if mode == Mode::Batch {
        if batch.buffer_size == 0 {
            errors.push(format!("invalid audit batch {plugin} buffer size 0, must be a positive number"));
        }
        if batch.max_batch_size == 0 {
            errors.push(format!("invalid audit batch {plugin} max batch size 0, must be a positive number"));
        }
        if batch.throttle_enable {
            if batch.throttle_qps <= 0.0 {
                errors.push(format!(
                    "invalid audit batch {plugin} throttle QPS {}, must be a positive number",
                    batch.throttle_qps
                ));
            }
            if batch.throttle_burst == 0 {
                errors.push(format!("invalid audit batch {plugin} throttle burst 0, must be a positive number"));
            }
        }
    }
    if truncate.max_event_size == 0 {
        errors.push(format!("invalid audit truncate {plugin} max event size 0, must be a positive number"));
    }
    if truncate.max_batch_size < truncate.max_event_size {
        errors.push(format!(
            "invalid audit truncate {plugin} max batch size {}, must be greater than max event size ({})",
            truncate.max_batch_size, truncate.max_event_size
        ));
    }
}
