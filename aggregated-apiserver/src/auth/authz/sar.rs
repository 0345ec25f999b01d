//! The SubjectAccessReview the webhook authorizer sends, and how its answer is read.

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::api::PostParams;

use super::{AccessReviewer, Attributes, Decision, User};
use crate::auth::review::ReviewError;

/// Reviews access with the cluster: `POST
/// /apis/authorization.k8s.io/v1/subjectaccessreviews`.
pub struct KubeAccessReviewer {
    client: kube::Client,
}

impl KubeAccessReviewer {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    /// Posts the review with the trace context of the request it is for, if
    /// that request is traced.
    async fn send(&self, review: &SubjectAccessReview) -> Result<SubjectAccessReview, ReviewError> {
        let body = serde_json::to_vec(review)
            .map_err(|e| ReviewError { message: format!("encoding the review: {e}"), retriable: false })?;
        let mut request = kube::core::Request::new("/apis/authorization.k8s.io/v1/subjectaccessreviews")
            .create(&PostParams::default(), body)
            .map_err(|e| ReviewError::from_kube(&kube::Error::BuildRequest(e)))?;
        request.headers_mut().extend(crate::trace::headers_for(&opentelemetry::Context::current()));
        self.client.request::<SubjectAccessReview>(request).await.map_err(|e| ReviewError::from_kube(&e))
    }
}

#[async_trait::async_trait]
impl AccessReviewer for KubeAccessReviewer {
    async fn review(&self, user: &User, attrs: &Attributes) -> Result<Decision, ReviewError> {
        let review = review_request(user, attrs);
        // A span of the request's trace, which kube-apiserver's continues.
        let span = crate::trace::child("SubjectAccessReview", opentelemetry::trace::SpanKind::Client, Vec::new);
        let answer = crate::trace::run_in(&span, self.send(&review)).await;
        crate::trace::end(span, answer.as_ref().err().map(|e| e.message.as_str()));
        Ok(decision_from_status(answer?.status.as_ref()))
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// The SubjectAccessReview the webhook authorizer sends for this request.
/// Empty strings, lists and maps are left out, as Go's `omitempty` does.
fn review_request(user: &User, attrs: &Attributes) -> SubjectAccessReview {
    let mut spec = SubjectAccessReviewSpec {
        user: non_empty(&user.name),
        uid: non_empty(&user.uid),
        groups: (!user.groups.is_empty()).then(|| user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
        ..Default::default()
    };
    if attrs.resource_request {
        spec.resource_attributes = Some(ResourceAttributes {
            namespace: non_empty(&attrs.namespace),
            verb: non_empty(&attrs.verb),
            group: non_empty(&attrs.api_group),
            version: non_empty(&attrs.api_version),
            resource: non_empty(&attrs.resource),
            subresource: non_empty(&attrs.subresource),
            name: non_empty(&attrs.name),
            ..Default::default()
        });
    } else {
        spec.non_resource_attributes =
            Some(NonResourceAttributes { path: non_empty(&attrs.path), verb: non_empty(&attrs.verb) });
    }
    SubjectAccessReview { spec, ..Default::default() }
}

/// Reads a review's status the way the webhook authorizer does. "No opinion"
/// (neither allowed nor denied) is a denial here, as it is at the end of the
/// delegating authorizer chain. `evaluationError` does not change the
/// decision; it is only logged.
fn decision_from_status(status: Option<&SubjectAccessReviewStatus>) -> Decision {
    let Some(status) = status else {
        return Decision::Deny { reason: String::new() };
    };
    if let Some(err) = status.evaluation_error.as_deref().filter(|e| !e.is_empty()) {
        tracing::debug!(evaluation_error = err, "SubjectAccessReview reported an evaluation error");
    }
    let reason = status.reason.clone().unwrap_or_default();
    let denied = status.denied.unwrap_or(false);
    if status.allowed && !denied {
        Decision::allow(&reason)
    } else {
        if status.allowed && denied {
            tracing::warn!("SubjectAccessReview returned both allowed and denied; denying");
        }
        Decision::Deny { reason }
    }
}
#[cfg(test)]
mod tests {
    use super::super::tests::{deny, non_res, res, user};
    use super::*;
    use serde_json::{json, Value};
    use std::collections::BTreeMap;

    // ---- SubjectAccessReview ----

    #[test]
    fn review_request_for_a_resource() {
        let u = User {
            name: "alice".into(),
            uid: "42".into(),
            groups: vec!["farmers".into(), "system:authenticated".into()],
            extra: BTreeMap::from([("scopes".to_string(), vec!["a".to_string(), "b".to_string()])]),
        };
        let sar = review_request(&u, &res("update", "widgets", "status", "ns", "x"));
        assert_eq!(
            serde_json::to_value(&sar).ok(),
            Some(json!({
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "metadata": {},
                "spec": {
                    "user": "alice",
                    "uid": "42",
                    "groups": ["farmers", "system:authenticated"],
                    "extra": {"scopes": ["a", "b"]},
                    "resourceAttributes": {
                        "verb": "update",
                        "group": "example.com",
                        "version": "v1alpha",
                        "resource": "widgets",
                        "subresource": "status",
                        "namespace": "ns",
                        "name": "x"
                    }
                }
            }))
        );
    }

    #[test]
    fn review_request_omits_empty_fields() {
        let core_list = res("list", "widgets", "", "", "").view().for_resource("", "pods");
        let sar = review_request(&user("bob"), &core_list);
        assert_eq!(
            serde_json::to_value(&sar.spec).ok(),
            Some(json!({
                "user": "bob",
                "resourceAttributes": {"verb": "list", "version": "v1", "resource": "pods"}
            }))
        );
    }

    #[test]
    fn review_request_for_a_path() {
        let mut u = user("carol");
        u.groups = vec!["g".into()];
        let sar = review_request(&u, &non_res("get", "/apis/example.com"));
        assert_eq!(
            serde_json::to_value(&sar.spec).ok(),
            Some(json!({
                "user": "carol",
                "groups": ["g"],
                "nonResourceAttributes": {"path": "/apis/example.com", "verb": "get"}
            }))
        );
    }

    #[test]
    fn decisions_from_review_status() {
        let status = |v: Value| serde_json::from_value::<SubjectAccessReviewStatus>(v).ok();
        assert_eq!(decision_from_status(status(json!({"allowed": true})).as_ref()), Decision::allow(""));
        assert_eq!(
            decision_from_status(status(json!({"allowed": true, "reason": "RBAC: allowed by R"})).as_ref()),
            Decision::allow("RBAC: allowed by R")
        );
        assert_eq!(
            decision_from_status(status(json!({"allowed": false, "reason": "RBAC: no"})).as_ref()),
            deny("RBAC: no")
        );
        assert_eq!(decision_from_status(status(json!({"allowed": false, "denied": true})).as_ref()), deny(""));
        assert_eq!(
            decision_from_status(status(json!({"allowed": true, "denied": true, "reason": "both"})).as_ref()),
            deny("both")
        );
        assert_eq!(
            decision_from_status(status(json!({"allowed": false, "evaluationError": "boom"})).as_ref()),
            deny("")
        );
        assert_eq!(decision_from_status(None), deny(""));
    }
}
