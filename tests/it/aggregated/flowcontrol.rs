//! API Priority and Fairness from the cluster's FlowSchemas and
//! PriorityLevelConfigurations. The requests go to farm-apiserver as the
//! aggregator sends them (its front-proxy certificate, the user in headers),
//! not through kube-apiserver, whose own flow control would classify them by
//! the same schemas first.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::cluster::{self, ControlPlane};
use crate::common::identity::{client_with_identity, files};
use crate::common::webhook::WebhookServer;
use crate::common::{Options, Server};
use crate::compare::admission::{configuration, Hook};

const PF_SCHEMA: &str = "x-kubernetes-pf-flowschema-uid";
const PF_LEVEL: &str = "x-kubernetes-pf-prioritylevel-uid";

/// A limited level of one nominal share and the schema sending `user`'s
/// Llama creates in `ns` to it.
fn apply_level_and_schema(cp: &ControlPlane, name: &str, user: &str, ns: &str, limit_response: Value) {
    let level = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "lendablePercent": 0, "limitResponse": limit_response}},
    });
    let schema = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": name}, "matchingPrecedence": 100,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                "resourceRules": [{"verbs": ["create"], "apiGroups": ["farm.example.com"], "resources": ["llamas"], "namespaces": [ns]}]}],
        },
    });
    cp.apply(&level.to_string());
    cp.apply(&schema.to_string());
}

fn uid(cp: &ControlPlane, kind: &str, name: &str) -> String {
    let out = cp.kubectl(&["get", kind, name, "-o", "jsonpath={.metadata.uid}"]);
    assert!(out.0, "{out:?}");
    out.1
}

#[tokio::test]
async fn requests_run_wait_or_are_refused_as_their_priority_level_says() {
    let cp = ControlPlane::start();
    let server = Server::start_with(Options {
        args: vec!["--authentication".into(), "delegated".into()],
        kubeconfig: Some(cp.kubeconfig.clone()),
        ..Default::default()
    })
    .await;
    let ns = cluster::namespace(&cp, "apf");
    cp.kubectl(&["create", "rolebinding", "testers", "--clusterrole=cluster-admin", "--group=apf-testers", "-n", &ns]);
    cluster::wait_until_allowed(
        &cp,
        &["create", "llamas.farm.example.com", "--as=x", "--as-group=apf-testers", "-n", &ns],
    )
    .await;
    // Creates of `held-*` Llamas wait at this webhook until it is released.
    let webhook = WebhookServer::start(&[]).await;
    let hold = Hook { timeout_seconds: 30, ..Hook::new("hold.farm.test", "/hold") };
    cp.apply(&configuration("ValidatingWebhookConfiguration", "apf-hold", &ns, &webhook, &[hold]));
    apply_level_and_schema(&cp, "apf-reject", "apf-holder", &ns, json!({"type": "Reject"}));
    apply_level_and_schema(
        &cp,
        "apf-queue",
        "apf-queuer",
        &ns,
        json!({"type": "Queue", "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 2}}),
    );
    // The server's 600 seats (400 + 200) shared by the levels' shares.
    let out = cp.kubectl(&["get", "prioritylevelconfigurations", "-o", "json"]);
    let levels: Value = serde_json::from_str(&out.1).unwrap();
    let shares: u64 = levels["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let spec = &l["spec"];
            spec["limited"]["nominalConcurrencyShares"]
                .as_u64()
                .or(spec["exempt"]["nominalConcurrencyShares"].as_u64())
                .unwrap_or(0)
        })
        .sum();
    let seats = 600u64.div_ceil(shares) as usize;

    // As the aggregator sends them: its certificate, the user in headers.
    let (cert, key) = files(&cp, "frontProxyClientCertFile", "frontProxyClientKeyFile");
    let proxy = client_with_identity(&server, &cert, &key);
    let url = server.url(&format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/llamas"));
    let create = move |user: &str, name: &str| {
        let llama = json!({"apiVersion": "farm.example.com/v1alpha", "kind": "Llama", "metadata": {"name": name}, "spec": {"weight": 2, "height": 1}});
        proxy.post(&url).header("X-Remote-User", user).header("X-Remote-Group", "apf-testers").json(&llama).send()
    };
    let (reject_schema, reject_level) =
        (uid(&cp, "flowschema", "apf-reject"), uid(&cp, "prioritylevelconfiguration", "apf-reject"));
    // The server classifies by the schemas, and calls the webhook, once its
    // watches have them.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for attempt in 0.. {
        let answer = create("apf-holder", &format!("probe-{attempt}")).await.unwrap();
        assert_eq!(answer.status(), 201);
        let classified = answer.headers().get(PF_SCHEMA).is_some_and(|v| v == reject_schema.as_str());
        if classified && !webhook.reviews_for("/hold", &ns).is_empty() {
            assert_eq!(answer.headers()[PF_LEVEL], reject_level.as_str());
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never classified by apf-reject: {:?}", answer.headers());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let held_at_webhook = |prefix: &str| {
        webhook
            .reviews_for("/hold", &ns)
            .iter()
            .filter(|r| r["request"]["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .count()
    };
    let spawn = |user: &'static str, name: String| {
        let request = create(user, &name);
        tokio::spawn(async move { request.await.map(|a| a.status().as_u16()).unwrap_or(0) })
    };

    // Reject: the level's seats held, the next request is refused at once,
    // named by schema and level; another user's requests go on.
    let holders: Vec<_> = (0..seats).map(|i| spawn("apf-holder", format!("held-r{i}"))).collect();
    cluster::eventually("the holder's creates at the webhook", Duration::from_secs(30), || {
        held_at_webhook("held-r") == seats
    })
    .await;
    let refused = create("apf-holder", "held-r-extra").await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()[PF_SCHEMA], reject_schema.as_str());
    assert_eq!(refused.headers()["retry-after"], "1");
    let calm = create("apf-calm", "calm").await.unwrap();
    assert_eq!(calm.status(), 201, "another flow is served while the level is full");
    assert_ne!(calm.headers().get(PF_SCHEMA).map(|v| v.to_str().unwrap().to_string()), Some(reject_schema.clone()));

    // Queue: past the seats, requests wait in their queue up to its length;
    // past that they are refused; once seats are free the queued ones run.
    let queuers: Vec<_> = (0..seats).map(|i| spawn("apf-queuer", format!("held-q{i}"))).collect();
    cluster::eventually("the queuer's creates at the webhook", Duration::from_secs(30), || {
        held_at_webhook("held-q") == seats
    })
    .await;
    let queued: Vec<_> = (0..2).map(|i| spawn("apf-queuer", format!("held-queued-{i}"))).collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(held_at_webhook("held-queued"), 0, "queued requests wait for a seat, they do not run");
    assert!(queued.iter().all(|q| !q.is_finished()), "queued requests wait, they are not refused");
    let full = create("apf-queuer", "held-q-extra").await.unwrap();
    assert_eq!(full.status(), 429, "the queue is full");
    assert_eq!(full.headers()[PF_SCHEMA], uid(&cp, "flowschema", "apf-queue").as_str());

    webhook.release_held();
    for write in holders.into_iter().chain(queuers).chain(queued) {
        assert_eq!(write.await.unwrap(), 201);
    }

    // Counted under kube's metric names.
    let (cert, key) = files(&cp, "adminCertFile", "adminKeyFile");
    let admin = client_with_identity(&server, &cert, &key);
    let metrics = admin.get(server.url("/metrics")).send().await.unwrap().text().await.unwrap();
    let sample = |series: &str| crate::common::metric_sample(&metrics, series);
    let flow = |name: &str| format!("priority_level=\"{name}\",flow_schema=\"{name}\"");
    for (series, value) in [
        (
            format!(
                "apiserver_flowcontrol_rejected_requests_total{{{},reason=\"concurrency-limit\"}}",
                flow("apf-reject")
            ),
            1.0,
        ),
        (format!("apiserver_flowcontrol_rejected_requests_total{{{},reason=\"queue-full\"}}", flow("apf-queue")), 1.0),
        (format!("apiserver_flowcontrol_dispatched_requests_total{{{}}}", flow("apf-queue")), seats as f64 + 2.0),
        (
            format!(
                "apiserver_flowcontrol_request_wait_duration_seconds_count{{{},execute=\"true\"}}",
                flow("apf-queue")
            ),
            2.0,
        ),
        (format!("apiserver_flowcontrol_current_executing_requests{{{}}}", flow("apf-queue")), 0.0),
        (format!("apiserver_flowcontrol_current_inqueue_requests{{{}}}", flow("apf-queue")), 0.0),
        ("apiserver_flowcontrol_nominal_limit_seats{priority_level=\"apf-reject\"}".to_string(), seats as f64),
    ] {
        assert_eq!(sample(&series), Some(value), "{series} in\n{metrics}");
    }
    for name in ["apf-reject", "apf-queue"] {
        cp.kubectl(&["delete", "flowschema,prioritylevelconfiguration", name]);
    }
}
