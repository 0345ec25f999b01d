//! `matchConditions`: CEL expressions a webhook puts on the requests it is
//! called for, compiled once per configuration and evaluated as
//! k8s.io/apiserver's `matchconditions.Matcher` evaluates them: any false
//! condition skips the webhook; otherwise an error fails the request (403)
//! unless the failure policy is Ignore, when the webhook is skipped.
//!
//! The expressions see `object`, `oldObject` (null when absent) and
//! `request` (the AdmissionRequest the webhook would be sent). kube's
//! `authorizer` variable is not offered: an expression using it does not
//! compile, and fails as any condition in error does.

use k8s_openapi::api::admissionregistration::v1::MatchCondition;
use serde_json::Value;

use crate::admission::Attributes;
use crate::apimachinery::cel::{DeclType, Env, Expression, PER_CALL_LIMIT, STATIC_ESTIMATED_COST_LIMIT};

/// kube's `RuntimeCELCostBudgetMatchConditions`: all conditions of one
/// webhook together.
const RUNTIME_BUDGET: u64 = 7_000_000;

/// The compiled conditions of one webhook.
#[derive(Debug)]
pub struct MatchConditions {
    /// (name, the expression or why it did not compile).
    conditions: Vec<(String, Result<Expression, String>)>,
}

/// The environment of admission expressions without parameters.
fn env() -> Env {
    Env::new(STATIC_ESTIMATED_COST_LIMIT)
        .variable("object", DeclType::any())
        .variable("oldObject", DeclType::any())
        .variable("request", DeclType::any())
}

impl MatchConditions {
    pub fn compile(conditions: &[MatchCondition]) -> Self {
        let env = env();
        let conditions = conditions
            .iter()
            .map(|c| {
                let compiled = env.compile(&c.expression).map_err(|e| format!("compilation failed: {e}"));
                (c.name.clone(), compiled)
            })
            .collect();
        Self { conditions }
    }

    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// Whether the webhook is called: Ok(false) when a condition is false,
    /// or failed under `fail_open`; Err(kube's text) when one failed and
    /// none was false.
    pub fn matches(&self, attributes: &Attributes<'_>, request: &Value, fail_open: bool) -> Result<bool, String> {
        let any = DeclType::any();
        let null = Value::Null;
        let object = attributes.object.as_ref().unwrap_or(&null);
        let old_object = attributes.old_object.unwrap_or(&null);
        let mut errors = Vec::new();
        let mut spent = 0u64;
        for (_, compiled) in &self.conditions {
            let expression = match compiled {
                Ok(expression) => expression,
                Err(why) => {
                    errors.push(why.clone());
                    continue;
                }
            };
            let vars = crate::apimachinery::cel::Activation::new()
                .json("object", object, &any)
                .json("oldObject", old_object, &any)
                .json("request", request, &any);
            let limit = PER_CALL_LIMIT.min(RUNTIME_BUDGET.saturating_sub(spent));
            match expression.evaluate(&vars, limit) {
                Ok(out) => {
                    spent += out.cost;
                    match out.value {
                        crate::apimachinery::cel::cel::Value::Bool(false) => return Ok(false),
                        crate::apimachinery::cel::cel::Value::Bool(true) => {}
                        _ => errors
                            .push(format!("expression '{}' resulted in error: no such overload", expression.source())),
                    }
                }
                Err(e) => errors.push(format!("expression '{}' resulted in error: {e}", expression.source())),
            }
        }
        match errors.as_slice() {
            [] => Ok(true),
            _ if fail_open => Ok(false),
            [one] => Err(one.clone()),
            many => Err(format!("[{}]", many.join(", "))),
        }
    }
}
