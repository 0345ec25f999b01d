//! Namespace lifecycle through the aggregator, compared live with the Llama
//! CRD served by kube-apiserver: a create in a namespace that does not exist
//! is kube's 404 `namespaces "x" not found`; in a namespace being terminated
//! (held by a finalizer on one of its objects, so it stays Terminating), the
//! 403 with the NamespaceTerminating cause; a namespace created just before
//! works at once; /readyz has the namespace-cache check.

use std::time::Duration;

use crate::common;
use crate::common::cluster::{self, eventually, namespace, ControlPlane};
use crate::common::compare::{admin_client, CRD_GROUP, OUR_GROUP};
use reqwest::Method;
use serde_json::{json, Value};

/// POSTs a Llama of `group` into `ns`: (code, Status or object with the group
/// replaced by GROUP).
async fn create(
    client: &reqwest::Client,
    cp: &ControlPlane,
    group: &str,
    ns: &str,
    meta: Value,
    spec: Value,
) -> (u16, Value) {
    let body = json!({"apiVersion": format!("{group}/v1alpha"), "kind": "Llama", "metadata": meta, "spec": spec});
    let url = format!("{}/apis/{group}/v1alpha/namespaces/{ns}/llamas", cp.server);
    let resp = client.request(Method::POST, &url).json(&body).send().await.expect("request");
    let code = resp.status().as_u16();
    let text = resp.text().await.expect("body").replace(group, "GROUP");
    (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The same create on both servers must get the same Status.
async fn agree(client: &reqwest::Client, cp: &ControlPlane, ns: &str, meta: Value, spec: Value) -> Value {
    let ours = create(client, cp, OUR_GROUP, ns, meta.clone(), spec.clone()).await;
    let crd = create(client, cp, CRD_GROUP, ns, meta, spec).await;
    assert_eq!(ours, crd, "create in {ns}");
    ours.1
}

#[tokio::test]
async fn creates_in_missing_and_terminating_namespaces_are_refused_like_kube() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let client = admin_client(cp);
    common::compare::crd_served(cp, &client).await;
    let good = json!({"weight": 1, "height": 2});

    // A namespace that does not exist: 404 for the namespace, before validation,
    // dry run or not.
    for (meta, spec) in [
        (json!({"name": "a"}), good.clone()),
        (json!({"name": "a"}), json!({"weight": -1, "height": 2})),
        (json!({"generateName": "g-"}), good.clone()),
    ] {
        let v = agree(&client, cp, "no-such-namespace", meta, spec).await;
        assert_eq!(v["code"], 404, "{v}");
        assert_eq!(v["message"], "namespaces \"no-such-namespace\" not found");
        assert_eq!(v["details"], json!({"name": "no-such-namespace", "kind": "namespaces"}));
    }

    // Created a moment ago: works at once (the cache may not have it yet; the
    // live lookup does).
    let fresh = namespace(cp, "e2e-ns-fresh");
    let (code, v) = create(&client, cp, OUR_GROUP, &fresh, json!({"name": "first"}), good.clone()).await;
    assert_eq!(code, 201, "{v}");

    // A namespace held in Terminating by a finalizer on one of its ConfigMaps.
    let held = namespace(cp, "e2e-ns-terminating");
    let out = cp.kubectl(&["create", "configmap", "held", "-n", &held]);
    assert!(out.0, "{out:?}");
    let out = cp.kubectl(&[
        "patch",
        "configmap",
        "held",
        "-n",
        &held,
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);
    assert!(out.0, "{out:?}");
    let out = cp.kubectl(&["delete", "namespace", &held, "--wait=false"]);
    assert!(out.0, "{out:?}");
    eventually("the namespace to be Terminating", Duration::from_secs(30), || {
        cp.kubectl(&["get", "namespace", &held, "-o", "jsonpath={.status.phase}"]).1 == "Terminating"
    })
    .await;
    // Each server learns of the deletion through its own namespace cache: wait
    // (dry runs, nothing created) until both refuse, then compare real creates.
    for group in [OUR_GROUP, CRD_GROUP] {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let body = json!({"apiVersion": format!("{group}/v1alpha"), "kind": "Llama", "metadata": {"name": "probe"}, "spec": good});
            let url = format!("{}/apis/{group}/v1alpha/namespaces/{held}/llamas?dryRun=All", cp.server);
            let code = client.post(&url).json(&body).send().await.expect("dry run").status().as_u16();
            if code == 403 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{group} still admits creates in {held}: {code}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    for meta in [json!({"name": "late"}), json!({"generateName": "late-"})] {
        let v = agree(&client, cp, &held, meta.clone(), good.clone()).await;
        assert_eq!(v["code"], 403, "{v}");
        assert_eq!(v["reason"], "Forbidden");
        let name = meta["name"].as_str().or(meta["generateName"].as_str()).unwrap();
        assert_eq!(
            v["message"],
            format!("llamas.GROUP \"{name}\" is forbidden: unable to create new content in namespace {held} because it is being terminated")
        );
        assert_eq!(
            v["details"]["causes"],
            json!([{"reason": "NamespaceTerminating", "message": format!("namespace {held} is being terminated"), "field": "metadata.namespace"}])
        );
    }
    // Let the namespace go.
    let out = cp.kubectl(&[
        "patch",
        "configmap",
        "held",
        "-n",
        &held,
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    assert!(out.0, "{out:?}");

    // readyz waits for the namespace cache, and says so.
    // A client of this test's own: the shared server's may hold connections of
    // the (maybe finished) test that started it.
    let direct = common::client_trusting(&reg.server.ca_file).unwrap();
    let text = direct.get(reg.server.url("/readyz?verbose")).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("[+]namespace-cache ok"), "{text}");
}

/// Without the namespace list (credentials that may not read namespaces), the
/// server is live but not ready, and /readyz names the namespace cache.
#[tokio::test]
async fn readyz_waits_for_the_namespace_cache() {
    let cp = cluster::controlplane();
    let server = common::Server::start_with(common::Options {
        kubeconfig: Some(cp.user_kubeconfig.clone()),
        ready_path: Some("/livez".into()),
        ..Default::default()
    })
    .await;
    let resp = server.client.get(server.url("/readyz/namespace-cache")).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 500);
    let text = resp.text().await.unwrap();
    assert!(text.starts_with("[-]namespace-cache failed: namespace cache not synced yet"), "{text}");
    let resp = server.client.get(server.url("/readyz")).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 500);
}
