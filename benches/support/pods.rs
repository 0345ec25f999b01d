//! The Pods the FarmPod benchmarks create: 10 namespaces, 2 containers each,
//! three labels, 50 nodes; every other Pod patched to Running.

// Each benchmark uses its part of these.
#![allow(dead_code)]

use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};

pub const NAMESPACES: usize = 10;
const TIERS: [&str; 3] = ["web", "api", "db"];

pub fn namespace_of(i: usize) -> String {
    format!("bench-{}", i % NAMESPACES)
}

/// The Pod `i` as the benchmark creates it.
pub fn pod(i: usize) -> Pod {
    serde_json::from_value(pod_manifest(i)).expect("pod manifest")
}

fn pod_manifest(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("pod-{i:05}"),
            "labels": {"app": format!("app-{}", i % 25), "tier": TIERS[i % 3], "bench": "farmpods"},
        },
        "spec": {
            "nodeName": format!("node-{}", i % 50),
            "containers": [
                {"name": "app", "image": "registry.example.com/app:1.2.3", "ports": [{"containerPort": 8080}]},
                {"name": "sidecar", "image": "registry.example.com/proxy:0.9"},
            ],
        },
    })
}

/// The status patch that makes Pod `i` Running.
pub fn running_status(i: usize) -> Value {
    json!({"status": {
        "phase": "Running",
        "podIP": format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255),
        "startTime": "2026-01-01T00:00:00Z",
        "containerStatuses": [
            {"name": "app", "ready": true, "restartCount": (i % 3) as i32, "image": "registry.example.com/app:1.2.3",
             "imageID": "", "started": true},
            {"name": "sidecar", "ready": !i.is_multiple_of(5), "restartCount": 0, "image": "registry.example.com/proxy:0.9",
             "imageID": "", "started": true},
        ],
    }})
}

/// Pod `i` as the upstream watch delivers it once the benchmark has created
/// (and, for even `i`, started) it: namespace, uid and creation time set.
pub fn cluster_pod(i: usize) -> Pod {
    let mut manifest = pod_manifest(i);
    manifest["metadata"]["namespace"] = json!(namespace_of(i));
    manifest["metadata"]["uid"] = json!(format!("00000000-0000-4000-8000-{i:012}"));
    manifest["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    if i.is_multiple_of(2) {
        manifest["status"] = running_status(i)["status"].clone();
    }
    serde_json::from_value(manifest).expect("pod manifest")
}
