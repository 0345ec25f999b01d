//! Shared fixture: runs the real `farm-apiserver` binary on a free loopback
//! port with its own development certificates, and gives HTTPS, kubectl and
//! kube-rs access to it.

#![allow(dead_code)]

pub mod api_proxy;
pub mod audit;
pub mod cluster;
pub mod compare;
pub mod crd;
pub mod etcd;
pub mod fuzz;
pub mod helm;
pub mod identity;
pub mod jaeger;
pub mod otlp;
pub mod podman;
pub mod relay;
pub mod webhook;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const GROUP_PATH: &str = "/apis/farm.example.com/v1alpha";

/// The Warning header every answer for v1alpha Llamas carries first.
pub const V1ALPHA_DEPRECATED: &str =
    "299 - \"farm.example.com/v1alpha Llama is deprecated; use farm.example.com/v1beta1 Llama\"";

pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A TLS client trusting `ca` and offering `alpn`, for tests that hold one
/// connection themselves (a pooling client may open another at any time).
pub fn connector(ca: &Path, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::pem::PemObject as _;
    install_crypto();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).expect("read CA") {
        roots.add(cert.expect("CA PEM")).expect("add CA");
    }
    let mut config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
}

/// One TLS connection to `s`.
pub async fn connect(
    s: &Server,
    tls: &tokio_rustls::TlsConnector,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", s.port)).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("server name");
    tls.connect(name, tcp).await
}

/// How to start a server beyond the defaults.
#[derive(Default, Clone)]
pub struct Options {
    pub args: Vec<String>,
    /// The cluster FarmPods read; None: no cluster at all.
    pub kubeconfig: Option<PathBuf>,
    /// Where development certificates live (default: a fresh directory).
    pub cert_dir: Option<PathBuf>,
    /// The CA that signs the serving certificate (default: cert_dir/ca.crt).
    pub ca_file: Option<PathBuf>,
    /// Stop the server when this test process ends, however it ends (for
    /// servers kept in statics, which are never dropped).
    pub tie_to_test_process: bool,
    /// Log filter (default: debug for farm-apiserver, i.e. every request).
    pub log: Option<String>,
    /// How long to wait for /readyz (default 30 s).
    pub ready_timeout: Option<Duration>,
    /// The probe that must answer ok before the server counts as started
    /// (default /readyz; /livez for a server expected not to be ready).
    pub ready_path: Option<String>,
    /// Caps the server's address space (`prlimit --as`, util-linux): an
    /// allocation past it fails and the server aborts, where without it a
    /// runaway allocation would swap the machine or wake its OOM killer.
    /// Fails (never skips) when `prlimit` is missing.
    pub address_space_limit: Option<u64>,
    /// Environment variables set on the server process alone (benchmarks
    /// compare allocator settings this way: `GLIBC_TUNABLES`, `LD_PRELOAD`).
    pub env: Vec<(String, String)>,
    /// Another farm-apiserver binary to run instead of this build's
    /// (benchmarks measure two builds side by side this way).
    pub program: Option<PathBuf>,
}

/// Where the server under test keeps Llamas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Memory,
    /// The test binary's shared etcd, under a key prefix of the server's own.
    Etcd,
}

impl Backend {
    /// The flags selecting this backend.
    pub fn args(self) -> Vec<String> {
        match self {
            Backend::Memory => Vec::new(),
            Backend::Etcd => etcd::shared().server_args(&etcd::unique_prefix()),
        }
    }
}

/// Turns each listed `async fn(Backend)` into two tests, `memory::<name>` and
/// `etcd::<name>`, so one suite proves the same behaviour on both stores.
#[macro_export]
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test]
            async fn $name() {
                super::$name($crate::common::Backend::Memory).await
            })*
        }
        mod etcd {
            $(#[tokio::test]
            async fn $name() {
                super::$name($crate::common::Backend::Etcd).await
            })*
        }
    };
}

pub struct Server {
    child: Child,
    /// Held open while `tie_to_test_process`: its end stops the server.
    _stdin: Option<std::process::ChildStdin>,
    pub port: u16,
    pub base: String,
    pub dir: tempfile::TempDir,
    pub ca_file: PathBuf,
    pub client: reqwest::Client,
    pub log_file: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

impl Server {
    /// Starts the server with extra flags, without a cluster (FarmPods answer
    /// 503), and waits until /readyz answers ok.
    pub async fn start(extra: &[&str]) -> Server {
        Self::start_with(Options { args: extra.iter().map(|a| a.to_string()).collect(), ..Default::default() }).await
    }

    /// Starts the server on `backend` with extra flags, without a cluster.
    pub async fn start_on(backend: Backend, extra: &[&str]) -> Server {
        let mut args = backend.args();
        args.extend(extra.iter().map(|a| a.to_string()));
        Self::start_with(Options { args, ..Default::default() }).await
    }

    /// Starts the server reading Pods through `kubeconfig` (None: no cluster).
    pub async fn start_with_cluster(extra: &[&str], kubeconfig: Option<&Path>) -> Server {
        Self::start_with(Options {
            args: extra.iter().map(|a| a.to_string()).collect(),
            kubeconfig: kubeconfig.map(Path::to_path_buf),
            ..Default::default()
        })
        .await
    }

    pub async fn start_with(opts: Options) -> Server {
        install_crypto();
        // A port found free can be bound by another process before the server
        // binds it (tests start servers and control planes side by side), so
        // a server that could not bind is started again on another.
        const ATTEMPTS: u32 = 5;
        for attempt in 1.. {
            let mut server = Self::spawn(&opts, free_port());
            let probe = opts.ready_path.as_deref().unwrap_or("/readyz");
            match server.wait_ready(probe, opts.ready_timeout.unwrap_or(Duration::from_secs(30))).await {
                Ok(()) => return server,
                Err(log) if attempt < ATTEMPTS && log.contains("Address already in use") => continue,
                Err(log) => panic!("{log}"),
            }
        }
        unreachable!("the loop returns or panics")
    }

    /// Starts the binary on `port`, its log and default certificates in a
    /// directory of its own.
    fn spawn(opts: &Options, port: u16) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let cert_dir = opts.cert_dir.clone().unwrap_or_else(|| dir.path().join("certs"));
        let log_file = dir.path().join("server.log");
        let log = std::fs::File::create(&log_file).expect("log file");
        // prlimit sets the limit on itself and execs the server: same pid.
        let mut program: Vec<String> = Vec::new();
        if let Some(bytes) = opts.address_space_limit {
            let found = Command::new("prlimit").arg("--version").output().is_ok_and(|o| o.status.success());
            assert!(found, "prlimit (util-linux) is needed to cap the server's memory and was not found on PATH");
            program.extend(["prlimit".to_string(), format!("--as={bytes}"), "--".to_string()]);
        }
        program.push(match &opts.program {
            Some(other) => other.display().to_string(),
            None => env!("CARGO_BIN_EXE_farm-apiserver").to_string(),
        });
        let mut cmd = if opts.tie_to_test_process {
            // A watcher subshell kills the server when our end of its stdin closes.
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(r#"exec 3<&0; "$@" </dev/null & child=$!; (cat <&3 >/dev/null; kill $child) & wait $child"#)
                .arg("sh")
                .args(&program);
            c
        } else {
            let mut c = Command::new(&program[0]);
            c.args(&program[1..]);
            c
        };
        cmd.envs(opts.env.iter().map(|(k, v)| (k, v)));
        match &opts.kubeconfig {
            Some(kc) => cmd.arg("--kubeconfig").arg(kc),
            // No kubeconfig anywhere and not in a cluster: FarmPods are disabled.
            None => cmd.env("KUBECONFIG", dir.path().join("no-cluster")).env_remove("KUBERNETES_SERVICE_HOST"),
        };
        let mut child = cmd
            .arg("--bind")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--cert-dir")
            .arg(&cert_dir)
            .arg("--log")
            .arg(opts.log.as_deref().unwrap_or("info,farm_apiserver=debug,aggregated_apiserver=debug"))
            .args(&opts.args)
            .stdin(if opts.tie_to_test_process { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start farm-apiserver");
        let stdin = child.stdin.take();
        let ca_file = opts.ca_file.clone().unwrap_or_else(|| cert_dir.join("ca.crt"));
        let base = format!("https://127.0.0.1:{port}");
        Server { child, _stdin: stdin, port, base, dir, ca_file, client: reqwest::Client::new(), log_file }
    }

    /// Waits until `probe` answers ok; on an early exit or the timeout, the
    /// reason and the server's log.
    async fn wait_ready(&mut self, probe: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("farm-apiserver exited early ({status}):\n{}", self.log()));
            }
            if self.ca_file.exists() {
                if let Ok(client) = client_trusting(&self.ca_file) {
                    if let Ok(r) = client.get(format!("{}{probe}", self.base)).send().await {
                        if r.status().is_success() {
                            self.client = client;
                            return Ok(());
                        }
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(format!("farm-apiserver did not become ready:\n{}", self.log()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// The URL of a Llama path in a namespace: `llamas(ns, "")` is the collection.
    pub fn llamas(&self, ns: &str, rest: &str) -> String {
        let rest = if rest.is_empty() { String::new() } else { format!("/{rest}") };
        format!("{}{GROUP_PATH}/namespaces/{ns}/llamas{rest}", self.base)
    }

    /// A kubeconfig pointing kubectl (or kube-rs) straight at this server.
    pub fn kubeconfig(&self) -> PathBuf {
        let path = self.dir.path().join("kubeconfig");
        let cfg = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: farm\n  cluster:\n    server: {}\n    certificate-authority: {}\ncontexts:\n- name: farm\n  context:\n    cluster: farm\n    user: dev\n    namespace: default\ncurrent-context: farm\nusers:\n- name: dev\n  user:\n    token: local-development\n",
            self.base,
            self.ca_file.display()
        );
        std::fs::write(&path, cfg).expect("write kubeconfig");
        path
    }

    /// Sends SIGTERM and waits for the process to end (async, so the test's
    /// own connections keep being served while the server drains them).
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s;
            }
            assert!(Instant::now() < deadline, "farm-apiserver did not stop on SIGTERM");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn client_trusting(ca: &Path) -> anyhow::Result<reqwest::Client> {
    let pem = std::fs::read(ca)?;
    Ok(reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem)?)
        .timeout(Duration::from_secs(30))
        .build()?)
}

/// Runs the server with `args` expecting it to refuse to start; its stderr.
pub fn refuses_to_start(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_farm-apiserver"))
        .args(["--bind", "127.0.0.1:0", "--cert-dir"])
        .arg(dir.path())
        .args(args)
        .env("KUBECONFIG", dir.path().join("none"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "started with {args:?}:\n{stderr}");
    stderr
}

pub fn llama(name: &str, weight: f64, height: f64) -> Value {
    serde_json::json!({
        "apiVersion": "farm.example.com/v1alpha",
        "kind": "Llama",
        "metadata": { "name": name },
        "spec": { "weight": weight, "height": height }
    })
}

/// A request to `url` with `Content-Type: content_type` and `body`: the status,
/// the headers, and the body as JSON (a body that is not JSON as a JSON string).
pub async fn call(
    s: &Server,
    method: reqwest::Method,
    url: &str,
    content_type: &str,
    body: Option<Vec<u8>>,
) -> (reqwest::StatusCode, reqwest::header::HeaderMap, Value) {
    let mut r = s.client.request(method, url).header("Content-Type", content_type);
    if let Some(b) = body {
        r = r.body(b);
    }
    let resp = r.send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = resp.status();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("body");
    (status, headers, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// A request with a JSON body (or none): the status and the body, read as by [`call`].
pub async fn send(
    s: &Server,
    method: reqwest::Method,
    url: &str,
    body: Option<&Value>,
) -> (reqwest::StatusCode, Value) {
    let body = body.map(|b| serde_json::to_vec(b).expect("JSON body"));
    let (status, _, v) = call(s, method, url, "application/json", body).await;
    (status, v)
}

/// Creates `body` in namespace `ns` (201 Created, or the test fails) and
/// returns the object as the server answered it.
pub async fn create(s: &Server, ns: &str, body: &Value) -> Value {
    let (status, v) = send(s, reqwest::Method::POST, &s.llamas(ns, ""), Some(body)).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{v}");
    v
}

/// The resourceVersion of an object or a list, as a number.
pub fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).unwrap_or_else(|| panic!("no rv in {v}"))
}

/// The stdout of a kubectl run ([`kubectl`], [`kubectl_stdin`]) that must have succeeded.
/// `bytes` random bytes in lower-case hex (a trace or span id).
pub fn random_hex(bytes: usize) -> String {
    (0..bytes).map(|_| format!("{:02x}", rand::random::<u8>())).collect()
}

pub fn ok(out: (bool, String, String)) -> String {
    assert!(out.0, "kubectl failed:\nstdout: {}\nstderr: {}", out.1, out.2);
    out.1
}

/// The value of one series in a Prometheus text exposition, named with its
/// labels as the server writes them (`name{label="v",...}` or `name`).
pub fn metric_sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Polls `attempt` until it returns true; panics after `timeout`.
pub async fn succeeds<F: std::future::Future<Output = bool>>(
    what: &str,
    timeout: Duration,
    mut attempt: impl FnMut() -> F,
) {
    let deadline = Instant::now() + timeout;
    while !attempt().await {
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs kubectl against a kubeconfig; returns (success, stdout, stderr).
pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    kubectl_stdin(kubeconfig, args, None)
}

/// kubectl's discovery cache, one per kubeconfig, so no test reads another's.
fn kubectl_cache(kubeconfig: &Path) -> PathBuf {
    kubeconfig.with_extension("kubectl-cache")
}

/// The response headers kubectl logged (at `-v=8`) for its first request
/// whose URL contains `path_part`.
pub fn kubectl_logged_headers<'a>(log: &'a str, path_part: &str) -> &'a str {
    let answer = log.split("GET https").find(|r| r.contains(path_part));
    let answer = answer.unwrap_or_else(|| panic!("kubectl logged no request for {path_part}:\n{log}"));
    let headers = answer.split("Response Headers:").nth(1).and_then(|h| h.split("Response Body").next());
    headers.unwrap_or_else(|| panic!("kubectl logged no answer headers for {path_part}:\n{answer}"))
}

pub fn kubectl_stdin(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    kubectl_binary_stdin(&kubectl_bin(), kubeconfig, args, stdin)
}

/// Runs the kubectl binary at `bin`; returns (success, stdout, stderr).
pub fn kubectl_binary_stdin(
    bin: &str,
    kubeconfig: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new(bin)
        .env("KUBECACHEDIR", kubectl_cache(kubeconfig))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {bin}: {e}"));
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes()).expect("kubectl stdin");
    }
    let out = child.wait_with_output().expect("kubectl output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn kubectl_bin() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

/// A long-running kubectl (e.g. `get -w`) whose output lines arrive on a channel.
pub struct KubectlStream {
    child: Child,
    pub lines: std::sync::mpsc::Receiver<String>,
}

impl KubectlStream {
    pub fn start(kubeconfig: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(kubectl_bin())
            .env("KUBECACHEDIR", kubectl_cache(kubeconfig))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run kubectl");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// Waits for a line containing all of `needles`.
    pub fn expect_line(&self, needles: &[&str], timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if needles.iter().all(|n| l.contains(n)) => return l,
                Ok(l) => seen.push(l),
                Err(_) => panic!("no line with {needles:?} within {timeout:?}; saw {seen:#?}"),
            }
        }
    }
}

impl Drop for KubectlStream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Resident memory of a process in MiB, from /proc (NaN when unreadable).
pub fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// The machine's load averages (1, 5, 15 minutes), for benchmark reports.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
