//! A seeded request fuzzer and its invariants, shared by `benches/soak.rs`
//! (a million requests against the release server) and `tests/it/load/soak_short.rs`
//! (a short run in `cargo test`).
//!
//! One `StdRng` generates every request: paths the server knows (and mangled
//! ones), every verb, content type, query parameter and header it reads, with
//! valid and broken values and bodies. Next to the noise, a small share of
//! requests are well-formed writes to Llamas in a namespace the noise never
//! touches, and the fuzzer remembers what each acknowledged write stored; at
//! the end every one is read back. The invariants a run checks:
//!
//! - the server process is alive and its log has no "panicked";
//! - no 5xx except the documented ones (504 Timeout; 503 for FarmPods without
//!   a cluster; 500 InternalError from a failed review, only where reviews happen);
//! - the server's peak RSS stays below a bound;
//! - every acknowledged write of a tracked Llama reads back intact.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use reqwest::header::{HeaderName, HeaderValue};
use reqwest::Method;
use serde_json::{json, Value};

mod attack;
pub use attack::Attack;

const GROUP: &str = "/apis/farm.example.com/v1alpha";
const API_VERSION: &str = "farm.example.com/v1alpha";
/// The namespace of tracked Llamas. Fuzzed requests never name it (their
/// namespaces come from `NAMESPACES` or random garbage that cannot produce it),
/// and the only cluster-wide deletecollection they send excludes its label.
pub const TRACKED_NS: &str = "soak-tracked-zz9";
const TRACKED_LABEL: (&str, &str) = ("soak", "tracked");
const NAMESPACES: &[&str] = &["default", "fuzz-a", "fuzz-b", "kube-system"];
/// Few names, so fuzzed creates, updates and deletes collide and the store stays small.
const NAMES: &[&str] = &["dolly", "a", "x-1", "llama.with.dots", "z"];
/// Watches the generator asks to end after this long; a client stops reading
/// any watch after `WATCH_CUT` (one that asked for no timeout, or a garbage one).
const WATCH_CUT: Duration = Duration::from_secs(3);
/// A non-watch request still unanswered after this is a hang: longer than the
/// server's own 60 s request timeout, which would have answered 504.
const HANG: Duration = Duration::from_secs(75);
/// At most this many tracked Llamas are created; later tracked writes update or delete them.
const MAX_TRACKED: usize = 3000;

/// How long and how hard to run.
#[derive(Clone, Debug)]
pub struct Config {
    pub requests: u64,
    pub duration: Duration,
    pub concurrency: usize,
    pub seed: u64,
    pub max_rss_bytes: u64,
    /// The share of requests drawn from the attacking generators
    /// (`attack.rs`) instead of the noise: 0 for none.
    pub attack_share: f64,
    /// Scales the bulk of attacking requests (counts of items, bytes): 1.0
    /// reaches the 3 MiB body limit; a short run in a debug build takes less.
    pub attack_scale: f64,
}

/// The server under test, as the fuzzer sees it.
pub struct Target {
    pub base: String,
    pub ca_file: PathBuf,
    /// Client certificate + key (PEM) to present, for a delegated server.
    pub identity: Option<Vec<u8>>,
    pub pid: u32,
    pub log_file: PathBuf,
    /// FarmPods have a cluster behind them (else 503 is their documented answer).
    pub has_cluster: bool,
    /// The server reviews requests (TokenReview, SubjectAccessReview), so a 500
    /// InternalError from a review that could not be made is documented.
    pub reviews: bool,
}

/// One generated request.
/// The server's `--max-body-bytes` as the harness runs it (the default, kube's).
const SERVER_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

struct Req {
    method: Method,
    path: String,
    query: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Option<Vec<u8>>,
    /// What kind of path it is, for grouping statistics ("llamas/item/status").
    label: String,
    /// May be long-running: the client cuts it after `WATCH_CUT`.
    watch: bool,
    http2: bool,
    /// Sent without the target's client certificate (anonymous, or a garbage
    /// bearer token), when the target has one.
    anonymous: bool,
    tracked: Option<TrackedOp>,
    /// Drawn from the attacking generators: sent on connections of their own
    /// (so the noise's cancelled watches cannot get them torn down), and any
    /// answer that is not an HTTP response is a failure.
    attack: bool,
}

#[derive(Clone)]
enum TrackedOp {
    Create { name: String, spec: Value },
    Update { name: String, spec: Value },
    Delete { name: String },
}

impl TrackedOp {
    fn name(&self) -> &str {
        match self {
            TrackedOp::Create { name, .. } | TrackedOp::Update { name, .. } | TrackedOp::Delete { name } => name,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Expect {
    Present {
        spec: Value,
        rv: String,
    },
    Absent,
    /// The write's outcome is unknown (timeout, 429, cut connection): not verified.
    Unknown,
}

#[derive(Default)]
struct Tracker {
    objects: BTreeMap<String, Expect>,
    busy: std::collections::HashSet<String>,
    created: usize,
    acked: u64,
    uncertain: u64,
}

/// What a run saw.
#[derive(Default, Debug)]
pub struct Report {
    pub requests: u64,
    pub elapsed: Duration,
    pub statuses: BTreeMap<u16, u64>,
    /// Transport errors (no HTTP answer) by kind.
    pub transport_errors: BTreeMap<String, u64>,
    /// The first request of each transport error kind.
    pub transport_examples: BTreeMap<String, String>,
    pub watches_cut: u64,
    pub by_label_5xx: BTreeMap<String, u64>,
    pub documented_5xx: BTreeMap<String, u64>,
    /// One example per (status, label, reason) of each undocumented 5xx.
    pub undocumented_5xx: BTreeMap<String, (u64, String)>,
    pub hangs: Vec<String>,
    pub tracked_refused: Vec<String>,
    pub tracked_acked: u64,
    pub tracked_uncertain: u64,
    pub verified_present: u64,
    pub verified_absent: u64,
    pub verify_failures: Vec<String>,
    /// Writes acknowledged or read back with a number that is not the one
    /// sent but within 1e-14 of it (a float parsed or printed inexactly): the
    /// object is there, its value was altered. Count and the first examples.
    pub number_drift: u64,
    pub number_drift_examples: Vec<String>,
    /// Of `verified_present`, read back with such an altered number.
    pub verified_drifted: u64,
    pub peak_rss: u64,
    pub final_rss: u64,
    /// The server's largest address space (VmPeak), what `prlimit --as` caps.
    pub peak_vm: u64,
    pub server_alive: bool,
    pub panics_in_log: Vec<String>,
    pub max_rss_bytes: u64,
    /// Status codes of the attacking requests, by kind.
    pub attack_statuses: BTreeMap<String, BTreeMap<u16, u64>>,
    /// Seconds the attacking requests took, by kind: total and slowest (a
    /// cost out of proportion with a request shows here first).
    pub attack_seconds: BTreeMap<String, (f64, f64)>,
    /// Attacking requests that got no HTTP answer: count and the first ones.
    pub attack_unanswered: u64,
    /// Attacking requests over HTTP/1.1 answered with more header fields
    /// than hyper's client reads (100): Warning headers, which the server
    /// bounds as kube-apiserver does, by their text (4 KiB), not their count.
    pub attack_heads_unread: u64,
    /// Attacking requests over HTTP/1.1 with a body over the server's limit,
    /// cut while still sending it: the server answers 413 as soon as the
    /// limit is passed and closes the connection (as Go's server does), and
    /// hyper's client, still writing, reports the closed connection instead.
    pub attack_cut_mid_body: u64,
    pub attack_unanswered_examples: Vec<String>,
    /// Attacked Llamas that could not be created before the run.
    pub attack_setup_failures: Vec<String>,
    /// Stored Llamas whose encoding is larger than the server's object limit.
    pub oversized_objects: Vec<String>,
}

impl Report {
    /// Every broken invariant, one line each (empty: the run passed).
    pub fn failures(&self) -> Vec<String> {
        let mut f = Vec::new();
        if !self.server_alive {
            f.push("the server process is gone".to_string());
        }
        for p in &self.panics_in_log {
            f.push(format!("panic or failed allocation in the server log: {p}"));
        }
        if self.attack_unanswered > 0 {
            f.push(format!(
                "{} attacking requests got no HTTP answer, e.g.:\n  {}",
                self.attack_unanswered,
                self.attack_unanswered_examples.join("\n  ")
            ));
        }
        for s in &self.attack_setup_failures {
            f.push(format!("could not create an attacked Llama: {s}"));
        }
        for o in &self.oversized_objects {
            f.push(format!("stored object above the object limit: {o}"));
        }
        for (key, (n, example)) in &self.undocumented_5xx {
            f.push(format!("undocumented {key} x{n}: {example}"));
        }
        for h in &self.hangs {
            f.push(format!("no answer within {HANG:?}: {h}"));
        }
        for r in &self.tracked_refused {
            f.push(format!("a valid tracked write was refused: {r}"));
        }
        for v in &self.verify_failures {
            f.push(format!("read back: {v}"));
        }
        if self.number_drift > 0 {
            f.push(format!(
                "{} acknowledged writes or reads returned a spec number other than the one sent (last digits), e.g.:\n  {}",
                self.number_drift,
                self.number_drift_examples.join("\n  ")
            ));
        }
        if self.peak_rss > self.max_rss_bytes {
            f.push(format!("peak RSS {} MiB above the bound {} MiB", self.peak_rss >> 20, self.max_rss_bytes >> 20));
        }
        if self.tracked_acked == 0 {
            f.push("no tracked write was acknowledged: nothing was verified".to_string());
        }
        f
    }

    pub fn summary(&self) -> String {
        let secs = self.elapsed.as_secs_f64();
        let mut s = String::new();
        let _ = writeln!(s, "requests:        {}", self.requests);
        let _ = writeln!(s, "duration:        {secs:.1} s");
        let _ = writeln!(s, "requests/s:      {:.0}", self.requests as f64 / secs.max(1e-9));
        let _ = writeln!(s, "status codes:    {}", hist(&self.statuses));
        let _ = writeln!(s, "transport errs:  {}", hist(&self.transport_errors));
        for (k, ex) in &self.transport_examples {
            let _ = writeln!(s, "  first {k}: {}", ex.chars().take(300).collect::<String>());
        }
        let _ = writeln!(s, "watches cut:     {} (asked for no or a garbage timeout)", self.watches_cut);
        let _ = writeln!(s, "peak RSS:        {:.1} MiB", self.peak_rss as f64 / 1048576.0);
        let _ = writeln!(s, "final RSS:       {:.1} MiB", self.final_rss as f64 / 1048576.0);
        let _ = writeln!(s, "peak address space: {:.1} MiB", self.peak_vm as f64 / 1048576.0);
        let _ = writeln!(s, "5xx by path:     {}", hist(&self.by_label_5xx));
        let _ = writeln!(s, "documented 5xx:  {}", hist(&self.documented_5xx));
        let _ = writeln!(s, "undocumented 5xx: {}", self.undocumented_5xx.values().map(|(n, _)| n).sum::<u64>());
        for (k, (n, ex)) in &self.undocumented_5xx {
            let _ = writeln!(s, "  {k} x{n}: {ex}");
        }
        let _ = writeln!(
            s,
            "tracked writes:  {} acknowledged, {} uncertain; verified {} present ({} with an altered number) + {} deleted, {} failures, {} acknowledged with a number altered",
            self.tracked_acked,
            self.tracked_uncertain,
            self.verified_present,
            self.verified_drifted,
            self.verified_absent,
            self.verify_failures.len(),
            self.number_drift
        );
        let _ = writeln!(s, "server alive:    {}, panics in log: {}", self.server_alive, self.panics_in_log.len());
        if !self.attack_statuses.is_empty() {
            let total: u64 = self.attack_statuses.values().flat_map(|m| m.values()).sum();
            let _ = writeln!(
                s,
                "attacks:         {total} answered, {} unanswered, {} answered with more headers than hyper's HTTP/1.1 client reads, \
                 {} cut over HTTP/1.1 while sending a body past the limit",
                self.attack_unanswered, self.attack_heads_unread, self.attack_cut_mid_body
            );
            for (kind, m) in &self.attack_statuses {
                let (total, max) = self.attack_seconds.get(kind).copied().unwrap_or_default();
                let _ = writeln!(s, "  {kind:<32} {total:7.1} s in all, slowest {max:5.2} s; {}", hist(m));
            }
        }
        s
    }
}

#[derive(Debug, PartialEq)]
enum Same {
    Yes,
    /// Every number within 1e-14 relative of the expected one, some not equal.
    Drift,
    No,
}

fn compare(expected: &Value, got: &Value) -> Same {
    if expected == got {
        return Same::Yes;
    }
    let (Some(e), Some(g)) = (expected.as_object(), got.as_object()) else { return Same::No };
    if e.len() != g.len() {
        return Same::No;
    }
    // Numbers equal by value are the same: kube writes a whole 449.0 as 449.
    let equal = e.iter().all(|(k, ev)| match (ev.as_f64(), g.get(k).and_then(Value::as_f64)) {
        (Some(a), Some(b)) => a == b,
        _ => Some(ev) == g.get(k),
    });
    if equal {
        return Same::Yes;
    }
    let close = e.iter().all(|(k, ev)| match (ev.as_f64(), g.get(k).and_then(Value::as_f64)) {
        (Some(a), Some(b)) => a == b || ((a - b) / a).abs() < 1e-14,
        _ => false,
    });
    if close {
        Same::Drift
    } else {
        Same::No
    }
}

impl Report {
    fn drift(&mut self, what: String) {
        self.number_drift += 1;
        if self.number_drift_examples.len() < 5 {
            self.number_drift_examples.push(what);
        }
    }
}

fn hist<K: std::fmt::Display>(m: &BTreeMap<K, u64>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
}

/// RSS of a process in bytes (0 when it is gone).
pub fn rss_bytes(pid: u32) -> u64 {
    status_kb(pid, "VmRSS:") * 1024
}

/// The peak RSS of a process in bytes (its high-water mark since it started
/// or since [`reset_peak_rss`]).
pub fn hwm_bytes(pid: u32) -> u64 {
    status_kb(pid, "VmHWM:") * 1024
}

/// Sets a process's RSS high-water mark to its current RSS (Linux 4.0+).
pub fn reset_peak_rss(pid: u32) -> std::io::Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
}

fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()))
        })
        .unwrap_or(0)
}

/// The farm-apiserver process behind `pid`: itself, or, when `pid` is the
/// shell that ties a server to the test process (`Options::tie_to_test_process`),
/// its child of that name.
pub fn server_process(pid: u32) -> u32 {
    let comm = |p: u32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
    if comm(pid).trim() == "farm-apiserver" {
        return pid;
    }
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|c| c.parse::<u32>().ok())
        .find(|c| comm(*c).trim() == "farm-apiserver")
        .unwrap_or(pid)
}

/// Whether a process exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|s| !s.lines().any(|l| l.starts_with("State:") && l.contains('Z')))
        .unwrap_or(false)
}

/// HTTP/1.1 and HTTP/2 clients presenting the target's identity, and one
/// without it (ALPN picks HTTP/2).
/// `idle_http1` is how many idle HTTP/1.1 connections are kept for reuse:
/// 0 gives every request a connection of its own, so that a connection the
/// server closes fails only the request that made it close.
fn clients(target: &Target, idle_http1: usize) -> anyhow::Result<(reqwest::Client, reqwest::Client, reqwest::Client)> {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&target.ca_file)?)?;
    let build = |http1: Option<bool>, identity: bool| -> anyhow::Result<reqwest::Client> {
        let mut b = reqwest::Client::builder()
            .add_root_certificate(ca.clone())
            .redirect(reqwest::redirect::Policy::none())
            // Per request below: watches are cut sooner than other requests.
            .pool_max_idle_per_host(if http1 == Some(true) { idle_http1 } else { 64 });
        match http1 {
            Some(true) => b = b.http1_only(),
            // TLS with ALPN offering h2 only: every request on this client is HTTP/2.
            Some(false) => b = b.http2_prior_knowledge(),
            None => {}
        }
        if let (Some(id), true) = (&target.identity, identity) {
            b = b.identity(reqwest::Identity::from_pem(id)?);
        }
        Ok(b.build()?)
    };
    Ok((build(Some(true), true)?, build(Some(false), true)?, build(None, false)?))
}

/// Runs the fuzzer against `target` until `cfg.requests` are sent or
/// `cfg.duration` has passed, then verifies the tracked Llamas.
pub async fn run(target: &Target, cfg: &Config) -> anyhow::Result<Report> {
    let (h1, h2, anonymous) = clients(target, 64)?;
    // Attacks get connections of their own: see `Req::attack`.
    let (attack_h1, attack_h2, _) = clients(target, 0)?;
    let tracker = Arc::new(Mutex::new(Tracker::default()));
    let report = Arc::new(Mutex::new(Report { max_rss_bytes: cfg.max_rss_bytes, ..Default::default() }));
    if cfg.attack_share > 0.0 {
        let failures = create_attack_targets(&attack_h2, &target.base).await;
        report.lock().unwrap().attack_setup_failures = failures;
    }

    // RSS sampler: peak over the whole run.
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(rss_bytes(target.pid)));
    let sampler = {
        let (peak, pid) = (peak.clone(), target.pid);
        tokio::spawn(async move {
            loop {
                peak.fetch_max(rss_bytes(pid), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let started = Instant::now();
    let deadline = started + cfg.duration;
    let mut gen = Gen {
        rng: StdRng::seed_from_u64(cfg.seed),
        tracker: tracker.clone(),
        attack_share: cfg.attack_share,
        attack_scale: cfg.attack_scale,
    };
    let base = target.base.clone();
    let stream = futures::stream::iter(0..cfg.requests)
        .take_while(|_| futures::future::ready(Instant::now() < deadline))
        .map(|_| {
            let mut req = gen.request();
            req.anonymous &= target.identity.is_some();
            let client = match (req.attack, req.anonymous, req.http2) {
                (true, _, true) => attack_h2.clone(),
                (true, _, false) => attack_h1.clone(),
                (false, true, _) => anonymous.clone(),
                (false, false, true) => h2.clone(),
                (false, false, false) => h1.clone(),
            };
            let (base, report, tracker) = (base.clone(), report.clone(), tracker.clone());
            let (has_cluster, reviews) = (target.has_cluster, target.reviews);
            async move {
                let sent = Instant::now();
                let out = send(&client, &base, &req).await;
                if req.attack {
                    let took = sent.elapsed().as_secs_f64();
                    let mut r = report.lock().unwrap();
                    let t = r.attack_seconds.entry(req.label.clone()).or_default();
                    *t = (t.0 + took, t.1.max(took));
                }
                record(&req, &out, &report, has_cluster, reviews);
                if let Some(op) = &req.tracked {
                    settle(op, &req, &out, &tracker, &report);
                }
            }
        })
        .buffer_unordered(cfg.concurrency);
    let n = stream.count().await as u64;
    let elapsed = started.elapsed();
    sampler.abort();

    let mut rep = std::mem::take(&mut *report.lock().unwrap());
    rep.requests = n;
    rep.elapsed = elapsed;
    verify(&h2, target, &tracker, &mut rep).await;
    rep.oversized_objects = oversized_objects(&h2, &target.base).await;
    // The kernel's high-water mark catches a peak between two samples.
    rep.peak_rss =
        peak.load(std::sync::atomic::Ordering::Relaxed).max(rss_bytes(target.pid)).max(hwm_bytes(target.pid));
    rep.final_rss = rss_bytes(target.pid);
    rep.peak_vm = status_kb(target.pid, "VmPeak:") * 1024;
    rep.server_alive = alive(target.pid);
    let log = std::fs::read_to_string(&target.log_file).unwrap_or_default();
    // A Rust process that cannot allocate prints this and aborts (under the
    // harness's address-space cap, the sign of a runaway allocation).
    rep.panics_in_log = log
        .lines()
        .filter(|l| l.contains("panicked") || l.contains("memory allocation of"))
        .take(20)
        .map(str::to_string)
        .collect();
    let t = tracker.lock().unwrap();
    rep.tracked_acked = t.acked;
    rep.tracked_uncertain = t.uncertain;
    Ok(rep)
}

/// `s` up to `max` characters, and how long it was when cut.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    format!("{}... ({} bytes)", s.chars().take(max).collect::<String>(), s.len())
}

/// Creates the attacked Llamas; the failures, one line each.
async fn create_attack_targets(client: &reqwest::Client, base: &str) -> Vec<String> {
    let mut failures = Vec::new();
    for name in attack::TARGETS {
        let url = format!("{base}{}", attack::collection());
        let sent = client
            .post(&url)
            .header("content-type", "application/json")
            .body(attack::seed_body(name))
            .timeout(Duration::from_secs(30))
            .send()
            .await;
        match sent {
            Ok(r) if r.status().as_u16() == 201 || r.status().as_u16() == 409 => {}
            Ok(r) => failures.push(format!("POST {url} ({name}): {}", r.status())),
            Err(e) => failures.push(format!("POST {url} ({name}): {e}")),
        }
    }
    failures
}

/// Llamas anywhere whose JSON is larger than the server's default
/// `--max-object-bytes`: no write may have stored one.
async fn oversized_objects(client: &reqwest::Client, base: &str) -> Vec<String> {
    const MAX_OBJECT_BYTES: usize = 1_572_864;
    let url = format!("{base}{GROUP}/llamas");
    let list = match client.get(&url).timeout(Duration::from_secs(60)).send().await {
        Ok(r) => r.json::<Value>().await.unwrap_or(Value::Null),
        Err(e) => return vec![format!("LIST {url}: {e}")],
    };
    let Some(items) = list["items"].as_array() else { return vec![format!("LIST {url}: no items")] };
    items
        .iter()
        .filter_map(|item| {
            let len = serde_json::to_vec(item).map(|b| b.len()).unwrap_or(0);
            (len > MAX_OBJECT_BYTES)
                .then(|| format!("{}/{}: {len} bytes", item["metadata"]["namespace"], item["metadata"]["name"]))
        })
        .collect()
}

/// The worst growth of the server's peak RSS that one kind of attacking
/// request caused, measured one request at a time.
#[derive(Debug, Default)]
pub struct Amplification {
    pub kind: String,
    pub samples: u64,
    /// The largest peak-RSS growth divided by the request's size, among
    /// requests that grew it by at least [`AMPLIFICATION_MIN_GROWTH`] (below
    /// that, a page or an allocator's arena growing would dominate the ratio
    /// of a small request).
    pub worst_ratio: f64,
    /// The size of that request, its growth and the request.
    pub ratio_request_bytes: usize,
    pub ratio_growth: u64,
    pub ratio_example: String,
    /// The largest growth at any request size, and that request's size.
    pub worst_growth: u64,
    pub growth_request_bytes: usize,
    /// Status codes; 0 for an HTTP/1.1 answer with more header fields than
    /// hyper's client reads (see `Report::attack_heads_unread`).
    pub statuses: BTreeMap<u16, u64>,
    pub unanswered: u64,
    /// The slowest request's seconds and size (a CPU cost out of proportion shows here).
    pub slowest_seconds: f64,
    pub slowest_request_bytes: usize,
}

pub const AMPLIFICATION_MIN_GROWTH: u64 = 1 << 20;

/// What a request weighs on the wire: body, request line and headers.
fn request_bytes(req: &Req) -> usize {
    req.body.as_ref().map_or(0, Vec::len)
        + req.path.len()
        + req.query.len()
        + req.headers.iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum::<usize>()
}

/// Sends `samples` requests of attack `kind`, one at a time, and measures
/// how much each raises the server's peak RSS: the high-water mark is reset
/// to the current RSS before each request (`/proc/<pid>/clear_refs`) and read
/// after its answer. The attacked Llamas are created first. A measure of
/// what one request can make the server hold at once, not of leaks; memory
/// the allocator kept from an earlier request and reuses is not counted, so
/// run it against a fresh server per kind.
pub async fn amplification(target: &Target, kind: Attack, seed: u64, samples: u64) -> anyhow::Result<Amplification> {
    let (h1, h2, _) = clients(target, 0)?;
    let failures = create_attack_targets(&h2, &target.base).await;
    anyhow::ensure!(failures.is_empty(), "creating the attacked Llamas: {failures:?}");
    let mut gen =
        Gen { rng: StdRng::seed_from_u64(seed), tracker: Default::default(), attack_share: 1.0, attack_scale: 1.0 };
    let mut amp = Amplification { kind: kind.name().to_string(), ..Default::default() };
    for _ in 0..samples {
        anyhow::ensure!(alive(target.pid), "the server died during {} (seed {seed})", kind.name());
        let req = gen.attack_of(kind);
        reset_peak_rss(target.pid)?;
        let before = rss_bytes(target.pid);
        let sent = Instant::now();
        let out = send(if req.http2 { &h2 } else { &h1 }, &target.base, &req).await;
        let took = sent.elapsed().as_secs_f64();
        let growth = hwm_bytes(target.pid).saturating_sub(before);
        let size = request_bytes(&req);
        amp.samples += 1;
        if took > amp.slowest_seconds {
            amp.slowest_seconds = took;
            amp.slowest_request_bytes = size;
        }
        match out {
            Outcome::Answered { status, .. } | Outcome::WatchCut { status } => {
                *amp.statuses.entry(status).or_default() += 1
            }
            // See `Report::attack_heads_unread`.
            Outcome::Transport(kind) if !req.http2 && kind.ends_with("message head is too large") => {
                *amp.statuses.entry(0).or_default() += 1
            }
            Outcome::Hang | Outcome::Transport(_) => amp.unanswered += 1,
        }
        if growth > amp.worst_growth {
            amp.worst_growth = growth;
            amp.growth_request_bytes = size;
        }
        let ratio = growth as f64 / size as f64;
        if growth >= AMPLIFICATION_MIN_GROWTH && ratio > amp.worst_ratio {
            amp.worst_ratio = ratio;
            amp.ratio_request_bytes = size;
            amp.ratio_growth = growth;
            amp.ratio_example = describe(&req);
        }
    }
    anyhow::ensure!(alive(target.pid), "the server died during {} (seed {seed})", kind.name());
    Ok(amp)
}

/// The answer to one request.
enum Outcome {
    Answered {
        status: u16,
        body: Vec<u8>,
    },
    /// A watch the client stopped reading (it was told to or may run long).
    WatchCut {
        status: u16,
    },
    Hang,
    Transport(String),
}

async fn send(client: &reqwest::Client, base: &str, req: &Req) -> Outcome {
    let url =
        if req.query.is_empty() { format!("{base}{}", req.path) } else { format!("{base}{}?{}", req.path, req.query) };
    let mut rb = client.request(req.method.clone(), &url);
    for (k, v) in &req.headers {
        rb = rb.header(k.clone(), v.clone());
    }
    if let Some(b) = &req.body {
        rb = rb.body(b.clone());
    }
    let limit = if req.watch { WATCH_CUT } else { HANG };
    // The status of a watch cut while streaming: its headers had arrived.
    let seen = std::sync::atomic::AtomicU16::new(0);
    let work = async {
        let resp = rb.send().await?;
        let status = resp.status().as_u16();
        seen.store(status, std::sync::atomic::Ordering::Relaxed);
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            // Keep the start of a body: enough for a Status, not a whole list.
            if body.len() < 64 * 1024 {
                body.extend_from_slice(&chunk[..chunk.len().min(64 * 1024)]);
            }
        }
        Ok::<_, reqwest::Error>((status, body))
    };
    match tokio::time::timeout(limit, work).await {
        Ok(Ok((status, body))) => Outcome::Answered { status, body },
        Ok(Err(e)) => Outcome::Transport(error_kind(&e)),
        Err(_) if req.watch => Outcome::WatchCut { status: seen.load(std::sync::atomic::Ordering::Relaxed) },
        Err(_) => Outcome::Hang,
    }
}

fn error_kind(e: &reqwest::Error) -> String {
    let mut kind = if e.is_connect() {
        "connect".to_string()
    } else if e.is_body() || e.is_decode() {
        "body".to_string()
    } else if e.is_request() {
        "request".to_string()
    } else {
        "other".to_string()
    };
    // The innermost cause names what really happened (reset, protocol error...).
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut last = None;
    while let Some(s) = src {
        last = Some(s.to_string());
        src = s.source();
    }
    if let Some(l) = last {
        kind.push_str(": ");
        kind.push_str(&l.chars().take(80).collect::<String>());
    }
    kind
}

fn describe(req: &Req) -> String {
    let mut s = format!("{} {}", req.method, req.path);
    if !req.query.is_empty() {
        s.push('?');
        s.push_str(&cut(&req.query, 300));
    }
    s.push_str(match (req.anonymous, req.http2) {
        (true, _) => " (no client certificate)",
        (false, true) => " (HTTP/2)",
        (false, false) => " (HTTP/1.1)",
    });
    for (k, v) in req.headers.iter().take(10) {
        let _ = write!(s, " [{k}: {}]", cut(&String::from_utf8_lossy(v.as_bytes()), 200));
    }
    if req.headers.len() > 10 {
        let _ = write!(s, " [{} more headers]", req.headers.len() - 10);
    }
    if let Some(b) = &req.body {
        let shown = String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned();
        let _ = write!(s, " body({} bytes): {shown}", b.len());
    }
    s
}

/// The reason and message of a Status body: JSON, or YAML when the request
/// accepted only that. A body cut at the 64 KiB the client keeps (a message
/// listing thousands of fields) is read up to the cut.
fn status_of(body: &[u8]) -> (String, String) {
    let v: Value = serde_json::from_slice(body).or_else(|_| serde_norway::from_slice(body)).unwrap_or(Value::Null);
    if v.is_object() {
        let field = |k: &str| v[k].as_str().unwrap_or("").to_string();
        return (field("reason"), field("message"));
    }
    let text = String::from_utf8_lossy(body);
    // The prefix of a JSON string field as it was sent (escapes kept).
    let field = |k: &str| -> String {
        let key = format!("\"{k}\":\"");
        text.find(&key)
            .map(|at| {
                let rest = &text[at + key.len()..];
                let mut end = rest.len();
                let mut escaped = false;
                for (i, c) in rest.char_indices() {
                    match c {
                        '\\' if !escaped => escaped = true,
                        '"' if !escaped => {
                            end = i;
                            break;
                        }
                        _ => escaped = false,
                    }
                }
                rest[..end].to_string()
            })
            .unwrap_or_default()
    };
    (field("reason"), field("message"))
}

fn record(req: &Req, out: &Outcome, report: &Mutex<Report>, has_cluster: bool, reviews: bool) {
    let mut r = report.lock().unwrap();
    if req.attack {
        let status = match out {
            Outcome::Answered { status, .. } | Outcome::WatchCut { status } => Some(*status),
            Outcome::Hang | Outcome::Transport(_) => None,
        };
        let unread_head =
            !req.http2 && matches!(out, Outcome::Transport(kind) if kind.ends_with("message head is too large"));
        let cut_mid_body = !req.http2
            && matches!(out, Outcome::Transport(_))
            && req.body.as_ref().is_some_and(|b| b.len() > SERVER_MAX_BODY_BYTES);
        match status {
            Some(s) => *r.attack_statuses.entry(req.label.clone()).or_default().entry(s).or_default() += 1,
            None if unread_head => r.attack_heads_unread += 1,
            None if cut_mid_body => r.attack_cut_mid_body += 1,
            None => {
                r.attack_unanswered += 1;
                if r.attack_unanswered_examples.len() < 5 {
                    let why = match out {
                        Outcome::Transport(kind) => kind.clone(),
                        _ => "no answer".into(),
                    };
                    let example = format!("{why}: {}", describe(req));
                    r.attack_unanswered_examples.push(example);
                }
            }
        }
    }
    match out {
        Outcome::Answered { status, body } => {
            *r.statuses.entry(*status).or_default() += 1;
            if *status >= 500 {
                *r.by_label_5xx.entry(format!("{status} {} {}", req.method, req.label)).or_default() += 1;
                let (reason, message) = status_of(body);
                let (reason, message) = (reason.as_str(), message.as_str());
                let head = req.method == Method::HEAD;
                let farmpods = req.path.contains("/farmpods");
                let documented = match status {
                    504 => reason == "Timeout" || head,
                    503 => !has_cluster && farmpods && (reason == "ServiceUnavailable" || head),
                    // A review that could not be made; never the panic handler's message.
                    500 if reviews && reason == "InternalError" => !message.contains("could not serve the request"),
                    // An applied configuration with fields the schema does not
                    // declare: kube's own 500 without a reason.
                    500 => {
                        reason.is_empty()
                            && (message.starts_with("failed to create typed patch object")
                                // An object past --max-object-bytes, in etcd's (and kube's) words.
                                || message == "etcdserver: request is too large")
                    }
                    _ => false,
                };
                if documented {
                    // Without a reason, the start of the message tells them apart.
                    let what = if reason.is_empty() { cut(message, 40) } else { reason.to_string() };
                    *r.documented_5xx.entry(format!("{status} {what}")).or_default() += 1;
                } else {
                    let key = format!("{status} {reason} {} {}", req.method, req.label);
                    let example = format!(
                        "{} -> {status} {}",
                        describe(req),
                        String::from_utf8_lossy(&body[..body.len().min(400)])
                    );
                    r.undocumented_5xx.entry(key).or_insert((0, example)).0 += 1;
                }
            }
        }
        Outcome::WatchCut { status } => {
            r.watches_cut += 1;
            if *status != 0 {
                *r.statuses.entry(*status).or_default() += 1;
            }
        }
        Outcome::Hang => {
            if r.hangs.len() < 20 {
                r.hangs.push(describe(req));
            }
        }
        Outcome::Transport(kind) => {
            *r.transport_errors.entry(kind.clone()).or_default() += 1;
            r.transport_examples.entry(kind.clone()).or_insert_with(|| describe(req));
        }
    }
}

/// Updates the tracker with the answer to a tracked write.
fn settle(op: &TrackedOp, req: &Req, out: &Outcome, tracker: &Mutex<Tracker>, report: &Mutex<Report>) {
    let name = op.name().to_string();
    let mut t = tracker.lock().unwrap();
    t.busy.remove(&name);
    let new = match out {
        Outcome::Answered { status, body } if (200..300).contains(status) => {
            let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            match op {
                TrackedOp::Delete { .. } => Expect::Absent,
                TrackedOp::Create { spec, .. } | TrackedOp::Update { spec, .. } => {
                    let what =
                        || format!("{} answered {status} with spec {} instead of {spec}", describe(req), v["spec"]);
                    match compare(spec, &v["spec"]) {
                        Same::Yes => {}
                        Same::Drift => report.lock().unwrap().drift(what()),
                        Same::No => report.lock().unwrap().verify_failures.push(what()),
                    }
                    let rv = v["metadata"]["resourceVersion"].as_str().unwrap_or("").to_string();
                    Expect::Present { spec: spec.clone(), rv }
                }
            }
        }
        // Overload and deadlines are documented answers; the write may or may not have happened.
        Outcome::Answered { status: 429 | 504, .. } | Outcome::Transport(_) | Outcome::Hang => Expect::Unknown,
        Outcome::Answered { status, body } => {
            let mut r = report.lock().unwrap();
            if r.tracked_refused.len() < 20 {
                r.tracked_refused.push(format!(
                    "{} -> {status} {}",
                    describe(req),
                    String::from_utf8_lossy(&body[..body.len().min(400)])
                ));
            }
            Expect::Unknown
        }
        Outcome::WatchCut { .. } => Expect::Unknown,
    };
    if new == Expect::Unknown {
        t.uncertain += 1;
    } else {
        t.acked += 1;
    }
    t.objects.insert(name, new);
}

/// Reads every tracked Llama back and lists their namespace.
async fn verify(client: &reqwest::Client, target: &Target, tracker: &Mutex<Tracker>, rep: &mut Report) {
    let objects: Vec<(String, Expect)> =
        tracker.lock().unwrap().objects.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let base = &target.base;
    let results: Vec<Result<u8, String>> = futures::stream::iter(objects.iter())
        .map(|(name, expect)| async move {
            if *expect == Expect::Unknown {
                return Ok(0);
            }
            let url = format!("{base}{GROUP}/namespaces/{TRACKED_NS}/llamas/{name}");
            let resp = client
                .get(&url)
                .timeout(Duration::from_secs(30))
                .send()
                .await
                .map_err(|e| format!("GET {url}: {e}"))?;
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            match (expect, status) {
                (Expect::Present { spec, .. }, 200) => match compare(spec, &body["spec"]) {
                    Same::Yes => Ok(1),
                    Same::Drift => Ok(3),
                    Same::No => Err(format!("{name}: expected {expect:?}, got {status} {body}")),
                },
                (Expect::Absent, 404) => Ok(2),
                _ => Err(format!("{name}: expected {expect:?}, got {status} {body}")),
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for r in results {
        match r {
            Ok(1) => rep.verified_present += 1,
            Ok(2) => rep.verified_absent += 1,
            Ok(3) => {
                // Present, with the altered number its write was acknowledged with (counted there).
                rep.verified_present += 1;
                rep.verified_drifted += 1;
            }
            Ok(_) => {}
            Err(e) => rep.verify_failures.push(e),
        }
    }
    // The list agrees with the single reads: nothing extra, nothing missing.
    let url = format!("{base}{GROUP}/namespaces/{TRACKED_NS}/llamas");
    match client.get(&url).timeout(Duration::from_secs(60)).send().await {
        Ok(resp) => {
            let list: Value = resp.json().await.unwrap_or(Value::Null);
            let listed: HashMap<String, Value> = list["items"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .map(|i| (i["metadata"]["name"].as_str().unwrap_or("").to_string(), i["spec"].clone()))
                        .collect()
                })
                .unwrap_or_default();
            for (name, expect) in &objects {
                match (expect, listed.get(name)) {
                    (Expect::Present { spec, .. }, Some(s)) if compare(spec, s) != Same::No => {}
                    (Expect::Absent, None) | (Expect::Unknown, _) => {}
                    (e, got) => rep.verify_failures.push(format!("list: {name} expected {e:?}, listed {got:?}")),
                }
            }
            for name in listed.keys() {
                if !objects.iter().any(|(n, _)| n == name) {
                    rep.verify_failures.push(format!("list: {name} was never written by the fuzzer"));
                }
            }
        }
        Err(e) => rep.verify_failures.push(format!("LIST {url}: {e}")),
    }
}

struct Gen {
    rng: StdRng,
    tracker: Arc<Mutex<Tracker>>,
    attack_share: f64,
    attack_scale: f64,
}

const QUERY_KEYS: &[&str] = &[
    "watch",
    "labelSelector",
    "fieldSelector",
    "limit",
    "continue",
    "resourceVersion",
    "resourceVersionMatch",
    "timeoutSeconds",
    "dryRun",
    "fieldManager",
    "fieldValidation",
    "timeout",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "propagationPolicy",
    "gracePeriodSeconds",
    "force",
    "pretty",
    "orphanDependents",
    "verbose",
    "exclude",
];

const ACCEPTS: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/json;as=Table;v=v1;g=meta.k8s.io",
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
    "application/json;as=Table;v=v1;g=meta.k8s.io, application/json",
    "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
    "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
    "application/yaml;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer",
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v3@v1.0+protobuf",
    "*/*",
    "application/*",
    "text/html",
    "text/plain;q=0.5, application/json;q=0.9",
    "application/json;q=0",
    "application/json;as=Table;v=v9;g=meta.k8s.io",
    "application/json;as=Table;v=v1;g=meta.k8s.io;includeObject=Object",
    "application/json;as=Table;v=v1;g=meta.k8s.io;includeObject=None",
    "",
    ";;;",
    "application/json;as=",
];

const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/json; charset=utf-8",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/apply-patch+cbor",
    "application/cbor",
    "text/plain",
    "multipart/form-data; boundary=x",
    "application/json;;",
    "",
];

impl Gen {
    fn pick<'a>(&mut self, xs: &'a [&'a str]) -> &'a str {
        xs.choose(&mut self.rng).copied().unwrap_or("")
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn request(&mut self) -> Req {
        if self.attack_share > 0.0 && self.chance(self.attack_share) {
            return self.attack();
        }
        if self.chance(0.05) {
            if let Some(req) = self.tracked() {
                return req;
            }
        }
        let (path, label, item_name, ns) = self.path();
        let method = self.method(&label);
        let mut query = self.query(&label, &method);
        let is_watch = query.iter().any(|(k, v)| k == "watch" && v != "false" && v != "0" && !v.is_empty());
        // Keep watches short: most ask to end after a second.
        if is_watch && !query.iter().any(|(k, _)| k == "timeoutSeconds") && self.chance(0.9) {
            query.push(("timeoutSeconds".into(), "1".into()));
        }
        // A cluster-wide deletecollection must not remove the tracked Llamas.
        if method == Method::DELETE && label == "llamas/cluster" {
            query.retain(|(k, _)| k != "labelSelector");
            query.push(("labelSelector".into(), format!("{}!={}", TRACKED_LABEL.0, TRACKED_LABEL.1)));
        }
        let query = self.encode_query(&query);
        let body = self.body(&method, &label, item_name.as_deref(), ns.as_deref());
        let headers = self.headers(body.is_some(), &method);
        let watch = is_watch || query.contains("watch");
        let (http2, anonymous) = (self.chance(0.5), self.chance(0.2));
        Req { method, path, query, headers, body, label, watch, http2, anonymous, tracked: None, attack: false }
    }

    /// A well-formed write to a tracked Llama, or None when all are busy.
    fn tracked(&mut self) -> Option<Req> {
        let tracker = self.tracker.clone();
        let mut t = tracker.lock().unwrap();
        let present: Vec<(String, String)> = t
            .objects
            .iter()
            .filter(|(n, _)| !t.busy.contains(*n))
            .filter_map(|(n, e)| match e {
                Expect::Present { rv, .. } => Some((n.clone(), rv.clone())),
                _ => None,
            })
            .collect();
        let spec = json!({"weight": self.number(), "height": self.number()});
        // Expected as serde_json parses the text sent: its default float parser
        // can be one ulp off, identically for the same text read back.
        let spec: Value = serde_json::from_slice(&serde_json::to_vec(&spec).unwrap()).unwrap();
        let labels = json!({TRACKED_LABEL.0: TRACKED_LABEL.1});
        let coll = format!("{GROUP}/namespaces/{TRACKED_NS}/llamas");
        let json_headers = |ct: &str| {
            vec![
                (HeaderName::from_static("content-type"), HeaderValue::from_str(ct).unwrap()),
                (HeaderName::from_static("accept"), HeaderValue::from_static("application/json")),
            ]
        };
        // Past the cap, deleted names are created again, so creates never stop.
        let deleted: Vec<String> = t
            .objects
            .iter()
            .filter(|(n, e)| **e == Expect::Absent && !t.busy.contains(*n))
            .map(|(n, _)| n.clone())
            .collect();
        let can_create = t.created < MAX_TRACKED || !deleted.is_empty();
        let create = can_create && (present.len() < 50 || self.rng.random_bool(0.3));
        let (op, method, path, query, headers, body) = if create || present.is_empty() {
            if !can_create {
                return None;
            }
            let name = if t.created < MAX_TRACKED {
                t.created += 1;
                format!("t-{}", t.created - 1)
            } else {
                deleted.choose(&mut self.rng).cloned().unwrap()
            };
            let obj = json!({"apiVersion": API_VERSION, "kind": "Llama",
                "metadata": {"name": name, "labels": labels}, "spec": spec});
            let body = serde_json::to_vec(&obj).unwrap();
            (
                TrackedOp::Create { name, spec },
                Method::POST,
                coll,
                String::new(),
                json_headers("application/json"),
                body,
            )
        } else {
            let (name, rv) = present.choose(&mut self.rng).cloned().unwrap();
            let item = format!("{coll}/{name}");
            match self.rng.random_range(0..10) {
                0..=2 => {
                    let body = serde_json::to_vec(&json!({"spec": spec})).unwrap();
                    let h = json_headers("application/merge-patch+json");
                    (TrackedOp::Update { name, spec }, Method::PATCH, item, String::new(), h, body)
                }
                3..=5 => {
                    let obj = json!({"apiVersion": API_VERSION, "kind": "Llama",
                        "metadata": {"name": name, "namespace": TRACKED_NS, "labels": labels, "resourceVersion": rv},
                        "spec": spec});
                    let body = serde_json::to_vec(&obj).unwrap();
                    let h = json_headers("application/json");
                    (TrackedOp::Update { name, spec }, Method::PUT, item, String::new(), h, body)
                }
                // Server-side apply is refused (415, as for custom resources): not a tracked write.
                6..=8 => {
                    let body = serde_json::to_vec(&json!([
                        {"op": "replace", "path": "/spec/weight", "value": spec["weight"]},
                        {"op": "replace", "path": "/spec/height", "value": spec["height"]}
                    ]))
                    .unwrap();
                    let h = json_headers("application/json-patch+json");
                    (TrackedOp::Update { name, spec }, Method::PATCH, item, String::new(), h, body)
                }
                _ => (
                    TrackedOp::Delete { name },
                    Method::DELETE,
                    item,
                    String::new(),
                    json_headers("application/json"),
                    Vec::new(),
                ),
            }
        };
        t.busy.insert(op.name().to_string());
        let body = if body.is_empty() { None } else { Some(body) };
        Some(Req {
            method,
            path,
            query,
            headers,
            body,
            label: "tracked".into(),
            watch: false,
            http2: self.rng.random_bool(0.5),
            anonymous: false,
            tracked: Some(op),
            attack: false,
        })
    }

    /// A positive finite number as JSON: integers, decimals, tiny and large ones.
    fn number(&mut self) -> Value {
        match self.rng.random_range(0..4) {
            0 => json!(self.rng.random_range(1..100_000u64)),
            1 => json!((self.rng.random_range(1..1_000_000u64) as f64) / 1000.0),
            2 => json!(self.rng.random_range(1e-6..1e6f64)),
            _ => json!(self.rng.random_range(1.0..1e300f64)),
        }
    }

    fn name(&mut self) -> String {
        if self.chance(0.85) {
            return self.pick(NAMES).to_string();
        }
        self.garbage_segment()
    }

    fn namespace(&mut self) -> String {
        if self.chance(0.9) {
            return self.pick(NAMESPACES).to_string();
        }
        self.garbage_segment()
    }

    /// A path segment that is not a valid name: never the tracked namespace,
    /// which is lowercase letters and digits with dashes, 16 characters long.
    fn garbage_segment(&mut self) -> String {
        match self.rng.random_range(0..10) {
            0 => "UPPER".into(),
            1 => "%FF%FE".into(),
            2 => "a".repeat(self.rng.random_range(64..400)),
            3 => "..".into(),
            4 => "-lead".into(),
            5 => "%2e%2e%2fetc".into(),
            6 => "%00".into(),
            7 => "na%20me".into(),
            8 => String::new(),
            _ => "é✓".into(),
        }
    }

    /// (path, label, the item name in the path if any, the namespace if any).
    fn path(&mut self) -> (String, String, Option<String>, Option<String>) {
        let r = self.rng.random_range(0..100);
        let (path, label, name, ns) = if r < 12 {
            let p = self.pick(&[
                "/apis",
                "/apis/",
                "/apis/farm.example.com",
                "/apis/farm.example.com/v1alpha",
                "/apis/farm.example.com/v1alpha/",
                "/apis/farm.example.com/v2",
                "/apis/other.example.com/v1",
                "/api",
                "/api/v1",
                "/version",
                "/",
                "/openapi/v2",
                "/openapi/v3",
                "/openapi/v3/apis/farm.example.com/v1alpha",
                "/openapi/v3/apis/farm.example.com/v1alpha?hash=abc",
                "/openapi/v3/apis/nope/v1",
                "/metrics",
            ]);
            let (p, q) = p.split_once('?').unwrap_or((p, ""));
            let _ = q;
            (p.to_string(), format!("static {p}"), None, None)
        } else if r < 18 {
            let probe = self.pick(&["/healthz", "/livez", "/readyz"]);
            let sub = self.pick(&["", "", "/ping", "/log", "/etcd", "/farmpod-cache", "/x", "/ping/more", "/"]);
            (format!("{probe}{sub}"), format!("probe {probe}"), None, None)
        } else {
            let resource = if self.chance(0.7) {
                "llamas"
            } else if self.chance(0.8) {
                "farmpods"
            } else {
                self.pick(&["ll", "fp", "Llamas", "llama", "pods", "llamas.farm.example.com"])
            };
            let ns = if self.chance(0.75) { Some(self.namespace()) } else { None };
            let scope = if ns.is_some() { "ns" } else { "cluster" };
            let mut path = GROUP.to_string();
            if let Some(ns) = &ns {
                path.push_str("/namespaces/");
                path.push_str(ns);
            }
            path.push('/');
            path.push_str(resource);
            let shape = self.rng.random_range(0..10);
            let (name, label) = if shape < 4 {
                (None, format!("{resource}/{scope}"))
            } else {
                let name = self.name();
                path.push('/');
                path.push_str(&name);
                if shape < 8 {
                    (Some(name), format!("{resource}/{scope}/item"))
                } else {
                    let sub = self.pick(&["status", "status", "scale", "x", "status/more"]);
                    path.push('/');
                    path.push_str(sub);
                    (Some(name), format!("{resource}/{scope}/item/{sub}"))
                }
            };
            (path, label, name, ns)
        };
        // Occasional path mangling the router must survive.
        let path = if self.chance(0.03) {
            match self.rng.random_range(0..5) {
                0 => path.replacen('/', "//", 2),
                1 => format!("{path}/"),
                2 => path.replace("farm.example.com", "FARM.example.com"),
                3 => format!("{path}/%ZZ"),
                _ => format!("{path}/{}", "x/".repeat(self.rng.random_range(1..200))),
            }
        } else {
            path
        };
        (path, label, name, ns)
    }

    fn method(&mut self, label: &str) -> Method {
        // Reads are the common case on a real server; writes go mostly where they can succeed.
        let weights: &[(&str, u32)] = if label.starts_with("llamas") {
            &[
                ("GET", 30),
                ("POST", 14),
                ("PUT", 12),
                ("PATCH", 18),
                ("DELETE", 8),
                ("HEAD", 4),
                ("OPTIONS", 3),
                ("X", 1),
            ]
        } else {
            &[("GET", 60), ("POST", 8), ("PUT", 5), ("PATCH", 5), ("DELETE", 5), ("HEAD", 8), ("OPTIONS", 5), ("X", 1)]
        };
        let total: u32 = weights.iter().map(|w| w.1).sum();
        let mut x = self.rng.random_range(0..total);
        for (m, w) in weights {
            if x < *w {
                return match *m {
                    "X" => Method::from_bytes(self.pick(&["TRACE", "FOO", "PROPFIND", "get"]).as_bytes()).unwrap(),
                    m => Method::from_bytes(m.as_bytes()).unwrap(),
                };
            }
            x -= w;
        }
        Method::GET
    }

    fn query(&mut self, label: &str, method: &Method) -> Vec<(String, String)> {
        let mut q = Vec::new();
        let n = if label.starts_with("probe") { self.rng.random_range(0..2) } else { self.rng.random_range(0..5) };
        if label.starts_with("probe") && self.chance(0.5) {
            q.push(("verbose".to_string(), String::new()));
        }
        for _ in 0..n {
            let key = if self.chance(0.95) { self.pick(QUERY_KEYS).to_string() } else { self.garbage_text(20) };
            let value = self.query_value(&key, method);
            q.push((key, value));
        }
        q
    }

    fn query_value(&mut self, key: &str, method: &Method) -> String {
        if self.chance(0.15) {
            return self.garbage_text(40);
        }
        let v: &[&str] = match key {
            "watch" => &["true", "1", "false", "0", "True", "yes", ""],
            "labelSelector" => &[
                "app=web",
                "app in (a,b),tier!=x",
                "!gone",
                "x",
                "a=b,c",
                "soak=tracked",
                "in (",
                "a==b",
                "app notin ()",
                "example.com/k8s-_.x=v",
                "a=b=c",
            ],
            "fieldSelector" => &[
                "metadata.name=dolly",
                "metadata.namespace!=default",
                "spec.weight=31.4",
                "spec.nodeName=node-a",
                "status.phase=Running",
                "spec.nope=x",
                "metadata.name==a",
                "metadata.name",
                "metadata.name=a,metadata.namespace=b",
            ],
            "limit" => &["1", "2", "500", "0", "-1", "99999999999999999999", "x", "1.5"],
            "continue" => &["", "eyJydiI6MTAsInN0YXJ0IjoiYSJ9", "garbage", "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTF9", "%%%"],
            "resourceVersion" => &["0", "1", "", "999999999", "-1", "abc", "18446744073709551616", "00"],
            "resourceVersionMatch" => &["NotOlderThan", "Exact", "", "exact", "Bogus"],
            "timeoutSeconds" => &["1", "1", "0", "-5", "x", "99999999999999999999"],
            "dryRun" => &["All", "", "all", "Some", "All,All"],
            "fieldManager" => &["soak", "", "kubectl-client-side-apply", "x\u{7f}", "long-manager-name-that-goes-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-beyond-128"],
            "fieldValidation" => &["Strict", "Warn", "Ignore", "", "strict", "Bogus"],
            "timeout" => &["1s", "1ms", "30s", "0", "-1s", "x", "1h", "1e9h"],
            "allowWatchBookmarks" | "sendInitialEvents" | "force" | "pretty" | "orphanDependents" => {
                &["true", "false", "1", "", "maybe"]
            }
            "propagationPolicy" => &["Foreground", "Background", "Orphan", "", "Sideways"],
            "gracePeriodSeconds" => &["0", "30", "-1", "x", "99999999999999999999"],
            "verbose" | "exclude" => &["", "ping", "etcd", "farmpod-cache", "x"],
            _ => &["", "1", "x"],
        };
        let _ = method;
        self.pick(v).to_string()
    }

    fn encode_query(&mut self, q: &[(String, String)]) -> String {
        let raw = self.chance(0.05);
        q.iter()
            .map(|(k, v)| {
                if raw {
                    // Unescaped: '=' and '&' inside values, stray percent signs.
                    format!("{k}={v}")
                } else if v.is_empty() && self.rng.random_bool(0.3) {
                    pct(k)
                } else {
                    format!("{}={}", pct(k), pct(v))
                }
            })
            .collect::<Vec<_>>()
            .join("&")
    }

    fn garbage_text(&mut self, max: usize) -> String {
        let len = self.rng.random_range(0..max);
        let alphabet: &[char] = &[
            'a', 'Z', '0', '=', '&', '%', ' ', '/', '\\', '"', '\'', '(', ')', ',', '!', 'é', '\u{0}', '\u{202e}',
            '🦙', '\n',
        ];
        (0..len).map(|_| *alphabet.choose(&mut self.rng).unwrap()).collect()
    }

    fn headers(&mut self, has_body: bool, method: &Method) -> Vec<(HeaderName, HeaderValue)> {
        let mut h: Vec<(HeaderName, HeaderValue)> = Vec::new();
        let hv = |s: &str| HeaderValue::from_str(s).unwrap_or(HeaderValue::from_static("x"));
        if self.chance(0.85) {
            let a = self.pick(ACCEPTS);
            h.push((HeaderName::from_static("accept"), hv(a)));
        }
        if has_body || self.chance(0.05) {
            let ct = if method == Method::PATCH && self.chance(0.7) {
                self.pick(&[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/strategic-merge-patch+json",
                    "application/apply-patch+yaml",
                ])
            } else {
                self.pick(CONTENT_TYPES)
            };
            if !ct.is_empty() {
                h.push((HeaderName::from_static("content-type"), hv(ct)));
            }
        }
        // Identity headers: all are ignored or refused without the right certificate.
        if self.chance(0.15) {
            let (k, v) = *[
                ("authorization", "Bearer garbage"),
                ("authorization", "Bearer "),
                ("authorization", "Basic YWRtaW46YWRtaW4="),
                ("authorization", "Negotiate x"),
                ("impersonate-user", "system:admin"),
                ("impersonate-user", ""),
                ("impersonate-group", "system:masters"),
                ("impersonate-uid", "1234"),
                ("impersonate-extra-scopes", "view"),
                ("x-remote-user", "system:admin"),
                ("x-remote-group", "system:masters"),
                ("x-remote-extra-scopes", "all"),
                ("x-remote-uid", "0"),
            ]
            .choose(&mut self.rng)
            .unwrap();
            h.push((HeaderName::from_static(k), hv(v)));
            if k == "impersonate-group" && self.chance(0.5) {
                h.push((HeaderName::from_static("impersonate-user"), hv("someone")));
            }
        }
        if self.chance(0.03) {
            // Header values with bytes that are not UTF-8 (obs-text) and odd headers.
            let (k, v): (&'static str, Vec<u8>) = [
                ("accept", vec![0xff, 0xfe, b'/', b'x']),
                ("content-type", vec![b'a', 0x80, b'/', b'j']),
                ("authorization", vec![b'B', b'e', b'a', b'r', b'e', b'r', b' ', 0xc3, 0x28]),
                ("if-none-match", b"\"deadbeef\"".to_vec()),
                ("content-encoding", b"gzip".to_vec()),
                ("accept-encoding", b"gzip, br".to_vec()),
                ("user-agent", vec![0xe2, 0x82]),
                ("impersonate-user", vec![0xff]),
            ]
            .choose(&mut self.rng)
            .unwrap()
            .clone();
            if let Ok(v) = HeaderValue::from_bytes(&v) {
                h.push((HeaderName::from_static(k), v));
            }
        }
        if self.chance(0.002) {
            // A large header (below the server's 1 MiB limit, and sometimes above its share).
            let n = self.rng.random_range(1_000..200_000);
            h.push((HeaderName::from_static("x-padding"), HeaderValue::from_str(&"p".repeat(n)).unwrap()));
        }
        h
    }

    fn body(&mut self, method: &Method, label: &str, name: Option<&str>, ns: Option<&str>) -> Option<Vec<u8>> {
        let wants_body = matches!(*method, Method::POST | Method::PUT | Method::PATCH)
            || (*method == Method::DELETE && self.chance(0.3));
        if !wants_body && !self.chance(0.02) {
            return None;
        }
        if self.chance(0.03) {
            return Some(Vec::new());
        }
        let valid = self.valid_body(method, label, name, ns);
        Some(if self.chance(0.5) { valid } else { self.mutate(valid) })
    }

    fn valid_body(&mut self, method: &Method, label: &str, name: Option<&str>, ns: Option<&str>) -> Vec<u8> {
        let name = name.map(str::to_string).unwrap_or_else(|| self.pick(NAMES).to_string());
        let spec = json!({"weight": self.number(), "height": self.number()});
        let mut meta = json!({"name": name});
        if let Some(ns) = ns {
            if self.chance(0.8) {
                meta["namespace"] = json!(ns);
            }
        }
        if self.chance(0.3) {
            meta["labels"] = json!({"app": self.pick(&["web", "db"]), "tier": "x"});
        }
        if self.chance(0.1) {
            meta["generateName"] = json!("gen-");
            if self.chance(0.5) {
                meta.as_object_mut().unwrap().remove("name");
            }
        }
        if self.chance(0.1) {
            meta["resourceVersion"] = json!(self.pick(&["1", "0", "999999", "x"]));
        }
        if self.chance(0.05) {
            meta["finalizers"] = json!(["example.com/hold"]);
        }
        let object = || json!({"apiVersion": API_VERSION, "kind": "Llama", "metadata": meta, "spec": spec});
        let v = if *method == Method::DELETE {
            json!({"kind": "DeleteOptions", "apiVersion": "v1",
                "propagationPolicy": self.pick(&["Foreground", "Background", "Orphan"]),
                "gracePeriodSeconds": self.rng.random_range(0..5),
                "preconditions": {"resourceVersion": self.pick(&["1", "5"])},
                "dryRun": if self.chance(0.5) { json!(["All"]) } else { json!([]) }})
        } else if *method == Method::PATCH {
            match self.rng.random_range(0..4) {
                0 => json!([{"op": "replace", "path": "/spec/weight", "value": spec["weight"]},
                            {"op": "test", "path": "/spec/height", "value": 1.7},
                            {"op": self.pick(&["add", "remove", "move", "copy"]), "path": "/metadata/labels/a", "from": "/spec", "value": "v"}]),
                1 => json!({"spec": spec, "metadata": {"labels": {"x": null}}}),
                2 => object(),
                _ => json!({"status": {"observedGeneration": 1, "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "Fed", "message": ""}]}}),
            }
        } else if label.ends_with("/status") && self.chance(0.5) {
            let mut o = object();
            o["status"] = json!({"observedGeneration": 2, "conditions": []});
            o
        } else {
            object()
        };
        let bytes = serde_json::to_vec(&v).unwrap();
        if self.chance(0.1) {
            // The same object as YAML (JSON is YAML; block style needs a tiny emitter).
            return yaml_of(&v).into_bytes();
        }
        bytes
    }

    fn mutate(&mut self, mut b: Vec<u8>) -> Vec<u8> {
        match self.rng.random_range(0..14) {
            0 => {
                for _ in 0..self.rng.random_range(1..8) {
                    if !b.is_empty() {
                        let i = self.rng.random_range(0..b.len());
                        b[i] ^= 1 << self.rng.random_range(0..8);
                    }
                }
                b
            }
            1 => {
                let cut = self.rng.random_range(0..=b.len());
                b.truncate(cut);
                b
            }
            2 => {
                // Wrong types in the places the server reads.
                let s = String::from_utf8_lossy(&b).into_owned();
                let replacements: &[(&str, &str)] = &[
                    ("\"spec\":{", "\"spec\":[{"),
                    ("\"metadata\":{", "\"metadata\":\"x\",\"m\":{"),
                    ("\"weight\":", "\"weight\":\"heavy\",\"w\":"),
                    ("\"name\":", "\"name\":7,\"n\":"),
                    ("\"kind\":\"Llama\"", "\"kind\":null"),
                    ("\"apiVersion\":\"farm.example.com/v1alpha\"", "\"apiVersion\":\"v1\""),
                    ("\"labels\":{", "\"labels\":{\"bad key!\":\"v\",\"ok\":5,"),
                    ("\"height\":", "\"height\":{\"$ne\":1},\"h\":"),
                ];
                let (from, to) = *replacements.choose(&mut self.rng).unwrap();
                s.replacen(from, to, 1).into_bytes()
            }
            3 => {
                // Numbers no f64 holds, or that are not numbers JSON allows.
                let s = String::from_utf8_lossy(&b).into_owned();
                let n = self.pick(&[
                    "1e400",
                    "-1e400",
                    "123456789012345678901234567890123456789",
                    "-0",
                    "0",
                    "-5",
                    "1e-400",
                    "NaN",
                    "Infinity",
                    "0x10",
                    "1.",
                    "01",
                    "18446744073709551616",
                ]);
                let mut out = String::new();
                let mut rest = s.as_str();
                if let Some(i) = rest.find("\"weight\":") {
                    let j = i + "\"weight\":".len();
                    out.push_str(&rest[..j]);
                    out.push_str(n);
                    rest = &rest[j..];
                    let end = rest.find([',', '}']).unwrap_or(rest.len());
                    rest = &rest[end..];
                }
                out.push_str(rest);
                out.into_bytes()
            }
            4 => {
                let depth = self.rng.random_range(100..50_000);
                let open = if self.chance(0.5) { "[" } else { "{\"a\":" };
                let close = if open == "[" { "]" } else { "}" };
                let mut s = String::from("{\"apiVersion\":\"farm.example.com/v1alpha\",\"kind\":\"Llama\",\"metadata\":{\"name\":\"deep\"},\"spec\":");
                s.push_str(&open.repeat(depth));
                s.push('1');
                if self.chance(0.7) {
                    s.push_str(&close.repeat(depth));
                    s.push('}');
                }
                s.into_bytes()
            }
            5 => {
                // Invalid UTF-8 inside a string.
                let mut out = Vec::new();
                let at = b.iter().position(|c| *c == b'"').map(|p| p + 1).unwrap_or(0);
                out.extend_from_slice(&b[..at]);
                out.extend_from_slice(&[0xff, 0xc3, 0x28, 0xed, 0xa0, 0x80]);
                out.extend_from_slice(&b[at..]);
                out
            }
            6 => {
                // Duplicate and unknown fields.
                let s = String::from_utf8_lossy(&b).into_owned();
                s.replacen("{", "{\"spec\":{\"weight\":1},\"unknownField\":true,\"metadata\":{\"name\":\"dup\"},", 1)
                    .into_bytes()
            }
            7 => {
                let n = if self.chance(0.1) {
                    self.rng.random_range(3 << 20..4 << 20)
                } else {
                    self.rng.random_range(10_000..500_000)
                };
                let mut s = String::from("{\"apiVersion\":\"farm.example.com/v1alpha\",\"kind\":\"Llama\",\"metadata\":{\"name\":\"big\",\"annotations\":{\"a\":\"");
                s.push_str(&"x".repeat(n));
                s.push_str("\"}},\"spec\":{\"weight\":1,\"height\":1}}");
                s.into_bytes()
            }
            8 => self
                .pick(&[
                    "null",
                    "[]",
                    "\"str\"",
                    "42",
                    "{}",
                    "true",
                    "{\"kind\":\"Status\"}",
                    "[{}]",
                    "---\n",
                    "a: [",
                    "{{{{",
                ])
                .as_bytes()
                .to_vec(),
            9 => {
                // Random bytes.
                let n = self.rng.random_range(0..2000);
                (0..n).map(|_| self.rng.random::<u8>()).collect()
            }
            10 => {
                // Metadata fields clients must not or cannot set.
                let s = String::from_utf8_lossy(&b).into_owned();
                let extra = self.pick(&[
                    "\"uid\":\"not-a-uid\",",
                    "\"creationTimestamp\":\"yesterday\",",
                    "\"deletionTimestamp\":\"2020-01-01T00:00:00Z\",",
                    "\"managedFields\":[{\"manager\":5}],",
                    "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"p\",\"uid\":\"\"}],",
                    "\"generation\":-4,",
                    "\"labels\":{\"a\":\"b\",\"a\":\"c\"},",
                    "\"annotations\":{\"\":\"x\"},",
                    "\"finalizers\":[\"kubernetes\",\"bad finalizer\"],",
                    "\"namespace\":\"elsewhere\",",
                    "\"resourceVersion\":5,",
                ]);
                s.replacen("\"metadata\":{", &format!("\"metadata\":{{{extra}"), 1).into_bytes()
            }
            11 => {
                // YAML features JSON never has.
                self.pick(&[
                    "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata: &m {name: anchor}\nspec: {weight: 1, height: 1}\nother: *m\n",
                    "a: &a [*a]\n",
                    "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata: {name: dolly}\nspec: {weight: .inf, height: .nan}\n",
                    "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata: {name: dolly}\nspec: {weight: 0x1F, height: 1_000}\n",
                    "--- !!binary\nAAAA\n",
                    "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata: {name: dolly}\nspec:\n  weight: 1\n  weight: 2\n  height: 1\n",
                    "\t- tab\n",
                    "? complex key\n: value\n",
                ])
                .as_bytes()
                .to_vec()
            }
            12 => {
                // Billion laughs.
                b"a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n".to_vec()
            }
            _ => {
                // Insert random bytes somewhere.
                let at = self.rng.random_range(0..=b.len());
                let n = self.rng.random_range(1..16);
                let ins: Vec<u8> = (0..n).map(|_| self.rng.random::<u8>()).collect();
                b.splice(at..at, ins);
                b
            }
        }
    }
}

/// Percent-encodes everything but unreserved characters.
fn pct(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Block-style YAML of a JSON value (strings quoted as JSON, which YAML accepts).
fn yaml_of(v: &Value) -> String {
    fn emit(v: &Value, indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, val) in m {
                    match val {
                        Value::Object(o) if !o.is_empty() => {
                            let _ = writeln!(out, "{pad}{}:", Value::String(k.clone()));
                            emit(val, indent + 2, out);
                        }
                        Value::Array(a) if !a.is_empty() => {
                            let _ = writeln!(out, "{pad}{}:", Value::String(k.clone()));
                            emit(val, indent, out);
                        }
                        _ => {
                            let _ = writeln!(out, "{pad}{}: {val}", Value::String(k.clone()));
                        }
                    }
                }
            }
            Value::Array(a) if !a.is_empty() => {
                for item in a {
                    let _ = writeln!(out, "{pad}- {item}");
                }
            }
            other => {
                let _ = writeln!(out, "{pad}{other}");
            }
        }
    }
    let mut out = String::new();
    emit(v, 0, &mut out);
    out
}
