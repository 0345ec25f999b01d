//! Audit events side by side: kube-apiserver auditing the Llama CRD and
//! farm-apiserver auditing its Llamas, in one control plane, under one
//! policy. Each request is sent to both (through kube-apiserver, as its
//! admin) with an Audit-ID of its own; the events of the two must be the same
//! stages with the same fields and values once times, IDs, the group and the
//! server-made object metadata are set aside, and the differences below.
//!
//! Known differences, removed before comparing (and said in docs/security.md): the
//! order of the query's parameters in `requestURI` (the aggregator re-encodes
//! the query of a request it proxies, sorted, so that is what reaches us);
//! and the reason of an allowed request: kube-apiserver's RBAC names the
//! binding that lets `system:masters` in, while an aggregated server, like
//! k8s.io/apiserver's delegating authorizer, lets that group in without
//! asking and so without a reason.

use std::path::Path;
use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::common::audit;
use crate::common::cluster::{namespace, ControlPlane};
use crate::common::compare::{CRD_GROUP, OUR_GROUP, VERSION};
use crate::common::crd::install_llama_crd;

/// One policy for both groups: changes in full but a status update's (as
/// metadata, where the objectRef is all that is taken from its object),
/// deletes with their request, reads as metadata, nothing else
/// (kube-apiserver's own traffic stays out).
fn policy() -> String {
    let groups = format!("  - group: {OUR_GROUP}\n  - group: {CRD_GROUP}\n");
    let status = format!(
        "  - group: {OUR_GROUP}\n    resources: [llamas/status]\n  - group: {CRD_GROUP}\n    resources: [llamas/status]\n"
    );
    format!(
        "apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  users: [\"system:kube-aggregator\"]
- level: Metadata
  verbs: [update]
  resources:
{status}- level: RequestResponse
  verbs: [create, update, patch]
  resources:
{groups}- level: Request
  verbs: [delete, deletecollection]
  resources:
{groups}- level: Metadata
  resources:
{groups}"
    )
}

async fn send(
    client: &kube::Client,
    method: http::Method,
    path: &str,
    content_type: &str,
    body: Option<&Value>,
    id: &str,
    user_agent: Option<&[u8]>,
) -> (u16, Value) {
    let mut req =
        http::Request::builder().method(method).uri(path).header("Content-Type", content_type).header("Audit-ID", id);
    if let Some(agent) = user_agent {
        req = req.header("User-Agent", http::HeaderValue::from_bytes(agent).unwrap());
    }
    let req =
        req.body(kube::client::Body::from(body.map(|b| serde_json::to_vec(b).unwrap()).unwrap_or_default())).unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// What may differ between the two servers' events, taken out.
fn normalized(event: &Value) -> Value {
    let text = event.to_string().replace(CRD_GROUP, OUR_GROUP);
    let mut e: Value = serde_json::from_str(&text).unwrap();
    let map = e.as_object_mut().unwrap();
    for key in ["auditID", "requestReceivedTimestamp", "stageTimestamp"] {
        map.remove(key);
    }
    // The aggregator re-encodes the query of what it proxies (its parameters
    // sorted by name): the same parameters, in order.
    if let Some(uri) = map.get("requestURI").and_then(Value::as_str) {
        let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
        let mut params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
        params.sort_unstable();
        let uri = if params.is_empty() { path.to_string() } else { format!("{path}?{}", params.join("&")) };
        map.insert("requestURI".into(), json!(uri));
    }
    // Each server's own uid and resourceVersion of the object: whether the
    // objectRef has them is compared, not their values.
    if let Some(reference) = map.get_mut("objectRef").and_then(Value::as_object_mut) {
        for key in ["uid", "resourceVersion"] {
            if reference.contains_key(key) {
                reference.insert(key.into(), json!("<server>"));
            }
        }
    }
    if let Some(annotations) = map.get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.remove("authorization.k8s.io/reason");
    }
    if let Some(details) = map.get_mut("responseStatus").and_then(|s| s.get_mut("details")) {
        if details.get("uid").is_some() {
            details["uid"] = json!("<server>");
        }
    }
    for key in ["requestObject", "responseObject"] {
        if let Some(object) = map.get_mut(key) {
            server_made(object);
        }
    }
    e
}

/// The metadata each server makes of its own: uid, resourceVersion, times.
fn server_made(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in ["uid", "resourceVersion", "creationTimestamp"] {
            if meta.contains_key(key) {
                meta.insert(key.into(), json!("<server>"));
            }
        }
        if let Some(fields) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
            for field in fields {
                if let Some(f) = field.as_object_mut() {
                    f.remove("time");
                }
            }
        }
    }
    if let Some(items) = object.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(server_made);
    }
}

/// The events of `id`, once its last stage is written.
async fn events_of(log: &Path, id: &str, last: &str) -> Vec<Value> {
    audit::wait_for(log, id, last).await
}

#[tokio::test]
async fn the_same_requests_make_the_same_events_as_kube_apiserver_for_the_crd() {
    let dir = tempfile::tempdir().unwrap();
    let policy = audit::write_policy(dir.path(), &policy());
    let kube_log = dir.path().join("kube-apiserver-audit.log");
    let our_log = dir.path().join("farm-apiserver-audit.log");
    let cp = ControlPlane::start_with(&[
        &format!("--audit-policy-file={}", policy.display()),
        &format!("--audit-log-path={}", kube_log.display()),
    ]);
    let _reg = crate::common::audit::register_audited(&cp, &policy, &our_log).await;
    install_llama_crd(&cp, CRD_GROUP).unwrap();
    let ns = namespace(&cp, "audit-side-by-side");
    let client = cp.client().await;
    // The CRD's discovery reaches kube-apiserver's REST mapping a moment after Established.
    let collection = |group: &str| format!("/apis/{group}/{VERSION}/namespaces/{ns}/llamas");
    crate::common::succeeds("the CRD served", Duration::from_secs(30), || {
        let client = client.clone();
        let url = collection(CRD_GROUP);
        async move { send(&client, http::Method::GET, &url, "application/json", None, "probe", None).await.0 == 200 }
    })
    .await;

    let llama = |group: &str, name: &str| {
        json!({"apiVersion": format!("{group}/{VERSION}"), "kind": "Llama",
               "metadata": {"name": name, "labels": {"b": "2", "a": "1"}}, "spec": {"weight": 31.4, "height": 1.7}})
    };
    // (step, method, path after the collection, content type, body, the stage its events end with)
    type Step = (&'static str, http::Method, String, &'static str, Option<fn(&str) -> Value>, &'static str);
    let steps: Vec<Step> = vec![
        ("create", http::Method::POST, String::new(), "application/json", None, "ResponseComplete"),
        ("get", http::Method::GET, "/dolly".into(), "application/json", None, "ResponseComplete"),
        ("get-missing", http::Method::GET, "/nobody".into(), "application/json", None, "ResponseComplete"),
        ("get-long-user-agent", http::Method::GET, "/dolly".into(), "application/json", None, "ResponseComplete"),
        (
            "merge-patch",
            http::Method::PATCH,
            "/dolly".into(),
            "application/merge-patch+json",
            Some(|_| json!({"spec": {"weight": 40}})),
            "ResponseComplete",
        ),
        (
            "json-patch",
            http::Method::PATCH,
            "/dolly".into(),
            "application/json-patch+json",
            Some(|_| json!([{"op": "replace", "path": "/spec/height", "value": 1.8}])),
            "ResponseComplete",
        ),
        (
            "apply",
            http::Method::PATCH,
            "/molly?fieldManager=audit-test".into(),
            "application/apply-patch+yaml",
            Some(|group| {
                json!({"apiVersion": format!("{group}/{VERSION}"), "kind": "Llama",
                       "metadata": {"name": "molly"}, "spec": {"weight": 2, "height": 1}})
            }),
            "ResponseComplete",
        ),
        ("dry-run", http::Method::POST, "?dryRun=All".into(), "application/json", None, "ResponseComplete"),
        ("list", http::Method::GET, "?limit=10".into(), "application/json", None, "ResponseComplete"),
        (
            "watch",
            http::Method::GET,
            "?watch=true&timeoutSeconds=1".into(),
            "application/json",
            None,
            "ResponseComplete",
        ),
        ("update", http::Method::PUT, "/dolly".into(), "application/json", None, "ResponseComplete"),
        ("update-status", http::Method::PUT, "/dolly/status".into(), "application/json", None, "ResponseComplete"),
        ("delete", http::Method::DELETE, "/molly".into(), "application/json", None, "ResponseComplete"),
    ];
    let mut mismatches = Vec::new();
    for (step, method, rest, content_type, body, last) in &steps {
        let mut answers = Vec::new();
        for (group, target) in [(CRD_GROUP, "crd"), (OUR_GROUP, "ours")] {
            let body = match (step, body) {
                (_, Some(make)) => Some(make(group)),
                (&"create", None) => Some(llama(group, "dolly")),
                (&"dry-run", None) => Some(llama(group, "dry")),
                (&"update", None) | (&"update-status", None) => {
                    // The object as it is now (its resourceVersion), changed.
                    let url = format!("{}/dolly", collection(group));
                    let (_, mut current) =
                        send(&client, http::Method::GET, &url, "application/json", None, "read", None).await;
                    if *step == "update" {
                        current["spec"]["weight"] = json!(50);
                    } else {
                        current["status"] = json!({"observedGeneration": 3});
                    }
                    Some(current)
                }
                _ => None,
            };
            let path = format!("{}{rest}", collection(group));
            // Past kube's 1024 bytes, cut inside a two-byte character, and
            // with a byte that is not UTF-8 before the cut.
            let user_agent = (*step == "get-long-user-agent")
                .then(|| [&b"farm/\xff "[..], &[b'a'; 1016], "é and more".as_bytes()].concat());
            let id = format!("{step}-{target}");
            let (code, _) =
                send(&client, method.clone(), &path, content_type, body.as_ref(), &id, user_agent.as_deref()).await;
            answers.push(code);
        }
        assert_eq!(answers[0], answers[1], "{step}: the two servers answered differently");
        let kube = events_of(&kube_log, &format!("{step}-crd"), last).await;
        let ours = events_of(&our_log, &format!("{step}-ours"), last).await;
        let (kube, ours): (Vec<Value>, Vec<Value>) =
            (kube.iter().map(normalized).collect(), ours.iter().map(normalized).collect());
        if kube != ours {
            mismatches.push(format!(
                "{step}:\n  kube-apiserver: {}\n  farm-apiserver: {}",
                serde_json::to_string_pretty(&kube).unwrap(),
                serde_json::to_string_pretty(&ours).unwrap()
            ));
        }
    }
    assert!(mismatches.is_empty(), "events differ:\n{}", mismatches.join("\n"));
}
