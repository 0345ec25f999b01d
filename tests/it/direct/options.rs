//! Strict decoding of request options: DeleteOptions bodies and queries,
//! deletecollection's two option sets, and the booleans and integers of the
//! query.
//!
//! First over HTTPS against the real binary, each asserted against
//! kube-apiserver's code, reason and message (recorded from kube-apiserver
//! serving a CRD). A refused delete must leave the object where it was.
//!
//! Then compared live with kube-apiserver: the same malformed DeleteOptions
//! bodies, delete queries and query booleans/integers are sent to
//! farm-apiserver's Llamas through the aggregator and to a CRD of the same
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
use crate::common::{create, llama, Backend, Server};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

// ---- straight to farm-apiserver --------------------------------------------------------------

/// A DELETE body kube-apiserver refuses while decoding, and its message.
const UNDECODABLE: &[(&str, &str)] = &[
    (r#"{"dryRun":"All"}"#, "json: cannot unmarshal string into Go struct field DeleteOptions.dryRun of type []string"),
    (
        r#"{"preconditions":{"uid":1}}"#,
        "json: cannot unmarshal number into Go struct field Preconditions.preconditions.uid of type types.UID",
    ),
    (
        r#"{"preconditions":{"resourceVersion":1}}"#,
        "json: cannot unmarshal number into Go struct field Preconditions.preconditions.resourceVersion of type string",
    ),
    (
        r#"{"gracePeriodSeconds":"5"}"#,
        "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64",
    ),
    (
        r#"{"propagationPolicy":1}"#,
        "json: cannot unmarshal number into Go struct field DeleteOptions.propagationPolicy of type v1.DeletionPropagation",
    ),
    (
        r#"{"orphanDependents":"true"}"#,
        "json: cannot unmarshal string into Go struct field DeleteOptions.orphanDependents of type bool",
    ),
    ("not json", "couldn't get version/kind; json parse error: invalid character 'o' in literal null (expecting 'u')"),
    (
        r#"{"kind":"Pod","apiVersion":"v1","dryRun":["All"]}"#,
        r#"no kind "Pod" is registered for version "v1" in scheme "pkg/runtime/scheme.go:110""#,
    ),
    (
        r#"{"kind":"Status","apiVersion":"v1","dryRun":["All"]}"#,
        "converting (v1.Status) to (v1.DeleteOptions): unknown conversion",
    ),
];

/// A request with a JSON Content-Type and `body` as is (malformed ones too).
async fn call(s: &Server, method: Method, url: &str, body: Option<&str>) -> (StatusCode, Value) {
    let (code, _, v) = common::call(s, method, url, "application/json", body.map(|b| b.as_bytes().to_vec())).await;
    (code, v)
}

/// The object is still there, unchanged (same uid and resourceVersion).
async fn assert_untouched(s: &Server, created: &Value, after: &str) {
    let name = created["metadata"]["name"].as_str().expect("name");
    let (code, now) = call(s, Method::GET, &s.llamas("default", name), None).await;
    assert_eq!(code, StatusCode::OK, "{name} is gone after {after}: {now}");
    assert_eq!(now["metadata"]["uid"], created["metadata"]["uid"], "after {after}");
    assert_eq!(now["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"], "after {after}");
    assert!(now["metadata"]["deletionTimestamp"].is_null(), "after {after}: {now}");
}

fn assert_status(v: &Value, code: u16, reason: &str, message: &str) {
    assert_eq!(
        (&v["kind"], &v["status"], &v["code"], &v["reason"], &v["message"]),
        (&json!("Status"), &json!("Failure"), &json!(code), &json!(reason), &json!(message)),
        "{v}"
    );
}

async fn undecodable_delete_bodies_are_refused_and_delete_nothing(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let dolly = create(&s, "default", &llama("dolly", 1.0, 1.0)).await;
    let url = s.llamas("default", "dolly");
    for (body, message) in UNDECODABLE {
        let (code, v) = call(&s, Method::DELETE, &url, Some(body)).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert_status(&v, 400, "BadRequest", message);
        assert_untouched(&s, &dolly, body).await;
    }
    // A body that is not JSON at all by its Content-Type is a 415.
    let resp = s.client.delete(&url).header("Content-Type", "text/plain").body("{}").send().await.expect("request");
    assert_eq!(resp.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_untouched(&s, &dolly, "a text/plain body").await;
}

async fn invalid_delete_options_are_one_422(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let dolly = create(&s, "default", &llama("dolly", 1.0, 1.0)).await;
    let url = s.llamas("default", "dolly");
    let cases = [
        (
            r#"{"dryRun":["Bad"]}"#,
            r#"DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Bad"]: supported values: "All""#,
        ),
        (
            r#"{"propagationPolicy":"Sideways"}"#,
            r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": supported values: "Foreground", "Background", "Orphan", "nil""#,
        ),
        (
            r#"{"orphanDependents":true,"propagationPolicy":"Orphan"}"#,
            r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Orphan": orphanDependents and deletionPropagation cannot be both set"#,
        ),
    ];
    for (body, message) in cases {
        let (code, v) = call(&s, Method::DELETE, &url, Some(body)).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {v}");
        assert_status(&v, 422, "Invalid", message);
        assert_eq!(v["details"]["kind"], "DeleteOptions", "{v}");
        assert_untouched(&s, &dolly, body).await;
    }
}

async fn dry_run_deletes_with_correct_options_delete_nothing(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let dolly = create(&s, "default", &llama("dolly", 1.0, 1.0)).await;
    let url = s.llamas("default", "dolly");
    // Accepted as kube accepts them: any DeleteOptions version, no kind at
    // all, unknown fields ignored.
    for body in [
        r#"{"dryRun":["All"]}"#,
        r#"{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","dryRun":["All"]}"#,
        r#"{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}"#,
        r#"{"kind":"DeleteOptions","apiVersion":"bogus/v9","dryRun":["All"]}"#,
        r#"{"unknownField":1,"dryRun":["All"],"preconditions":{"uid":"some-other-uid"}}"#,
    ] {
        let (code, v) = call(&s, Method::DELETE, &url, Some(body)).await;
        if body.contains("some-other-uid") {
            // Preconditions are checked in a dry run too.
            assert_eq!(code, StatusCode::CONFLICT, "{body}: {v}");
        } else {
            assert_eq!(code, StatusCode::OK, "{body}: {v}");
            assert_eq!(v["status"], "Success", "{v}");
        }
        assert_untouched(&s, &dolly, body).await;
    }
    // Without a body the query carries the options.
    let (code, v) = call(&s, Method::DELETE, &format!("{url}?dryRun=All"), None).await;
    assert_eq!(code, StatusCode::OK, "{v}");
    assert_untouched(&s, &dolly, "?dryRun=All").await;
    // preconditions exist only in a body: the parameter is ignored.
    let (code, v) = call(&s, Method::DELETE, &format!("{url}?dryRun=All&preconditions=x"), None).await;
    assert_eq!(code, StatusCode::OK, "{v}");
    assert_untouched(&s, &dolly, "?preconditions=x").await;
    // `DryRun` is not `dryRun`: names match case-sensitively, so this is a
    // real delete in kube-apiserver too.
    let (code, v) = call(&s, Method::DELETE, &url, Some(r#"{"DryRun":["All"]}"#)).await;
    assert_eq!(code, StatusCode::OK, "{v}");
    assert_eq!(call(&s, Method::GET, &url, None).await.0, StatusCode::NOT_FOUND);
}

async fn delete_query_options_are_decoded_like_kube(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let dolly = create(&s, "default", &llama("dolly", 1.0, 1.0)).await;
    let url = s.llamas("default", "dolly");
    let cases = [
        ("gracePeriodSeconds=x", 400, "BadRequest", r#"strconv.ParseInt: parsing "x": invalid syntax"#),
        ("gracePeriodSeconds=", 400, "BadRequest", r#"strconv.ParseInt: parsing "": invalid syntax"#),
        (
            "propagationPolicy=Bad",
            422,
            "Invalid",
            r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Bad": supported values: "Foreground", "Background", "Orphan", "nil""#,
        ),
        (
            "orphanDependents=yes&propagationPolicy=Orphan",
            422,
            "Invalid",
            r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Orphan": orphanDependents and deletionPropagation cannot be both set"#,
        ),
        (
            "dryRun=All&dryRun=Bad",
            422,
            "Invalid",
            r#"DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["All","Bad"]: supported values: "All""#,
        ),
        (
            "dryRun=",
            422,
            "Invalid",
            r#"DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: [""]: supported values: "All""#,
        ),
    ];
    for (query, code, reason, message) in cases {
        let (got, v) = call(&s, Method::DELETE, &format!("{url}?{query}"), None).await;
        assert_eq!(got.as_u16(), code, "{query}: {v}");
        assert_status(&v, code, reason, message);
        assert_untouched(&s, &dolly, query).await;
    }
    // With a body the query's options are not read at all, as in kube: a
    // valid body wins over an invalid query...
    let (code, v) =
        call(&s, Method::DELETE, &format!("{url}?propagationPolicy=Bad"), Some(r#"{"dryRun":["All"]}"#)).await;
    assert_eq!(code, StatusCode::OK, "{v}");
    assert_untouched(&s, &dolly, "a body beside a bad query").await;
    // ...and an empty body `{}` makes `?dryRun=All` a real delete.
    let (code, v) = call(&s, Method::DELETE, &format!("{url}?dryRun=All"), Some("{}")).await;
    assert_eq!(code, StatusCode::OK, "{v}");
    assert_eq!(call(&s, Method::GET, &url, None).await.0, StatusCode::NOT_FOUND);
}

async fn deletecollection_decodes_list_then_delete_options(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let herd = [create(&s, "default", &llama("a", 1.0, 1.0)).await, create(&s, "default", &llama("b", 1.0, 1.0)).await];
    let all = s.llamas("default", "");
    let check = |what: &'static str| {
        let s = &s;
        let herd = &herd;
        async move {
            for l in herd {
                assert_untouched(s, l, what).await;
            }
        }
    };
    // ListOptions come first: a bad limit is reported before a bad body.
    let (code, v) = call(&s, Method::DELETE, &format!("{all}?limit=x"), Some(r#"{"dryRun":"All"}"#)).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{v}");
    assert_status(&v, 400, "BadRequest", r#"strconv.ParseInt: parsing "x": invalid syntax"#);
    check("?limit=x").await;
    let (code, v) = call(&s, Method::DELETE, &format!("{all}?labelSelector="), Some(r#"{"dryRun":"All"}"#)).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{v}");
    assert_status(
        &v,
        400,
        "BadRequest",
        "json: cannot unmarshal string into Go struct field DeleteOptions.dryRun of type []string",
    );
    check("a deletecollection with a string dryRun").await;
    let (code, v) = call(&s, Method::DELETE, &format!("{all}?gracePeriodSeconds=1.5"), None).await;
    assert_status(&v, 400, "BadRequest", r#"strconv.ParseInt: parsing "1.5": invalid syntax"#);
    assert_eq!(code, StatusCode::BAD_REQUEST);
    check("?gracePeriodSeconds=1.5").await;
    let (code, v) = call(&s, Method::DELETE, &all, Some(r#"{"dryRun":["All"]}"#)).await;
    assert_eq!(code, StatusCode::OK, "{v}");
    assert_eq!(v["items"].as_array().map(Vec::len), Some(2), "{v}");
    check("a dry-run deletecollection").await;
}

on_both_stores!(
    undecodable_delete_bodies_are_refused_and_delete_nothing,
    invalid_delete_options_are_one_422,
    dry_run_deletes_with_correct_options_delete_nothing,
    delete_query_options_are_decoded_like_kube,
    deletecollection_decodes_list_then_delete_options,
);

/// The first line of a GET: a watch event or a whole list.
async fn first_line(s: &Server, url: &str) -> (StatusCode, Value) {
    first_line_of(s.client.get(url).send().await.expect("request")).await
}

/// The code and the first line of an answer (a watch: its first event is
/// enough), as JSON or else as a JSON string.
async fn first_line_of(mut resp: reqwest::Response) -> (StatusCode, Value) {
    let code = resp.status();
    let mut buf = Vec::new();
    while let Some(chunk) = resp.chunk().await.expect("body") {
        buf.extend_from_slice(&chunk);
        if let Some(end) = buf.iter().position(|b| *b == b'\n') {
            buf.truncate(end);
            break;
        }
    }
    (code, serde_json::from_slice(&buf).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&buf).into())))
}

#[tokio::test]
async fn query_booleans_and_integers_read_like_the_parameter_codec() {
    let s = Server::start(&[]).await;
    create(&s, "default", &llama("dolly", 1.0, 1.0)).await;
    let all = s.llamas("default", "");
    for q in ["watch=true", "watch=TRUE", "watch=T", "watch=yes", "watch=", "watch=1&watch=0"] {
        let (code, v) = first_line(&s, &format!("{all}?{q}&timeoutSeconds=2")).await;
        assert_eq!(code, StatusCode::OK, "{q}: {v}");
        assert_eq!(v["type"], "ADDED", "{q} is a watch: {v}");
    }
    for q in ["watch=0", "watch=FALSE", "watch=False", "watch=false", "watch=0&watch=1"] {
        let (code, v) = call(&s, Method::GET, &format!("{all}?{q}"), None).await;
        assert_eq!(code, StatusCode::OK, "{q}: {v}");
        assert_eq!(v["kind"], "LlamaList", "{q} is a list: {v}");
    }
    // A GET of one object is a get whatever `watch` says.
    let (code, v) = call(&s, Method::GET, &s.llamas("default", "dolly?watch=true"), None).await;
    assert_eq!((code, &v["kind"]), (StatusCode::OK, &json!("Llama")), "{v}");
    // sendInitialEvents=yes is true, so a list refuses it.
    let (_, v) = call(&s, Method::GET, &format!("{all}?sendInitialEvents=yes"), None).await;
    assert_status(
        &v,
        422,
        "Invalid",
        r#"ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"#,
    );
    for (q, message) in [
        ("limit=x", r#"strconv.ParseInt: parsing "x": invalid syntax"#),
        ("limit=", r#"strconv.ParseInt: parsing "": invalid syntax"#),
        ("limit=1.5", r#"strconv.ParseInt: parsing "1.5": invalid syntax"#),
        ("limit=99999999999999999999", r#"strconv.ParseInt: parsing "99999999999999999999": value out of range"#),
        ("limit=x&limit=1", r#"strconv.ParseInt: parsing "x": invalid syntax"#),
        ("watch=1&timeoutSeconds=x", r#"strconv.ParseInt: parsing "x": invalid syntax"#),
    ] {
        let (code, v) = call(&s, Method::GET, &format!("{all}?{q}"), None).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{q}: {v}");
        assert_status(&v, 400, "BadRequest", message);
    }
    // The first value wins; a non-positive limit is no limit.
    for q in ["limit=1&limit=x", "limit=-1"] {
        let (code, v) = call(&s, Method::GET, &format!("{all}?{q}"), None).await;
        assert_eq!((code, &v["kind"]), (StatusCode::OK, &json!("LlamaList")), "{q}: {v}");
    }
    // Create/update/patch options: one 422 for every bad one.
    let (code, v) = call(
        &s,
        Method::POST,
        &format!("{all}?dryRun=Bad&fieldValidation=strict"),
        Some(&llama("x", 1.0, 1.0).to_string()),
    )
    .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_status(
        &v,
        422,
        "Invalid",
        r#"CreateOptions.meta.k8s.io "" is invalid: [dryRun: Unsupported value: ["Bad"]: supported values: "All", fieldValidation: Unsupported value: "strict": supported values: "", "Ignore", "Strict", "Warn"]"#,
    );
}

// ---- compared live with kube-apiserver serving the CRD, through the aggregator ---------------

/// DELETE bodies kube refuses while decoding (400 from 1.35, 500 in 1.34).
const UNDECODABLE_LIVE: &[&str] = &[
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
    let (code, v) = first_line_of(req.send().await.expect("request")).await;
    (code.as_u16(), v)
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

async fn create_on(client: &reqwest::Client, side: &Side, api_version: &str, name: &str) {
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
    create_on(&client, &ours, "farm.example.com/v1alpha", "dolly").await;
    create_on(&client, &crd, "crd.farm.example.com/v1alpha", "dolly").await;
    let one = |side: &Side| format!("{}/dolly", side.collection);

    for body in UNDECODABLE_LIVE {
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
