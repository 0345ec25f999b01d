//! The library's example (`examples/greetings.rs`) built by `cargo test` and
//! run as a user would run it: a new kind served over HTTPS with discovery,
//! validation, writes, reads and Table output, from one short file.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

/// `cargo test` builds the examples beside the test binaries:
/// target/<profile>/examples/greetings next to target/<profile>/deps/<this test>.
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>");
    let bin = profile_dir.join("examples").join("greetings");
    assert!(bin.exists(), "{} not built: cargo test builds the examples", bin.display());
    bin
}

struct Server {
    child: Child,
    base: String,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the example on a free loopback port with development certificates
/// in a fresh directory, and waits until it says where it serves.
fn start() -> Server {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("temp dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
    let mut child = Command::new(example_binary())
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .arg("--cert-dir")
        .arg(dir.path())
        // No cluster: every namespace is taken to exist.
        .args(["--kubeconfig", "/nonexistent/kubeconfig", "--log", "info"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the greetings example");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let serving = lines.by_ref().map_while(Result::ok).any(|line| line.contains("greetings serving"));
    assert!(serving, "the example ended before serving");
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let ca = std::fs::read(dir.path().join("ca.crt")).expect("development CA");
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA PEM"))
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    Server { child, base: format!("https://localhost:{port}"), client, _dir: dir }
}

async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("request");
    let code = response.status().as_u16();
    (code, response.json().await.expect("JSON body"))
}

#[tokio::test]
async fn a_kind_of_ones_own_is_served_from_one_file() {
    let server = start();
    let group = format!("{}/apis/example.com/v1", server.base);

    let (code, discovery) = send(server.client.get(&group)).await;
    assert_eq!(code, 200, "{discovery}");
    let resource = &discovery["resources"][0];
    assert_eq!((resource["name"].as_str(), resource["kind"].as_str()), (Some("greetings"), Some("Greeting")));
    assert_eq!(resource["shortNames"], json!(["gr"]));
    assert!(resource["verbs"].as_array().is_some_and(|v| v.contains(&json!("patch"))), "{resource}");

    let greetings = format!("{group}/namespaces/default/greetings");
    let greeting = |name: &str, times: i64| {
        json!({"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": {"name": name},
               "spec": {"message": "hello", "times": times}})
    };
    // The kind's own rule, worded as kube words a field error.
    let (code, refused) = send(server.client.post(&greetings).json(&greeting("never", 0))).await;
    assert_eq!(code, 422, "{refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "spec.times");
    assert_eq!(
        refused["message"],
        "Greeting.example.com \"never\" is invalid: spec.times: Invalid value: 0: must be at least 1"
    );
    // The CEL rule of its schema.
    let mut long = greeting("long", 11);
    long["spec"]["message"] = json!("hello, hello, hello, hello");
    let (code, refused) = send(server.client.post(&greetings).json(&long)).await;
    assert_eq!(code, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "Greeting.example.com \"long\" is invalid: spec: Invalid value: \"object\": a message longer than 20 characters may be said at most 10 times"
    );
    // The schema's rule.
    let no_message =
        json!({"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": {"name": "mute"}, "spec": {}});
    let (code, refused) = send(server.client.post(&greetings).json(&no_message)).await;
    assert_eq!((code, refused["details"]["causes"][0]["field"].as_str()), (422, Some("spec.message")), "{refused}");

    let (code, created) = send(server.client.post(&greetings).json(&greeting("hi", 2))).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["generation"], 1);
    assert!(created["metadata"]["uid"].is_string() && created["metadata"]["resourceVersion"].is_string());

    // The kind's default, from its strategy.
    let once = json!({"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": {"name": "once"},
                      "spec": {"message": "hello"}});
    let (code, created) = send(server.client.post(&greetings).json(&once)).await;
    assert_eq!((code, &created["spec"]["times"]), (201, &json!(1)), "{created}");

    let (code, read) = send(server.client.get(format!("{greetings}/hi"))).await;
    assert_eq!((code, &read["spec"]), (200, &json!({"message": "hello", "times": 2})));

    let table =
        server.client.get(&greetings).header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json");
    let (code, table) = send(table).await;
    assert_eq!(code, 200, "{table}");
    let columns: Vec<&str> =
        table["columnDefinitions"].as_array().expect("columns").iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(columns, ["Name", "Message", "Age"]);
    let cells = &table["rows"][0]["cells"];
    assert_eq!((&cells[0], &cells[1]), (&json!("hi"), &json!("hello")), "{table}");

    // The kind's schema in the protobuf OpenAPI documents kubectl 1.27 and
    // 1.28 read (a schema gnostic could not hold would be a 503 here).
    for (path, accept) in [
        ("/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"),
        ("/openapi/v3/apis/example.com/v1", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"),
    ] {
        let response = server.client.get(format!("{}{path}", server.base)).header("accept", accept).send().await;
        let response = response.expect("request");
        assert_eq!(response.status(), 200, "{path}");
        let body = response.bytes().await.expect("body");
        assert!(body.windows(b"Greeting".len()).any(|w| w == b"Greeting"), "{path}");
    }
}

/// Both versions are served from one store: the preferred one first in
/// discovery, an object written in either read in the other (the same uid
/// and resourceVersion, each version's own fields and columns), and a watch
/// in one version sent the writes made through the other.
#[tokio::test]
async fn each_version_reads_what_the_other_wrote() {
    let server = start();
    let apis = |rest: &str| format!("{}/apis/example.com{rest}", server.base);

    let (code, group) = send(server.client.get(apis(""))).await;
    assert_eq!(code, 200, "{group}");
    let versions: Vec<&str> =
        group["versions"].as_array().unwrap().iter().filter_map(|v| v["version"].as_str()).collect();
    assert_eq!((versions, &group["preferredVersion"]["version"]), (vec!["v2", "v1"], &json!("v2")), "{group}");

    let v1 = apis("/v1/namespaces/default/greetings");
    let v2 = apis("/v2/namespaces/default/greetings");
    let (code, list) = send(server.client.get(format!("{v1}?watch=false"))).await;
    assert_eq!(code, 200, "{list}");
    let from = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let watch = server.client.get(format!("{v1}?watch=true&resourceVersion={from}")).send().await.expect("watch");

    // Every answer of the deprecated version says so, in kube's words; the other's do not.
    let warnings = |response: &reqwest::Response| -> Vec<String> {
        response.headers().get_all("warning").iter().map(|w| w.to_str().unwrap().to_string()).collect()
    };
    let deprecated = r#"299 - "example.com/v1 Greeting is deprecated; use example.com/v2 Greeting""#;
    for (url, expected) in [(format!("{v1}/missing"), vec![deprecated.to_string()]), (format!("{v2}/missing"), vec![])]
    {
        let response = server.client.get(url).send().await.expect("request");
        assert_eq!((response.status().as_u16(), warnings(&response)), (404, expected));
    }

    let old = json!({"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": {"name": "old"},
                     "spec": {"message": "hello"}});
    let (code, written) = send(server.client.post(&v1).json(&old)).await;
    assert_eq!(code, 201, "{written}");
    let (code, read) = send(server.client.get(format!("{v2}/old"))).await;
    assert_eq!(code, 200, "{read}");
    assert_eq!((&read["apiVersion"], &read["spec"]), (&json!("example.com/v2"), &json!({"text": "hello", "times": 1})));
    assert_eq!(read["metadata"], written["metadata"], "the same object: uid, resourceVersion, everything");

    let new = json!({"apiVersion": "example.com/v2", "kind": "Greeting", "metadata": {"name": "new", "labels": {"l": "v"}},
                     "spec": {"text": "hi", "times": 3}});
    let (code, written) = send(server.client.post(&v2).json(&new)).await;
    assert_eq!(code, 201, "{written}");
    let (code, read) = send(server.client.get(format!("{v1}/new"))).await;
    assert_eq!(
        (code, &read["spec"], &read["metadata"]["labels"]),
        (200, &json!({"message": "hi", "times": 3}), &json!({"l": "v"}))
    );

    // An update through v1 of what v2 wrote, read back in v2.
    let (code, patched) = send(
        server
            .client
            .patch(format!("{v1}/new"))
            .header("content-type", "application/merge-patch+json")
            .json(&json!({"spec": {"message": "hi there"}})),
    )
    .await;
    assert_eq!((code, &patched["spec"]["message"]), (200, &json!("hi there")), "{patched}");
    let (_, read) = send(server.client.get(format!("{v2}/new"))).await;
    assert_eq!(read["spec"], json!({"text": "hi there", "times": 3}));

    // Each version's Table has its own columns.
    let table = |url: String| server.client.get(url).header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io");
    for (url, column, cell) in [(v1.clone(), "Message", "hello"), (v2.clone(), "Text", "hello")] {
        let (_, t) = send(table(format!("{url}?fieldSelector=metadata.name%3Dold"))).await;
        let names: Vec<&str> =
            t["columnDefinitions"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!((names, &t["rows"][0]["cells"][1]), (vec!["Name", column, "Age"], &json!(cell)), "{t}");
    }

    // The v1 watch saw every write, in v1.
    let mut watch = watch;
    let mut seen = Vec::new();
    let mut buffer = Vec::new();
    while seen.len() < 3 {
        let chunk = tokio::time::timeout(Duration::from_secs(10), watch.chunk()).await.expect("watch event in time");
        buffer.extend_from_slice(&chunk.expect("watch stream").expect("open watch"));
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let event: Value = serde_json::from_slice(&line).expect("a watch event");
            seen.push((
                event["type"].as_str().unwrap().to_string(),
                event["object"]["apiVersion"].as_str().unwrap().to_string(),
                event["object"]["spec"]["message"].as_str().unwrap().to_string(),
            ));
        }
    }
    let v1_events = |kind: &str, message: &str| (kind.to_string(), "example.com/v1".to_string(), message.to_string());
    assert_eq!(seen, [v1_events("ADDED", "hello"), v1_events("ADDED", "hi"), v1_events("MODIFIED", "hi there")]);
}
