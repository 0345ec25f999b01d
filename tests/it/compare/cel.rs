//! Llama's CEL rules (`x-kubernetes-validations`) side by side with the same
//! rules in the Llama CRD (tests/common/crd.rs serves Llama's very schema):
//! every write that breaks a rule gets the same code, reason, message and
//! causes from farm-apiserver as from kube-apiserver, and the rules are
//! published the same way in OpenAPI.

use crate::common::compare::{Comparison, Step};
use serde_json::{json, Value};

const MANAGED_FIELDS_WHY: &str = "managedFields belong to the server-side apply work (another engineer)";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

async fn comparison(ns: &str) -> Comparison {
    Comparison::new(ns)
        .await
        .ignoring("/metadata/managedFields", MANAGED_FIELDS_WHY)
        .ignoring("/items/*/metadata/managedFields", MANAGED_FIELDS_WHY)
}

fn llama_of(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": name}, "spec": spec})
}

/// The bound on two fields (with a messageExpression and a fieldPath), the
/// pattern of earTag (a rule on a string field), and how rules meet the
/// schema's own errors.
#[tokio::test]
async fn rules_on_create() {
    let cmp = comparison("cmp-cel-create").await;
    cmp.run(&[
        Step::post("{llamas}")
            .json(llama_of("fine", json!({"weight": 31.5, "height": 1.75, "maxWeight": 40, "earTag": "AB-12"})))
            .expect(201),
        Step::post("{llamas}")
            .json(llama_of("at-bound", json!({"weight": 40, "height": 1.75, "maxWeight": 40})))
            .expect(201),
        // A bound on two fields, reported at its fieldPath.
        Step::post("{llamas}")
            .json(llama_of("heavy", json!({"weight": 41, "height": 1.7, "maxWeight": 40.5})))
            .expect(422),
        // earTag's rule has a messageExpression.
        Step::post("{llamas}").json(llama_of("tag", json!({"weight": 1, "height": 1, "earTag": "ab-1"}))).expect(422),
        Step::post("{llamas}")
            .json(llama_of("tag2", json!({"weight": 1, "height": 1, "earTag": "AB-1234567"})))
            .expect(422),
        // A schema error that does not block the rules: both reported.
        Step::post("{llamas}").json(llama_of("both", json!({"weight": 5, "height": 0, "maxWeight": 4}))).expect(422),
        // A type error blocks them: kube says some rules were not checked.
        Step::post("{llamas}").json(llama_of("typed", json!({"weight": "5", "height": 1, "maxWeight": 4}))).expect(422),
        Step::post("{llamas}").json(llama_of("required", json!({"height": 1, "maxWeight": 4}))).expect(422),
        // Dry run validates as much.
        Step::post("{llamas}?dryRun=All")
            .json(llama_of("dry", json!({"weight": 5, "height": 1, "maxWeight": 4})))
            .expect(422),
        Step::get("{llamas}").expect(200),
    ])
    .await
    .assert_identical();
}

/// earTag's transition rule: skipped on create and while there is no old
/// tag, refused on a change or a removal by update, merge patch, JSON patch
/// and server-side apply.
#[tokio::test]
async fn transition_rule_on_updates_and_patches() {
    let cmp = comparison("cmp-cel-transition").await;
    cmp.run(&[
        Step::post("{llamas}").json(llama_of("tagged", json!({"weight": 1, "height": 1, "earTag": "AB-1"}))).expect(201),
        Step::post("{llamas}").json(llama_of("untagged", json!({"weight": 1, "height": 1}))).expect(201),
        // Set once: fine; then fixed.
        Step::patch("{llamas}/untagged").patch_body(MERGE, json!({"spec": {"earTag": "CD-2"}})).expect(200),
        Step::patch("{llamas}/untagged").patch_body(MERGE, json!({"spec": {"earTag": "CD-3"}})).expect(422),
        Step::patch("{llamas}/tagged").patch_body(MERGE, json!({"spec": {"earTag": null}})).expect(422),
        Step::patch("{llamas}/tagged")
            .patch_body(JSON_PATCH, json!([{"op": "replace", "path": "/spec/earTag", "value": "AB-2"}]))
            .expect(422),
        Step::patch("{llamas}/tagged")
            .patch_body(JSON_PATCH, json!([{"op": "remove", "path": "/spec/earTag"}]))
            .expect(422),
        // Other fields may change; the bound applies to updates too.
        Step::patch("{llamas}/tagged").patch_body(MERGE, json!({"spec": {"weight": 2, "maxWeight": 3}})).expect(200),
        Step::patch("{llamas}/tagged").patch_body(MERGE, json!({"spec": {"weight": 4}})).expect(422),
        // Two rules broken by one update: both causes, in rule order.
        Step::get("{llamas}/tagged").expect(200).capture("rv", "/metadata/resourceVersion"),
        Step::put("{llamas}/tagged")
            .json(json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "tagged", "resourceVersion": "{$rv}"},
                         "spec": {"weight": 9, "height": 1, "maxWeight": 3, "earTag": "ZZ-9"}}))
            .expect(422),
        Step::put("{llamas}/tagged")
            .json(json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "tagged", "resourceVersion": "{$rv}"},
                         "spec": {"weight": 3, "height": 1, "maxWeight": 3, "earTag": "AB-1"}}))
            .expect(200),
        // Server-side apply: creating with a tag, then changing it, as a manager.
        Step::patch("{llamas}/applied?fieldManager=m")
            .patch_body(APPLY, llama_of("applied", json!({"weight": 1, "height": 1, "earTag": "AP-1"})))
            .expect(201),
        Step::patch("{llamas}/applied?fieldManager=m")
            .patch_body(APPLY, llama_of("applied", json!({"weight": 1, "height": 1, "earTag": "AP-2"})))
            .expect(422),
        Step::patch("{llamas}/applied?fieldManager=m&force=true")
            .patch_body(APPLY, llama_of("applied", json!({"weight": 5, "height": 1, "maxWeight": 4, "earTag": "AP-1"})))
            .expect(422),
        // The status subresource keeps the spec: its rules pass.
        Step::patch("{llamas}/tagged/status")
            .patch_body(MERGE, json!({"status": {"observedGeneration": 1}, "spec": {"earTag": "XX-1"}}))
            .expect(200),
        Step::get("{llamas}/tagged").expect(200),
    ])
    .await
    .assert_identical();
}

/// Fetches `path` from kube-apiserver until `pick` finds something in it:
/// the aggregator and the CRD controller publish OpenAPI a few seconds after
/// a kind is served.
async fn published(client: &reqwest::Client, url: &str, pick: impl Fn(&Value) -> Value) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let answer = client.get(url).header("Accept", "application/json").send().await;
        let (code, text) = match answer {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(e) => (0, e.to_string()),
        };
        let picked = serde_json::from_str::<Value>(&text).map(|doc| pick(&doc)).unwrap_or(Value::Null);
        if !picked.is_null() {
            return picked;
        }
        assert!(std::time::Instant::now() < deadline, "GET {url}: {code}: {}", &text[..text.len().min(300)]);
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// The rules as OpenAPI v3 publishes them (what `kubectl explain` and
/// clients read), through the aggregator for ours and from kube-apiserver for
/// the CRD: the same lists on the spec and on earTag; and in v2.
#[tokio::test]
async fn rules_are_published_in_openapi() {
    let cmp = comparison("cmp-cel-openapi").await;
    let client = crate::common::compare::admin_client(cmp.cp);
    let server = &cmp.cp.server;
    let v3 = |doc: &Value| {
        let llama = doc["components"]["schemas"]
            .as_object()
            .and_then(|s| s.iter().find(|(name, _)| name.ends_with(".v1alpha.Llama")))
            .map(|(_, l)| l.clone())
            .unwrap_or_default();
        let spec = &llama["properties"]["spec"];
        match (&spec["x-kubernetes-validations"], &spec["properties"]["earTag"]["x-kubernetes-validations"]) {
            (Value::Null, _) | (_, Value::Null) => Value::Null,
            (a, b) => json!([a, b]),
        }
    };
    let ours = published(&client, &format!("{server}/openapi/v3/apis/farm.example.com/v1alpha"), v3).await;
    let crd =
        published(&client, &format!("{server}/openapi/v3/apis/{}/v1alpha", crate::common::compare::CRD.group), v3)
            .await;
    assert!(ours[0].as_array().is_some_and(|a| a.len() == 2), "{ours}");
    assert_eq!(ours, crd);
    // OpenAPI v2, which older clients read (the aggregator merges ours in).
    let v2 = |name: &'static str| {
        move |doc: &Value| doc["definitions"][name]["properties"]["spec"]["x-kubernetes-validations"].clone()
    };
    let url = format!("{server}/openapi/v2");
    assert_eq!(published(&client, &url, v2("com.example.farm.v1alpha.Llama")).await, ours[0]);
    assert_eq!(published(&client, &url, v2("com.example.farm.crd.v1alpha.Llama")).await, ours[0]);
}

/// What kube-apiserver answers (kubectl's success, stdout, stderr) to a
/// server-side dry run creating a CRD of kind `singular` with `schema`: its
/// compiler and cost estimator as the oracle of this server's.
fn kube_dry_run(cmp: &Comparison, singular: &str, schema: &Value) -> (bool, String, String) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{singular}s.oracle.example.com")},
        "spec": {"group": "oracle.example.com", "scope": "Namespaced",
            "names": {"plural": format!("{singular}s"), "singular": singular, "kind": format!("K{singular}")},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]}
    });
    crate::common::kubectl_stdin(&cmp.cp.kubeconfig, &["apply", "--dry-run=server", "-f", "-"], Some(&crd.to_string()))
}

/// Which rules kube-apiserver accepts in a CRD (its compiler and cost
/// estimator, asked with a server-side dry run) against which this server
/// accepts in a kind's schema: the same, but for the differences pinned here.
#[tokio::test]
async fn rules_compile_where_kube_compiles_them() {
    use aggregated_apiserver::SchemaRules;
    let cmp = comparison("cmp-cel-compile").await;
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let bounded = json!({"type": "array", "maxItems": 50, "items": {"type": "string", "maxLength": 20}});
    let ints = json!({"type": "array", "items": {"type": "integer"}});
    let ints_2k = json!({"type": "array", "maxItems": 2000, "items": {"type": "integer"}});
    let ints_10k = json!({"type": "array", "maxItems": 10000, "items": {"type": "integer"}});
    let string = json!({"type": "string"});
    let short = json!({"type": "string", "maxLength": 20});
    let number = json!({"type": "number"});
    let map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let escaped =
        json!({"type": "object", "properties": {"max-size": {"type": "integer"}, "namespace": {"type": "string"}}});
    // (field schema, rule on the field, accepted here, accepted by kube)
    let cases = [
        (&strings, "self.all(x, x.size() < 10)", true, true),
        (&strings, "self.all(x, self.all(y, x == y))", false, false),
        (&bounded, "self.all(x, self.all(y, x == y || x.startsWith(y)))", true, true),
        (&ints, "self.all(x, x > 0) && self.exists(x, x == 1)", false, false),
        (&ints, "self.all(x, x > 0)", true, true),
        (&ints, "self.exists_one(x, x == 1)", true, true),
        (&string, "self.startsWith('a') && self.size() < 100", true, true),
        (&string, "self.matches('^[a-z]+$')", true, true),
        (&short, "self + self == 'abab'", true, true),
        (&number, "'n is ' + string(self) != ''", false, false),
        (&short, "'s is ' + self != ''", true, true),
        (&map, "self.all(k, self[k].size() < 10)", true, true),
        (&map, "self.all(k, self.all(j, k == j))", false, false),
        (&strings, "self.exists(x, x.matches('^a'))", false, false),
        (&short, "self.split(',').size() < 5 && self.lowerAscii() == self", true, true),
        (&bounded, "self.map(x, x.upperAscii()).all(y, y.size() > 0)", true, true),
        (&string, "self.nope == 1", false, false),
        (&escaped, "self.max__dash__size < 10 && self.__namespace__ != 'x'", true, true),
        // Since kube 1.31 a reserved word selects a field by its own name too.
        (&escaped, "self.namespace == 'x' || self.__namespace__ == 'y'", true, true),
        (&escaped, "self.max_size == 1", false, false),
        (&string, "self ==", false, false),
        (&string, "undeclared == 1", false, false),
        // kube's map() and filter() cost linear time; the `cel` crate copies
        // the list at each step (quadratic), which this estimate counts.
        (&ints, "self.map(x, x * 2).size() >= 0", false, false),
        (&ints_2k, "self.map(x, x * 2).size() >= 0", true, true),
        (&ints_10k, "self.map(x, x * 2).size() >= 0", false, true),
        (&ints_10k, "self.filter(x, x > 0).size() >= 0", false, true),
        // kube checks types at compile time; the `cel` crate only at runtime.
        (&string, "self + 1 == 2", true, false),
    ];
    let mut differences = Vec::new();
    for (i, (field, rule, ours_expected, kube_expected)) in cases.iter().enumerate() {
        let mut field = (*field).clone();
        field["x-kubernetes-validations"] = json!([{"rule": rule}]);
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"f": field}}}});
        let ours = SchemaRules::compile(&schema).is_ok();
        let out = kube_dry_run(&cmp, &format!("oracle{i}"), &schema);
        let kube = out.0;
        assert!(kube || out.2.contains("is invalid"), "kubectl failed otherwise for {rule}: {out:?}");
        if (ours, kube) != (*ours_expected, *kube_expected) {
            differences.push(format!(
                "{rule}: ours {ours} (expected {ours_expected}), kube {kube} (expected {kube_expected}): {}",
                out.2.trim()
            ));
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}

/// A rule that does not compile is reported in kube's words, placed as
/// cel-go places it (`ERROR: <input>:<line>:<column>: ...`, the line and a
/// caret under the place): kube-apiserver's refusal of the same rule in a
/// CRD (a server-side dry run) holds the message this server gives.
#[tokio::test]
async fn rules_that_do_not_compile_are_reported_as_kube_reports_them() {
    use aggregated_apiserver::SchemaRules;
    let cmp = comparison("cmp-cel-errors").await;
    let object = json!({"type": "object", "properties": {"a": {"type": "string"}, "n": {"type": "integer"}}});
    let string = json!({"type": "string"});
    let cases = [
        (&object, "self.nope == 1"),
        (&object, "self.n > 0 && undeclared == 1"),
        (&object, "self.n > 0 &&\n  self.a.size() > 1 && self.nope"),
        (&object, "!has(self.nope)"),
        (&object, "self.n >"),
        (&string, "self.x == 'y'"),
    ];
    let mut differences = Vec::new();
    for (i, (field, rule)) in cases.iter().enumerate() {
        let mut field = (*field).clone();
        field["x-kubernetes-validations"] = json!([{"rule": rule, "message": "m"}]);
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"f": field}}}});
        let ours = SchemaRules::compile(&schema).err().map(|e| e.to_string()).unwrap_or_default();
        let Some(at) = ours.find("compilation failed: ") else {
            differences.push(format!("{rule:?}: ours compiled, or failed otherwise: {ours}"));
            continue;
        };
        let message = &ours[at..];
        let out = kube_dry_run(&cmp, &format!("error{i}"), &schema);
        assert!(!out.0 && out.2.contains("is invalid"), "kube accepted {rule:?} or failed otherwise: {out:?}");
        if !out.2.contains(message) {
            differences.push(format!("{rule:?}:\n  ours: {message:?}\n  kube: {:?}", out.2.trim()));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
