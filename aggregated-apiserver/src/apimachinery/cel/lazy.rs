//! Named expressions evaluated on first use (kube's composited `variables`
//! of admission policies, k8s.io/apiserver `plugin/cel/composition.go`):
//! `variables.x` evaluates `x`'s expression the first time an evaluation
//! reads it, keeps its value for the rest of that set of evaluations (what
//! kube evaluates together: a policy's validations, their messages, its
//! audit annotations, one mutation), and keeps it as CEL made it (an
//! `Object{...}`, an authorization decision), not converted to JSON and
//! back. A variable no evaluation reads is never evaluated, so one that
//! would fail fails nothing. What evaluating them costs is added up for the
//! expression that read them to be charged ([`take_cost`]).
//!
//! The `cel` crate has no lazy values: `variables` is bound to an opaque
//! value holding the expressions and their inputs, and every `variables.x`
//! is rewritten at compile time into a call of [`LAZY`] with it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cel::common::ast::{CallExpr, Expr, LiteralValue};
use cel::{ExecutionError, FunctionContext, IdedExpr, Value};
use kube_cel::cel;
use serde_json::Value as Json;

use super::{Activation, DeclType, Expression, PER_CALL_LIMIT};

/// The function `variables.x` is rewritten into: `__lazy_variable__(variables, 'x')`.
pub(super) const LAZY: &str = "__lazy_variable__";
/// And `has(variables.x)`: whether `x` is declared (before the reader); as
/// kube's lazy map, it evaluates `x` to say so, and fails where `x` fails.
pub(super) const LAZY_HAS: &str = "__lazy_variable_has__";
/// The variable the expressions read them from.
const VARIABLES: &str = "variables";

/// The named expressions of one policy, in order, each compiled (or why not).
pub type Named = Arc<Vec<(String, Result<Expression, String>)>>;

/// One set of evaluations' variables: the expressions, the values of the
/// other variables they read, and what was evaluated so far.
struct Shared {
    named: Named,
    inputs: Vec<(&'static str, Value, DeclType)>,
    /// By name; a failure is kept too (kube evaluates a variable once).
    evaluated: Mutex<HashMap<String, Result<Value, String>>>,
    /// What the evaluations of variables cost since [`take_cost`] last
    /// took it (kube's composition context's `reportCost`).
    cost: AtomicU64,
}

/// The opaque `variables` value: the variables up to `visible` (a variable's
/// expression sees only those declared before it, as kube compiles them, so
/// no evaluation can come back to itself).
#[derive(Clone)]
pub struct Variables {
    shared: Arc<Shared>,
    visible: usize,
}

impl std::fmt::Debug for Variables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "variables({})", self.visible)
    }
}

impl PartialEq for Variables {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared) && self.visible == other.visible
    }
}

impl Eq for Variables {}

impl cel::objects::Opaque for Variables {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.admission.Variables"
    }
}

/// Builds the `variables` value of `named` for one set of evaluations whose
/// other variables are `json` (converted once here, each with the sizes of
/// its value for the cost bound) and `cel` (already CEL values).
pub fn variables(named: Named, json: &[(&'static str, &Json)], cel: &[(&'static str, Value)]) -> Value {
    let any = DeclType::any();
    let mut inputs: Vec<(&'static str, Value, DeclType)> =
        json.iter().map(|(name, v)| (*name, super::value::to_cel(v, &any), DeclType::of_value(v))).collect();
    inputs.extend(cel.iter().map(|(name, v)| (*name, v.clone(), DeclType::Null)));
    let visible = named.len();
    Value::Opaque(Arc::new(Variables {
        shared: Arc::new(Shared { named, inputs, evaluated: Mutex::new(HashMap::new()), cost: AtomicU64::new(0) }),
        visible,
    }))
}

impl Variables {
    /// The value of variable `name`, evaluated now if it was not yet; the
    /// error in kube's words.
    fn get(&self, name: &str) -> Result<Value, String> {
        let position = self.shared.named[..self.visible].iter().position(|(n, _)| n == name);
        let Some(index) = position else {
            return Err(format!("no such key: {name}"));
        };
        if let Some(known) = self.lock().get(name) {
            return known.clone();
        }
        // Evaluated without the lock held: its expression may read earlier
        // variables, which take it.
        let value = match &self.shared.named[index].1 {
            Err(e) => Err(format!("composited variable \"{name}\" fails to compile: {e}")),
            Ok(expression) => {
                let earlier = Value::Opaque(Arc::new(Variables { shared: self.shared.clone(), visible: index }));
                let mut activation = Activation::new();
                for (input, value, shape) in &self.shared.inputs {
                    activation = activation.cel(input, value.clone(), shape.clone());
                }
                activation = activation.cel(VARIABLES, earlier, DeclType::Null);
                let outcome = expression.evaluate(&activation, PER_CALL_LIMIT);
                // Charged whether it succeeded or not, as kube reports it.
                self.shared.cost.fetch_add(outcome_cost(&outcome, PER_CALL_LIMIT), Ordering::Relaxed);
                outcome
                    .map(|out| out.value)
                    .map_err(|e| format!("composited variable \"{name}\" fails to evaluate: {e}"))
            }
        };
        // Unless it met an unanswered check: the evaluation that read it is
        // discarded, and another reading it now may ask it.
        if !matches!(&value, Err(e) if e.contains(super::authz::PENDING)) {
            self.lock().insert(name.to_string(), value.clone());
        }
        value
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Result<Value, String>>> {
        // Values only: a poisoned lock still holds consistent ones.
        self.shared.evaluated.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the variables of `variables` cost to evaluate since this was last
/// asked, taken (kube's `GetAndResetCost`): what the expression that read
/// them must add to its own cost. Zero for any other value.
pub fn take_cost(variables: &Value) -> u64 {
    match variables {
        Value::Opaque(o) => o.downcast_ref::<Variables>().map_or(0, |v| v.shared.cost.swap(0, Ordering::Relaxed)),
        _ => 0,
    }
}

/// What an evaluation cost: its bound (and the checks it ran), or, for one
/// that was not run or was stopped past `per_call_limit`, just past the
/// limit, where kube's cost tracker cancels it.
pub fn outcome_cost(outcome: &Result<super::Evaluated, super::EvalError>, per_call_limit: u64) -> u64 {
    match outcome {
        Ok(out) => out.cost,
        Err(super::EvalError::Failed { cost, .. }) => *cost,
        Err(super::EvalError::CostLimitExceeded { bound }) => (*bound).min(per_call_limit.saturating_add(1)),
    }
}

/// `__lazy_variable__(variables, 'x')` (`has` false): the variable's value;
/// `__lazy_variable_has__(variables, 'x')` (`has` true): whether it is
/// declared before the reader, which kube's lazy map evaluates it to say
/// (failing where it fails). A `variables` bound to a plain map (no
/// policy's) is read as one.
pub(super) fn read(
    ftx: &FunctionContext,
    variables: &Value,
    name: Arc<String>,
    has: bool,
) -> Result<Value, ExecutionError> {
    match variables {
        Value::Opaque(o) => {
            let v = o.downcast_ref::<Variables>().ok_or(ExecutionError::NoSuchOverload)?;
            if has && !v.shared.named[..v.visible].iter().any(|(n, _)| *n == *name) {
                return Ok(Value::Bool(false));
            }
            let value = v.get(&name).map_err(|e| ftx.error(e))?;
            Ok(if has { Value::Bool(true) } else { value })
        }
        Value::Map(m) => match (has, m.map.get(&cel::objects::Key::String(name.clone()))) {
            (true, found) => Ok(Value::Bool(found.is_some())),
            (false, Some(value)) => Ok(value.clone()),
            (false, None) => Err(ExecutionError::NoSuchKey(name)),
        },
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

/// Rewrites every `variables.x` into a call of [`LAZY`], and every
/// `has(variables.x)` into one of [`LAZY_HAS`] (the `cel` crate selects no
/// field of an opaque value).
pub(super) fn rewrite(e: &mut IdedExpr) {
    if let Expr::Select(s) = &mut e.expr {
        if matches!(&s.operand.expr, Expr::Ident(n) if n == VARIABLES) {
            let target = std::mem::replace(&mut *s.operand, IdedExpr { id: e.id, expr: Expr::Unspecified });
            let name = IdedExpr { id: e.id, expr: Expr::Literal(LiteralValue::String(s.field.clone().into())) };
            let func_name = if s.test { LAZY_HAS } else { LAZY };
            e.expr = Expr::Call(CallExpr { func_name: func_name.into(), target: None, args: vec![target, name] });
            return;
        }
    }
    super::for_each_child(e, rewrite);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::cel::authz::{self, Checks, Decision, Target};
    use crate::apimachinery::cel::Env;
    use serde_json::json;

    fn env() -> Env {
        Env::new(u64::MAX)
            .variable("object", DeclType::any())
            .variable("authorizer", DeclType::any())
            .variable("variables", DeclType::any())
    }

    fn named(variables: &[(&str, &str)]) -> Named {
        Arc::new(variables.iter().map(|(n, e)| (n.to_string(), env().compile(e).map_err(|e| e.to_string()))).collect())
    }

    fn eval(src: &str, named: &Named, object: &Json, authorizer: &Value) -> Result<Value, String> {
        let variables = variables(named.clone(), &[("object", object)], &[("authorizer", authorizer.clone())]);
        let any = DeclType::any();
        let activation = Activation::new()
            .json("object", object, &any)
            .cel("authorizer", authorizer.clone(), DeclType::Null)
            .cel("variables", variables, DeclType::Null);
        env()
            .compile(src)
            .map_err(|e| e.to_string())?
            .evaluate(&activation, PER_CALL_LIMIT)
            .map(|o| o.value)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn variables_are_evaluated_when_read_and_keep_their_cel_values() {
        let named = named(&[
            ("broken", "object.nosuch == 1"),
            ("decision", "authorizer.path('/a').check('get')"),
            ("names", "[object.name, 'other']"),
            ("first", "variables.names[0]"),
            ("later", "variables.last"),
            ("last", "1"),
            ("when", "timestamp('2024-01-02T03:04:05Z')"),
        ]);
        let checks = Checks::new();
        let authorizer = authz::authorizer(checks.clone(), Target::default());
        let object = json!({"name": "dolly"});
        assert_eq!(
            eval("variables.first == 'dolly' && variables.names.size() == 2", &named, &object, &authorizer),
            Ok(Value::Bool(true))
        );
        // Declared (and evaluated to say so, as kube's lazy map does).
        assert_eq!(
            eval("has(variables.names) && !has(variables.nothing)", &named, &object, &authorizer),
            Ok(Value::Bool(true))
        );
        assert!(eval("has(variables.broken)", &named, &object, &authorizer).is_err());
        assert_eq!(
            eval("variables.broken", &named, &object, &authorizer),
            Err("composited variable \"broken\" fails to evaluate: no such key: nosuch".into())
        );
        // A variable sees only those declared before it.
        assert_eq!(
            eval("variables.later", &named, &object, &authorizer),
            Err("composited variable \"later\" fails to evaluate: no such key: last".into())
        );
        // Kept as CEL made it: JSON would have no timestamp, nor a decision.
        assert_eq!(eval("variables.when.getFullYear() == 2024", &named, &object, &authorizer), Ok(Value::Bool(true)));
        let pending = eval("variables.decision.allowed()", &named, &object, &authorizer);
        assert!(pending.is_err_and(|e| e.contains(authz::PENDING)));
        for check in checks.take_pending() {
            checks.answer(check, Decision { allowed: true, ..Default::default() });
        }
        assert_eq!(eval("variables.decision.allowed()", &named, &object, &authorizer), Ok(Value::Bool(true)));
    }
}
