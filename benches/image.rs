//! The container image against the binaries it is made from, in one run:
//!
//! 1. the image (scripts/image: the static release binary on scratch), run by
//!    podman hardened as the Deployment runs it (non-root, read-only root,
//!    no capabilities, host network);
//! 2. the same static binary started directly on the host;
//! 3. the dynamically linked release binary (`cargo build --release`).
//!
//! Each is started `FARM_BENCH_STARTS` times (default 5) and timed from the
//! spawn (`podman run` for the image) to the first 200 from /readyz; then one
//! instance is measured idle and after `FARM_BENCH_LLAMAS` creates (default
//! 10,000, 8 clients, memory store): resident memory from /proc, and the
//! create rate. No cluster: FarmPods are off, as `cargo run` has them.
//!
//! `cargo bench --bench image` (release build plus scripts/image; runs as
//! root with podman and buildah installed). Prints a markdown table, never
//! asserts timing.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/report.rs"]
mod report;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use common::podman::{image_archive, Podman};
use serde_json::json;

/// How one peer is started and stopped.
enum Peer<'p> {
    Container { podman: &'p Podman, image: String },
    Host { binary: PathBuf },
}

/// A started peer: the pid to read memory from, and how to stop it.
enum Running<'p> {
    Container { podman: &'p Podman, name: String },
    Host { child: Child },
}

impl Running<'_> {
    fn pid(&self) -> Result<u32> {
        match self {
            Running::Container { podman, name } => {
                let pid = podman.run(&["inspect", "--format", "{{.State.Pid}}", name]).map_err(anyhow::Error::msg)?;
                pid.trim().parse().with_context(|| format!("pid of {name}: {pid:?}"))
            }
            Running::Host { child } => Ok(child.id()),
        }
    }

    fn stop(self) {
        match self {
            Running::Container { podman, name } => {
                let _ = podman.run(&["rm", "--force", "--time", "0", &name]);
            }
            Running::Host { mut child } => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl<'p> Peer<'p> {
    fn start(&self, certs: &Path, port: u16, n: usize) -> Result<Running<'p>> {
        let bind = format!("127.0.0.1:{port}");
        match self {
            Peer::Container { podman, image } => {
                let name = format!("farm-bench-{port}-{n}");
                let mount = format!("--volume={}:/certs:ro", certs.display());
                podman
                    .run(&[
                        "run",
                        "--detach",
                        "--name",
                        &name,
                        "--network",
                        "host",
                        "--user",
                        "65532:65532",
                        "--read-only",
                        "--read-only-tmpfs=false",
                        "--cap-drop=ALL",
                        "--security-opt=no-new-privileges",
                        &mount,
                        image,
                        "serve",
                        "--bind",
                        &bind,
                        "--tls-cert-file",
                        "/certs/tls.crt",
                        "--tls-private-key-file",
                        "/certs/tls.key",
                        "--authentication",
                        "none",
                        "--log",
                        "warn",
                    ])
                    .map_err(anyhow::Error::msg)?;
                Ok(Running::Container { podman, name })
            }
            Peer::Host { binary } => {
                let child = Command::new(binary)
                    .env("KUBECONFIG", "/nonexistent")
                    .env_remove("KUBERNETES_SERVICE_HOST")
                    .arg("serve")
                    .args(["--bind", &bind, "--authentication", "none", "--log", "warn"])
                    .arg("--tls-cert-file")
                    .arg(certs.join("tls.crt"))
                    .arg("--tls-private-key-file")
                    .arg(certs.join("tls.key"))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .with_context(|| format!("start {}", binary.display()))?;
                Ok(Running::Host { child })
            }
        }
    }
}

/// Polls /readyz until it answers 200; the time since `started`.
async fn until_ready(client: &reqwest::Client, port: u16, started: Instant) -> Result<Duration> {
    let deadline = started + Duration::from_secs(60);
    loop {
        if let Ok(r) = client.get(format!("https://127.0.0.1:{port}/readyz")).send().await {
            if r.status().is_success() {
                return Ok(started.elapsed());
            }
        }
        if Instant::now() > deadline {
            bail!("not ready on port {port} within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `count` creates, `clients` at a time; creates per second.
async fn create_llamas(client: &reqwest::Client, port: u16, count: usize, clients: usize) -> Result<f64> {
    let started = Instant::now();
    let per_client = count.div_ceil(clients);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = client.clone();
        let url = format!("https://127.0.0.1:{port}/apis/farm.example.com/v1alpha/namespaces/default/llamas");
        tasks.push(tokio::spawn(async move {
            for i in 0..per_client {
                let body = json!({
                    "apiVersion": "farm.example.com/v1alpha", "kind": "Llama",
                    "metadata": {"name": format!("llama-{c}-{i}"), "labels": {"herd": format!("h{}", i % 10)}},
                    "spec": {"weight": 100 + i % 50, "height": 1.5},
                });
                let answer = client.post(&url).json(&body).send().await?;
                let code = answer.status();
                // Read to the end: a response dropped unread resets its stream,
                // and h2 closes a connection after too many resets.
                let text = answer.text().await?;
                if code.as_u16() != 201 {
                    bail!("POST {url}: {code} {text}");
                }
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for task in tasks {
        task.await.context("client task")??;
    }
    Ok((per_client * clients) as f64 / started.elapsed().as_secs_f64())
}

struct Row {
    peer: &'static str,
    ready: Vec<Duration>,
    idle_mib: f64,
    loaded_mib: f64,
    creates_per_second: f64,
}

async fn measure(peer: &Peer<'_>, label: &'static str, certs: &Path, starts: usize, llamas: usize) -> Result<Row> {
    let client = common::client_trusting(&certs.join("ca.crt"))?;
    let mut ready = Vec::new();
    for n in 0..starts {
        let port = free_port()?;
        let started = Instant::now();
        let running = peer.start(certs, port, n)?;
        let took = until_ready(&client, port, started).await;
        if n + 1 < starts || took.is_err() {
            running.stop();
            ready.push(took?);
            continue;
        }
        ready.push(took?);
        // The last start is measured further.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let pid = running.pid()?;
        let idle_mib = common::rss_mib(pid);
        let creates_per_second = create_llamas(&client, port, llamas, 8).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let loaded_mib = common::rss_mib(pid);
        running.stop();
        return Ok(Row { peer: label, ready, idle_mib, loaded_mib, creates_per_second: creates_per_second? });
    }
    bail!("FARM_BENCH_STARTS must be at least 1")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn run(out: &mut String) -> Result<()> {
    use std::fmt::Write as _;
    let starts = report::env_usize("FARM_BENCH_STARTS", 5)?;
    let llamas = report::env_usize("FARM_BENCH_LLAMAS", 10_000)?;
    let archive = image_archive();
    let podman = Podman::new();
    let image = podman.load(archive);
    let size = podman.run(&["image", "inspect", "--format", "{{.Size}}", &image]).map_err(anyhow::Error::msg)?;
    let size: f64 = size.trim().parse().context("image size")?;
    let archive_bytes = std::fs::metadata(archive)?.len() as f64;

    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let static_binary =
        root.join(format!("target/{}-unknown-linux-gnu/release/farm-apiserver", std::env::consts::ARCH));
    let dynamic_binary = PathBuf::from(env!("CARGO_BIN_EXE_farm-apiserver"));

    // The serving pair, readable by the image's user (a benchmark's own CA).
    let dir = tempfile::Builder::new().prefix("farm-bench-image-").tempdir()?;
    let certs = dir.path().join("certs");
    let made = Command::new(&dynamic_binary).args(["certs", "--out"]).arg(&certs).output()?;
    if !made.status.success() {
        bail!("farm-apiserver certs: {}", String::from_utf8_lossy(&made.stderr));
    }
    for file in ["ca.crt", "tls.crt", "tls.key"] {
        std::os::unix::fs::chown(certs.join(file), Some(65532), Some(65532))?;
    }

    let peers = [
        (Peer::Container { podman: &podman, image }, "image in podman (static, scratch)"),
        (Peer::Host { binary: static_binary }, "the same static binary on the host"),
        (Peer::Host { binary: dynamic_binary }, "dynamic release binary on the host"),
    ];
    writeln!(out, "\nimage: {:.1} MB (OCI archive, compressed: {:.1} MB)", size / 1e6, archive_bytes / 1e6)?;
    writeln!(out, "starts per peer: {starts}; Llamas created: {llamas}; load: {}\n", common::loadavg())?;
    writeln!(out, "| peer | ready after start (median, min–max) | RSS idle | RSS after {llamas} Llamas | creates/s |")?;
    writeln!(out, "| --- | --- | --- | --- | --- |")?;
    for (peer, label) in &peers {
        let row = measure(peer, label, &certs, starts, llamas).await?;
        let (min, max) = (row.ready.iter().min().copied(), row.ready.iter().max().copied());
        writeln!(
            out,
            "| {} | {:.0} ms ({:.0}–{:.0}) | {:.1} MiB | {:.1} MiB | {:.0} |",
            row.peer,
            median(row.ready.clone()).as_secs_f64() * 1e3,
            min.unwrap_or_default().as_secs_f64() * 1e3,
            max.unwrap_or_default().as_secs_f64() * 1e3,
            row.idle_mib,
            row.loaded_mib,
            row.creates_per_second,
        )?;
    }
    Ok(())
}

fn main() {
    if let Err(e) = report::run_and_print("image benchmark", async |out| run(out).await) {
        eprintln!("image benchmark FAILED: {e:#}");
        std::process::exit(1);
    }
}
