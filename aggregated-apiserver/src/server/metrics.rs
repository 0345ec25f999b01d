//! Prometheus metrics: requests by verb, resource and code with latency
//! histograms, open watches, stored objects, and the gauges the application
//! and the server compute at scrape time. Every name starts with the
//! application's name (`sample-apiserver` gives `sample_apiserver_requests_total`).

use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::registry::Registry as PromRegistry;

use crate::admission::metrics::AdmissionMetrics;
use crate::audit::metrics::AuditMetrics;
use crate::endpoints::handlers::WatchGauge;
use crate::filters::request_metrics::{RequestMetrics, RequestMetricsCollector};
use crate::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    resource: String,
}

pub struct Metrics {
    registry: PromRegistry,
    /// kube's own metric names, without the application's prefix (audit).
    kube: PromRegistry,
    audit: AuditMetrics,
    admission: Arc<AdmissionMetrics>,
    flow_control: Arc<crate::flowcontrol::metrics::FlowControlMetrics>,
    /// The registry's prefix, for the computed gauges written beside it.
    prefix: String,
    /// Requests by verb, resource and code, and their latencies.
    requests: Arc<RequestMetrics>,
    watches: Family<ResourceLabels, Gauge>,
    objects: Family<ResourceLabels, Gauge>,
    /// Gauges computed at scrape time: (name, help, reader).
    computed: std::sync::Mutex<Vec<ComputedGauge>>,
}

type ComputedGauge = (String, String, Box<dyn Fn() -> f64 + Send + Sync>);

/// The latency histogram's buckets: 0.5 ms .. ~16 s.
fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.0005, 2.0, 16)
}

/// A metric name prefix from the application's name: Prometheus names allow
/// letters, digits and `_` (`sample-apiserver` becomes `sample_apiserver`).
fn prefix_of(application: &str) -> String {
    application.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// A computed value as the text exposition writes it: `+Inf` (OpenMetrics'
/// spelling) for an infinity, else Rust's shortest decimal (`0`, `2.5`, never
/// an exponent).
fn sample_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        v.to_string()
    }
}

impl Metrics {
    /// The metrics of the application named `application` (see `prefix_of`).
    pub fn new(application: &str) -> Self {
        let prefix = prefix_of(application);
        let mut registry = PromRegistry::with_prefix(&prefix);
        let requests = Arc::new(RequestMetrics::new(latency_buckets()));
        let watches = Family::<ResourceLabels, Gauge>::default();
        let objects = Family::<ResourceLabels, Gauge>::default();
        registry.register_collector(Box::new(RequestMetricsCollector(requests.clone())));
        registry.register("open_watches", "Watch streams currently open", watches.clone());
        registry.register("stored_objects", "Objects currently stored", objects.clone());
        let mut kube = PromRegistry::default();
        let audit = AuditMetrics::default();
        audit.register(&mut kube);
        let admission = Arc::new(AdmissionMetrics::default());
        admission.register(&mut kube);
        let flow_control = Arc::new(crate::flowcontrol::metrics::FlowControlMetrics::default());
        flow_control.register(&mut kube);
        Self {
            registry,
            kube,
            audit,
            admission,
            flow_control,
            prefix,
            requests,
            watches,
            objects,
            computed: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The admission metrics (`apiserver_admission_*`, `apiserver_validating_admission_policy_*`).
    pub fn admission(&self) -> Arc<AdmissionMetrics> {
        self.admission.clone()
    }

    /// API Priority and Fairness's metrics (`apiserver_flowcontrol_*`).
    pub fn flow_control(&self) -> Arc<crate::flowcontrol::metrics::FlowControlMetrics> {
        self.flow_control.clone()
    }

    /// The audit counters (`apiserver_audit_*`).
    pub fn audit(&self) -> &AuditMetrics {
        &self.audit
    }

    /// Registers a gauge whose value is read by `f` at every scrape.
    pub fn gauge_fn(&self, name: &str, help: &str, f: impl Fn() -> f64 + Send + Sync + 'static) {
        if let Ok(mut g) = self.computed.lock() {
            g.push((name.to_string(), help.to_string(), Box::new(f)));
        }
    }

    /// The request counters and latencies, which the observe filter fills.
    pub fn requests(&self) -> Arc<RequestMetrics> {
        self.requests.clone()
    }

    /// The Prometheus text exposition, with object counts read now.
    pub fn render(&self, registries: &[Arc<Registry>]) -> String {
        for r in registries {
            let labels = ResourceLabels { resource: r.kind.names().plural.to_string() };
            self.objects.get_or_create(&labels).set(r.store.len() as i64);
        }
        // The computed gauges are written here rather than through
        // prometheus-client (a Collector yielding ConstGauges), because its text
        // encoder formats every f64 with dtoa: a cache that never synced would
        // read `inf` where OpenMetrics (and this exposition) says `+Inf`, a healthy
        // one `0.0` where this says `0` (what a scraper matching
        // `..._staleness_seconds 0` expects), and 1e-7 `1e-7`. Names, help and type lines
        // follow the registry's own format (prefix, help ending in a period).
        let mut out = String::new();
        if let Ok(computed) = self.computed.lock() {
            let prefix = &self.prefix;
            for (name, help, read) in computed.iter() {
                let v = sample_value(read());
                out.push_str(&format!(
                    "# HELP {prefix}_{name} {help}.\n# TYPE {prefix}_{name} gauge\n{prefix}_{name} {v}\n"
                ));
            }
        }
        let mut kube = String::new();
        if let Err(e) = encode(&mut kube, &self.kube) {
            tracing::warn!(error = %e, "encoding metrics");
        }
        out.push_str(kube.strip_suffix("# EOF\n").unwrap_or(&kube));
        let mut registered = String::new();
        if let Err(e) = encode(&mut registered, &self.registry) {
            tracing::warn!(error = %e, "encoding metrics");
        }
        // The registry's text ends with "# EOF", which must stay last.
        out + &registered
    }
}

impl WatchGauge for Metrics {
    fn opened(&self, resource: &'static str) {
        self.watches.get_or_create(&ResourceLabels { resource: resource.into() }).inc();
    }

    fn closed(&self, resource: &'static str) {
        self.watches.get_or_create(&ResourceLabels { resource: resource.into() }).dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_start_with_the_application_and_computed_values_read_as_before() {
        assert_eq!(prefix_of("sample-apiserver"), "sample_apiserver");
        assert_eq!(prefix_of("my.app-server"), "my_app_server");
        let metrics = Metrics::new("sample-apiserver");
        metrics.requests().observe("create", "widgets", 201, 0.003);
        metrics.gauge_fn("staleness_seconds", "How stale", || 0.0);
        metrics.gauge_fn("never_synced_seconds", "Forever", || f64::INFINITY);
        metrics.gauge_fn("lag_seconds", "Some lag", || 2.5);
        let text = metrics.render(&[]);
        for line in [
            "# HELP sample_apiserver_staleness_seconds How stale.\n# TYPE sample_apiserver_staleness_seconds gauge\nsample_apiserver_staleness_seconds 0\n",
            "sample_apiserver_never_synced_seconds +Inf\n",
            "sample_apiserver_lag_seconds 2.5\n",
            "sample_apiserver_requests_total{verb=\"create\",resource=\"widgets\",code=\"201\"} 1\n",
            "# TYPE sample_apiserver_request_duration_seconds histogram\n",
            "# TYPE apiserver_audit_event counter\napiserver_audit_event_total 0\n",
        ] {
            assert!(text.contains(line), "{line:?} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    }
}
