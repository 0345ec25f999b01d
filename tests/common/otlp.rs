//! An OpenTelemetry collector for the tests: an OTLP gRPC endpoint (what
//! kube-apiserver's exporter and farm-apiserver's send to) that keeps every
//! span it receives, named by the service that sent it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;

/// A span as received, its IDs in lowercase hex as `traceparent` writes them.
#[derive(Debug, Clone)]
pub struct Span {
    /// The sender's `service.name`.
    pub service: String,
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// OTLP's SpanKind: 2 server, 3 client.
    pub kind: i32,
    pub attributes: BTreeMap<String, String>,
    /// The (trace ID, span ID) of each linked span.
    pub links: Vec<(String, String)>,
}

impl Span {
    /// The first of `spans` sent by `service` with this name.
    pub fn named<'a>(spans: &'a [Span], service: &str, name: &str) -> Option<&'a Span> {
        spans.iter().find(|s| s.service == service && s.name == name)
    }
}

pub const SERVER: i32 = 2;
pub const CLIENT: i32 = 3;

/// The collector, serving on 127.0.0.1 until the test process ends.
pub struct Collector {
    pub port: u16,
    spans: Arc<Mutex<Vec<Span>>>,
}

#[derive(Default)]
struct Keeper(Arc<Mutex<Vec<Span>>>);

#[tonic::async_trait]
impl TraceService for Keeper {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut kept = self.0.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .as_ref()
                .and_then(|r| attributes(&r.attributes).remove("service.name"))
                .unwrap_or_default();
            for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
                kept.push(Span {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    kind: span.kind,
                    attributes: attributes(&span.attributes),
                    links: span.links.iter().map(|l| (hex(&l.trace_id), hex(&l.span_id))).collect(),
                });
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                Some(Value::IntValue(i)) => i.to_string(),
                Some(Value::BoolValue(b)) => b.to_string(),
                Some(Value::DoubleValue(d)) => d.to_string(),
                Some(other) => format!("{other:?}"),
                None => String::new(),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

impl Collector {
    pub fn start() -> Collector {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
        let router = tonic::service::Routes::new(TraceServiceServer::new(Keeper(spans.clone()))).into_axum_router();
        // Its own runtime: the collector outlives any one test's runtime.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, router).await.unwrap();
            });
        });
        Collector { port, spans }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// The spans of `trace_id`, once `done` says they are all there
    /// (exporters send in batches, every few seconds).
    pub async fn wait_for(&self, what: &str, trace_id: &str, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let spans: Vec<Span> = self.spans().into_iter().filter(|s| s.trace_id == trace_id).collect();
            if done(&spans) {
                return spans;
            }
            assert!(Instant::now() < deadline, "never received {what} in trace {trace_id}: {spans:#?}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}
