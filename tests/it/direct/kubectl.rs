//! The installed kubectl pointed straight at farm-apiserver (no aggregator):
//! apply, get (tables, yaml, -w, selectors, short name, category), label,
//! patch, replace, delete, finalizers, explain, diff, wait.

use std::time::Duration;

use crate::common;
use crate::common::{kubectl, kubectl_stdin, ok, succeeds, Backend, KubectlStream, Server};

const DOLLY: &str = "apiVersion: farm.example.com/v1beta1
kind: Llama
metadata:
  name: dolly
  labels:
    herd: north
spec:
  weightKg: 31.4
  heightM: 1.7
";

async fn kubectl_lifecycle(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let kc = s.kubeconfig();
    let out = ok(kubectl_stdin(&kc, &["apply", "-f", "-"], Some(DOLLY)));
    assert!(out.contains("llama.farm.example.com/dolly created"), "{out}");
    let out = ok(kubectl_stdin(&kc, &["apply", "-f", "-"], Some(DOLLY)));
    assert!(out.contains("unchanged"), "{out}");
    let out = ok(kubectl_stdin(&kc, &["apply", "-f", "-"], Some(&DOLLY.replace("31.4", "32.5"))));
    assert!(out.contains("configured"), "{out}");

    // Table columns as kubectl prints them.
    let out = ok(kubectl(&kc, &["get", "llamas"]));
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "WEIGHT", "HEIGHT", "PASTURE", "AGE"], "{out}");
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["dolly", "32.5", "1.7"], "{out}");
    assert!(ok(kubectl(&kc, &["get", "ll"])).contains("dolly"));
    // The deprecated version, named: its own columns, and kube's warning.
    let (done, out, warned) = kubectl(&kc, &["get", "llamas.v1alpha.farm.example.com"]);
    assert!(done, "{warned}");
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "WEIGHT", "HEIGHT", "AGE"], "{out}");
    assert!(
        warned.contains("Warning: farm.example.com/v1alpha Llama is deprecated; use farm.example.com/v1beta1 Llama"),
        "{warned}"
    );
    // The category covers FarmPods too, which answer 503 without a cluster.
    let farm = kubectl(&kc, &["get", "farm"]);
    assert!(farm.1.contains("dolly"), "{farm:?}");
    assert!(farm.2.contains("FarmPods are unavailable"), "{farm:?}");
    assert!(ok(kubectl(&kc, &["get", "llamas", "-A"])).contains("default"));
    assert!(ok(kubectl(&kc, &["get", "llamas", "-l", "herd=north"])).contains("dolly"));
    let none = kubectl(&kc, &["get", "llamas", "-l", "herd=south"]);
    assert!(none.0 && !none.1.contains("dolly"), "{none:?}");
    assert!(ok(kubectl(&kc, &["get", "llamas", "--field-selector", "metadata.name=dolly"])).contains("dolly"));
    let yaml = ok(kubectl(&kc, &["get", "llama", "dolly", "-o", "yaml"]));
    assert!(yaml.contains("weightKg: 32.5") && yaml.contains("uid:") && yaml.contains("generation: 2"), "{yaml}");

    // get -w sees later changes.
    let watch = KubectlStream::start(&kc, &["get", "llamas", "-w"]);
    watch.expect_line(&["dolly", "32.5"], Duration::from_secs(15));
    ok(kubectl(&kc, &["patch", "llama", "dolly", "--type", "merge", "-p", r#"{"spec":{"weightKg":40}}"#]));
    watch.expect_line(&["dolly", "40"], Duration::from_secs(15));

    // label, json patch, the refused strategic default.
    assert!(ok(kubectl(&kc, &["label", "llama", "dolly", "colour=brown"])).contains("labeled"));
    let out = ok(kubectl(
        &kc,
        &[
            "patch",
            "llama",
            "dolly",
            "--type",
            "json",
            "-p",
            r#"[{"op":"replace","path":"/spec/heightM","value":1.9}]"#,
        ],
    ));
    assert!(out.contains("patched"), "{out}");
    let smp = kubectl(&kc, &["patch", "llama", "dolly", "-p", r#"{"spec":{"heightM":2}}"#]);
    assert!(!smp.0, "strategic merge patch must be refused: {smp:?}");
    let v: serde_json::Value =
        serde_json::from_str(&ok(kubectl(&kc, &["get", "llama", "dolly", "-o", "json"]))).unwrap();
    assert_eq!(v["metadata"]["labels"]["colour"], "brown");
    assert_eq!(v["spec"]["heightM"], serde_json::json!(1.9));

    // Edit-style update: read, change, replace (PUT with the resourceVersion read).
    let mut edited = v.clone();
    edited["spec"]["weightKg"] = serde_json::json!(41.25);
    let out = ok(kubectl_stdin(&kc, &["replace", "-f", "-"], Some(&edited.to_string())));
    assert!(out.contains("replaced"), "{out}");
    let stale = kubectl_stdin(&kc, &["replace", "-f", "-"], Some(&edited.to_string()));
    assert!(!stale.0 && stale.2.contains("the object has been modified"), "{stale:?}");

    let out = ok(kubectl(&kc, &["delete", "llama", "dolly"]));
    assert!(out.contains("deleted"), "{out}");
    let gone = kubectl(&kc, &["get", "llama", "dolly"]);
    assert!(!gone.0 && gone.2.contains("NotFound"), "{gone:?}");
}

async fn kubectl_delete_waits_for_finalizers(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let kc = s.kubeconfig();
    let held = DOLLY.replace("  labels:\n", "  finalizers: [farm.example.com/shear]\n  labels:\n");
    ok(kubectl_stdin(&kc, &["apply", "-f", "-"], Some(&held)));
    let out = ok(kubectl(&kc, &["delete", "llama", "dolly", "--wait=false"]));
    assert!(out.contains("deleted"), "{out}");
    let ts = ok(kubectl(&kc, &["get", "llama", "dolly", "-o", "jsonpath={.metadata.deletionTimestamp}"]));
    assert!(!ts.is_empty());
    ok(kubectl(
        &kc,
        &["patch", "llama", "dolly", "--type", "json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers"}]"#],
    ));
    let gone = kubectl(&kc, &["get", "llama", "dolly"]);
    assert!(!gone.0, "{gone:?}");
}

async fn kubectl_explain_and_validation(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let kc = s.kubeconfig();
    let out = ok(kubectl(&kc, &["explain", "llamas"]));
    assert!(out.contains("Llama") && out.contains("spec"), "{out}");
    let out = ok(kubectl(&kc, &["explain", "llama.spec.weightKg"]));
    assert!(out.contains("Weight in kilograms"), "{out}");
    let out = ok(kubectl(&kc, &["api-resources", "--api-group", "farm.example.com"]));
    assert!(out.contains("llamas") && out.contains("ll") && out.contains("Llama"), "{out}");
    // kubectl's default --validate=strict reaches the server's strict field validation.
    let bad = DOLLY.replace("  heightM: 1.7\n", "  heightM: 1.7\n  colour: brown\n");
    let r = kubectl_stdin(&kc, &["create", "-f", "-"], Some(&bad));
    assert!(!r.0 && r.2.contains("unknown field \"spec.colour\""), "{r:?}");
    let r = kubectl_stdin(&kc, &["create", "-f", "-"], Some(&DOLLY.replace("31.4", "-1")));
    assert!(!r.0 && r.2.contains("spec.weightKg"), "{r:?}");
    let r = kubectl_stdin(&kc, &["create", "-f", "-"], Some(&format!("{DOLLY}  pasture: North_Field\n")));
    assert!(!r.0 && r.2.contains("spec.pasture in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"), "{r:?}");
    // Each version explains its own fields.
    let out = ok(kubectl(&kc, &["explain", "llamas.spec", "--api-version=farm.example.com/v1alpha"]));
    assert!(out.contains("VERSION:    v1alpha") && out.contains("maxWeight") && !out.contains("weightKg"), "{out}");
    assert!(!out.contains("pasture"), "{out}");
}

/// Llama's CEL rules through kubectl: `kubectl explain` lists the fields
/// they constrain, the OpenAPI v3 document carries them, and apply gets
/// their refusals (pattern, the bound on two fields, the fixed earTag).
async fn kubectl_and_cel_rules(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let kc = s.kubeconfig();
    let out = ok(kubectl(&kc, &["explain", "llama.spec"]));
    assert!(out.contains("earTag") && out.contains("maxWeightKg") && out.contains("pasture"), "{out}");
    let doc = ok(kubectl(&kc, &["get", "--raw", "/openapi/v3/apis/farm.example.com/v1beta1"]));
    for rule in
        ["self.weightKg <= self.maxWeightKg", "self.earTag == oldSelf.earTag", "self.matches('^[A-Z]{2}-[0-9]{1,6}$')"]
    {
        assert!(doc.contains(rule), "{rule} not in {doc}");
    }
    let tagged = DOLLY.replace("  heightM: 1.7\n", "  heightM: 1.7\n  maxWeightKg: 40\n  earTag: AB-1\n");
    ok(kubectl_stdin(&kc, &["apply", "-f", "-"], Some(&tagged)));
    let r = kubectl_stdin(&kc, &["apply", "-f", "-"], Some(&tagged.replace("AB-1", "AB-2")));
    assert!(!r.0 && r.2.contains("spec.earTag: Forbidden: earTag may not be changed or removed once set"), "{r:?}");
    let r = kubectl_stdin(&kc, &["apply", "-f", "-"], Some(&tagged.replace("31.4", "41")));
    assert!(
        !r.0 && r.2.contains("spec.weightKg: Invalid value: \"object\": weightKg must not exceed maxWeightKg"),
        "{r:?}"
    );
    let r = kubectl_stdin(
        &kc,
        &["create", "-f", "-"],
        Some(&DOLLY.replace("dolly", "molly").replace("  heightM: 1.7\n", "  heightM: 1.7\n  earTag: ab-1\n")),
    );
    assert!(!r.0 && r.2.contains("earTag ab-1 is not two capital letters"), "{r:?}");
    // The dry run of a change is refused as the change is.
    let r = kubectl_stdin(&kc, &["apply", "--dry-run=server", "-f", "-"], Some(&tagged.replace("AB-1", "AB-3")));
    assert!(!r.0 && r.2.contains("earTag may not be changed"), "{r:?}");
}

/// `kubectl diff` (a dry-run write, client-side and server-side apply) and
/// `kubectl wait` (for a field, a status condition set through the status
/// subresource, and deletion): each watches or writes through the server.
async fn kubectl_diff_and_wait(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let kc = s.kubeconfig();

    // Exit 0 and no output when nothing would change; exit 1 and the diff
    // (with the generation the write would bump) when something would. Each
    // mode diffs against what the same mode of apply wrote (kubectl's
    // last-applied annotation differs between the two).
    for mode in [&[][..], &["--server-side"][..]] {
        ok(kubectl_stdin(&kc, &[&["apply", "-f", "-"][..], mode].concat(), Some(DOLLY)));
        let args = [&["diff", "-f", "-"][..], mode].concat();
        let same = kubectl_stdin(&kc, &args, Some(DOLLY));
        assert!(same.0 && same.1.is_empty(), "{mode:?}: {same:?}");
        let changed = kubectl_stdin(&kc, &args, Some(&DOLLY.replace("31.4", "32.5")));
        assert!(!changed.0 && changed.2.is_empty(), "{mode:?}: exit 1 with a diff, no error: {changed:?}");
        for line in ["-  weightKg: 31.4", "+  weightKg: 32.5", "-  generation: 1", "+  generation: 2"] {
            assert!(changed.1.contains(line), "{mode:?}: {line} in\n{}", changed.1);
        }
    }
    let weight = ok(kubectl(&kc, &["get", "llama", "dolly", "-o", "jsonpath={.spec.weightKg}"]));
    assert_eq!(weight, "31.4", "a diff is a dry run: nothing was written");

    let out = ok(kubectl(&kc, &["wait", "llama/dolly", "--for=jsonpath={.spec.weightKg}=31.4", "--timeout=20s"]));
    assert!(out.contains("condition met"), "{out}");

    // A condition a controller sets, and the deletion, each made once
    // kubectl is watching for it.
    let ready = r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Fed","message":"fed","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#;
    let changes: [(&str, &[&str]); 2] = [
        ("--for=condition=Ready", &["patch", "llama", "dolly", "--subresource=status", "--type=merge", "-p", ready]),
        ("--for=delete", &["delete", "llama", "dolly", "--wait=false"]),
    ];
    for (condition, change) in changes {
        let before = llama_watches_started(&s).await;
        let waiting = std::thread::spawn({
            let kc = kc.clone();
            move || kubectl(&kc, &["wait", "llama/dolly", condition, "--timeout=60s"])
        });
        succeeds("kubectl wait to watch", Duration::from_secs(60), || async {
            llama_watches_started(&s).await > before
        })
        .await;
        ok(kubectl(&kc, change));
        let out = ok(waiting.join().unwrap());
        assert!(out.contains("condition met"), "{condition}: {out}");
    }
}

/// Llama watches the server has started, from its metrics.
async fn llama_watches_started(s: &Server) -> u64 {
    let text = s.client.get(s.url("/metrics")).send().await.unwrap().text().await.unwrap();
    let series = r#"farm_apiserver_requests_total{verb="watch",resource="llamas",code="200"}"#;
    common::metric_sample(&text, series).unwrap_or(0.0) as u64
}

on_both_stores!(
    kubectl_lifecycle,
    kubectl_delete_waits_for_finalizers,
    kubectl_explain_and_validation,
    kubectl_and_cel_rules,
    kubectl_diff_and_wait,
);
