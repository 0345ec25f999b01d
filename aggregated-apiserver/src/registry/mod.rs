//! The generic registry: Kubernetes REST semantics (metadata, resourceVersion,
//! generation, finalizers, preconditions, status subresource, dry run, paging,
//! selectors) for any [`Kind`] over any [`Store`]. The HTTP layer only parses
//! requests and encodes answers around it.

mod apply;
mod delete;
pub mod encode;
pub mod kind;
pub mod patch;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use chrono::{SecondsFormat, Utc};
use serde_json::{json, Map, Value};

use self::apply::{set_managed_fields, Fields};
use crate::admission::NamespaceAdmission;
use crate::apimachinery::errors::{self, ApiError, ApiResult, Reason, StatusDetails, Target};
use crate::apimachinery::field_error::FieldError;
use crate::apimachinery::fields::FieldSelector;
use crate::apimachinery::labels::LabelSelector;
use crate::apimachinery::managed_fields::ManagedFields;
use crate::apimachinery::options::{
    is_dry_run, DeleteOptions, FieldValidation, ListOptions, Rv, RvMatch, WriteOptions,
};
use crate::apimachinery::schema::{prune::prune_unknown_fields, validate::validate_against_schema};
use crate::apimachinery::serializer::{BodyFormat, JsonBody};
use crate::apimachinery::typed::Shape;
use crate::apimachinery::{gojson, objectmeta};
use crate::heavy;
use crate::registry::encode::{column_definitions, ListMeta};
use crate::registry::kind::Kind;
use crate::storage::{ListRequest, Mutation, ObjectKey, Store, StoreError, StoredObject, Updated, WatchStream};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

/// How long a read naming a future resourceVersion waits for it, as the watch cache does.
const RV_WAIT: Duration = Duration::from_secs(3);
/// How often a write racing other writers is retried before giving up with 409.
const WRITE_RETRIES: usize = 8;

/// One kind served from one store.
pub struct Registry {
    pub kind: Arc<dyn Kind>,
    pub store: Arc<dyn Store>,
    /// Table column definitions, computed once.
    pub columns: Value,
    schema: Value,
    /// The schema as server-side apply reads it (list and map types).
    shape: Shape,
    /// Checked before a create in a namespace (None: every namespace is taken
    /// to exist, as without a cluster there is no source of namespaces).
    namespace_admission: Option<Arc<dyn NamespaceAdmission>>,
}

/// The body of a successful write and the warnings to send with it.
pub struct WriteOutcome {
    pub code: u16,
    pub body: Bytes,
    pub warnings: Vec<String>,
}

/// Which part of the object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Main,
    Status,
}

/// What an update or patch decides for the object as it is now.
enum Decision {
    Unchanged,
    Write(Value),
    /// The object's last finalizer was removed while it is being deleted:
    /// it goes now (the value is what a dry run answers).
    Delete(Value),
}

/// What a delete did.
pub enum DeleteOutcome {
    /// Gone; the Success Status kube-apiserver answers with (boxed: a Status
    /// is ten times the size of the Bytes beside it).
    Deleted(Box<Status>),
    /// Still there, waiting for finalizers: the object.
    Pending(Bytes),
}

/// Where a watch starts.
pub struct WatchPlan {
    pub initial: Vec<StoredObject>,
    pub stream: WatchStream,
    /// The revision the stream starts after.
    pub from: u64,
    /// Send the `k8s.io/initial-events-end` bookmark after `initial`, at this revision.
    pub initial_events_end: Option<u64>,
}

/// The outcome of starting a watch: a stream, or the 410 to send as an ERROR event.
pub enum WatchStart {
    Stream(Box<WatchPlan>),
    Expired(ApiError),
}

/// A compiled selector pair.
pub struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
    /// For each field the selector uses: where to read it.
    field_slots: Vec<(String, FieldSlot)>,
}

enum FieldSlot {
    Name,
    Namespace,
    Index(usize),
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub fn matches(&self, o: &StoredObject) -> bool {
        self.labels.matches(&o.index.labels)
            && self.fields.matches(|f| {
                self.field_slots.iter().find(|(name, _)| name == f).map(|(_, slot)| match slot {
                    FieldSlot::Name => o.key.name.as_str(),
                    FieldSlot::Namespace => o.key.namespace.as_str(),
                    FieldSlot::Index(i) => o.index.fields.get(*i).map(|f| &**f).unwrap_or_default(),
                })
            })
    }
}

/// The opaque continue token: the snapshot revision and the last key served.
#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: u64,
    ns: String,
    name: String,
    /// Items served by the earlier pages of an unfiltered list (so the store
    /// need not count the rest for `remainingItemCount`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    served: Option<u64>,
}

fn encode_continue(rv: u64, key: &ObjectKey, served: Option<u64>) -> String {
    let t = ContinueToken { v: "meta.k8s.io/v1".into(), rv, ns: key.namespace.clone(), name: key.name.clone(), served };
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&t).unwrap_or_default())
}

fn decode_continue(token: &str) -> ApiResult<(u64, ObjectKey, Option<u64>)> {
    // kube's storage words: "invalid continue token: continue key is not valid: ...".
    let invalid = |why: &str| ApiError::bad_request(format!("invalid continue token: continue key is not valid{why}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).map_err(|e| {
        // Go's base64 CorruptInputError names the offending input offset.
        let at = match e {
            base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            base64::DecodeError::InvalidLength(len) => len.saturating_sub(1),
            base64::DecodeError::InvalidPadding => token.len().saturating_sub(1),
        };
        invalid(&format!(": illegal base64 data at input byte {at}"))
    })?;
    if let Err(e) = gojson::decode_json(&raw) {
        let why = e.strip_prefix(gojson::VERSION_KIND_ERROR_PREFIX).unwrap_or(&e).to_string();
        return Err(invalid(&format!(": {why}")));
    }
    let t: ContinueToken = serde_json::from_slice(&raw).map_err(|_| invalid(""))?;
    if t.v != "meta.k8s.io/v1" {
        return Err(invalid(": server does not recognize this encoded version"));
    }
    if t.rv == 0 {
        return Err(invalid(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)"));
    }
    Ok((t.rv, ObjectKey::new(t.ns, t.name), t.served))
}

fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// kube-apiserver's generateName suffix: 5 characters from a consonant/digit alphabet.
fn generate_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

fn meta_mut(obj: &mut Value) -> ApiResult<&mut Map<String, Value>> {
    obj.get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Drops the ObjectMeta fields Go leaves out when empty (omitempty): kube
/// stores a custom resource's metadata through the typed ObjectMeta, so an
/// empty `labels: {}`, `finalizers: []` or `generateName: ""` is not kept.
fn drop_empty_meta_fields(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    meta.retain(|field, value| {
        let omitted_when_empty = matches!(
            field.as_str(),
            "labels" | "annotations" | "finalizers" | "ownerReferences" | "managedFields" | "generateName"
        );
        let empty = match value {
            Value::Object(m) => m.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::String(s) => s.is_empty(),
            _ => false,
        };
        !(omitted_when_empty && empty)
    });
}

/// The finalizers kube-apiserver itself adds (delete propagation): no warning for them.
const SYSTEM_FINALIZERS: &[&str] = &["orphan", "foregroundDeletion"];

/// kube-apiserver's warnings for a custom resource's finalizers: each one a
/// write adds (all of them on create; sorted, once each) that has no `/`.
fn finalizer_warnings(new: &Value, old: Option<&Value>) -> Vec<String> {
    // A set, not the list: looking each new finalizer up in the old list made
    // any write to a Llama with 30,000 finalizers take seconds of CPU.
    let before: std::collections::HashSet<String> = old.map(finalizers).unwrap_or_default().into_iter().collect();
    let added: std::collections::BTreeSet<String> =
        finalizers(new).into_iter().filter(|f| !before.contains(f)).collect();
    added
        .into_iter()
        .filter(|f| !f.contains('/') && !SYSTEM_FINALIZERS.contains(&f.as_str()))
        .map(|f| {
            format!("metadata.finalizers: {f:?}: prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers")
        })
        .collect()
}

/// Everything but metadata and status: a change here bumps `generation`.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(old) != strip(new)
}

fn encode_value(v: &Value) -> ApiResult<Bytes> {
    serde_json::to_vec(v).map(Bytes::from).map_err(ApiError::internal_error)
}

impl Registry {
    pub fn new(kind: Arc<dyn Kind>, store: Arc<dyn Store>) -> Self {
        let columns = column_definitions(kind.as_ref());
        let schema = kind.schema();
        let shape = Shape::of_object(&schema);
        Self { kind, store, columns, schema, shape, namespace_admission: None }
    }

    /// Creates in a namespace must pass `admission` first.
    pub fn with_namespace_admission(mut self, admission: Arc<dyn NamespaceAdmission>) -> Self {
        self.namespace_admission = Some(admission);
        self
    }

    fn target<'a>(&'a self, name: &'a str) -> Target<'a> {
        let n = self.kind.names();
        Target { group: n.group, kind: n.kind, resource: n.plural, name }
    }

    fn store_error(&self, name: &str, e: StoreError) -> ApiError {
        match e {
            StoreError::NotFound => ApiError::not_found(self.target(name)),
            StoreError::AlreadyExists => ApiError::already_exists(self.target(name)),
            StoreError::Conflict => ApiError::conflict(self.target(name), StoreError::Conflict),
            StoreError::Expired { .. } => ApiError::expired(e.to_string()),
            StoreError::TooLarge { .. } => too_large_rv(&e),
            StoreError::Unavailable(msg) => storage_unavailable(&msg),
            StoreError::Initializing => {
                let mut err = ApiError::new(429, Reason::TooManyRequests, "storage is (re)initializing");
                err.retry_after = Some(1);
                err
            }
            StoreError::ObjectTooLarge => object_too_large(),
            StoreError::Internal(msg) => ApiError::internal_error(msg),
        }
    }

    /// 409 for a failed storage precondition (a uid that is not the stored
    /// object's), worded as kube's storage error for the object's etcd key.
    fn failed_precondition(&self, ns: &str, name: &str, why: &str) -> ApiError {
        let n = self.kind.names();
        let key = if self.kind.namespaced() {
            format!("/registry/{}/{}/{ns}/{name}", n.group, n.plural)
        } else {
            format!("/registry/{}/{}/{name}", n.group, n.plural)
        };
        ApiError::conflict(
            self.target(name),
            format!("StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {why}"),
        )
    }

    /// 422 Invalid for an object of this kind, with its causes.
    fn invalid(&self, name: &str, errs: &[FieldError]) -> ApiError {
        let n = self.kind.names();
        ApiError::invalid(n.group, n.kind, name, errs)
    }

    fn key(&self, ns: &str, name: &str) -> ObjectKey {
        ObjectKey::new(if self.kind.namespaced() { ns } else { "" }, name)
    }

    /// GET: the latest state (resourceVersion unset), any cached state ("0"),
    /// or one not older than a revision, as kube-apiserver serves reads.
    pub async fn get(&self, ns: &str, name: &str, rv: Rv) -> ApiResult<StoredObject> {
        match rv {
            Rv::Unset => {
                self.store.sync_latest().await.map_err(|e| self.store_error(name, e))?;
            }
            Rv::At(n) => self.store.wait_for_rv(n, RV_WAIT).await.map_err(|e| too_large_rv(&e))?,
            Rv::Any => {}
        }
        self.store
            .get(&self.key(ns, name))
            .await
            .map_err(|e| self.store_error(name, e))?
            .ok_or_else(|| ApiError::not_found(self.target(name)))
    }

    /// Compiles label and field selectors, rejecting fields the kind cannot select on.
    pub fn filter(&self, opts: &ListOptions) -> ApiResult<Filter> {
        let labels = LabelSelector::parse(&opts.label_selector).map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(&opts.field_selector).map_err(ApiError::bad_request)?;
        let mut field_slots = Vec::new();
        for f in fields.fields() {
            let slot = match f {
                "metadata.name" => FieldSlot::Name,
                "metadata.namespace" => FieldSlot::Namespace,
                other => match self.kind.selectable_fields().iter().position(|s| *s == other) {
                    Some(i) => FieldSlot::Index(i),
                    None => return Err(ApiError::bad_request(format!("field label not supported: {other}"))),
                },
            };
            field_slots.push((f.to_string(), slot));
        }
        Ok(Filter { labels, fields, field_slots })
    }

    /// A list with kube-apiserver's resourceVersion, paging and selector rules.
    pub async fn list(&self, ns: Option<&str>, opts: &ListOptions) -> ApiResult<(ListMeta, Vec<StoredObject>)> {
        let filter = self.filter(opts)?;
        let (at, start_after, offset) = match &opts.continue_token {
            Some(token) => {
                let (rv, key, served) = decode_continue(token)?;
                if matches!(opts.rv, Rv::At(_)) {
                    return Err(ApiError::bad_request(
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                // The first page may have come from a replica further ahead.
                self.store.wait_for_rv(rv, RV_WAIT).await.map_err(|e| too_large_rv(&e))?;
                (Some(rv), Some(key), served)
            }
            None => (self.read_revision(opts.rv, opts.rv_match).await?, None, Some(0)),
        };
        let filter_fn = |o: &StoredObject| filter.matches(o);
        let req = ListRequest {
            namespace: ns,
            at,
            start_after: start_after.as_ref(),
            offset,
            limit: opts.limit,
            filter: if filter.is_empty() { None } else { Some(&filter_fn) },
        };
        let page = match self.store.list(req).await {
            Ok(p) => p,
            Err(StoreError::Expired { .. }) if opts.continue_token.is_some() => return Err(expired_continue()),
            Err(StoreError::Expired { .. }) => {
                return Err(ApiError::expired("The resourceVersion for the provided list is too old."))
            }
            Err(e) => return Err(self.store_error("", e)),
        };
        let meta = ListMeta {
            resource_version: page.rv,
            continue_token: page.next_start_after.as_ref().map(|k| {
                let served = offset.filter(|_| filter.is_empty()).map(|o| o + page.items.len() as u64);
                encode_continue(page.rv, k, served)
            }),
            remaining: page.remaining,
        };
        Ok((meta, page.items))
    }

    /// The revision a list reads at: None = latest.
    async fn read_revision(&self, rv: Rv, rv_match: RvMatch) -> ApiResult<Option<u64>> {
        match (rv, rv_match) {
            (Rv::Unset, _) => {
                self.store.sync_latest().await.map_err(|e| self.store_error("", e))?;
                Ok(None)
            }
            (Rv::Any, _) => Ok(None),
            (Rv::At(n), RvMatch::Exact) => {
                self.store.wait_for_rv(n, RV_WAIT).await.map_err(|e| too_large_rv(&e))?;
                Ok(Some(n))
            }
            (Rv::At(n), _) => {
                self.store.wait_for_rv(n, RV_WAIT).await.map_err(|e| too_large_rv(&e))?;
                Ok(None)
            }
        }
    }

    pub async fn watch(&self, ns: Option<&str>, opts: &ListOptions) -> ApiResult<WatchStart> {
        // Selectors are checked before the stream starts so bad ones get a plain 400.
        self.filter(opts)?;
        let initial_events = match opts.send_initial_events {
            Some(send) => send,
            None => matches!(opts.rv, Rv::Unset | Rv::Any),
        };
        if let Rv::At(n) = opts.rv {
            if opts.send_initial_events.is_some() || n > self.store.current_rv() {
                self.store.wait_for_rv(n, RV_WAIT).await.map_err(|e| too_large_rv(&e))?;
            }
        }
        let (initial, from) = if initial_events {
            let (meta, items) = self
                .list(ns, &ListOptions { limit: None, continue_token: None, rv: Rv::Unset, ..opts.clone() })
                .await?;
            (items, meta.resource_version)
        } else {
            match opts.rv {
                Rv::At(n) => (Vec::new(), n),
                Rv::Unset => (Vec::new(), self.store.sync_latest().await.map_err(|e| self.store_error("", e))?),
                Rv::Any => (Vec::new(), self.store.current_rv()),
            }
        };
        match self.store.watch(ns, from).await {
            Ok(stream) => Ok(WatchStart::Stream(Box::new(WatchPlan {
                initial,
                stream,
                from,
                initial_events_end: (opts.send_initial_events == Some(true)).then_some(from),
            }))),
            Err(e @ StoreError::Expired { .. }) => Ok(WatchStart::Expired(ApiError::expired(e.to_string()))),
            Err(e) => Err(self.store_error("", e)),
        }
    }

    /// Decodes a request body as an object of this kind, applying fieldValidation
    /// (kube-apiserver's order: syntax, apiVersion/kind, metadata types, pruning).
    /// `raw` is the body as sent, which messages quote; `body` its JSON.
    fn decode_object(
        &self,
        raw: &[u8],
        body: &JsonBody<'_>,
        wopts: &WriteOptions,
        warnings: &mut Vec<String>,
    ) -> ApiResult<Value> {
        let n = self.kind.names();
        let wrap = |e: &str| ApiError::bad_request(gojson::decode_error_message(e, raw, n.kind, n.version));
        if body.format == BodyFormat::Yaml && *body.json == *b"null" {
            // An empty YAML stream or a null document: kube quotes the body as sent.
            let why = format!("Object 'Kind' is missing in '{}'", String::from_utf8_lossy(raw));
            return Err(ApiError::bad_request(gojson::unrecognized_object_message(&why, raw, n.kind)));
        }
        let (mut obj, duplicates) = gojson::decode_json(&body.json).map_err(|e| wrap(&e))?;
        self.check_type(&obj, raw)?;
        if let Some(meta) = obj.get("metadata") {
            objectmeta::check_object_meta_types(meta).map_err(|e| wrap(&e))?;
        }
        let unknown = prune_unknown_fields(&mut obj, &self.schema);
        match wopts.field_validation {
            FieldValidation::Ignore => {}
            FieldValidation::Warn => {
                // go-yaml's duplicate keys first, one warning each, as kube sends them.
                warnings.extend(body.yaml_duplicates.iter().cloned());
                warnings.extend(gojson::strict_warnings(&duplicates, &unknown));
            }
            FieldValidation::Strict => {
                let mut findings = Vec::new();
                if !body.yaml_duplicates.is_empty() {
                    // go-yaml's TypeError text: `yaml: unmarshal errors:\n  line 5: key "a" already set in map`.
                    findings.push(format!("yaml: unmarshal errors:\n  {}", body.yaml_duplicates.join("\n  ")));
                }
                findings.extend(gojson::strict_warnings(&duplicates, &unknown));
                if !findings.is_empty() {
                    return Err(wrap(&format!("strict decoding error: {}", findings.join(", "))));
                }
            }
        }
        Ok(obj)
    }

    /// The body must be an object of this group-version with a kind; a wrong
    /// kind is a 422 like apiextensions' ValidateTypeMeta.
    fn check_type(&self, obj: &Value, body: &[u8]) -> ApiResult<()> {
        let names = self.kind.names();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind.is_empty() {
            let shown = String::from_utf8_lossy(body);
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): Object 'Kind' is missing in '{}' ({})",
                names.kind,
                shown.trim(),
                gojson::summarize_data(body, 30)
            )));
        }
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        if api_version != names.api_version() {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                names.api_version()
            )));
        }
        let errs = objectmeta::validate_type_meta(obj, &names.api_version(), names.kind);
        if !errs.is_empty() {
            // kube names the kind the body claims (`Alpaca.<group> "x" is invalid`).
            let name = meta_str(obj, "name").unwrap_or("");
            return Err(ApiError::invalid(names.group, kind, name, &errs));
        }
        Ok(())
    }

    /// Schema, metadata and kind-specific validation; 422 with every cause.
    fn validate(&self, obj: &Value, old: Option<&Value>) -> ApiResult<()> {
        let empty = json!({});
        let meta = obj.get("metadata").unwrap_or(&empty);
        let mut errs = objectmeta::validate_object_meta(meta, self.kind.namespaced());
        if let Some(old) = old {
            let old_meta = old.get("metadata").unwrap_or(&empty);
            let update_errs = objectmeta::validate_object_meta_update(meta, old_meta);
            // kube-apiserver checks metadata updates twice for a custom
            // resource (the generic BeforeUpdate, then the CRD strategy), so
            // each such cause is listed twice; the message names it once.
            errs.extend(update_errs.iter().cloned());
            errs.extend(update_errs);
        }
        errs.extend(validate_against_schema(obj, &self.schema));
        if errs.is_empty() {
            errs.extend(self.kind.validate(obj));
        }
        if errs.is_empty() {
            return Ok(());
        }
        let name =
            meta_str(obj, "name").filter(|n| !n.is_empty()).or_else(|| meta_str(obj, "generateName")).unwrap_or("");
        Err(self.invalid(name, &errs))
    }

    /// Puts the URL's namespace and name into an object written to that URL
    /// (update, apply), refusing different ones.
    fn settle_identity(&self, obj: &mut Value, ns: &str, name: &str) -> ApiResult<()> {
        if obj.get("metadata").is_none() {
            obj["metadata"] = json!({});
        }
        self.settle_namespace(obj, ns)?;
        match meta_str(obj, "name") {
            Some(n) if n == name => Ok(()),
            None | Some("") => {
                meta_mut(obj)?.insert("name".into(), json!(name));
                Ok(())
            }
            Some(n) => Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            ))),
        }
    }

    /// Puts the URL's namespace into the object, refusing a different one.
    fn settle_namespace(&self, obj: &mut Value, ns: &str) -> ApiResult<()> {
        if !self.kind.namespaced() {
            return Ok(());
        }
        let meta = meta_mut(obj)?;
        match meta.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("namespace".into(), json!(ns));
                Ok(())
            }
            Some(body_ns) if body_ns == ns => Ok(()),
            Some(_) => Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            )),
        }
    }

    /// POST: `raw` is the body as sent, `body` the JSON it converts to.
    pub async fn create(
        &self,
        ns: &str,
        raw: &[u8],
        body: &JsonBody<'_>,
        wopts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        let mut warnings = Vec::new();
        // An empty body fails decoding like any other undecodable one, as in kube.
        let obj = self.decode_object(raw, body, wopts, &mut warnings)?;
        self.insert(ns, obj, wopts, warnings, None).await
    }

    /// Creates a decoded object: kube's create rules, managed fields tracked
    /// as an update by the writer unless an apply decided them.
    async fn insert(
        &self,
        ns: &str,
        mut obj: Value,
        wopts: &WriteOptions,
        mut warnings: Vec<String>,
        applied: Option<ManagedFields>,
    ) -> ApiResult<WriteOutcome> {
        if obj.get("metadata").is_none() {
            obj["metadata"] = json!({});
        }
        self.settle_namespace(&mut obj, ns)?;
        drop_empty_meta_fields(&mut obj);
        if let (Some(admission), true) = (&self.namespace_admission, self.kind.namespaced()) {
            // kube names the object by its generateName while it has no name.
            let shown = meta_str(&obj, "name")
                .filter(|n| !n.is_empty())
                .or_else(|| meta_str(&obj, "generateName"))
                .unwrap_or("");
            admission.admit_create(ns, self.target(shown)).await?;
        }
        if meta_str(&obj, "resourceVersion").is_some_and(|rv| !rv.is_empty()) {
            return Err(ApiError::bad_request("resourceVersion should not be set on objects to be created"));
        }
        {
            let meta = meta_mut(&mut obj)?;
            meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
            meta.insert("generation".into(), json!(1));
            for system in ["deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "resourceVersion"] {
                meta.remove(system);
            }
        }
        let sent_managed_fields = meta_mut(&mut obj)?.remove("managedFields");
        if self.kind.has_status_subresource() {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
        let generate = meta_str(&obj, "name").is_none_or(str::is_empty)
            && meta_str(&obj, "generateName").is_some_and(|g| !g.is_empty());
        for attempt in 0.. {
            if generate {
                let prefix = meta_str(&obj, "generateName").unwrap_or("").to_string();
                meta_mut(&mut obj)?.insert("name".into(), json!(format!("{prefix}{}", generate_suffix())));
            }
            let mut plain = obj.clone();
            match &applied {
                Some(managed) => set_managed_fields(&mut plain, Some(managed))?,
                None => self.track_update(
                    Part::Main,
                    &wopts.field_manager,
                    &self.empty_object(),
                    &mut plain,
                    sent_managed_fields.as_ref(),
                )?,
            }
            self.validate(&plain, None)?;
            let obj = plain;
            if attempt == 0 {
                warnings.extend(finalizer_warnings(&obj, None));
            }
            let name = meta_str(&obj, "name").unwrap_or("").to_string();
            if wopts.dry_run {
                if self.store.get(&self.key(ns, &name)).await.map_err(|e| self.store_error(&name, e))?.is_some() {
                    return Err(ApiError::already_exists(self.target(&name)));
                }
                return Ok(WriteOutcome { code: 201, body: encode_value(&obj)?, warnings });
            }
            let mut created = self.store.create(&self.key(ns, &name), obj.clone()).await;
            if matches!(created, Err(StoreError::ObjectTooLarge)) && applied.is_none() {
                // As kube-apiserver's create handler: managedFields can be
                // most of an object, and a create may be stored without them.
                let mut bare = obj;
                meta_mut(&mut bare)?.remove("managedFields");
                created = self.store.create(&self.key(ns, &name), bare).await;
            }
            match created {
                Ok(stored) => return Ok(WriteOutcome { code: 201, body: stored.bytes.clone(), warnings }),
                Err(StoreError::AlreadyExists) if generate && attempt < WRITE_RETRIES => continue,
                Err(e) => return Err(self.store_error(&name, e)),
            }
        }
        Err(ApiError::internal("unreachable: create loop ended"))
    }

    /// PUT: a whole object with the resourceVersion it was read at.
    pub async fn update(
        &self,
        ns: &str,
        name: &str,
        part: Part,
        raw: &[u8],
        body: &JsonBody<'_>,
        wopts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        let mut warnings = Vec::new();
        let mut obj = self.decode_object(raw, body, wopts, &mut warnings)?;
        self.settle_identity(&mut obj, ns, name)?;
        let requested_rv = meta_str(&obj, "resourceVersion").unwrap_or("").to_string();
        // A uid in the body is a precondition, checked before anything else
        // about the stored object (kube's storage preconditions).
        let requested_uid = meta_str(&obj, "uid").unwrap_or("").to_string();
        let mut update_warnings = Vec::new();
        let mut out = self
            .write_current(ns, name, wopts, true, 0, |current| {
                if !requested_uid.is_empty() && *requested_uid != *current.index.uid {
                    return Err(self.failed_precondition(
                        ns,
                        name,
                        &format!(
                            "Precondition failed: UID in precondition: {requested_uid}, UID in object meta: {}",
                            current.index.uid
                        ),
                    ));
                }
                if requested_rv.is_empty() {
                    // kube's generic store names the resource where the kind
                    // belongs here (`llamas.<group> "x" is invalid`).
                    let n = self.kind.names();
                    return Err(ApiError::invalid(
                        n.group,
                        n.plural,
                        name,
                        &[FieldError::invalid_raw("metadata.resourceVersion", "0", "must be specified for an update")],
                    ));
                }
                if requested_rv != current.rv.to_string() {
                    return Err(ApiError::conflict(self.target(name), StoreError::Conflict));
                }
                update_warnings.clear();
                self.prepare_update(
                    name,
                    part,
                    current,
                    obj.clone(),
                    Fields::Update(&wopts.field_manager),
                    &mut update_warnings,
                )
            })
            .await?;
        warnings.append(&mut update_warnings);
        out.warnings.splice(0..0, warnings);
        Ok(out)
    }

    /// PATCH: applies the patch to the current object and writes the result;
    /// the store retries it on the newer state when another writer got there
    /// first (a patch that pins a resourceVersion then fails with 409).
    pub async fn patch(
        &self,
        ns: &str,
        name: &str,
        part: Part,
        patch: &crate::registry::patch::Patch,
        wopts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        let mut warnings = Vec::new();
        let mut out = self
            .write_current(ns, name, wopts, true, patch.growth_bytes(), |current| {
                warnings.clear();
                let patched = patch.apply(current.value().map_err(|e| self.store_error(name, e))?)?;
                let patched_bytes = serde_json::to_vec(&patched).map_err(ApiError::internal_error)?;
                // Under Strict, unknown or duplicate fields of the patched
                // object are kube's 422 on the field "patch", showing the
                // patched object, not a decoding 400.
                let strict = wopts.field_validation == FieldValidation::Strict;
                let lenient = WriteOptions { field_validation: FieldValidation::Warn, ..wopts.clone() };
                let mut strict_findings = Vec::new();
                let mut obj = if strict {
                    self.decode_object(&patched_bytes, &JsonBody::json(&patched_bytes), &lenient, &mut strict_findings)?
                } else {
                    self.decode_object(&patched_bytes, &JsonBody::json(&patched_bytes), wopts, &mut warnings)?
                };
                if !strict_findings.is_empty() {
                    let shown = Value::String(String::from_utf8_lossy(&patched_bytes).into_owned());
                    return Err(ApiError::invalid(
                        "",
                        "",
                        "",
                        &[FieldError::invalid(
                            "patch",
                            &shown,
                            format!("strict decoding error: {}", strict_findings.join(", ")),
                        )],
                    ));
                }
                if let Some(dups) = patch.duplicates() {
                    match wopts.field_validation {
                        FieldValidation::Ignore => {}
                        FieldValidation::Warn => warnings.extend(gojson::strict_warnings(dups, &[])),
                        FieldValidation::Strict => {
                            if let Some(e) = gojson::strict_decoding_error(dups, &[]) {
                                return Err(ApiError::bad_request(e));
                            }
                        }
                    }
                }
                self.settle_namespace(&mut obj, ns)?;
                if meta_str(&obj, "resourceVersion").is_some_and(|rv| rv != current.rv.to_string()) {
                    return Err(ApiError::conflict(self.target(name), StoreError::Conflict));
                }
                if meta_str(&obj, "name") != Some(name) {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({}) does not match the name on the URL ({name})",
                        meta_str(&obj, "name").unwrap_or("")
                    )));
                }
                self.prepare_update(name, part, current, obj, Fields::Update(&wopts.field_manager), &mut warnings)
            })
            .await?;
        out.warnings.splice(0..0, warnings);
        Ok(out)
    }

    /// Runs `decide` on the current object inside the store's
    /// read-mutate-compare-and-swap loop and writes what it decides (nothing
    /// with dry run: the would-be result is answered instead).
    ///
    /// An object too large to store is written again without its
    /// managedFields when `managed_fields_droppable` (updates and patches, not
    /// applies), as kube-apiserver's handlers do: they can be most of it.
    ///
    /// `decide` works on the stored object plus up to `growth_bytes` that the
    /// request may add beyond its body (a JSON patch's copies); when that is
    /// large it runs off the async workers, in turn (see [`heavy`]).
    async fn write_current(
        &self,
        ns: &str,
        name: &str,
        wopts: &WriteOptions,
        managed_fields_droppable: bool,
        growth_bytes: usize,
        mut decide: impl FnMut(&StoredObject) -> ApiResult<Decision> + Send,
    ) -> ApiResult<WriteOutcome> {
        let mut refused = None;
        let mut dry_run_result = None;
        let mut deleted_as = None;
        let mut drop_managed_fields = false;
        let key = self.key(ns, name);
        // A large stored object (or a patch that copies) makes the decision
        // long: the whole read-decide-write then runs off the async workers.
        let work_bytes = self.store.cached_size(&key).unwrap_or(0) + growth_bytes;
        let updated = heavy::run_async(work_bytes, async {
            loop {
                let written = self
                    .store
                    .guaranteed_update(&key, &mut |current| match decide(current) {
                        Err(e) => {
                            refused = Some(e);
                            Mutation::Abort
                        }
                        Ok(Decision::Unchanged) => Mutation::Keep,
                        Ok(decision) if wopts.dry_run => {
                            dry_run_result = Some(decision);
                            Mutation::Abort
                        }
                        Ok(Decision::Write(mut next)) => {
                            if drop_managed_fields {
                                if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                                    meta.remove("managedFields");
                                }
                            }
                            Mutation::Put(next)
                        }
                        Ok(Decision::Delete(next)) => {
                            deleted_as = Some(next);
                            Mutation::Delete
                        }
                    })
                    .await;
                match written {
                    Err(StoreError::ObjectTooLarge) if managed_fields_droppable && !drop_managed_fields => {
                        drop_managed_fields = true;
                    }
                    other => break other.map_err(|e| self.store_error(name, e)),
                }
            }
        })
        .await?;
        let body = match updated {
            // The write that removed the last finalizer answers with the
            // object as written (finalizers gone), not as it was stored.
            Updated::Deleted(stored) => match deleted_as {
                Some(next) => encode_value(&next)?,
                None => stored.bytes.clone(),
            },
            Updated::Put(stored) | Updated::Kept(stored) => stored.bytes.clone(),
            Updated::Aborted => match (refused, dry_run_result) {
                (Some(e), _) => return Err(e),
                (None, Some(Decision::Write(next) | Decision::Delete(next))) => encode_value(&next)?,
                _ => return Err(ApiError::internal("the store refused a write without a reason")),
            },
        };
        Ok(WriteOutcome { code: 200, body, warnings: Vec::new() })
    }

    /// The shared rules of update and patch for the object as it is now:
    /// kube-apiserver's BeforeUpdate (status and main resource apart,
    /// generation, system metadata), validation, no-op detection, and
    /// finalizer completion.
    fn prepare_update(
        &self,
        name: &str,
        part: Part,
        current: &StoredObject,
        new: Value,
        fields: Fields<'_>,
        warnings: &mut Vec<String>,
    ) -> ApiResult<Decision> {
        let old = current.value().map_err(|e| self.store_error(name, e))?;
        let sent_managed_fields = new.pointer("/metadata/managedFields").cloned();
        let mut next = match part {
            // /status changes status only: everything else stays as stored.
            Part::Status => {
                let mut next = old.clone();
                match new.get("status") {
                    Some(s) => next["status"] = s.clone(),
                    None => {
                        next.as_object_mut().map(|m| m.remove("status"));
                    }
                }
                next
            }
            Part::Main => {
                let mut next = new;
                if self.kind.has_status_subresource() {
                    match old.get("status") {
                        Some(s) => next["status"] = s.clone(),
                        None => {
                            next.as_object_mut().map(|m| m.remove("status"));
                        }
                    }
                }
                next
            }
        };
        {
            let old_meta = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
            if let Some(meta) = next.get_mut("metadata") {
                objectmeta::prepare_meta_for_update(meta, &old_meta);
            }
            let meta = meta_mut(&mut next)?;
            meta.remove("managedFields");
            meta.remove("selfLink");
            meta.insert("resourceVersion".into(), json!(current.rv.to_string()));
        }
        drop_empty_meta_fields(&mut next);
        match fields {
            Fields::Update(manager) => {
                self.track_update(part, manager, &old, &mut next, sent_managed_fields.as_ref())?;
            }
            Fields::Applied(managed) => set_managed_fields(&mut next, Some(&managed))?,
        }
        if part == Part::Main && spec_changed(&old, &next) {
            let generation = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0) + 1;
            meta_mut(&mut next)?.insert("generation".into(), json!(generation));
        }
        let deleting = old.pointer("/metadata/deletionTimestamp").is_some();
        self.validate(&next, Some(&old))?;
        if part == Part::Main {
            warnings.extend(finalizer_warnings(&next, Some(&old)));
        }
        if next == old {
            return Ok(Decision::Unchanged);
        }
        if deleting && finalizers(&next).is_empty() {
            // The last finalizer is gone: the object is deleted now.
            return Ok(Decision::Delete(next));
        }
        Ok(Decision::Write(next))
    }
}

/// 504 "Too large resource version", as kube-apiserver answers a read of a
/// revision it has not reached.
fn too_large_rv(e: &StoreError) -> ApiError {
    let cause = errors::cause("ResourceVersionTooLarge", "Too large resource version", "");
    let mut err = ApiError::new(504, Reason::Timeout, e.to_string())
        .with_details(StatusDetails { causes: Some(vec![cause]), ..Default::default() });
    err.retry_after = Some(1);
    err
}

/// A storage backend that did not answer in time: kube-apiserver's 504 when
/// etcd does not complete a request within its deadline.
fn storage_unavailable(why: &str) -> ApiError {
    tracing::warn!(error = why, "storage unavailable");
    let mut err = ApiError::deadline_exceeded();
    err.retry_after = Some(1);
    err
}

/// An object over the store's size limit: kube-apiserver passes etcd's
/// refusal through as an error it did not classify, a 500 with etcd's words
/// and no reason.
fn object_too_large() -> ApiError {
    ApiError::new(500, Reason::Unknown, StoreError::ObjectTooLarge.to_string())
}

fn expired_continue() -> ApiError {
    ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with_finalizers(f: &[String]) -> Value {
        json!({"metadata": {"finalizers": f}})
    }

    #[test]
    fn finalizer_warnings_name_only_added_unqualified_finalizers() {
        // Many on both sides, as an attacker's object would have them: the
        // old ones are looked up in a set (a list made this quadratic).
        let old: Vec<String> = (0..30_000).map(|i| format!("example.com/f{i}")).collect();
        let mut new = old.clone();
        new.extend(["b-plain".to_string(), "example.com/new".into(), "a-plain".into(), "orphan".into()]);
        let warnings = finalizer_warnings(&with_finalizers(&new), Some(&with_finalizers(&old)));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].starts_with("metadata.finalizers: \"a-plain\": prefer a domain-qualified"));
        assert!(warnings[1].starts_with("metadata.finalizers: \"b-plain\""));
        // Kept ones warn no more; on create every one counts.
        assert!(finalizer_warnings(&with_finalizers(&new), Some(&with_finalizers(&new))).is_empty());
        assert_eq!(finalizer_warnings(&with_finalizers(&["plain".to_string()]), None).len(), 1);
    }
}
