//! Auditing as kube-apiserver audits (k8s.io/apiserver `pkg/audit`,
//! `plugin/pkg/audit`): every request is recorded under the policy
//! `--audit-policy-file` as audit.k8s.io/v1 events, written by a log backend,
//! a webhook backend, or both.
//!
//! - [`policy`]: the Policy and its evaluation (which level, which stages);
//! - [`event`]: the owned Event, its levels and stages, and how strings and
//!   times are written as kube writes them;
//! - [`parts`]: what every event of a request says of it, and their writers;
//! - [`context`]: one request's record, and the annotation hook ([`AuditContext`]);
//! - [`encode`]: an event written straight from that record ([`EventRef`]),
//!   the one layout of every event's JSON;
//! - [`request`]: what an event takes from a request (source IPs, bodies);
//! - [`backend`]: the backend contract, and what a backend answers at once;
//! - [`sink`]: the blocking, strict and batch modes over a backend;
//! - [`group`]: the blocking modes' writes of the events that come together,
//!   and [`ticket`], what a request awaits until its group is written;
//! - [`truncate`], [`log`] with [`rotate`], [`webhook`]: the backends;
//! - [`metrics`]: `apiserver_audit_*`; [`options`]: the `--audit-*` flags.
//!
//! The filter that records requests is [`crate::filters::audit`]. Without a
//! policy (or without a backend) there is no [`Auditor`] and the request path
//! does nothing for auditing but echo the aggregator's `Audit-ID`.

pub mod backend;
pub mod context;
pub mod encode;
pub mod event;
pub mod group;
pub mod log;
pub mod metrics;
pub mod options;
pub mod parts;
pub mod policy;
pub mod request;
pub mod rotate;
pub mod sink;
pub mod ticket;
pub mod truncate;
pub mod webhook;

use std::sync::Arc;

pub use context::AuditContext;
pub use encode::EventRef;
pub use event::{Event, Level, Stage, HEADER_AUDIT_ID};

use self::backend::{Backend, Handed, LineBackend};
use self::metrics::AuditMetrics;
use self::options::AuditOptions;
use self::policy::{PolicyEvaluator, RequestAuditConfig};
use self::rotate::Rotation;
use crate::apimachinery::request_info::RequestInfo;

/// The policy and the backends: one per server, when auditing is on.
pub struct Auditor {
    policy: PolicyEvaluator,
    sink: Arc<dyn Backend>,
    metrics: AuditMetrics,
}

impl Auditor {
    /// The auditor the options describe: None when no policy is given or no
    /// backend is (kube then audits nothing either). A policy that does not
    /// read, or a backend that cannot start, is an error naming the file.
    pub async fn start(options: &AuditOptions, metrics: AuditMetrics) -> anyhow::Result<Option<Arc<Self>>> {
        options.validate()?;
        let log_path = options.audit_log_path.as_deref().filter(|p| !p.is_empty());
        let webhook = options.audit_webhook_config_file.as_ref();
        let Some(policy_file) = &options.audit_policy_file else {
            if log_path.is_some() || webhook.is_some() {
                tracing::info!("no audit policy file provided: no events will be recorded");
            }
            return Ok(None);
        };
        let policy = PolicyEvaluator::load(policy_file)?;
        let mut backends: Vec<Arc<dyn Backend>> = Vec::new();
        if let Some(path) = log_path {
            let format = if options.audit_log_format == "legacy" { log::Format::Legacy } else { log::Format::Json };
            let rotation = Rotation {
                max_size_mb: u64::from(options.audit_log_maxsize),
                max_age_days: u64::from(options.audit_log_maxage),
                max_backups: options.audit_log_maxbackup as usize,
                compress: options.audit_log_compress,
            };
            let backend: Arc<dyn LineBackend> =
                Arc::new(log::LogBackend::open(path, rotation, format, metrics.clone())?);
            let moded = sink::with_mode(backend, options.audit_log_mode, options.log_batch(), false, metrics.clone());
            backends.push(truncate::Truncate::wrap(moded, options.log_truncate(), metrics.clone()));
        }
        if let Some(config_file) = webhook {
            let backend: Arc<dyn LineBackend> = Arc::new(
                webhook::WebhookBackend::new(config_file, options.audit_webhook_initial_backoff, metrics.clone())
                    .await?,
            );
            let moded =
                sink::with_mode(backend, options.audit_webhook_mode, options.webhook_batch(), true, metrics.clone());
            backends.push(truncate::Truncate::wrap(moded, options.webhook_truncate(), metrics.clone()));
        }
        if backends.is_empty() {
            tracing::warn!(
                policy = %policy_file.display(),
                "an audit policy but no audit backend (--audit-log-path, --audit-webhook-config-file): nothing is audited"
            );
            return Ok(None);
        }
        tracing::info!(
            policy = %policy_file.display(),
            log = log_path.unwrap_or(""),
            webhook = %webhook.map(|w| w.display().to_string()).unwrap_or_default(),
            "auditing requests"
        );
        let sink: Arc<dyn Backend> =
            if backends.len() == 1 { backends.remove(0) } else { Arc::new(sink::Union::new(backends)) };
        Ok(Some(Arc::new(Self { policy, sink, metrics })))
    }

    /// An auditor over given parts.
    #[cfg(test)]
    pub fn new(policy: PolicyEvaluator, sink: Arc<dyn Backend>, metrics: AuditMetrics) -> Self {
        Self { policy, sink, metrics }
    }

    pub fn metrics(&self) -> &AuditMetrics {
        &self.metrics
    }

    /// The policy's decision for `info` when no user could change it.
    pub(crate) fn evaluate_early(&self, info: &RequestInfo) -> Option<RequestAuditConfig> {
        self.policy.evaluate_early(info)
    }

    /// Hands one event to the backends here and now, from its request's
    /// record; None when one of them may wait (nothing was done then).
    fn process_now(&self, event: &EventRef<'_>) -> Option<Handed> {
        let handed = self.sink.process_now(event)?;
        self.metrics.event();
        Some(handed)
    }

    /// Hands one event, owned, to backends that may wait. The event comes
    /// boxed: held by this future, it would make [`context::Pending`]'s
    /// future (which every request awaiting its event holds) too large for
    /// glibc's per-thread cache (measured: docs/performance.md, "Auditing:
    /// the backends' buffers").
    async fn process_owned(&self, event: Box<Event>) -> bool {
        self.metrics.event();
        self.sink.process_events(&[Arc::from(event)]).await
    }

    /// Writes out what the batch backends still hold, for a graceful stop.
    pub async fn shutdown(&self) {
        self.sink.shutdown().await
    }
}
