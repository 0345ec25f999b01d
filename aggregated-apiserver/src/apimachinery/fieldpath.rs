//! Field paths and sets of fields, as sigs.k8s.io/structured-merge-diff's
//! `fieldpath` package models them: what server-side apply records in
//! `metadata.managedFields` (the `FieldsV1` encoding) and names in conflicts
//! (`.spec.weight`, `.status.conditions[type="Ready"]`, `.metadata.finalizers[="a/b"]`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

/// One step of a path. The variant order is structured-merge-diff's order
/// of path elements (field names, then keys, then values, then indexes).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A field of a struct or a key of a map.
    Field(String),
    /// An item of an associative list (`x-kubernetes-list-type: map`), by its
    /// key fields: (name, value as JSON text), sorted by name.
    Key(Vec<(String, String)>),
    /// An item of a set list, by its value as JSON text.
    Value(String),
    /// An item of a list by position.
    Index(usize),
}

impl PathElement {
    /// The key of this element in a `FieldsV1` document.
    fn fields_v1_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let body: Vec<String> =
                    fields.iter().map(|(name, value)| format!("{}:{value}", Value::String(name.clone()))).collect();
                format!("k:{{{}}}", body.join(","))
            }
            PathElement::Value(value) => format!("v:{value}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    fn from_fields_v1_key(key: &str) -> Result<Self, String> {
        let (prefix, rest) = key.split_once(':').ok_or_else(|| format!("unexpected key {key:?}: no prefix"))?;
        match prefix {
            "f" => Ok(PathElement::Field(rest.to_string())),
            "v" => {
                let v: Value = serde_json::from_str(rest).map_err(|e| format!("parsing value of {key:?}: {e}"))?;
                Ok(PathElement::Value(v.to_string()))
            }
            "k" => match serde_json::from_str::<Value>(rest) {
                Ok(Value::Object(fields)) => {
                    Ok(PathElement::Key(fields.into_iter().map(|(name, value)| (name, value.to_string())).collect()))
                }
                Ok(_) => Err(format!("key of {key:?} is not a JSON object")),
                Err(e) => Err(format!("parsing key of {key:?}: {e}")),
            },
            "i" => rest.parse().map(PathElement::Index).map_err(|e| format!("parsing index of {key:?}: {e}")),
            other => Err(format!("unknown prefix {other:?} in {key:?}")),
        }
    }

    /// The key of an associative-list item, from the item's key fields.
    pub fn key_of(item: &Value, keys: &[String]) -> Result<Self, String> {
        let mut fields = Vec::with_capacity(keys.len());
        for k in keys {
            match item.get(k) {
                Some(v) if !v.is_null() => fields.push((k.clone(), v.to_string())),
                _ => return Err(format!("associative list with keys has an element that omits key field {k:?}")),
            }
        }
        fields.sort();
        Ok(PathElement::Key(fields))
    }
}

impl fmt::Display for PathElement {
    /// structured-merge-diff's rendering of one path element.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let body: Vec<String> = fields.iter().map(|(name, value)| format!("{name}={value}")).collect();
                write!(f, "[{}]", body.join(","))
            }
            PathElement::Value(value) => write!(f, "[={value}]"),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the root of an object.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Path(pub Vec<PathElement>);

impl Path {
    pub fn fields(names: &[&str]) -> Self {
        Path(names.iter().map(|n| PathElement::Field((*n).to_string())).collect())
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|pe| write!(f, "{pe}"))
    }
}

/// A set of paths stored as a tree: `members` are the paths that end at this
/// level, `children` the subtrees below. A path may be both a member and
/// have children (an associative-list item owned as a whole, and its fields).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(FieldSet::is_empty)
    }

    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether the path is a member or has a member below it.
    pub fn has_or_below(&self, path: &[PathElement]) -> bool {
        match path {
            [] => !self.is_empty(),
            [last] => self.members.contains(last) || self.children.get(last).is_some_and(|c| !c.is_empty()),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has_or_below(rest)),
        }
    }

    /// The subtree below a path element (empty if none).
    pub fn child(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// The paths of `self` that are not paths of `other` (a member of `other`
    /// removes that member only, not what lies below it).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.difference(&other.members).cloned().collect();
        for (pe, child) in &self.children {
            let rest = match other.children.get(pe) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(pe.clone(), rest);
            }
        }
        out
    }

    /// Like [`difference`](Self::difference), but a member of `other` also
    /// removes everything below it (for fields reset as a whole, like status).
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.difference(&other.members).cloned().collect();
        for (pe, child) in &self.children {
            if other.members.contains(pe) {
                continue;
            }
            let rest = match other.children.get(pe) {
                Some(theirs) => child.recursive_difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(pe.clone(), rest);
            }
        }
        out
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.intersection(&other.members).cloned().collect();
        for (pe, child) in &self.children {
            if let Some(theirs) = other.children.get(pe) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(pe.clone(), both);
                }
            }
        }
        out
    }

    /// Every member path, members of a level before its children, each in
    /// order (the order structured-merge-diff lists conflicts in).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Path>) {
        for pe in &self.members {
            prefix.push(pe.clone());
            out.push(Path(prefix.clone()));
            prefix.pop();
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `FieldsV1` document of the set: one key per element, `{}` below a
    /// member without children, and `".": {}` where a member also has children.
    pub fn to_fields_v1(&self) -> Value {
        let mut out = Map::new();
        for pe in &self.members {
            if self.children.get(pe).is_none_or(FieldSet::is_empty) {
                out.insert(pe.fields_v1_key(), Value::Object(Map::new()));
            }
        }
        for (pe, child) in &self.children {
            if child.is_empty() {
                continue;
            }
            let mut body = match child.to_fields_v1() {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            if self.members.contains(pe) {
                body.insert(".".into(), Value::Object(Map::new()));
            }
            out.insert(pe.fields_v1_key(), Value::Object(body));
        }
        Value::Object(out)
    }

    /// Reads a `FieldsV1` document.
    pub fn from_fields_v1(doc: &Value) -> Result<FieldSet, String> {
        let Value::Object(entries) = doc else {
            return Err("FieldsV1 must be a JSON object".into());
        };
        let mut set = FieldSet::new();
        for (key, body) in entries {
            if key == "." {
                continue;
            }
            let pe = PathElement::from_fields_v1_key(key)?;
            let Value::Object(inner) = body else {
                return Err(format!("the value of {key:?} must be a JSON object"));
            };
            if inner.is_empty() || inner.contains_key(".") {
                set.members.insert(pe.clone());
            }
            let child = FieldSet::from_fields_v1(body)?;
            if !child.is_empty() {
                set.children.insert(pe, child);
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_v1_round_trips_with_dots_where_a_member_has_children() {
        let doc = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}, "f:finalizers": {"v:\"a/b\"": {}}},
            "f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}}},
            "f:spec": {"f:weight": {}}
        });
        let set = FieldSet::from_fields_v1(&doc).unwrap();
        assert_eq!(set.to_fields_v1(), doc);
        let shown: Vec<String> = set.paths().iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                ".metadata.labels",
                ".metadata.finalizers[=\"a/b\"]",
                ".metadata.labels.app",
                ".spec.weight",
                ".status.conditions[type=\"Ready\"]",
                ".status.conditions[type=\"Ready\"].status"
            ]
        );
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::new();
        a.insert(&Path::fields(&["spec", "weight"]).0);
        a.insert(&Path::fields(&["spec", "height"]).0);
        let mut b = FieldSet::new();
        b.insert(&Path::fields(&["spec", "weight"]).0);
        assert_eq!(a.difference(&b).paths(), vec![Path::fields(&["spec", "height"])]);
        assert_eq!(a.intersection(&b), b);
        let mut spec = FieldSet::new();
        spec.insert(&Path::fields(&["spec"]).0);
        assert_eq!(a.difference(&spec), a, "a member removes itself only");
        assert!(a.recursive_difference(&spec).is_empty(), "unless the difference is recursive");
        assert!(a.has_or_below(&Path::fields(&["spec"]).0));
        assert!(!a.has(&Path::fields(&["spec"]).0));
    }

    #[test]
    fn malformed_fields_v1_is_an_error() {
        assert!(FieldSet::from_fields_v1(&json!({"x:y": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"f:y": 1})).is_err());
        assert!(FieldSet::from_fields_v1(&json!([])).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"k:[1]": {}})).is_err());
    }
}
