//! Pruning: removing from an object what its structural schema does not
//! declare, as kube-apiserver does when it decodes a custom resource.
//! Mirrors k8s.io/apiextensions-apiserver `pkg/apiserver/schema/pruning`
//! (`PruneWithOptions`, `skipPrune`), `schema/objectmeta` (`Coerce`: unknown
//! ObjectMeta fields at the root and in embedded resources) and
//! `PruneNonNullableNullsWithoutDefaults`.

use serde_json::{Map, Value};

use super::{
    field_schema, nullable, push_index, push_key, sadditional, sflag, sget, sitems, sprop, Additional, MAX_WALK_DEPTH,
};
use crate::apimachinery::objectmeta::{MANAGED_FIELDS_ENTRY_FIELDS, OBJECT_META_FIELDS, OWNER_REFERENCE_FIELDS};

/// Fields an embedded resource (and the root) keeps whatever the schema says.
const META_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

/// Removes every field the structural schema does not declare, like kube's
/// decoder does for a custom resource, and returns the removed paths.
///
/// * Unknown `metadata` fields (not in `metav1.ObjectMeta`, or not in an owner
///   reference / managed-fields entry) come first, as kube reports them
///   (sorted here; kube lists these in document order):
///   `metadata.foo`, `metadata.ownerReferences[0].foo`.
/// * Then, sorted, what the schema does not declare (`spec.color`,
///   `status.conditions[0].foo`). At the root and in
///   `x-kubernetes-embedded-resource` objects `apiVersion`, `kind` and
///   `metadata` are always kept; `x-kubernetes-preserve-unknown-fields: true`
///   keeps unknown fields (declared ones below are still pruned);
///   `additionalProperties` with a schema prunes values by that schema, and
///   `additionalProperties: true` keeps everything below it.
/// * Then the `metadata` of embedded resources (`spec.template.metadata.foo`).
///
/// Also drops, without reporting, `null` values of fields whose schema is not
/// `nullable` and has no `default` (kube's `PruneNonNullableNullsWithoutDefaults`,
/// so `"colour": null` on a non-nullable field is as if absent).
/// A non-object `obj` is left alone.
pub fn prune_unknown_fields(obj: &mut Value, schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Value::Object(root) = obj else { return out };
    if let Some(Value::Object(meta)) = root.get_mut("metadata") {
        let mut path = String::from("metadata");
        prune_object_meta(meta, &mut path, &mut out);
        out.sort();
    }
    let mut pruned = Vec::new();
    let mut path = String::new();
    prune_node(obj, Some(schema), true, &mut path, &mut pruned, 0);
    pruned.sort();
    out.extend(pruned);
    drop_non_nullable_nulls(obj, Some(schema), 0);
    let mut path = String::new();
    coerce_embedded(obj, schema, false, &mut path, &mut out, 0);
    out
}

fn prune_object_meta(meta: &mut Map<String, Value>, path: &mut String, out: &mut Vec<String>) {
    meta.retain(|k, v| {
        if !OBJECT_META_FIELDS.contains(&k.as_str()) {
            let mark = push_key(path, k);
            out.push(path.clone());
            path.truncate(mark);
            return false;
        }
        let known = match k.as_str() {
            "ownerReferences" => OWNER_REFERENCE_FIELDS,
            "managedFields" => MANAGED_FIELDS_ENTRY_FIELDS,
            _ => return true,
        };
        if let Value::Array(items) = v {
            let mark = push_key(path, k);
            for (i, item) in items.iter_mut().enumerate() {
                if let Value::Object(fields) = item {
                    let imark = push_index(path, i);
                    fields.retain(|fk, _| {
                        if known.contains(&fk.as_str()) {
                            true
                        } else {
                            let fmark = push_key(path, fk);
                            out.push(path.clone());
                            path.truncate(fmark);
                            false
                        }
                    });
                    path.truncate(imark);
                }
            }
            path.truncate(mark);
        }
        true
    });
}

/// kube's `pruning.prune`: `embedded` is true at the root and for
/// `x-kubernetes-embedded-resource` schemas.
fn prune_node(
    x: &mut Value,
    s: Option<&Value>,
    embedded_root: bool,
    path: &mut String,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_WALK_DEPTH {
        return;
    }
    if let Some(s) = s {
        if sflag(s, "x-kubernetes-preserve-unknown-fields") {
            skip_prune(x, s, embedded_root, path, out, depth);
            return;
        }
    }
    match x {
        Value::Object(m) => {
            let Some(s) = s else {
                for k in m.keys() {
                    let mark = push_key(path, k);
                    out.push(path.clone());
                    path.truncate(mark);
                }
                m.clear();
                return;
            };
            let embedded = embedded_root || sflag(s, "x-kubernetes-embedded-resource");
            m.retain(|k, v| {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    return true;
                }
                let mark = push_key(path, k);
                let keep = if let Some(p) = sprop(s, k) {
                    prune_node(v, Some(p), false, path, out, depth + 1);
                    true
                } else {
                    match sadditional(s) {
                        Additional::Schema(a) => {
                            prune_node(v, Some(a), false, path, out, depth + 1);
                            true
                        }
                        Additional::Any => true,
                        Additional::Absent => {
                            out.push(path.clone());
                            false
                        }
                    }
                };
                path.truncate(mark);
                keep
            });
        }
        Value::Array(items) => {
            let it = s.and_then(sitems);
            for (i, v) in items.iter_mut().enumerate() {
                let mark = push_index(path, i);
                prune_node(v, it, false, path, out, depth + 1);
                path.truncate(mark);
            }
        }
        _ => {}
    }
}

/// kube's `pruning.skipPrune`: unknown fields stay, known ones are pruned below.
fn skip_prune(x: &mut Value, s: &Value, embedded_root: bool, path: &mut String, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_WALK_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            let embedded = embedded_root || sflag(s, "x-kubernetes-embedded-resource");
            for (k, v) in m.iter_mut() {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                let sub = match (sprop(s, k), sadditional(s)) {
                    (Some(p), _) => Some(p),
                    (None, Additional::Schema(a)) => Some(a),
                    _ => None,
                };
                if let Some(sub) = sub {
                    let mark = push_key(path, k);
                    prune_node(v, Some(sub), false, path, out, depth + 1);
                    path.truncate(mark);
                }
            }
        }
        Value::Array(items) => {
            if let Some(it) = sitems(s) {
                for (i, v) in items.iter_mut().enumerate() {
                    let mark = push_index(path, i);
                    skip_prune(v, it, false, path, out, depth + 1);
                    path.truncate(mark);
                }
            }
        }
        _ => {}
    }
}

fn has_default(s: &Value) -> bool {
    sget(s, "default").is_some_and(|d| !d.is_null())
}

/// kube's `PruneNonNullableNullsWithoutDefaults`.
fn drop_non_nullable_nulls(x: &mut Value, s: Option<&Value>, depth: usize) {
    if depth > MAX_WALK_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => m.retain(|k, v| {
            let sub = field_schema(s, k);
            if v.is_null() && sub.is_some_and(|sub| !nullable(sub) && !has_default(sub)) {
                return false;
            }
            drop_non_nullable_nulls(v, sub, depth + 1);
            true
        }),
        Value::Array(items) => {
            let it = s.and_then(sitems);
            for v in items {
                drop_non_nullable_nulls(v, it, depth + 1);
            }
        }
        _ => {}
    }
}

/// kube's `objectmeta.Coerce` (non-root): prunes the ObjectMeta of embedded resources.
fn coerce_embedded(x: &mut Value, s: &Value, is_root: bool, path: &mut String, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_WALK_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            if !is_root && sflag(s, "x-kubernetes-embedded-resource") {
                if let Some(Value::Object(meta)) = m.get_mut("metadata") {
                    let mark = push_key(path, "metadata");
                    prune_object_meta(meta, path, out);
                    path.truncate(mark);
                }
            }
            for (k, v) in m.iter_mut() {
                let Some(sub) = field_schema(Some(s), k) else { continue };
                let mark = push_key(path, k);
                coerce_embedded(v, sub, false, path, out, depth + 1);
                path.truncate(mark);
            }
        }
        Value::Array(items) => {
            if let Some(it) = sitems(s) {
                for (i, v) in items.iter_mut().enumerate() {
                    let mark = push_index(path, i);
                    coerce_embedded(v, it, false, path, out, depth + 1);
                    path.truncate(mark);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::schema::validate::validate_against_schema;
    use crate::apimachinery::test_fixtures::{msgs, widget, widget_schema};
    use serde_json::json;

    #[test]
    fn prune_widget_reports_sorted_paths_metadata_first() {
        let mut obj = widget();
        obj["extra"] = json!(1);
        obj["spec"]["color"] = json!("grey");
        obj["status"]["conditions"][0]["foo"] = json!({"deep": true});
        obj["metadata"]["foo"] = json!("x");
        obj["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "Team", "name": "f", "uid": "u", "bar": 1}]);
        obj["metadata"]["managedFields"] =
            json!([{"manager": "m", "operation": "Update", "fieldsV1": {"f:spec": {}}, "junk": 1}]);
        let removed = prune_unknown_fields(&mut obj, &widget_schema());
        assert_eq!(
            removed,
            vec![
                "metadata.foo",
                "metadata.managedFields[0].junk",
                "metadata.ownerReferences[0].bar",
                "extra",
                "spec.color",
                "status.conditions[0].foo",
            ]
        );
        let mut want = widget();
        want["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Team", "name": "f", "uid": "u"}]);
        want["metadata"]["managedFields"] =
            json!([{"manager": "m", "operation": "Update", "fieldsV1": {"f:spec": {}}}]);
        assert_eq!(obj, want);
    }

    #[test]
    fn prune_keeps_type_meta_at_root_even_if_undeclared() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        let mut obj = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"a": 1}, "b": 2});
        assert_eq!(prune_unknown_fields(&mut obj, &schema), vec!["b", "spec.a"]);
        assert_eq!(obj, json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {}}));
    }

    #[test]
    fn prune_drops_non_nullable_nulls_silently() {
        let mut obj = widget();
        obj["spec"]["weight"] = Value::Null;
        obj["spec"]["colour"] = Value::Null;
        obj["status"] = Value::Null;
        obj["unknownNull"] = Value::Null;
        let removed = prune_unknown_fields(&mut obj, &widget_schema());
        assert_eq!(removed, vec!["unknownNull"]);
        assert!(obj["spec"].get("weight").is_none());
        assert_eq!(obj["spec"]["colour"], Value::Null);
        assert!(obj.get("status").is_none());
        // the missing weight is now a Required error, as in kube
        assert_eq!(msgs(&validate_against_schema(&obj, &widget_schema())), vec!["spec.weight: Required value"]);
    }

    #[test]
    fn prune_preserve_unknown_fields() {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}}});
        let mut obj = json!({"spec": {"x": {"y": 1}, "a": {"b": "s", "c": 2}}});
        assert_eq!(prune_unknown_fields(&mut obj, &schema), vec!["spec.a.c"]);
        assert_eq!(obj, json!({"spec": {"x": {"y": 1}, "a": {"b": "s"}}}));
    }

    #[test]
    fn prune_additional_properties() {
        let schema = json!({"type": "object", "properties": {
            "byName": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "integer"}}}},
            "free": {"type": "object", "additionalProperties": true},
            "list": {"type": "array"}}});
        let mut obj =
            json!({"byName": {"k": {"v": 1, "junk": 2}}, "free": {"a": {"b": 1}}, "list": [{"a": 1}, 2, [{"b": 1}]]});
        assert_eq!(prune_unknown_fields(&mut obj, &schema), vec!["byName.k.junk", "list[0].a", "list[2][0].b"]);
        assert_eq!(obj, json!({"byName": {"k": {"v": 1}}, "free": {"a": {"b": 1}}, "list": [{}, 2, [{}]]}));
    }

    #[test]
    fn prune_embedded_resources() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}}});
        let mut obj = json!({"spec": {"template": {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1},
            "spec": {"size": 1, "extra": 2}, "other": 3}}});
        assert_eq!(
            prune_unknown_fields(&mut obj, &schema),
            vec!["spec.template.other", "spec.template.spec.extra", "spec.template.metadata.junk"]
        );
        assert_eq!(
            obj,
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"size": 1}}}})
        );
    }

    #[test]
    fn prune_tolerates_odd_inputs() {
        let mut v = json!([1, 2]);
        assert!(prune_unknown_fields(&mut v, &widget_schema()).is_empty());
        let mut v = json!({"a": 1});
        assert_eq!(prune_unknown_fields(&mut v, &json!(true)), vec!["a"]);
        let mut v = json!({"metadata": "not an object", "spec": {"weight": 1}});
        assert_eq!(prune_unknown_fields(&mut v, &json!({"properties": {"spec": "nonsense"}})), vec!["spec.weight"]);
    }
}
