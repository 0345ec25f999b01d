//! etcd storage end to end: the farm-apiserver registered behind the real
//! kube-apiserver aggregator keeps Llamas in etcd (the test control plane's, under
//! a prefix of its own); kubectl get/apply/watch go through the aggregator, and a
//! second replica on the same etcd sees the same objects at the same
//! resourceVersions. A restarted registered replica still has them all.

use std::time::Duration;

use crate::common;
use crate::common::cluster::{self, namespace, ControlPlane};
use crate::common::{kubectl_stdin, llama, KubectlStream, Options, Server};
use serde_json::Value;

fn ok(out: (bool, String, String)) -> String {
    assert!(out.0, "kubectl failed:\nstdout: {}\nstderr: {}", out.1, out.2);
    out.1
}

fn etcd_args(cp: &ControlPlane, prefix: &str) -> Vec<String> {
    let endpoint = cp.info["etcdEndpoint"].as_str().expect("etcdEndpoint").to_string();
    ["--storage", "etcd", "--etcd-servers", &endpoint, "--etcd-prefix", prefix].map(String::from).to_vec()
}

async fn get_direct(s: &Server, ns: &str, name: &str) -> (u16, Value) {
    let r = s.client.get(s.llamas(ns, name)).send().await.expect("GET");
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn kubectl_through_the_aggregator_on_etcd_with_a_second_replica() {
    // A control plane of its own: the registered replica replaces the shared
    // farm-apiserver's APIService, and then is replaced itself.
    let own = ControlPlane::start();
    let prefix = common::etcd::unique_prefix();
    let args = etcd_args(&own, &prefix);
    let flags: Vec<&str> = args.iter().map(String::as_str).collect();
    let reg = cluster::register_on(&own, &flags).await;
    let cp = reg.cp;
    let second = Server::start_with(Options { args: args.clone(), ..Default::default() }).await;
    let ns = namespace(cp, "e2e-etcd");
    let kc = &cp.kubeconfig;

    let manifest = format!(
        "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata:\n  name: dolly\n  namespace: {ns}\nspec:\n  weight: 31.4\n  height: 1.7\n"
    );
    let out = ok(kubectl_stdin(kc, &["apply", "-f", "-"], Some(&manifest)));
    assert!(out.contains("llama.farm.example.com/dolly created"), "{out}");
    let through: Value =
        serde_json::from_str(&ok(cp.kubectl(&["get", "llama", "dolly", "-n", &ns, "-o", "json"]))).unwrap();
    // The second replica, never registered, has the same object at the same revision.
    let (code, direct) = get_direct(&second, &ns, "dolly").await;
    assert_eq!(code, 200, "{direct}");
    assert_eq!(direct["metadata"]["resourceVersion"], through["metadata"]["resourceVersion"]);
    assert_eq!(direct["metadata"]["uid"], through["metadata"]["uid"]);

    // kubectl get -w through the aggregator sees a write made on the second replica.
    let watch = KubectlStream::start(kc, &["get", "llamas", "-n", &ns, "-w"]);
    watch.expect_line(&["dolly", "31.4"], Duration::from_secs(20));
    let r = second
        .client
        .post(second.llamas(&ns, ""))
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&llama("bessie", 12.5, 1.2)).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    watch.expect_line(&["bessie", "12.5"], Duration::from_secs(20));
    // kubectl apply of a change, seen by the second replica.
    let changed = manifest.replace("weight: 31.4", "weight: 33");
    ok(kubectl_stdin(kc, &["apply", "-f", "-"], Some(&changed)));
    watch.expect_line(&["dolly", "33"], Duration::from_secs(20));
    // Read without a resourceVersion: the latest state, whichever replica wrote it.
    let (_, direct) = get_direct(&second, &ns, "dolly").await;
    assert_eq!(direct["spec"]["weight"], 33, "{direct}");

    // The registered replica is replaced: the Llamas are still there.
    drop(reg);
    let reg = cluster::register_on(&own, &flags).await;
    let out = ok(reg.cp.kubectl(&["get", "llamas", "-n", &ns, "-o", "name"]));
    assert_eq!(out.lines().collect::<Vec<_>>(), ["llama.farm.example.com/bessie", "llama.farm.example.com/dolly"]);
    ok(reg.cp.kubectl(&["delete", "llama", "dolly", "-n", &ns]));
    assert_eq!(get_direct(&second, &ns, "dolly").await.0, 404);
}
