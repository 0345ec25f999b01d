//! PATCH bodies: RFC 6902 JSON patch and RFC 7396 merge patch. Strategic merge
//! patch and server-side apply are refused with 415, as kube-apiserver refuses
//! strategic merge for custom resources, rather than silently treated as a
//! plain merge (which would replace lists such as finalizers instead of merging).

use serde_json::Value;

use super::negotiation::BodyType;
use super::status::{ApiError, Reason};
use super::validation;

pub enum Patch {
    Json(json_patch::Patch),
    Merge { patch: Value, duplicates: Vec<String> },
}

const ACCEPTED: &str = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json";

impl Patch {
    pub fn parse(body_type: Option<BodyType>, body: &[u8]) -> Result<Self, ApiError> {
        match body_type {
            Some(BodyType::JsonPatch) => serde_json::from_slice::<json_patch::Patch>(body)
                .map(Patch::Json)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}"))),
            Some(BodyType::MergePatch) => {
                let (patch, duplicates) = validation::decode_json(body).map_err(ApiError::bad_request)?;
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
                json_patch::patch(&mut doc, p).map_err(|e| ApiError::new(422, Reason::Invalid, e.to_string()))?;
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
