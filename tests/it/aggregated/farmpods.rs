//! FarmPods end to end: real Pods in the control plane, shown through the
//! aggregator by kubectl; the view follows changes, refuses writes, and keeps
//! serving (then catches up) when its upstream connection is cut.

use std::time::{Duration, Instant};

use crate::common;
use crate::common::cluster::{self, eventually, namespace};
use crate::common::relay::Relay;
use crate::common::{ok, KubectlStream, Options, Server};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};

fn pod(name: &str, labels: Value, node: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [
            {"name": "app", "image": "busybox:1.36"}, {"name": "sidecar", "image": "nginx:1.27"}]}
    }))
    .unwrap()
}

/// What a kubelet would report: Running, one of two containers ready, restarts.
fn running_status(restarts: i32) -> Value {
    json!({"status": {"phase": "Running", "podIP": "10.1.2.3", "startTime": "2026-01-01T00:00:00Z",
        "containerStatuses": [
            {"name": "app", "ready": true, "restartCount": restarts, "image": "busybox:1.36", "imageID": "", "started": true},
            {"name": "sidecar", "ready": false, "restartCount": 1, "image": "nginx:1.27", "imageID": "", "started": true}]}})
}

#[tokio::test]
async fn farmpods_follow_pods_through_the_aggregator() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "e2e-farmpods");
    let pods: Api<Pod> = Api::namespaced(cp.client().await, &ns);
    pods.create(&PostParams::default(), &pod("web-1", json!({"app": "web"}), "node-a")).await.unwrap();
    pods.create(&PostParams::default(), &pod("db-1", json!({"app": "db"}), "node-b")).await.unwrap();
    pods.patch_status("web-1", &PatchParams::default(), &Patch::Merge(running_status(2))).await.unwrap();

    let mut table = String::new();
    eventually("web-1 shown as Running", Duration::from_secs(10), || {
        table = cp.kubectl(&["get", "farmpods", "-n", &ns]).1;
        table.lines().any(|l| l.starts_with("web-1") && l.contains("Running"))
    })
    .await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "CONTAINERS", "NODE", "AGE"], "{table}");
    let web: Vec<&str> = table.lines().find(|l| l.starts_with("web-1")).unwrap().split_whitespace().collect();
    assert_eq!(&web[..6], ["web-1", "1/2", "Running", "3", "2", "node-a"], "{table}");
    let db: Vec<&str> = table.lines().find(|l| l.starts_with("db-1")).unwrap().split_whitespace().collect();
    assert_eq!(&db[..3], ["db-1", "0/2", "Pending"], "{table}");

    // Selectors, all namespaces, and the enriched object.
    assert!(ok(cp.kubectl(&["get", "fp", "-A", "-l", "app=web"])).contains("web-1"));
    let running = ok(cp.kubectl(&["get", "farmpods", "-n", &ns, "--field-selector", "status.phase=Running"]));
    assert!(running.contains("web-1") && !running.contains("db-1"), "{running}");
    let on_b = ok(cp.kubectl(&["get", "farmpods", "-n", &ns, "--field-selector", "spec.nodeName=node-b"]));
    assert!(on_b.contains("db-1") && !on_b.contains("web-1"), "{on_b}");
    let v: Value =
        serde_json::from_str(&ok(cp.kubectl(&["get", "farmpod", "web-1", "-n", &ns, "-o", "json"]))).unwrap();
    assert_eq!(v["spec"]["containers"][1], json!({"name": "sidecar", "image": "nginx:1.27"}));
    assert_eq!(v["status"]["podIP"], "10.1.2.3");
    assert_eq!(v["status"]["qosClass"], "BestEffort");
    assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "Pod");
    let pod_uid = pods.get("web-1").await.unwrap().metadata.uid.unwrap();
    assert_eq!(v["metadata"]["annotations"]["farm.example.com/pod-uid"], pod_uid.as_str());

    // -w follows changes within a second or so.
    let watch = KubectlStream::start(&cp.kubeconfig, &["get", "farmpods", "-n", &ns, "-w"]);
    watch.expect_line(&["web-1", "Running"], Duration::from_secs(10));
    let changed = Instant::now();
    pods.patch_status("web-1", &PatchParams::default(), &Patch::Merge(running_status(7))).await.unwrap();
    watch.expect_line(&["web-1", "8"], Duration::from_secs(5));
    assert!(changed.elapsed() < Duration::from_secs(2), "watch lagged {:?}", changed.elapsed());
    pods.create(&PostParams::default(), &pod("web-2", json!({"app": "web"}), "node-a")).await.unwrap();
    watch.expect_line(&["web-2", "Pending"], Duration::from_secs(5));

    // Deleting the Pod removes the FarmPod; writes are refused.
    // No kubelet confirms a graceful deletion here: delete at once.
    pods.delete("db-1", &kube::api::DeleteParams::default().grace_period(0)).await.unwrap();
    eventually("db-1 gone", Duration::from_secs(10), || !cp.kubectl(&["get", "farmpod", "db-1", "-n", &ns]).0).await;
    let del = cp.kubectl(&["delete", "farmpod", "web-1", "-n", &ns]);
    assert!(!del.0 && del.2.contains("MethodNotAllowed"), "{del:?}");
}

async fn farmpod_names(s: &Server, client: &reqwest::Client, ns: &str) -> Result<Vec<String>, String> {
    let url = s.url(&format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/farmpods"));
    let r = client.get(url).send().await.map_err(|e| e.to_string())?;
    let v: Value = r.json().await.map_err(|e| e.to_string())?;
    let items = v["items"].as_array().ok_or_else(|| v.to_string())?;
    Ok(items.iter().map(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string()).collect())
}

#[tokio::test]
async fn farmpods_survive_a_cut_upstream_and_catch_up() {
    let cp = cluster::controlplane();
    let ns = namespace(cp, "e2e-upstream");
    let pods: Api<Pod> = Api::namespaced(cp.client().await, &ns);
    pods.create(&PostParams::default(), &pod("before", json!({}), "n1")).await.unwrap();
    // farm-apiserver reaches kube-apiserver only through the relay.
    let target = cp.server.trim_start_matches("https://").to_string();
    let relay = Relay::start(target.clone()).await;
    let kubeconfig_text =
        std::fs::read_to_string(&cp.kubeconfig).unwrap().replace(&target, &format!("127.0.0.1:{}", relay.port));
    let dir = tempfile::tempdir().unwrap();
    let relayed = dir.path().join("relayed.kubeconfig");
    std::fs::write(&relayed, kubeconfig_text).unwrap();
    let s = Server::start_with(Options { kubeconfig: Some(relayed), ..Default::default() }).await;
    let client = common::client_trusting(&s.ca_file).unwrap();
    assert_eq!(farmpod_names(&s, &client, &ns).await.unwrap(), ["before"]);

    relay.cut();
    // Let the relay drop its live connections (it checks every 50 ms).
    tokio::time::sleep(Duration::from_millis(500)).await;
    pods.create(&PostParams::default(), &pod("during", json!({}), "n1")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The last known state is still served, and readiness holds.
    assert_eq!(farmpod_names(&s, &client, &ns).await.unwrap(), ["before"]);
    let ready = client.get(s.url("/readyz?verbose")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let text = ready.text().await.unwrap();
    assert!(text.contains("[+]farmpod-cache ok (serving the last known Pods, stale for"), "{text}");
    let metrics = client.get(s.url("/metrics")).send().await.unwrap().text().await.unwrap();
    let stale = common::metric_sample(&metrics, "farm_apiserver_pod_cache_staleness_seconds").unwrap();
    assert!(stale > 0.0, "staleness is reported while cut: {stale}\n{metrics}");

    relay.restore();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let names = farmpod_names(&s, &client, &ns).await.unwrap();
        if names == ["before", "during"] {
            break;
        }
        assert!(Instant::now() < deadline, "did not catch up: {names:?}\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let metrics = client.get(s.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("farm_apiserver_pod_cache_staleness_seconds 0\n"), "{metrics}");
}

/// `farmpods/{name}/log` answers as the Pod's `pods/log` does, through the
/// aggregator; a FarmPod that does not exist is the view's 404; discovery
/// lists the subresource. (A caller allowed FarmPods' logs but not the
/// Pods' is refused: `security.rs`.)
#[tokio::test]
async fn a_farmpods_log_is_its_pods_log_for_who_may_read_it() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "e2e-farmpod-log");
    let pods: Api<Pod> = Api::namespaced(cp.client().await, &ns);
    pods.create(&PostParams::default(), &pod("web-1", json!({"app": "web"}), "node-a")).await.unwrap();
    eventually("web-1 in the view", Duration::from_secs(10), || cp.kubectl(&["get", "farmpod", "web-1", "-n", &ns]).0)
        .await;
    let raw = |path: &str| cp.kubectl(&["get", "--raw", path]);
    let pod_log = format!("/api/v1/namespaces/{ns}/pods/web-1/log?container=app");
    let farmpod_log = format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/farmpods/web-1/log?container=app");
    // No kubelet runs this Pod: both answer the same refusal, the Pod API's words passed on.
    let (direct, through) = (raw(&pod_log), raw(&farmpod_log));
    assert_eq!((through.0, &through.1), (direct.0, &direct.1), "farmpods/log: {through:?}\npods/log: {direct:?}");
    assert_eq!(through.2, direct.2, "the same error, in the same words");
    let missing = raw(&format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/farmpods/nobody/log"));
    assert!(!missing.0 && missing.2.contains("farmpods.farm.example.com \"nobody\" not found"), "{missing:?}");

    let discovery = ok(cp.kubectl(&["get", "--raw", "/apis/farm.example.com/v1alpha"]));
    let discovery: Value = serde_json::from_str(&discovery).unwrap();
    let log = discovery["resources"].as_array().unwrap().iter().find(|r| r["name"] == "farmpods/log");
    assert_eq!(
        log,
        Some(
            &json!({"name": "farmpods/log", "singularName": "", "namespaced": true, "kind": "FarmPod", "verbs": ["get"]})
        ),
        "{discovery}"
    );
}

/// A Pod the control plane's simulated kubelet runs (tests/controlplane:
/// its log is its container's args, then a `tick N` line every interval of
/// its annotation): `farmpods/{name}/log` answers what `pods/log` answers,
/// with the options passed on, and follows the log until the client goes,
/// through the aggregator, for kubectl and kube-rs.
#[tokio::test]
async fn a_running_pods_log_is_read_and_followed_through_its_farmpod() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "e2e-farmpod-logs");
    let client = cp.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let talker: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "talker", "annotations": {"sim.farm.example.com/tick-interval": "200ms"}},
        "spec": {"terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox:1.36", "args": ["hello", "world"]}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &talker).await.unwrap();
    eventually("talker Running in the view", Duration::from_secs(30), || {
        cp.kubectl(&["get", "farmpod", "talker", "-n", &ns]).1.contains("Running")
    })
    .await;
    let pod_log = |query: &str| format!("/api/v1/namespaces/{ns}/pods/talker/log?{query}");
    let farmpod_log =
        |query: &str| format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/farmpods/talker/log?{query}");
    let raw = |path: String| cp.kubectl(&["get", "--raw", &path]);

    // The same answers, the Pod API's options passed on.
    for query in ["limitBytes=12", "container=main&limitBytes=6", "previous=true", "container=nope"] {
        let (direct, through) = (raw(pod_log(query)), raw(farmpod_log(query)));
        assert_eq!(through, direct, "?{query}: farmpods/log, then pods/log");
    }
    assert_eq!(raw(farmpod_log("limitBytes=12")).1, "hello\nworld\n");
    let last = raw(farmpod_log("tailLines=1&timestamps=true")).1;
    let (stamp, line) = last.trim_end().split_once(' ').unwrap_or_else(|| panic!("{last:?}"));
    assert!(stamp.ends_with('Z') && line.starts_with("tick "), "one stamped tick: {last:?}");

    // Followed by kube-rs through the aggregator: new ticks arrive until the client goes.
    let request = http::Request::get(farmpod_log("follow=true&sinceSeconds=1")).body(Vec::new()).unwrap();
    let mut lines = futures::AsyncBufReadExt::lines(client.request_stream(request).await.unwrap());
    let mut ticks = Vec::new();
    while ticks.len() < 5 {
        let line = tokio::time::timeout(Duration::from_secs(10), futures::StreamExt::next(&mut lines))
            .await
            .expect("a tick within 10 s")
            .expect("the log goes on")
            .unwrap();
        if let Some(n) = line.strip_prefix("tick ") {
            ticks.push(n.parse::<u64>().unwrap());
        }
    }
    assert!(ticks.windows(2).all(|w| w[1] == w[0] + 1), "ticks in order, none lost: {ticks:?}");
    drop(lines);
    // kubectl follows it too, until it is stopped.
    let follow = KubectlStream::start(&cp.kubeconfig, &["get", "--raw", &farmpod_log("follow=true&tailLines=0")]);
    let first = follow.expect_line(&["tick "], Duration::from_secs(10));
    let next = first.trim_start_matches("tick ").parse::<u64>().unwrap() + 1;
    follow.expect_line(&[&format!("tick {next}")], Duration::from_secs(10));
}

/// A followed log is long-running, as a watch: the server's shutdown ends it
/// cleanly (the chunked answer completes), and the server exits.
#[tokio::test]
async fn sigterm_ends_a_followed_log_cleanly() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "e2e-farmpod-log-shutdown");
    let pods: Api<Pod> = Api::namespaced(cp.client().await, &ns);
    let talker: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "talker", "annotations": {"sim.farm.example.com/tick-interval": "100ms"}},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &talker).await.unwrap();
    let mut s = Server::start_with_cluster(&[], Some(&cp.kubeconfig)).await;
    let url = s.url(&format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/farmpods/talker/log?follow=true"));
    // The server's own view syncs first: until then the log is a 503.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut answer = loop {
        let r = s.client.get(&url).send().await.unwrap();
        if r.status() == 200 {
            break r;
        }
        assert!(Instant::now() < deadline, "the log was not served within 30 s: {}", r.status());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let first = tokio::time::timeout(Duration::from_secs(10), answer.chunk()).await.expect("a tick within 10 s");
    assert!(first.unwrap().is_some(), "the log streams");
    let rest = tokio::spawn(async move {
        while let Some(chunk) = answer.chunk().await? {
            drop(chunk);
        }
        Ok::<_, reqwest::Error>(())
    });
    let status = s.terminate().await;
    assert!(status.success(), "exit status {status}\n{}", s.log());
    let ended = tokio::time::timeout(Duration::from_secs(5), rest).await.expect("the log ended").unwrap();
    assert!(ended.is_ok(), "the log ended cleanly: {ended:?}");
}
