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

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::fuzz::{self, Config, Target};
use common::{Options, Server};

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
    let server = Server::start_with(Options {
        args: vec!["--authentication".into(), "none".into()],
        log: Some("info".into()),
        ..Default::default()
    })
    .await;
    println!(
        "soak: seed {} (SOAK_SEED to replay), up to {} requests or {:?}, {} in flight, load average {}",
        cfg.seed,
        cfg.requests,
        cfg.duration,
        cfg.concurrency,
        common::loadavg()
    );
    let target = Target {
        base: server.base.clone(),
        ca_file: server.ca_file.clone(),
        identity: None,
        pid: server.pid(),
        log_file: server.log_file.clone(),
        has_cluster: false,
        reviews: false,
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
