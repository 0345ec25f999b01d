//! OpenTelemetry traces, as k8s.io/apiserver makes them: one server span per
//! request, named as kube names it (`GET
//! /apis/<group>/<version>/namespaces/{:namespace}/<resource>/{:name}`),
//! child spans for the work that leaves the process (admission webhook calls,
//! etcd writes), W3C trace context (`traceparent`, `tracestate`, `baggage`)
//! read from requests and sent to webhooks, and the spans exported over OTLP
//! gRPC in batches.
//!
//! As kube-apiserver since 1.33, a request's trace context is continued only
//! when its user is in `system:masters` or `system:monitoring`; anyone else's
//! request starts a trace of its own, linked to the one it came with, so an
//! unprivileged caller can neither force sampling nor graft spans onto
//! another trace. Behind the aggregator the user is the one it forwards.
//!
//! The request's span travels with its future as OpenTelemetry's current
//! [`Context`] ([`FutureExt::with_context`]); [`child`] finds it there, and
//! finds nothing, at the cost of a thread-local read, when the server does
//! not trace or the request is not sampled.

pub mod config;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use http::HeaderMap;
use opentelemetry::propagation::{Extractor, Injector, TextMapCompositePropagator, TextMapPropagator};
use opentelemetry::trace::{Link, SpanKind, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;

pub use config::{Endpoint, TracingConfig, TracingOptions};
pub use opentelemetry::trace::FutureExt;

/// The groups whose requests' trace context is trusted (kube's
/// `SystemPrivilegedGroup` and `MonitoringGroup`).
const TRUSTED_GROUPS: [&str; 2] = ["system:masters", "system:monitoring"];

/// The W3C header that carries a trace's and its parent span's IDs.
const TRACEPARENT: &str = "traceparent";

/// How long the spans still buffered at exit may take to reach the collector.
const FLUSH_AT_EXIT: Duration = Duration::from_secs(5);

/// The server's tracer, and how it reads and writes trace context.
pub struct Tracing {
    /// Of the traces this server starts, the sampled fraction.
    sampling_ratio: f64,
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    propagator: TextMapCompositePropagator,
}

/// The tracer, as a value of a request's [`Context`]: how [`child`] makes
/// spans without a global.
#[derive(Clone)]
struct Active(Arc<Tracing>);

impl Tracing {
    /// The tracer of `config`, exporting as `service` (the application's
    /// name) from this host. Called within the Tokio runtime, which carries
    /// the exporter's connection.
    pub fn start(config: &TracingConfig, service: &str) -> anyhow::Result<Arc<Self>> {
        let channel = channel(&config.endpoint)?;
        let exporter = SpanExporter::builder()
            .with_tonic()
            .with_channel(channel)
            .with_timeout(Duration::from_secs(10))
            .build()
            .context("building the OTLP span exporter")?;
        let instance = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| service.to_string());
        let resource = Resource::builder()
            .with_service_name(service.to_string())
            .with_attributes([KeyValue::new("service.instance.id", instance)])
            .build();
        // kube's sampler: a trusted parent's decision, else the configured
        // fraction of the traces this server starts.
        let provider = SdkTracerProvider::builder()
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(config.sampling_ratio))))
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("aggregated-apiserver");
        let propagator = TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ]);
        Ok(Arc::new(Self { sampling_ratio: config.sampling_ratio, provider, tracer, propagator }))
    }

    /// Sends what is still buffered, for a while, and stops exporting.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown_with_timeout(FLUSH_AT_EXIT) {
            tracing::warn!(error = %e, "spans buffered at exit were not all exported");
        }
    }

    /// Whether a request may be sampled at all: never when this server
    /// samples none of the traces it starts and no trusted caller sent one.
    /// Decides, before anything is built, for most requests of a server that
    /// traces only what its callers sample.
    pub fn may_sample(&self, headers: &HeaderMap, trusted: bool) -> bool {
        self.sampling_ratio > 0.0 || (trusted && headers.contains_key(TRACEPARENT))
    }

    /// The server span of a request: a child of the trace context in
    /// `headers` when `trusted`, else the root of a new trace linked to it.
    /// The context returned carries the span and the tracer, for the
    /// request's future ([`FutureExt::with_context`]).
    pub fn request_span(
        self: &Arc<Self>,
        headers: &HeaderMap,
        trusted: bool,
        name: String,
        attributes: Vec<KeyValue>,
    ) -> Context {
        let sent = self.propagator.extract(&HeaderExtractor(headers));
        let builder = self.tracer.span_builder(name).with_kind(SpanKind::Server).with_attributes(attributes);
        let remote = sent.span().span_context().clone();
        let span = if trusted || !remote.is_valid() {
            self.tracer.build_with_context(builder, &sent)
        } else {
            let link = Link::with_context(remote);
            self.tracer.build_with_context(builder.with_links(vec![link]), &Context::new())
        };
        // Baggage travels on whichever way the span went.
        sent.with_span(span).with_value(Active(self.clone()))
    }
}

/// Whether a user's trace context is continued (kube's
/// `notSystemPrivilegedGroup`, inverted).
pub fn trusts(groups: &[String]) -> bool {
    groups.iter().any(|g| TRUSTED_GROUPS.contains(&g.as_str()))
}

/// A child of the current span for work within a request, as a context to
/// run that work in; None when nothing is recorded (no tracing, or a request
/// not sampled), so that `attributes` is only built for a recorded span.
pub fn child(name: &'static str, kind: SpanKind, attributes: impl FnOnce() -> Vec<KeyValue>) -> Option<Context> {
    let current = Context::current();
    if !current.span().is_recording() {
        return None;
    }
    let active = current.get::<Active>()?.clone();
    let builder = active.0.tracer.span_builder(name).with_kind(kind).with_attributes(attributes());
    let span = active.0.tracer.build_with_context(builder, &current);
    Some(current.with_span(span))
}

/// Runs `work` within `span`, when there is one (see [`child`]).
pub async fn run_in<F: std::future::Future>(span: &Option<Context>, work: F) -> F::Output {
    match span {
        Some(cx) => work.with_context(cx.clone()).await,
        None => work.await,
    }
}

/// Ends `span`, as failed for `error` when there is one.
pub fn end(span: Option<Context>, error: Option<&str>) {
    if let Some(cx) = span {
        let span = cx.span();
        if let Some(why) = error {
            span.set_status(opentelemetry::trace::Status::error(why.to_string()));
        }
        span.end();
    }
}

/// Headers that carry `cx`'s trace context to the server a request goes to
/// (`traceparent`, `tracestate`, `baggage`).
pub fn headers_for(cx: &Context) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(active) = cx.get::<Active>() {
        active.0.propagator.inject_context(cx, &mut HeaderInjector(&mut headers));
    }
    headers
}

/// A gRPC channel to the collector, connected when the first batch goes.
fn channel(endpoint: &Endpoint) -> anyhow::Result<tonic::transport::Channel> {
    match endpoint {
        Endpoint::Tcp(address) => {
            let uri = format!("http://{address}");
            let endpoint = tonic::transport::Endpoint::from_shared(uri.clone())
                .map_err(|e| anyhow::anyhow!("the collector's address {uri}: {e}"))?;
            Ok(endpoint.connect_lazy())
        }
        Endpoint::Unix(path) => {
            let path = path.clone();
            // The URI is unused: every connection dials the socket.
            let connector = tower::service_fn(move |_: http::Uri| {
                let path = path.clone();
                async move { tokio::net::UnixStream::connect(path).await.map(hyper_util::rt::TokioIo::new) }
            });
            Ok(tonic::transport::Endpoint::from_static("http://localhost").connect_with_connector_lazy(connector))
        }
    }
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (http::HeaderName::try_from(key), http::HeaderValue::try_from(value)) {
            self.0.insert(name, value);
        }
    }
}
