//! Llama: a namespaced kind this server owns and stores, with a status
//! subresource, in two versions. `v1beta1` is preferred and stored; `v1alpha`
//! is still served, and deprecated. The Rust types are both what kube-rs
//! clients use (`Api<v1beta1::Llama>`) and how the server describes the
//! kind: [`kind`] serves the CustomResourceDefinitions kube derives from
//! them, as kube-apiserver would serve one CRD of both versions, and
//! converts between them with the `From` impls below.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use aggregated_apiserver::CustomResourceKind;

// Numbers are kept as JSON numbers (f64) end to end, so what a client sends
// is what it reads back.

/// The annotation a v1alpha Llama carries its v1beta1 `spec.pasture` in, so
/// that a v1alpha client that reads, changes and writes back keeps it.
pub const PASTURE_ANNOTATION: &str = "farm.example.com/pasture";

/// What a controller last observed of the llama (the same in every version).
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

/// Llama v1beta1, the stored version: weights and heights say their units,
/// and a llama may graze on a pasture.
pub mod v1beta1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    pub use super::LlamaStatus;

    /// The desired shape of the llama.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    // Two printer columns of one type read to clippy as one attribute given twice.
    #[allow(clippy::duplicated_attributes)]
    #[kube(
        group = "farm.example.com",
        version = "v1beta1",
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
        json_path = ".spec.weightKg"
    ))]
    #[kube(printcolumn(
        name = "Height",
        type_ = "number",
        description = "Height in metres",
        json_path = ".spec.heightM"
    ))]
    #[kube(printcolumn(
        name = "Pasture",
        type_ = "string",
        description = "Where the llama grazes",
        json_path = ".spec.pasture"
    ))]
    #[kube(printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"))]
    #[serde(rename_all = "camelCase")]
    // The rules that involve several fields, or the previous object, are CEL
    // rules (`x-kubernetes-validations`) on the spec, as a CRD author writes
    // them; the server evaluates them as kube-apiserver does for the CRD.
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "!has(self.maxWeightKg) || self.weightKg <= self.maxWeightKg",
            "message": "weightKg must not exceed maxWeightKg",
            "fieldPath": ".weightKg"
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
        pub weight_kg: f64,
        /// Height in metres; a finite number greater than 0.
        #[schemars(extend("minimum" = 0, "exclusiveMinimum" = true))]
        pub height_m: f64,
        /// The most the llama may weigh, in kilograms (its feed plan's
        /// limit); the weight may not exceed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("minimum" = 0, "exclusiveMinimum" = true))]
        pub max_weight_kg: Option<f64>,
        /// The llama's ear tag: two capital letters, a dash and 1 to 6
        /// digits (`AB-1234`). Once set it may not be changed or removed.
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
        /// Where the llama grazes: a DNS label (lower-case letters, digits
        /// and dashes, at most 63, starting and ending with a letter or digit).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("maxLength" = 63, "pattern" = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
        pub pasture: Option<String>,
    }
}

/// Llama v1alpha, deprecated: served for the clients written against it;
/// its objects are stored as v1beta1.
pub mod v1alpha {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    pub use super::LlamaStatus;

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
        deprecated,
        doc = "A llama of the farm."
    )]
    #[kube(printcolumn(
        name = "Weight",
        type_ = "number",
        description = "Weight in kilograms",
        json_path = ".spec.weight"
    ))]
    #[kube(printcolumn(
        name = "Height",
        type_ = "number",
        description = "Height in metres",
        json_path = ".spec.height"
    ))]
    #[kube(printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"))]
    #[serde(rename_all = "camelCase")]
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
        /// The most the llama may weigh, in kilograms (its feed plan's
        /// limit); the weight may not exceed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("minimum" = 0, "exclusiveMinimum" = true))]
        pub max_weight: Option<f64>,
        /// The llama's ear tag: two capital letters, a dash and 1 to 6
        /// digits (`AB-1234`). Once set it may not be changed or removed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend(
            "maxLength" = 9,
            "x-kubernetes-validations" = [{
                "rule": "self.matches('^[A-Z]{2}-[0-9]{1,6}$')",
                "message": "earTag must be two capital letters, a dash and 1 to 6 digits",
                "messageExpression": "'earTag ' + self + ' is not two capital letters, a dash and 1 to 6 digits (e.g. AB-1234)'"
            }]
        ))]
        pub ear_tag: Option<String>,
    }
}

/// v1alpha to v1beta1: the fields renamed, the pasture taken out of its
/// annotation (and the annotations left out if that was the only one).
impl From<v1alpha::Llama> for v1beta1::Llama {
    fn from(old: v1alpha::Llama) -> Self {
        let mut metadata = old.metadata;
        let pasture = metadata.annotations.as_mut().and_then(|a| a.remove(PASTURE_ANNOTATION));
        if pasture.is_some() && metadata.annotations.as_ref().is_some_and(BTreeMap::is_empty) {
            metadata.annotations = None;
        }
        let spec = old.spec;
        Self {
            metadata,
            spec: v1beta1::LlamaSpec {
                weight_kg: spec.weight,
                height_m: spec.height,
                max_weight_kg: spec.max_weight,
                ear_tag: spec.ear_tag,
                pasture,
            },
            status: old.status,
        }
    }
}

/// v1beta1 to v1alpha: the fields renamed, the pasture kept in its annotation.
impl From<v1beta1::Llama> for v1alpha::Llama {
    fn from(new: v1beta1::Llama) -> Self {
        let mut metadata = new.metadata;
        let spec = new.spec;
        if let Some(pasture) = spec.pasture {
            metadata.annotations.get_or_insert_default().insert(PASTURE_ANNOTATION.into(), pasture);
        }
        Self {
            metadata,
            spec: v1alpha::LlamaSpec {
                weight: spec.weight_kg,
                height: spec.height_m,
                max_weight: spec.max_weight_kg,
                ear_tag: spec.ear_tag,
            },
            status: new.status,
        }
    }
}

/// The kind farm-apiserver serves: Llama's derived CustomResourceDefinitions,
/// v1beta1 stored and v1alpha converted, each with field selectors on its
/// weight and height (numbers, on which a CRD cannot select).
pub fn kind() -> aggregated_apiserver::Result<CustomResourceKind> {
    let v1alpha = CustomResourceKind::of::<v1alpha::Llama>()?.also_selectable(&["spec.weight", "spec.height"]);
    CustomResourceKind::of::<v1beta1::Llama>()?
        .also_selectable(&["spec.weightKg", "spec.heightM"])
        .with_version::<v1beta1::Llama, v1alpha::Llama>(v1alpha)
}

#[cfg(test)]
mod tests {
    use aggregated_apiserver::{Cell, Kind};
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    use super::*;

    const V1ALPHA: &str = "farm.example.com/v1alpha";
    const V1BETA1: &str = "farm.example.com/v1beta1";

    /// `obj` in `api_version`, converted as the server converts it.
    fn converted(obj: Value, api_version: &str) -> Value {
        let others = kind().unwrap().other_versions().expect("Llama has two versions");
        others.convert.convert(obj, api_version).unwrap()
    }

    fn llama(api_version: &str, metadata: Value, spec: Value) -> Value {
        json!({"apiVersion": api_version, "kind": "Llama", "metadata": metadata, "spec": spec})
    }

    #[test]
    fn typed_llama_round_trips_exact_numbers() {
        let v = llama(V1BETA1, json!({"name": "a", "namespace": "n"}), json!({"weightKg": 31.4, "heightM": 1.7}));
        let l: v1beta1::Llama = serde_json::from_value(v).unwrap();
        assert_eq!(l.spec.weight_kg, 31.4);
        assert_eq!(serde_json::to_string(&l.spec).unwrap(), r#"{"weightKg":31.4,"heightM":1.7}"#);
    }

    #[test]
    fn the_pasture_travels_in_an_annotation_in_v1alpha_and_nothing_else_changes() {
        let new = llama(
            V1BETA1,
            json!({"name": "a", "namespace": "n", "creationTimestamp": "2026-01-01T00:00:00Z"}),
            json!({"weightKg": 40, "heightM": 1.7, "maxWeightKg": 50.5, "earTag": "AB-1", "pasture": "north"}),
        );
        let old = converted(new.clone(), V1ALPHA);
        assert_eq!(
            old,
            llama(
                V1ALPHA,
                json!({"name": "a", "namespace": "n", "creationTimestamp": "2026-01-01T00:00:00Z",
                    "annotations": {PASTURE_ANNOTATION: "north"}}),
                json!({"weight": 40, "height": 1.7, "maxWeight": 50.5, "earTag": "AB-1"}),
            )
        );
        assert_eq!(converted(old, V1BETA1), new, "and back, the annotation gone");
        // Other annotations stay where they are.
        let annotated = llama(
            V1ALPHA,
            json!({"name": "a", "annotations": {"x": "y", PASTURE_ANNOTATION: "south"}}),
            json!({"weight": 1, "height": 1}),
        );
        let seen = converted(annotated, V1BETA1);
        assert_eq!((&seen["metadata"]["annotations"], &seen["spec"]["pasture"]), (&json!({"x": "y"}), &json!("south")));
    }

    #[test]
    fn the_rules_compile_and_say_what_they_mean_in_each_version() {
        use aggregated_apiserver::SchemaRules;
        let kind = kind().unwrap();
        let v1alpha = kind.other_versions().unwrap().kinds[0].clone();
        for (schema, api_version, (weight, max)) in [
            (kind.schema(), V1BETA1, ("weightKg", "maxWeightKg")),
            (v1alpha.schema(), V1ALPHA, ("weight", "maxWeight")),
        ] {
            let rules = SchemaRules::compile(&schema).unwrap().expect("Llama has rules");
            // Cheap: a Llama write stays small work on the async workers.
            assert!(rules.max_cost() < 100, "{}", rules.max_cost());
            let errors = |spec: Value, old: Option<Value>| -> Vec<String> {
                let old = old.map(|spec| llama(api_version, json!({"name": "a"}), spec));
                let new = llama(api_version, json!({"name": "a"}), spec);
                rules.validate(&new, old.as_ref()).errors.iter().map(|e| e.full_message()).collect()
            };
            let height = if api_version == V1BETA1 { "heightM" } else { "height" };
            let spec = |w: f64, extra: Value| {
                let mut spec = json!({weight: w, height: 1.7});
                spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
                spec
            };
            assert!(errors(spec(31.4, json!({max: 40, "earTag": "AB-1234"})), None).is_empty());
            assert_eq!(
                errors(spec(41.0, json!({max: 40.5})), None),
                [format!("spec.{weight}: Invalid value: \"object\": {weight} must not exceed {max}")]
            );
            assert_eq!(
                errors(spec(1.0, json!({"earTag": "ab-1"})), None),
                ["spec.earTag: Invalid value: \"string\": earTag ab-1 is not two capital letters, a dash and 1 to 6 digits (e.g. AB-1234)"]
            );
            let tagged = spec(1.0, json!({"earTag": "AB-1"}));
            assert!(errors(tagged.clone(), Some(spec(1.0, json!({})))).is_empty(), "set once");
            for changed in [spec(1.0, json!({"earTag": "AB-2"})), spec(1.0, json!({}))] {
                assert_eq!(
                    errors(changed, Some(tagged.clone())),
                    ["spec.earTag: Forbidden: earTag may not be changed or removed once set"]
                );
            }
        }
    }

    #[test]
    fn the_derived_definitions_say_what_a_crd_author_writes() {
        let kind = kind().unwrap();
        let names = kind.names();
        assert_eq!(
            (names.api_version(), names.kind, names.plural, names.singular, names.short_names, names.categories),
            (V1BETA1.into(), "Llama", "llamas", "llama", &["ll"][..], &["farm"][..])
        );
        assert!(kind.namespaced() && kind.has_status_subresource());
        assert_eq!(kind.deprecation_warning(), None);
        let columns: Vec<_> = kind.columns().iter().map(|c| (c.name, c.type_, c.description)).collect();
        assert_eq!(
            columns,
            [
                ("Weight", "number", "Weight in kilograms"),
                ("Height", "number", "Height in metres"),
                ("Pasture", "string", "Where the llama grazes"),
                ("Age", "date", "Custom resource definition column (in JSONPath format): .metadata.creationTimestamp"),
            ]
        );
        assert!(matches!(kind.columns()[0].cell, Cell::Path(".spec.weightKg")));
        assert_eq!(kind.selectable_fields(), ["spec.weightKg", "spec.heightM"]);

        let v1alpha = kind.other_versions().unwrap().kinds[0].clone();
        assert_eq!(v1alpha.names().api_version(), V1ALPHA);
        assert_eq!(
            v1alpha.deprecation_warning(),
            Some("farm.example.com/v1alpha Llama is deprecated; use farm.example.com/v1beta1 Llama")
        );
        assert_eq!(v1alpha.selectable_fields(), ["spec.weight", "spec.height"]);
        assert_eq!(v1alpha.columns().iter().map(|c| c.name).collect::<Vec<_>>(), ["Weight", "Height", "Age"]);

        let s = kind.schema();
        assert_eq!(
            (&s["type"], &s["description"], &s["required"]),
            (&json!("object"), &json!("A llama of the farm."), &json!(["spec"]))
        );
        let spec = &s["properties"]["spec"];
        assert_eq!(spec["description"], "The desired shape of the llama.");
        assert_eq!(spec["required"], json!(["heightM", "weightKg"]));
        for f in ["weightKg", "heightM"] {
            let p = &spec["properties"][f];
            assert_eq!(
                (&p["type"], p["minimum"].as_f64(), &p["exclusiveMinimum"]),
                (&json!("number"), Some(0.0), &json!(true))
            );
            assert!(p["description"].as_str().unwrap().ends_with("a finite number greater than 0."));
        }
        let pasture = &spec["properties"]["pasture"];
        assert_eq!(
            (&pasture["maxLength"], &pasture["pattern"]),
            (&json!(63), &json!("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))
        );
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

    /// A number as a client writes it (and as Go writes one back): an
    /// integer, or a float with a fraction.
    fn number() -> impl Strategy<Value = Value> {
        prop_oneof![(1u32..10_000).prop_map(Value::from), (0.001f64..10_000.0).prop_map(Value::from)]
    }

    fn dns_label() -> impl Strategy<Value = String> {
        "[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?"
    }

    fn annotations() -> impl Strategy<Value = Map<String, Value>> {
        proptest::collection::btree_map("[a-z]{1,6}(\\.example\\.com/[a-z]{1,6})?", "[ -~]{0,12}", 0..3)
            .prop_map(|m| m.into_iter().map(|(k, v)| (k, Value::from(v))).collect())
    }

    fn status() -> impl Strategy<Value = Option<Value>> {
        let condition =
            ("[A-Z][a-z]{1,8}", prop_oneof!["True", "False", "Unknown"], "[A-Z][a-zA-Z]{0,8}", "[ -~]{0,16}").prop_map(
                |(type_, status, reason, message)| {
                    json!({"type": type_, "status": status, "reason": reason, "message": message,
                    "lastTransitionTime": "2026-01-01T00:00:00Z"})
                },
            );
        proptest::option::of((proptest::option::of(0i64..100), proptest::collection::vec(condition, 0..3)).prop_map(
            |(generation, conditions)| {
                let mut status = Map::new();
                if let Some(g) = generation {
                    status.insert("observedGeneration".into(), g.into());
                }
                // One condition per type: the list is a map by type.
                let mut seen = std::collections::BTreeSet::new();
                let conditions: Vec<Value> =
                    conditions.into_iter().filter(|c| seen.insert(c["type"].to_string())).collect();
                if !conditions.is_empty() {
                    status.insert("conditions".into(), conditions.into());
                }
                Value::Object(status)
            },
        ))
    }

    /// A Llama of `api_version` as a client may write it, with its fields
    /// named as `names` (weight, height, max weight) says.
    fn generated(api_version: &'static str, names: [&'static str; 3]) -> impl Strategy<Value = Value> {
        (
            (number(), number(), proptest::option::of(number())),
            proptest::option::of("[A-Z]{2}-[0-9]{1,6}"),
            proptest::option::of(dns_label()),
            annotations(),
            proptest::option::of(proptest::collection::btree_map("[a-z]{1,6}", "[a-z0-9]{0,6}", 0..3)),
            status(),
        )
            .prop_map(move |((weight, height, max), ear_tag, pasture, mut annotations, labels, status)| {
                let mut spec = json!({names[0]: weight, names[1]: height});
                if let Some(max) = max {
                    spec[names[2]] = max;
                }
                if let Some(tag) = ear_tag {
                    spec["earTag"] = tag.into();
                }
                match pasture {
                    Some(p) if api_version == V1BETA1 => spec["pasture"] = p.into(),
                    Some(p) => drop(annotations.insert(PASTURE_ANNOTATION.into(), p.into())),
                    None => {}
                }
                let mut metadata = json!({"name": "a", "namespace": "n", "uid": "0d6b1f9e-7c1a-4f1e-9a5e-2b8e1c3d4f5a",
                    "resourceVersion": "7", "generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z"});
                // An empty map is what Go leaves out: a client that sends
                // one reads none back from a webhook either.
                if !annotations.is_empty() {
                    metadata["annotations"] = annotations.into();
                }
                if let Some(labels) = labels {
                    metadata["labels"] = json!(labels);
                }
                let mut obj = llama(api_version, metadata, spec);
                if let Some(status) = status {
                    obj["status"] = status;
                }
                obj
            })
    }

    proptest! {
        #[test]
        fn v1alpha_to_v1beta1_and_back_loses_nothing(old in generated(V1ALPHA, ["weight", "height", "maxWeight"])) {
            let new = converted(old.clone(), V1BETA1);
            prop_assert_eq!(&new["apiVersion"], V1BETA1);
            prop_assert!(new.pointer("/metadata/annotations/farm.example.com~1pasture").is_none());
            prop_assert_eq!(converted(new, V1ALPHA), old);
        }

        #[test]
        fn v1beta1_to_v1alpha_and_back_loses_nothing(new in generated(V1BETA1, ["weightKg", "heightM", "maxWeightKg"])) {
            let old = converted(new.clone(), V1ALPHA);
            prop_assert_eq!(&old["apiVersion"], V1ALPHA);
            prop_assert_eq!(old.pointer("/spec/weight"), new.pointer("/spec/weightKg"));
            prop_assert_eq!(converted(old, V1BETA1), new);
        }
    }
}
