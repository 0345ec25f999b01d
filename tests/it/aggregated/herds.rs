//! Herds through the aggregator: `kubectl scale` (a merge patch of the
//! Scale, and an update with `--current-replicas`), kube-rs's scale client,
//! and RBAC on `herds/scale` apart from `herds`.

use farm_apiserver::herd::Herd;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::common::cluster::{self, namespace};
use crate::common::ok;

fn herd(ns: &str, replicas: i32) -> String {
    format!(
        "apiVersion: farm.example.com/v1beta1
kind: Herd
metadata:
  name: north
  namespace: {ns}
spec:
  replicas: {replicas}
  pasture: north-field
"
    )
}

#[tokio::test]
async fn kubectl_and_kube_rs_scale_a_herd_through_the_aggregator() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "e2e-scale");
    cp.apply(&herd(&ns, 1));
    let out = ok(cp.kubectl(&["scale", "herd/north", "--replicas=3", "-n", &ns]));
    assert_eq!(out.trim(), "herd.farm.example.com/north scaled");
    let replicas = ok(cp.kubectl(&["get", "herd", "north", "-n", &ns, "-o", "jsonpath={.spec.replicas}"]));
    assert_eq!(replicas, "3");
    // With a precondition kubectl reads the Scale and updates it at its resourceVersion.
    let out = cp.kubectl(&["scale", "herd/north", "--current-replicas=2", "--replicas=4", "-n", &ns]);
    assert!(!out.0 && out.2.contains("Expected replicas to be 2, was 3"), "{out:?}");
    ok(cp.kubectl(&["scale", "herd/north", "--current-replicas=3", "--replicas=4", "-n", &ns]));
    let table = ok(cp.kubectl(&["get", "herd", "north", "-n", &ns, "--subresource=scale"]));
    let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!((&rows[0][..], &rows[1][..3]), (&["NAME", "DESIRED", "AVAILABLE", "AGE"][..], &["north", "4", "0"][..]));
    let scale = ok(cp.kubectl(&["get", "herd", "north", "-n", &ns, "--subresource=scale", "-o", "json"]));
    let scale: serde_json::Value = serde_json::from_str(&scale).unwrap();
    assert_eq!((&scale["kind"], &scale["spec"]["replicas"]), (&json!("Scale"), &json!(4)), "{scale}");

    let herds: Api<Herd> = Api::namespaced(cp.client().await, &ns);
    let status = json!({"status": {"replicas": 4, "selector": "herd=north"}});
    herds.patch_status("north", &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
    let scaled = herds
        .patch_scale("north", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 6}})))
        .await
        .unwrap();
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(6));
    let scale = herds.get_scale("north").await.unwrap();
    let status = scale.status.unwrap();
    assert_eq!((status.replicas, status.selector.as_deref()), (4, Some("herd=north")));
    let stored = herds.get("north").await.unwrap();
    assert_eq!((stored.spec.replicas, stored.spec.pasture.as_deref()), (Some(6), Some("north-field")));
    let err = herds
        .patch_scale("north", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": -1}})))
        .await
        .unwrap_err();
    assert!(err.to_string().contains(".spec.replicas: Invalid value: -1: should be a non-negative integer"), "{err}");
}

/// `herds/scale` is a resource of its own to RBAC: a user who may patch
/// Herds may not scale them, until granted `herds/scale`.
#[tokio::test]
async fn scaling_a_herd_needs_rbac_on_herds_scale() {
    let reg = cluster::shared().await;
    let cp = reg.cp;
    let ns = namespace(cp, "e2e-scale-rbac");
    cp.apply(&herd(&ns, 1));
    let role = |name: &str, resources: &str| {
        ok(cp.kubectl(&[
            "create",
            "role",
            name,
            "--verb=get,patch,update",
            &format!("--resource={resources}"),
            "-n",
            &ns,
        ]));
        ok(cp.kubectl(&["create", "rolebinding", name, &format!("--role={name}"), "--user=shepherd", "-n", &ns]));
    };
    role("herder", "herds.farm.example.com");
    cluster::wait_until_allowed(cp, &["patch", "herds.farm.example.com", "--as=shepherd", "-n", &ns]).await;
    let out = cp.kubectl(&["scale", "herd/north", "--replicas=2", "--as=shepherd", "-n", &ns]);
    assert!(
        !out.0 && out.2.contains("cannot patch resource \"herds/scale\" in API group \"farm.example.com\""),
        "{out:?}"
    );
    role("scaler", "herds.farm.example.com/scale");
    cluster::wait_until_allowed(
        cp,
        &["patch", "herds.farm.example.com", "--subresource=scale", "--as=shepherd", "-n", &ns],
    )
    .await;
    ok(cp.kubectl(&["scale", "herd/north", "--replicas=2", "--as=shepherd", "-n", &ns]));
    let replicas = ok(cp.kubectl(&["get", "herd", "north", "-n", &ns, "-o", "jsonpath={.spec.replicas}"]));
    assert_eq!(replicas, "2");
}
