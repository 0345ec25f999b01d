//! Test fixtures shared by the apimachinery unit tests: a Widget-shaped
//! object and structural schema, field-error helpers, and the exact texts of
//! `pkg/util/validation`'s regex errors.

use serde_json::{json, Value};

use crate::apimachinery::field_error::FieldError;

pub(crate) fn widget_schema() -> Value {
    json!({"type":"object","properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},"spec":{"type":"object","required":["weight","height"],"properties":{"weight":{"type":"number","exclusiveMinimum":true,"minimum":0},"height":{"type":"number","exclusiveMinimum":true,"minimum":0},"colour":{"type":"string","nullable":true}}},"status":{"type":"object","properties":{"observedGeneration":{"type":"integer","format":"int64"},"conditions":{"type":"array","items":{"type":"object","required":["type","status"],"properties":{"type":{"type":"string"},"status":{"type":"string"},"lastTransitionTime":{"type":"string","format":"date-time"},"reason":{"type":"string"},"message":{"type":"string"}}}}}}},"required":["spec"]})
}

/// The same kind as schemars 1.x emits it: numeric `exclusiveMinimum`.
pub(crate) fn widget_schema_numeric() -> Value {
    let mut s = widget_schema();
    for f in ["weight", "height"] {
        s["properties"]["spec"]["properties"][f] = json!({"type": "number", "exclusiveMinimum": 0});
    }
    s
}

pub(crate) fn widget() -> Value {
    json!({
        "apiVersion": "example.com/v1alpha",
        "kind": "Widget",
        "metadata": {"name": "bob", "namespace": "default", "labels": {"app": "demo"}},
        "spec": {"weight": 80.5, "height": 2, "colour": "brown"},
        "status": {
            "observedGeneration": 1,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "Fed", "message": "ok"}]
        }
    })
}

pub(crate) fn msgs(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(FieldError::full_message).collect()
}

pub(crate) fn with(mut base: Value, pointer: &str, v: Value) -> Value {
    if let Some(slot) = base.pointer_mut(pointer) {
        *slot = v;
    } else {
        panic!("no {pointer}");
    }
    base
}

pub(crate) fn without(mut base: Value, parent: &str, key: &str) -> Value {
    base.pointer_mut(parent).and_then(Value::as_object_mut).map(|m| m.remove(key));
    base
}

pub(crate) const NAME_PART_REGEX_ERR: &str =
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must \
start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
pub(crate) const LABEL_VALUE_REGEX_ERR: &str =
    "a valid label must be an empty string or consist of alphanumeric characters, \
'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or \
'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
pub(crate) const SUBDOMAIN_REGEX_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used \
for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
pub(crate) const LABEL_REGEX_ERR: &str =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for \
validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
