//! Structural schemas: what a custom resource's OpenAPI v3 schema says about
//! the objects of a kind, applied the way kube-apiserver applies a
//! CustomResourceDefinition's schema. Mirrors k8s.io/apiextensions-apiserver
//! `pkg/apiserver/schema` (`pruning`, `objectmeta`) and the validation
//! kube-openapi's validator performs for it.
//!
//! * [`prune`]: drop what the schema does not declare (and non-nullable
//!   `null`s), reporting the removed paths;
//! * [`validate`]: check an object against the schema, as field errors;
//! * [`validations`]: its CEL rules (`x-kubernetes-validations`).
//!
//! The schema is read as plain JSON (`serde_json::Value`): a kind hands over
//! the schema it also publishes in OpenAPI, and these helpers read the few
//! keywords the walks need.

use std::fmt::Write as _;

use serde_json::{Map, Value};

pub mod prune;
pub mod validate;
pub mod validations;

/// A kind's schema as kube-apiserver serves a CRD's: the object's
/// `apiVersion` and `kind` (strings) and `metadata` (an object) are declared at
/// the root whether or not the definition states them, so that server-side
/// apply, which reads every field from the schema, finds them.
pub fn with_object_fields(mut schema: Value) -> Value {
    if let Some(root) = schema.as_object_mut() {
        let props = root.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        if let Some(props) = props.as_object_mut() {
            for (field, type_) in [("apiVersion", "string"), ("kind", "string"), ("metadata", "object")] {
                props.entry(field).or_insert_with(|| serde_json::json!({ "type": type_ }));
            }
        }
    }
    schema
}

/// Recursion guard for the schema walks (values from
/// [`decode_json`](crate::apimachinery::gojson::decode_json) are never deeper
/// than its nesting limit; this only protects hand-built values).
pub(crate) const MAX_WALK_DEPTH: usize = 512;

// Readers of the schema keywords the walks use. A schema is whatever JSON a
// kind declared, so a malformed keyword reads as absent, never as an error.

/// What `additionalProperties` allows for undeclared keys.
pub(crate) enum Additional<'s> {
    Absent,
    Any,
    Schema(&'s Value),
}

pub(crate) fn sget<'s>(s: &'s Value, key: &str) -> Option<&'s Value> {
    s.as_object()?.get(key)
}

pub(crate) fn sflag(s: &Value, key: &str) -> bool {
    sget(s, key).and_then(Value::as_bool).unwrap_or(false)
}

pub(crate) fn sprops(s: &Value) -> Option<&Map<String, Value>> {
    sget(s, "properties")?.as_object()
}

pub(crate) fn sprop<'s>(s: &'s Value, key: &str) -> Option<&'s Value> {
    sprops(s)?.get(key)
}

pub(crate) fn sadditional(s: &Value) -> Additional<'_> {
    match sget(s, "additionalProperties") {
        Some(v @ Value::Object(_)) => Additional::Schema(v),
        Some(Value::Bool(true)) => Additional::Any,
        _ => Additional::Absent,
    }
}

pub(crate) fn sitems(s: &Value) -> Option<&Value> {
    sget(s, "items").filter(|v| v.is_object())
}

/// The schema for the value under `key` of an object with schema `s`.
pub(crate) fn field_schema<'s>(s: Option<&'s Value>, key: &str) -> Option<&'s Value> {
    let s = s?;
    if let Some(p) = sprop(s, key) {
        return Some(p);
    }
    match sadditional(s) {
        Additional::Schema(a) => Some(a),
        _ => None,
    }
}

pub(crate) fn push_key(path: &mut String, key: &str) -> usize {
    let mark = path.len();
    if mark > 0 {
        path.push('.');
    }
    path.push_str(key);
    mark
}

pub(crate) fn push_index(path: &mut String, i: usize) -> usize {
    let mark = path.len();
    let _ = write!(path, "[{i}]");
    mark
}

/// The schema's `nullable` flag.
pub(crate) fn nullable(s: &Value) -> bool {
    sflag(s, "nullable")
}
