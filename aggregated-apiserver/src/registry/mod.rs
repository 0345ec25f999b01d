//! The generic registry: Kubernetes REST semantics (metadata, resourceVersion,
//! generation, finalizers, preconditions, status subresource, dry run, paging,
//! selectors) for any [`Kind`] over any [`Store`]. The HTTP layer only parses
//! requests and encodes answers around it.
//!
//! `read.rs` serves get, list and watch; `write.rs` create, update and patch,
//! `apply.rs` server-side apply, `delete.rs` delete and deletecollection;
//! every write goes through the kind's strategy (`strategy.rs`) and its
//! validation (`validate.rs`).

mod apply;
pub mod conversion;
pub mod custom_resource;
mod delete;
pub mod encode;
pub mod kind;
mod read;
mod scale;
mod strategy;
pub mod subresource;
mod validate;
pub(crate) mod version_store;
mod write;

use read::too_large_rv;
pub use read::{Filter, WatchPlan, WatchStart};
use write::WRITE_RETRIES;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::admission::matching::Request;
use crate::admission::{Admission, Attributes, NamespaceAdmission, Operation, Requester};
use crate::apimachinery::errors::{ApiError, ApiResult, Reason, Target};
use crate::apimachinery::field_error::FieldError;
use crate::apimachinery::managed_fields::Versions;
use crate::apimachinery::schema::validations::{RuleErrors, SchemaRules};
use crate::apimachinery::schema::with_object_fields;
use crate::apimachinery::typed::Shape;

use crate::registry::conversion::Convert;
use crate::registry::encode::TableColumns;
use crate::registry::kind::Kind;
use crate::storage::{ObjectKey, Store, StoreError, StoredObject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use strategy::{meta_mut, now_rfc3339};

/// Rules estimated to cost more than this (cel-go units: some milliseconds
/// of the `cel` crate's evaluation, measured in docs/performance.md, "Heavy
/// work off the async workers") make a kind's writes heavy work.
const HEAVY_RULES_COST: u64 = 50_000;

/// One kind served from one store.
pub struct Registry {
    /// The kind served.
    pub kind: Arc<dyn Kind>,
    /// Where its objects are.
    pub store: Arc<dyn Store>,
    /// Table columns, computed once.
    pub columns: TableColumns,
    schema: Value,
    /// The schema's CEL rules, compiled once (None: it has none).
    rules: Option<SchemaRules>,
    /// The schema as server-side apply reads it (list and map types).
    shape: Shape,
    /// Checked before a create in a namespace (None: every namespace is taken
    /// to exist, as without a cluster there is no source of namespaces).
    namespace_admission: Option<Arc<dyn NamespaceAdmission>>,
    /// The mutating and validating admission plugins (webhooks, policies).
    admission: Admission,
    /// Every served version of the kind, when it has several: managers that
    /// wrote in another version own fields by its names.
    versions: Option<Arc<Versions>>,
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
    /// `/scale`: the object's desired replicas, read and written as a Scale.
    Scale,
}

impl Part {
    /// The subresource's name in a path (`""` for the object itself).
    pub fn subresource(self) -> &'static str {
        match self {
            Part::Main => "",
            Part::Status => "status",
            Part::Scale => "scale",
        }
    }
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

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

fn encode_value(v: &Value) -> ApiResult<Bytes> {
    serde_json::to_vec(v).map(Bytes::from).map_err(ApiError::internal_error)
}

impl Registry {
    /// Fails when the kind's schema has CEL rules that do not compile or
    /// may cost more than kube allows (each one named).
    pub fn new(kind: Arc<dyn Kind>, store: Arc<dyn Store>) -> crate::error::Result<Self> {
        Self::with_rules(kind, store).map_err(crate::error::Error::new)
    }

    /// [`Self::new`], failing with the schema's rules that do not compile.
    pub(crate) fn with_rules(kind: Arc<dyn Kind>, store: Arc<dyn Store>) -> Result<Self, RuleErrors> {
        let columns = TableColumns::of(kind.as_ref());
        let schema = with_object_fields(kind.schema());
        let shape = Shape::of_object(&schema);
        let rules = SchemaRules::compile(&schema)?;
        Ok(Self {
            kind,
            store,
            columns,
            schema,
            rules,
            shape,
            namespace_admission: None,
            admission: Admission::default(),
            versions: None,
        })
    }

    /// The kind's served versions: what a write changes is found for each
    /// manager in the version it wrote in.
    pub(crate) fn with_versions(mut self, versions: Arc<Versions>) -> Self {
        self.versions = Some(versions);
        self
    }

    /// The field-manager view of a kind's served versions `kinds`, converted by `convert`.
    pub(crate) fn versions_of(kinds: &[Arc<dyn Kind>], convert: Arc<dyn Convert>) -> Arc<Versions> {
        let shapes = kinds
            .iter()
            .map(|k| (k.names().api_version(), Shape::of_object(&with_object_fields(k.schema()))))
            .collect();
        Arc::new(Versions { shapes, convert: Box::new(move |obj, api_version| convert.convert(obj, api_version)) })
    }

    /// The kind's schema as it is served (see [`with_object_fields`]).
    pub(crate) fn schema(&self) -> &Value {
        &self.schema
    }

    /// Writes pass these admission plugins (webhooks, policies) too.
    pub fn with_admission(mut self, admission: Admission) -> Self {
        self.admission = admission;
        self
    }

    /// The admission plugins when one of them may act on this write (None
    /// keeps the write to one pass over the store, as without admission).
    fn admission_for(&self, operation: Operation, part: Part, ns: &str) -> Option<&Admission> {
        if self.admission.is_empty() {
            return None;
        }
        let request = Request {
            names: self.kind.names(),
            subresource: part.subresource(),
            operation,
            namespaced: self.kind.namespaced() && !ns.is_empty(),
        };
        self.admission.may_act(request).then_some(&self.admission)
    }

    /// Whether an admission plugin may act on a write to `part` in `ns` that
    /// is one of `operations`. Such a write's handler leaves the turns of its
    /// large computations (the library's `heavy` module) to the registry, which takes
    /// them around its computing steps only, never while a webhook answers.
    pub fn admits(&self, operations: &[Operation], part: Part, ns: &str) -> bool {
        operations.iter().any(|operation| self.admission_for(*operation, part, ns).is_some())
    }

    /// What admission is told of a write to this kind.
    #[allow(clippy::too_many_arguments)]
    fn attributes<'a>(
        &'a self,
        operation: Operation,
        part: Part,
        ns: &'a str,
        name: &'a str,
        object: Option<Value>,
        old_object: Option<&'a Value>,
        options: Value,
        dry_run: bool,
        user: Requester<'a>,
    ) -> Attributes<'a> {
        Attributes {
            operation,
            names: self.kind.names(),
            subresource: part.subresource(),
            scale: part == Part::Scale,
            namespace: if self.kind.namespaced() { ns } else { "" },
            name,
            object,
            old_object,
            options,
            dry_run,
            user: user.user,
            audit: user.audit,
            warnings: Vec::new(),
            audit_annotations: Vec::new(),
            shape: &self.shape,
            reinvocation: Default::default(),
        }
    }

    /// How much work a write with `input_bytes` of input is taken to be, for
    /// the library's `heavy` module: its input, or, when the kind's CEL rules may cost
    /// more than a few milliseconds, enough to run it off the async workers
    /// in turns (the rules are bounded, but up to ~1e7 units a request).
    pub fn write_work(&self, input_bytes: usize) -> usize {
        match &self.rules {
            Some(rules) if rules.max_cost() > HEAVY_RULES_COST => input_bytes.max(crate::heavy::HEAVY_BYTES),
            _ => input_bytes,
        }
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

    /// The object as stored now: what an admitted write is decided from.
    async fn stored(&self, key: &ObjectKey, name: &str) -> ApiResult<StoredObject> {
        self.store.get(key).and_then(|c| c.ok_or(StoreError::NotFound)).map_err(|e| self.store_error(name, e))
    }

    fn key(&self, ns: &str, name: &str) -> ObjectKey {
        let (ns, name) = self.key_parts(ns, name);
        ObjectKey::new(ns, name)
    }

    /// [`Self::key`], borrowed: what a read looks up.
    fn key_parts<'a>(&self, ns: &'a str, name: &'a str) -> (&'a str, &'a str) {
        (if self.kind.namespaced() { ns } else { "" }, name)
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::apimachinery::resource::{Names, TEST_NAMES as NAMES};
    use crate::registry::encode::KindIndexer;
    use crate::storage::memory::MemoryStore;

    struct Ruled(Value);

    impl Kind for Ruled {
        fn names(&self) -> &'static Names {
            &NAMES
        }
        fn schema(&self) -> Value {
            self.0.clone()
        }
    }

    fn registry(rules: Value) -> Result<Registry, RuleErrors> {
        let kind: Arc<dyn Kind> = Arc::new(Ruled(json!({"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-validations": rules,
                     "properties": {"items": {"type": "array", "items": {"type": "string"}}}}}})));
        let store = Arc::new(MemoryStore::new(Arc::new(KindIndexer(kind.clone())), 10, 10));
        Registry::with_rules(kind, store)
    }

    #[test]
    fn a_kind_whose_rules_do_not_compile_or_cost_too_much_is_refused_naming_them() {
        assert!(registry(json!([{"rule": "self.items.all(i, i.size() < 10)"}])).is_ok());
        let err = registry(json!([
            {"rule": "self.items.all(i, self.items.all(j, i == j))"},
            {"rule": "self.items.exists(i, "},
        ]))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(
            err.contains("openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x"),
            "{err}"
        );
        assert!(
            err.contains(
                "x-kubernetes-validations[1].rule: Invalid value: \"self.items.exists(i, \": compilation failed: "
            ),
            "{err}"
        );
    }

    #[test]
    fn writes_of_a_kind_with_costly_rules_are_heavy_work() {
        let cheap = registry(json!([{"rule": "self.items.size() < 10"}])).ok().unwrap();
        assert_eq!(cheap.write_work(100), 100);
        // Linear in a list that may hold a million items.
        let costly = registry(json!([{"rule": "self.items.all(i, i.size() < 10)"}])).ok().unwrap();
        assert_eq!(costly.write_work(100), crate::heavy::HEAVY_BYTES);
        assert_eq!(costly.write_work(crate::heavy::HEAVY_BYTES * 2), crate::heavy::HEAVY_BYTES * 2);
    }
}
