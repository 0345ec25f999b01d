//! The scale subresource: an object seen as an `autoscaling/v1` Scale (its
//! desired and observed replicas and its selector, read at the paths its
//! kind declares), and a Scale written back as the object's desired
//! replicas, as kube-apiserver serves a CRD's `/scale`.
//!
//! A write to `/scale` is an update of the object through the registry's
//! shared path (strategy, validation, managed fields, the store's
//! compare-and-swap); what admission sees of it is Scales.

use bytes::Bytes;
use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec, ScaleStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value};

use super::{meta_str, Part, Registry, WriteOutcome};
use crate::admission::Requester;
use crate::apimachinery::errors::{ApiError, ApiResult};
use crate::apimachinery::field_error::FieldError;
use crate::apimachinery::managed_fields::ManagedFields;
use crate::apimachinery::options::{Rv, WriteOptions};
use crate::apimachinery::patch::Patch;
use crate::apimachinery::resource::{SCALE_KIND, SCALE_VERSION};
use crate::apimachinery::serializer::JsonBody;
use crate::registry::apply::Fields;
use crate::registry::kind::ScalePaths;
use crate::storage::StoreError;

/// A Scale's apiVersion.
const API_VERSION: &str = "autoscaling/v1";

/// A JSON path's fields (`.spec.replicas` → `spec`, `replicas`).
fn fields(path: &str) -> impl Iterator<Item = &str> {
    path.trim_start_matches('.').split('.')
}

fn nested<'v>(obj: &'v Value, path: &str) -> Option<&'v Value> {
    fields(path).try_fold(obj, |v, field| v.get(field))
}

/// The name Go's `%T` gives a value decoded from JSON into an unstructured object.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// The integer at `path`: None when it is not there, an error in Go's
/// words (`unstructured.NestedInt64`) when it is not an integer.
fn nested_int(obj: &Value, path: &str) -> Result<Option<i64>, String> {
    let dotted = format!(".{}", path.trim_start_matches('.'));
    match nested(obj, path) {
        None => Ok(None),
        Some(v) => match v.as_i64() {
            Some(n) => Ok(Some(n)),
            None => {
                let shown = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                Err(format!("{dotted} accessor error: {shown} is of the type {}, expected int64", go_type(v)))
            }
        },
    }
}

/// The string at `path` (empty when it is not there), or Go's error.
fn nested_string(obj: &Value, path: &str) -> Result<String, String> {
    let dotted = format!(".{}", path.trim_start_matches('.'));
    match nested(obj, path) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(format!("{dotted} accessor error: {v} is of the type {}, expected string", go_type(v))),
    }
}

/// Sets the integer at `path`, making the objects on the way.
fn set_nested_int(obj: &mut Value, path: &str, n: i64) -> ApiResult<()> {
    let mut at = obj;
    let mut fields = fields(path).peekable();
    while let Some(field) = fields.next() {
        let map = match at {
            Value::Object(map) => map,
            other => {
                *other = Value::Object(Map::new());
                other.as_object_mut().ok_or_else(|| ApiError::internal("an object made is not an object"))?
            }
        };
        if fields.peek().is_none() {
            map.insert(field.to_string(), Value::from(n));
            return Ok(());
        }
        at = map.entry(field.to_string()).or_insert_with(|| Value::Object(Map::new()));
        if !at.is_object() {
            return Err(ApiError::bad_request(format!("{path} is not an object on the way to the replicas")));
        }
    }
    Ok(())
}

/// The Scale of `obj`, and whether its desired replicas were there (0 when
/// not), as kube's `scaleFromCustomResource` reads them.
pub(crate) fn scale_of(obj: &Value, paths: &ScalePaths) -> Result<(Scale, bool), String> {
    let spec = nested_int(obj, &paths.spec_replicas)?;
    let status = nested_int(obj, &paths.status_replicas)?.unwrap_or(0);
    let selector = match &paths.label_selector {
        Some(path) => nested_string(obj, path)?,
        None => String::new(),
    };
    let meta = |field: &str| meta_str(obj, field).filter(|s| !s.is_empty()).map(str::to_string);
    let creation = obj.pointer("/metadata/creationTimestamp").cloned().and_then(|t| serde_json::from_value(t).ok());
    // Go's int32 conversion: validation keeps stored values within it.
    let replicas = spec.unwrap_or(0) as i32;
    let scale = Scale {
        metadata: ObjectMeta {
            name: meta("name"),
            namespace: meta("namespace"),
            uid: meta("uid"),
            resource_version: meta("resourceVersion"),
            creation_timestamp: creation,
            ..Default::default()
        },
        spec: Some(ScaleSpec { replicas: (replicas != 0).then_some(replicas) }),
        status: Some(ScaleStatus { replicas: status as i32, selector: (!selector.is_empty()).then_some(selector) }),
    };
    Ok((scale, spec.is_some()))
}

/// A Scale as the JSON sent and received: `apiVersion` and `kind` set.
pub(crate) fn scale_value(scale: &Scale) -> ApiResult<Value> {
    let mut v = serde_json::to_value(scale).map_err(ApiError::internal_error)?;
    if let Some(map) = v.as_object_mut() {
        map.insert("apiVersion".into(), Value::from(API_VERSION));
        map.insert("kind".into(), Value::from(SCALE_KIND));
    }
    Ok(v)
}

/// The Scale a client sent (or a patch made): its own decoding errors, in kube's words.
fn decode_scale(v: Value) -> ApiResult<Scale> {
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or(SCALE_KIND);
    let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or(API_VERSION);
    if kind != SCALE_KIND || api_version != API_VERSION {
        return Err(ApiError::bad_request(format!(
            "the body of the request must be an autoscaling/v1 Scale, not {api_version}, Kind={kind}"
        )));
    }
    serde_json::from_value(v).map_err(|e| {
        ApiError::bad_request(format!("Scale in version \"{SCALE_VERSION}\" cannot be handled as a Scale: {e}"))
    })
}

/// Scale checks on an object (kube's `ValidateScaleSpec` and
/// `ValidateScaleStatus`): the replicas are integers in int32's range, the
/// selector a string. `spec` false checks the status paths only (a write to
/// `/status`).
pub(crate) fn validate_scale_paths(obj: &Value, paths: &ScalePaths, spec: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut replicas = |path: &str| match nested_int(obj, path) {
        Err(why) => errs.push(FieldError::invalid(path, &Value::from(0), why)),
        Ok(Some(n)) if n < 0 => {
            errs.push(FieldError::invalid(path, &Value::from(n), "should be a non-negative integer"))
        }
        Ok(Some(n)) if n > i64::from(i32::MAX) => errs.push(FieldError::invalid(
            path,
            &Value::from(n),
            format!("should be less than or equal to {}", i32::MAX),
        )),
        Ok(_) => {}
    };
    if spec {
        replicas(&paths.spec_replicas);
    }
    replicas(&paths.status_replicas);
    if let Some(path) = &paths.label_selector {
        if let Err(why) = nested_string(obj, path) {
            errs.push(FieldError::invalid(path.as_str(), &Value::from(""), why));
        }
    }
    errs
}

/// What a write to `/scale` asks of the object: the Scale it makes of the
/// object's own Scale (a whole one sent, or a patch applied).
enum ScaleChange<'a> {
    Update(Value),
    Patch(&'a Patch),
}

impl Registry {
    fn scale_paths(&self) -> ApiResult<&ScalePaths> {
        self.kind.scale().ok_or_else(|| ApiError::not_found(self.target("")))
    }

    /// The Scale of an object read as [`Self::get`] reads it.
    pub async fn get_scale(&self, ns: &str, name: &str, rv: Rv) -> ApiResult<Value> {
        let paths = self.scale_paths()?;
        let stored = self.get(ns, name, rv).await?;
        let obj = stored.value().map_err(|e| self.store_error(name, e))?;
        let (scale, found) = scale_of(&obj, paths).map_err(ApiError::internal_error_cause)?;
        if !found {
            let why = format!("the spec replicas field {:?} does not exist", paths.spec_replicas);
            return Err(ApiError::internal_error_cause(why));
        }
        scale_value(&scale)
    }

    /// PUT on `/scale`: `body` is a whole Scale.
    pub(super) async fn update_scale(
        &self,
        ns: &str,
        name: &str,
        body: &JsonBody<'_>,
        wopts: &WriteOptions,
        user: Requester<'_>,
    ) -> ApiResult<WriteOutcome> {
        let sent: Value = serde_json::from_slice(&body.json).map_err(|e| {
            ApiError::bad_request(format!("Scale in version \"{SCALE_VERSION}\" cannot be handled as a Scale: {e}"))
        })?;
        self.write_scale(ns, name, ScaleChange::Update(sent), body.json.len(), wopts, user).await
    }

    /// PATCH on `/scale`: `patch` applies to the object's Scale.
    pub(super) async fn patch_scale(
        &self,
        ns: &str,
        name: &str,
        patch: &Patch,
        body_bytes: usize,
        wopts: &WriteOptions,
        user: Requester<'_>,
    ) -> ApiResult<WriteOutcome> {
        self.write_scale(ns, name, ScaleChange::Patch(patch), body_bytes, wopts, user).await
    }

    async fn write_scale(
        &self,
        ns: &str,
        name: &str,
        change: ScaleChange<'_>,
        input_bytes: usize,
        wopts: &WriteOptions,
        user: Requester<'_>,
    ) -> ApiResult<WriteOutcome> {
        let paths = self.scale_paths()?;
        let out = self
            .write_current(ns, name, Part::Scale, wopts, user, true, input_bytes, |current| {
                let mut obj = current.value().map_err(|e| self.store_error(name, e))?;
                let (old_scale, found) = scale_of(&obj, paths).map_err(ApiError::internal_error_cause)?;
                let next = match &change {
                    ScaleChange::Update(sent) => decode_scale(sent.clone())?,
                    ScaleChange::Patch(patch) => {
                        let mut old = scale_value(&old_scale)?;
                        if !found {
                            // Go's marker for replicas that were never set: a
                            // patch that leaves them so cannot write them.
                            old["spec"]["replicas"] = Value::from(i32::MIN);
                        }
                        decode_scale(patch.apply(old)?)?
                    }
                };
                let replicas = next.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
                if replicas == i32::MIN {
                    return Err(ApiError::bad_request(format!(
                        "the spec replicas field {:?} cannot be empty",
                        paths.spec_replicas
                    )));
                }
                self.check_scale_identity(&next, ns, name)?;
                if let Some(rv) = next.metadata.resource_version.as_deref().filter(|rv| !rv.is_empty()) {
                    if rv != current.rv.to_string() {
                        return Err(ApiError::conflict(self.target(name), StoreError::Conflict));
                    }
                }
                set_nested_int(&mut obj, &paths.spec_replicas, i64::from(replicas))?;
                Ok((obj, Fields::Update(&wopts.manager)))
            })
            .await?;
        self.scale_outcome(out)
    }

    /// A Scale's name and namespace must be the URL's, when it states them.
    fn check_scale_identity(&self, scale: &Scale, ns: &str, name: &str) -> ApiResult<()> {
        if let Some(sent) = scale.metadata.name.as_deref().filter(|n| !n.is_empty() && *n != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({sent}) does not match the name on the URL ({name})"
            )));
        }
        if self.kind.namespaced() && scale.metadata.namespace.as_deref().is_some_and(|n| !n.is_empty() && n != ns) {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        Ok(())
    }

    /// The answer to a write to `/scale`: the written object's Scale.
    fn scale_outcome(&self, mut out: WriteOutcome) -> ApiResult<WriteOutcome> {
        let paths = self.scale_paths()?;
        let obj: Value = serde_json::from_slice(&out.body).map_err(ApiError::internal_error)?;
        let (scale, _) = scale_of(&obj, paths).map_err(ApiError::bad_request)?;
        out.body = serde_json::to_vec(&scale_value(&scale)?).map(Bytes::from).map_err(ApiError::internal_error)?;
        Ok(out)
    }

    /// A Scale of 0 replicas does not carry them (Go's omitempty): kube's
    /// field manager sees them removed, and nobody owns them after.
    pub(super) fn release_zero_replicas(&self, managed: &mut ManagedFields, obj: &Value) {
        if let Some(paths) = self.kind.scale() {
            if nested_int(obj, &paths.spec_replicas) == Ok(Some(0)) {
                managed.release(&fields(&paths.spec_replicas).collect::<Vec<_>>());
            }
        }
    }

    /// What admission is shown of an object written through `/scale`.
    pub(super) fn scale_for_admission(&self, obj: &Value) -> ApiResult<Value> {
        let (scale, _) = scale_of(obj, self.scale_paths()?).map_err(ApiError::internal_error_cause)?;
        scale_value(&scale)
    }

    /// Takes a Scale back from admission: a mutating plugin may have changed
    /// its replicas, which `obj` then takes.
    pub(super) fn take_admitted_scale(&self, scale: Value, obj: &mut Value) -> ApiResult<()> {
        let paths = self.scale_paths()?;
        let scale = decode_scale(scale)?;
        let replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        set_nested_int(obj, &paths.spec_replicas, i64::from(replicas))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn paths() -> ScalePaths {
        ScalePaths::new(".spec.replicas", ".status.replicas").with_label_selector(".status.selector")
    }

    #[test]
    fn an_objects_scale_reads_its_paths_and_zero_where_nothing_is() {
        let obj = json!({"metadata": {"name": "a", "namespace": "n", "uid": "u", "resourceVersion": "7",
            "creationTimestamp": "2026-11-29T00:00:00Z", "labels": {"x": "y"}},
            "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=a"}});
        let (scale, found) = scale_of(&obj, &paths()).unwrap();
        assert!(found);
        assert_eq!(
            scale_value(&scale).unwrap(),
            json!({"apiVersion": API_VERSION, "kind": "Scale",
                "metadata": {"name": "a", "namespace": "n", "uid": "u", "resourceVersion": "7",
                    "creationTimestamp": "2026-11-29T00:00:00Z"},
                "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=a"}})
        );
        let (scale, found) = scale_of(&json!({"metadata": {"name": "a"}}), &paths()).unwrap();
        assert!(!found);
        assert_eq!(scale_value(&scale).unwrap()["spec"], json!({}));
        assert_eq!(scale_value(&scale).unwrap()["status"], json!({"replicas": 0}));
    }

    #[test]
    fn replicas_that_are_not_integers_are_named_as_go_names_them() {
        let obj = json!({"spec": {"replicas": 1.5}});
        assert_eq!(
            scale_of(&obj, &paths()).err().unwrap(),
            ".spec.replicas accessor error: 1.5 is of the type float64, expected int64"
        );
        let errs = validate_scale_paths(
            &json!({"spec": {"replicas": -1}, "status": {"replicas": 3000000000_i64}}),
            &paths(),
            true,
        );
        let shown: Vec<String> = errs.iter().map(FieldError::full_message).collect();
        assert_eq!(
            shown,
            [
                ".spec.replicas: Invalid value: -1: should be a non-negative integer",
                ".status.replicas: Invalid value: 3000000000: should be less than or equal to 2147483647"
            ]
        );
    }

    #[test]
    fn replicas_are_written_where_the_path_says_making_objects_on_the_way() {
        let mut obj = json!({"spec": {}});
        set_nested_int(&mut obj, ".spec.scaling.replicas", 4).unwrap();
        assert_eq!(obj, json!({"spec": {"scaling": {"replicas": 4}}}));
    }
}
