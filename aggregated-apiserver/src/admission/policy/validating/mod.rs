//! The ValidatingAdmissionPolicy plugin: the cluster's policies and bindings
//! ([`source`]) evaluated for each write as k8s.io/apiserver's validating
//! policy dispatcher evaluates them. For each policy whose
//! `matchConstraints` name the write, and each of its bindings whose
//! `matchResources` do, with each parameter object the binding's `paramRef`
//! selects: the `matchConditions`, then the `variables`, the `validations`
//! (with `message`, `messageExpression` and `reason`) and the
//! `auditAnnotations`. A failed validation is acted on as the binding's
//! `validationActions` say: Deny refuses the write (the first denial, in
//! kube's words and code), Warn adds a Warning, Audit an audit annotation.
//! What cannot be evaluated (an expression in error, missing parameters) is
//! a denial under `failurePolicy: Fail` and nothing under Ignore.

pub mod source;

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause};
use serde_json::{json, Value};

use self::source::{Binding, Policy, Source};
use crate::admission::authorizer::CelAuthorizer;
use crate::admission::expressions::{evaluate_within, Failure, Inputs, OutOfBudget, BUDGET, NO_VARIABLES};
use crate::admission::matching::Request;
use crate::admission::metrics::AdmissionMetrics;
use crate::admission::namespace_lifecycle::NamespaceLifecycle;
use crate::admission::policy::params::ParamSources;
use crate::admission::webhook::review;
use crate::admission::{AdmissionPlugin, Attributes};
use crate::apimachinery::cel::{cel, go_type_name, MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES, OUT_OF_BUDGET};
use crate::apimachinery::errors::{details, ApiError, ApiResult};
use crate::apimachinery::gojson::go_cut;

/// kube's cap on the audit annotation values a policy sets.
const MAX_AUDIT_ANNOTATION_VALUE_LENGTH: usize = 10 * 1024;

/// kube's cap on the failures one validation_failure annotation lists.
const MAX_VALIDATION_FAILURES: usize = 50;

/// The ValidatingAdmissionPolicies of a cluster.
pub struct Policies {
    source: Arc<Source>,
    params: Arc<ParamSources>,
    namespaces: Arc<NamespaceLifecycle>,
    metrics: Arc<AdmissionMetrics>,
    authorizer: CelAuthorizer,
}

/// What one validation (or a failure to evaluate) decided.
struct Denial {
    message: String,
    reason: Option<String>,
}

/// A denial with the policy and binding it came from.
struct Decision<'p> {
    policy: &'p Policy,
    binding: Option<&'p Binding>,
    denial: Denial,
}

impl Policies {
    pub fn start(
        cluster: kube::Client,
        params: Arc<ParamSources>,
        namespaces: Arc<NamespaceLifecycle>,
        metrics: Arc<AdmissionMetrics>,
        authorizer: CelAuthorizer,
    ) -> Self {
        Self { source: Source::start(cluster, params.clone()), params, namespaces, metrics, authorizer }
    }

    pub fn readiness(&self) -> Result<(), String> {
        self.source.readiness()
    }
}

/// Evaluates a policy for one binding and parameter: its denials (to
/// act on as the binding says), and its audit annotations.
fn evaluate_policy(
    policy: &Policy,
    base: &Inputs<'_>,
    annotations: &mut Vec<(String, String)>,
) -> Vec<(usize, Denial)> {
    let on_error =
        |message: String| if policy.fail_open { Vec::new() } else { vec![(0, Denial { message, reason: None })] };
    match policy.conditions.matches(base, policy.fail_open) {
        Ok(true) => {}
        Ok(false) => return Vec::new(),
        Err(e) => return on_error(e),
    }
    // kube's validator: the validations, then the message expressions with
    // what the validations left of their budget, then the audit
    // annotations with a budget of their own; each with its own variables,
    // evaluated when one of its expressions first reads them, their cost
    // out of its budget.
    let variables = base.variables_of(&policy.variables);
    let inputs = Inputs { variables: &variables, ..*base };
    let mut remaining = BUDGET;
    let mut results = Vec::with_capacity(policy.validations.len());
    for validation in &policy.validations {
        match evaluate_within(&validation.expression, &inputs, &mut remaining) {
            Ok(result) => results.push(result),
            Err(OutOfBudget) => return on_error(OUT_OF_BUDGET.into()),
        }
    }
    let messages = messages(policy, base, remaining);
    let mut denials = Vec::new();
    for (i, (validation, result)) in policy.validations.iter().zip(results).enumerate() {
        let error = |message: String| (i, Denial { message, reason: None });
        match (result, &messages) {
            (Err(failure), _) => denials.push(error(failure.message)),
            // kube fails every validation that gave a value when the
            // messages ran out of budget, true ones too.
            (Ok(_), Err(OutOfBudget)) => denials.push(error(format!("failed messageExpression: {OUT_OF_BUDGET}"))),
            (Ok(cel::Value::Bool(true)), _) => {}
            (Ok(cel::Value::Bool(false)), Ok(messages)) => {
                let message = match messages.get(i) {
                    Some(Some(Ok(cel::Value::String(s)))) => Some(s.trim().to_string()),
                    _ => None,
                }
                .filter(|m| {
                    !m.is_empty() && m.len() <= MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES && !m.contains('\n')
                })
                .or_else(|| validation.message.as_deref().map(str::trim).filter(|m| !m.is_empty()).map(str::to_string))
                .unwrap_or_else(|| format!("failed expression: {}", validation.source.trim()));
                let reason = validation.reason.clone().unwrap_or_else(|| "Invalid".into());
                denials.push((i, Denial { message, reason: Some(reason) }));
            }
            (Ok(_), _) => {
                denials.push(error(format!("expression '{}' resulted in error: no such overload", validation.source)))
            }
        }
    }
    // Errors deny under Fail only; failed validations always.
    denials.retain(|(_, d)| d.reason.is_some() || !policy.fail_open);
    let variables = base.variables_of(&policy.variables);
    let inputs = Inputs { variables: &variables, ..*base };
    let mut remaining = BUDGET;
    let mut published = Vec::new();
    for (key, compiled) in &policy.audit_annotations {
        let result = match evaluate_within(compiled, &inputs, &mut remaining) {
            Ok(result) => result,
            // As kube: the policy's one decision, its annotations dropped.
            Err(OutOfBudget) => return on_error(OUT_OF_BUDGET.into()),
        };
        match result {
            // Trimmed, and left out when nothing is left, as kube does.
            Ok(cel::Value::String(value)) if value.trim().is_empty() => {}
            Ok(cel::Value::String(value)) => {
                let value = go_cut(value.trim().as_bytes(), MAX_AUDIT_ANNOTATION_VALUE_LENGTH).into_owned();
                published.push((format!("{}/{key}", policy.name), value));
            }
            Ok(cel::Value::Null) => {}
            // kube denies a value of another type whatever the failure
            // policy (its API refuses an expression not typed string or
            // null, so only an older policy can give one).
            Ok(other) => {
                let source = compiled.as_ref().map(|e| e.source()).unwrap_or_default();
                let message = format!(
                    "valueExpression '{source}' resulted in unsupported return type: {}. Return type must be either string or null.",
                    go_type_name(&other)
                );
                denials.push((0, Denial { message, reason: None }));
            }
            Err(_) if policy.fail_open => {}
            Err(failure) => denials.push((0, Denial { message: failure.message, reason: None })),
        }
    }
    annotations.append(&mut published);
    denials
}

/// The values of the validations' message expressions (None where a
/// validation has none), evaluated as kube evaluates them: all of them,
/// whatever the validations gave, out of what the validations left of the
/// budget; none to evaluate where no validation has one.
type Messages = Result<Vec<Option<Result<cel::Value, Failure>>>, OutOfBudget>;

fn messages(policy: &Policy, base: &Inputs<'_>, mut remaining: u64) -> Messages {
    if policy.validations.iter().all(|v| v.message_expression.is_none()) {
        return Ok(Vec::new());
    }
    let variables = base.variables_of(&policy.variables);
    let inputs = Inputs { variables: &variables, ..*base };
    let mut messages = Vec::with_capacity(policy.validations.len());
    for validation in &policy.validations {
        messages.push(match &validation.message_expression {
            Some(compiled) => Some(evaluate_within(compiled, &inputs, &mut remaining)?),
            None => None,
        });
    }
    Ok(messages)
}

/// kube's `reasonToCode`.
fn reason_code(reason: &str) -> i32 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

#[async_trait]
impl AdmissionPlugin for Policies {
    fn may_act(&self, request: Request<'_>) -> bool {
        if !self.source.synced() {
            return true;
        }
        // Names are not known yet: a rule with resourceNames may act.
        self.source.peek().iter().any(|p| p.match_constraints.rules_match_any_name(request))
    }

    async fn validate(&self, attributes: &mut Attributes<'_>) -> ApiResult<()> {
        if !self.source.synced() {
            return Err(crate::admission::forbidden(attributes, "not yet ready to handle request"));
        }
        let policies = self.source.policies();
        // Built once, and only for a policy that reads them.
        let mut request = None;
        let mut namespace_object = None;
        let null = Value::Null;
        let mut denied: Vec<Decision<'_>> = Vec::new();
        let mut failures = Vec::new();
        let mut warnings = Vec::new();
        let mut annotations = Vec::new();
        // Made for the first policy that applies: most writes meet none.
        let mut session = None;
        for policy in policies.iter() {
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
                        if !policy.fail_open {
                            denied.push(Decision {
                                policy,
                                binding: Some(binding),
                                denial: Denial { message: format!("failed to configure binding: {e}"), reason: None },
                            });
                        }
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
                let session = &*session.get_or_insert_with(|| self.authorizer.session(attributes));
                for param in &params {
                    let inputs = Inputs {
                        object: attributes.object.as_ref().unwrap_or(&null),
                        old_object: attributes.old_object.unwrap_or(&null),
                        request: request.as_ref().unwrap_or(&null),
                        params: param.as_ref().unwrap_or(&null),
                        namespace_object: namespace_object.as_ref().unwrap_or(&null),
                        variables: &NO_VARIABLES,
                        authorizer: &session.value,
                    };
                    let (denials, evaluated) = self
                        .authorizer
                        .settle(attributes.user, &session.checks, || {
                            let mut evaluated = Vec::new();
                            (evaluate_policy(policy, &inputs, &mut evaluated), evaluated)
                        })
                        .await;
                    annotations.extend(evaluated);
                    for (index, denial) in denials {
                        let actions = &binding.actions;
                        self.metrics.observe_policy_check(&policy.name, &binding.name, actions);
                        if actions.iter().any(|a| a == "Warn") {
                            warnings.push(format!(
                                "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                                policy.name, binding.name, denial.message
                            ));
                        }
                        if actions.iter().any(|a| a == "Audit") {
                            failures.push(json!({
                                "message": denial.message, "policy": policy.name, "binding": binding.name,
                                "expressionIndex": index, "validationActions": actions,
                            }));
                        }
                        if actions.iter().any(|a| a == "Deny") {
                            denied.push(Decision { policy, binding: Some(binding), denial });
                        }
                    }
                }
            }
        }
        attributes.warnings.append(&mut warnings);
        attributes.audit_annotations.append(&mut annotations);
        if !failures.is_empty() {
            failures.truncate(MAX_VALIDATION_FAILURES);
            attributes.audit_annotations.push((
                "validation.policy.admission.k8s.io/validation_failure".into(),
                Value::Array(failures).to_string(),
            ));
        }
        let Some(first) = denied.into_iter().next() else { return Ok(()) };
        let message = match first.binding {
            Some(binding) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
                first.policy.name, binding.name, first.denial.message
            ),
            None => {
                format!("ValidatingAdmissionPolicy '{}' denied request: {}", first.policy.name, first.denial.message)
            }
        };
        let reason = first.denial.reason.unwrap_or_else(|| "Invalid".into());
        let forbidden = crate::admission::forbidden(attributes, &message);
        let names = attributes.names;
        Err(ApiError::from_status(Status {
            code: Some(reason_code(&reason)),
            message: Some(forbidden.message),
            reason: Some(reason),
            status: Some("Failure".into()),
            details: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusDetails {
                causes: Some(vec![StatusCause { message: Some(message), ..Default::default() }]),
                ..details(names.group, names.plural, attributes.name)
            }),
            ..Default::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::expressions::{policy_env, policy_message_env};
    use crate::apimachinery::cel::authz::{self, Checks, Target};

    fn policy(spec: Value) -> Policy {
        let policy = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap();
        Policy::compile(&policy, Vec::new(), &policy_env(), &policy_message_env())
    }

    /// The messages of the denials `policy` gives a create of `object`,
    /// and the audit annotations it sets.
    fn evaluated(policy: &Policy, object: &Value) -> (Vec<String>, Vec<(String, String)>) {
        let authorizer = authz::authorizer(Checks::new(), Target::default());
        let inputs = Inputs {
            object,
            old_object: &Value::Null,
            request: &Value::Null,
            params: &Value::Null,
            namespace_object: &Value::Null,
            variables: &NO_VARIABLES,
            authorizer: &authorizer,
        };
        let mut annotations = Vec::new();
        let denials = evaluate_policy(policy, &inputs, &mut annotations);
        (denials.into_iter().map(|(_, d)| d.message).collect(), annotations)
    }

    fn denials(policy: &Policy, object: &Value) -> Vec<String> {
        evaluated(policy, object).0
    }

    #[test]
    fn a_variable_reading_a_later_or_undeclared_one_does_not_compile() {
        let spec = |failure: &str| {
            json!({
                "failurePolicy": failure,
                "variables": [
                    {"name": "a", "expression": "variables.b == 1"},
                    {"name": "b", "expression": "1"},
                    {"name": "c", "expression": "variables.b + 1"},
                ],
                "validations": [
                    {"expression": "variables.a"},
                    {"expression": "variables.c == 2"},
                    {"expression": "variables.nosuch"},
                ],
            })
        };
        let object = json!({"metadata": {"name": "dolly"}});
        let messages = denials(&policy(spec("Fail")), &object);
        assert_eq!(messages.len(), 2, "{messages:#?}");
        // kube's composited compiler declares a variable only once it is
        // compiled: `b` is not a field of `variables` for `a`.
        assert_eq!(
            messages[0],
            "expression 'variables.a' resulted in error: composited variable \"a\" fails to compile: compilation failed: \
             ERROR: <input>:1:10: undefined field 'b'\n | variables.b == 1\n | .........^"
        );
        assert_eq!(
            messages[1],
            "compilation error: compilation failed: ERROR: <input>:1:10: undefined field 'nosuch'\n | variables.nosuch\n | .........^"
        );
        assert_eq!(denials(&policy(spec("Ignore")), &object), Vec::<String>::new());
    }

    #[test]
    fn audit_annotations_are_trimmed_and_must_be_strings_or_null() {
        let values = [("padded", "'  padded  '"), ("blank", "'   '"), ("none", "null"), ("number", "1 + 1")];
        let annotations: Vec<Value> =
            values.iter().map(|(key, value)| json!({"key": key, "valueExpression": value})).collect();
        let spec = json!({"failurePolicy": "Ignore", "auditAnnotations": annotations});
        let (messages, annotations) = evaluated(&policy(spec), &json!({"metadata": {"name": "dolly"}}));
        assert_eq!(annotations, vec![("p/padded".to_string(), "padded".to_string())]);
        // Under Ignore too, as kube.
        assert_eq!(
            messages,
            vec!["valueExpression '1 + 1' resulted in unsupported return type: int. Return type must be either string or null."]
        );
    }

    #[test]
    fn audit_annotation_values_are_cut_at_kubes_byte_length() {
        // 10240 bytes of 3-byte euro signs: 3413 whole, one byte of the next.
        let long = "€".repeat(4000);
        assert_eq!(go_cut(long.as_bytes(), MAX_AUDIT_ANNOTATION_VALUE_LENGTH).chars().count(), 3413 + 1);
    }

    /// Variables whose evaluations cost 0.8M each (the bound for 300
    /// annotations), within the per-call limit each, and `n` of them read.
    fn costly(n: usize) -> (Policy, Value) {
        let every = "object.metadata.annotations.all(k, object.metadata.annotations.all(j, k != j || k == j))";
        let variables: Vec<Value> = (0..n).map(|i| json!({"name": format!("v{i}"), "expression": every})).collect();
        let all: Vec<String> = (0..n).map(|i| format!("variables.v{i}")).collect();
        let spec = json!({"variables": variables, "validations": [{"expression": all.join(" && ")}]});
        let annotations: serde_json::Map<String, Value> = (0..300).map(|i| (format!("a{i}"), json!("x"))).collect();
        (policy(spec), json!({"metadata": {"name": "dolly", "annotations": annotations}}))
    }

    #[test]
    fn variables_cost_out_of_the_policys_budget() {
        let (within, object) = costly(12);
        assert_eq!(denials(&within, &object), Vec::<String>::new());
        let (past, object) = costly(13);
        assert_eq!(denials(&past, &object), vec![OUT_OF_BUDGET.to_string()]);
    }
}
