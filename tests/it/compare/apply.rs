//! Server-side apply and managedFields side by side with kube-apiserver
//! serving the Llama CRD (tests/common/compare.rs): the same sequences must
//! give the same codes, reasons, causes, objects and managedFields (times and
//! resourceVersions aside).

use crate::common::compare::{llama, Comparison, Parts, Step, OURS};
use serde_json::{json, Value};

const APPLY: &str = "application/apply-patch+yaml";

/// A server-side apply of `body` to `path` by `manager`.
pub(super) fn apply(path: &str, manager: &str, body: Value) -> Step {
    let sep = if path.contains('?') { '&' } else { '?' };
    Step::patch(&format!("{path}{sep}fieldManager={manager}")).patch_body(APPLY, body)
}

fn with_spec(name: &str, weight: f64, height: f64) -> Value {
    json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": name}, "spec": {"weight": weight, "height": height}})
}

#[tokio::test]
async fn apply_create_conflict_force_and_removal() {
    let cmp = Comparison::new("compare-ssa").await;
    let mut first = with_spec("a", 30.0, 1.5);
    first["metadata"]["labels"] = json!({"x": "1", "y": "2"});
    first["metadata"]["finalizers"] = json!(["example.com/keep"]);
    let mut fewer = with_spec("a", 30.0, 1.5);
    fewer["metadata"]["labels"] = json!({"x": "1"});
    let mut bob_finalizer = with_spec("a", 35.0, 1.5);
    bob_finalizer["metadata"]["finalizers"] = json!(["example.com/bob"]);
    // bob stops applying spec: weight is his alone, so it goes, and the object is invalid.
    let bob_without_spec =
        json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "a", "finalizers": ["example.com/bob"]}});
    cmp.run(&[
        apply("{llamas}/a", "alice", first).expect(201),
        // A different value for an owned field: one conflict, named.
        apply("{llamas}/a", "bob", with_spec("a", 35.0, 1.5)).expect(409),
        // Two conflicting fields.
        apply("{llamas}/a", "bob", with_spec("a", 35.0, 1.6)).expect(409),
        // The same values are shared, not conflicts.
        apply("{llamas}/a", "carol", with_spec("a", 30.0, 1.5)).expect(200),
        apply("{llamas}/a?force=true", "bob", with_spec("a", 35.0, 1.5)).expect(200),
        // Set lists merge: both finalizers stay, each owned by its applier.
        apply("{llamas}/a", "bob", bob_finalizer).expect(200),
        apply("{llamas}/a", "bob", bob_without_spec).expect(422),
        // alice no longer owns weight: applying her old value conflicts with bob.
        apply("{llamas}/a", "alice", fewer.clone()).expect(409),
        // alice stops applying label y: it goes; nobody else owns it.
        apply("{llamas}/a", "alice", {
            let mut v = fewer;
            v["spec"]["weight"] = json!(35);
            v
        })
        .expect(200),
        Step::get("{llamas}/a").expect(200),
        // Dry run: the answer, not a write.
        apply("{llamas}/a?dryRun=All&force=true", "dave", with_spec("a", 50.0, 2.0)).expect(200),
        Step::get("{llamas}/a").expect(200),
        // Applying the values the object has is no conflict and no change.
        apply("{llamas}/a", "carol", with_spec("a", 35.0, 1.5)).expect(200),
        Step::patch("{llamas}/a")
            .patch_body("application/merge-patch+json", json!({"metadata": {"finalizers": null}}))
            .expect(200),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn apply_errors_answer_as_kube_does() {
    let cmp = Comparison::new("compare-ssa-errors").await;
    let mut with_managed = llama("e");
    with_managed["metadata"]["managedFields"] =
        json!([{"manager": "x", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {}}]);
    let mut stale = llama("e");
    stale["metadata"]["resourceVersion"] = json!("1");
    cmp.run(&[
        // fieldManager is required for apply; force only on apply.
        Step::patch("{llamas}/e").patch_body(APPLY, llama("e")).expect(422),
        Step::patch("{llamas}/e?force=true").patch_body("application/merge-patch+json", json!({})).expect(422),
        apply("{llamas}/e", "m", with_managed).expect(400),
        apply("{llamas}/e", "m", llama("other")).expect(400),
        Step::patch("{llamas}/e?fieldManager=m")
            .header("Content-Type", "application/apply-patch+cbor")
            .raw(b"\xa0".to_vec())
            .only(Parts::CODE),
        Step::patch("{llamas}/e?fieldManager=m").header("Content-Type", APPLY).raw("{not json").only(Parts::CODE),
        apply("{llamas}/e/status", "m", llama("e")).expect(404),
        apply("{llamas}/e", "m", llama("e")).expect(201),
        apply("{llamas}/e", "m", stale).expect(409),
        apply("{llamas}/e", "m", json!({"apiVersion": "{gv}", "kind": "Alpaca", "metadata": {"name": "e"}})),
        // A configuration that does not say its type.
        apply("{llamas}/e", "m", json!({"k": "v"})).expect(400),
        apply("{llamas}/e", "m", json!({"kind": "Llama", "metadata": {"name": "e"}})).expect(400),
        apply("{llamas}/e", "m", json!({"apiVersion": "{gv}", "metadata": {"name": "e"}})).expect(400),
        apply("{llamas}/e", "m", json!({"apiVersion": "v1alpha", "kind": "Llama", "metadata": {"name": "e"}})).expect(400),
        apply("{llamas}/e", "m", json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "e"}, "spec": {"weight": -1, "height": 1}}))
            .expect(422),
        Step::patch("{llamas}/e").patch_body("application/strategic-merge-patch+json", json!({})).expect(415),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn updates_record_managed_fields_as_kube_does() {
    let cmp = Comparison::new("compare-managed-fields").await;
    cmp.run(&[
        Step::post("{llamas}")
            .header("User-Agent", "maker/1.2 (linux)")
            .json(llama("u"))
            .expect(201)
            .capture("rv", "/metadata/resourceVersion"),
        Step::patch("{llamas}/u?fieldManager=patcher")
            .patch_body(
                "application/merge-patch+json",
                json!({"metadata": {"labels": {"a": "b"}}, "spec": {"weight": 40}}),
            )
            .expect(200),
        Step::patch("{llamas}/u")
            .header("User-Agent", "jsonpatcher")
            .patch_body("application/json-patch+json", json!([{"op": "replace", "path": "/spec/height", "value": 2}]))
            .expect(200),
        Step::patch("{llamas}/u/status?fieldManager=statuser")
            .patch_body("application/merge-patch+json", json!({"status": {"observedGeneration": 3}}))
            .expect(200),
        // managedFields may be rewritten by an update; invalid ones are ignored.
        Step::patch("{llamas}/u?fieldManager=rewriter")
            .patch_body(
                "application/merge-patch+json",
                json!({"metadata": {"managedFields": [{"manager": "x", "operation": "Bogus"}]}}),
            )
            .expect(200),
        Step::patch("{llamas}/u?fieldManager=clearer")
            .patch_body("application/merge-patch+json", json!({"metadata": {"managedFields": []}}))
            .expect(200),
        Step::patch("{llamas}/u?fieldManager=resetter")
            .patch_body(
                "application/merge-patch+json",
                json!({"metadata": {"managedFields": [{}]}, "spec": {"weight": 41}}),
            )
            .expect(200),
        Step::get("{llamas}/u").expect(200),
        // A whole number sent as 2.0 is written back as kube writes it (2).
        Step::post("{llamas}")
            .raw(r#"{"apiVersion":"{gv}","kind":"Llama","metadata":{"name":"whole"},"spec":{"weight":2.0,"height":1}}"#)
            .expect(201),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn status_conditions_are_owned_by_key() {
    let cmp = Comparison::new("compare-ssa-status").await;
    let condition = |status: &str| {
        json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "s"},
            "status": {"conditions": [{"type": "Ready", "status": status, "reason": "R", "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    };
    let other = json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "s"},
        "status": {"conditions": [{"type": "Fed", "status": "True", "reason": "R", "message": "m",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    cmp.run(&[
        apply("{llamas}/s", "spec-owner", with_spec("s", 30.0, 1.5)).expect(201),
        apply("{llamas}/s/status", "ctl", condition("True")).expect(200),
        apply("{llamas}/s/status", "ctl2", condition("False")).expect(409),
        apply("{llamas}/s/status", "ctl2", other).expect(200),
        // A main-resource apply carrying status: status is not its to set.
        apply("{llamas}/s", "spec-owner", {
            let mut v = with_spec("s", 31.0, 1.5);
            v["status"] = json!({"observedGeneration": 9});
            v
        })
        .expect(200),
        Step::get("{llamas}/s").expect(200),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn farmpods_are_read_only_to_apply_too() {
    let cmp = Comparison::new("compare-ssa-farmpods").await;
    let config = json!({"apiVersion": "farm.example.com/v1alpha", "kind": "FarmPod", "metadata": {"name": "p"}});
    let answer =
        cmp.send_one(&OURS, &apply("/apis/farm.example.com/v1alpha/namespaces/{ns}/farmpods/p", "m", config)).await;
    assert_eq!(answer.code, 405, "{:?}", answer.raw);
    assert_eq!(answer.raw["reason"], "MethodNotAllowed", "{:?}", answer.raw);
}

#[tokio::test]
async fn apply_unknown_and_duplicate_fields() {
    let cmp = Comparison::new("compare-ssa-fields").await;
    let mut unknown = with_spec("f", 30.0, 1.5);
    unknown["spec"]["colour"] = json!("white");
    let duplicate =
        r#"{"apiVersion":"{gv}","kind":"Llama","metadata":{"name":"f"},"spec":{"weight":31,"weight":32,"height":1.5}}"#;
    cmp.run(&[
        apply("{llamas}/f?fieldValidation=Strict", "m", unknown.clone()),
        apply("{llamas}/f?fieldValidation=Warn", "m", unknown.clone()),
        apply("{llamas}/f?fieldValidation=Ignore", "m", unknown.clone()),
        apply("{llamas}/f", "m", unknown),
        // Duplicate keys: kube reports them in its YAML parser's words (with
        // line numbers), we in the JSON decoder's; the outcome is the same.
        Step::patch("{llamas}/f?fieldManager=m&fieldValidation=Strict")
            .header("Content-Type", APPLY)
            .raw(duplicate)
            .only(Parts::CODE),
        Step::patch("{llamas}/f?fieldManager=m").header("Content-Type", APPLY).raw(duplicate).only(Parts::CODE),
        Step::get("{llamas}/f").expect(200),
        // A configuration in YAML, as the media type says. (Not named `y`:
        // kube reads YAML 1.1, where that is a boolean.)
        Step::patch("{llamas}/yaml?fieldManager=m")
            .header("Content-Type", APPLY)
            .raw("apiVersion: {gv}\nkind: Llama\nmetadata:\n  name: yaml\n  labels: {a: b}\nspec:\n  weight: 3\n  height: 1.5\n")
            .expect(201),
        Step::patch("{llamas}/yaml?fieldManager=m").header("Content-Type", APPLY).raw("spec: [unclosed").only(Parts::CODE),
    ])
    .await
    .assert_identical();
}
