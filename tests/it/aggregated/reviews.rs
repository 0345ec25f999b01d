//! TokenReviews and SubjectAccessReviews against the real control plane: a flood of distinct
//! bogus tokens is answered 401 while the reviews sent stay within the rate limit (counted at
//! kube-apiserver's own /metrics) and real users keep being served; a SubjectAccessReview that
//! kube-apiserver refuses is a 500 in kube's words, a TokenReview it refuses a 401.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common;
use crate::common::cluster::{self, namespace, ControlPlane};
use crate::common::identity::status_of;
use crate::common::{Options, Server};
use futures::StreamExt as _;
use serde_json::Value;

fn path_of(cp: &ControlPlane, key: &str) -> PathBuf {
    PathBuf::from(cp.info[key].as_str().unwrap_or_else(|| panic!("{key} in {}", cp.info)))
}

/// An HTTPS client trusting `server`, presenting the control plane's client certificate
/// `cert`/`key` (keys of controlplane.json), or none.
fn client(server: &Server, identity: Option<(&Path, &Path)>) -> reqwest::Client {
    let ca = std::fs::read(&server.ca_file).unwrap();
    let mut builder = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .timeout(Duration::from_secs(60));
    if let Some((cert, key)) = identity {
        let mut pem = std::fs::read(cert).unwrap();
        pem.push(b'\n');
        pem.extend(std::fs::read(key).unwrap());
        builder = builder.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    builder.build().unwrap()
}

fn user_client(cp: &ControlPlane, server: &Server) -> reqwest::Client {
    let (cert, key) = (path_of(cp, "userCertFile"), path_of(cp, "userKeyFile"));
    client(server, Some((&cert, &key)))
}

/// farm-user may read llamas in `ns`.
fn grant_read(cp: &ControlPlane, ns: &str, subject: &str) {
    cp.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: llama-reader, namespace: {ns}}}
rules:
- {{apiGroups: [farm.example.com], resources: [llamas], verbs: [get, list, watch]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: llama-readers, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: llama-reader}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: farm-user}}
{subject}
"
    ));
}

/// The service account `robot` of `ns`, which may read Llamas there (as may
/// farm-user), and a token of it.
fn reading_robot(cp: &ControlPlane, ns: &str) -> String {
    let out = cp.kubectl(&["create", "serviceaccount", ROBOT, "-n", ns]);
    assert!(out.0 || out.2.contains("AlreadyExists"), "{out:?}");
    grant_read(cp, ns, &format!("- {{kind: ServiceAccount, name: {ROBOT}, namespace: {ns}}}"));
    let token = cp.kubectl(&["create", "token", ROBOT, "-n", ns]).1.trim().to_string();
    assert!(!token.is_empty());
    token
}

const ROBOT: &str = "robot";

/// TokenReviews kube-apiserver has served (any answer), from its /metrics.
async fn tokenreviews_served(cp: &ControlPlane) -> u64 {
    let client = cp.client().await;
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(req).await.expect("kube-apiserver /metrics");
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && l.contains("resource=\"tokenreviews\""))
        .collect();
    lines
        .iter()
        // apiserver_request_total reports a create as verb="POST".
        .filter(|l| l.contains("verb=\"POST\"") || l.contains("verb=\"create\""))
        .map(|l| {
            let value = l.rsplit(' ').next().unwrap_or("");
            value.parse::<f64>().unwrap_or_else(|_| panic!("metric value in {l}")) as u64
        })
        .sum()
}

const FLOOD: usize = 10_000;
const QPS: f64 = 5.0;
const BURST: u64 = 10;
const QUEUE: usize = 20;

#[tokio::test]
async fn a_flood_of_bogus_tokens_is_refused_within_the_review_rate_limit() {
    let cp = cluster::controlplane();
    let ns = namespace(cp, "reviews-flood");
    let token = reading_robot(cp, &ns);
    let server = Server::start_with(Options {
        args: [
            "--authentication",
            "delegated",
            "--review-qps",
            &QPS.to_string(),
            "--review-burst",
            &BURST.to_string(),
            "--review-queue",
            &QUEUE.to_string(),
            // The flood opens 1,000 connections at once, and connections still in
            // their TLS handshake count against the cap (past it the oldest is closed):
            // room for all of them, as this test is about the review limits.
            "--max-connections",
            "2000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        kubeconfig: Some(cp.kubeconfig.clone()),
        log: Some("info".into()),
        ..Default::default()
    })
    .await;
    let url = server.url(&format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/llamas"));
    let user = user_client(cp, &server);
    let (code, v) = status_of(user.get(&url).send().await.unwrap()).await;
    assert_eq!(code, 200, "farm-user before the flood: {v}");

    let before = tokenreviews_served(cp).await;
    let started = Instant::now();
    let flooder = client(&server, None);
    let flood = {
        let url = url.clone();
        tokio::spawn(async move {
            futures::stream::iter(0..FLOOD)
                .map(|i| {
                    let (flooder, url) = (flooder.clone(), url.clone());
                    async move {
                        match flooder.get(&url).bearer_auth(format!("bogus-token-{i}")).send().await {
                            Ok(resp) => status_of(resp).await,
                            Err(err) => (0, Value::String(err.to_string())),
                        }
                    }
                })
                .buffer_unordered(1000)
                .collect::<Vec<_>>()
                .await
        })
    };
    // While the flood runs, farm-user (client certificate, then a SubjectAccessReview through the
    // authorizer's own limiter) is still served.
    let mut served_during = 0;
    while !flood.is_finished() {
        let (code, v) = status_of(user.get(&url).send().await.unwrap()).await;
        assert_eq!(code, 200, "farm-user during the flood: {v}");
        served_during += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let answers = flood.await.unwrap();
    let elapsed = started.elapsed();
    let after = tokenreviews_served(cp).await;

    let mut unexpected: Vec<&(u16, Value)> = answers.iter().filter(|(code, _)| *code != 401).collect();
    unexpected.truncate(5);
    assert!(unexpected.is_empty(), "every bogus token is a 401: {unexpected:?}");
    assert!(answers.iter().all(|(_, v)| v["reason"] == "Unauthorized" && v["code"] == 401));
    let reviews = after - before;
    let allowed = BURST + (QPS * elapsed.as_secs_f64()).ceil() as u64;
    eprintln!(
        "flood: {FLOOD} requests in {elapsed:?}, {reviews} TokenReviews sent (at most {allowed} allowed), \
         farm-user served {served_during} times during it"
    );
    // A couple of reviews more may come from other tests of this binary running meanwhile.
    assert!(reviews <= allowed + 3, "{reviews} TokenReviews in {elapsed:?} exceed burst {BURST} + {QPS}/s");
    assert!(reviews >= BURST, "the flood reached kube-apiserver: {reviews} reviews counted");

    // The server is up and a real token works again once the queue has drained.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, v) = status_of(server.client.get(&url).bearer_auth(&token).send().await.unwrap()).await;
        if code == 200 {
            break;
        }
        assert_eq!(code, 401, "{v}");
        assert!(Instant::now() < deadline, "the robot's token was never accepted after the flood");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (code, _) = status_of(user.get(&url).send().await.unwrap()).await;
    assert_eq!(code, 200);
}

/// A server authenticating to kube-apiserver as a service account that may read Pods and the
/// authentication ConfigMap, but create neither TokenReviews nor SubjectAccessReviews.
async fn server_without_review_rights(cp: &ControlPlane) -> (Server, String) {
    let ns = namespace(cp, "reviews-limited");
    let sa = "farm-limited";
    cp.apply(&format!(
        "apiVersion: v1
kind: ServiceAccount
metadata: {{name: {sa}, namespace: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: farm-limited}}
rules:
- {{apiGroups: [''], resources: [pods, namespaces], verbs: [get, list, watch]}}
- {{apiGroups: [admissionregistration.k8s.io], resources: [mutatingwebhookconfigurations, validatingwebhookconfigurations, validatingadmissionpolicies, validatingadmissionpolicybindings, mutatingadmissionpolicies, mutatingadmissionpolicybindings], verbs: [list, watch]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: farm-limited}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: farm-limited}}
subjects: [{{kind: ServiceAccount, name: {sa}, namespace: {ns}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: farm-limited-auth-reader, namespace: kube-system}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}}
subjects: [{{kind: ServiceAccount, name: {sa}, namespace: {ns}}}]
"
    ));
    let token = cp.kubectl(&["create", "token", sa, "-n", &ns, "--duration", "1h"]).1.trim().to_string();
    assert!(!token.is_empty());
    let dir = tempfile::tempdir().unwrap().keep();
    let kubeconfig = dir.join("limited.kubeconfig");
    std::fs::copy(&cp.kubeconfig, &kubeconfig).unwrap();
    let kc = |args: &[&str]| {
        let out = common::kubectl(&kubeconfig, args);
        assert!(out.0, "kubectl {args:?}: {out:?}");
    };
    kc(&["config", "set-credentials", "limited", &format!("--token={token}")]);
    kc(&["config", "set-context", "--current", "--user=limited"]);
    let server = Server::start_with(Options {
        args: vec!["--authentication".into(), "delegated".into()],
        kubeconfig: Some(kubeconfig),
        ..Default::default()
    })
    .await;
    (server, format!("system:serviceaccount:{ns}:{sa}"))
}

#[tokio::test]
async fn refused_reviews_are_500_for_authorization_and_401_for_tokens() {
    let cp = cluster::controlplane();
    let (server, sa_user) = server_without_review_rights(cp).await;
    let path = "/apis/farm.example.com/v1alpha/namespaces/default/llamas?limit=5";

    // (b) farm-user authenticates by certificate; the SubjectAccessReview is refused: 500.
    let user = user_client(cp, &server);
    let started = Instant::now();
    let (code, v) = status_of(user.get(server.url(path)).send().await.unwrap()).await;
    assert_eq!(code, 500, "{v}");
    assert_eq!(v["kind"], "Status");
    assert_eq!(v["status"], "Failure");
    assert_eq!(v["reason"], "InternalError");
    assert_eq!(v["code"], 500);
    assert_eq!(
        v["message"],
        format!(
            "Internal Server Error: \"{path}\": subjectaccessreviews.authorization.k8s.io is forbidden: \
             User \"{sa_user}\" cannot create resource \"subjectaccessreviews\" in API group \
             \"authorization.k8s.io\" at the cluster scope"
        )
    );
    assert!(started.elapsed() < Duration::from_secs(5), "a refusal is not retried: {:?}", started.elapsed());
    // Not cached: the next request asks again (and fails the same way).
    let (code, _) = status_of(user.get(server.url(path)).send().await.unwrap()).await;
    assert_eq!(code, 500);
    // A non-resource path is authorized too, and fails the same way.
    let (code, v) = status_of(user.get(server.url("/apis")).send().await.unwrap()).await;
    assert_eq!((code, v["reason"].clone()), (500, Value::from("InternalError")), "{v}");

    // (c) A genuine token, but the TokenReview is refused: 401, never 500.
    let robot_token = cp.kubectl(&["create", "token", "default", "-n", "default"]).1.trim().to_string();
    assert!(!robot_token.is_empty());
    let anonymous = client(&server, None);
    for _ in 0..2 {
        let (code, v) =
            status_of(anonymous.get(server.url(path)).bearer_auth(&robot_token).send().await.unwrap()).await;
        assert_eq!(code, 401, "{v}");
        assert_eq!(v["reason"], "Unauthorized");
    }
    let log = server.log();
    assert!(log.contains("tokenreviews.authentication.k8s.io is forbidden"), "the refusal is logged:\n{log}");

    // Probes still need nothing.
    assert_eq!(anonymous.get(server.url("/readyz")).send().await.unwrap().status(), 200);
}

/// A keep-alive connection remembers the token it authenticated with, but only
/// for as long as the token cache answers for that token: once the token's
/// service account is deleted and the cached answer has expired, the next
/// request on the same connection is reviewed again and refused, as it would
/// be on a new connection.
#[tokio::test]
async fn a_revoked_token_is_refused_on_the_connection_that_used_it() {
    let cp = cluster::controlplane();
    let ns = namespace(cp, "reviews-revoked");
    let token = reading_robot(cp, &ns);
    let server = Server::start_with(Options {
        args: ["--authentication", "delegated", "--token-cache-ttl", "1"].map(String::from).to_vec(),
        kubeconfig: Some(cp.kubeconfig.clone()),
        ..Default::default()
    })
    .await;
    // One connection, held here: a pooling client could open another.
    let tls = common::connect(&server, &common::connector(&server.ca_file, &[b"http/1.1"])).await.unwrap();
    let (mut connection, driver) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await.unwrap();
    tokio::spawn(driver);
    let path = format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/llamas");
    let mut status = || {
        let request = hyper::Request::get(&path)
            .header("host", "localhost")
            .header("authorization", format!("Bearer {token}"))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let sent = connection.send_request(request);
        async move {
            let response = sent.await.expect("the connection stays open");
            let status = response.status().as_u16();
            http_body_util::BodyExt::collect(response.into_body()).await.unwrap();
            status
        }
    };
    for _ in 0..3 {
        assert_eq!(status().await, 200);
    }
    let out = cp.kubectl(&["delete", "serviceaccount", ROBOT, "-n", &ns]);
    assert!(out.0, "{out:?}");
    // Within the cache's second the cached answer may still hold; after it, never.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = 200;
    while last == 200 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        last = status().await;
    }
    assert_eq!(last, 401, "the revoked token was still accepted on its connection after 30 s");
}
