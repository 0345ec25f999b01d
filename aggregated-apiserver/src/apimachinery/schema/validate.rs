//! Validating an object against its structural schema, with kube-apiserver's
//! field errors and wording for custom resources. Mirrors k8s.io/kube-openapi
//! `pkg/validation/validate` (the type, format, number, string, array,
//! object and enum validators, with kube's format quirks) as
//! k8s.io/apiextensions-apiserver `pkg/apiserver/validation` turns its
//! results into field errors.

use serde_json::{Map, Number, Value};

use super::{nullable, sadditional, sflag, sget, sitems, sprop, sprops, Additional, MAX_WALK_DEPTH};
use crate::apimachinery::field_error::{FieldError, FieldErrorKind};
use crate::apimachinery::gofmt::{go_display, go_float, go_quote};
use crate::apimachinery::gojson::json_equal;

#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

fn num_of(n: &Number) -> Num {
    match n.as_i64() {
        Some(i) => Num::Int(i),
        None => Num::Float(n.as_f64().unwrap_or(0.0)),
    }
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    fn go(self) -> String {
        match self {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => go_float(f),
        }
    }
}

/// `swag.IsFloat64AJSONInteger`.
fn float_is_json_integer(f: f64) -> bool {
    const LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53
    f.is_finite() && (-LIMIT..=LIMIT).contains(&f) && f.fract() == 0.0
}

fn sint(s: &Value, key: &str) -> Option<i64> {
    let v = sget(s, key)?;
    v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))
}

/// The schema types a value may have (`x-kubernetes-int-or-string` is integer or string).
fn schema_types(s: &Value) -> Vec<&str> {
    if sflag(s, "x-kubernetes-int-or-string") {
        return vec!["integer", "string"];
    }
    match sget(s, "type") {
        Some(Value::String(t)) if !t.is_empty() => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Checks `obj` against a structural OpenAPI v3 schema the way kube-apiserver
/// validates a custom resource (kube-openapi's validator, converted to field
/// errors by apiextensions), e.g.
/// `spec.weight: Invalid value: "string": spec.weight in body must be of type number: "string"` (TypeInvalid),
/// `spec.weight: Invalid value: 0: spec.weight in body should be greater than 0` (Invalid),
/// `spec.height: Required value` (Required).
///
/// Checked: `type` (with kube's format-based quirks: a float for an `int64`
/// field reads `must be of type int64: "float64"`), `nullable`,
/// `x-kubernetes-int-or-string`, `required`, `minimum`/`maximum` with
/// `exclusiveMinimum`/`exclusiveMaximum` as booleans (OpenAPI v3.0) or numbers
/// (JSON Schema 2019+), `multipleOf`, `minLength`/`maxLength` (in characters),
/// `pattern`, `format` `date-time` and `date`, `enum`, `minItems`/`maxItems`, `items`,
/// `minProperties`/`maxProperties`, `additionalProperties` schemas.
/// Not checked: `uniqueItems`, `allOf`/`anyOf`/`oneOf`/`not`,
/// `x-kubernetes-validations` (CEL: [`super::validations`]), list/map-type
/// uniqueness, other formats.
///
/// `metadata` (at the root and in embedded resources) is type-checked but not
/// entered; use [`validate_object_meta`](crate::apimachinery::objectmeta::validate_object_meta). A top-level (or embedded)
/// `apiVersion`/`kind` the schema does not declare must still be a string
/// (`kind: Invalid value: 5: must be a string`).
pub fn validate_against_schema(obj: &Value, schema: &Value) -> Vec<FieldError> {
    let mut v = SchemaValidator { errs: Vec::new() };
    v.node(obj, schema, "", 0, false);
    v.errs
}

/// An object's `status` alone, as kube-apiserver validates a write to a
/// custom resource's `/status`: against the status schema, each message
/// naming the path from below `status` (`conditions[0].type in body ...`)
/// and each field from the object (`status.conditions[0].type`).
pub fn validate_status_against_schema(obj: &Value, schema: &Value) -> Vec<FieldError> {
    let (Some(status), Some(status_schema)) = (obj.get("status"), sprop(schema, "status")) else {
        return Vec::new();
    };
    let mut v = SchemaValidator { errs: Vec::new() };
    v.node(status, status_schema, "", 1, false);
    for e in &mut v.errs {
        e.field = if e.field.is_empty() { "status".into() } else { format!("status.{}", e.field) };
    }
    v.errs
}

struct SchemaValidator {
    errs: Vec<FieldError>,
}

/// kube-openapi names paths `.foo` for additional properties at the root;
/// apiextensions strips the dot for the field path.
fn field_path(path: &str) -> String {
    path.strip_prefix('.').unwrap_or(path).to_string()
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Whether `st` matches the schema's `pattern` (an ECMA 262 expression, read
/// as RE2 as kube-openapi reads it); `None` when the pattern does not compile.
/// A schema's patterns are few and fixed: each is compiled once.
fn matches_pattern(st: &str, pattern: &str) -> Option<bool> {
    use std::collections::HashMap;
    use std::sync::{Arc, OnceLock, RwLock};
    static COMPILED: OnceLock<RwLock<HashMap<String, Option<Arc<regex::Regex>>>>> = OnceLock::new();
    let compiled = COMPILED.get_or_init(RwLock::default);
    let known = compiled.read().ok().and_then(|c| c.get(pattern).cloned());
    let regex = match known {
        Some(regex) => regex,
        None => {
            let regex = regex::Regex::new(pattern).ok().map(Arc::new);
            if let Ok(mut c) = compiled.write() {
                // Bounded even if schemas came and went: past the bound,
                // patterns compile on each use.
                if c.len() < 4096 {
                    c.insert(pattern.to_string(), regex.clone());
                }
            }
            regex
        }
    };
    regex.map(|r| r.is_match(st))
}

impl SchemaValidator {
    fn push(&mut self, kind: FieldErrorKind, path: &str, value: Option<String>, detail: String) {
        self.errs.push(FieldError { kind, field: field_path(path), value, detail });
    }

    fn node(&mut self, v: &Value, s: &Value, path: &str, depth: usize, shallow: bool) {
        if depth > MAX_WALK_DEPTH {
            self.push(
                FieldErrorKind::Invalid,
                path,
                None,
                format!("must not be nested deeper than {MAX_WALK_DEPTH} levels"),
            );
            return;
        }
        self.check_type(v, s, path);
        match v {
            Value::Null => {}
            Value::String(st) => {
                self.check_string(st, s, path);
                self.check_format(st, s, path);
            }
            Value::Number(n) => self.check_number(num_of(n), s, path),
            Value::Array(items) if !shallow => self.check_array(items, s, path, depth),
            _ => {}
        }
        self.check_enum(v, s, path);
        if let Value::Object(m) = v {
            if !shallow {
                let embedded = depth == 0 || sflag(s, "x-kubernetes-embedded-resource");
                self.check_object(m, s, path, depth, embedded);
            }
        }
    }

    fn type_error(&mut self, path: &str, type_name: &str, got: &str) {
        let q = go_quote(got);
        self.push(
            FieldErrorKind::TypeInvalid,
            path,
            Some(q.clone()),
            format!("{path} in body must be of type {type_name}: {q}"),
        );
    }

    /// kube-openapi's typeValidator.
    fn check_type(&mut self, v: &Value, s: &Value, path: &str) {
        let types = schema_types(s);
        let format = sget(s, "format").and_then(Value::as_str).filter(|f| is_supported_format(f)).unwrap_or("");
        if types.is_empty() && format.is_empty() {
            return;
        }
        let has = |t: &str| types.contains(&t);
        let (sch_type, inferred, is_float_int) = match v {
            Value::Null => {
                if !types.is_empty() && !has("null") && !nullable(s) {
                    self.type_error(path, &types.join(","), "null");
                }
                return;
            }
            Value::Bool(_) => ("boolean", "", false),
            Value::String(_) => ("string", "", false),
            Value::Array(_) => ("array", "", false),
            Value::Object(_) => ("object", "", false),
            Value::Number(n) => match num_of(n) {
                Num::Int(_) => ("integer", "int64", false),
                Num::Float(f) => ("number", "float64", float_is_json_integer(f) && has("integer")),
            },
        };
        let is_int_float = sch_type == "integer" && has("number");
        let is_lower_int = format == "int64" && inferred == "int32";
        let is_lower_float = format == "float64" && inferred == "float32";
        let string_or_array = matches!(v, Value::String(_) | Value::Array(_));
        if !string_or_array
            && !format.is_empty()
            && !(has(sch_type) || inferred == format || is_float_int || is_int_float || is_lower_int || is_lower_float)
        {
            self.type_error(path, format, inferred);
            return;
        }
        if string_or_array && !(has("number") || has("integer") || format.is_empty()) {
            return;
        }
        if !(has(sch_type) || is_float_int || is_int_float) {
            self.type_error(path, &types.join(","), sch_type);
        }
    }

    fn check_string(&mut self, st: &str, s: &Value, path: &str) {
        let len = st.chars().count() as i64;
        if let Some(max) = sint(s, "maxLength") {
            if len > max {
                // field.TooLong's words since kube 1.34 (which say bytes for
                // what kube-openapi counts in characters).
                let unit = if max == 1 { "byte" } else { "bytes" };
                self.push(FieldErrorKind::TooLong, path, None, format!("may not be more than {max} {unit}"));
                return;
            }
        }
        if let Some(min) = sint(s, "minLength") {
            if len < min {
                self.push(
                    FieldErrorKind::Invalid,
                    path,
                    Some(go_quote(st)),
                    format!("{path} in body should be at least {min} chars long"),
                );
                return;
            }
        }
        if let Some(pattern) = sget(s, "pattern").and_then(Value::as_str) {
            // A pattern that does not compile constrains nothing here: kube
            // refuses such a schema before it serves it.
            if matches_pattern(st, pattern) == Some(false) {
                self.push(
                    FieldErrorKind::Invalid,
                    path,
                    Some(go_quote(st)),
                    format!("{path} in body should match '{pattern}'"),
                );
            }
        }
    }

    fn check_format(&mut self, st: &str, s: &Value, path: &str) {
        // (Only date-time and date are checked: the other supported formats
        // are accepted as any string.)
        let Some(format) = sget(s, "format").and_then(Value::as_str) else { return };
        let ok = match format {
            "date-time" | "datetime" => is_date_time(st),
            "date" => is_date(st),
            _ => return,
        };
        if !ok {
            let q = go_quote(st);
            self.push(
                FieldErrorKind::TypeInvalid,
                path,
                Some(q.clone()),
                format!("{path} in body must be of type {format}: {q}"),
            );
        }
    }

    fn check_number(&mut self, n: Num, s: &Value, path: &str) {
        if let Some(factor) = sget(s, "multipleOf").and_then(Value::as_f64) {
            self.check_multiple_of(n, factor, path);
        }
        let excl_min = sget(s, "exclusiveMinimum");
        if let Some(min) = sget(s, "minimum").and_then(Value::as_f64) {
            self.check_bound(n, min, excl_min.and_then(Value::as_bool).unwrap_or(false), true, path);
        }
        if let Some(min) = excl_min.and_then(Value::as_f64) {
            self.check_bound(n, min, true, true, path);
        }
        let excl_max = sget(s, "exclusiveMaximum");
        if let Some(max) = sget(s, "maximum").and_then(Value::as_f64) {
            self.check_bound(n, max, excl_max.and_then(Value::as_bool).unwrap_or(false), false, path);
        }
        if let Some(max) = excl_max.and_then(Value::as_f64) {
            self.check_bound(n, max, true, false, path);
        }
    }

    fn check_bound(&mut self, n: Num, bound: f64, exclusive: bool, is_min: bool, path: &str) {
        // kube-openapi compares integers against the bound truncated to int64.
        let (fails, shown) = match n {
            Num::Int(i) => {
                let b = bound as i64;
                let fails = match (is_min, exclusive) {
                    (true, false) => i < b,
                    (true, true) => i <= b,
                    (false, false) => i > b,
                    (false, true) => i >= b,
                };
                (fails, b.to_string())
            }
            Num::Float(f) => {
                let fails = match (is_min, exclusive) {
                    (true, false) => f < bound,
                    (true, true) => f <= bound,
                    (false, false) => f > bound,
                    (false, true) => f >= bound,
                };
                (fails, go_float(bound))
            }
        };
        if fails {
            let relation = match (is_min, exclusive) {
                (true, false) => "greater than or equal to",
                (true, true) => "greater than",
                (false, false) => "less than or equal to",
                (false, true) => "less than",
            };
            self.push(
                FieldErrorKind::Invalid,
                path,
                Some(n.go()),
                format!("{path} in body should be {relation} {shown}"),
            );
        }
    }

    fn check_multiple_of(&mut self, n: Num, factor: f64, path: &str) {
        let shown_factor = if factor.fract() == 0.0 && matches!(n, Num::Int(_)) {
            (factor as i64).to_string()
        } else {
            go_float(factor)
        };
        if factor <= 0.0 {
            self.push(
                FieldErrorKind::Invalid,
                path,
                Some(shown_factor.clone()),
                format!("factor MultipleOf declared for {path} must be positive: {shown_factor}"),
            );
            return;
        }
        let ok = match n {
            Num::Int(i) if factor.fract() == 0.0 && factor <= i64::MAX as f64 => i % (factor as i64) == 0,
            _ => float_is_json_integer(n.as_f64() / factor),
        };
        if !ok {
            self.push(
                FieldErrorKind::Invalid,
                path,
                Some(n.go()),
                format!("{path} in body should be a multiple of {shown_factor}"),
            );
        }
    }

    fn check_array(&mut self, items: &[Value], s: &Value, path: &str, depth: usize) {
        if let Some(it) = sitems(s) {
            for (i, v) in items.iter().enumerate() {
                self.node(v, it, &format!("{path}[{i}]"), depth + 1, false);
            }
        }
        let len = items.len() as i64;
        if let Some(min) = sint(s, "minItems") {
            if len < min {
                self.push(
                    FieldErrorKind::Invalid,
                    path,
                    Some(len.to_string()),
                    format!("{path} in body should have at least {min} items"),
                );
            }
        }
        if let Some(max) = sint(s, "maxItems") {
            if len > max {
                self.push(
                    FieldErrorKind::TooMany,
                    path,
                    Some(len.to_string()),
                    format!("must have at most {max} items"),
                );
            }
        }
    }

    fn check_enum(&mut self, v: &Value, s: &Value, path: &str) {
        let Some(allowed) = sget(s, "enum").and_then(Value::as_array) else { return };
        if allowed.is_empty() || allowed.iter().any(|a| json_equal(a, v)) {
            return;
        }
        let values: Vec<String> = allowed
            .iter()
            .map(|a| match a {
                Value::String(s) => go_quote(s),
                other => go_quote(&other.to_string()),
            })
            .collect();
        self.push(
            FieldErrorKind::NotSupported,
            path,
            Some(go_display(v)),
            format!("supported values: {}", values.join(", ")),
        );
    }

    fn check_object(&mut self, m: &Map<String, Value>, s: &Value, path: &str, depth: usize, embedded: bool) {
        let count = m.len() as i64;
        if let Some(min) = sint(s, "minProperties") {
            if count < min {
                self.push(
                    FieldErrorKind::Invalid,
                    path,
                    Some(count.to_string()),
                    format!("{path} in body should have at least {min} properties"),
                );
                return;
            }
        }
        if let Some(max) = sint(s, "maxProperties") {
            if count > max {
                self.push(
                    FieldErrorKind::TooMany,
                    path,
                    Some(count.to_string()),
                    format!("must have at most {max} items"),
                );
                return;
            }
        }
        if let Additional::Schema(a) = sadditional(s) {
            for (k, v) in m {
                if sprop(s, k).is_none() {
                    self.node(v, a, &format!("{path}.{k}"), depth + 1, false);
                }
            }
        }
        if let Some(props) = sprops(s) {
            for (k, ps) in props {
                if let Some(v) = m.get(k) {
                    let shallow = embedded && k == "metadata";
                    self.node(v, ps, &child_path(path, k), depth + 1, shallow);
                }
            }
        }
        if embedded {
            for key in ["apiVersion", "kind"] {
                if sprop(s, key).is_some() {
                    continue;
                }
                if let Some(v) = m.get(key).filter(|v| !v.is_string()) {
                    let p = child_path(path, key);
                    self.push(FieldErrorKind::Invalid, &p, Some(go_display(v)), "must be a string".into());
                }
            }
        }
        if let Some(required) = sget(s, "required").and_then(Value::as_array) {
            for r in required.iter().filter_map(Value::as_str) {
                if !m.contains_key(r) {
                    self.errs.push(FieldError::required(field_path(&format!("{path}.{r}")), ""));
                }
            }
        }
    }
}

/// kube-openapi's `IsDateTime` (strfmt).
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    // ^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$
    let t: Vec<char> = parts[1].chars().collect();
    let two = |i: usize| -> Option<String> {
        let a = *t.get(i)?;
        let b = *t.get(i + 1)?;
        (a.is_ascii_digit() && b.is_ascii_digit()).then(|| format!("{a}{b}"))
    };
    let (Some(h), Some(m), Some(sec)) = (two(0), two(3), two(6)) else { return false };
    if t.get(2) != Some(&':') || t.get(5) != Some(&':') {
        return false;
    }
    let tail = &t[8..];
    let is_zone = |z: &[char]| -> bool {
        match z {
            ['z'] => true,
            [sign, a, b, ':', c, d] => {
                (*sign == '+' || *sign == '-') && [a, b, c, d].iter().all(|ch| ch.is_ascii_digit())
            }
            _ => false,
        }
    };
    let shape_ok = is_zone(tail)
        || (tail.len() >= 2 && tail[0] != '\n' && {
            let digits = tail[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            digits > 0 && is_zone(&tail[1 + digits..])
        });
    shape_ok && h.as_str() <= "23" && m.as_str() <= "59" && sec.as_str() <= "59"
}

/// Go's `time.Parse("2006-01-02", s)`.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = s.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    match (digits(0..4), digits(5..7), digits(8..10)) {
        (Some(y), Some(m), Some(d)) => {
            i32::try_from(y).ok().and_then(|y| chrono::NaiveDate::from_ymd_opt(y, m, d)).is_some()
        }
        _ => false,
    }
}

/// The formats kube-apiserver validates a CRD's values by
/// (apiextensions-apiserver's `supportedVersionedFormats`, read after Go's
/// removal of dashes, `date-time` as `datetime`): any other (`int64`,
/// `double`, ...) is dropped from the schema before validation, so a type
/// error names the type, not the format.
fn is_supported_format(format: &str) -> bool {
    const SUPPORTED: [&str; 24] = [
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
    ];
    let undashed = || format.bytes().filter(|b| *b != b'-');
    SUPPORTED.iter().any(|supported| supported.bytes().eq(undashed()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::gojson::decode_json;
    use crate::apimachinery::schema::prune::prune_unknown_fields;
    use crate::apimachinery::test_fixtures::{msgs, widget, widget_schema, widget_schema_numeric, with, without};
    use serde_json::json;

    #[test]
    fn valid_widget_has_no_errors() {
        assert!(validate_against_schema(&widget(), &widget_schema()).is_empty());
        assert!(validate_against_schema(&widget(), &widget_schema_numeric()).is_empty());
        let nullable = with(widget(), "/spec/colour", Value::Null);
        assert!(validate_against_schema(&nullable, &widget_schema()).is_empty());
    }

    #[test]
    fn type_errors_match_kube() {
        let errs = validate_against_schema(&with(widget(), "/spec/weight", json!("heavy")), &widget_schema());
        assert_eq!(
            msgs(&errs),
            vec![r#"spec.weight: Invalid value: "string": spec.weight in body must be of type number: "string""#]
        );
        assert_eq!(errs[0].kind, FieldErrorKind::TypeInvalid);
        assert_eq!(errs[0].field, "spec.weight");
        assert_eq!(
            msgs(&validate_against_schema(&with(widget(), "/spec/colour", json!(5)), &widget_schema())),
            vec![r#"spec.colour: Invalid value: "integer": spec.colour in body must be of type string: "integer""#]
        );
        assert_eq!(
            msgs(&validate_against_schema(&with(widget(), "/spec/height", Value::Null), &widget_schema())),
            vec![r#"spec.height: Invalid value: "null": spec.height in body must be of type number: "null""#]
        );
        assert_eq!(
            msgs(&validate_against_schema(&with(widget(), "/spec", json!([])), &widget_schema())),
            vec![r#"spec: Invalid value: "array": spec in body must be of type object: "array""#]
        );
        assert_eq!(
            msgs(&validate_against_schema(&with(widget(), "/apiVersion", json!(5)), &widget_schema())),
            vec![r#"apiVersion: Invalid value: "integer": apiVersion in body must be of type string: "integer""#]
        );
    }

    #[test]
    fn integer_fields_follow_kube_format_quirks() {
        let at = "/status/observedGeneration";
        // `format: int64` is not one kube validates a CRD by: the type is named.
        assert_eq!(
            msgs(&validate_against_schema(&with(widget(), at, json!(1.5)), &widget_schema())),
            vec![
                r#"status.observedGeneration: Invalid value: "number": status.observedGeneration in body must be of type integer: "number""#
            ]
        );
        assert!(validate_against_schema(&with(widget(), at, json!(2.0)), &widget_schema()).is_empty());
        assert_eq!(
            msgs(&validate_against_schema(&with(widget(), at, json!("1")), &widget_schema())),
            vec![
                r#"status.observedGeneration: Invalid value: "string": status.observedGeneration in body must be of type integer: "string""#
            ]
        );
        // without a format: plain type wording; a number accepts integers
        let schema = json!({"type": "object", "properties": {"i": {"type": "integer"}, "n": {"type": "number"}}});
        assert_eq!(
            msgs(&validate_against_schema(&json!({"i": 1.5, "n": 3}), &schema)),
            vec![r#"i: Invalid value: "number": i in body must be of type integer: "number""#]
        );
    }

    #[test]
    fn minimum_errors_match_kube() {
        for schema in [widget_schema(), widget_schema_numeric()] {
            let errs = validate_against_schema(&with(widget(), "/spec/weight", json!(0)), &schema);
            assert_eq!(
                msgs(&errs),
                vec!["spec.weight: Invalid value: 0: spec.weight in body should be greater than 0"]
            );
            assert_eq!(errs[0].kind, FieldErrorKind::Invalid);
            assert_eq!(
                msgs(&validate_against_schema(&with(widget(), "/spec/height", json!(-1.5)), &schema)),
                vec!["spec.height: Invalid value: -1.5: spec.height in body should be greater than 0"]
            );
        }
        // a 0.0 read from JSON prints as Go prints it
        let (obj, _) = decode_json(br#"{"spec":{"weight":0.0,"height":1}}"#).unwrap();
        assert_eq!(
            msgs(&validate_against_schema(&obj, &widget_schema())),
            vec!["spec.weight: Invalid value: 0: spec.weight in body should be greater than 0"]
        );
    }

    #[test]
    fn required_errors_match_kube() {
        let errs = validate_against_schema(&without(widget(), "", "spec"), &widget_schema());
        assert_eq!(msgs(&errs), vec!["spec: Required value"]);
        assert_eq!(errs[0].kind, FieldErrorKind::Required);
        let obj = with(widget(), "/spec", json!({"colour": "red"}));
        assert_eq!(
            msgs(&validate_against_schema(&obj, &widget_schema())),
            vec!["spec.weight: Required value", "spec.height: Required value"]
        );
        let obj = with(widget(), "/status/conditions", json!([{"type": "A", "status": "True"}, {"reason": "x"}]));
        assert_eq!(
            msgs(&validate_against_schema(&obj, &widget_schema())),
            vec!["status.conditions[1].type: Required value", "status.conditions[1].status: Required value"]
        );
    }

    #[test]
    fn date_time_format() {
        let at = "/status/conditions/0/lastTransitionTime";
        assert_eq!(
            msgs(&validate_against_schema(&with(widget(), at, json!("yesterday")), &widget_schema())),
            vec![
                r#"status.conditions[0].lastTransitionTime: Invalid value: "yesterday": status.conditions[0].lastTransitionTime in body must be of type date-time: "yesterday""#
            ]
        );
        for ok in [
            "2024-01-01T00:00:00Z",
            "2024-01-01t00:00:00.123+02:00",
            "2024-02-29T23:59:59Z",
            "2024-01-01T10:00:00-05:30",
        ] {
            assert!(is_date_time(ok), "{ok}");
        }
        for bad in [
            "2023-02-29T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01",
            "",
            "2024-1-01T00:00:00Z",
            "2024-01-01T00:60:00Z",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
        assert!(is_date("2000-02-29") && !is_date("1900-02-29") && !is_date("2024-13-01") && !is_date("2024-01-1"));
    }

    #[test]
    fn constraint_messages() {
        let schema = json!({"type": "object", "properties": {
            "short": {"type": "string", "maxLength": 3},
            "long": {"type": "string", "minLength": 2},
            "pick": {"type": "string", "enum": ["a", "b"]},
            "num": {"type": "integer", "enum": [1, 2]},
            "few": {"type": "array", "maxItems": 1, "items": {"type": "integer"}},
            "many": {"type": "array", "minItems": 2},
            "top": {"type": "integer", "maximum": 10, "exclusiveMaximum": true},
            "cap": {"type": "number", "maximum": 10},
            "cap2": {"type": "number", "exclusiveMaximum": 10},
            "third": {"type": "integer", "multipleOf": 3},
            "half": {"type": "number", "multipleOf": 0.5},
            "ios": {"x-kubernetes-int-or-string": true},
            "props": {"type": "object", "additionalProperties": {"type": "integer"}},
            "small": {"type": "object", "maxProperties": 1},
            "big": {"type": "object", "minProperties": 2}}});
        let obj = json!({
            "short": "abcd", "long": "a", "pick": "c", "num": 3, "few": [1, "x"], "many": [1],
            "top": 10, "cap": 10.5, "cap2": 10, "third": 7, "half": 1.25, "ios": true,
            "props": {"a": "x", "b": 2}, "small": {"a": 1, "b": 2}, "big": {"a": 1}});
        let got = msgs(&validate_against_schema(&obj, &schema));
        let want = vec![
            "big: Invalid value: 1: big in body should have at least 2 properties",
            "cap: Invalid value: 10.5: cap in body should be less than or equal to 10",
            "cap2: Invalid value: 10: cap2 in body should be less than 10",
            r#"few[1]: Invalid value: "string": few[1] in body must be of type integer: "string""#,
            "few: Too many: 2: must have at most 1 items",
            "half: Invalid value: 1.25: half in body should be a multiple of 0.5",
            r#"ios: Invalid value: "boolean": ios in body must be of type integer,string: "boolean""#,
            r#"long: Invalid value: "a": long in body should be at least 2 chars long"#,
            "many: Invalid value: 1: many in body should have at least 2 items",
            r#"num: Unsupported value: 3: supported values: "1", "2""#,
            r#"pick: Unsupported value: "c": supported values: "a", "b""#,
            r#"props.a: Invalid value: "string": props.a in body must be of type integer: "string""#,
            "short: Too long: may not be more than 3 bytes",
            "small: Too many: 2: must have at most 1 items",
            "third: Invalid value: 7: third in body should be a multiple of 3",
            "top: Invalid value: 10: top in body should be less than 10",
        ];
        let mut got_sorted = got.clone();
        got_sorted.sort();
        let mut want_sorted: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        want_sorted.sort();
        assert_eq!(got_sorted, want_sorted);
        let kinds: Vec<FieldErrorKind> = validate_against_schema(&obj, &schema).iter().map(|e| e.kind).collect();
        assert!(kinds.contains(&FieldErrorKind::TooLong) && kinds.contains(&FieldErrorKind::TooMany));
        assert!(kinds.contains(&FieldErrorKind::NotSupported));

        let fine = json!({"short": "abc", "long": "ab", "pick": "b", "num": 2.0, "few": [1], "many": [1, 2],
            "top": 9, "cap": 10, "cap2": 9.99, "third": -9, "half": 1.5, "ios": "25%", "props": {"a": 1},
            "small": {}, "big": {"a": 1, "b": 2}});
        assert!(validate_against_schema(&fine, &schema).is_empty());
        assert!(validate_against_schema(&json!({"ios": 3}), &schema).is_empty());
    }

    #[test]
    fn strings_count_characters_not_bytes() {
        let schema = json!({"properties": {"s": {"type": "string", "maxLength": 2, "minLength": 2}}});
        assert!(validate_against_schema(&json!({"s": "éé"}), &schema).is_empty());
    }

    #[test]
    fn a_string_matches_its_pattern_after_its_lengths() {
        let schema = json!({"properties": {"s": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"}}});
        assert!(validate_against_schema(&json!({"s": "ab"}), &schema).is_empty());
        assert_eq!(
            msgs(&validate_against_schema(&json!({"s": "aB"}), &schema)),
            vec![r#"s: Invalid value: "aB": s in body should match '^[a-z]+$'"#]
        );
        // The first failed check is the only one reported, as kube-openapi does.
        assert_eq!(
            msgs(&validate_against_schema(&json!({"s": "B"}), &schema)),
            vec![r#"s: Invalid value: "B": s in body should be at least 2 chars long"#]
        );
        let broken = json!({"properties": {"s": {"type": "string", "pattern": "("}}});
        assert!(validate_against_schema(&json!({"s": "x"}), &broken).is_empty());
    }

    #[test]
    fn integer_bounds_truncate_like_kube_openapi() {
        let schema = json!({"properties": {"i": {"type": "integer", "minimum": 0.5}}});
        assert!(validate_against_schema(&json!({"i": 0}), &schema).is_empty());
        assert_eq!(
            msgs(&validate_against_schema(&json!({"i": -1}), &schema)),
            vec!["i: Invalid value: -1: i in body should be greater than or equal to 0"]
        );
    }

    #[test]
    fn root_additional_properties_path_quirk() {
        let schema = json!({"type": "object", "additionalProperties": {"type": "string"}});
        assert_eq!(
            msgs(&validate_against_schema(&json!({"a": 1}), &schema)),
            vec![r#"a: Invalid value: "integer": .a in body must be of type string: "integer""#]
        );
    }

    #[test]
    fn metadata_is_type_checked_not_entered_and_undeclared_type_meta_must_be_strings() {
        let schema = json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "integer"}}}}});
        assert!(validate_against_schema(&json!({"metadata": {"name": "x"}}), &schema).is_empty());
        assert_eq!(
            msgs(&validate_against_schema(&json!({"metadata": "x", "kind": 5, "apiVersion": "v1"}), &schema)),
            vec![
                r#"metadata: Invalid value: "string": metadata in body must be of type object: "string""#,
                "kind: Invalid value: 5: must be a string",
            ]
        );
        let embedded = json!({"properties": {"t": {"type": "object", "x-kubernetes-embedded-resource": true,
            "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "integer"}}}}}}});
        assert_eq!(
            msgs(&validate_against_schema(&json!({"t": {"apiVersion": [], "metadata": {"name": "x"}}}), &embedded)),
            vec!["t.apiVersion: Invalid value: []: must be a string"]
        );
    }

    #[test]
    fn validation_tolerates_odd_schemas() {
        for schema in [
            json!(null),
            json!(true),
            json!("x"),
            json!({"type": 5}),
            json!({"properties": [], "required": "x"}),
            json!({"type": ["string", "null"]}),
            json!({"items": [1], "enum": "x", "minimum": "a"}),
        ] {
            let _ = validate_against_schema(&widget(), &schema);
            let mut obj = widget();
            let _ = prune_unknown_fields(&mut obj, &schema);
        }
        assert!(validate_against_schema(
            &json!({"a": null}),
            &json!({"properties": {"a": {"type": ["string", "null"]}}})
        )
        .is_empty());
    }
}
