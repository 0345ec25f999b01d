//! A real tracing backend: Jaeger (`scripts/jaeger` builds and caches it,
//! pinned by tools/jaeger/go.mod), run with in-memory storage, an OTLP gRPC
//! receiver (what kube-apiserver and farm-apiserver export to) and its query
//! API, each on a free loopback port of its own. The tests read traces back
//! through that API, as a person would through Jaeger's UI. Nothing skips: a
//! failed build or start fails the test with its output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::free_port;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The path of the Jaeger binary, built by `scripts/jaeger --print-path` when
/// missing or out of date (minutes when cold, so at most once per process).
pub fn jaeger_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let started = Instant::now();
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/jaeger"))
            .arg("--print-path")
            .output()
            .expect("run scripts/jaeger --print-path");
        assert!(
            out.status.success(),
            "building Jaeger (scripts/jaeger) failed ({:?}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        if started.elapsed() > Duration::from_secs(5) {
            eprintln!("built Jaeger in {:?}", started.elapsed());
        }
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// A span as Jaeger's query API answers it, its IDs in lowercase hex.
#[derive(Debug, Clone)]
pub struct Span {
    /// The sender's `service.name` (the span's process).
    pub service: String,
    /// Jaeger's operation name: the span's name.
    pub name: String,
    pub span_id: String,
    /// The span its `CHILD_OF` reference names; empty for a root span.
    pub parent_span_id: String,
    /// The span's attributes, and what Jaeger derives from the span itself
    /// (`span.kind`: `server`, `client`, ...; `otel.status_code`).
    pub tags: BTreeMap<String, String>,
}

impl Span {
    /// The first of `spans` sent by `service` with this name.
    pub fn named<'a>(spans: &'a [Span], service: &str, name: &str) -> Option<&'a Span> {
        spans.iter().find(|s| s.service == service && s.name == name)
    }
}

/// A running Jaeger, stopped when dropped.
pub struct Jaeger {
    child: Child,
    /// Held open: Jaeger stops when it closes, so it dies with the test
    /// process whatever way that ends (or when dropped).
    stdin: Option<ChildStdin>,
    dir: tempfile::TempDir,
    /// Jaeger's OTLP gRPC receiver: a TracingConfiguration's `endpoint`.
    pub otlp_port: u16,
    /// Jaeger's query HTTP API (and UI).
    pub query_port: u16,
    client: reqwest::Client,
}

impl Jaeger {
    /// Builds (when needed) and starts Jaeger, and waits until it receives
    /// OTLP and answers queries.
    pub async fn start() -> Jaeger {
        let bin = jaeger_bin();
        // A port found free can be bound by another process before Jaeger
        // binds it (tests start servers side by side), so a Jaeger that could
        // not bind is started again on other ports.
        const ATTEMPTS: u32 = 5;
        for attempt in 1.. {
            let mut jaeger = Self::spawn(bin);
            match jaeger.wait_ready(Duration::from_secs(60)).await {
                Ok(()) => return jaeger,
                Err(log) if attempt < ATTEMPTS && log.contains("address already in use") => continue,
                Err(log) => panic!("{log}"),
            }
        }
        unreachable!("the loop returns or panics")
    }

    /// Starts `bin` on free ports with its configuration and log in a
    /// directory of its own.
    fn spawn(bin: &Path) -> Jaeger {
        let dir = tempfile::Builder::new().prefix("farm-jaeger-").tempdir().expect("tempdir");
        let (otlp_port, query_port, query_grpc_port) = (free_port(), free_port(), free_port());
        // Jaeger v2's all-in-one (cmd/jaeger/internal/all-in-one.yaml), cut
        // to what the tests use: nothing listens but these three ports, spans
        // are stored as they arrive (no batch processor to wait for), and the
        // query extension does not trace itself (it would export to
        // localhost:4317, and wait 10 s at exit for that export to fail).
        let config = format!(
            r#"service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      memory_store:
        memory:
          max_traces: 100000
  jaeger_query:
    enable_tracing: false
    storage:
      traces: memory_store
    http:
      endpoint: 127.0.0.1:{query_port}
    grpc:
      endpoint: 127.0.0.1:{query_grpc_port}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{otlp_port}
exporters:
  jaeger_storage_exporter:
    trace_storage: memory_store
"#
        );
        let config_file = dir.path().join("jaeger.yaml");
        std::fs::write(&config_file, config).expect("write jaeger.yaml");
        let log = std::fs::File::create(dir.path().join("jaeger.log")).expect("jaeger log file");
        // A watcher subshell stops Jaeger when our end of its stdin closes.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec 3<&0; "$@" </dev/null & child=$!; (cat <&3 >/dev/null; kill $child) & wait $child"#)
            .arg("sh")
            .arg(bin)
            .arg("--config")
            .arg(&config_file)
            .stdin(Stdio::piped())
            .stdout(log.try_clone().expect("jaeger log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let stdin = child.stdin.take();
        let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("HTTP client");
        Jaeger { child, stdin, dir, otlp_port, query_port, client }
    }

    /// Waits until the OTLP receiver accepts connections and the query API
    /// answers; on an early exit or the timeout, the reason and Jaeger's log.
    async fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("Jaeger exited early ({status}):\n{}", self.log()));
            }
            let receiving = tokio::net::TcpStream::connect(("127.0.0.1", self.otlp_port)).await.is_ok();
            if receiving {
                let services = self.client.get(self.url("/api/services")).send().await;
                if services.is_ok_and(|r| r.status().is_success()) {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(format!("Jaeger did not become ready within {timeout:?}:\n{}", self.log()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("jaeger.log")).unwrap_or_default()
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.query_port)
    }

    /// The OTLP endpoint as a TracingConfiguration names it.
    pub fn otlp_endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.otlp_port)
    }

    /// The spans Jaeger holds of trace `trace_id` (`/api/traces/{id}`), none
    /// while it knows no such trace.
    pub async fn trace(&self, trace_id: &str) -> Vec<Span> {
        let url = self.url(&format!("/api/traces/{trace_id}"));
        let answer = self.client.get(&url).send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let status = answer.status();
        let body: Value = answer.json().await.unwrap_or_else(|e| panic!("GET {url} answered no JSON: {e}"));
        if status == reqwest::StatusCode::NOT_FOUND {
            return Vec::new();
        }
        assert!(status.is_success(), "GET {url} answered {status}: {body}");
        let traces = body["data"].as_array().cloned().unwrap_or_default();
        traces.iter().flat_map(spans_of).collect()
    }

    /// The spans of `trace_id`, once `done` says they are all there
    /// (exporters send in batches, every few seconds).
    pub async fn wait_for(&self, what: &str, trace_id: &str, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let spans = self.trace(trace_id).await;
            if done(&spans) {
                return spans;
            }
            assert!(Instant::now() < deadline, "Jaeger never held {what} in trace {trace_id}: {spans:#?}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// The spans of one trace of the query API's JSON: each span names its
/// process, the processes name their service.
fn spans_of(trace: &Value) -> Vec<Span> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let spans = trace["spans"].as_array().cloned().unwrap_or_default();
    spans
        .iter()
        .map(|span| {
            let process = span["processID"].as_str().unwrap_or_default();
            let parent = span["references"]
                .as_array()
                .and_then(|refs| refs.iter().find(|r| r["refType"] == "CHILD_OF").map(|r| text(&r["spanID"])));
            let tags = span["tags"].as_array().cloned().unwrap_or_default();
            Span {
                service: text(&trace["processes"][process]["serviceName"]),
                name: text(&span["operationName"]),
                span_id: text(&span["spanID"]),
                parent_span_id: parent.unwrap_or_default(),
                tags: tags.iter().map(|t| (text(&t["key"]), text(&t["value"]))).collect(),
            }
        })
        .collect()
}

impl Drop for Jaeger {
    fn drop(&mut self) {
        // Closing its stdin stops Jaeger; the shell waits for it to exit.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.child.try_wait(), Ok(None)) {
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
