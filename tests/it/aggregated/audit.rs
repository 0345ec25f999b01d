//! Auditing behind the aggregator of a control plane of its own: the
//! aggregator's `Audit-ID` is the event's auditID and the one the client saw;
//! the user is the one kube-apiserver forwarded; every verb kubectl and
//! kube-rs send is recorded at the level its rule says. The same server,
//! called directly with the control plane's identities, records RBAC
//! refusals (which kube-apiserver stops before they reach us when they come
//! through it), impersonation and failed authentication.

use std::path::Path;
use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::common::audit;
use crate::common::cluster::{namespace, ControlPlane};
use crate::common::identity::{client_with_identity, files, status_of};
use crate::common::{kubectl, kubectl_stdin, ok, GROUP_PATH};

/// A request through kube-apiserver as its admin: the status, the Audit-ID
/// the client saw, the body.
async fn through(
    client: &kube::Client,
    method: http::Method,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> (u16, String, Value) {
    let mut req = http::Request::builder().method(method).uri(path).header("Content-Type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = body.map(|b| serde_json::to_vec(&b).unwrap()).unwrap_or_default();
    let resp = client.send(req.body(kube::client::Body::from(body)).unwrap()).await.unwrap();
    let code = resp.status().as_u16();
    let seen = resp.headers().get("audit-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, seen, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// The last ResponseComplete event of `verb` on `name` ("": a collection)
/// that `also` accepts, waiting for it.
async fn find(log: &Path, verb: &str, name: &str, also: impl Fn(&Value) -> bool) -> Value {
    let mut found = None;
    crate::common::succeeds(&format!("the event of {verb} {name:?}"), Duration::from_secs(20), || {
        found = audit::events(log)
            .into_iter()
            .filter(|e| {
                let named = e["objectRef"].get("name").and_then(Value::as_str).unwrap_or_default();
                e["verb"] == verb && named == name && e["stage"] == "ResponseComplete" && also(e)
            })
            .last();
        std::future::ready(found.is_some())
    })
    .await;
    found.unwrap_or_default()
}

fn grant(cp: &ControlPlane, ns: &str) {
    cp.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: llama-keeper, namespace: {ns}}}
rules:
- {{apiGroups: [farm.example.com], resources: [llamas], verbs: ['*']}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: alice-keeps-llamas, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: llama-keeper}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}}]
"
    ));
}

#[tokio::test]
async fn requests_through_the_aggregator_are_audited_with_its_audit_id() {
    let dir = tempfile::tempdir().unwrap();
    let policy = audit::write_policy(dir.path(), audit::POLICY);
    let log = dir.path().join("audit.log");
    let cp = ControlPlane::start();
    let reg = crate::common::audit::register_audited(&cp, &policy, &log).await;
    let ns = namespace(&cp, "audited");
    grant(&cp, &ns);
    let admin = cp.client().await;
    let llamas = format!("{GROUP_PATH}/namespaces/{ns}/llamas");

    // create, with the client's Audit-ID: kube-apiserver's, ours and the client's are one
    let dolly = json!({"apiVersion": "farm.example.com/v1alpha", "kind": "Llama",
                       "metadata": {"name": "dolly"}, "spec": {"weight": 31.4, "height": 1.7}});
    let (code, seen, created) =
        through(&admin, http::Method::POST, &llamas, Some(dolly.clone()), &[("Audit-ID", "agg-create-1")]).await;
    assert_eq!((code, seen.as_str()), (201, "agg-create-1"), "{created}");
    let evs = audit::wait_for(&log, "agg-create-1", "ResponseComplete").await;
    assert_eq!(audit::stages(&evs), ["RequestReceived", "ResponseComplete"]);
    let ev = &evs[1];
    assert_eq!(ev["level"], "RequestResponse");
    assert_eq!(ev["user"]["username"], "controlplane-admin", "the user kube-apiserver forwarded: {ev}");
    assert!(ev["user"]["groups"].as_array().unwrap().contains(&json!("system:masters")), "{ev}");
    assert!(ev.get("impersonatedUser").is_none());
    assert_eq!(ev["requestObject"], dolly);
    assert_eq!(ev["responseObject"]["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(ev["annotations"]["authorization.k8s.io/decision"], "allow");
    assert!(ev["sourceIPs"].as_array().unwrap().contains(&json!("127.0.0.1")), "{ev}");

    // without an Audit-ID the aggregator makes one; it is ours and the client's
    let (code, seen, _) = through(&admin, http::Method::GET, &format!("{llamas}/dolly"), None, &[]).await;
    assert_eq!(code, 200);
    assert!(uuid::Uuid::parse_str(&seen).is_ok(), "{seen}");
    let evs = audit::wait_for(&log, &seen, "ResponseComplete").await;
    assert_eq!((evs[1]["verb"].as_str(), evs[1]["level"].as_str()), (Some("get"), Some("Metadata")));

    // kubectl: apply (server-side), patch, replace, list, a server dry run, delete
    let kc = &cp.kubeconfig;
    let manifest = format!(
        "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata: {{name: molly, namespace: {ns}}}\nspec: {{weight: 20, height: 1.2}}\n"
    );
    ok(kubectl_stdin(kc, &["apply", "--server-side", "-f", "-"], Some(&manifest)));
    let ev = find(&log, "patch", "molly", |_| true).await;
    assert_eq!(ev["level"], "RequestResponse");
    assert_eq!(ev["requestObject"]["spec"], json!({"weight": 20, "height": 1.2}));
    assert!(ev["requestURI"].as_str().unwrap().contains("fieldManager=kubectl"), "{ev}");
    assert_eq!(ev["responseStatus"]["code"], 201);
    ok(kubectl(
        kc,
        &[
            "patch",
            "llamas.v1alpha.farm.example.com",
            "molly",
            "-n",
            &ns,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"weight":21}}"#,
        ],
    ));
    let ev = find(&log, "patch", "molly", |e| e["requestObject"] == json!({"spec": {"weight": 21}})).await;
    assert_eq!(ev["responseObject"]["spec"]["weight"], 21);
    let current = ok(kubectl(kc, &["get", "llamas.v1alpha.farm.example.com", "molly", "-n", &ns, "-o", "json"]));
    let mut replaced: Value = serde_json::from_str(&current).unwrap();
    replaced["spec"]["height"] = json!(1.3);
    ok(kubectl_stdin(kc, &["replace", "-f", "-"], Some(&replaced.to_string())));
    let ev = find(&log, "update", "molly", |_| true).await;
    assert_eq!(
        (ev["level"].as_str(), ev["requestObject"]["spec"]["height"].as_f64()),
        (Some("RequestResponse"), Some(1.3))
    );
    ok(kubectl(kc, &["get", "llamas", "-n", &ns]));
    let ev = find(&log, "list", "", |_| true).await;
    assert_eq!((ev["level"].as_str(), ev["objectRef"]["namespace"].as_str()), (Some("Metadata"), Some(ns.as_str())));
    assert!(ev.get("responseObject").is_none());
    let dry = manifest.replace("molly", "dry");
    ok(kubectl_stdin(kc, &["create", "--dry-run=server", "-f", "-"], Some(&dry)));
    let ev = find(&log, "create", "dry", |_| true).await;
    assert!(ev["requestURI"].as_str().unwrap().contains("dryRun=All"), "{ev}");
    assert_eq!((ev["level"].as_str(), ev["responseStatus"]["code"].as_i64()), (Some("RequestResponse"), Some(201)));
    ok(kubectl(kc, &["delete", "llamas.v1alpha.farm.example.com", "molly", "-n", &ns]));
    let ev = find(&log, "delete", "molly", |_| true).await;
    assert_eq!(ev["level"], "Request");
    assert!(ev.get("responseObject").is_none());

    // a watch: ResponseStarted, then ResponseComplete when it ends
    let (code, seen, _) = through(
        &admin,
        http::Method::GET,
        &format!("{llamas}?watch=true&timeoutSeconds=1"),
        None,
        &[("Audit-ID", "agg-watch-1")],
    )
    .await;
    assert_eq!((code, seen.as_str()), (200, "agg-watch-1"));
    let evs = audit::wait_for(&log, "agg-watch-1", "ResponseComplete").await;
    assert_eq!(audit::stages(&evs), ["RequestReceived", "ResponseStarted", "ResponseComplete"]);
    assert_eq!(evs[2]["verb"], "watch");

    // impersonated through the aggregator: kube-apiserver resolved it and forwards alice
    let (code, seen, body) = through(
        &admin,
        http::Method::GET,
        &format!("{llamas}/dolly"),
        None,
        &[("Impersonate-User", "alice"), ("Audit-ID", "agg-as-alice")],
    )
    .await;
    assert_eq!((code, seen.as_str()), (200, "agg-as-alice"), "{body}");
    let evs = audit::wait_for(&log, "agg-as-alice", "ResponseComplete").await;
    assert_eq!(evs[1]["user"]["username"], "alice", "{}", evs[1]);
    assert!(evs[1].get("impersonatedUser").is_none(), "the aggregator sends the user it impersonates");
    // alice was allowed by a SubjectAccessReview: RBAC's reason, as kube records it
    assert_eq!(evs[1]["annotations"]["authorization.k8s.io/decision"], "allow");
    let reason = evs[1]["annotations"]["authorization.k8s.io/reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("RBAC: allowed by RoleBinding \"alice-keeps-llamas/"), "{}", evs[1]);

    // called directly: an RBAC refusal (farm-user may do nothing)
    let s = &reg.server;
    let (cert, key) = files(&cp, "userCertFile", "userKeyFile");
    let user = client_with_identity(s, &cert, &key);
    let resp = user.post(s.llamas(&ns, "")).header("Audit-ID", "denied-1").json(&dolly).send().await.unwrap();
    assert_eq!(audit::audit_id(resp.headers()), "denied-1");
    let (code, v) = status_of(resp).await;
    assert_eq!(code, 403, "{v}");
    let evs = audit::wait_for(&log, "denied-1", "ResponseComplete").await;
    let ev = &evs[1];
    assert_eq!(ev["user"]["username"], "farm-user");
    assert_eq!(ev["annotations"]["authorization.k8s.io/decision"], "forbid", "{ev}");
    assert!(ev["annotations"].get("authorization.k8s.io/reason").is_some(), "{ev}");
    assert_eq!(
        (ev["responseStatus"]["reason"].as_str(), ev["responseStatus"]["code"].as_i64()),
        (Some("Forbidden"), Some(403))
    );
    assert_eq!(ev["responseStatus"]["message"], v["message"]);

    // called directly with Impersonate-User: both users recorded
    let (cert, key) = files(&cp, "adminCertFile", "adminKeyFile");
    let direct_admin = client_with_identity(s, &cert, &key);
    let resp = direct_admin
        .get(s.llamas(&ns, "dolly"))
        .header("Impersonate-User", "alice")
        .header("Audit-ID", "direct-as-alice")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let evs = audit::wait_for(&log, "direct-as-alice", "ResponseComplete").await;
    assert_eq!(evs[1]["user"]["username"], "controlplane-admin");
    assert_eq!(evs[1]["impersonatedUser"]["username"], "alice", "{}", evs[1]);

    // failed authentication: one ResponseStarted event, nobody as user
    let resp = crate::common::client_trusting(&s.ca_file)
        .unwrap()
        .get(s.llamas(&ns, ""))
        .bearer_auth("not-a-token")
        .header("Audit-ID", "unauthenticated-1")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let evs = audit::wait_for(&log, "unauthenticated-1", "ResponseStarted").await;
    assert_eq!(audit::stages(&evs), ["ResponseStarted"]);
    assert_eq!(evs[0]["user"], json!({}));
    assert_eq!(evs[0]["responseStatus"]["code"], 401);

    // the aggregator's availability probes are left out by their rule
    assert!(audit::events(&log).iter().all(|e| e["user"]["username"] != "system:kube-aggregator"));
}
