//! Prometheus metrics: requests by verb, resource and code with latency
//! histograms, open watches, stored objects.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry as PromRegistry;

use crate::endpoints::handlers::WatchGauge;
use crate::registry::Registry;

// Label values are static strings and the code a number: counting a request
// allocates nothing (the label sets are looked up on every request).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    resource: &'static str,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    verb: &'static str,
    resource: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    resource: String,
}

type HistogramFamily = Family<LatencyLabels, Histogram, fn() -> Histogram>;

pub struct Metrics {
    registry: PromRegistry,
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily,
    watches: Family<ResourceLabels, Gauge>,
    objects: Family<ResourceLabels, Gauge>,
    /// Gauges computed at scrape time: (name, help, reader).
    computed: std::sync::Mutex<Vec<ComputedGauge>>,
}

type ComputedGauge = (String, String, Box<dyn Fn() -> f64 + Send + Sync>);

fn latency_histogram() -> Histogram {
    // 0.5 ms .. ~16 s
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = PromRegistry::with_prefix("farm_apiserver");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency: HistogramFamily = Family::new_with_constructor(latency_histogram);
        let watches = Family::<ResourceLabels, Gauge>::default();
        let objects = Family::<ResourceLabels, Gauge>::default();
        registry.register("requests", "API requests by verb, resource and HTTP code", requests.clone());
        registry.register(
            "request_duration_seconds",
            "Time to answer an API request (to the first byte for watches)",
            latency.clone(),
        );
        registry.register("open_watches", "Watch streams currently open", watches.clone());
        registry.register("stored_objects", "Objects currently stored", objects.clone());
        Self { registry, requests, latency, watches, objects, computed: std::sync::Mutex::new(Vec::new()) }
    }

    /// Registers a gauge whose value is read by `f` at every scrape.
    pub fn gauge_fn(&self, name: &str, help: &str, f: impl Fn() -> f64 + Send + Sync + 'static) {
        if let Ok(mut g) = self.computed.lock() {
            g.push((name.to_string(), help.to_string(), Box::new(f)));
        }
    }

    pub fn observe(&self, verb: &'static str, resource: &'static str, code: u16, elapsed: Duration) {
        self.requests.get_or_create(&RequestLabels { verb, resource, code }).inc();
        self.latency.get_or_create(&LatencyLabels { verb, resource }).observe(elapsed.as_secs_f64());
    }

    /// The Prometheus text exposition, with object counts read now.
    pub fn render(&self, registries: &[Arc<Registry>]) -> String {
        for r in registries {
            let labels = ResourceLabels { resource: r.kind.names().plural.to_string() };
            self.objects.get_or_create(&labels).set(r.store.len() as i64);
        }
        let mut out = String::new();
        if let Ok(computed) = self.computed.lock() {
            for (name, help, read) in computed.iter() {
                let v = read();
                let v = if v.is_finite() { v.to_string() } else { "+Inf".to_string() };
                out.push_str(&format!("# HELP farm_apiserver_{name} {help}.\n# TYPE farm_apiserver_{name} gauge\nfarm_apiserver_{name} {v}\n"));
            }
        }
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
