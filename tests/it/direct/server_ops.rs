//! Discovery, OpenAPI, probes, metrics, certificates, configuration checks and
//! graceful shutdown of the real binary.

use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::{client_trusting, llama, Server, GROUP_PATH};
use serde_json::{json, Value};

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

#[tokio::test]
async fn discovery_documents() {
    let s = Server::start(&[]).await;
    let v: Value = s.client.get(s.url("/apis")).send().await.unwrap().json().await.unwrap();
    assert_eq!(v["kind"], "APIGroupList");
    assert_eq!(v["groups"][0]["name"], "farm.example.com");
    assert_eq!(v["groups"][0]["preferredVersion"]["groupVersion"], "farm.example.com/v1beta1");
    let versions: Vec<&str> =
        v["groups"][0]["versions"].as_array().unwrap().iter().map(|v| v["version"].as_str().unwrap()).collect();
    assert_eq!(versions, ["v1beta1", "v1alpha"]);

    let r =
        s.client.get(s.url("/apis")).header("Accept", format!("{AGGREGATED},application/json")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], AGGREGATED);
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["kind"], "APIGroupDiscoveryList");
    assert_eq!(v["apiVersion"], "apidiscovery.k8s.io/v2");
    let in_version = |i: usize| {
        let version = &v["items"][0]["versions"][i];
        let resources = version["resources"].as_array().unwrap().iter();
        (version["version"].clone(), resources.map(|r| r["resource"].as_str().unwrap().to_string()).collect::<Vec<_>>())
    };
    assert_eq!(in_version(0), (json!("v1beta1"), vec!["llamas".to_string(), "herds".to_string()]));
    assert_eq!(in_version(1), (json!("v1alpha"), vec!["llamas".to_string(), "farmpods".to_string()]));
    let res = &v["items"][0]["versions"][0]["resources"][0];
    assert_eq!(res["resource"], "llamas");
    assert_eq!(res["scope"], "Namespaced");
    assert_eq!(res["responseKind"]["kind"], "Llama");
    assert_eq!(res["shortNames"], json!(["ll"]));
    assert!(res["categories"].as_array().unwrap().contains(&json!("farm")));
    assert_eq!(res["subresources"][0]["subresource"], "status");
    // A Herd's scale subresource answers an autoscaling/v1 Scale.
    let herds = &v["items"][0]["versions"][0]["resources"][1];
    assert_eq!(
        herds["subresources"],
        json!([
            {"subresource": "status", "responseKind": {"group": "farm.example.com", "version": "v1beta1", "kind": "Herd"},
                "verbs": ["get", "patch", "update"]},
            {"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                "verbs": ["get", "patch", "update"]}
        ])
    );
    let r =
        s.client.get(s.url("/apis")).header("Accept", AGGREGATED).header("If-None-Match", &etag).send().await.unwrap();
    assert_eq!(r.status(), 304);

    let v: Value = s.client.get(s.url("/apis/farm.example.com")).send().await.unwrap().json().await.unwrap();
    assert_eq!(v["kind"], "APIGroup");
    assert_eq!(v["name"], "farm.example.com");
    let v: Value = s.client.get(s.url(GROUP_PATH)).send().await.unwrap().json().await.unwrap();
    assert_eq!(v["kind"], "APIResourceList");
    assert_eq!(v["groupVersion"], "farm.example.com/v1alpha");
    let llamas = v["resources"].as_array().unwrap().iter().find(|r| r["name"] == "llamas").unwrap();
    assert_eq!(llamas["singularName"], "llama");
    assert_eq!(llamas["kind"], "Llama");
    assert_eq!(llamas["namespaced"], true);
    let verbs: Vec<&str> = llamas["verbs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for verb in ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"] {
        assert!(verbs.contains(&verb), "{verb} in {verbs:?}");
    }
    assert!(v["resources"].as_array().unwrap().iter().any(|r| r["name"] == "llamas/status"));
    let v: Value = s.client.get(s.url("/apis/farm.example.com/v1beta1")).send().await.unwrap().json().await.unwrap();
    let scale = v["resources"].as_array().unwrap().iter().find(|r| r["name"] == "herds/scale").unwrap();
    assert_eq!(
        *scale,
        json!({"name": "herds/scale", "singularName": "", "namespaced": true, "group": "autoscaling", "version": "v1",
            "kind": "Scale", "verbs": ["get", "patch", "update"]})
    );

    let v: Value = s.client.get(s.url("/api")).send().await.unwrap().json().await.unwrap();
    assert_eq!(v["kind"], "APIVersions");
    let v: Value = s.client.get(s.url("/version")).send().await.unwrap().json().await.unwrap();
    assert!(v["gitVersion"].as_str().unwrap().starts_with('v'));
    let r = s.client.get(s.url("/apis/nothing.example.com")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = s.client.post(s.url("/apis")).send().await.unwrap();
    assert_eq!(r.status(), 405);
}

#[tokio::test]
async fn openapi_describes_llamas() {
    let s = Server::start(&[]).await;
    let idx: Value = s.client.get(s.url("/openapi/v3")).send().await.unwrap().json().await.unwrap();
    let url = idx["paths"]["apis/farm.example.com/v1alpha"]["serverRelativeURL"].as_str().unwrap().to_string();
    let doc: Value = s.client.get(s.url(&url)).send().await.unwrap().json().await.unwrap();
    let llama = &doc["components"]["schemas"]["com.example.farm.v1alpha.Llama"];
    assert_eq!(llama["x-kubernetes-group-version-kind"][0]["kind"], "Llama");
    assert_eq!(llama["properties"]["spec"]["properties"]["weight"]["type"], "number");
    let patch = &doc["paths"]["/apis/farm.example.com/v1alpha/namespaces/{namespace}/llamas/{name}"]["patch"];
    assert!(patch["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation"));
    let v2: Value = s.client.get(s.url("/openapi/v2")).send().await.unwrap().json().await.unwrap();
    assert_eq!(v2["swagger"], "2.0");
    assert!(v2["definitions"]["com.example.farm.v1alpha.Llama"].is_object());
}

#[tokio::test]
async fn probes_and_metrics() {
    let s = Server::start(&[]).await;
    for p in ["/healthz", "/livez", "/readyz"] {
        let r = s.client.get(s.url(p)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{p}");
        assert_eq!(r.text().await.unwrap(), "ok");
    }
    let text = s.client.get(s.url("/readyz?verbose")).send().await.unwrap().text().await.unwrap();
    assert!(
        text.contains("[+]ping ok") && text.contains("[+]shutdown ok") && text.ends_with("readyz check passed\n"),
        "{text}"
    );
    let r = s.client.get(s.url("/readyz/nonexistent")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    s.client.post(s.llamas("default", "")).json(&llama("m", 1.0, 1.0)).send().await.unwrap();
    s.client.get(s.llamas("default", "m")).send().await.unwrap();
    let text = s.client.get(s.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(
        text.contains("farm_apiserver_requests_total{verb=\"create\",resource=\"llamas\",code=\"201\"} 1"),
        "{text}"
    );
    assert!(text.contains("farm_apiserver_request_duration_seconds_bucket{"), "{text}");
    assert!(text.contains("farm_apiserver_stored_objects{resource=\"llamas\"} 1"), "{text}");
    assert!(text.contains("farm_apiserver_open_watches"), "{text}");
}

#[tokio::test]
async fn sigterm_ends_watches_and_exits_cleanly() {
    let mut s = Server::start(&[]).await;
    let r = s.client.get(format!("{}?watch=true", s.llamas("default", ""))).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let body = tokio::spawn(async move { r.text().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = s.terminate().await;
    assert!(status.success(), "exit status {status}\n{}", s.log());
    let ended = tokio::time::timeout(Duration::from_secs(5), body).await.expect("watch ended").unwrap();
    assert!(ended.is_ok(), "watch ended cleanly: {ended:?}");
    assert!(s.log().contains("shutting down"), "{}", s.log());
}

/// A create on an HTTP/1.1 connection of its own whose body stops after 10
/// bytes: in flight until the rest (`body[10..]`) is written.
async fn slow_create(s: &Server) -> (tokio_rustls::client::TlsStream<tokio::net::TcpStream>, Vec<u8>) {
    use tokio::io::AsyncWriteExt as _;
    let mut slow = common::connect(s, &common::connector(&s.ca_file, &[b"http/1.1"])).await.unwrap();
    let body = serde_json::to_vec(&llama("slow", 1.0, 1.0)).unwrap();
    let head = format!(
        "POST {GROUP_PATH}/namespaces/default/llamas HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    slow.write_all(&body[..10]).await.unwrap();
    slow.flush().await.unwrap();
    (slow, body)
}

/// kube-apiserver's shutdown sequence: on SIGTERM /readyz fails at once
/// while requests, new connections and watches are still served for
/// --shutdown-delay-duration; then new connections are refused and watches
/// end; a request still in flight when --shutdown-grace is over is answered
/// 429 with Retry-After instead of losing its connection.
#[tokio::test]
async fn sigterm_fails_readyz_serves_through_the_delay_then_answers_what_is_left() {
    use tokio::io::AsyncReadExt as _;
    let mut s = Server::start(&["--shutdown-delay-duration", "5s", "--shutdown-grace", "2"]).await;
    let watch = s.client.get(format!("{}?watch=true", s.llamas("default", ""))).send().await.unwrap();
    assert_eq!(watch.status(), 200);
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let watching = tokio::spawn(async move {
        let mut watch = watch;
        loop {
            match watch.chunk().await {
                Ok(Some(chunk)) => {
                    let _ = events_tx.send(String::from_utf8_lossy(&chunk).to_string());
                }
                Ok(None) => return Ok(()),
                Err(e) => return Err(e.to_string()),
            }
        }
    });
    // A create whose body is still arriving when the grace ends.
    let (mut slow, _) = slow_create(&s).await;

    let pid = s.pid().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut readyz = 0;
    for _ in 0..100 {
        readyz = s.client.get(s.url("/readyz")).send().await.unwrap().status().as_u16();
        if readyz != 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(readyz, 500, "/readyz fails once SIGTERM is received");
    // Still served in the delay, on a new connection too, and watched.
    let fresh = client_trusting(&s.ca_file).unwrap();
    let r = fresh.post(s.llamas("default", "")).json(&llama("late", 1.0, 1.0)).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let seen = tokio::time::timeout(Duration::from_secs(5), events.recv()).await.expect("the watch sees the create");
    assert!(seen.unwrap().contains("\"late\""));
    // The delay ends: the watch ends cleanly, and nothing new is accepted.
    let ended = tokio::time::timeout(Duration::from_secs(30), watching).await.expect("the watch ended").unwrap();
    assert_eq!(ended, Ok(()), "the watch ended cleanly");
    assert!(
        client_trusting(&s.ca_file).unwrap().get(s.url("/livez")).send().await.is_err(),
        "new connections are refused"
    );
    // The grace ends: the slow create is answered, not cut.
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), slow.read_to_end(&mut answer)).await.expect("answered");
    let answer = String::from_utf8_lossy(&answer);
    assert!(read.is_ok() || !answer.is_empty(), "{read:?}\n{}", s.log());
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("retry-after: 5"), "{answer}");
    assert!(answer.contains("The apiserver is shutting down, please try again later."), "{answer}");
    let status = s.terminate().await;
    assert!(status.success(), "exit status {status}\n{}", s.log());
}

/// With --shutdown-send-retry-after, kube-apiserver's other way to stop:
/// after the delay the server keeps listening, answers new requests 429
/// with Retry-After and `Connection: close` (probes excepted), lets the
/// request in flight finish, and exits once it has, well before the grace.
#[tokio::test]
async fn with_send_retry_after_new_requests_are_told_to_retry_while_in_flight_ones_finish() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut s = Server::start(&[
        "--shutdown-delay-duration",
        "1",
        "--shutdown-grace",
        "20",
        "--shutdown-send-retry-after=true",
    ])
    .await;
    // A create whose body is still arriving after the delay.
    let (mut slow, body) = slow_create(&s).await;

    let pid = s.pid().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    // HTTP/1.1, where the answer can say that the connection closes.
    let pem = std::fs::read(&s.ca_file).unwrap();
    let fresh = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .http1_only()
        .build()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let r = fresh.get(s.llamas("default", "")).send().await.unwrap();
        if r.status() == 429 {
            break r;
        }
        assert_eq!(r.status(), 200, "served through the delay");
        assert!(std::time::Instant::now() < deadline, "never answered 429");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(refused.headers()["retry-after"], "5");
    assert_eq!(refused.headers()["connection"], "close");
    let v: Value = refused.json().await.unwrap();
    assert_eq!(v["message"], "The apiserver is shutting down, please try again later.");
    // Probes are still answered, on a new connection too.
    let readyz = client_trusting(&s.ca_file).unwrap().get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(readyz.status(), 500, "/readyz answers, failing");
    // The request in flight finishes, and the server exits without waiting out the grace.
    slow.write_all(&body[10..]).await.unwrap();
    slow.flush().await.unwrap();
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), slow.read(&mut answer)).await.expect("answered").unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    drop(slow);
    let started = std::time::Instant::now();
    let status = s.terminate().await;
    assert!(status.success(), "exit status {status}\n{}", s.log());
    assert!(started.elapsed() < Duration::from_secs(15), "exited {:?} after the last request", started.elapsed());
}

#[tokio::test]
async fn port_zero_binds_a_free_port_and_logs_it() {
    let dir = tempfile::tempdir().unwrap();
    let log_file = dir.path().join("server.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_farm-apiserver"))
        .args(["--bind", "127.0.0.1:0", "--cert-dir"])
        .arg(dir.path().join("certs"))
        .env("KUBECONFIG", dir.path().join("no-cluster"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stderr(std::fs::File::create(&log_file).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let address = loop {
        let log = std::fs::read_to_string(&log_file).unwrap();
        let found = log.lines().find_map(|l| {
            l.contains("farm-apiserver serving").then(|| l.split_once("address=")).flatten().map(|(_, rest)| {
                rest.split_whitespace().next().unwrap_or_default().parse::<std::net::SocketAddr>().unwrap()
            })
        });
        if let Some(address) = found {
            // A log file gets plain text: no terminal escape codes.
            assert!(!log.contains('\x1b'), "{log}");
            break address;
        }
        if std::time::Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("no address logged:\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_ne!(address.port(), 0);
    let client = client_trusting(&dir.path().join("certs/ca.crt")).unwrap();
    let r = client.get(format!("https://{address}/livez")).send().await.unwrap();
    let _ = child.kill();
    assert_eq!(r.status(), 200);
}

#[test]
fn refuses_authentication_none_off_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_farm-apiserver"))
        .args(["--bind", "0.0.0.0:0", "--authentication", "none", "--cert-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("only allowed on a loopback address"), "{err}");
}

#[test]
fn a_tracing_configuration_kube_would_refuse_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tracing.yaml");
    std::fs::write(
        &config,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nsamplingRatePerMillion: 2000000\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let err = common::refuses_to_start(&["--authentication", "none", "--tracing-config-file", &config]);
    assert!(err.contains(&format!("--tracing-config-file {config}")), "{err}");
    assert!(err.contains("sampling rate per million must be less than or equal to one million"), "{err}");
}

/// `--version` is one line, `farm-apiserver 0.1.0 (rev 92fa3f0, 2026-11-26)`:
/// the revision `FARM_SOURCE_REVISION` gave the build, else git's HEAD when
/// built from a checkout; `/version` carries the same revision as gitCommit.
#[tokio::test]
async fn version_names_the_source_revision() {
    let out = Command::new(env!("CARGO_BIN_EXE_farm-apiserver")).arg("--version").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let line = String::from_utf8(out.stdout).unwrap();
    let rest = line
        .strip_suffix('\n')
        .and_then(|l| l.strip_prefix(concat!("farm-apiserver ", env!("CARGO_PKG_VERSION"), " (rev ")));
    let detail = rest.and_then(|r| r.strip_suffix(')')).unwrap_or_else(|| panic!("not the --version line: {line:?}"));
    let (revision, date) = detail.split_once(", ").map_or((detail, None), |(r, d)| (r, Some(d)));
    // What build.rs saw when this build ran: the variable, else git's HEAD.
    let given = option_env!("FARM_SOURCE_REVISION").map(str::trim).filter(|r| !r.is_empty());
    let head = Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "--short=7", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match (given, head) {
        (Some(given), _) => assert!(revision == given && date.is_none(), "{line}"),
        (None, Some(head)) => {
            assert_eq!(revision, head, "{line}");
            let date = date.unwrap_or_else(|| panic!("a checkout's commit date: {line}"));
            assert!(date.len() == 10 && date.split('-').count() == 3, "{line}");
        }
        (None, None) => assert!(revision == "unknown" && date.is_none(), "{line}"),
    }
    let s = Server::start(&[]).await;
    let version: Value = s.client.get(s.url("/version")).send().await.unwrap().json().await.unwrap();
    assert_eq!(version["gitCommit"], json!(revision), "{version}");
}

#[test]
fn certs_command_writes_bundle() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_farm-apiserver"))
        .args(["certs", "--out"])
        .arg(dir.path())
        .args(["--service-name", "llama-api", "--service-namespace", "zoo"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ca = std::fs::read(dir.path().join("ca.crt")).unwrap();
    let bundle = std::fs::read_to_string(dir.path().join("cabundle.b64")).unwrap();
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(bundle.trim()).unwrap(), ca);
    let cert = std::fs::read(dir.path().join("tls.crt")).unwrap();
    let (_, pem) = x509_parser::pem::parse_x509_pem(&cert).unwrap();
    let parsed = pem.parse_x509().unwrap();
    let sans = format!("{:?}", parsed.subject_alternative_name().unwrap().unwrap().value.general_names);
    for want in ["llama-api.zoo.svc", "localhost", "127.0.0.1"] {
        assert!(sans.contains(want) || (want == "127.0.0.1" && sans.contains("127")), "{want} in {sans}");
    }
    assert!(dir.path().join("tls.key").exists());
}

#[tokio::test]
async fn development_certificates_are_reused_across_restarts() {
    let keep = tempfile::tempdir().unwrap();
    let cert_dir = keep.path().join("certs");
    let opts = common::Options { cert_dir: Some(cert_dir.clone()), ..Default::default() };
    let first = Server::start_with(opts.clone()).await;
    let ca_before = std::fs::read(&first.ca_file).unwrap();
    let key_before = std::fs::read(cert_dir.join("tls.key")).unwrap();
    drop(first);
    let second = Server::start_with(opts).await;
    assert!(second.client.get(second.url("/readyz")).send().await.is_ok_and(|r| r.status() == 200));
    assert_eq!(std::fs::read(cert_dir.join("ca.crt")).unwrap(), ca_before);
    assert_eq!(std::fs::read(cert_dir.join("tls.key")).unwrap(), key_before);
    // The name the aggregator checks is served (it dials <service>.<namespace>.svc).
    let pem = std::fs::read(cert_dir.join("tls.crt")).unwrap();
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
    let cert = pem.parse_x509().unwrap();
    let sans = format!("{:?}", cert.subject_alternative_name().unwrap().unwrap().value.general_names);
    assert!(sans.contains("farm-apiserver.farm-system.svc"), "{sans}");
}

#[tokio::test]
async fn serving_certificate_reloads_from_disk() {
    common::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let make = |sub: &str| {
        let out = dir.path().join(sub);
        let st =
            Command::new(env!("CARGO_BIN_EXE_farm-apiserver")).args(["certs", "--out"]).arg(&out).output().unwrap();
        assert!(st.status.success());
        out
    };
    let first = make("first");
    let second = make("second");
    let live = dir.path().join("live");
    std::fs::create_dir_all(&live).unwrap();
    for f in ["tls.crt", "tls.key"] {
        std::fs::copy(first.join(f), live.join(f)).unwrap();
    }
    let cert = live.join("tls.crt").display().to_string();
    let key = live.join("tls.key").display().to_string();
    let s = Server::start_with(common::Options {
        args: ["--tls-cert-file", &cert, "--tls-private-key-file", &key, "--cert-reload-interval", "0.2"]
            .iter()
            .map(|a| a.to_string())
            .collect(),
        ca_file: Some(first.join("ca.crt")),
        ..Default::default()
    })
    .await;
    let old_ca = client_trusting(&first.join("ca.crt")).unwrap();
    let new_ca = client_trusting(&second.join("ca.crt")).unwrap();
    assert!(old_ca.get(s.url("/healthz")).send().await.is_ok());
    // Replace the files the way a Secret volume update lands: new content at the same path.
    std::fs::copy(second.join("tls.key"), live.join("tls.key.new")).unwrap();
    std::fs::copy(second.join("tls.crt"), live.join("tls.crt.new")).unwrap();
    std::fs::rename(live.join("tls.key.new"), live.join("tls.key")).unwrap();
    std::fs::rename(live.join("tls.crt.new"), live.join("tls.crt")).unwrap();
    let mut switched = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        // reqwest pools connections: a fresh client makes a new handshake.
        let fresh = client_trusting(&second.join("ca.crt")).unwrap();
        if fresh.get(s.url("/healthz")).send().await.is_ok() {
            switched = true;
            break;
        }
    }
    assert!(switched, "new certificate served without restart:\n{}", s.log());
    let stale = client_trusting(&first.join("ca.crt")).unwrap();
    assert!(stale.get(s.url("/healthz")).send().await.is_err(), "old certificate no longer served");
    drop(new_ca);
}

#[tokio::test]
async fn a_missing_kubeconfig_is_named_once() {
    let s = Server::start_with_cluster(&[], Some(std::path::Path::new("/nonexistent/kubeconfig"))).await;
    let url = s.url("/apis/farm.example.com/v1alpha/farmpods");
    let v: Value = s.client.get(&url).send().await.unwrap().json().await.unwrap();
    let want =
        "FarmPods are unavailable: reading kubeconfig /nonexistent/kubeconfig: No such file or directory (os error 2)";
    assert_eq!(v["message"], json!(want), "{v}");
    let log = s.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("kubeconfig")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(warnings[0].ends_with(want) && warnings[0].matches("No such file").count() == 1, "{log}");
}

#[tokio::test]
async fn farmpods_without_a_cluster_answer_503_and_refuse_writes() {
    let s = Server::start(&[]).await;
    let url = s.url("/apis/farm.example.com/v1alpha/namespaces/default/farmpods");
    let r = s.client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 503);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["reason"], "ServiceUnavailable");
    // Said once, with what to do (kube's own error nested one io error three times).
    let no_cluster = format!(
        "no cluster configured: no kubeconfig at {} and not running in a Pod; set KUBECONFIG or --kubeconfig, or run in a Pod",
        s.dir.path().join("no-cluster").display()
    );
    assert_eq!(v["message"], json!(format!("FarmPods are unavailable: {no_cluster}")), "{v}");
    let log = s.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("FarmPods are unavailable")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(warnings[0].contains("WARN") && warnings[0].ends_with(&no_cluster), "{log}");
    let r = s
        .client
        .post(&url)
        .json(&json!({"apiVersion": "farm.example.com/v1alpha", "kind": "FarmPod"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["reason"], "MethodNotAllowed");
    assert_eq!(v["message"], "create is not supported on resources of kind \"farmpods.farm.example.com\"");
    let r = s.client.delete(format!("{url}/x")).send().await.unwrap();
    assert_eq!(r.status(), 405);
    // Llamas are unaffected, and readiness does not wait for a cluster that is not there.
    let r = s.client.post(s.llamas("default", "")).json(&llama("ok", 1.0, 1.0)).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let text = s.client.get(s.url("/readyz?verbose")).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("[+]farmpod-cache ok (FarmPods disabled: "), "{text}");
}
