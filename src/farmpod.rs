//! FarmPod: a read-only, enriched view of the cluster's Pods. Every Pod has one
//! FarmPod of the same name in the same namespace.
//!
//! The view is fed by one shared kube-rs watcher over Pods, started at boot with
//! the server's own credentials. Its events are written into a [`MemoryStore`],
//! which plays the reflector store's part and also keeps the event history, so
//! FarmPod lists, watches, resumption, bookmarks and 410s come from the same
//! generic machinery as Llamas. No request ever calls the Pod API.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, ResourceExt};
use serde_json::{json, Map, Value};

use aggregated_apiserver::storage::{MemoryStore, ObjectKey, StoreError};
use aggregated_apiserver::{Cell, Column, Kind, Names, StreamResult, Streamed, Subresource, SubresourceRequest, Verb};
use http_body_util::BodyExt as _;

/// The annotation pointing back to the Pod's uid.
pub const POD_UID_ANNOTATION: &str = "farm.example.com/pod-uid";

static NAMES: Names = Names {
    group: "farm.example.com",
    version: "v1alpha",
    kind: "FarmPod",
    list_kind: "FarmPodList",
    plural: "farmpods",
    singular: "farmpod",
    short_names: &["fp"],
    categories: &["farm"],
};

fn text_cell(o: &Value, pointer: &str, empty: &str) -> Value {
    match o.pointer(pointer).and_then(Value::as_str) {
        Some(s) if !s.is_empty() => json!(s),
        _ => json!(empty),
    }
}

static COLUMNS: [Column; 6] = [
    Column {
        name: "Ready",
        type_: "string",
        format: "",
        description: "Ready containers out of all containers",
        priority: 0,
        cell: Cell::Read(|o| text_cell(o, "/status/ready", "0/0")),
    },
    Column {
        name: "Status",
        type_: "string",
        format: "",
        description: "The Pod's phase",
        priority: 0,
        cell: Cell::Read(|o| text_cell(o, "/status/phase", "Unknown")),
    },
    Column {
        name: "Restarts",
        type_: "integer",
        format: "",
        description: "Container restarts, all containers together",
        priority: 0,
        cell: Cell::Read(|o| o.pointer("/status/restarts").cloned().unwrap_or(json!(0))),
    },
    Column {
        name: "Containers",
        type_: "integer",
        format: "",
        description: "Number of containers in the Pod",
        priority: 0,
        cell: Cell::Read(|o| o.pointer("/spec/containerCount").cloned().unwrap_or(json!(0))),
    },
    Column {
        name: "Node",
        type_: "string",
        format: "",
        description: "The node the Pod runs on",
        priority: 0,
        cell: Cell::Read(|o| text_cell(o, "/spec/nodeName", "<none>")),
    },
    Column::AGE,
];

/// What the Pod watch has achieved, shared by the kind (503s), readiness and metrics.
#[derive(Default)]
pub struct PodCache {
    /// Set once the first full list has been applied.
    synced: AtomicBool,
    /// Set while the upstream watch delivers; cleared on an error.
    connected: AtomicBool,
    /// Why FarmPods cannot be served at all (no cluster configured).
    disabled: Mutex<Option<String>>,
    last_error: Mutex<Option<String>>,
    last_ok: Mutex<Option<Instant>>,
}

impl PodCache {
    pub fn disabled(why: impl Into<String>) -> Arc<Self> {
        let c = Self::default();
        if let Ok(mut d) = c.disabled.lock() {
            *d = Some(why.into());
        }
        Arc::new(c)
    }

    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub fn disabled_reason(&self) -> Option<String> {
        self.disabled.lock().ok().and_then(|d| d.clone())
    }

    /// Seconds the served state may lag the cluster: 0 while the watch is
    /// healthy, else the time since it last delivered.
    pub fn staleness_seconds(&self) -> f64 {
        if self.connected.load(Ordering::Acquire) {
            return 0.0;
        }
        match self.last_ok.lock().ok().and_then(|t| *t) {
            Some(t) => t.elapsed().as_secs_f64(),
            None => f64::INFINITY,
        }
    }

    /// The readiness check: fails until the first full list is applied.
    pub fn readiness(&self) -> Result<(), String> {
        if self.disabled_reason().is_some() {
            // Without a cluster FarmPods answer 503; the rest of the server is ready.
            return Ok(());
        }
        if !self.is_synced() {
            let err = self.last_error.lock().ok().and_then(|e| e.clone());
            return Err(match err {
                Some(e) => format!("pod cache not synced yet (last error: {e})"),
                None => "pod cache not synced yet".into(),
            });
        }
        Ok(())
    }

    /// What the verbose readiness listing says about a synced cache.
    pub fn readiness_detail(&self) -> Option<String> {
        if let Some(why) = self.disabled_reason() {
            return Some(format!("FarmPods disabled: {why}"));
        }
        if !self.is_synced() || self.connected.load(Ordering::Acquire) {
            return None;
        }
        let err = self.last_error.lock().ok().and_then(|e| e.clone()).unwrap_or_default();
        Some(format!(
            "serving the last known Pods, stale for {:.1}s: upstream watch disconnected: {err}",
            self.staleness_seconds()
        ))
    }

    fn ok(&self) {
        self.connected.store(true, Ordering::Release);
        if let Ok(mut t) = self.last_ok.lock() {
            *t = Some(Instant::now());
        }
    }

    fn failed(&self, err: String) {
        self.connected.store(false, Ordering::Release);
        if let Ok(mut e) = self.last_error.lock() {
            *e = Some(err);
        }
    }
}

pub struct FarmPodKind {
    pub cache: Arc<PodCache>,
    /// `log`, when there is a cluster to read logs from.
    pub subresources: Vec<Subresource>,
}

/// The query parameters `pods/log` takes, passed on to it as sent.
const LOG_PARAMETERS: [&str; 9] = [
    "container",
    "follow",
    "previous",
    "sinceSeconds",
    "sinceTime",
    "timestamps",
    "tailLines",
    "limitBytes",
    "insecureSkipTLSVerifyBackend",
];

/// `farmpods/{name}/log`: the Pod's container log, streamed from the Pod
/// API's `pods/log` with the server's credentials, as it comes (following,
/// when asked). A caller must also be allowed `pods/log` of that Pod (the
/// authorizer checks it: [`FarmPodKind::also_requires`]).
pub fn log_subresource(client: Client) -> Subresource {
    Subresource::stream("log", move |request| {
        let client = client.clone();
        async move { pod_log(&client, request).await }
    })
}

async fn pod_log(client: &Client, request: SubresourceRequest) -> StreamResult {
    let passed: Vec<(&str, &str)> = request
        .query
        .iter()
        .filter(|(key, _)| LOG_PARAMETERS.contains(&key.as_str()))
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    let query = serde_urlencoded::to_string(&passed).unwrap_or_default();
    let path = format!("/api/v1/namespaces/{}/pods/{}/log?{query}", request.namespace, request.name);
    let internal = |why: String| {
        let mut status = kube::core::Status::failure(&format!("reading the Pod's log: {why}"), "InternalError");
        status.code = 500;
        status
    };
    let sent = http::Request::get(path).body(kube::client::Body::empty()).map_err(|e| internal(e.to_string()))?;
    let answer = client.send(sent).await.map_err(|e| internal(e.to_string()))?;
    let content_type = answer
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("text/plain")
        .to_string();
    if !answer.status().is_success() {
        // The Pod API's refusal (no such container, a bad option), as it wrote it.
        let code = answer.status().as_u16();
        let body = answer.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let mut status: kube::core::Status =
            serde_json::from_slice(&body).unwrap_or_else(|_| internal(String::from_utf8_lossy(&body).into_owned()));
        status.code = code;
        return Err(status);
    }
    let body = answer.into_body().into_data_stream().map(|chunk| chunk.map_err(std::io::Error::other));
    Ok(Streamed { content_type, body: body.boxed() })
}

impl Kind for FarmPodKind {
    fn names(&self) -> &'static Names {
        &NAMES
    }

    fn verbs(&self) -> &'static [Verb] {
        Verb::READ_ONLY
    }

    fn schema(&self) -> Value {
        let s = |d: &str| json!({ "type": "string", "description": d });
        let i = |d: &str| json!({ "type": "integer", "format": "int64", "description": d });
        json!({
            "type": "object",
            "description": "A read-only, enriched view of a Pod of the same name and namespace.",
            "properties": {
                "apiVersion": { "type": "string" },
                "kind": { "type": "string" },
                "metadata": { "type": "object" },
                "spec": {
                    "type": "object",
                    "description": "What the Pod asks for.",
                    "properties": {
                        "podName": s("Name of the Pod this FarmPod shows (the same as the FarmPod's)."),
                        "nodeName": s("Node the Pod is scheduled to."),
                        "containerCount": i("Number of containers."),
                        "containers": {
                            "type": "array",
                            "description": "The Pod's containers.",
                            "items": { "type": "object", "properties": { "name": s("Container name."), "image": s("Container image.") } }
                        },
                        "owner": {
                            "type": "object",
                            "description": "The Pod's controlling owner, if any.",
                            "properties": { "kind": s("Kind of the owner."), "name": s("Name of the owner.") }
                        }
                    }
                },
                "status": {
                    "type": "object",
                    "description": "What the Pod reports.",
                    "properties": {
                        "phase": s("Pod phase: Pending, Running, Succeeded, Failed or Unknown."),
                        "podIP": s("The Pod's IP address."),
                        "qosClass": s("Quality of service class."),
                        "startTime": { "type": "string", "format": "date-time", "description": "When the kubelet acknowledged the Pod." },
                        "readyContainers": i("Containers passing readiness."),
                        "ready": s("Ready containers out of all, e.g. 1/2."),
                        "restarts": i("Restarts of all containers together.")
                    }
                }
            }
        })
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.nodeName", "status.phase"]
    }

    fn also_requires(&self) -> &'static [(&'static str, &'static str)] {
        &[("", "pods")]
    }

    fn subresources(&self) -> &[Subresource] {
        &self.subresources
    }

    fn unavailable(&self) -> Option<String> {
        if let Some(why) = self.cache.disabled_reason() {
            return Some(format!("FarmPods are unavailable: {why}"));
        }
        (!self.cache.is_synced()).then(|| "FarmPods are unavailable: the Pod cache has not synced yet".to_string())
    }
}

/// The FarmPod view of a Pod.
pub fn farmpod_of(pod: &Pod) -> Option<(ObjectKey, Value)> {
    let name = pod.metadata.name.clone()?;
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let containers: Vec<Value> = spec
        .map(|s| {
            s.containers
                .iter()
                .map(|c| json!({ "name": c.name, "image": c.image.clone().unwrap_or_default() }))
                .collect()
        })
        .unwrap_or_default();
    let statuses = status.and_then(|s| s.container_statuses.as_ref());
    let ready = statuses.map(|cs| cs.iter().filter(|c| c.ready).count()).unwrap_or(0);
    let restarts: i64 = statuses.map(|cs| cs.iter().map(|c| i64::from(c.restart_count)).sum()).unwrap_or(0);
    let owner = pod
        .metadata
        .owner_references
        .as_ref()
        .and_then(|refs| refs.iter().find(|r| r.controller == Some(true)))
        .map(|r| json!({ "kind": r.kind, "name": r.name }));

    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(name));
    metadata.insert("namespace".into(), json!(namespace));
    // A uid of our own (stable per Pod), so nothing mistakes the view for the Pod.
    metadata
        .insert("uid".into(), json!(uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, pod_uid.as_bytes()).to_string()));
    if let Some(t) = &pod.metadata.creation_timestamp {
        metadata.insert("creationTimestamp".into(), json!(t.0.to_string()));
    }
    let labels: BTreeMap<String, String> = pod.labels().clone();
    if !labels.is_empty() {
        metadata.insert("labels".into(), json!(labels));
    }
    metadata.insert("annotations".into(), json!({ POD_UID_ANNOTATION: pod_uid }));
    metadata
        .insert("ownerReferences".into(), json!([{ "apiVersion": "v1", "kind": "Pod", "name": name, "uid": pod_uid }]));

    let mut spec_json = json!({
        "podName": name,
        "containerCount": containers.len(),
        "containers": containers,
    });
    if let Some(node) = spec.and_then(|s| s.node_name.clone()) {
        spec_json["nodeName"] = json!(node);
    }
    if let Some(o) = owner {
        spec_json["owner"] = o;
    }
    let total = spec.map(|s| s.containers.len()).unwrap_or(0);
    let mut status_json = json!({
        "readyContainers": ready,
        "ready": format!("{ready}/{total}"),
        "restarts": restarts,
    });
    if let Some(st) = status {
        for (key, value) in [("phase", &st.phase), ("podIP", &st.pod_ip), ("qosClass", &st.qos_class)] {
            if let Some(v) = value {
                status_json[key] = json!(v);
            }
        }
        if let Some(t) = &st.start_time {
            status_json["startTime"] = json!(t.0.to_string());
        }
    }
    let obj = json!({
        "apiVersion": "farm.example.com/v1alpha",
        "kind": "FarmPod",
        "metadata": metadata,
        "spec": spec_json,
        "status": status_json,
    });
    Some((ObjectKey::new(namespace, name), obj))
}

/// Applies the upstream Pod watcher's events to the FarmPod store, for one
/// scope (all namespaces, or one).
///
/// A full list (at start, and after a 410 or a reconnect) is applied as it
/// arrives, one Pod at a time: unchanged FarmPods stay as they are, changed
/// ones are replaced, and at its end the FarmPods of Pods it did not list are
/// deleted. So a re-list never holds a second copy of the cluster (only the
/// keys it has seen), and reads wait at most for one object's write. Until it
/// ends, a read may still see a Pod deleted while the watch was down, as from
/// any cache that has not caught up yet.
pub struct PodFeed {
    store: Arc<MemoryStore>,
    scope: Option<String>,
    /// The keys of the list under way.
    listed: Option<HashSet<ObjectKey>>,
}

impl PodFeed {
    pub fn new(store: Arc<MemoryStore>, scope: Option<String>) -> Self {
        Self { store, scope, listed: None }
    }

    /// Applies one event; answers the number of Pods when it completed a full list.
    pub fn apply(&mut self, event: Event<Pod>) -> Result<Option<usize>, StoreError> {
        match event {
            Event::Init => self.listed = Some(HashSet::new()),
            Event::InitApply(pod) => {
                if let Some((key, obj)) = farmpod_of(&pod) {
                    self.store.upsert(&key, obj)?;
                    self.listed.get_or_insert_default().insert(key);
                }
            }
            Event::InitDone => {
                let listed = self.listed.take().unwrap_or_default();
                self.store.retain_scope(self.scope.as_deref(), |key| listed.contains(key))?;
                return Ok(Some(listed.len()));
            }
            Event::Apply(pod) => {
                if let Some((key, obj)) = farmpod_of(&pod) {
                    self.store.upsert(&key, obj)?;
                }
            }
            Event::Delete(pod) => {
                if let Some((key, _)) = farmpod_of(&pod) {
                    self.store.delete_now(&key)?;
                }
            }
        }
        Ok(None)
    }
}

/// Runs the one Pod watch per configured scope (all namespaces, or each named
/// one), writing FarmPods into `store` until the process ends. Upstream errors
/// keep the last state served; the watcher reconnects with backoff and
/// re-lists when its resourceVersion is gone.
pub fn spawn_pod_watch(client: Client, namespaces: Vec<String>, store: Arc<MemoryStore>, cache: Arc<PodCache>) {
    let scopes: Vec<Option<String>> =
        if namespaces.is_empty() { vec![None] } else { namespaces.into_iter().map(Some).collect() };
    let pending_syncs = Arc::new(std::sync::atomic::AtomicUsize::new(scopes.len()));
    for scope in scopes {
        let api: Api<Pod> = match &scope {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let (cache, pending_syncs) = (cache.clone(), pending_syncs.clone());
        let mut feed = PodFeed::new(store.clone(), scope.clone());
        tokio::spawn(async move {
            let mut first_sync = true;
            let mut events = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
            while let Some(ev) = events.next().await {
                let event = match ev {
                    Ok(event) => event,
                    Err(e) => {
                        tracing::warn!(error = %e, "pod watch failed; serving the last known FarmPods while reconnecting");
                        cache.failed(e.to_string());
                        continue;
                    }
                };
                match feed.apply(event) {
                    Ok(synced) => {
                        cache.ok();
                        if let (Some(count), true) = (synced, first_sync) {
                            first_sync = false;
                            if pending_syncs.fetch_sub(1, Ordering::AcqRel) == 1 {
                                cache.synced.store(true, Ordering::Release);
                            }
                            tracing::info!(
                                pods = count,
                                namespace = scope.as_deref().unwrap_or("*"),
                                "pod cache synced"
                            );
                        }
                        if synced.is_some() {
                            crate::process::allocator::release_free_memory();
                        }
                    }
                    Err(e) => tracing::error!(error = %e, "applying a pod event to the FarmPod cache"),
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enriches_a_pod() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1", "labels": {"app": "web"},
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs", "controller": true}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "busybox"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "qosClass": "BestEffort",
                "containerStatuses": [
                    {"name": "a", "ready": true, "restartCount": 2, "image": "nginx", "imageID": ""},
                    {"name": "b", "ready": false, "restartCount": 1, "image": "busybox", "imageID": ""}]}
        }))
        .unwrap();
        let (key, fp) = farmpod_of(&pod).unwrap();
        assert_eq!(key, ObjectKey::new("shop", "web-1"));
        assert_eq!(fp["spec"]["containerCount"], 2);
        assert_eq!(fp["spec"]["owner"], json!({"kind": "ReplicaSet", "name": "web"}));
        assert_eq!(fp["status"]["ready"], "1/2");
        assert_eq!(fp["status"]["restarts"], 3);
        assert_eq!(fp["metadata"]["labels"]["app"], "web");
        assert_eq!(fp["metadata"]["annotations"][POD_UID_ANNOTATION], "u-1");
        assert_ne!(fp["metadata"]["uid"], "u-1");
        let cells: Vec<Value> = COLUMNS
            .iter()
            .filter_map(|c| match c.cell {
                Cell::Read(read) => Some(read(&fp)),
                Cell::Path(_) => None,
            })
            .collect();
        assert_eq!(cells, vec![json!("1/2"), json!("Running"), json!(3), json!(2), json!("n1")]);
    }
}
