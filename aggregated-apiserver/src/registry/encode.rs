//! Writing answers from stored bytes: lists, Tables and PartialObjectMetadata
//! views are assembled from each object's stored JSON, metadata JSON and table
//! cells; no object is decoded or re-encoded on the way out.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::apimachinery::gofmt::go_float;
use crate::apimachinery::jsonpath::JsonPath;
use crate::registry::kind::{field_value, Cell, Column, Kind, AGE_DESCRIPTION, CREATION_TIMESTAMP};
use crate::storage::{Indexer, ObjectIndex, StoredObject};

/// List metadata as kube-apiserver writes it.
#[derive(Debug, Clone, Default)]
pub struct ListMeta {
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

impl ListMeta {
    fn write(&self, out: &mut BytesMut) {
        put_json(out, &self.to_json(false));
    }

    /// The list metadata; `always_continue` writes `"continue": ""` when there
    /// is no next page, as kube-apiserver does for a custom resource's list
    /// (an unstructured list has no omitempty), unlike typed lists (Table,
    /// PartialObjectMetadataList).
    pub fn to_json(&self, always_continue: bool) -> Value {
        let mut m = json!({ "resourceVersion": self.resource_version.to_string() });
        match &self.continue_token {
            Some(c) => m["continue"] = json!(c),
            None if always_continue => m["continue"] = json!(""),
            None => {}
        }
        if let Some(r) = self.remaining {
            m["remainingItemCount"] = json!(r);
        }
        m
    }
}

fn put_json(out: &mut BytesMut, v: &Value) {
    // Serializing a Value into a Vec cannot fail.
    out.put_slice(&serde_json::to_vec(v).unwrap_or_default());
}

fn put_str(out: &mut BytesMut, s: &str) {
    put_json(out, &Value::String(s.to_string()));
}

fn put_partial(out: &mut BytesMut, version: &str, obj: &StoredObject) {
    out.put_slice(b"{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/");
    out.put_slice(version.as_bytes());
    out.put_slice(b"\",\"metadata\":");
    out.put_slice(&obj.index.metadata);
    out.put_u8(b'}');
}

/// One object as `PartialObjectMetadata`.
pub fn partial_object(version: &str, obj: &StoredObject) -> Bytes {
    let mut out = BytesMut::with_capacity(obj.index.metadata.len() + 80);
    put_partial(&mut out, version, obj);
    out.freeze()
}

/// A `PartialObjectMetadataList`.
pub fn partial_list(version: &str, meta: &ListMeta, items: &[StoredObject]) -> Bytes {
    let size: usize = items.iter().map(|o| o.index.metadata.len() + 80).sum();
    let mut out = BytesMut::with_capacity(size + 160);
    out.put_slice(b"{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/");
    out.put_slice(version.as_bytes());
    out.put_slice(b"\",\"metadata\":");
    meta.write(&mut out);
    out.put_slice(b",\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        put_partial(&mut out, version, o);
    }
    out.put_slice(b"]}");
    out.freeze()
}

/// What a Table row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(v: Option<&str>) -> Result<Self, crate::apimachinery::errors::ApiError> {
        match v {
            None | Some("") | Some("Metadata") => Ok(Self::Metadata),
            Some("None") => Ok(Self::None),
            Some("Object") => Ok(Self::Object),
            Some(other) => Err(crate::apimachinery::errors::ApiError::bad_request(format!(
                "includeObject: Unsupported value: \"{other}\": supported values: \"Metadata\", \"None\", \"Object\""
            ))),
        }
    }
}

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// `obj` (any object with metadata) as `PartialObjectMetadata`.
pub fn partial_of(version: &str, obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": obj["metadata"]})
}

/// A Scale as a Table, in the columns kube-apiserver shows a Scale in:
/// Name, Desired and Available replicas, and Age at `now`.
pub fn scale_table(version: &str, scale: &Value, now: DateTime<Utc>) -> Value {
    let created = scale.pointer("/metadata/creationTimestamp").and_then(Value::as_str);
    let replicas = |at: &str| scale.pointer(at).cloned().unwrap_or(json!(0));
    let column = |name: &str, type_: &str, format: &str, description: &str| json!({"name": name, "type": type_, "format": format, "description": description, "priority": 0});
    json!({
        "kind": "Table", "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": {"resourceVersion": scale["metadata"]["resourceVersion"]},
        "columnDefinitions": [
            column("Name", "string", "name", NAME_DESCRIPTION),
            column("Desired", "integer", "", "Number of desired replicas"),
            column("Available", "integer", "", "Number of actual replicas"),
            column("Age", "date", "", AGE_DESCRIPTION),
        ],
        "rows": [{
            "cells": [scale["metadata"]["name"], replicas("/spec/replicas"), replicas("/status/replicas"), age(created, now)],
            "object": partial_of(version, scale),
        }],
    })
}

/// A kind's Table columns: their definitions, and how each stored cell is shown.
#[derive(Debug, Clone)]
pub struct TableColumns {
    /// The `columnDefinitions`: Name, then the kind's columns.
    pub definitions: Value,
    shown: Box<[Shown]>,
}

/// How a stored cell is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// As it is stored.
    AsStored,
    /// A time, shown as its age.
    Age,
    /// The object's creation time (not stored in the cells: the index has it), as its age.
    Created,
}

impl TableColumns {
    /// The columns of `kind`.
    pub fn of(kind: &dyn Kind) -> Self {
        let mut definitions = vec![
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0}),
        ];
        for c in kind.columns() {
            definitions.push(json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority}));
        }
        let shown = kind.columns().iter().map(shown).collect();
        Self { definitions: Value::Array(definitions), shown }
    }
}

fn shown(c: &Column) -> Shown {
    match (c.type_, c.cell) {
        ("date", Cell::Path(CREATION_TIMESTAMP)) => Shown::Created,
        ("date", _) => Shown::Age,
        _ => Shown::AsStored,
    }
}

/// The cell `c` stores for `obj`. A path's value is taken as the column's
/// type as kube-apiserver's CRD table convertor takes it.
fn cell(c: &Column, obj: &Value) -> Value {
    let path = match c.cell {
        Cell::Read(read) => return read(obj),
        Cell::Path(path) => path,
    };
    if shown(c) == Shown::Created {
        return Value::Null;
    }
    // Parsed when the kind was described (a CRD's column), or a kind's own literal.
    let Some(value) = JsonPath::parse(path).ok().and_then(|p| p.first(obj).cloned()) else {
        return Value::Null;
    };
    match (c.type_, value) {
        (_, Value::Null) => Value::Null,
        ("string", Value::String(s)) => Value::String(s),
        ("string", Value::Number(n)) => Value::String(match n.as_f64() {
            Some(f) if !n.is_i64() && !n.is_u64() => go_float(f),
            _ => n.to_string(),
        }),
        ("string", Value::Bool(b)) => Value::String(b.to_string()),
        ("string", other) => Value::String(other.to_string()),
        ("integer", Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => json!(i),
            // Go's int64(float64): truncated toward zero.
            (None, Some(f)) if f.is_finite() => json!(f.trunc() as i64),
            _ => Value::Null,
        },
        ("number", Value::Number(n)) => Value::Number(n),
        ("boolean", Value::Bool(b)) => Value::Bool(b),
        ("date", Value::String(s)) => Value::String(s),
        _ => Value::Null,
    }
}

/// A meta.k8s.io Table of the given objects; `columns` computed once per kind by the caller.
pub fn table(
    version: &str,
    columns: &TableColumns,
    meta: &ListMeta,
    items: &[StoredObject],
    include: IncludeObject,
    now: DateTime<Utc>,
) -> Bytes {
    let mut out = BytesMut::with_capacity(items.len() * 128 + 2048);
    out.put_slice(b"{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/");
    out.put_slice(version.as_bytes());
    out.put_slice(b"\",\"metadata\":");
    meta.write(&mut out);
    out.put_slice(b",\"columnDefinitions\":");
    put_json(&mut out, &columns.definitions);
    out.put_slice(b",\"rows\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        put_row(&mut out, version, &columns.shown, o, include, now);
    }
    out.put_slice(b"]}");
    out.freeze()
}

fn put_row(
    out: &mut BytesMut,
    version: &str,
    shown: &[Shown],
    o: &StoredObject,
    include: IncludeObject,
    now: DateTime<Utc>,
) {
    out.put_slice(b"{\"cells\":[");
    put_str(out, &o.key.name);
    for (cell, shown) in o.index.cells.iter().zip(shown.iter().chain(std::iter::repeat(&Shown::AsStored))) {
        out.put_u8(b',');
        match (shown, cell) {
            (Shown::AsStored, _) | (Shown::Age, Value::Null) => put_json(out, cell),
            (Shown::Age, Value::String(time)) => put_str(out, &age(Some(time), now)),
            (Shown::Age, _) => put_json(out, &Value::Null),
            (Shown::Created, _) => match o.index.creation_timestamp {
                Some(created) => put_str(out, &human_duration(now - created)),
                None => put_str(out, "<unknown>"),
            },
        }
    }
    out.put_u8(b']');
    match include {
        // A row's object is a RawExtension: Go writes an empty one as null.
        IncludeObject::None => out.put_slice(b",\"object\":null"),
        IncludeObject::Metadata => {
            out.put_slice(b",\"object\":");
            put_partial(out, version, o);
        }
        IncludeObject::Object => {
            out.put_slice(b",\"object\":");
            out.put_slice(&o.bytes);
        }
    }
    out.put_u8(b'}');
}

/// A stored time as the age it has at `now`; `<invalid>` for a string that is
/// not a time (as metav1.Time fails to read it).
fn age(time: Option<&str>, now: DateTime<Utc>) -> String {
    match time.map(DateTime::parse_from_rfc3339) {
        Some(Ok(t)) => human_duration(now - t.with_timezone(&Utc)),
        Some(Err(_)) => "<invalid>".into(),
        None => "<unknown>".into(),
    }
}

/// A duration the way kubectl and kube-apiserver print ages ("5m", "3h2m", "4d").
pub fn human_duration(d: chrono::TimeDelta) -> String {
    let secs = d.num_seconds();
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    let (mins, hours) = (secs / 60, secs / 3600);
    let days = hours / 24;
    if secs < 120 {
        format!("{secs}s")
    } else if mins < 10 {
        match secs % 60 {
            0 => format!("{mins}m"),
            s => format!("{mins}m{s}s"),
        }
    } else if mins < 180 {
        format!("{mins}m")
    } else if hours < 8 {
        match mins % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        }
    } else if days < 365 * 2 {
        format!("{days}d")
    } else if days < 365 * 8 {
        match days % 365 {
            0 => format!("{}y", days / 365),
            dd => format!("{}y{dd}d", days / 365),
        }
    } else {
        format!("{}y", days / 365)
    }
}

/// Indexes objects of one kind for the store.
#[derive(Clone)]
pub struct KindIndexer(pub Arc<dyn Kind>);

impl Indexer for KindIndexer {
    fn index(&self, obj: &Value) -> ObjectIndex {
        let meta = obj.get("metadata");
        let text = |field: &str| meta.and_then(|m| m.get(field)).and_then(Value::as_str);
        let labels = meta
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))).collect())
            .unwrap_or_default();
        let creation_timestamp =
            text("creationTimestamp").and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.with_timezone(&Utc));
        ObjectIndex {
            uid: text("uid").unwrap_or_default().into(),
            labels,
            fields: self.0.selectable_fields().iter().map(|f| field_value(obj, f).into_boxed_str()).collect(),
            cells: self.0.columns().iter().map(|c| cell(c, obj)).collect(),
            creation_timestamp,
            // Set by the store, as a view into the object's bytes.
            metadata: Bytes::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    #[test]
    fn ages_read_like_kubectl() {
        let cases = [
            (5, "5s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 + 120, "3h2m"),
            (9 * 3600, "9h"),
            (3 * 86400 + 3600, "3d1h"),
            (30 * 86400, "30d"),
            (800 * 86400, "2y70d"),
        ];
        for (s, want) in cases {
            assert_eq!(human_duration(TimeDelta::seconds(s)), want, "{s}s");
        }
        assert_eq!(human_duration(TimeDelta::seconds(-10)), "<invalid>");
    }
}
