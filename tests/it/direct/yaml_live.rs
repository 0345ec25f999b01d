//! YAML bodies compared live with kube-apiserver: the same YAML requests go
//! to farm-apiserver's Llamas through the aggregator and to the Llama CRD
//! (`llamas.crd.farm.example.com`) served by kube-apiserver itself, and the
//! answers must agree: status code, Content-Type, Status reason and message
//! (group names aside), warnings.
//!
//! Bodies start with `kind: Llama` so the first 30 bytes kube quotes in an
//! "unrecognized object" message are the same on both sides.
//!
//! Pinned differences: go-yaml allows 10,000 levels of nesting, we 127; and
//! go-yaml reads YAML 1.1 (`yes` is a boolean there, a string here).

use crate::common;
use crate::common::cluster::{self, namespace};
use crate::common::compare::admin_client;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::Method;
use serde_json::Value;

const CRD_GROUP: &str = "crd.farm.example.com";
const OUR_GROUP: &str = "farm.example.com";

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

async fn send(
    client: &reqwest::Client,
    method: Method,
    url: &str,
    content_type: Option<&str>,
    accept: Option<&str>,
    body: &str,
    group: &str,
) -> Answer {
    let mut req = client.request(method, url);
    if let Some(ct) = content_type {
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
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let warnings =
        headers.get_all("warning").iter().map(|v| v.to_str().unwrap_or("").replace(group, "GROUP")).collect();
    let text = resp.text().await.expect("body");
    let body: Value = if content_type == "application/yaml" {
        serde_norway::from_str(&text).unwrap_or_else(|e| panic!("not YAML ({e}): {text}"))
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
            send(&self.client, method.clone(), &format!("{}{rest}", self.ours), ct, accept, body, OUR_GROUP).await;
        let crd = send(&self.client, method, &format!("{}{rest}", self.crd), ct, accept, body, CRD_GROUP).await;
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
    let ours_put = send(
        &s.client,
        Method::PUT,
        &format!("{}/dolly", s.ours),
        Some("application/yaml"),
        Some("application/yaml"),
        &put(&get_rv(&ours)),
        OUR_GROUP,
    )
    .await;
    let crd_put = send(
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
    let ours_st = send(
        &s.client,
        Method::PUT,
        &format!("{}/dolly/status", s.ours),
        Some("application/yaml"),
        None,
        &put(&get_rv(&ours_put)),
        OUR_GROUP,
    )
    .await;
    let crd_st = send(
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
