//! PATCH bodies: RFC 6902 JSON patch, RFC 7396 merge patch, and the
//! configuration of a server-side apply. Strategic merge patch is refused
//! with 415, as kube-apiserver refuses it for custom resources, rather than
//! silently treated as a plain merge (which would replace lists such as
//! finalizers instead of merging); so is apply in CBOR.

use serde_json::Value;

use super::negotiation::BodyType;
use super::status::{ApiError, Reason, StatusDetails};
use crate::apimachinery::gojson::{decode_json, VERSION_KIND_ERROR_PREFIX};

pub enum Patch {
    Json(json_patch::Patch),
    Merge { patch: Value, duplicates: Vec<String> },
}

const ACCEPTED: &str = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

impl Patch {
    pub fn parse(body_type: Option<BodyType>, body: &[u8]) -> Result<Self, ApiError> {
        match body_type {
            Some(BodyType::JsonPatch) => {
                // A JSON document that is not a list of operations gets Go's
                // unmarshal wording, as kube decodes into []jsonPatchOp.
                if let Ok(v) = serde_json::from_slice::<Value>(body) {
                    let go_type = match v {
                        Value::Object(_) => Some("object"),
                        Value::String(_) => Some("string"),
                        Value::Number(_) => Some("number"),
                        Value::Bool(_) => Some("bool"),
                        Value::Array(_) | Value::Null => None,
                    };
                    if let Some(t) = go_type {
                        return Err(ApiError::bad_request(format!(
                            "error decoding patch: json: cannot unmarshal {t} into Go value of type []handlers.jsonPatchOp"
                        )));
                    }
                }
                serde_json::from_slice::<json_patch::Patch>(body)
                    .map(Patch::Json)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
            }
            Some(BodyType::MergePatch) => {
                let (patch, duplicates) = decode_json(body).map_err(|e| {
                    let why = e.strip_prefix(VERSION_KIND_ERROR_PREFIX).unwrap_or(&e);
                    ApiError::bad_request(format!("error decoding patch: {why}"))
                })?;
                if !patch.is_object() {
                    return Err(ApiError::bad_request("error decoding patch: a merge patch must be a JSON object"));
                }
                Ok(Patch::Merge { patch, duplicates })
            }
            _ => Err(ApiError::unsupported_media_type(ACCEPTED)),
        }
    }

    pub fn apply(&self, mut doc: Value) -> Result<Value, ApiError> {
        match self {
            Patch::Json(p) => {
                // Applied one operation at a time so that `test` follows
                // kube-apiserver (evanphx/json-patch): testing a missing path
                // against null succeeds. Clients rely on it, e.g. kube-rs adds
                // its first finalizer with `test /metadata/finalizers == null`.
                // A failure discards the whole document, so the patch stays atomic.
                for op in &p.0 {
                    if let json_patch::PatchOperation::Test(t) = op {
                        if t.value.is_null() && doc.pointer(t.path.as_str()).is_none_or(Value::is_null) {
                            continue;
                        }
                    }
                    // kube answers a patch that does not apply with a generic
                    // 422 (NewGenericServerResponse): no details, no cause.
                    json_patch::patch(&mut doc, std::slice::from_ref(op)).map_err(|_| {
                        ApiError::new(
                            422,
                            Reason::Invalid,
                            "the server rejected our request due to an error in our request",
                        )
                        .with_details(StatusDetails::default())
                    })?;
                }
            }
            Patch::Merge { patch, .. } => json_patch::merge(&mut doc, patch),
        }
        Ok(doc)
    }

    /// Duplicate fields found in a merge patch body (for fieldValidation).
    pub fn duplicates(&self) -> Option<&[String]> {
        match self {
            Patch::Merge { duplicates, .. } if !duplicates.is_empty() => Some(duplicates),
            _ => None,
        }
    }

    /// Whether the patch itself sets metadata.resourceVersion: then a conflict
    /// is the client's to resolve and is not retried.
    pub fn pins_resource_version(&self) -> bool {
        match self {
            Patch::Json(p) => p.0.iter().any(|op| {
                let path = match op {
                    json_patch::PatchOperation::Add(o) => o.path.to_string(),
                    json_patch::PatchOperation::Replace(o) => o.path.to_string(),
                    json_patch::PatchOperation::Test(o) => o.path.to_string(),
                    _ => String::new(),
                };
                path == "/metadata/resourceVersion"
            }),
            Patch::Merge { patch, .. } => {
                patch.pointer("/metadata/resourceVersion").is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn json_patch(ops: Value) -> Patch {
        Patch::parse(Some(BodyType::JsonPatch), ops.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn test_of_a_missing_path_against_null_passes_like_kube() {
        let p = json_patch(json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["a/b"]}
        ]));
        let out = p.apply(json!({"metadata": {"name": "x"}})).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a/b"]));
        // Present and not null: the test fails, nothing is applied.
        let err = p.apply(json!({"metadata": {"finalizers": ["c/d"]}})).unwrap_err();
        assert_eq!(err.code, 422);
        let failing = json_patch(json!([{"op": "test", "path": "/spec/x", "value": 1}]));
        assert!(failing.apply(json!({"spec": {}})).is_err());
    }

    #[test]
    fn strategic_merge_is_refused() {
        let e = Patch::parse(Some(BodyType::StrategicMergePatch), b"{}").err().unwrap();
        assert_eq!(e.code, 415);
    }
}
