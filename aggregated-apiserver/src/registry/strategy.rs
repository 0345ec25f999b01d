//! What happens to an object on create and update, in one place: k8s.io/apiserver's
//! `rest.BeforeCreate`/`rest.BeforeUpdate` with a custom resource's strategy
//! (apiextensions-apiserver's `customResourceStrategy`). The registry's one
//! write path calls these, in this order, for every create, update, patch and
//! apply:
//!
//! * create: system metadata set (uid, creationTimestamp, generation 1) and
//!   cleared (resourceVersion, deletionTimestamp, selfLink...), status
//!   dropped when the kind has a status subresource, the kind's own
//!   [`Kind::prepare_for_create`];
//! * update: the main resource keeps the stored status and `/status` keeps
//!   everything but status, ObjectMeta's `BeforeUpdate` rules, generation
//!   bumped when anything but metadata and status changed, the kind's own
//!   [`Kind::prepare_for_update`];
//! * both: ObjectMeta fields Go leaves out when empty are dropped; warnings
//!   for unqualified finalizers; validation is the registry's next step.

use std::collections::{BTreeSet, HashSet};

use chrono::{SecondsFormat, Utc};
use serde_json::{json, Map, Value};

use super::kind::Kind;
use super::Part;
use crate::apimachinery::errors::{ApiError, ApiResult};
use crate::apimachinery::objectmeta;
use crate::apimachinery::uid::new_uid;

/// The finalizers kube-apiserver itself adds (delete propagation): no warning for them.
const SYSTEM_FINALIZERS: &[&str] = &["orphan", "foregroundDeletion"];

pub(super) fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

pub(super) fn meta_mut(obj: &mut Value) -> ApiResult<&mut Map<String, Value>> {
    obj.get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

pub(super) fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// A new object's system metadata and status, before it is validated and
/// stored (its name, namespace and managedFields are the registry's).
pub(super) fn prepare_for_create(kind: &dyn Kind, obj: &mut Value) -> ApiResult<()> {
    drop_empty_meta_fields(obj);
    let meta = meta_mut(obj)?;
    meta.insert("uid".into(), json!(new_uid().to_string()));
    meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
    meta.insert("generation".into(), json!(1));
    for system in ["deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "resourceVersion"] {
        meta.remove(system);
    }
    if kind.has_status_subresource() {
        if let Some(m) = obj.as_object_mut() {
            m.remove("status");
        }
    }
    kind.prepare_for_create(obj);
    Ok(())
}

/// The object an update of `part` writes, from the stored `old` (at
/// `resource_version`) and the `new` one the request asks for; its
/// managedFields are the registry's to track.
pub(super) fn prepare_for_update(
    kind: &dyn Kind,
    part: Part,
    old: &Value,
    new: Value,
    resource_version: u64,
) -> ApiResult<Value> {
    let mut next = match part {
        // /status changes status only: everything else stays as stored.
        Part::Status => {
            let mut next = old.clone();
            keep_status(&mut next, new.get("status"));
            next
        }
        Part::Main | Part::Scale => {
            let mut next = new;
            if kind.has_status_subresource() {
                keep_status(&mut next, old.get("status"));
            }
            next
        }
    };
    // Read in place: a clone would copy the stored managedFields on every write.
    let no_meta = Value::Object(Map::new());
    if let Some(meta) = next.get_mut("metadata") {
        objectmeta::prepare_meta_for_update(meta, old.get("metadata").unwrap_or(&no_meta));
    }
    let meta = meta_mut(&mut next)?;
    meta.remove("managedFields");
    meta.remove("selfLink");
    meta.insert("resourceVersion".into(), json!(resource_version.to_string()));
    drop_empty_meta_fields(&mut next);
    if part != Part::Status {
        kind.prepare_for_update(&mut next, old);
        if spec_changed(old, &next) {
            let generation = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0) + 1;
            meta_mut(&mut next)?.insert("generation".into(), json!(generation));
        }
    }
    Ok(next)
}

/// kube-apiserver's warnings for a custom resource: each finalizer a write
/// adds (all of them on create, `old` None; sorted, once each) that has no `/`.
/// Only writes to the main resource warn.
pub(super) fn warnings(new: &Value, old: Option<&Value>) -> Vec<String> {
    // A set, not the list: looking each new finalizer up in the old list
    // would be quadratic in the finalizers (measured: docs/performance.md,
    // "Inputs that grow the work faster than the request").
    let before: HashSet<String> = old.map(finalizers).unwrap_or_default().into_iter().collect();
    let added: BTreeSet<String> = finalizers(new).into_iter().filter(|f| !before.contains(f)).collect();
    added
        .into_iter()
        .filter(|f| !f.contains('/') && !SYSTEM_FINALIZERS.contains(&f.as_str()))
        .map(|f| {
            format!("metadata.finalizers: {f:?}: prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers")
        })
        .collect()
}

/// Sets `obj`'s status to `status`, or removes it.
fn keep_status(obj: &mut Value, status: Option<&Value>) {
    match status {
        Some(s) => obj["status"] = s.clone(),
        None => {
            obj.as_object_mut().map(|m| m.remove("status"));
        }
    }
}

/// Drops the ObjectMeta fields Go leaves out when empty (omitempty): kube
/// decodes and stores a custom resource's metadata through the typed
/// ObjectMeta, so an empty or null `labels: {}`, `finalizers: []` or
/// `generateName: ""` is not kept.
pub(super) fn drop_empty_meta_fields(obj: &mut Value) {
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
            Value::Null => true,
            _ => false,
        };
        !(omitted_when_empty && empty)
    });
}

/// Everything but metadata and status: a change here bumps `generation`.
/// Compared in place, without cloning the fields into two maps on every write.
fn spec_changed(old: &Value, new: &Value) -> bool {
    fn spec_fields(v: &Value) -> impl Iterator<Item = (&String, &Value)> {
        v.as_object().into_iter().flatten().filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
    }
    // Keys are unique: as many fields, each equal to the old one, is the same set.
    spec_fields(old).count() != spec_fields(new).count()
        || spec_fields(new).any(|(k, v)| old.get(k.as_str()) != Some(v))
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
        let found = warnings(&with_finalizers(&new), Some(&with_finalizers(&old)));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with("metadata.finalizers: \"a-plain\": prefer a domain-qualified"));
        assert!(found[1].starts_with("metadata.finalizers: \"b-plain\""));
        // Kept ones warn no more; on create every one counts.
        assert!(warnings(&with_finalizers(&new), Some(&with_finalizers(&new))).is_empty());
        assert_eq!(warnings(&with_finalizers(&["plain".to_string()]), None).len(), 1);
    }

    #[test]
    fn only_what_is_not_metadata_or_status_changes_the_spec() {
        let old = json!({"metadata": {"name": "a"}, "spec": {"w": 1}, "status": {"x": 1}, "extra": [1]});
        let same = json!({"extra": [1], "spec": {"w": 1}, "metadata": {"name": "b"}, "status": {"x": 2}});
        assert!(!spec_changed(&old, &same));
        assert!(spec_changed(&old, &json!({"metadata": {}, "spec": {"w": 2}, "extra": [1]})));
        assert!(spec_changed(&old, &json!({"spec": {"w": 1}})), "a field removed");
        assert!(spec_changed(&old, &json!({"spec": {"w": 1}, "extra": [1], "more": true})), "a field added");
        assert!(!spec_changed(&json!(null), &json!({"metadata": {}})));
        assert!(spec_changed(&json!(null), &json!({"spec": {}})));
    }
}
