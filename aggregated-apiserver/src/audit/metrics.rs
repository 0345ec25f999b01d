//! kube's audit metrics (k8s.io/apiserver `pkg/audit/metrics.go`), under
//! kube's names (`apiserver_audit_*`, not the application's prefix: they are
//! what dashboards and alerts for any apiserver already read), and kube's
//! `HandlePluginError`: a failure is counted per plugin and logged with the
//! events it cost.

use std::fmt::Display;
use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::encode::EventRef;
use super::event::{Event, Level};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LevelLabels {
    level: &'static str,
}

/// The events a failure cost, as the backend held them.
pub enum Impacted<'a> {
    Events(&'a [Arc<Event>]),
    Event(&'a EventRef<'a>),
    /// Encoded lines (a batch's): logged as they are.
    Lines {
        lines: &'a [u8],
        count: usize,
    },
}

/// Most impacted events named in one error log line.
const MAX_EVENTS_LOGGED: usize = 10;

#[derive(Clone, Default)]
pub struct AuditMetrics {
    events: Counter,
    errors: Family<PluginLabels, Counter>,
    levels: Family<LevelLabels, Counter>,
    /// Each level's counter of `levels`, kept once a request first had that
    /// level: counted without the family's lock and hashed lookup (a series
    /// still appears only once counted, as kube's).
    level_counters: Arc<[OnceLock<Counter>; 4]>,
    rejected: Counter,
}

impl AuditMetrics {
    /// Registers the counters, unprefixed, in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "apiserver_audit_event",
            "Counter of audit events generated and sent to the audit backend",
            self.events.clone(),
        );
        registry.register(
            "apiserver_audit_error",
            "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error",
            self.errors.clone(),
        );
        registry.register(
            "apiserver_audit_level",
            "Counter of policy levels for audit events (1 per request)",
            self.levels.clone(),
        );
        registry.register(
            "apiserver_audit_requests_rejected",
            "Counter of apiserver requests rejected due to an error in audit logging backend",
            self.rejected.clone(),
        );
    }

    /// An event handed to the backends.
    pub fn event(&self) {
        self.events.inc();
    }

    /// The level the policy chose for a request.
    pub fn level(&self, level: Level) {
        let index = match level {
            Level::None => 0,
            Level::Metadata => 1,
            Level::Request => 2,
            Level::RequestResponse => 3,
        };
        self.level_counters[index]
            .get_or_init(|| self.levels.get_or_create(&LevelLabels { level: level.as_str() }).clone())
            .inc();
    }

    /// A request refused because its event could not be written (blocking-strict).
    pub fn rejected(&self) {
        self.rejected.inc();
    }

    /// `plugin` could not audit `impacted`: counted and logged.
    pub fn plugin_error(&self, plugin: &'static str, error: &dyn Display, impacted: Impacted<'_>) {
        let (count, shown) = match impacted {
            Impacted::Events(events) => {
                (events.len(), events.iter().take(MAX_EVENTS_LOGGED).map(|e| e.legacy_line()).collect())
            }
            Impacted::Event(event) => (1, vec![event.legacy_line()]),
            Impacted::Lines { lines, count } => (
                count,
                lines
                    .split(|b| *b == b'\n')
                    .filter(|l| !l.is_empty())
                    .take(MAX_EVENTS_LOGGED)
                    .map(|l| String::from_utf8_lossy(l).into_owned())
                    .collect::<Vec<_>>(),
            ),
        };
        self.errors.get_or_create(&PluginLabels { plugin }).inc_by(count as u64);
        tracing::error!(
            plugin,
            events = count,
            %error,
            impacted = %shown.join("\n"),
            "error in audit plugin '{plugin}' affecting {count} audit events"
        );
    }

    #[cfg(test)]
    pub fn errors_of(&self, plugin: &'static str) -> u64 {
        self.errors.get_or_create(&PluginLabels { plugin }).get()
    }
}
