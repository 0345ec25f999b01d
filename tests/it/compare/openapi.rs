//! The OpenAPI documents' content negotiation side by side with
//! kube-apiserver: `/openapi/v2` and a group-version's `/openapi/v3` document
//! asked for with the Accept headers kubectl versions send and a few others,
//! answered with the same status, Content-Type and encoding (a bare 406 where
//! kube's is bare). Ours is asked directly; kube-apiserver serves its own.

use crate::common::cluster::controlplane;
use reqwest::redirect::Policy;
use serde_json::Value;

use crate::common::compare::{admin_client, admin_client_builder};
use crate::common::Server;

const PROTOBUF_V2: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
const PROTOBUF_V2_DOTTED: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
const PROTOBUF_V3: &str = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf";
const PROTOBUF_V3_DOTTED: &str = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf";

/// Status, Content-Type, whether Vary names Accept, and what the body is.
async fn answer(client: &reqwest::Client, url: &str, accept: Option<&str>) -> (u16, String, bool, &'static str) {
    let mut req = client.get(url);
    if let Some(accept) = accept {
        req = req.header("Accept", accept);
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = resp.status().as_u16();
    let header = |name: &str| -> Vec<String> {
        resp.headers().get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect()
    };
    let content_type = header("content-type").join(", ");
    let varies = header("vary").iter().any(|v| v.split(',').any(|t| t.trim() == "Accept"));
    let body = resp.bytes().await.unwrap_or_default();
    let kind = match body.first() {
        None => "empty",
        Some(b'{') => "JSON",
        // A Document's first field, `swagger` or `openapi` (1, length-delimited).
        Some(0x0a) => "protobuf",
        Some(_) => "other",
    };
    (status, content_type, varies, kind)
}

#[tokio::test]
async fn openapi_negotiation_matches_kube_apiserver() {
    let cp = controlplane();
    let kube = admin_client(cp);
    let ours = Server::start(&[]).await;
    let documents = [
        ("/openapi/v2", "/openapi/v2"),
        ("/openapi/v3", "/openapi/v3"),
        ("/openapi/v3/apis/apiregistration.k8s.io/v1", "/openapi/v3/apis/farm.example.com/v1alpha"),
    ];
    let accepts = [
        None,
        Some(""),
        Some("application/json"),
        Some(PROTOBUF_V2),
        Some(PROTOBUF_V2_DOTTED),
        Some(PROTOBUF_V3),
        Some(PROTOBUF_V3_DOTTED),
        Some("*/*"),
        Some("application/*"),
        Some("application/json, */*"),
        Some("application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf"),
        Some("application/json;q=0.5, application/com.github.proto-openapi.spec.v3.v1.0+protobuf"),
        Some("application/json;q=0"),
        Some("text/html"),
        Some("application/yaml"),
    ];
    for (kube_path, our_path) in documents {
        for accept in accepts {
            let theirs = answer(&kube, &format!("{}{kube_path}", cp.server), accept).await;
            let mine = answer(&ours.client, &ours.url(our_path), accept).await;
            assert_eq!(mine, theirs, "{our_path} (kube-apiserver: {kube_path}) with Accept {accept:?}");
        }
    }
}

/// What a `?hash=` URL of a group-version document gets: the index's own
/// URL may be cached for good (and answers 304 to its ETag); another hash is
/// redirected to the index's URL.
#[tokio::test]
async fn openapi_v3_hash_urls_match_kube_apiserver() {
    let cp = controlplane();
    let kube = admin_client_builder(cp).redirect(Policy::none()).build().expect("client");
    let ours = Server::start(&[]).await;
    let ca = std::fs::read(&ours.ca_file).expect("our CA");
    let mine = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("our CA"))
        .redirect(Policy::none())
        .build()
        .expect("client");
    let sides = [
        (&kube, cp.server.clone(), "apis/apiregistration.k8s.io/v1"),
        (&mine, ours.base.clone(), "apis/farm.example.com/v1alpha"),
    ];
    let mut seen = Vec::new();
    for (client, base, group_version) in sides {
        let index: Value = client.get(format!("{base}/openapi/v3")).send().await.unwrap().json().await.unwrap();
        let url = index["paths"][group_version]["serverRelativeURL"].as_str().expect("the index's URL").to_string();
        let get = |url: String, etag: Option<String>| {
            let mut req = client.get(format!("{base}{url}")).header("Accept", "application/json");
            if let Some(etag) = etag {
                req = req.header("If-None-Match", etag);
            }
            req.send()
        };
        let header = |r: &reqwest::Response, name: &str| {
            r.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
        };
        let pinned = get(url.clone(), None).await.unwrap();
        let etag = header(&pinned, "etag");
        let expires = header(&pinned, "expires");
        let cached = get(url.clone(), Some(etag.clone())).await.unwrap();
        let moved = get(format!("/openapi/v3/{group_version}?hash=0123"), None).await.unwrap();
        seen.push((
            (
                pinned.status().as_u16(),
                header(&pinned, "cache-control"),
                expires.ends_with(" UTC") && expires.len() == 29,
            ),
            (cached.status().as_u16(), header(&cached, "cache-control")),
            (
                moved.status().as_u16(),
                header(&moved, "location") == url,
                header(&moved, "content-type"),
                header(&moved, "etag") == etag,
            ),
            moved.bytes().await.unwrap().is_empty(),
        ));
    }
    assert_eq!(seen[0].0, (200, "public, immutable".to_string(), true), "kube-apiserver: {:?}", seen[0]);
    assert_eq!((seen[0].1 .0, seen[0].2 .0, seen[0].2 .1), (304, 301, true), "kube-apiserver: {:?}", seen[0]);
    assert_eq!(seen[1], seen[0], "ours, then kube-apiserver's");
}

/// Builds `tests/controlplane/gnosticcheck` (Go's build cache keeps it quick
/// after the first time) and returns its path.
fn gnosticcheck() -> std::path::PathBuf {
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gnosticcheck");
    let built = std::process::Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg("./gnosticcheck")
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/controlplane"))
        // The control plane's module, exactly as committed.
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=readonly")
        .output()
        .expect("run go (needed for the control plane too)");
    assert!(built.status.success(), "building gnosticcheck: {}", String::from_utf8_lossy(&built.stderr));
    out
}

/// The protobuf documents decode to exactly what gnostic-models' own compiler
/// (kube-openapi's way to protobuf) makes of the same documents' JSON.
#[tokio::test]
async fn protobuf_documents_are_what_gnostic_makes_of_the_json() {
    let checker = gnosticcheck();
    let s = Server::start(&[]).await;
    for (spec, path, accept) in
        [("v2", "/openapi/v2", PROTOBUF_V2), ("v3", "/openapi/v3/apis/farm.example.com/v1alpha", PROTOBUF_V3)]
    {
        let mut files = Vec::new();
        for accept in ["application/json", accept] {
            let response = s.client.get(s.url(path)).header("Accept", accept).send().await.expect("request");
            assert_eq!(response.status(), 200, "{path} as {accept}");
            let file = s.dir.path().join(format!("{spec}-{}", files.len()));
            std::fs::write(&file, response.bytes().await.expect("body")).expect("write the document");
            files.push(file);
        }
        let checked = std::process::Command::new(&checker).arg(spec).args(&files).output().expect("run gnosticcheck");
        let said = String::from_utf8_lossy(&checked.stdout);
        assert!(checked.status.success() && said.trim() == "equal", "{path}: {said}");
    }
}
