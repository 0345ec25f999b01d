//! JSON values as CEL values, by their declared types, as kube's
//! `UnstructuredToVal` reads an object: a `number` is a double even when the
//! JSON has no fraction, an `integer` an int, `date-time`/`date` strings
//! timestamps, `byte` strings bytes; what nothing declares keeps its JSON type.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel;
use serde_json::Value as Json;

use super::decl::DeclType;
use super::escape::{escape, is_reserved};
use cel::objects::{Key, Map, OptionalValue};
use cel::Value;

pub(super) fn to_cel(v: &Json, decl: &DeclType) -> Value {
    to_cel_at(v, decl, 0)
}

fn to_cel_at(v: &Json, decl: &DeclType, depth: usize) -> Value {
    if depth > crate::apimachinery::schema::MAX_WALK_DEPTH {
        return Value::Null;
    }
    match v {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match decl {
            DeclType::Double => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            _ => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Value::Int(i),
                (None, Some(u)) => Value::UInt(u),
                _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
        },
        Json::String(s) => match decl {
            DeclType::Timestamp => timestamp(s).unwrap_or_else(|| Value::String(Arc::new(s.clone()))),
            DeclType::Bytes { .. } => {
                use base64::Engine as _;
                match base64::engine::general_purpose::STANDARD.decode(s) {
                    Ok(b) => Value::Bytes(Arc::new(b)),
                    Err(_) => Value::String(Arc::new(s.clone())),
                }
            }
            _ => Value::String(Arc::new(s.clone())),
        },
        Json::Array(items) => {
            let item = decl_element(decl);
            Value::List(Arc::new(items.iter().map(|i| to_cel_at(i, &item, depth + 1)).collect()))
        }
        Json::Object(m) => {
            let mut map = HashMap::with_capacity(m.len());
            // An object of declared fields shows them by their CEL names (and
            // not those that cannot be escaped); a map or an undeclared object
            // keeps its keys.
            let structured = matches!(decl, DeclType::Object { .. });
            for (k, x) in m {
                let key = if structured {
                    match escape(k) {
                        Some(e) => e,
                        None => continue,
                    }
                } else {
                    k.clone()
                };
                let t = decl.field(&key).unwrap_or_else(DeclType::any);
                let v = to_cel_at(x, &t, depth + 1);
                if structured && is_reserved(k) {
                    map.insert(Key::String(Arc::new(k.clone())), v.clone());
                }
                map.insert(Key::String(Arc::new(key)), v);
            }
            Value::Map(Map { map: Arc::new(map) })
        }
    }
}

fn decl_element(decl: &DeclType) -> DeclType {
    match decl {
        DeclType::List { items, .. } => (**items).clone(),
        _ => DeclType::any(),
    }
}

fn timestamp(s: &str) -> Option<Value> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(Value::Timestamp(t));
    }
    // `date`: midnight UTC of that day.
    let d = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    let t = d.and_hms_opt(0, 0, 0)?.and_utc().fixed_offset();
    Some(Value::Timestamp(t))
}

pub(super) fn optional(v: Option<Value>) -> Value {
    Value::Opaque(Arc::new(match v {
        Some(v) => OptionalValue::of(v),
        None => OptionalValue::none(),
    }))
}

/// A value as cel-go prints it in an error.
pub(super) fn display(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => f.to_string(),
        Value::String(s) => s.to_string(),
        Value::Bool(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

/// The name cel-go gives the type of `v` (`int`, `double`, `map`,
/// `google.protobuf.Timestamp`, ...), as its messages print it.
pub fn go_type_name(v: &Value) -> String {
    match v {
        Value::Float(_) => "double".into(),
        Value::Timestamp(_) => "google.protobuf.Timestamp".into(),
        Value::Duration(_) => "google.protobuf.Duration".into(),
        Value::Null => "null_type".into(),
        Value::Opaque(o) => o.runtime_type_name().to_string(),
        other => other.type_of().to_string(),
    }
}
