//! Llama reads over HTTPS: list with selectors, paging and resourceVersion
//! rules; watch with resume, 410, bookmarks, timeouts and initial events;
//! Table and PartialObjectMetadata representations; gzip for large answers.

use std::time::Duration;

use crate::common;
use crate::common::{create, kubectl, llama, rv, Backend, Server};
use futures::StreamExt;
use serde_json::{json, Value};

async fn labelled(s: &Server, ns: &str, name: &str, labels: Value, weight: f64) -> Value {
    let mut body = llama(name, weight, 1.0);
    body["metadata"]["labels"] = labels;
    create(s, ns, &body).await
}

async fn get_json(s: &Server, url: &str) -> (u16, Value) {
    let r = s.client.get(url).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

fn names(list: &Value) -> Vec<String> {
    list["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_string()).collect()
}

async fn list_selectors_and_namespaces(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    labelled(&s, "default", "a", json!({"herd": "north", "tier": "1"}), 10.0).await;
    labelled(&s, "default", "b", json!({"herd": "south"}), 20.0).await;
    labelled(&s, "default", "c", json!({"tier": "2"}), 31.4).await;
    labelled(&s, "other", "d", json!({"herd": "north"}), 10.0).await;
    let list = |q: &str| {
        let url = format!("{}?{q}", s.llamas("default", ""));
        let s = &s;
        async move { get_json(s, &url).await }
    };
    let (code, v) = list("").await;
    assert_eq!(code, 200);
    assert_eq!(v["kind"], "LlamaList");
    assert_eq!(v["apiVersion"], "farm.example.com/v1alpha");
    assert!(v["metadata"]["resourceVersion"].is_string());
    assert_eq!(names(&v), ["a", "b", "c"]);
    for (q, want) in [
        ("labelSelector=herd%3Dnorth", vec!["a"]),
        ("labelSelector=herd%3D%3Dnorth", vec!["a"]),
        ("labelSelector=herd!%3Dnorth", vec!["b", "c"]),
        ("labelSelector=herd+in+(north,south)", vec!["a", "b"]),
        ("labelSelector=herd+notin+(north)", vec!["b", "c"]),
        ("labelSelector=tier", vec!["a", "c"]),
        ("labelSelector=!herd", vec!["c"]),
        ("labelSelector=herd,tier%3D1", vec!["a"]),
        ("fieldSelector=metadata.name%3Db", vec!["b"]),
        ("fieldSelector=metadata.name!%3Db", vec!["a", "c"]),
        ("fieldSelector=metadata.namespace%3Ddefault", vec!["a", "b", "c"]),
        ("fieldSelector=spec.weight%3D31.4", vec!["c"]),
    ] {
        let (code, v) = list(q).await;
        assert_eq!(code, 200, "{q}: {v}");
        assert_eq!(names(&v), want, "{q}");
    }
    let (code, v) = list("fieldSelector=spec.colour%3Dbrown").await;
    assert_eq!(code, 400);
    assert_eq!(v["message"], "field label not supported: spec.colour");
    let (code, v) = list("labelSelector=herd+in+north").await;
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["reason"], "BadRequest");
    let (code, v) = get_json(&s, &s.url("/apis/farm.example.com/v1alpha/llamas?labelSelector=herd%3Dnorth")).await;
    assert_eq!(code, 200);
    assert_eq!(names(&v), ["a", "d"]);
}

async fn paging_reads_one_snapshot_and_expired_tokens_get_410(backend: Backend) {
    let s = Server::start_on(backend, &["--watch-history", "5"]).await;
    for i in 0..5 {
        create(&s, "default", &llama(&format!("l{i}"), 1.0, 1.0)).await;
    }
    let base = s.llamas("default", "");
    let (_, p1) = get_json(&s, &format!("{base}?limit=2")).await;
    assert_eq!(names(&p1), ["l0", "l1"]);
    assert_eq!(p1["metadata"]["remainingItemCount"], 3);
    let token = p1["metadata"]["continue"].as_str().unwrap().to_string();
    // A write between pages does not show in the same list.
    create(&s, "default", &llama("l1a", 1.0, 1.0)).await;
    let (code, p2) = get_json(&s, &format!("{base}?limit=2&continue={token}")).await;
    assert_eq!(code, 200, "{p2}");
    assert_eq!(names(&p2), ["l2", "l3"]);
    assert_eq!(p2["metadata"]["resourceVersion"], p1["metadata"]["resourceVersion"]);
    let token2 = p2["metadata"]["continue"].as_str().unwrap().to_string();
    let (_, p3) = get_json(&s, &format!("{base}?limit=2&continue={token2}")).await;
    assert_eq!(names(&p3), ["l4"]);
    // The last page: an empty continue, as kube-apiserver writes a custom resource's list.
    assert_eq!(p3["metadata"]["continue"], "");
    // Push the history past the snapshot: the token expires.
    for i in 0..6 {
        create(&s, "default", &llama(&format!("m{i}"), 1.0, 1.0)).await;
    }
    let (code, e) = get_json(&s, &format!("{base}?limit=2&continue={token2}")).await;
    assert_eq!(code, 410, "{e}");
    assert_eq!(e["reason"], "Expired");
    assert!(e["message"].as_str().unwrap().starts_with("The provided continue parameter is too old"));
    let (code, e) = get_json(&s, &format!("{base}?continue=garbage")).await;
    assert_eq!(code, 400, "{e}");
}

async fn resource_version_rules_for_list(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let a = create(&s, "default", &llama("a", 1.0, 1.0)).await;
    let rv_a = rv(&a);
    create(&s, "default", &llama("b", 1.0, 1.0)).await;
    let base = s.llamas("default", "");
    // Exact: the state at that revision.
    let (code, v) = get_json(&s, &format!("{base}?resourceVersion={rv_a}&resourceVersionMatch=Exact")).await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(names(&v), ["a"]);
    assert_eq!(rv(&v), rv_a);
    // NotOlderThan and "0": at least that fresh.
    let (_, v) = get_json(&s, &format!("{base}?resourceVersion={rv_a}&resourceVersionMatch=NotOlderThan")).await;
    assert_eq!(names(&v), ["a", "b"]);
    let (_, v) = get_json(&s, &format!("{base}?resourceVersion=0")).await;
    assert_eq!(names(&v), ["a", "b"]);
    // Invalid combinations: 422 on ListOptions; a future revision: 504 Timeout.
    let (code, v) = get_json(&s, &format!("{base}?resourceVersionMatch=Exact")).await;
    assert_eq!(code, 422, "{v}");
    assert_eq!(v["details"]["kind"], "ListOptions");
    let (code, v) = get_json(&s, &format!("{base}?resourceVersion=999999&resourceVersionMatch=Exact")).await;
    assert_eq!(code, 504, "{v}");
    assert_eq!(v["reason"], "Timeout");
    assert!(v["message"].as_str().unwrap().starts_with("Too large resource version"), "{v}");
}

async fn tables_for_kubectl(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    create(&s, "default", &llama("dolly", 31.4, 1.7)).await;
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let r = s.client.get(s.llamas("default", "")).header("Accept", accept).send().await.unwrap();
    assert_eq!(r.status(), 200);
    // kube-apiserver labels it plain JSON; the body says it is a Table.
    assert_eq!(r.headers()["content-type"], "application/json");
    let t: Value = r.json().await.unwrap();
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    let cols: Vec<&str> =
        t["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(cols, ["Name", "Weight", "Height", "Age"]);
    let cells = &t["rows"][0]["cells"];
    assert_eq!(cells[0], "dolly");
    assert_eq!(cells[1], json!(31.4));
    assert_eq!(cells[2], json!(1.7));
    assert!(cells[3].as_str().unwrap().ends_with('s'), "{cells}");
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "dolly");
    let v1beta1 = "application/json;as=Table;v=v1beta1;g=meta.k8s.io";
    let t: Value = s
        .client
        .get(format!("{}?includeObject=Object", s.llamas("default", "")))
        .header("Accept", v1beta1)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(t["rows"][0]["object"]["spec"]["weight"], json!(31.4));
    let t: Value = s
        .client
        .get(format!("{}?includeObject=None", s.llamas("default", "dolly")))
        .header("Accept", accept)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t["rows"].as_array().unwrap().len(), 1);
    // An empty RawExtension, as kube-apiserver writes it (compare::crd::tables_show_the_crds_printer_columns).
    assert_eq!(t["rows"][0]["object"], Value::Null);
    assert!(t["rows"][0].as_object().unwrap().contains_key("object"));
}

async fn partial_object_metadata_views(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    labelled(&s, "default", "meta", json!({"a": "b"}), 1.0).await;
    let one = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io";
    let list = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
    let v: Value =
        s.client.get(s.llamas("default", "meta")).header("Accept", one).send().await.unwrap().json().await.unwrap();
    assert_eq!(v["kind"], "PartialObjectMetadata");
    assert_eq!(v["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(v["metadata"]["labels"]["a"], "b");
    assert!(v.get("spec").is_none());
    let v: Value =
        s.client.get(s.llamas("default", "")).header("Accept", list).send().await.unwrap().json().await.unwrap();
    assert_eq!(v["kind"], "PartialObjectMetadataList");
    assert_eq!(v["items"][0]["kind"], "PartialObjectMetadata");
    assert_eq!(v["items"][0]["metadata"]["name"], "meta");
    let mut w = Watch::open(&s, &format!("{}?watch=true&resourceVersion=0", s.llamas("default", "")), Some(one)).await;
    let ev = w.next().await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "PartialObjectMetadata");
}

/// A watch stream read line by line.
struct Watch {
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: Vec<u8>,
}

impl Watch {
    async fn open(s: &Server, url: &str, accept: Option<&str>) -> Watch {
        let mut req = s.client.get(url).timeout(Duration::from_secs(60));
        if let Some(a) = accept {
            req = req.header("Accept", a);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 200, "watch {url}");
        Watch { body: Box::pin(r.bytes_stream()), buf: Vec::new() }
    }

    /// The next event, or None when the server ends the stream.
    async fn try_next(&mut self) -> Option<Value> {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return Some(serde_json::from_slice(&line).expect("event JSON"));
            }
            match tokio::time::timeout(Duration::from_secs(10), self.body.next()).await.expect("watch event in time") {
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                Some(Err(_)) | None => return None,
            }
        }
    }

    async fn next(&mut self) -> Value {
        self.try_next().await.expect("stream still open")
    }

    /// The next event that is not a bookmark.
    async fn next_change(&mut self) -> Value {
        loop {
            let ev = self.next().await;
            if ev["type"] != "BOOKMARK" {
                return ev;
            }
        }
    }
}

async fn watch_streams_changes_and_resumes(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let a = create(&s, "default", &llama("a", 1.0, 1.0)).await;
    let base = s.llamas("default", "");
    // No resourceVersion: the current state as ADDED, then changes.
    let mut w = Watch::open(&s, &format!("{base}?watch=true"), None).await;
    let ev = w.next().await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["metadata"]["name"], "a");
    let r = s
        .client
        .patch(s.llamas("default", "a"))
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"spec":{"weight":2}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let ev = w.next().await;
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["spec"]["weight"], json!(2));
    let modified_rv = rv(&ev["object"]);
    s.client.delete(s.llamas("default", "a")).send().await.unwrap();
    let ev = w.next().await;
    assert_eq!(ev["type"], "DELETED");
    assert!(rv(&ev["object"]) > modified_rv);
    // Resume from a revision: only later events.
    let mut w2 = Watch::open(&s, &format!("{base}?watch=true&resourceVersion={}", rv(&a)), None).await;
    assert_eq!(w2.next().await["type"], "MODIFIED");
    assert_eq!(w2.next().await["type"], "DELETED");
    // Other namespaces are not seen; the all-namespaces watch sees both.
    let mut all =
        Watch::open(&s, &s.url("/apis/farm.example.com/v1alpha/llamas?watch=true&resourceVersion=0"), None).await;
    create(&s, "other", &llama("x", 1.0, 1.0)).await;
    create(&s, "default", &llama("y", 1.0, 1.0)).await;
    let ev = w.next().await;
    assert_eq!(ev["object"]["metadata"]["name"], "y");
    assert_eq!(all.next().await["object"]["metadata"]["name"], "x");
    assert_eq!(all.next().await["object"]["metadata"]["name"], "y");
}

async fn watch_selector_transitions(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    labelled(&s, "default", "a", json!({"herd": "north"}), 1.0).await;
    let mut w =
        Watch::open(&s, &format!("{}?watch=true&labelSelector=herd%3Dnorth", s.llamas("default", "")), None).await;
    assert_eq!(w.next().await["type"], "ADDED");
    let set = |herd: &str| format!(r#"{{"metadata":{{"labels":{{"herd":"{herd}"}}}}}}"#);
    let patch = |body: String| {
        s.client
            .patch(s.llamas("default", "a"))
            .header("Content-Type", "application/merge-patch+json")
            .body(body)
            .send()
    };
    assert_eq!(patch(set("south")).await.unwrap().status(), 200);
    let ev = w.next().await;
    assert_eq!(ev["type"], "DELETED", "leaving the selection: {ev}");
    assert_eq!(patch(set("north")).await.unwrap().status(), 200);
    assert_eq!(w.next().await["type"], "ADDED");
    // A watch on one object by name: the collection with a metadata.name
    // field selector (what client-go and kube-rs send), or the legacy
    // /watch/ path. A GET of the object itself with ?watch=true is a plain
    // get in kube-apiserver (requestinfo.go only turns collection GETs into
    // watches), and so it is here.
    create(&s, "default", &llama("b", 1.0, 1.0)).await;
    let by_field = format!("{}?watch=true&fieldSelector=metadata.name%3Db", s.llamas("default", ""));
    let mut one = Watch::open(&s, &by_field, None).await;
    assert_eq!(one.next().await["object"]["metadata"]["name"], "b");
    let mut one =
        Watch::open(&s, &s.url("/apis/farm.example.com/v1alpha/watch/namespaces/default/llamas/b"), None).await;
    assert_eq!(one.next().await["object"]["metadata"]["name"], "b");
    let (code, v) = get_json(&s, &format!("{}?watch=true", s.llamas("default", "b"))).await;
    assert_eq!((code, &v["kind"]), (200, &json!("Llama")), "{v}");
}

async fn watch_from_compacted_history_sends_410_in_stream(backend: Backend) {
    let s = Server::start_on(backend, &["--watch-history", "3"]).await;
    let first = create(&s, "default", &llama("a", 1.0, 1.0)).await;
    for i in 0..5 {
        create(&s, "default", &llama(&format!("b{i}"), 1.0, 1.0)).await;
    }
    let url = format!("{}?watch=true&resourceVersion={}", s.llamas("default", ""), rv(&first));
    let mut w = Watch::open(&s, &url, None).await;
    let ev = w.next().await;
    assert_eq!(ev["type"], "ERROR", "{ev}");
    assert_eq!(ev["object"]["kind"], "Status");
    assert_eq!(ev["object"]["code"], 410);
    assert_eq!(ev["object"]["reason"], "Expired");
    assert!(w.try_next().await.is_none(), "the stream ends after the error");
}

async fn watch_bookmarks_timeout_and_initial_events(backend: Backend) {
    let s = Server::start_on(backend, &["--bookmark-interval", "0.2"]).await;
    let a = create(&s, "default", &llama("a", 1.0, 1.0)).await;
    let base = s.llamas("default", "");
    // Bookmarks carry a resourceVersion at least as new as what was delivered.
    let mut w =
        Watch::open(&s, &format!("{base}?watch=true&allowWatchBookmarks=true&resourceVersion={}", rv(&a)), None).await;
    create(&s, "other", &llama("z", 1.0, 1.0)).await;
    let bm = w.next().await;
    assert_eq!(bm["type"], "BOOKMARK", "{bm}");
    assert_eq!(bm["object"]["kind"], "Llama");
    assert!(rv(&bm["object"]) > rv(&a), "bookmark moves past other namespaces' writes: {bm}");
    // timeoutSeconds ends the stream.
    let started = std::time::Instant::now();
    let mut t = Watch::open(&s, &format!("{base}?watch=true&timeoutSeconds=1&resourceVersion={}", rv(&a)), None).await;
    assert!(t.try_next().await.is_none());
    assert!(started.elapsed() < Duration::from_secs(5));
    // sendInitialEvents: ADDED for the state, then the initial-events-end bookmark.
    let url =
        format!("{base}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
    let mut i = Watch::open(&s, &url, None).await;
    let ev = i.next().await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["metadata"]["name"], "a");
    let end = i.next().await;
    assert_eq!(end["type"], "BOOKMARK", "{end}");
    assert_eq!(end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    create(&s, "default", &llama("b", 1.0, 1.0)).await;
    assert_eq!(i.next_change().await["object"]["metadata"]["name"], "b");
    // sendInitialEvents without NotOlderThan is invalid.
    let (code, v) = get_json(&s, &format!("{base}?watch=true&sendInitialEvents=true")).await;
    assert_eq!(code, 422, "{v}");
}

async fn table_watch_for_kubectl_get_w(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    create(&s, "default", &llama("a", 4.5, 1.0)).await;
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let mut w =
        Watch::open(&s, &format!("{}?watch=true&resourceVersion=0", s.llamas("default", "")), Some(accept)).await;
    let ev = w.next().await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "Table");
    assert_eq!(ev["object"]["rows"][0]["cells"][1], json!(4.5));
}

/// As kube-apiserver: an answer over 128 KiB is gzipped when the client
/// accepts gzip, with `Vary: Accept-Encoding`; a small one, a client that does
/// not accept gzip, and a watch get plain JSON. kubectl (client-go) asks for
/// gzip and reads it.
#[tokio::test]
async fn large_answers_are_gzipped_when_the_client_accepts_it() {
    use std::io::Read;
    let s = Server::start_on(Backend::Memory, &[]).await;
    // ~1 KB each: 200 make a list of ~200 KB.
    let labels: serde_json::Map<String, Value> = (0..12).map(|i| (format!("l{i}"), json!("v".repeat(63)))).collect();
    futures::stream::iter(0..200)
        .for_each_concurrent(16, |i| {
            let mut body = llama(&format!("big-{i:03}"), 1.0, 1.0);
            body["metadata"]["labels"] = Value::Object(labels.clone());
            let s = &s;
            async move {
                create(s, "default", &body).await;
            }
        })
        .await;
    let url = s.llamas("default", "");
    let get = |accept_encoding: Option<&'static str>, url: String| {
        let mut req = s.client.get(url);
        if let Some(e) = accept_encoding {
            req = req.header("Accept-Encoding", e);
        }
        async move {
            let r = req.send().await.unwrap();
            assert_eq!(r.status(), 200);
            let encoding = r.headers().get("content-encoding").map(|v| v.to_str().unwrap().to_string());
            let vary =
                r.headers().get_all("vary").iter().map(|v| v.to_str().unwrap().to_lowercase()).collect::<Vec<_>>();
            (encoding, vary, r.bytes().await.unwrap())
        }
    };

    let (encoding, vary, plain) = get(None, url.clone()).await;
    assert_eq!(encoding, None, "no Accept-Encoding, no compression");
    assert!(vary.is_empty(), "Vary only on compressed answers, as kube: {vary:?}");
    assert!(plain.len() as u64 > 128 * 1024, "the list is over the threshold: {} bytes", plain.len());

    let (encoding, vary, gzipped) = get(Some("gzip, deflate"), url.clone()).await;
    assert_eq!(encoding.as_deref(), Some("gzip"));
    assert!(vary.iter().any(|v| v.contains("accept-encoding")), "{vary:?}");
    assert!(gzipped.len() * 4 < plain.len(), "{} bytes gzipped from {}", gzipped.len(), plain.len());
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(&gzipped[..]).read_to_end(&mut unzipped).unwrap();
    let list: Value = serde_json::from_slice(&unzipped).unwrap();
    assert_eq!(list, serde_json::from_slice::<Value>(&plain).unwrap(), "the same list, compressed");
    assert_eq!(list["items"].as_array().unwrap().len(), 200);

    // Only gzip is offered; brotli alone gets plain JSON.
    let (encoding, vary, _) = get(Some("br"), url.clone()).await;
    assert_eq!((encoding, vary), (None, vec![]));
    // A small answer is sent as it is, without Vary.
    let (encoding, vary, _) = get(Some("gzip"), s.llamas("default", "big-000")).await;
    assert_eq!((encoding, vary), (None, vec![]));
    // A watch is never compressed, even with initial events over the threshold.
    let r = s
        .client
        .get(format!("{url}?watch=true&resourceVersion=0&timeoutSeconds=1"))
        .header("Accept-Encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("content-encoding").is_none(), "{:?}", r.headers());
    let events = r.bytes().await.unwrap();
    assert_eq!(events.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count(), 200);

    // client-go's transport asks for gzip and decompresses below its logging,
    // removing Content-Encoding and Content-Length as it does: kubectl's log
    // shows the list answer without a length (compressed, so streamed) and
    // with Vary, and kubectl reads the whole list.
    let (ok, out, err) = kubectl(&s.kubeconfig(), &["get", "llamas", "-o", "json", "--chunk-size=0", "-v=8"]);
    assert!(ok, "{err}");
    let headers = common::kubectl_logged_headers(&err, "/llamas");
    assert!(headers.contains("Vary: accept-encoding"), "{headers}");
    assert!(!headers.contains("Content-Length"), "a compressed answer has no length: {headers}");
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 200);
}

on_both_stores!(
    list_selectors_and_namespaces,
    paging_reads_one_snapshot_and_expired_tokens_get_410,
    resource_version_rules_for_list,
    tables_for_kubectl,
    partial_object_metadata_views,
    watch_streams_changes_and_resumes,
    watch_selector_transitions,
    watch_from_compacted_history_sends_410_in_stream,
    watch_bookmarks_timeout_and_initial_events,
    table_watch_for_kubectl_get_w,
);
