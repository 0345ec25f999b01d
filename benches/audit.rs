//! Auditing's cost in requests per second, side by side in one run:
//! farm-apiserver and kube-apiserver (serving the Llama CRD) under the same
//! audit policy, each with its log backend writing to local disk in
//! `blocking` mode (kube-apiserver's default for the log).
//!
//! ```sh
//! cargo bench --bench audit     # about 2 minutes after the build
//! ```
//!
//! One policy for both servers chooses the level by namespace, so one
//! process of each serves every level:
//!
//! * `audit-off`: no rule matches, level None (kube-apiserver still runs its
//!   audit filter and evaluates the policy; farm-apiserver does as well);
//! * `audit-metadata`: `level: Metadata`, both stages written;
//! * `audit-metadata-shipped`: `level: Metadata` without RequestReceived,
//!   as the chart's and `manifests/`' policy (and kube's sample policies)
//!   write it: one event a request;
//! * `audit-requestresponse`: `level: RequestResponse`.
//!
//! A second farm-apiserver runs without any audit option ("audit off"), the
//! base the issue's goal is measured against: Metadata may cost
//! farm-apiserver under 10% of its throughput. kube-apiserver cannot be run
//! without its audit filter in the same control plane, so its base is its
//! `audit-off` namespace.
//!
//! A third farm-apiserver writes the same log in `batch` mode (batches of up
//! to 100 events, written at the latest a second after their first), the
//! mode a busy server would audit in.
//!
//! Cases: GET one Llama, and creates. Targets, load generator and CPU
//! accounting are those of the speed benchmark (`support/load.rs`): 16
//! keep-alive HTTP/1.1 TLS connections on one client thread, the same bearer
//! token (delegated authentication for farm-apiserver), rounds alternating
//! between the targets. The run checks that the audited rows did write
//! events (the logs are counted) and never asserts timing.
//!
//! | env | default | meaning |
//! | --- | --- | --- |
//! | `AUDIT_BENCH_SECONDS` | 4 | seconds measured per case and target |
//! | `AUDIT_BENCH_ROUNDS` | 2 | rounds each case is split into |
//! | `AUDIT_BENCH_CONNECTIONS` | 16 | keep-alive connections of the load generator |
//! | `AUDIT_COMPARE_BINARY` | — | also runs this farm-apiserver (another build, e.g. `main`'s) without auditing and with the policy, to weigh a change to auditing against in the same run |

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/load.rs"]
mod load;
#[path = "support/report.rs"]
mod report;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use common::cluster::{self, ControlPlane};
use load::{bench_token, case, client_tls, cp_addr, cp_file, farm, find, load, ms, wait_serving, Op, Pace, Row, Stop};
use load::{Run, Target};

const FARM_GROUP_VERSION: &str = "farm.example.com/v1alpha";
const CRD_GROUP: &str = "bench-audit.farm.example.com";
const CRD_GROUP_VERSION: &str = "bench-audit.farm.example.com/v1alpha";

/// The namespace of each level, and the policy that says so.
const OFF_NS: &str = "audit-off";
const METADATA_NS: &str = "audit-metadata";
const METADATA_SHIPPED_NS: &str = "audit-metadata-shipped";
const REQUEST_RESPONSE_NS: &str = "audit-requestresponse";
/// The batch mode measured: batches of up to 100 events, written at the
/// latest a second after their first.
const BATCH_MAX_SIZE: &str = "100";
const BATCH_MAX_WAIT: &str = "1s";
const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
  namespaces: [\"audit-metadata\"]
- level: Metadata
  namespaces: [\"audit-metadata-shipped\"]
  omitStages: [\"RequestReceived\"]
- level: RequestResponse
  namespaces: [\"audit-requestresponse\"]
";

const FARM_OFF: &str = "farm-apiserver, no auditing";
const FARM_NONE: &str = "farm-apiserver, level None";
const FARM_METADATA: &str = "farm-apiserver, Metadata";
const FARM_METADATA_SHIPPED: &str = "farm-apiserver, Metadata without RequestReceived";
const FARM_REQUEST_RESPONSE: &str = "farm-apiserver, RequestResponse";
const FARM_METADATA_BATCH: &str = "farm-apiserver, Metadata, batch";
const EARLIER_OFF: &str = "compared build, no auditing";
const EARLIER_METADATA_SHIPPED: &str = "compared build, Metadata without RequestReceived";
const CRD_NONE: &str = "kube-apiserver (CRD), level None";
const CRD_METADATA: &str = "kube-apiserver (CRD), Metadata";
const CRD_METADATA_SHIPPED: &str = "kube-apiserver (CRD), Metadata without RequestReceived";
const CRD_REQUEST_RESPONSE: &str = "kube-apiserver (CRD), RequestResponse";
const GET: &str = "GET one Llama";
const CREATE: &str = "create (POST)";

/// The namespace a target's requests go to (its level, by the policy).
fn namespace_of(t: &Target) -> &'static str {
    match t.name {
        FARM_METADATA | FARM_METADATA_BATCH | CRD_METADATA => METADATA_NS,
        FARM_METADATA_SHIPPED | EARLIER_METADATA_SHIPPED | CRD_METADATA_SHIPPED => METADATA_SHIPPED_NS,
        FARM_REQUEST_RESPONSE | CRD_REQUEST_RESPONSE => REQUEST_RESPONSE_NS,
        _ => OFF_NS,
    }
}

/// Lines in an audit log (events, one a line) that name every one of
/// `needles`, its rotated files (`<stem>-<time>.log`) included.
fn events_naming(log: &Path, needles: &[&str]) -> Result<usize> {
    let dir = log.parent().ok_or_else(|| anyhow!("{} has no directory", log.display()))?;
    let stem = log.file_stem().and_then(|s| s.to_str()).ok_or_else(|| anyhow!("{}", log.display()))?;
    let mut count = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let rotated = name.strip_prefix(stem).is_some_and(|rest| rest.starts_with('-') && rest.ends_with(".log"));
        if name == format!("{stem}.log") || rotated {
            let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            count += text.lines().filter(|l| needles.iter().all(|n| l.contains(n))).count();
        }
    }
    Ok(count)
}

async fn run(pace: &Pace, compare: Option<&Path>, out: &mut String) -> Result<()> {
    let started = Instant::now();
    let stamp = || format!("[{:>5.1}s]", started.elapsed().as_secs_f64());
    let dir = tempfile::Builder::new().prefix("farm-audit-bench-").tempdir()?;
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY)?;
    let kube_log = dir.path().join("kube-audit.log");
    eprintln!("{} starting a control plane auditing under the policy", stamp());
    let cp = ControlPlane::start_with(&[
        &format!("--audit-policy-file={}", policy.display()),
        &format!("--audit-log-path={}", kube_log.display()),
    ]);
    let token: Arc<str> = bench_token(&cp)?.into();
    for ns in [OFF_NS, METADATA_NS, METADATA_SHIPPED_NS, REQUEST_RESPONSE_NS] {
        cluster::namespace(&cp, ns);
    }
    common::crd::install_llama_crd(&cp, CRD_GROUP).map_err(anyhow::Error::msg)?;

    eprintln!("{} starting farm-apiserver without auditing and with the policy", stamp());
    let plain = farm(&cp, None, &[], &[]).await?;
    // The policy, and the log at `log`.
    let audit_args = |log: &Path| {
        vec![
            "--audit-policy-file".to_string(),
            policy.display().to_string(),
            "--audit-log-path".to_string(),
            log.display().to_string(),
        ]
    };
    let farm_log = dir.path().join("farm-audit.log");
    let audited = farm(&cp, None, &[], &audit_args(&farm_log)).await?;
    let batch_log = dir.path().join("farm-batch-audit.log");
    let mut batch_args = audit_args(&batch_log);
    batch_args.extend(
        [
            "--audit-log-mode",
            "batch",
            "--audit-log-batch-max-size",
            BATCH_MAX_SIZE,
            "--audit-log-batch-max-wait",
            BATCH_MAX_WAIT,
        ]
        .map(String::from),
    );
    let batched = farm(&cp, None, &[], &batch_args).await?;
    let earlier = match compare {
        Some(program) => {
            eprintln!("{} starting {} without auditing and with the policy", stamp(), program.display());
            let log = dir.path().join("earlier-audit.log");
            Some((farm(&cp, Some(program), &[], &[]).await?, farm(&cp, Some(program), &[], &audit_args(&log)).await?))
        }
        None => None,
    };

    let farm_target = |name: &'static str, server: &common::Server| -> Result<Target> {
        Ok(Target {
            key: "farm",
            name,
            addr: SocketAddr::from(([127, 0, 0, 1], server.port)),
            tls: client_tls(&std::fs::read(&server.ca_file)?)?,
            token: Some(token.clone()),
            group_path: format!("/apis/{FARM_GROUP_VERSION}"),
            api_version: FARM_GROUP_VERSION,
            pid: server.pid(),
        })
    };
    let crd_target = |name: &'static str| -> Result<Target> {
        Ok(Target {
            key: "crd",
            name,
            addr: cp_addr(&cp)?,
            tls: client_tls(&cp_file(&cp, "caFile")?)?,
            token: Some(token.clone()),
            group_path: format!("/apis/{CRD_GROUP_VERSION}"),
            api_version: CRD_GROUP_VERSION,
            pid: cp.pid,
        })
    };
    let mut targets = vec![
        farm_target(FARM_OFF, &plain)?,
        farm_target(FARM_NONE, &audited)?,
        farm_target(FARM_METADATA, &audited)?,
        farm_target(FARM_METADATA_SHIPPED, &audited)?,
        farm_target(FARM_REQUEST_RESPONSE, &audited)?,
        farm_target(FARM_METADATA_BATCH, &batched)?,
        crd_target(CRD_NONE)?,
        crd_target(CRD_METADATA)?,
        crd_target(CRD_METADATA_SHIPPED)?,
        crd_target(CRD_REQUEST_RESPONSE)?,
    ];
    if let Some((plain, audited)) = &earlier {
        targets.push(farm_target(EARLIER_OFF, plain)?);
        targets.push(farm_target(EARLIER_METADATA_SHIPPED, audited)?);
    }
    let all: Vec<&Target> = targets.iter().collect();
    let crd_none = targets.iter().find(|t| t.name == CRD_NONE).ok_or_else(|| anyhow!("no {CRD_NONE}"))?;
    wait_serving(crd_none, OFF_NS).await?;

    eprintln!("{} one Llama to GET in each namespace of each server", stamp());
    // Each target is one server process and one namespace, none shared.
    for t in &targets {
        let op = Op::Create { collection: t.collection(namespace_of(t)), prefix: format!("get-{}", t.key) };
        load(t, &op, 1, Stop::Count(1)).await?;
    }
    let one = |t: &Target| format!("{}/get-{}-0", t.collection(namespace_of(t)), t.key);

    let load_before = common::loadavg();
    eprintln!("{} measuring (load average {load_before})", stamp());
    let mut rows = case(pace, GET, &all, |t| Op::Get(one(t))).await?;
    rows.extend(
        case(pace, CREATE, &all, |t| Op::Create {
            collection: t.collection(namespace_of(t)),
            prefix: format!("c-{}", uuid::Uuid::new_v4().simple()),
        })
        .await?,
    );
    let load_after = common::loadavg();

    report(pace, &rows, earlier.is_some(), out, &load_before, &load_after, started.elapsed())?;
    // The levels did what they say: events for the audited namespaces, none for the other.
    let in_ns = |ns: &str| format!("\"namespace\":\"{ns}\"");
    if events_naming(&batch_log, &[&in_ns(METADATA_NS)])? == 0 {
        bail!("farm-apiserver's batch audit log {} has no events", batch_log.display());
    }
    for (log, who) in [(&farm_log, "farm-apiserver"), (&kube_log, "kube-apiserver")] {
        let (metadata, full, off) = (
            events_naming(log, &[&in_ns(METADATA_NS)])?,
            events_naming(log, &[&in_ns(REQUEST_RESPONSE_NS)])?,
            events_naming(log, &[&in_ns(OFF_NS)])?,
        );
        let shipped = events_naming(log, &[&in_ns(METADATA_SHIPPED_NS)])?;
        let shipped_received = events_naming(log, &[&in_ns(METADATA_SHIPPED_NS), "\"stage\":\"RequestReceived\""])?;
        if metadata == 0 || full == 0 || off != 0 || shipped == 0 || shipped_received != 0 {
            bail!(
                "{who}'s audit log {}: {metadata} Metadata events, {shipped} Metadata without RequestReceived \
                 ({shipped_received} RequestReceived among them), {full} RequestResponse, {off} at None",
                log.display()
            );
        }
    }
    drop(earlier);
    drop(batched);
    drop(audited);
    drop(plain);
    drop(cp);
    Ok(())
}

fn report(
    pace: &Pace,
    rows: &[Row],
    compared: bool,
    out: &mut String,
    load_before: &str,
    load_after: &str,
    whole: std::time::Duration,
) -> Result<()> {
    use std::fmt::Write as _;
    writeln!(out, "\n# Auditing: farm-apiserver against kube-apiserver (CRD) under one policy\n")?;
    writeln!(
        out,
        "Release builds, loopback, TLS, HTTP/1.1 keep-alive: {} connections on one client thread, {:.1} s \
         measured per case and target in {} rounds, the same bearer token on every request. Log backend on \
         local disk, `blocking`. kube-apiserver's CPU is its control plane's one process (etcd included).\n",
        pace.connections, pace.seconds, pace.rounds
    )?;
    writeln!(out, "| case | target | requests | req/s | p50 | p99 | server CPU ms/req |")?;
    writeln!(out, "| --- | --- | ---: | ---: | ---: | ---: | ---: |")?;
    for r in rows {
        writeln!(
            out,
            "| {} | {} | {} | {:.0} | {} | {} | {:.4} |",
            r.case,
            r.target,
            r.run.samples.len(),
            r.run.rate(),
            ms(r.run.pct(50.0)),
            ms(r.run.pct(99.0)),
            r.run.server_ms(),
        )?;
    }
    writeln!(out, "\n## What each level costs (against the server's own base)\n")?;
    writeln!(out, "| case | server | level | req/s, of the base | server CPU per request, of the base |")?;
    writeln!(out, "| --- | --- | --- | ---: | ---: |")?;
    let runs = |case: &str, target: &str| find(rows, case, target).ok_or_else(|| anyhow!("no row {case} {target}"));
    for case in [GET, CREATE] {
        let mut comparisons = vec![
            ("farm-apiserver", "None", FARM_NONE, FARM_OFF),
            ("farm-apiserver", "Metadata", FARM_METADATA, FARM_OFF),
            ("farm-apiserver", "Metadata without RequestReceived", FARM_METADATA_SHIPPED, FARM_OFF),
            ("farm-apiserver", "Metadata, batch", FARM_METADATA_BATCH, FARM_OFF),
            ("farm-apiserver", "RequestResponse", FARM_REQUEST_RESPONSE, FARM_OFF),
            ("kube-apiserver (CRD)", "Metadata", CRD_METADATA, CRD_NONE),
            ("kube-apiserver (CRD)", "Metadata without RequestReceived", CRD_METADATA_SHIPPED, CRD_NONE),
            ("kube-apiserver (CRD)", "RequestResponse", CRD_REQUEST_RESPONSE, CRD_NONE),
        ];
        if compared {
            comparisons.push((
                "compared build",
                "Metadata without RequestReceived",
                EARLIER_METADATA_SHIPPED,
                EARLIER_OFF,
            ));
        }
        for (server, level, target, base) in comparisons {
            let (run, base): (&Run, &Run) = (runs(case, target)?, runs(case, base)?);
            writeln!(
                out,
                "| {case} | {server} | {level} | {:.1}% | {:.1}% |",
                100.0 * run.rate() / base.rate(),
                100.0 * run.server_ms() / base.server_ms(),
            )?;
        }
    }
    writeln!(
        out,
        "\nGoal (issue 21): Metadata costs farm-apiserver under 10% of its throughput (req/s of the base >= 90%).\n\
         Load average (1/5/15 min): {load_before} before measuring, {load_after} at the end. Whole run: {whole:.1?}."
    )?;
    Ok(())
}

fn main() {
    let pace = (|| {
        Ok::<_, anyhow::Error>(Pace {
            seconds: report::env_usize("AUDIT_BENCH_SECONDS", 4)?.max(1) as f64,
            rounds: report::env_usize("AUDIT_BENCH_ROUNDS", 2)?.max(1),
            connections: report::env_usize("AUDIT_BENCH_CONNECTIONS", 16)?.max(1),
        })
    })();
    let pace = match pace {
        Ok(pace) => pace,
        Err(e) => {
            eprintln!("audit benchmark: {e:#}");
            std::process::exit(2);
        }
    };
    eprintln!("audit benchmark: about 2 minutes on 2 cores after the build");
    let compare = std::env::var_os("AUDIT_COMPARE_BINARY").map(std::path::PathBuf::from);
    if let Err(e) = report::run_and_print("audit benchmark", async |out| run(&pace, compare.as_deref(), out).await) {
        eprintln!("audit benchmark FAILED: {e:#}");
        std::process::exit(1);
    }
}
