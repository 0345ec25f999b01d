//! What makes a valid `metav1.ObjectMeta` (and `TypeMeta`) on a Kubernetes
//! object, with kube-apiserver's rules, order and wording.
//!
//! Mirrors k8s.io/apimachinery `pkg/api/validation/objectmeta.go`
//! (`ValidateObjectMetaAccessor`, `ValidateObjectMetaAccessorUpdate`, owner
//! references, finalizers, annotations size), `pkg/apis/meta/v1/validation`
//! (labels, managed-fields entries), apiextensions-apiserver's
//! `ValidateTypeMeta` and the decoder's type checks of `metadata` (kube
//! round-trips it through `metav1.ObjectMeta`, so a wrongly typed field is a
//! 400), plus what `BeforeUpdate` carries over from the stored object.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::apimachinery::field_error::{FieldError, FieldErrorKind};
use crate::apimachinery::gofmt::{
    go_display, go_quote, go_string_slice, go_time_string, go_value, is_go_printable, parse_rfc3339,
};
use crate::apimachinery::gojson::{go_json_kind, json_equal, unmarshal_field_type_error};
use crate::apimachinery::names::{
    validate_dns1123_label, validate_dns1123_subdomain, validate_label_value, validate_qualified_name,
};

/// `metav1.ObjectMeta`'s JSON fields.
/// The longest field manager name (`metav1validation.FieldManagerMaxLength`):
/// a write's `fieldManager` and every managedFields entry's manager.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

pub(crate) const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];
/// `metav1.OwnerReference`'s JSON fields.
pub(crate) const OWNER_REFERENCE_FIELDS: &[&str] =
    &["apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"];
/// `metav1.ManagedFieldsEntry`'s JSON fields.
pub(crate) const MANAGED_FIELDS_ENTRY_FIELDS: &[&str] =
    &["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource"];

const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
const MAX_SUBRESOURCE_NAME_LENGTH: usize = 256;

// ---------------------------------------------------------------------------
// ObjectMeta decoding checks
// ---------------------------------------------------------------------------

/// The type checks kube's decoder applies to `metadata` (it round-trips it
/// through `metav1.ObjectMeta`). `Err` carries Go's message, e.g.
/// `json: cannot unmarshal number into Go struct field ObjectMeta.name of type string`,
/// which kube returns as a 400 (wrap it with [`decode_error_message`](crate::apimachinery::gojson::decode_error_message)).
/// A missing or `null` metadata is fine.
pub fn check_object_meta_types(meta: &Value) -> Result<(), String> {
    let m = match meta {
        Value::Null => return Ok(()),
        Value::Object(m) => m,
        other => {
            return Err(format!("json: cannot unmarshal {} into Go value of type v1.ObjectMeta", go_json_kind(other)))
        }
    };
    for (k, v) in m {
        match k.as_str() {
            "name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion" => {
                go_expect_string(v, "ObjectMeta", k, "string")?
            }
            "generation" | "deletionGracePeriodSeconds" => go_expect_int64(v, "ObjectMeta", k)?,
            "creationTimestamp" | "deletionTimestamp" => go_expect_time(v, "ObjectMeta", k)?,
            "labels" | "annotations" => match v {
                Value::Null => {}
                Value::Object(map) => {
                    for item in map.values() {
                        go_expect_string(item, "ObjectMeta", k, "string")?;
                    }
                }
                other => {
                    return Err(unmarshal_field_type_error(go_json_kind(other), "ObjectMeta", k, "map[string]string"))
                }
            },
            "finalizers" => match v {
                Value::Null => {}
                Value::Array(items) => {
                    for item in items {
                        go_expect_string(item, "ObjectMeta", k, "string")?;
                    }
                }
                other => return Err(unmarshal_field_type_error(go_json_kind(other), "ObjectMeta", k, "[]string")),
            },
            "ownerReferences" => go_expect_struct_list(v, k, "OwnerReference", |field, fv| match field {
                "apiVersion" | "kind" | "name" | "uid" => {
                    go_expect_string(fv, "OwnerReference", &format!("ownerReferences.{field}"), "string")
                }
                "controller" | "blockOwnerDeletion" => match fv {
                    Value::Null | Value::Bool(_) => Ok(()),
                    other => Err(unmarshal_field_type_error(
                        go_json_kind(other),
                        "OwnerReference",
                        &format!("ownerReferences.{field}"),
                        "bool",
                    )),
                },
                _ => Ok(()),
            })?,
            "managedFields" => go_expect_struct_list(v, k, "ManagedFieldsEntry", |field, fv| {
                let path = format!("managedFields.{field}");
                match field {
                    "manager" | "apiVersion" | "fieldsType" | "subresource" => {
                        go_expect_string(fv, "ManagedFieldsEntry", &path, "string")
                    }
                    "operation" => go_expect_string(fv, "ManagedFieldsEntry", &path, "v1.ManagedFieldsOperationType"),
                    "time" => go_expect_time(fv, "ManagedFieldsEntry", &path),
                    _ => Ok(()),
                }
            })?,
            _ => {}
        }
    }
    Ok(())
}

fn go_expect_string(v: &Value, strukt: &str, field: &str, go_type: &str) -> Result<(), String> {
    match v {
        Value::Null | Value::String(_) => Ok(()),
        other => Err(unmarshal_field_type_error(go_json_kind(other), strukt, field, go_type)),
    }
}

fn go_expect_int64(v: &Value, strukt: &str, field: &str) -> Result<(), String> {
    match v {
        Value::Null => Ok(()),
        Value::Number(n) if n.as_i64().is_some() => Ok(()),
        Value::Number(n) => Err(unmarshal_field_type_error(&format!("number {n}"), strukt, field, "int64")),
        other => Err(unmarshal_field_type_error(go_json_kind(other), strukt, field, "int64")),
    }
}

/// `metav1.Time.UnmarshalJSON`: null, or an RFC 3339 string.
fn go_expect_time(v: &Value, strukt: &str, field: &str) -> Result<(), String> {
    match v {
        Value::Null => Ok(()),
        Value::String(s) => {
            if parse_rfc3339(s).is_some() {
                Ok(())
            } else {
                let q = go_quote(s);
                Err(format!("parsing time {q} as \"2006-01-02T15:04:05Z07:00\": cannot parse {q} as \"2006\""))
            }
        }
        other => Err(unmarshal_field_type_error(go_json_kind(other), strukt, field, "string")),
    }
}

fn go_expect_struct_list(
    v: &Value,
    field: &str,
    strukt: &str,
    check: impl Fn(&str, &Value) -> Result<(), String>,
) -> Result<(), String> {
    match v {
        Value::Null => Ok(()),
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Null => {}
                    Value::Object(fields) => {
                        for (k, fv) in fields {
                            check(k, fv)?;
                        }
                    }
                    other => {
                        return Err(unmarshal_field_type_error(
                            go_json_kind(other),
                            "ObjectMeta",
                            field,
                            &format!("v1.{strukt}"),
                        ))
                    }
                }
            }
            Ok(())
        }
        other => Err(unmarshal_field_type_error(go_json_kind(other), "ObjectMeta", field, &format!("[]v1.{strukt}"))),
    }
}

// ---------------------------------------------------------------------------
// ObjectMeta validation
// ---------------------------------------------------------------------------

/// Checks the kind and apiVersion the body names, like apiextensions'
/// `ValidateTypeMeta`: `kind: Invalid value: "Goat": must be Widget`,
/// `apiVersion: Invalid value: "v1": must be example.com/v1`.
/// kube reports only these when any fails.
pub fn validate_type_meta(obj: &Value, api_version: &str, kind: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let got_kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if got_kind != kind {
        errs.push(invalid("kind", go_quote(got_kind), format!("must be {kind}")));
    }
    let got_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if got_version != api_version {
        errs.push(invalid("apiVersion", go_quote(got_version), format!("must be {api_version}")));
    }
    errs
}

fn invalid(field: impl Into<String>, value: String, detail: impl Into<String>) -> FieldError {
    FieldError { kind: FieldErrorKind::Invalid, field: field.into(), value: Some(value), detail: detail.into() }
}

/// The type name a schema error would use for a JSON value.
fn schema_type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        // An integer is one that fits an i64, as the schema validator decides.
        Value::Number(n) if n.as_i64().is_some() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A wrongly typed metadata field (kube would have failed decoding: see
/// [`check_object_meta_types`]); reported like a schema type error.
fn meta_type_error(path: &str, want: &str, v: &Value) -> FieldError {
    let got = go_quote(schema_type_of(v));
    FieldError {
        kind: FieldErrorKind::TypeInvalid,
        field: path.to_string(),
        value: Some(got.clone()),
        detail: format!("{path} in body must be of type {want}: {got}"),
    }
}

struct MetaReader<'a> {
    m: &'a Map<String, Value>,
    errs: Vec<FieldError>,
}

impl<'a> MetaReader<'a> {
    fn string(&mut self, key: &str) -> &'a str {
        match self.m.get(key) {
            None | Some(Value::Null) => "",
            Some(Value::String(s)) => s,
            Some(other) => {
                self.errs.push(meta_type_error(&format!("metadata.{key}"), "string", other));
                ""
            }
        }
    }

    fn int(&mut self, key: &str) -> Option<i64> {
        match self.m.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64(),
            Some(other) => {
                self.errs.push(meta_type_error(&format!("metadata.{key}"), "integer", other));
                None
            }
        }
    }

    /// labels / annotations: `null` values read as "" (as Go decodes them).
    fn string_map(&mut self, key: &str) -> Vec<(&'a str, &'a str)> {
        let path = format!("metadata.{key}");
        match self.m.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(o)) => {
                let mut out = Vec::with_capacity(o.len());
                for (k, v) in o {
                    match v {
                        Value::String(s) => out.push((k.as_str(), s.as_str())),
                        Value::Null => out.push((k.as_str(), "")),
                        other => self.errs.push(meta_type_error(&format!("{path}.{k}"), "string", other)),
                    }
                }
                out
            }
            Some(other) => {
                self.errs.push(meta_type_error(&path, "object", other));
                Vec::new()
            }
        }
    }

    fn list(&mut self, key: &str) -> &'a [Value] {
        match self.m.get(key) {
            None | Some(Value::Null) => &[],
            Some(Value::Array(a)) => a,
            Some(other) => {
                self.errs.push(meta_type_error(&format!("metadata.{key}"), "array", other));
                &[]
            }
        }
    }

    fn strings(&mut self, key: &str) -> Vec<&'a str> {
        let path = format!("metadata.{key}");
        let mut out = Vec::new();
        for (i, v) in self.list(key).iter().enumerate() {
            match v {
                Value::String(s) => out.push(s.as_str()),
                Value::Null => out.push(""),
                other => self.errs.push(meta_type_error(&format!("{path}[{i}]"), "string", other)),
            }
        }
        out
    }
}

fn item_string<'a>(item: &'a Map<String, Value>, key: &str, path: &str, errs: &mut Vec<FieldError>) -> &'a str {
    match item.get(key) {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s,
        Some(other) => {
            errs.push(meta_type_error(&format!("{path}.{key}"), "string", other));
            ""
        }
    }
}

/// kube's `maskTrailingDash`: a generateName may end in '-'.
fn mask_trailing_dash(name: &str) -> Cow<'_, str> {
    if name.len() > 1 && name.ends_with('-') {
        let mut bytes = name.as_bytes()[..name.len() - 2].to_vec();
        bytes.push(b'a');
        Cow::Owned(String::from_utf8_lossy(&bytes).into_owned())
    } else {
        Cow::Borrowed(name)
    }
}

/// ObjectMeta checks for a create, and the common part of an update (call
/// [`validate_object_meta_update`] as well on update), like apimachinery's
/// `ValidateObjectMetaAccessor` with `NameIsDNSSubdomain`, in kube's order:
/// * `metadata.generateName` (if set) must be a DNS-1123 subdomain once a
///   trailing '-' is masked;
/// * `metadata.name: Required value: name or generateName is required` when
///   both are empty (a name still to be generated from generateName is
///   accepted), else a DNS-1123 subdomain: `metadata.name: Invalid value: "Bad": a lowercase RFC 1123 subdomain must consist of ...`;
/// * namespaced kinds: `metadata.namespace: Required value` / a DNS-1123
///   label; cluster-scoped: `metadata.namespace: Forbidden: not allowed on this type`;
/// * `metadata.generation` >= 0;
/// * `metadata.labels`: keys are qualified names, values label values;
///   `metadata.annotations`: keys (lower-cased) are qualified names, total
///   size `Too long: must have at most 262144 bytes`;
/// * `metadata.ownerReferences.{apiVersion,kind,name,uid}` (no index, as kube
///   reports them): `version must not be empty` / `must not be empty`, no
///   `v1` `Event` owner, at most one `controller: true`;
/// * `metadata.finalizers`: qualified names, not both `orphan` and
///   `foregroundDeletion` (duplicates are allowed, as in kube);
/// * `metadata.managedFields[i]`: operation `Apply`/`Update`, fieldsType
///   `FieldsV1`, manager at most 128 bytes of printable characters,
///   subresource at most 256 bytes.
///
/// Wrongly typed fields (which kube rejects while decoding, see
/// [`check_object_meta_types`]) are reported as type errors first.
pub fn validate_object_meta(meta: &Value, namespaced: bool) -> Vec<FieldError> {
    let empty = Map::new();
    let m = match meta {
        Value::Object(m) => m,
        Value::Null => &empty,
        other => return vec![meta_type_error("metadata", "object", other)],
    };
    let mut r = MetaReader { m, errs: Vec::new() };
    let generate_name = r.string("generateName");
    let name = r.string("name");
    let namespace = r.string("namespace");
    let generation = r.int("generation");
    let labels = r.string_map("labels");
    let annotations = r.string_map("annotations");
    let owner_refs = r.list("ownerReferences");
    let finalizers = r.strings("finalizers");
    let managed = r.list("managedFields");
    let mut errs = r.errs;

    if !generate_name.is_empty() {
        for msg in validate_dns1123_subdomain(&mask_trailing_dash(generate_name)) {
            errs.push(invalid("metadata.generateName", go_quote(generate_name), msg));
        }
    }
    if name.is_empty() {
        if generate_name.is_empty() {
            errs.push(FieldError::required("metadata.name", "name or generateName is required"));
        }
    } else {
        for msg in validate_dns1123_subdomain(name) {
            errs.push(invalid("metadata.name", go_quote(name), msg));
        }
    }

    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for msg in validate_dns1123_label(namespace) {
                errs.push(invalid("metadata.namespace", go_quote(namespace), msg));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden("metadata.namespace", "not allowed on this type"));
    }

    if let Some(g) = generation.filter(|g| *g < 0) {
        errs.push(invalid("metadata.generation", g.to_string(), "must be greater than or equal to 0"));
    }

    for (k, v) in &labels {
        for msg in validate_qualified_name(k) {
            errs.push(invalid("metadata.labels", go_quote(k), msg));
        }
        for msg in validate_label_value(v) {
            errs.push(invalid("metadata.labels", go_quote(v), msg));
        }
    }

    let mut annotation_bytes = 0usize;
    for (k, v) in &annotations {
        for msg in validate_qualified_name(&k.to_lowercase()) {
            errs.push(invalid("metadata.annotations", go_quote(k), msg));
        }
        annotation_bytes = annotation_bytes.saturating_add(k.len()).saturating_add(v.len());
    }
    if annotation_bytes > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::new(
            FieldErrorKind::TooLong,
            "metadata.annotations",
            format!("must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        ));
    }

    validate_owner_references(owner_refs, &mut errs);

    for f in &finalizers {
        for msg in validate_qualified_name(f) {
            errs.push(invalid("metadata.finalizers", go_quote(f), msg));
        }
    }
    if finalizers.contains(&"orphan") && finalizers.contains(&"foregroundDeletion") {
        errs.push(invalid(
            "metadata.finalizers",
            go_string_slice(&finalizers),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }

    validate_managed_fields(managed, &mut errs);
    errs
}

fn validate_owner_references(refs: &[Value], errs: &mut Vec<FieldError>) {
    const PATH: &str = "metadata.ownerReferences";
    let mut first_controller: Option<String> = None;
    for item in refs {
        let empty = Map::new();
        let r = match item {
            Value::Object(o) => o,
            Value::Null => &empty,
            other => {
                errs.push(meta_type_error(PATH, "object", other));
                continue;
            }
        };
        let api_version = item_string(r, "apiVersion", PATH, errs);
        let kind = item_string(r, "kind", PATH, errs);
        let name = item_string(r, "name", PATH, errs);
        let uid = item_string(r, "uid", PATH, errs);
        let controller = match r.get("controller") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                errs.push(meta_type_error(&format!("{PATH}.controller"), "boolean", other));
                false
            }
        };
        // schema.FromAPIVersionAndKind: an unparsable apiVersion leaves the version empty.
        let (group, version) = match api_version.matches('/').count() {
            _ if api_version.is_empty() || api_version == "/" => ("", ""),
            0 => ("", api_version),
            1 => api_version.split_once('/').unwrap_or(("", "")),
            _ => ("", ""),
        };
        if version.is_empty() {
            errs.push(invalid(format!("{PATH}.apiVersion"), go_quote(api_version), "version must not be empty"));
        }
        if kind.is_empty() {
            errs.push(invalid(format!("{PATH}.kind"), go_quote(kind), "must not be empty"));
        }
        if name.is_empty() {
            errs.push(invalid(format!("{PATH}.name"), go_quote(name), "must not be empty"));
        }
        if uid.is_empty() {
            errs.push(invalid(format!("{PATH}.uid"), go_quote(uid), "must not be empty"));
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            errs.push(invalid(PATH, go_value(item), "/v1, Kind=Event is disallowed from being an owner"));
        }
        if controller {
            let current = format!("{kind}/{name}");
            match &first_controller {
                Some(first) => errs.push(invalid(
                    PATH,
                    go_value(&Value::Array(refs.to_vec())),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
}

fn validate_managed_fields(entries: &[Value], errs: &mut Vec<FieldError>) {
    for (i, item) in entries.iter().enumerate() {
        let path = format!("metadata.managedFields[{i}]");
        let empty = Map::new();
        let e = match item {
            Value::Object(o) => o,
            Value::Null => &empty,
            other => {
                errs.push(meta_type_error(&path, "object", other));
                continue;
            }
        };
        let operation = item_string(e, "operation", &path, errs);
        let fields_type = item_string(e, "fieldsType", &path, errs);
        let manager = item_string(e, "manager", &path, errs);
        let subresource = item_string(e, "subresource", &path, errs);
        if operation != "Apply" && operation != "Update" {
            errs.push(invalid(format!("{path}.operation"), go_quote(operation), "must be `Apply` or `Update`"));
        }
        if !fields_type.is_empty() && fields_type != "FieldsV1" {
            errs.push(invalid(format!("{path}.fieldsType"), go_quote(fields_type), "must be `FieldsV1`"));
        }
        if manager.len() > FIELD_MANAGER_MAX_LENGTH {
            errs.push(FieldError::new(
                FieldErrorKind::TooLong,
                format!("{path}.manager"),
                format!("must have at most {FIELD_MANAGER_MAX_LENGTH} bytes"),
            ));
        }
        for (pos, c) in manager.char_indices() {
            if !is_go_printable(c) {
                errs.push(invalid(
                    format!("{path}.manager"),
                    go_quote(manager),
                    format!("invalid character U+{:04X} (at position {pos})", u32::from(c)),
                ));
            }
        }
        if subresource.len() > MAX_SUBRESOURCE_NAME_LENGTH {
            errs.push(FieldError::new(
                FieldErrorKind::TooLong,
                format!("{path}.subresource"),
                format!("must have at most {MAX_SUBRESOURCE_NAME_LENGTH} bytes"),
            ));
        }
    }
}

fn meta_map(meta: &Value) -> Option<&Map<String, Value>> {
    meta.as_object()
}

fn meta_str<'a>(meta: &'a Value, key: &str) -> &'a str {
    meta_map(meta).and_then(|m| m.get(key)).and_then(Value::as_str).unwrap_or("")
}

fn meta_i64(meta: &Value, key: &str) -> Option<i64> {
    meta_map(meta).and_then(|m| m.get(key)).and_then(Value::as_i64)
}

/// A timestamp field: `None` when absent/null/"" (Go's zero time).
fn meta_time<'a>(meta: &'a Value, key: &str) -> Option<&'a Value> {
    meta_map(meta).and_then(|m| m.get(key)).filter(|v| !v.is_null() && v.as_str() != Some(""))
}

fn same_time(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => match (x.as_str().and_then(parse_rfc3339), y.as_str().and_then(parse_rfc3339)) {
            (Some(p), Some(q)) => p == q,
            _ => x == y,
        },
        _ => false,
    }
}

/// The update-only ObjectMeta checks of apimachinery's
/// `ValidateObjectMetaAccessorUpdate`, in kube's order (call it after
/// [`validate_object_meta`] on the new metadata; kube runs both on update):
/// * while the old object is being deleted, no new finalizers:
///   `metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"x"}`;
/// * `metadata.resourceVersion: Invalid value: "": must be specified for an update`;
/// * `metadata.generation: Invalid value: 1: must not be decremented`;
/// * `field is immutable` for name, namespace, uid, creationTimestamp,
///   deletionTimestamp and deletionGracePeriodSeconds, e.g.
///   `metadata.uid: Invalid value: "b": field is immutable`,
///   `metadata.deletionTimestamp: Invalid value: 2024-01-01 00:00:00 +0000 UTC: field is immutable`.
///
/// Run [`prepare_meta_for_update`] first, as kube's `BeforeUpdate` does: it
/// carries over the uid, timestamps and generation a client may omit, so only
/// real changes are reported.
pub fn validate_object_meta_update(new_meta: &Value, old_meta: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if meta_time(old_meta, "deletionTimestamp").is_some() {
        let list = |m: &Value| -> Vec<String> {
            meta_map(m)
                .and_then(|m| m.get("finalizers"))
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default()
        };
        let old: BTreeSet<String> = list(old_meta).into_iter().collect();
        let extra: BTreeSet<String> = list(new_meta).into_iter().filter(|f| !old.contains(f)).collect();
        if !extra.is_empty() {
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {}",
                    go_string_slice(&extra)
                ),
            ));
        }
    }
    if meta_str(new_meta, "resourceVersion").is_empty() {
        errs.push(invalid("metadata.resourceVersion", go_quote(""), "must be specified for an update"));
    }
    let new_generation = meta_i64(new_meta, "generation").unwrap_or(0);
    if new_generation < meta_i64(old_meta, "generation").unwrap_or(0) {
        errs.push(invalid("metadata.generation", new_generation.to_string(), "must not be decremented"));
    }
    for key in ["name", "namespace", "uid"] {
        let new = meta_str(new_meta, key);
        if new != meta_str(old_meta, key) {
            errs.push(invalid(format!("metadata.{key}"), go_quote(new), "field is immutable"));
        }
    }
    let new_created = meta_time(new_meta, "creationTimestamp");
    if !same_time(new_created, meta_time(old_meta, "creationTimestamp")) {
        errs.push(invalid("metadata.creationTimestamp", go_time_string(new_created), "field is immutable"));
    }
    let new_deleted = meta_time(new_meta, "deletionTimestamp");
    if !same_time(new_deleted, meta_time(old_meta, "deletionTimestamp")) {
        let shown = if new_deleted.is_some() { go_time_string(new_deleted) } else { "null".into() };
        errs.push(invalid("metadata.deletionTimestamp", shown, "field is immutable"));
    }
    fn grace(m: &Value) -> Option<&Value> {
        meta_map(m).and_then(|m| m.get("deletionGracePeriodSeconds")).filter(|v| !v.is_null())
    }
    let (new_grace, old_grace) = (grace(new_meta), grace(old_meta));
    let grace_equal = match (new_grace, old_grace) {
        (Some(a), Some(b)) => json_equal(a, b),
        (None, None) => true,
        _ => false,
    };
    if !grace_equal {
        let shown = new_grace.map_or_else(|| "null".to_string(), go_display);
        errs.push(invalid("metadata.deletionGracePeriodSeconds", shown, "field is immutable"));
    }
    errs
}

/// What kube's `BeforeUpdate` does to the new metadata before validating an
/// update: the generation is the stored one (the handler bumps it when the
/// spec changes), a missing uid is taken from the stored object, and the
/// stored creationTimestamp and deletionTimestamp (when set) win, as does a
/// stored deletionGracePeriodSeconds the request omits.
pub fn prepare_meta_for_update(new_meta: &mut Value, old_meta: &Value) {
    if new_meta.is_null() {
        *new_meta = Value::Object(Map::new());
    }
    let Value::Object(new) = new_meta else { return };
    let old = |key: &str| meta_map(old_meta).and_then(|m| m.get(key)).filter(|v| !v.is_null());

    match old("generation").filter(|g| g.as_i64() != Some(0)) {
        Some(g) => {
            new.insert("generation".into(), g.clone());
        }
        None => {
            new.remove("generation");
        }
    }
    if new.get("uid").and_then(Value::as_str).unwrap_or("").is_empty() {
        match old("uid").filter(|u| u.as_str() != Some("")) {
            Some(u) => {
                new.insert("uid".into(), u.clone());
            }
            None => {
                new.remove("uid");
            }
        }
    }
    for key in ["creationTimestamp", "deletionTimestamp"] {
        if let Some(t) = meta_time(old_meta, key) {
            new.insert(key.into(), t.clone());
        }
    }
    if new.get("deletionGracePeriodSeconds").is_none_or(Value::is_null) {
        if let Some(g) = old("deletionGracePeriodSeconds") {
            new.insert("deletionGracePeriodSeconds".into(), g.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::test_fixtures::{msgs, widget, with, without};
    use serde_json::json;

    #[test]
    fn object_meta_type_errors_read_like_go() {
        assert_eq!(check_object_meta_types(&Value::Null), Ok(()));
        assert_eq!(check_object_meta_types(&widget()["metadata"]), Ok(()));
        let cases = [
            (json!("x"), "json: cannot unmarshal string into Go value of type v1.ObjectMeta"),
            (json!({"name": 5}), "json: cannot unmarshal number into Go struct field ObjectMeta.name of type string"),
            (json!({"generation": "1"}), "json: cannot unmarshal string into Go struct field ObjectMeta.generation of type int64"),
            (json!({"generation": 1.5}), "json: cannot unmarshal number 1.5 into Go struct field ObjectMeta.generation of type int64"),
            (json!({"labels": []}), "json: cannot unmarshal array into Go struct field ObjectMeta.labels of type map[string]string"),
            (json!({"labels": {"a": 1}}), "json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string"),
            (json!({"finalizers": "x"}), "json: cannot unmarshal string into Go struct field ObjectMeta.finalizers of type []string"),
            (json!({"ownerReferences": {}}), "json: cannot unmarshal object into Go struct field ObjectMeta.ownerReferences of type []v1.OwnerReference"),
            (json!({"ownerReferences": [{"name": true}]}), "json: cannot unmarshal bool into Go struct field OwnerReference.ownerReferences.name of type string"),
            (json!({"ownerReferences": [{"controller": "yes"}]}), "json: cannot unmarshal string into Go struct field OwnerReference.ownerReferences.controller of type bool"),
            (json!({"managedFields": [{"operation": 1}]}), "json: cannot unmarshal number into Go struct field ManagedFieldsEntry.managedFields.operation of type v1.ManagedFieldsOperationType"),
            (json!({"creationTimestamp": 5}), "json: cannot unmarshal number into Go struct field ObjectMeta.creationTimestamp of type string"),
            (json!({"creationTimestamp": "yesterday"}), "parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"yesterday\" as \"2006\""),
        ];
        for (meta, want) in cases {
            assert_eq!(check_object_meta_types(&meta), Err(want.to_string()), "{meta}");
        }
        assert_eq!(
            check_object_meta_types(&json!({"creationTimestamp": null, "labels": {"a": null}, "unknown": 5})),
            Ok(())
        );
    }

    // ---- ObjectMeta --------------------------------------------------------

    const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

    #[test]
    fn valid_meta_has_no_errors() {
        let meta = json!({"name": "bob", "namespace": "default", "generateName": "bob-", "generation": 3,
            "labels": {"app.kubernetes.io/name": "widget", "tier": ""}, "annotations": {"Example.com/Note": "x"},
            "finalizers": ["example.com/cleanup", "example.com/cleanup"],
            "ownerReferences": [{"apiVersion": "example.com/v1alpha", "kind": "Team", "name": "f", "uid": "u", "controller": true, "blockOwnerDeletion": true},
                                {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u2", "controller": false}],
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {}}]});
        assert!(validate_object_meta(&meta, true).is_empty(), "{:?}", validate_object_meta(&meta, true));
        assert!(validate_object_meta(&without(meta, "", "namespace"), false).is_empty());
    }

    #[test]
    fn name_rules() {
        assert_eq!(
            msgs(&validate_object_meta(&json!({"namespace": "default"}), true)),
            vec!["metadata.name: Required value: name or generateName is required"]
        );
        assert!(validate_object_meta(&json!({"generateName": "bob-", "namespace": "d"}), true).is_empty());
        assert!(validate_object_meta(&json!({"generateName": "b-", "namespace": "d"}), true).is_empty());
        assert_eq!(
            msgs(&validate_object_meta(&json!({"name": "Bad_Name", "namespace": "default"}), true)),
            vec![format!("metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN_MSG}")]
        );
        assert_eq!(
            msgs(&validate_object_meta(&json!({"generateName": "Bob-", "namespace": "d"}), true)),
            vec![format!("metadata.generateName: Invalid value: \"Bob-\": {SUBDOMAIN_MSG}")]
        );
        let long = "a".repeat(254);
        let errs = validate_object_meta(&json!({"name": long, "namespace": "d"}), true);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].detail, "must be no more than 253 characters");
        assert_eq!(errs[0].kind, FieldErrorKind::Invalid);
        assert!(validate_object_meta(&json!({"name": "a.b-c", "namespace": "d"}), true).is_empty());
        // the mask only ever helps a trailing dash, and never panics on multi-byte text
        assert!(!validate_object_meta(&json!({"generateName": "é-", "namespace": "d"}), true).is_empty());
        assert!(!validate_object_meta(&json!({"generateName": "-", "namespace": "d"}), true).is_empty());
    }

    #[test]
    fn namespace_rules() {
        assert_eq!(
            msgs(&validate_object_meta(&json!({"name": "a"}), true)),
            vec!["metadata.namespace: Required value"]
        );
        assert_eq!(
            msgs(&validate_object_meta(&json!({"name": "a", "namespace": "x"}), false)),
            vec!["metadata.namespace: Forbidden: not allowed on this type"]
        );
        let errs = validate_object_meta(&json!({"name": "a", "namespace": "a.b"}), true);
        assert_eq!(msgs(&errs), vec![r#"metadata.namespace: Invalid value: "a.b": must not contain dots"#]);
        assert!(validate_object_meta(&json!({"name": "a", "namespace": ""}), false).is_empty());
    }

    #[test]
    fn label_and_annotation_rules() {
        let errs = validate_object_meta(
            &json!({"name": "a", "namespace": "d", "labels": {"bad key": "ok", "k": "bad value!"}}),
            true,
        );
        assert_eq!(errs.len(), 2);
        assert_eq!(errs[0].field, "metadata.labels");
        assert_eq!(errs[0].value.as_deref(), Some("\"bad key\""));
        assert_eq!(errs[0].detail, validate_qualified_name("bad key")[0]);
        assert_eq!(errs[1].value.as_deref(), Some("\"bad value!\""));
        assert_eq!(errs[1].detail, validate_label_value("bad value!")[0]);

        let errs = validate_object_meta(&json!({"name": "a", "namespace": "d", "annotations": {"a/b/c": ""}}), true);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.annotations");
        assert_eq!(errs[0].value.as_deref(), Some("\"a/b/c\""));

        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        let errs = validate_object_meta(&json!({"name": "a", "namespace": "d", "annotations": {"k": big}}), true);
        assert_eq!(msgs(&errs), vec!["metadata.annotations: Too long: must have at most 262144 bytes"]);
        assert_eq!(errs[0].kind, FieldErrorKind::TooLong);
        let fits = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1);
        assert!(
            validate_object_meta(&json!({"name": "a", "namespace": "d", "annotations": {"k": fits}}), true).is_empty()
        );
    }

    #[test]
    fn finalizer_rules() {
        let errs =
            validate_object_meta(&json!({"name": "a", "namespace": "d", "finalizers": ["bad finalizer!"]}), true);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.finalizers");
        assert_eq!(errs[0].value.as_deref(), Some("\"bad finalizer!\""));
        assert_eq!(
            msgs(&validate_object_meta(
                &json!({"name": "a", "namespace": "d", "finalizers": ["orphan", "foregroundDeletion"]}),
                true
            )),
            vec![
                r#"metadata.finalizers: Invalid value: []string{"orphan", "foregroundDeletion"}: finalizer orphan and foregroundDeletion cannot be both set"#
            ]
        );
    }

    #[test]
    fn owner_reference_rules() {
        assert_eq!(
            msgs(&validate_object_meta(&json!({"name": "a", "namespace": "d", "ownerReferences": [{}]}), true)),
            vec![
                r#"metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty"#,
                r#"metadata.ownerReferences.kind: Invalid value: "": must not be empty"#,
                r#"metadata.ownerReferences.name: Invalid value: "": must not be empty"#,
                r#"metadata.ownerReferences.uid: Invalid value: "": must not be empty"#,
            ]
        );
        let refs = json!([{"apiVersion": "apps/", "kind": "K", "name": "n", "uid": "u"},
                          {"apiVersion": "a/b/c", "kind": "K", "name": "n", "uid": "u"}]);
        assert_eq!(
            msgs(&validate_object_meta(&json!({"name": "a", "namespace": "d", "ownerReferences": refs}), true)),
            vec![
                r#"metadata.ownerReferences.apiVersion: Invalid value: "apps/": version must not be empty"#,
                r#"metadata.ownerReferences.apiVersion: Invalid value: "a/b/c": version must not be empty"#,
            ]
        );
        let refs = json!([{"apiVersion": "v1", "kind": "Team", "name": "a", "uid": "1", "controller": true},
                          {"apiVersion": "v1", "kind": "Team", "name": "b", "uid": "2", "controller": true}]);
        let errs = validate_object_meta(&json!({"name": "a", "namespace": "d", "ownerReferences": refs}), true);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.ownerReferences");
        assert_eq!(
            errs[0].detail,
            "Only one reference can have Controller set to true. Found \"true\" in references for Team/a and Team/b"
        );
        let refs = json!([{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"}]);
        let errs = validate_object_meta(&json!({"name": "a", "namespace": "d", "ownerReferences": refs}), true);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].detail, "/v1, Kind=Event is disallowed from being an owner");
    }

    #[test]
    fn managed_fields_and_generation_rules() {
        let meta = json!({"name": "a", "namespace": "d", "generation": -1, "managedFields": [
            {"manager": "m", "operation": "Bad", "fieldsType": "FieldsV2"},
            {"manager": "x".repeat(129), "operation": "Update", "subresource": "s".repeat(257)},
            {"manager": "tab\there", "operation": "Apply"}]});
        assert_eq!(
            msgs(&validate_object_meta(&meta, true)),
            vec![
                "metadata.generation: Invalid value: -1: must be greater than or equal to 0",
                "metadata.managedFields[0].operation: Invalid value: \"Bad\": must be `Apply` or `Update`",
                "metadata.managedFields[0].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
                "metadata.managedFields[1].manager: Too long: must have at most 128 bytes",
                "metadata.managedFields[1].subresource: Too long: must have at most 256 bytes",
                "metadata.managedFields[2].manager: Invalid value: \"tab\\there\": invalid character U+0009 (at position 3)",
            ]
        );
    }

    #[test]
    fn wrongly_typed_meta_fields_are_reported_not_ignored() {
        let errs =
            validate_object_meta(&json!({"name": 5, "namespace": "d", "labels": {"a": 1}, "finalizers": "x"}), true);
        assert_eq!(
            msgs(&errs),
            vec![
                r#"metadata.name: Invalid value: "integer": metadata.name in body must be of type string: "integer""#,
                r#"metadata.labels.a: Invalid value: "integer": metadata.labels.a in body must be of type string: "integer""#,
                r#"metadata.finalizers: Invalid value: "string": metadata.finalizers in body must be of type array: "string""#,
                "metadata.name: Required value: name or generateName is required",
            ]
        );
        assert_eq!(
            msgs(&validate_object_meta(&json!([1]), true)),
            vec![r#"metadata: Invalid value: "array": metadata in body must be of type object: "array""#]
        );
        assert_eq!(
            msgs(&validate_object_meta(&Value::Null, false)),
            vec!["metadata.name: Required value: name or generateName is required"]
        );
    }

    #[test]
    fn type_meta_rules() {
        assert!(validate_type_meta(&widget(), "example.com/v1alpha", "Widget").is_empty());
        assert_eq!(
            msgs(&validate_type_meta(&json!({"kind": "Goat", "apiVersion": "v1"}), "example.com/v1alpha", "Widget")),
            vec![
                r#"kind: Invalid value: "Goat": must be Widget"#,
                r#"apiVersion: Invalid value: "v1": must be example.com/v1alpha"#,
            ]
        );
    }

    // ---- ObjectMeta update ---------------------------------------------------

    fn stored_meta() -> Value {
        json!({"name": "bob", "namespace": "default", "uid": "u-1", "resourceVersion": "7", "generation": 2,
               "creationTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["a"]})
    }

    #[test]
    fn update_of_unchanged_meta_is_fine() {
        assert!(validate_object_meta_update(&stored_meta(), &stored_meta()).is_empty());
        let same_instant = with(stored_meta(), "/creationTimestamp", json!("2024-01-01T02:00:00+02:00"));
        assert!(validate_object_meta_update(&same_instant, &stored_meta()).is_empty());
    }

    #[test]
    fn update_immutable_fields() {
        let new = json!({"name": "b", "namespace": "other", "uid": "u-2", "resourceVersion": "7", "generation": 1,
                         "creationTimestamp": "2024-01-02T00:00:00Z", "deletionTimestamp": "2024-03-01T10:00:00.5Z",
                         "deletionGracePeriodSeconds": 30});
        assert_eq!(
            msgs(&validate_object_meta_update(&new, &stored_meta())),
            vec![
                "metadata.generation: Invalid value: 1: must not be decremented",
                r#"metadata.name: Invalid value: "b": field is immutable"#,
                r#"metadata.namespace: Invalid value: "other": field is immutable"#,
                r#"metadata.uid: Invalid value: "u-2": field is immutable"#,
                "metadata.creationTimestamp: Invalid value: 2024-01-02 00:00:00 +0000 UTC: field is immutable",
                "metadata.deletionTimestamp: Invalid value: 2024-03-01 10:00:00.5 +0000 UTC: field is immutable",
                "metadata.deletionGracePeriodSeconds: Invalid value: 30: field is immutable",
            ]
        );
        let old = with(stored_meta(), "/generation", json!(2));
        let mut old = old;
        old["deletionGracePeriodSeconds"] = json!(30);
        assert_eq!(
            msgs(&validate_object_meta_update(&stored_meta(), &old)),
            vec!["metadata.deletionGracePeriodSeconds: Invalid value: null: field is immutable"]
        );
        assert_eq!(
            msgs(&validate_object_meta_update(&without(stored_meta(), "", "creationTimestamp"), &stored_meta())),
            vec!["metadata.creationTimestamp: Invalid value: 0001-01-01 00:00:00 +0000 UTC: field is immutable"]
        );
    }

    #[test]
    fn update_needs_resource_version() {
        assert_eq!(
            msgs(&validate_object_meta_update(&without(stored_meta(), "", "resourceVersion"), &stored_meta())),
            vec![r#"metadata.resourceVersion: Invalid value: "": must be specified for an update"#]
        );
    }

    #[test]
    fn no_new_finalizers_while_deleting() {
        let mut old = stored_meta();
        old["deletionTimestamp"] = json!("2024-02-01T00:00:00Z");
        let mut new = old.clone();
        new["finalizers"] = json!(["b", "a", "c"]);
        assert_eq!(
            msgs(&validate_object_meta_update(&new, &old)),
            vec![
                r#"metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"b", "c"}"#
            ]
        );
        new["finalizers"] = json!([]);
        assert!(validate_object_meta_update(&new, &old).is_empty());
        // not being deleted: adding is fine
        let mut new = stored_meta();
        new["finalizers"] = json!(["a", "b"]);
        assert!(validate_object_meta_update(&new, &stored_meta()).is_empty());
    }

    #[test]
    fn prepare_meta_for_update_carries_server_fields() {
        let mut old = stored_meta();
        old["deletionTimestamp"] = json!("2024-02-01T00:00:00Z");
        old["deletionGracePeriodSeconds"] = json!(0);
        let mut new = json!({"name": "bob", "namespace": "default", "resourceVersion": "7", "generation": 9,
                             "creationTimestamp": "1999-01-01T00:00:00Z", "finalizers": ["a"]});
        prepare_meta_for_update(&mut new, &old);
        assert_eq!(new["uid"], "u-1");
        assert_eq!(new["generation"], 2);
        assert_eq!(new["creationTimestamp"], "2024-01-01T00:00:00Z");
        assert_eq!(new["deletionTimestamp"], "2024-02-01T00:00:00Z");
        assert_eq!(new["deletionGracePeriodSeconds"], 0);
        assert!(validate_object_meta_update(&new, &old).is_empty());
        // a client-chosen uid is kept (and then reported as immutable)
        let mut new = json!({"uid": "mine", "generation": 3});
        prepare_meta_for_update(&mut new, &json!({}));
        assert_eq!(new, json!({"uid": "mine"}));
        let mut new = Value::Null;
        prepare_meta_for_update(&mut new, &stored_meta());
        assert_eq!(new["uid"], "u-1");
    }
}
