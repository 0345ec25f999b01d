//! Objects seen through their schema, as structured-merge-diff's `typed`
//! package does for server-side apply: which fields an object sets, what
//! changed between two versions, how an applied configuration merges into
//! the live object, and removing fields.
//!
//! The shape comes from the kind's structural OpenAPI schema and its
//! extensions: `x-kubernetes-list-type` (`atomic`, the default for custom
//! resources, `set`, `map` keyed by `x-kubernetes-list-map-keys`) and
//! `x-kubernetes-map-type` (`granular`, the default, or `atomic`).
//! `metadata` has ObjectMeta's shape, as kube-apiserver gives every object.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use super::fieldpath::{FieldSet, PathElement};
use super::objectmeta::OBJECT_META_FIELDS;

/// How many levels of nesting are followed; deeper values are atomic. The
/// decoder already refuses documents nested deeper than this.
const MAX_DEPTH: usize = 128;

#[derive(Debug, Clone)]
pub enum Shape {
    /// A value replaced as a whole: scalars, atomic maps and lists.
    Atomic,
    /// An object with declared fields and/or any keys (additionalProperties).
    Map {
        fields: BTreeMap<String, Shape>,
        elem: Option<Box<Shape>>,
    },
    List {
        elem: Box<Shape>,
        kind: ListKind,
    },
    /// No schema: maps are granular, lists atomic (structured-merge-diff's
    /// deduced type).
    Deduced,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    Atomic,
    Set,
    Map(Vec<String>),
}

impl Shape {
    /// The shape of a whole object from its structural schema.
    pub fn of_object(schema: &Value) -> Shape {
        let mut shape = Shape::from_schema(schema, 0);
        if let Shape::Map { fields, .. } = &mut shape {
            fields.insert("metadata".into(), object_meta());
        }
        shape
    }

    fn from_schema(s: &Value, depth: usize) -> Shape {
        if depth > MAX_DEPTH {
            return Shape::Atomic;
        }
        if s.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true)
            && s.get("properties").is_none()
        {
            return Shape::Deduced;
        }
        match s.get("type").and_then(Value::as_str) {
            Some("object") => {
                if s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic") {
                    return Shape::Atomic;
                }
                let fields = s
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|props| props.iter().map(|(k, v)| (k.clone(), Shape::from_schema(v, depth + 1))).collect())
                    .unwrap_or_default();
                let elem = match s.get("additionalProperties") {
                    Some(Value::Object(a)) => Some(Box::new(Shape::from_schema(&Value::Object(a.clone()), depth + 1))),
                    Some(Value::Bool(true)) => Some(Box::new(Shape::Deduced)),
                    _ => None,
                };
                Shape::Map { fields, elem }
            }
            Some("array") => {
                let elem = Box::new(s.get("items").map_or(Shape::Deduced, |i| Shape::from_schema(i, depth + 1)));
                let kind = match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
                    Some("set") => ListKind::Set,
                    Some("map") => ListKind::Map(
                        s.get("x-kubernetes-list-map-keys")
                            .and_then(Value::as_array)
                            .map(|keys| keys.iter().filter_map(Value::as_str).map(str::to_string).collect())
                            .unwrap_or_default(),
                    ),
                    _ => ListKind::Atomic,
                };
                if kind == ListKind::Atomic {
                    return Shape::Atomic;
                }
                Shape::List { elem, kind }
            }
            _ => Shape::Atomic,
        }
    }

    fn field(&self, key: &str) -> (Shape, bool) {
        match self {
            Shape::Map { fields, elem } => match fields.get(key) {
                Some(s) => (s.clone(), true),
                None => (elem.as_deref().cloned().unwrap_or(Shape::Deduced), false),
            },
            _ => (Shape::Deduced, false),
        }
    }
}

/// ObjectMeta as kube's OpenAPI models declare it: labels and annotations
/// are granular maps, finalizers a set, ownerReferences a map keyed by uid.
fn object_meta() -> Shape {
    let string_map = || Shape::Map { fields: BTreeMap::new(), elem: Some(Box::new(Shape::Atomic)) };
    let fields = OBJECT_META_FIELDS
        .iter()
        .map(|&field| {
            let shape = match field {
                "labels" | "annotations" => string_map(),
                "finalizers" => Shape::List { elem: Box::new(Shape::Atomic), kind: ListKind::Set },
                "ownerReferences" => {
                    Shape::List { elem: Box::new(Shape::Deduced), kind: ListKind::Map(vec!["uid".into()]) }
                }
                _ => Shape::Atomic,
            };
            (field.to_string(), shape)
        })
        .collect();
    Shape::Map { fields, elem: None }
}

/// The path element of each item of a granular list, refusing duplicates.
fn list_elements(items: &[Value], kind: &ListKind) -> Result<Vec<PathElement>, String> {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let pe = match kind {
            ListKind::Set => PathElement::Value(item.to_string()),
            ListKind::Map(keys) => PathElement::key_of(item, keys)?,
            ListKind::Atomic => return Err("an atomic list has no items of its own".into()),
        };
        if !seen.insert(pe.clone()) {
            return Err(format!("duplicate entries for key {pe}"));
        }
        out.push(pe);
    }
    Ok(out)
}

/// The fields an object sets (structured-merge-diff's `ToFieldSet`).
pub fn field_set(obj: &Value, shape: &Shape) -> Result<FieldSet, String> {
    let mut set = FieldSet::new();
    walk_fields(obj, shape, &mut Vec::new(), &mut set, 0)?;
    Ok(set)
}

fn walk_fields(
    v: &Value,
    shape: &Shape,
    path: &mut Vec<PathElement>,
    set: &mut FieldSet,
    depth: usize,
) -> Result<(), String> {
    let atomic = depth > MAX_DEPTH
        || match shape {
            Shape::Atomic => true,
            Shape::Deduced => !v.is_object(),
            Shape::Map { .. } => !v.is_object() && !v.is_null(),
            Shape::List { .. } => !v.is_array() && !v.is_null(),
        };
    if atomic {
        set.insert(path);
        return Ok(());
    }
    match (v, shape) {
        (Value::Object(m), _) => {
            for (k, child) in m {
                let (child_shape, declared) = shape.field(k);
                path.push(PathElement::Field(k.clone()));
                walk_fields(child, &child_shape, path, set, depth + 1)?;
                if child.is_null() || child.as_object().is_some_and(Map::is_empty) || !declared {
                    set.insert(path);
                }
                path.pop();
            }
        }
        (Value::Array(items), Shape::List { elem, kind }) => {
            for (item, pe) in items.iter().zip(list_elements(items, kind)?) {
                path.push(pe);
                walk_fields(item, elem, path, set, depth + 1)?;
                set.insert(path);
                path.pop();
            }
        }
        _ => {}
    }
    Ok(())
}

/// The fields of a value its shape does not declare, as structured-merge-diff
/// reports them when it converts an applied configuration
/// (`.spec.colour: field not declared in schema`).
pub fn undeclared_fields(v: &Value, shape: &Shape) -> Vec<String> {
    let mut out = Vec::new();
    find_undeclared(v, shape, &mut Vec::new(), &mut out, 0);
    out
}

fn find_undeclared(v: &Value, shape: &Shape, path: &mut Vec<PathElement>, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match (v, shape) {
        (Value::Object(m), Shape::Map { fields, elem }) => {
            for (k, child) in m {
                path.push(PathElement::Field(k.clone()));
                match (fields.get(k), elem) {
                    (Some(s), _) => find_undeclared(child, s, path, out, depth + 1),
                    (None, Some(s)) => find_undeclared(child, s, path, out, depth + 1),
                    (None, None) => {
                        let shown: String = path.iter().map(ToString::to_string).collect();
                        out.push(format!("{shown}: field not declared in schema"));
                    }
                }
                path.pop();
            }
        }
        (Value::Array(items), Shape::List { elem, kind }) => {
            let Ok(pes) = list_elements(items, kind) else { return };
            for (item, pe) in items.iter().zip(pes) {
                path.push(pe);
                find_undeclared(item, elem, path, out, depth + 1);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Whether two values are equal as structured-merge-diff compares them:
/// numbers by value whatever their representation (`35` equals `35.0`).
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(i), Some(j)) => i == j,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| equal(p, q)))
        }
        _ => a == b,
    }
}

/// What changed from one version of an object to the next.
#[derive(Debug, Default)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    pub fn changed(&self) -> FieldSet {
        self.modified.union(&self.added)
    }
}

/// Compares two versions of an object (structured-merge-diff's `Compare`).
pub fn compare(old: &Value, new: &Value, shape: &Shape) -> Result<Comparison, String> {
    let mut c = Comparison::default();
    walk_compare(Some(old), Some(new), shape, &mut Vec::new(), &mut c, 0)?;
    Ok(c)
}

fn is_granular(v: Option<&Value>, shape: &Shape) -> bool {
    match (v, shape) {
        (None, _) => true,
        (Some(v), Shape::Map { .. } | Shape::Deduced) => v.is_object(),
        (Some(v), Shape::List { .. }) => v.is_array(),
        (Some(_), Shape::Atomic) => false,
    }
}

fn walk_compare(
    old: Option<&Value>,
    new: Option<&Value>,
    shape: &Shape,
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
    depth: usize,
) -> Result<(), String> {
    let granular = depth <= MAX_DEPTH
        && !matches!(shape, Shape::Atomic)
        && is_granular(old, shape)
        && is_granular(new, shape)
        && (old.is_some() || new.is_some())
        && !(old.is_none() && new.is_some_and(|v| !v.is_object() && !v.is_array()));
    if !granular {
        match (old, new) {
            (None, Some(_)) => c.added.insert(path),
            (Some(_), None) => c.removed.insert(path),
            (Some(a), Some(b)) if !equal(a, b) => c.modified.insert(path),
            _ => {}
        }
        return Ok(());
    }
    let empty_map = Map::new();
    match shape {
        Shape::List { elem, kind } => {
            let old_items = old.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let new_items = new.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let old_pes = list_elements(old_items, kind)?;
            let new_pes = list_elements(new_items, kind)?;
            let old_by: HashMap<&PathElement, &Value> = old_pes.iter().zip(old_items).collect();
            let new_by: HashMap<&PathElement, &Value> = new_pes.iter().zip(new_items).collect();
            for pe in old_pes.iter().chain(new_pes.iter().filter(|pe| !old_by.contains_key(pe))) {
                path.push(pe.clone());
                let (a, b) = (old_by.get(pe).copied(), new_by.get(pe).copied());
                walk_compare(a, b, elem, path, c, depth + 1)?;
                item_hook(a, b, path, c);
                path.pop();
            }
        }
        _ => {
            let a = old.and_then(Value::as_object).unwrap_or(&empty_map);
            let b = new.and_then(Value::as_object).unwrap_or(&empty_map);
            for k in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                let (child_shape, _) = shape.field(k);
                path.push(PathElement::Field(k.clone()));
                walk_compare(a.get(k), b.get(k), &child_shape, path, c, depth + 1)?;
                item_hook(a.get(k), b.get(k), path, c);
                path.pop();
            }
        }
    }
    Ok(())
}

/// An item (map entry or list item) present on one side only is itself
/// added or removed, besides the fields below it.
fn item_hook(old: Option<&Value>, new: Option<&Value>, path: &[PathElement], c: &mut Comparison) {
    match (old, new) {
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        _ => {}
    }
}

/// Merges an applied configuration into the live object: the configuration
/// wins where it sets a value, granular maps merge key by key, granular lists
/// item by item (structured-merge-diff's `Merge`, with its list order: the
/// configuration's order, live-only items kept where they were).
pub fn merge(live: &Value, config: &Value, shape: &Shape) -> Result<Value, String> {
    merge_node(Some(live), config, shape, 0)
}

fn merge_node(live: Option<&Value>, config: &Value, shape: &Shape, depth: usize) -> Result<Value, String> {
    let Some(live) = live else {
        return Ok(config.clone());
    };
    if depth > MAX_DEPTH {
        return Ok(config.clone());
    }
    match (live, config, shape) {
        (_, _, Shape::Atomic) => Ok(config.clone()),
        (Value::Object(l), Value::Object(r), Shape::Map { .. } | Shape::Deduced) => {
            let mut out = l.clone();
            for (k, rv) in r {
                let (child_shape, _) = shape.field(k);
                let merged = merge_node(l.get(k), rv, &child_shape, depth + 1)?;
                out.insert(k.clone(), merged);
            }
            Ok(Value::Object(out))
        }
        (Value::Array(l), Value::Array(r), Shape::List { elem, kind }) => {
            merge_list(l, r, elem, kind, depth).map(Value::Array)
        }
        _ => Ok(config.clone()),
    }
}

fn merge_list(
    live: &[Value],
    config: &[Value],
    elem: &Shape,
    kind: &ListKind,
    depth: usize,
) -> Result<Vec<Value>, String> {
    let live_pes = list_elements(live, kind)?;
    let config_pes = list_elements(config, kind)?;
    let live_by: HashMap<&PathElement, &Value> = live_pes.iter().zip(live).collect();
    let config_by: HashMap<&PathElement, &Value> = config_pes.iter().zip(config).collect();
    let mut out = Vec::with_capacity(live.len().max(config.len()));
    let mut merged = std::collections::HashSet::new();
    // Items of both, in the configuration's order: the next one expected.
    let mut shared = config_pes.iter().filter(|pe| live_by.contains_key(pe)).peekable();
    let (mut li, mut ri) = (0, 0);
    while li < live_pes.len() || ri < config_pes.len() {
        if li < live_pes.len() && ri < config_pes.len() {
            let pe = &live_pes[li];
            if *pe == config_pes[ri] {
                out.push(merge_node(Some(live[li].clone()).as_ref(), &config[ri], elem, depth + 1)?);
                merged.insert(pe);
                if shared.peek() == Some(&pe) {
                    shared.next();
                }
                li += 1;
                ri += 1;
                continue;
            }
            if config_by.contains_key(pe) && shared.peek().is_some_and(|next| *next != pe) {
                li += 1;
                continue;
            }
        }
        if li < live_pes.len() {
            let pe = &live_pes[li];
            if !config_by.contains_key(pe) {
                out.push(live[li].clone());
                li += 1;
                continue;
            }
            if merged.contains(pe) {
                li += 1;
                continue;
            }
        }
        if ri < config_pes.len() {
            let pe = &config_pes[ri];
            merged.insert(pe);
            out.push(merge_node(live_by.get(pe).copied(), &config[ri], elem, depth + 1)?);
            if shared.peek() == Some(&pe) {
                shared.next();
            }
            ri += 1;
        }
    }
    Ok(out)
}

/// Where an apply configuration sets an atomic map or list, by path
/// (`.spec.tags`): structured-merge-diff's `findAtomics`, which a
/// MutatingAdmissionPolicy's ApplyConfiguration may not touch (setting part
/// of an atomic value would drop the rest of it). Only declared fields are
/// followed, as there; lists without a list type are atomic.
pub fn atomics(config: &Value, shape: &Shape) -> Vec<String> {
    let mut out = Vec::new();
    find_atomics(config, shape, &mut String::new(), &mut out, 0);
    out
}

fn find_atomics(v: &Value, shape: &Shape, path: &mut String, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match (v, shape) {
        (Value::Object(_) | Value::Array(_), Shape::Atomic) | (Value::Array(_), Shape::Deduced) => {
            out.push(path.clone())
        }
        (Value::Object(m), Shape::Map { fields, .. }) => {
            for (k, x) in m {
                if let Some(field) = fields.get(k) {
                    let len = path.len();
                    path.push('.');
                    path.push_str(k);
                    find_atomics(x, field, path, out, depth + 1);
                    path.truncate(len);
                }
            }
        }
        (Value::Array(items), Shape::List { elem, .. }) => {
            for (i, x) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                find_atomics(x, elem, path, out, depth + 1);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// Removes the set's member paths from the object (fields, map keys, list items).
pub fn remove(obj: &mut Value, set: &FieldSet, shape: &Shape) -> Result<(), String> {
    remove_node(obj, set, shape, 0)
}

fn remove_node(v: &mut Value, set: &FieldSet, shape: &Shape, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    match (v, shape) {
        (Value::Object(m), Shape::Map { .. } | Shape::Deduced) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let pe = PathElement::Field(k.clone());
                if set.has(std::slice::from_ref(&pe)) {
                    m.remove(&k);
                } else if let (Some(child_set), Some(child)) = (set.child(&pe), m.get_mut(&k)) {
                    let (child_shape, _) = shape.field(&k);
                    remove_node(child, child_set, &child_shape, depth + 1)?;
                }
            }
        }
        (Value::Array(items), Shape::List { elem, kind }) => {
            let pes = list_elements(items, kind)?;
            let mut kept = Vec::with_capacity(items.len());
            for (mut item, pe) in std::mem::take(items).into_iter().zip(pes) {
                if set.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                if let Some(child_set) = set.child(&pe) {
                    remove_node(&mut item, child_set, elem, depth + 1)?;
                }
                kept.push(item);
            }
            *items = kept;
        }
        _ => {}
    }
    Ok(())
}

/// Looks values of one object up by path. Each list a path goes through is
/// indexed the first time, so looking up every path of a field set costs time
/// in proportion to the object, not to the square of its lists' lengths (a
/// last-applied annotation may list tens of thousands of finalizers).
pub struct ValueLookup<'a> {
    obj: &'a Value,
    /// Item positions of the lists seen so far, by the list's address.
    lists: HashMap<*const Value, HashMap<PathElement, usize>>,
}

impl<'a> ValueLookup<'a> {
    pub fn new(obj: &'a Value) -> Self {
        Self { obj, lists: HashMap::new() }
    }

    /// The value at `path`, if the object has one.
    pub fn get(&mut self, path: &[PathElement], shape: &Shape) -> Option<&'a Value> {
        static DEDUCED: Shape = Shape::Deduced;
        let mut cur = self.obj;
        let mut shape = shape;
        for pe in path {
            match (pe, cur) {
                (PathElement::Field(k), Value::Object(m)) => {
                    shape = match shape {
                        Shape::Map { fields, elem } => fields.get(k.as_str()).or(elem.as_deref()).unwrap_or(&DEDUCED),
                        _ => &DEDUCED,
                    };
                    cur = m.get(k)?;
                }
                (_, Value::Array(items)) => {
                    let Shape::List { elem, kind } = shape else { return None };
                    let positions = match self.lists.entry(std::ptr::from_ref(cur)) {
                        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                        std::collections::hash_map::Entry::Vacant(e) => {
                            let pes = list_elements(items, kind).ok()?;
                            e.insert(pes.into_iter().enumerate().map(|(i, pe)| (pe, i)).collect())
                        }
                    };
                    cur = items.get(*positions.get(pe)?)?;
                    shape = elem;
                }
                _ => return None,
            }
        }
        Some(cur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shape() -> Shape {
        Shape::of_object(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "weight": {"type": "number"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "ports": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}}
                }},
                "status": {"type": "object", "properties": {
                    "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                        "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}}
                }}
            }
        }))
    }

    #[test]
    fn atomics_are_found_where_a_configuration_sets_them() {
        let config = json!({
            "metadata": {"labels": {"a": "b"}, "finalizers": ["x"]},
            "spec": {"weight": 1, "tags": ["a"], "ports": [80], "undeclared": ["kept out"]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        });
        assert_eq!(atomics(&config, &shape()), vec![".spec.tags".to_string()]);
        assert!(atomics(&json!({"spec": {"weight": 2}}), &shape()).is_empty());
    }

    #[test]
    fn field_sets_follow_the_schema() {
        let obj = json!({
            "metadata": {"labels": {"a": "1"}, "finalizers": ["x/y"]},
            "spec": {"weight": 1, "tags": ["p", "q"], "ports": [80]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        });
        let set = field_set(&obj, &shape()).unwrap();
        assert_eq!(
            set.to_fields_v1(),
            json!({
                "f:metadata": {"f:finalizers": {"v:\"x/y\"": {}}, "f:labels": {"f:a": {}}},
                "f:spec": {"f:weight": {}, "f:tags": {}, "f:ports": {"v:80": {}}},
                "f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}}
            })
        );
    }

    #[test]
    fn compare_reports_leaves_and_items() {
        let old = json!({"spec": {"weight": 1, "tags": ["a"]}});
        let new = json!({"spec": {"weight": 2, "tags": ["a"]}, "metadata": {"labels": {"x": "y"}}});
        let c = compare(&old, &new, &shape()).unwrap();
        assert_eq!(c.modified.to_fields_v1(), json!({"f:spec": {"f:weight": {}}}));
        assert_eq!(c.added.to_fields_v1(), json!({"f:metadata": {".": {}, "f:labels": {".": {}, "f:x": {}}}}));
        assert!(c.removed.is_empty());
    }

    #[test]
    fn merge_keeps_live_only_items_and_the_configs_order() {
        let live = json!({"status": {"conditions": [{"type": "A", "status": "1"}, {"type": "B", "status": "1"}]}});
        let config = json!({"status": {"conditions": [{"type": "C", "status": "2"}, {"type": "A", "status": "2"}]}});
        let out = merge(&live, &config, &shape()).unwrap();
        let types: Vec<&str> =
            out["status"]["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["C", "A", "B"]);
        assert_eq!(out["status"]["conditions"][1]["status"], "2");
        let atomic =
            merge(&json!({"spec": {"tags": ["a", "b"]}}), &json!({"spec": {"tags": ["c"]}}), &shape()).unwrap();
        assert_eq!(atomic["spec"]["tags"], json!(["c"]));
    }

    #[test]
    fn remove_drops_members() {
        let mut obj = json!({"metadata": {"finalizers": ["a/b", "c/d"]}, "spec": {"weight": 1, "tags": []}});
        let set = FieldSet::from_fields_v1(
            &json!({"f:metadata": {"f:finalizers": {"v:\"a/b\"": {}}}, "f:spec": {"f:tags": {}}}),
        )
        .unwrap();
        remove(&mut obj, &set, &shape()).unwrap();
        assert_eq!(obj, json!({"metadata": {"finalizers": ["c/d"]}, "spec": {"weight": 1}}));
    }

    #[test]
    fn undeclared_fields_are_named() {
        let v = json!({"spec": {"weight": 1, "colour": "w"}, "metadata": {"labels": {"a": "b"}, "bogus": 1}});
        assert_eq!(
            undeclared_fields(&v, &shape()),
            [".metadata.bogus: field not declared in schema", ".spec.colour: field not declared in schema"]
        );
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(equal(&json!({"a": [35]}), &json!({"a": [35.0]})));
        assert!(!equal(&json!(35), &json!(35.5)));
        let c = compare(&json!({"spec": {"weight": 35.0}}), &json!({"spec": {"weight": 35}}), &shape()).unwrap();
        assert!(c.modified.is_empty());
    }

    #[test]
    fn duplicate_keys_in_an_associative_list_are_an_error() {
        let obj = json!({"status": {"conditions": [{"type": "A"}, {"type": "A"}]}});
        assert!(field_set(&obj, &shape()).is_err());
        let missing_key = json!({"status": {"conditions": [{"status": "x"}]}});
        assert!(field_set(&missing_key, &shape()).is_err());
    }
}
