//! The cluster's namespaces, for kube's NamespaceLifecycle admission: one
//! shared watch (a kube-rs reflector over Namespaces, with the server's one
//! cluster client) says which namespaces exist and which are terminating, so
//! a create never calls the API per request, except as kube does: a namespace
//! the cache does not know yet is looked up live once before the create is
//! refused (one created a moment ago must work).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use crate::admission::NamespaceAdmission;
use crate::apimachinery::errors::{self, ApiError, ApiResult, Reason, StatusDetails, Target};

pub struct NamespaceLifecycle {
    cache: Store<Namespace>,
    api: Api<Namespace>,
    synced: AtomicBool,
    last_error: Mutex<Option<String>>,
}

impl NamespaceLifecycle {
    /// Starts the namespace watch on `client` and returns the admission it feeds.
    pub fn start(client: Client) -> Arc<Self> {
        let (cache, writer) = reflector::store();
        let api: Api<Namespace> = Api::all(client);
        let lifecycle =
            Arc::new(Self { cache, api: api.clone(), synced: AtomicBool::new(false), last_error: Mutex::new(None) });
        let feeding = lifecycle.clone();
        tokio::spawn(async move {
            let mut events =
                watcher::watcher(api, watcher::Config::default()).default_backoff().reflect(writer).boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(Event::InitDone) => {
                        if !feeding.synced.swap(true, Ordering::AcqRel) {
                            tracing::info!(namespaces = feeding.cache.state().len(), "namespace cache synced");
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "namespace watch failed; reconnecting");
                        if let Ok(mut last) = feeding.last_error.lock() {
                            *last = Some(e.to_string());
                        }
                    }
                }
            }
        });
        lifecycle
    }

    /// For /readyz: ready once the first full list of namespaces is in.
    pub fn readiness(&self) -> Result<(), String> {
        if self.synced.load(Ordering::Acquire) {
            return Ok(());
        }
        match self.last_error.lock().ok().and_then(|e| e.clone()) {
            Some(e) => Err(format!("namespace cache not synced yet (last error: {e})")),
            None => Err("namespace cache not synced yet".into()),
        }
    }

    /// The namespace from the cache, else from the API (kube's last resort
    /// before refusing); None when it does not exist.
    pub async fn lookup(&self, name: &str) -> ApiResult<Option<Arc<Namespace>>> {
        if let Some(ns) = self.cache.get(&ObjectRef::new(name)) {
            return Ok(Some(ns));
        }
        match self.api.get_opt(name).await {
            Ok(found) => Ok(found.map(Arc::new)),
            Err(e) => Err(ApiError::internal_error(format!("looking up namespace {name}: {e}"))),
        }
    }
}

/// kube's 404 for a missing namespace: `namespaces "x" not found`, details
/// naming the core resource (no group).
pub fn namespace_not_found(name: &str) -> ApiError {
    ApiError::new(404, Reason::NotFound, format!("namespaces \"{name}\" not found")).with_details(errors::details(
        "",
        "namespaces",
        name,
    ))
}

/// kube's 403 for a create in a terminating namespace, with its cause.
fn namespace_terminating(namespace: &str, target: Target<'_>) -> ApiError {
    ApiError::new(
        403,
        Reason::Forbidden,
        format!(
            "{} \"{}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
            target.qualified_resource(),
            target.name
        ),
    )
    .with_details(StatusDetails {
        causes: Some(vec![errors::cause(
            "NamespaceTerminating",
            format!("namespace {namespace} is being terminated"),
            "metadata.namespace",
        )]),
        ..errors::details(target.group, target.resource, target.name)
    })
}

#[async_trait]
impl NamespaceAdmission for NamespaceLifecycle {
    async fn admit_create(&self, namespace: &str, target: Target<'_>) -> ApiResult<()> {
        let Some(ns) = self.lookup(namespace).await? else {
            return Err(namespace_not_found(namespace));
        };
        let terminating = ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating");
        if terminating {
            return Err(namespace_terminating(namespace, target));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refusals_in_kube_words() {
        let e = namespace_not_found("x").status_body();
        assert_eq!(e["message"], "namespaces \"x\" not found");
        assert_eq!(e["details"], json!({"name": "x", "kind": "namespaces"}));
        let t = Target { group: "example.com", kind: "Widget", resource: "widgets", name: "a" };
        let e = namespace_terminating("gone", t).status_body();
        assert_eq!(e["code"], 403);
        assert_eq!(
            e["message"],
            "widgets.example.com \"a\" is forbidden: unable to create new content in namespace gone because it is being terminated"
        );
        assert_eq!(e["details"]["causes"][0]["reason"], "NamespaceTerminating");
    }
}
