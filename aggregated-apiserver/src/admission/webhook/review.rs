//! The AdmissionReview a webhook is sent and answers (admission.k8s.io v1,
//! or v1beta1 for a webhook that accepts only that), and the checks kube
//! makes of the answer (`VerifyAdmissionResponse`).
//!
//! Written here rather than taken from kube-core's `admission` module: that
//! one is made for the webhook's side. It would have to round-trip the object
//! through a typed `DynamicObject` (a webhook must see the object as it would
//! be stored, byte for byte), and its response reads `patch` only as a list
//! of numbers, where Go webhooks send base64 (both are accepted here, as Go's
//! decoder accepts both).

use crate::apimachinery::resource::{SCALE_GROUP, SCALE_KIND, SCALE_VERSION};
use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::authentication::v1::UserInfo as ApiUserInfo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::admission::Attributes;

/// The AdmissionReview versions this server can send, preferred first.
pub const SUPPORTED_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// The request half, serialized as kube serializes `admissionv1.AdmissionRequest`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Request<'a> {
    uid: &'a str,
    kind: GroupVersionKind<'a>,
    resource: GroupVersionResource<'a>,
    #[serde(skip_serializing_if = "str::is_empty")]
    sub_resource: &'a str,
    request_kind: GroupVersionKind<'a>,
    request_resource: GroupVersionResource<'a>,
    #[serde(skip_serializing_if = "str::is_empty")]
    request_sub_resource: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    operation: &'static str,
    user_info: ApiUserInfo,
    object: Option<&'a Value>,
    old_object: Option<&'a Value>,
    dry_run: bool,
    options: &'a Value,
}

#[derive(Serialize, Clone, Copy)]
struct GroupVersionKind<'a> {
    group: &'a str,
    version: &'a str,
    kind: &'a str,
}

#[derive(Serialize, Clone, Copy)]
struct GroupVersionResource<'a> {
    group: &'a str,
    version: &'a str,
    resource: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Review<'a> {
    kind: &'static str,
    api_version: String,
    request: Request<'a>,
}

/// The JSON body of the review sent to a webhook.
pub fn encode_request(version: &str, uid: &str, attributes: &Attributes<'_>) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&review(version, uid, attributes))
}

/// The `request` of a review as a JSON value: what CEL expressions of
/// admission (`matchConditions`, policies) see as `request`.
pub fn request_value(uid: &str, attributes: &Attributes<'_>) -> Value {
    serde_json::to_value(review("v1", uid, attributes).request).unwrap_or(Value::Null)
}

fn review<'a>(version: &str, uid: &'a str, attributes: &'a Attributes<'_>) -> Review<'a> {
    let names = attributes.names;
    let kind = match attributes.scale {
        true => GroupVersionKind { group: SCALE_GROUP, version: SCALE_VERSION, kind: SCALE_KIND },
        false => GroupVersionKind { group: names.group, version: names.version, kind: names.kind },
    };
    let resource = GroupVersionResource { group: names.group, version: names.version, resource: names.plural };
    let user = attributes.user;
    // Go's omitempty on each field.
    let user_info = ApiUserInfo {
        username: (!user.name.is_empty()).then(|| user.name.clone()),
        uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
        groups: (!user.groups.is_empty()).then(|| user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
    };
    Review {
        kind: "AdmissionReview",
        api_version: format!("admission.k8s.io/{version}"),
        request: Request {
            uid,
            kind,
            resource,
            sub_resource: attributes.subresource,
            request_kind: kind,
            request_resource: resource,
            request_sub_resource: attributes.subresource,
            name: attributes.name,
            namespace: attributes.namespace,
            operation: attributes.operation.as_str(),
            user_info,
            object: attributes.object.as_ref(),
            old_object: attributes.old_object,
            dry_run: attributes.dry_run,
            options: &attributes.options,
        },
    }
}

/// The response half as a webhook writes it.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    allowed: bool,
    #[serde(default)]
    status: Option<Status>,
    #[serde(default, deserialize_with = "bytes_as_go_reads_them")]
    patch: Option<Vec<u8>>,
    #[serde(default)]
    patch_type: Option<String>,
    #[serde(default)]
    audit_annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    warnings: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewAnswer {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    response: Option<Response>,
}

/// Go's `[]byte` from JSON: a base64 string, or a list of byte values.
fn bytes_as_go_reads_them<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Bytes {
        Base64(String),
        Numbers(Vec<u8>),
    }
    match Option::<Bytes>::deserialize(d)? {
        None => Ok(None),
        Some(Bytes::Numbers(n)) => Ok(Some(n)),
        Some(Bytes::Base64(s)) => base64::engine::general_purpose::STANDARD
            .decode(s.as_bytes())
            .map(Some)
            .map_err(|e| serde::de::Error::custom(format!("illegal base64 data: {e}"))),
    }
}

/// A webhook's verified answer.
#[derive(Debug, Default)]
pub struct Answer {
    pub allowed: bool,
    pub status: Option<Status>,
    /// The patch of a mutating webhook, and its type (only `JSONPatch` is
    /// defined; the caller refuses others as kube does).
    pub patch: Option<Vec<u8>>,
    pub patch_type: Option<String>,
    pub audit_annotations: BTreeMap<String, String>,
    pub warnings: Vec<String>,
}

/// Reads and checks a webhook's answer as `VerifyAdmissionResponse` does;
/// the error is kube's text (after "received invalid webhook response: ").
pub fn decode_answer(version: &str, uid: &str, mutating: bool, body: &[u8]) -> Result<Answer, String> {
    let review: ReviewAnswer = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let Some(response) = review.response else {
        return Err("webhook response was absent".into());
    };
    let mut patch = None;
    let mut patch_type = None;
    if version == "v1" {
        if response.uid != uid {
            return Err(format!("expected response.uid={uid:?}, got {:?}", response.uid));
        }
        if review.api_version != "admission.k8s.io/v1" || review.kind != "AdmissionReview" {
            let (group, version) = review.api_version.split_once('/').unwrap_or(("", review.api_version.as_str()));
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{version}, Kind={}",
                review.kind
            ));
        }
        let has_patch = response.patch.as_ref().is_some_and(|p| !p.is_empty());
        if mutating {
            if has_patch && response.patch_type.is_none() {
                return Err("webhook returned response.patch but not response.patchType".into());
            }
            if !has_patch && response.patch_type.is_some() {
                return Err("webhook returned response.patchType but not response.patch".into());
            }
            if response.patch_type.as_deref() == Some("") {
                return Err("webhook returned invalid response.patchType of \"\"".into());
            }
            patch_type = response.patch_type;
            patch = response.patch;
        } else {
            if has_patch {
                return Err("validating webhook may not return response.patch".into());
            }
            if response.patch_type.is_some() {
                return Err("validating webhook may not return response.patchType".into());
            }
        }
    } else if mutating {
        // v1beta1 has no checks of uid, kind or patchType: a patch is a JSON patch.
        patch = response.patch.filter(|p| !p.is_empty());
        patch_type = patch.as_ref().map(|_| "JSONPatch".to_string());
    }
    Ok(Answer {
        allowed: response.allowed,
        status: response.status,
        patch,
        patch_type,
        audit_annotations: response.audit_annotations.unwrap_or_default(),
        warnings: response.warnings.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(body: Value) -> Result<Answer, String> {
        decode_answer("v1", "u-1", true, &serde_json::to_vec(&body).unwrap())
    }

    #[test]
    fn patches_are_read_as_go_reads_bytes() {
        let patch = br#"[{"op":"add","path":"/spec/x","value":1}]"#;
        let b64 = base64::engine::general_purpose::STANDARD.encode(patch);
        for encoded in [serde_json::json!(b64), serde_json::json!(patch.to_vec())] {
            let a = answer(serde_json::json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": "u-1", "allowed": true, "patchType": "JSONPatch", "patch": encoded}
            }))
            .unwrap();
            assert_eq!(a.patch.as_deref(), Some(&patch[..]));
        }
    }

    #[test]
    fn bad_answers_in_kube_words() {
        let base = |response: Value| serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
        assert_eq!(
            answer(base(serde_json::json!({"uid": "other", "allowed": true}))).unwrap_err(),
            "expected response.uid=\"u-1\", got \"other\""
        );
        assert_eq!(
            answer(serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})).unwrap_err(),
            "webhook response was absent"
        );
        assert_eq!(
            answer(base(serde_json::json!({"uid": "u-1", "allowed": true, "patch": "W10="}))).unwrap_err(),
            "webhook returned response.patch but not response.patchType"
        );
        let validating = decode_answer(
            "v1",
            "u-1",
            false,
            &serde_json::to_vec(&base(
                serde_json::json!({"uid": "u-1", "allowed": true, "patchType": "JSONPatch", "patch": "W10="}),
            ))
            .unwrap(),
        );
        assert_eq!(validating.unwrap_err(), "validating webhook may not return response.patch");
        let wrong_kind = serde_json::json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "response": {"uid": "u-1", "allowed": true}});
        assert_eq!(
            answer(wrong_kind).unwrap_err(),
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview"
        );
    }
}
