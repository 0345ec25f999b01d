//! Every kubectl a developer may have, pointed straight at the server: each
//! versioned kubectl of the Google Cloud SDK (1.27 to 1.33 on these machines
//! and in CI) applies client-side (its validation reads the OpenAPI schema),
//! applies server-side, gets, explains and deletes. kubectl 1.27 and 1.28
//! read `/openapi/v2` in protobuf only; later ones read OpenAPI v3 in JSON.
//! Also the OpenAPI documents' content negotiation over HTTPS.

use std::path::{Path, PathBuf};

use crate::common::{kubectl_binary_stdin, kubectl_logged_headers, Server};

/// Where the Google Cloud SDK installs `kubectl.1.NN`.
const SDK_BIN: &str = "/usr/lib/google-cloud-sdk/bin";

const PROTOBUF_V2: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The versioned kubectl binaries, oldest first, as (minor version, path).
fn versioned_kubectls() -> Vec<(u32, PathBuf)> {
    let entries = std::fs::read_dir(SDK_BIN).unwrap_or_else(|e| panic!("reading {SDK_BIN}: {e}"));
    let mut found: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let minor = name.strip_prefix("kubectl.1.")?.parse().ok()?;
            Some((minor, e.path()))
        })
        .collect();
    found.sort();
    found
}

fn run(bin: &Path, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    kubectl_binary_stdin(&bin.to_string_lossy(), kubeconfig, args, stdin)
}

/// Runs and expects success, saying which kubectl failed.
fn ok(bin: &Path, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let (success, out, err) = run(bin, kubeconfig, args, stdin);
    assert!(success, "{} {args:?} failed:\n{out}\n{err}", bin.display());
    out
}

#[tokio::test]
async fn every_installed_kubectl_applies_gets_explains_and_deletes() {
    let kubectls = versioned_kubectls();
    // An end-to-end test never skips: without the binaries it fails.
    assert!(!kubectls.is_empty(), "no kubectl.1.NN in {SDK_BIN}: install the Google Cloud SDK's kubectl components");
    let s = Server::start(&[]).await;
    let mut read_protobuf = Vec::new();
    for (minor, bin) in &kubectls {
        // A kubeconfig (and so a discovery cache) per version.
        let kubeconfig = s.dir.path().join(format!("kubeconfig-1.{minor}"));
        std::fs::copy(s.kubeconfig(), &kubeconfig).expect("copy the kubeconfig");
        let name = format!("dolly-{minor}");
        let llama = |weight: f64| {
            format!(
                "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata:\n  name: {name}\nspec:\n  weight: {weight}\n  height: 1.7\n"
            )
        };
        let version = format!("kubectl 1.{minor}");

        let out = ok(bin, &kubeconfig, &["apply", "-f", "-"], Some(&llama(31.4)));
        assert!(out.contains(&format!("llama.farm.example.com/{name} created")), "{version}: {out}");
        let out = ok(bin, &kubeconfig, &["apply", "--server-side", "--force-conflicts", "-f", "-"], Some(&llama(32.5)));
        assert!(out.contains("serverside-applied"), "{version}: {out}");
        let out = ok(bin, &kubeconfig, &["get", "llama", &name], None);
        assert!(out.contains(&name) && out.contains("32.5"), "{version}: {out}");

        // explain reads the schema: the kind's and the fields' descriptions.
        let (success, out, log) = run(bin, &kubeconfig, &["explain", "llamas", "-v=8"], None);
        assert!(success, "{version} explain llamas:\n{out}\n{log}");
        assert!(out.contains("A llama of the farm.") && out.contains("spec"), "{version}: {out}");
        if log.contains("/openapi/v2") {
            let headers = kubectl_logged_headers(&log, "/openapi/v2");
            assert!(headers.contains(&format!("Content-Type: {PROTOBUF_V2}")), "{version}: {headers}");
            read_protobuf.push(*minor);
        }
        let out = ok(bin, &kubeconfig, &["explain", "llamas.spec"], None);
        assert!(out.contains("Weight in kilograms") && out.contains("Height in metres"), "{version}: {out}");

        let out = ok(bin, &kubeconfig, &["delete", "llama", &name], None);
        assert!(out.contains("deleted"), "{version}: {out}");
    }
    // 1.27 and 1.28 take the protobuf path; the test must have exercised it.
    let minors: Vec<u32> = kubectls.iter().map(|(m, _)| *m).collect();
    if minors.iter().any(|m| *m <= 28) {
        assert!(!read_protobuf.is_empty(), "no kubectl read /openapi/v2 in protobuf (of {minors:?})");
    }
}

#[tokio::test]
async fn openapi_documents_in_json_or_protobuf_by_accept() {
    let s = Server::start(&[]).await;
    let get = |path: &str, accept: Option<&str>, etag: Option<&str>| {
        let mut req = s.client.get(s.url(path));
        if let Some(a) = accept {
            req = req.header("Accept", a);
        }
        if let Some(e) = etag {
            req = req.header("If-None-Match", e);
        }
        req.send()
    };
    let header = |r: &reqwest::Response, name: &str| {
        let values: Vec<&str> = r.headers().get_all(name).iter().filter_map(|v| v.to_str().ok()).collect();
        values.join(", ")
    };
    let json = get("/openapi/v2", None, None).await.unwrap();
    assert_eq!(json.status(), 200);
    assert_eq!(header(&json, "content-type"), "application/json");
    let etag = header(&json, "etag");

    // kubectl 1.27's Accept; kube-apiserver answers with the `.v1.0` spelling.
    let old = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
    let pb = get("/openapi/v2", Some(old), None).await.unwrap();
    assert_eq!(pb.status(), 200);
    assert_eq!(header(&pb, "content-type"), PROTOBUF_V2);
    assert_eq!(header(&pb, "etag"), etag, "one ETag per document version, as kube-openapi");
    assert!(header(&pb, "vary").split(", ").any(|v| v == "Accept"), "{}", header(&pb, "vary"));
    let body = pb.bytes().await.unwrap();
    // Document.swagger (field 1, length-delimited) comes first.
    assert!(body.starts_with(b"\x0a\x032.0"), "{:?}", &body[..body.len().min(16)]);
    let cached = get("/openapi/v2", Some(PROTOBUF_V2), Some(&etag)).await.unwrap();
    assert_eq!(cached.status(), 304);

    // A weighted choice, and what cannot be served.
    let weighted = format!("application/json;q=0.5, {PROTOBUF_V2}");
    let pb = get("/openapi/v2", Some(&weighted), None).await.unwrap();
    assert_eq!(header(&pb, "content-type"), PROTOBUF_V2);
    let refused = get("/openapi/v2", Some("text/html"), None).await.unwrap();
    assert_eq!(refused.status(), 406);

    // OpenAPI v3: the group-version document in both, the index JSON only.
    let gv = "/openapi/v3/apis/farm.example.com/v1alpha";
    let v3 = get(gv, Some("application/com.github.proto-openapi.spec.v3@v1.0+protobuf"), None).await.unwrap();
    assert_eq!(v3.status(), 200);
    assert_eq!(header(&v3, "content-type"), "application/com.github.proto-openapi.spec.v3.v1.0+protobuf");
    assert!(v3.bytes().await.unwrap().starts_with(b"\x0a\x053.0.0"));
    assert_eq!(get(gv, Some("application/yaml"), None).await.unwrap().status(), 406);
    let index = get("/openapi/v3", Some(PROTOBUF_V2), None).await.unwrap();
    // JSON, labelled as kube-openapi's http.ServeContent labels it.
    assert_eq!(header(&index, "content-type"), "text/plain; charset=utf-8");
    assert!(index.bytes().await.unwrap().starts_with(b"{\"paths\":"));
    assert!(s.log().lines().all(|l| !l.contains("no protobuf encoding")), "{}", s.log());
}
