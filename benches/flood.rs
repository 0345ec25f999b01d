//! One user floods the server with the requests that used to amplify (the
//! doubling JSON patch, patches of 10,001 operations, status writes that grow
//! an object to the size limit, YAML alias bombs, label selectors of thousands
//! of values) while another user goes on with ordinary reads and writes; the
//! calm user's latency is measured alone and under the flood.
//!
//! ```sh
//! cargo bench --bench flood                 # FLOOD_CALM_REQUESTS=2000 FLOOD_TASKS=64
//! ```
//!
//! The server runs with `--authentication delegated` on the test control plane
//! (two users are two client certificates, each bound to cluster-admin but not
//! in `system:masters`, so the in-flight limits apply to both), the memory
//! store, and the release build, as a Deployment would run it. No figure is
//! asserted: the run prints what it measured.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/report.rs"]
mod report;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{cluster, identity, Options, Server};
use serde_json::{json, Value};

const NS: &str = "flood";
const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";

fn env<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    report::run_and_print("flood", async |out: &mut String| run(out).await);
}

/// A client of the server authenticating as `user` (a certificate from the
/// control plane's client CA).
fn client_as(cp: &cluster::ControlPlane, server: &Server, user: &str) -> reqwest::Client {
    let out =
        cp.kubectl(&["create", "clusterrolebinding", user, "--clusterrole=cluster-admin", &format!("--user={user}")]);
    assert!(out.0 || out.2.contains("already exists"), "{out:?}");
    let ca = identity::existing_ca(
        Path::new(&identity::path_of(cp, "clientCAFile")),
        Path::new(&identity::path_of(cp, "clientCAKeyFile")),
    );
    let (cert, key) = identity::leaf(&ca, user);
    identity::client_with_identity(server, &cert, &key)
}

/// One latency sample per calm request, and how many did not succeed.
#[derive(Default)]
struct Calm {
    latencies: Vec<Duration>,
    failures: Vec<String>,
}

impl Calm {
    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted.get(i).copied().unwrap_or_default()
    }
}

/// The calm user's work: GET one Llama, LIST 100, and a merge patch of its own
/// Llama, in turn, one at a time.
async fn calm(server: &Server, client: &reqwest::Client, requests: usize) -> Calm {
    let mut out = Calm::default();
    for i in 0..requests {
        let started = Instant::now();
        let result = match i % 3 {
            0 => client.get(server.llamas(NS, &format!("calm-{}", i % 100))).send().await,
            1 => client.get(server.llamas(NS, "?limit=100")).send().await,
            _ => {
                client
                    .patch(server.llamas(NS, "calm-0"))
                    .header("Content-Type", MERGE_PATCH)
                    .body(json!({"spec": {"weight": 1 + i % 50}}).to_string())
                    .send()
                    .await
            }
        };
        let outcome = match result {
            Ok(resp) if resp.status().is_success() => resp.bytes().await.map(|_| ()).map_err(|e| e.to_string()),
            Ok(resp) => Err(format!("{}", resp.status())),
            Err(e) => Err(e.to_string()),
        };
        out.latencies.push(started.elapsed());
        if let Err(e) = outcome {
            out.failures.push(e);
        }
    }
    out
}

/// The flooding user's requests, in turn.
fn flood_request(llamas: &str, client: &reqwest::Client, task: usize, i: usize) -> reqwest::RequestBuilder {
    let own = format!("{llamas}/flood-{}", task % 8);
    match i % 5 {
        0 => {
            let mut ops = vec![json!({"op": "add", "path": "/spec/d0", "value": "x".repeat(1024)})];
            ops.extend((1..=24).map(|i| json!({"op": "copy", "from": "/spec", "path": format!("/spec/d{i}")})));
            client.patch(own).header("Content-Type", JSON_PATCH).body(Value::Array(ops).to_string())
        }
        1 => {
            let op = json!({"op": "test", "path": "/spec/height", "value": 1});
            client.patch(own).header("Content-Type", JSON_PATCH).body(Value::Array(vec![op; 10_001]).to_string())
        }
        2 => {
            // 1.6 MB of conditions: past the object limit, refused after the work of merging it.
            let conditions: Vec<Value> = (0..4)
                .map(|c| {
                    json!({"type": format!("C{c}"), "status": "True", "reason": "Grown",
                        "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "m".repeat(400_000)})
                })
                .collect();
            let body = json!({"status": {"conditions": conditions}});
            client.patch(format!("{own}/status")).header("Content-Type", MERGE_PATCH).body(body.to_string())
        }
        3 => {
            let mut yaml =
                String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
            for (level, prev) in
                ["b", "c", "d", "e", "f", "g", "h", "i"].iter().zip(["a", "b", "c", "d", "e", "f", "g", "h"])
            {
                let _ = writeln!(yaml, "{level}: &{level} [{}]", vec![format!("*{prev}"); 9].join(","));
            }
            client
                .patch(format!("{own}?fieldManager=flood"))
                .header("Content-Type", "application/apply-patch+yaml")
                .body(yaml)
        }
        _ => {
            let values: Vec<String> = (0..5000).map(|v| format!("v{v}")).collect();
            client.get(format!("{llamas}?labelSelector=app+in+({})", values.join(",")))
        }
    }
}

/// The server's peak resident memory (VmHWM).
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

async fn run(out: &mut String) {
    let calm_requests = env("FLOOD_CALM_REQUESTS", 2000usize);
    let tasks = env("FLOOD_TASKS", 64usize);
    let cp = cluster::controlplane();
    let server = Server::start_with(Options {
        args: vec!["--authentication".into(), "delegated".into()],
        kubeconfig: Some(cp.kubeconfig.clone()),
        log: Some("warn".into()),
        tie_to_test_process: true,
        ..Default::default()
    })
    .await;
    let pid = common::fuzz::server_process(server.pid());
    cluster::namespace(cp, NS);
    let calm_client = client_as(cp, &server, "calm-user");
    let flood_client = client_as(cp, &server, "flood-user");
    for (client, name) in (0..100)
        .map(|i| (&calm_client, format!("calm-{i}")))
        .chain((0..8).map(|i| (&flood_client, format!("flood-{i}"))))
    {
        let mut made = false;
        for _ in 0..50 {
            let resp = client.post(server.llamas(NS, "")).json(&common::llama(&name, 1.0, 1.0)).send().await;
            if resp.is_ok_and(|r| r.status().is_success() || r.status() == 409) {
                made = true;
                break;
            }
            // RBAC bindings take a moment to reach the authorizer.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(made, "creating {name}");
    }
    let _ = writeln!(out, "## Flood: one user's amplifying requests against another user's calm ones\n");
    let _ = writeln!(out, "load average before: {}\n", common::loadavg());

    let idle = calm(&server, &calm_client, calm_requests).await;

    let stop = Arc::new(AtomicBool::new(false));
    let codes = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::<String, usize>::new()));
    let mut flooders = Vec::new();
    for task in 0..tasks {
        let (stop, codes) = (stop.clone(), codes.clone());
        let llamas = server.llamas(NS, "");
        // Each task its own connection pool: the flood arrives on many connections.
        let client = if task % 2 == 0 { flood_client.clone() } else { client_as(cp, &server, "flood-user") };
        flooders.push(tokio::spawn(async move {
            let mut i = task;
            while !stop.load(Ordering::Relaxed) {
                let code = match flood_request(&llamas, &client, task, i).send().await {
                    Ok(resp) => {
                        let code = resp.status().as_u16().to_string();
                        let _ = resp.bytes().await;
                        code
                    }
                    Err(_) => "no answer".to_string(),
                };
                *codes.lock().unwrap().entry(code).or_default() += 1;
                i += 1;
            }
        }));
    }
    // Let the flood build up before measuring.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let flood_started = Instant::now();
    let before = codes.lock().unwrap().values().sum::<usize>();
    let flooded = calm(&server, &calm_client, calm_requests).await;
    let flood_secs = flood_started.elapsed().as_secs_f64();
    let during = codes.lock().unwrap().values().sum::<usize>() - before;
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        let _ = f.await;
    }
    let peak = peak_rss_mib(pid);

    let _ = writeln!(out, "| calm user ({calm_requests} requests: GET, LIST 100, PATCH) | p50 | p99 | max | failed |");
    let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
    for (name, c) in [("alone", &idle), (format!("under the flood ({tasks} tasks)").as_str(), &flooded)] {
        let _ = writeln!(
            out,
            "| {name} | {:.2} ms | {:.2} ms | {:.2} ms | {} |",
            c.percentile(0.5).as_secs_f64() * 1e3,
            c.percentile(0.99).as_secs_f64() * 1e3,
            c.latencies.iter().max().copied().unwrap_or_default().as_secs_f64() * 1e3,
            c.failures.len()
        );
    }
    let codes = codes.lock().unwrap().clone();
    let _ = writeln!(
        out,
        "\nflood: {during} requests while the calm user was measured ({:.0}/s); answers over the whole flood: {codes:?}",
        during as f64 / flood_secs
    );
    let _ = writeln!(out, "server peak RSS: {peak:.1} MiB; load average after: {}", common::loadavg());
    if !flooded.failures.is_empty() {
        let _ = writeln!(
            out,
            "calm failures under the flood (first 5): {:?}",
            &flooded.failures[..flooded.failures.len().min(5)]
        );
    }
}
