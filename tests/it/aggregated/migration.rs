//! kube-controller-manager's storage version migrator (`storagemigration.k8s.io`,
//! alpha in Kubernetes 1.34, enabled on a control plane of its own) migrates
//! Llamas that an earlier release stored in v1alpha, through the aggregator:
//! it lists them by the garbage collector's metadata watch and applies each
//! one's type, uid and resourceVersion, and farm-apiserver stores each again
//! in v1beta1.

use std::time::Duration;

use crate::common::cluster::{self, eventually, namespace, ControlPlane};
use crate::common::etcd;
use serde_json::{json, Value};

const MIGRATION: &str = "apiVersion: storagemigration.k8s.io/v1alpha1
kind: StorageVersionMigration
metadata:
  name: llamas
spec:
  resource:
    group: farm.example.com
    version: v1beta1
    resource: llamas
";

/// The stored Llamas of `ns` under `prefix`, by name.
async fn stored(client: &mut etcd_client::Client, prefix: &str, ns: &str) -> Vec<(Vec<u8>, Value)> {
    let found = client.get(prefix, Some(etcd_client::GetOptions::new().with_prefix())).await.unwrap();
    let mut out: Vec<(Vec<u8>, Value)> = found
        .kvs()
        .iter()
        .filter(|kv| kv.key_str().is_ok_and(|k| k.contains(&format!("/llamas/{ns}/"))))
        .map(|kv| (kv.key().to_vec(), serde_json::from_slice(kv.value()).unwrap()))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[tokio::test]
async fn the_storage_version_migrator_stores_old_llamas_again_in_v1beta1() {
    let etcd = etcd::shared();
    let prefix = etcd::unique_prefix();
    let cp = ControlPlane::start_with_controllers(
        &[
            "--feature-gates=StorageVersionMigrator=true,InformerResourceVersion=true",
            "--runtime-config=storagemigration.k8s.io/v1alpha1=true",
        ],
        &["--controllers=storage-version-migrator-controller"],
    );
    let args = etcd.server_args(&prefix);
    let reg = cluster::register_on(&cp, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let ns = namespace(&cp, "svm");
    for (name, pasture) in [("ada", "east"), ("bo", "west")] {
        cp.apply(&format!(
            "apiVersion: farm.example.com/v1beta1\nkind: Llama\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{weightKg: 30, heightM: 1.5, pasture: {pasture}}}\n"
        ));
    }

    // What an earlier release wrote: v1alpha, the pasture in its annotation.
    let mut client = etcd.client().await;
    let before = stored(&mut client, &prefix, &ns).await;
    assert_eq!(before.len(), 2, "{before:?}");
    for (key, object) in &before {
        let mut older = object.clone();
        older["apiVersion"] = json!("farm.example.com/v1alpha");
        older["spec"] = json!({"weight": 31, "height": 1.5});
        older["metadata"]["annotations"] = json!({"farm.example.com/pasture": object["spec"]["pasture"]});
        client.put(key.clone(), serde_json::to_vec(&older).unwrap(), None).await.unwrap();
    }
    let get_weights = || {
        let out = cp.kubectl(&[
            "get",
            "llamas.v1beta1.farm.example.com",
            "-n",
            &ns,
            "-o",
            "jsonpath={.items[*].spec.weightKg}",
        ]);
        out.1
    };
    eventually("farm-apiserver to read what etcd holds", Duration::from_secs(30), || get_weights() == "31 31").await;

    cp.apply(MIGRATION);
    let condition = |kind: &str| {
        let path = format!("jsonpath={{.status.conditions[?(@.type==\"{kind}\")].status}}");
        cp.kubectl(&["get", "storageversionmigrations", "llamas", "-o", &path]).1
    };
    eventually("the migration to succeed", Duration::from_secs(180), || {
        assert_ne!(
            condition("Failed"),
            "True",
            "the migration failed: {:?}",
            cp.kubectl(&["get", "storageversionmigrations", "llamas", "-o", "yaml"])
        );
        condition("Succeeded") == "True"
    })
    .await;

    let after = stored(&mut client, &prefix, &ns).await;
    let spec: Vec<_> = after.iter().map(|(_, o)| (o["apiVersion"].clone(), o["spec"].clone())).collect();
    assert_eq!(
        spec,
        [
            (json!("farm.example.com/v1beta1"), json!({"weightKg": 31, "heightM": 1.5, "pasture": "east"})),
            (json!("farm.example.com/v1beta1"), json!({"weightKg": 31, "heightM": 1.5, "pasture": "west"})),
        ]
    );
    for (_, object) in &after {
        assert!(object["metadata"].get("annotations").is_none(), "{object}");
        let managers: Vec<_> =
            object["metadata"]["managedFields"].as_array().unwrap().iter().map(|m| &m["manager"]).collect();
        assert!(!managers.contains(&&json!("storage-version-migrator-controller")), "{managers:?}");
    }
    drop(reg);
}
