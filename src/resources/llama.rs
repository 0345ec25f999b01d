//! Llama: a namespaced kind this server owns and stores, with a status
//! subresource. The Rust types are what kube-rs clients use (`Api<Llama>`);
//! [`LlamaKind`] is how the server describes the kind to the machinery.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::apimachinery::field_error::FieldError;
use crate::machinery::resource::{Column, Kind, Names};

/// The desired shape of a llama. Numbers are kept as JSON numbers (f64) end to
/// end, so what a client sends is what it reads back.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "farm.example.com",
    version = "v1alpha",
    kind = "Llama",
    plural = "llamas",
    namespaced,
    status = "LlamaStatus",
    shortname = "ll",
    category = "farm",
    schema = "disabled"
)]
pub struct LlamaSpec {
    /// Weight in kilograms; a finite number greater than 0.
    pub weight: f64,
    /// Height in metres; a finite number greater than 0.
    pub height: f64,
}

/// What a controller last observed of the llama.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LlamaStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

pub struct LlamaKind;

static NAMES: Names = Names {
    group: "farm.example.com",
    version: "v1alpha",
    kind: "Llama",
    list_kind: "LlamaList",
    plural: "llamas",
    singular: "llama",
    short_names: &["ll"],
    categories: &["farm"],
};

static COLUMNS: [Column; 2] = [
    Column {
        name: "Weight",
        type_: "number",
        format: "",
        description: "Weight in kilograms",
        priority: 0,
        cell: |o| o.pointer("/spec/weight").cloned().unwrap_or(Value::Null),
    },
    Column {
        name: "Height",
        type_: "number",
        format: "",
        description: "Height in metres",
        priority: 0,
        cell: |o| o.pointer("/spec/height").cloned().unwrap_or(Value::Null),
    },
];

fn positive_number(description: &str) -> Value {
    json!({ "type": "number", "minimum": 0, "exclusiveMinimum": true, "description": description })
}

impl Kind for LlamaKind {
    fn names(&self) -> &'static Names {
        &NAMES
    }

    fn has_status_subresource(&self) -> bool {
        true
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "description": "A llama of the farm.",
            "required": ["spec"],
            "properties": {
                "apiVersion": { "type": "string", "description": "APIVersion defines the versioned schema of this representation of an object." },
                "kind": { "type": "string", "description": "Kind is a string value representing the REST resource this object represents." },
                "metadata": { "type": "object" },
                "spec": {
                    "type": "object",
                    "description": "The desired shape of the llama.",
                    "required": ["weight", "height"],
                    "properties": {
                        "weight": positive_number("Weight in kilograms; a finite number greater than 0."),
                        "height": positive_number("Height in metres; a finite number greater than 0."),
                    }
                },
                "status": {
                    "type": "object",
                    "description": "What a controller last observed of the llama.",
                    "properties": {
                        "observedGeneration": { "type": "integer", "format": "int64", "description": "The generation the status was computed for." },
                        "conditions": {
                            "type": "array",
                            "description": "The latest observations of the llama's state.",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["type"],
                            "items": {
                                "type": "object",
                                "required": ["type", "status", "lastTransitionTime", "reason", "message"],
                                "properties": {
                                    "type": { "type": "string" },
                                    "status": { "type": "string", "enum": ["True", "False", "Unknown"] },
                                    "observedGeneration": { "type": "integer", "format": "int64" },
                                    "lastTransitionTime": { "type": "string", "format": "date-time" },
                                    "reason": { "type": "string" },
                                    "message": { "type": "string" }
                                }
                            }
                        }
                    }
                }
            }
        })
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.weight", "spec.height"]
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        // JSON cannot carry NaN or infinities, but a number too large for f64
        // must not slip through as one.
        ["weight", "height"]
            .iter()
            .filter_map(|f| {
                let v = obj.pointer(&format!("/spec/{f}"))?;
                match v.as_f64() {
                    Some(x) if x.is_finite() => None,
                    _ => Some(FieldError::invalid(format!("spec.{f}"), v, "must be a finite number")),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_llama_round_trips_exact_numbers() {
        let v = json!({"apiVersion": "farm.example.com/v1alpha", "kind": "Llama",
            "metadata": {"name": "a", "namespace": "n"}, "spec": {"weight": 31.4, "height": 1.7}});
        let l: Llama = serde_json::from_value(v).unwrap();
        assert_eq!(l.spec.weight, 31.4);
        assert_eq!(serde_json::to_string(&l.spec).unwrap(), r#"{"weight":31.4,"height":1.7}"#);
    }
}
