//! Option decoding compared live with kube-apiserver: the same malformed
//! DeleteOptions bodies, delete queries and query booleans/integers are sent
//! to farm-apiserver's Llamas through the aggregator and to a CRD of the same
//! shape (`llamas.crd.farm.example.com`) served by kube-apiserver itself, and
//! the answers must agree (status code, reason, message; resource names aside).
//!
//! One difference is expected and pinned: kube-apiserver 1.34 (the test
//! control plane) answers a DeleteOptions body it cannot decode with a 500
//! carrying no reason; 1.35 fixed that to 400 BadRequest with the same
//! message (kubernetes/apiserver 7b84a2828), which is what farm-apiserver
//! answers. The messages must match exactly either way.

use std::time::Duration;

use crate::common;
use crate::common::cluster::{self, namespace};
use crate::common::compare::admin_client;
use reqwest::Method;
use serde_json::Value;

/// DELETE bodies kube refuses while decoding (400 from 1.35, 500 in 1.34).
const UNDECODABLE: &[&str] = &[
    r#"{"dryRun":"All"}"#,
    r#"{"preconditions":{"uid":1}}"#,
    r#"{"preconditions":{"resourceVersion":1}}"#,
    r#"{"preconditions":"x"}"#,
    r#"{"gracePeriodSeconds":"5"}"#,
    r#"{"gracePeriodSeconds":1.5}"#,
    r#"{"propagationPolicy":1}"#,
    r#"{"orphanDependents":"true"}"#,
    r#"{"dryRun":[1]}"#,
    r#"{"dryRun":["All"],"orphanDependents":1,"gracePeriodSeconds":"x"}"#,
    "not json",
    "[]",
    r#"{"kind":1}"#,
    r#"{"kind":"Pod","apiVersion":"v1","dryRun":["All"]}"#,
    r#"{"kind":"Foo","dryRun":["All"]}"#,
    r#"{"kind":"Status","apiVersion":"v1","dryRun":["All"]}"#,
    r#"{"kind":"DeleteOptions","apiVersion":"a/b/c","dryRun":["All"]}"#,
];

/// DELETE bodies and queries both servers answer the same way, code included
/// (422s and query decoding, or a successful dry run).
const SAME_ANSWER: &[(&str, &str)] = &[
    ("", r#"{"dryRun":["Bad"]}"#),
    ("", r#"{"dryRun":[null]}"#),
    ("", r#"{"propagationPolicy":"Sideways","dryRun":["All"]}"#),
    ("", r#"{"orphanDependents":true,"propagationPolicy":"Orphan"}"#),
    ("", r#"{"kind":"DeleteOptions","apiVersion":"bogus/v9","dryRun":["All"],"unknownField":1}"#),
    ("", r#"{"dryRun":["All"]}"#),
    ("gracePeriodSeconds=x", ""),
    ("gracePeriodSeconds=", ""),
    ("propagationPolicy=Bad", ""),
    ("orphanDependents=yes&propagationPolicy=Orphan", ""),
    ("dryRun=Bad", ""),
    ("dryRun=", ""),
    ("dryRun=All&preconditions=x", ""),
    ("propagationPolicy=Bad", r#"{"dryRun":["All"]}"#),
];

/// Collection GET queries: (query, is it a watch) — the answers' codes and
/// messages must agree, and a watch must be a watch on both.
const LIST_QUERIES: &[&str] = &[
    "watch=TRUE",
    "watch=T",
    "watch=yes",
    "watch=",
    "watch=0",
    "watch=FALSE",
    "watch=false&watch=true",
    "limit=x",
    "limit=",
    "limit=1.5",
    "limit=99999999999999999999",
    "limit=1&limit=x",
    "limit=-1",
    "watch=1&timeoutSeconds=x",
    "sendInitialEvents=yes",
    "allowWatchBookmarks=x",
    "resourceVersion=x",
    "resourceVersion=%2B5",
];

struct Side {
    name: &'static str,
    /// The collection URL through kube-apiserver.
    collection: String,
}

/// (HTTP code, body as JSON, or the first line of a stream).
async fn send(client: &reqwest::Client, method: Method, url: &str, body: &str) -> (u16, Value) {
    let mut req = client.request(method, url);
    if !body.is_empty() {
        req = req.header("Content-Type", "application/json").body(body.to_string());
    }
    let mut resp = req.send().await.expect("request");
    let code = resp.status().as_u16();
    let mut buf = Vec::new();
    while let Some(chunk) = resp.chunk().await.expect("body") {
        buf.extend_from_slice(&chunk);
        if let Some(end) = buf.iter().position(|b| *b == b'\n') {
            // A watch: its first event is enough.
            buf.truncate(end);
            break;
        }
    }
    (code, serde_json::from_slice(&buf).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&buf).into())))
}

/// What must agree between the two answers: Status code, reason and message
/// with the resource's group taken out; for successes, the shape (a Status, a
/// watch event, a list).
fn summary(v: &Value, group: &str) -> Value {
    let shape =
        if v["type"].is_string() { "watch event".to_string() } else { v["kind"].as_str().unwrap_or("?").to_string() };
    let message = v["message"].as_str().unwrap_or("").replace(group, "GROUP");
    serde_json::json!({"shape": shape, "status": v["status"], "reason": v["reason"], "message": message})
}

async fn create(client: &reqwest::Client, side: &Side, api_version: &str, name: &str) {
    let body = serde_json::json!({
        "apiVersion": api_version, "kind": "Llama", "metadata": {"name": name}, "spec": {"weight": 1.0, "height": 1.0}
    });
    let (code, v) = send(client, Method::POST, &side.collection, &body.to_string()).await;
    assert_eq!(code, 201, "creating {name} on {}: {v}", side.name);
}

#[tokio::test]
async fn option_decoding_matches_kube_apiserver_serving_a_crd() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let client = admin_client(cp);
    common::compare::crd_served(cp, &client).await;
    let ns = namespace(cp, "e2e-options");
    let ours = Side {
        name: "farm-apiserver",
        collection: format!("{}/apis/farm.example.com/v1alpha/namespaces/{ns}/llamas", cp.server),
    };
    let crd = Side {
        name: "CRD",
        collection: format!("{}/apis/crd.farm.example.com/v1alpha/namespaces/{ns}/llamas", cp.server),
    };
    // The CRD may need a moment after Established before it serves writes.
    let mut tries = 0;
    loop {
        let (code, _) = send(&client, Method::GET, &crd.collection, "").await;
        if code == 200 || tries > 50 {
            break;
        }
        tries += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    create(&client, &ours, "farm.example.com/v1alpha", "dolly").await;
    create(&client, &crd, "crd.farm.example.com/v1alpha", "dolly").await;
    let one = |side: &Side| format!("{}/dolly", side.collection);

    for body in UNDECODABLE {
        let (our_code, our) = send(&client, Method::DELETE, &one(&ours), body).await;
        let (crd_code, theirs) = send(&client, Method::DELETE, &one(&crd), body).await;
        assert_eq!(our["message"], theirs["message"], "{body}: ours {our} vs the CRD's {theirs}");
        assert_eq!((our_code, &our["reason"]), (400, &Value::from("BadRequest")), "{body}: {our}");
        // 1.34 answers 500 with no reason; 1.35 and later what we answer.
        let crd_fixed = crd_code == 400 && theirs["reason"] == "BadRequest";
        let crd_134 = crd_code == 500 && theirs["reason"].is_null();
        assert!(crd_fixed || crd_134, "{body}: the CRD answered {crd_code} {theirs}");
    }
    for (query, body) in SAME_ANSWER {
        let q = if query.is_empty() { String::new() } else { format!("?{query}") };
        let (our_code, our) = send(&client, Method::DELETE, &format!("{}{q}", one(&ours)), body).await;
        let (crd_code, theirs) = send(&client, Method::DELETE, &format!("{}{q}", one(&crd)), body).await;
        assert_eq!(
            (our_code, summary(&our, "farm.example.com")),
            (crd_code, summary(&theirs, "crd.farm.example.com")),
            "DELETE ?{query} {body}: ours {our} vs the CRD's {theirs}"
        );
    }
    // Nothing above deleted anything on either side.
    for side in [&ours, &crd] {
        let (code, v) = send(&client, Method::GET, &one(side), "").await;
        assert_eq!(code, 200, "dolly is gone on {}: {v}", side.name);
    }
    for query in LIST_QUERIES {
        let with_timeout = format!("{query}&timeoutSeconds=2");
        let (our_code, our) = send(&client, Method::GET, &format!("{}?{with_timeout}", ours.collection), "").await;
        let (crd_code, theirs) = send(&client, Method::GET, &format!("{}?{with_timeout}", crd.collection), "").await;
        assert_eq!(
            (our_code, summary(&our, "farm.example.com")),
            (crd_code, summary(&theirs, "crd.farm.example.com")),
            "GET ?{query}: ours {our} vs the CRD's {theirs}"
        );
    }
    // A GET of one object with watch=true is a get on both.
    let (our_code, our) = send(&client, Method::GET, &format!("{}?watch=true", one(&ours)), "").await;
    let (crd_code, theirs) = send(&client, Method::GET, &format!("{}?watch=true", one(&crd)), "").await;
    assert_eq!((our_code, &our["kind"]), (crd_code, &theirs["kind"]), "ours {our} vs the CRD's {theirs}");
    // Create options: the same 422.
    for query in ["dryRun=Bad&fieldValidation=strict", "dryRun=", "fieldValidation=Bad", "fieldManager=%01&dryRun=Bad"]
    {
        let body = |api_version: &str| {
            serde_json::json!({"apiVersion": api_version, "kind": "Llama", "metadata": {"name": "x"}, "spec": {"weight": 1.0, "height": 1.0}})
                .to_string()
        };
        let url = |side: &Side| format!("{}?{query}", side.collection);
        let (our_code, our) = send(&client, Method::POST, &url(&ours), &body("farm.example.com/v1alpha")).await;
        let (crd_code, theirs) = send(&client, Method::POST, &url(&crd), &body("crd.farm.example.com/v1alpha")).await;
        assert_eq!(
            (our_code, summary(&our, "farm.example.com")),
            (crd_code, summary(&theirs, "crd.farm.example.com")),
            "POST ?{query}: ours {our} vs the CRD's {theirs}"
        );
    }
    // A non-apply patch may not say `force`.
    let mut answers = Vec::new();
    for side in [&ours, &crd] {
        let resp = client
            .patch(format!("{}?force=true", one(side)))
            .header("Content-Type", "application/merge-patch+json")
            .body(r#"{"metadata":{"labels":{"a":"b"}}}"#)
            .send()
            .await
            .expect("patch");
        let code = resp.status().as_u16();
        let v: Value = resp.json().await.expect("json");
        answers.push((code, v["reason"].clone(), v["message"].clone()));
    }
    assert_eq!(answers[0], answers[1], "PATCH ?force=true: ours vs the CRD's");
}
