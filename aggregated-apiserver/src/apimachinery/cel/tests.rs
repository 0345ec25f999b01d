use serde_json::json;

use super::*;

fn env_self(schema: serde_json::Value) -> (Env, DeclType) {
    let t = DeclType::from_schema(&schema);
    (Env::new(STATIC_ESTIMATED_COST_LIMIT).variable("self", t.clone()), t)
}

fn eval(src: &str, value: serde_json::Value) -> Result<cel::Value, EvalError> {
    let string = json!({"type": "string", "maxLength": 64});
    let (env, t) = env_self(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
        "s": string, "q": string, "u": string, "ip": string, "a": {"type": "integer"},
        "l": {"type": "array", "maxItems": 10, "items": {"type": "integer"}}}}));
    let e = env.compile(src).unwrap();
    e.evaluate(&Activation::new().json("self", &value, &t), PER_CALL_LIMIT).map(|o| o.value)
}

#[test]
fn compiles_and_evaluates_with_declared_types() {
    let (env, t) = env_self(json!({"type": "object", "properties": {
        "weight": {"type": "number"}, "height": {"type": "number"}}}));
    let e = env.compile("self.weight <= 100.0 * self.height").unwrap();
    // A JSON integer where the schema says number is a double.
    let ok = json!({"weight": 100, "height": 1});
    let bad = json!({"weight": 101, "height": 1});
    assert_eq!(
        e.evaluate(&Activation::new().json("self", &ok, &t), PER_CALL_LIMIT).unwrap().value,
        cel::Value::Bool(true)
    );
    assert_eq!(
        e.evaluate(&Activation::new().json("self", &bad, &t), PER_CALL_LIMIT).unwrap().value,
        cel::Value::Bool(false)
    );
    assert!(e.uses("self") && !e.uses("oldSelf"));
    assert!(e.max_cost() < 20, "{}", e.max_cost());
}

#[test]
fn compile_errors_name_the_problem() {
    let (env, _) = env_self(json!({"type": "object", "properties": {"a": {"type": "string"}}}));
    let syntax = env.compile("self.a ==").unwrap_err();
    assert!(matches!(syntax, CompileError::Syntax(_)), "{syntax:?}");
    // Placed, with the line and a caret under the place, as cel-go shows them.
    let syntax = syntax.to_string();
    assert!(syntax.starts_with("ERROR: <input>:1:10: Syntax error: mismatched input '<EOF>'"), "{syntax}");
    assert!(syntax.ends_with("\n | self.a ==\n | .........^"), "{syntax}");
    assert_eq!(
        env.compile("other.a == 'x'").unwrap_err().to_string(),
        "ERROR: <input>:1:1: undeclared reference to 'other' (in container '')\n | other.a == 'x'\n | ^"
    );
    assert_eq!(
        env.compile("self.a == 'x' &&\n  self.b == 'x'").unwrap_err().to_string(),
        "ERROR: <input>:2:7: undefined field 'b'\n |   self.b == 'x'\n | ......^"
    );
    assert_eq!(
        env.compile("has(self.b)").unwrap_err().to_string(),
        "ERROR: <input>:1:4: undefined field 'b'\n | has(self.b)\n | ...^"
    );
    // Comprehension variables and type names are in scope.
    env.compile("[1, 2].all(x, x > 0) && type(self.a) == string").unwrap();
}

#[test]
fn unbounded_quadratic_rules_are_refused_bounded_ones_accepted() {
    let unbounded = json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"}}}});
    let (env, _) = env_self(unbounded);
    let err = env.compile("self.l.all(x, self.l.all(y, x != y || true))").unwrap_err();
    assert!(matches!(err, CompileError::CostExceeded { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with("estimated rule cost exceeds budget by factor of more than 100x (try simplifying"),
        "{err}"
    );
    let bounded = json!({"type": "object", "properties": {"l": {"type": "array", "maxItems": 100,
        "items": {"type": "string", "maxLength": 10}}}});
    let (env, _) = env_self(bounded);
    let e = env.compile("self.l.all(x, self.l.all(y, x != y || true))").unwrap();
    assert!(e.max_cost() > 10_000 && e.max_cost() < STATIC_ESTIMATED_COST_LIMIT, "{}", e.max_cost());
    // The length of a printed number is unknown to kube's estimator: a
    // concatenation with one is refused, as kube refuses it.
    let (env, _) = env_self(
        json!({"type": "object", "properties": {"n": {"type": "number"}, "s": {"type": "string", "maxLength": 9}}}),
    );
    let err = env.compile("'n is ' + string(self.n)").unwrap_err();
    assert!(err.to_string().contains("more than 100x"), "{err}");
    env.compile("'s is ' + self.s + string(self.s)").unwrap();
    // Linear in an unbounded list is fine, as in kube.
    let (env, _) =
        env_self(json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "integer"}}}}));
    env.compile("self.l.all(x, x > 0)").unwrap();
}

#[test]
fn runtime_bound_refuses_before_running() {
    // Declared as anything: the compile-time bound is generous, the values decide.
    let (env, t) = env_self(json!({"x-kubernetes-preserve-unknown-fields": true}));
    let e = Env::new(u64::MAX).variable("self", t.clone()).compile("self.l.all(x, self.l.all(y, self.l.all(z, true)))");
    let e = e.unwrap();
    let _ = env;
    let small = json!({"l": [1, 2, 3]});
    assert_eq!(
        e.evaluate(&Activation::new().json("self", &small, &t), PER_CALL_LIMIT).unwrap().value,
        cel::Value::Bool(true)
    );
    // 200^3 = 8,000,000 iterations: refused without running, in kube's words.
    let big = json!({"l": (0..200).collect::<Vec<_>>()});
    let err = e.evaluate(&Activation::new().json("self", &big, &t), PER_CALL_LIMIT).unwrap_err();
    // The bound of all 8,000,000 iterations, not the little over the limit
    // that an evaluation stopped on its way would report.
    assert!(matches!(err, EvalError::CostLimitExceeded { bound } if bound >= 200u64.pow(3)), "{err:?}");
    assert_eq!(err.to_string(), "operation cancelled: actual cost limit exceeded");
}

#[test]
fn the_bound_covers_what_map_and_filter_copy() {
    let (_, t) = env_self(json!({"x-kubernetes-preserve-unknown-fields": true}));
    let e = Env::new(u64::MAX).variable("self", t.clone()).compile("self.l.map(x, x).size() > 0").unwrap();
    // map copies its accumulator on each step here: quadratic, and so is the bound.
    let v = json!({"l": (0..2000).collect::<Vec<_>>()});
    let bound = e.cost_bound(&Activation::new().json("self", &v, &t));
    assert!(bound > 2000 * 2000 / 2, "{bound}");
}

#[test]
fn kubernetes_functions_are_there() {
    let v = json!({"s": "Hello, World", "q": "1Gi", "u": "https://example.com/x", "ip": "10.0.0.1", "l": [3, 1, 2]});
    for (src, want) in [
        ("self.s.lowerAscii() == 'hello, world'", true),
        ("self.s.split(', ').size() == 2", true),
        ("self.s.matches('^H.*d$')", true),
        ("quantity(self.q).isGreaterThan(quantity('1Mi'))", true),
        ("url(self.u).getHost() == 'example.com'", true),
        ("isIP(self.ip) && ip(self.ip).family() == 4", true),
        ("sets.contains(self.l, [1, 2])", true),
        ("self.l.sum() == 6", true),
        ("'%s-%d'.format(['a', 1]) == 'a-1'", true),
        // Doubles print as cel-go prints them (Go's %g).
        ("string(41.0) == '41' && string(40.5) == '40.5' && string(1000000.0) == '1e+06'", true),
        ("self.l.exists_one(x, x == 3)", true),
        ("self.l.filter(x, x > 1).size() == 2", true),
        ("has(self.s) && !has(self.missing)", true),
        ("optional.none().hasValue()", false),
        ("self.?s.orValue('d') == 'Hello, World'", true),
        ("optional.of(self).hasValue() && optional.of(1).value() == 1", true),
    ] {
        assert_eq!(eval(src, v.clone()), Ok(cel::Value::Bool(want)), "{src}");
    }
}

#[test]
fn evaluation_errors_read_as_cel_go() {
    let v = json!({"a": 1, "l": [], "s": "x"});
    let msg = |src| eval(src, v.clone()).unwrap_err().to_string();
    assert_eq!(msg("self.nope == 1"), "no such key: nope");
    assert_eq!(msg("self.a / 0 == 1"), "division by zero");
    assert_eq!(msg("self.a + 'x' == 1"), "no such overload");
    assert_eq!(msg("self.l[0] == 1"), "index out of bounds: 0");
    assert!(msg("self.s.matches('[')").starts_with("'[' not a valid regex"), "{}", msg("self.s.matches('[')"));
    // Compiled once, the pattern still applies to each string.
    assert_eq!(eval("self.s.matches('^x$')", v.clone()), Ok(cel::Value::Bool(true)));
    assert_eq!(eval("self.s.matches('^x$')", json!({"s": "y"})), Ok(cel::Value::Bool(false)));
    // More patterns than the cache keeps, and a long one: each still applies.
    for i in 0..40 {
        assert_eq!(
            eval(&format!("self.s.matches('^x{{{i}}}$')"), json!({"s": "x".repeat(i)})),
            Ok(cel::Value::Bool(true))
        );
    }
    let long = format!("^{}$", "x?".repeat(300));
    assert_eq!(eval(&format!("self.s.matches('{long}')"), json!({"s": "xx"})), Ok(cel::Value::Bool(true)));
}

#[test]
fn optional_bindings() {
    let t = DeclType::from_schema(&json!({"type": "string"}));
    let e = Env::new(STATIC_ESTIMATED_COST_LIMIT)
        .variable("self", t.clone())
        .variable("oldSelf", t.clone())
        .compile("!oldSelf.hasValue() || oldSelf.value() == self")
        .unwrap();
    let (a, b) = (json!("a"), json!("b"));
    let run =
        |old| e.evaluate(&Activation::new().json("self", &a, &t).optional_json("oldSelf", old, &t), PER_CALL_LIMIT);
    assert_eq!(run(None).unwrap().value, cel::Value::Bool(true));
    assert_eq!(run(Some(&a)).unwrap().value, cel::Value::Bool(true));
    assert_eq!(run(Some(&b)).unwrap().value, cel::Value::Bool(false));
}

#[test]
fn admission_style_variables() {
    // What matchConditions and policies declare: several named variables.
    let env = Env::new(STATIC_ESTIMATED_COST_LIMIT)
        .variable("object", DeclType::any())
        .variable("oldObject", DeclType::any())
        .variable("request", DeclType::any());
    let e = env.compile("request.userInfo.username != 'bob' && object.metadata.name.startsWith('x')").unwrap();
    let (obj, req, any) =
        (json!({"metadata": {"name": "xy"}}), json!({"userInfo": {"username": "al"}}), DeclType::any());
    let out = e
        .evaluate(
            &Activation::new()
                .json("object", &obj, &any)
                .json("oldObject", &Json::Null, &any)
                .json("request", &req, &any),
            PER_CALL_LIMIT,
        )
        .unwrap();
    assert_eq!(out.value, cel::Value::Bool(true));
}

#[test]
fn values_of_earlier_expressions_bind_as_variables() {
    // A policy's `variables`: evaluated once, then read by name.
    let any = DeclType::any();
    let env = Env::new(u64::MAX).variable("object", any.clone());
    let names = env.compile("object.items.map(i, i.name)").unwrap();
    let obj = json!({"items": [{"name": "a"}, {"name": "b"}]});
    let out = names.evaluate(&Activation::new().json("object", &obj, &any), PER_CALL_LIMIT).unwrap();
    let check = Env::new(u64::MAX).variable("names", any.clone()).compile("'b' in names && names.size() == 2").unwrap();
    let shape = DeclType::list(2, DeclType::string(1));
    let result = check.evaluate(&Activation::new().cel("names", out.value, shape), PER_CALL_LIMIT).unwrap();
    assert_eq!(result.value, cel::Value::Bool(true));
}

#[test]
fn string_of_a_missing_field_fails_with_the_fields_error() {
    // cel-go: `no such key: missing`; the crate's own extractor would say
    // `Missing argument or target`.
    let err = eval("string(self.missing) == 'x'", json!({})).unwrap_err();
    assert_eq!(err.to_string(), "no such key: missing");
    assert_eq!(eval("string(self.a) == '3'", json!({"a": 3})).unwrap(), cel::Value::Bool(true));
}

#[test]
fn string_of_a_bool_is_its_name() {
    assert_eq!(
        eval("string(self.a == 3) + string(false)", json!({"a": 3})).unwrap(),
        cel::Value::String("truefalse".to_string().into())
    );
}

#[test]
fn a_comprehension_guarded_by_has_costs_nothing_where_the_field_is_missing() {
    // As cel-go's runtime cost counts it: `has` is false, nothing ranges.
    let env = Env::new(u64::MAX).variable("object", DeclType::any());
    let e = env.compile("!has(object.m) || object.m.all(k, object.m.all(j, k != j || k == j))").unwrap();
    let object = json!({"name": "dolly", "labels": {"a": "b"}});
    let bound = e.cost_bound(&Activation::new().json("object", &object, &DeclType::any()));
    assert!(bound < 100, "{bound}");
}
