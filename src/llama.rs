//! Llama: a namespaced kind this server owns and stores, with a status
//! subresource. The Rust types are both what kube-rs clients use
//! (`Api<Llama>`) and how the server describes the kind: [`kind`] serves the
//! CustomResourceDefinition kube derives from them, as kube-apiserver would
//! serve that CRD.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use aggregated_apiserver::CustomResourceKind;

// Numbers are kept as JSON numbers (f64) end to end, so what a client sends
// is what it reads back.

/// The desired shape of the llama.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
// Two printer columns of one type read to clippy as one attribute given twice.
#[allow(clippy::duplicated_attributes)]
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
#[kube(printcolumn(
    name = "Weight",
    type_ = "number",
    description = "Weight in kilograms",
    json_path = ".spec.weight"
))]
#[kube(printcolumn(name = "Height", type_ = "number", description = "Height in metres", json_path = ".spec.height"))]
#[kube(printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"))]
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
    #[schemars(
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]),
        transform = condition_status_enum
    )]
    pub conditions: Vec<Condition>,
}

/// A condition's `status` is one of `True`, `False`, `Unknown`: metav1.Condition's
/// documented enum, which k8s-openapi's schema of it does not carry.
fn condition_status_enum(schema: &mut schemars::Schema) {
    if let Some(status) = schema.pointer_mut("/items/properties/status").and_then(|s| s.as_object_mut()) {
        status.insert("enum".into(), json!(["True", "False", "Unknown"]));
    }
}

/// The kind farm-apiserver serves: Llama's derived CustomResourceDefinition,
/// and field selectors on the weight and height (numbers, on which a CRD
/// cannot select).
pub fn kind() -> aggregated_apiserver::Result<CustomResourceKind> {
    Ok(CustomResourceKind::of::<Llama>()?.also_selectable(&["spec.weight", "spec.height"]))
}

#[cfg(test)]
mod tests {
    use aggregated_apiserver::{Cell, Kind};
    use serde_json::Value;

    use super::*;

    /// The schema kube derives for the CRD, which the kind serves.
    fn derived_schema() -> Value {
        kind().unwrap().schema()
    }

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
        let rules = SchemaRules::compile(&derived_schema()).unwrap().expect("Llama has rules");
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
    fn the_derived_definition_says_what_a_crd_author_writes() {
        let kind = kind().unwrap();
        let names = kind.names();
        assert_eq!(
            (names.api_version(), names.kind, names.plural, names.singular, names.short_names, names.categories),
            ("farm.example.com/v1alpha".into(), "Llama", "llamas", "llama", &["ll"][..], &["farm"][..])
        );
        assert!(kind.namespaced() && kind.has_status_subresource());
        let columns: Vec<_> = kind.columns().iter().map(|c| (c.name, c.type_, c.description)).collect();
        assert_eq!(
            columns,
            [
                ("Weight", "number", "Weight in kilograms"),
                ("Height", "number", "Height in metres"),
                ("Age", "date", "Custom resource definition column (in JSONPath format): .metadata.creationTimestamp"),
            ]
        );
        assert!(matches!(kind.columns()[0].cell, Cell::Path(".spec.weight")));
        assert_eq!(kind.selectable_fields(), ["spec.weight", "spec.height"]);

        let s = derived_schema();
        assert_eq!(
            (&s["type"], &s["description"], &s["required"]),
            (&json!("object"), &json!("A llama of the farm."), &json!(["spec"]))
        );
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
        let conditions = &s["properties"]["status"]["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map");
        assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
        assert_eq!(conditions["items"]["properties"]["status"]["enum"], json!(["True", "False", "Unknown"]));
        // Structural: nothing kube's CRD validation refuses.
        let text = s.to_string();
        for banned in ["$ref", "anyOf", "oneOf", "allOf"] {
            assert!(!text.contains(banned), "{banned} in {text}");
        }
    }
}
