//! Fuzz-and-soak: the seeded request fuzzer of tests/common/fuzz.rs against a
//! release farm-apiserver (`--storage memory`, `--authentication none`), for up
//! to `SOAK_REQUESTS` requests or `SOAK_SECONDS`, whichever comes first. It
//! prints a summary (requests, req/s, status codes, peak and final RSS, 5xx by
//! path, tracked objects verified) and exits non-zero when an invariant broke:
//! the server died or logged a panic, answered an undocumented 5xx, grew past
//! `SOAK_MAX_RSS_MIB`, or lost or changed an acknowledged write.
//!
//! | env | default | meaning |
//! | --- | --- | --- |
//! | `SOAK_REQUESTS` | 1000000 | requests to send |
//! | `SOAK_SECONDS` | 900 | time limit |
//! | `SOAK_CONCURRENCY` | 32 | requests in flight |
//! | `SOAK_SEED` | random (printed) | the generator's seed, to replay a run |
//! | `SOAK_MAX_RSS_MIB` | 512 | the server's RSS bound |
//! | `SOAK_DELEGATED` | 0 | 1: run against `--authentication delegated` on the test control plane instead |
//!
//! With `SOAK_DELEGATED=1` the server reads Pods from the test control plane
//! (tests/controlplane, built and started here) and authenticates and
//! authorizes every request through it: the fuzzer presents a client
//! certificate from the control plane's client CA (user `soak-user`, bound to
//! cluster-admin, so every request is a SubjectAccessReview), and sends a fifth
//! of its requests without one (anonymous, or garbage bearer tokens reviewed
//! by TokenReview). FarmPods then have a cluster, so 503 is no longer documented
//! for them, and a 500 InternalError from a review that could not be made is.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::time::Duration;

use common::fuzz::{self, Config, Target};
use common::{cluster, identity, Options, Server};

fn env<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; any other argument is a filter we do not support.
    let cfg = Config {
        requests: env("SOAK_REQUESTS", 1_000_000),
        duration: Duration::from_secs(env("SOAK_SECONDS", 900)),
        concurrency: env("SOAK_CONCURRENCY", 32),
        seed: env("SOAK_SEED", rand::random::<u64>()),
        max_rss_bytes: env::<u64>("SOAK_MAX_RSS_MIB", 512) << 20,
    };
    let delegated = env("SOAK_DELEGATED", 0u8) == 1;
    let (server, identity) = if delegated { delegated_server().await } else { memory_server().await };
    println!(
        "soak ({}): seed {} (SOAK_SEED to replay), up to {} requests or {:?}, {} in flight, load average {}",
        if delegated { "--authentication delegated, control plane" } else { "--authentication none, memory" },
        cfg.seed,
        cfg.requests,
        cfg.duration,
        cfg.concurrency,
        common::loadavg()
    );
    let target = Target {
        base: server.base.clone(),
        ca_file: server.ca_file.clone(),
        identity,
        // The server itself, not the shell tying it to this process.
        pid: fuzz::server_process(server.pid()),
        log_file: server.log_file.clone(),
        has_cluster: delegated,
        reviews: delegated,
    };
    let report = fuzz::run(&target, &cfg).await.expect("run the fuzzer");
    println!("{}", report.summary());
    println!("load average after: {}", common::loadavg());
    let failures = report.failures();
    if !failures.is_empty() {
        eprintln!("{} broken invariants (seed {}):", failures.len(), cfg.seed);
        for f in &failures {
            eprintln!("- {f}");
        }
        let kept = std::env::temp_dir().join(format!("soak-server-{}.log", cfg.seed));
        let _ = std::fs::copy(&server.log_file, &kept);
        eprintln!("server log kept at {}", kept.display());
        drop(server);
        std::process::exit(1);
    }
}

async fn memory_server() -> (Server, Option<Vec<u8>>) {
    let server = Server::start_with(Options {
        args: vec!["--authentication".into(), "none".into()],
        log: Some("info".into()),
        ..Default::default()
    })
    .await;
    (server, None)
}

/// A delegated server on the test control plane, and the client certificate
/// (PEM cert + key) of a user allowed everything.
async fn delegated_server() -> (Server, Option<Vec<u8>>) {
    let cp = cluster::controlplane();
    let out =
        cp.kubectl(&["create", "clusterrolebinding", "soak-user", "--clusterrole=cluster-admin", "--user=soak-user"]);
    assert!(out.0 || out.2.contains("AlreadyExists"), "{out:?}");
    let server = Server::start_with(Options {
        args: vec!["--authentication".into(), "delegated".into()],
        kubeconfig: Some(cp.kubeconfig.clone()),
        log: Some("info".into()),
        tie_to_test_process: true,
        ..Default::default()
    })
    .await;
    let ca = identity::existing_ca(
        Path::new(&identity::path_of(cp, "clientCAFile")),
        Path::new(&identity::path_of(cp, "clientCAKeyFile")),
    );
    let (mut pem, key) = identity::leaf(&ca, "soak-user");
    pem.push(b'\n');
    pem.extend_from_slice(&key);
    (server, Some(pem))
}
