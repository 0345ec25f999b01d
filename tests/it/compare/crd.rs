//! farm-apiserver's Llamas compared, request by request, with kube-apiserver
//! serving the same kind as a CRD (tests/common/compare.rs): every sequence
//! must get the same answers from both after the helper's normalization.
//! `known_differences` pins what still differs, each with whose it is.

use crate::common::compare::{llama, Comparison, Parts, Step};
use serde_json::{json, Value};

/// kube records an Update entry per writer in managedFields; we keep none yet.
const MANAGED_FIELDS_WHY: &str = "managedFields belong to the server-side apply work (another engineer)";

async fn comparison(ns: &str) -> Comparison {
    Comparison::new(ns)
        .await
        .ignoring("/metadata/managedFields", MANAGED_FIELDS_WHY)
        .ignoring("/items/*/metadata/managedFields", MANAGED_FIELDS_WHY)
}

/// A Llama of the target's group with this metadata and spec.
fn llama_of(metadata: Value, spec: Value) -> Value {
    json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": metadata, "spec": spec})
}

fn ok_spec() -> Value {
    json!({"weight": 1, "height": 1})
}

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";

#[tokio::test]
async fn create_get_and_list() {
    let cmp = comparison("cmp-create").await;
    cmp.run(&[
        Step::post("{llamas}").json(llama("dolly")).expect(201),
        Step::get("{llamas}/dolly").expect(200),
        Step::post("{llamas}").json(llama("dolly")).expect(409),
        Step::get("{llamas}").expect(200),
        Step::get("{llamas}/nobody").expect(404),
        Step::post("{llamas}").json(llama_of(json!({"generateName": "gen-"}), ok_spec())).expect(201),
        Step::post("{llamas}?dryRun=All").json(llama("dry")).expect(201),
        Step::get("{llamas}/dry").expect(404),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn create_invalid() {
    let cmp = comparison("cmp-create-invalid").await;
    cmp.run(&[
        Step::post("{llamas}").json(llama_of(json!({"name": "neg"}), json!({"weight": -1, "height": 1}))).expect(422),
        // One bad field per request: kube walks schema properties in Go map
        // order, so the order of several causes varies from call to call.
        Step::post("{llamas}").json(llama_of(json!({"name": "zero"}), json!({"weight": 0, "height": 1}))).expect(422),
        Step::post("{llamas}").json(llama_of(json!({"name": "missing"}), json!({}))).expect(422),
        Step::post("{llamas}").json(llama_of(json!({"name": "str"}), json!({"weight": "x", "height": 1}))).expect(422),
        Step::post("{llamas}")
            .json(json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "nospec"}}))
            .expect(422),
        Step::post("{llamas}").json(llama("Bad_Name")).expect(422),
        Step::post("{llamas}").json(llama("a.b.")).expect(422),
        Step::post("{llamas}").json(llama(&"x".repeat(254))).expect(422),
        Step::post("{llamas}").json(llama_of(json!({}), ok_spec())).expect(422),
        Step::post("{llamas}").json(llama_of(json!({"generateName": "Bad_"}), ok_spec())).expect(422),
        Step::post("{llamas}")
            .json(llama_of(json!({"name": "lab", "labels": {"bad key!": "v"}}), ok_spec()))
            .expect(422),
    ])
    .await
    .assert_identical();
}

/// Wrong apiVersion, kind or namespace, and bodies that are not objects.
#[tokio::test]
async fn create_wrong_type_or_body() {
    let cmp = comparison("cmp-create-kind").await;
    let typed = |api_version: &str, kind: &str| json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "a"}, "spec": {"weight": 1, "height": 1}});
    cmp.run(&[
        Step::post("{llamas}").json(typed("other.example.com/v1alpha", "Llama")).expect(400),
        // details.kind is the kind the body claims.
        Step::post("{llamas}").json(typed("{gv}", "Alpaca")).expect(422),
        Step::post("{llamas}").json(json!({"kind": "Llama", "metadata": {"name": "a"}, "spec": ok_spec()})),
        // The message ends with the body's first 30 bytes, which cut each
        // target's group name at a different place: compared apart.
        Step::post("{llamas}")
            .json(json!({"apiVersion": "{gv}", "metadata": {"name": "a"}, "spec": ok_spec()}))
            .expect(400)
            .body_at(&["/code", "/reason", "/details"]),
        Step::post("{llamas}").json(llama_of(json!({"name": "a", "namespace": "elsewhere"}), ok_spec())).expect(400),
        Step::post("{llamas}").json(llama_of(json!({"name": "b", "namespace": "{ns}"}), ok_spec())).expect(201),
        Step::post("{llamas}").raw("not json").expect(400),
        Step::post("{llamas}").raw("[]").expect(400),
        Step::post("{llamas}").raw("").expect(400),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn create_field_validation() {
    let cmp = comparison("cmp-create-fv").await;
    let unknown = |name: &str| {
        json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": name, "bogus": 1},
               "spec": {"weight": 1, "height": 1, "colour": "brown"}, "extra": true})
    };
    let dup = |name: &str| {
        format!(
            r#"{{"apiVersion":"{{gv}}","kind":"Llama","metadata":{{"name":"{name}"}},"spec":{{"weight":1,"height":1,"weight":2}}}}"#
        )
    };
    cmp.run(&[
        Step::post("{llamas}?fieldValidation=Strict").json(unknown("strict")).expect(400),
        Step::post("{llamas}?fieldValidation=Warn").json(unknown("warn")).expect(201),
        Step::post("{llamas}?fieldValidation=Ignore").json(unknown("ignore")).expect(201),
        Step::post("{llamas}").json(unknown("default")).expect(201),
        Step::post("{llamas}?fieldValidation=Strict").raw(dup("dup-strict")).expect(400),
        Step::post("{llamas}?fieldValidation=Warn").raw(dup("dup-warn")).expect(201),
        Step::post("{llamas}?fieldValidation=Ignore").raw(dup("dup-ignore")).expect(201),
    ])
    .await
    .assert_identical();
}

/// Invalid CreateOptions, UpdateOptions and PatchOptions in the query: 422
/// with kube's causes, before anything is read or written.
#[tokio::test]
async fn write_options_invalid() {
    let cmp = comparison("cmp-write-opts").await;
    let long = "m".repeat(129);
    let queries = [
        "dryRun=Bogus",
        "dryRun=All&dryRun=Bogus",
        &format!("fieldManager={long}"),
        "fieldManager=%01x",
        "fieldValidation=Bogus",
        "fieldValidation=strict",
        "fieldValidation=Bogus&dryRun=Bogus&fieldManager=%7F",
    ];
    let mut steps = vec![Step::post("{llamas}").json(llama("dolly")).expect(201)];
    for q in queries {
        steps.push(Step::post(&format!("{{llamas}}?{q}")).json(llama("a")).expect(422));
        steps.push(Step::put(&format!("{{llamas}}/dolly?{q}")).json(llama("dolly")).expect(422));
        steps.push(Step::patch(&format!("{{llamas}}/dolly?{q}")).patch_body(MERGE, json!({})).expect(422));
        steps.push(Step::patch(&format!("{{llamas}}/dolly/status?{q}")).patch_body(MERGE, json!({})).expect(422));
    }
    steps.push(Step::get("{llamas}").expect(200));
    cmp.run(&steps).await.assert_identical();
}

#[tokio::test]
async fn list_selectors_and_paging() {
    let cmp = comparison("cmp-list").await;
    let labelled = |name: &str, colour: &str, weight: i64| {
        llama_of(json!({"name": name, "labels": {"colour": colour}}), json!({"weight": weight, "height": 1}))
    };
    cmp.run(&[
        Step::post("{llamas}").json(labelled("a", "brown", 1)).expect(201),
        // A colour no other test uses: the last step lists every namespace.
        Step::post("{llamas}").json(labelled("b", "cmp-list-white", 2)).expect(201),
        Step::post("{llamas}").json(labelled("c", "brown", 3)).expect(201),
        Step::get("{llamas}?labelSelector=colour%3Dbrown").expect(200),
        Step::get("{llamas}?labelSelector=colour+notin+(brown)").expect(200),
        Step::get("{llamas}?labelSelector=colour%3D%3D").expect(200),
        Step::get("{llamas}?labelSelector=%21%21").expect(400),
        Step::get("{llamas}?fieldSelector=metadata.name%3Db").expect(200),
        Step::get("{llamas}?fieldSelector=metadata.name%21%3Db").expect(200),
        Step::get("{llamas}?fieldSelector=spec.colour%3Db").expect(400),
        Step::get("{llamas}?fieldSelector=metadata.namespace%3D{ns}").expect(200),
        Step::get("{llamas}?limit=2").expect(200).capture("next", "/metadata/continue"),
        // The last page: `"continue": ""`, as an unstructured list has it.
        Step::get("{llamas}?limit=2&continue={$next}").expect(200),
        // A token that does not decode: kube's storage words it, before
        // refusing a resourceVersion next to a continue.
        Step::get("{llamas}?limit=2&continue=x").expect(400),
        Step::get("{llamas}?continue=x&resourceVersion=5").expect(400),
        Step::get("{llamas}?limit=2&continue={$next}&resourceVersion=5").expect(400),
        Step::get("{llamas}?limit=0").expect(200),
        Step::get("/apis/{gv}/llamas?labelSelector=colour%3Dcmp-list-white").expect(200),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn update_rules() {
    let cmp = comparison("cmp-update").await;
    let with_meta = |meta: Value, weight: i64| llama_of(meta, json!({"weight": weight, "height": 1}));
    let other_uid = "6f1f0b8a-0000-4000-8000-000000000000";
    cmp.run(&[
        Step::post("{llamas}")
            .json(llama("dolly"))
            .expect(201)
            .capture("rv", "/metadata/resourceVersion")
            .capture("uid", "/metadata/uid"),
        Step::put("{llamas}/dolly")
            .json(with_meta(json!({"name": "dolly", "resourceVersion": "{$rv}"}), 2))
            .expect(200),
        // The first resourceVersion is stale now.
        Step::put("{llamas}/dolly")
            .json(with_meta(json!({"name": "dolly", "resourceVersion": "{$rv}"}), 3))
            .expect(409),
        // Another uid is a failed precondition (409), checked before the missing resourceVersion.
        Step::put("{llamas}/dolly").json(with_meta(json!({"name": "dolly", "uid": other_uid}), 3)).expect(409),
        Step::put("{llamas}/dolly")
            .json(with_meta(json!({"name": "dolly", "uid": other_uid, "resourceVersion": "{$rv}"}), 3))
            .expect(409),
        // The right uid and no resourceVersion: `llamas.<group> "dolly" is invalid`, value 0.
        Step::put("{llamas}/dolly").json(with_meta(json!({"name": "dolly", "uid": "{$uid}"}), 3)).expect(422),
        Step::put("{llamas}/dolly").json(with_meta(json!({"name": "other"}), 3)).expect(400),
        Step::put("{llamas}/dolly").json(with_meta(json!({"name": "dolly", "namespace": "elsewhere"}), 3)).expect(400),
        Step::put("{llamas}/dolly").json(with_meta(json!({"name": "dolly"}), -3)).expect(422),
        Step::put("{llamas}/nobody").json(with_meta(json!({"name": "nobody", "resourceVersion": "1"}), 3)).expect(404),
        // A custom resource is not created by an update.
        Step::put("{llamas}/newcomer").json(with_meta(json!({"name": "newcomer"}), 3)).expect(404),
        Step::get("{llamas}/dolly").expect(200).capture("rv", "/metadata/resourceVersion"),
        Step::put("{llamas}/dolly")
            .json(with_meta(json!({"name": "dolly", "resourceVersion": "{$rv}", "uid": other_uid}), 3))
            .expect(409),
        Step::get("{llamas}/dolly").expect(200),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn patches() {
    let cmp = comparison("cmp-patch").await;
    cmp.run(&[
        Step::post("{llamas}").json(llama("dolly")).expect(201),
        Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"spec": {"weight": 4}})).expect(200),
        Step::patch("{llamas}/dolly")
            .patch_body(JSON_PATCH, json!([{"op": "replace", "path": "/spec/height", "value": 2}]))
            .expect(200),
        // A JSON patch that does not apply: kube's generic 422.
        Step::patch("{llamas}/dolly")
            .patch_body(JSON_PATCH, json!([{"op": "test", "path": "/spec/height", "value": 99}]))
            .expect(422),
        Step::patch("{llamas}/dolly")
            .patch_body(JSON_PATCH, json!([{"op": "remove", "path": "/spec/nothing"}]))
            .expect(422),
        Step::patch("{llamas}/dolly").patch_body(JSON_PATCH, json!({"op": "remove"})).expect(400),
        Step::patch("{llamas}/dolly").patch_body(JSON_PATCH, json!("x")).expect(400),
        Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"spec": {"weight": -4}})).expect(422),
        Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"metadata": {"name": "other"}})).expect(400),
        // Immutable uid: kube lists the cause twice (two metadata checks), the message once.
        Step::patch("{llamas}/dolly")
            .patch_body(MERGE, json!({"metadata": {"uid": "6f1f0b8a-0000-4000-8000-000000000000"}}))
            .expect(422),
        Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"metadata": {"resourceVersion": "1"}})).expect(409),
        Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"spec": {"colour": "x"}})).expect(200),
        // kube shows the whole patched object in the message, managedFields
        // included (which we do not keep yet): compared apart from the message.
        Step::patch("{llamas}/dolly?fieldValidation=Strict")
            .patch_body(MERGE, json!({"spec": {"colour": "x"}}))
            .expect(422)
            .body_at(&["/code", "/reason", "/status", "/details/causes/0/field", "/details/causes/0/reason"]),
        Step::patch("{llamas}/dolly?fieldValidation=Warn")
            .patch_body(MERGE, json!({"spec": {"colour": "x"}}))
            .expect(200),
        Step::patch("{llamas}/dolly").header("Content-Type", MERGE).raw("{bad").expect(400),
        Step::patch("{llamas}/nobody").patch_body(MERGE, json!({"spec": {"weight": 4}})).expect(404),
        Step::get("{llamas}/dolly").expect(200),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn status_subresource() {
    let cmp = comparison("cmp-status").await;
    let with_status = |meta: Value, status: Value| json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": meta, "spec": {"weight": 1, "height": 1}, "status": status});
    let ready = json!([{"type": "Ready", "status": "True", "reason": "Fed", "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
    cmp.run(&[
        Step::post("{llamas}")
            .json(with_status(json!({"name": "dolly"}), json!({"observedGeneration": 5})))
            .expect(201),
        Step::patch("{llamas}/dolly/status")
            .patch_body(MERGE, json!({"status": {"observedGeneration": 1}, "spec": {"weight": 9}}))
            .expect(200),
        Step::get("{llamas}/dolly/status").expect(200).capture("rv", "/metadata/resourceVersion"),
        // No resourceVersion: `llamas.<group>` is invalid.
        Step::put("{llamas}/dolly/status")
            .json(with_status(json!({"name": "dolly"}), json!({"observedGeneration": 2})))
            .expect(422),
        Step::put("{llamas}/dolly/status")
            .json(with_status(
                json!({"name": "dolly", "resourceVersion": "{$rv}"}),
                json!({"observedGeneration": 2, "conditions": ready}),
            ))
            .expect(200),
        Step::patch("{llamas}/dolly/status")
            .patch_body(MERGE, json!({"status": {"conditions": [{"type": "Ready", "status": "Maybe"}]}}))
            .expect(422),
        // The status subresource has get, update and patch: 405 naming no object.
        Step::post("{llamas}/dolly/status").json(llama("dolly")).expect(405),
        Step::delete("{llamas}/dolly/status").expect(405),
        Step::get("{llamas}/nobody/status").expect(404),
        Step::get("{llamas}").expect(200),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn deletes() {
    let cmp = comparison("cmp-delete").await;
    let other_uid = "6f1f0b8a-0000-4000-8000-000000000000";
    cmp.run(&[
        Step::post("{llamas}")
            .json(llama("a"))
            .expect(201)
            .capture("uid", "/metadata/uid")
            .capture("rv", "/metadata/resourceVersion"),
        Step::post("{llamas}").json(llama("b")).expect(201),
        // Failed preconditions: 409 naming the kind, kube's words.
        Step::delete("{llamas}/a").json(json!({"preconditions": {"uid": other_uid}})).expect(409),
        Step::delete("{llamas}/a").json(json!({"preconditions": {"resourceVersion": "999999999"}})).expect(409),
        Step::delete("{llamas}/a")
            .json(json!({"dryRun": ["All"], "preconditions": {"uid": "{$uid}", "resourceVersion": "{$rv}"}}))
            .expect(200),
        Step::delete("{llamas}/a?propagationPolicy=Bogus").expect(422),
        Step::delete("{llamas}/a?propagationPolicy=Foreground&dryRun=All").expect(200),
        Step::delete("{llamas}/a").json(json!({"propagationPolicy": "Bogus"})).expect(422),
        Step::delete("{llamas}/a?dryRun=Bogus").expect(422),
        Step::delete("{llamas}/a").json(json!({"dryRun": ["Bogus"]})).expect(422),
        Step::delete("{llamas}/a").json(json!({"gracePeriodSeconds": -5, "dryRun": ["All"]})),
        Step::delete("{llamas}/a?gracePeriodSeconds=-5&dryRun=All"),
        Step::delete("{llamas}/a")
            .json(json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "preconditions": {"uid": "{$uid}"}}))
            .expect(200),
        Step::delete("{llamas}/a").expect(404),
        Step::delete("{llamas}/b?propagationPolicy=Background").expect(200),
        Step::get("{llamas}").expect(200),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn deletecollection() {
    let cmp = comparison("cmp-deletecollection").await;
    let labelled = |name: &str, colour: &str| llama_of(json!({"name": name, "labels": {"colour": colour}}), ok_spec());
    cmp.run(&[
        Step::post("{llamas}").json(labelled("a", "brown")).expect(201),
        Step::post("{llamas}").json(labelled("b", "white")).expect(201),
        Step::post("{llamas}").json(labelled("c", "brown")).expect(201),
        Step::delete("{llamas}?labelSelector=colour%3Dbrown&dryRun=All").expect(200),
        Step::delete("{llamas}?labelSelector=colour%3D%3D").expect(200),
        Step::delete("{llamas}?labelSelector=%21%21").expect(400),
        Step::delete("{llamas}?dryRun=Bogus").expect(422),
        Step::delete("{llamas}?propagationPolicy=Bogus").expect(422),
        Step::delete("{llamas}").json(json!({"dryRun": ["Bogus"]})).expect(422),
        Step::delete("{llamas}?labelSelector=colour%3Dbrown").expect(200),
        Step::get("{llamas}").expect(200),
        Step::delete("{llamas}").expect(200),
        Step::get("{llamas}").expect(200),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn finalizers() {
    let cmp = comparison("cmp-finalizers").await;
    let with_finalizers =
        |name: &str, finalizers: Value| llama_of(json!({"name": name, "finalizers": finalizers}), ok_spec());
    cmp.run(&[
        // A finalizer name without a domain draws a Warning (not orphan or foregroundDeletion).
        Step::post("{llamas}").json(with_finalizers("plain", json!(["keep", "also", "orphan"]))).expect(201),
        Step::post("{llamas}").json(with_finalizers("domain", json!(["example.org/keep"]))).expect(201),
        Step::post("{llamas}").json(with_finalizers("bad", json!(["a/b/c"]))).expect(422),
        Step::post("{llamas}").json(with_finalizers("bad2", json!(["Not Valid"]))).expect(422),
        // Only the finalizers an update adds are warned about.
        Step::patch("{llamas}/plain")
            .patch_body(MERGE, json!({"metadata": {"finalizers": ["keep", "also", "new"]}}))
            .expect(200),
        Step::patch("{llamas}/domain")
            .patch_body(MERGE, json!({"metadata": {"finalizers": ["example.org/keep", "other"]}}))
            .expect(200),
        Step::delete("{llamas}/domain").expect(200),
        Step::get("{llamas}/domain").expect(200),
        Step::patch("{llamas}/domain")
            .patch_body(MERGE, json!({"metadata": {"finalizers": ["example.org/keep", "added"]}}))
            .expect(422),
        Step::patch("{llamas}/domain").patch_body(MERGE, json!({"spec": {"weight": 7}})).expect(200),
        Step::delete("{llamas}/domain").expect(200),
        // Removing the last finalizer deletes it; the answer is the object as written.
        Step::patch("{llamas}/domain").patch_body(MERGE, json!({"metadata": {"finalizers": null}})).expect(200),
        Step::get("{llamas}/domain").expect(404),
        Step::patch("{llamas}/plain").patch_body(MERGE, json!({"metadata": {"finalizers": null}})).expect(200),
    ])
    .await
    .assert_identical();
}

/// Verbs on paths that do not take them answer as kube's CRD handler does.
#[tokio::test]
async fn wrong_verbs() {
    let cmp = comparison("cmp-verbs").await;
    cmp.run(&[
        Step::post("{llamas}").json(llama("dolly")).expect(201),
        Step::put("{llamas}").json(llama("dolly")).expect(400),
        Step::patch("{llamas}").patch_body(MERGE, json!({})).expect(400),
        // POST on an object's path creates the body (the path's name is not used).
        Step::post("{llamas}/dolly").json(llama("dolly")).expect(409),
        Step::post("{llamas}/someone-else").json(llama("by-body")).expect(201),
        Step::get("{llamas}/by-body").expect(200),
        // Across all namespaces only list and watch are served.
        Step::post("/apis/{gv}/llamas").json(llama("dolly")).expect(404),
        Step::put("/apis/{gv}/llamas").json(llama("dolly")).expect(404),
        Step::patch("/apis/{gv}/llamas").patch_body(MERGE, json!({})).expect(404),
        Step::delete("/apis/{gv}/llamas").expect(404),
        Step::get("/apis/{gv}/llamas/dolly").expect(404),
        Step::new(reqwest::Method::OPTIONS, "{llamas}").expect(405),
        Step::new(reqwest::Method::HEAD, "{llamas}/dolly").expect(200),
        Step::get("/apis/{gv}/namespaces/{ns}/nothings").expect(404),
        Step::get("{llamas}/dolly/bogus").expect(404),
        Step::get("{llamas}/dolly/status/extra").expect(200),
    ])
    .await
    .assert_identical();
}

/// Reads with options, metadata-only answers, DeleteOptions bodies, and the
/// system metadata a write may not set.
#[tokio::test]
async fn reads_options_and_metadata() {
    let cmp = comparison("cmp-reads-meta").await;
    let pom = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let poml = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let table = "application/json;as=Table;g=meta.k8s.io;v=v1";
    let headers_only = Parts { code: true, content_type: true, warnings: true, body: false };
    cmp.run(&[
        Step::post("{llamas}").json(llama_of(json!({"name": "a", "labels": {"x": "y"}}), ok_spec())).expect(201),
        Step::get("{llamas}/a?resourceVersion=0").expect(200),
        Step::get("{llamas}?resourceVersionMatch=Exact").expect(422),
        Step::get("{llamas}?resourceVersionMatch=NotOlderThan&resourceVersion=0").expect(200),
        Step::get("{llamas}?resourceVersionMatch=Bogus&resourceVersion=1").expect(422),
        Step::get("{llamas}?limit=-1").expect(200),
        Step::get("{llamas}?limit=1&resourceVersion=0").expect(200),
        // Metadata-only and Table answers are labelled plain application/json.
        Step::get("{llamas}/a").header("Accept", pom).expect(200),
        Step::get("{llamas}").header("Accept", poml).expect(200),
        Step::get("{llamas}/a").header("Accept", table).expect(200).only(headers_only),
        Step::get("{llamas}?fieldSelector=metadata.name%3Da%2Cmetadata.name%3Db").expect(200),
        Step::get("{llamas}?labelSelector=x+in+(y,z)&fieldSelector=metadata.namespace!%3Dfoo").expect(200),
        Step::delete("{llamas}").json(json!({"preconditions": {"uid": "x"}})).expect(409),
        Step::delete("{llamas}").json(json!({"orphanDependents": true, "propagationPolicy": "Orphan"})).expect(422),
        Step::delete("{llamas}/a").json(json!({"gracePeriodSeconds": 5, "dryRun": ["All"]})).expect(200),
        Step::delete("{llamas}/a?gracePeriodSeconds=0&dryRun=All").expect(200),
        // Emptied maps and lists of ObjectMeta are dropped, as Go's omitempty does.
        Step::patch("{llamas}/a")
            .patch_body(MERGE, json!({"metadata": {"labels": {"x": null}, "annotations": {"a": "b"}}}))
            .expect(200),
        Step::patch("{llamas}/a")
            .patch_body(MERGE, json!({"metadata": {"generation": 99, "creationTimestamp": "2020-01-01T00:00:00Z"}}))
            .expect(200),
        Step::patch("{llamas}/a").patch_body(MERGE, json!({"status": {"observedGeneration": 4}})).expect(200),
        // The last step on `a`: kube-controller-manager's garbage collector
        // deletes an object whose owner does not exist, as soon as it watches
        // the resource (from its first discovery resync, 30 s after the CRD or
        // the APIService appeared; the control plane is shared by the whole
        // test binary, so it usually does by now).
        Step::patch("{llamas}/a")
            .patch_body(
                MERGE,
                json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}]}}),
            )
            .expect(200),
        Step::post("{llamas}")
            .json(llama_of(
                json!({"name": "b", "deletionTimestamp": "2020-01-01T00:00:00Z", "deletionGracePeriodSeconds": 3, "generation": 7}),
                ok_spec(),
            ))
            .expect(201),
        Step::post("{llamas}").json(llama_of(json!({"name": "d", "uid": "abc"}), ok_spec())).expect(201),
        Step::post("{llamas}")
            .json(llama_of(json!({"name": "e", "creationTimestamp": "2020-01-01T00:00:00Z", "selfLink": "/x"}), ok_spec()))
            .expect(201),
        Step::post("{llamas}")
            .json(llama_of(
                json!({"name": "f", "labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": [], "generateName": ""}),
                ok_spec(),
            ))
            .expect(201),
        Step::patch("{llamas}/f").patch_body(MERGE, json!({"metadata": {"finalizers": ["x.io/y"]}})).expect(200),
        Step::patch("{llamas}/f")
            .patch_body(JSON_PATCH, json!([{"op": "remove", "path": "/metadata/finalizers/0"}]))
            .expect(200),
    ])
    .await
    .assert_identical();
}

/// What still differs, step by step, and whose it is: each step must still
/// differ (when one is fixed, move it to a sequence above).
#[tokio::test]
async fn media_types_answer_as_kube() {
    let cmp = comparison("cmp-media").await;
    cmp.run(&[
        Step::post("{llamas}").json(llama("dolly")).expect(201),
        // A body of another media type: 415 listing JSON, YAML and protobuf.
        Step::post("{llamas}").header("Content-Type", "text/plain").raw("{}").expect(415),
        Step::put("{llamas}/dolly").json(llama("dolly")).header("Content-Type", MERGE).expect(415),
        // Nothing acceptable: 406 listing what is.
        Step::get("{llamas}/dolly").header("Accept", "text/html").expect(406),
    ])
    .await
    .assert_identical();
}

#[tokio::test]
async fn known_differences() {
    let cmp = comparison("cmp-known").await;
    let outcome = cmp
        .run(&[
            Step::post("{llamas}").json(llama("dolly")).expect(201),
            // 0. An unparseable resourceVersion on update: kube answers 500
            //    (strconv.ParseUint); we answer 409, and keep it.
            Step::put("{llamas}/dolly").json(llama_of(json!({"name": "dolly", "resourceVersion": "bogus"}), ok_spec())),
            // 1. An undecodable continue token: kube words Go's JSON error of
            //    the decoded bytes, after "invalid continue token: ".
            Step::get("{llamas}?limit=1&continue=garbage"),
            // 2. Another version of the group: kube also warns about `spec`.
            Step::post("{llamas}").json(
                json!({"apiVersion": "{group}/v9", "kind": "Llama", "metadata": {"name": "v9"}, "spec": ok_spec()}),
            ),
            // 3. An unparseable resourceVersion on get: kube 500 (no reason); we 400.
            Step::get("{llamas}/dolly?resourceVersion=bogus"),
            // 4. PartialObjectMetadata asked of a list: kube's own message; ours lists types.
            Step::get("{llamas}").header("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            // 5. 406 to a protobuf Accept: kube answers in protobuf.
            Step::get("{llamas}/dolly").header("Accept", "application/vnd.kubernetes.protobuf"),
            // 6. An immutable timestamp: kube shows a CRD's value as the JSON
            //    string, validation.rs as Go's time.Time (validation.rs, being moved).
            Step::patch("{llamas}/dolly")
                .patch_body(MERGE, json!({"metadata": {"deletionTimestamp": "2020-01-01T00:00:00Z"}})),
            // 7. Invalid metadata on update: kube lists each cause three times
            //    (three ObjectMeta validations on a CRD update); we once.
            Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"metadata": {"annotations": {"bad/key/x": "v"}}})),
            // 8. A create carrying a resourceVersion: kube 500 (no reason); we 400.
            Step::post("{llamas}").json(llama_of(json!({"name": "c", "resourceVersion": "5"}), ok_spec())),
        ])
        .await;
    let report = outcome.mismatch_report();
    for (i, exchange) in outcome.exchanges.iter().enumerate().skip(1) {
        assert!(!exchange.differences().is_empty(), "known difference {} no longer differs: move it\n{report}", i - 1);
    }
    assert!(outcome.step(0).differences().is_empty(), "{report}");
}

/// What one request may make the server allocate, and how large an object
/// may grow: the JSON patch limits (operations, bytes added by copies) and
/// the object size limit (etcd's 1.5 MiB for the CRD, ours by default).
#[tokio::test]
async fn patch_and_object_size_limits() {
    let cmp = comparison("cmp-limits").await;
    let status_of = |code: u16| Step::patch("{llamas}/big/status").expect(code);
    let error_parts = ["/code", "/message", "/reason", "/details", "/status"];
    let condition = |kind: &str, size: usize| {
        json!({"type": kind, "status": "True", "reason": "Grown", "lastTransitionTime": "2026-01-01T00:00:00Z",
               "message": "m".repeat(size)})
    };
    let add_condition = |kind: &str, size: usize| json!([{"op": "add", "path": "/status/conditions/-", "value": condition(kind, size)}]);
    let mut doubling = vec![json!({"op": "add", "path": "/spec/d0", "value": "x".repeat(1024)})];
    for i in 1..=24 {
        doubling.push(json!({"op": "copy", "from": "/spec", "path": format!("/spec/d{i}")}));
    }
    let test_op = json!({"op": "test", "path": "/spec/height", "value": 1.75});
    let domain = format!("{}.example.com", ["p".repeat(60), "q".repeat(60), "r".repeat(60)].join("."));
    let finalizers: Value = (0..6200).map(|i| json!(format!("{domain}/f{i}-{}", "f".repeat(55)))).collect();
    let mut many_finalizers = llama("fins");
    many_finalizers["metadata"]["finalizers"] = finalizers;
    let managers: Vec<Value> = (0..9_990)
        .map(|i| {
            json!({"op": "add", "path": "/metadata/managedFields/0", "value": {"manager": format!("m{i}"),
                "operation": "Update", "apiVersion": "farm.example.com/v1alpha", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:weight": {}}}}})
        })
        .collect();
    let manager_names: Vec<String> = (0..11).map(|i| format!("/metadata/managedFields/{i}/manager")).collect();
    let manager_names: Vec<&str> = manager_names.iter().map(String::as_str).collect();
    let out = cmp
        .run(&[
            Step::post("{llamas}").json(llama("big")).expect(201),
            // The 3 KB patch whose copies double the object 24 times.
            Step::patch("{llamas}/big").patch_body(JSON_PATCH, Value::Array(doubling)).expect(422),
            Step::patch("{llamas}/big")
                .patch_body(JSON_PATCH, Value::Array(vec![test_op.clone(); 10_000]))
                .expect(200)
                .body_at(&["/spec"]),
            Step::patch("{llamas}/big").patch_body(JSON_PATCH, Value::Array(vec![test_op; 10_001])).expect(413),
            // 9,990 Update managers inserted at the front of managedFields:
            // all but ten merge into `ancient-changes` (once a 73 s search).
            Step::patch("{llamas}/big")
                .patch_body(JSON_PATCH, Value::Array(managers))
                .expect(200)
                .body_at(&manager_names),
            // Growing past the object limit, 700 KB at a time through status.
            status_of(200)
                .header("Content-Type", MERGE)
                .json(json!({"status": {"conditions": [condition("A", 700_000)]}}))
                .body_at(&["/status/conditions/0/type"]),
            status_of(200).patch_body(JSON_PATCH, add_condition("B", 700_000)).body_at(&["/status/conditions/1/type"]),
            // 1.6 MB: etcd refuses it, in its words.
            status_of(500).patch_body(JSON_PATCH, add_condition("C", 200_000)).body_at(&error_parts),
            // 2.1 MB: kube's etcd client refuses it before etcd sees it, naming
            // the gRPC message's size; ours still answers in etcd's words.
            status_of(500).patch_body(JSON_PATCH, add_condition("C", 700_000)).body_at(&["/code", "/reason"]),
            Step::get("{llamas}/big").expect(200).body_at(&["/status/conditions/1/type", "/status/conditions/2"]),
            // A create past it (1.6 MB of finalizers: a way past the schema's fields).
            Step::post("{llamas}").json(many_finalizers).expect(500).body_at(&error_parts),
            Step::get("{llamas}/fins").expect(404),
        ])
        .await;
    out.assert_identical();
}

/// Tables are the CRD's: its printer columns (their names, types and
/// descriptions; numbers as numbers, integers and decimals alike; Age last),
/// for a list and for one object, with and without the objects.
#[tokio::test]
async fn tables_show_the_crds_printer_columns() {
    let table = "application/json;as=Table;g=meta.k8s.io;v=v1";
    let cmp = comparison("cmp-tables")
        .await
        .ignoring("/rows/*/cells/3", "an age, read a moment apart on each server (tests/it/direct/reads.rs reads one)");
    cmp.run(&[
        Step::post("{llamas}").json(llama_of(json!({"name": "a"}), json!({"weight": 31.4, "height": 1.7}))).expect(201),
        Step::post("{llamas}")
            .json(llama_of(json!({"name": "b"}), json!({"weight": 2, "height": 1, "maxWeight": 1e21})))
            .expect(201),
        Step::post("{llamas}")
            .json(llama_of(json!({"name": "c"}), json!({"weight": 0.000015, "height": 123456789.5})))
            .expect(201),
        Step::get("{llamas}?includeObject=None").header("Accept", table).expect(200),
        Step::get("{llamas}/b?includeObject=None").header("Accept", table).expect(200),
        Step::get("{llamas}?limit=2&includeObject=None").header("Accept", table).expect(200),
    ])
    .await
    .assert_identical();
}

/// A type error names the type, not the format: kube validates a CRD's
/// values by the formats it checks (dates, addresses, ...) and drops the
/// others (`double`, `int64`, which kube's derive writes for Rust numbers).
/// A write to `/status` is validated against the status schema, its
/// messages naming paths from below `status`.
#[tokio::test]
async fn type_errors_name_the_type_whatever_the_format() {
    let cmp = comparison("cmp-formats").await;
    let condition = |path: &str, status: &str, time: &str| {
        let condition =
            json!({"type": "Fed", "status": status, "reason": "R", "message": "", "lastTransitionTime": time});
        Step::patch(path).patch_body(MERGE, json!({"status": {"conditions": [condition]}}))
    };
    cmp.run(&[
        Step::post("{llamas}").json(llama_of(json!({"name": "a"}), ok_spec())).expect(201),
        Step::patch("{llamas}/a/status").patch_body(MERGE, json!({"status": {"observedGeneration": 1.5}})).expect(422),
        Step::patch("{llamas}/a/status").patch_body(MERGE, json!({"status": {"observedGeneration": "1"}})).expect(422),
        Step::patch("{llamas}/a/status").patch_body(MERGE, json!({"status": "fed"})).expect(422),
        Step::patch("{llamas}/a/status").patch_body(MERGE, json!({"status": {"observedGeneration": 2.0}})).expect(200),
        // One error a step: kube-apiserver reports the fields of one object in Go's map order.
        Step::patch("{llamas}/a").patch_body(MERGE, json!({"spec": {"weight": "heavy"}})).expect(422),
        Step::patch("{llamas}/a").patch_body(MERGE, json!({"spec": {"height": true}})).expect(422),
        // Status through the main resource is dropped, checked or not.
        condition("{llamas}/a", "Maybe", "yesterday").expect(200),
        condition("{llamas}/a/status", "Maybe", "2026-11-28T10:00:00Z").expect(422),
        condition("{llamas}/a/status", "True", "yesterday").expect(422),
    ])
    .await
    .assert_identical();
}
