//! Admission's cost on creates, in one run:
//!
//! 1. Direct to farm-apiserver (no aggregator in between, so the server's own
//!    cost shows): the admission plugins turned off (the write path before
//!    admission existed), on with nothing configured, with one validating
//!    webhook, and with one ValidatingAdmissionPolicy.
//! 2. Through kube-apiserver's aggregator, side by side with kube-apiserver
//!    serving the Llama CRD under the same configuration: nothing, the same
//!    webhook, the same policy.
//!
//! The webhook is the tests' own HTTPS webhook server answering "allowed"
//! (tests/common/webhook.rs); the policy has one validation with a
//! parameter-free expression. Each selects its own namespace, and the rows
//! without admission are measured before either exists.
//!
//! `cargo bench --bench admission` (release build; about a minute on 2 cores
//! once the control plane is built). It prints a markdown table and never
//! asserts timing. `FARM_BENCH_WRITES` (default 3000) creates per row,
//! `FARM_BENCH_CLIENTS` (default 8) concurrent clients.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/report.rs"]
mod report;

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use common::cluster::{self, ControlPlane};
use common::webhook::WebhookServer;
use common::{Options, Server};
use serde_json::json;

const FARM_GROUP: &str = "farm.example.com";
const CRD_GROUP: &str = "bench-admission.farm.example.com";
const VERSION: &str = "v1alpha";

struct Config {
    writes: usize,
    clients: usize,
}

/// One row: what was measured and how it went.
struct Row {
    path: &'static str,
    server: String,
    admission: &'static str,
    rate: f64,
    p50: Duration,
    p99: Duration,
}

/// `writes` creates into `collection`, `clients` at a time; (creates/s, p50, p99).
async fn creates(
    clients: &[reqwest::Client],
    collection: &str,
    group: &str,
    prefix: &str,
    writes: usize,
) -> Result<(f64, Duration, Duration)> {
    let started = Instant::now();
    let per_client = writes.div_ceil(clients.len());
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        let (client, collection, group, prefix) =
            (client.clone(), collection.to_string(), group.to_string(), prefix.to_string());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_client);
            for i in 0..per_client {
                let body = json!({
                    "apiVersion": format!("{group}/{VERSION}"), "kind": "Llama",
                    "metadata": {"name": format!("{prefix}-{c}-{i}")},
                    "spec": {"weight": 2, "height": 1},
                });
                let sent = Instant::now();
                let answer = client.post(&collection).json(&body).send().await?;
                let code = answer.status();
                let text = answer.text().await?;
                if code.as_u16() != 201 {
                    bail!("POST {collection}: {code} {text}");
                }
                latencies.push(sent.elapsed());
            }
            Ok::<_, anyhow::Error>(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.context("client task")??);
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Ok((latencies.len() as f64 / elapsed.as_secs_f64(), at(0.5), at(0.99)))
}

fn direct_clients(server: &Server, n: usize) -> Result<Vec<reqwest::Client>> {
    (0..n).map(|_| common::client_trusting(&server.ca_file)).collect()
}

fn kube_clients(cp: &ControlPlane, n: usize) -> Vec<reqwest::Client> {
    (0..n).map(|_| common::compare::admin_client(cp)).collect()
}

fn quiet(args: &[&str], cp: &ControlPlane) -> Options {
    Options {
        args: args.iter().map(|a| a.to_string()).collect(),
        kubeconfig: Some(cp.kubeconfig.clone()),
        log: Some("warn".into()),
        ..Default::default()
    }
}

fn webhook_configuration(server: &WebhookServer, ns: &str) -> String {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "bench-admission"},
        "webhooks": [{
            "name": "allow.bench.farm.test",
            "clientConfig": {"url": format!("https://127.0.0.1:{}/allow", server.port), "caBundle": server.ca_bundle()},
            "rules": [{"apiGroups": [FARM_GROUP, CRD_GROUP], "apiVersions": ["*"], "resources": ["llamas"], "operations": ["CREATE"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail",
        }],
    })
    .to_string()
}

fn policy(ns: &str) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "bench-admission"},
         "spec": {
            "matchConstraints": {
                "resourceRules": [{"apiGroups": [FARM_GROUP, CRD_GROUP], "apiVersions": ["*"], "resources": ["llamas"], "operations": ["CREATE"]}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            },
            "validations": [{"expression": "object.metadata.name != 'reserved'", "message": "reserved"}],
         }},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "bench-admission"},
         "spec": {"policyName": "bench-admission", "validationActions": ["Deny"]}},
    ]})
    .to_string()
}

/// Waits until a create of `name` in `ns` is refused (the policy took
/// effect) or reaches the webhook, on every collection given.
async fn wait_effective(probe: impl AsyncFn() -> Result<bool>) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !probe().await? {
        if Instant::now() > deadline {
            bail!("the admission configuration did not take effect within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

async fn run(cfg: &Config, out: &mut String) -> Result<()> {
    let started = Instant::now();
    let cp = cluster::controlplane();
    common::crd::install_llama_crd(cp, CRD_GROUP).map_err(anyhow::Error::msg)?;
    let registered = cluster::register_on(cp, &[]).await;
    let off = Server::start_with(quiet(
        &[
            "--disable-admission-plugins",
            "MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy",
        ],
        cp,
    ))
    .await;
    let on = Server::start_with(quiet(&[], cp)).await;
    let kube = kube_clients(cp, cfg.clients);
    let namespaces = ["bench-adm-warmup", "bench-adm-none", "bench-adm-webhook", "bench-adm-policy"];
    for ns in namespaces {
        cluster::namespace(cp, ns);
    }
    let aggregated = |group: &str, ns: &str| format!("{}/apis/{group}/{VERSION}/namespaces/{ns}/llamas", cp.server);
    let mut rows = Vec::new();
    let mut measure = async |path: &'static str,
                             server: String,
                             admission: &'static str,
                             clients: &[reqwest::Client],
                             collection: String,
                             group: &str|
           -> Result<()> {
        let prefix = format!("row-{}", rows.len());
        let (rate, p50, p99) = creates(clients, &collection, group, &prefix, cfg.writes).await?;
        eprintln!("{path} {server} {admission}: {rate:.0} creates/s, p50 {p50:.2?}, p99 {p99:.2?}");
        rows.push(Row { path, server, admission, rate, p50, p99 });
        Ok(())
    };

    // Warm-up: connections, caches, the CRD's first writes.
    for (clients, collection, group) in [
        (direct_clients(&off, cfg.clients)?, off.llamas("bench-adm-warmup", ""), FARM_GROUP),
        (direct_clients(&on, cfg.clients)?, on.llamas("bench-adm-warmup", ""), FARM_GROUP),
        (kube.clone(), aggregated(FARM_GROUP, "bench-adm-warmup"), FARM_GROUP),
        (kube.clone(), aggregated(CRD_GROUP, "bench-adm-warmup"), CRD_GROUP),
    ] {
        let prefix = format!("warmup-{}", uuid::Uuid::new_v4().simple());
        creates(&clients, &collection, group, &prefix, cfg.clients * 20).await?;
    }

    let off_clients = direct_clients(&off, cfg.clients)?;
    let on_clients = direct_clients(&on, cfg.clients)?;
    // Alternated, four times each, each first in turn: the two servers share
    // the cores, and one round's rate moves with the load of the machine.
    for round in 0..4 {
        // Each first in turn: the one measured second ran right after the other.
        let off_first = round % 2 == 0;
        for off_now in [off_first, !off_first] {
            let (admission, clients, server) =
                if off_now { ("plugins off", &off_clients, &off) } else { ("on, none configured", &on_clients, &on) };
            measure(
                "direct",
                "farm-apiserver".into(),
                admission,
                clients,
                server.llamas("bench-adm-none", ""),
                FARM_GROUP,
            )
            .await?;
        }
    }
    measure(
        "aggregator",
        "kube-apiserver (CRD)".into(),
        "none",
        &kube,
        aggregated(CRD_GROUP, "bench-adm-none"),
        CRD_GROUP,
    )
    .await?;
    measure("aggregator", "farm-apiserver".into(), "none", &kube, aggregated(FARM_GROUP, "bench-adm-none"), FARM_GROUP)
        .await?;

    let hook = WebhookServer::start(&[]).await;
    cp.apply(&webhook_configuration(&hook, "bench-adm-webhook"));
    let probe_client = kube[0].clone();
    let seen = |group: &'static str| {
        let hook = &hook;
        async move { hook.reviews_for("/allow", "bench-adm-webhook").iter().any(|r| r["request"]["kind"]["group"] == group) }
    };
    wait_effective(async || {
        for group in [FARM_GROUP, CRD_GROUP] {
            let probe = format!("probe-{}", uuid::Uuid::new_v4().simple());
            creates(std::slice::from_ref(&probe_client), &aggregated(group, "bench-adm-webhook"), group, &probe, 1)
                .await?;
        }
        Ok(seen(FARM_GROUP).await && seen(CRD_GROUP).await)
    })
    .await?;
    measure(
        "direct",
        "farm-apiserver".into(),
        "one validating webhook",
        &on_clients,
        on.llamas("bench-adm-webhook", ""),
        FARM_GROUP,
    )
    .await?;
    measure(
        "aggregator",
        "kube-apiserver (CRD)".into(),
        "one validating webhook",
        &kube,
        aggregated(CRD_GROUP, "bench-adm-webhook"),
        CRD_GROUP,
    )
    .await?;
    measure(
        "aggregator",
        "farm-apiserver".into(),
        "one validating webhook",
        &kube,
        aggregated(FARM_GROUP, "bench-adm-webhook"),
        FARM_GROUP,
    )
    .await?;

    cp.apply(&policy("bench-adm-policy"));
    wait_effective(async || {
        let mut refused = 0;
        for collection in [aggregated(FARM_GROUP, "bench-adm-policy"), aggregated(CRD_GROUP, "bench-adm-policy"), on.llamas("bench-adm-policy", "")] {
            let group = if collection.contains(CRD_GROUP) { CRD_GROUP } else { FARM_GROUP };
            let client = if collection.starts_with(&cp.server) { &kube[0] } else { &on_clients[0] };
            let body = json!({"apiVersion": format!("{group}/{VERSION}"), "kind": "Llama", "metadata": {"name": "reserved"}, "spec": {"weight": 1, "height": 1}});
            let code = client.post(format!("{collection}?dryRun=All")).json(&body).send().await?.status().as_u16();
            refused += usize::from(code == 422);
        }
        Ok(refused == 3)
    })
    .await?;
    measure(
        "direct",
        "farm-apiserver".into(),
        "one policy",
        &on_clients,
        on.llamas("bench-adm-policy", ""),
        FARM_GROUP,
    )
    .await?;
    measure(
        "aggregator",
        "kube-apiserver (CRD)".into(),
        "one policy",
        &kube,
        aggregated(CRD_GROUP, "bench-adm-policy"),
        CRD_GROUP,
    )
    .await?;
    measure(
        "aggregator",
        "farm-apiserver".into(),
        "one policy",
        &kube,
        aggregated(FARM_GROUP, "bench-adm-policy"),
        FARM_GROUP,
    )
    .await?;
    for (kind, name) in [
        ("validatingwebhookconfiguration", "bench-admission"),
        ("validatingadmissionpolicybinding", "bench-admission"),
        ("validatingadmissionpolicy", "bench-admission"),
    ] {
        cp.kubectl(&["delete", kind, name, "--ignore-not-found"]);
    }
    drop((registered, off, on));

    out.push_str(&format!(
        "\n# Admission benchmark: creates ({} cores, release build, loopback HTTPS, {} creates per row, {} clients)\n\n",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        cfg.writes,
        cfg.clients
    ));
    out.push_str("| path | server | admission | creates/s | p50 | p99 |\n| --- | --- | --- | ---: | ---: | ---: |\n");
    for r in &rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.2} ms | {:.2} ms |\n",
            r.path,
            r.server,
            r.admission,
            r.rate,
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3
        ));
    }
    let rate = |path: &str, server: &str, admission: &str| {
        let matching: Vec<f64> = rows
            .iter()
            .filter(|r| r.path == path && r.server == server && r.admission == admission)
            .map(|r| r.rate)
            .collect();
        matching.iter().sum::<f64>() / matching.len().max(1) as f64
    };
    out.push_str("\n| ratio | value |\n| --- | ---: |\n");
    let farm = "farm-apiserver";
    let crd = "kube-apiserver (CRD)";
    for (what, value) in [
        (
            "direct: on with nothing configured / plugins off",
            rate("direct", farm, "on, none configured") / rate("direct", farm, "plugins off"),
        ),
        (
            "direct: one webhook / none configured",
            rate("direct", farm, "one validating webhook") / rate("direct", farm, "on, none configured"),
        ),
        (
            "direct: one policy / none configured",
            rate("direct", farm, "one policy") / rate("direct", farm, "on, none configured"),
        ),
        ("aggregator, none: farm / CRD", rate("aggregator", farm, "none") / rate("aggregator", crd, "none")),
        (
            "aggregator, one webhook: farm / CRD",
            rate("aggregator", farm, "one validating webhook") / rate("aggregator", crd, "one validating webhook"),
        ),
        (
            "aggregator, one policy: farm / CRD",
            rate("aggregator", farm, "one policy") / rate("aggregator", crd, "one policy"),
        ),
    ] {
        out.push_str(&format!("| {what} | {value:.2}× |\n"));
    }
    out.push_str(&format!("\nLoad average at the end: {}. Whole run: {:.1?}\n", common::loadavg(), started.elapsed()));
    Ok(())
}

fn main() {
    let cfg = match (report::env_usize("FARM_BENCH_WRITES", 3000), report::env_usize("FARM_BENCH_CLIENTS", 8)) {
        (Ok(writes), Ok(clients)) if clients > 0 => Config { writes, clients },
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("admission benchmark: {e:#}");
            std::process::exit(2);
        }
        _ => {
            eprintln!("admission benchmark: FARM_BENCH_CLIENTS must be at least 1");
            std::process::exit(2);
        }
    };
    if let Err(e) = report::run_and_print("admission benchmark", async |out| run(&cfg, out).await) {
        eprintln!("admission benchmark FAILED: {e:#}");
        std::process::exit(1);
    }
}
