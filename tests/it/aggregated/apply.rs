//! Server-side apply and managedFields on Llamas, end to end through the real
//! kube-apiserver aggregator: kubectl (`apply --server-side`, conflicts,
//! `--force-conflicts`, `--field-manager`, `--subresource=status`, moving from
//! client-side apply) and a kube-rs controller owning status conditions.

use std::time::Duration;

use crate::common::cluster::{self, namespace};
use crate::common::{kubectl_stdin, ok};
use farm_apiserver::llama::v1alpha::Llama;
use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::{json, Value};

fn llama_yaml(ns: &str, name: &str, weight: f64, extra_meta: &str) -> String {
    format!(
        "apiVersion: farm.example.com/v1alpha
kind: Llama
metadata:
  name: {name}
  namespace: {ns}
{extra_meta}spec:
  weight: {weight}
  height: 1.7
"
    )
}

fn get_json(cp: &cluster::ControlPlane, ns: &str, name: &str, show_managed: bool) -> Value {
    let mut args = vec!["get", "llamas.v1alpha.farm.example.com", name, "-n", ns, "-o", "json"];
    if show_managed {
        args.push("--show-managed-fields");
    }
    serde_json::from_str(&ok(cp.kubectl(&args))).expect("kubectl -o json")
}

/// The managedFields entries as (manager, operation, subresource, fieldsV1).
fn entries(obj: &Value) -> Vec<(String, String, String, Value)> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|e| {
                    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    (s("manager"), s("operation"), s("subresource"), e["fieldsV1"].clone())
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn kubectl_server_side_apply_conflicts_and_force() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let kc = &cp.kubeconfig;
    let ns = namespace(cp, "e2e-ssa");
    let labelled = "  labels:\n    herd: north\n    colour: white\n";
    let out =
        ok(kubectl_stdin(kc, &["apply", "--server-side", "-f", "-"], Some(&llama_yaml(&ns, "ssa", 30.0, labelled))));
    assert!(out.contains("llama.farm.example.com/ssa serverside-applied"), "{out}");

    // managedFields are kept, hidden by default and shown on request.
    let hidden = ok(cp.kubectl(&["get", "llamas.v1alpha.farm.example.com", "ssa", "-n", &ns, "-o", "yaml"]));
    assert!(!hidden.contains("managedFields"), "{hidden}");
    let shown = ok(cp.kubectl(&[
        "get",
        "llamas.v1alpha.farm.example.com",
        "ssa",
        "-n",
        &ns,
        "-o",
        "yaml",
        "--show-managed-fields",
    ]));
    assert!(shown.contains("managedFields:") && shown.contains("manager: kubectl"), "{shown}");
    let obj = get_json(cp, &ns, "ssa", true);
    assert_eq!(
        entries(&obj),
        [(
            "kubectl".to_string(),
            "Apply".to_string(),
            String::new(),
            json!({"f:metadata": {"f:labels": {"f:colour": {}, "f:herd": {}}}, "f:spec": {"f:height": {}, "f:weight": {}}})
        )]
    );

    // Another manager changing an owned field conflicts, naming the field and the owner.
    let other = ["apply", "--server-side", "--field-manager", "scales", "-f", "-"];
    let out = kubectl_stdin(kc, &other, Some(&llama_yaml(&ns, "ssa", 35.0, "")));
    assert!(!out.0, "{out:?}");
    assert!(out.2.contains("conflict with \"kubectl\"") && out.2.contains(".spec.weight"), "{}", out.2);
    assert_eq!(get_json(cp, &ns, "ssa", false)["spec"]["weight"], 30.0);

    // Forcing takes the fields; the first manager keeps the rest.
    let forced = ["apply", "--server-side", "--field-manager", "scales", "--force-conflicts", "-f", "-"];
    ok(kubectl_stdin(kc, &forced, Some(&llama_yaml(&ns, "ssa", 35.0, ""))));
    let obj = get_json(cp, &ns, "ssa", true);
    assert_eq!(obj["spec"]["weight"], 35.0);
    let owners = entries(&obj);
    let kubectl = owners.iter().find(|e| e.0 == "kubectl").expect("kubectl entry");
    assert_eq!(
        kubectl.3,
        json!({"f:metadata": {"f:labels": {"f:colour": {}, "f:herd": {}}}, "f:spec": {"f:height": {}}})
    );
    let scales = owners.iter().find(|e| e.0 == "scales").expect("scales entry");
    assert_eq!(scales.3, json!({"f:spec": {"f:height": {}, "f:weight": {}}}));

    // A field the applier stops applying goes; one someone else owns stays.
    let fewer = "  labels:\n    herd: north\n";
    ok(kubectl_stdin(kc, &["apply", "--server-side", "-f", "-"], Some(&llama_yaml(&ns, "ssa", 35.0, fewer))));
    let obj = get_json(cp, &ns, "ssa", false);
    assert_eq!(obj["metadata"]["labels"], json!({"herd": "north"}));
    assert_eq!(obj["spec"]["height"], 1.7, "height is still owned by scales");

    // An update (not an apply) records an Update entry and takes what it changed.
    ok(cp.kubectl(&["label", "llama.farm.example.com", "ssa", "-n", &ns, "herd=south", "--overwrite"]));
    let obj = get_json(cp, &ns, "ssa", true);
    let label = entries(&obj).into_iter().find(|e| e.1 == "Update").expect("an Update entry");
    assert_eq!(label.0, "kubectl-label");
    assert_eq!(label.3, json!({"f:metadata": {"f:labels": {"f:herd": {}}}}));
}

#[tokio::test]
async fn server_side_apply_of_status_and_dry_run() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let kc = &cp.kubeconfig;
    let ns = namespace(cp, "e2e-ssa-status");
    ok(kubectl_stdin(kc, &["apply", "--server-side", "-f", "-"], Some(&llama_yaml(&ns, "st", 30.0, ""))));
    let status = format!(
        "apiVersion: farm.example.com/v1alpha
kind: Llama
metadata:
  name: st
  namespace: {ns}
status:
  observedGeneration: 1
  conditions:
  - type: Fed
    status: \"True\"
    reason: Breakfast
    message: hay
    lastTransitionTime: \"2026-01-01T00:00:00Z\"
"
    );
    let args = ["apply", "--server-side", "--subresource=status", "--field-manager", "feeder", "-f", "-"];
    ok(kubectl_stdin(kc, &args, Some(&status)));
    let obj = get_json(cp, &ns, "st", true);
    assert_eq!(obj["status"]["conditions"][0]["type"], "Fed");
    assert_eq!(obj["spec"]["weight"], 30.0, "a status apply leaves spec alone");
    let feeder = entries(&obj).into_iter().find(|e| e.0 == "feeder").expect("feeder entry");
    assert_eq!(feeder.2, "status");
    assert_eq!(
        feeder.3["f:status"]["f:conditions"]["k:{\"type\":\"Fed\"}"]["."],
        json!({}),
        "conditions are owned by key: {}",
        feeder.3
    );

    // Dry run answers the result and changes nothing.
    let out = ok(kubectl_stdin(
        kc,
        &["apply", "--server-side", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&llama_yaml(&ns, "st", 99.0, "")),
    ));
    let answered: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(answered["spec"]["weight"], 99.0);
    assert_eq!(get_json(cp, &ns, "st", false)["spec"]["weight"], 30.0);
}

#[tokio::test]
async fn client_side_apply_moves_to_server_side() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let kc = &cp.kubeconfig;
    let ns = namespace(cp, "e2e-ssa-migrate");
    ok(kubectl_stdin(kc, &["apply", "-f", "-"], Some(&llama_yaml(&ns, "mig", 30.0, ""))));
    let obj = get_json(cp, &ns, "mig", true);
    assert_eq!(entries(&obj)[0].0, "kubectl-client-side-apply");
    // Client-side apply keeps working.
    ok(kubectl_stdin(kc, &["apply", "-f", "-"], Some(&llama_yaml(&ns, "mig", 31.0, ""))));
    assert_eq!(get_json(cp, &ns, "mig", false)["spec"]["weight"], 31.0);

    // The server-side apply takes over what the client-side one applied
    // (no conflict), changes it, and keeps the last-applied annotation in step.
    ok(kubectl_stdin(kc, &["apply", "--server-side", "-f", "-"], Some(&llama_yaml(&ns, "mig", 32.0, ""))));
    let obj = get_json(cp, &ns, "mig", true);
    assert_eq!(obj["spec"]["weight"], 32.0);
    let kubectl = entries(&obj).into_iter().find(|e| e.0 == "kubectl").expect("kubectl entry");
    assert_eq!(kubectl.1, "Apply");
    assert!(kubectl.3["f:spec"].get("f:weight").is_some(), "{}", kubectl.3);
    let last =
        obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].as_str().unwrap_or("");
    assert!(last.contains("\"weight\":32"), "{last}");
    // And back: a client-side apply after it still works.
    ok(kubectl_stdin(kc, &["apply", "-f", "-"], Some(&llama_yaml(&ns, "mig", 33.0, ""))));
    assert_eq!(get_json(cp, &ns, "mig", false)["spec"]["weight"], 33.0);
}

#[tokio::test]
async fn a_controller_owns_conditions_while_another_manager_applies_spec() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "e2e-ssa-controller");
    let client = cp.client().await;
    let llamas: Api<Llama> = Api::namespaced(client.clone(), &ns);
    let spec_owner = PatchParams::apply("spec-owner");
    let apply_spec = |weight: f64| {
        Patch::Apply(json!({
            "apiVersion": "farm.example.com/v1alpha", "kind": "Llama",
            "metadata": {"name": "ctl"}, "spec": {"weight": weight, "height": 1.7}
        }))
    };
    llamas.patch("ctl", &spec_owner, &apply_spec(30.0)).await.expect("apply spec");

    // The controller writes status.conditions with server-side apply on llamas/status.
    let controller = Controller::new(llamas.clone(), watcher::Config::default())
        .run(
            |llama: std::sync::Arc<Llama>, api: std::sync::Arc<Api<Llama>>| async move {
                let status = json!({
                    "apiVersion": "farm.example.com/v1alpha", "kind": "Llama",
                    "metadata": {"name": llama.name_any()},
                    "status": {
                        "observedGeneration": llama.metadata.generation,
                        "conditions": [{"type": "Weighed", "status": "True", "reason": "Scale",
                            "message": format!("{} kg", llama.spec.weight),
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}]
                    }
                });
                api.patch_status(&llama.name_any(), &PatchParams::apply("llama-controller"), &Patch::Apply(status))
                    .await?;
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _: &kube::Error, _| Action::requeue(Duration::from_secs(1)),
            std::sync::Arc::new(llamas.clone()),
        )
        .for_each(|_| async {});
    let handle = tokio::spawn(controller);

    for weight in [31.0, 32.0, 33.0] {
        llamas.patch("ctl", &spec_owner, &apply_spec(weight)).await.expect("apply spec");
        let llamas = llamas.clone();
        let want = format!("{weight} kg");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let l = llamas.get("ctl").await.expect("get");
            let msg = l.status.as_ref().and_then(|s| s.conditions.first()).map(|c| c.message.clone());
            if msg.as_deref() == Some(want.as_str()) && l.spec.weight == weight {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "controller did not catch up with {weight}: {l:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    handle.abort();

    let l = llamas.get("ctl").await.expect("get");
    let managed = l.metadata.managed_fields.clone().unwrap_or_default();
    let by = |m: &str| managed.iter().find(|e| e.manager.as_deref() == Some(m)).cloned();
    let spec = by("spec-owner").expect("spec-owner entry");
    let status = by("llama-controller").expect("llama-controller entry");
    assert_eq!(status.subresource.as_deref(), Some("status"));
    let spec_fields = spec.fields_v1.expect("fields").0;
    let status_fields = status.fields_v1.expect("fields").0;
    assert!(spec_fields.get("f:status").is_none(), "{spec_fields}");
    assert!(status_fields.get("f:spec").is_none(), "{status_fields}");
    assert!(status_fields.pointer("/f:status/f:conditions").is_some(), "{status_fields}");
    // Re-applying spec did not clear the conditions, nor the reverse.
    assert_eq!(l.spec.weight, 33.0);
    assert_eq!(l.status.map(|s| s.conditions.len()), Some(1));
}
