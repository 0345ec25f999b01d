//! farm-apiserver: a Kubernetes aggregated API server for farm.example.com,
//! built on the `aggregated-apiserver` library, which knows no kind. This
//! crate is that library plus three kinds, each one file describing itself:
//!
//! * [`llama`]: Llamas, objects this server owns and stores;
//! * [`herd`]: Herds of llamas, stored too, sized through their scale
//!   subresource;
//! * [`farmpod`]: FarmPods, a read-only view of the cluster's Pods fed by one
//!   shared watch.
//!
//! The kinds' Rust types are public for kube-rs clients and the tests;
//! `main.rs` is only the command line. Adding a kind: one file describing it
//! and one line in [`serve_kinds`].

pub mod farmpod;
pub mod herd;
pub mod llama;
pub mod options;
pub mod process;

use std::sync::Arc;

use aggregated_apiserver::{DetailedCheck, Gauge, Kind, Registry, Setup};

/// Adds Llamas, Herds and FarmPods to what the server serves; starts the Pod watch
/// when a cluster is configured.
pub async fn serve_kinds(setup: &mut Setup, pod_namespaces: Vec<String>) -> aggregated_apiserver::Result<()> {
    setup.stored(Arc::new(llama::kind()?))?;
    setup.stored(Arc::new(herd::kind()?))?;

    let (pod_cache, client) = match &setup.cluster {
        Ok(client) => (Arc::new(farmpod::PodCache::default()), Some(client.clone())),
        Err(e) => {
            // The reason says what is missing and what to do, once.
            tracing::warn!("FarmPods are unavailable: {e:#}");
            (farmpod::PodCache::disabled(format!("{e:#}")), None)
        }
    };
    let subresources = client.iter().map(|client| farmpod::log_subresource(client.clone())).collect();
    let farmpod: Arc<dyn Kind> = Arc::new(farmpod::FarmPodKind { cache: pod_cache.clone(), subresources });
    let pod_store = setup.memory_store(&farmpod);
    if let Some(client) = client {
        farmpod::spawn_pod_watch(client, pod_namespaces, pod_store.clone(), pod_cache.clone());
    }
    setup.serve(Arc::new(Registry::new(farmpod, pod_store)?));
    let (cache, detail) = (pod_cache.clone(), pod_cache.clone());
    setup.ready_check(Arc::new(DetailedCheck(
        "farmpod-cache",
        move || cache.readiness(),
        move || detail.readiness_detail(),
    )));
    setup.gauge(Gauge {
        name: "pod_cache_staleness_seconds",
        help: "How far the FarmPod view may lag the cluster: 0 while the Pod watch is healthy, else seconds since it last delivered",
        value: Box::new(move || pod_cache.staleness_seconds()),
    });
    Ok(())
}
