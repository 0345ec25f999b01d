//! YAML request and response bodies (`Content-Type: application/yaml` for
//! create, update and /status, `Accept: application/yaml` for every answer,
//! errors included), first over HTTPS straight to farm-apiserver, then
//! compared live with kube-apiserver: the same YAML requests go to
//! farm-apiserver's Llamas through the aggregator and to the Llama CRD
//! (`llamas.crd.farm.example.com`) served by kube-apiserver itself, and the
//! answers must agree: status code, Content-Type, Status reason and message
//! (group names aside), warnings.
//!
//! Bodies of the live comparison start with `kind: Llama` so the first 30
//! bytes kube quotes in an "unrecognized object" message are the same on both
//! sides.
//!
//! Pinned differences: go-yaml allows 10,000 levels of nesting, we 127; and
//! go-yaml reads YAML 1.1 (`yes` is a boolean there, a string here).

use crate::common;
use crate::common::cluster::{self, namespace};
use crate::common::compare::{admin_client, CRD_GROUP, OUR_GROUP};
use crate::common::Server;
use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE};
use reqwest::Method;
use serde_json::{json, Value};

// ---- straight to farm-apiserver --------------------------------------------------------------

/// (code, headers, body text).
async fn send(
    s: &Server,
    method: Method,
    url: &str,
    content_type: Option<&str>,
    accept: Option<&str>,
    body: &str,
) -> (u16, HeaderMap, String) {
    let mut req = s.client.request(method, url);
    if let Some(ct) = content_type {
        req = req.header(CONTENT_TYPE, ct);
    }
    if let Some(a) = accept {
        req = req.header(ACCEPT, a);
    }
    if !body.is_empty() {
        req = req.body(body.to_string());
    }
    let resp = req.send().await.expect("request");
    let code = resp.status().as_u16();
    let headers = resp.headers().clone();
    (code, headers, resp.text().await.expect("body"))
}

fn yaml(text: &str) -> Value {
    serde_norway::from_str(text).unwrap_or_else(|e| panic!("not YAML ({e}): {text}"))
}

fn content_type(h: &HeaderMap) -> &str {
    h.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("")
}

fn warnings(h: &HeaderMap) -> Vec<String> {
    h.get_all("warning").iter().map(|v| v.to_str().unwrap_or("").to_string()).collect()
}

fn dolly(name: &str, weight: &str) -> String {
    format!("apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata:\n  name: {name}\n  labels: {{herd: north}}\nspec:\n  weight: {weight}\n  height: 1.7\n")
}

#[tokio::test]
async fn yaml_create_update_status_and_yaml_answers() {
    let s = Server::start(&[]).await;
    let coll = s.llamas("default", "");
    // Create from YAML, answered in YAML.
    let (code, h, text) =
        send(&s, Method::POST, &coll, Some("application/yaml"), Some("application/yaml"), &dolly("dolly", "31.4"))
            .await;
    assert_eq!(code, 201, "{text}");
    assert_eq!(content_type(&h), "application/yaml");
    let created = yaml(&text);
    assert_eq!(created["spec"], json!({"weight": 31.4, "height": 1.7}));
    assert_eq!(created["metadata"]["labels"]["herd"], "north");
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    // resourceVersion is quoted: it must read back as a string.
    assert!(text.contains(&format!("resourceVersion: \"{rv}\"")), "{text}");

    // The same object reads back through JSON.
    let (code, h, text) = send(&s, Method::GET, &s.llamas("default", "dolly"), None, None, "").await;
    assert_eq!((code, content_type(&h)), (200, "application/json"));
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["spec"]["weight"], 31.4);

    // Update (PUT) from YAML; charset parameter allowed; a JSON answer when asked for.
    let put = format!(
        "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata:\n  name: dolly\n  resourceVersion: \"{rv}\"\nspec: {{weight: 40, height: 1.7}}\n"
    );
    let (code, h, text) = send(
        &s,
        Method::PUT,
        &s.llamas("default", "dolly"),
        Some("application/yaml; charset=utf-8"),
        Some("application/json;q=0.9, application/yaml;q=0.5"),
        &put,
    )
    .await;
    assert_eq!((code, content_type(&h)), (200, "application/json"), "{text}");
    let updated: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(updated["spec"]["weight"], 40);
    assert_eq!(updated["metadata"]["generation"], 2);

    // /status from YAML changes status only.
    let rv = updated["metadata"]["resourceVersion"].as_str().unwrap();
    let status = format!(
        "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata: {{name: dolly, resourceVersion: \"{rv}\"}}\nspec: {{weight: 99, height: 9}}\nstatus:\n  observedGeneration: 2\n"
    );
    let (code, h, text) = send(
        &s,
        Method::PUT,
        &s.llamas("default", "dolly/status"),
        Some("application/yaml"),
        Some("application/yaml"),
        &status,
    )
    .await;
    assert_eq!((code, content_type(&h)), (200, "application/yaml"), "{text}");
    let v = yaml(&text);
    assert_eq!(v["status"]["observedGeneration"], 2);
    assert_eq!(v["spec"]["weight"], 40);

    // Patch results, lists, Tables and deletes in YAML.
    let (code, h, text) = send(
        &s,
        Method::PATCH,
        &s.llamas("default", "dolly"),
        Some("application/merge-patch+json"),
        Some("application/yaml"),
        r#"{"metadata":{"labels":{"answer":"yes","day":"2024-01-01"}}}"#,
    )
    .await;
    assert_eq!((code, content_type(&h)), (200, "application/yaml"), "{text}");
    // Strings a YAML 1.1 reader (kubectl) would take for a bool or a date are quoted.
    assert!(text.contains("answer: \"yes\"") && text.contains("day: \"2024-01-01\""), "{text}");
    assert_eq!(yaml(&text)["metadata"]["labels"]["answer"], "yes");
    let (code, h, text) = send(&s, Method::GET, &coll, None, Some("application/yaml"), "").await;
    assert_eq!((code, content_type(&h)), (200, "application/yaml"));
    let list = yaml(&text);
    assert_eq!(list["kind"], "LlamaList");
    assert_eq!(list["items"][0]["metadata"]["name"], "dolly");
    let (code, h, text) =
        send(&s, Method::GET, &coll, None, Some("application/yaml;as=Table;v=v1;g=meta.k8s.io"), "").await;
    assert_eq!((code, content_type(&h)), (200, "application/yaml"));
    let table = yaml(&text);
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["rows"][0]["cells"][0], "dolly");
    let (code, h, text) =
        send(&s, Method::DELETE, &s.llamas("default", "dolly"), None, Some("application/yaml"), "").await;
    assert_eq!((code, content_type(&h)), (200, "application/yaml"), "{text}");
    assert_eq!(yaml(&text)["status"], "Success");
    let (code, h, text) = send(&s, Method::DELETE, &coll, None, Some("application/yaml"), "").await;
    assert_eq!((code, content_type(&h)), (200, "application/yaml"), "{text}");
    assert_eq!(yaml(&text)["kind"], "LlamaList");
}

#[tokio::test]
async fn yaml_errors_and_refusals() {
    let s = Server::start(&["--max-body-bytes", "4096"]).await;
    let coll = s.llamas("default", "");
    let post = |body: String, query: &'static str, accept: Option<&'static str>| {
        let url = format!("{coll}{query}");
        let s = &s;
        async move { send(s, Method::POST, &url, Some("application/yaml"), accept, &body).await }
    };
    // Every Status error in YAML when asked for: 404, 422, 406, 405, 400, 413, 415.
    let (code, h, text) = send(&s, Method::GET, &s.llamas("default", "nope"), None, Some("application/yaml"), "").await;
    assert_eq!((code, content_type(&h)), (404, "application/yaml"));
    let v = yaml(&text);
    assert_eq!(v["message"], "llamas.farm.example.com \"nope\" not found");
    assert_eq!(v["details"], json!({"group": "farm.example.com", "kind": "llamas", "name": "nope"}));
    let (code, h, text) = post(dolly("thin", "-1"), "", Some("application/yaml")).await;
    assert_eq!((code, content_type(&h)), (422, "application/yaml"));
    assert_eq!(yaml(&text)["details"]["causes"][0]["field"], "spec.weight");
    let (code, h, text) = send(&s, Method::GET, &format!("{coll}?watch=1"), None, Some("application/yaml"), "").await;
    assert_eq!((code, content_type(&h)), (406, "application/yaml"), "{text}");
    assert_eq!(
        yaml(&text)["message"],
        "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
    );
    // PUT on a collection: kube's 400 "name must be provided".
    let (code, h, _) = send(&s, Method::PUT, &coll, Some("application/yaml"), Some("application/yaml"), "a: 1").await;
    assert_eq!((code, content_type(&h)), (400, "application/yaml"));
    let (code, h, text) =
        send(&s, Method::POST, &coll, Some("text/plain"), Some("application/json;q=0.1,application/yaml"), "x").await;
    assert_eq!((code, content_type(&h)), (415, "application/yaml"));
    assert_eq!(
        yaml(&text)["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    );
    // A YAML body beyond --max-body-bytes: 413 like a JSON one.
    let big = format!("{}note: {}\n", dolly("big", "1"), "x".repeat(5000));
    let (code, _, text) = post(big, "", None).await;
    assert_eq!(code, 413, "{text}");

    // Syntax errors in go-yaml's words (as kube-apiserver reports them).
    let (code, _, text) = post("kind: Llama\nmetadata:\n  name: b\n spec: [\n".into(), "", None).await;
    assert_eq!(code, 400);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v["message"],
        "the object provided is unrecognized (must be of type Llama): yaml: line 3: did not find expected key (6b696e643a204c6c616d610a6d657461646174613a0a20206e616d653a20 ...)"
    );
    // Duplicate keys: warnings by default, the strict decoding error with Strict.
    let dup = "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata:\n  name: one\n  name: two\nspec: {weight: 1, height: 2}\nfoo: 1\n";
    let (code, h, text) = post(dup.into(), "", None).await;
    assert_eq!(code, 201, "{text}");
    assert_eq!(
        warnings(&h),
        [
            crate::common::V1ALPHA_DEPRECATED,
            r#"299 - "line 5: key \"name\" already set in map""#,
            r#"299 - "unknown field \"foo\"""#
        ]
    );
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["metadata"]["name"], "two");
    let (code, _, text) = post(dup.replace("two", "three"), "?fieldValidation=Strict", None).await;
    assert_eq!(code, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["message"],
        "Llama in version \"v1alpha\" cannot be handled as a Llama: strict decoding error: yaml: unmarshal errors:\n  line 5: key \"name\" already set in map, unknown field \"foo\""
    );
    // Empty and null documents.
    let (code, _, text) = post(String::new(), "", None).await;
    assert_eq!(code, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["message"],
        "the object provided is unrecognized (must be of type Llama): Object 'Kind' is missing in '' (<empty>)"
    );
}

#[tokio::test]
async fn yaml_bombs_and_deep_nesting_are_refused_and_the_server_stays_up() {
    let s = Server::start(&[]).await;
    let coll = s.llamas("default", "");
    // A billion laughs: nine aliases of nine aliases, nine levels deep.
    let mut bomb = String::from("apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata: {name: bomb}\na: &a [x, x, x, x, x, x, x, x, x]\n");
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for pair in names.windows(2) {
        let (prev, name) = (pair[0], pair[1]);
        let refs = vec![format!("*{prev}"); 9].join(", ");
        bomb.push_str(&format!("{name}: &{name} [{refs}]\n"));
    }
    bomb.push_str("spec: {weight: 1, height: 2}\n");
    let (code, _, text) = send(&s, Method::POST, &coll, Some("application/yaml"), None, &bomb).await;
    assert_eq!(code, 400, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(
        v["message"].as_str().unwrap().starts_with(
            "the object provided is unrecognized (must be of type Llama): yaml: document contains excessive aliasing ("
        ),
        "{v}"
    );
    // Deep nesting, flow and block.
    let flow = format!(
        "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata: {{name: deep}}\nspec: {{weight: 1, height: 2, x: {}{}}}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let block: String = (0..400).map(|i| format!("{}k{i}:\n", " ".repeat(i))).collect();
    // A quote inside a plain scalar, then 300,000 levels (libyaml's scanner
    // would take about a minute over them), and block sequences on one line.
    let quoted_in_plain = format!("{{k: a \"b, x: {}1", "{a: ".repeat(300_000));
    let dashes = format!("{}1", "- ".repeat(500_000));
    for body in [flow, block, quoted_in_plain, dashes] {
        let started = std::time::Instant::now();
        let (code, _, text) = send(&s, Method::POST, &coll, Some("application/yaml"), None, &body).await;
        assert_eq!(code, 400, "{text}");
        assert!(text.contains("exceeded max depth of 127"), "{text}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}: {text}", started.elapsed());
    }
    // %TAG directives, each of which libyaml checks against all before it:
    // 100,000 took 88 s.
    let directives: String = (0..100_000).map(|i| format!("%TAG !t{i}! t:{i}\n")).collect();
    let tagged = format!("{directives}---\n{}", dolly("tagged", "1"));
    let started = std::time::Instant::now();
    let (code, _, text) = send(&s, Method::POST, &coll, Some("application/yaml"), None, &tagged).await;
    assert_eq!(code, 400, "{text}");
    assert!(text.contains("yaml: line 65: more than 64 %TAG directives"), "{text}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
    // Still serving.
    let (code, _, text) = send(&s, Method::POST, &coll, Some("application/yaml"), None, &dolly("after", "1")).await;
    assert_eq!(code, 201, "{text}");
}

// ---- side by side with kube-apiserver serving the CRD, through the aggregator ----------------

/// What must agree: code, Content-Type, and for a Status its reason and
/// message; warnings. The group is replaced by GROUP everywhere.
#[derive(Debug, PartialEq)]
struct Answer {
    code: u16,
    content_type: String,
    reason: Value,
    message: String,
    warnings: Vec<String>,
    /// The body read as YAML or JSON (by its Content-Type), for further checks.
    body: Value,
}

/// Sends to one side (`API_GROUP` in the body is its group) and reads what must agree.
async fn ask(
    client: &reqwest::Client,
    method: Method,
    url: &str,
    ct: Option<&str>,
    accept: Option<&str>,
    body: &str,
    group: &str,
) -> Answer {
    let mut req = client.request(method, url);
    if let Some(ct) = ct {
        req = req.header(CONTENT_TYPE, ct);
    }
    if let Some(a) = accept {
        req = req.header(ACCEPT, a);
    }
    if !body.is_empty() {
        req = req.body(body.replace("API_GROUP", group));
    }
    let resp = req.send().await.expect("request");
    let code = resp.status().as_u16();
    let headers = resp.headers().clone();
    let content_type = content_type(&headers).to_string();
    let warnings =
        headers.get_all("warning").iter().map(|v| v.to_str().unwrap_or("").replace(group, "GROUP")).collect();
    let text = resp.text().await.expect("body");
    let body: Value = if content_type == "application/yaml" {
        yaml(&text)
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    let is_status = body["kind"] == "Status";
    let mut message =
        if is_status { body["message"].as_str().unwrap_or("").replace(group, "GROUP") } else { String::new() };
    if body["reason"] == "Invalid" {
        // kube-apiserver lists a CRD's schema errors in Go map order (it varies
        // between runs): compare the causes as a sorted set.
        let mut causes: Vec<String> = body["details"]["causes"]
            .as_array()
            .map(|cs| cs.iter().map(|c| format!("{}: {}", c["field"], c["message"])).collect())
            .unwrap_or_default();
        causes.sort();
        message = format!("Invalid: {causes:?}");
    }
    Answer {
        code,
        content_type,
        reason: if is_status { body["reason"].clone() } else { Value::Null },
        message,
        warnings,
        body,
    }
}

struct Sides {
    client: reqwest::Client,
    ours: String,
    crd: String,
}

impl Sides {
    async fn both(
        &self,
        method: Method,
        rest: &str,
        ct: Option<&str>,
        accept: Option<&str>,
        body: &str,
    ) -> (Answer, Answer) {
        let ours =
            ask(&self.client, method.clone(), &format!("{}{rest}", self.ours), ct, accept, body, OUR_GROUP).await;
        let crd = ask(&self.client, method, &format!("{}{rest}", self.crd), ct, accept, body, CRD_GROUP).await;
        (ours, crd)
    }

    /// Sends to both and requires the same code, Content-Type, reason, message and warnings.
    async fn agree(&self, method: Method, rest: &str, ct: Option<&str>, accept: Option<&str>, body: &str) -> Answer {
        let (ours, crd) = self.both(method.clone(), rest, ct, accept, body).await;
        let key =
            |a: &Answer| (a.code, a.content_type.clone(), a.reason.clone(), a.message.clone(), a.warnings.clone());
        assert_eq!(
            key(&ours),
            key(&crd),
            "{method} {rest} Accept={accept:?}\n{body}\nours: {:?}\nkube: {:?}",
            ours.body,
            crd.body
        );
        ours
    }
}

async fn sides() -> Sides {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let client = admin_client(cp);
    common::compare::crd_served(cp, &client).await;
    let ns = namespace(cp, "e2e-yaml");
    Sides {
        client,
        ours: format!("{}/apis/{OUR_GROUP}/v1alpha/namespaces/{ns}/llamas", cp.server),
        crd: format!("{}/apis/{CRD_GROUP}/v1alpha/namespaces/{ns}/llamas", cp.server),
    }
}

fn llama_yaml(name: &str, rest: &str) -> String {
    format!("kind: Llama\nmetadata:\n  name: {name}\napiVersion: API_GROUP/v1alpha\nspec: {{weight: 1.5, height: 2}}\n{rest}")
}

/// YAML create bodies both servers must answer the same way.
fn bodies() -> Vec<String> {
    let mut bomb = String::from(
        "kind: Llama\nmetadata: {name: bomb}\napiVersion: API_GROUP/v1alpha\na: &a [x, x, x, x, x, x, x, x, x]\n",
    );
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for pair in names.windows(2) {
        let refs = vec![format!("*{}", pair[0]); 9].join(", ");
        bomb.push_str(&format!("{}: &{} [{refs}]\n", pair[1], pair[1]));
    }
    vec![
        llama_yaml("plain", ""),
        // Duplicate keys and an unknown field: warnings.
        "kind: Llama\nmetadata:\n  name: dup-a\n  name: dup-b\napiVersion: API_GROUP/v1alpha\nspec: {weight: 1, height: 2}\nfoo: 1\n".into(),
        // Syntax errors.
        "kind: Llama\nmetadata:\n  name: b\n spec: [\n".into(),
        "kind: Llama\nmetadata:\n\tname: b\n".into(),
        "kind: Llama\nmetadata: {name: \"abc\n".into(),
        "kind: Llama\nmetadata: [a, b\n".into(),
        // Not an object, empty, null, a non-string kind.
        "- a\n- b\n".into(),
        "just a string\n".into(),
        String::new(),
        "null\n".into(),
        "kind: 3\nmetadata: {name: kind3}\napiVersion: API_GROUP/v1alpha\n".into(),
        // Later documents are ignored.
        format!("{}---\nfoo: bar\n", llama_yaml("multi", "")),
        // Aliases, numeric keys.
        "kind: Llama\nmetadata:\n  name: &n alias\n  labels: {a: *n, 1: x}\napiVersion: API_GROUP/v1alpha\nspec: {weight: 1, height: 2}\n".into(),
        // Validation and metadata type errors.
        "kind: Llama\nmetadata: {name: inv}\napiVersion: API_GROUP/v1alpha\nspec: {weight: -1, height: true}\n".into(),
        "kind: Llama\nmetadata: {name: lbl, labels: {a: 1}}\napiVersion: API_GROUP/v1alpha\nspec: {weight: 1, height: 2}\n".into(),
        // An alias bomb.
        bomb,
    ]
}

#[tokio::test]
async fn yaml_creates_answer_like_kube() {
    let s = sides().await;
    for body in bodies() {
        for accept in [None, Some("application/yaml")] {
            let answer = s.agree(Method::POST, "", Some("application/yaml"), accept, &body).await;
            if answer.code == 201 {
                // Created on both: remove for the next round.
                let name = answer.body["metadata"]["name"].as_str().unwrap().to_string();
                s.agree(Method::DELETE, &format!("/{name}"), None, None, "").await;
            }
        }
    }
    // Strict field validation: the duplicate key in go-yaml's words, then the unknown field.
    let dup = "kind: Llama\nmetadata:\n  name: strict-a\n  name: strict-b\napiVersion: API_GROUP/v1alpha\nspec: {weight: 1, height: 2}\nfoo: 1\n";
    let answer = s.agree(Method::POST, "?fieldValidation=Strict", Some("application/yaml"), None, dup).await;
    assert_eq!(answer.code, 400);
}

#[tokio::test]
async fn yaml_updates_reads_and_errors_answer_like_kube() {
    let s = sides().await;
    let created =
        s.agree(Method::POST, "", Some("application/yaml"), Some("application/yaml"), &llama_yaml("dolly", "")).await;
    assert_eq!(created.code, 201);
    assert_eq!(created.content_type, "application/yaml");
    // Each side's own resourceVersion for the PUTs.
    let get_rv = |a: &Answer| a.body["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let (ours, crd) = s.both(Method::GET, "/dolly", None, Some("application/yaml"), "").await;
    assert_eq!((ours.code, ours.content_type.as_str()), (crd.code, crd.content_type.as_str()));
    assert_eq!(ours.body["spec"], crd.body["spec"]);
    let put = |rv: &str| {
        format!("kind: Llama\nmetadata: {{name: dolly, resourceVersion: \"{rv}\"}}\napiVersion: API_GROUP/v1alpha\nspec: {{weight: 3, height: 2}}\nstatus: {{observedGeneration: 1}}\n")
    };
    let ours_put = ask(
        &s.client,
        Method::PUT,
        &format!("{}/dolly", s.ours),
        Some("application/yaml"),
        Some("application/yaml"),
        &put(&get_rv(&ours)),
        OUR_GROUP,
    )
    .await;
    let crd_put = ask(
        &s.client,
        Method::PUT,
        &format!("{}/dolly", s.crd),
        Some("application/yaml"),
        Some("application/yaml"),
        &put(&get_rv(&crd)),
        CRD_GROUP,
    )
    .await;
    assert_eq!((ours_put.code, ours_put.content_type.as_str()), (crd_put.code, crd_put.content_type.as_str()));
    assert_eq!((ours_put.code, ours_put.body["spec"]["weight"].clone()), (200, Value::from(3)));
    assert_eq!(ours_put.body["metadata"]["generation"], crd_put.body["metadata"]["generation"]);
    // /status from YAML.
    let ours_st = ask(
        &s.client,
        Method::PUT,
        &format!("{}/dolly/status", s.ours),
        Some("application/yaml"),
        None,
        &put(&get_rv(&ours_put)),
        OUR_GROUP,
    )
    .await;
    let crd_st = ask(
        &s.client,
        Method::PUT,
        &format!("{}/dolly/status", s.crd),
        Some("application/yaml"),
        None,
        &put(&get_rv(&crd_put)),
        CRD_GROUP,
    )
    .await;
    assert_eq!(ours_st.code, crd_st.code);
    assert_eq!(ours_st.body["status"], crd_st.body["status"]);
    // A stale resourceVersion: the 409 in YAML.
    s.agree(Method::PUT, "/dolly", Some("application/yaml"), Some("application/yaml"), &put("1")).await;

    // Reads and errors in YAML, with q-values.
    for accept in
        ["application/yaml", "application/json;q=0.5, application/yaml", "application/yaml;q=0.5, application/json"]
    {
        s.agree(Method::GET, "/missing", None, Some(accept), "").await;
        let list = s.agree(Method::GET, "", None, Some(accept), "").await;
        assert_eq!(list.code, 200);
        assert_eq!(list.body["kind"], "LlamaList");
    }
    // A watch accepting only YAML: 406 (in YAML); with JSON as an alternative: a JSON watch.
    let refused = s.agree(Method::GET, "?watch=1&timeoutSeconds=1", None, Some("application/yaml"), "").await;
    assert_eq!(refused.code, 406);
    // Table and metadata in YAML.
    let table = s.agree(Method::GET, "", None, Some("application/yaml;as=Table;v=v1;g=meta.k8s.io"), "").await;
    assert_eq!((table.code, table.body["kind"].as_str()), (200, Some("Table")));
    // Wrong media types.
    s.agree(Method::POST, "", Some("text/plain"), Some("application/yaml"), "x").await;
    // Delete results.
    let deleted = s.agree(Method::DELETE, "/dolly", None, Some("application/yaml"), "").await;
    assert_eq!(deleted.body["status"], "Success");
    s.agree(Method::DELETE, "", None, Some("application/yaml"), "").await;
}
