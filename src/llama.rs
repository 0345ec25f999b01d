//! Llama: a namespaced kind this server owns and stores, with a status
//! subresource. The Rust types are what kube-rs clients use (`Api<Llama>`);
//! [`LlamaKind`] is how the server describes the kind to the machinery.

use std::sync::OnceLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::core::CustomResourceExt;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use aggregated_apiserver::{Column, FieldError, Kind, Names};

// The Rust types are the one source of the kind's schema: kube derives the
// CRD's structural OpenAPI v3 schema from them (schemars, `schema =
// "derived"`), and [`llama_schema`] adapts it for serving. Numbers are kept
// as JSON numbers (f64) end to end, so what a client sends is what it reads back.

/// The desired shape of the llama.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "farm.example.com",
    version = "v1alpha",
    kind = "Llama",
    plural = "llamas",
    namespaced,
    status = "LlamaStatus",
    shortname = "ll",
    category = "farm",
    schema = "derived",
    doc = "A llama of the farm."
)]
#[serde(rename_all = "camelCase")]
// The rules that involve several fields, or the previous object, are CEL
// rules (`x-kubernetes-validations`) on the spec, as a CRD author writes
// them; the server evaluates them as kube-apiserver does for the CRD.
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.maxWeight) || self.weight <= self.maxWeight",
        "message": "weight must not exceed maxWeight",
        "fieldPath": ".weight"
    },
    {
        "rule": "!has(oldSelf.earTag) || (has(self.earTag) && self.earTag == oldSelf.earTag)",
        "message": "earTag may not be changed or removed once set",
        "reason": "FieldValueForbidden",
        "fieldPath": ".earTag"
    }
]))]
pub struct LlamaSpec {
    /// Weight in kilograms; a finite number greater than 0.
    #[schemars(extend("minimum" = 0, "exclusiveMinimum" = true))]
    pub weight: f64,
    /// Height in metres; a finite number greater than 0.
    #[schemars(extend("minimum" = 0, "exclusiveMinimum" = true))]
    pub height: f64,
    /// The most the llama may weigh, in kilograms (its feed plan's limit);
    /// the weight may not exceed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0, "exclusiveMinimum" = true))]
    pub max_weight: Option<f64>,
    /// The llama's ear tag: two capital letters, a dash and 1 to 6 digits
    /// (`AB-1234`). Once set it may not be changed or removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "maxLength" = 9,
        "x-kubernetes-validations" = [{
            "rule": "self.matches('^[A-Z]{2}-[0-9]{1,6}$')",
            "message": "earTag must be two capital letters, a dash and 1 to 6 digits",
            // Bounded by maxLength: kube refuses a message of unbounded length.
            "messageExpression": "'earTag ' + self + ' is not two capital letters, a dash and 1 to 6 digits (e.g. AB-1234)'"
        }]
    ))]
    pub ear_tag: Option<String>,
}

/// What a controller last observed of the llama.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LlamaStatus {
    /// The generation the status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The latest observations of the llama's state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The served schema of a Llama: the structural schema kube derives for the
/// CRD from [`LlamaSpec`] and [`LlamaStatus`], adapted in one place to what
/// this server (and a CRD author) states beyond the Rust types:
///
/// - no `nullable` (kube marks `Option` fields nullable; a null there is
///   dropped as for any non-nullable field), no `default`s, no
///   `format: double` on the spec's numbers;
/// - `apiVersion`, `kind` and `metadata` declared at the root, as kube's
///   published CRD schemas show them;
/// - a condition's `status` is one of `True`, `False`, `Unknown`
///   (metav1.Condition's documented enum, which k8s-openapi does not carry).
///
/// The list-map extensions (`x-kubernetes-list-type: map`, keys `[type]`)
/// come from the Rust types and are kept for server-side apply.
pub fn llama_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let derived = Llama::crd()
            .spec
            .versions
            .first()
            .and_then(|v| v.schema.as_ref())
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or_else(|| json!({"type": "object"}));
        served_schema(derived)
    })
}

fn served_schema(mut schema: Value) -> Value {
    strip_keys(&mut schema, &["nullable", "default", "title"]);
    // schemars says `format: double` for f64; the kind never stated a format
    // (and the validator words type errors by the format when there is one).
    for field in ["weight", "height", "maxWeight"] {
        if let Some(number) =
            schema.pointer_mut(&format!("/properties/spec/properties/{field}")).and_then(Value::as_object_mut)
        {
            number.remove("format");
        }
    }
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        let mut root = Map::new();
        root.insert(
            "apiVersion".into(),
            json!({ "type": "string", "description": "APIVersion defines the versioned schema of this representation of an object." }),
        );
        root.insert(
            "kind".into(),
            json!({ "type": "string", "description": "Kind is a string value representing the REST resource this object represents." }),
        );
        root.insert("metadata".into(), json!({ "type": "object" }));
        root.append(props);
        *props = root;
    }
    if let Some(status) = schema.pointer_mut("/properties/status/properties/conditions/items/properties/status") {
        status["enum"] = json!(["True", "False", "Unknown"]);
    }
    schema
}

/// Removes `keys` from every schema node (keys of `properties` are field
/// names, not keywords, and stay).
fn strip_keys(node: &mut Value, keys: &[&str]) {
    match node {
        Value::Object(map) => {
            for key in keys {
                map.remove(*key);
            }
            for (name, child) in map.iter_mut() {
                if name == "properties" {
                    if let Value::Object(fields) = child {
                        fields.values_mut().for_each(|f| strip_keys(f, keys));
                    }
                } else if !name.starts_with("x-kubernetes-") && name != "enum" {
                    strip_keys(child, keys);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| strip_keys(i, keys)),
        _ => {}
    }
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

impl Kind for LlamaKind {
    fn names(&self) -> &'static Names {
        &NAMES
    }

    fn has_status_subresource(&self) -> bool {
        true
    }

    fn schema(&self) -> Value {
        llama_schema().clone()
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
        ["weight", "height", "maxWeight"]
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
        let tagged: LlamaSpec =
            serde_json::from_value(json!({"weight": 1, "height": 1, "maxWeight": 2, "earTag": "AB-1"})).unwrap();
        assert_eq!((tagged.max_weight, tagged.ear_tag.as_deref()), (Some(2.0), Some("AB-1")));
        assert_eq!(
            serde_json::to_string(&tagged).unwrap(),
            r#"{"weight":1.0,"height":1.0,"maxWeight":2.0,"earTag":"AB-1"}"#
        );
    }

    #[test]
    fn the_rules_compile_and_say_what_they_mean() {
        use aggregated_apiserver::SchemaRules;
        let rules = SchemaRules::compile(llama_schema()).unwrap().expect("Llama has rules");
        // Cheap: a Llama write stays small work on the async workers.
        assert!(rules.max_cost() < 100, "{}", rules.max_cost());
        let llama = |spec: Value| json!({"apiVersion": "farm.example.com/v1alpha", "kind": "Llama", "metadata": {"name": "a"}, "spec": spec});
        let errors = |new: Value, old: Option<Value>| -> Vec<String> {
            rules.validate(&llama(new), old.map(llama).as_ref()).errors.iter().map(|e| e.full_message()).collect()
        };
        assert!(errors(json!({"weight": 31.4, "height": 1.7, "maxWeight": 40, "earTag": "AB-1234"}), None).is_empty());
        assert_eq!(
            errors(json!({"weight": 41, "height": 1.7, "maxWeight": 40.5}), None),
            ["spec.weight: Invalid value: \"object\": weight must not exceed maxWeight"]
        );
        assert_eq!(
            errors(json!({"weight": 1, "height": 1, "earTag": "ab-1"}), None),
            ["spec.earTag: Invalid value: \"string\": earTag ab-1 is not two capital letters, a dash and 1 to 6 digits (e.g. AB-1234)"]
        );
        let tagged = json!({"weight": 1, "height": 1, "earTag": "AB-1"});
        assert!(errors(tagged.clone(), Some(json!({"weight": 1, "height": 1}))).is_empty(), "set once");
        for changed in [json!({"weight": 1, "height": 1, "earTag": "AB-2"}), json!({"weight": 1, "height": 1})] {
            assert_eq!(
                errors(changed, Some(tagged.clone())),
                ["spec.earTag: Forbidden: earTag may not be changed or removed once set"]
            );
        }
    }

    #[test]
    fn derived_schema_says_what_the_hand_written_one_said() {
        let s = llama_schema();
        println!("{}", serde_json::to_string_pretty(s).unwrap());
        assert_eq!(s["type"], "object");
        assert_eq!(s["description"], "A llama of the farm.");
        assert_eq!(s["required"], json!(["spec"]));
        let spec = &s["properties"]["spec"];
        assert_eq!(spec["description"], "The desired shape of the llama.");
        assert_eq!(spec["required"], json!(["height", "weight"]));
        for f in ["weight", "height"] {
            let p = &spec["properties"][f];
            assert_eq!(
                (&p["type"], p["minimum"].as_f64(), &p["exclusiveMinimum"]),
                (&json!("number"), Some(0.0), &json!(true))
            );
            assert!(p["description"].as_str().unwrap().ends_with("a finite number greater than 0."));
        }
        let status = &s["properties"]["status"];
        assert_eq!(status["description"], "What a controller last observed of the llama.");
        assert_eq!(status["properties"]["observedGeneration"]["format"], "int64");
        let conditions = &status["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map");
        assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
        let item = &conditions["items"];
        let mut required: Vec<&str> =
            item["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        required.sort();
        assert_eq!(required, ["lastTransitionTime", "message", "reason", "status", "type"]);
        assert_eq!(item["properties"]["status"]["enum"], json!(["True", "False", "Unknown"]));
        assert_eq!(item["properties"]["lastTransitionTime"]["format"], "date-time");
        assert_eq!(s["properties"]["metadata"], json!({"type": "object"}));
        // Structural: nothing kube's CRD validation refuses.
        let text = s.to_string();
        for banned in ["nullable", "$ref", "anyOf", "oneOf", "allOf", "\"default\"", "\"title\"", "double"] {
            assert!(!text.contains(banned), "{banned} in {text}");
        }
    }
}
