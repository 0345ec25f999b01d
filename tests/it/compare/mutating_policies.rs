//! MutatingAdmissionPolicies (admissionregistration.k8s.io/v1beta1, which
//! the test control plane turns on), side by side: the same policies bound
//! to both groups (kube-apiserver applies them to the Llama CRD,
//! farm-apiserver to its Llamas, reached through the aggregator) must give
//! the same codes, reasons, messages and mutated objects. Every policy
//! selects the test's own namespace only.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::admission::{
    comparison, configuration, install, llama, uninstall, wait_until_refused, webhook_server, Hook,
};
use crate::common::compare::{Comparison, Step, CRD, CRD_GROUP, OURS, OUR_GROUP};

const MERGE: &str = "application/merge-patch+json";

/// Creates a dry-run probe on both groups until both show `expected` at
/// `pointer`: policies take effect from a watch.
pub async fn wait_until_mutated(cmp: &Comparison, probe: Value, pointer: &str, expected: Value) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut mutated = 0;
        let mut answers = Vec::new();
        for target in [&CRD, &OURS] {
            let answer = cmp.send_one(target, &Step::post("{llamas}?dryRun=All").json(probe.clone())).await;
            if answer.body.pointer(pointer) == Some(&expected) {
                mutated += 1;
            }
            answers.push((answer.code, answer.body));
        }
        if mutated == 2 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the policy did not take effect on both servers within 30 s: {expected} expected at {pointer}, the CRD and ours gave {answers:#?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A policy of `mutations` for Llamas of both groups in `ns` whose label
/// `map` is `selector`, and its binding.
pub fn policy(name: &str, ns: &str, selector: &str, spec: Value, binding: Value) -> [Value; 2] {
    let rules = json!([{"apiGroups": [OUR_GROUP, CRD_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["llamas"]}]);
    let mut spec = spec;
    spec["matchConstraints"] = json!({
        "resourceRules": rules,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
        "objectSelector": {"matchLabels": {"map": selector}},
    });
    let mut binding = binding;
    binding["policyName"] = json!(name);
    [
        json!({"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicy",
               "metadata": {"name": name}, "spec": spec}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicyBinding",
               "metadata": {"name": format!("{name}-binding")}, "spec": binding}),
    ]
}

#[tokio::test]
async fn mutating_admission_policies_mutate_as_for_the_crd() {
    let cmp = comparison("adm-mutating-policies").await;
    let ns = cmp.ns.clone();
    let json_patch = |expression: &str| json!({"patchType": "JSONPatch", "jsonPatch": {"expression": expression}});
    let apply =
        |expression: &str| json!({"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}});
    // The parameters: a ServiceAccount's annotations. Not a ConfigMap: run
    // beside the validating policies' test (which takes ConfigMaps and
    // deletes its policy at the end), kube-apiserver once answered `no
    // params found` for the Llama CRD for 30 s while the ConfigMap existed.
    let mut items = vec![json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "adm-map-params", "namespace": ns, "annotations": {"tag": "AB-12", "bad": "nope"}}})];
    // A JSONPatch: a label added on creates and updates.
    items.extend(policy(
        "adm-map-patch",
        &ns,
        "patch",
        json!({"reinvocationPolicy": "Never", "failurePolicy": "Fail",
               "variables": [{"name": "value", "expression": "'yes-' + string(object.spec.height)"}],
               "mutations": [json_patch("[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('farm.test/mutated'), value: variables.value}]")]}),
        json!({}),
    ));
    // An ApplyConfiguration from a parameter, merged into spec and labels.
    items.extend(policy(
        "adm-map-apply",
        &ns,
        "apply",
        json!({"paramKind": {"apiVersion": "v1", "kind": "ServiceAccount"}, "reinvocationPolicy": "Never",
               "mutations": [apply("Object{metadata: Object.metadata{labels: {'tagged': 'true'}}, spec: Object.spec{earTag: params.metadata.annotations['tag']}}")]}),
        json!({"paramRef": {"name": "adm-map-params", "namespace": ns, "parameterNotFoundAction": "Deny"}}),
    ));
    // A mutation giving a value the schema refuses: the write is invalid.
    items.extend(policy(
        "adm-map-invalid",
        &ns,
        "invalid",
        json!({"paramKind": {"apiVersion": "v1", "kind": "ServiceAccount"}, "reinvocationPolicy": "Never",
               "mutations": [apply("Object{spec: Object.spec{earTag: params.metadata.annotations['bad']}}")]}),
        json!({"paramRef": {"name": "adm-map-params", "namespace": ns, "parameterNotFoundAction": "Deny"}}),
    ));
    // Reinvocation: r1 (IfNeeded) notes the tier, r2 sets it afterwards.
    items.extend(policy(
        "adm-map-r1",
        &ns,
        "reinvoke",
        json!({"reinvocationPolicy": "IfNeeded",
               "mutations": [apply("Object{metadata: Object.metadata{annotations: {'farm.test/tier-seen': 'tier' in object.metadata.labels ? object.metadata.labels['tier'] : 'none'}}}")]}),
        json!({}),
    ));
    items.extend(policy(
        "adm-map-r2",
        &ns,
        "reinvoke",
        json!({"reinvocationPolicy": "Never",
               "mutations": [apply("Object{metadata: Object.metadata{labels: {'tier': 'gold'}}}")]}),
        json!({}),
    ));
    // An expression in error: refused under Fail, skipped under Ignore.
    for (name, selector, policy_kind) in [("adm-map-fail", "fail", "Fail"), ("adm-map-ignore", "ignore", "Ignore")] {
        items.extend(policy(
            name,
            &ns,
            selector,
            json!({"failurePolicy": policy_kind, "reinvocationPolicy": "Never",
                   "mutations": [json_patch("[JSONPatch{op: 'add', path: '/metadata/labels/x', value: string(object.spec.missing)}]")]}),
            json!({}),
        ));
    }
    // A failed test leaves the object as it was; a patch that does not apply is refused.
    items.extend(policy(
        "adm-map-test",
        &ns,
        "test",
        json!({"reinvocationPolicy": "Never",
               "mutations": [
                   json_patch("[JSONPatch{op: 'test', path: '/spec/height', value: 99.5}, JSONPatch{op: 'add', path: '/metadata/labels/never', value: 'set'}]"),
                   json_patch("[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'farm.test/tested': 'yes'}}]"),
               ]}),
        json!({}),
    ));
    items.extend(policy(
        "adm-map-broken",
        &ns,
        "broken",
        json!({"reinvocationPolicy": "Never",
        "mutations": [
            json_patch("[JSONPatch{op: 'remove', path: '/spec/nothing'}]"),
            json_patch("[JSONPatch{op: 'add', path: '/metadata/annotations/x', value: 'y'}]"),
        ]}),
        json!({}),
    ));
    // Each mutation has variables of its own, evaluated from the object as
    // the mutations before it left it (kube makes them anew per mutation).
    items.extend(policy(
        "adm-map-vars",
        &ns,
        "vars",
        json!({"reinvocationPolicy": "Never",
        "variables": [{"name": "sawFirst", "expression": "'first' in object.metadata.labels ? 'yes' : 'no'"}],
        "mutations": [
            apply("Object{metadata: Object.metadata{labels: {'before': variables.sawFirst}}}"),
            apply("Object{metadata: Object.metadata{labels: {'first': 'done'}}}"),
            apply("Object{metadata: Object.metadata{labels: {'after': variables.sawFirst}}}"),
        ]}),
        json!({}),
    ));
    cmp.cp.apply(&json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string());

    // Every policy in effect on both servers before the comparison.
    wait_until_mutated(
        &cmp,
        llama("probe", json!({"map": "patch"})),
        "/metadata/labels/farm.test~1mutated",
        json!("yes-1"),
    )
    .await;
    wait_until_mutated(&cmp, llama("probe", json!({"map": "apply"})), "/spec/earTag", json!("AB-12")).await;
    wait_until_mutated(&cmp, llama("probe", json!({"map": "reinvoke"})), "/metadata/labels/tier", json!("gold")).await;
    wait_until_mutated(
        &cmp,
        llama("probe", json!({"map": "test"})),
        "/metadata/annotations/farm.test~1tested",
        json!("yes"),
    )
    .await;
    wait_until_mutated(&cmp, llama("probe", json!({"map": "vars"})), "/metadata/labels/first", json!("done")).await;
    wait_until_refused(&cmp, llama("probe", json!({"map": "fail"})), 403, "adm-map-fail").await;
    wait_until_refused(&cmp, llama("probe", json!({"map": "broken"})), 403, "adm-map-broken").await;
    wait_until_refused(&cmp, llama("probe", json!({"map": "invalid"})), 422, "earTag").await;

    cmp.run(&[
        Step::post("{llamas}").json(llama("patched", json!({"map": "patch"}))).expect(201),
        // The label removed by an update is added again.
        Step::patch("{llamas}/patched")
            .patch_body(MERGE, json!({"metadata": {"labels": {"farm.test/mutated": null}}, "spec": {"height": 2}}))
            .expect(200),
        Step::post("{llamas}").json(llama("applied", json!({"map": "apply"}))).expect(201),
        Step::post("{llamas}").json(llama("invalid", json!({"map": "invalid"}))).expect(422),
        Step::post("{llamas}").json(llama("reinvoked", json!({"map": "reinvoke"}))).expect(201),
        Step::post("{llamas}").json(llama("failing", json!({"map": "fail"}))).expect(403),
        Step::post("{llamas}").json(llama("ignored", json!({"map": "ignore"}))).expect(201),
        Step::post("{llamas}").json(llama("tested", json!({"map": "test"}))).expect(201),
        Step::post("{llamas}").json(llama("broken", json!({"map": "broken"}))).expect(403),
        Step::post("{llamas}").json(llama("variables", json!({"map": "vars"}))).expect(201),
        Step::get("{llamas}/applied").expect(200),
        Step::delete("{llamas}/applied").expect(200),
    ])
    .await
    .assert_identical();
    // Each mutation is counted under kube's metric names.
    let registered = crate::common::cluster::shared().await;
    let direct = crate::common::client_trusting(&registered.server.ca_file).unwrap();
    let metrics = direct.get(registered.server.url("/metrics")).send().await.unwrap().text().await.unwrap();
    for expected in [
        "apiserver_mutating_admission_policy_check_total{policy=\"adm-map-patch\",policy_binding=\"adm-map-patch-binding\",error_type=\"no_error\"}",
        "apiserver_mutating_admission_policy_check_total{policy=\"adm-map-fail\",policy_binding=\"adm-map-fail-binding\",error_type=\"invalid_error\"}",
        "apiserver_mutating_admission_policy_check_duration_seconds_count{policy=\"adm-map-apply\",policy_binding=\"adm-map-apply-binding\",error_type=\"no_error\"}",
    ] {
        assert!(metrics.contains(expected), "{expected} in\n{metrics}");
    }
    for name in [
        "adm-map-patch",
        "adm-map-apply",
        "adm-map-invalid",
        "adm-map-r1",
        "adm-map-r2",
        "adm-map-fail",
        "adm-map-ignore",
        "adm-map-test",
        "adm-map-broken",
        "adm-map-vars",
    ] {
        uninstall(cmp.cp, "mutatingadmissionpolicybinding", &format!("{name}-binding"));
        uninstall(cmp.cp, "mutatingadmissionpolicy", name);
    }
}

#[tokio::test]
async fn policies_are_reinvoked_after_a_webhook_changed_the_object_as_for_the_crd() {
    let cmp = comparison("adm-mutating-reinvoke").await;
    let ns = cmp.ns.clone();
    let server = webhook_server().await;
    // The policy runs first (kube's order) and notes the webhook's label; the
    // webhook adds it afterwards, so the note is right only if the policy is
    // reinvoked.
    let items: Vec<Value> = policy(
        "adm-map-notes",
        &ns,
        "notes",
        json!({"reinvocationPolicy": "IfNeeded",
               "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                   "Object{metadata: Object.metadata{annotations: {'farm.test/saw-webhook': 'mutated' in object.metadata.labels ? 'yes' : 'no'}}}"}}]}),
        json!({}),
    )
    .into();
    cmp.cp.apply(&json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string());
    let name = "adm-map-reinvoke";
    let yaml = configuration(
        "MutatingWebhookConfiguration",
        name,
        &ns,
        server,
        &[Hook::new("label.farm.test", "/label").selecting(json!({"map": "notes"}))],
    );
    install(&cmp, server, &yaml, "/label", json!({"map": "notes"})).await;
    wait_until_mutated(
        &cmp,
        llama("probe", json!({"map": "notes"})),
        "/metadata/annotations/farm.test~1saw-webhook",
        json!("yes"),
    )
    .await;
    cmp.run(&[
        Step::post("{llamas}").json(llama("noted", json!({"map": "notes"}))).expect(201),
        Step::patch("{llamas}/noted")
            .patch_body(
                MERGE,
                json!({"metadata": {"labels": {"mutated": null}, "annotations": {"farm.test/saw-webhook": null}}}),
            )
            .expect(200),
    ])
    .await
    .assert_identical();
    uninstall(cmp.cp, "mutatingwebhookconfiguration", name);
    uninstall(cmp.cp, "mutatingadmissionpolicybinding", "adm-map-notes-binding");
    uninstall(cmp.cp, "mutatingadmissionpolicy", "adm-map-notes");
}
