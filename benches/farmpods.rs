//! FarmPod list latency: farm-apiserver's watch-fed cache against the
//! per-request approach (list Pods from kube-apiserver, convert, serialize),
//! side by side against a real control plane holding N Pods.
//!
//! `cargo bench --bench farmpods` (release build). It prints a markdown table
//! and never asserts timing. Environment overrides:
//!
//! | env | default | meaning |
//! | --- | --- | --- |
//! | `FARM_BENCH_PODS` | 10000 | Pods created, over namespaces bench-0..bench-9 |
//! | `FARM_BENCH_ITERS_ALL` | 200 | requests listing all namespaces |
//! | `FARM_BENCH_ITERS_NS` | 500 | requests listing namespace bench-3 |
//! | `FARM_BENCH_DIRECT_BUDGET_SECS` | 180 | per-request all-namespaces runs are cut to fit this (never under 20) |
//! | `FARM_BENCH_CONCURRENCY` | 32 | Pod creations in flight |
//!
//! Upstream calls are read from kube-apiserver's own `/metrics`
//! (`apiserver_request_total` for resource `pods`) before and after each case.

// The same fixtures as the tests: control plane, farm-apiserver, TLS clients.
#[path = "../tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{Options, Server};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};

const NAMESPACES: usize = 10;
const ONE_NAMESPACE: &str = "bench-3";
const FARMPODS: &str = "/apis/farm.example.com/v1alpha";
const TIERS: [&str; 3] = ["web", "api", "db"];

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

fn pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("pod-{i:05}"),
            "labels": {"app": format!("app-{}", i % 25), "tier": TIERS[i % 3], "bench": "farmpods"},
        },
        "spec": {
            "nodeName": format!("node-{}", i % 50),
            "containers": [
                {"name": "app", "image": "registry.example.com/app:1.2.3", "ports": [{"containerPort": 8080}]},
                {"name": "sidecar", "image": "registry.example.com/proxy:0.9"},
            ],
        },
    }))
    .expect("pod manifest")
}

fn running_status(i: usize) -> Value {
    json!({"status": {
        "phase": "Running",
        "podIP": format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255),
        "startTime": "2026-01-01T00:00:00Z",
        "containerStatuses": [
            {"name": "app", "ready": true, "restartCount": (i % 3) as i32, "image": "registry.example.com/app:1.2.3",
             "imageID": "", "started": true},
            {"name": "sidecar", "ready": !i.is_multiple_of(5), "restartCount": 0, "image": "registry.example.com/proxy:0.9",
             "imageID": "", "started": true},
        ],
    }})
}

/// Namespaces bench-0..9, each with its `default` ServiceAccount (Pods need it).
async fn create_namespaces(client: &kube::Client) {
    let nss: Api<Namespace> = Api::all(client.clone());
    for n in 0..NAMESPACES {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": format!("bench-{n}")}})).expect("namespace manifest");
        nss.create(&PostParams::default(), &ns).await.expect("create namespace");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for n in 0..NAMESPACES {
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
    Api::namespaced(client.clone(), &format!("bench-{}", i % NAMESPACES))
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

/// One request to farm-apiserver; returns the body length.
async fn farm_get(http: &reqwest::Client, url: &str) -> Result<usize, String> {
    let r = http.get(url).header("Accept", "application/json").send().await.map_err(|e| e.to_string())?;
    let status = r.status();
    let body = r.bytes().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{url}: {status}: {}", String::from_utf8_lossy(&body)));
    }
    Ok(body.len())
}

/// The per-request approach: list Pods upstream, convert each, serialize the
/// list. Returns the body and how long the upstream list (with decoding) took.
async fn direct_list(pods: &Api<Pod>) -> Result<(Vec<u8>, Duration), String> {
    let t = Instant::now();
    let list = pods.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
    let listed = t.elapsed();
    let items: Vec<Value> =
        list.items.iter().filter_map(farm_apiserver::resources::farmpod::farmpod_of).map(|(_, v)| v).collect();
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

async fn bench_farm(http: &reqwest::Client, kube: &kube::Client, case: &str, url: &str, iters: usize) -> Row {
    for _ in 0..3 {
        farm_get(http, url).await.unwrap_or_else(|e| panic!("warm-up {e}"));
    }
    let before = Upstream::read(kube).await;
    let mut samples = Vec::with_capacity(iters);
    let mut bytes = 0;
    for _ in 0..iters {
        let t = Instant::now();
        match farm_get(http, url).await {
            Ok(n) => bytes = n,
            Err(e) => {
                eprintln!("{case}: {e}");
                continue;
            }
        }
        samples.push(t.elapsed());
    }
    let after = Upstream::read(kube).await;
    Row {
        case: case.into(),
        requests: samples.len(),
        samples,
        bytes,
        lists: after.lists - before.lists,
        watches: after.watches - before.watches,
        upstream: Vec::new(),
    }
}

async fn bench_direct(pods: &Api<Pod>, kube: &kube::Client, case: &str, iters: usize, budget: Duration) -> Row {
    // Warm-up, also sizing the run to the time budget (at least 20 requests).
    let t = Instant::now();
    for _ in 0..2 {
        direct_list(pods).await.unwrap_or_else(|e| panic!("warm-up {case}: {e}"));
    }
    let one = t.elapsed() / 2;
    let iters = iters.min((budget.as_secs_f64() / one.as_secs_f64().max(1e-6)) as usize).max(20);
    let before = Upstream::read(kube).await;
    let mut samples = Vec::with_capacity(iters);
    let mut upstream = Vec::with_capacity(iters);
    let mut bytes = 0;
    for _ in 0..iters {
        let t = Instant::now();
        match direct_list(pods).await {
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
    let after = Upstream::read(kube).await;
    Row {
        case: case.into(),
        requests: samples.len(),
        samples,
        bytes,
        lists: after.lists - before.lists,
        watches: after.watches - before.watches,
        upstream,
    }
}

async fn run() {
    let n_pods = env_usize("FARM_BENCH_PODS", 10_000);
    let iters_all = env_usize("FARM_BENCH_ITERS_ALL", 200);
    let iters_ns = env_usize("FARM_BENCH_ITERS_NS", 500);
    let budget = Duration::from_secs(env_usize("FARM_BENCH_DIRECT_BUDGET_SECS", 180) as u64);
    let concurrency = env_usize("FARM_BENCH_CONCURRENCY", 32).max(1);

    eprintln!("starting the control plane");
    let started = Instant::now();
    let cp = common::cluster::controlplane();
    let cp_start = started.elapsed();
    eprintln!("control plane {} ready in {cp_start:.1?}", cp.server);
    let kube = cp.client().await;
    create_namespaces(&kube).await;

    eprintln!("creating {n_pods} Pods, {concurrency} in flight");
    let started = Instant::now();
    for_each_bounded(n_pods, concurrency, "create pod", |i| {
        let api = pods_api(&kube, i);
        async move {
            match api.create(&PostParams::default(), &pod(i)).await {
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                r => r.map(|_| ()),
            }
        }
    })
    .await;
    let create_time = started.elapsed();
    eprintln!("created {n_pods} Pods in {create_time:.1?}");
    let running = n_pods.div_ceil(2);
    let started = Instant::now();
    for_each_bounded(running, concurrency, "patch pod status", |k| {
        let i = k * 2;
        let api = pods_api(&kube, i);
        async move {
            api.patch_status(&format!("pod-{i:05}"), &PatchParams::default(), &Patch::Merge(running_status(i)))
                .await
                .map(|_| ())
        }
    })
    .await;
    let patch_time = started.elapsed();
    eprintln!("patched {running} Pod statuses to Running in {patch_time:.1?}");

    let watches_before_farm = Upstream::read(&kube).await.open_watches;
    eprintln!("starting farm-apiserver ({})", env!("CARGO_BIN_EXE_farm-apiserver"));
    let started = Instant::now();
    let farm = Server::start_with(Options {
        kubeconfig: Some(cp.kubeconfig.clone()),
        // Request logs off: they would be part of what is measured.
        log: Some("info".into()),
        ready_timeout: Some(Duration::from_secs(300)),
        ..Default::default()
    })
    .await;
    let http = farm.client.clone();
    let sync_time = started.elapsed();
    let rss_synced = common::rss_mib(farm.pid());
    eprintln!("farm-apiserver ready in {sync_time:.1?}, RSS {rss_synced:.1} MiB");
    let watches_open = Upstream::read(&kube).await.open_watches;

    // Sanity (not timing): both approaches see every Pod.
    let all_url = format!("{}{FARMPODS}/farmpods", farm.base);
    let ns_url = format!("{}{FARMPODS}/namespaces/{ONE_NAMESPACE}/farmpods", farm.base);
    let body = http.get(&all_url).send().await.expect("list farmpods").bytes().await.expect("farmpods body");
    assert_eq!(item_count(&body), n_pods, "farm-apiserver lists every Pod");
    let pods_all: Api<Pod> = Api::all(kube.clone());
    let pods_ns: Api<Pod> = Api::namespaced(kube.clone(), ONE_NAMESPACE);
    assert_eq!(item_count(&direct_list(&pods_all).await.expect("direct list").0), n_pods, "direct list sees every Pod");

    let load_before = common::loadavg();
    eprintln!("measuring farm-apiserver, all namespaces ({iters_all} requests)");
    let farm_all = bench_farm(&http, &kube, "farm-apiserver, all namespaces", &all_url, iters_all).await;
    eprintln!("measuring farm-apiserver, {ONE_NAMESPACE} ({iters_ns} requests)");
    let farm_ns = bench_farm(&http, &kube, &format!("farm-apiserver, {ONE_NAMESPACE}"), &ns_url, iters_ns).await;
    eprintln!("measuring per-request list+convert, all namespaces (up to {iters_all} requests, budget {budget:?})");
    let direct_all = bench_direct(&pods_all, &kube, "per-request, all namespaces", iters_all, budget).await;
    eprintln!("measuring per-request list+convert, {ONE_NAMESPACE} (up to {iters_ns} requests)");
    let direct_ns = bench_direct(&pods_ns, &kube, &format!("per-request, {ONE_NAMESPACE}"), iters_ns, budget * 4).await;
    let load_after = common::loadavg();
    let rss_after = common::rss_mib(farm.pid());
    let watches_open_after = Upstream::read(&kube).await.open_watches;

    let mut out = String::new();
    out.push_str(&format!(
        "\n## FarmPod list latency: {n_pods} Pods in {NAMESPACES} namespaces ({} per namespace)\n\n",
        n_pods / NAMESPACES
    ));
    out.push_str("| case | requests | p50 | p99 | mean | bytes | upstream LISTs | upstream WATCHes |\n");
    out.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for r in [&farm_all, &farm_ns, &direct_all, &direct_ns] {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.case,
            r.requests,
            ms(r.percentile(50.0)),
            ms(r.percentile(99.0)),
            ms(r.mean()),
            r.bytes,
            r.lists,
            r.watches
        ));
    }
    let ratio = |slow: &Row, fast: &Row| slow.percentile(50.0).as_secs_f64() / fast.percentile(50.0).as_secs_f64();
    out.push_str(&format!(
        "\nSpeed-up of p50 (per-request / farm-apiserver): all namespaces {:.1}x, {ONE_NAMESPACE} {:.1}x\n",
        ratio(&direct_all, &farm_all),
        ratio(&direct_ns, &farm_ns)
    ));
    for r in [&direct_all, &direct_ns] {
        let list = mean(&r.upstream);
        out.push_str(&format!(
            "Per-request mean split, {}: upstream LIST with decoding {}, convert + serialize {}\n",
            r.case,
            ms(list),
            ms(r.mean().saturating_sub(list))
        ));
    }
    out.push_str(&format!(
        "\nPod creation: {n_pods} Pods in {create_time:.1?} ({:.0}/s, {concurrency} in flight); \
         {running} status patches to Running in {patch_time:.1?}\n",
        n_pods as f64 / create_time.as_secs_f64()
    ));
    out.push_str(&format!(
        "Control plane start: {cp_start:.1?}; farm-apiserver start to /readyz (full Pod sync): {sync_time:.1?}\n"
    ));
    out.push_str(&format!("farm-apiserver RSS: {rss_synced:.1} MiB after sync, {rss_after:.1} MiB after the runs\n"));
    out.push_str(&format!(
        "Open upstream Pod watches (apiserver_longrunning_requests): {watches_before_farm} before farm-apiserver started, \
         {watches_open} after its sync, {watches_open_after} after the runs\n"
    ));
    out.push_str(&format!("Load average (1/5/15 min): {load_before} before the runs, {load_after} after\n"));
    out.push_str(&format!(
        "Targets (issue, reported not asserted): all {n_pods} FarmPods p50 < 20 ms: {}; >= 20x faster than per-request: {}; \
         upstream LISTs during farm-apiserver runs: {}\n",
        if farm_all.percentile(50.0) < Duration::from_millis(20) { "met" } else { "NOT met" },
        if ratio(&direct_all, &farm_all) >= 20.0 { "met" } else { "NOT met" },
        farm_all.lists + farm_ns.lists
    ));
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(out.as_bytes());
    let _ = stdout.flush();

    // The control plane stops when this process ends (its stdin closes).
    eprintln!("cleaning up");
    drop(farm);
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    rt.block_on(run());
}
