//! The encoder: walks a JSON value with the table of its message and writes gnostic's wire
//! format, following the compiler's rules (the `gnostic` module docs list them). Apart from the
//! tables, which only describe the messages.

use serde_json::{Map, Value};

use super::tables::{Field, Kind, Message, OneOf};
use crate::apimachinery::serializer::value_to_yaml;
use crate::endpoints::openapi::wire::Writer;

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn unexpected(want: &str, value: &Value) -> String {
    format!("expected {want}, found {}", type_name(value))
}

/// gnostic's `StringForScalarNode`: strings, and integers as written.
fn as_string(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(n.to_string()),
        other => Err(unexpected("a string", other)),
    }
}

fn check_in(s: &str, allowed: &[&str]) -> Result<(), String> {
    if allowed.contains(&s) {
        Ok(())
    } else {
        Err(format!("{s:?} is not one of {allowed:?}"))
    }
}

fn as_array(value: &Value) -> Result<&Vec<Value>, String> {
    value.as_array().ok_or_else(|| unexpected("an array", value))
}

/// Writes `value` as field `number` of kind `kind`. Scalars at their zero
/// value are left out unless `present` (a chosen `oneof` member).
fn encode_field(out: &mut Writer, number: u32, kind: Kind, value: &Value, present: bool) -> Result<(), String> {
    match kind {
        Kind::String => {
            let s = as_string(value)?;
            if present || !s.is_empty() {
                out.bytes(number, s.as_bytes());
            }
        }
        Kind::StringIn(allowed) => {
            let s = as_string(value)?;
            check_in(&s, allowed)?;
            if present || !s.is_empty() {
                out.bytes(number, s.as_bytes());
            }
        }
        Kind::Bool => {
            let b = value.as_bool().ok_or_else(|| unexpected("a boolean", value))?;
            if present || b {
                out.bool(number, b);
            }
        }
        Kind::Double => {
            let d = value.as_f64().ok_or_else(|| unexpected("a number", value))?;
            // proto3 leaves out +0.0 only (Go compares the bits).
            if present || d.to_bits() != 0 {
                out.double(number, d);
            }
        }
        Kind::Int64 => {
            let i = value.as_i64().ok_or_else(|| unexpected("an integer", value))?;
            if present || i != 0 {
                out.int64(number, i);
            }
        }
        Kind::Strings | Kind::StringsIn(_) => {
            for item in as_array(value)? {
                let s = as_string(item)?;
                if let Kind::StringsIn(allowed) = kind {
                    check_in(&s, allowed)?;
                }
                out.bytes(number, s.as_bytes());
            }
        }
        Kind::Message(message) => {
            let mut inner = Writer::default();
            encode_message(&mut inner, message, value)?;
            out.bytes(number, &inner.into_bytes());
        }
        Kind::OneOf(one_of) => {
            let mut inner = Writer::default();
            encode_one_of(&mut inner, one_of, value)?;
            out.bytes(number, &inner.into_bytes());
        }
        Kind::Messages(_) | Kind::OneOfs(_) | Kind::Anys => {
            let single = match kind {
                Kind::Messages(message) => Kind::Message(message),
                Kind::OneOfs(one_of) => Kind::OneOf(one_of),
                _ => Kind::Any,
            };
            for (i, item) in as_array(value)?.iter().enumerate() {
                encode_field(out, number, single, item, true).map_err(|e| format!("[{i}]: {e}"))?;
            }
        }
        Kind::Any => {
            // `Any { google.protobuf.Any value = 1; string yaml = 2; }`: the
            // compiler keeps the YAML text; kube-openapi's readers parse it
            // back with go-yaml, which `value_to_yaml` is written for.
            let mut inner = Writer::default();
            inner.bytes(2, value_to_yaml(value).as_bytes());
            out.bytes(number, &inner.into_bytes());
        }
        Kind::Wrapped(inner_number, inner_kind) => {
            let mut inner = Writer::default();
            encode_field(&mut inner, inner_number, *inner_kind, value, true)?;
            out.bytes(number, &inner.into_bytes());
        }
        Kind::TypeItem => {
            let mut inner = Writer::default();
            match value {
                Value::Array(items) => {
                    for item in items {
                        inner.bytes(1, as_string(item)?.as_bytes());
                    }
                }
                scalar => inner.bytes(1, as_string(scalar)?.as_bytes()),
            }
            out.bytes(number, &inner.into_bytes());
        }
        Kind::DefaultType => {
            // `oneof { double number = 1; bool boolean = 2; string string = 3; }`;
            // gnostic sets none of them for an object, array or null.
            let mut inner = Writer::default();
            match value {
                Value::Number(n) => inner.double(1, n.as_f64().unwrap_or_default()),
                Value::Bool(b) => inner.bool(2, *b),
                Value::String(s) => inner.bytes(3, s.as_bytes()),
                _ => {}
            }
            out.bytes(number, &inner.into_bytes());
        }
    }
    Ok(())
}

pub(super) fn encode_message(out: &mut Writer, message: &Message, value: &Value) -> Result<(), String> {
    let object: &Map<String, Value> =
        value.as_object().ok_or_else(|| format!("{}: {}", message.name, unexpected("an object", value)))?;
    let missing: Vec<&str> = message.required.iter().copied().filter(|k| !object.contains_key(*k)).collect();
    if !missing.is_empty() {
        return Err(format!("{}: missing required {}", message.name, missing.join(", ")));
    }
    // Fields go out in field-number order, as Go's marshaller writes them;
    // repeated entries keep the document's order.
    let mut parts: Vec<(u32, Writer)> = Vec::new();
    for (key, item) in object {
        let at = |e: String| format!("{key}: {e}");
        if let Some(Field(_, number, kind)) = message.fields.iter().find(|f| f.0 == key) {
            let mut part = Writer::default();
            encode_field(&mut part, *number, *kind, item, false).map_err(at)?;
            parts.push((*number, part));
            continue;
        }
        let Some(entries) = message.entries.iter().find(|e| e.keys.matches(key)) else {
            return Err(format!("{}: unknown or unsupported key {key:?}", message.name));
        };
        let mut named = Writer::default();
        named.bytes(1, key.as_bytes());
        encode_field(&mut named, 2, entries.value, item, true).map_err(at)?;
        let mut part = Writer::default();
        part.bytes(entries.number, &named.into_bytes());
        parts.push((entries.number, part));
    }
    parts.sort_by_key(|(number, _)| *number);
    for (_, part) in parts {
        out.append(&part.into_bytes());
    }
    Ok(())
}

fn encode_one_of(out: &mut Writer, one_of: &OneOf, value: &Value) -> Result<(), String> {
    let mut chosen = None;
    let mut refusals = Vec::new();
    for &(number, kind) in one_of.choices {
        let mut attempt = Writer::default();
        match encode_field(&mut attempt, number, kind, value, true) {
            // The last alternative that accepts the value wins, as in gnostic.
            Ok(()) => chosen = Some(attempt),
            Err(e) => refusals.push(e),
        }
    }
    match chosen {
        Some(attempt) => {
            out.append(&attempt.into_bytes());
            Ok(())
        }
        None => Err(format!("not a valid {} ({})", one_of.name, refusals.join("; "))),
    }
}
