//! How a kind plugs into the library: it describes itself (names, scope,
//! verbs, schema, table columns, selectable fields, validation) and the
//! registry and endpoints do the rest. Nothing in this crate knows any
//! particular kind.

use crate::registry::subresource::Subresource;
use std::sync::Arc;

use serde_json::Value;

use crate::apimachinery::field_error::FieldError;
pub use crate::apimachinery::resource::{Names, Verb};
use crate::registry::conversion::Convert;

/// A column of the kind's Table view, after the Name column every kind gets.
/// Its cell is read from the object when the object is written, so tables are
/// assembled from stored cells; a `date` column's cell is a time, shown as
/// the age it has when the table is read (`5m`), as kube-apiserver shows a
/// CRD's date columns.
#[derive(Clone, Copy)]
pub struct Column {
    /// The column's header, e.g. `Message`.
    pub name: &'static str,
    /// Its type, as a CRD's printer column states it: string, integer,
    /// number, boolean, date.
    pub type_: &'static str,
    /// OpenAPI format of the type, e.g. `int64`, or "".
    pub format: &'static str,
    /// What the column shows (`kubectl explain` and the Table's definition).
    pub description: &'static str,
    /// 0 = shown by default, 1 = only with `-o wide`.
    pub priority: i32,
    /// Where the cell's value comes from.
    pub cell: Cell,
}

/// Where a column's cell comes from.
#[derive(Clone, Copy)]
pub enum Cell {
    /// Read from the object by the kind's own function
    /// (`Cell::Read(|o| o["spec"]["message"].clone())`): the value as it returns it.
    Read(fn(&Value) -> Value),
    /// A CRD printer column's JSONPath (`.spec.replicas`,
    /// `.status.conditions[?(@.type=="Ready")].status`): the first value it
    /// reaches, taken as the column's type the way kube-apiserver takes it
    /// (a number in an `integer` column is truncated, anything in a `string`
    /// column is printed as Go prints it; what does not fit is empty).
    Path(&'static str),
}

impl Column {
    /// The Age column: the object's creation time, as an age. A kind that
    /// states no columns gets it alone, as kube-apiserver serves a CRD that
    /// states no printer columns; a kind that states its own lists it where
    /// it wants it (kubectl shows it last).
    pub const AGE: Column = Column {
        name: "Age",
        type_: "date",
        format: "",
        description: AGE_DESCRIPTION,
        priority: 0,
        cell: Cell::Path(CREATION_TIMESTAMP),
    };
}

/// The path of an object's creation time.
pub(crate) const CREATION_TIMESTAMP: &str = ".metadata.creationTimestamp";

pub(crate) const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The paths of a kind's scale subresource, as a CRD's
/// `subresources.scale` states them (JSON paths such as `.spec.replicas`).
///
/// ```
/// use aggregated_apiserver::ScalePaths;
///
/// let scale = ScalePaths::new(".spec.replicas", ".status.replicas").with_label_selector(".status.selector");
/// assert_eq!(scale.spec_replicas, ".spec.replicas");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// The desired replicas, under `.spec`: the Scale's `spec.replicas`.
    pub spec_replicas: String,
    /// The observed replicas, under `.status`: the Scale's `status.replicas`.
    pub status_replicas: String,
    /// A label selector in its string form, under `.status` or `.spec`: the
    /// Scale's `status.selector`, which a HorizontalPodAutoscaler reads.
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// Replicas read and written at `spec_replicas`, observed at `status_replicas`.
    pub fn new(spec_replicas: &str, status_replicas: &str) -> Self {
        Self {
            spec_replicas: spec_replicas.to_string(),
            status_replicas: status_replicas.to_string(),
            label_selector: None,
        }
    }

    /// The selector is read at `path`.
    pub fn with_label_selector(mut self, path: &str) -> Self {
        self.label_selector = Some(path.to_string());
        self
    }
}

/// A kind served by this server: what it is called, what its objects hold,
/// and the rules a write must pass beyond its schema. Only [`Kind::names`]
/// and [`Kind::schema`] are required; see the crate's [`prelude`](crate::prelude)
/// for a whole kind and server.
pub trait Kind: Send + Sync + 'static {
    /// The names it is served under.
    fn names(&self) -> &'static Names;

    /// Whether its objects live in namespaces (true) or in the cluster.
    fn namespaced(&self) -> bool {
        true
    }

    /// The verbs it serves: [`Verb::ALL`] for a stored kind,
    /// [`Verb::READ_ONLY`] for a view.
    fn verbs(&self) -> &'static [Verb] {
        Verb::ALL
    }

    /// Whether the kind has a `/status` subresource: then the main resource
    /// ignores status changes and `/status` changes only status.
    fn has_status_subresource(&self) -> bool {
        false
    }

    /// Where its `/scale` subresource reads and writes replicas, when it has
    /// one: then `<plural>/scale` serves an `autoscaling/v1` Scale, as a
    /// CRD's scale subresource does, for `kubectl scale` and autoscalers.
    fn scale(&self) -> Option<&ScalePaths> {
        None
    }

    /// The subresources it serves with its own functions (a log that
    /// streams, ...), beyond `/status` and `/scale`.
    fn subresources(&self) -> &[Subresource] {
        &[]
    }

    /// The OpenAPI v3 schema of the whole object (structural, as a CRD's).
    fn schema(&self) -> Value;

    /// Its Table columns after Name (`kubectl get`): [`Column::AGE`] alone
    /// unless it says otherwise.
    fn columns(&self) -> &'static [Column] {
        &[Column::AGE]
    }

    /// Field paths usable in field selectors besides metadata.name and
    /// metadata.namespace, e.g. `spec.nodeName`.
    fn selectable_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// The kind's own changes to a new object before it is validated, after
    /// the generic ones (system metadata set, status dropped when there is a
    /// status subresource): defaults, fields a client may not set. As
    /// k8s.io/apiserver's `RESTCreateStrategy.PrepareForCreate`.
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// The kind's own changes to an object an update of the main resource
    /// writes, given the stored `old` one, before the generation is decided
    /// and the object validated. As `RESTUpdateStrategy.PrepareForUpdate`.
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) {}

    /// Checks beyond what the schema expresses (the schema is checked first).
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Resources, as (API group, resource), that a caller must also be allowed
    /// to read, with the same verb, namespace, name and subresource, for a
    /// read of this kind: a
    /// view of other objects must not become a way around their RBAC (the
    /// server reads them with its own credentials). For delegated authorization
    /// to check alongside the kind itself (declared now, enforced by it).
    fn also_requires(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// Why the kind cannot be served right now (answered with 503), e.g. a
    /// cache that has not synced or a missing upstream.
    fn unavailable(&self) -> Option<String> {
        None
    }

    /// Its other served versions, when it has several: each described as a
    /// kind of its own, and how objects convert between them. This kind's
    /// version is the one objects are stored in.
    fn other_versions(&self) -> Option<OtherVersions> {
        None
    }

    /// The warning every request to this version is answered with when the
    /// version is deprecated (kube's words for a deprecated CRD version:
    /// `example.com/v1 Widget is deprecated; use example.com/v2 Widget`).
    fn deprecation_warning(&self) -> Option<&str> {
        None
    }

    /// Whether it serves `verb`.
    fn supports(&self, verb: Verb) -> bool {
        self.verbs().contains(&verb)
    }
}

/// A kind's versions besides the stored one ([`Kind::other_versions`]).
#[derive(Clone)]
pub struct OtherVersions {
    /// Each version, described as a kind (same group, kind and plural).
    pub kinds: Vec<Arc<dyn Kind>>,
    /// How objects convert between every served version.
    pub convert: Arc<dyn Convert>,
}

/// Reads a dotted field path (`spec.nodeName`) of an object as a field selector
/// sees it: strings as they are, numbers and booleans as their JSON text,
/// anything missing as "".
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for part in path.split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Number(_) | Value::Bool(_) => cur.to_string(),
        _ => String::new(),
    }
}
