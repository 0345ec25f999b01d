//! The MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins: the
//! cluster's webhook configurations ([`source`]) matched against each write
//! and called ([`client`]) with an AdmissionReview ([`review`]), as
//! k8s.io/apiserver's webhook dispatchers call them.
//!
//! Mutating webhooks run one after another, each seeing the object as the
//! ones before left it; those with `reinvocationPolicy: IfNeeded` run once
//! more when a later one changed the object. Validating webhooks run all at
//! once. A webhook that cannot be called, or answers badly, fails the request
//! with kube's 500 unless its `failurePolicy` is Ignore; a denial is the
//! webhook's Status, worded `admission webhook "x" denied the request: ...`.

pub mod authentication;
pub mod client;
pub mod review;
pub mod source;

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

use self::authentication::WebhookAuthentication;
use self::client::Caller;
use self::source::{Hook, Source};
use crate::admission::authorizer::CelAuthorizer;
use crate::admission::expressions::{Inputs, NO_VARIABLES};
use crate::admission::matching::Request;
use crate::admission::metrics::{AdmissionMetrics, RejectionKind, ADMIT, VALIDATING};
use crate::admission::namespace_lifecycle::NamespaceLifecycle;
use crate::admission::{forbidden, matching};
use crate::admission::{AdmissionPlugin, Attributes};
use crate::apimachinery::errors::{self, ApiError, ApiResult, StatusDetails};
use crate::apimachinery::patch::Patch;
use crate::apimachinery::serializer::BodyType;

/// The audit annotation kube adds when a webhook failed open.
const MUTATING_FAILED_OPEN: &str = "failed-open.mutation.webhook.admission.k8s.io/";
const VALIDATING_FAILED_OPEN: &str = "failed-open.validating.webhook.admission.k8s.io/";

/// The admission webhooks of a cluster.
pub struct Webhooks {
    source: Arc<Source>,
    caller: Caller,
    namespaces: Arc<NamespaceLifecycle>,
    metrics: Arc<AdmissionMetrics>,
    authorizer: CelAuthorizer,
    /// Which of the two plugins are on (`--disable-admission-plugins`).
    mutating: bool,
    validating: bool,
}

/// How one webhook call ended, short of success.
enum Failure {
    /// kube's `ErrCallingWebhook`: the failure policy decides.
    Calling { reason: String, code: u16 },
    /// The webhook said no, or the request cannot go on whatever the policy.
    Refused(ApiError, RejectionKind),
}

impl Webhooks {
    /// Starts the configuration watches on `cluster`; namespace labels for
    /// `namespaceSelector` come from the namespace watch of `namespaces`.
    pub fn start(
        cluster: kube::Client,
        namespaces: Arc<NamespaceLifecycle>,
        metrics: Arc<AdmissionMetrics>,
        mutating: bool,
        validating: bool,
        authentication: WebhookAuthentication,
        authorizer: CelAuthorizer,
    ) -> Self {
        let source = Source::start(cluster.clone());
        let caller = Caller::new(cluster, authentication);
        Self { source, caller, namespaces, metrics, authorizer, mutating, validating }
    }

    /// For /readyz: the configurations have been read.
    pub fn readiness(&self) -> Result<(), String> {
        self.source.readiness()
    }

    /// Before the configurations are read, every write is refused (kube's
    /// "not yet ready to handle request"): none may pass unadmitted.
    fn ensure_ready(&self, attributes: &Attributes<'_>) -> ApiResult<()> {
        if self.source.synced() {
            return Ok(());
        }
        Err(forbidden(attributes, "not yet ready to handle request"))
    }

    /// Whether `hook` is called for this write (kube's `ShouldCallHook`):
    /// its rules name the request, the namespace's labels and the object's
    /// (old or new) match its selectors.
    async fn should_call(&self, hook: &Hook, attributes: &Attributes<'_>) -> ApiResult<bool> {
        if !hook.rules_match(Request::of(attributes)) {
            return Ok(false);
        }
        if !matching::namespace_matches(&self.namespaces, &hook.namespace_selector, attributes).await?
            || !matching::object_matches(&hook.object_selector, attributes)?
        {
            return Ok(false);
        }
        if !hook.match_conditions.is_empty() {
            let request = review::request_value("", attributes);
            let null = serde_json::Value::Null;
            let session = self.authorizer.session(attributes);
            let inputs = Inputs {
                object: attributes.object.as_ref().unwrap_or(&null),
                old_object: attributes.old_object.unwrap_or(&null),
                request: &request,
                params: &null,
                namespace_object: &null,
                variables: &NO_VARIABLES,
                authorizer: &session.value,
            };
            let matched = self
                .authorizer
                .settle(attributes.user, &session.checks, || hook.match_conditions.matches(&inputs, hook.fail_open))
                .await;
            return matched.map_err(|why| forbidden(attributes, &why));
        }
        Ok(true)
    }

    /// Sends the review and reads the verified answer; records the call.
    async fn review(
        &self,
        hook: &Hook,
        attributes: &Attributes<'_>,
        step: &'static str,
    ) -> Result<review::Answer, Failure> {
        let started = Instant::now();
        let operation = attributes.operation.as_str();
        let result = self.exchange(hook, attributes).await;
        let (rejected, code) = match &result {
            Ok(answer) => (!answer.allowed, 200),
            Err(Failure::Calling { code, .. }) => (!hook.fail_open, *code),
            Err(Failure::Refused(e, _)) => (true, e.code),
        };
        self.metrics.observe_call(&hook.name, step, operation, started.elapsed(), rejected, code);
        match &result {
            Ok(answer) if !answer.allowed => {
                let code =
                    answer.status.as_ref().and_then(|s| s.code).and_then(|c| u16::try_from(c).ok()).unwrap_or(400);
                self.metrics.observe_rejection(&hook.name, step, operation, RejectionKind::Denied, code.max(400));
            }
            Err(Failure::Calling { code, .. }) if !hook.fail_open => {
                self.metrics.observe_rejection(&hook.name, step, operation, RejectionKind::CallingWebhook, *code);
            }
            Err(Failure::Refused(e, kind)) => {
                self.metrics.observe_rejection(&hook.name, step, operation, *kind, e.code)
            }
            _ => {}
        }
        result
    }

    async fn exchange(&self, hook: &Hook, attributes: &Attributes<'_>) -> Result<review::Answer, Failure> {
        if attributes.dry_run {
            // kube's dry-run rule: only a webhook without side effects may
            // see a dry run; this is no call failure, so no policy ignores it.
            if !matches!(hook.side_effects.as_str(), "None" | "NoneOnDryRun") {
                return Err(Failure::Refused(
                    ApiError::bad_request(format!("admission webhook {:?} does not support dry run", hook.name)),
                    RejectionKind::Internal,
                ));
            }
        }
        let Some(version) = hook.review_version else {
            return Err(Failure::Calling {
                reason: format!(
                    "could not create admission objects: webhook does not accept known AdmissionReview versions: {}",
                    review::SUPPORTED_VERSIONS.join(", ")
                ),
                code: 0,
            });
        };
        let uid = crate::apimachinery::uid::new_uid().to_string();
        let body = review::encode_request(version, &uid, attributes)
            .map_err(|e| Failure::Calling { reason: format!("could not create admission objects: {e}"), code: 0 })?;
        // kube's span for the call, which the webhook's own spans continue.
        let names = attributes.names;
        let span = crate::trace::child(
            if hook.mutating { "Call mutating webhook" } else { "Call validating webhook" },
            opentelemetry::trace::SpanKind::Client,
            || {
                vec![
                    opentelemetry::KeyValue::new(
                        "configuration",
                        hook.id.split('/').next().unwrap_or_default().to_string(),
                    ),
                    opentelemetry::KeyValue::new("webhook", hook.name.clone()),
                    // Go's GroupVersionResource as a string, as kube writes it.
                    opentelemetry::KeyValue::new(
                        "resource",
                        format!("{}/{}, Resource={}", names.group, names.version, names.plural),
                    ),
                    opentelemetry::KeyValue::new("subresource", attributes.subresource.to_string()),
                    opentelemetry::KeyValue::new("operation", attributes.operation.as_str()),
                    opentelemetry::KeyValue::new("UID", uid.clone()),
                ]
            },
        );
        let called = crate::trace::run_in(&span, self.caller.call(hook, body)).await;
        crate::trace::end(span, called.as_ref().err().map(|e| e.reason.as_str()));
        let answer = called.map_err(|e| Failure::Calling { reason: e.reason, code: e.code })?;
        review::decode_answer(version, &uid, hook.mutating, &answer)
            .map_err(|why| Failure::Calling { reason: format!("received invalid webhook response: {why}"), code: 200 })
    }

    /// A call failure under the webhook's failure policy: None when it is
    /// ignored (and noted for the audit log), else kube's 500.
    fn calling_failure(
        &self,
        hook: &Hook,
        reason: &str,
        attributes: &mut Attributes<'_>,
        annotation: String,
        step: &'static str,
    ) -> Option<ApiError> {
        let message = format!("failed calling webhook {:?}: {reason}", hook.name);
        if hook.fail_open {
            tracing::warn!(webhook = %hook.name, error = %message, "failed calling webhook, failing open");
            self.metrics.observe_fail_open(&hook.name, step);
            attributes.audit_annotations.push((annotation, hook.name.clone()));
            return None;
        }
        tracing::warn!(webhook = %hook.name, error = %message, "failed calling webhook, failing closed");
        Some(internal_error(&message))
    }

    /// The mutating webhooks, in order, once.
    async fn mutate_pass(
        &self,
        hooks: &[Arc<Hook>],
        is_reinvoke: bool,
        attributes: &mut Attributes<'_>,
    ) -> ApiResult<()> {
        for (index, hook) in hooks.iter().enumerate() {
            if !self.should_call(hook, attributes).await? {
                continue;
            }
            // A webhook not called in the first pass is not called in the second.
            if is_reinvoke && !attributes.reinvocation.webhooks.should_reinvoke(&hook.id) {
                continue;
            }
            let changed = self.mutate_with(hook, index, usize::from(is_reinvoke), attributes).await?;
            if changed {
                attributes.reinvocation.webhooks.require_reinvoking_previously_invoked();
                attributes.reinvocation.should_reinvoke = true;
            }
            if hook.reinvoke_if_needed {
                attributes.reinvocation.webhooks.add_reinvocable(&hook.id);
            }
        }
        Ok(())
    }

    /// One mutating webhook: calls it and applies its patch. Whether the
    /// object changed.
    async fn mutate_with(
        &self,
        hook: &Hook,
        index: usize,
        round: usize,
        attributes: &mut Attributes<'_>,
    ) -> ApiResult<bool> {
        let answer = match self.review(hook, attributes, ADMIT).await {
            Ok(answer) => answer,
            Err(Failure::Refused(e, _)) => return Err(e),
            Err(Failure::Calling { reason, .. }) => {
                let key = format!("{MUTATING_FAILED_OPEN}round_{round}_index_{index}");
                return match self.calling_failure(hook, &reason, attributes, key, ADMIT) {
                    Some(e) => Err(e),
                    None => Ok(false),
                };
            }
        };
        take_notes(hook, &answer, attributes);
        if !answer.allowed {
            return Err(denial(&hook.name, answer.status));
        }
        let Some(patch) = answer.patch.filter(|p| !p.is_empty()) else {
            return Ok(false);
        };
        if answer.patch_type.as_deref() != Some("JSONPatch") {
            let reason = format!("unsupported patch type {:?}", answer.patch_type.unwrap_or_default());
            let key = format!("{MUTATING_FAILED_OPEN}round_{round}_index_{index}");
            return match self.calling_failure(hook, &reason, attributes, key, ADMIT) {
                Some(e) => Err(e),
                None => Ok(false),
            };
        }
        // The patch is applied with the same bounds as a client's JSON
        // patch (kube's operation count and copy limits).
        let operations = match Patch::parse(Some(BodyType::JsonPatch), &patch) {
            Ok(p) => p,
            Err(e) => {
                let reason = format!("received undecodable patch in webhook response: {}", e.message);
                let key = format!("{MUTATING_FAILED_OPEN}round_{round}_index_{index}");
                return match self.calling_failure(hook, &reason, attributes, key, ADMIT) {
                    Some(e) => Err(e),
                    None => Ok(false),
                };
            }
        };
        if matches!(&operations, Patch::Json(p) if p.0.is_empty()) {
            return Ok(false);
        }
        let Some(object) = attributes.object.as_ref() else {
            return Err(internal_error(&format!(
                "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
                hook.name
            )));
        };
        let patched = operations.apply(object.clone()).map_err(|e| internal_error(&e.message))?;
        let changed = Some(&patched) != attributes.object.as_ref();
        attributes.object = Some(patched);
        Ok(changed)
    }
}

#[async_trait]
impl AdmissionPlugin for Webhooks {
    fn may_act(&self, request: Request<'_>) -> bool {
        if !self.source.synced() {
            return true;
        }
        let hooks = self.source.peek();
        let mutating = hooks.mutating.iter().filter(|_| self.mutating);
        let validating = hooks.validating.iter().filter(|_| self.validating);
        mutating.chain(validating).any(|h| h.rules_match(request))
    }

    async fn mutate(&self, attributes: &mut Attributes<'_>) -> ApiResult<()> {
        if !self.mutating {
            return Ok(());
        }
        self.ensure_ready(attributes)?;
        let hooks = self.source.hooks();
        // kube's reinvocation (see [`crate::admission::reinvocation`]): in
        // the second pass, only webhooks with reinvocationPolicy IfNeeded
        // that ran before a change are called again.
        let is_reinvoke = attributes.reinvocation.is_reinvoke;
        let object = attributes.object.as_ref();
        attributes.reinvocation.webhooks.begin(is_reinvoke, object);
        let result = self.mutate_pass(&hooks.mutating, is_reinvoke, attributes).await;
        let object = attributes.object.as_ref();
        attributes.reinvocation.webhooks.end(object);
        result
    }

    async fn validate(&self, attributes: &mut Attributes<'_>) -> ApiResult<()> {
        if !self.validating {
            return Ok(());
        }
        self.ensure_ready(attributes)?;
        let hooks = self.source.hooks();
        let mut called = Vec::new();
        for (index, hook) in hooks.validating.iter().enumerate() {
            if self.should_call(hook, attributes).await? {
                called.push((index, hook.clone()));
            }
        }
        if called.is_empty() {
            return Ok(());
        }
        let shared: &Attributes<'_> = attributes;
        let answers =
            futures::future::join_all(called.iter().map(|(_, hook)| self.review(hook, shared, VALIDATING))).await;
        let mut first_error = None;
        for ((index, hook), answer) in called.iter().zip(answers) {
            let refusal = match answer {
                Ok(answer) => {
                    take_notes(hook, &answer, attributes);
                    (!answer.allowed).then(|| denial(&hook.name, answer.status))
                }
                Err(Failure::Refused(e, _)) => Some(e),
                Err(Failure::Calling { reason, .. }) => {
                    let key = format!("{VALIDATING_FAILED_OPEN}round_0_index_{index}");
                    self.calling_failure(hook, &reason, attributes, key, VALIDATING)
                }
            };
            if first_error.is_none() {
                first_error = refusal;
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// A webhook's warnings go to the client, its audit annotations (named
/// `<webhook>/<key>`) to the audit log.
fn take_notes(hook: &Hook, answer: &review::Answer, attributes: &mut Attributes<'_>) {
    attributes.warnings.extend(answer.warnings.iter().cloned());
    for (key, value) in &answer.audit_annotations {
        attributes.audit_annotations.push((format!("{}/{key}", hook.name), value.clone()));
    }
}

/// kube's `ToStatusErr`: the webhook's Status, its code at least 400, its
/// message prefixed with who denied the request.
fn denial(webhook: &str, status: Option<Status>) -> ApiError {
    let mut status = status.unwrap_or_default();
    let denied_by = format!("admission webhook {webhook:?} denied the request");
    if status.code.unwrap_or(0) < 400 {
        status.code = Some(400);
    }
    if matches!(status.status.as_deref(), None | Some("") | Some("Success")) {
        status.status = Some("Failure".into());
    }
    let message = status.message.clone().unwrap_or_default();
    let reason = status.reason.clone().unwrap_or_default();
    status.message = Some(if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    });
    ApiError::from_status(status)
}

/// kube's `NewInternalError`: the message, and the same text as the one cause.
fn internal_error(message: &str) -> ApiError {
    ApiError::internal_error(message)
        .with_details(StatusDetails { causes: Some(vec![errors::cause("", message, "")]), ..Default::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_read_as_kube_writes_them() {
        let e = denial("deny.example.com", None).status_body();
        assert_eq!(e["code"], 400);
        assert_eq!(e["message"], "admission webhook \"deny.example.com\" denied the request without explanation");
        let status = Status {
            code: Some(403),
            message: Some("no widgets on Sunday".into()),
            reason: Some("Sunday".into()),
            ..Default::default()
        };
        let e = denial("deny.example.com", Some(status)).status_body();
        assert_eq!(e["code"], 403);
        assert_eq!(e["reason"], "Sunday", "a reason kube does not define passes through");
        assert_eq!(e["status"], "Failure");
        assert_eq!(e["message"], "admission webhook \"deny.example.com\" denied the request: no widgets on Sunday");
        let status = Status { code: Some(200), reason: Some("NoReason".into()), ..Default::default() };
        let e = denial("w", Some(status)).status_body();
        assert_eq!(
            (e["code"].as_i64(), e["message"].as_str()),
            (Some(400), Some("admission webhook \"w\" denied the request: NoReason"))
        );
    }

    #[test]
    fn internal_errors_carry_their_cause() {
        let e = internal_error("failed calling webhook \"w\": boom").status_body();
        assert_eq!(e["code"], 500);
        assert_eq!(e["reason"], "InternalError");
        assert_eq!(e["message"], "Internal error occurred: failed calling webhook \"w\": boom");
        assert_eq!(e["details"]["causes"][0]["message"], "failed calling webhook \"w\": boom");
    }
}
