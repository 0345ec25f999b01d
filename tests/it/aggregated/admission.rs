//! What farm-apiserver tells the cluster's admission webhooks, checked
//! against what kube-apiserver tells them for the Llama CRD: the same
//! AdmissionReview fields for the same request (the user the aggregator
//! authenticated, never this server's own identity; the operation, options,
//! object and old object), a webhook reached through its Service as
//! kube-apiserver reaches it, and kube's admission metrics.

use serde_json::{json, Value};

use crate::common::api_proxy::ApiProxy;
use crate::common::cluster::{self, ControlPlane};
use crate::common::compare::{admin_client, Comparison, Step, CRD_GROUP, OUR_GROUP, VERSION};
use crate::common::crd;
use crate::common::identity::{client_with_identity, files, leaf, new_ca, status_of};
use crate::common::webhook::WebhookServer;
use crate::common::{Options, Server};
use crate::compare::admission::{configuration, install, install_on, uninstall, webhook_server, Hook};

const MERGE: &str = "application/merge-patch+json";

/// The review a webhook received for `operation` of `name` in `group`.
fn review_of(server: &WebhookServer, path: &str, ns: &str, group: &str, name: &str, operation: &str) -> Value {
    let reviews = server.reviews_for(path, ns);
    let found = reviews.iter().rev().find(|r| {
        let req = &r["request"];
        req["kind"]["group"] == group && req["name"] == name && req["operation"] == operation
    });
    found.unwrap_or_else(|| panic!("no {operation} review of {name} in {group}: {reviews:#?}"))["request"].clone()
}

/// The parts of a review both servers must fill the same way.
fn comparable(request: &Value) -> Value {
    let object = |o: &Value| {
        if o.is_null() {
            Value::Null
        } else {
            json!({"name": o["metadata"]["name"], "labels": o["metadata"]["labels"], "spec": o["spec"], "hasUid": o["metadata"]["uid"].is_string()})
        }
    };
    json!({
        "operation": request["operation"],
        "userInfo": {"username": request["userInfo"]["username"], "groups": request["userInfo"]["groups"]},
        "kind": request["kind"]["kind"],
        "resource": request["resource"]["resource"],
        "subResource": request["subResource"],
        "namespace": request["namespace"],
        "dryRun": request["dryRun"],
        "optionsKind": request["options"]["kind"],
        // As the client sent it: none, when it sent none.
        "fieldManager": request["options"]["fieldManager"],
        "fieldValidation": request["options"]["fieldValidation"],
        "object": object(&request["object"]),
        "oldObject": object(&request["oldObject"]),
    })
}

#[tokio::test]
async fn webhooks_are_told_who_asked_and_what_as_kube_tells_them() {
    // Delegated authentication, as in a cluster: farm-apiserver learns the
    // user from the aggregator (on the shared control plane it runs without).
    let cp = ControlPlane::start();
    // Audited at Metadata: admission's audit annotations land in the events.
    let audit_dir = tempfile::tempdir().unwrap();
    let policy = crate::common::audit::write_policy(
        audit_dir.path(),
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    );
    let log = audit_dir.path().join("audit.log");
    let reg = crate::common::audit::register_audited(&cp, &policy, &log).await;
    crd::install_llama_crd(&cp, CRD_GROUP).unwrap_or_else(|e| panic!("{e}"));
    let admin = admin_client(&cp);
    let ns = cluster::namespace(&cp, "adm-review");
    let server = webhook_server().await;
    let mut review = Hook::new("review.farm.test", "/allow");
    review.resources = vec!["llamas", "llamas/status"];
    let watched = Hook::new("watched.farm.test", "/warn").selecting(json!({"watched": "yes"}));
    let yaml = configuration("ValidatingWebhookConfiguration", "adm-review", &ns, server, &[review, watched]);
    install_on(&cp, &admin, &ns, server, &yaml, "/allow", json!({})).await;
    // alice may do anything in the namespace; she acts through impersonation,
    // so the aggregator authenticates her, not the admin who asked.
    let out =
        cp.kubectl(&["create", "rolebinding", "alice-admin", "--clusterrole=cluster-admin", "--user=alice", "-n", &ns]);
    assert!(out.0, "{out:?}");
    for group in [CRD_GROUP, OUR_GROUP] {
        let resource = format!("llamas.{group}");
        cluster::wait_until_allowed(&cp, &["create", &resource, "--as=alice", "--as-group=farmers", "-n", &ns]).await;
    }
    for group in [CRD_GROUP, OUR_GROUP] {
        let llamas = format!("{}/apis/{group}/{VERSION}/namespaces/{ns}/llamas", cp.server);
        let as_alice =
            |r: reqwest::RequestBuilder| r.header("Impersonate-User", "alice").header("Impersonate-Group", "farmers");
        let merge = |r: reqwest::RequestBuilder, body: Value| r.header("Content-Type", MERGE).body(body.to_string());
        let api_version = format!("{group}/{VERSION}");
        let llama = |name: &str| json!({"apiVersion": api_version, "kind": "Llama", "metadata": {"name": name, "labels": {"a": "b"}}, "spec": {"weight": 2, "height": 1}});
        for request in [
            as_alice(admin.post(&llamas)).json(&llama("dolly")),
            merge(
                as_alice(admin.patch(format!("{llamas}/dolly?fieldManager=patcher"))),
                json!({"spec": {"weight": 3}}),
            ),
            merge(
                as_alice(admin.patch(format!("{llamas}/dolly/status"))),
                json!({"status": {"observedGeneration": 1}}),
            ),
            as_alice(admin.post(format!("{llamas}?dryRun=All&fieldValidation=Strict"))).json(&llama("dry")),
            as_alice(admin.delete(format!("{llamas}/dolly"))),
        ] {
            let answer = request.send().await.unwrap();
            let code = answer.status();
            assert!(code.is_success(), "{group}: {code} {}", answer.text().await.unwrap_or_default());
        }
    }
    for (name, operation) in [("dolly", "CREATE"), ("dolly", "UPDATE"), ("dry", "CREATE"), ("dolly", "DELETE")] {
        let crd = review_of(server, "/allow", &ns, CRD_GROUP, name, operation);
        let ours = review_of(server, "/allow", &ns, OUR_GROUP, name, operation);
        assert_eq!(comparable(&ours), comparable(&crd), "{operation} {name}");
        assert_eq!(ours["userInfo"]["username"], "alice", "{ours:#}");
    }
    // The status subresource is admitted as its own resource.
    let reviews = server.reviews_for("/allow", &ns);
    let status_updates = |group: &str| {
        reviews
            .iter()
            .filter(|r| r["request"]["kind"]["group"] == group && r["request"]["subResource"] == "status")
            .count()
    };
    assert_eq!((status_updates(OUR_GROUP), status_updates(CRD_GROUP)), (1, 1), "{reviews:#?}");

    // A webhook's audit annotations are in the request's audit events, named after it.
    let watched = json!({"apiVersion": format!("{OUR_GROUP}/{VERSION}"), "kind": "Llama", "metadata": {"name": "watched", "labels": {"watched": "yes"}}, "spec": {"weight": 1, "height": 1}});
    let url = format!("{}/apis/{OUR_GROUP}/{VERSION}/namespaces/{ns}/llamas", cp.server);
    let answer = admin.post(&url).json(&watched).send().await.unwrap();
    assert_eq!(answer.status(), 201);
    let audit_id = crate::common::audit::audit_id(answer.headers());
    let events = crate::common::audit::wait_for(&log, &audit_id, "ResponseComplete").await;
    let complete = events.iter().find(|e| e["stage"] == "ResponseComplete").unwrap();
    assert_eq!(complete["annotations"]["watched.farm.test/checked"], "yes", "{complete:#}");

    // So are a ValidatingAdmissionPolicy's audit annotations (`<policy>/<key>`)
    // and, under an Audit binding, its failures (kube's validation_failure).
    cp.apply(&format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: audited.farm.test}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {{apiGroups: [\"{OUR_GROUP}\"], apiVersions: [\"*\"], operations: [CREATE], resources: [llamas]}}
  validations:
  - {{expression: \"!object.metadata.name.startsWith('audited')\", message: no audited llamas}}
  auditAnnotations:
  - {{key: named, valueExpression: \"'named ' + object.metadata.name\"}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: audited.farm.test}}
spec: {{policyName: audited.farm.test, validationActions: [Audit]}}
"
    ));
    // In effect within seconds of its creation: created Llamas until one's event carries it.
    let mut annotations = Value::Null;
    for attempt in 0..60 {
        let name = format!("audited-{attempt}");
        let llama = json!({"apiVersion": format!("{OUR_GROUP}/{VERSION}"), "kind": "Llama", "metadata": {"name": name}, "spec": {"weight": 1, "height": 1}});
        let answer = admin.post(&url).json(&llama).send().await.unwrap();
        assert_eq!(answer.status(), 201, "an Audit binding never refuses");
        let audit_id = crate::common::audit::audit_id(answer.headers());
        let events = crate::common::audit::wait_for(&log, &audit_id, "ResponseComplete").await;
        let complete = events.iter().find(|e| e["stage"] == "ResponseComplete").unwrap();
        annotations = complete["annotations"].clone();
        if annotations.get("audited.farm.test/named").is_some() {
            assert_eq!(annotations["audited.farm.test/named"], format!("named {name}"), "{annotations:#}");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert!(annotations.get("audited.farm.test/named").is_some(), "never annotated: {annotations:#}");
    let failures: Value = serde_json::from_str(
        annotations["validation.policy.admission.k8s.io/validation_failure"].as_str().unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("{e}: {annotations:#}"));
    assert_eq!(
        failures,
        json!([{"message": "no audited llamas", "policy": "audited.farm.test", "binding": "audited.farm.test",
            "expressionIndex": 0, "validationActions": ["Audit"]}]),
    );

    // The calls are counted under kube's metric names.
    let (cert, key) = files(&cp, "adminCertFile", "adminKeyFile");
    let direct = client_with_identity(&reg.server, &cert, &key);
    let metrics = direct.get(reg.server.url("/metrics")).send().await.unwrap().text().await.unwrap();
    for expected in [
        "apiserver_admission_webhook_admission_duration_seconds_count{name=\"review.farm.test\",operation=\"CREATE\",rejected=\"false\",type=\"validating\"}",
        "apiserver_admission_webhook_request_total{name=\"review.farm.test\",operation=\"DELETE\",code=\"200\",rejected=\"false\",type=\"validating\"}",
    ] {
        assert!(metrics.contains(expected), "{expected} in\n{metrics}");
    }
}

#[tokio::test]
async fn a_webhook_behind_a_service_is_reached_as_kube_apiserver_reaches_it() {
    let cmp = Comparison::new("adm-service").await;
    let service = "adm-hook";
    let server = WebhookServer::start(&[&format!("{service}.{}.svc", cmp.ns)]).await;
    // An ExternalName Service to this host: kube-apiserver resolves it to
    // localhost, and so must farm-apiserver; TLS checks <service>.<ns>.svc.
    cmp.cp.apply(
        &json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service, "namespace": cmp.ns},
            "spec": {"type": "ExternalName", "externalName": "localhost", "ports": [{"port": server.port}]},
        })
        .to_string(),
    );
    let name = "adm-service";
    let yaml =
        configuration("ValidatingWebhookConfiguration", name, &cmp.ns, &server, &[Hook::new("svc.farm.test", "/deny")]);
    let mut configuration: Value = serde_json::from_str(&yaml).unwrap();
    configuration["webhooks"][0]["clientConfig"] = json!({
        "service": {"name": service, "namespace": cmp.ns, "port": server.port, "path": "/deny"},
        "caBundle": server.ca_bundle(),
    });
    let yaml = configuration.to_string();
    install(&cmp, &server, &yaml, "/deny", json!({})).await;
    cmp.run(&[
        Step::post("{llamas}")
            .json(json!({"apiVersion": "{gv}", "kind": "Llama", "metadata": {"name": "dolly"}, "spec": {"weight": 2, "height": 1}}))
            .expect(403),
    ])
    .await
    .assert_identical();
    uninstall(cmp.cp, "validatingwebhookconfiguration", name);
}

#[tokio::test]
async fn webhooks_that_require_a_client_certificate_are_given_the_configured_one() {
    // The webhook accepts only clients with a certificate of its own CA; the
    // AdmissionConfiguration gives both servers one, as kube-apiserver reads it.
    let (issuer, client_ca) = new_ca("webhook-clients");
    let (cert, key) = leaf(&issuer, "farm-and-kube");
    let server = WebhookServer::start_requiring(&[], Some(&client_ca)).await;
    let dir = tempfile::tempdir().unwrap();
    let (cert_file, key_file) = (dir.path().join("client.crt"), dir.path().join("client.key"));
    std::fs::write(&cert_file, &cert).unwrap();
    std::fs::write(&key_file, &key).unwrap();
    let kubeconfig = dir.path().join("webhooks.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: \"127.0.0.1:{}\"\n  user:\n    client-certificate: {}\n    client-key: {}\n",
            server.port,
            cert_file.display(),
            key_file.display()
        ),
    )
    .unwrap();
    let config = dir.path().join("admission.yaml");
    let plugin = |name: &str| {
        format!(
            "- name: {name}\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
            kubeconfig.display()
        )
    };
    std::fs::write(
        &config,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n{}{}",
            plugin("ValidatingAdmissionWebhook"),
            plugin("MutatingAdmissionWebhook")
        ),
    )
    .unwrap();
    let flag = format!("--admission-control-config-file={}", config.display());
    let cp = ControlPlane::start_with(&[&flag]);
    let _reg = cluster::register_on(&cp, &[&flag]).await;
    crd::install_llama_crd(&cp, CRD_GROUP).unwrap_or_else(|e| panic!("{e}"));
    let admin = admin_client(&cp);
    let ns = cluster::namespace(&cp, "adm-client-cert");
    let yaml = configuration(
        "ValidatingWebhookConfiguration",
        "adm-client-cert",
        &ns,
        &server,
        &[Hook::new("cert.farm.test", "/deny")],
    );
    // Both servers reach the webhook (it records only what passed the handshake).
    install_on(&cp, &admin, &ns, &server, &yaml, "/deny", json!({})).await;
    for group in [CRD_GROUP, OUR_GROUP] {
        let llama = json!({"apiVersion": format!("{group}/{VERSION}"), "kind": "Llama", "metadata": {"name": "dolly"}, "spec": {"weight": 1, "height": 1}});
        let url = format!("{}/apis/{group}/{VERSION}/namespaces/{ns}/llamas", cp.server);
        let (code, body) = status_of(admin.post(&url).json(&llama).send().await.unwrap()).await;
        assert_eq!(code, 403, "{group}: {body}");
        assert_eq!(
            body["message"],
            "admission webhook \"cert.farm.test\" denied the request: llamas named dolly are not welcome"
        );
    }
    // Without the file, the handshake is refused: kube's 500, nothing stored.
    let bare = Server::start_with(Options { kubeconfig: Some(cp.kubeconfig.clone()), ..Default::default() }).await;
    let client = crate::common::client_trusting(&bare.ca_file).unwrap();
    let llama = json!({"apiVersion": format!("{OUR_GROUP}/{VERSION}"), "kind": "Llama", "metadata": {"name": "anonymous"}, "spec": {"weight": 1, "height": 1}});
    let (code, body) = status_of(client.post(bare.llamas(&ns, "")).json(&llama).send().await.unwrap()).await;
    assert_eq!(code, 500, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "Internal error occurred: failed calling webhook \"cert.farm.test\": failed to call webhook: Post"
        ),
        "{message}"
    );
}

/// A cluster that does not serve MutatingAdmissionPolicies (kube 1.34's
/// default): the plugin asks discovery, finds none, and does not wait for a
/// watch that would never list (the server would never be ready).
#[tokio::test]
async fn mutating_policies_stay_off_where_the_cluster_does_not_serve_them() {
    let cp = ControlPlane::start_with(&[
        "--feature-gates=MutatingAdmissionPolicy=false",
        "--runtime-config=admissionregistration.k8s.io/v1beta1=false",
    ]);
    let server = Server::start_with_cluster(&[], Some(&cp.kubeconfig)).await;
    let text = server.client.get(server.url("/readyz?verbose")).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("[+]mutating-admission-policies ok"), "{text}");
    let log = std::fs::read_to_string(&server.log_file).unwrap();
    assert!(log.contains("MutatingAdmissionPolicy stays off"), "{log}");
}

/// A cluster that starts serving MutatingAdmissionPolicies while the server
/// runs (kube 1.34 has them off by default; a cluster turns them on): the
/// plugin, which found them not served, asks discovery again and applies
/// them, with no API call per write; and one that stops serving them again:
/// the plugin notices and applies them no more. Here a proxy in front of
/// the control plane hides the group version until the test reveals it,
/// and then hides it again.
#[tokio::test]
async fn mutating_policies_take_effect_while_the_cluster_serves_them() {
    let cp = cluster::controlplane();
    let proxy = ApiProxy::start(cp, "admissionregistration.k8s.io/v1beta1").await;
    let server = Server::start_with_cluster(&[], Some(&proxy.kubeconfig)).await;
    let log = std::fs::read_to_string(&server.log_file).unwrap();
    assert!(log.contains("MutatingAdmissionPolicy stays off"), "{log}");
    let ns = cluster::namespace(cp, "adm-map-later");
    let rules =
        json!([{"apiGroups": [OUR_GROUP], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["llamas"]}]);
    cp.apply(
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicy",
             "metadata": {"name": "adm-map-later"},
             "spec": {"reinvocationPolicy": "Never",
                      "matchConstraints": {"resourceRules": rules,
                                           "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}},
                      "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration":
                          {"expression": "Object{metadata: Object.metadata{labels: {'later': 'yes'}}}"}}]}},
            {"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicyBinding",
             "metadata": {"name": "adm-map-later-binding"}, "spec": {"policyName": "adm-map-later"}},
        ]})
        .to_string(),
    );
    let llama = json!({"apiVersion": format!("{OUR_GROUP}/{VERSION}"), "kind": "Llama",
                       "metadata": {"generateName": "probe-"}, "spec": {"weight": 1, "height": 1}});
    let create = || async {
        let answer = server.client.post(format!("{}?dryRun=All", server.llamas(&ns, ""))).json(&llama).send().await;
        status_of(answer.unwrap()).await
    };
    // Not served: not applied.
    let (code, body) = create().await;
    assert_eq!((code, &body["metadata"]["labels"]["later"]), (201, &Value::Null), "{body:#}");
    proxy.reveal();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (code, body) = create().await;
        if body["metadata"]["labels"]["later"] == "yes" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the policy did not take effect in 60 s: {code} {body:#}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    // The API turned off: the policy, still stored, is applied no more.
    proxy.hide();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (code, body) = create().await;
        if code == 201 && body["metadata"]["labels"]["later"].is_null() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the policy was still applied 60 s after its API went away: {code} {body:#}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let log = std::fs::read_to_string(&server.log_file).unwrap();
    assert!(log.contains("MutatingAdmissionPolicy is off until it does again"), "{log}");
    for (kind, name) in
        [("mutatingadmissionpolicybinding", "adm-map-later-binding"), ("mutatingadmissionpolicy", "adm-map-later")]
    {
        uninstall(cp, kind, name);
    }
}

/// kube-apiserver's admission flags, checked in its words before anything
/// starts; plugins that are on already may be named.
#[tokio::test]
async fn admission_plugin_flags_are_taken_and_checked_as_kube_takes_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_farm-apiserver"))
        .args(["--bind", "127.0.0.1:0", "--authentication", "none", "--cert-dir"])
        .arg(dir.path().join("certs"))
        .args(["--enable-admission-plugins", "AlwaysPullImages,NamespaceLifecycle"])
        .args(["--disable-admission-plugins", "NamespaceLifecycle"])
        .env("KUBECONFIG", dir.path().join("none"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "[enable-admission-plugins plugin \"AlwaysPullImages\" is unknown, [NamespaceLifecycle] in enable-admission-plugins and disable-admission-plugins overlapped]"
        ),
        "{stderr}"
    );
    let server = Server::start(&[
        "--enable-admission-plugins",
        "NamespaceLifecycle,MutatingAdmissionPolicy",
        "--disable-admission-plugins=ValidatingAdmissionWebhook",
        "--disable-admission-plugins=MutatingAdmissionWebhook",
    ])
    .await;
    let answer = server.client.get(server.url("/readyz")).send().await.unwrap();
    assert!(answer.status().is_success());
}

/// Large writes take turns for their computations (a server-wide few, one
/// per core), and a turn held while a webhook answers would make every
/// other user's large write wait on that webhook. Here more large creates
/// than there are turns wait on a webhook that answers only when told to;
/// meanwhile another large create must be made.
#[tokio::test]
async fn large_writes_waiting_on_a_webhook_hold_up_no_other_large_write() {
    let cmp = Comparison::new("adm-held").await;
    let server = WebhookServer::start(&[]).await;
    let name = "adm-held";
    let held = Hook { timeout_seconds: 30, ..Hook::new("held.farm.test", "/hold") };
    let yaml = configuration("ValidatingWebhookConfiguration", name, &cmp.ns, &server, &[held]);
    install(&cmp, &server, &yaml, "/hold", json!({})).await;
    let client = admin_client(cmp.cp);
    let url = format!("{}/apis/{OUR_GROUP}/{VERSION}/namespaces/{}/llamas", cmp.cp.server, cmp.ns);
    // Over the 16 KiB from which a write's computations take turns.
    let large = |name: String| {
        json!({"apiVersion": format!("{OUR_GROUP}/{VERSION}"), "kind": "Llama",
               "metadata": {"name": name, "annotations": {"bulk": "x".repeat(64 * 1024)}},
               "spec": {"weight": 2, "height": 1}})
    };
    let turns = std::thread::available_parallelism().map_or(2, |n| n.get());
    let held: Vec<_> = (0..turns * 2 + 1)
        .map(|i| {
            let request = client.post(&url).json(&large(format!("held-{i}")));
            tokio::spawn(async move { request.send().await.map(|a| a.status().as_u16()).unwrap_or(0) })
        })
        .collect();
    let waiting = || {
        server
            .reviews_for("/hold", &cmp.ns)
            .iter()
            .filter(|r| r["request"]["name"].as_str().is_some_and(|n| n.starts_with("held-")))
            .count()
    };
    // Every turn there is could be held by now, had the webhook's callers kept theirs.
    cluster::eventually("the webhook holding large creates", std::time::Duration::from_secs(30), || {
        waiting() >= turns.min(2)
    })
    .await;
    let quick = client
        .post(&url)
        .timeout(std::time::Duration::from_secs(20))
        .json(&large("quick".into()))
        .send()
        .await
        .map(|a| a.status().as_u16());
    let done = held.iter().filter(|h| h.is_finished()).count();
    server.release_held();
    assert_eq!(quick.ok(), Some(201), "a large create waited for the webhook's answer to others");
    assert_eq!(done, 0, "the webhook answered before it was released");
    for write in held {
        assert_eq!(write.await.unwrap(), 201);
    }
    uninstall(cmp.cp, "validatingwebhookconfiguration", name);
}
