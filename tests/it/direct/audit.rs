//! Auditing with the server alone (`--authentication none`: nobody is
//! authenticated, so these are about levels, stages, bodies and backends;
//! users, RBAC and the aggregator's Audit-ID are `aggregated::audit`'s).

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::audit::{self, Receiver, Webhook};
use crate::common::{self, llama, Server, GROUP_PATH};

async fn audited(extra: &[&str]) -> (Server, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let policy = audit::write_policy(dir.path(), audit::POLICY);
    let log = dir.path().join("audit/audit.log");
    let mut args = vec!["--audit-policy-file", policy.to_str().unwrap(), "--audit-log-path", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    (Server::start(&args).await, log, dir)
}

/// A request with an Audit-ID of our choosing: the status, the Audit-ID echoed, the body.
async fn request(
    s: &Server,
    method: Method,
    url: &str,
    ct: &str,
    body: Option<Value>,
    id: &str,
) -> (u16, String, Value) {
    let mut r = s.client.request(method, url).header("Audit-ID", id).header("Content-Type", ct);
    if let Some(b) = body {
        r = r.body(serde_json::to_vec(&b).unwrap());
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let echoed = audit::audit_id(resp.headers());
    (status, echoed, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn each_request_is_audited_at_the_level_its_rule_says() {
    let (s, log, _dir) = audited(&[]).await;
    let ns = "audited";
    let url = s.llamas(ns, "");

    // create: RequestResponse, both stages, the body as sent, the name from it
    let body = llama("dolly", 31.4, 1.7);
    let (code, echoed, created) =
        request(&s, Method::POST, &url, "application/json", Some(body.clone()), "create-1").await;
    assert_eq!((code, echoed.as_str()), (201, "create-1"));
    let evs = audit::wait_for(&log, "create-1", "ResponseComplete").await;
    assert_eq!(audit::stages(&evs), ["RequestReceived", "ResponseComplete"]);
    let done = &evs[1];
    assert_eq!(done["level"], "RequestResponse");
    assert_eq!(done["verb"], "create");
    assert_eq!(done["requestURI"], format!("{GROUP_PATH}/namespaces/{ns}/llamas"));
    assert_eq!(
        done["objectRef"],
        json!({"resource": "llamas", "namespace": ns, "name": "dolly", "apiGroup": "farm.example.com", "apiVersion": "v1alpha"})
    );
    assert_eq!(done["responseStatus"], json!({"metadata": {}, "code": 201}));
    assert_eq!(done["requestObject"], body);
    assert_eq!(done["responseObject"], created);
    assert_eq!(done["sourceIPs"], json!(["127.0.0.1"]));
    assert_eq!(done["user"], json!({}), "nobody is authenticated with --authentication none");
    assert!(evs[0].get("requestObject").is_none() && evs[0].get("responseStatus").is_none(), "{}", evs[0]);
    assert_eq!(evs[0]["stageTimestamp"], evs[0]["requestReceivedTimestamp"]);
    let micro = done["stageTimestamp"].as_str().unwrap();
    assert!(micro.len() == "2026-01-02T03:04:05.123456Z".len() && micro.ends_with('Z'), "{micro}");

    // get without an Audit-ID: one is made, echoed and used; Metadata: no bodies
    let resp = s.client.get(s.llamas(ns, "dolly")).send().await.unwrap();
    let made = audit::audit_id(resp.headers());
    assert!(uuid::Uuid::parse_str(&made).is_ok(), "{made}");
    let evs = audit::wait_for(&log, &made, "ResponseComplete").await;
    assert_eq!(audit::stages(&evs), ["RequestReceived", "ResponseComplete"]);
    assert_eq!((evs[1]["level"].as_str(), evs[1]["verb"].as_str()), (Some("Metadata"), Some("get")));
    assert!(evs[1].get("requestObject").is_none() && evs[1].get("responseObject").is_none());

    // a failure: kube's Status in responseStatus even at Metadata
    let (code, _, _) = request(&s, Method::GET, &s.llamas(ns, "nobody"), "application/json", None, "missing-1").await;
    assert_eq!(code, 404);
    let evs = audit::wait_for(&log, "missing-1", "ResponseComplete").await;
    assert_eq!(
        evs[1]["responseStatus"],
        json!({"metadata": {}, "status": "Failure", "message": "llamas.farm.example.com \"nobody\" not found",
               "reason": "NotFound", "details": {"name": "nobody", "group": "farm.example.com", "kind": "llamas"}, "code": 404})
    );

    // patch: the patch is the request object
    let patch = json!({"spec": {"weight": 40.0}});
    let (code, _, patched) = request(
        &s,
        Method::PATCH,
        &s.llamas(ns, "dolly"),
        "application/merge-patch+json",
        Some(patch.clone()),
        "patch-1",
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    let evs = audit::wait_for(&log, "patch-1", "ResponseComplete").await;
    assert_eq!((evs[1]["verb"].as_str(), evs[1]["level"].as_str()), (Some("patch"), Some("RequestResponse")));
    assert_eq!(evs[1]["requestObject"], patch);
    assert_eq!(evs[1]["responseObject"]["spec"]["weight"], 40.0);

    // server-side apply (YAML): recorded as JSON
    let apply =
        "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata: {name: applied}\nspec: {weight: 2, height: 1}\n";
    let resp = s
        .client
        .patch(s.llamas(ns, "applied?fieldManager=audit-test"))
        .header("Content-Type", "application/apply-patch+yaml")
        .header("Audit-ID", "apply-1")
        .body(apply)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let evs = audit::wait_for(&log, "apply-1", "ResponseComplete").await;
    assert_eq!(evs[1]["requestObject"]["spec"], json!({"weight": 2, "height": 1}));
    assert_eq!(evs[1]["responseStatus"]["code"], 201);

    // update of the status subresource: its own rule (*/status); the
    // objectRef carries the uid and resourceVersion the object was sent
    // with, as kube's takes them from the decoded request object, but not
    // at RequestReceived, written before the body is read
    let mut status = patched.clone();
    status["status"] = json!({"observedGeneration": 2});
    let (code, _, _) =
        request(&s, Method::PUT, &s.llamas(ns, "dolly/status"), "application/json", Some(status), "status-1").await;
    assert_eq!(code, 200);
    let evs = audit::wait_for(&log, "status-1", "ResponseComplete").await;
    assert_eq!((evs[1]["verb"].as_str(), evs[1]["level"].as_str()), (Some("update"), Some("RequestResponse")));
    assert_eq!(
        evs[1]["objectRef"],
        json!({"resource": "llamas", "namespace": ns, "name": "dolly", "uid": patched["metadata"]["uid"],
               "apiGroup": "farm.example.com", "apiVersion": "v1alpha",
               "resourceVersion": patched["metadata"]["resourceVersion"], "subresource": "status"})
    );
    assert!(evs[0]["objectRef"].get("uid").is_none() && evs[0]["objectRef"].get("resourceVersion").is_none());

    // a dry run is audited as the request it is
    let (code, _, _) = request(
        &s,
        Method::POST,
        &format!("{url}?dryRun=All"),
        "application/json",
        Some(llama("dry", 1.0, 1.0)),
        "dry-1",
    )
    .await;
    assert_eq!(code, 201);
    let evs = audit::wait_for(&log, "dry-1", "ResponseComplete").await;
    assert_eq!(evs[1]["requestURI"], format!("{GROUP_PATH}/namespaces/{ns}/llamas?dryRun=All"));
    assert_eq!(evs[1]["requestObject"]["metadata"]["name"], "dry");

    // list: Metadata
    let (code, _, _) = request(&s, Method::GET, &url, "application/json", None, "list-1").await;
    assert_eq!(code, 200);
    let evs = audit::wait_for(&log, "list-1", "ResponseComplete").await;
    assert_eq!((evs[1]["verb"].as_str(), evs[1]["level"].as_str()), (Some("list"), Some("Metadata")));

    // watch: ResponseStarted when it starts, ResponseComplete when it ends
    let resp =
        s.client.get(format!("{url}?watch=true&timeoutSeconds=1")).header("Audit-ID", "watch-1").send().await.unwrap();
    assert_eq!(audit::audit_id(resp.headers()), "watch-1");
    let started = audit::wait_for(&log, "watch-1", "ResponseStarted").await;
    assert_eq!(audit::stages(&started), ["RequestReceived", "ResponseStarted"], "before the watch ends");
    let _ = resp.bytes().await;
    let evs = audit::wait_for(&log, "watch-1", "ResponseComplete").await;
    assert_eq!(audit::stages(&evs), ["RequestReceived", "ResponseStarted", "ResponseComplete"]);
    assert_eq!((evs[2]["verb"].as_str(), evs[2]["responseStatus"]["code"].as_i64()), (Some("watch"), Some(200)));
    assert!(evs[2].get("responseObject").is_none());

    // delete: Request level, no response object
    let (code, _, _) = request(&s, Method::DELETE, &s.llamas(ns, "dolly"), "application/json", None, "delete-1").await;
    assert_eq!(code, 200);
    let evs = audit::wait_for(&log, "delete-1", "ResponseComplete").await;
    assert_eq!((evs[1]["verb"].as_str(), evs[1]["level"].as_str()), (Some("delete"), Some("Request")));
    assert!(evs[1].get("responseObject").is_none());

    // discovery: the catch-all rule omits RequestReceived; probes are not audited
    let (code, _, _) = request(&s, Method::GET, &s.url("/apis"), "application/json", None, "discovery-1").await;
    assert_eq!(code, 200);
    let evs = audit::wait_for(&log, "discovery-1", "ResponseComplete").await;
    assert_eq!(audit::stages(&evs), ["ResponseComplete"]);
    assert!(evs[0].get("objectRef").is_none());
    let (_, echoed, _) = request(&s, Method::GET, &s.url("/healthz"), "application/json", None, "probe-1").await;
    assert_eq!(echoed, "probe-1", "echoed even when the policy records nothing");
    let metrics = s.client.get(s.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(audit::of(&audit::events(&log), "probe-1").is_empty());
    let counted = common::metric_sample(&metrics, "apiserver_audit_event_total").unwrap_or(0.0);
    assert!(counted >= 20.0, "{metrics}");
    let none = common::metric_sample(&metrics, "apiserver_audit_level_total{level=\"None\"}").unwrap_or(0.0);
    assert!(none >= 2.0, "the probe and /metrics: {metrics}");
}

/// Blocking modes write the events of requests that come together with one
/// `write` (`audit/group.rs`); each request must still find its events in
/// the log by the time its answer arrives, and every line whole.
#[tokio::test]
async fn in_blocking_modes_a_request_is_answered_once_its_events_are_written() {
    for mode in ["blocking", "blocking-strict"] {
        let (s, log, _dir) = audited(&["--audit-log-mode", mode]).await;
        let ns = "together";
        let created = s.client.post(s.llamas(ns, "")).json(&llama("dolly", 1.0, 2.0)).send().await.unwrap();
        assert_eq!(created.status(), 201);
        let requests = (0..64).map(|i| {
            let (s, log) = (&s, &log);
            async move {
                let id = format!("{mode}-get-{i}");
                let resp = s.client.get(s.llamas(ns, "dolly")).header("Audit-ID", &id).send().await.unwrap();
                assert_eq!(resp.status(), 200);
                // Read as the answer arrives, without waiting for the log.
                let written = audit::stages(&audit::of(&audit::events(log), &id));
                assert_eq!(
                    written,
                    ["RequestReceived", "ResponseComplete"],
                    "{mode}: {id} answered before its events were written"
                );
            }
        });
        futures::future::join_all(requests).await;
        assert_eq!(audit::events(&log).len(), 2 + 64 * 2, "{mode}: the create's events and the GETs', each line whole");
    }
}

#[tokio::test]
async fn blocking_strict_refuses_what_it_could_not_record_and_blocking_does_not() {
    // Every write to /dev/full fails (ENOSPC).
    for (mode, refused) in [("blocking-strict", true), ("blocking", false)] {
        let dir = tempfile::tempdir().unwrap();
        let policy = audit::write_policy(dir.path(), audit::POLICY);
        let args = ["--audit-policy-file", policy.to_str().unwrap(), "--audit-log-path", "/dev/full"];
        let s = Server::start(&[&args[..], &["--audit-log-mode", mode]].concat()).await;
        // A write, a read answered at once and a list (the two reads wait for
        // their RequestReceived together with their ResponseComplete).
        let cases = [
            (Method::POST, s.llamas("full", ""), Some(llama("dolly", 1.0, 2.0)), 201),
            (Method::GET, s.llamas("full", "dolly"), None, 200),
            (Method::GET, s.llamas("full", ""), None, 200),
        ];
        for (method, url, body, served) in cases {
            let (status, echoed, answer) =
                request(&s, method.clone(), &url, "application/json", body, "full-disk").await;
            assert_eq!(echoed, "full-disk");
            if refused {
                assert_eq!(status, 500, "{mode}: {method} {url}: {answer}");
                assert_eq!(answer["message"], "Internal error occurred: failed to store audit event", "{mode}: {url}");
            } else {
                assert_eq!(status, served, "{mode}: {method} {url}: {answer}");
            }
        }
    }
}

#[tokio::test]
async fn without_a_policy_the_audit_id_is_echoed_and_nothing_else_happens() {
    let s = Server::start(&[]).await;
    let resp = s.client.get(s.llamas("ns", "")).header("Audit-ID", "aggregator-id").send().await.unwrap();
    assert_eq!(audit::audit_id(resp.headers()), "aggregator-id");
    let resp = s.client.get(s.llamas("ns", "")).send().await.unwrap();
    assert!(resp.headers().get("audit-id").is_none(), "no ID is made when nothing is audited");
}

#[tokio::test]
async fn a_policy_that_does_not_parse_stops_the_server_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let policy = audit::write_policy(dir.path(), "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_farm-apiserver"))
        .args(["--bind", "127.0.0.1:0", "--authentication", "none", "--audit-log-path", "-"])
        .arg("--cert-dir")
        .arg(dir.path().join("certs"))
        .arg("--audit-policy-file")
        .arg(&policy)
        .env("KUBECONFIG", dir.path().join("none"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("loading audit policy file {}", policy.display())), "{stderr}");
    assert!(stderr.contains("rules[0].level: Unsupported value: \"Loud\""), "{stderr}");
}

#[tokio::test]
async fn the_webhook_receives_event_lists_in_batches() {
    let webhook = Webhook::start(Receiver::Keep).await;
    let dir = tempfile::tempdir().unwrap();
    let policy = audit::write_policy(dir.path(), audit::POLICY);
    let s = Server::start(&[
        "--audit-policy-file",
        policy.to_str().unwrap(),
        "--audit-webhook-config-file",
        webhook.kubeconfig.to_str().unwrap(),
        "--audit-webhook-batch-max-wait",
        "500ms",
    ])
    .await;
    for i in 0..5 {
        let (code, _, _) = request(
            &s,
            Method::POST,
            &s.llamas("hooked", ""),
            "application/json",
            Some(llama(&format!("l{i}"), 1.0, 1.0)),
            &format!("hooked-{i}"),
        )
        .await;
        assert_eq!(code, 201);
    }
    common::succeeds("every event at the webhook", Duration::from_secs(20), || async {
        (0..5).all(|i| webhook.events().iter().filter(|(_, e)| e["auditID"] == format!("hooked-{i}")).count() == 2)
    })
    .await;
    let received = webhook.received.lock().unwrap().clone();
    for (path, list) in &received {
        assert_eq!(path, "/audit/events", "POSTed to the kubeconfig's URL, path included");
        assert_eq!((list["kind"].as_str(), list["apiVersion"].as_str()), (Some("EventList"), Some("audit.k8s.io/v1")));
    }
    assert!(received.len() < 10, "events come in batches: {} lists for 10 events", received.len());
    let events = webhook.events();
    let complete = events.iter().find(|(_, e)| e["auditID"] == "hooked-3" && e["stage"] == "ResponseComplete").unwrap();
    assert_eq!(complete.1["requestObject"]["metadata"]["name"], "l3");
}

/// A receiver that never answers, or refuses: requests are neither slowed
/// nor failed, the buffer stays bounded and the drops are counted.
#[tokio::test]
async fn a_dead_webhook_neither_slows_nor_fails_requests() {
    for mode in [Receiver::Hang, Receiver::Refuse] {
        let webhook = Webhook::start(mode).await;
        let dir = tempfile::tempdir().unwrap();
        let policy = audit::write_policy(dir.path(), audit::POLICY);
        let s = Server::start(&[
            "--audit-policy-file",
            policy.to_str().unwrap(),
            "--audit-webhook-config-file",
            webhook.kubeconfig.to_str().unwrap(),
            "--audit-webhook-batch-max-size",
            "1",
            "--audit-webhook-batch-buffer-size",
            "10",
            "--audit-webhook-batch-throttle-enable=false",
            "--audit-webhook-initial-backoff",
            "50ms",
        ])
        .await;
        let started = Instant::now();
        let mut slowest = Duration::ZERO;
        for i in 0..200 {
            let t = Instant::now();
            let resp = s.client.get(s.llamas("dead", &format!("l{i}"))).send().await.unwrap();
            assert_eq!(resp.status(), 404, "{mode:?}");
            slowest = slowest.max(t.elapsed());
        }
        let took = started.elapsed();
        assert!(
            slowest < Duration::from_secs(1) && took < Duration::from_secs(20),
            "{mode:?}: slowest {slowest:?}, all {took:?}"
        );
        let metrics = s.client.get(s.url("/metrics")).send().await.unwrap().text().await.unwrap();
        let dropped =
            common::metric_sample(&metrics, "apiserver_audit_error_total{plugin=\"buffered\"}").unwrap_or(0.0);
        if mode == Receiver::Hang {
            // 400 events; at most the buffer (10), the batch in the worker's hands and the 4 in flight are held.
            assert!(dropped >= 380.0, "{mode:?}: {dropped} dropped\n{metrics}");
        }
        if mode == Receiver::Refuse {
            common::succeeds("refused batches counted", Duration::from_secs(20), || async {
                let metrics = s.client.get(s.url("/metrics")).send().await.unwrap().text().await.unwrap();
                common::metric_sample(&metrics, "apiserver_audit_error_total{plugin=\"webhook\"}").unwrap_or(0.0) >= 1.0
            })
            .await;
        }
    }
}

/// The policy the manifests deploy reads, and records a change to a Llama in
/// full without RequestReceived or managedFields, and reads as metadata.
#[tokio::test]
async fn the_sample_policy_in_the_manifests_records_changes_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let policy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/farm-apiserver/files/audit-policy.yaml");
    let log = dir.path().join("audit.log");
    let s = Server::start(&[
        "--audit-policy-file",
        policy.to_str().unwrap(),
        "--audit-log-path",
        log.to_str().unwrap(),
        "--audit-log-compress=true",
    ])
    .await;
    let (code, _, created) =
        request(&s, Method::POST, &s.llamas("sample", ""), "application/json", Some(llama("a", 1.0, 1.0)), "sample-1")
            .await;
    assert_eq!(code, 201);
    assert!(created["metadata"]["managedFields"].is_array(), "{created}");
    let evs = audit::wait_for(&log, "sample-1", "ResponseComplete").await;
    assert_eq!(audit::stages(&evs), ["ResponseComplete"]);
    assert_eq!(evs[0]["level"], "RequestResponse");
    assert!(evs[0]["responseObject"]["metadata"].get("managedFields").is_none(), "{}", evs[0]);
    assert_eq!(evs[0]["responseObject"]["metadata"]["uid"], created["metadata"]["uid"]);
    let (code, _, _) = request(&s, Method::GET, &s.llamas("sample", "a"), "application/json", None, "sample-2").await;
    assert_eq!(code, 200);
    let evs = audit::wait_for(&log, "sample-2", "ResponseComplete").await;
    assert_eq!(evs[0]["level"], "Metadata");
    let (code, _, _) = request(&s, Method::GET, &s.url("/apis"), "application/json", None, "sample-3").await;
    assert_eq!(code, 200);
    let (code, _, _) = request(&s, Method::GET, &s.llamas("sample", ""), "application/json", None, "sample-4").await;
    assert_eq!(code, 200);
    audit::wait_for(&log, "sample-4", "ResponseComplete").await;
    assert!(audit::of(&audit::events(&log), "sample-3").is_empty(), "discovery is not audited");
}

/// `--audit-log-maxsize 1` rolls the log every megabyte; `--audit-log-maxbackup 2`
/// keeps two backups, gzipped with `--audit-log-compress`.
#[tokio::test]
async fn the_log_rolls_at_its_size_and_keeps_its_backups() {
    let dir = tempfile::tempdir().unwrap();
    let policy = audit::write_policy(dir.path(), audit::POLICY);
    let log_dir = dir.path().join("logs");
    let log = log_dir.join("audit.log");
    let s = Server::start(&[
        "--audit-policy-file",
        policy.to_str().unwrap(),
        "--audit-log-path",
        log.to_str().unwrap(),
        "--audit-log-maxsize",
        "1",
        "--audit-log-maxbackup",
        "2",
        "--audit-log-compress",
    ])
    .await;
    // Each create's ResponseComplete holds its 200 KB annotation twice: ~5 events a file.
    let big = "x".repeat(200 * 1024);
    for i in 0..15 {
        let mut body = llama(&format!("big-{i}"), 1.0, 1.0);
        body["metadata"]["annotations"] = json!({"farm.example.com/notes": big});
        let (code, _, _) =
            request(&s, Method::POST, &s.llamas("rolled", ""), "application/json", Some(body), &format!("big-{i}"))
                .await;
        assert_eq!(code, 201);
    }
    audit::wait_for(&log, "big-14", "ResponseComplete").await;
    let files = || {
        let mut names: Vec<String> = std::fs::read_dir(&log_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    common::succeeds("two gzipped backups", Duration::from_secs(20), || {
        let names = files();
        std::future::ready(names.len() == 3 && names.iter().filter(|n| n.ends_with(".log.gz")).count() == 2)
    })
    .await;
    let names = files();
    assert!(names.contains(&"audit.log".to_string()), "{names:?}");
    for backup in names.iter().filter(|n| n.ends_with(".gz")) {
        assert!(
            backup.starts_with("audit-") && backup.len() == "audit-2026-01-02T03-04-05.678.log.gz".len(),
            "{backup}"
        );
    }
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(size <= 1024 * 1024, "the current file stays under a megabyte: {size}");
}
