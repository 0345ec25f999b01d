//! Request speed, side by side in one run: farm-apiserver against
//! kube-apiserver serving the Llama CRD on the test control plane, and
//! against the physical limit of this stack, a minimal TLS server on the same
//! libraries (axum, hyper, rustls, tokio) answering a static body.
//!
//! ```sh
//! cargo bench --bench speed     # about 2 minutes after the build (the control plane built once, ~11 minutes cold)
//! ```
//!
//! Run it before landing a change on the request path; it prints markdown
//! tables and the ratios the README names, and never asserts timing. A failed
//! request fails the run.
//!
//! Targets, all release builds on loopback:
//!
//! * `minimal TLS server`: this benchmark's own binary started again as a
//!   child process (`SPEED_MINIMAL_SERVER`), on its own multi-thread tokio
//!   runtime: axum-server with rustls (ring, TLS 1.3 and 1.2, ALPN h2 and
//!   http/1.1, TCP_NODELAY, as farm-apiserver's listener), hyper's
//!   HTTP/1.1 and HTTP/2, an axum `Router` answering every request with the
//!   bytes of farm-apiserver's own answer to the GET (same size, same
//!   Content-Type); a second one with its answer to the LIST, the ceiling
//!   of any list's rate here. No authentication, no routing, no storage: the rate a
//!   server on this stack cannot beat on this machine.
//! * `kube-apiserver (CRD)`: the control plane's kube-apiserver serving the
//!   Llama CRD (`bench.farm.example.com`, the same two versions, v1beta1
//!   stored), on its etcd; its v1alpha converted by the tests' conversion
//!   webhook (`tests/common/crd.rs`: the same Rust conversions in this
//!   process, over HTTPS).
//! * `farm-apiserver direct`: release farm-apiserver, `--storage memory`,
//!   `--authentication delegated` against the control plane.
//! * `farm-apiserver via aggregator`: the same process, registered behind the
//!   control plane's kube-apiserver (Service + APIService, as the e2e tests),
//!   requests sent to kube-apiserver, which proxies them over HTTP/2.
//! * `farm-apiserver direct (etcd)`: a second farm-apiserver with
//!   `--storage etcd` on the control plane's own etcd (the one the CRD lives
//!   in), delegated authentication too.
//!
//! Every request carries the same credential: the bearer token of a service
//! account bound to `cluster-admin`. kube-apiserver verifies it itself (a
//! signed JWT); farm-apiserver asks kube-apiserver with a TokenReview and a
//! SubjectAccessReview, both cached (10 s), as a Deployment would run it. The
//! minimal server ignores it, but receives it: the limit of this stack is
//! that of the same exchange, the same bytes in (a kilobyte of them the
//! token's, which rustls decrypts and buffers) and the same bytes out.
//!
//! The client: hyper's HTTP/1.1 client connections over tokio-rustls (ALPN
//! http/1.1 only), `SPEED_CONNECTIONS` keep-alive connections each with one
//! request in flight (as wrk), all driven by ONE thread (a current-thread
//! tokio runtime), like `wrk -t1`. The load generator shares the machine's
//! cores with the servers, so the table shows where the CPU went: the
//! serving process's CPU per request is the number to compare when the
//! client is the bottleneck. Latency percentiles are of requests under that
//! load (closed loop), not of one request alone.
//!
//! Every case reads and writes v1beta1, the stored version, but one: GET one
//! Llama in v1alpha, the deprecated version, converted (by farm-apiserver
//! once per change, by kube-apiserver through the webhook per read).
//!
//! Cases: GET one Llama (no resourceVersion: the latest state), GET with
//! `resourceVersion=0` on the etcd store (the watch cache), LIST of 1,000
//! Llamas in one namespace, creates (POST, a new name each), and watch event
//! latency (sequential creates, each timed from just before it is sent to its
//! event arriving on a watch opened before). Throughput cases run
//! `SPEED_SECONDS` per target, split in `SPEED_ROUNDS` rounds alternating
//! between the targets (so outside load falls on all alike), each after a
//! short warm-up.
//!
//! | env | default | meaning |
//! | --- | --- | --- |
//! | `SPEED_SECONDS` | 4 | seconds measured per case and target |
//! | `SPEED_ROUNDS` | 2 | rounds each case is split into |
//! | `SPEED_CONNECTIONS` | 16 | keep-alive connections of the load generator |
//! | `SPEED_LLAMAS` | 1000 | Llamas in the listed namespace |
//! | `SPEED_WATCH_WRITES` | 200 | sequential writes timed to their watch event |
//! | `SPEED_CHARTS` | `docs/bench` | where the charts go (empty: none) |
//! | `SPEED_SERVER_ENV` | — | `KEY=VALUE,...` set on the farm-apiserver processes (e.g. `GLIBC_TUNABLES=...`, `LD_PRELOAD=...` to compare allocators) |
//! | `SPEED_COMPARE_ENV` | — | `KEY=VALUE,...`: a second farm-apiserver on memory with this environment, measured beside the first in every GET, LIST and create round, with its ratios to it (two runs differ by up to 15%; two processes of one binary in one run, by as much: weigh a smaller change with several processes of each) |
//! | `SPEED_COMPARE_BINARY` | — | the second farm-apiserver is this binary (another build, e.g. `main`'s, to weigh a change against), with `SPEED_COMPARE_ENV` if set |

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/load.rs"]
mod load;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/report.rs"]
mod report;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use common::cluster;
use cpu::CpuClock;
use http_body_util::BodyExt;
use load::{
    bench_token, case, client_tls, connect, cp_addr, cp_file, exchange, farm, find, load, ms, register, request,
    wait_serving, Op, Pace, Row, Run, Stop, Target,
};
use rustls::pki_types::CertificateDer;
use serde_json::Value;

// The stored (and preferred) version; GET_OLD reads the deprecated one.
const FARM_GROUP_VERSION: &str = "farm.example.com/v1beta1";
const CRD_GROUP: &str = "bench.farm.example.com";
const CRD_GROUP_VERSION: &str = "bench.farm.example.com/v1beta1";
const LIST_NS: &str = "speed-list";
const CREATE_NS: &str = "speed-create";
const MINIMAL_ENV: &str = "SPEED_MINIMAL_SERVER";

struct Config {
    pace: Pace,
    llamas: usize,
    watch_writes: usize,
    charts: Option<PathBuf>,
    server_env: Vec<(String, String)>,
    compare_env: Option<Vec<(String, String)>>,
    compare_binary: Option<PathBuf>,
}

impl Config {
    /// Whether a second farm-apiserver is measured beside the first.
    fn compares(&self) -> bool {
        self.compare_env.is_some() || self.compare_binary.is_some()
    }

    /// What the second farm-apiserver differs by, for the ratios' names.
    fn compared_by(&self) -> String {
        let mut by = Vec::new();
        if let Some(binary) = &self.compare_binary {
            by.push(binary.display().to_string());
        }
        if let Some(env) = &self.compare_env {
            by.push(format!("{env:?}"));
        }
        by.join(" ")
    }
}

/// `KEY=VALUE,...` from the variable `name`.
fn env_list(name: &str) -> Result<Vec<(String, String)>> {
    std::env::var(name)
        .unwrap_or_default()
        .split(',')
        .filter(|kv| !kv.trim().is_empty())
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                .ok_or_else(|| anyhow!("{name}: {kv:?} is not KEY=VALUE"))
        })
        .collect()
}

impl Config {
    fn from_env() -> Result<Config> {
        let server_env = env_list("SPEED_SERVER_ENV")?;
        let compare_env = std::env::var_os("SPEED_COMPARE_ENV").map(|_| env_list("SPEED_COMPARE_ENV")).transpose()?;
        let charts = match std::env::var("SPEED_CHARTS") {
            Ok(dir) if dir.is_empty() => None,
            Ok(dir) => Some(PathBuf::from(dir)),
            Err(_) => Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/bench")),
        };
        Ok(Config {
            pace: Pace {
                seconds: report::env_usize("SPEED_SECONDS", 4)?.max(1) as f64,
                rounds: report::env_usize("SPEED_ROUNDS", 2)?.max(1),
                connections: report::env_usize("SPEED_CONNECTIONS", 16)?.max(1),
            },
            llamas: report::env_usize("SPEED_LLAMAS", 1000)?.max(1),
            watch_writes: report::env_usize("SPEED_WATCH_WRITES", 200)?.max(1),
            charts,
            server_env,
            compare_env,
            compare_binary: std::env::var_os("SPEED_COMPARE_BINARY").map(PathBuf::from),
        })
    }
}

// ---------------------------------------------------------------- watch latency

/// Sequential creates on `t`, each timed from just before it is sent to its
/// ADDED event on a watch of the same collection opened before.
async fn watch_latency(t: &Target, writes: usize) -> Result<Run> {
    let ns = format!("speed-watch-{}", t.key);
    let collection = t.collection(&ns);
    let mut watch = connect(t).await?;
    let mut writer = connect(t).await?;
    let req = request(t, &Op::Get(format!("{collection}?watch=true&timeoutSeconds=600")), 0)?;
    watch.ready().await?;
    let resp = watch.send_request(req).await.context("opening the watch")?;
    if !resp.status().is_success() {
        bail!("{}: watch answered {}", t.name, resp.status());
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let mut body = resp.into_body();
    let reader = tokio::spawn(async move {
        let mut buf: Vec<u8> = Vec::new();
        while let Some(Ok(frame)) = body.frame().await {
            let Ok(data) = frame.into_data() else { continue };
            let at = Instant::now();
            buf.extend_from_slice(&data);
            while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=end).collect();
                let Ok(event) = serde_json::from_slice::<Value>(&line) else { continue };
                if let Some(name) = event["object"]["metadata"]["name"].as_str() {
                    if tx.send((name.to_string(), at)).is_err() {
                        return;
                    }
                }
            }
        }
    });
    let create = |i: u64| Op::Create { collection: collection.clone(), prefix: format!("w{i}") };
    let mut run = Run::default();
    let clock = CpuClock::now(t.pid);
    let started = Instant::now();
    // The first writes are a warm-up (and prove the watch is open).
    let warmup = 5;
    for i in 0..(writes + warmup) as u64 {
        let name = format!("w{i}-{i}");
        let sent = Instant::now();
        exchange(&mut writer, request(t, &create(i), i)?).await?;
        let arrived = loop {
            match tokio::time::timeout(Duration::from_secs(20), rx.recv()).await {
                Ok(Some((seen, at))) if seen == name => break at,
                Ok(Some(_)) => continue,
                Ok(None) => bail!("{}: the watch ended before {name} arrived", t.name),
                Err(_) => bail!("{}: no event for {name} within 20 s", t.name),
            }
        };
        if i >= warmup as u64 {
            run.samples.push(arrived.saturating_duration_since(sent));
        }
    }
    run.wall = started.elapsed();
    run.cpu = CpuClock::now(t.pid).since(&clock);
    reader.abort();
    Ok(run)
}

// ---------------------------------------------------------------- the minimal server

/// The minimal TLS server (run in a child process): serves `SPEED_MINIMAL_BODY`'s
/// bytes to every request with the serving pair given, prints its port, and
/// runs until its stdin closes.
fn minimal_server() -> ! {
    let result = (|| -> Result<()> {
        let var = |k: &str| std::env::var(k).with_context(|| format!("{k} is not set"));
        let cert_pem = std::fs::read(var("SPEED_MINIMAL_CERT")?)?;
        let key_pem = std::fs::read(var("SPEED_MINIMAL_KEY")?)?;
        let body = Bytes::from(std::fs::read(var("SPEED_MINIMAL_BODY")?)?);
        let certs: Vec<CertificateDer<'static>> =
            rustls_pemfile::certs(&mut &cert_pem[..]).collect::<Result<_, _>>()?;
        let key = rustls_pemfile::private_key(&mut &key_pem[..])?.ok_or_else(|| anyhow!("no private key"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        println!("PORT {}", listener.local_addr()?.port());
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        rt.block_on(async move {
            // Ends the process when the benchmark goes (its end of our stdin closes).
            std::thread::spawn(|| {
                let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
                std::process::exit(0);
            });
            let app = axum::Router::new().fallback(move || {
                let body = body.clone();
                async move { ([(http::header::CONTENT_TYPE, "application/json")], body) }
            });
            let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(
                axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(config)),
            )
            .acceptor(axum_server::accept::NoDelayAcceptor::new());
            axum_server::from_tcp(listener)?.acceptor(acceptor).serve(app.into_make_service()).await?;
            Ok::<_, anyhow::Error>(())
        })
    })();
    match result {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("minimal server: {e:#}");
            std::process::exit(1);
        }
    }
}

/// The minimal server started as a child process; killed when dropped.
struct Minimal {
    child: std::process::Child,
    port: u16,
}

impl Minimal {
    fn start(cert: &Path, key: &Path, body: &Path) -> Result<Minimal> {
        use std::io::BufRead;
        let mut child = std::process::Command::new(std::env::current_exe()?)
            .env(MINIMAL_ENV, "1")
            .env("SPEED_MINIMAL_CERT", cert)
            .env("SPEED_MINIMAL_KEY", key)
            .env("SPEED_MINIMAL_BODY", body)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        let port = line.trim().strip_prefix("PORT ").and_then(|p| p.parse().ok());
        let port = port.ok_or_else(|| anyhow!("the minimal server said {line:?}"))?;
        Ok(Minimal { child, port })
    }
}

impl Drop for Minimal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const MINIMAL: &str = "minimal TLS server (static body)";
const CRD: &str = "kube-apiserver (CRD)";
const DIRECT: &str = "farm-apiserver direct (memory)";
const AGGREGATED: &str = "farm-apiserver via aggregator (memory)";
const ETCD: &str = "farm-apiserver direct (etcd)";
const ETCD_ENCRYPTED: &str = "farm-apiserver direct (etcd, aesgcm at rest)";
const TRACED: &str = "farm-apiserver direct (memory, every request traced)";
const COMPARED: &str = "farm-apiserver direct (memory), compared (SPEED_COMPARE_*)";
const GET: &str = "GET one Llama";
const GET_OLD: &str = "GET one Llama in v1alpha (converted)";
const GET_RV0: &str = "GET one Llama, resourceVersion=0";
const LIST: &str = "LIST 1,000 Llamas";
const CREATE: &str = "create (POST)";
const WATCH: &str = "watch event latency";

async fn run(cfg: &Config, out: &mut String) -> Result<()> {
    let started = Instant::now();
    let stamp = || format!("[{:>5.1}s]", started.elapsed().as_secs_f64());
    eprintln!("{} starting the control plane", stamp());
    let cp = cluster::controlplane();
    let token: Arc<str> = bench_token(cp)?.into();
    for ns in [LIST_NS, CREATE_NS, "speed-watch-crd", "speed-watch-direct", "speed-watch-agg", "speed-watch-etcd"] {
        cluster::namespace(cp, ns);
    }
    let cp_tls = client_tls(&cp_file(cp, "caFile")?)?;
    let cp_addr = cp_addr(cp)?;
    let etcd_endpoint =
        cp.info["etcdEndpoint"].as_str().ok_or_else(|| anyhow!("etcdEndpoint in {}", cp.info))?.to_string();

    eprintln!("{} installing the CRD, starting farm-apiserver on memory and on etcd", stamp());
    common::crd::install_llama_crd(cp, CRD_GROUP).map_err(anyhow::Error::msg)?;
    let memory = farm(cp, None, &cfg.server_env, &[]).await?;
    let prefix = format!("/farm-speed/{}", uuid::Uuid::new_v4().simple());
    let etcd_args = ["--storage", "etcd", "--etcd-servers", &etcd_endpoint, "--etcd-prefix", &prefix];
    let on_etcd = farm(cp, None, &cfg.server_env, &etcd_args.map(String::from)).await?;
    // The same, its Llamas encrypted in etcd (aesgcm, a 32-byte key).
    let encryption_config = std::env::temp_dir().join(format!("farm-speed-encryption-{}.yaml", std::process::id()));
    let key = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, rand::random::<[u8; 32]>());
    std::fs::write(
        &encryption_config,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: ['*.*']\n  providers:\n  - aesgcm: {{keys: [{{name: k1, secret: {key}}}]}}\n"
        ),
    )?;
    let encrypted_prefix = format!("{prefix}-encrypted");
    let mut encrypted_args: Vec<String> =
        ["--storage", "etcd", "--etcd-servers", &etcd_endpoint, "--etcd-prefix", &encrypted_prefix]
            .map(String::from)
            .to_vec();
    encrypted_args.extend(["--encryption-provider-config".into(), encryption_config.display().to_string()]);
    let on_etcd_encrypted = farm(cp, None, &cfg.server_env, &encrypted_args).await?;
    // The same as `memory`, sampling every request into a collector.
    let collector = common::otlp::Collector::start();
    let tracing_config = std::env::temp_dir().join(format!("farm-speed-tracing-{}.yaml", std::process::id()));
    std::fs::write(
        &tracing_config,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: 127.0.0.1:{}\nsamplingRatePerMillion: 1000000\n",
            collector.port
        ),
    )?;
    let traced_server =
        farm(cp, None, &cfg.server_env, &["--tracing-config-file".into(), tracing_config.display().to_string()])
            .await?;
    let compared_server = match cfg.compares() {
        true => {
            let env = cfg.compare_env.as_deref().unwrap_or(&cfg.server_env);
            Some(farm(cp, cfg.compare_binary.as_deref(), env, &[]).await?)
        }
        false => None,
    };
    register(cp, &memory).await?;

    let farm_path = format!("/apis/{FARM_GROUP_VERSION}");
    let crd = Target {
        key: "crd",
        name: CRD,
        addr: cp_addr,
        tls: cp_tls.clone(),
        token: Some(token.clone()),
        group_path: format!("/apis/{CRD_GROUP_VERSION}"),
        api_version: CRD_GROUP_VERSION,
        pid: cp.pid,
    };
    let direct = Target {
        key: "direct",
        name: DIRECT,
        addr: SocketAddr::from(([127, 0, 0, 1], memory.port)),
        tls: client_tls(&std::fs::read(&memory.ca_file)?)?,
        token: Some(token.clone()),
        group_path: farm_path.clone(),
        api_version: FARM_GROUP_VERSION,
        pid: memory.pid(),
    };
    let aggregated = Target { key: "agg", name: AGGREGATED, tls: cp_tls.clone(), addr: cp_addr, ..direct.clone() };
    let etcd = Target {
        key: "etcd",
        name: ETCD,
        addr: SocketAddr::from(([127, 0, 0, 1], on_etcd.port)),
        tls: client_tls(&std::fs::read(&on_etcd.ca_file)?)?,
        pid: on_etcd.pid(),
        ..direct.clone()
    };
    let etcd_encrypted = Target {
        key: "etcd-enc",
        name: ETCD_ENCRYPTED,
        addr: SocketAddr::from(([127, 0, 0, 1], on_etcd_encrypted.port)),
        tls: client_tls(&std::fs::read(&on_etcd_encrypted.ca_file)?)?,
        pid: on_etcd_encrypted.pid(),
        ..direct.clone()
    };
    let traced = Target {
        key: "traced",
        name: TRACED,
        addr: SocketAddr::from(([127, 0, 0, 1], traced_server.port)),
        tls: client_tls(&std::fs::read(&traced_server.ca_file)?)?,
        pid: traced_server.pid(),
        ..direct.clone()
    };
    let compared = match &compared_server {
        Some(s) => Some(Target {
            key: "compared",
            name: COMPARED,
            addr: SocketAddr::from(([127, 0, 0, 1], s.port)),
            tls: client_tls(&std::fs::read(&s.ca_file)?)?,
            pid: s.pid(),
            ..direct.clone()
        }),
        None => None,
    };
    wait_serving(&crd, LIST_NS).await?;
    wait_serving(&aggregated, LIST_NS).await?;

    eprintln!("{} seeding {} Llamas on each store", stamp(), cfg.llamas);
    for t in [&direct, &etcd, &etcd_encrypted, &traced, &crd].into_iter().chain(compared.as_ref()) {
        let op = Op::Create { collection: t.collection(LIST_NS), prefix: "llama".into() };
        load(t, &op, 8, Stop::Count(cfg.llamas as u64)).await?;
    }
    let one = |t: &Target| format!("{}/llama-{}", t.collection(LIST_NS), cfg.llamas / 2);

    // Minimal servers answering with farm-apiserver's own answers: its GET,
    // and its LIST (the ceiling of a list's rate here, whatever serves it:
    // mostly TLS over its bytes).
    let dir = memory.dir.path().to_path_buf();
    let minimal_serving = |key: &'static str, path: String| {
        let (direct, dir) = (direct.clone(), dir.clone());
        async move {
            let answer = {
                let mut s = connect(&direct).await?;
                exchange(&mut s, request(&direct, &Op::Get(path), 0)?).await?
            };
            let body_file = dir.join(format!("{key}-body.json"));
            std::fs::write(&body_file, &answer)?;
            let process = Minimal::start(&dir.join("certs/tls.crt"), &dir.join("certs/tls.key"), &body_file)?;
            let target = Target {
                key,
                name: MINIMAL,
                addr: SocketAddr::from(([127, 0, 0, 1], process.port)),
                pid: process.child.id(),
                ..direct
            };
            Ok::<_, anyhow::Error>((target, process))
        }
    };
    let (minimal, minimal_proc) = minimal_serving("minimal", one(&direct)).await?;
    let (minimal_list, minimal_list_proc) = minimal_serving("minimal-list", direct.collection(LIST_NS)).await?;

    let load_before = common::loadavg();
    let rss_idle = common::rss_mib(memory.pid());
    eprintln!("{} measuring (load average {load_before})", stamp());
    let mut rows = Vec::new();
    rows.extend(
        case(
            &cfg.pace,
            GET,
            &beside(compared.as_ref(), &[&minimal, &direct, &aggregated, &etcd, &etcd_encrypted, &traced, &crd]),
            |t| Op::Get(one(t)),
        )
        .await?,
    );
    rows.extend(
        case(&cfg.pace, GET_OLD, &beside(compared.as_ref(), &[&direct, &crd]), |t| {
            Op::Get(one(t).replacen("/v1beta1/", "/v1alpha/", 1))
        })
        .await?,
    );
    rows.extend(
        case(&cfg.pace, GET_RV0, &beside(compared.as_ref(), &[&direct, &etcd]), |t| {
            Op::Get(format!("{}?resourceVersion=0", one(t)))
        })
        .await?,
    );
    rows.extend(
        case(&cfg.pace, LIST, &beside(compared.as_ref(), &[&minimal_list, &direct, &aggregated, &etcd, &crd]), |t| {
            Op::Get(t.collection(LIST_NS))
        })
        .await?,
    );
    rows.extend(
        case(
            &cfg.pace,
            CREATE,
            &beside(compared.as_ref(), &[&direct, &aggregated, &etcd, &etcd_encrypted, &crd]),
            |t| Op::Create {
                collection: t.collection(CREATE_NS),
                prefix: format!("c-{}-{}", t.key, uuid::Uuid::new_v4().simple()),
            },
        )
        .await?,
    );
    eprintln!("  {WATCH}");
    for t in [&direct, &aggregated, &etcd, &crd] {
        rows.push(Row { case: WATCH, target: t.name, run: watch_latency(t, cfg.watch_writes).await? });
    }
    let load_after = common::loadavg();
    let rss_after = common::rss_mib(memory.pid());

    report(cfg, &rows, out, &load_before, &load_after, (rss_idle, rss_after), started.elapsed())?;
    // Spans still in the traced server's batch are not counted.
    let exported = collector.spans().len();
    std::fmt::Write::write_fmt(out, format_args!("The traced server exported {exported} spans to the collector.\n"))?;
    if let Some(dir) = &cfg.charts {
        charts(dir, &rows)?;
    }
    drop(minimal_proc);
    drop(minimal_list_proc);
    Ok(())
}

/// The targets, with the compared server (if any) right after the one it is compared with.
fn beside<'t>(compared: Option<&'t Target>, targets: &[&'t Target]) -> Vec<&'t Target> {
    let mut all = Vec::new();
    for &t in targets {
        all.push(t);
        if t.key == "direct" {
            all.extend(compared);
        }
    }
    all
}

fn report(
    cfg: &Config,
    rows: &[Row],
    out: &mut String,
    load_before: &str,
    load_after: &str,
    rss: (f64, f64),
    whole: Duration,
) -> Result<()> {
    use std::fmt::Write as _;
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    writeln!(out, "\n# Speed: farm-apiserver against kube-apiserver (CRD) and a minimal TLS server\n")?;
    writeln!(
        out,
        "{cores} cores shared by the servers and the load generator. Release builds, loopback, TLS, HTTP/1.1 \
         keep-alive from the client: {} connections, one request in flight each, all on one client thread \
         (hyper + rustls). Through the aggregator, kube-apiserver proxies over HTTP/2. Authentication: the same \
         service-account bearer token on every request (kube-apiserver: verified itself; farm-apiserver: \
         --authentication delegated, TokenReview + SubjectAccessReview cached; the minimal server: received, ignored). \
         {:.1} s measured per case and target in {} rounds. p50/p99: under that load. CPU ms/request: the \
         serving process (the control plane's one process for kube-apiserver: it holds etcd too; for the \
         aggregator row, farm-apiserver alone) and the load generator.{}\n",
        cfg.pace.connections,
        cfg.pace.seconds,
        cfg.pace.rounds,
        if cfg.server_env.is_empty() {
            String::new()
        } else {
            format!(" farm-apiserver environment: {:?}.", cfg.server_env)
        }
    )?;
    writeln!(
        out,
        "| case | target | requests | req/s | p50 | p99 | server CPU ms/req | client CPU ms/req | body bytes |"
    )?;
    writeln!(out, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")?;
    for r in rows {
        let rate = if r.case == WATCH { "—".to_string() } else { format!("{:.0}", r.run.rate()) };
        writeln!(
            out,
            "| {} | {} | {} | {rate} | {} | {} | {:.3} | {:.3} | {} |",
            r.case,
            r.target,
            r.run.samples.len(),
            ms(r.run.pct(50.0)),
            ms(r.run.pct(99.0)),
            r.run.server_ms(),
            r.run.client_ms(),
            if r.case == WATCH { "—".to_string() } else { r.run.bytes.to_string() },
        )?;
    }

    writeln!(out, "\n## Ratios (req/s unless named)\n")?;
    writeln!(out, "| ratio | value | goal | met |")?;
    writeln!(out, "| --- | ---: | ---: | --- |")?;
    let rate = |case: &str, target: &str| find(rows, case, target).map(Run::rate).unwrap_or(f64::NAN);
    let p50 =
        |case: &str, target: &str| find(rows, case, target).map(|r| r.pct(50.0).as_secs_f64()).unwrap_or(f64::NAN);
    let mut line = |what: &str, value: f64, goal: Option<f64>| -> Result<()> {
        let (goal_s, met) = match goal {
            Some(g) => (format!(">= {g:.2}x"), if value >= g { "yes" } else { "NO" }),
            None => ("—".to_string(), ""),
        };
        writeln!(out, "| {what} | {value:.2}x | {goal_s} | {met} |")?;
        Ok(())
    };
    line("GET one, direct / minimal TLS server", rate(GET, DIRECT) / rate(GET, MINIMAL), Some(0.9))?;
    line("GET one, direct / CRD", rate(GET, DIRECT) / rate(GET, CRD), Some(10.0))?;
    line("GET one, via aggregator / CRD", rate(GET, AGGREGATED) / rate(GET, CRD), None)?;
    line(
        "GET one in v1alpha, direct / CRD (its conversion webhook)",
        rate(GET_OLD, DIRECT) / rate(GET_OLD, CRD),
        None,
    )?;
    let cpu = |case: &str, target: &str| find(rows, case, target).map(Run::server_ms).unwrap_or(f64::NAN);
    // A goal of at most: named, not marked.
    line(
        "GET one in v1alpha / in v1beta1, direct, server CPU per request (goal: at most 1.15x)",
        cpu(GET_OLD, DIRECT) / cpu(GET, DIRECT),
        None,
    )?;
    line("LIST 1,000, direct / CRD", rate(LIST, DIRECT) / rate(LIST, CRD), Some(50.0))?;
    line("LIST 1,000, direct / minimal TLS server", rate(LIST, DIRECT) / rate(LIST, MINIMAL), None)?;
    line(
        "LIST 1,000, minimal TLS server / CRD (the ceiling of the ratio above)",
        rate(LIST, MINIMAL) / rate(LIST, CRD),
        None,
    )?;
    line("LIST 1,000, via aggregator / CRD", rate(LIST, AGGREGATED) / rate(LIST, CRD), None)?;
    line("GET one, etcd / memory (latest)", rate(GET, ETCD) / rate(GET, DIRECT), Some(0.9))?;
    line("GET one, etcd / memory (resourceVersion=0)", rate(GET_RV0, ETCD) / rate(GET_RV0, DIRECT), Some(0.9))?;
    line("LIST 1,000, etcd / memory (latest)", rate(LIST, ETCD) / rate(LIST, DIRECT), Some(0.9))?;
    line("creates, etcd / CRD (same etcd)", rate(CREATE, ETCD) / rate(CREATE, CRD), Some(1.0))?;
    line(
        "creates, etcd with aesgcm at rest / plain etcd (goal: at least 0.9)",
        rate(CREATE, ETCD_ENCRYPTED) / rate(CREATE, ETCD),
        Some(0.9),
    )?;
    line("GET one, etcd with aesgcm at rest / plain etcd", rate(GET, ETCD_ENCRYPTED) / rate(GET, ETCD), Some(0.9))?;
    line(
        "GET one, every request traced / not traced (goal: at least 0.9)",
        rate(GET, TRACED) / rate(GET, DIRECT),
        Some(0.9),
    )?;
    line("creates, direct memory / CRD", rate(CREATE, DIRECT) / rate(CREATE, CRD), None)?;
    line("watch event latency p50, CRD / direct (x faster)", p50(WATCH, CRD) / p50(WATCH, DIRECT), None)?;
    line("watch event latency p50, CRD / etcd (x faster)", p50(WATCH, CRD) / p50(WATCH, ETCD), None)?;
    if cfg.compares() {
        let by = cfg.compared_by();
        for case in [GET, GET_RV0, LIST, CREATE] {
            line(&format!("{case}, {by} / direct (memory)"), rate(case, COMPARED) / rate(case, DIRECT), None)?;
            line(
                &format!("{case}, server CPU per request, {by} / direct (memory)"),
                cpu(case, COMPARED) / cpu(case, DIRECT),
                None,
            )?;
        }
    }
    writeln!(
        out,
        "\nfarm-apiserver (memory) RSS: {:.1} MiB after seeding {} Llamas, {:.1} MiB at the end (it then holds \
         the creates too).\nLoad average (1/5/15 min): {load_before} before measuring, {load_after} at the end. \
         Whole run: {:.1?}.",
        rss.0, cfg.llamas, rss.1, whole
    )?;
    Ok(())
}

fn charts(dir: &Path, rows: &[Row]) -> Result<()> {
    let series = |case: &str| -> Vec<(&str, Vec<f64>)> {
        rows.iter()
            .filter(|r| r.case == case)
            .map(|r| (r.target, r.run.samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect()))
            .collect()
    };
    plot::distribution_chart(&dir.join("speed-get.svg"), "GET one Llama under load", "latency, ms", &series(GET))?;
    plot::distribution_chart(
        &dir.join("speed-list.svg"),
        "LIST 1,000 Llamas under load",
        "latency, ms",
        &series(LIST),
    )?;
    plot::distribution_chart(&dir.join("speed-create.svg"), "Creates under load", "latency, ms", &series(CREATE))?;
    eprintln!("charts written to {}", dir.display());
    Ok(())
}

fn main() {
    if std::env::var_os(MINIMAL_ENV).is_some() {
        minimal_server();
    }
    let cfg = match Config::from_env() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("speed benchmark: {e:#}");
            std::process::exit(2);
        }
    };
    eprintln!("speed benchmark: about 2 minutes on 2 cores after the build");
    if let Err(e) = report::run_and_print("speed benchmark", async |out| run(&cfg, out).await) {
        eprintln!("speed benchmark FAILED: {e:#}");
        std::process::exit(1);
    }
}
