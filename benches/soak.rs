//! Fuzz-and-soak: the seeded request fuzzer of tests/common/fuzz.rs against a
//! release farm-apiserver (`--storage memory`, `--authentication none`), for up
//! to `SOAK_REQUESTS` requests or `SOAK_SECONDS`, whichever comes first. It
//! prints a summary (requests, req/s, status codes, peak and final RSS, 5xx by
//! path, tracked objects verified, attacks by kind) and exits non-zero when an
//! invariant broke: the server died or logged a panic or a failed allocation,
//! answered an undocumented 5xx, left an attacking request unanswered, grew
//! past `SOAK_MAX_RSS_MIB`, stored an object past its object limit, or lost
//! or changed an acknowledged write.
//!
//! A share of the requests (`SOAK_ATTACK_SHARE`) come from the attacking
//! generators of tests/common/fuzz/attack.rs, and the server runs under
//! `prlimit --as` (`SOAK_ADDRESS_SPACE_MIB`), so a runaway allocation aborts
//! it (and fails the run) rather than taking the machine's memory.
//!
//! `SOAK_AMPLIFICATION=1` measures instead: for each attack kind, a fresh
//! server and `SOAK_AMPLIFICATION_SAMPLES` of its requests one at a time, each
//! request's growth of the server's peak RSS (VmHWM, reset before it through
//! `/proc/<pid>/clear_refs`), and prints the worst growth per request byte.
//!
//! | env | default | meaning |
//! | --- | --- | --- |
//! | `SOAK_REQUESTS` | 1000000 | requests to send |
//! | `SOAK_SECONDS` | 3600 | time limit |
//! | `SOAK_CONCURRENCY` | 32 | requests in flight |
//! | `SOAK_SEED` | random (printed) | the generator's seed, to replay a run |
//! | `SOAK_MAX_RSS_MIB` | 512 | the server's RSS bound |
//! | `SOAK_DELEGATED` | 0 | 1: run against `--authentication delegated` on the test control plane instead |
//! | `SOAK_ATTACK_SHARE` | 0.01 | the share of attacking requests (each far heavier than a noise request) |
//! | `SOAK_ATTACK_SCALE` | 1.0 | scales their bulk (1.0: bodies up to the 3 MiB limit) |
//! | `SOAK_ADDRESS_SPACE_MIB` | 2048 | the server's address-space cap (`prlimit --as`; 0: none) |
//! | `SOAK_AMPLIFICATION` | 0 | 1: measure the worst RSS growth per request byte by attack kind instead |
//! | `SOAK_AMPLIFICATION_SAMPLES` | 40 | requests per kind when measuring |
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

use common::fuzz::{self, Attack, Config, Target};
use common::{cluster, identity, Options, Server};

fn env<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; any other argument is a filter we do not support.
    let cfg = Config {
        requests: env("SOAK_REQUESTS", 1_000_000),
        duration: Duration::from_secs(env("SOAK_SECONDS", 3600)),
        concurrency: env("SOAK_CONCURRENCY", 32),
        seed: env("SOAK_SEED", rand::random::<u64>()),
        max_rss_bytes: env::<u64>("SOAK_MAX_RSS_MIB", 512) << 20,
        attack_share: env("SOAK_ATTACK_SHARE", 0.01),
        attack_scale: env("SOAK_ATTACK_SCALE", 1.0),
    };
    let address_space = match env::<u64>("SOAK_ADDRESS_SPACE_MIB", 2048) {
        0 => None,
        mib => Some(mib << 20),
    };
    if env("SOAK_AMPLIFICATION", 0u8) == 1 {
        amplification(cfg.seed, env("SOAK_AMPLIFICATION_SAMPLES", 40), address_space).await;
        return;
    }
    let delegated = env("SOAK_DELEGATED", 0u8) == 1;
    let (server, identity) =
        if delegated { delegated_server(address_space).await } else { memory_server(address_space, vec![]).await };
    println!(
        "soak ({}): seed {} (SOAK_SEED to replay), up to {} requests or {:?}, {} in flight, {:.0}% attacks (scale {}), address space cap {}, load average {}",
        if delegated { "--authentication delegated, control plane" } else { "--authentication none, memory" },
        cfg.seed,
        cfg.requests,
        cfg.duration,
        cfg.concurrency,
        cfg.attack_share * 100.0,
        cfg.attack_scale,
        address_space.map_or("none".to_string(), |b| format!("{} MiB", b >> 20)),
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

async fn memory_server(address_space: Option<u64>, env: Vec<(String, String)>) -> (Server, Option<Vec<u8>>) {
    let server = Server::start_with(Options {
        args: vec!["--authentication".into(), "none".into()],
        log: Some("info".into()),
        address_space_limit: address_space,
        env,
        ..Default::default()
    })
    .await;
    (server, None)
}

/// The worst growth of the server's peak RSS per request byte, by attack
/// kind; exits non-zero when a request killed the server.
async fn amplification(seed: u64, samples: u64, address_space: Option<u64>) {
    println!(
        "amplification: seed {seed} (SOAK_SEED to replay), {samples} requests per kind, one at a time, a fresh server per kind; ratio over requests that grew the peak by at least {} MiB",
        fuzz::AMPLIFICATION_MIN_GROWTH >> 20
    );
    println!("| request kind | requests | worst RSS growth per request byte | at request size | its growth | largest growth (request size) | slowest (request size) | status codes |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    let mut examples = Vec::new();
    let mut failed = false;
    for kind in Attack::ALL {
        // glibc's default thresholds adapt: after a large free, later large
        // allocations come from memory the heap kept, which clear_refs does
        // not see as growth. Fixed thresholds return large blocks at once,
        // so each request's growth is its own.
        let env = vec![
            ("MALLOC_MMAP_THRESHOLD_".to_string(), "131072".to_string()),
            ("MALLOC_TRIM_THRESHOLD_".to_string(), "131072".to_string()),
        ];
        let (server, _) = memory_server(address_space, env).await;
        let target = Target {
            base: server.base.clone(),
            ca_file: server.ca_file.clone(),
            identity: None,
            pid: fuzz::server_process(server.pid()),
            log_file: server.log_file.clone(),
            has_cluster: false,
            reviews: false,
        };
        match fuzz::amplification(&target, *kind, seed, samples).await {
            Ok(a) => {
                let mib = |b: u64| b as f64 / 1048576.0;
                let statuses = a.statuses.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ");
                println!(
                    "| {} | {} | {:.0} | {:.1} KiB | {:.1} MiB | {:.1} MiB ({:.0} KiB) | {:.0} ms ({:.0} KiB) | {statuses}{} |",
                    a.kind,
                    a.samples,
                    a.worst_ratio,
                    a.ratio_request_bytes as f64 / 1024.0,
                    mib(a.ratio_growth),
                    mib(a.worst_growth),
                    a.growth_request_bytes as f64 / 1024.0,
                    a.slowest_seconds * 1000.0,
                    a.slowest_request_bytes as f64 / 1024.0,
                    if a.unanswered > 0 { format!(", unanswered: {}", a.unanswered) } else { String::new() }
                );
                examples.push(format!("{}: {}", a.kind, a.ratio_example.chars().take(400).collect::<String>()));
            }
            Err(e) => {
                println!("| {} | failed: {e} | | | | | | |", kind.name());
                failed = true;
                let log = server.log();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                eprintln!("server log, last lines:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            }
        }
    }
    println!("\nthe worst request of each kind:");
    for e in examples {
        println!("- {e}");
    }
    if failed {
        std::process::exit(1);
    }
}

/// A delegated server on the test control plane, and the client certificate
/// (PEM cert + key) of a user allowed everything.
async fn delegated_server(address_space: Option<u64>) -> (Server, Option<Vec<u8>>) {
    let cp = cluster::controlplane();
    let out =
        cp.kubectl(&["create", "clusterrolebinding", "soak-user", "--clusterrole=cluster-admin", "--user=soak-user"]);
    assert!(out.0 || out.2.contains("AlreadyExists"), "{out:?}");
    let server = Server::start_with(Options {
        args: vec!["--authentication".into(), "delegated".into()],
        kubeconfig: Some(cp.kubeconfig.clone()),
        log: Some("info".into()),
        tie_to_test_process: true,
        address_space_limit: address_space,
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
