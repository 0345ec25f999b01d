//! `matchConditions`: CEL expressions a webhook or policy puts on the
//! requests it applies to, compiled once per configuration and evaluated as
//! k8s.io/apiserver's `matchconditions.Matcher` evaluates them: any false
//! condition means "not this request"; otherwise an error fails the request
//! unless the failure policy is Ignore, when it also means "not this one".

use k8s_openapi::api::admissionregistration::v1::MatchCondition;

use crate::admission::expressions::Inputs;
use crate::apimachinery::cel::{cel, Env, Expression, PER_CALL_LIMIT};

/// kube's `RuntimeCELCostBudgetMatchConditions`: all conditions together.
const RUNTIME_BUDGET: u64 = 7_000_000;

/// Compiled conditions.
#[derive(Debug)]
pub struct MatchConditions {
    /// (name, the expression or why it did not compile).
    conditions: Vec<(String, Result<Expression, String>)>,
}

impl MatchConditions {
    pub fn compile(env: &Env, conditions: &[MatchCondition]) -> Self {
        let conditions = conditions
            .iter()
            .map(|c| {
                let compiled = crate::admission::expressions::compile(env, &c.expression);
                (c.name.clone(), compiled)
            })
            .collect();
        Self { conditions }
    }

    /// Whether a condition reads the variable `name`.
    pub fn uses(&self, name: &str) -> bool {
        self.conditions.iter().any(|(_, c)| c.as_ref().is_ok_and(|e| e.uses(name)))
    }

    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// Ok(false) when a condition is false, or one failed under
    /// `fail_open`; Err(kube's text) when one failed and none was false.
    pub fn matches(&self, inputs: &Inputs<'_>, fail_open: bool) -> Result<bool, String> {
        let mut errors = Vec::new();
        let mut spent = 0u64;
        for (_, compiled) in &self.conditions {
            let expression = match compiled {
                Ok(expression) => expression,
                Err(why) => {
                    errors.push(format!("compilation error: {why}"));
                    continue;
                }
            };
            let limit = PER_CALL_LIMIT.min(RUNTIME_BUDGET.saturating_sub(spent));
            match expression.evaluate(&inputs.activation(), limit) {
                Ok(out) => {
                    spent += out.cost;
                    match out.value {
                        cel::Value::Bool(false) => return Ok(false),
                        cel::Value::Bool(true) => {}
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
