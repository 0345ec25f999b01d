//! The request path's filters, against the real binary and (for identities)
//! the real control plane: the request deadline, the in-flight and watch
//! limits, anonymous requests, impersonation and the health reasons kept from
//! callers not authorized for them. Each answer is compared with what
//! kube-apiserver writes for the same case.

use std::time::{Duration, Instant};

use crate::common;
use crate::common::cluster::{self, namespace, ControlPlane};
use crate::common::identity::{client_with_identity, files, status_of};
use crate::common::{llama, succeeds, Options, Server};
use futures::StreamExt;

/// A GET that holds a read slot for about 3 s: the server waits for a
/// resourceVersion it has not reached before answering 504.
fn slow_get(s: &Server, ns: &str) -> String {
    s.llamas(ns, "nobody?resourceVersion=999999999")
}

#[tokio::test]
async fn non_long_running_requests_have_a_deadline_and_watches_do_not() {
    let s = Server::start(&["--request-timeout", "1"]).await;
    let (code, v) = status_of(s.client.get(slow_get(&s, "default")).send().await.unwrap()).await;
    assert_eq!(code, 504, "{v}");
    assert_eq!(v["reason"], "Timeout");
    assert_eq!(v["message"], "Timeout: request did not complete within requested timeout - context deadline exceeded");
    // (The 3 s resourceVersion wait would have answered "Too large resource version".)
    // A client's ?timeout= shortens it; an unparsable one is kube's 400.
    let (code, v) = status_of(s.client.get(s.llamas("default", "?timeout=soon")).send().await.unwrap()).await;
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["message"], "invalid timeout specified in the request URL - time: invalid duration \"soon\"");
    let (code, _) = status_of(s.client.get(s.llamas("default", "?timeout=30s")).send().await.unwrap()).await;
    assert_eq!(code, 200);
    // A watch is long-running: it outlives the request timeout.
    let started = Instant::now();
    let resp = s.client.get(s.llamas("default", "?watch=true&timeoutSeconds=3")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.bytes().await.expect("the watch ends cleanly at its own timeoutSeconds");
    assert!(body.is_empty(), "{body:?}");
    assert!(started.elapsed() >= Duration::from_secs(3));
}

#[tokio::test]
async fn over_the_read_limit_requests_get_429_and_probes_do_not() {
    let s = Server::start(&["--max-requests-inflight", "2", "--request-timeout", "30"]).await;
    // Keep two slow GETs (each holds a read slot for ~3 s) under way until a
    // third GET is refused; on a loaded machine the first ones may end before
    // that, so finished ones are replaced.
    let mut waiting = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        while waiting.iter().filter(|w: &&tokio::task::JoinHandle<_>| !w.is_finished()).count() < 2 {
            waiting.push(tokio::spawn(s.client.get(slow_get(&s, "default")).send()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let resp = s.client.get(s.llamas("default", "")).send().await.unwrap();
        if resp.status() == 429 {
            break resp;
        }
        assert!(Instant::now() < deadline, "never refused: two slow GETs should hold the two read slots");
    };
    assert_eq!(refused.headers()["retry-after"], "1");
    let (_, v) = status_of(refused).await;
    assert_eq!(v["reason"], "TooManyRequests");
    assert_eq!(v["message"], "Too many requests, please try again later.");
    assert_eq!(v["details"]["retryAfterSeconds"], 1);
    for probe in ["/readyz", "/livez", "/healthz"] {
        assert_eq!(s.client.get(s.url(probe)).send().await.unwrap().status(), 200, "{probe} is never refused");
    }
    for w in waiting {
        assert_eq!(w.await.unwrap().unwrap().status(), 504);
    }
    assert_eq!(s.client.get(s.llamas("default", "")).send().await.unwrap().status(), 200, "slots are freed");
}

#[tokio::test]
async fn over_the_mutating_limit_writes_get_429_while_reads_go_on() {
    let s = Server::start(&["--max-mutating-requests-inflight", "1"]).await;
    // A create whose body never finishes holds the one mutating slot, as in
    // kube. On a loaded machine a second create may get in before it, or the
    // stalled one may not have arrived yet: creates are retried (the stalled
    // one replaced if it was answered) until one is refused.
    type Feed = futures::channel::mpsc::UnboundedSender<Result<Vec<u8>, std::io::Error>>;
    let stall = || -> (Feed, tokio::task::JoinHandle<reqwest::Result<reqwest::Response>>) {
        let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Vec<u8>, std::io::Error>>();
        tx.unbounded_send(Ok(b"{\"apiVersion\":".to_vec())).unwrap();
        let request = s
            .client
            .post(s.llamas("default", ""))
            .header("content-type", "application/json")
            .body(reqwest::Body::wrap_stream(rx))
            .send();
        (tx, tokio::spawn(request))
    };
    let mut stalled = stall();
    let mut answered_early = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if stalled.1.is_finished() {
            let (_, done) = std::mem::replace(&mut stalled, stall());
            answered_early.push(format!("{:?}", done.await.map(|r| r.map(|r| r.status()))));
        }
        let resp = s.client.post(s.llamas("default", "")).json(&llama("second", 1.0, 1.0)).send().await.unwrap();
        if resp.status() == 429 {
            assert_eq!(resp.headers()["retry-after"], "1");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a second create was never refused: {}; stalled creates answered early: {answered_early:?}",
            resp.status()
        );
        // It got in before the stalled one: remove it and try again.
        s.client.delete(s.llamas("default", "second")).send().await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(s.client.get(s.llamas("default", "")).send().await.unwrap().status(), 200, "reads have their own limit");
    let (tx, handle) = stalled;
    tx.unbounded_send(Ok(b"\"farm.example.com/v1alpha\",\"kind\":\"Llama\",\"metadata\":{\"name\":\"first\"},\"spec\":{\"weight\":1,\"height\":1}}".to_vec())).unwrap();
    drop(tx);
    assert_eq!(handle.await.unwrap().unwrap().status(), 201);
    let resp = s.client.post(s.llamas("default", "")).json(&llama("third", 1.0, 1.0)).send().await.unwrap();
    assert_eq!(resp.status(), 201, "the slot was freed");
}

#[tokio::test]
async fn watches_are_capped_per_server_until_one_closes() {
    let s = Server::start(&["--max-watches", "3"]).await;
    let watch = || s.client.get(s.llamas("default", "?watch=1")).send();
    let mut open = Vec::new();
    for _ in 0..3 {
        let resp = watch().await.unwrap();
        assert_eq!(resp.status(), 200);
        open.push(resp);
    }
    let (code, v) = status_of(watch().await.unwrap()).await;
    assert_eq!(code, 429, "{v}");
    assert_eq!(v["reason"], "TooManyRequests");
    // Non-watch reads are not affected.
    assert_eq!(s.client.get(s.llamas("default", "")).send().await.unwrap().status(), 200);
    drop(open.pop());
    succeeds("a closed watch frees its slot", Duration::from_secs(30), || async {
        watch().await.map(|r| r.status() == 200).unwrap_or(false)
    })
    .await;
}

/// A server on the control plane's cluster with delegated authentication, not
/// registered behind the aggregator (these tests call it directly).
async fn delegated(cp: &ControlPlane, extra: &[&str]) -> Server {
    let mut args = vec!["--authentication".to_string(), "delegated".to_string()];
    args.extend(extra.iter().map(|a| a.to_string()));
    Server::start_with(Options { args, kubeconfig: Some(cp.kubeconfig.clone()), ..Default::default() }).await
}

/// An HTTPS client without credentials.
fn anonymous(s: &Server) -> reqwest::Client {
    common::client_trusting(&s.ca_file).unwrap()
}

#[tokio::test]
async fn anonymous_requests_are_authorized_like_anyone_else() {
    let cp = cluster::controlplane();
    let s = delegated(cp, &[]).await;
    // The cluster's RBAC opens /version to everyone (system:public-info-viewer).
    let resp = anonymous(&s).get(s.url("/version")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let (code, v) = status_of(anonymous(&s).get(s.llamas("default", "")).send().await.unwrap()).await;
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        "llamas.farm.example.com is forbidden: User \"system:anonymous\" cannot list resource \"llamas\" in API group \"farm.example.com\" in the namespace \"default\""
    );
    // A presented but invalid credential is never anonymous.
    let resp = anonymous(&s).get(s.url("/version")).bearer_auth("not-a-token").send().await.unwrap();
    assert_eq!(resp.status(), 401);
    // RBAC granted to system:anonymous applies.
    let ns = namespace(cp, "anonymous-readers");
    cp.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: anonymous-llama-reader, namespace: {ns}}}
rules:
- {{apiGroups: [farm.example.com], resources: [llamas], verbs: [list]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: anonymous-llama-reader, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: anonymous-llama-reader}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: system:anonymous}}]
"
    ));
    succeeds("RBAC for system:anonymous applies", Duration::from_secs(30), || async {
        anonymous(&s).get(s.llamas(&ns, "")).send().await.map(|r| r.status() == 200).unwrap_or(false)
    })
    .await;

    // --anonymous-auth=false: 401, except on the probe paths.
    let closed = delegated(cp, &["--anonymous-auth=false"]).await;
    let (code, v) = status_of(anonymous(&closed).get(closed.url("/version")).send().await.unwrap()).await;
    assert_eq!(code, 401, "{v}");
    assert_eq!(v["reason"], "Unauthorized");
    for probe in ["/readyz", "/livez", "/healthz"] {
        assert_eq!(anonymous(&closed).get(closed.url(probe)).send().await.unwrap().status(), 200, "{probe}");
    }
}

#[tokio::test]
async fn anonymous_requests_through_the_aggregator_reach_us_as_system_anonymous() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "aggregated-anonymous");
    cp.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: anonymous-llama-reader, namespace: {ns}}}
rules:
- {{apiGroups: [farm.example.com], resources: [llamas], verbs: [get, list]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: anonymous-llama-reader, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: anonymous-llama-reader}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:unauthenticated}}]
"
    ));
    // kube-apiserver authenticates the anonymous caller, authorizes it, and
    // forwards it to us as system:anonymous in system:unauthenticated.
    let kube = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(&std::fs::read(common::identity::path_of(cp, "caFile")).unwrap()).unwrap(),
        )
        .build()
        .unwrap();
    let url = format!("{}/apis/farm.example.com/v1alpha/namespaces/{ns}/llamas", cp.server);
    succeeds("an anonymous list through the aggregator", Duration::from_secs(30), || async {
        kube.get(&url).send().await.map(|r| r.status() == 200).unwrap_or(false)
    })
    .await;
    let (code, v) = status_of(kube.get(format!("{url}/missing")).send().await.unwrap()).await;
    assert_eq!(code, 404, "anonymous get reaches farm-apiserver and its NotFound comes back: {v}");
}

#[tokio::test]
async fn impersonation_is_reviewed_as_kube_reviews_it() {
    let cp = cluster::controlplane();
    let s = delegated(cp, &["--authorization-allow-ttl", "0", "--authorization-deny-ttl", "0"]).await;
    let (cert, key) = files(cp, "userCertFile", "userKeyFile");
    let user = client_with_identity(&s, &cert, &key);
    let me = whoami(&cert);
    let ns = namespace(cp, "impersonation");
    let list = s.llamas(&ns, "");
    // Not allowed to impersonate: kube's 403 for the `users` it asked for.
    let (code, v) = status_of(user.get(&list).header("Impersonate-User", "bob").send().await.unwrap()).await;
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        format!("users \"bob\" is forbidden: User \"{me}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope")
    );
    assert_eq!(v["details"]["kind"], "users");
    // Groups without a user: kube's 400.
    let (code, v) = status_of(user.get(&list).header("Impersonate-Group", "devs").send().await.unwrap()).await;
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["message"], "requested [{Group  devs    }] without impersonating a user");
    // Allowed to impersonate bob and the group llama-readers, which may list llamas.
    cp.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: impersonate-bob}}
rules:
- {{apiGroups: [\"\"], resources: [users], verbs: [impersonate], resourceNames: [bob]}}
- {{apiGroups: [\"\"], resources: [groups], verbs: [impersonate], resourceNames: [llama-readers]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: impersonate-bob}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: impersonate-bob}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: \"{me}\"}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: llama-lister, namespace: {ns}}}
rules:
- {{apiGroups: [farm.example.com], resources: [llamas], verbs: [list]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: llama-readers, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: llama-lister}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: Group, name: llama-readers}}]
"
    ));
    let as_bob = |groups: &[&str], extra: Option<&str>| {
        let mut r = user.get(&list).header("Impersonate-User", "bob");
        for g in groups {
            r = r.header("Impersonate-Group", *g);
        }
        if let Some(scope) = extra {
            r = r.header("Impersonate-Extra-Scopes", scope);
        }
        r.send()
    };
    succeeds("the impersonation grant applies", Duration::from_secs(30), || async {
        as_bob(&["llama-readers"], None).await.map(|r| r.status() == 200).unwrap_or(false)
    })
    .await;
    // As bob alone, the request is bob's, and bob may not list.
    let (code, v) = status_of(as_bob(&[], None).await.unwrap()).await;
    assert_eq!(code, 403, "{v}");
    assert!(v["message"].as_str().unwrap().contains("User \"bob\" cannot list resource \"llamas\""), "{v}");
    // An extra that was not granted is refused on its own `userextras/<key>`.
    let (code, v) = status_of(as_bob(&["llama-readers"], Some("admin")).await.unwrap()).await;
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        format!("userextras.authentication.k8s.io \"admin\" is forbidden: User \"{me}\" cannot impersonate resource \"userextras/scopes\" in API group \"authentication.k8s.io\" at the cluster scope")
    );
    // system:masters may impersonate anyone: as system:anonymous the request is refused as anonymous.
    let (cert, key) = files(cp, "adminCertFile", "adminKeyFile");
    let admin = client_with_identity(&s, &cert, &key);
    let (code, v) =
        status_of(admin.get(&list).header("Impersonate-User", "system:anonymous").send().await.unwrap()).await;
    assert_eq!(code, 403, "{v}");
    assert!(v["message"].as_str().unwrap().contains("User \"system:anonymous\" cannot list"), "{v}");
}

/// Lets `user` and system:anonymous use `verbs` on the Llamas of `ns`.
fn grant_llamas(cp: &ControlPlane, ns: &str, role: &str, verbs: &str, user: &str) {
    cp.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: {role}, namespace: {ns}}}
rules:
- {{apiGroups: [farm.example.com], resources: [llamas], verbs: [{verbs}]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {role}, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {role}}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: \"{user}\"}}
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: system:anonymous}}
"
    ));
}

/// The common name of a certificate (the user a client certificate authenticates as).
fn whoami(cert_pem: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.pem");
    std::fs::write(&path, cert_pem).unwrap();
    let out = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-subject", "-nameopt", "multiline", "-in"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let cn =
        text.lines().find_map(|l| l.trim().strip_prefix("commonName").map(|r| r.trim_start_matches([' ', '=']).trim()));
    cn.unwrap_or_else(|| panic!("no CN in {text}")).to_string()
}

#[tokio::test]
async fn health_reasons_are_withheld_unless_the_caller_is_authorized() {
    let cp = cluster::controlplane();
    // etcd on a port nobody listens on: the etcd readiness check fails.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let s = Server::start_with(Options {
        args: ["--authentication", "delegated", "--storage", "etcd", "--etcd-servers"]
            .iter()
            .map(|a| a.to_string())
            .chain([format!("http://127.0.0.1:{port}")])
            .collect(),
        kubeconfig: Some(cp.kubeconfig.clone()),
        ready_path: Some("/livez".into()),
        ..Default::default()
    })
    .await;
    let resp = anonymous(&s).get(s.url("/readyz?verbose")).send().await.unwrap();
    assert_eq!(resp.status(), 500);
    let text = resp.text().await.unwrap();
    assert!(text.contains("[-]etcd failed: reason withheld\n"), "{text}");
    assert!(!text.contains("unreachable"), "{text}");
    // /readyz/etcd is not an always-allowed path: anonymous callers are refused,
    // and a caller authorized for it sees the reason.
    let resp = anonymous(&s).get(s.url("/readyz/etcd")).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    let (cert, key) = files(cp, "adminCertFile", "adminKeyFile");
    let admin = client_with_identity(&s, &cert, &key);
    let text = admin.get(s.url("/readyz/etcd")).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("[-]etcd failed: ") && !text.contains("reason withheld"), "{text}");
}

#[tokio::test]
async fn watches_are_capped_per_user() {
    let cp = cluster::controlplane();
    let s = delegated(cp, &["--max-watches-per-user", "2"]).await;
    let (cert, key) = files(cp, "userCertFile", "userKeyFile");
    let me = whoami(&cert);
    let ns = namespace(cp, "watch-caps");
    grant_llamas(cp, &ns, "llama-watcher", "list, watch", &me);
    let user = client_with_identity(&s, &cert, &key);
    let url = s.llamas(&ns, "?watch=1");
    succeeds("the watch grant applies", Duration::from_secs(30), || async {
        user.get(s.llamas(&ns, "")).send().await.map(|r| r.status() == 200).unwrap_or(false)
    })
    .await;
    let mut open = Vec::new();
    for _ in 0..2 {
        let resp = user.get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        open.push(resp);
    }
    let (code, v) = status_of(user.get(&url).send().await.unwrap()).await;
    assert_eq!(code, 429, "{v}");
    // Another user is not affected.
    let resp = anonymous(&s).get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    drop(open.pop());
    succeeds("a closed watch frees the user's slot", Duration::from_secs(30), || async {
        user.get(&url).send().await.map(|r| r.status() == 200).unwrap_or(false)
    })
    .await;
}

/// Without API Priority and Fairness, one user holds at most a quarter of
/// the read slots: beyond, that user gets 429 while another user's requests
/// are still served.
#[tokio::test]
async fn one_user_cannot_take_every_read_slot() {
    let cp = cluster::controlplane();
    let s = delegated(
        cp,
        &["--max-requests-inflight", "8", "--request-timeout", "30", "--enable-priority-and-fairness=false"],
    )
    .await;
    let (cert, key) = files(cp, "userCertFile", "userKeyFile");
    let me = whoami(&cert);
    let ns = namespace(cp, "read-share");
    grant_llamas(cp, &ns, "llama-reader", "get, list", &me);
    let user = client_with_identity(&s, &cert, &key);
    succeeds("the read grant applies", Duration::from_secs(30), || async {
        user.get(s.llamas(&ns, "")).send().await.map(|r| r.status() == 200).unwrap_or(false)
    })
    .await;
    // Keep two slow GETs of the user under way (each holds a slot ~3 s) until
    // the user's next GET is refused; finished ones are replaced.
    let mut waiting = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        while waiting.iter().filter(|w: &&tokio::task::JoinHandle<_>| !w.is_finished()).count() < 2 {
            waiting.push(tokio::spawn(user.get(slow_get(&s, &ns)).send()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (code, v) = status_of(user.get(s.llamas(&ns, "")).send().await.unwrap()).await;
        if code == 429 {
            assert_eq!(v["message"], "Too many requests, please try again later.");
            // Six of the eight slots are free: another user is served meanwhile.
            let other = anonymous(&s).get(s.llamas(&ns, "")).send().await.unwrap();
            if waiting.iter().filter(|w| !w.is_finished()).count() == 2 {
                assert_eq!(other.status(), 200, "another user is served while the first holds its share");
                break;
            }
        }
        assert!(Instant::now() < deadline, "never refused: two slow GETs should hold the user's two slots");
    }
    for w in waiting {
        let _ = w.await;
    }
}

/// 2,000 LISTs of 1,000 Llamas at once, whose readers never read the body:
/// the read limit refuses what is over it with 429, the bodies waiting for
/// slow readers stay bounded (each held response keeps its slot), memory stays
/// well below the Deployment's 256 MiB limit, and probes and writes go on.
#[tokio::test]
async fn a_flood_of_slow_lists_is_bounded() {
    let s = Server::start(&[]).await;
    let creates = futures::stream::iter(0..1000)
        .map(|i| s.client.post(s.llamas("flood", "")).json(&llama(&format!("llama-{i}"), 1.0 + i as f64, 1.5)).send())
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    assert!(creates.iter().all(|r| r.as_ref().is_ok_and(|r| r.status() == 201)));
    let rss_before = common::rss_mib(s.pid());
    // HTTP/2 with many streams per connection: 2,000 requests need no 2,000 sockets.
    let clients: Vec<reqwest::Client> = (0..20)
        .map(|_| {
            reqwest::Client::builder()
                .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(&s.ca_file).unwrap()).unwrap())
                .http2_prior_knowledge()
                .http2_initial_stream_window_size(16 * 1024)
                .build()
                .unwrap()
        })
        .collect();
    let url = s.llamas("flood", "");
    let held: Vec<Result<reqwest::Response, reqwest::Error>> = futures::stream::iter(0..2000)
        .map(|i| clients[i % clients.len()].get(&url).send())
        .buffer_unordered(2000)
        .collect()
        .await;
    let mut codes = std::collections::BTreeMap::new();
    for r in &held {
        *codes.entry(r.as_ref().map(|r| r.status().as_u16()).unwrap_or(0)).or_insert(0) += 1;
    }
    // The responses are held unread: their slots stay taken.
    assert!(codes.get(&429).copied().unwrap_or(0) >= 1000, "over the 400 read slots, lists are refused: {codes:?}");
    assert_eq!(codes.keys().filter(|c| **c != 200 && **c != 429).count(), 0, "{codes:?}");
    let rss_flooded = common::rss_mib(s.pid());
    assert!(rss_flooded < 256.0, "RSS {rss_flooded:.0} MiB (before the flood {rss_before:.0} MiB)");
    for probe in ["/readyz", "/livez"] {
        assert_eq!(s.client.get(s.url(probe)).send().await.unwrap().status(), 200);
    }
    let write = s.client.post(s.llamas("flood", "")).json(&llama("during-the-flood", 2.0, 2.0)).send().await;
    assert_eq!(write.unwrap().status(), 201, "writes have slots of their own");
    println!("slow-list flood: {codes:?}, RSS {rss_before:.0} MiB before, {rss_flooded:.0} MiB flooded");
    drop(held);
    succeeds("read slots are freed once the held bodies are dropped", Duration::from_secs(30), || async {
        s.client.get(s.llamas("flood", "")).send().await.is_ok_and(|r| r.status() == 200)
    })
    .await;
}

/// `--requestheader-client-ca-file` alone (no ConfigMap to read header names
/// from) trusts kube's default header names, as kube does.
#[tokio::test]
async fn a_front_proxy_ca_from_a_flag_uses_kubes_default_header_names() {
    let cp = cluster::controlplane();
    let s = delegated(
        cp,
        &[
            "--authentication-configmap",
            "kube-system/no-such-configmap",
            "--requestheader-client-ca-file",
            &common::identity::path_of(cp, "frontProxyCAFile"),
        ],
    )
    .await;
    let (cert, key) = files(cp, "frontProxyClientCertFile", "frontProxyClientKeyFile");
    let proxy = client_with_identity(&s, &cert, &key);
    let resp = proxy
        .get(s.llamas("default", ""))
        .header("X-Remote-User", "someone")
        .header("X-Remote-Group", "system:masters")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "X-Remote-User and X-Remote-Group were read: {}", resp.text().await.unwrap());
}

/// A merge patch of `labels` labels: ~35 bytes each, seconds of CPU at 60,000
/// in a debug build (merging, validating every label, managed fields).
fn labels_patch(labels: usize, prefix: &str) -> Vec<u8> {
    let labels: serde_json::Map<String, serde_json::Value> =
        (0..labels).map(|i| (format!("{prefix}{i:05}"), serde_json::Value::String(format!("v{i}")))).collect();
    serde_json::to_vec(&serde_json::json!({"metadata": {"labels": labels}})).unwrap()
}

/// A write whose computation is still running at its deadline is answered
/// 504, as kube answers at the deadline, and is not made. (A computation
/// holds its thread, and with it the request's timer: before, it ran to the
/// end, was stored, and answered 200 long after the deadline.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_still_computing_at_its_deadline_is_answered_504_and_not_made() {
    let s = Server::start(&[]).await;
    let r = s.client.post(s.llamas("default", "")).json(&llama("wide", 1.0, 1.0)).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let patch = labels_patch(60_000, "l");
    let send = |query: String| {
        s.client
            .patch(s.llamas("default", &format!("wide{query}")))
            .header("Content-Type", "application/merge-patch+json")
            .body(patch.clone())
            .send()
    };
    // How long the whole computation takes here, as a dry run.
    let started = Instant::now();
    assert_eq!(send("?dryRun=All".into()).await.unwrap().status(), 200);
    let whole = started.elapsed();
    // A deadline a third of the way into it.
    let timeout = (whole / 3).max(Duration::from_millis(20));
    let (code, v) = status_of(send(format!("?timeout={}ms", timeout.as_millis())).await.unwrap()).await;
    assert_eq!(code, 504, "{v} (the whole computation takes {whole:?}, the deadline was {timeout:?})");
    assert_eq!(v["reason"], "Timeout");
    assert_eq!(v["message"], "Timeout: request did not complete within requested timeout - context deadline exceeded");
    let stored: serde_json::Value =
        s.client.get(s.llamas("default", "wide")).send().await.unwrap().json().await.unwrap();
    assert!(stored["metadata"]["labels"].get("l00000").is_none(), "the write was made past its deadline");
    // Given the time, the same patch is made.
    assert_eq!(send(String::new()).await.unwrap().status(), 200);
}

/// Large computations take turns per user, round robin: with one user's
/// dozen large patches waiting for the turns, another user's large patch
/// waits for about one of them, not for all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_writes_take_turns_fairly_between_users() {
    const FLOOD: usize = 12;
    let cp = cluster::controlplane();
    let s = delegated(cp, &["--request-timeout", "120"]).await;
    let (cert, key) = files(cp, "userCertFile", "userKeyFile");
    let me = whoami(&cert);
    let ns = namespace(cp, "fair-turns");
    grant_llamas(cp, &ns, "llama-patcher", "get, list, create, patch", &me);
    let calm = client_with_identity(&s, &cert, &key);
    succeeds("the grant applies", Duration::from_secs(30), || async {
        calm.get(s.llamas(&ns, "")).send().await.map(|r| r.status() == 200).unwrap_or(false)
    })
    .await;
    // The flooding user is the suite's own client; each patch has its own Llama.
    for i in 0..FLOOD {
        let r = s.client.post(s.llamas(&ns, "")).json(&llama(&format!("flood-{i}"), 1.0, 1.0)).send().await.unwrap();
        assert_eq!(r.status(), 201);
    }
    let r = calm.post(s.llamas(&ns, "")).json(&llama("calm", 1.0, 1.0)).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let patch = labels_patch(20_000, "f");
    let started = Instant::now();
    let flood: Vec<_> = (0..FLOOD)
        .map(|i| {
            let request = s
                .client
                .patch(s.llamas(&ns, &format!("flood-{i}")))
                .header("Content-Type", "application/merge-patch+json")
                .body(patch.clone())
                .send();
            tokio::spawn(async move { (request.await.map(|r| r.status().as_u16()), started.elapsed()) })
        })
        .collect();
    // Their bodies are read well before this; they wait for turns.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calm_sent = started.elapsed();
    let r = calm
        .patch(s.llamas(&ns, "calm"))
        .header("Content-Type", "application/merge-patch+json")
        .body(patch.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let calm_done = started.elapsed();
    let mut flood_done = Vec::new();
    for f in flood {
        let (code, done) = f.await.unwrap();
        assert_eq!(code.unwrap(), 200);
        flood_done.push(done);
    }
    flood_done.sort();
    // What the calm patch waited for: the flood's patches that finished
    // while it was in flight (those done before it was sent were not in its way).
    let before_calm = flood_done.iter().filter(|d| **d > calm_sent && **d < calm_done).count();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    println!(
        "calm patch sent at {calm_sent:?}, done at {calm_done:?}, after {before_calm} of {FLOOD} flood patches: {flood_done:?}"
    );
    // Those computing when it arrived, and one that took the other turn
    // while it computed and was quicker.
    assert!(
        before_calm <= cores + 2,
        "the calm user's patch waited for {before_calm} of the flood's {FLOOD} (sent at {calm_sent:?}, done at {calm_done:?}: {flood_done:?})"
    );
    let unfinished = flood_done.iter().filter(|d| **d > calm_done).count();
    assert!(unfinished > 0, "the flood's patches all finished before the calm one: make them heavier");
}
