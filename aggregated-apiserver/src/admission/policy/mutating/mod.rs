//! The MutatingAdmissionPolicy plugin: the cluster's policies and bindings
//! ([`source`]) applied to each create and update as k8s.io/apiserver's
//! mutating policy dispatcher applies them, before the mutating webhooks.
//! For each policy whose `matchConstraints` name the write, each of its
//! bindings whose `matchResources` do, and each parameter object the
//! binding's `paramRef` selects: the `matchConditions`, then the
//! `variables`, then the `mutations` in order, each seeing the object as the
//! ones before left it. A `JSONPatch` mutation's expression gives a list of
//! `JSONPatch{op, path, value}`, applied as a JSON patch (a failed `test`
//! leaves the object as it was); an `ApplyConfiguration` mutation's gives an
//! `Object{...}`, merged into the object as server-side apply merges (no
//! field ownership is recorded, as in kube), and refused where it sets an
//! atomic map or list. Policies with `reinvocationPolicy: IfNeeded` run
//! again when a later policy or webhook changed the object
//! ([`crate::admission::reinvocation`]).
//!
//! What cannot be done (an expression in error, missing parameters, a patch
//! that does not apply) refuses the write under `failurePolicy: Fail` with
//! kube's 403 `policy 'p' with binding 'b' denied request: ...`, and is
//! skipped under Ignore. Expressions may check what the requesting user
//! may do (`authorizer`, [`crate::admission::authorizer`]).

pub mod source;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause};
use serde_json::Value;

use self::source::{Binding, PatchType, Policy, Source};
use crate::admission::authorizer::CelAuthorizer;
use crate::admission::expressions::{evaluate_within, FailureKind, Inputs, OutOfBudget, BUDGET, NO_VARIABLES};
use crate::admission::matching::Request;
use crate::admission::metrics::{AdmissionMetrics, MutationOutcome};
use crate::admission::namespace_lifecycle::NamespaceLifecycle;
use crate::admission::policy::params::ParamSources;
use crate::admission::webhook::review;
use crate::admission::{forbidden, AdmissionPlugin, Attributes, Operation};
use crate::apimachinery::cel::authz::Checks;
use crate::apimachinery::cel::mutation::{json_patch, object_json};
use crate::apimachinery::cel::{cel, Expression, OUT_OF_BUDGET};
use crate::apimachinery::errors::{ApiError, ApiResult};
use crate::apimachinery::patch::Patch;
use crate::apimachinery::serializer::BodyType;
use crate::apimachinery::typed;

/// The MutatingAdmissionPolicies of a cluster.
pub struct MutatingPolicies {
    source: Arc<Source>,
    params: Arc<ParamSources>,
    namespaces: Arc<NamespaceLifecycle>,
    authorizer: CelAuthorizer,
    metrics: Arc<AdmissionMetrics>,
}

/// A policy applied with one binding and parameter (kube's
/// `PolicyInvocation`), and the values its expressions read besides the object.
#[derive(Clone, Copy)]
struct Invocation<'a> {
    policy: &'a Policy,
    binding: &'a Binding,
    param: Option<&'a Value>,
    request: &'a Value,
    namespace_object: &'a Value,
    authorizer: &'a cel::Value,
    /// kube's reinvocation key: the policy, the binding and the parameter.
    key: &'a str,
}

/// Why a policy could not be applied (kube's `PolicyError`).
struct PolicyError {
    policy: String,
    binding: String,
    message: String,
    /// `Invalid` for an invocation's error; none for a binding's configuration.
    invalid: bool,
    /// The policy's `failurePolicy` is Ignore.
    fail_open: bool,
}

impl MutatingPolicies {
    pub fn start(
        cluster: kube::Client,
        params: Arc<ParamSources>,
        namespaces: Arc<NamespaceLifecycle>,
        authorizer: CelAuthorizer,
        metrics: Arc<AdmissionMetrics>,
    ) -> Self {
        Self { source: Source::start(cluster, params.clone()), params, namespaces, authorizer, metrics }
    }

    pub fn readiness(&self) -> Result<(), String> {
        self.source.readiness()
    }

    /// Applies one mutation to `attributes.object`: its expression is
    /// evaluated out of a budget of its own, with the variables it reads
    /// (kube's `ForInput` of one mutation).
    fn apply(
        &self,
        patch_type: PatchType,
        expression: &Result<Expression, String>,
        inputs: &Inputs<'_>,
        attributes: &mut Attributes<'_>,
    ) -> Result<(), (MutationOutcome, String)> {
        let mut remaining = BUDGET;
        let value = match evaluate_within(expression, inputs, &mut remaining) {
            Ok(Ok(value)) => value,
            Ok(Err(failure)) => {
                let outcome = match failure.kind {
                    FailureKind::Compile => MutationOutcome::CompileError,
                    FailureKind::CostLimit => MutationOutcome::OutOfBudget,
                    FailureKind::Invalid => MutationOutcome::Invalid,
                };
                return Err((outcome, failure.message));
            }
            Err(OutOfBudget) => return Err((MutationOutcome::OutOfBudget, OUT_OF_BUDGET.into())),
        };
        self.patch(patch_type, &value, attributes).map_err(|e| (MutationOutcome::Invalid, e))
    }

    /// Changes `attributes.object` as a mutation's value says.
    fn patch(&self, patch_type: PatchType, value: &cel::Value, attributes: &mut Attributes<'_>) -> Result<(), String> {
        let Some(object) = attributes.object.as_ref() else {
            return Ok(());
        };
        let patched = match patch_type {
            PatchType::JsonPatch => apply_json_patch(value, object)?,
            PatchType::ApplyConfiguration => {
                let config = object_json(value)?;
                let atomics = typed::atomics(&config, attributes.shape);
                if !atomics.is_empty() {
                    return Err(format!(
                        "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
                        atomics.join(", ")
                    ));
                }
                typed::merge(object, &config, attributes.shape)
                    .map_err(|e| format!("error applying patch: failed to merge patch: {e}"))?
            }
        };
        attributes.object = Some(patched);
        Ok(())
    }

    /// One invocation (a policy, a binding, a parameter): its conditions,
    /// variables and mutations. Errors are the invocation's, to be judged
    /// by the failure policy. Whether its mutations ran.
    fn invoke(
        &self,
        invocation: Invocation<'_>,
        attributes: &mut Attributes<'_>,
        errors: &mut Vec<PolicyError>,
        observed: &mut Vec<(MutationOutcome, Duration)>,
    ) -> bool {
        let Invocation { policy, binding, param, request, namespace_object, authorizer, key } = invocation;
        let error = |message: String| PolicyError {
            policy: policy.name.clone(),
            binding: binding.name.clone(),
            message,
            invalid: true,
            fail_open: policy.fail_open,
        };
        let null = Value::Null;
        let object = attributes.object.clone();
        let old_object = attributes.old_object;
        let base = Inputs {
            object: object.as_ref().unwrap_or(&null),
            old_object: old_object.unwrap_or(&null),
            request,
            params: param.unwrap_or(&null),
            namespace_object,
            variables: &NO_VARIABLES,
            authorizer,
        };
        match policy.conditions.matches(&base, policy.fail_open) {
            Ok(true) => {}
            Ok(false) => return false,
            Err(e) => {
                errors.push(error(e));
                return false;
            }
        }
        if attributes.reinvocation.is_reinvoke && !attributes.reinvocation.policies.should_reinvoke(key) {
            return false;
        }
        for mutation in &policy.mutations {
            // Each mutation sees the object as the ones before left it, and
            // variables of its own, evaluated from that object when it
            // first reads them (kube makes them anew for each mutation).
            let current = attributes.object.clone();
            let inputs = Inputs { object: current.as_ref().unwrap_or(&null), ..base };
            let variables = inputs.variables_of(&policy.variables);
            let inputs = Inputs { variables: &variables, ..inputs };
            let started = Instant::now();
            let outcome = match self.apply(mutation.patch_type, &mutation.expression, &inputs, attributes) {
                Ok(()) => MutationOutcome::Applied,
                Err((outcome, e)) => {
                    errors.push(error(e));
                    outcome
                }
            };
            observed.push((outcome, started.elapsed()));
        }
        true
    }

    /// An invocation, evaluated again from the same object until its
    /// authorization checks are answered; then its reinvocation noted.
    async fn settle(
        &self,
        invocation: Invocation<'_>,
        checks: &Checks,
        attributes: &mut Attributes<'_>,
        errors: &mut Vec<PolicyError>,
    ) {
        let user = attributes.user;
        let before = attributes.object.clone();
        let errors_before = errors.len();
        let mut observed = Vec::new();
        let ran = self
            .authorizer
            .settle(user, checks, || {
                attributes.object.clone_from(&before);
                errors.truncate(errors_before);
                observed.clear();
                self.invoke(invocation, attributes, errors, &mut observed)
            })
            .await;
        for (outcome, elapsed) in observed {
            self.metrics.observe_mutation(&invocation.policy.name, &invocation.binding.name, outcome, elapsed);
        }
        if !ran {
            return;
        }
        if attributes.object != before {
            attributes.reinvocation.policies.require_reinvoking_previously_invoked();
            attributes.reinvocation.should_reinvoke = true;
        }
        if invocation.policy.reinvoke_if_needed {
            attributes.reinvocation.policies.add_reinvocable(invocation.key);
        }
    }
}

/// A JSONPatch mutation's operations applied to `object`, with a client's
/// JSON patch bounds; a failed `test` leaves the object as it was (kube).
fn apply_json_patch(value: &cel::Value, object: &Value) -> Result<Value, String> {
    let operations: Vec<Value> = json_patch(value)?.iter().map(|op| op.to_json()).collect();
    let body = serde_json::to_vec(&operations).map_err(|e| format!("JSON Patch: {e}"))?;
    let patch = Patch::parse(Some(BodyType::JsonPatch), &body).map_err(|e| format!("JSON Patch: {}", e.message))?;
    match patch.apply(object.clone()) {
        Ok(patched) => Ok(patched),
        Err(e) => match failure(&patch, object) {
            Some(Failure::Test) => Ok(object.clone()),
            Some(Failure::Missing(why)) => Err(format!("JSON Patch: {why}")),
            None => Err(format!("JSON Patch: {}", e.message)),
        },
    }
}

/// Why a patch did not apply, where kube's JSON patch library says it in
/// its own words.
enum Failure {
    /// A `test` failed: kube leaves the object as it was.
    Test,
    /// A path that is not there (evanphx/json-patch v4's wording).
    Missing(String),
}

/// Replays `patch` on `object` to find the operation that fails.
fn failure(patch: &Patch, object: &Value) -> Option<Failure> {
    use json_patch::PatchOperation as Op;
    let Patch::Json(operations) = patch else { return None };
    let mut doc = object.clone();
    for op in &operations.0 {
        if json_patch::patch(&mut doc, std::slice::from_ref(op)).is_ok() {
            continue;
        }
        let missing = |name: &str, path: &str| {
            Some(Failure::Missing(format!(
                "{name} operation does not apply: doc is missing path: {path:?}: missing value"
            )))
        };
        return match op {
            Op::Test(_) => Some(Failure::Test),
            Op::Add(a) => missing("add", a.path.as_str()),
            Op::Replace(r) => missing("replace", r.path.as_str()),
            Op::Remove(r) => {
                let path = r.path.as_str();
                let (parent, key) = path.rsplit_once('/').unwrap_or(("", path));
                match doc.pointer(parent) {
                    // The parent is there, the key is not.
                    Some(Value::Object(_)) => Some(Failure::Missing(format!(
                        "error in remove for path: '{path}': Unable to remove nonexistent key: {}: missing value",
                        key.replace("~1", "/").replace("~0", "~")
                    ))),
                    _ => missing("remove", path),
                }
            }
            _ => None,
        };
    }
    None
}

#[async_trait]
impl AdmissionPlugin for MutatingPolicies {
    fn may_act(&self, request: Request<'_>) -> bool {
        // kube's plugin handles creates and updates (and connects) only.
        if request.operation == Operation::Delete {
            return false;
        }
        if !self.source.synced() {
            return true;
        }
        self.source.peek().iter().any(|p| p.match_constraints.rules_match_any_name(request))
    }

    async fn mutate(&self, attributes: &mut Attributes<'_>) -> ApiResult<()> {
        if attributes.operation == Operation::Delete {
            return Ok(());
        }
        if !self.source.synced() {
            return Err(forbidden(attributes, "not yet ready to handle request"));
        }
        if !self.source.served() {
            return Ok(());
        }
        let policies = self.source.policies();
        let is_reinvoke = attributes.reinvocation.is_reinvoke;
        let object = attributes.object.as_ref();
        attributes.reinvocation.policies.begin(is_reinvoke, object);
        let mut errors = Vec::new();
        let result = self.dispatch(&policies, attributes, &mut errors).await;
        let object = attributes.object.as_ref();
        attributes.reinvocation.policies.end(object);
        result?;
        let mut failing = errors.into_iter().filter(|e| !e.fail_open);
        let Some(first) = failing.next() else { return Ok(()) };
        Err(denied(attributes, first, failing))
    }
}

impl MutatingPolicies {
    async fn dispatch(
        &self,
        policies: &[Arc<Policy>],
        attributes: &mut Attributes<'_>,
        errors: &mut Vec<PolicyError>,
    ) -> ApiResult<()> {
        let mut request = None;
        let mut namespace_object = None;
        // Made for the first policy that applies: most writes meet none.
        let mut session = None;
        for policy in policies {
            if !policy.match_constraints.matches(&self.namespaces, attributes).await? {
                continue;
            }
            for binding in &policy.bindings {
                if let Some(m) = &binding.match_resources {
                    if !m.matches(&self.namespaces, attributes).await? {
                        continue;
                    }
                }
                let params = match self.params.collect(
                    policy.param_kind.as_ref(),
                    binding.param_ref.as_ref(),
                    attributes.namespace,
                ) {
                    Ok(params) => params,
                    Err(e) => {
                        errors.push(PolicyError {
                            policy: policy.name.clone(),
                            binding: binding.name.clone(),
                            message: format!("failed to configure binding: {e}"),
                            invalid: false,
                            fail_open: policy.fail_open,
                        });
                        continue;
                    }
                };
                if policy.uses_request && request.is_none() {
                    request = Some(review::request_value("", attributes));
                }
                if policy.uses_namespace && namespace_object.is_none() {
                    namespace_object = Some(match attributes.namespace {
                        "" => Value::Null,
                        ns => match self.namespaces.lookup(ns).await? {
                            Some(namespace) => serde_json::to_value(&*namespace).unwrap_or(Value::Null),
                            None => Value::Null,
                        },
                    });
                }
                let null = Value::Null;
                let session = &*session.get_or_insert_with(|| self.authorizer.session(attributes));
                for param in &params {
                    let param = param.as_ref();
                    let field = |name: &str| param.and_then(|p| p.get("metadata")?.get(name)?.as_str()).unwrap_or("");
                    let key = format!("{}/{}/{}/{}", policy.name, binding.name, field("namespace"), field("name"));
                    let invocation = Invocation {
                        policy,
                        binding,
                        param,
                        request: request.as_ref().unwrap_or(&null),
                        namespace_object: namespace_object.as_ref().unwrap_or(&null),
                        authorizer: &session.value,
                        key: &key,
                    };
                    self.settle(invocation, &session.checks, attributes, errors).await;
                }
            }
        }
        Ok(())
    }
}

/// kube's answer to policy errors: `admission.NewForbidden` with the first
/// error's text as the message (and `Invalid` as the reason when it is an
/// invocation's), every error a cause.
fn denied(attributes: &Attributes<'_>, first: PolicyError, rest: impl Iterator<Item = PolicyError>) -> ApiError {
    let all: Vec<PolicyError> = std::iter::once(first).chain(rest).collect();
    let text =
        |e: &PolicyError| format!("policy '{}' with binding '{}' denied request: {}", e.policy, e.binding, e.message);
    let base = forbidden(attributes, "admission request denied by policy").status_body();
    let mut status: Status = serde_json::from_value(base).unwrap_or_default();
    status.message = all.first().map(text);
    if all.first().is_some_and(|e| e.invalid) {
        status.reason = Some("Invalid".into());
    }
    if let Some(details) = status.details.as_mut() {
        details.causes =
            Some(all.iter().map(|e| StatusCause { message: Some(text(e)), ..Default::default() }).collect());
    }
    ApiError::from_status(status)
}
