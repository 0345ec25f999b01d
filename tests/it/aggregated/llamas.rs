//! End to end through the real kube-apiserver aggregator (tests/controlplane):
//! kubectl and kube-rs talk to kube-apiserver, which proxies farm.example.com
//! to farm-apiserver; the namespace controller and the garbage collector of
//! kube-controller-manager work on Llamas through it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common;
use crate::common::cluster::{self, eventually, namespace};
use crate::common::{kubectl_stdin, ok, KubectlStream};
use farm_apiserver::llama::v1beta1::{Llama, LlamaSpec};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{self, finalizer, Event as Finalizer};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

fn dolly(ns: &str) -> String {
    format!(
        "apiVersion: farm.example.com/v1beta1
kind: Llama
metadata:
  name: dolly
  namespace: {ns}
  labels: {{herd: north}}
spec:
  weightKg: 31.4
  heightM: 1.7
  pasture: north-field
"
    )
}

#[tokio::test]
async fn discovery_through_the_aggregator() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let out = ok(cp.kubectl(&["api-resources", "--api-group", "farm.example.com"]));
    let llamas = out.lines().find(|l| l.starts_with("llamas")).unwrap_or_else(|| panic!("{out}"));
    let cols: Vec<&str> = llamas.split_whitespace().collect();
    assert_eq!(cols, ["llamas", "ll", "farm.example.com/v1beta1", "true", "Llama"], "{out}");
    let farmpods = out.lines().find(|l| l.starts_with("farmpods")).unwrap_or_else(|| panic!("{out}"));
    assert!(farmpods.contains("fp") && farmpods.contains("FarmPod"), "{out}");
    let ns = namespace(cp, "e2e-category");
    cp.apply(&dolly(&ns));
    let out = ok(cp.kubectl(&["get", "farm", "-n", &ns]));
    assert!(out.contains("llama.farm.example.com/dolly"), "{out}");
    let out = ok(cp.kubectl(&["version", "-o", "json"]));
    assert!(out.contains("\"gitVersion\": \"v1.34"), "{out}");
}

#[tokio::test]
async fn kubectl_through_the_aggregator() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "e2e-kubectl");
    let kc = &cp.kubeconfig;
    let out = ok(kubectl_stdin(kc, &["apply", "-f", "-"], Some(&dolly(&ns))));
    assert!(out.contains("llama.farm.example.com/dolly created"), "{out}");
    let out = ok(cp.kubectl(&["get", "llamas.farm.example.com", "-n", &ns]));
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "WEIGHT", "HEIGHT", "PASTURE", "AGE"], "{out}");
    assert!(out.lines().nth(1).unwrap().starts_with("dolly"), "{out}");
    let yaml = ok(cp.kubectl(&["get", "llama.farm.example.com", "dolly", "-n", &ns, "-o", "yaml"]));
    assert!(yaml.contains("weightKg: 31.4") && !yaml.contains("farm.example.com/pasture"), "{yaml}");
    // The deprecated version, named: the same llama in its words, and kube's warning.
    let (done, old, warned) = cp.kubectl(&["get", "llamas.v1alpha.farm.example.com", "dolly", "-n", &ns, "-o", "json"]);
    assert!(done, "{warned}");
    let old: serde_json::Value = serde_json::from_str(&old).unwrap();
    assert_eq!(
        (&old["apiVersion"], &old["spec"]["weight"], &old["metadata"]["annotations"]["farm.example.com/pasture"]),
        (&json!("farm.example.com/v1alpha"), &json!(31.4), &json!("north-field"))
    );
    assert!(
        warned.contains("Warning: farm.example.com/v1alpha Llama is deprecated; use farm.example.com/v1beta1 Llama"),
        "{warned}"
    );

    let watch = KubectlStream::start(kc, &["get", "llamas.farm.example.com", "-n", &ns, "-w"]);
    watch.expect_line(&["dolly", "31.4"], Duration::from_secs(20));
    ok(cp.kubectl(&[
        "patch",
        "llama.farm.example.com",
        "dolly",
        "-n",
        &ns,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"weightKg":35}}"#,
    ]));
    watch.expect_line(&["dolly", "35"], Duration::from_secs(20));
    assert!(
        ok(cp.kubectl(&["label", "llama.farm.example.com", "dolly", "-n", &ns, "colour=brown"])).contains("labeled")
    );
    let out = ok(cp.kubectl(&[
        "patch",
        "llama.farm.example.com",
        "dolly",
        "-n",
        &ns,
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/heightM","value":1.8}]"#,
    ]));
    assert!(out.contains("patched"), "{out}");
    let mut v: serde_json::Value =
        serde_json::from_str(&ok(cp.kubectl(&["get", "llama.farm.example.com", "dolly", "-n", &ns, "-o", "json"])))
            .unwrap();
    assert_eq!(v["metadata"]["labels"]["colour"], "brown");
    v["spec"]["weightKg"] = json!(36.5);
    assert!(ok(kubectl_stdin(kc, &["replace", "-f", "-"], Some(&v.to_string()))).contains("replaced"));
    watch.expect_line(&["dolly", "36.5"], Duration::from_secs(20));
    assert!(ok(cp.kubectl(&["get", "llamas.farm.example.com", "-n", &ns, "-l", "colour=brown"])).contains("dolly"));
    assert!(ok(cp.kubectl(&["get", "llamas.farm.example.com", "-A", "--field-selector", "metadata.name=dolly"]))
        .contains(&ns));
    assert!(ok(cp.kubectl(&["delete", "llama.farm.example.com", "dolly", "-n", &ns])).contains("deleted"));
    let gone = cp.kubectl(&["get", "llama.farm.example.com", "dolly", "-n", &ns]);
    assert!(!gone.0 && gone.2.contains("NotFound"), "{gone:?}");
}

/// A list over 128 KiB is gzipped for client-go (which asks for it) and
/// passes the aggregator's proxy compressed: kubectl's log shows the answer
/// with our `Vary` and no length (client-go's transport decompresses below
/// its logging and drops Content-Encoding), and kubectl reads every item.
#[tokio::test]
async fn large_lists_cross_the_aggregator_gzipped() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "e2e-gzip");
    let api: Api<Llama> = Api::namespaced(cp.client().await, &ns);
    let labels: std::collections::BTreeMap<String, String> =
        (0..12).map(|i| (format!("l{i}"), "v".repeat(63))).collect();
    futures::stream::iter(0..200)
        .for_each_concurrent(16, |i| {
            let mut llama = Llama::new(
                &format!("big-{i:03}"),
                LlamaSpec { weight_kg: 1.0, height_m: 1.0, max_weight_kg: None, ear_tag: None, pasture: None },
            );
            llama.metadata.labels = Some(labels.clone());
            let api = &api;
            async move {
                api.create(&PostParams::default(), &llama).await.unwrap();
            }
        })
        .await;
    let (ok_, out, err) =
        cp.kubectl(&["get", "llamas.farm.example.com", "-n", &ns, "-o", "json", "--chunk-size=0", "-v=8"]);
    assert!(ok_, "{err}");
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 200);
    assert!(out.len() > 200 * 1024, "{} bytes", out.len());
    let headers = common::kubectl_logged_headers(&err, "/llamas");
    assert!(headers.to_lowercase().contains("vary: accept-encoding"), "{headers}");
    assert!(!headers.contains("Content-Length"), "a compressed answer has no length: {headers}");
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_llamas() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "e2e-nsdelete");
    for name in ["a", "b", "c"] {
        cp.apply(&dolly(&ns).replace("name: dolly", &format!("name: {name}")));
    }
    ok(cp.kubectl(&["delete", "namespace", &ns, "--wait=false"]));
    let mut unavailable = Vec::new();
    eventually("the namespace to be deleted", Duration::from_secs(120), || {
        let cond = cluster::apiservice_available(cp);
        if cond.0 != "True" {
            unavailable.push(cond);
        }
        !cp.kubectl(&["get", "namespace", &ns]).0
    })
    .await;
    assert!(unavailable.is_empty(), "the APIService stayed Available: {unavailable:?}");
    let direct = reg.server.url(&format!("/apis/farm.example.com/v1alpha/namespaces/{ns}/llamas"));
    let list: serde_json::Value =
        common::client_trusting(&reg.server.ca_file).unwrap().get(direct).send().await.unwrap().json().await.unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 0, "{list}");
}

#[tokio::test]
async fn owner_references_to_llamas_are_garbage_collected() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "e2e-gc");
    let client = cp.client().await;
    let llamas: Api<Llama> = Api::namespaced(client.clone(), &ns);
    let owner = llamas
        .create(
            &PostParams::default(),
            &Llama::new(
                "mother",
                LlamaSpec { weight_kg: 90.0, height_m: 1.8, max_weight_kg: None, ear_tag: None, pasture: None },
            ),
        )
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, &ns);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("cria-notes".into()),
            owner_references: Some(vec![owner.controller_owner_ref(&()).unwrap()]),
            ..Default::default()
        },
        data: Some([("note".to_string(), "born in spring".to_string())].into()),
        ..Default::default()
    };
    cms.create(&PostParams::default(), &cm).await.unwrap();
    llamas.delete("mother", &DeleteParams::default()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(150);
    while cms.get_opt("cria-notes").await.unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "the dependent ConfigMap was not garbage-collected");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

const FINALIZER: &str = "farm.example.com/shepherd";

struct Ctx {
    client: kube::Client,
    cleaned: Mutex<BTreeSet<String>>,
}

async fn reconcile(llama: Arc<Llama>, ctx: Arc<Ctx>) -> Result<Action, finalizer::Error<kube::Error>> {
    let ns = llama.namespace().unwrap_or_default();
    let api: Api<Llama> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, llama, |event| async {
        match event {
            Finalizer::Apply(l) => {
                let generation = l.metadata.generation.unwrap_or(0);
                let status = json!({"status": {"observedGeneration": generation, "conditions": [{
                    "type": "Ready", "status": "True", "reason": "Fed", "message": "reconciled",
                    "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": generation}]}});
                api.patch_status(&l.name_any(), &PatchParams::default(), &Patch::Merge(status)).await?;
                Ok(Action::requeue(Duration::from_secs(300)))
            }
            Finalizer::Cleanup(l) => {
                if let Ok(mut c) = ctx.cleaned.lock() {
                    c.insert(l.name_any());
                }
                Ok(Action::await_change())
            }
        }
    })
    .await
}

fn error_policy(_: Arc<Llama>, err: &finalizer::Error<kube::Error>, _: Arc<Ctx>) -> Action {
    eprintln!("reconcile error: {err}");
    Action::requeue(Duration::from_millis(500))
}

#[tokio::test]
async fn kube_rs_controller_reconciles_llamas() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "e2e-controller");
    let client = cp.client().await;
    let api: Api<Llama> = Api::namespaced(client.clone(), &ns);
    let ctx = Arc::new(Ctx { client: client.clone(), cleaned: Mutex::new(BTreeSet::new()) });
    let controller = Controller::new(api.clone(), watcher::Config::default())
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|_| async {});
    let task = tokio::spawn(controller);
    for (i, name) in ["alpha", "beta", "gamma"].iter().enumerate() {
        api.create(
            &PostParams::default(),
            &Llama::new(
                name,
                LlamaSpec {
                    weight_kg: 10.0 + i as f64,
                    height_m: 1.0,
                    max_weight_kg: None,
                    ear_tag: None,
                    pasture: None,
                },
            ),
        )
        .await
        .unwrap();
    }
    // Every llama gets the finalizer and a status for its generation.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let list = api.list(&Default::default()).await.unwrap();
        let done = list.items.iter().all(|l| {
            l.finalizers().iter().any(|f| f == FINALIZER)
                && l.status.as_ref().and_then(|s| s.observed_generation) == l.metadata.generation
        });
        if done && list.items.len() == 3 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "controller did not reconcile: {:#?}", list.items);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // A spec change is reconciled for the new generation.
    api.patch("beta", &PatchParams::default(), &Patch::Merge(json!({"spec": {"weightKg": 99}}))).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let b = api.get("beta").await.unwrap();
        if b.metadata.generation == Some(2) && b.status.and_then(|s| s.observed_generation) == Some(2) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "generation 2 not reconciled");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Deletion runs the cleanup, removes the finalizer, and the llama goes away.
    api.delete("alpha", &DeleteParams::default()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while api.get_opt("alpha").await.unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "alpha still exists");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(ctx.cleaned.lock().unwrap().contains("alpha"));
    task.abort();
}
