//! Declared types of CEL variables, with the size bounds the cost estimator
//! multiplies by: kube's `DeclType` (k8s.io/apiserver `pkg/cel/types.go`)
//! reduced to what a dynamically typed evaluator and a cost bound need.
//!
//! A type comes from a structural schema ([`DeclType::from_schema`]: its
//! `maxItems`, `maxLength`, `maxProperties`, or, where the schema sets none,
//! the most a request of [`MAX_REQUEST_SIZE_BYTES`] can hold, as kube's
//! estimator assumes), or from a value at hand ([`DeclType::of_value`]: its
//! exact sizes, what the runtime bound uses).

use std::collections::BTreeMap;

use serde_json::Value;

use super::escape::{escape, is_reserved};
use super::MAX_REQUEST_SIZE_BYTES;
use crate::apimachinery::schema::{sadditional, sflag, sget, sitems, sprops, Additional};

const MAX: u64 = MAX_REQUEST_SIZE_BYTES;

/// The type of a CEL value and the bounds of its sizes.
#[derive(Debug, Clone, PartialEq)]
pub enum DeclType {
    Null,
    Bool,
    Int,
    Uint,
    Double,
    Timestamp,
    Duration,
    /// At most `max_len` bytes.
    String {
        max_len: u64,
    },
    Bytes {
        max_len: u64,
    },
    List {
        max_items: u64,
        items: Box<DeclType>,
    },
    /// A map with arbitrary keys (a schema's `additionalProperties`).
    Map {
        max_entries: u64,
        max_key_len: u64,
        values: Box<DeclType>,
    },
    /// An object with declared fields; `open` when it may hold others
    /// (`x-kubernetes-preserve-unknown-fields`, values read at runtime).
    Object {
        fields: BTreeMap<String, DeclType>,
        open: bool,
    },
    /// Anything, no part of it longer (in items, bytes or entries) than
    /// `max_size`, nor larger in all (what an undeclared or
    /// `x-kubernetes-int-or-string` value is).
    Dyn {
        max_size: u64,
    },
}

impl DeclType {
    /// A value about which nothing is known but that it came in a request.
    pub fn any() -> Self {
        DeclType::Dyn { max_size: MAX }
    }

    pub fn string(max_len: u64) -> Self {
        DeclType::String { max_len }
    }

    pub fn list(max_items: u64, items: DeclType) -> Self {
        DeclType::List { max_items, items: Box::new(items) }
    }

    pub fn object<'a>(fields: impl IntoIterator<Item = (&'a str, DeclType)>) -> Self {
        DeclType::Object { fields: fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), open: false }
    }

    /// The type of a node of a structural schema, as kube's
    /// `SchemaDeclType` builds it (`x-kubernetes-int-or-string` and
    /// preserved unknown fields are dynamic; `format: byte`, `date-time`,
    /// `date`, `duration` strings are bytes, timestamps and durations).
    pub fn from_schema(schema: &Value) -> Self {
        Self::from_schema_at(schema, 0)
    }

    fn from_schema_at(s: &Value, depth: usize) -> Self {
        if depth > crate::apimachinery::schema::MAX_WALK_DEPTH {
            return Self::any();
        }
        if sflag(s, "x-kubernetes-int-or-string") {
            return DeclType::Dyn { max_size: bound(s, "maxLength").unwrap_or(MAX - 2).max(20) };
        }
        match sget(s, "type").and_then(Value::as_str).unwrap_or("") {
            "boolean" => DeclType::Bool,
            "integer" => DeclType::Int,
            "number" => DeclType::Double,
            "string" => match sget(s, "format").and_then(Value::as_str) {
                Some("byte") => DeclType::Bytes { max_len: bound(s, "maxLength").map_or(MAX - 2, |n| n * 3 / 4 + 3) },
                Some("date-time" | "date") => DeclType::Timestamp,
                Some("duration") => DeclType::Duration,
                // maxLength counts characters; a character is at most 4 bytes.
                _ => DeclType::String { max_len: bound(s, "maxLength").map_or(MAX - 2, |n| n.saturating_mul(4)) },
            },
            "array" => {
                let items = sitems(s).map_or(Self::any(), |i| Self::from_schema_at(i, depth + 1));
                let max_items = bound(s, "maxItems").unwrap_or_else(|| (MAX - 2) / (min_serialized_size(&items) + 1));
                DeclType::list(max_items, items)
            }
            _ => {
                let props = sprops(s);
                if let (None, Additional::Schema(values)) = (props, sadditional(s)) {
                    let values = Self::from_schema_at(values, depth + 1);
                    // A key and its value: `"":` plus the value and a comma.
                    let max_entries =
                        bound(s, "maxProperties").unwrap_or_else(|| (MAX - 2) / (min_serialized_size(&values) + 4));
                    return DeclType::Map { max_entries, max_key_len: MAX - 2, values: Box::new(values) };
                }
                let open = sflag(s, "x-kubernetes-preserve-unknown-fields")
                    || sflag(s, "x-kubernetes-embedded-resource")
                    || matches!(sadditional(s), Additional::Any);
                if props.is_none() && (open || sget(s, "type").is_none()) {
                    return Self::any();
                }
                // Fields by their CEL names; one that cannot be escaped is not visible.
                let mut fields = BTreeMap::new();
                for (k, v) in props.into_iter().flatten() {
                    let Some(name) = escape(k) else { continue };
                    let t = Self::from_schema_at(v, depth + 1);
                    if is_reserved(k) {
                        fields.insert(k.clone(), t.clone());
                    }
                    fields.insert(name, t);
                }
                DeclType::Object { fields, open }
            }
        }
    }

    /// The exact shape of `value`: lists as long as they are, their items
    /// merged into one type bounding each of them.
    pub fn of_value(value: &Value) -> Self {
        Self::of_value_at(value, 0)
    }

    fn of_value_at(v: &Value, depth: usize) -> Self {
        if depth > crate::apimachinery::schema::MAX_WALK_DEPTH {
            return DeclType::Dyn { max_size: serialized_len(v) };
        }
        match v {
            Value::Null => DeclType::Null,
            Value::Bool(_) => DeclType::Bool,
            Value::Number(n) if n.is_i64() => DeclType::Int,
            Value::Number(n) if n.is_u64() => DeclType::Uint,
            Value::Number(_) => DeclType::Double,
            Value::String(s) => DeclType::String { max_len: s.len() as u64 },
            Value::Array(items) => {
                let merged = items.iter().map(|i| Self::of_value_at(i, depth + 1)).reduce(merge);
                DeclType::list(items.len() as u64, merged.unwrap_or(DeclType::Null))
            }
            Value::Object(m) => {
                let mut fields = BTreeMap::new();
                for (k, v) in m {
                    let t = Self::of_value_at(v, depth + 1);
                    // Selected by its CEL name, indexed by its own: both bound it.
                    if let Some(e) = escape(k).filter(|e| e != k) {
                        fields.insert(e, t.clone());
                    }
                    fields.insert(k.clone(), t);
                }
                // A field it lacks is absent, not unknown.
                DeclType::Object { fields, open: false }
            }
        }
    }

    /// How many items, bytes or entries the value has at most (1 for a scalar).
    pub fn len(&self) -> u64 {
        match self {
            DeclType::String { max_len } | DeclType::Bytes { max_len } => *max_len,
            DeclType::List { max_items, .. } => *max_items,
            DeclType::Map { max_entries, .. } => *max_entries,
            DeclType::Object { fields, open } => {
                if *open {
                    MAX
                } else {
                    fields.len() as u64
                }
            }
            DeclType::Dyn { max_size } => *max_size,
            _ => 1,
        }
    }

    /// An upper bound of the whole value's size: every byte of its strings
    /// and every item, entry and field counted once.
    pub fn size(&self) -> f64 {
        match self {
            DeclType::String { max_len } | DeclType::Bytes { max_len } => *max_len as f64,
            DeclType::List { max_items, items } => *max_items as f64 * (1.0 + items.size()),
            DeclType::Map { max_entries, max_key_len, values } => {
                *max_entries as f64 * (1.0 + *max_key_len as f64 + values.size())
            }
            DeclType::Object { fields, open } => {
                let declared: f64 = fields.iter().map(|(k, v)| 1.0 + k.len() as f64 + v.size()).sum();
                if *open {
                    declared.max(MAX as f64)
                } else {
                    declared
                }
            }
            DeclType::Dyn { max_size } => *max_size as f64,
            _ => 1.0,
        }
    }

    /// The type of a field selected from this one (`None`: it has no such
    /// field, a compile error for a declared object).
    pub fn field(&self, name: &str) -> Option<DeclType> {
        match self {
            DeclType::Object { fields, open } => match fields.get(name) {
                Some(t) => Some(t.clone()),
                None if *open => Some(DeclType::any()),
                None => None,
            },
            DeclType::Map { values, .. } => Some((**values).clone()),
            DeclType::Dyn { max_size } => Some(DeclType::Dyn { max_size: *max_size }),
            _ => Some(DeclType::any()),
        }
    }

    /// The type of an element (list item, map value; for comprehensions over
    /// a map, see [`DeclType::key`]).
    pub fn element(&self) -> DeclType {
        match self {
            DeclType::List { items, .. } => (**items).clone(),
            DeclType::Map { values, .. } => (**values).clone(),
            DeclType::Object { fields, open: false } => {
                fields.values().cloned().reduce(merge).unwrap_or(DeclType::Null)
            }
            DeclType::Dyn { max_size } => DeclType::Dyn { max_size: *max_size },
            // Null (or a field the value at hand does not have): an
            // expression indexing or ranging over it fails there, so what
            // follows it is never run (`!has(x.m) || x.m.all(...)`).
            DeclType::Null => DeclType::Null,
            _ => DeclType::any(),
        }
    }

    /// What a comprehension's variable ranges over: a list's items, a map's keys.
    pub fn iteration_variable(&self) -> DeclType {
        match self {
            DeclType::List { items, .. } => (**items).clone(),
            DeclType::Map { max_key_len, .. } => DeclType::String { max_len: *max_key_len },
            DeclType::Object { fields, open: false } => {
                DeclType::String { max_len: fields.keys().map(|k| k.len() as u64).max().unwrap_or(0) }
            }
            DeclType::Dyn { max_size } => DeclType::Dyn { max_size: *max_size },
            DeclType::Null => DeclType::Null,
            _ => DeclType::any(),
        }
    }
}

/// The smallest type bounding both.
pub fn merge(a: DeclType, b: DeclType) -> DeclType {
    use DeclType::*;
    match (a, b) {
        (a, b) if a == b => a,
        (String { max_len: x }, String { max_len: y }) => String { max_len: x.max(y) },
        (Bytes { max_len: x }, Bytes { max_len: y }) => Bytes { max_len: x.max(y) },
        (List { max_items: x, items: i }, List { max_items: y, items: j }) => {
            List { max_items: x.max(y), items: Box::new(merge(*i, *j)) }
        }
        (Object { fields: mut f, open: o }, Object { fields: g, open: p }) => {
            for (k, v) in g {
                let merged = match f.remove(&k) {
                    Some(old) => merge(old, v),
                    None => v,
                };
                f.insert(k, merged);
            }
            Object { fields: f, open: o || p }
        }
        // Scalars of different types are as cheap as each other.
        (
            a @ (Null | Bool | Int | Uint | Double | Timestamp | Duration),
            Null | Bool | Int | Uint | Double | Timestamp | Duration,
        ) => a,
        (a, b) => Dyn {
            max_size: (a.size().max(b.size()).max(a.len() as f64).max(b.len() as f64)).min(u64::MAX as f64) as u64,
        },
    }
}

fn bound(s: &Value, key: &str) -> Option<u64> {
    sget(s, key)?.as_u64()
}

/// The fewest bytes a value of this type takes in JSON (kube's
/// `MinSerializedSize`).
fn min_serialized_size(t: &DeclType) -> u64 {
    match t {
        DeclType::Bool => 4,
        DeclType::String { .. } | DeclType::Bytes { .. } | DeclType::List { .. } | DeclType::Map { .. } => 2,
        DeclType::Object { .. } => 2,
        DeclType::Timestamp => 22,
        DeclType::Duration => 4,
        _ => 1,
    }
}

/// An upper bound of the bytes `v` takes as JSON, without writing it
/// (numbers at most 24 bytes, strings escaped at most 6 bytes a byte).
pub(super) fn json_len(v: &Value) -> u64 {
    match v {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 24,
        Value::String(s) => 2 + 6 * s.len() as u64,
        Value::Array(items) => 2 + items.iter().map(|i| 1 + json_len(i)).sum::<u64>(),
        Value::Object(m) => 2 + m.iter().map(|(k, x)| 4 + 6 * k.len() as u64 + json_len(x)).sum::<u64>(),
    }
}

fn serialized_len(v: &Value) -> u64 {
    serde_json::to_vec(v).map_or(MAX, |b| b.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_bounds_or_the_request_size() {
        let t = DeclType::from_schema(&json!({"type": "object", "properties": {
            "tags": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 5}},
            "names": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "n": {"type": "number"}, "i": {"type": "integer"}, "x": {"x-kubernetes-int-or-string": true}
        }}));
        assert_eq!(t.field("tags"), Some(DeclType::list(10, DeclType::string(20))));
        assert_eq!(t.field("names").map(|n| n.len()), Some((MAX - 2) / 3));
        assert!(matches!(t.field("labels"), Some(DeclType::Map { .. })));
        assert_eq!(t.field("n"), Some(DeclType::Double));
        assert_eq!(t.field("i"), Some(DeclType::Int));
        assert!(matches!(t.field("x"), Some(DeclType::Dyn { .. })));
        assert_eq!(t.field("nope"), None);
        let t = DeclType::from_schema(
            &json!({"type": "object", "properties": {"x-y": {"type": "integer"}, "a b": {"type": "integer"}}}),
        );
        assert_eq!((t.field("x__dash__y"), t.field("x-y"), t.len()), (Some(DeclType::Int), None, 1));
    }

    #[test]
    fn values_have_their_exact_sizes() {
        let t = DeclType::of_value(&json!({"a": [{"n": "xy"}, {"n": "xyz", "m": 1}]}));
        let a = t.field("a").unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a.element().field("n"), Some(DeclType::string(3)));
    }
}
