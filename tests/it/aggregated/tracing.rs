//! OpenTelemetry traces through the aggregator: kube-apiserver and
//! farm-apiserver export to one collector; a trusted caller's trace goes on
//! in farm-apiserver under the aggregator's proxy span, and on to the
//! admission webhooks it calls, with the spans kube-apiserver makes for the
//! same request to the Llama CRD.

use std::collections::BTreeSet;

use serde_json::json;

use crate::common::cluster::{self, ControlPlane};
use crate::common::compare::{admin_client, CRD_GROUP, OUR_GROUP, VERSION};
use crate::common::crd;
use crate::common::otlp::{Collector, Span, CLIENT, SERVER};
use crate::compare::admission::{configuration, install_on, webhook_server, Hook};

const FARM: &str = "farm-apiserver";
const KUBE: &str = "apiserver";

#[tokio::test]
async fn a_trusted_callers_trace_goes_on_through_the_aggregator_to_webhooks() {
    let collector = Collector::start();
    let dir = tempfile::tempdir().unwrap();
    let config = |name: &str, rate: u32| {
        let path = dir.path().join(name);
        let yaml = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: 127.0.0.1:{}\nsamplingRatePerMillion: {rate}\n",
            collector.port
        );
        std::fs::write(&path, yaml).unwrap();
        path.display().to_string()
    };
    // kube-apiserver traces only what its callers sample; farm-apiserver
    // every trace it starts too, so that an untrusted caller's is seen.
    let cp = ControlPlane::start_with(&[&format!("--tracing-config-file={}", config("kube.yaml", 0))]);
    let config = config("farm.yaml", 1_000_000);
    let etcd = cp.info["etcdEndpoint"].as_str().unwrap().to_string();
    let prefix = "/registry/farm-traces";
    let _reg = cluster::register_on(
        &cp,
        &[
            "--authentication",
            "delegated",
            "--storage",
            "etcd",
            "--etcd-servers",
            &etcd,
            "--etcd-prefix",
            prefix,
            "--tracing-config-file",
            &config,
        ],
    )
    .await;
    crd::install_llama_crd(&cp, CRD_GROUP).unwrap_or_else(|e| panic!("{e}"));
    let admin = admin_client(&cp);
    let ns = cluster::namespace(&cp, "traces");
    let webhooks = webhook_server().await;
    let yaml = configuration(
        "ValidatingWebhookConfiguration",
        "traces",
        &ns,
        webhooks,
        &[Hook::new("traced.farm.test", "/allow")],
    );
    install_on(&cp, &admin, &ns, webhooks, &yaml, "/allow", json!({})).await;
    let out =
        cp.kubectl(&["create", "rolebinding", "alice-admin", "--clusterrole=cluster-admin", "--user=alice", "-n", &ns]);
    assert!(out.0, "{out:?}");
    cluster::wait_until_allowed(&cp, &["create", &format!("llamas.{OUR_GROUP}"), "--as=alice", "-n", &ns]).await;

    // The same sampled create, sent by cluster-admin, to the CRD and to farm-apiserver.
    let create = |group: &str, name: &str, traceparent: &str| {
        let url = format!("{}/apis/{group}/{VERSION}/namespaces/{ns}/llamas", cp.server);
        let llama = json!({"apiVersion": format!("{group}/{VERSION}"), "kind": "Llama", "metadata": {"name": name}, "spec": {"weight": 2, "height": 1}});
        admin.post(url).header("traceparent", traceparent).json(&llama)
    };
    let (crd_trace, our_trace, caller) =
        (crate::common::random_hex(16), crate::common::random_hex(16), crate::common::random_hex(8));
    for (group, trace) in [(CRD_GROUP, &crd_trace), (OUR_GROUP, &our_trace)] {
        let answer = create(group, "traced", &format!("00-{trace}-{caller}-01")).send().await.unwrap();
        assert_eq!(answer.status(), 201, "{group}: {}", answer.text().await.unwrap_or_default());
    }

    // kube-apiserver continues the caller's trace: its server span is the caller's child.
    let crd_spans = collector
        .wait_for("kube-apiserver's webhook and etcd spans", &crd_trace, |spans| {
            Span::named(spans, KUBE, "Call validating webhook").is_some()
                && Span::named(spans, KUBE, "Create etcd3").is_some()
        })
        .await;
    let ours = collector
        .wait_for("farm-apiserver's webhook and etcd spans", &our_trace, |spans| {
            Span::named(spans, FARM, "Call validating webhook").is_some()
                && Span::named(spans, FARM, "Create etcd3").is_some()
        })
        .await;
    let path = format!("POST /apis/{OUR_GROUP}/{VERSION}/namespaces/{{:namespace}}/llamas");
    let kube_server =
        Span::named(&ours, KUBE, &path).unwrap_or_else(|| panic!("no {path} span of kube-apiserver: {ours:#?}"));
    assert_eq!((kube_server.parent_span_id.as_str(), kube_server.kind), (caller.as_str(), SERVER));

    // farm-apiserver's server span, named as kube names it, is a child of
    // the aggregator's proxy span (a client span of kube-apiserver's).
    let server =
        Span::named(&ours, FARM, &path).unwrap_or_else(|| panic!("no {path} span of farm-apiserver: {ours:#?}"));
    assert_eq!(server.kind, SERVER);
    let proxy = ours
        .iter()
        .find(|s| s.span_id == server.parent_span_id)
        .unwrap_or_else(|| panic!("farm-apiserver's span has no parent in the trace: {ours:#?}"));
    assert_eq!((proxy.service.as_str(), proxy.kind), (KUBE, CLIENT), "{proxy:#?}");
    assert_eq!(server.attributes["http.target"], format!("/apis/{OUR_GROUP}/{VERSION}/namespaces/{ns}/llamas"));
    assert_eq!(server.attributes["http.response.status_code"], "201");
    assert!(!server.attributes["audit-id"].is_empty(), "{server:#?}");

    // The webhook's span carries what kube's carries, and its ID is the
    // parent the webhook was told of.
    let kube_call = Span::named(&crd_spans, KUBE, "Call validating webhook").unwrap();
    let our_call = Span::named(&ours, FARM, "Call validating webhook").unwrap();
    let keys = |s: &Span| s.attributes.keys().cloned().collect::<BTreeSet<_>>();
    assert!(keys(kube_call).is_subset(&keys(our_call)), "kube's {kube_call:#?}\nours {our_call:#?}");
    for key in ["configuration", "webhook", "resource", "subresource", "operation"] {
        // The resource names the group: the CRD's is another.
        let kubes = kube_call.attributes[key].replace(CRD_GROUP, OUR_GROUP);
        assert_eq!(our_call.attributes[key], kubes, "{key}");
    }
    assert!(ancestors(&ours, our_call).contains(&server.span_id), "{our_call:#?} is not under {server:#?}");
    let sent = webhooks.traceparents.lock().unwrap().get(&our_call.attributes["UID"]).cloned();
    assert_eq!(sent, Some(format!("00-{our_trace}-{}-01", our_call.span_id)));

    // The etcd write's span names its key, as kube's does.
    let write = Span::named(&ours, FARM, "Create etcd3").unwrap();
    assert_eq!(write.attributes["key"], format!("{prefix}/llamas/{ns}/traced"));
    assert!(ancestors(&ours, write).contains(&server.span_id), "{write:#?} is not under {server:#?}");

    // An unprivileged caller (alice, impersonated: kube-apiserver traces the
    // admin who asked, farm-apiserver the user the aggregator forwards)
    // starts a trace of farm-apiserver's own, linked to the one it came with.
    let alices = crate::common::random_hex(16);
    let answer = create(OUR_GROUP, "alices", &format!("00-{alices}-{caller}-01"))
        .header("Impersonate-User", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201, "{}", answer.text().await.unwrap_or_default());
    let kube_side = collector
        .wait_for("kube-apiserver's proxy span", &alices, |spans| spans.iter().any(|s| s.kind == CLIENT))
        .await;
    assert!(kube_side.iter().all(|s| s.service == KUBE), "farm-apiserver continued alice's trace: {kube_side:#?}");
    let proxy = kube_side.iter().find(|s| s.kind == CLIENT).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let linked = loop {
        let found = collector
            .spans()
            .into_iter()
            .find(|s| s.service == FARM && s.links.contains(&(alices.clone(), proxy.span_id.clone())));
        if let Some(span) = found {
            break span;
        }
        assert!(std::time::Instant::now() < deadline, "no farm-apiserver span links to alice's trace");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    assert_eq!((linked.name.as_str(), linked.parent_span_id.as_str()), (path.as_str(), ""), "{linked:#?}");
    assert_ne!(linked.trace_id, alices);
    // In that trace, alice's request is authorized with a SubjectAccessReview
    // whose trace kube-apiserver continues (farm-apiserver's own identity is
    // trusted there).
    let sar = "POST /apis/authorization.k8s.io/v1/subjectaccessreviews";
    let own = collector
        .wait_for("the review of alice's request", &linked.trace_id, |spans| {
            Span::named(spans, FARM, "SubjectAccessReview").is_some() && Span::named(spans, KUBE, sar).is_some()
        })
        .await;
    let review = Span::named(&own, FARM, "SubjectAccessReview").unwrap();
    assert!(ancestors(&own, review).contains(&linked.span_id), "{review:#?} is not under {linked:#?}");
    assert_eq!(Span::named(&own, KUBE, sar).unwrap().parent_span_id, review.span_id, "{own:#?}");
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
