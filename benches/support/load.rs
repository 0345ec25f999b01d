//! The load generator and its targets, shared by the benchmarks that compare
//! request rates side by side (`speed`, `audit`): keep-alive HTTP/1.1 TLS
//! connections driven by one client thread, like `wrk -t1`, each target's
//! serving process's CPU read from /proc, and the control plane's side
//! (a bearer token, farm-apiserver started on it, waiting until a target serves).

// Each benchmark uses its part of these.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::json;

use crate::common::cluster::{self, ControlPlane};
use crate::common::{Options, Server};
use crate::cpu::{CpuClock, CpuSpent};

/// The service account whose token every request carries.
pub const SERVICE_ACCOUNT: &str = "speed-bench";

/// How long each target is measured in a case.
pub struct Pace {
    /// Seconds measured per case and target.
    pub seconds: f64,
    /// Rounds each case is split into, alternating between the targets.
    pub rounds: usize,
    /// Keep-alive connections of the load generator.
    pub connections: usize,
}

// ---------------------------------------------------------------- targets and the client

/// Where requests go and with what credential.
#[derive(Clone)]
pub struct Target {
    /// Short key, unique: names of created objects and namespaces carry it.
    pub key: &'static str,
    pub name: &'static str,
    pub addr: SocketAddr,
    pub tls: Arc<rustls::ClientConfig>,
    pub token: Option<Arc<str>>,
    /// `/apis/<group>/<version>` of the Llamas it serves.
    pub group_path: String,
    pub api_version: &'static str,
    /// The process doing the serving (its CPU is counted as the server's).
    pub pid: u32,
}

impl Target {
    pub fn collection(&self, ns: &str) -> String {
        format!("{}/namespaces/{ns}/llamas", self.group_path)
    }
}

/// A client TLS configuration trusting `ca_pem`, offering only HTTP/1.1.
pub fn client_tls(ca_pem: &[u8]) -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &ca_pem[..]) {
        roots.add(cert.context("CA certificate")?).context("adding the CA")?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

pub type Sender = SendRequest<Full<Bytes>>;

/// One keep-alive HTTP/1.1 connection over TLS; its connection task runs on
/// the current runtime.
pub async fn connect(t: &Target) -> Result<Sender> {
    let tcp = tokio::net::TcpStream::connect(t.addr).await.with_context(|| format!("connecting to {}", t.name))?;
    tcp.set_nodelay(true)?;
    let name = ServerName::from(t.addr.ip());
    let tls = tokio_rustls::TlsConnector::from(t.tls.clone()).connect(name, tcp).await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// What a load run sends.
#[derive(Clone)]
pub enum Op {
    Get(String),
    /// POST of a new Llama into this collection, named `<prefix>-<i>`.
    Create {
        collection: String,
        prefix: String,
    },
}

/// A Llama's body in `api_version` (v1beta1's field names, else v1alpha's).
pub fn llama_body(api_version: &str, name: &str, i: u64) -> Bytes {
    let weight = 10.0 + (i % 1000) as f64 * 0.25;
    let spec = match api_version.ends_with("/v1beta1") {
        true => json!({"weightKg": weight, "heightM": 1.5, "pasture": "north"}),
        false => json!({"weight": weight, "height": 1.5}),
    };
    let body = json!({
        "apiVersion": api_version,
        "kind": "Llama",
        "metadata": {"name": name, "labels": {"bench": "speed"}},
        "spec": spec,
    });
    Bytes::from(body.to_string())
}

pub fn request(t: &Target, op: &Op, i: u64) -> Result<http::Request<Full<Bytes>>> {
    let (method, path, body) = match op {
        Op::Get(path) => (http::Method::GET, path.clone(), Bytes::new()),
        Op::Create { collection, prefix } => {
            (http::Method::POST, collection.clone(), llama_body(t.api_version, &format!("{prefix}-{i}"), i))
        }
    };
    let mut builder = http::Request::builder()
        .method(method.clone())
        .uri(path)
        .header(http::header::HOST, t.addr.to_string())
        .header(http::header::ACCEPT, "application/json");
    if method == http::Method::POST {
        builder = builder.header(http::header::CONTENT_TYPE, "application/json");
    }
    if let Some(token) = &t.token {
        builder = builder.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    Ok(builder.body(Full::new(body))?)
}

/// Sends one request and reads the whole answer; anything but 2xx is an error.
pub async fn exchange(sender: &mut Sender, req: http::Request<Full<Bytes>>) -> Result<Bytes> {
    let what = format!("{} {}", req.method(), req.uri());
    sender.ready().await.with_context(|| what.clone())?;
    let resp = sender.send_request(req).await.with_context(|| what.clone())?;
    let status = resp.status();
    let body = resp.into_body().collect().await.with_context(|| what.clone())?.to_bytes();
    if !status.is_success() {
        bail!("{what}: {status}: {}", String::from_utf8_lossy(&body[..body.len().min(500)]));
    }
    Ok(body)
}

/// How long a load run goes on.
#[derive(Clone, Copy)]
pub enum Stop {
    /// This many requests in all, none of them a warm-up.
    Count(u64),
    /// A warm-up, then this long measured.
    For { warmup: Duration, measured: Duration },
}

/// What one load run measured.
#[derive(Default)]
pub struct Run {
    pub samples: Vec<Duration>,
    pub wall: Duration,
    pub cpu: CpuSpent,
    pub bytes: usize,
}

impl Run {
    pub fn absorb(&mut self, other: Run) {
        self.samples.extend(other.samples);
        self.wall += other.wall;
        let c = &mut self.cpu;
        c.server += other.cpu.server;
        c.client += other.cpu.client;
        c.others += other.cpu.others;
        c.steal += other.cpu.steal;
        self.bytes = self.bytes.max(other.bytes);
    }

    pub fn sorted(&self) -> Vec<Duration> {
        let mut s = self.samples.clone();
        s.sort();
        s
    }

    pub fn pct(&self, p: f64) -> Duration {
        let s = self.sorted();
        if s.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
        s[rank.clamp(1, s.len()) - 1]
    }

    pub fn rate(&self) -> f64 {
        self.samples.len() as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// Milliseconds of the serving process's CPU per request.
    pub fn server_ms(&self) -> f64 {
        self.cpu.server.as_secs_f64() * 1000.0 / self.samples.len().max(1) as f64
    }

    pub fn client_ms(&self) -> f64 {
        self.cpu.client.as_secs_f64() * 1000.0 / self.samples.len().max(1) as f64
    }
}

/// Runs `op` against `t` on `connections` keep-alive connections, all driven
/// by one new thread (a current-thread runtime): the load generator.
pub async fn load(t: &Target, op: &Op, connections: usize, stop: Stop) -> Result<Run> {
    let (t, op) = (t.clone(), op.clone());
    tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(load_here(&t, &op, connections, stop))
    })
    .await
    .context("the load thread panicked")?
}

pub async fn load_here(t: &Target, op: &Op, connections: usize, stop: Stop) -> Result<Run> {
    let mut senders = Vec::with_capacity(connections);
    for _ in 0..connections {
        senders.push(connect(t).await?);
    }
    let counter = Arc::new(AtomicU64::new(0));
    let now = Instant::now();
    let (measure_from, end, limit) = match stop {
        Stop::Count(n) => (now, None, Some(n)),
        Stop::For { warmup, measured } => (now + warmup, Some(now + warmup + measured), None),
    };
    let mut tasks = tokio::task::JoinSet::new();
    for mut sender in senders {
        let (t, op, counter) = (t.clone(), op.clone(), counter.clone());
        tasks.spawn(async move {
            let mut samples = Vec::new();
            let mut bytes = 0;
            loop {
                let started = Instant::now();
                if end.is_some_and(|end| started >= end) {
                    break;
                }
                let i = counter.fetch_add(1, Ordering::Relaxed);
                if limit.is_some_and(|n| i >= n) {
                    break;
                }
                let body = exchange(&mut sender, request(&t, &op, i)?).await?;
                if started >= measure_from {
                    samples.push(started.elapsed());
                    bytes = body.len();
                }
            }
            Ok::<_, anyhow::Error>((samples, bytes))
        });
    }
    // The CPU counters are read when measuring starts (after the warm-up).
    if measure_from > Instant::now() {
        tokio::time::sleep_until(measure_from.into()).await;
    }
    let clock = CpuClock::now(t.pid);
    let mut run = Run::default();
    while let Some(joined) = tasks.join_next().await {
        let (samples, bytes) = joined.context("a connection task panicked")??;
        run.samples.extend(samples);
        run.bytes = run.bytes.max(bytes);
    }
    let finished = Instant::now();
    run.wall = finished.saturating_duration_since(measure_from);
    run.cpu = CpuClock::now(t.pid).since(&clock);
    Ok(run)
}

// ---------------------------------------------------------------- the control plane side

pub fn kubectl_ok(cp: &ControlPlane, args: &[&str]) -> Result<String> {
    let (ok, out, err) = cp.kubectl(args);
    if !ok && !err.contains("AlreadyExists") && !err.contains("already exists") {
        bail!("kubectl {}: {err}", args.join(" "));
    }
    Ok(out)
}

/// A service account bound to cluster-admin, and a bearer token for it.
pub fn bench_token(cp: &ControlPlane) -> Result<String> {
    kubectl_ok(cp, &["create", "serviceaccount", SERVICE_ACCOUNT, "-n", "default"])?;
    let subject = format!("--serviceaccount=default:{SERVICE_ACCOUNT}");
    kubectl_ok(cp, &["create", "clusterrolebinding", SERVICE_ACCOUNT, "--clusterrole=cluster-admin", &subject])?;
    let token = kubectl_ok(cp, &["create", "token", SERVICE_ACCOUNT, "-n", "default", "--duration", "2h"])?;
    let token = token.trim().to_string();
    if token.is_empty() {
        bail!("kubectl create token printed nothing");
    }
    Ok(token)
}

pub fn cp_addr(cp: &ControlPlane) -> Result<SocketAddr> {
    let hostport = cp.server.strip_prefix("https://").ok_or_else(|| anyhow!("server {}", cp.server))?;
    Ok(hostport.trim_end_matches('/').parse()?)
}

pub fn cp_file(cp: &ControlPlane, key: &str) -> Result<Vec<u8>> {
    let path = cp.info[key].as_str().ok_or_else(|| anyhow!("{key} in {}", cp.info))?;
    std::fs::read(path).with_context(|| format!("reading {path}"))
}

/// A farm-apiserver on the control plane with delegated authentication, its
/// request log off (it would be part of what is measured): this build's, or
/// `program`.
pub async fn farm(
    cp: &ControlPlane,
    program: Option<&Path>,
    env: &[(String, String)],
    extra: &[String],
) -> Result<Server> {
    let mut args: Vec<String> = vec!["--authentication".into(), "delegated".into()];
    args.extend(extra.iter().cloned());
    Ok(Server::start_with(Options {
        args,
        kubeconfig: Some(cp.kubeconfig.clone()),
        // Not tied through a shell: the pid must be the server's own (CPU and RSS are read from it).
        log: Some("warn".into()),
        env: env.to_vec(),
        program: program.map(Path::to_path_buf),
        ..Default::default()
    })
    .await)
}

/// Registers `server` behind the control plane's aggregator, as the e2e
/// fixture does (`tests/common/cluster.rs` `register`).
pub async fn register(cp: &ControlPlane, server: &Server) -> Result<()> {
    use base64::Engine;
    let ca = std::fs::read(&server.ca_file)?;
    cp.apply(&cluster::registration_yaml(server.port, &base64::engine::general_purpose::STANDARD.encode(ca)));
    cluster::wait_available(cp, Duration::from_secs(60)).await;
    cluster::wait_served(cp, Duration::from_secs(60)).await;
    Ok(())
}

/// Waits until `t` serves its Llama collection (the CRD after install, or a
/// freshly registered APIService).
pub async fn wait_serving(t: &Target, ns: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let attempt = async {
            let mut s = connect(t).await?;
            exchange(&mut s, request(t, &Op::Get(t.collection(ns)), 0)?).await
        };
        match attempt.await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e.context(format!("{} does not serve Llamas", t.name))),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

// ---------------------------------------------------------------- the run

pub struct Row {
    pub case: &'static str,
    pub target: &'static str,
    pub run: Run,
}

/// Measures `op_of(target)` on every target for `cfg.seconds` each, in rounds
/// alternating between them.
pub async fn case(
    cfg: &Pace,
    case: &'static str,
    targets: &[&Target],
    op_of: impl Fn(&Target) -> Op,
) -> Result<Vec<Row>> {
    eprintln!("  {case}: {}", targets.iter().map(|t| t.name).collect::<Vec<_>>().join(", "));
    let measured = Duration::from_secs_f64(cfg.seconds / cfg.rounds as f64);
    let warmup = Duration::from_millis(300);
    let mut rows: Vec<Row> = targets.iter().map(|t| Row { case, target: t.name, run: Run::default() }).collect();
    for _ in 0..cfg.rounds {
        for (t, row) in targets.iter().zip(rows.iter_mut()) {
            row.run.absorb(load(t, &op_of(t), cfg.connections, Stop::For { warmup, measured }).await?);
        }
    }
    Ok(rows)
}

pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

pub fn find<'a>(rows: &'a [Row], case: &str, target: &str) -> Option<&'a Run> {
    rows.iter().find(|r| r.case == case && r.target == target).map(|r| &r.run)
}
