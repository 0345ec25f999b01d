//! The scale subresource of Herds beside the Herd CRD's: the Scale read from
//! the object, merge, JSON and strategic merge patches and updates of it,
//! the resourceVersion precondition, validation of the replicas, a herd whose
//! replicas were never set, the verbs `/scale` does not have, and admission
//! webhooks registered for `herds/scale`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::compare::{admin_client, Comparison, Step, CRD_GROUP, OUR_GROUP};
use crate::common::crd::install_herd_crd;
use crate::compare::admission::{configuration, uninstall, webhook_server, Hook};

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

async fn comparison(ns: &str) -> Comparison {
    let cmp = Comparison::new(ns).await;
    install_herd_crd(cmp.cp, CRD_GROUP).unwrap_or_else(|e| panic!("{e}"));
    cmp
}

fn herd(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "{gv1beta1}", "kind": "Herd", "metadata": {"name": name}, "spec": spec})
}

const HERDS: &str = "/apis/{gv1beta1}/namespaces/{ns}/herds";

fn at(path: &str) -> String {
    format!("{HERDS}{path}")
}

#[tokio::test]
async fn the_scale_subresource_reads_and_writes_replicas_as_the_crds() {
    let cmp = comparison("cmp-scale")
        .await
        .ignoring("/resources/*/storageVersionHash", "a hash of the group, which differs between the two")
        .ignoring("/rows/*/cells/3", "the Scale's age, read a moment apart on each server");
    cmp.run(&[
        Step::post(HERDS).json(herd("a", json!({"replicas": 2, "pasture": "north"}))).expect(201),
        Step::get(&at("/a/scale")).expect(200).capture("rv", "/metadata/resourceVersion"),
        Step::patch(&at("/a/status"))
            .patch_body(MERGE, json!({"status": {"replicas": 2, "selector": "herd=a"}}))
            .expect(200),
        Step::get(&at("/a/scale")).expect(200),
        Step::get(&at("/a/scale")).header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").expect(200),
        Step::get(&at("/a/scale"))
            .header("Accept", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")
            .expect(200),
        // A patch applies to the Scale, and writes its replicas to the object.
        Step::patch(&at("/a/scale")).patch_body(MERGE, json!({"spec": {"replicas": 5}})).expect(200),
        Step::patch(&at("/a/scale"))
            .patch_body(JSON_PATCH, json!([{"op": "replace", "path": "/spec/replicas", "value": 4}]))
            .expect(200),
        Step::patch(&at("/a/scale")).patch_body(STRATEGIC, json!({"spec": {"replicas": 3}})).expect(415),
        // Only the replicas reach the object: the status and labels sent are not written.
        Step::patch(&at("/a/scale"))
            .patch_body(MERGE, json!({"metadata": {"labels": {"x": "y"}}, "status": {"replicas": 9}}))
            .expect(200),
        Step::get(&at("/a")).expect(200).capture("rv2", "/metadata/resourceVersion"),
        // An update: a stale resourceVersion is a conflict, the current one writes.
        Step::put(&at("/a/scale"))
            .json(json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "a", "resourceVersion": "{$rv}"}, "spec": {"replicas": 7}}))
            .expect(409),
        Step::put(&at("/a/scale"))
            .json(json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "a", "resourceVersion": "{$rv2}"}, "spec": {"replicas": 7}}))
            .expect(200),
        Step::put(&at("/a/scale"))
            .json(json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "a"}, "spec": {"replicas": 1}}))
            .expect(200),
        Step::put(&at("/a/scale"))
            .json(json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "b"}, "spec": {"replicas": 1}}))
            .expect(400),
        // The replicas are checked on the object, as on every write to it.
        Step::patch(&at("/a/scale")).patch_body(MERGE, json!({"spec": {"replicas": -1}})).expect(422),
        Step::patch(&at("/a")).patch_body(MERGE, json!({"spec": {"replicas": -2}})).expect(422),
        Step::patch(&at("/a/status")).patch_body(MERGE, json!({"status": {"replicas": -3}})).expect(422),
        Step::get(&at("/a")).expect(200),
        // What /scale does not serve.
        Step::delete(&at("/a/scale")).expect(405),
        Step::post(&at("/a/scale")).json(json!({"apiVersion": "autoscaling/v1", "kind": "Scale"})).expect(405),
        Step::get(&at("/nobody/scale")).expect(404),
        // Discovery names the subresource and its kind as for the CRD.
        Step::get("/apis/{gv1beta1}").expect(200),
        Step::patch(&at("/nobody/scale")).patch_body(MERGE, json!({"spec": {"replicas": 1}})).expect(404),
    ])
    .await
    .assert_identical();
}

/// A herd whose replicas were never set: its Scale cannot be read, a patch
/// must set them, and an update sets them.
#[tokio::test]
async fn a_herd_without_replicas_must_be_given_some_through_its_scale() {
    let cmp = comparison("cmp-scale-unset").await;
    cmp.run(&[
        Step::post(HERDS).json(herd("b", json!({"pasture": "south"}))).expect(201),
        Step::get(&at("/b/scale")).expect(500),
        Step::patch(&at("/b/scale")).patch_body(MERGE, json!({"metadata": {"labels": {"x": "y"}}})).expect(400),
        Step::patch(&at("/b/scale")).patch_body(MERGE, json!({"spec": {"replicas": 2}})).expect(200),
        Step::post(HERDS).json(herd("c", json!({}))).expect(201),
        Step::put(&at("/c/scale"))
            .json(json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "c"}, "spec": {}}))
            .expect(200),
        Step::get(&at("/c")).expect(200),
    ])
    .await
    .assert_identical();
}

/// Admission webhooks registered for `herds/scale` see Scales, as for the
/// CRD: the mutating one's change to the replicas is what is written, and
/// the validating one refuses what the mutated Scale asks.
#[tokio::test]
async fn webhooks_on_the_scale_subresource_see_scales_as_for_the_crd() {
    let cmp = comparison("cmp-scale-admission").await;
    let server = webhook_server().await;
    let scale_hook =
        |name, path| Hook { resources: vec!["herds/scale"], operations: vec!["UPDATE"], ..Hook::new(name, path) };
    let mutating = configuration(
        "MutatingWebhookConfiguration",
        "cmp-scale-double",
        &cmp.ns,
        server,
        &[scale_hook("double.farm.test", "/double-replicas")],
    );
    let validating = configuration(
        "ValidatingWebhookConfiguration",
        "cmp-scale-cap",
        &cmp.ns,
        server,
        &[scale_hook("cap.farm.test", "/cap-replicas")],
    );
    cmp.run(&[Step::post(HERDS).json(herd("probe", json!({"replicas": 1}))).expect(201)]).await.assert_identical();
    cmp.cp.apply(&mutating);
    cmp.cp.apply(&validating);
    // Both servers read configurations from a watch: scale the probe until both call both hooks.
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = admin_client(cmp.cp);
    loop {
        for group in [CRD_GROUP, OUR_GROUP] {
            let url = format!("{}/apis/{group}/v1beta1/namespaces/{}/herds/probe/scale", cmp.cp.server, cmp.ns);
            let body = json!({"spec": {"replicas": 1}}).to_string();
            let _ = client.patch(&url).header("Content-Type", MERGE).body(body).send().await;
        }
        let called = |path: &str, group: &str| {
            server.reviews_for(path, &cmp.ns).iter().any(|r| r["request"]["resource"]["group"] == group)
        };
        if [CRD_GROUP, OUR_GROUP].iter().all(|g| called("/double-replicas", g) && called("/cap-replicas", g)) {
            break;
        }
        assert!(Instant::now() < deadline, "the scale webhooks were not called by both servers within 60 s");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    cmp.run(&[
        Step::post(HERDS).json(herd("a", json!({"replicas": 1}))).expect(201),
        Step::patch(&at("/a/scale")).patch_body(MERGE, json!({"spec": {"replicas": 3}})).expect(200),
        Step::patch(&at("/a/scale")).patch_body(MERGE, json!({"spec": {"replicas": 6}})).expect(403),
        Step::put(&at("/a/scale"))
            .json(json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "a"}, "spec": {"replicas": 4}}))
            .expect(200),
        Step::get(&at("/a")).expect(200),
    ])
    .await
    .assert_identical();
    // What each hook was shown of the first scaling of `a`: a Scale, in each server's words.
    for path in ["/double-replicas", "/cap-replicas"] {
        let shown = |group: &str| {
            let review = server
                .reviews_for(path, &cmp.ns)
                .into_iter()
                .find(|r| r["request"]["resource"]["group"] == group && r["request"]["name"] == "a")
                .unwrap_or_else(|| panic!("{path} saw no scaling of a through {group}"));
            let request = &review["request"];
            json!({
                "kind": request["kind"], "requestKind": request["requestKind"],
                "resource": request["resource"]["resource"], "subResource": request["subResource"],
                "operation": request["operation"], "options": request["options"],
                "object": {"kind": request["object"]["kind"], "apiVersion": request["object"]["apiVersion"],
                    "spec": request["object"]["spec"], "status": request["object"]["status"],
                    "name": request["object"]["metadata"]["name"]},
                "oldObject": {"kind": request["oldObject"]["kind"], "spec": request["oldObject"]["spec"]},
            })
        };
        assert_eq!(shown(OUR_GROUP), shown(CRD_GROUP), "what {path} was shown: ours, then the CRD's");
        assert_eq!(shown(OUR_GROUP)["kind"], json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}));
    }
    uninstall(cmp.cp, "MutatingWebhookConfiguration", "cmp-scale-double");
    uninstall(cmp.cp, "ValidatingWebhookConfiguration", "cmp-scale-cap");
}
