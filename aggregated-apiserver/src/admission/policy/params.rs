//! The parameter objects admission policies name (`paramKind`), from one
//! shared watch per kind, started when a policy first names it and shared
//! by the validating and mutating policies; and the selection a binding's
//! `paramRef` makes among them (k8s.io/apiserver's `CollectParams`). No
//! write calls the API for them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{ParamKind, ParamRef};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::Scope;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use serde_json::Value;

use crate::apimachinery::labels::LabelSelector;

/// Where the parameter objects of one kind are read from.
pub struct ParamSource {
    pub api_version: String,
    pub kind: String,
    /// Set once discovery found the kind: its store, whether it is
    /// namespaced, and the resource (what the store's keys name).
    found: Mutex<Option<(Store<DynamicObject>, bool, ApiResource)>>,
    synced: AtomicBool,
    error: Mutex<Option<String>>,
}

/// The parameter sources of a server, by (apiVersion, kind).
pub struct ParamSources {
    sources: Mutex<HashMap<(String, String), Arc<ParamSource>>>,
    client: Client,
}

impl ParamSources {
    pub fn new(client: Client) -> Arc<Self> {
        Arc::new(Self { sources: Mutex::new(HashMap::new()), client })
    }

    /// The parameter source of `kind`, started on first use.
    pub fn source(&self, kind: &ParamKind) -> Arc<ParamSource> {
        let api_version = kind.api_version.clone().unwrap_or_default();
        let kind_name = kind.kind.clone().unwrap_or_default();
        let key = (api_version.clone(), kind_name.clone());
        let fresh = |error: Option<String>| {
            Arc::new(ParamSource {
                api_version: api_version.clone(),
                kind: kind_name.clone(),
                found: Mutex::new(None),
                synced: AtomicBool::new(false),
                error: Mutex::new(error),
            })
        };
        let Ok(mut sources) = self.sources.lock() else {
            return fresh(Some("parameter sources unavailable".into()));
        };
        if let Some(found) = sources.get(&key) {
            return found.clone();
        }
        let source = fresh(None);
        sources.insert(key, source.clone());
        let (client, feeding) = (self.client.clone(), source.clone());
        tokio::spawn(async move { feed_params(client, feeding).await });
        source
    }

    /// The parameter objects a binding selects (kube's `CollectParams`):
    /// `[None]` for a policy without parameters; Err in kube's words.
    pub fn collect(
        &self,
        kind: Option<&ParamKind>,
        param_ref: Option<&ParamRef>,
        namespace: &str,
    ) -> Result<Vec<Option<Value>>, String> {
        let (Some(kind), Some(param_ref)) = (kind, param_ref) else {
            return Ok(vec![None]);
        };
        let source = self.source(kind);
        let found = source.found.lock().ok().and_then(|f| f.clone());
        let Some((store, namespaced, resource)) = found.filter(|_| source.synced.load(Ordering::Acquire)) else {
            return Err(source.not_ready());
        };
        let param_namespace = match param_ref.namespace.as_deref().filter(|n| !n.is_empty()) {
            Some(_) if !namespaced => {
                return Err("paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into())
            }
            Some(ns) => ns.to_string(),
            None if namespaced && namespace.is_empty() => {
                return Err(
                    "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into()
                )
            }
            None if namespaced => namespace.to_string(),
            None => String::new(),
        };
        let to_json = |o: &DynamicObject| serde_json::to_value(o).ok();
        let params: Vec<Option<Value>> =
            match (param_ref.name.as_deref().filter(|n| !n.is_empty()), &param_ref.selector) {
                (Some(_), Some(_)) => return Err("paramRef.name and paramRef.selector are mutually exclusive".into()),
                (Some(name), None) => {
                    let mut key = ObjectRef::new_with(name, resource);
                    if namespaced {
                        key = key.within(&param_namespace);
                    }
                    store.get(&key).and_then(|o| to_json(&o)).map(Some).into_iter().collect()
                }
                (None, Some(selector)) => {
                    let selector = LabelSelector::from_api(selector)?;
                    store
                        .state()
                        .iter()
                        .filter(|o| !namespaced || o.metadata.namespace.as_deref() == Some(param_namespace.as_str()))
                        .filter(|o| selector.matches(&o.metadata.labels.clone().unwrap_or_default()))
                        .filter_map(|o| to_json(o).map(Some))
                        .collect()
                }
                (None, None) => return Err("one of name or selector must be provided".into()),
            };
        if params.is_empty() && param_ref.parameter_not_found_action.as_deref() == Some("Deny") {
            return Err("no params found for policy binding with `Deny` parameterNotFoundAction".into());
        }
        Ok(params)
    }
}

impl ParamSource {
    fn not_ready(&self) -> String {
        self.error.lock().ok().and_then(|e| e.clone()).unwrap_or_else(|| {
            format!("paramKind kind `{}, Kind={}` not yet synced to use for admission", self.api_version, self.kind)
        })
    }
}

/// Finds the kind by discovery, then keeps its objects from one watch.
async fn feed_params(client: Client, source: Arc<ParamSource>) {
    let (group, version) = source.api_version.split_once('/').unwrap_or(("", source.api_version.as_str()));
    let gvk = GroupVersionKind::gvk(group, version, &source.kind);
    let (resource, namespaced) = loop {
        match kube::discovery::pinned_kind(&client, &gvk).await {
            Ok((resource, capabilities)) => break (resource, capabilities.scope == Scope::Namespaced),
            Err(e) => {
                if let Ok(mut error) = source.error.lock() {
                    *error =
                        Some(format!("paramKind kind `{}, Kind={}` not known: {e}", source.api_version, source.kind));
                }
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        }
    };
    let writer = reflector::store::Writer::<DynamicObject>::new(resource.clone());
    if let Ok(mut found) = source.found.lock() {
        *found = Some((writer.as_reader(), namespaced, resource.clone()));
    }
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let mut events = watcher::watcher(api, watcher::Config::default()).default_backoff().reflect(writer).boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::InitDone) => {
                source.synced.store(true, Ordering::Release);
                if let Ok(mut error) = source.error.lock() {
                    *error = None;
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(kind = %source.kind, error = %e, "admission policy parameter watch failed; reconnecting");
                if !source.synced.load(Ordering::Acquire) {
                    if let Ok(mut error) = source.error.lock() {
                        *error = Some(format!(
                            "paramKind kind `{}, Kind={}` not yet synced to use for admission: {e}",
                            source.api_version, source.kind
                        ));
                    }
                }
            }
        }
    }
}
