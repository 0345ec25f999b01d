//! The soak fuzzer (tests/common/fuzz.rs) in `cargo test`: a short run against
//! a debug server in memory mode, with the same invariants as
//! `cargo bench --bench soak` (no panic, no undocumented 5xx, bounded RSS,
//! every acknowledged tracked write read back intact).

mod common;

use std::time::Duration;

use common::fuzz::{self, Config, Target};
use common::{Options, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_requests_keep_the_server_correct() {
    let server = Server::start_with(Options {
        args: vec!["--authentication".into(), "none".into()],
        // Per-request debug logs would cost more than the requests.
        log: Some("info".into()),
        ..Default::default()
    })
    .await;
    // A seed per run, printed, so a failure can be replayed with FUZZ_SEED.
    let seed = std::env::var("FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    eprintln!("soak_short seed {seed} (replay with FUZZ_SEED={seed})");
    let cfg =
        Config { requests: 20_000, duration: Duration::from_secs(30), concurrency: 32, seed, max_rss_bytes: 256 << 20 };
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
    eprintln!("{}", report.summary());
    let failures = report.failures();
    assert!(failures.is_empty(), "seed {seed}: {} broken invariants:\n{}", failures.len(), failures.join("\n"));
    assert!(report.requests >= 1_000, "too few requests to mean anything: {}", report.requests);
}
