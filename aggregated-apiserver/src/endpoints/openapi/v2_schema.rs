//! A kind's schema as OpenAPI v2 can say it, as kube-apiserver publishes a
//! CRD's (apiextensions-apiserver's `ToStructuralOpenAPIV2`): v2 has no
//! `nullable` and no `allOf`/`oneOf`/`anyOf`/`not`, so a nullable node loses
//! its type and fields (any value fits), a field that may be null is no
//! longer required, and a node that keeps unknown fields says nothing of them.

use serde_json::{Map, Value};

/// Rewrites `schema` (a structural schema) for OpenAPI v2, in place.
pub(super) fn to_v2(schema: &mut Value) {
    let Value::Object(node) = schema else { return };
    for key in ["allOf", "oneOf", "anyOf", "not"] {
        node.remove(key);
    }
    let flag = |node: &Map<String, Value>, key: &str| node.get(key).and_then(Value::as_bool).unwrap_or(false);
    if flag(node, "nullable") {
        node.remove("type");
        node.remove("nullable");
        node.remove("items");
        node.remove("properties");
    }
    let preserves = flag(node, "x-kubernetes-preserve-unknown-fields");
    if preserves {
        node.remove("items");
        node.remove("properties");
    }
    let typed = |node: &Map<String, Value>, t: &str| node.get("type").and_then(Value::as_str) == Some(t);
    if (!node.contains_key("items") && typed(node, "array")) || (preserves && typed(node, "object")) {
        node.remove("type");
    }
    let nullable_fields: Vec<String> = node
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .filter(|(_, s)| s.get("nullable") == Some(&Value::Bool(true)))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Array(required)) = node.get_mut("required") {
        required.retain(|field| !field.as_str().is_some_and(|f| nullable_fields.iter().any(|n| n == f)));
        if required.is_empty() {
            node.remove("required");
        }
    }
    if node.get("additionalProperties").and_then(|a| a.get("nullable")) == Some(&Value::Bool(true)) {
        node.remove("required");
    }
    if let Some(Value::Object(props)) = node.get_mut("properties") {
        props.values_mut().for_each(to_v2);
    }
    if let Some(items) = node.get_mut("items") {
        to_v2(items);
    }
    if let Some(additional @ Value::Object(_)) = node.get_mut("additionalProperties") {
        to_v2(additional);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn what_v2_cannot_say_goes_as_kube_drops_it() {
        let mut schema = json!({
            "type": "object",
            "required": ["spec", "note"],
            "properties": {
                "spec": {"type": "object", "properties": {"tags": {"type": "array"}, "size": {"type": "integer"}}},
                "note": {"type": "string", "nullable": true},
                "status": {"type": "object", "nullable": true, "properties": {"phase": {"type": "string"}}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {}}},
                "choice": {"type": "string", "anyOf": [{"enum": ["a"]}]}
            }
        });
        to_v2(&mut schema);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "required": ["spec"],
                "properties": {
                    "spec": {"type": "object", "properties": {"tags": {}, "size": {"type": "integer"}}},
                    "note": {},
                    "status": {},
                    "extra": {"x-kubernetes-preserve-unknown-fields": true},
                    "choice": {"type": "string"}
                }
            })
        );
    }
}
