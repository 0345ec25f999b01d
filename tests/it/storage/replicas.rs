//! Several farm-apiserver replicas on one real etcd: one consistent world, no
//! acknowledged write lost, through crashes of replicas and of etcd itself.
//!
//! And end to end: the farm-apiserver registered behind the real
//! kube-apiserver aggregator keeps Llamas in etcd (the test control plane's,
//! under a prefix of its own); kubectl get/apply/watch go through the
//! aggregator, and a second replica on the same etcd sees the same objects at
//! the same resourceVersions. A restarted registered replica still has them all.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::cluster::{self, namespace, ControlPlane};
use crate::common::etcd::{self, Etcd};
use crate::common::relay::Relay;
use crate::common::{create, kubectl_stdin, llama, ok, refuses_to_start, rv, send, KubectlStream, Options, Server};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// A replica on `prefix` of `etcd`, with extra flags.
async fn replica(etcd: &Etcd, prefix: &str, extra: &[&str]) -> Server {
    let mut args = etcd.server_args(prefix);
    args.extend(extra.iter().map(|a| a.to_string()));
    Server::start_with(Options { args, ..Default::default() }).await
}

async fn names(s: &Server) -> BTreeMap<String, u64> {
    names_at(s, "").await
}

/// The Llamas of `default` listed with `query` (say `resourceVersion=0`).
async fn names_at(s: &Server, query: &str) -> BTreeMap<String, u64> {
    let (code, v) = send(s, Method::GET, &format!("{}?{query}", s.llamas("default", "")), None).await;
    assert_eq!(code, 200, "{v}");
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["metadata"]["name"].as_str().unwrap().to_string(), rv(i)))
        .collect()
}

/// The lines of a watch, as they arrive.
struct Watch {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

impl Watch {
    async fn open(s: &Server, query: &str) -> Watch {
        let url = format!("{}?watch=true&{query}", s.llamas("default", ""));
        let resp = s.client.get(url).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        Watch { resp, buf: Vec::new() }
    }

    /// The next event, or None when the stream ends.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return Some(serde_json::from_slice(&line).unwrap());
            }
            match tokio::time::timeout(Duration::from_secs(15), self.resp.chunk()).await.expect("watch event in time") {
                Ok(Some(chunk)) => self.buf.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }
}

#[tokio::test]
async fn a_write_on_one_replica_is_read_and_watched_on_another() {
    let etcd = etcd::shared();
    let prefix = etcd::unique_prefix();
    let (a, b) = (replica(etcd, &prefix, &[]).await, replica(etcd, &prefix, &[]).await);
    let before = rv(&send(&b, Method::GET, &b.llamas("default", ""), None).await.1);
    let mut watch_b = Watch::open(&b, &format!("resourceVersion={before}")).await;

    let created = create(&a, "default", &llama("dolly", 3.0, 1.0)).await;
    // Read on B at once, without any resourceVersion: it is there, identical.
    let (code, on_b) = send(&b, Method::GET, &b.llamas("default", "dolly"), None).await;
    assert_eq!(code, 200, "{on_b}");
    assert_eq!(on_b, created);
    let (_, list_b) = send(&b, Method::GET, &b.llamas("default", ""), None).await;
    assert!(rv(&list_b) >= rv(&created), "a list on B reflects A's acknowledged write: {list_b}");
    let ev = watch_b.next().await.unwrap();
    assert_eq!((ev["type"].as_str(), &ev["object"]), (Some("ADDED"), &created));

    // An update through B with A's resourceVersion; A's watch sees B's answer.
    let mut watch_a = Watch::open(&a, &format!("resourceVersion={}", rv(&created))).await;
    let mut changed = created.clone();
    changed["spec"]["weight"] = json!(4.5);
    let (code, updated) = send(&b, Method::PUT, &b.llamas("default", "dolly"), Some(&changed)).await;
    assert_eq!(code, 200, "{updated}");
    let ev = watch_a.next().await.unwrap();
    assert_eq!((ev["type"].as_str(), &ev["object"]), (Some("MODIFIED"), &updated));
    // The stale resourceVersion is now a conflict on either replica.
    let (code, v) = send(&a, Method::PUT, &a.llamas("default", "dolly"), Some(&changed)).await;
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["reason"], "Conflict");
    // Both replicas agree on everything.
    assert_eq!(names(&a).await, names(&b).await);

    // A list paged across replicas: the first page from A, the rest from B,
    // all at the first page's revision.
    for i in 0..4 {
        create(&a, "default", &llama(&format!("page{i}"), 1.0, 1.0)).await;
    }
    let (_, p1) = send(&a, Method::GET, &format!("{}?limit=2", a.llamas("default", "")), None).await;
    create(&a, "default", &llama("page-late", 1.0, 1.0)).await;
    let token = p1["metadata"]["continue"].as_str().expect("continue token").to_string();
    let (code, p2) =
        send(&b, Method::GET, &format!("{}?limit=10&continue={token}", b.llamas("default", "")), None).await;
    assert_eq!(code, 200, "{p2}");
    assert_eq!(p2["metadata"]["resourceVersion"], p1["metadata"]["resourceVersion"]);
    let listed: Vec<&str> = [&p1, &p2]
        .iter()
        .flat_map(|p| p["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, ["dolly", "page0", "page1", "page2", "page3"]);
}

#[tokio::test]
async fn read_modify_write_increments_through_replicas_add_up() {
    const CLIENTS: usize = 6;
    const INCREMENTS: usize = 15;
    let etcd = etcd::shared();
    let prefix = etcd::unique_prefix();
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(Arc::new(replica(etcd, &prefix, &[]).await));
    }
    create(&replicas[0], "default", &llama("counter", 1.0, 1.0)).await;
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let replicas = replicas.clone();
        clients.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for i in 0..INCREMENTS {
                // Read through one replica, write through another.
                let (read, write) = (&replicas[(c + i) % 3], &replicas[(c + i + 1) % 3]);
                loop {
                    let (_, mut obj) = send(read, Method::GET, &read.llamas("default", "counter"), None).await;
                    let weight = obj["spec"]["weight"].as_f64().unwrap();
                    obj["spec"]["weight"] = json!(weight + 1.0);
                    let (code, v) = send(write, Method::PUT, &write.llamas("default", "counter"), Some(&obj)).await;
                    match code.as_u16() {
                        200 => break,
                        409 => conflicts += 1,
                        other => panic!("{other}: {v}"),
                    }
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for c in clients {
        conflicts += c.await.unwrap();
    }
    for r in &replicas {
        let (_, v) = send(r, Method::GET, &r.llamas("default", "counter"), None).await;
        assert_eq!(v["spec"]["weight"], 1.0 + (CLIENTS * INCREMENTS) as f64, "after {conflicts} conflicts: {v}");
    }
}

#[tokio::test]
async fn acknowledged_writes_survive_kill_9_of_a_replica_and_restarts_of_all() {
    let etcd = etcd::shared();
    let prefix = etcd::unique_prefix();
    let a = Arc::new(replica(etcd, &prefix, &[]).await);
    let b = Arc::new(replica(etcd, &prefix, &[]).await);
    let acknowledged = Arc::new(Mutex::new(BTreeMap::new()));
    let mut writers = Vec::new();
    for (w, target) in [a.clone(), b.clone(), a.clone()].into_iter().enumerate() {
        let acknowledged = acknowledged.clone();
        writers.push(tokio::spawn(async move {
            let started = Instant::now();
            let mut i = 0;
            while started.elapsed() < Duration::from_secs(3) {
                let name = format!("w{w}-{i}");
                i += 1;
                let req = target
                    .client
                    .post(target.llamas("default", ""))
                    .header("Content-Type", "application/json")
                    .body(serde_json::to_vec(&llama(&name, 1.0, 1.0)).unwrap());
                // Requests to the killed replica fail: only 2xx answers count.
                if let Ok(resp) = req.send().await {
                    if resp.status() == StatusCode::CREATED {
                        if let Ok(v) = resp.json::<Value>().await {
                            acknowledged.lock().unwrap().insert(name, rv(&v));
                        }
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let status = std::process::Command::new("kill").arg("-9").arg(a.pid().to_string()).status().unwrap();
    assert!(status.success());
    for w in writers {
        w.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() > 20, "the load wrote little: {}", acknowledged.len());
    let stored = names(&b).await;
    for (name, rv) in &acknowledged {
        assert_eq!(stored.get(name), Some(rv), "acknowledged {name} at {rv} is missing or changed");
    }
    // Every replica restarted: still all there, on a fresh pair of replicas.
    drop(b);
    drop(a);
    let c = replica(etcd, &prefix, &[]).await;
    let d = replica(etcd, &prefix, &[]).await;
    assert_eq!(names(&c).await, stored);
    assert_eq!(names(&d).await, stored);
}

#[tokio::test]
async fn etcd_outage_keeps_cached_reads_fails_latest_reads_and_writes_cleanly_and_recovers() {
    let mut etcd = Etcd::start(false);
    let prefix = etcd::unique_prefix();
    let a = replica(&etcd, &prefix, &["--etcd-request-timeout", "2"]).await;
    let b = replica(&etcd, &prefix, &["--etcd-request-timeout", "2"]).await;
    for i in 0..5 {
        create(&a, "default", &llama(&format!("before{i}"), 1.0, 1.0)).await;
    }
    let state = names(&b).await;
    let mut watch_b = Watch::open(&b, &format!("resourceVersion={}", state.values().max().unwrap())).await;

    etcd.kill();
    for s in [&a, &b] {
        // Reads at resourceVersion=0 keep being served from each replica's cache.
        assert_eq!(names_at(s, "resourceVersion=0").await, state);
        let (code, v) =
            send(s, Method::GET, &format!("{}?resourceVersion=0", s.llamas("default", "before0")), None).await;
        assert_eq!(code, 200, "{v}");
        // So do watches from there, starting with the cached state.
        let mut from_cache = Watch::open(s, "resourceVersion=0").await;
        let first = from_cache.next().await.unwrap();
        assert_eq!(first["type"], "ADDED", "{first}");
        // Reads of the latest state fail as writes do, as kube-apiserver's do:
        // the replica can't know what was written since it last heard from etcd.
        for path in [s.llamas("default", "before0"), s.llamas("default", "")] {
            let started = Instant::now();
            let (code, v) = send(s, Method::GET, &path, None).await;
            assert!(started.elapsed() < Duration::from_secs(10), "the read took {:?}", started.elapsed());
            assert_eq!(code, 504, "{path}: {v}");
            assert_eq!((v["kind"].as_str(), v["reason"].as_str()), (Some("Status"), Some("Timeout")), "{v}");
        }
    }
    // Readiness names etcd and since when.
    let deadline = Instant::now() + Duration::from_secs(20);
    let reason = loop {
        let r = a.client.get(a.url("/readyz?verbose")).send().await.unwrap();
        let (code, text) = (r.status(), r.text().await.unwrap());
        if code != 200 {
            break text;
        }
        assert!(Instant::now() < deadline, "readyz still ok with etcd down:\n{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(reason.contains("[-]etcd failed"), "{reason}");
    // Writes fail within the timeout with kube's Status, and never hang.
    let started = Instant::now();
    let (code, v) = send(&b, Method::POST, &b.llamas("default", ""), Some(&llama("during", 1.0, 1.0))).await;
    assert!(started.elapsed() < Duration::from_secs(10), "the write took {:?}", started.elapsed());
    assert_eq!(code, 504, "{v}");
    assert_eq!((v["kind"].as_str(), v["reason"].as_str()), (Some("Status"), Some("Timeout")), "{v}");

    etcd.restart();
    // Both replicas catch up by themselves.
    for s in [&a, &b] {
        let deadline = Instant::now() + Duration::from_secs(30);
        while s.client.get(s.url("/readyz")).send().await.map(|r| r.status() != 200).unwrap_or(true) {
            assert!(Instant::now() < deadline, "not ready again after etcd came back:\n{}", s.log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let after = create(&a, "default", &llama("after", 2.0, 1.0)).await;
    let (code, on_b) = send(&b, Method::GET, &b.llamas("default", "after"), None).await;
    assert_eq!((code.as_u16(), &on_b), (200, &after));
    for name in state.keys() {
        assert!(names(&b).await.contains_key(name), "{name} lost");
    }
    // A watch open through the outage either goes on or ends (its client then
    // resumes): it never delivers anything wrong.
    if let Some(ev) = watch_b.next().await {
        assert_eq!(ev["object"]["metadata"]["name"], "after", "{ev}");
    }
}

#[tokio::test]
async fn a_replica_partitioned_past_a_compaction_relists_and_its_watchers_get_410() {
    let etcd = Etcd::start(false);
    let prefix = etcd::unique_prefix();
    let relay = Relay::start(etcd.endpoint().trim_start_matches("http://").to_string()).await;
    let mut relayed = etcd.server_args(&prefix);
    relayed[3] = format!("http://127.0.0.1:{}", relay.port);
    relayed.extend(["--etcd-request-timeout".to_string(), "2".to_string()]);
    let a = Server::start_with(Options { args: relayed, ..Default::default() }).await;
    let b = replica(&etcd, &prefix, &[]).await;
    let first = create(&a, "default", &llama("first", 1.0, 1.0)).await;
    let mut watch_a = Watch::open(&a, &format!("resourceVersion={}", rv(&first))).await;

    relay.cut();
    // Let the relay drop its live connections (it checks every 50 ms).
    tokio::time::sleep(Duration::from_millis(300)).await;
    // While A is cut off: writes through B, then etcd compacts its history.
    for i in 0..5 {
        create(&b, "default", &llama(&format!("while-cut{i}"), 1.0, 1.0)).await;
    }
    let mut client = etcd.client().await;
    let revision = client.get("compact-me", None).await.unwrap().header().unwrap().revision();
    client.compact(revision, None).await.unwrap();
    // A still serves what it had at resourceVersion=0, and refuses reads of
    // the latest state rather than answer without B's writes.
    assert_eq!(names_at(&a, "resourceVersion=0").await.keys().collect::<Vec<_>>(), ["first"]);
    let (code, v) = send(&a, Method::GET, &a.llamas("default", ""), None).await;
    assert_eq!((code.as_u16(), v["reason"].as_str()), (504, Some("Timeout")), "{v}");
    relay.restore();

    // A re-lists: its open watch ends, and resuming from before the compaction is 410.
    assert!(watch_a.next().await.is_none(), "the watch is closed when the cache re-lists");
    let deadline = Instant::now() + Duration::from_secs(30);
    while names(&a).await != names(&b).await {
        assert!(Instant::now() < deadline, "A did not catch up:\n{}", a.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut resumed = Watch::open(&a, &format!("resourceVersion={}", rv(&first))).await;
    let ev = resumed.next().await.unwrap();
    assert_eq!(ev["type"], "ERROR", "{ev}");
    assert_eq!(ev["object"]["code"], 410, "{ev}");
}

/// Readiness text once it names etcd as failing.
async fn wait_etcd_not_ready(s: &Server) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = s.client.get(s.url("/readyz?verbose")).send().await.unwrap().text().await.unwrap();
        if text.contains("[-]etcd failed") {
            return text;
        }
        assert!(Instant::now() < deadline, "readyz never named etcd:\n{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn mutual_tls_to_etcd_and_clear_errors_for_bad_settings() {
    let etcd = Etcd::start(true);
    let prefix = etcd::unique_prefix();
    let s = replica(&etcd, &prefix, &[]).await;
    let created = create(&s, "default", &llama("secure", 1.0, 1.0)).await;
    let (_, v) = send(&s, Method::GET, &s.llamas("default", "secure"), None).await;
    assert_eq!(v, created);

    // No client certificate, or a CA that did not sign etcd's certificate:
    // the server runs, and readiness says what is wrong with etcd.
    let ca = etcd.file("etcdCAFile").display().to_string();
    let endpoint = etcd.endpoint();
    let base = ["--storage", "etcd", "--etcd-servers", endpoint.as_str(), "--etcd-prefix", prefix.as_str()];
    let no_cert: Vec<String> =
        base.iter().chain(["--etcd-cafile", ca.as_str()].iter()).map(|a| a.to_string()).collect();
    let wrong_ca_file = s.ca_file.display().to_string();
    let mut wrong_ca: Vec<String> = etcd.server_args(&prefix);
    let at = wrong_ca.iter().position(|a| a == "--etcd-cafile").unwrap() + 1;
    wrong_ca[at] = wrong_ca_file;
    for args in [no_cert, wrong_ca] {
        let bad = Server::start_with(Options { args, ready_path: Some("/livez".into()), ..Default::default() }).await;
        let text = wait_etcd_not_ready(&bad).await;
        assert!(text.contains("etcd"), "{text}");
        // Nothing was ever read from etcd: reads say so, as kube's cacher does.
        let r = bad.client.get(bad.llamas("default", "")).send().await.unwrap();
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()["retry-after"], "1");
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            (v["reason"].as_str(), v["message"].as_str()),
            (Some("TooManyRequests"), Some("storage is (re)initializing"))
        );
        let (code, v) = send(&bad, Method::POST, &bad.llamas("default", ""), Some(&llama("x", 1.0, 1.0))).await;
        assert!(code.is_server_error(), "{code}: {v}");
        assert_eq!(v["kind"], "Status", "{v}");
    }

    // Settings that cannot work are refused at start, saying which flag.
    let e = refuses_to_start(&["--storage", "etcd"]);
    assert!(e.contains("--etcd-servers"), "{e}");
    let e =
        refuses_to_start(&["--storage", "etcd", "--etcd-servers", "http://127.0.0.1:1", "--etcd-prefix", "registry"]);
    assert!(e.contains("--etcd-prefix"), "{e}");
    let e = refuses_to_start(&["--storage", "etcd", "--etcd-servers", &endpoint]);
    assert!(e.contains("--etcd-cafile"), "{e}");
    let e = refuses_to_start(&["--storage", "etcd", "--etcd-servers", "127.0.0.1:2379"]);
    assert!(e.contains("http://"), "{e}");
    let e =
        refuses_to_start(&["--storage", "etcd", "--etcd-servers", &endpoint, "--etcd-cafile", "/nonexistent/ca.crt"]);
    assert!(e.contains("/nonexistent/ca.crt"), "{e}");
}

/// etcd serving a self-signed certificate that says CA:TRUE (what
/// `openssl req -x509` makes), given as --etcd-cafile: Go's client, and so
/// kube-apiserver, trusts it as itself, and so does farm-apiserver.
#[tokio::test]
async fn etcd_with_a_self_signed_ca_certificate_is_trusted_as_itself() {
    let etcd = Etcd::start_self_signed();
    let prefix = etcd::unique_prefix();
    let s = replica(&etcd, &prefix, &[]).await;
    let created = create(&s, "default", &llama("self-signed", 1.0, 1.0)).await;
    let (_, v) = send(&s, Method::GET, &s.llamas("default", "self-signed"), None).await;
    assert_eq!(v, created);
}

// ---- a replica registered behind the aggregator, on the control plane's etcd -----------------

fn etcd_args(cp: &ControlPlane, prefix: &str) -> Vec<String> {
    let endpoint = cp.info["etcdEndpoint"].as_str().expect("etcdEndpoint").to_string();
    ["--storage", "etcd", "--etcd-servers", &endpoint, "--etcd-prefix", prefix].map(String::from).to_vec()
}

async fn get_direct(s: &Server, ns: &str, name: &str) -> (u16, Value) {
    let r = s.client.get(s.llamas(ns, name)).send().await.expect("GET");
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn kubectl_through_the_aggregator_on_etcd_with_a_second_replica() {
    // A control plane of its own: the registered replica replaces the shared
    // farm-apiserver's APIService, and then is replaced itself.
    let own = ControlPlane::start();
    let prefix = etcd::unique_prefix();
    let args = etcd_args(&own, &prefix);
    let flags: Vec<&str> = args.iter().map(String::as_str).collect();
    let reg = cluster::register_on(&own, &flags).await;
    let cp = reg.cp;
    let second = Server::start_with(Options { args: args.clone(), ..Default::default() }).await;
    let ns = namespace(cp, "e2e-etcd");
    let kc = &cp.kubeconfig;

    let manifest = format!(
        "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata:\n  name: dolly\n  namespace: {ns}\nspec:\n  weight: 31.4\n  height: 1.7\n"
    );
    let out = ok(kubectl_stdin(kc, &["apply", "-f", "-"], Some(&manifest)));
    assert!(out.contains("llama.farm.example.com/dolly created"), "{out}");
    let through: Value =
        serde_json::from_str(&ok(cp.kubectl(&["get", "llama", "dolly", "-n", &ns, "-o", "json"]))).unwrap();
    // The second replica, never registered, has the same object at the same revision.
    let (code, direct) = get_direct(&second, &ns, "dolly").await;
    assert_eq!(code, 200, "{direct}");
    assert_eq!(direct["metadata"]["resourceVersion"], through["metadata"]["resourceVersion"]);
    assert_eq!(direct["metadata"]["uid"], through["metadata"]["uid"]);

    // kubectl get -w through the aggregator sees a write made on the second replica.
    let watch = KubectlStream::start(kc, &["get", "llamas", "-n", &ns, "-w"]);
    watch.expect_line(&["dolly", "31.4"], Duration::from_secs(20));
    let r = second
        .client
        .post(second.llamas(&ns, ""))
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&llama("bessie", 12.5, 1.2)).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    watch.expect_line(&["bessie", "12.5"], Duration::from_secs(20));
    // kubectl apply of a change, seen by the second replica.
    let changed = manifest.replace("weight: 31.4", "weight: 33");
    ok(kubectl_stdin(kc, &["apply", "-f", "-"], Some(&changed)));
    watch.expect_line(&["dolly", "33"], Duration::from_secs(20));
    // Read without a resourceVersion: the latest state, whichever replica wrote it.
    let (_, direct) = get_direct(&second, &ns, "dolly").await;
    assert_eq!(direct["spec"]["weight"], 33, "{direct}");

    // The registered replica is replaced: the Llamas are still there.
    drop(reg);
    let reg = cluster::register_on(&own, &flags).await;
    let out = ok(reg.cp.kubectl(&["get", "llamas", "-n", &ns, "-o", "name"]));
    assert_eq!(out.lines().collect::<Vec<_>>(), ["llama.farm.example.com/bessie", "llama.farm.example.com/dolly"]);
    ok(reg.cp.kubectl(&["delete", "llama", "dolly", "-n", &ns]));
    assert_eq!(get_direct(&second, &ns, "dolly").await.0, 404);
}
