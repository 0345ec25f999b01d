//! Storage backends side by side, in one run:
//!
//! 1. Reads: GET of one Llama and LIST of 1,000 Llamas (one namespace) from
//!    `--storage memory` and `--storage etcd` (a standalone etcd), sequential
//!    (p50/p99) and with N concurrent clients (req/s), etcd both "latest" (no
//!    resourceVersion: a consistent read, which first fetches etcd's revision)
//!    and `resourceVersion=0` (straight from the watch cache). The etcd rows
//!    are repeated on the control plane's etcd, which kube-apiserver writes to
//!    as well, next to kube-apiserver serving the same reads of the CRD below
//!    (a reference).
//! 2. Writes: creates/s, updates/s (PUT with the current resourceVersion) and
//!    server-side applies/s of farm-apiserver `--storage etcd` against kube-apiserver serving an
//!    equivalent CRD, both writing to the SAME etcd (the control plane's),
//!    same JSON bodies, same clients, same concurrency.
//! 3. Watch delivery: two farm-apiserver replicas on one etcd and prefix;
//!    sequential writes on replica A, each timed from just before it is sent
//!    to its event arriving on a watch on replica B (matched by name and
//!    resourceVersion), and on a watch on A itself for reference.
//!
//! `cargo bench --bench storage` (release build; the run itself takes about
//! 1-2 minutes on 2 cores, its total is printed at the end). Everything goes over
//! HTTPS on loopback with HTTP/2 (ALPN; checked on every answer), one
//! connection per client. It prints markdown tables and never asserts timing;
//! a failed request fails the run. Environment overrides:
//!
//! | env | default | meaning |
//! | --- | --- | --- |
//! | `FARM_BENCH_LLAMAS` | 1000 | Llamas in the listed namespace |
//! | `FARM_BENCH_GETS` | 1000 | sequential GETs per case (each concurrent client does as many) |
//! | `FARM_BENCH_LISTS` | 200 | sequential LISTs per case (each concurrent client does as many) |
//! | `FARM_BENCH_CLIENTS` | 8 | concurrent clients (one HTTP/2 connection each) |
//! | `FARM_BENCH_WRITES` | 2000 | creates, then as many updates and as many applies, per server |
//! | `FARM_BENCH_WATCH_WRITES` | 1000 | sequential writes in the watch-delivery case |

// The same fixtures as the tests: farm-apiserver, standalone etcd, control plane.
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/report.rs"]
mod report;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use common::cluster::{self, ControlPlane};
use common::etcd::Etcd;
use common::{Options, Server};
use serde_json::{json, Value};
use tokio::sync::mpsc;

const READ_NS: &str = "bench-reads";
/// kube-apiserver, a reference in the reads, does at most this many GETs / LISTs per case.
const KUBE_READ_CAP: (usize, usize) = (500, 40);
const WRITE_NS: &str = "bench-writes";
const WATCH_NS: &str = "bench-watch";
const FARM_API_VERSION: &str = "farm.example.com/v1alpha";
const CRD_GROUP: &str = "bench.farm.example.com";
const CRD_API_VERSION: &str = "bench.farm.example.com/v1alpha";
struct Config {
    llamas: usize,
    gets: usize,
    lists: usize,
    clients: usize,
    writes: usize,
    watch_writes: usize,
}

impl Config {
    fn from_env() -> Result<Config> {
        Ok(Config {
            llamas: report::env_usize("FARM_BENCH_LLAMAS", 1000)?.max(1),
            gets: report::env_usize("FARM_BENCH_GETS", 1000)?.max(1),
            lists: report::env_usize("FARM_BENCH_LISTS", 200)?.max(1),
            clients: report::env_usize("FARM_BENCH_CLIENTS", 8)?.max(1),
            writes: report::env_usize("FARM_BENCH_WRITES", 2000)?.max(1),
            watch_writes: report::env_usize("FARM_BENCH_WATCH_WRITES", 1000)?.max(2),
        })
    }
}

// ---------------------------------------------------------------- statistics

/// Latencies of one case and the wall time it took.
#[derive(Default)]
struct Stats {
    samples: Vec<Duration>,
    wall: Duration,
}

impl Stats {
    fn new(mut samples: Vec<Duration>, wall: Duration) -> Stats {
        samples.sort();
        Stats { samples, wall }
    }

    /// Nearest-rank percentile.
    fn pct(&self, p: f64) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.samples.len() as f64).ceil() as usize;
        self.samples[rank.clamp(1, self.samples.len()) - 1]
    }

    fn mean(&self) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        self.samples.iter().sum::<Duration>() / self.samples.len() as u32
    }

    fn max(&self) -> Duration {
        self.samples.last().copied().unwrap_or_default()
    }

    fn rate(&self) -> f64 {
        self.samples.len() as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn ratio(a: f64, b: f64) -> String {
    format!("{:.2}x", a / b.max(1e-12))
}

// ---------------------------------------------------------------- HTTP

/// Checks the answer (2xx, HTTP/2) and returns its body; anything else is an error
/// naming the request.
async fn answer(what: &str, resp: reqwest::Response) -> Result<Bytes> {
    let status = resp.status();
    let version = resp.version();
    let body = resp.bytes().await.with_context(|| format!("{what}: reading the body"))?;
    if !status.is_success() {
        bail!("{what}: {status}: {}", String::from_utf8_lossy(&body));
    }
    if version != reqwest::Version::HTTP_2 {
        bail!("{what}: answered over {version:?}, not HTTP/2");
    }
    Ok(body)
}

async fn get(client: &reqwest::Client, url: &str) -> Result<Bytes> {
    let resp =
        client.get(url).header("Accept", "application/json").send().await.with_context(|| format!("GET {url}"))?;
    answer(&format!("GET {url}"), resp).await
}

fn rv_of(body: &[u8], what: &str) -> Result<String> {
    let v: Value = serde_json::from_slice(body).with_context(|| format!("{what}: body is not JSON"))?;
    v["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow!("{what}: no metadata.resourceVersion in {v}"))
}

/// `n` HTTPS clients trusting farm-apiserver's CA: separate clients, so each
/// has its own connection.
fn farm_clients(server: &Server, n: usize) -> Result<Vec<reqwest::Client>> {
    (0..n).map(|_| common::client_trusting(&server.ca_file)).collect()
}

fn cp_file(cp: &ControlPlane, key: &str) -> Result<Vec<u8>> {
    let path = cp.info[key].as_str().ok_or_else(|| anyhow!("{key} in {}", cp.info))?;
    std::fs::read(path).with_context(|| format!("reading {path}"))
}

/// `n` clients of kube-apiserver with the admin kubeconfig's credentials (its
/// client certificate), trusting the control plane's CA.
fn kube_clients(cp: &ControlPlane, n: usize) -> Result<Vec<reqwest::Client>> {
    let ca = cp_file(cp, "caFile")?;
    let mut identity = cp_file(cp, "adminCertFile")?;
    identity.push(b'\n');
    identity.extend_from_slice(&cp_file(cp, "adminKeyFile")?);
    (0..n)
        .map(|_| {
            Ok(reqwest::Client::builder()
                .add_root_certificate(reqwest::Certificate::from_pem(&ca)?)
                .identity(reqwest::Identity::from_pem(&identity)?)
                .timeout(Duration::from_secs(30))
                .build()?)
        })
        .collect()
}

/// Runs `op(client, i)` for i in 0..n: client k does i = k, k + clients, ...
/// one after the other, all clients at once. Returns the results by i and
/// the latency of every call.
async fn run_clients<T, F, Fut>(clients: &[reqwest::Client], n: usize, op: F) -> Result<(Vec<T>, Stats)>
where
    T: Send + 'static,
    F: Fn(reqwest::Client, usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T>> + Send,
{
    let op = Arc::new(op);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (k, client) in clients.iter().enumerate() {
        let (op, client, step) = (op.clone(), client.clone(), clients.len());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for i in (k..n).step_by(step) {
                let t = Instant::now();
                let value = op(client.clone(), i).await?;
                out.push((i, value, t.elapsed()));
            }
            Ok::<_, anyhow::Error>(out)
        }));
    }
    let mut all = Vec::with_capacity(n);
    for task in tasks {
        all.extend(task.await.context("a client task panicked")??);
    }
    let wall = started.elapsed();
    all.sort_by_key(|(i, _, _)| *i);
    let samples = all.iter().map(|(_, _, d)| *d).collect();
    Ok((all.into_iter().map(|(_, v, _)| v).collect(), Stats::new(samples, wall)))
}

/// GETs of `url`, each client doing `per_client` of them.
async fn read_load(clients: &[reqwest::Client], per_client: usize, url: &str) -> Result<Stats> {
    let url = Arc::new(url.to_string());
    let (_, stats) = run_clients(clients, per_client * clients.len(), move |client, _| {
        let url = url.clone();
        async move { get(&client, &url).await.map(|_| ()) }
    })
    .await?;
    Ok(stats)
}

fn llama_body(api_version: &str, name: &str, weight: f64, rv: Option<&str>) -> Value {
    let mut metadata = json!({"name": name, "labels": {"bench": "storage"}});
    if let Some(rv) = rv {
        metadata["resourceVersion"] = json!(rv);
    }
    json!({
        "apiVersion": api_version,
        "kind": "Llama",
        "metadata": metadata,
        "spec": {"weight": weight, "height": 1.0 + (weight % 1.0)},
    })
}

fn name_of(i: usize) -> String {
    format!("llama-{i:05}")
}

/// POSTs one Llama; returns its resourceVersion.
async fn create(client: &reqwest::Client, collection: &str, api_version: &str, i: usize) -> Result<String> {
    let body = llama_body(api_version, &name_of(i), 10.0 + i as f64 * 0.25, None);
    let what = format!("POST {collection} ({})", name_of(i));
    let resp = client.post(collection).json(&body).send().await.with_context(|| what.clone())?;
    rv_of(&answer(&what, resp).await?, &what)
}

/// Creates Llamas 0..n through `clients`.
async fn create_all(
    clients: &[reqwest::Client],
    collection: &str,
    api_version: &'static str,
    n: usize,
) -> Result<(Vec<String>, Stats)> {
    let collection = Arc::new(collection.to_string());
    run_clients(clients, n, move |client, i| {
        let collection = collection.clone();
        async move { create(&client, &collection, api_version, i).await }
    })
    .await
}

/// PUTs every Llama 0..n with a new weight and the resourceVersion it has.
async fn update_all(
    clients: &[reqwest::Client],
    collection: &str,
    api_version: &'static str,
    rvs: Vec<String>,
) -> Result<Stats> {
    let collection = Arc::new(collection.to_string());
    let rvs = Arc::new(rvs);
    let n = rvs.len();
    let (_, stats) = run_clients(clients, n, move |client, i| {
        let (collection, rvs) = (collection.clone(), rvs.clone());
        async move {
            let url = format!("{collection}/{}", name_of(i));
            let body = llama_body(api_version, &name_of(i), 20.0 + i as f64 * 0.25, Some(&rvs[i]));
            let what = format!("PUT {url}");
            let resp = client.put(&url).json(&body).send().await.with_context(|| what.clone())?;
            let new_rv = rv_of(&answer(&what, resp).await?, &what)?;
            if new_rv == rvs[i] {
                bail!("{what}: resourceVersion did not move ({new_rv})");
            }
            Ok(())
        }
    })
    .await?;
    Ok(stats)
}

/// Server-side applies every Llama 0..n (PATCH, `application/apply-patch+yaml`,
/// one field manager) with a new weight: the object changes on every apply.
async fn apply_all(
    clients: &[reqwest::Client],
    collection: &str,
    api_version: &'static str,
    n: usize,
) -> Result<Stats> {
    let collection = Arc::new(collection.to_string());
    let (_, stats) = run_clients(clients, n, move |client, i| {
        let collection = collection.clone();
        async move {
            let url = format!("{collection}/{}?fieldManager=bench-applier&force=true", name_of(i));
            let body = llama_body(api_version, &name_of(i), 30.0 + i as f64 * 0.25, None);
            let what = format!("PATCH (apply) {url}");
            let resp = client
                .patch(&url)
                .header("Content-Type", "application/apply-patch+yaml")
                .body(body.to_string())
                .send()
                .await
                .with_context(|| what.clone())?;
            answer(&what, resp).await?;
            Ok(())
        }
    })
    .await?;
    Ok(stats)
}

// ---------------------------------------------------------------- part 1: reads

struct ReadRow {
    op: String,
    store: String,
    /// "latest" or "rv=0"
    read: &'static str,
    seq: Stats,
    conc: Stats,
}

/// Rounds each case is split into, alternating between the stores measured
/// together, so that load from outside (other processes on the machine)
/// falls on all of them alike.
const ROUNDS: usize = 4;

/// Where a read suite sends its requests.
struct ReadTarget {
    store: String,
    clients: Vec<reqwest::Client>,
    /// The collection holding `cfg.llamas` Llamas (READ_NS).
    collection: String,
    /// At most this many GETs / LISTs per case (a slow reference would
    /// otherwise take most of the run).
    cap: (usize, usize),
}

impl ReadTarget {
    fn farm(server: &Server, store: &str, cfg: &Config) -> Result<ReadTarget> {
        Ok(ReadTarget {
            store: store.to_string(),
            clients: farm_clients(server, cfg.clients)?,
            collection: server.llamas(READ_NS, ""),
            cap: (usize::MAX, usize::MAX),
        })
    }

    /// Creates the Llamas the reads read; returns how fast that went.
    async fn seed(&self, api_version: &'static str, cfg: &Config) -> Result<Stats> {
        let (_, stats) = create_all(&self.clients, &self.collection, api_version, cfg.llamas).await?;
        Ok(stats)
    }

    /// Checks (not timing) that the list holds every Llama, whichever way it
    /// is read; returns the LIST body's size.
    async fn check(&self, cfg: &Config) -> Result<usize> {
        let mut list_bytes = 0;
        for url in [self.collection.clone(), format!("{}?resourceVersion=0", self.collection)] {
            let body = get(&self.clients[0], &url).await?;
            list_bytes = body.len();
            let v: Value = serde_json::from_slice(&body).context("list body")?;
            let items = v["items"].as_array().map(Vec::len).unwrap_or(0);
            if items != cfg.llamas {
                bail!("{}: {url} lists {items} Llamas, expected {}", self.store, cfg.llamas);
            }
        }
        Ok(list_bytes)
    }
}

/// Adds one round's results to a case's.
fn merge(into: &mut Stats, round: Stats) {
    into.samples.extend(round.samples);
    into.samples.sort();
    into.wall += round.wall;
}

/// GET and LIST, latest and resourceVersion=0, on every target: for each
/// case a warm-up, then `n` sequential requests and `n` per client
/// concurrently, in ROUNDS rounds alternating between the targets.
async fn read_suite(targets: &[&ReadTarget], cfg: &Config) -> Result<Vec<ReadRow>> {
    let list_op = format!("LIST {} Llamas", cfg.llamas);
    let mut rows = Vec::new();
    for (op, is_get) in [("GET 1 Llama", true), (list_op.as_str(), false)] {
        for (read, query) in [("latest", ""), ("rv=0", "?resourceVersion=0")] {
            let mut cases = Vec::new();
            for t in targets {
                let url = if is_get {
                    format!("{}/{}{query}", t.collection, name_of(cfg.llamas / 2))
                } else {
                    format!("{}{query}", t.collection)
                };
                let n = if is_get { cfg.gets.min(t.cap.0) } else { cfg.lists.min(t.cap.1) };
                read_load(&t.clients[..1], (n / 4).max(10), &url).await?;
                cases.push((url, n, Stats::default(), Stats::default()));
            }
            eprintln!("  {op}, {read}: {}", targets.iter().map(|t| t.store.as_str()).collect::<Vec<_>>().join(", "));
            for round in 0..ROUNDS {
                for (t, (url, n, seq, _)) in targets.iter().zip(cases.iter_mut()) {
                    let share = *n / ROUNDS + usize::from(round < *n % ROUNDS);
                    merge(seq, read_load(&t.clients[..1], share, url).await?);
                }
            }
            for round in 0..ROUNDS {
                for (t, (url, n, _, conc)) in targets.iter().zip(cases.iter_mut()) {
                    let share = *n / ROUNDS + usize::from(round < *n % ROUNDS);
                    merge(conc, read_load(&t.clients, share, url).await?);
                }
            }
            for (t, (_, _, seq, conc)) in targets.iter().zip(cases) {
                rows.push(ReadRow { op: op.to_string(), store: t.store.clone(), read, seq, conc });
            }
        }
    }
    Ok(rows)
}

fn read_table(rows: &[ReadRow], cfg: &Config, farm_list_bytes: usize, kube_list_bytes: usize) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "\n## Reads: GET of one Llama, LIST of {} Llamas in one namespace\n\n\
         Sequential (seq): one client, {} GETs / {} LISTs per case after a warm-up. Concurrent (conc): {} clients, \
         each {} GETs / {} LISTs, one HTTP/2 connection each. \"latest\": no resourceVersion (a consistent \
         read); \"rv=0\": any cached state. \"vs memory\": this store / memory, same request and read \
         (latency: p50 ratio, >1 = slower; throughput: req/s ratio, <1 = slower). Each case runs in {ROUNDS} \
         rounds alternating between memory and the standalone etcd, then between the control plane's etcd and \
         kube-apiserver (measured later, with the control plane running). kube-apiserver serving the same reads \
         of the CRD is a reference, capped at {} GETs / {} LISTs per case (it is slow at LISTs). LIST body: \
         {farm_list_bytes} bytes from farm-apiserver, {kube_list_bytes} from kube-apiserver (managedFields).\n\n",
        cfg.llamas, cfg.gets, cfg.lists, cfg.clients, cfg.gets, cfg.lists, KUBE_READ_CAP.0, KUBE_READ_CAP.1
    ));
    out.push_str(
        "| request | read | store | requests seq / conc | seq p50 | seq p99 | seq mean | seq vs memory (p50) \
         | conc req/s | conc p50 | conc p99 | conc vs memory (req/s) |\n",
    );
    out.push_str("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    let mut sorted: Vec<&ReadRow> = rows.iter().collect();
    // By request and read; stores stay in the order measured.
    sorted.sort_by(|a, b| (&a.op, a.read).cmp(&(&b.op, b.read)));
    for r in sorted {
        let base = rows.iter().find(|b| b.op == r.op && b.read == r.read && b.store == "memory");
        let (seq_vs, conc_vs) = match base {
            Some(b) if r.store != "memory" => (
                ratio(r.seq.pct(50.0).as_secs_f64(), b.seq.pct(50.0).as_secs_f64()),
                ratio(r.conc.rate(), b.conc.rate()),
            ),
            _ => ("—".to_string(), "—".to_string()),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} / {} | {} | {} | {} | {} | {:.0} | {} | {} | {} |\n",
            r.op,
            r.read,
            r.store,
            r.seq.samples.len(),
            r.conc.samples.len(),
            ms(r.seq.pct(50.0)),
            ms(r.seq.pct(99.0)),
            ms(r.seq.mean()),
            seq_vs,
            r.conc.rate(),
            ms(r.conc.pct(50.0)),
            ms(r.conc.pct(99.0)),
            conc_vs
        ));
    }
    out
}

// ---------------------------------------------------------------- part 2: writes

struct WriteRow {
    op: &'static str,
    server: &'static str,
    stats: Stats,
}

/// Installs the Llama CRD and waits until kube-apiserver serves it.
async fn install_crd(cp: &ControlPlane, client: &reqwest::Client, collection: &str) -> Result<()> {
    common::crd::install_llama_crd(cp, CRD_GROUP).map_err(anyhow::Error::msg)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match get(client, collection).await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e.context("kube-apiserver does not serve the CRD")),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

fn write_table(rows: &[WriteRow], cfg: &Config) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "\n## Writes to the same etcd: farm-apiserver --storage etcd vs kube-apiserver (CRD)\n\n\
         {} creates (POST), then {} updates (PUT with the current resourceVersion), then {} server-side \
         applies (PATCH application/apply-patch+yaml, a second field manager with force, a new weight each), \
         {} clients, one HTTP/2 connection each, same JSON bodies; every write records managedFields. \
         \"farm / kube\": req/s ratio (>1 = farm faster).\n\n",
        cfg.writes, cfg.writes, cfg.writes, cfg.clients
    ));
    out.push_str("| op | server | requests | req/s | p50 | p99 | mean | farm / kube (req/s) |\n");
    out.push_str("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for r in rows {
        let peer = rows.iter().find(|p| p.op == r.op && p.server != r.server);
        let vs = match peer {
            Some(p) if r.server.starts_with("farm") => ratio(r.stats.rate(), p.stats.rate()),
            _ => "—".into(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {} | {} | {} | {} |\n",
            r.op,
            r.server,
            r.stats.samples.len(),
            r.stats.rate(),
            ms(r.stats.pct(50.0)),
            ms(r.stats.pct(99.0)),
            ms(r.stats.mean()),
            vs
        ));
    }
    out
}

// ---------------------------------------------------------------- part 3: watch delivery

/// One watch event: (name, resourceVersion) and when it arrived.
type Seen = ((String, String), Instant);

/// Opens a watch on `collection` from the collection's current revision; its
/// events arrive on the channel, each stamped when its bytes arrived.
async fn open_watch(client: &reqwest::Client, collection: &str) -> Result<mpsc::UnboundedReceiver<Seen>> {
    let list_rv = rv_of(&get(client, collection).await?, collection)?;
    let url = format!("{collection}?watch=true&resourceVersion={list_rv}&timeoutSeconds=600");
    let mut resp = client.get(&url).send().await.with_context(|| format!("GET {url}"))?;
    if !resp.status().is_success() || resp.version() != reqwest::Version::HTTP_2 {
        bail!("GET {url}: {} over {:?}", resp.status(), resp.version());
    }
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut buf: Vec<u8> = Vec::new();
        // Ends (dropping tx) when the stream ends or fails: the reader then
        // sees the channel close and reports which events never came.
        while let Ok(Some(chunk)) = resp.chunk().await {
            let at = Instant::now();
            buf.extend_from_slice(&chunk);
            while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=end).collect();
                let Ok(event) = serde_json::from_slice::<Value>(&line) else { continue };
                let meta = &event["object"]["metadata"];
                if let (Some(name), Some(rv)) = (meta["name"].as_str(), meta["resourceVersion"].as_str()) {
                    if tx.send(((name.to_string(), rv.to_string()), at)).is_err() {
                        return;
                    }
                }
            }
        }
    });
    Ok(rx)
}

/// Collects events until every key in `want` was seen (or fails after `timeout`).
async fn await_events(
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    seen: &mut HashMap<(String, String), Instant>,
    want: &[(String, String)],
    timeout: Duration,
    which: &str,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let missing = want.iter().filter(|k| !seen.contains_key(*k)).count();
        if missing == 0 {
            return Ok(());
        }
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some((key, at))) => {
                seen.entry(key).or_insert(at);
            }
            Ok(None) => bail!("the watch on {which} ended with {missing} events not delivered"),
            Err(_) => bail!("{missing} events not delivered on {which} within {timeout:?}"),
        }
    }
}

struct WatchResult {
    writes: usize,
    ack: Stats,
    on_b: Stats,
    on_a: Stats,
    /// Events on B that arrived before A's answer to the write.
    b_before_ack: usize,
}

async fn watch_delivery(a: &Server, b: &Server, cfg: &Config) -> Result<WatchResult> {
    let client_a = a.client.clone();
    // Watch clients without the fixture's 30 s request timeout.
    let watch_client = |s: &Server| -> Result<reqwest::Client> {
        let pem = std::fs::read(&s.ca_file)?;
        Ok(reqwest::Client::builder().add_root_certificate(reqwest::Certificate::from_pem(&pem)?).build()?)
    };
    let mut rx_b = open_watch(&watch_client(b)?, &b.llamas(WATCH_NS, "")).await?;
    let mut rx_a = open_watch(&watch_client(a)?, &a.llamas(WATCH_NS, "")).await?;
    let (mut seen_a, mut seen_b) = (HashMap::new(), HashMap::new());
    let collection = a.llamas(WATCH_NS, "");

    // Warm-up: both watches deliver a write of A before anything is timed.
    let mut warm = Vec::new();
    for i in 0..5 {
        let name = format!("warmup-{i}");
        let what = format!("POST {collection} ({name})");
        let resp = client_a
            .post(&collection)
            .json(&llama_body(FARM_API_VERSION, &name, 1.0, None))
            .send()
            .await
            .with_context(|| what.clone())?;
        warm.push((name, rv_of(&answer(&what, resp).await?, &what)?));
    }
    await_events(&mut rx_b, &mut seen_b, &warm, Duration::from_secs(20), "replica B").await?;
    await_events(&mut rx_a, &mut seen_a, &warm, Duration::from_secs(20), "replica A").await?;

    // Sequential writes on A: even ones create a Llama, odd ones merge-patch it.
    let mut writes = Vec::with_capacity(cfg.watch_writes);
    for i in 0..cfg.watch_writes {
        let name = format!("w-{:05}", i / 2);
        let sent = Instant::now();
        let (what, resp) = if i % 2 == 0 {
            let what = format!("POST {collection} ({name})");
            let body = llama_body(FARM_API_VERSION, &name, 5.0 + i as f64, None);
            (what.clone(), client_a.post(&collection).json(&body).send().await.with_context(|| what)?)
        } else {
            let url = format!("{collection}/{name}");
            let what = format!("PATCH {url}");
            let patch = serde_json::to_vec(&json!({"spec": {"weight": 5.0 + i as f64}}))?;
            let resp = client_a
                .patch(&url)
                .header("Content-Type", "application/merge-patch+json")
                .body(patch)
                .send()
                .await
                .with_context(|| what.clone())?;
            (what, resp)
        };
        let rv = rv_of(&answer(&what, resp).await?, &what)?;
        writes.push(((name, rv), sent, sent.elapsed()));
    }
    let keys: Vec<(String, String)> = writes.iter().map(|(k, _, _)| k.clone()).collect();
    await_events(&mut rx_b, &mut seen_b, &keys, Duration::from_secs(30), "replica B").await?;
    await_events(&mut rx_a, &mut seen_a, &keys, Duration::from_secs(30), "replica A").await?;

    let delay = |seen: &HashMap<(String, String), Instant>| -> Vec<Duration> {
        writes.iter().map(|(k, sent, _)| seen[k].saturating_duration_since(*sent)).collect()
    };
    let b_before_ack = writes.iter().filter(|(k, sent, ack)| seen_b[k] < *sent + *ack).count();
    let wall = Duration::ZERO;
    Ok(WatchResult {
        writes: writes.len(),
        ack: Stats::new(writes.iter().map(|(_, _, ack)| *ack).collect(), wall),
        on_b: Stats::new(delay(&seen_b), wall),
        on_a: Stats::new(delay(&seen_a), wall),
        b_before_ack,
    })
}

fn watch_table(w: &WatchResult) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "\n## Watch delivery across replicas (two farm-apiserver --storage etcd, one etcd and prefix)\n\n\
         {} sequential writes on replica A (creates and merge patches, alternating), each timed from just \
         before it is sent to its event (matched by name and resourceVersion) arriving on a watch.\n\n",
        w.writes
    ));
    out.push_str("| measured | events | p50 | p99 | max | mean |\n| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (what, s) in [
        ("write sent -> event on replica B (the other replica)", &w.on_b),
        ("write sent -> event on replica A (the writing replica)", &w.on_a),
        ("write sent -> 2xx answer from A", &w.ack),
    ] {
        out.push_str(&format!(
            "| {what} | {} | {} | {} | {} | {} |\n",
            s.samples.len(),
            ms(s.pct(50.0)),
            ms(s.pct(99.0)),
            ms(s.max()),
            ms(s.mean())
        ));
    }
    out.push_str(&format!(
        "\nEvents on B that arrived before A's answer to their write: {} of {}\n\
         Target p99 < 50 ms on replica B: {}\n",
        w.b_before_ack,
        w.writes,
        if w.on_b.pct(99.0) < Duration::from_millis(50) { "met" } else { "NOT met" }
    ));
    out
}

// ---------------------------------------------------------------- the run

fn quiet(args: Vec<String>) -> Options {
    // Request logs off: they would be part of what is measured.
    Options { args, log: Some("warn".into()), ..Default::default() }
}

fn etcd_args(endpoint: &str, prefix: &str) -> Vec<String> {
    ["--storage", "etcd", "--etcd-servers", endpoint, "--etcd-prefix", prefix].map(String::from).to_vec()
}

async fn run(cfg: &Config, out: &mut String) -> Result<()> {
    let started = Instant::now();
    let stamp = || format!("[{:>5.1}s]", started.elapsed().as_secs_f64());

    // Part 1: reads, memory vs a standalone etcd (nothing else writes to it).
    eprintln!("{} part 1: starting a standalone etcd and farm-apiserver on memory and on etcd", stamp());
    let etcd = Etcd::start(false);
    let memory = Server::start_with(quiet(Vec::new())).await;
    let on_etcd =
        Server::start_with(quiet(etcd.server_args(&format!("/farm-bench/{}", uuid::Uuid::new_v4().simple())))).await;
    let memory_reads = ReadTarget::farm(&memory, "memory", cfg)?;
    let etcd_reads = ReadTarget::farm(&on_etcd, "etcd (standalone)", cfg)?;
    let seed_memory = memory_reads.seed(FARM_API_VERSION, cfg).await?;
    let seed_etcd = etcd_reads.seed(FARM_API_VERSION, cfg).await?;
    eprintln!(
        "{} created {} Llamas on each ({:.0}/s on memory, {:.0}/s on etcd); measuring reads",
        stamp(),
        cfg.llamas,
        seed_memory.rate(),
        seed_etcd.rate()
    );
    let load_before = common::loadavg();
    let farm_list_bytes = memory_reads.check(cfg).await?;
    etcd_reads.check(cfg).await?;
    let mut reads = read_suite(&[&memory_reads, &etcd_reads], cfg).await?;
    drop((memory, on_etcd, etcd));

    // Part 2: writes, farm-apiserver vs kube-apiserver on the control plane's etcd.
    eprintln!("{} part 2: starting the control plane", stamp());
    let cp_started = Instant::now();
    let cp = cluster::controlplane();
    let cp_time = cp_started.elapsed();
    let endpoint = cp.info["etcdEndpoint"].as_str().ok_or_else(|| anyhow!("etcdEndpoint in {}", cp.info))?.to_string();
    eprintln!("{} control plane {} ready in {cp_time:.1?}, etcd {endpoint}", stamp(), cp.server);
    let kube = kube_clients(cp, cfg.clients)?;
    let kube_collection = format!("{}/apis/{CRD_API_VERSION}/namespaces/{WRITE_NS}/llamas", cp.server);
    cluster::namespace(cp, WRITE_NS);
    install_crd(cp, &kube[0], &kube_collection).await?;
    let prefix = format!("/farm-bench/{}", uuid::Uuid::new_v4().simple());
    let farm = Server::start_with(quiet(etcd_args(&endpoint, &prefix))).await;
    let farm_clients_w = farm_clients(&farm, cfg.clients)?;
    let farm_collection = farm.llamas(WRITE_NS, "");
    // Warm-up of both (connections, caches): a few creates in another namespace.
    const WARMUP_NS: &str = "bench-warmup";
    cluster::namespace(cp, WARMUP_NS);
    create_all(&farm_clients_w, &farm.llamas(WARMUP_NS, ""), FARM_API_VERSION, cfg.clients * 8).await?;
    let kube_warmup = format!("{}/apis/{CRD_API_VERSION}/namespaces/{WARMUP_NS}/llamas", cp.server);
    create_all(&kube, &kube_warmup, CRD_API_VERSION, cfg.clients * 8).await?;

    eprintln!("{} creates: farm-apiserver", stamp());
    let (farm_rvs, farm_creates) = create_all(&farm_clients_w, &farm_collection, FARM_API_VERSION, cfg.writes).await?;
    eprintln!("{} creates: kube-apiserver", stamp());
    let (kube_rvs, kube_creates) = create_all(&kube, &kube_collection, CRD_API_VERSION, cfg.writes).await?;
    eprintln!("{} updates: farm-apiserver", stamp());
    let farm_updates = update_all(&farm_clients_w, &farm_collection, FARM_API_VERSION, farm_rvs).await?;
    eprintln!("{} updates: kube-apiserver", stamp());
    let kube_updates = update_all(&kube, &kube_collection, CRD_API_VERSION, kube_rvs).await?;
    eprintln!("{} server-side applies: farm-apiserver", stamp());
    let farm_applies = apply_all(&farm_clients_w, &farm_collection, FARM_API_VERSION, cfg.writes).await?;
    eprintln!("{} server-side applies: kube-apiserver", stamp());
    let kube_applies = apply_all(&kube, &kube_collection, CRD_API_VERSION, cfg.writes).await?;
    let writes = vec![
        WriteRow { op: "create", server: "farm-apiserver (etcd)", stats: farm_creates },
        WriteRow { op: "create", server: "kube-apiserver (CRD)", stats: kube_creates },
        WriteRow { op: "update (PUT)", server: "farm-apiserver (etcd)", stats: farm_updates },
        WriteRow { op: "update (PUT)", server: "kube-apiserver (CRD)", stats: kube_updates },
        WriteRow { op: "server-side apply", server: "farm-apiserver (etcd)", stats: farm_applies },
        WriteRow { op: "server-side apply", server: "kube-apiserver (CRD)", stats: kube_applies },
    ];

    // Part 1 again on the control plane's etcd, where kube-apiserver's own
    // writes (leases, events, ...) move etcd's revision past this prefix's.
    eprintln!("{} part 1 on the control plane's etcd: seeding and measuring reads", stamp());
    let cp_reads = ReadTarget::farm(&farm, "etcd (control plane's)", cfg)?;
    cp_reads.seed(FARM_API_VERSION, cfg).await?;
    // The reference: kube-apiserver serving the same reads of the CRD, on the same etcd.
    cluster::namespace(cp, READ_NS);
    let kube_reads = ReadTarget {
        store: "kube-apiserver (CRD, control plane's etcd)".into(),
        clients: kube.clone(),
        collection: format!("{}/apis/{CRD_API_VERSION}/namespaces/{READ_NS}/llamas", cp.server),
        cap: KUBE_READ_CAP,
    };
    kube_reads.seed(CRD_API_VERSION, cfg).await?;
    cp_reads.check(cfg).await?;
    let kube_list_bytes = kube_reads.check(cfg).await?;
    reads.extend(read_suite(&[&cp_reads, &kube_reads], cfg).await?);
    drop(farm);

    // Part 3: watch delivery between two replicas on one prefix.
    eprintln!("{} part 3: two replicas on one prefix, watch delivery", stamp());
    let prefix = format!("/farm-bench/{}", uuid::Uuid::new_v4().simple());
    let a = Server::start_with(quiet(etcd_args(&endpoint, &prefix))).await;
    let b = Server::start_with(quiet(etcd_args(&endpoint, &prefix))).await;
    let watch = watch_delivery(&a, &b, cfg).await?;
    drop((a, b));
    let load_after = common::loadavg();

    out.push_str(&format!(
        "\n# farm-apiserver storage benchmark ({} cores, release build, loopback HTTPS, HTTP/2)\n",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    ));
    out.push_str(&read_table(&reads, cfg, farm_list_bytes, kube_list_bytes));
    out.push_str(&write_table(&writes, cfg));
    out.push_str(&watch_table(&watch));
    out.push_str(&format!(
        "\nSeeding {} Llamas for the reads ({} clients): {:.0}/s on memory, {:.0}/s on the standalone etcd\n\
         Control plane start: {cp_time:.1?}. etcd runs without fsync (tests/controlplane): writes measure \
         the servers and etcd's processing, not a disk.\n\
         Load average (1/5/15 min): {load_before} before the reads, {load_after} at the end\n\
         Whole run: {:.1?}\n",
        cfg.llamas,
        cfg.clients,
        seed_memory.rate(),
        seed_etcd.rate(),
        started.elapsed()
    ));
    Ok(())
}

fn main() {
    let cfg = match Config::from_env() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("storage benchmark: {e:#}");
            std::process::exit(2);
        }
    };
    eprintln!(
        "storage benchmark: the run takes about 1-2 minutes on 2 cores with the default counts (plus about \
         11 minutes once if the control plane is not built yet): reads memory vs etcd, writes farm-apiserver vs \
         kube-apiserver, watch delivery between replicas"
    );
    // Servers are dropped (stopped) when `run` returns, whatever it returns.
    if let Err(e) = report::run_and_print("storage benchmark", async |out| run(&cfg, out).await) {
        eprintln!("storage benchmark FAILED: {e:#}");
        std::process::exit(1);
    }
}
