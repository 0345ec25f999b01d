//! `matchConditions`: CEL expressions a webhook or policy puts on the
//! requests it applies to, compiled once per configuration and evaluated as
//! k8s.io/apiserver's `matchconditions.Matcher` evaluates them: any false
//! condition means "not this request"; otherwise an error fails the request
//! unless the failure policy is Ignore, when it also means "not this one".

use k8s_openapi::api::admissionregistration::v1::MatchCondition;

use crate::admission::expressions::{evaluate_within, Inputs, OutOfBudget};
use crate::apimachinery::cel::{cel, Env, Expression, OUT_OF_BUDGET};

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
    /// All of them share one budget: spent, nothing more is run and the
    /// conditions fail whatever a later one would say (kube's `ForInput`
    /// stops there), with kube's words.
    pub fn matches(&self, inputs: &Inputs<'_>, fail_open: bool) -> Result<bool, String> {
        let mut errors = Vec::new();
        let mut remaining = RUNTIME_BUDGET;
        for (_, compiled) in &self.conditions {
            match evaluate_within(compiled, inputs, &mut remaining) {
                Err(OutOfBudget) if fail_open => return Ok(false),
                Err(OutOfBudget) => return Err(OUT_OF_BUDGET.to_string()),
                Ok(Ok(cel::Value::Bool(false))) => return Ok(false),
                Ok(Ok(cel::Value::Bool(true))) => {}
                Ok(Ok(_)) => {
                    let source = compiled.as_ref().map(|e| e.source()).unwrap_or_default();
                    errors.push(format!("expression '{source}' resulted in error: no such overload"));
                }
                Ok(Err(failure)) => errors.push(failure.message),
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

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::admission::expressions::{webhook_env, NO_VARIABLES};

    /// `n` conditions of 0.8M each (the bound for 300 annotations, within
    /// the per-call limit), then one that is false.
    fn costly(n: usize) -> MatchConditions {
        let every = "object.metadata.annotations.all(k, object.metadata.annotations.all(j, k != j || k == j))";
        let mut conditions: Vec<MatchCondition> =
            (0..n).map(|i| MatchCondition { name: format!("c{i}"), expression: every.to_string() }).collect();
        conditions.push(MatchCondition { name: "never".into(), expression: "false".into() });
        MatchConditions::compile(&webhook_env(), &conditions)
    }

    fn matches(conditions: &MatchConditions, fail_open: bool) -> Result<bool, String> {
        let annotations: serde_json::Map<String, Value> = (0..300).map(|i| (format!("a{i}"), json!("x"))).collect();
        let object = json!({"metadata": {"name": "dolly", "annotations": annotations}});
        let null = Value::Null;
        let authorizer = cel::Value::Null;
        let inputs = Inputs {
            object: &object,
            old_object: &null,
            request: &null,
            params: &null,
            namespace_object: &null,
            variables: &NO_VARIABLES,
            authorizer: &authorizer,
        };
        conditions.matches(&inputs, fail_open)
    }

    #[test]
    fn conditions_share_kubes_budget_and_stop_when_it_is_spent() {
        assert_eq!(matches(&costly(8), false), Ok(false), "within 7M: the last condition is false");
        assert_eq!(matches(&costly(9), false), Err(OUT_OF_BUDGET.to_string()), "the false one is never reached");
        assert_eq!(matches(&costly(9), true), Ok(false));
    }
}
