//! `metadata.managedFields`: who owns which fields of an object, kept on
//! every write the way k8s.io/apiserver's field manager keeps it, and
//! server-side apply on top of it (structured-merge-diff's `Updater`).
//!
//! - An update (create, update, patch) gives its manager the fields it
//!   changed and takes them from everyone else; removed fields leave every set.
//! - An apply owns exactly the fields of its configuration; it conflicts with
//!   other managers on fields whose value it changes (unless forced, which
//!   takes them), and removes fields it applied before and no longer applies
//!   when nobody else owns them.
//! - Managers of another version of the kind own fields by that version's
//!   names: what a write changes is found for each of them in their version
//!   (the objects converted to it), as structured-merge-diff's `Updater`
//!   does with its converter.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};
use serde_json::{json, Value};

use super::fieldpath::{FieldSet, Path, PathElement};
use super::gofmt::{go_quote, is_go_printable};
use super::objectmeta::FIELD_MANAGER_MAX_LENGTH;
use super::typed::{self, Shape};

/// kube's cap on `Update` entries; older ones are merged into one bucket.
const MAX_UPDATE_MANAGERS: usize = 10;
const ANCIENT_CHANGES: &str = "ancient-changes";
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The manager whose applies take over fields of a client-side `kubectl apply`.
const KUBECTL: &str = "kubectl";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who writes: the manager name, the API version written in, the subresource.
#[derive(Debug, Clone)]
pub struct Writer {
    pub manager: String,
    pub api_version: String,
    pub subresource: String,
}

impl Writer {
    /// The manager of a write: `fieldManager`, else the User-Agent up to its
    /// first `/`, printable characters only, at most 128 bytes (kube's rule),
    /// else `unknown`.
    pub fn manager_name(field_manager: &str, user_agent: &str) -> String {
        if !field_manager.is_empty() {
            return field_manager.to_string();
        }
        let mut out = String::new();
        for c in user_agent.split('/').next().unwrap_or("").chars() {
            if !is_go_printable(c) {
                continue;
            }
            if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
                break;
            }
            out.push(c);
        }
        // What kube-apiserver records for a client that names itself nowhere.
        if out.is_empty() {
            out.push_str("unknown");
        }
        out
    }
}

#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: Operation,
    api_version: String,
    subresource: String,
    time: Option<Time>,
    set: FieldSet,
}

impl Entry {
    /// kube's manager identifier: the entry without its fields and time, and
    /// without the API version for appliers (one identity however they apply).
    fn identity(&self) -> String {
        let mut id = serde_json::Map::new();
        if !self.manager.is_empty() {
            id.insert("manager".into(), json!(self.manager));
        }
        id.insert("operation".into(), json!(self.operation.as_str()));
        if self.operation == Operation::Update && !self.api_version.is_empty() {
            id.insert("apiVersion".into(), json!(self.api_version));
        }
        if !self.subresource.is_empty() {
            id.insert("subresource".into(), json!(self.subresource));
        }
        // Field order as Go marshals ManagedFieldsEntry.
        let mut out = String::from("{");
        for key in ["manager", "operation", "apiVersion", "subresource"] {
            if let Some(v) = id.get(key) {
                if out.len() > 1 {
                    out.push(',');
                }
                out.push_str(&format!("{}:{v}", json!(key)));
            }
        }
        out.push('}');
        out
    }

    /// How conflicts name the manager (kube's printManager).
    fn describe(&self) -> String {
        let mut s = go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s = format!("{s} with subresource {}", go_quote(&self.subresource));
        }
        if self.operation == Operation::Update {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }

    fn seconds(&self) -> i64 {
        self.time.as_ref().map_or(0, |t| t.0.as_second())
    }
}

/// The managed fields of one object.
#[derive(Debug, Clone, Default)]
pub struct ManagedFields {
    entries: Vec<Entry>,
}

impl ManagedFields {
    /// Reads `metadata.managedFields` (kube's DecodeManagedFields): every
    /// entry must be a `FieldsV1` entry of operation Apply or Update.
    pub fn decode(doc: Option<&Value>) -> Result<Self, String> {
        let Some(doc) = doc.filter(|d| !d.is_null()) else {
            return Ok(Self::default());
        };
        let raw: Vec<ManagedFieldsEntry> =
            serde_json::from_value(doc.clone()).map_err(|e| format!("decoding managedFields: {e}"))?;
        let mut out = Self::default();
        // A body may carry thousands of entries: duplicates are found by a set.
        let mut identities = std::collections::HashSet::with_capacity(raw.len());
        // In the words of kube's decodeManagedFields: they reach clients in
        // the warning of managedFields that admission broke.
        for (i, e) in raw.into_iter().enumerate() {
            let operation = match e.operation.as_deref() {
                Some("Apply") => Operation::Apply,
                Some("Update") => Operation::Update,
                _ => return Err("operation must be `Apply` or `Update`".into()),
            };
            if e.api_version.as_deref().is_none_or(str::is_empty) {
                return Err("apiVersion must not be empty".into());
            }
            match e.fields_type.as_deref().unwrap_or("") {
                "FieldsV1" => {}
                "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
                other => return Err(format!("invalid fieldsType {other:?} in managed fields entry {i}")),
            }
            let set = match &e.fields_v1 {
                Some(FieldsV1(doc)) => FieldSet::from_fields_v1(doc)?,
                None => FieldSet::new(),
            };
            let entry = Entry {
                manager: e.manager.unwrap_or_default(),
                operation,
                api_version: e.api_version.unwrap_or_default(),
                subresource: e.subresource.unwrap_or_default(),
                time: e.time,
                set,
            };
            let identity = entry.identity();
            if !identities.insert(identity.clone()) {
                return Err(format!("duplicate entry for manager {identity}"));
            }
            out.entries.push(entry);
        }
        Ok(out)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Nobody owns the field at `path` any more (`spec.replicas` →
    /// `["spec", "replicas"]`); an entry left owning nothing goes.
    pub fn release(&mut self, path: &[&str]) {
        let mut released = FieldSet::new();
        released.insert(&path.iter().map(|f| PathElement::Field(f.to_string())).collect::<Vec<_>>());
        for entry in &mut self.entries {
            entry.set = entry.set.difference(&released);
        }
        self.entries.retain(|e| !e.set.is_empty());
    }

    /// The `metadata.managedFields` list, in kube's order: appliers first,
    /// then by time, manager, API version and subresource.
    pub fn encode(&self) -> Value {
        let mut entries: Vec<&Entry> = self.entries.iter().collect();
        entries.sort_by(|p, q| {
            p.operation
                .cmp(&q.operation)
                .then(p.seconds().cmp(&q.seconds()))
                .then(p.manager.cmp(&q.manager))
                .then(p.api_version.cmp(&q.api_version))
                .then(p.subresource.cmp(&q.subresource))
        });
        let list: Vec<ManagedFieldsEntry> = entries
            .into_iter()
            .map(|e| ManagedFieldsEntry {
                manager: Some(e.manager.clone()).filter(|m| !m.is_empty()),
                operation: Some(e.operation.as_str().to_string()),
                api_version: Some(e.api_version.clone()).filter(|v| !v.is_empty()),
                time: e.time.clone(),
                fields_type: Some("FieldsV1".into()),
                fields_v1: Some(FieldsV1(e.set.to_fields_v1())),
                subresource: Some(e.subresource.clone()).filter(|s| !s.is_empty()),
            })
            .collect();
        serde_json::to_value(list).unwrap_or_else(|_| json!([]))
    }

    fn position(&self, identity: &str) -> Option<usize> {
        self.entries.iter().position(|e| e.identity() == identity)
    }

    /// Takes what a write changed from every entry but `except`, and what it
    /// removed from every entry, each in the entry's version; drops emptied
    /// entries, and those of versions no longer served.
    fn take_changes(&mut self, except: Option<&str>, changes: &Changes) {
        self.entries.retain_mut(|e| {
            let version = if e.api_version.is_empty() { &changes.writer_version } else { &e.api_version };
            let Some(change) = changes.of(version) else { return false };
            if Some(e.identity().as_str()) != except {
                e.set = e.set.difference(&change.changed);
            }
            e.set = e.set.difference(&change.removed);
            !e.set.is_empty()
        });
    }

    /// Merges the oldest Update entries into `ancient-changes` buckets (one
    /// per API version) until at most ten remain, as kube does.
    ///
    /// A body may carry thousands of entries: identities are looked up in a
    /// map built once and merged entries dropped in one pass at the end (a
    /// search per merge would be quadratic: docs/performance.md, "Inputs
    /// that grow the work faster than the request").
    fn cap_update_managers(&mut self) {
        let mut updaters: Vec<(i64, String, usize)> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.operation == Operation::Update)
            .map(|(i, e)| (e.seconds(), e.identity(), i))
            .collect();
        if updaters.len() <= MAX_UPDATE_MANAGERS {
            return;
        }
        // Identities are unique (decode refuses duplicates); buckets are
        // Update entries, so the updaters are all that is looked up.
        let mut index: HashMap<String, usize> = updaters.iter().map(|(_, id, i)| (id.clone(), *i)).collect();
        // Oldest first; equal times by identity, as kube sorts them.
        updaters.sort();
        let mut merged_away = vec![false; self.entries.len()];
        let mut first_of_version: HashMap<String, usize> = HashMap::new();
        let mut count = updaters.len();
        for (_, id, i) in updaters {
            if count <= MAX_UPDATE_MANAGERS {
                break;
            }
            let version = self.entries[i].api_version.clone();
            let Some(&first) = first_of_version.get(&version) else {
                first_of_version.insert(version, i);
                continue;
            };
            merged_away[i] = true;
            index.remove(&id);
            let bucket_id = Entry {
                manager: ANCIENT_CHANGES.into(),
                operation: Operation::Update,
                api_version: version,
                subresource: String::new(),
                time: None,
                set: FieldSet::new(),
            }
            .identity();
            let b = match index.get(&bucket_id) {
                Some(&b) => b,
                None => {
                    // The first entry of this version becomes the bucket.
                    index.remove(&self.entries[first].identity());
                    self.entries[first].manager = ANCIENT_CHANGES.into();
                    self.entries[first].subresource = String::new();
                    index.insert(bucket_id, first);
                    first
                }
            };
            let merged = std::mem::take(&mut self.entries[i].set);
            self.entries[b].set = merged.union(&self.entries[b].set);
            self.entries[b].time = self.entries[i].time.clone();
            count -= 1;
        }
        let mut at = 0;
        self.entries.retain(|_| {
            at += 1;
            !merged_away[at - 1]
        });
    }
}

/// The fields no manager owns: identity and system metadata (kube's stripMeta).
fn stripped_fields() -> FieldSet {
    let mut s = FieldSet::new();
    for p in [&["apiVersion"][..], &["kind"], &["metadata"]] {
        s.insert(&Path::fields(p).0);
    }
    for f in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&Path::fields(&["metadata", f]).0);
    }
    s
}

/// How an object converts to another served version (`group/version`),
/// or why it cannot.
pub type ConvertTo = dyn Fn(Value, &str) -> Result<Value, String> + Send + Sync;

/// The served versions of a kind, for managers that wrote in another version
/// than a request's: each version's shape, and the conversion to it.
pub struct Versions {
    pub shapes: HashMap<String, Shape>,
    pub convert: Box<ConvertTo>,
}

/// What the field manager needs of a kind and an endpoint.
pub struct FieldManager<'a> {
    pub shape: &'a Shape,
    /// Fields this endpoint resets whatever is written (status for the main
    /// resource of a kind with a status subresource; spec for /status).
    pub reset: FieldSet,
    pub writer: Writer,
    /// The time the writer's entry records; none for a write through a
    /// scale subresource, whose entries kube maps back to the object without one.
    pub now: Option<Time>,
    /// The kind's versions, when it has several.
    pub versions: Option<&'a Versions>,
}

/// What a write changed (added or modified) and removed, in one version's
/// field names; endpoint resets left out.
struct Change {
    changed: FieldSet,
    removed: FieldSet,
}

/// What a write changed as each manager sees it: in the writer's version,
/// and in each other version a manager wrote in (None: a version no longer
/// served, whose managers are dropped, as kube drops them).
struct Changes {
    writer_version: String,
    own: Change,
    others: HashMap<String, Option<Change>>,
}

impl Changes {
    fn of(&self, version: &str) -> Option<&Change> {
        match self.others.get(version) {
            Some(seen) => seen.as_ref(),
            None => Some(&self.own),
        }
    }
}

impl FieldManager<'_> {
    fn entry(&self, operation: Operation, set: FieldSet) -> Entry {
        Entry {
            manager: self.writer.manager.clone(),
            operation,
            api_version: self.writer.api_version.clone(),
            subresource: self.writer.subresource.clone(),
            time: self.now.clone(),
            set,
        }
    }

    fn owned(&self, set: FieldSet) -> FieldSet {
        set.recursive_difference(&self.reset).difference(&stripped_fields())
    }

    fn change(&self, c: &typed::Comparison) -> Change {
        Change {
            changed: c.changed().recursive_difference(&self.reset),
            removed: c.removed.recursive_difference(&self.reset),
        }
    }

    /// What `live` → `new` (`c`, in the writer's version) changes for each
    /// manager of `managed`: for one of another version, the two objects
    /// are converted to it and compared there.
    fn changes(
        &self,
        managed: &ManagedFields,
        live: &Value,
        new: &Value,
        c: &typed::Comparison,
    ) -> Result<Changes, String> {
        let mut others = HashMap::new();
        if let Some(versions) = self.versions {
            for e in &managed.entries {
                let version = &e.api_version;
                if version.is_empty() || *version == self.writer.api_version || others.contains_key(version) {
                    continue;
                }
                let seen = match versions.shapes.get(version) {
                    None => None,
                    Some(shape) => {
                        let seen_in = |obj: &Value| {
                            (versions.convert)(obj.clone(), version)
                                .map_err(|e| format!("converting the object to {version}: {e}"))
                        };
                        Some(self.change(&typed::compare(&seen_in(live)?, &seen_in(new)?, shape)?))
                    }
                };
                others.insert(version.clone(), seen);
            }
        }
        Ok(Changes { writer_version: self.writer.api_version.clone(), own: self.change(c), others })
    }

    /// Records an update (create, update or patch) from `live` to `new`.
    pub fn update(&self, live: &Value, new: &Value, mut managed: ManagedFields) -> Result<ManagedFields, String> {
        let c = typed::compare(live, new, self.shape)?;
        let changes = self.changes(&managed, live, new, &c)?;
        managed.take_changes(None, &changes);
        let changed = changes.own.changed;
        let taken = self.owned(changed);
        if !taken.is_empty() {
            let mine = self.entry(Operation::Update, taken);
            match managed.position(&mine.identity()) {
                Some(i) => {
                    let previous = managed.entries.remove(i);
                    let set = mine.set.union(&previous.set);
                    managed.entries.push(Entry { set, ..mine });
                }
                None => managed.entries.push(mine),
            }
        }
        managed.cap_update_managers();
        Ok(managed)
    }

    /// Applies a configuration to the live object: the merged object and the
    /// managed fields after it, or the conflicts.
    pub fn apply(
        &self,
        live: &Value,
        config: &Value,
        mut managed: ManagedFields,
        force: bool,
    ) -> Result<(Value, ManagedFields), ApplyError> {
        let applied = self.owned(typed::field_set(config, self.shape).map_err(ApplyError::Invalid)?);
        let mut merged = typed::merge(live, config, self.shape).map_err(ApplyError::Invalid)?;
        let mut mine = self.entry(Operation::Apply, applied);
        let my_id = mine.identity();
        let previous = managed.position(&my_id).map(|i| managed.entries.remove(i));
        let last = previous.as_ref().map(|e| e.set.clone());
        mine.time = None;
        managed.entries.push(mine);
        if let Some(last) = last {
            // Fields applied before and not now go, unless someone owns them.
            let owned = managed.entries.iter().fold(FieldSet::new(), |acc, e| acc.union(&e.set));
            let mut gone = FieldSet::new();
            for path in last.paths() {
                if !owned.has_or_below(&path.0) {
                    gone.insert(&path.0);
                }
            }
            typed::remove(&mut merged, &gone, self.shape).map_err(ApplyError::Invalid)?;
        }
        let c = typed::compare(live, &merged, self.shape).map_err(ApplyError::Invalid)?;
        let changes = self.changes(&managed, live, &merged, &c).map_err(ApplyError::Invalid)?;
        let mut conflicts = Vec::new();
        for e in managed.entries.iter().filter(|e| e.identity() != my_id) {
            let Some(change) = changes.of(&e.api_version) else { continue };
            for path in e.set.intersection(&change.changed).paths() {
                conflicts.push(Conflict { manager: e.describe(), path });
            }
        }
        if !conflicts.is_empty() && !force {
            let allowed = if self.writer.manager == KUBECTL { client_side_applied(live, self.shape) } else { None };
            let remaining: Vec<Conflict> = match &allowed {
                Some(allowed) => conflicts.iter().filter(|c| !allowed.has(&c.path.0)).cloned().collect(),
                None => conflicts.clone(),
            };
            if !remaining.is_empty() {
                return Err(ApplyError::Conflicts(remaining));
            }
        }
        // The applier's time moves only when the apply changed the object.
        let time = if typed::equal(&merged, live) { previous.and_then(|e| e.time) } else { self.now.clone() };
        if let Some(i) = managed.position(&my_id) {
            managed.entries[i].time = time;
        }
        managed.take_changes(Some(&my_id), &changes);
        if self.writer.manager == KUBECTL {
            sync_last_applied(&mut merged, config);
        }
        Ok((merged, managed))
    }
}

/// The fields of a client-side `kubectl apply` (its last-applied annotation)
/// whose live values are still the ones it applied: `kubectl apply
/// --server-side` may take those over without a conflict (kube's
/// lastAppliedManager).
fn client_side_applied(live: &Value, shape: &Shape) -> Option<FieldSet> {
    let text = live.pointer("/metadata/annotations")?.get(LAST_APPLIED_ANNOTATION)?.as_str()?;
    let last: Value = serde_json::from_str(text).ok()?;
    let set = typed::field_set(&last, shape).ok()?;
    let mut allowed = FieldSet::new();
    let (mut live_values, mut last_values) = (typed::ValueLookup::new(live), typed::ValueLookup::new(&last));
    for path in set.paths() {
        let same = match (live_values.get(&path.0, shape), last_values.get(&path.0, shape)) {
            (Some(a), Some(b)) => typed::equal(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        if same {
            allowed.insert(&path.0);
        }
    }
    Some(allowed)
}

/// After a server-side apply by kubectl, an object that still carries a
/// client-side last-applied annotation gets it rewritten to the configuration
/// just applied, so that a later client-side apply computes the right diff.
fn sync_last_applied(merged: &mut Value, config: &Value) {
    let has = merged.pointer("/metadata/annotations").and_then(|a| a.get(LAST_APPLIED_ANNOTATION)).is_some();
    if !has {
        return;
    }
    let mut last = config.clone();
    if let Some(annotations) = last.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
    let text = format!("{last}\n");
    if let Some(annotations) = merged.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        annotations.insert(LAST_APPLIED_ANNOTATION.into(), Value::String(text));
    }
}

/// One field another manager owns and an apply would change.
#[derive(Debug, Clone)]
pub struct Conflict {
    /// The other manager as kube names it: `"name"`, with `using <version>`
    /// for an updater and `with subresource "status"` where there is one.
    pub manager: String,
    pub path: Path,
}

#[derive(Debug)]
pub enum ApplyError {
    Conflicts(Vec<Conflict>),
    /// The object or configuration does not fit the schema's list rules.
    Invalid(String),
}

/// kube's message for apply conflicts.
pub fn conflicts_message(conflicts: &[Conflict]) -> String {
    if let [one] = conflicts {
        return format!("Apply failed with 1 conflict: conflict with {}: {}", one.manager, one.path);
    }
    let mut by_manager: BTreeMap<&str, Vec<&Path>> = BTreeMap::new();
    for c in conflicts {
        by_manager.entry(&c.manager).or_default().push(&c.path);
    }
    let mut lines = Vec::new();
    for (manager, paths) in by_manager {
        lines.push(format!("conflicts with {manager}:"));
        lines.extend(paths.iter().map(|p| format!("- {p}")));
    }
    format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
}

/// The reset fields of a write to the main resource or to `/status`.
pub fn reset_fields(status_subresource: bool, on_status: bool) -> FieldSet {
    let mut s = FieldSet::new();
    if on_status {
        s.insert(&[PathElement::Field("spec".into())]);
    } else if status_subresource {
        s.insert(&[PathElement::Field("status".into())]);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape::of_object(&json!({
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                "spec": {"type": "object", "properties": {"weight": {"type": "number"}, "height": {"type": "number"}}},
                "status": {"type": "object", "properties": {
                    "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                        "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}}
                }}
            }
        }))
    }

    fn now() -> Time {
        serde_json::from_value(json!("2026-11-23T10:00:00Z")).unwrap()
    }

    fn manager<'a>(shape: &'a Shape, name: &str) -> FieldManager<'a> {
        FieldManager {
            shape,
            reset: reset_fields(true, false),
            writer: Writer { manager: name.into(), api_version: "g/v".into(), subresource: String::new() },
            now: Some(now()),
            versions: None,
        }
    }

    fn obj(weight: f64, height: f64) -> Value {
        json!({"apiVersion": "g/v", "kind": "L", "metadata": {"name": "a"}, "spec": {"weight": weight, "height": height}})
    }

    /// g/v2 of the kind: `spec.w` is g/v's `spec.weight`.
    fn two_versions() -> Versions {
        let v2 = Shape::of_object(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"w": {"type": "number"}, "height": {"type": "number"}}}}}));
        let convert = |mut obj: Value, to: &str| {
            let (from, into) = if to == "g/v2" { ("weight", "w") } else { ("w", "weight") };
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                if let Some(value) = spec.remove(from) {
                    spec.insert(into.into(), value);
                }
            }
            obj["apiVersion"] = json!(to);
            Ok(obj)
        };
        Versions { shapes: HashMap::from([("g/v".into(), shape()), ("g/v2".into(), v2)]), convert: Box::new(convert) }
    }

    #[test]
    fn managers_of_another_version_own_fields_by_its_names() {
        let (s, versions) = (shape(), two_versions());
        let in_v2 = |name: &str| {
            let mut m = manager(&s, name);
            m.writer.api_version = "g/v2".into();
            m.versions = Some(&versions);
            m
        };
        let in_v1 = |name: &str| FieldManager { versions: Some(&versions), ..manager(&s, name) };
        let v2 = |w: f64| json!({"apiVersion": "g/v2", "kind": "L", "metadata": {"name": "a"}, "spec": {"w": w}});
        let empty = json!({"apiVersion": "g/v2", "kind": "L"});
        let (live, managed) = in_v2("alice").apply(&empty, &v2(1.0), ManagedFields::default(), false).unwrap();
        // bob, in g/v, changes the weight alice applied as `w`: a conflict,
        // named in alice's version.
        let live_v1 = json!({"apiVersion": "g/v", "kind": "L", "metadata": {"name": "a"}, "spec": {"weight": 1.0}});
        let config = json!({"apiVersion": "g/v", "kind": "L", "metadata": {"name": "a"}, "spec": {"weight": 2.0}});
        let Err(ApplyError::Conflicts(conflicts)) = in_v1("bob").apply(&live_v1, &config, managed.clone(), false)
        else {
            panic!("a conflict across versions")
        };
        assert_eq!(conflicts_message(&conflicts), "Apply failed with 1 conflict: conflict with \"alice\": .spec.w");
        assert_eq!(live["spec"], json!({"w": 1.0}));
        // Forced, bob takes it: alice's entry, emptied, goes.
        let (_, forced) = in_v1("bob").apply(&live_v1, &config, managed.clone(), true).unwrap();
        let entries = forced.encode();
        assert_eq!(entries.as_array().unwrap().len(), 1, "{entries}");
        assert_eq!((&entries[0]["manager"], &entries[0]["apiVersion"]), (&json!("bob"), &json!("g/v")));
        // An update in g/v that removes the weight removes it from alice's set too.
        let updated = in_v1("carol")
            .update(
                &live_v1,
                &json!({"apiVersion": "g/v", "kind": "L", "metadata": {"name": "a"}, "spec": {}}),
                managed,
            )
            .unwrap();
        assert!(updated.encode().as_array().unwrap().iter().all(|e| e["manager"] != "alice"), "{}", updated.encode());
    }

    #[test]
    fn create_records_an_update_entry_like_kube() {
        let s = shape();
        let live = json!({"apiVersion": "g/v", "kind": "L"});
        let m = manager(&s, "kubectl-create").update(&live, &obj(1.0, 2.0), ManagedFields::default()).unwrap();
        assert_eq!(
            m.encode(),
            json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "g/v", "time": "2026-11-23T10:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {".": {}, "f:height": {}, "f:weight": {}}}}])
        );
    }

    #[test]
    fn apply_conflicts_then_force_takes_the_field() {
        let s = shape();
        let (a, b) = (manager(&s, "a"), manager(&s, "b"));
        let empty = json!({"apiVersion": "g/v", "kind": "L", "metadata": {"name": "a"}});
        let (live, m) = a.apply(&empty, &obj(1.0, 2.0), ManagedFields::default(), false).unwrap();
        let config = json!({"apiVersion": "g/v", "kind": "L", "metadata": {"name": "a"}, "spec": {"weight": 5}});
        let Err(ApplyError::Conflicts(c)) = b.apply(&live, &config, m.clone(), false) else { panic!("no conflict") };
        assert_eq!(conflicts_message(&c), "Apply failed with 1 conflict: conflict with \"a\": .spec.weight");
        // The same value is shared, not a conflict.
        let same = json!({"apiVersion": "g/v", "kind": "L", "metadata": {"name": "a"}, "spec": {"weight": 1.0}});
        let (_, shared) = b.apply(&live, &same, m.clone(), false).unwrap();
        assert_eq!(shared.entries.len(), 2);
        let (forced, m2) = b.apply(&live, &config, m, true).unwrap();
        assert_eq!(forced["spec"]["weight"], 5);
        let a_set = &m2.entries.iter().find(|e| e.manager == "a").unwrap().set;
        assert_eq!(a_set.to_fields_v1(), json!({"f:spec": {"f:height": {}}}));
    }

    #[test]
    fn fields_no_longer_applied_are_removed_unless_owned() {
        let s = shape();
        let a = manager(&s, "a");
        let empty = json!({"apiVersion": "g/v", "kind": "L", "metadata": {"name": "a"}});
        let mut first = obj(1.0, 2.0);
        first["metadata"]["labels"] = json!({"x": "1", "y": "2"});
        let (live, m) = a.apply(&empty, &first, ManagedFields::default(), false).unwrap();
        let mut second = obj(1.0, 2.0);
        second["metadata"]["labels"] = json!({"x": "1"});
        let (next, _) = a.apply(&live, &second, m, false).unwrap();
        assert_eq!(next["metadata"]["labels"], json!({"x": "1"}));
    }

    #[test]
    fn updates_take_fields_and_cap_at_ten_entries() {
        let s = shape();
        let mut live = json!({"apiVersion": "g/v", "kind": "L"});
        let mut m = ManagedFields::default();
        for i in 0..12 {
            let next = obj(f64::from(i) + 1.0, 2.0);
            m = manager(&s, &format!("m{i}")).update(&live, &next, m).unwrap();
            live = next;
        }
        let updaters = m.entries.iter().filter(|e| e.operation == Operation::Update).count();
        assert!(updaters <= 10, "{updaters}");
        // Only the last writer of weight owns it.
        let owners: Vec<&str> = m
            .entries
            .iter()
            .filter(|e| e.set.has(&Path::fields(&["spec", "weight"]).0))
            .map(|e| e.manager.as_str())
            .collect();
        assert_eq!(owners, ["m11"]);
    }

    #[test]
    fn manager_from_user_agent() {
        assert_eq!(Writer::manager_name("", "kubectl/v1.32.0 (linux/amd64)"), "kubectl");
        assert_eq!(Writer::manager_name("mine", "kubectl/v1"), "mine");
        assert_eq!(Writer::manager_name("", &"x".repeat(300)).len(), 128);
        assert_eq!(Writer::manager_name("", ""), "unknown");
    }

    #[test]
    fn decode_refuses_what_kube_refuses() {
        assert!(ManagedFields::decode(Some(
            &json!([{"manager": "a", "operation": "Bogus", "fieldsType": "FieldsV1"}])
        ))
        .is_err());
        assert!(ManagedFields::decode(Some(
            &json!([{"manager": "a", "operation": "Update", "fieldsType": "FieldsV2"}])
        ))
        .is_err());
        assert!(ManagedFields::decode(Some(&json!("x"))).is_err());
        assert!(ManagedFields::decode(Some(&json!([]))).unwrap().is_empty());
    }
}
