//! Tracing end to end against a real backend: kube-apiserver and
//! farm-apiserver export to Jaeger (tests/common/jaeger.rs), and Jaeger's
//! query API holds one trace for a request through the aggregator, with
//! kube-apiserver's proxy span and farm-apiserver's spans beneath it.
//! (tracing.rs checks the spans' attributes in detail against a collector of
//! the test's own.)

use serde_json::json;

use crate::common::cluster::{self, ControlPlane};
use crate::common::compare::admin_client;
use crate::common::jaeger::{Jaeger, Span};

const FARM: &str = "farm-apiserver";
const KUBE: &str = "apiserver";
const GROUP_VERSION: &str = "farm.example.com/v1beta1";

/// The value of one of `span`'s tags.
fn tag<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    span.tags.get(key).map(String::as_str)
}

/// The span IDs above `span`, its parent first.
fn ancestors(spans: &[Span], span: &Span) -> Vec<String> {
    let mut found = Vec::new();
    let mut parent = span.parent_span_id.clone();
    while let Some(next) = spans.iter().find(|s| s.span_id == parent) {
        found.push(next.span_id.clone());
        parent = next.parent_span_id.clone();
    }
    found
}

#[tokio::test]
async fn jaeger_holds_one_trace_from_kube_apiservers_proxy_span_down_into_farm_apiserver() {
    let jaeger = Jaeger::start().await;
    let dir = tempfile::tempdir().unwrap();
    // Neither server starts traces of its own: what Jaeger holds of this
    // trace is there because the caller sampled it and each server went on
    // with it.
    let config = |name: &str| {
        let path = dir.path().join(name);
        let yaml = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: {}\nsamplingRatePerMillion: 0\n",
            jaeger.otlp_endpoint()
        );
        std::fs::write(&path, yaml).unwrap();
        path.display().to_string()
    };
    let cp = ControlPlane::start_with(&[&format!("--tracing-config-file={}", config("kube.yaml"))]);
    let etcd = cp.info["etcdEndpoint"].as_str().unwrap().to_string();
    let farm_config = config("farm.yaml");
    let reg = cluster::register_on(
        &cp,
        &[
            "--authentication",
            "delegated",
            "--storage",
            "etcd",
            "--etcd-servers",
            &etcd,
            "--etcd-prefix",
            "/registry/farm-jaeger",
            "--tracing-config-file",
            &farm_config,
        ],
    )
    .await;
    let ns = cluster::namespace(&cp, "jaeger");

    // cluster-admin creates a Llama through the aggregator in a trace it samples.
    let (trace, caller) = (crate::common::random_hex(16), crate::common::random_hex(8));
    let url = format!("{}/apis/{GROUP_VERSION}/namespaces/{ns}/llamas", cp.server);
    let llama = json!({"apiVersion": GROUP_VERSION, "kind": "Llama", "metadata": {"name": "traced"}, "spec": {"weightKg": 2, "heightM": 1}});
    let answer =
        admin_client(&cp).post(&url).header("traceparent", format!("00-{trace}-{caller}-01")).json(&llama).send().await;
    let answer = answer.unwrap_or_else(|e| panic!("POST {url}: {e}"));
    assert_eq!(answer.status(), 201, "the create answered {}", answer.text().await.unwrap_or_default());

    let path = format!("POST /apis/{GROUP_VERSION}/namespaces/{{:namespace}}/llamas");
    // otelhttp's name for the round trip the aggregator proxies through
    // (k8s.io/component-base's tracing.WrapperFor).
    let proxy_name = "HTTP POST";
    let spans = jaeger
        .wait_for("kube-apiserver's server and proxy spans and farm-apiserver's server and etcd spans", &trace, |s| {
            Span::named(s, KUBE, &path).is_some()
                && Span::named(s, KUBE, proxy_name).is_some()
                && Span::named(s, FARM, &path).is_some()
                && Span::named(s, FARM, "Create etcd3").is_some()
        })
        .await;

    // kube-apiserver continues the caller's trace in its server span.
    let kube_server = Span::named(&spans, KUBE, &path).unwrap();
    assert_eq!(
        kube_server.parent_span_id, caller,
        "kube-apiserver's server span is the child of the caller's span: {kube_server:#?}"
    );
    assert_eq!(
        tag(kube_server, "span.kind"),
        Some("server"),
        "kube-apiserver's {path} is a server span: {kube_server:#?}"
    );

    // The aggregator proxies the request inside a client span of its own.
    let proxy = Span::named(&spans, KUBE, proxy_name).unwrap();
    assert_eq!(tag(proxy, "span.kind"), Some("client"), "kube-apiserver's proxy span is a client span: {proxy:#?}");
    assert!(
        ancestors(&spans, proxy).contains(&kube_server.span_id),
        "kube-apiserver's proxy span lies beneath its server span:\n{proxy:#?}\n{kube_server:#?}"
    );
    let farm_url = format!("https://localhost:{}/apis/{GROUP_VERSION}/namespaces/{ns}/llamas", reg.server.port);
    assert_eq!(
        tag(proxy, "http.url"),
        Some(farm_url.as_str()),
        "kube-apiserver's proxy span names the farm-apiserver it sent the request to: {proxy:#?}"
    );
    assert_eq!(
        tag(proxy, "http.status_code"),
        Some("201"),
        "the proxy span records farm-apiserver's answer: {proxy:#?}"
    );

    // farm-apiserver's server span is the child of that proxy span, and its
    // etcd write lies beneath it.
    let server = Span::named(&spans, FARM, &path).unwrap();
    assert_eq!(
        server.parent_span_id, proxy.span_id,
        "farm-apiserver's server span is the child of kube-apiserver's proxy span: {spans:#?}"
    );
    assert_eq!(tag(server, "span.kind"), Some("server"), "farm-apiserver's {path} is a server span: {server:#?}");
    assert_eq!(
        tag(server, "http.target"),
        Some(format!("/apis/{GROUP_VERSION}/namespaces/{ns}/llamas").as_str()),
        "farm-apiserver's server span names the path it served: {server:#?}"
    );
    assert_eq!(
        tag(server, "http.response.status_code"),
        Some("201"),
        "farm-apiserver's server span records its answer: {server:#?}"
    );
    let write = Span::named(&spans, FARM, "Create etcd3").unwrap();
    assert!(
        ancestors(&spans, write).contains(&server.span_id),
        "farm-apiserver's etcd write lies beneath its server span:\n{write:#?}\n{server:#?}"
    );
    assert_eq!(
        tag(write, "key"),
        Some(format!("/registry/farm-jaeger/llamas/{ns}/traced").as_str()),
        "farm-apiserver's etcd span names the key it wrote: {write:#?}"
    );
}
