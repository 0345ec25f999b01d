//! The `authorizer` of admission expressions, side by side: the same
//! validating and mutating policies and webhook match conditions, which ask
//! what the requesting user (or a service account) may do, bound to both
//! groups. kube-apiserver answers their checks for the Llama CRD,
//! farm-apiserver (through its SubjectAccessReviews) for its Llamas: the
//! same users get the same codes, messages and mutated objects.

use serde_json::json;

use super::admission::{configuration, install, llama, uninstall, wait_until_refused, webhook_server, Hook};
use super::mutating_policies::{policy, wait_until_mutated};
use crate::common::cluster::{self, ControlPlane};
use crate::common::compare::{Comparison, Step, CRD_GROUP, OUR_GROUP};

/// A user who may do anything with Llamas in the namespace, and nothing else.
const USER: &str = "cel-user";

#[tokio::test]
async fn policies_ask_the_authorizer_as_for_the_crd() {
    // A farm-apiserver that authenticates its requests (the shared one, on
    // loopback, does not: it would see no user to ask about), on a control
    // plane of its own, kept for the rest of the test process.
    let cp: &'static ControlPlane = Box::leak(Box::new(ControlPlane::start()));
    let _registered = cluster::register_on(cp, &["--authentication", "delegated"]).await;
    let cmp = Comparison::on(cp, "adm-authorizer")
        .await
        .ignoring("/metadata/managedFields", "field ownership is compared in compare::apply");
    let ns = cmp.ns.clone();
    let rules = json!([{"apiGroups": [OUR_GROUP, CRD_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["llamas"]}]);
    let constraints = |label: &str| {
        json!({"resourceRules": rules, "objectSelector": {"matchLabels": {"authz": label}},
               "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}})
    };
    let secrets = format!("authorizer.group('').resource('secrets').namespace('{ns}').check('list')");
    let mut items = vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "llama-keeper", "namespace": ns},
               "rules": [{"apiGroups": [OUR_GROUP, CRD_GROUP], "resources": ["llamas"], "verbs": ["*"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "llama-keeper", "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "llama-keeper"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]}),
        // Only who may list the namespace's secrets may write; the
        // request's own resource must be allowed too (it is, or the write
        // would not have got here).
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "adm-authz-secrets"},
               "spec": {"matchConstraints": constraints("secrets"),
                        "matchConditions": [{"name": "may-write", "expression": "authorizer.requestResource.check('create').allowed()"}],
                        "validations": [{"expression": format!("{secrets}.allowed()"), "message": "may not list secrets"}]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "adm-authz-secrets-binding"},
               "spec": {"policyName": "adm-authz-secrets", "validationActions": ["Deny"]}}),
        // A service account's permissions, whoever asks.
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "adm-authz-sa"},
               "spec": {"matchConstraints": constraints("sa"),
                        "validations": [{"expression": format!("authorizer.serviceAccount('{ns}', 'default').group('').resource('pods').check('delete').allowed()"),
                                         "message": "the default service account may not delete pods"}]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "adm-authz-sa-binding"},
               "spec": {"policyName": "adm-authz-sa", "validationActions": ["Deny"]}}),
    ];
    // kube charges each check that runs (at most two fit an expression),
    // not each one written: three written, of which the first decides.
    let sa_path =
        |path: &str| format!("authorizer.serviceAccount('{ns}', 'default').path('{path}').check('get').allowed()");
    for (name, expression) in [
        (
            "cost",
            format!("authorizer.requestResource.check('create').allowed() || {} || {}", sa_path("/b"), sa_path("/c")),
        ),
        // Three that run: past the limit.
        ("cost-all", format!("{} || {} || {}", sa_path("/a"), sa_path("/b"), sa_path("/c"))),
    ] {
        items.push(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                          "metadata": {"name": format!("adm-authz-{name}")},
                          "spec": {"matchConstraints": constraints(name), "validations": [{"expression": expression}]}}));
        items.push(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                          "metadata": {"name": format!("adm-authz-{name}-binding")},
                          "spec": {"policyName": format!("adm-authz-{name}"), "validationActions": ["Deny"]}}));
    }
    // A mutating policy notes what the writer may do, and why not (kube
    // offers no authorizer to a messageExpression). Not the reason of an
    // allowal: this server lets system:masters through without asking, as
    // a Go aggregated server does, so it has none for the admin, where
    // kube-apiserver has RBAC's. At most two checks an expression: kube's
    // cost limit allows no more.
    let apply = |expression: String| json!({"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}});
    items.extend(policy(
        "adm-authz-label",
        &ns,
        "label",
        json!({"reinvocationPolicy": "Never",
               "mutations": [
                   apply(format!("Object{{metadata: Object.metadata{{labels: {{'may-list-secrets': string({secrets}.allowed())}}}}}}")),
                   apply(format!("Object{{metadata: Object.metadata{{annotations: {{'farm.test/secrets': \
                                  {secrets}.allowed() ? 'allowed' : 'denied (' + {secrets}.reason() + ')'}}}}}}")),
                   apply(format!("Object{{metadata: Object.metadata{{annotations: {{'farm.test/secrets-error': \
                                  {secrets}.errored() ? {secrets}.error() : 'none'}}}}}}")),
               ]}),
        json!({}),
    ));
    cmp.cp.apply(&json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string());
    wait_until_refused(&cmp, llama("probe", json!({"authz": "sa"})), 422, "may not delete pods").await;
    wait_until_refused(&cmp, llama("probe", json!({"authz": "cost-all"})), 422, "actual cost limit exceeded").await;
    wait_until_mutated(
        &cmp,
        llama("probe", json!({"map": "label"})),
        "/metadata/labels/may-list-secrets",
        json!("true"),
    )
    .await;
    // A webhook called only for writers who may list secrets anywhere.
    let server = webhook_server().await;
    let mut hook = Hook::new("authz.farm.test", "/deny").selecting(json!({"authz": "webhook"}));
    hook.conditions = vec![("may-list-secrets", "authorizer.group('').resource('secrets').check('list').allowed()")];
    let webhooks = configuration("ValidatingWebhookConfiguration", "adm-authz-webhook", &ns, server, &[hook]);
    install(&cmp, server, &webhooks, "/deny", json!({"authz": "webhook"})).await;
    let as_user = |step: Step| step.header("Impersonate-User", USER);
    cmp.run(&[
        Step::post("{llamas}").json(llama("by-admin", json!({"authz": "secrets"}))).expect(201),
        as_user(Step::post("{llamas}").json(llama("by-user", json!({"authz": "secrets"})))).expect(422),
        as_user(Step::post("{llamas}").json(llama("by-user", json!({"authz": "sa"})))).expect(422),
        Step::post("{llamas}").json(llama("labelled-by-admin", json!({"map": "label"}))).expect(201),
        as_user(Step::post("{llamas}").json(llama("labelled-by-user", json!({"map": "label"})))).expect(201),
        as_user(
            Step::patch("{llamas}/labelled-by-admin")
                .patch_body("application/merge-patch+json", json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .expect(200),
        Step::post("{llamas}").json(llama("hooked-by-admin", json!({"authz": "webhook"}))).expect(403),
        as_user(Step::post("{llamas}").json(llama("hooked-by-user", json!({"authz": "webhook"})))).expect(201),
        Step::post("{llamas}").json(llama("cost-by-admin", json!({"authz": "cost"}))).expect(201),
        as_user(Step::post("{llamas}").json(llama("cost-by-user", json!({"authz": "cost"})))).expect(201),
        as_user(Step::post("{llamas}").json(llama("cost-all-by-user", json!({"authz": "cost-all"})))).expect(422),
    ])
    .await
    .assert_identical();
    uninstall(cmp.cp, "validatingwebhookconfiguration", "adm-authz-webhook");
    for (kind, name) in [
        ("validatingadmissionpolicybinding", "adm-authz-secrets-binding"),
        ("validatingadmissionpolicybinding", "adm-authz-sa-binding"),
        ("validatingadmissionpolicy", "adm-authz-secrets"),
        ("validatingadmissionpolicy", "adm-authz-sa"),
        ("validatingadmissionpolicybinding", "adm-authz-cost-binding"),
        ("validatingadmissionpolicybinding", "adm-authz-cost-all-binding"),
        ("validatingadmissionpolicy", "adm-authz-cost"),
        ("validatingadmissionpolicy", "adm-authz-cost-all"),
        ("mutatingadmissionpolicybinding", "adm-authz-label-binding"),
        ("mutatingadmissionpolicy", "adm-authz-label"),
    ] {
        uninstall(cmp.cp, kind, name);
    }
}
