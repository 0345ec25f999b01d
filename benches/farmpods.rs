//! FarmPods at growing cluster sizes: farm-apiserver's watch-fed cache against
//! the per-request approach (list Pods from kube-apiserver, convert,
//! serialize), side by side against a real control plane, at 1,000, 10,000
//! and 50,000 Pods; with list latency (all namespaces, plain and gzipped as
//! client-go asks for it, one namespace, one page of 500 at the first and at
//! the last offset), farm-apiserver's RSS and its
//! growth per Pod, and a linear projection to 150,000 Pods. It writes
//! `docs/bench/farmpods-latency.svg` and `docs/bench/farmpods-memory.svg`.
//!
//! `cargo bench --bench farmpods` (release build; about 7 minutes after the
//! build, most of it creating 50,000 Pods and the per-request runs). Each case
//! also reports the CPU it used, split between the server, this client, other
//! processes and steal (`support/cpu.rs`): on two cores, that split is what
//! explains a slower run. It prints markdown tables
//! and never asserts timing. Environment overrides:
//!
//! | env | default | meaning |
//! | --- | --- | --- |
//! | `FARM_BENCH_PODS` | 1000,10000,50000 | Pod counts measured, ascending, over namespaces bench-0..bench-9 |
//! | `FARM_BENCH_ITERS_ALL` | 100 | requests listing all namespaces |
//! | `FARM_BENCH_ITERS_NS` | 300 | requests listing namespace bench-3, and pages |
//! | `FARM_BENCH_DIRECT_BUDGET_SECS` | 60 | each per-request case is cut to fit this (never under 10 requests) |
//! | `FARM_BENCH_CONCURRENCY` | 32 | Pod creations in flight |
//! | `FARM_BENCH_CHARTS` | docs/bench | where the SVG charts go |
//! | `FARM_BENCH_ALLOCATORS` | — | memory only, per allocator setting: `name\|KEY=VALUE\|...;name2\|...` (environment of the server, e.g. `GLIBC_TUNABLES=...` or `LD_PRELOAD=...`; a name alone: as built). At each size, each setting's server is started afresh and its RSS read after the Pod sync and after 5 lists of all namespaces; the latency cases are skipped |
//!
//! Upstream calls are read from kube-apiserver's own `/metrics`
//! (`apiserver_request_total` for resource `pods`) before and after each case.

// The same fixtures as the tests: control plane, farm-apiserver, TLS clients.
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/pods.rs"]
mod pods;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{Options, Server};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};

const ONE_NAMESPACE: &str = "bench-3";
const FARMPODS: &str = "/apis/farm.example.com/v1alpha";
const PAGE: usize = 500;

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// Namespaces bench-0..9, each with its `default` ServiceAccount (Pods need it).
async fn create_namespaces(client: &kube::Client) {
    let nss: Api<Namespace> = Api::all(client.clone());
    for n in 0..pods::NAMESPACES {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": format!("bench-{n}")}})).expect("namespace manifest");
        nss.create(&PostParams::default(), &ns).await.expect("create namespace");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for n in 0..pods::NAMESPACES {
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &format!("bench-{n}"));
        while sas.get_opt("default").await.expect("get service account").is_none() {
            assert!(Instant::now() < deadline, "no default service account in bench-{n}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Runs `op(i)` for 0..n with `concurrency` in flight, each retried a few times.
async fn for_each_bounded<F, Fut>(n: usize, concurrency: usize, what: &str, op: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    futures::stream::iter(0..n)
        .map(|i| {
            let op = &op;
            async move {
                let mut attempt = 0;
                loop {
                    match op(i).await {
                        Ok(()) => return Ok(()),
                        Err(e) if attempt < 4 => {
                            attempt += 1;
                            eprintln!("{what} {i}: {e}; retrying");
                            tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
                        }
                        Err(e) => return Err(format!("{what} {i}: {e}")),
                    }
                }
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<()>()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

fn pods_api(client: &kube::Client, i: usize) -> Api<Pod> {
    Api::namespaced(client.clone(), &pods::namespace_of(i))
}

/// Upstream request counters for Pods, from kube-apiserver's /metrics.
#[derive(Clone, Copy, Default)]
struct Upstream {
    lists: f64,
    watches: f64,
    open_watches: f64,
}

impl Upstream {
    async fn read(client: &kube::Client) -> Upstream {
        let req = http::Request::get("/metrics").body(Vec::new()).expect("metrics request");
        let text = client.request_text(req).await.expect("kube-apiserver /metrics");
        let mut u = Upstream::default();
        for line in text.lines() {
            let Some((series, value)) = line.rsplit_once(' ') else { continue };
            if !series.contains("resource=\"pods\"") || !series.contains("subresource=\"\"") {
                continue;
            }
            let value: f64 = value.parse().unwrap_or(0.0);
            if series.starts_with("apiserver_request_total{") {
                if series.contains("verb=\"LIST\"") {
                    u.lists += value;
                } else if series.contains("verb=\"WATCH\"") {
                    u.watches += value;
                }
            } else if series.starts_with("apiserver_longrunning_requests{") && series.contains("verb=\"WATCH\"") {
                u.open_watches += value;
            }
        }
        u
    }
}

struct Row {
    case: String,
    requests: usize,
    samples: Vec<Duration>,
    bytes: usize,
    lists: f64,
    watches: f64,
    /// Per-request only: the part of the time spent in the upstream list.
    upstream: Vec<Duration>,
    cpu: cpu::CpuSpent,
}

impl Row {
    fn percentile(&self, p: f64) -> Duration {
        let mut s = self.samples.clone();
        s.sort();
        if s.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
        s[rank.clamp(1, s.len()) - 1]
    }

    fn mean(&self) -> Duration {
        mean(&self.samples)
    }
}

fn mean(samples: &[Duration]) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.iter().sum::<Duration>() / samples.len() as u32
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// One request to farm-apiserver; returns the body length (compressed, when
/// `gzip` asks for it: this client does not decompress).
async fn farm_get(http: &reqwest::Client, url: &str, gzip: bool) -> Result<usize, String> {
    let mut req = http.get(url).header("Accept", "application/json");
    if gzip {
        req = req.header("Accept-Encoding", "gzip");
    }
    let r = req.send().await.map_err(|e| e.to_string())?;
    let status = r.status();
    let body = r.bytes().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{url}: {status}: {}", String::from_utf8_lossy(&body)));
    }
    Ok(body.len())
}

/// The per-request approach: list Pods upstream, convert each, serialize the
/// list. Returns the body and how long the upstream list (with decoding) took.
async fn direct_list(pods: &Api<Pod>, params: &ListParams) -> Result<(Vec<u8>, Duration), String> {
    let t = Instant::now();
    let list = pods.list(params).await.map_err(|e| e.to_string())?;
    let listed = t.elapsed();
    let items: Vec<Value> = list.items.iter().filter_map(farm_apiserver::farmpod::farmpod_of).map(|(_, v)| v).collect();
    let out = json!({
        "apiVersion": "farm.example.com/v1alpha",
        "kind": "FarmPodList",
        "metadata": {"resourceVersion": list.metadata.resource_version.unwrap_or_default()},
        "items": items,
    });
    Ok((serde_json::to_vec(&out).map_err(|e| e.to_string())?, listed))
}

fn item_count(body: &[u8]) -> usize {
    serde_json::from_slice::<Value>(body).ok().and_then(|v| v["items"].as_array().map(Vec::len)).unwrap_or(usize::MAX)
}

async fn bench_farm(farm: &Server, kube: &kube::Client, case: &str, url: &str, iters: usize) -> Row {
    bench_farm_encoded(farm, kube, case, url, iters, false).await
}

async fn bench_farm_encoded(
    farm: &Server,
    kube: &kube::Client,
    case: &str,
    url: &str,
    iters: usize,
    gzip: bool,
) -> Row {
    let http = &farm.client;
    for _ in 0..3 {
        farm_get(http, url, gzip).await.unwrap_or_else(|e| panic!("warm-up {e}"));
    }
    let before = Upstream::read(kube).await;
    let cpu_before = cpu::CpuClock::now(farm.pid());
    let mut samples = Vec::with_capacity(iters);
    let mut bytes = 0;
    for _ in 0..iters {
        let t = Instant::now();
        match farm_get(http, url, gzip).await {
            Ok(n) => bytes = n,
            Err(e) => {
                eprintln!("{case}: {e}");
                continue;
            }
        }
        samples.push(t.elapsed());
    }
    let cpu = cpu::CpuClock::now(farm.pid()).since(&cpu_before);
    let after = Upstream::read(kube).await;
    Row {
        case: case.into(),
        requests: samples.len(),
        samples,
        bytes,
        lists: after.lists - before.lists,
        watches: after.watches - before.watches,
        upstream: Vec::new(),
        cpu,
    }
}

async fn bench_direct(
    cp: &common::cluster::ControlPlane,
    pods: &Api<Pod>,
    params: &ListParams,
    kube: &kube::Client,
    case: &str,
    iters: usize,
    budget: Duration,
) -> Row {
    // Warm-up, also sizing the run to the time budget (at least 10 requests).
    let t = Instant::now();
    for _ in 0..2 {
        direct_list(pods, params).await.unwrap_or_else(|e| panic!("warm-up {case}: {e}"));
    }
    let one = t.elapsed() / 2;
    let iters = iters.min((budget.as_secs_f64() / one.as_secs_f64().max(1e-6)) as usize).max(10);
    let before = Upstream::read(kube).await;
    let cpu_before = cpu::CpuClock::now(cp.pid);
    let mut samples = Vec::with_capacity(iters);
    let mut upstream = Vec::with_capacity(iters);
    let mut bytes = 0;
    for _ in 0..iters {
        let t = Instant::now();
        match direct_list(pods, params).await {
            Ok((body, listed)) => {
                bytes = body.len();
                upstream.push(listed);
            }
            Err(e) => {
                eprintln!("{case}: {e}");
                continue;
            }
        }
        samples.push(t.elapsed());
    }
    let cpu = cpu::CpuClock::now(cp.pid).since(&cpu_before);
    let after = Upstream::read(kube).await;
    Row {
        case: case.into(),
        requests: samples.len(),
        samples,
        bytes,
        lists: after.lists - before.lists,
        watches: after.watches - before.watches,
        upstream,
        cpu,
    }
}

/// The continue token of the last page of `limit` items, walking every page.
async fn last_page_token(http: &reqwest::Client, url: &str, limit: usize) -> (String, usize) {
    let mut token = String::new();
    let mut offset = 0;
    loop {
        let page_url = format!("{url}?limit={limit}&continue={token}");
        let page: Value = http.get(&page_url).send().await.expect("page").json().await.expect("page body");
        let next = page["metadata"]["continue"].as_str().unwrap_or_default().to_string();
        if next.is_empty() {
            return (token, offset);
        }
        offset += page["items"].as_array().map(Vec::len).unwrap_or(0);
        token = next;
    }
}

/// What one Pod count measured.
struct Size {
    pods: usize,
    rows: Vec<Row>,
    sync: Duration,
    rss_synced: f64,
    rss_after: f64,
    load: String,
}

impl Size {
    fn row(&self, prefix: &str) -> &Row {
        self.rows.iter().find(|r| r.case.starts_with(prefix)).unwrap_or_else(|| panic!("no case {prefix}"))
    }
}

/// Starts farm-apiserver on the control plane and waits for its Pod cache.
async fn start_farm(cp: &common::cluster::ControlPlane) -> (Server, Duration) {
    start_farm_with(cp, Vec::new()).await
}

/// [`start_farm`] with environment variables for the server process.
async fn start_farm_with(cp: &common::cluster::ControlPlane, env: Vec<(String, String)>) -> (Server, Duration) {
    let started = Instant::now();
    let farm = Server::start_with(Options {
        env,
        kubeconfig: Some(cp.kubeconfig.clone()),
        // Request logs off: they would be part of what is measured.
        log: Some("info".into()),
        ready_timeout: Some(Duration::from_secs(600)),
        ..Default::default()
    })
    .await;
    (farm, started.elapsed())
}

async fn measure_size(cp: &common::cluster::ControlPlane, kube: &kube::Client, n_pods: usize) -> Size {
    let iters_all = env_usize("FARM_BENCH_ITERS_ALL", 100);
    let iters_ns = env_usize("FARM_BENCH_ITERS_NS", 300);
    let budget = Duration::from_secs(env_usize("FARM_BENCH_DIRECT_BUDGET_SECS", 60) as u64);

    eprintln!("[{n_pods}] starting farm-apiserver ({})", env!("CARGO_BIN_EXE_farm-apiserver"));
    let (mut farm, sync) = start_farm(cp).await;
    let rss_synced = common::rss_mib(farm.pid());
    eprintln!("[{n_pods}] farm-apiserver ready in {sync:.1?}, RSS {rss_synced:.1} MiB");
    let http = farm.client.clone();

    // Sanity (not timing): both approaches see every Pod.
    let all_url = format!("{}{FARMPODS}/farmpods", farm.base);
    let ns_url = format!("{}{FARMPODS}/namespaces/{ONE_NAMESPACE}/farmpods", farm.base);
    let body = http.get(&all_url).send().await.expect("list farmpods").bytes().await.expect("farmpods body");
    assert_eq!(item_count(&body), n_pods, "farm-apiserver lists every Pod");
    let pods_all: Api<Pod> = Api::all(kube.clone());
    let pods_ns: Api<Pod> = Api::namespaced(kube.clone(), ONE_NAMESPACE);
    let everything = ListParams::default();
    let first_page = ListParams::default().limit(PAGE as u32);
    assert_eq!(item_count(&direct_list(&pods_all, &everything).await.expect("direct list").0), n_pods);
    let (last_token, last_offset) = last_page_token(&http, &all_url, PAGE).await;
    let last_page_url = format!("{all_url}?limit={PAGE}&continue={last_token}");

    let load_before = common::loadavg();
    let mut rows = Vec::new();
    eprintln!("[{n_pods}] measuring farm-apiserver");
    rows.push(bench_farm(&farm, kube, "farm-apiserver, all namespaces", &all_url, iters_all).await);
    let gzip_case = "farm-apiserver, all namespaces, gzip (as client-go asks)";
    rows.push(bench_farm_encoded(&farm, kube, gzip_case, &all_url, iters_all, true).await);
    rows.push(bench_farm(&farm, kube, &format!("farm-apiserver, {ONE_NAMESPACE}"), &ns_url, iters_ns).await);
    let first_page_url = format!("{all_url}?limit={PAGE}");
    rows.push(bench_farm(&farm, kube, "farm-apiserver, first page of 500", &first_page_url, iters_ns).await);
    let last_case = format!("farm-apiserver, page of 500 at offset {last_offset}");
    rows.push(bench_farm(&farm, kube, &last_case, &last_page_url, iters_ns).await);
    eprintln!("[{n_pods}] measuring the per-request approach");
    rows.push(bench_direct(cp, &pods_all, &everything, kube, "per-request, all namespaces", iters_all, budget).await);
    let ns_case = format!("per-request, {ONE_NAMESPACE}");
    rows.push(bench_direct(cp, &pods_ns, &everything, kube, &ns_case, iters_ns, budget).await);
    rows.push(bench_direct(cp, &pods_all, &first_page, kube, "per-request, first page of 500", iters_ns, budget).await);
    let load = format!("{load_before} before, {} after", common::loadavg());
    let rss_after = common::rss_mib(farm.pid());
    farm.terminate().await;
    Size { pods: n_pods, rows, sync, rss_synced, rss_after, load }
}

/// Creates Pods `from..to` and starts every other one.
async fn grow_cluster(kube: &kube::Client, from: usize, to: usize, concurrency: usize) -> String {
    let started = Instant::now();
    for_each_bounded(to - from, concurrency, "create pod", |k| {
        let i = from + k;
        let api = pods_api(kube, i);
        async move {
            match api.create(&PostParams::default(), &pods::pod(i)).await {
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                r => r.map(|_| ()),
            }
        }
    })
    .await;
    let created = started.elapsed();
    let started = Instant::now();
    let running: Vec<usize> = (from..to).filter(|i| i.is_multiple_of(2)).collect();
    for_each_bounded(running.len(), concurrency, "patch pod status", |k| {
        let i = running[k];
        let api = pods_api(kube, i);
        async move {
            api.patch_status(&format!("pod-{i:05}"), &PatchParams::default(), &Patch::Merge(pods::running_status(i)))
                .await
                .map(|_| ())
        }
    })
    .await;
    format!(
        "{} Pods created in {created:.1?} ({:.0}/s), {} started in {:.1?}",
        to - from,
        (to - from) as f64 / created.as_secs_f64(),
        running.len(),
        started.elapsed()
    )
}

fn kb_per_pod(rss: f64, baseline: f64, pods: usize) -> f64 {
    (rss - baseline) * 1024.0 / pods as f64
}

fn report(sizes: &[Size], baseline_rss: f64, growth_log: &[String], cp_start: Duration) -> String {
    let mut out = String::new();
    for s in sizes {
        out.push_str(&format!(
            "\n## {} Pods in {} namespaces ({} per namespace)\n\n",
            s.pods,
            pods::NAMESPACES,
            s.pods / pods::NAMESPACES
        ));
        out.push_str(
            "| case | requests | p50 | p99 | mean | bytes | upstream LISTs | upstream WATCHes | CPU ms per request: server / client / others / steal |\n",
        );
        out.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for r in &s.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.case,
                r.requests,
                ms(r.percentile(50.0)),
                ms(r.percentile(99.0)),
                ms(r.mean()),
                r.bytes,
                r.lists,
                r.watches,
                r.cpu.per_request(r.requests)
            ));
        }
        out.push_str(
            "\nCPU: the server is farm-apiserver for its cases and the control plane process (kube-apiserver, etcd, \
             kube-controller-manager) for the per-request ones; the client is this benchmark; others are every other \
             process; steal is time the hypervisor gave to other guests. Summed over both cores.\n",
        );
        for r in s.rows.iter().filter(|r| !r.upstream.is_empty()) {
            let list = mean(&r.upstream);
            out.push_str(&format!(
                "\nPer-request mean split, {}: upstream LIST with decoding {}, convert + serialize {}",
                r.case,
                ms(list),
                ms(r.mean().saturating_sub(list))
            ));
        }
        out.push_str(&format!(
            "\n\nfarm-apiserver start to /readyz (full Pod sync): {:.1?}; RSS {:.1} MiB after sync, {:.1} MiB after the runs; load average {}\n",
            s.sync, s.rss_synced, s.rss_after, s.load
        ));
    }

    out.push_str("\n## Growth with the Pod count\n\n");
    out.push_str(&format!(
        "farm-apiserver with no Pods: RSS {baseline_rss:.1} MiB. KB per Pod = (RSS after sync - that) / Pods.\n\n"
    ));
    out.push_str("| Pods | all, p50 | one namespace, p50 | first page, p50 | last page, p50 | per-request all, p50 | RSS after sync | KB per Pod | RSS after runs |\n");
    out.push_str("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for s in sizes {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.1} MiB | {:.2} | {:.1} MiB |\n",
            s.pods,
            ms(s.row("farm-apiserver, all").percentile(50.0)),
            ms(s.row(&format!("farm-apiserver, {ONE_NAMESPACE}")).percentile(50.0)),
            ms(s.row("farm-apiserver, first page").percentile(50.0)),
            ms(s.row("farm-apiserver, page of 500 at").percentile(50.0)),
            ms(s.row("per-request, all").percentile(50.0)),
            s.rss_synced,
            kb_per_pod(s.rss_synced, baseline_rss, s.pods),
            s.rss_after
        ));
    }
    if let [.., a, b] = sizes {
        let per_k = |f: &dyn Fn(&Size) -> f64| (f(b) - f(a)) / ((b.pods - a.pods) as f64 / 1000.0);
        let rss_k = per_k(&|s| s.rss_synced);
        let all_k = per_k(&|s| s.row("farm-apiserver, all").percentile(50.0).as_secs_f64() * 1000.0);
        let direct_k = per_k(&|s| s.row("per-request, all").percentile(50.0).as_secs_f64() * 1000.0);
        let at = |base: f64, k: f64| base + k * (150_000 - b.pods) as f64 / 1000.0;
        out.push_str(&format!(
            "\nGrowth per 1,000 Pods between {} and {}: RSS {:.2} MiB ({:.2} KB per Pod), list of all p50 {:.2} ms, per-request list of all p50 {:.1} ms.\n",
            a.pods, b.pods, rss_k, rss_k * 1024.0 / 1000.0, all_k, direct_k
        ));
        out.push_str(&format!(
            "Projection (linear from those two sizes, not measured) for 150,000 Pods: RSS {:.0} MiB, list of all p50 {:.0} ms, per-request list of all p50 {:.1} s.\n",
            at(b.rss_synced, rss_k),
            at(b.row("farm-apiserver, all").percentile(50.0).as_secs_f64() * 1000.0, all_k),
            at(b.row("per-request, all").percentile(50.0).as_secs_f64() * 1000.0, direct_k) / 1000.0
        ));
    }
    out.push_str(&format!("\nControl plane start: {cp_start:.1?}. Cluster growth: {}\n", growth_log.join("; ")));
    out
}

fn charts(sizes: &[Size], baseline_rss: f64) -> anyhow::Result<Vec<PathBuf>> {
    let dir = PathBuf::from(std::env::var("FARM_BENCH_CHARTS").unwrap_or_else(|_| "docs/bench".into()));
    std::fs::create_dir_all(&dir)?;
    let p50 = |prefix: &str| -> Vec<(f64, f64)> {
        sizes.iter().map(|s| (s.pods as f64, s.row(prefix).percentile(50.0).as_secs_f64() * 1000.0)).collect()
    };
    let latency = dir.join("farmpods-latency.svg");
    plot::line_chart_with(
        &latency,
        "FarmPod list latency (p50) against the Pod count",
        "Pods in the cluster",
        "p50 latency, ms (log scale)",
        &[
            ("farm-apiserver, all namespaces", p50("farm-apiserver, all")),
            ("farm-apiserver, one namespace (1/10)", p50(&format!("farm-apiserver, {ONE_NAMESPACE}"))),
            ("farm-apiserver, page of 500 (last)", p50("farm-apiserver, page of 500 at")),
            ("per-request, all namespaces", p50("per-request, all")),
            ("per-request, one namespace", p50(&format!("per-request, {ONE_NAMESPACE}"))),
            ("per-request, page of 500", p50("per-request, first page")),
        ],
        plot::LineChartOptions { log_y: true },
    )?;
    let memory = dir.join("farmpods-memory.svg");
    let mut rss = vec![(0.0, baseline_rss)];
    rss.extend(sizes.iter().map(|s| (s.pods as f64, s.rss_synced)));
    let goal: Vec<(f64, f64)> = rss.iter().map(|(n, _)| (*n, baseline_rss + n * 4.0 / 1024.0)).collect();
    plot::line_chart(
        &memory,
        "farm-apiserver memory against the Pod count",
        "Pods in the cluster",
        "RSS after the Pod sync, MiB",
        &[("farm-apiserver RSS", rss), ("goal: no Pods + 4 KB per Pod", goal)],
    )?;
    Ok(vec![latency, memory])
}

/// `FARM_BENCH_ALLOCATORS`: (name, the server's environment) per setting.
fn allocator_settings() -> Vec<(String, Vec<(String, String)>)> {
    let spec = std::env::var("FARM_BENCH_ALLOCATORS").unwrap_or_default();
    spec.split(';')
        .filter(|s| !s.trim().is_empty())
        .map(|setting| {
            let mut parts = setting.split('|');
            let name = parts.next().unwrap_or_default().trim().to_string();
            let env = parts
                .filter(|kv| !kv.trim().is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("FARM_BENCH_ALLOCATORS: {kv:?}"));
                    (k.trim().to_string(), v.to_string())
                })
                .collect();
            (name, env)
        })
        .collect()
}

/// Memory of one allocator setting at one Pod count (MiB).
struct AllocatorMemory {
    setting: String,
    pods: usize,
    idle: f64,
    synced: f64,
    after_lists: f64,
}

/// Starts the server with each setting, reads its RSS after the Pod sync
/// and after 5 lists of all namespaces.
async fn allocator_memory(
    cp: &common::cluster::ControlPlane,
    settings: &[(String, Vec<(String, String)>)],
    idle: &[f64],
    pods: usize,
) -> Vec<AllocatorMemory> {
    let mut out = Vec::new();
    for ((name, env), idle) in settings.iter().zip(idle) {
        let (mut farm, _) = start_farm_with(cp, env.clone()).await;
        let synced = common::rss_mib(farm.pid());
        let url = format!("{}{FARMPODS}/farmpods", farm.base);
        for _ in 0..5 {
            let body = farm.client.get(&url).send().await.expect("list farmpods").bytes().await.expect("body");
            assert_eq!(item_count(&body), pods, "farm-apiserver lists every Pod");
        }
        let after_lists = common::rss_mib(farm.pid());
        farm.terminate().await;
        eprintln!("[{pods}] {name}: RSS {synced:.1} MiB synced, {after_lists:.1} MiB after 5 lists");
        out.push(AllocatorMemory { setting: name.clone(), pods, idle: *idle, synced, after_lists });
    }
    out
}

fn allocator_report(rows: &[AllocatorMemory]) -> String {
    let mut out = String::from(
        "\n## Memory per allocator setting\n\n| setting | Pods | idle RSS (no Pods) | RSS after the Pod sync | after 5 lists of all | (synced − idle) / Pods |\n| --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.2} KB |\n",
            r.setting,
            r.pods,
            r.idle,
            r.synced,
            r.after_lists,
            (r.synced - r.idle) * 1024.0 * 1024.0 / 1000.0 / r.pods as f64
        ));
    }
    out
}

async fn run() {
    let sizes: Vec<usize> = std::env::var("FARM_BENCH_PODS")
        .unwrap_or_else(|_| "1000,10000,50000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("FARM_BENCH_PODS: ascending, comma-separated Pod counts"))
        .collect();
    let concurrency = env_usize("FARM_BENCH_CONCURRENCY", 32).max(1);
    let run_start = Instant::now();

    eprintln!("starting the control plane");
    let cp = common::cluster::controlplane();
    let cp_start = run_start.elapsed();
    eprintln!("control plane {} ready in {cp_start:.1?}", cp.server);
    let kube = cp.client().await;
    create_namespaces(&kube).await;

    let settings = allocator_settings();
    if !settings.is_empty() {
        let mut idle = Vec::new();
        for (name, env) in &settings {
            let (mut farm, _) = start_farm_with(cp, env.clone()).await;
            // Settled: the Pod watch and the runtime's first allocations done.
            tokio::time::sleep(Duration::from_secs(2)).await;
            idle.push(common::rss_mib(farm.pid()));
            farm.terminate().await;
            eprintln!("{name}: RSS {:.1} MiB with no Pods", idle[idle.len() - 1]);
        }
        let mut rows = Vec::new();
        let mut have = 0;
        for n in sizes {
            assert!(n > have, "FARM_BENCH_PODS must ascend");
            eprintln!("growing the cluster to {n} Pods");
            grow_cluster(&kube, have, n, concurrency).await;
            have = n;
            rows.extend(allocator_memory(cp, &settings, &idle, n).await);
        }
        let mut out = allocator_report(&rows);
        out.push_str(&format!(
            "\nLoad average: {}. The whole run took {:.1?}.\n",
            common::loadavg(),
            run_start.elapsed()
        ));
        let _ = std::io::stdout().write_all(out.as_bytes());
        return;
    }

    let (mut idle, _) = start_farm(cp).await;
    let baseline_rss = common::rss_mib(idle.pid());
    idle.terminate().await;
    eprintln!("farm-apiserver with no Pods: RSS {baseline_rss:.1} MiB");

    let mut measured = Vec::new();
    let mut growth_log = Vec::new();
    let mut have = 0;
    for n in sizes {
        assert!(n > have, "FARM_BENCH_PODS must ascend");
        eprintln!("growing the cluster to {n} Pods");
        growth_log.push(grow_cluster(&kube, have, n, concurrency).await);
        have = n;
        measured.push(measure_size(cp, &kube, n).await);
    }

    let mut out = report(&measured, baseline_rss, &growth_log, cp_start);
    match charts(&measured, baseline_rss) {
        Ok(paths) => out.push_str(&format!(
            "\nCharts: {}\n",
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )),
        Err(e) => out.push_str(&format!("\nCharts not written: {e:#}\n")),
    }
    out.push_str(&format!("\nThe whole run took {:.1?}.\n", run_start.elapsed()));
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(out.as_bytes());
    let _ = stdout.flush();
    // The control plane stops when this process ends (its stdin closes).
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    rt.block_on(run());
}
