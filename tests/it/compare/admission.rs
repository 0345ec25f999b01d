//! The cluster's admission webhooks, side by side: the same webhook
//! configurations bound to both groups (kube-apiserver calls them for the
//! Llama CRD, farm-apiserver for its Llamas), calling the same real webhook
//! server, must give the same codes, reasons, messages, warnings and mutated
//! objects. Each configuration selects the test's own namespace only, so the
//! tests running beside it are not admitted by it.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::OnceCell;

use crate::common::cluster::ControlPlane;
use crate::common::compare::{admin_client, Comparison, Step, CRD_GROUP, OUR_GROUP, VERSION};
use crate::common::webhook::WebhookServer;

const MERGE: &str = "application/merge-patch+json";

/// One webhook server for the whole test binary.
pub async fn webhook_server() -> &'static WebhookServer {
    static SERVER: OnceCell<WebhookServer> = OnceCell::const_new();
    SERVER.get_or_init(|| WebhookServer::start(&[])).await
}

/// One webhook of a configuration.
#[derive(Clone)]
pub struct Hook {
    pub name: &'static str,
    pub path: &'static str,
    pub failure_policy: &'static str,
    pub side_effects: &'static str,
    pub timeout_seconds: u32,
    pub object_selector: Value,
    pub resources: Vec<&'static str>,
    pub operations: Vec<&'static str>,
    pub reinvocation: &'static str,
    /// `matchConditions`: (name, CEL expression).
    pub conditions: Vec<(&'static str, &'static str)>,
}

impl Hook {
    pub fn new(name: &'static str, path: &'static str) -> Hook {
        Hook {
            name,
            path,
            failure_policy: "Fail",
            side_effects: "None",
            timeout_seconds: 5,
            object_selector: json!({}),
            resources: vec!["llamas"],
            operations: vec!["*"],
            reinvocation: "Never",
            conditions: Vec::new(),
        }
    }

    pub fn selecting(mut self, labels: Value) -> Hook {
        self.object_selector = json!({"matchLabels": labels});
        self
    }
}

/// A Mutating- or ValidatingWebhookConfiguration calling `server` for Llamas
/// of both groups in `ns` only.
pub fn configuration(kind: &str, name: &str, ns: &str, server: &WebhookServer, hooks: &[Hook]) -> String {
    let webhooks: Vec<Value> = hooks
        .iter()
        .map(|h| {
            let mut w = json!({
                "name": h.name,
                "clientConfig": {"url": format!("https://127.0.0.1:{}{}", server.port, h.path), "caBundle": server.ca_bundle()},
                "rules": [{
                    "apiGroups": [OUR_GROUP, CRD_GROUP], "apiVersions": ["*"],
                    "resources": h.resources, "operations": h.operations,
                }],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "objectSelector": h.object_selector,
                "failurePolicy": h.failure_policy,
                "sideEffects": h.side_effects,
                "timeoutSeconds": h.timeout_seconds,
                "admissionReviewVersions": ["v1"],
            });
            if kind == "MutatingWebhookConfiguration" {
                w["reinvocationPolicy"] = json!(h.reinvocation);
            }
            if !h.conditions.is_empty() {
                let conditions: Vec<Value> =
                    h.conditions.iter().map(|(name, expression)| json!({"name": name, "expression": expression})).collect();
                w["matchConditions"] = json!(conditions);
            }
            w
        })
        .collect();
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": webhooks,
    })
    .to_string()
}

/// Installs a configuration and waits until both servers call `path` for a
/// probe created in the namespace (both read configurations from a watch).
pub async fn install(cmp: &Comparison, server: &WebhookServer, yaml: &str, path: &str, probe_labels: Value) {
    install_on(cmp.cp, &admin_client(cmp.cp), &cmp.ns, server, yaml, path, probe_labels).await;
}

/// [`install`] on any control plane serving both groups, with `client`.
pub async fn install_on(
    cp: &ControlPlane,
    client: &reqwest::Client,
    ns: &str,
    server: &WebhookServer,
    yaml: &str,
    path: &str,
    probe_labels: Value,
) {
    cp.apply(yaml);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for group in [CRD_GROUP, OUR_GROUP] {
            let probe = json!({
                "apiVersion": format!("{group}/{VERSION}"), "kind": "Llama",
                "metadata": {"generateName": "probe-", "labels": probe_labels},
                "spec": {"weight": 100, "height": 1},
            });
            let url = format!("{}/apis/{group}/{VERSION}/namespaces/{ns}/llamas", cp.server);
            let _ = client.post(&url).json(&probe).send().await;
        }
        let reviews = server.reviews_for(path, ns);
        let called = |group: &str| reviews.iter().any(|r| r["request"]["kind"]["group"] == group);
        if called(CRD_GROUP) && called(OUR_GROUP) {
            return;
        }
        assert!(Instant::now() < deadline, "neither server called {path} within 60 s after installing\n{yaml}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Removes a configuration (cluster-scoped; its namespace selector kept it to one test).
pub fn uninstall(cp: &ControlPlane, kind: &str, name: &str) {
    let out = cp.kubectl(&["delete", kind, name, "--ignore-not-found"]);
    assert!(out.0, "{out:?}");
}

pub fn llama(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": name, "labels": labels}, "spec": {"weight": 2, "height": 1}})
}

pub async fn comparison(ns: &str) -> Comparison {
    Comparison::new(ns).await
}

#[tokio::test]
async fn validating_webhooks_deny_and_warn_as_for_the_crd() {
    let cmp = comparison("adm-validating").await;
    let server = webhook_server().await;
    let name = "adm-validating";
    let yaml = configuration(
        "ValidatingWebhookConfiguration",
        name,
        &cmp.ns,
        server,
        &[
            Hook::new("warn.farm.test", "/warn"),
            Hook::new("deny.farm.test", "/deny").selecting(json!({"deny": "yes"})),
            Hook::new("deny-plain.farm.test", "/deny-plain").selecting(json!({"deny": "plain"})),
            Hook {
                operations: vec!["DELETE"],
                ..Hook::new("keep.farm.test", "/deny").selecting(json!({"keep": "yes"}))
            },
        ],
    );
    install(&cmp, server, &yaml, "/deny", json!({"deny": "yes"})).await;
    cmp.run(&[
        // Allowed, with the webhook's warning.
        Step::post("{llamas}").json(llama("dolly", json!({}))).expect(201),
        // Denied by its labels: the webhook's Status, its message prefixed.
        Step::post("{llamas}").json(llama("denied", json!({"deny": "yes"}))).expect(403),
        Step::get("{llamas}/denied").expect(404),
        Step::post("{llamas}").json(llama("plain", json!({"deny": "plain"}))).expect(400),
        // An update or a patch that would add the label is denied too, and changes nothing.
        Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"metadata": {"labels": {"deny": "yes"}}})).expect(403),
        Step::get("{llamas}/dolly").expect(200).body_at(&["/metadata/labels", "/spec"]),
        // Dry run: the webhooks declare no side effects, so they are called.
        Step::post("{llamas}?dryRun=All").json(llama("dry", json!({"deny": "yes"}))).expect(403),
        // The status subresource is another resource: these rules do not name it.
        Step::patch("{llamas}/dolly/status")
            .patch_body(MERGE, json!({"metadata": {"labels": {"deny": "yes"}}}))
            .expect(200),
        // A delete is admitted with the old object (and no new one).
        Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"metadata": {"labels": {"keep": "yes"}}})).expect(200),
        Step::delete("{llamas}/dolly").expect(403),
        Step::get("{llamas}/dolly").expect(200).body_at(&["/metadata/labels"]),
        Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"metadata": {"labels": {"keep": null}}})).expect(200),
        Step::delete("{llamas}/dolly").expect(200),
    ])
    .await
    .assert_identical();
    uninstall(cmp.cp, "validatingwebhookconfiguration", name);
}

#[tokio::test]
async fn mutating_webhooks_patch_the_object_as_for_the_crd() {
    let cmp = comparison("adm-mutating").await;
    let server = webhook_server().await;
    let name = "adm-mutating";
    let yaml = configuration(
        "MutatingWebhookConfiguration",
        name,
        &cmp.ns,
        server,
        &[
            Hook::new("label.farm.test", "/label"),
            Hook::new("bad-schema.farm.test", "/bad-schema").selecting(json!({"break": "schema"})),
            Hook::new("rename.farm.test", "/rename").selecting(json!({"break": "name"})),
        ],
    );
    install(&cmp, server, &yaml, "/label", json!({})).await;
    cmp.run(&[
        Step::post("{llamas}").json(llama("dolly", json!({"a": "b"}))).expect(201),
        Step::post("{llamas}").json(llama("bare", Value::Null)).expect(201),
        // An update that drops the label gets it back; so does an apply.
        Step::put("{llamas}/dolly").json(json!({
            "apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "dolly", "labels": {"a": "c"}}, "spec": {"weight": 3, "height": 1}
        })),
        Step::patch("{llamas}/applied?fieldManager=tester")
            .header("Content-Type", "application/apply-patch+yaml")
            .json(json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "applied"}, "spec": {"weight": 1, "height": 2}}))
            .expect(201),
        // A patch that breaks the schema is validated like any other write: 422, nothing stored.
        Step::post("{llamas}").json(llama("broken", json!({"break": "schema"}))).expect(422),
        Step::get("{llamas}/broken").expect(404),
        Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"metadata": {"labels": {"break": "schema"}}})).expect(422),
        // A rename on update: the name may not change.
        Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"metadata": {"labels": {"break": "name"}}})),
        Step::get("{llamas}/dolly").expect(200).body_at(&["/metadata/labels", "/spec"]),
    ])
    .await
    .assert_identical();
    uninstall(cmp.cp, "mutatingwebhookconfiguration", name);
}

#[tokio::test]
async fn reinvocation_runs_an_earlier_webhook_again_as_for_the_crd() {
    let cmp = comparison("adm-reinvoke").await;
    let server = webhook_server().await;
    let name = "adm-reinvoke";
    let mut first = Hook::new("first.farm.test", "/reinvoke-first");
    first.reinvocation = "IfNeeded";
    let yaml = configuration(
        "MutatingWebhookConfiguration",
        name,
        &cmp.ns,
        server,
        &[first, Hook::new("second.farm.test", "/reinvoke-second")],
    );
    install(&cmp, server, &yaml, "/reinvoke-second", json!({})).await;
    let outcome = cmp.run(&[Step::post("{llamas}").json(llama("dolly", json!({}))).expect(201)]).await;
    outcome.assert_identical();
    let created = &outcome.step(0).ours.body;
    assert_eq!(created["metadata"]["annotations"]["first-saw-second"], "yes", "{created}");
    uninstall(cmp.cp, "mutatingwebhookconfiguration", name);
}

#[tokio::test]
async fn failing_webhooks_fail_or_pass_by_their_policy_as_for_the_crd() {
    let cmp = comparison("adm-failures").await;
    let server = webhook_server().await;
    let name = "adm-failures";
    let mut hang = Hook::new("hang.farm.test", "/hang").selecting(json!({"webhook": "hang"}));
    hang.timeout_seconds = 1;
    let mut ignored = Hook::new("ignored.farm.test", "/garbage").selecting(json!({"webhook": "ignored"}));
    ignored.failure_policy = "Ignore";
    let mut dry_run = Hook::new("dry-run.farm.test", "/deny").selecting(json!({"webhook": "dry-run"}));
    dry_run.side_effects = "NoneOnDryRun";
    let yaml = configuration(
        "ValidatingWebhookConfiguration",
        name,
        &cmp.ns,
        server,
        &[
            hang,
            Hook::new("garbage.farm.test", "/garbage").selecting(json!({"webhook": "garbage"})),
            Hook::new("wrong-uid.farm.test", "/wrong-uid").selecting(json!({"webhook": "wrong-uid"})),
            Hook::new("http-error.farm.test", "/http-error").selecting(json!({"webhook": "http-error"})),
            ignored,
            dry_run,
            Hook::new("unreachable.farm.test", "/allow").selecting(json!({"webhook": "unreachable"})),
        ],
    );
    // A webhook nothing listens for: a port taken from the system and let go.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut yaml: Value = serde_json::from_str(&yaml).unwrap();
    yaml["webhooks"][6]["clientConfig"]["url"] = json!(format!("https://127.0.0.1:{closed}/allow"));
    let yaml = yaml.to_string();
    install(&cmp, server, &yaml, "/wrong-uid", json!({"webhook": "wrong-uid"})).await;
    cmp.run(&[
        // A webhook that does not answer in its timeout: kube's 500, in the same words.
        Step::post("{llamas}").json(llama("hang", json!({"webhook": "hang"}))).expect(500),
        // The uid named in the message is each server's own.
        Step::post("{llamas}")
            .json(llama("wrong-uid", json!({"webhook": "wrong-uid"})))
            .expect(500)
            .body_at(&["/reason", "/code"]),
        // Failing open: the write goes on.
        Step::post("{llamas}").json(llama("ignored", json!({"webhook": "ignored"}))).expect(201),
        // A webhook whose side effects are skipped on dry run sees dry runs.
        Step::post("{llamas}?dryRun=All").json(llama("dry", json!({"webhook": "dry-run"}))).expect(403),
    ])
    .await
    .assert_identical();
    // What Go's JSON and HTTP clients say about a bad body differs from ours
    // word for word; the code, the reason and who failed must not.
    cmp.run(&[
        Step::post("{llamas}")
            .json(llama("garbage", json!({"webhook": "garbage"})))
            .expect(500)
            .body_at(&["/reason", "/code"]),
        Step::post("{llamas}")
            .json(llama("http-error", json!({"webhook": "http-error"})))
            .expect(500)
            .body_at(&["/reason", "/code"]),
        Step::post("{llamas}")
            .json(llama("unreachable", json!({"webhook": "unreachable"})))
            .expect(500)
            .body_at(&["/reason", "/code"]),
        Step::get("{llamas}/garbage").expect(404),
        Step::get("{llamas}/unreachable").expect(404),
    ])
    .await
    .assert_identical();
    uninstall(cmp.cp, "validatingwebhookconfiguration", name);
}

#[tokio::test]
async fn match_conditions_select_requests_as_for_the_crd() {
    let cmp = comparison("adm-conditions").await;
    let server = webhook_server().await;
    let name = "adm-conditions";
    let heavy = Hook {
        conditions: vec![
            ("heavy-only", "object.spec.weight > 10"),
            ("not-a-probe", "!object.metadata.name.startsWith('x')"),
        ],
        ..Hook::new("heavy.farm.test", "/deny").selecting(json!({"webhook": "heavy"}))
    };
    let broken = Hook {
        conditions: vec![("broken", "object.spec.nosuchfield == 1")],
        ..Hook::new("broken.farm.test", "/deny").selecting(json!({"webhook": "broken"}))
    };
    let ignored = Hook {
        conditions: vec![("broken", "object.spec.nosuchfield == 1")],
        failure_policy: "Ignore",
        ..Hook::new("broken-ignored.farm.test", "/deny").selecting(json!({"webhook": "broken-ignored"}))
    };
    let by_user = Hook {
        conditions: vec![("deletes-only", "request.operation == 'DELETE' && oldObject.spec.weight > 1")],
        ..Hook::new("by-request.farm.test", "/deny").selecting(json!({"webhook": "by-request"}))
    };
    let yaml =
        configuration("ValidatingWebhookConfiguration", name, &cmp.ns, server, &[heavy, broken, ignored, by_user]);
    install(&cmp, server, &yaml, "/deny", json!({"webhook": "heavy"})).await;
    let heavy = |name: &str, weight: i64| {
        let mut l = llama(name, json!({"webhook": "heavy"}));
        l["spec"]["weight"] = json!(weight);
        l
    };
    cmp.run(&[
        Step::post("{llamas}").json(heavy("light", 2)).expect(201),
        Step::post("{llamas}").json(heavy("heavy", 20)).expect(403),
        Step::post("{llamas}").json(heavy("xheavy", 20)).expect(201),
        // A condition that fails to evaluate: 403 with the error, or skipped when ignored.
        Step::post("{llamas}").json(llama("broken", json!({"webhook": "broken"}))).expect(403),
        Step::post("{llamas}").json(llama("ignored", json!({"webhook": "broken-ignored"}))).expect(201),
        // request and oldObject: only deletes of llamas heavier than 1 are denied.
        Step::post("{llamas}").json(llama("kept", json!({"webhook": "by-request"}))).expect(201),
        Step::patch("{llamas}/kept").patch_body(MERGE, json!({"spec": {"weight": 5}})).expect(200),
        Step::delete("{llamas}/kept").expect(403),
    ])
    .await
    .assert_identical();
    uninstall(cmp.cp, "validatingwebhookconfiguration", name);
}

/// Creates a probe on both groups until both answer `code` with `text` in
/// the message: policies, like webhooks, take effect from a watch.
pub async fn wait_until_refused(cmp: &Comparison, probe: Value, code: u16, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut refused = 0;
        let mut answers = Vec::new();
        for target in [&crate::common::compare::CRD, &crate::common::compare::OURS] {
            let answer = cmp.send_one(target, &Step::post("{llamas}?dryRun=All").json(probe.clone())).await;
            if answer.code == code && answer.body["message"].as_str().is_some_and(|m| m.contains(text)) {
                refused += 1;
            }
            answers.push((answer.code, answer.body));
        }
        if refused == 2 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the policy did not take effect on both servers within 30 s: the CRD and ours gave {answers:#?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn validating_admission_policies_deny_warn_and_audit_as_for_the_crd() {
    let cmp = comparison("adm-policies").await;
    let ns = cmp.ns.clone();
    let rules = json!([{"apiGroups": [OUR_GROUP, CRD_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["llamas"]}]);
    let constraints =
        json!({"resourceRules": rules, "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}});
    let yaml = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "adm-policy-params", "namespace": ns}, "data": {"reservedName": "reserved"}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "adm-policy-rules"},
         "spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": constraints,
            "failurePolicy": "Fail",
            "matchConditions": [{"name": "not-excluded", "expression": "!has(object.metadata.labels) || !('skip' in object.metadata.labels)"}],
            "variables": [{"name": "big", "expression": "has(object.metadata.labels) && 'size' in object.metadata.labels && object.metadata.labels['size'] == 'big'"}],
            "validations": [
                {"expression": "object.metadata.name != params.data.reservedName", "message": "the name is reserved"},
                {"expression": "!has(object.metadata.labels) || !('bad' in object.metadata.labels)",
                 "messageExpression": "'label bad=' + object.metadata.labels['bad'] + ' is not allowed'", "reason": "Forbidden"},
                {"expression": "!variables.big"},
            ],
         }},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "adm-policy-rules-binding"},
         "spec": {"policyName": "adm-policy-rules", "validationActions": ["Deny"],
                  "paramRef": {"name": "adm-policy-params", "namespace": ns, "parameterNotFoundAction": "Deny"}}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "adm-policy-warn"},
         "spec": {"matchConstraints": constraints, "validations": [{"expression": "!has(object.metadata.labels) || !('tall' in object.metadata.labels)", "message": "a tall llama"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "adm-policy-warn-binding"},
         "spec": {"policyName": "adm-policy-warn", "validationActions": ["Warn", "Audit"]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "adm-policy-missing"},
         "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                  "matchConstraints": {"resourceRules": rules, "objectSelector": {"matchLabels": {"params": "missing"}},
                                       "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}},
                  "validations": [{"expression": "true"}]}},
        // An expression that would run for minutes: kube cancels it past its
        // cost limit; here its bound refuses it before it runs.
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "adm-policy-cost"},
         "spec": {"matchConstraints": {"resourceRules": rules, "objectSelector": {"matchLabels": {"cost": "high"}},
                                       "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}},
                  "validations": [{"expression": "object.metadata.annotations.all(k, object.metadata.annotations.all(j, k == j || k != j))"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "adm-policy-cost-binding"},
         "spec": {"policyName": "adm-policy-cost", "validationActions": ["Deny"]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "adm-policy-missing-binding"},
         "spec": {"policyName": "adm-policy-missing", "validationActions": ["Deny"],
                  "paramRef": {"name": "nowhere", "namespace": ns, "parameterNotFoundAction": "Deny"}}},
    ]});
    cmp.cp.apply(&yaml.to_string());
    let mut costly = llama("costly", json!({"cost": "high"}));
    let annotations: serde_json::Map<String, Value> = (0..3000).map(|i| (format!("a{i}"), json!("x"))).collect();
    costly["metadata"]["annotations"] = Value::Object(annotations);
    // Every policy and binding must be in effect on both servers before the comparison.
    wait_until_refused(&cmp, llama("reserved", json!({})), 422, "the name is reserved").await;
    wait_until_refused(&cmp, llama("probe", json!({"params": "missing"})), 422, "adm-policy-missing-binding").await;
    wait_until_refused(&cmp, costly.clone(), 422, "adm-policy-cost").await;
    wait_until_refused(&cmp, llama("probe", json!({"bad": "yes"})), 403, "is not allowed").await;
    cmp.run(&[
        Step::post("{llamas}").json(llama("dolly", json!({}))).expect(201),
        Step::post("{llamas}").json(llama("reserved", json!({}))).expect(422),
        Step::post("{llamas}").json(llama("reserved", json!({"skip": "yes"}))).expect(201),
        Step::post("{llamas}").json(llama("naughty", json!({"bad": "yes"}))).expect(403),
        Step::post("{llamas}").json(llama("huge", json!({"size": "big"}))).expect(422),
        Step::post("{llamas}").json(llama("tall", json!({"tall": "yes"}))).expect(201),
        Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"metadata": {"labels": {"bad": "no"}}})).expect(403),
        Step::post("{llamas}").json(llama("orphan", json!({"params": "missing"}))).expect(422),
        Step::post("{llamas}").json(costly).expect(422),
    ])
    .await
    .assert_identical();
    for (kind, name) in [
        ("validatingadmissionpolicybinding", "adm-policy-rules-binding"),
        ("validatingadmissionpolicybinding", "adm-policy-warn-binding"),
        ("validatingadmissionpolicybinding", "adm-policy-missing-binding"),
        ("validatingadmissionpolicybinding", "adm-policy-cost-binding"),
        ("validatingadmissionpolicy", "adm-policy-cost"),
        ("validatingadmissionpolicy", "adm-policy-rules"),
        ("validatingadmissionpolicy", "adm-policy-warn"),
        ("validatingadmissionpolicy", "adm-policy-missing"),
    ] {
        uninstall(cmp.cp, kind, name);
    }
}

/// kube-apiserver records who changed what (managedFields) for the request
/// before mutating admission runs: a mutating webhook's changes belong to
/// no manager, whatever the verb.
#[tokio::test]
async fn mutating_webhooks_changes_are_owned_by_no_manager_as_for_the_crd() {
    // managedFields compared, unlike the other admission comparisons.
    let cmp = Comparison::new("adm-owners").await;
    let server = webhook_server().await;
    let name = "adm-owners";
    let yaml = configuration(
        "MutatingWebhookConfiguration",
        name,
        &cmp.ns,
        server,
        &[
            Hook::new("owners.farm.test", "/label").selecting(json!({"owned": "yes"})),
            Hook::new("breaker.farm.test", "/break-managed-fields").selecting(json!({"broken": "yes"})),
        ],
    );
    install(&cmp, server, &yaml, "/label", json!({"owned": "yes"})).await;
    let labelled = json!({"owned": "yes", "a": "b"});
    cmp.run(&[
        Step::post("{llamas}?fieldManager=creator").json(llama("dolly", labelled.clone())).expect(201),
        Step::patch("{llamas}/dolly?fieldManager=patcher")
            .patch_body(MERGE, json!({"metadata": {"labels": {"mutated": null, "c": "d"}}, "spec": {"weight": 4}}))
            .expect(200),
        Step::put("{llamas}/dolly?fieldManager=updater").json(json!({
            "apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "dolly", "labels": {"owned": "yes", "a": "c"}},
            "spec": {"weight": 3, "height": 1}
        })),
        Step::patch("{llamas}/applied?fieldManager=applier")
            .header("Content-Type", "application/apply-patch+yaml")
            .json(json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "applied", "labels": {"owned": "yes"}}, "spec": {"weight": 1, "height": 2}}))
            .expect(201),
        Step::patch("{llamas}/applied?fieldManager=applier")
            .header("Content-Type", "application/apply-patch+yaml")
            .json(json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "applied", "labels": {"owned": "yes"}}, "spec": {"weight": 5, "height": 2}}))
            .expect(200),
        Step::get("{llamas}/dolly").expect(200),
        Step::get("{llamas}/applied").expect(200),
        // managedFields a webhook broke are put back as they were before
        // admission, with kube's warning.
        Step::post("{llamas}?fieldManager=creator").json(llama("broken", json!({"broken": "yes"}))).expect(201),
        Step::patch("{llamas}/broken?fieldManager=patcher")
            .patch_body(MERGE, json!({"spec": {"weight": 7}}))
            .expect(200),
    ])
    .await
    .assert_identical();
    uninstall(cmp.cp, "mutatingwebhookconfiguration", name);
}

/// A policy's `variables` are evaluated when an expression first reads
/// them, once, and keep the value CEL made (here a timestamp, which JSON
/// does not have): one that would fail fails nothing until read, and then
/// fails the reading expression in kube's words.
#[tokio::test]
async fn policy_variables_are_evaluated_when_read_as_for_the_crd() {
    let cmp = comparison("adm-lazy-variables").await;
    let ns = cmp.ns.clone();
    let rules = json!([{"apiGroups": [OUR_GROUP, CRD_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["llamas"]}]);
    let yaml = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "adm-lazy-variables"},
         "spec": {
            "matchConstraints": {"resourceRules": rules, "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}},
            "failurePolicy": "Fail",
            "variables": [
                {"name": "broken", "expression": "object.spec.nosuchfield == 1"},
                {"name": "when", "expression": "timestamp('2024-01-02T03:04:05Z')"},
                {"name": "names", "expression": "[string(object.metadata.name), 'other']"},
                {"name": "first", "expression": "variables.names[0]"},
            ],
            "validations": [
                {"expression": "variables.when.getFullYear() == 2024", "message": "the variable lost its type"},
                {"expression": "variables.first == object.metadata.name && variables.names.size() == 2"},
                // Declared, and evaluated to say so: an error where it fails.
                {"expression": "!has(object.metadata.labels) || !('has' in object.metadata.labels) || has(variables.broken)"},
                {"expression": "has(variables.names)"},
                {"expression": "!has(object.metadata.labels) || !('strict' in object.metadata.labels) || variables.broken"},
            ],
         }},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "adm-lazy-variables-binding"},
         "spec": {"policyName": "adm-lazy-variables", "validationActions": ["Deny"]}},
    ]});
    cmp.cp.apply(&yaml.to_string());
    wait_until_refused(&cmp, llama("probe", json!({"strict": "yes"})), 422, "composited variable").await;
    cmp.run(&[
        Step::post("{llamas}").json(llama("dolly", json!({}))).expect(201),
        Step::post("{llamas}").json(llama("strict", json!({"strict": "yes"}))).expect(422),
        Step::post("{llamas}").json(llama("has", json!({"has": "yes"}))).expect(422),
        Step::patch("{llamas}/dolly").patch_body(MERGE, json!({"metadata": {"labels": {"a": "b"}}})).expect(200),
    ])
    .await
    .assert_identical();
    for (kind, name) in [
        ("validatingadmissionpolicybinding", "adm-lazy-variables-binding"),
        ("validatingadmissionpolicy", "adm-lazy-variables"),
    ] {
        uninstall(cmp.cp, kind, name);
    }
}

/// What a policy's variables cost to evaluate comes out of the budget of
/// the expressions that read them (kube's `RuntimeCELCostBudget`): each of
/// these is well within the per-call limit, all of them are not within
/// the budget, and the validation reading them fails in kube's words.
#[tokio::test]
async fn policy_variables_cost_out_of_the_policys_budget_as_for_the_crd() {
    let cmp = comparison("adm-variables-budget").await;
    let ns = cmp.ns.clone();
    let rules = json!([{"apiGroups": [OUR_GROUP, CRD_GROUP], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["llamas"]}]);
    // Over 300 annotations: about 0.63M by kube's count, 0.8M by our bound.
    let every = "!has(object.metadata.annotations) || \
                 object.metadata.annotations.all(k, object.metadata.annotations.all(j, k != j || k == j))";
    let variables: Vec<Value> = (0..24).map(|i| json!({"name": format!("v{i}"), "expression": every})).collect();
    let all: Vec<String> = (0..24).map(|i| format!("variables.v{i}")).collect();
    let yaml = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "adm-variables-budget"},
         "spec": {
            "matchConstraints": {"resourceRules": rules, "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}},
            "failurePolicy": "Fail",
            "variables": variables,
            "validations": [
                {"expression": "!has(object.metadata.labels) || !('probe' in object.metadata.labels)", "message": "a probe"},
                {"expression": all.join(" && ")},
            ],
         }},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "adm-variables-budget-binding"},
         "spec": {"policyName": "adm-variables-budget", "validationActions": ["Deny"]}},
    ]});
    cmp.cp.apply(&yaml.to_string());
    wait_until_refused(&cmp, llama("probe", json!({"probe": "yes"})), 422, "a probe").await;
    let mut costly = llama("costly", json!({}));
    let annotations: serde_json::Map<String, Value> = (0..300).map(|i| (format!("a{i}"), json!("x"))).collect();
    costly["metadata"]["annotations"] = Value::Object(annotations);
    let mut cheap = llama("cheap", json!({}));
    cheap["metadata"]["annotations"] = json!({"a": "b", "c": "d"});
    let outcome = cmp
        .run(&[Step::post("{llamas}").json(cheap).expect(201), Step::post("{llamas}").json(costly).expect(422)])
        .await;
    outcome.assert_identical();
    let message = outcome.step(1).crd.body["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("running out of cost budget"), "{message}");
    for (kind, name) in [
        ("validatingadmissionpolicybinding", "adm-variables-budget-binding"),
        ("validatingadmissionpolicy", "adm-variables-budget"),
    ] {
        uninstall(cmp.cp, kind, name);
    }
}
