//! Delegated authentication and authorization against the real control plane:
//! the aggregator is trusted only by its front-proxy client certificate,
//! forged identity headers are ignored, every request is authorized with the
//! cluster's RBAC (SubjectAccessReview) and refused in kube-apiserver's words,
//! and the front-proxy CA can be rotated without a restart.

use std::path::Path;
use std::time::Duration;

use crate::common;
use crate::common::cluster::{self, namespace, ControlPlane, Registered};
use crate::common::identity::{client_with_identity, existing_ca, files, leaf, new_ca, path_of, status_of};
use crate::common::{kubectl_stdin, Options, Server};
use serde_json::json;

/// farm-apiserver with delegated authentication, registered on a control plane
/// of its own (the shared one's APIService points at the shared farm-apiserver).
async fn secured() -> &'static Registered<'static> {
    static CP: std::sync::OnceLock<ControlPlane> = std::sync::OnceLock::new();
    static REG: tokio::sync::OnceCell<Registered<'static>> = tokio::sync::OnceCell::const_new();
    REG.get_or_init(|| cluster::register_on(CP.get_or_init(ControlPlane::start), &["--authentication", "delegated"]))
        .await
}

/// RBAC for farm-user: read llamas in one namespace only.
async fn grant_read(cp: &ControlPlane, ns: &str) {
    cp.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: llama-reader, namespace: {ns}}}
rules:
- apiGroups: [farm.example.com]
  resources: [llamas]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: farm-user-reads-llamas, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: llama-reader}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: farm-user}}
"
    ));
    cluster::wait_until_allowed(cp, &["list", "llamas.farm.example.com", "--as=farm-user", "-n", ns]).await;
}

const LLAMA: &str = r#"{"apiVersion":"farm.example.com/v1alpha","kind":"Llama","metadata":{"name":"dolly"},"spec":{"weight":31.4,"height":1.7}}"#;

#[tokio::test]
async fn rbac_through_the_aggregator_and_kubectl_auth_can_i() {
    let reg = secured().await;
    let cp = reg.cp;
    let ns = namespace(cp, "sec-rbac");
    let other = namespace(cp, "sec-other");
    grant_read(cp, &ns).await;
    cp.apply(&LLAMA.replace("\"dolly\"}", &format!("\"dolly\",\"namespace\":\"{ns}\"}}")));
    let user = &cp.user_kubeconfig;
    let out = common::kubectl(user, &["get", "llamas", "-n", &ns]);
    assert!(out.0 && out.1.contains("dolly"), "{out:?}");
    let out = kubectl_stdin(user, &["create", "-n", &ns, "-f", "-"], Some(&LLAMA.replace("dolly", "molly")));
    assert!(!out.0, "{out:?}");
    assert!(out.2.contains(&format!(
        "llamas.farm.example.com is forbidden: User \"farm-user\" cannot create resource \"llamas\" in API group \"farm.example.com\" in the namespace \"{ns}\""
    )), "{out:?}");
    let out = common::kubectl(user, &["delete", "llama", "dolly", "-n", &ns]);
    assert!(
        !out.0
            && out.2.contains(
                "llamas.farm.example.com \"dolly\" is forbidden: User \"farm-user\" cannot delete resource \"llamas\""
            ),
        "{out:?}"
    );
    let out = common::kubectl(user, &["get", "llamas", "-n", &other]);
    assert!(!out.0 && out.2.contains("Forbidden"), "{out:?}");
    for (verb, namespace, want) in [("list", &ns, "yes"), ("create", &ns, "no"), ("list", &other, "no")] {
        let out = common::kubectl(user, &["auth", "can-i", verb, "llamas.farm.example.com", "-n", namespace]);
        assert_eq!(out.1.trim(), want, "can-i {verb} in {namespace}: {out:?}");
    }
}

#[tokio::test]
async fn farm_apiserver_authorizes_the_aggregators_requests_itself() {
    let reg = secured().await;
    let cp = reg.cp;
    let ns = namespace(cp, "sec-direct");
    grant_read(cp, &ns).await;
    // What the aggregator sends: its front-proxy client certificate plus the user in headers.
    let (cert, key) = files(cp, "frontProxyClientCertFile", "frontProxyClientKeyFile");
    let proxy = client_with_identity(&reg.server, &cert, &key);
    let url = reg.server.url(&format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/llamas"));
    let as_user =
        |r: reqwest::RequestBuilder| r.header("X-Remote-User", "farm-user").header("X-Remote-Group", "farm-users");
    let (code, v) = status_of(as_user(proxy.get(&url)).send().await.unwrap()).await;
    assert_eq!(code, 200, "{v}");
    let (code, v) = status_of(
        as_user(proxy.post(&url)).header("Content-Type", "application/json").body(LLAMA).send().await.unwrap(),
    )
    .await;
    assert_eq!(code, 403, "{v}");
    assert_eq!(v["reason"], "Forbidden");
    assert_eq!(
        v["message"],
        format!("llamas.farm.example.com is forbidden: User \"farm-user\" cannot create resource \"llamas\" in API group \"farm.example.com\" in the namespace \"{ns}\"")
    );
    assert_eq!(v["details"], json!({"group": "farm.example.com", "kind": "llamas"}));
    // FarmPods also need access to the Pods themselves.
    let fp = reg.server.url(&format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/farmpods"));
    let (code, v) = status_of(as_user(proxy.get(&fp)).send().await.unwrap()).await;
    assert_eq!(code, 403, "{v}");
    cp.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: farmpod-reader, namespace: {ns}}}
rules:
- {{apiGroups: [farm.example.com], resources: [farmpods], verbs: [list]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: farm-user-farmpods, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: farmpod-reader}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: farm-user}}]
"
    ));
    tokio::time::sleep(Duration::from_secs(11)).await; // the denial above is cached for 10 s
    let (code, v) = status_of(as_user(proxy.get(&fp)).send().await.unwrap()).await;
    assert_eq!(code, 403, "farmpods alone do not reveal pods: {v}");
    assert!(v["message"].as_str().unwrap().contains("cannot list resource \"pods\" in API group \"\""), "{v}");
    // Probes need no credentials at all.
    let anonymous = common::client_trusting(&reg.server.ca_file).unwrap();
    assert_eq!(anonymous.get(reg.server.url("/readyz")).send().await.unwrap().status(), 200);
}

/// A FarmPod's log is its Pod's: a user allowed `farmpods/log` but not
/// `pods/log` is refused by farm-apiserver, in kube's words for the Pod's
/// log, though the aggregator let the request through.
#[tokio::test]
async fn a_farmpods_log_needs_its_pods_log() {
    let reg = secured().await;
    let cp = reg.cp;
    let ns = namespace(cp, "sec-farmpod-log");
    cp.apply(&format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: web-1, namespace: {ns}}}
spec:
  nodeName: node-a
  containers: [{{name: app, image: busybox:1.36}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: farmpod-log-reader, namespace: {ns}}}
rules:
- {{apiGroups: [''], resources: [pods], verbs: [get]}}
- {{apiGroups: [farm.example.com], resources: [farmpods, farmpods/log], verbs: [get]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: farm-user-farmpod-logs, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: farmpod-log-reader}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: farm-user}}]
"
    ));
    cluster::wait_until_allowed(
        cp,
        &["get", "farmpods.farm.example.com", "--subresource=log", "--as=farm-user", "-n", &ns],
    )
    .await;
    let path = format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/farmpods/web-1/log");
    let out = common::kubectl(&cp.user_kubeconfig, &["get", "--raw", &path]);
    assert!(
        !out.0
            && out.2.contains(&format!(
                "pods \"web-1\" is forbidden: User \"farm-user\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"{ns}\""
            )),
        "{out:?}"
    );
}

#[tokio::test]
async fn forged_identities_are_refused() {
    let reg = secured().await;
    let cp = reg.cp;
    let url = reg.server.url("/apis/farm.example.com/v1alpha/llamas");
    let forge = |r: reqwest::RequestBuilder| {
        r.header("X-Remote-User", "system:admin").header("X-Remote-Group", "system:masters")
    };
    // No client certificate at all: the headers are not credentials, so the request is
    // anonymous (as in kube) and the cluster's RBAC refuses it.
    let plain = common::client_trusting(&reg.server.ca_file).unwrap();
    let (code, v) = status_of(forge(plain.get(&url)).send().await.unwrap()).await;
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        "llamas.farm.example.com is forbidden: User \"system:anonymous\" cannot list resource \"llamas\" in API group \"farm.example.com\" at the cluster scope"
    );
    // A certificate from another CA, with the allowed name.
    let (foreign_ca, _) = new_ca("front-proxy-ca");
    let (cert, key) = leaf(&foreign_ca, "front-proxy-client");
    let (code, _) =
        status_of(forge(client_with_identity(&reg.server, &cert, &key).get(&url)).send().await.unwrap()).await;
    assert_eq!(code, 401);
    // Signed by the real front-proxy CA, but a name not allowed to proxy.
    let ca = existing_ca(Path::new(&path_of(cp, "frontProxyCAFile")), Path::new(&path_of(cp, "frontProxyCAKeyFile")));
    let (cert, key) = leaf(&ca, "intruder");
    let (code, _) =
        status_of(forge(client_with_identity(&reg.server, &cert, &key).get(&url)).send().await.unwrap()).await;
    assert_eq!(code, 401);
    // The admin's client certificate (client CA) authenticates as itself: the headers are ignored.
    let (cert, key) = files(cp, "adminCertFile", "adminKeyFile");
    let (code, v) = status_of(
        client_with_identity(&reg.server, &cert, &key)
            .get(&url)
            .header("X-Remote-User", "nobody")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    // A user's client certificate with a forged admin header: still just farm-user.
    let (cert, key) = files(cp, "userCertFile", "userKeyFile");
    let (code, v) =
        status_of(forge(client_with_identity(&reg.server, &cert, &key).get(&url)).send().await.unwrap()).await;
    assert_eq!(code, 403, "{v}");
    assert!(v["message"].as_str().unwrap().contains("User \"farm-user\""), "{v}");
}

#[tokio::test]
async fn bearer_tokens_are_reviewed() {
    let reg = secured().await;
    let cp = reg.cp;
    let ns = namespace(cp, "sec-token");
    let out = cp.kubectl(&["create", "serviceaccount", "robot", "-n", &ns]);
    assert!(out.0 || out.2.contains("AlreadyExists"), "{out:?}");
    let token = cp.kubectl(&["create", "token", "robot", "-n", &ns]).1.trim().to_string();
    assert!(!token.is_empty());
    let client = common::client_trusting(&reg.server.ca_file).unwrap();
    let url = reg.server.url(&format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/llamas"));
    let (code, v) = status_of(client.get(&url).bearer_auth(&token).send().await.unwrap()).await;
    assert_eq!(code, 403, "{v}");
    assert!(v["message"].as_str().unwrap().contains(&format!("User \"system:serviceaccount:{ns}:robot\"")), "{v}");
    let (code, _) = status_of(client.get(&url).bearer_auth("not-a-token").send().await.unwrap()).await;
    assert_eq!(code, 401);
}

#[tokio::test]
async fn front_proxy_ca_rotation_applies_without_restart() {
    let cp = cluster::controlplane();
    let (old_ca, old_pem) = new_ca("rotation-ca-1");
    let (new_ca_issuer, new_pem) = new_ca("rotation-ca-2");
    let configmap = |ca_pem: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "farm-test-authentication", "namespace": "kube-system"},
            "data": {
                "requestheader-client-ca-file": ca_pem,
                "requestheader-allowed-names": "[\"front-proxy-client\"]",
                "requestheader-username-headers": "[\"X-Remote-User\"]",
                "requestheader-group-headers": "[\"X-Remote-Group\"]",
                "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
                "client-ca-file": std::fs::read_to_string(path_of(cp, "clientCAFile")).unwrap()}})
        .to_string()
    };
    cp.apply(&configmap(&old_pem));
    let server = Server::start_with(Options {
        args: vec![
            "--authentication".into(),
            "delegated".into(),
            "--authentication-configmap".into(),
            "kube-system/farm-test-authentication".into(),
        ],
        kubeconfig: Some(cp.kubeconfig.clone()),
        ..Default::default()
    })
    .await;
    let url = server.url("/apis/farm.example.com/v1alpha/llamas");
    let (old_cert, old_key) = leaf(&old_ca, "front-proxy-client");
    let (new_cert, new_key) = leaf(&new_ca_issuer, "front-proxy-client");
    let admin =
        |c: &reqwest::Client| c.get(&url).header("X-Remote-User", "admin").header("X-Remote-Group", "system:masters");
    let old_client = client_with_identity(&server, &old_cert, &old_key);
    let new_client = client_with_identity(&server, &new_cert, &new_key);
    assert_eq!(admin(&old_client).send().await.unwrap().status(), 200);
    assert_eq!(admin(&new_client).send().await.unwrap().status(), 401);
    cp.apply(&configmap(&new_pem));
    let mut rotated = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let fresh_new = client_with_identity(&server, &new_cert, &new_key);
        if admin(&fresh_new).send().await.unwrap().status() == 200 {
            rotated = true;
            break;
        }
    }
    assert!(rotated, "the new front-proxy CA was not picked up:\n{}", server.log());
    let fresh_old = client_with_identity(&server, &old_cert, &old_key);
    assert_eq!(admin(&fresh_old).send().await.unwrap().status(), 401, "the old CA no longer trusted");
}
