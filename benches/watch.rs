//! Watch fan-out: 1,000 concurrent watchers (Llamas and FarmPods, some with
//! label or field selectors) while 200 changes per second are written for a
//! minute, on farm-apiserver and then, with the same watchers and writes, on
//! kube-apiserver serving the Llama CRD (and plain Pods in place of FarmPods).
//!
//! `cargo bench --bench watch` (release build). The run takes about 4 minutes
//! on 2 cores with the defaults: control plane start, farm-apiserver's phase
//! ~1.2 minutes (open the watchers, write for 60 s, drain), kube-apiserver's
//! 2 to 7 (with 1,000 watchers it answers 30 to 100 writes/s, so its minute of
//! writes stretches); the total is printed at the end. It prints a markdown table and writes
//! `docs/bench/watch-latency.svg`; it never asserts timing, but it exits
//! non-zero when a watcher of farm-apiserver missed, repeated or reordered an
//! event (a correctness failure). Environment overrides:
//!
//! | env | default | meaning |
//! | --- | --- | --- |
//! | `WATCH_BENCH_WATCHERS` | 1000 | watchers per server (70% Llamas, 30% FarmPods / Pods) |
//! | `WATCH_BENCH_RATE` | 200 | writes per second (3 in 4 Llama updates, 1 in 4 Pod label patches) |
//! | `WATCH_BENCH_SECONDS` | 60 | how long the writes go on |
//! | `WATCH_BENCH_CONNECTIONS` | 16 | HTTP/2 connections the watchers share (farm-apiserver allows 100 streams each) |
//! | `WATCH_BENCH_WATCH_BUFFER` | 512 | farm-apiserver's `--watch-buffer` (default 4096): small, so the slow watcher is closed within the minute |
//!
//! Setup: one namespace with 100 Llamas (labels `group=g0..g4`) on each server
//! and 48 Pods (labels `app=a0..a2`, `spec.nodeName` node-0..node-3, nodes
//! no kubelet serves, so they stay Pending). Each write stamps its send time (unix ns) into the
//! object: an annotation on Llamas, a label on Pods (FarmPods copy labels,
//! not annotations). Llama writes go to the server under test, Pod writes
//! always to kube-apiserver (they reach FarmPods through farm-apiserver's one
//! Pod watch). Every watcher starts from its collection's list
//! resourceVersion, checks that resourceVersions increase, records each
//! event's delivery latency (receive time - stamp) and, when the server ends
//! its stream, resumes from the last resourceVersion it saw. At the end each
//! watcher's event count is compared with the writes matching its selector.
//!
//! One more watcher of all Llamas reads slowly (20 events/s, on its own
//! connection with small HTTP/2 windows) until the server closes it, then
//! resumes from its last resourceVersion at full speed; the resourceVersions
//! it received are compared with those the Llama writes were answered with.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/report.rs"]
mod report;
#[path = "support/watcher.rs"]
mod watcher;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use common::cluster::{self, ControlPlane};
use common::{Options, Server};
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use watcher::{unix_nanos, Progress, WatchReport, WatchSpec, STAMP_KEY};

const NS: &str = "watch-bench";
const LLAMAS: usize = 100;
const LLAMA_GROUPS: usize = 5;
const PODS: usize = 48;
const POD_APPS: usize = 3;
const NODES: usize = 4;
const CRD_GROUP: &str = "bench.farm.example.com";
const FARM_GROUP_VERSION: &str = "farm.example.com/v1alpha";
const CRD_GROUP_VERSION: &str = "bench.farm.example.com/v1alpha";
/// The slow watcher reads one event per this long until it is closed.
const SLOW_PACE: Duration = Duration::from_millis(50);
/// How long after the last write the watchers may take to deliver everything.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

struct Config {
    watchers: usize,
    rate: usize,
    seconds: usize,
    connections: usize,
    watch_buffer: usize,
}

impl Config {
    fn from_env() -> Result<Config> {
        Ok(Config {
            watchers: report::env_usize("WATCH_BENCH_WATCHERS", 1000)?.max(1),
            rate: report::env_usize("WATCH_BENCH_RATE", 200)?.max(1),
            seconds: report::env_usize("WATCH_BENCH_SECONDS", 60)?.max(1),
            connections: report::env_usize("WATCH_BENCH_CONNECTIONS", 16)?.max(1),
            watch_buffer: report::env_usize("WATCH_BENCH_WATCH_BUFFER", 512)?.max(16),
        })
    }
}

// ---------------------------------------------------------------- objects and selectors

fn llama_group(i: usize) -> usize {
    i % LLAMA_GROUPS
}
fn pod_app(i: usize) -> usize {
    i % POD_APPS
}
fn pod_node(i: usize) -> usize {
    i % NODES
}
fn llama_name(i: usize) -> String {
    format!("llama-{i:03}")
}
fn pod_name(i: usize) -> String {
    format!("pod-{i:03}")
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    Llama,
    Pod,
}

/// What a watcher selects; `matches` says which written objects it sees.
#[derive(Clone, Copy, Debug)]
enum Selector {
    All,
    GroupIs(usize),
    GroupIsNot(usize),
    AppIs(usize),
    NodeIs(usize),
}

impl Selector {
    fn query(self) -> String {
        match self {
            Selector::All => "?".into(),
            Selector::GroupIs(g) => format!("?labelSelector=group%3Dg{g}"),
            Selector::GroupIsNot(g) => format!("?labelSelector=group%21%3Dg{g}"),
            Selector::AppIs(a) => format!("?labelSelector=app%3Da{a}"),
            Selector::NodeIs(n) => format!("?fieldSelector=spec.nodeName%3Dnode-{n}"),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Selector::All => "none",
            Selector::GroupIs(_) => "label group=",
            Selector::GroupIsNot(_) => "label group!=",
            Selector::AppIs(_) => "label app=",
            Selector::NodeIs(_) => "field spec.nodeName=",
        }
    }

    fn matches(self, index: usize) -> bool {
        match self {
            Selector::All => true,
            Selector::GroupIs(g) => llama_group(index) == g,
            Selector::GroupIsNot(g) => llama_group(index) != g,
            Selector::AppIs(a) => pod_app(index) == a,
            Selector::NodeIs(n) => pod_node(index) == n,
        }
    }
}

/// Watcher w's kind and selector: 7 in 10 watch Llamas (half of them all,
/// a quarter `group=gX`, a quarter `group!=gX`), 3 in 10 FarmPods / Pods
/// (a third all, a third `app=aX`, a third `spec.nodeName=node-X`).
fn plan(w: usize) -> (Kind, Selector) {
    if w % 10 < 7 {
        let k = w / 10 * 7 + w % 10;
        let selector = match k % 4 {
            0 | 1 => Selector::All,
            2 => Selector::GroupIs(k % LLAMA_GROUPS),
            _ => Selector::GroupIsNot(k % LLAMA_GROUPS),
        };
        (Kind::Llama, selector)
    } else {
        let k = w / 10 * 3 + (w % 10 - 7);
        let selector = match k % 3 {
            0 => Selector::All,
            1 => Selector::AppIs(k / 3 % POD_APPS),
            _ => Selector::NodeIs(k / 3 % NODES),
        };
        (Kind::Pod, selector)
    }
}

// ---------------------------------------------------------------- HTTP

/// Checks the answer is 2xx and returns its JSON body.
async fn json_answer(what: &str, resp: reqwest::Result<reqwest::Response>) -> Result<Value> {
    let resp = resp.with_context(|| what.to_string())?;
    let status = resp.status();
    let body = resp.bytes().await.with_context(|| format!("{what}: reading the body"))?;
    if !status.is_success() {
        bail!("{what}: {status}: {}", String::from_utf8_lossy(&body));
    }
    serde_json::from_slice(&body).with_context(|| format!("{what}: body is not JSON"))
}

fn rv_of(v: &Value) -> Result<u64> {
    v["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).ok_or_else(|| {
        anyhow!("no numeric metadata.resourceVersion in {}", v.to_string().chars().take(300).collect::<String>())
    })
}

fn cp_file(cp: &ControlPlane, key: &str) -> Result<Vec<u8>> {
    let path = cp.info[key].as_str().ok_or_else(|| anyhow!("{key} in {}", cp.info))?;
    std::fs::read(path).with_context(|| format!("reading {path}"))
}

/// A client of farm-apiserver (`ca`) or kube-apiserver (`ca` and the admin
/// identity), one HTTP/2 connection; no overall timeout (watches last).
/// `small_windows`: 64 KiB HTTP/2 windows, so a reader that does not read
/// stalls the server's writes soon.
fn client(ca: &[u8], identity: Option<&[u8]>, small_windows: bool) -> Result<reqwest::Client> {
    let mut b = reqwest::Client::builder().add_root_certificate(reqwest::Certificate::from_pem(ca)?);
    if let Some(id) = identity {
        b = b.identity(reqwest::Identity::from_pem(id)?);
    }
    if small_windows {
        b = b.http2_initial_stream_window_size(65_535).http2_initial_connection_window_size(65_535);
    }
    Ok(b.build()?)
}

/// Where one phase sends its watches and its Llama writes.
struct Target {
    server: &'static str,
    pods_kind: &'static str,
    ca: Vec<u8>,
    identity: Option<Vec<u8>>,
    llamas: String,
    pods: String,
    llama_api_version: &'static str,
    /// The process whose RSS is reported, and what it holds.
    pid: u32,
    pid_what: &'static str,
}

impl Target {
    fn client(&self, small_windows: bool) -> Result<reqwest::Client> {
        client(&self.ca, self.identity.as_deref(), small_windows)
    }
}

// ---------------------------------------------------------------- setup

async fn wait_for_default_service_account(kube: &reqwest::Client, cp: &ControlPlane) -> Result<()> {
    let url = format!("{}/api/v1/namespaces/{NS}/serviceaccounts/default", cp.server);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if kube.get(&url).send().await.is_ok_and(|r| r.status().is_success()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("no default ServiceAccount in {NS} after 60 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn create_pods(kube: &reqwest::Client, cp: &ControlPlane) -> Result<()> {
    let url = format!("{}/api/v1/namespaces/{NS}/pods", cp.server);
    for i in 0..PODS {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name(i), "labels": {"app": format!("a{}", pod_app(i)), STAMP_KEY: "0"}},
            "spec": {"nodeName": format!("node-{}", pod_node(i)),
                     "containers": [{"name": "app", "image": "registry.example.com/app:1.0"}]},
        });
        json_answer(&format!("create Pod {i}"), kube.post(&url).json(&pod).send().await).await?;
    }
    Ok(())
}

async fn create_llamas(client: &reqwest::Client, collection: &str, api_version: &str) -> Result<()> {
    for i in 0..LLAMAS {
        let llama = json!({
            "apiVersion": api_version, "kind": "Llama",
            "metadata": {"name": llama_name(i), "labels": {"group": format!("g{}", llama_group(i))},
                         "annotations": {STAMP_KEY: "0"}},
            "spec": {"weight": 10.0 + i as f64, "height": 1.5},
        });
        json_answer(&format!("create Llama {i} at {collection}"), client.post(collection).json(&llama).send().await)
            .await?;
    }
    Ok(())
}

async fn install_crd(cp: &ControlPlane, kube: &reqwest::Client, collection: &str) -> Result<()> {
    common::crd::install_llama_crd(cp, CRD_GROUP).map_err(anyhow::Error::msg)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match kube.get(collection).send().await {
            Ok(r) if r.status().is_success() => return Ok(()),
            _ if Instant::now() > deadline => bail!("kube-apiserver does not serve {collection}"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The collection's current resourceVersion (a one-item list's).
async fn list_rv(client: &reqwest::Client, collection: &str) -> Result<u64> {
    let url = format!("{collection}?limit=1");
    rv_of(&json_answer(&format!("LIST {url}"), client.get(&url).send().await).await?)
}

// ---------------------------------------------------------------- writes

/// One write: what it changed and, when acknowledged, the resourceVersion it got.
struct WriteDone {
    kind: Kind,
    index: usize,
    rv: Option<u64>,
    ack: Duration,
}

struct Writes {
    done: Vec<WriteDone>,
    errors: Vec<String>,
    wall: Duration,
    /// Highest RSS of the measured process while writing (MiB), sampled each second.
    rss_peak: f64,
}

/// `rate` writes per second for `seconds`, paced by a ticker: three in four
/// merge-patch a Llama's stamp annotation on the target, one in four a Pod's
/// stamp label on kube-apiserver. Each write is its own task (at most 256 in
/// flight), so a slow answer does not delay the next tick.
async fn write_load(
    cfg: &Config,
    target: &Target,
    llama_client: reqwest::Client,
    pod_client: reqwest::Client,
    cp: &ControlPlane,
) -> Result<Writes> {
    let total = cfg.rate * cfg.seconds;
    let in_flight = Arc::new(Semaphore::new(256));
    let mut tasks = Vec::with_capacity(total);
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / cfg.rate as f64));
    let started = Instant::now();
    let mut next_rss = Instant::now();
    let mut rss_peak = common::rss_mib(target.pid);
    let (mut llama_writes, mut pod_writes) = (0usize, 0usize);
    for tick in 0..total {
        ticker.tick().await;
        if Instant::now() >= next_rss {
            rss_peak = rss_peak.max(common::rss_mib(target.pid));
            next_rss += Duration::from_secs(1);
        }
        let (kind, index, client, url, body) = if tick % 4 == 3 {
            let index = pod_writes % PODS;
            pod_writes += 1;
            let url = format!("{}/api/v1/namespaces/{NS}/pods/{}", cp.server, pod_name(index));
            (Kind::Pod, index, pod_client.clone(), url, "labels")
        } else {
            let index = llama_writes % LLAMAS;
            llama_writes += 1;
            let url = format!("{}/{}", target.llamas, llama_name(index));
            (Kind::Llama, index, llama_client.clone(), url, "annotations")
        };
        let permit = in_flight.clone().acquire_owned().await?;
        tasks.push(tokio::spawn(async move {
            let _permit = permit;
            let sent = unix_nanos();
            let t = Instant::now();
            let patch = json!({"metadata": {body: {STAMP_KEY: sent.to_string()}}});
            let resp = client
                .patch(&url)
                .header("Content-Type", "application/merge-patch+json")
                .body(patch.to_string())
                .send()
                .await;
            let answer = json_answer(&format!("PATCH {url}"), resp).await.and_then(|v| rv_of(&v));
            let ack = t.elapsed();
            match answer {
                Ok(rv) => (WriteDone { kind, index, rv: Some(rv), ack }, None),
                Err(e) => (WriteDone { kind, index, rv: None, ack }, Some(format!("{e:#}"))),
            }
        }));
    }
    let mut done = Vec::with_capacity(total);
    let mut errors = Vec::new();
    for task in tasks {
        let (w, err) = task.await?;
        done.push(w);
        errors.extend(err);
    }
    Ok(Writes { done, errors, wall: started.elapsed(), rss_peak })
}

// ---------------------------------------------------------------- one phase

struct Watcher {
    kind: Kind,
    selector: Selector,
    progress: Arc<Progress>,
    task: tokio::task::JoinHandle<WatchReport>,
}

/// What the slow watcher went through.
struct SlowStory {
    report: WatchReport,
    missed: usize,
    repeated: usize,
    foreign: usize,
    llama_writes: usize,
}

struct CaseResult {
    case: String,
    watchers: usize,
    events: u64,
    expected: u64,
    latencies_us: Vec<u32>,
    /// Watchers with fewer / more events than matching writes, or out of order.
    missing: usize,
    extra: usize,
    out_of_order: usize,
    reconnected: usize,
    errors: Vec<String>,
}

struct PhaseResult {
    target_name: &'static str,
    pid_what: &'static str,
    cases: Vec<CaseResult>,
    rss_before: f64,
    rss_idle: f64,
    rss_load: f64,
    watchers: usize,
    open_time: Duration,
    writes: usize,
    write_errors: Vec<String>,
    write_wall: Duration,
    /// Write answered (p50, p99), ms: Llama writes (to the server under test), Pod writes (to kube-apiserver).
    llama_ack_ms: (f64, f64),
    pod_ack_ms: (f64, f64),
    drained_in: Option<Duration>,
    /// From the first write until every watcher had its events.
    cpu: cpu::CpuSpent,
    cpu_wall: Duration,
    slow: SlowStory,
}

async fn phase(cfg: &Config, target: &Target, cp: &ControlPlane, kube_writer: reqwest::Client) -> Result<PhaseResult> {
    let stamp = Instant::now();
    let llama_client = target.client(false)?;
    let llama_rv = list_rv(&llama_client, &target.llamas).await?;
    let pod_rv = list_rv(&llama_client, &target.pods).await?;
    // Let the server settle after the setup before its memory is read.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_before = common::rss_mib(target.pid);

    let connections: Vec<reqwest::Client> =
        (0..cfg.connections).map(|_| target.client(false)).collect::<Result<_>>()?;
    let opened = Arc::new(AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let hurry = CancellationToken::new();
    let spawn = |w: usize| -> Watcher {
        let (kind, selector) = plan(w);
        let (collection, from_rv) = match kind {
            Kind::Llama => (&target.llamas, llama_rv),
            Kind::Pod => (&target.pods, pod_rv),
        };
        let spec = WatchSpec {
            client: connections[w % connections.len()].clone(),
            url: format!("{collection}{}", selector.query()),
            from_rv,
            slow_pace: None,
            hurry: CancellationToken::new(),
            keep_rvs: false,
        };
        let progress = Arc::new(Progress::default());
        let task = tokio::spawn(watcher::run(spec, progress.clone(), opened.clone(), stop.clone()));
        Watcher { kind, selector, progress, task }
    };
    eprintln!("  opening {} watches over {} HTTP/2 connections", cfg.watchers, connections.len());
    let open_started = Instant::now();
    let mut watchers = Vec::with_capacity(cfg.watchers);
    // One watch per connection first, so that each client sets up its one
    // HTTP/2 connection before the others are multiplexed onto it.
    for w in 0..cfg.watchers.min(connections.len()) {
        watchers.push(spawn(w));
        wait_until("a first watch on each connection", Duration::from_secs(30), || opened.load(Ordering::SeqCst) > w)
            .await?;
    }
    for w in watchers.len()..cfg.watchers {
        watchers.push(spawn(w));
    }
    let slow_spec = WatchSpec {
        client: target.client(true)?,
        url: format!("{}?", target.llamas),
        from_rv: llama_rv,
        slow_pace: Some(SLOW_PACE),
        hurry: hurry.clone(),
        keep_rvs: true,
    };
    let slow_progress = Arc::new(Progress::default());
    let slow_task = tokio::spawn(watcher::run(slow_spec, slow_progress.clone(), opened.clone(), stop.clone()));
    wait_until("every watch to open", Duration::from_secs(120), || opened.load(Ordering::SeqCst) > cfg.watchers)
        .await?;
    let open_time = open_started.elapsed();
    eprintln!("  {} watches open in {open_time:.1?}; idle for 5 s", cfg.watchers + 1);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss_idle = common::rss_mib(target.pid);

    eprintln!("  writing {} changes/s for {} s", cfg.rate, cfg.seconds);
    let (cpu_start, cpu_started) = (cpu::CpuClock::now(target.pid), Instant::now());
    let writes = write_load(cfg, target, llama_client, kube_writer, cp).await?;
    eprintln!("  {} writes in {:.1?} ({} failed); draining", writes.done.len(), writes.wall, writes.errors.len());

    // What each watcher should have seen: the acknowledged writes its selector matches.
    let ok_writes: Vec<&WriteDone> = writes.done.iter().filter(|w| w.rv.is_some()).collect();
    let expected_of = |kind: Kind, selector: Selector| -> u64 {
        ok_writes.iter().filter(|w| w.kind == kind && selector.matches(w.index)).count() as u64
    };
    let expected: Vec<u64> = watchers.iter().map(|w| expected_of(w.kind, w.selector)).collect();
    let slow_expected = expected_of(Kind::Llama, Selector::All);
    // The writes are over: a slow watcher the server never closed reads at full speed from now on.
    hurry.cancel();
    let drain_started = Instant::now();
    let drained = wait_until("every watcher to receive its events", DRAIN_TIMEOUT, || {
        watchers.iter().zip(&expected).all(|(w, e)| w.progress.events.load(Ordering::Relaxed) >= *e)
            && slow_progress.events.load(Ordering::Relaxed) >= slow_expected
    })
    .await
    .is_ok();
    let drained_in = drained.then(|| drain_started.elapsed());
    let (cpu, cpu_wall) = (cpu::CpuClock::now(target.pid).since(&cpu_start), cpu_started.elapsed());
    // A moment more, so that a duplicate sent after the last expected event is seen too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_load = writes.rss_peak.max(common::rss_mib(target.pid));
    stop.cancel();

    let mut cases: HashMap<Kind, CaseResult> = HashMap::new();
    for (w, expected) in watchers.into_iter().zip(expected) {
        let report = w.task.await?;
        let case = cases.entry(w.kind).or_insert_with(|| CaseResult {
            case: format!("{}, {}", target.server, if w.kind == Kind::Llama { "Llamas" } else { target.pods_kind }),
            watchers: 0,
            events: 0,
            expected: 0,
            latencies_us: Vec::new(),
            missing: 0,
            extra: 0,
            out_of_order: 0,
            reconnected: 0,
            errors: Vec::new(),
        });
        case.watchers += 1;
        case.events += report.events;
        case.expected += expected;
        case.missing += usize::from(report.events < expected);
        case.extra += usize::from(report.events > expected);
        case.out_of_order += usize::from(report.out_of_order > 0);
        case.reconnected += usize::from(!report.closes.is_empty());
        if report.unstamped > 0 {
            case.errors.push(format!("a watcher ({:?}) got {} events without a stamp", w.selector, report.unstamped));
        }
        for e in report.errors.iter().take(2) {
            case.errors.push(format!("watcher {:?} {}: {e}", w.kind, w.selector.label()));
        }
        case.latencies_us.extend_from_slice(&report.latencies_us);
    }
    let slow_report = slow_task.await?;
    let written: BTreeSet<u64> = ok_writes.iter().filter(|w| w.kind == Kind::Llama).filter_map(|w| w.rv).collect();
    let received: BTreeSet<u64> = slow_report.rvs.iter().copied().collect();
    let slow = SlowStory {
        missed: written.difference(&received).count(),
        repeated: slow_report.rvs.len() - received.len(),
        foreign: received.difference(&written).count(),
        llama_writes: written.len(),
        report: slow_report,
    };
    let acks_of = |kind: Kind| -> (f64, f64) {
        let mut acks: Vec<f64> =
            writes.done.iter().filter(|w| w.kind == kind).map(|w| w.ack.as_secs_f64() * 1000.0).collect();
        acks.sort_by(f64::total_cmp);
        (pct(&acks, 50.0), pct(&acks, 99.0))
    };
    let mut cases: Vec<CaseResult> = cases.into_values().collect();
    cases.sort_by_key(|c| c.case.clone());
    eprintln!("  phase done in {:.1?}", stamp.elapsed());
    Ok(PhaseResult {
        target_name: target.server,
        pid_what: target.pid_what,
        cases,
        rss_before,
        rss_idle,
        rss_load,
        watchers: cfg.watchers,
        open_time,
        writes: writes.done.len(),
        write_errors: writes.errors,
        write_wall: writes.wall,
        llama_ack_ms: acks_of(Kind::Llama),
        pod_ack_ms: acks_of(Kind::Pod),
        drained_in,
        cpu,
        cpu_wall,
        slow,
    })
}

async fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

// ---------------------------------------------------------------- report

/// Nearest-rank percentile of sorted values.
fn pct<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms_us(us: u32) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

fn table(phases: &mut [PhaseResult]) -> String {
    let mut out = String::from(
        "| case | watchers | events delivered / expected | p50 | p90 | p99 | max | idle KB per watcher \
         | watchers missing / extra / out of order | watchers resumed | RSS MiB before / idle / under load |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for p in phases.iter_mut() {
        let kb = (p.rss_idle - p.rss_before) * 1024.0 / (p.watchers + 1) as f64;
        for c in p.cases.iter_mut() {
            c.latencies_us.sort_unstable();
            let l = &c.latencies_us;
            out.push_str(&format!(
                "| {} | {} | {} / {} | {} | {} | {} | {} | {:.1} | {} / {} / {} | {} | {:.0} / {:.0} / {:.0} |\n",
                c.case,
                c.watchers,
                c.events,
                c.expected,
                ms_us(pct(l, 50.0)),
                ms_us(pct(l, 90.0)),
                ms_us(pct(l, 99.0)),
                ms_us(l.last().copied().unwrap_or(0)),
                kb,
                c.missing,
                c.extra,
                c.out_of_order,
                c.reconnected,
                p.rss_before,
                p.rss_idle,
                p.rss_load
            ));
        }
    }
    out
}

fn phase_notes(p: &PhaseResult) -> String {
    let mut out = format!(
        "\n### {}\n\n- RSS measured on: {}\n- {} watches (+1 slow) opened in {:.1?}\n- {} writes in {:.1?} ({:.0}/s), \
         {} failed; answered p50 / p99: Llama writes {:.2} / {:.2} ms, Pod writes (kube-apiserver) {:.2} / {:.2} ms\n\
         - every watcher had all its events {}\n",
        p.target_name,
        p.pid_what,
        p.watchers,
        p.open_time,
        p.writes,
        p.write_wall,
        p.writes as f64 / p.write_wall.as_secs_f64().max(1e-9),
        p.write_errors.len(),
        p.llama_ack_ms.0,
        p.llama_ack_ms.1,
        p.pod_ack_ms.0,
        p.pod_ack_ms.1,
        match p.drained_in {
            Some(d) => format!("{d:.1?} after the last write was acknowledged"),
            None => format!("NOT within {DRAIN_TIMEOUT:?} after the last write"),
        }
    );
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as f64;
    out.push_str(&format!(
        "- CPU from the first write until every watcher had its events ({:.1} s wall, {:.0} core-seconds on this \
         machine): measured process {:.1} s, this benchmark's watchers and writers {:.1} s, the whole machine busy \
         {:.1} s (the rest: other processes{})\n",
        p.cpu_wall.as_secs_f64(),
        p.cpu_wall.as_secs_f64() * cores,
        p.cpu.server.as_secs_f64(),
        p.cpu.client.as_secs_f64(),
        p.cpu.machine().as_secs_f64(),
        if p.target_name == "farm-apiserver" { ", the control plane taking the Pod writes" } else { "" }
    ));
    for e in p.write_errors.iter().take(3) {
        out.push_str(&format!("- write error: {e}\n"));
    }
    for c in &p.cases {
        for e in c.errors.iter().take(5) {
            out.push_str(&format!("- {}: {e}\n", c.case));
        }
        if c.errors.len() > 5 {
            out.push_str(&format!("- {}: ... {} more watcher errors\n", c.case, c.errors.len() - 5));
        }
    }
    let s = &p.slow;
    out.push_str(&format!(
        "- slow watcher (all Llamas, {} ms per event until closed, 64 KiB HTTP/2 windows):\n",
        SLOW_PACE.as_millis()
    ));
    if s.report.closes.is_empty() {
        out.push_str("  - the server never closed it during the writes; it read at full speed after them\n");
    }
    for c in &s.report.closes {
        out.push_str(&format!(
            "  - closed {:.1} s after it opened ({}), having received {} events, last resourceVersion {}; resumed from it\n",
            c.after.as_secs_f64(),
            c.why,
            c.events,
            c.last_rv
        ));
    }
    for e in s.report.errors.iter().take(3) {
        out.push_str(&format!("  - error: {e}\n"));
    }
    out.push_str(&format!(
        "  - in all: {} events for {} acknowledged Llama writes: {} missed, {} received twice, {} not from a write, \
         {} out of order{}\n",
        s.report.rvs.len(),
        s.llama_writes,
        s.missed,
        s.repeated,
        s.foreign,
        s.report.out_of_order,
        if s.missed + s.repeated + s.report.out_of_order as usize == 0 {
            ": it missed nothing"
        } else {
            ": NOT complete"
        }
    ));
    out
}

/// The latency samples of a case as ms, thinned evenly to about 20,000 (the
/// chart draws ~1,000 points of the distribution anyway).
fn chart_samples(c: &CaseResult) -> Vec<f64> {
    let step = c.latencies_us.len().div_ceil(20_000).max(1);
    c.latencies_us.iter().step_by(step).map(|us| *us as f64 / 1000.0).collect()
}

// ---------------------------------------------------------------- the run

async fn run(cfg: &Config, out: &mut String) -> Result<bool> {
    let started = Instant::now();
    let load_start = common::loadavg();
    eprintln!("starting the control plane");
    let cp = cluster::controlplane();
    let cp_time = started.elapsed();
    let kube_ca = cp_file(cp, "caFile")?;
    let mut identity = cp_file(cp, "adminCertFile")?;
    identity.push(b'\n');
    identity.extend_from_slice(&cp_file(cp, "adminKeyFile")?);
    let kube = client(&kube_ca, Some(&identity), false)?;
    let cp_pid = cp.info["pid"].as_u64().ok_or_else(|| anyhow!("pid in {}", cp.info))? as u32;

    eprintln!("[{:.1?}] namespace {NS}, {PODS} Pods, the Llama CRD", started.elapsed());
    cluster::namespace(cp, NS);
    wait_for_default_service_account(&kube, cp).await?;
    create_pods(&kube, cp).await?;
    let kube_llamas = format!("{}/apis/{CRD_GROUP_VERSION}/namespaces/{NS}/llamas", cp.server);
    install_crd(cp, &kube, &kube_llamas).await?;
    create_llamas(&kube, &kube_llamas, CRD_GROUP_VERSION).await?;

    eprintln!("[{:.1?}] starting farm-apiserver", started.elapsed());
    let farm = Server::start_with(Options {
        args: vec![
            "--watch-buffer".into(),
            cfg.watch_buffer.to_string(),
            // 1,001 watches from one (anonymous) user: past the default 1,000 per user.
            "--max-watches-per-user".into(),
            "0".into(),
        ],
        kubeconfig: Some(cp.kubeconfig.clone()),
        // Request logs off: they would be part of what is measured.
        log: Some("info".into()),
        ready_timeout: Some(Duration::from_secs(120)),
        ..Default::default()
    })
    .await;
    let farm_target = Target {
        server: "farm-apiserver",
        pods_kind: "FarmPods",
        ca: std::fs::read(&farm.ca_file)?,
        identity: None,
        llamas: farm.llamas(NS, ""),
        pods: format!("{}{}/namespaces/{NS}/farmpods", farm.base, common::GROUP_PATH),
        llama_api_version: FARM_GROUP_VERSION,
        pid: farm.pid(),
        pid_what: "the farm-apiserver process",
    };
    create_llamas(&farm_target.client(false)?, &farm_target.llamas, farm_target.llama_api_version).await?;

    eprintln!("[{:.1?}] phase A: farm-apiserver", started.elapsed());
    let load_a = common::loadavg();
    let a = phase(cfg, &farm_target, cp, kube.clone()).await?;
    let farm_log = farm.log();
    drop(farm);

    eprintln!("[{:.1?}] phase B: kube-apiserver", started.elapsed());
    let kube_target = Target {
        server: "kube-apiserver",
        pods_kind: "Pods",
        ca: kube_ca.clone(),
        identity: Some(identity.clone()),
        llamas: kube_llamas.clone(),
        pods: format!("{}/api/v1/namespaces/{NS}/pods", cp.server),
        llama_api_version: CRD_GROUP_VERSION,
        pid: cp_pid,
        pid_what: "the control plane process: kube-apiserver, etcd and kube-controller-manager in one Go \
                   process (the difference is what the watches cost)",
    };
    let load_b = common::loadavg();
    let b = phase(cfg, &kube_target, cp, kube.clone()).await?;
    let load_end = common::loadavg();

    let mut phases = [a, b];
    out.push_str(&format!(
        "\n## Watch fan-out: {} watchers, {} changes/s for {} s ({} cores, release build, HTTPS + HTTP/2 on loopback)\n\n",
        cfg.watchers,
        cfg.rate,
        cfg.seconds,
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    ));
    out.push_str(&format!(
        "Watchers: 70% Llamas (half all, a quarter `group=gX`, a quarter `group!=gX`), 30% FarmPods on \
         farm-apiserver / Pods on kube-apiserver (a third all, a third `app=aX`, a third \
         `spec.nodeName=node-X`), over {} HTTP/2 connections. Writes: 3 in 4 Llama merge patches (to the server \
         under test), 1 in 4 Pod label patches (to kube-apiserver). Latency: write sent -> event line received. \
         farm-apiserver runs with `--watch-buffer {}`. Idle KB per watcher: (RSS with the watches open and idle - \
         RSS before) / watchers.\n\n",
        cfg.connections, cfg.watch_buffer
    ));
    out.push_str(&table(&mut phases));
    for p in &phases {
        out.push_str(&phase_notes(p));
    }
    let farm_correct = phases[0].cases.iter().all(|c| c.missing + c.extra + c.out_of_order == 0)
        && phases[0].slow.missed + phases[0].slow.repeated == 0;
    let farm_p99 = phases[0].cases.iter().map(|c| pct(&c.latencies_us, 99.0)).max().unwrap_or(0);
    let farm_kb = (phases[0].rss_idle - phases[0].rss_before) * 1024.0 / (phases[0].watchers + 1) as f64;
    out.push_str(&format!(
        "\nGoals (issue; reported, not asserted): every farm-apiserver watcher got every matching event once, in \
         order: {}; p99 under 50 ms: {} ({}); idle memory per watcher at most 16 KB: {} ({farm_kb:.1} KB)\n",
        if farm_correct { "yes" } else { "NO" },
        if farm_p99 < 50_000 { "met" } else { "NOT met" },
        ms_us(farm_p99),
        if farm_kb <= 16.0 { "met" } else { "NOT met" }
    ));
    let lagged = farm_log.matches("closing a watcher that fell behind").count();
    let panics = farm_log.matches("panicked").count();
    out.push_str(&format!(
        "farm-apiserver log: {} lines at warn or above, {panics} panics\n",
        farm_log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).count()
    ));
    if lagged > 0 {
        out.push_str(&format!("farm-apiserver logged {lagged} watchers closed for falling behind\n"));
    }
    out.push_str(&format!(
        "Load average (1/5/15 min): {load_start} at the start, {load_a} before phase A, {load_b} before phase B, \
         {load_end} at the end\nControl plane start: {cp_time:.1?}. Whole run: {:.1?}\n",
        started.elapsed()
    ));

    let chart = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/bench/watch-latency.svg");
    let series: Vec<(String, Vec<f64>)> =
        phases.iter().flat_map(|p| p.cases.iter().map(|c| (c.case.clone(), chart_samples(c)))).collect();
    let named: Vec<(&str, Vec<f64>)> = series.iter().map(|(n, s)| (n.as_str(), s.clone())).collect();
    plot::distribution_chart(
        &chart,
        &format!("Watch delivery latency: {} watchers, {} changes/s for {} s", cfg.watchers, cfg.rate, cfg.seconds),
        "write sent -> event received (ms)",
        &named,
    )?;
    out.push_str(&format!("Chart: {}\n", chart.display()));
    Ok(farm_correct)
}

fn main() {
    let cfg = match Config::from_env() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("watch benchmark: {e:#}");
            std::process::exit(2);
        }
    };
    eprintln!(
        "watch benchmark: takes about 4 minutes with the defaults ({} watchers, {} writes/s for {} s, on \
         farm-apiserver (~1.2 min) then kube-apiserver, which falls behind the writes)",
        cfg.watchers, cfg.rate, cfg.seconds
    );
    match report::run_and_print("watch benchmark", async |out| run(&cfg, out).await) {
        Ok(true) => {}
        Ok(false) => {
            eprintln!("watch benchmark: farm-apiserver lost, repeated or reordered events (see above)");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("watch benchmark FAILED: {e:#}");
            std::process::exit(1);
        }
    }
}
