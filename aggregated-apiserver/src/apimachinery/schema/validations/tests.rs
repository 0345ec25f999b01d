use serde_json::json;

use super::*;

fn schema(spec_rules: Value) -> Value {
    json!({"type": "object", "properties": {
        "metadata": {"type": "object"},
        "spec": {"type": "object", "x-kubernetes-validations": spec_rules, "properties": {
            "weight": {"type": "number"}, "height": {"type": "number"},
            "tag": {"type": "string", "maxLength": 16,
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "tag is immutable"}]},
            "items": {"type": "array", "maxItems": 8, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}},
                    "x-kubernetes-validations": [{"rule": "self.n >= oldSelf.n", "message": "n may not decrease"}]}}
        }}
    }})
}

fn rules(spec_rules: Value) -> SchemaRules {
    SchemaRules::compile(&schema(spec_rules)).unwrap().unwrap()
}

fn messages(r: &RuleResults) -> Vec<String> {
    r.errors.iter().map(FieldError::full_message).collect()
}

fn obj(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "x", "uid": "u"}, "spec": spec})
}

#[test]
fn failing_rules_read_as_kubes() {
    let r = rules(json!([
        {"rule": "self.weight <= 100.0 * self.height", "message": "weight must be at most 100 times the height"},
        {"rule": "self.weight > 1.0"},
        {"rule": "self.height < 5.0", "reason": "FieldValueForbidden", "message": "too tall", "fieldPath": ".height"},
        {"rule": "self.height < 5.0", "reason": "FieldValueRequired", "message": "need less"},
        {"rule": "self.height < 5.0", "reason": "FieldValueDuplicate"},
    ]));
    assert!(messages(&r.validate(&obj(json!({"weight": 2, "height": 1})), None)).is_empty());
    let out = r.validate(&obj(json!({"weight": 1, "height": 6})), None);
    assert_eq!(
        messages(&out),
        [
            "spec: Invalid value: \"object\": failed rule: self.weight > 1.0",
            "spec.height: Forbidden: too tall",
            "spec: Required value: need less",
            "spec: Duplicate value: \"object\"",
        ]
    );
    let out = r.validate(&obj(json!({"weight": 200, "height": 1})), None);
    assert_eq!(messages(&out), ["spec: Invalid value: \"object\": weight must be at most 100 times the height"]);
}

#[test]
fn transition_rules_need_an_old_value() {
    let r = rules(json!([]));
    let v1 = obj(json!({"tag": "a", "items": [{"name": "x", "n": 2}]}));
    assert!(r.validate(&v1, None).errors.is_empty(), "create: skipped");
    let v2 = obj(json!({"tag": "b", "items": [{"name": "x", "n": 1}, {"name": "y", "n": 0}]}));
    assert_eq!(
        messages(&r.validate(&v2, Some(&v1))),
        // Fields in name order (kube: in Go's map order).
        [
            "spec.items[0]: Invalid value: \"object\": n may not decrease",
            "spec.tag: Invalid value: \"string\": tag is immutable"
        ]
    );
    // Set for the first time: no old value, nothing to compare.
    let v0 = obj(json!({}));
    assert!(r.validate(&v1, Some(&v0)).errors.is_empty());
}

#[test]
fn optional_old_self_runs_on_create() {
    let r = rules(json!([{"rule": "!oldSelf.hasValue() || self.weight >= oldSelf.value().weight",
        "optionalOldSelf": true, "message": "may only grow"}, {"rule": "oldSelf.hasValue() || self.weight < 10.0",
        "optionalOldSelf": true, "message": "start small"}]));
    assert_eq!(
        messages(&r.validate(&obj(json!({"weight": 11})), None)),
        ["spec: Invalid value: \"object\": start small"]
    );
    let out = r.validate(&obj(json!({"weight": 11})), Some(&obj(json!({"weight": 12}))));
    assert_eq!(messages(&out), ["spec: Invalid value: \"object\": may only grow"]);
}

#[test]
fn message_expressions_and_their_fallbacks() {
    let r = rules(json!([
        {"rule": "self.weight < 10.0", "messageExpression": "'too heavy for ' + self.tag"},
        {"rule": "self.weight < 10.0", "message": "static", "messageExpression": "'x' + self.height"},
        {"rule": "self.weight < 10.0", "messageExpression": "'  '"},
        {"rule": "self.weight < 10.0", "messageExpression": "1"},
    ]));
    let out = r.validate(&obj(json!({"weight": 12, "tag": "t1"})), None);
    assert_eq!(
        messages(&out),
        [
            "spec: Invalid value: \"object\": too heavy for t1",
            "spec: Invalid value: \"object\": static",
            "spec: Invalid value: \"object\": failed rule: self.weight < 10.0",
            "spec: Invalid value: \"object\": failed rule: self.weight < 10.0",
        ]
    );
}

#[test]
fn unchanged_parts_ratchet_to_warnings() {
    let r = rules(json!([{"rule": "self.weight < 10.0", "message": "too heavy"}]));
    let old = obj(json!({"weight": 12, "height": 1}));
    // The spec did not change (only metadata did): a warning.
    let mut same = old.clone();
    same["metadata"]["labels"] = json!({"a": "b"});
    let out = r.validate(&same, Some(&old));
    assert!(out.errors.is_empty());
    assert_eq!(out.warnings, ["spec: Invalid value: \"object\": too heavy"]);
    let changed = obj(json!({"weight": 13, "height": 1}));
    assert_eq!(messages(&r.validate(&changed, Some(&old))), ["spec: Invalid value: \"object\": too heavy"]);
}

#[test]
fn root_rules_see_name_but_not_the_rest_of_metadata() {
    let s = json!({"type": "object", "x-kubernetes-validations": [
        {"rule": "self.metadata.name.startsWith('x')", "message": "name must start with x"},
        {"rule": "self.kind == 'K' && self.apiVersion == 'v1'"}],
        "properties": {"metadata": {"type": "object"}, "spec": {"type": "object"}}});
    let r = SchemaRules::compile(&s).unwrap().unwrap();
    assert!(r.validate(&obj(json!({})), None).errors.is_empty());
    let mut y = obj(json!({}));
    y["metadata"]["name"] = json!("y");
    assert_eq!(messages(&r.validate(&y, None)), ["<nil>: Invalid value: \"object\": name must start with x"]);
}

#[test]
fn runtime_errors_and_nulls() {
    let r = rules(json!([{"rule": "int(self.weight) / 0 > 1"}, {"rule": "self.tag + 1 == 2"}]));
    let out = r.validate(&obj(json!({"weight": 1, "tag": "a"})), None);
    assert_eq!(
        messages(&out),
        [
            "spec: Invalid value: \"object\": division by zero evaluating rule: int(self.weight) / 0 > 1",
            "spec: Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: self.tag + 1 == 2",
        ]
    );
    // A null spec is not validated.
    assert!(r.validate(&json!({"spec": null}), None).errors.is_empty());
}

#[test]
fn bad_rules_fail_compilation_with_their_place() {
    let err = |rules: Value| SchemaRules::compile(&schema(rules)).err().map(|e| e.to_string()).unwrap_or_default();
    let e = err(json!([{"rule": "self.weight <"}]));
    assert!(e.contains("openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: \"self.weight <\": compilation failed:"), "{e}");
    let e = err(json!([{"rule": "self.nope > 1"}]));
    assert!(e.contains("undefined field 'nope'"), "{e}");
    // A root rule sees metadata.name and generateName, nothing else of metadata.
    let s = json!({"type": "object", "x-kubernetes-validations": [{"rule": "!has(self.metadata.uid)"}],
        "properties": {"metadata": {"type": "object"}}});
    let e = SchemaRules::compile(&s).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("openAPIV3Schema.x-kubernetes-validations[0].rule: Invalid value: \"!has(self.metadata.uid)\": compilation failed: ERROR: <input>:1:5: undefined field 'uid'\n | !has(self.metadata.uid)\n | ....^"), "{e}");
    let e = err(json!([{"rule": "self.weight > 1.0", "optionalOldSelf": true}]));
    assert!(e.contains("x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"), "{e}");
    let e = err(json!([{"rule": "true", "reason": "Nope"}]));
    assert!(e.contains(".reason: Unsupported value: \"Nope\""), "{e}");
    let e = err(json!([{"rule": "true", "fieldPath": ".nope"}]));
    assert!(e.contains(".fieldPath: Invalid value: \".nope\": must be a valid path"), "{e}");
    // Quadratic over an unbounded list of strings.
    let s = json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x == y))"}]}}});
    let e = SchemaRules::compile(&s).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("openAPIV3Schema.properties[l].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x"), "{e}");
    // oldSelf below a list whose items cannot be correlated.
    let s = json!({"type": "object", "properties": {"l": {"type": "array",
        "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}});
    let e = SchemaRules::compile(&s).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        e.contains(
            "oldSelf cannot be used on the uncorrelatable portion of the schema within openAPIV3Schema.properties[l]"
        ),
        "{e}"
    );
}

#[test]
fn the_budget_stops_validation() {
    // 8 items × a rule of about 6 units is far under the budget; a budget
    // of a few units is not: validation stops with kube's words.
    let r = rules(json!([]));
    let v = obj(json!({"items": [{"name": "a", "n": 1}]}));
    let mut run = Run { budget: 1, out: RuleResults::default(), stopped: false };
    let corr = Correlation { old: Some(&v), update: true, correlated: true, parent_unchanged: false };
    let mut v2 = v.clone();
    v2["spec"]["items"][0]["n"] = json!(0);
    run.node(&r.root, &v2, corr, "", 0);
    assert_eq!(
        run.out.errors.iter().map(FieldError::full_message).collect::<Vec<_>>(),
        ["spec.items[0]: Invalid value: \"object\": validation failed due to running out of cost budget, no further validation rules will be run"]
    );
}

#[test]
fn embedded_resources_are_seen_as_resources() {
    let s = json!({"type": "object", "properties": {"template": {"type": "object",
        "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-validations": [{"rule": "self.kind == 'Pod' && self.metadata.name != 'x'"}]}}});
    let r = SchemaRules::compile(&s).unwrap().unwrap();
    let ok = json!({"template": {"kind": "Pod", "metadata": {"name": "y", "uid": "u"}, "spec": {}}});
    assert!(r.validate(&ok, None).errors.is_empty());
    let bad = json!({"template": {"kind": "Pod", "metadata": {"name": "x"}}});
    assert_eq!(messages(&r.validate(&bad, None)).len(), 1);
    // Its metadata has name and generateName, nothing else.
    let s = json!({"type": "object", "properties": {"template": {"type": "object",
        "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-validations": [{"rule": "has(self.metadata.uid)"}]}}});
    assert!(SchemaRules::compile(&s).is_err());
}

#[test]
fn fields_go_by_their_escaped_names() {
    let s = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"max-size": {"type": "integer"}, "namespace": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": "self.max__dash__size < 10 && self.__namespace__ != 'x'"}]}}});
    let r = SchemaRules::compile(&s).unwrap().unwrap();
    assert!(r.validate(&json!({"spec": {"max-size": 1, "namespace": "y"}}), None).errors.is_empty());
    assert_eq!(r.validate(&json!({"spec": {"max-size": 11, "namespace": "y"}}), None).errors.len(), 1);
    let raw = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"max-size": {"type": "integer"}}, "x-kubernetes-validations": [{"rule": "self.max_size == 1"}]}}});
    assert!(SchemaRules::compile(&raw).is_err());
    // A reserved word also by its own name (kube 1.31+).
    let s = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"namespace": {"type": "string"}}, "x-kubernetes-validations": [{"rule": "self.namespace == 'y'"}]}}});
    let r = SchemaRules::compile(&s).unwrap().unwrap();
    assert!(r.validate(&json!({"spec": {"namespace": "y"}}), None).errors.is_empty());
    assert_eq!(r.validate(&json!({"spec": {"namespace": "z"}}), None).errors.len(), 1);
}
