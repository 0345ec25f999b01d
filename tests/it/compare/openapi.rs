//! The OpenAPI documents' content negotiation side by side with
//! kube-apiserver: `/openapi/v2` and a group-version's `/openapi/v3` document
//! asked for with the Accept headers kubectl versions send and a few others,
//! answered with the same status, Content-Type and encoding (a bare 406 where
//! kube's is bare). Ours is asked directly; kube-apiserver serves its own.

use crate::common::cluster::controlplane;
use crate::common::compare::admin_client;
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
