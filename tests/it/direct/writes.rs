//! Llama writes over HTTPS: create, update, patch, delete, status,
//! finalizers, preconditions, dry run, and their errors, asserted against
//! kube-apiserver's codes, reasons and messages.

use crate::common::{call, create, llama, send, Backend, Server};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

async fn patch(s: &Server, url: &str, ct: &str, body: &Value) -> (StatusCode, Value) {
    let (c, _, v) = call(s, Method::PATCH, url, ct, Some(serde_json::to_vec(body).unwrap())).await;
    (c, v)
}

async fn get(s: &Server, url: &str) -> (StatusCode, Value) {
    send(s, Method::GET, url, None).await
}

fn assert_status(v: &Value, code: u16, reason: &str) {
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["apiVersion"], "v1", "{v}");
    assert_eq!(v["status"], "Failure", "{v}");
    assert_eq!(v["code"], code, "{v}");
    assert_eq!(v["reason"], reason, "{v}");
}

async fn create_sets_metadata_and_keeps_numbers_exact(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let v = create(&s, "default", &llama("dolly", 31.4, 1.7)).await;
    assert_eq!(v["spec"]["weight"], json!(31.4));
    assert_eq!(v["spec"]["weight"].to_string(), "31.4");
    assert_eq!(v["metadata"]["namespace"], "default");
    assert_eq!(v["metadata"]["generation"], 1);
    assert_eq!(v["metadata"]["uid"].as_str().unwrap().len(), 36);
    assert!(v["metadata"]["creationTimestamp"].as_str().unwrap().ends_with('Z'));
    let rv: u64 = v["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert!(rv > 0);
    let (code, got) = get(&s, &s.llamas("default", "dolly")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(got, v);
    let text = s.client.get(s.llamas("default", "dolly")).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("\"weight\":31.4"), "{text}");
    // Numbers whose parse needs correct rounding (found by the fuzzer: the
    // default float parser returned ...374e+298 for ...375e+298).
    let body = r#"{"apiVersion":"farm.example.com/v1alpha","kind":"Llama","metadata":{"name":"big"},
        "spec":{"weight":5.313035119763375e+298,"height":0.30000000000000004}}"#;
    let (code, _, _) =
        call(&s, Method::POST, &s.llamas("default", ""), "application/json", Some(body.as_bytes().to_vec())).await;
    assert_eq!(code, StatusCode::CREATED);
    let text = s.client.get(s.llamas("default", "big")).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("\"weight\":5.313035119763375e+298"), "{text}");
    assert!(text.contains("\"height\":0.30000000000000004"), "{text}");
}

async fn generate_name_makes_a_unique_name(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let body = json!({"apiVersion": "farm.example.com/v1alpha", "kind": "Llama",
        "metadata": {"generateName": "baby-"}, "spec": {"weight": 5, "height": 0.5}});
    let a = create(&s, "default", &body).await;
    let b = create(&s, "default", &body).await;
    let (na, nb) = (a["metadata"]["name"].as_str().unwrap(), b["metadata"]["name"].as_str().unwrap());
    assert!(na.starts_with("baby-") && na.len() == 10, "{na}");
    assert_ne!(na, nb);
}

async fn create_errors_have_kube_status_bodies(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let url = s.llamas("default", "");
    // Malformed JSON.
    let (code, _, v) = call(&s, Method::POST, &url, "application/json", Some(b"{\"kind\": ".to_vec())).await;
    assert_eq!(code, 400);
    assert_status(&v, 400, "BadRequest");
    // Wrong apiVersion and kind.
    let mut wrong = llama("a", 1.0, 1.0);
    wrong["apiVersion"] = json!("farm.example.com/v9");
    let (code, v) = send(&s, Method::POST, &url, Some(&wrong)).await;
    assert_eq!(code, 400);
    assert!(v["message"].as_str().unwrap().contains("does not match the expected API version"), "{v}");
    let mut wrong = llama("a", 1.0, 1.0);
    wrong["kind"] = json!("Alpaca");
    let (code, v) = send(&s, Method::POST, &url, Some(&wrong)).await;
    assert_eq!(code, 422, "{v}");
    assert!(v["message"].as_str().unwrap().contains("kind: Invalid value: \"Alpaca\": must be Llama"), "{v}");
    let mut wrong = llama("a", 1.0, 1.0);
    wrong.as_object_mut().unwrap().remove("kind");
    let (code, v) = send(&s, Method::POST, &url, Some(&wrong)).await;
    assert_eq!(code, 400);
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("the object provided is unrecognized (must be of type Llama): Object 'Kind' is missing"),
        "{v}"
    );
    // A name that is not a DNS-1123 subdomain.
    let (code, v) = send(&s, Method::POST, &url, Some(&llama("Bad_Name", 1.0, 1.0))).await;
    assert_eq!(code, 422);
    assert_status(&v, 422, "Invalid");
    assert_eq!(v["details"]["causes"][0]["field"], "metadata.name");
    assert_eq!(v["details"]["kind"], "Llama");
    assert_eq!(v["details"]["group"], "farm.example.com");
    assert!(v["message"].as_str().unwrap().starts_with("Llama.farm.example.com \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"), "{v}");
    // Namespace in the body differs from the URL.
    let mut other = llama("a", 1.0, 1.0);
    other["metadata"]["namespace"] = json!("elsewhere");
    let (code, v) = send(&s, Method::POST, &url, Some(&other)).await;
    assert_eq!(code, 400);
    assert_eq!(v["message"], "the namespace of the provided object does not match the namespace sent on the request");
    // Bad spec values: each bad field is a cause.
    let (code, v) = send(&s, Method::POST, &url, Some(&llama("thin", 0.0, -2.0))).await;
    assert_eq!(code, 422, "{v}");
    let fields: Vec<&str> =
        v["details"]["causes"].as_array().unwrap().iter().map(|c| c["field"].as_str().unwrap()).collect();
    assert!(fields.contains(&"spec.weight") && fields.contains(&"spec.height"), "{v}");
    let bad = json!({"apiVersion": "farm.example.com/v1alpha", "kind": "Llama", "metadata": {"name": "x"}, "spec": {"weight": "heavy"}});
    let (code, v) = send(&s, Method::POST, &url, Some(&bad)).await;
    assert_eq!(code, 422, "{v}");
    let causes = v["details"]["causes"].to_string();
    assert!(causes.contains("spec.weight") && causes.contains("spec.height"), "{v}");
    // Already exists.
    create(&s, "default", &llama("twin", 1.0, 1.0)).await;
    let (code, v) = send(&s, Method::POST, &url, Some(&llama("twin", 1.0, 1.0))).await;
    assert_eq!(code, 409);
    assert_status(&v, 409, "AlreadyExists");
    assert_eq!(v["message"], "llamas.farm.example.com \"twin\" already exists");
    assert_eq!(v["details"], json!({"name": "twin", "group": "farm.example.com", "kind": "llamas"}));
    // resourceVersion may not be set on create.
    let mut with_rv = llama("rv", 1.0, 1.0);
    with_rv["metadata"]["resourceVersion"] = json!("5");
    let (code, _) = send(&s, Method::POST, &url, Some(&with_rv)).await;
    assert_eq!(code, 400);
    // Unsupported body type and a body over 3 MiB.
    let (code, _, v) = call(&s, Method::POST, &url, "application/x-yaml-ish", Some(b"{}".to_vec())).await;
    assert_eq!(code, 415);
    assert_status(&v, 415, "UnsupportedMediaType");
    let mut huge = llama("huge", 1.0, 1.0);
    huge["metadata"]["annotations"] = json!({"big": "x".repeat(3 * 1024 * 1024 + 10)});
    let (code, v) = send(&s, Method::POST, &url, Some(&huge)).await;
    assert_eq!(code, 413);
    assert_status(&v, 413, "RequestEntityTooLarge");
}

async fn not_found_method_not_allowed_and_not_acceptable(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let (code, v) = get(&s, &s.llamas("default", "ghost")).await;
    assert_eq!(code, 404);
    assert_status(&v, 404, "NotFound");
    assert_eq!(v["message"], "llamas.farm.example.com \"ghost\" not found");
    assert_eq!(v["details"], json!({"name": "ghost", "group": "farm.example.com", "kind": "llamas"}));
    // As kube's CRD handler: a POST on an object's path creates the body.
    let (code, v) = send(&s, Method::POST, &s.llamas("default", "ghost"), Some(&llama("ghost", 1.0, 1.0))).await;
    assert_eq!(code, 201, "{v}");
    // Nothing but list and watch across all namespaces: Go's plain 404.
    let r = s
        .client
        .post(s.url("/apis/farm.example.com/v1alpha/llamas"))
        .header("Content-Type", "application/json")
        .body(llama("x", 1.0, 1.0).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.text().await.unwrap(), "404 page not found\n");
    let (code, v) = send(&s, Method::DELETE, &s.llamas("default", "ghost/status"), Some(&json!({}))).await;
    assert_eq!(code, 405, "{v}");
    assert_status(&v, 405, "MethodNotAllowed");
    let r = s
        .client
        .get(s.llamas("default", ""))
        .header("Accept", "application/vnd.kubernetes.protobuf")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 406);
    let v: Value = r.json().await.unwrap();
    assert_status(&v, 406, "NotAcceptable");
    // An unknown resource of the group: Go's plain 404, as kube answers for a CRD's group.
    let r = s.client.get(s.url("/apis/farm.example.com/v1alpha/namespaces/default/alpacas")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.text().await.unwrap(), "404 page not found\n");
    let (code, _) = get(&s, &s.llamas("default", "a/scale")).await;
    assert_eq!(code, 404);
}

async fn update_needs_current_resource_version_and_bumps_generation_on_spec_only(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let v = create(&s, "default", &llama("ursula", 100.0, 1.5)).await;
    let url = s.llamas("default", "ursula");
    // Without a resourceVersion: 422, like a CRD.
    let (code, e) = send(&s, Method::PUT, &url, Some(&llama("ursula", 101.0, 1.5))).await;
    assert_eq!(code, 422, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("metadata.resourceVersion: Invalid value: 0: must be specified for an update"),
        "{e}"
    );
    // Label change: no generation bump.
    let mut next = v.clone();
    next["metadata"]["labels"] = json!({"colour": "brown"});
    let (code, v2) = send(&s, Method::PUT, &url, Some(&next)).await;
    assert_eq!(code, 200, "{v2}");
    assert_eq!(v2["metadata"]["generation"], 1);
    assert_eq!(v2["metadata"]["labels"]["colour"], "brown");
    // Stale resourceVersion: 409 Conflict.
    let (code, e) = send(&s, Method::PUT, &url, Some(&next)).await;
    assert_eq!(code, 409);
    assert_status(&e, 409, "Conflict");
    assert_eq!(e["message"], "Operation cannot be fulfilled on llamas.farm.example.com \"ursula\": the object has been modified; please apply your changes to the latest version and try again");
    // Spec change: generation 2; status in the main resource is ignored.
    let mut next = v2.clone();
    next["spec"]["weight"] = json!(102.5);
    next["status"] = json!({"observedGeneration": 7});
    let (code, v3) = send(&s, Method::PUT, &url, Some(&next)).await;
    assert_eq!(code, 200, "{v3}");
    assert_eq!(v3["metadata"]["generation"], 2);
    assert!(v3.get("status").is_none(), "{v3}");
    // Name mismatch between URL and body.
    let mut renamed = v3.clone();
    renamed["metadata"]["name"] = json!("other");
    let (code, _) = send(&s, Method::PUT, &url, Some(&renamed)).await;
    assert_eq!(code, 400);
    // An identical update writes nothing.
    let (code, v4) = send(&s, Method::PUT, &url, Some(&v3)).await;
    assert_eq!(code, 200);
    assert_eq!(v4["metadata"]["resourceVersion"], v3["metadata"]["resourceVersion"]);
    // Update of a missing object.
    let mut ghost = v3.clone();
    ghost["metadata"]["name"] = json!("ghost");
    let (code, _) = send(&s, Method::PUT, &s.llamas("default", "ghost"), Some(&ghost)).await;
    assert_eq!(code, 404);
}

async fn status_subresource_changes_only_status(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let mut v = llama("stat", 10.0, 1.0);
    v["status"] = json!({"observedGeneration": 99});
    let v = create(&s, "default", &v).await;
    assert!(v.get("status").is_none(), "status is dropped on create: {v}");
    let url = s.llamas("default", "stat/status");
    let mut next = v.clone();
    next["status"] = json!({"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True",
        "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "Fed", "message": "all good"}]});
    next["spec"]["weight"] = json!(999.0);
    next["metadata"]["labels"] = json!({"ignored": "yes"});
    let (code, v2) = send(&s, Method::PUT, &url, Some(&next)).await;
    assert_eq!(code, 200, "{v2}");
    assert_eq!(v2["status"]["observedGeneration"], 1);
    assert_eq!(v2["spec"]["weight"], 10.0);
    assert!(v2["metadata"].get("labels").is_none());
    assert_eq!(v2["metadata"]["generation"], 1);
    let (code, v3) = patch(
        &s,
        &url,
        "application/merge-patch+json",
        &json!({"status": {"observedGeneration": 2}, "spec": {"weight": 1}}),
    )
    .await;
    assert_eq!(code, 200, "{v3}");
    assert_eq!(v3["status"]["observedGeneration"], 2);
    assert_eq!(v3["spec"]["weight"], 10.0);
    let (code, v4) = get(&s, &url).await;
    assert_eq!(code, 200);
    assert_eq!(v4, v3);
    // Invalid status is rejected with a cause.
    let (code, e) =
        patch(&s, &url, "application/merge-patch+json", &json!({"status": {"observedGeneration": "x"}})).await;
    assert_eq!(code, 422, "{e}");
    assert_eq!(e["details"]["causes"][0]["field"], "status.observedGeneration");
}

async fn patches_json_and_merge_and_refuses_strategic(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    create(&s, "default", &llama("pat", 10.0, 1.0)).await;
    let url = s.llamas("default", "pat");
    let (code, v) = patch(
        &s,
        &url,
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"a": "1"}}, "spec": {"height": 1.25}}),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["spec"]["height"], json!(1.25));
    assert_eq!(v["metadata"]["generation"], 2);
    let ops = json!([{"op": "replace", "path": "/spec/weight", "value": 11.5}, {"op": "add", "path": "/metadata/labels/b", "value": "2"}]);
    let (code, v) = patch(&s, &url, "application/json-patch+json", &ops).await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["spec"]["weight"], json!(11.5));
    assert_eq!(v["metadata"]["labels"], json!({"a": "1", "b": "2"}));
    // A failing test op is 422; a malformed patch 400; a patch making the object invalid 422.
    let (code, _) =
        patch(&s, &url, "application/json-patch+json", &json!([{"op": "test", "path": "/spec/weight", "value": 1}]))
            .await;
    assert_eq!(code, 422);
    let (code, _, _) = call(&s, Method::PATCH, &url, "application/json-patch+json", Some(b"{not json".to_vec())).await;
    assert_eq!(code, 400);
    let (code, e) = patch(&s, &url, "application/merge-patch+json", &json!({"spec": {"weight": -1}})).await;
    assert_eq!(code, 422, "{e}");
    // Strategic merge patch is refused (never silently a plain merge).
    let (code, e) =
        patch(&s, &url, "application/strategic-merge-patch+json", &json!({"metadata": {"finalizers": ["x/y"]}})).await;
    assert_eq!(code, 415, "{e}");
    assert_status(&e, 415, "UnsupportedMediaType");
    assert!(e["message"].as_str().unwrap().contains("application/merge-patch+json"), "{e}");
    // A patch pinning a stale resourceVersion conflicts.
    let (code, _) = patch(
        &s,
        &url,
        "application/merge-patch+json",
        &json!({"metadata": {"resourceVersion": "1"}, "spec": {"weight": 3}}),
    )
    .await;
    assert_eq!(code, 409);
    let (code, _) = patch(&s, &s.llamas("default", "nope"), "application/merge-patch+json", &json!({})).await;
    assert_eq!(code, 404);
}

async fn finalizers_hold_deletion_until_removed(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let mut body = llama("held", 10.0, 1.0);
    body["metadata"]["finalizers"] = json!(["farm.example.com/shear"]);
    create(&s, "default", &body).await;
    let url = s.llamas("default", "held");
    let (code, _, v) = call(&s, Method::DELETE, &url, "application/json", None).await;
    assert_eq!(code, 200);
    assert_eq!(v["kind"], "Llama", "pending deletion answers with the object: {v}");
    assert!(v["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 0);
    let (code, still) = get(&s, &url).await;
    assert_eq!(code, 200);
    assert!(still["metadata"]["deletionTimestamp"].is_string());
    // No new finalizers while deleting.
    let (code, e) = patch(
        &s,
        &url,
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": ["farm.example.com/shear", "farm.example.com/more"]}}),
    )
    .await;
    assert_eq!(code, 422, "{e}");
    // Removing the last finalizer deletes it.
    let (code, v) =
        patch(&s, &url, "application/json-patch+json", &json!([{"op": "remove", "path": "/metadata/finalizers"}]))
            .await;
    assert_eq!(code, 200, "{v}");
    let (code, _) = get(&s, &url).await;
    assert_eq!(code, 404);
}

async fn delete_preconditions_and_status_answer(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let v = create(&s, "default", &llama("pre", 10.0, 1.0)).await;
    let url = s.llamas("default", "pre");
    let bad_uid = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}});
    let (code, e) = send(&s, Method::DELETE, &url, Some(&bad_uid)).await;
    assert_eq!(code, 409);
    assert_status(&e, 409, "Conflict");
    assert!(e["message"].as_str().unwrap().contains("the UID in the precondition (00000000-"), "{e}");
    assert_eq!(e["details"]["kind"], "Llama", "{e}");
    let bad_rv = json!({"preconditions": {"resourceVersion": "1"}});
    let (code, e) = send(&s, Method::DELETE, &url, Some(&bad_rv)).await;
    assert_eq!(code, 409, "{e}");
    let good =
        json!({"preconditions": {"uid": v["metadata"]["uid"], "resourceVersion": v["metadata"]["resourceVersion"]}});
    let (code, st) = send(&s, Method::DELETE, &url, Some(&good)).await;
    assert_eq!(code, 200, "{st}");
    assert_eq!(st["kind"], "Status");
    assert_eq!(st["status"], "Success");
    assert_eq!(st["details"]["name"], "pre");
    assert_eq!(st["details"]["uid"], v["metadata"]["uid"]);
    let (code, e) = send(&s, Method::DELETE, &url, Some(&json!({}))).await;
    assert_eq!(code, 404);
    assert_status(&e, 404, "NotFound");
}

async fn dry_run_changes_nothing(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let (code, v) =
        send(&s, Method::POST, &format!("{}?dryRun=All", s.llamas("default", "")), Some(&llama("ghost", 1.0, 1.0)))
            .await;
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["metadata"]["name"], "ghost");
    assert_eq!(get(&s, &s.llamas("default", "ghost")).await.0, 404);
    let real = create(&s, "default", &llama("real", 1.0, 1.0)).await;
    let url = s.llamas("default", "real");
    let mut next = real.clone();
    next["spec"]["weight"] = json!(50.0);
    let (code, v) = send(&s, Method::PUT, &format!("{url}?dryRun=All"), Some(&next)).await;
    assert_eq!(code, 200);
    assert_eq!(v["spec"]["weight"], 50.0);
    let (code, v) =
        patch(&s, &format!("{url}?dryRun=All"), "application/merge-patch+json", &json!({"spec": {"height": 9}})).await;
    assert_eq!(code, 200);
    assert_eq!(v["spec"]["height"], json!(9));
    let (code, _, _) = call(&s, Method::DELETE, &format!("{url}?dryRun=All"), "application/json", None).await;
    assert_eq!(code, 200);
    assert_eq!(get(&s, &url).await.1, real);
    let (code, e) =
        send(&s, Method::POST, &format!("{}?dryRun=Maybe", s.llamas("default", "")), Some(&llama("x", 1.0, 1.0))).await;
    assert_eq!(code, 422, "{e}");
    assert_status(&e, 422, "Invalid");
    assert_eq!(
        e["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Maybe\"]: supported values: \"All\""
    );
}

async fn delete_collection_honours_selectors(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    for (name, herd) in [("a", "north"), ("b", "north"), ("c", "south")] {
        let mut body = llama(name, 1.0, 1.0);
        body["metadata"]["labels"] = json!({"herd": herd});
        create(&s, "default", &body).await;
    }
    create(&s, "other", &llama("d", 1.0, 1.0)).await;
    let (code, _, v) = call(
        &s,
        Method::DELETE,
        &format!("{}?labelSelector=herd%3Dnorth", s.llamas("default", "")),
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["kind"], "LlamaList");
    assert_eq!(v["items"].as_array().unwrap().len(), 2);
    let (_, list) = get(&s, &s.llamas("default", "")).await;
    let names: Vec<&str> =
        list["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["c"]);
    assert_eq!(get(&s, &s.llamas("other", "d")).await.0, 200);
}

async fn field_validation_strict_warn_ignore(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let body = br#"{"apiVersion":"farm.example.com/v1alpha","kind":"Llama","metadata":{"name":"fv"},"spec":{"weight":1,"height":2,"colour":"brown","weight":3}}"#;
    let base = s.llamas("default", "");
    let (code, _, e) =
        call(&s, Method::POST, &format!("{base}?fieldValidation=Strict"), "application/json", Some(body.to_vec()))
            .await;
    assert_eq!(code, 400, "{e}");
    assert_status(&e, 400, "BadRequest");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Llama in version \"v1alpha\" cannot be handled as a Llama: strict decoding error: "),
        "{msg}"
    );
    assert!(msg.contains("unknown field \"spec.colour\"") && msg.contains("duplicate field \"spec.weight\""), "{msg}");
    let (code, headers, v) =
        call(&s, Method::POST, &format!("{base}?fieldValidation=Warn"), "application/json", Some(body.to_vec())).await;
    assert_eq!(code, 201, "{v}");
    let warnings: Vec<&str> = headers.get_all("warning").iter().map(|h| h.to_str().unwrap()).collect();
    assert!(warnings.contains(&"299 - \"unknown field \\\"spec.colour\\\"\""), "{warnings:?}");
    assert!(warnings.iter().any(|w| w.contains("duplicate field")), "{warnings:?}");
    assert!(v["spec"].get("colour").is_none());
    assert_eq!(v["spec"]["weight"], json!(3));
    let body2 = String::from_utf8(body.to_vec()).unwrap().replace("\"fv\"", "\"fv2\"");
    let (code, headers, _) =
        call(&s, Method::POST, &format!("{base}?fieldValidation=Ignore"), "application/json", Some(body2.into_bytes()))
            .await;
    assert_eq!(code, 201);
    let warnings: Vec<&str> = headers.get_all("warning").iter().map(|h| h.to_str().unwrap()).collect();
    assert_eq!(warnings, [crate::common::V1ALPHA_DEPRECATED], "only the version's");
    let (code, _, e) =
        call(&s, Method::POST, &format!("{base}?fieldValidation=Loose"), "application/json", Some(body.to_vec())).await;
    // kube-apiserver validates CreateOptions into a 422, not a 400.
    assert_eq!(code, 422, "{e}");
    assert_status(&e, 422, "Invalid");
    assert_eq!(
        e["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loose\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
    );
}

const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";

/// The 3 KB JSON patch that used to grow one Llama until the kernel killed
/// the server (one add of 1 KB, then 24 copies of /spec into itself), and
/// the operation cap: kube-apiserver's limits, codes and words.
async fn amplifying_json_patches_are_refused(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let url = s.llamas("default", "amp");
    create(&s, "default", &llama("amp", 1.0, 1.0)).await;
    let mut ops = vec![json!({"op": "add", "path": "/spec/d0", "value": "x".repeat(1024)})];
    for i in 1..=24 {
        ops.push(json!({"op": "copy", "from": "/spec", "path": format!("/spec/d{i}")}));
    }
    let body = serde_json::to_vec(&ops).unwrap();
    assert!(body.len() < 4096, "{} bytes", body.len());
    let (code, e) = patch(&s, &url, JSON_PATCH, &Value::Array(ops)).await;
    assert_eq!(code, 422, "{e}");
    assert_status(&e, 422, "Invalid");
    assert_eq!(e["message"], "the server rejected our request due to an error in our request");
    // Copies within kube's 3 MiB still apply (the copies go to unknown
    // fields, which are pruned as for the CRD).
    let few = json!([{"op": "add", "path": "/spec/d0", "value": "x".repeat(1024)},
        {"op": "copy", "from": "/spec", "path": "/spec/d1"},
        {"op": "replace", "path": "/spec/weight", "value": 2}]);
    let (code, v) = patch(&s, &url, JSON_PATCH, &few).await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["spec"], json!({"weight": 2, "height": 1}));
    // 10,000 operations are applied; 10,001 are 413.
    let test_op = json!({"op": "test", "path": "/spec/weight", "value": 2});
    let (code, v) = patch(&s, &url, JSON_PATCH, &Value::Array(vec![test_op.clone(); 10_000])).await;
    assert_eq!(code, 200, "{v}");
    let (code, e) = patch(&s, &url, JSON_PATCH, &Value::Array(vec![test_op; 10_001])).await;
    assert_eq!(code, 413, "{e}");
    assert_status(&e, 413, "RequestEntityTooLarge");
    assert_eq!(
        e["message"],
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
    // Nesting past what a body may hold, built by moves into a deep path.
    let deep = (0..100).fold(json!(1), |v, _| json!({"a": v}));
    let bottom = format!("/spec/n{}", "/a".repeat(99));
    let nest = json!([
        {"op": "add", "path": "/spec/n", "value": deep},
        {"op": "add", "path": "/spec/m", "value": deep},
        {"op": "move", "from": "/spec/m", "path": format!("{bottom}/b")},
    ]);
    let (code, e) = patch(&s, &url, JSON_PATCH, &nest).await;
    assert_eq!(code, 422, "{e}");
    let (code, v) = get(&s, &url).await;
    assert_eq!((code, &v["spec"]), (StatusCode::OK, &json!({"weight": 2, "height": 1})));
}

/// `llama` with `count` finalizers of ~260 bytes each (valid names: a long
/// domain, a 60-character name part): a way to make an object large that the
/// schema does not prune.
fn with_finalizers(mut llama: Value, count: usize) -> Value {
    let domain = format!("{}.example.com", ["p".repeat(60), "q".repeat(60), "r".repeat(60)].join("."));
    llama["metadata"]["finalizers"] =
        (0..count).map(|i| json!(format!("{domain}/f{i}-{}", "f".repeat(55)))).collect::<Value>();
    llama
}

/// A condition of `size` bytes of message, valid for the Llama schema.
fn condition(kind: &str, size: usize) -> Value {
    json!({"type": kind, "status": "True", "reason": "Grown", "lastTransitionTime": "2026-01-01T00:00:00Z",
           "message": "m".repeat(size)})
}

/// Growth across requests: each write is under the body limit, but the object
/// may not pass --max-object-bytes (etcd's 1.5 MiB by default): the write that
/// would is refused as kube-apiserver refuses it when etcd does, and the
/// object stays as it was.
async fn objects_cannot_grow_past_the_object_limit(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let url = s.llamas("default", "grow");
    create(&s, "default", &llama("grow", 1.0, 1.0)).await;
    let status = format!("{url}/status");
    let (code, v) =
        patch(&s, &status, MERGE_PATCH, &json!({"status": {"conditions": [condition("A", 700_000)]}})).await;
    assert_eq!(code, 200, "{v}");
    let add = |kind: &str| json!([{"op": "add", "path": "/status/conditions/-", "value": condition(kind, 700_000)}]);
    let (code, v) = patch(&s, &status, JSON_PATCH, &add("B")).await;
    assert_eq!(code, 200, "{v}");
    let (code, e) = patch(&s, &status, JSON_PATCH, &add("C")).await;
    assert_eq!(code, 500, "{e}");
    assert_eq!(e["message"], "etcdserver: request is too large", "{e}");
    assert!(e.get("reason").is_none(), "{e}");
    let (code, v) = get(&s, &url).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(v["status"]["conditions"].as_array().map(Vec::len), Some(2));
    // A create over the limit (finalizers are one way past the schema) fails alike.
    let big = with_finalizers(llama("fins", 1.0, 1.0), 7000);
    let (code, e) = send(&s, Method::POST, &s.llamas("default", ""), Some(&big)).await;
    assert_eq!(code, 500, "{e}");
    assert_eq!(e["message"], "etcdserver: request is too large");
    assert_eq!(get(&s, &s.llamas("default", "fins")).await.0, StatusCode::NOT_FOUND);
}

/// --max-object-bytes sets the limit, and a write that fits only without its
/// managedFields is stored without them, as kube-apiserver retries it.
async fn max_object_bytes_flag_and_the_managed_fields_retry(backend: Backend) {
    let s = Server::start_on(backend, &["--max-object-bytes", "8192"]).await;
    let annotated = |name: &str, len: usize| {
        let mut l = llama(name, 1.0, 1.0);
        l["metadata"]["annotations"] = json!({"note": "n".repeat(len)});
        l
    };
    // A probe measures what the server adds around the annotation.
    let probe = create(&s, "default", &annotated("probe", 1000)).await;
    let mut bare = probe.clone();
    bare["metadata"].as_object_mut().unwrap().remove("managedFields");
    let overhead = serde_json::to_vec(&bare).unwrap().len() - 1000;
    // Fits without managedFields (by 16 bytes), not with them; 64 bytes over
    // does not fit at all (etcd keeps no resourceVersion: ~24 bytes fewer).
    let fit = create(&s, "default", &annotated("pro2e", 8192 - overhead - 16)).await;
    assert!(fit["metadata"].get("managedFields").is_none(), "{}", fit["metadata"]);
    let (code, e) =
        send(&s, Method::POST, &s.llamas("default", ""), Some(&annotated("pro3e", 8192 - overhead + 64))).await;
    assert_eq!(code, 500, "{e}");
    assert_eq!(e["message"], "etcdserver: request is too large");
    // An update likewise: the probe grown to fit only without managedFields.
    let grow = json!({"metadata": {"annotations": {"note": "n".repeat(8192 - overhead - 16)}}});
    let (code, v) = patch(&s, &s.llamas("default", "probe"), MERGE_PATCH, &grow).await;
    assert_eq!(code, 200, "{v}");
    assert!(v["metadata"].get("managedFields").is_none(), "{}", v["metadata"]);
}

/// With a limit above etcd's own (1.5 MiB here), etcd's refusal reaches the
/// client as the same answer.
#[tokio::test]
async fn etcd_refusing_an_object_is_answered_as_the_limit_is() {
    let s = Server::start_on(Backend::Etcd, &["--max-object-bytes", "4194304"]).await;
    let big = with_finalizers(llama("fins", 1.0, 1.0), 6200);
    let (code, e) = send(&s, Method::POST, &s.llamas("default", ""), Some(&big)).await;
    assert_eq!(code, 500, "{e}");
    assert_eq!(e["message"], "etcdserver: request is too large");
    assert!(e.get("reason").is_none(), "{e}");
}

/// A stored Llama that breaks a CEL rule (written before the rule existed;
/// here straight into etcd): an update that leaves the spec alone is taken
/// with the failure as a warning, one that changes the spec is refused until
/// the rule holds (kube's ratcheting of validation rules).
#[tokio::test]
async fn cel_rules_ratchet_on_parts_an_update_leaves_alone() {
    let etcd = crate::common::etcd::shared();
    let prefix = crate::common::etcd::unique_prefix();
    let s = Server::start_with(crate::common::Options { args: etcd.server_args(&prefix), ..Default::default() }).await;
    let mut dolly = llama("dolly", 31.0, 1.7);
    dolly["spec"]["maxWeight"] = json!(40);
    create(&s, "default", &dolly).await;

    let mut client = etcd.client().await;
    let found = client.get(prefix.as_str(), Some(etcd_client::GetOptions::new().with_prefix())).await.unwrap();
    let kv =
        found.kvs().iter().find(|kv| kv.key_str().is_ok_and(|k| k.ends_with("/default/dolly"))).expect("dolly in etcd");
    let mut stored: Value = serde_json::from_slice(kv.value()).unwrap();
    // Stored in the storage version, v1beta1; read and written here in v1alpha.
    stored["spec"]["weightKg"] = json!(50);
    client.put(kv.key(), serde_json::to_vec(&stored).unwrap(), None).await.unwrap();
    let url = s.llamas("default", "dolly");
    for _ in 0..100 {
        if get(&s, &url).await.1["spec"]["weight"] == json!(50) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let merge = "application/merge-patch+json";
    let failure = r#"spec.weight: Invalid value: "object": weight must not exceed maxWeight"#;
    let body = serde_json::to_vec(&json!({"metadata": {"labels": {"a": "b"}}})).unwrap();
    let (code, headers, v) = call(&s, Method::PATCH, &url, merge, Some(body)).await;
    assert_eq!(code, 200, "{v}");
    let warnings: Vec<&str> = headers.get_all("warning").iter().filter_map(|h| h.to_str().ok()).collect();
    assert!(warnings.iter().any(|w| w.contains(&failure.replace('"', "\\\""))), "{warnings:?}");
    let (code, v) = patch(&s, &url, merge, &json!({"spec": {"height": 2}})).await;
    assert_eq!(code, 422, "{v}");
    assert_eq!(v["details"]["causes"][0]["field"], "spec.weight", "{v}");
    let (code, v) = patch(&s, &url, merge, &json!({"spec": {"weight": 30}})).await;
    assert_eq!(code, 200, "{v}");
}

/// An object an earlier release stored in v1alpha (here put straight into
/// etcd) is read in either version, and any write, an empty patch included,
/// stores it again in v1beta1, as kube-apiserver's storage does (which is
/// how kube's storage version migration moves objects).
#[tokio::test]
async fn objects_stored_in_an_older_version_are_read_and_migrated_by_any_write() {
    let etcd = crate::common::etcd::shared();
    let prefix = crate::common::etcd::unique_prefix();
    let s = Server::start_with(crate::common::Options { args: etcd.server_args(&prefix), ..Default::default() }).await;
    create(&s, "default", &llama("old", 31.0, 1.7)).await;
    let mut client = etcd.client().await;
    let stored_object = |found: etcd_client::GetResponse| -> (Vec<u8>, Value) {
        let kv =
            found.kvs().iter().find(|kv| kv.key_str().is_ok_and(|k| k.ends_with("/default/old"))).expect("in etcd");
        (kv.key().to_vec(), serde_json::from_slice(kv.value()).unwrap())
    };
    let all = || Some(etcd_client::GetOptions::new().with_prefix());
    let (key, stored) = stored_object(client.get(prefix.as_str(), all()).await.unwrap());
    assert_eq!((&stored["apiVersion"], &stored["spec"]["weightKg"]), (&json!("farm.example.com/v1beta1"), &json!(31)));
    // What an earlier release wrote: v1alpha, its pasture in the annotation.
    let mut older = stored.clone();
    older["apiVersion"] = json!("farm.example.com/v1alpha");
    older["spec"] = json!({"weight": 32, "height": 1.7});
    older["metadata"]["annotations"] = json!({"farm.example.com/pasture": "east"});
    client.put(key.clone(), serde_json::to_vec(&older).unwrap(), None).await.unwrap();
    let beta = s.url("/apis/farm.example.com/v1beta1/namespaces/default/llamas/old");
    let mut read = Value::Null;
    for _ in 0..100 {
        read = get(&s, &beta).await.1;
        if read["spec"]["weightKg"] == json!(32) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(read["spec"], json!({"weightKg": 32, "heightM": 1.7, "pasture": "east"}), "{read}");
    assert!(read["metadata"].get("annotations").is_none(), "{read}");
    assert_eq!(get(&s, &s.llamas("default", "old")).await.1["spec"]["weight"], json!(32));
    let (code, patched) = patch(&s, &beta, "application/merge-patch+json", &json!({})).await;
    assert_eq!(code, 200, "{patched}");
    assert_ne!(patched["metadata"]["resourceVersion"], read["metadata"]["resourceVersion"], "written again");
    let (_, now) = stored_object(client.get(prefix.as_str(), all()).await.unwrap());
    assert_eq!(
        (&now["apiVersion"], &now["spec"]),
        (&json!("farm.example.com/v1beta1"), &json!({"weightKg": 32, "heightM": 1.7, "pasture": "east"}))
    );

    // The offline path: scripts/migrate-storage patches every Llama so.
    client.put(key.clone(), serde_json::to_vec(&older).unwrap(), None).await.unwrap();
    for _ in 0..100 {
        if get(&s, &beta).await.1["metadata"]["resourceVersion"] != patched["metadata"]["resourceVersion"] {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/migrate-storage");
    let out = std::process::Command::new("bash").arg(script).env("KUBECONFIG", s.kubeconfig()).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("migrate-storage: 1 llamas.v1beta1.farm.example.com stored again"), "{said}");
    let (_, migrated) = stored_object(client.get(prefix.as_str(), all()).await.unwrap());
    assert_eq!(
        (&migrated["apiVersion"], &migrated["spec"]["weightKg"]),
        (&json!("farm.example.com/v1beta1"), &json!(32))
    );
}

on_both_stores!(
    create_sets_metadata_and_keeps_numbers_exact,
    generate_name_makes_a_unique_name,
    create_errors_have_kube_status_bodies,
    not_found_method_not_allowed_and_not_acceptable,
    update_needs_current_resource_version_and_bumps_generation_on_spec_only,
    status_subresource_changes_only_status,
    patches_json_and_merge_and_refuses_strategic,
    finalizers_hold_deletion_until_removed,
    delete_preconditions_and_status_answer,
    dry_run_changes_nothing,
    delete_collection_honours_selectors,
    field_validation_strict_warn_ignore,
    amplifying_json_patches_are_refused,
    objects_cannot_grow_past_the_object_limit,
    max_object_bytes_flag_and_the_managed_fields_retry,
);
