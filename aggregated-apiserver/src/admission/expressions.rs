//! The CEL environment of admission (k8s.io/apiserver `plugin/cel`): what
//! webhook `matchConditions` and ValidatingAdmissionPolicy expressions see,
//! and the values bound to it for one write. `object` and `oldObject` are
//! null when absent, `request` is the AdmissionRequest a webhook would be
//! sent, `authorizer` checks what the requesting user may do
//! ([`crate::admission::authorizer`]); policies add `params`,
//! `namespaceObject` and `variables`.

use serde_json::Value;

use crate::apimachinery::cel::{
    cel, lazy, Activation, DeclType, Env, EvalError, Expression, PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET,
};

/// The environment of webhook match conditions. No cost limit at compile
/// time, as kube's: the objects are untyped, so any estimate is the worst
/// case of a 3 MiB request; each evaluation is bounded by the values at
/// hand instead (kube's runtime limit, `operation cancelled: actual cost
/// limit exceeded`).
pub fn webhook_env() -> Env {
    request_env().variable("authorizer", DeclType::any())
}

fn request_env() -> Env {
    Env::new(u64::MAX)
        .variable("object", DeclType::any())
        .variable("oldObject", DeclType::any())
        .variable("request", DeclType::any())
}

/// The environment of an admission policy's expressions.
pub fn policy_env() -> Env {
    policy_message_env().variable("authorizer", DeclType::any())
}

/// The environment of a validation's `messageExpression`: kube offers it
/// no `authorizer`.
pub fn policy_message_env() -> Env {
    request_env()
        .variable("params", DeclType::any())
        .variable("namespaceObject", DeclType::any())
        .variable("variables", DeclType::any())
}

/// Compiles one of a policy's expressions, the error in kube's words.
pub fn compile(env: &Env, source: &str) -> Result<Expression, String> {
    env.compile(source).map_err(|e| format!("compilation failed: {e}"))
}

/// Compiles a policy's `variables` in order, as kube's composited compiler
/// does: each sees only those declared before it, so one reading a later
/// (or undeclared) one does not compile (`undefined field 'b'`, reported
/// where an expression reads it: `composited variable "a" fails to compile:
/// ...`). The policy's other expressions are compiled where all are
/// declared ([`declaring`]), so `variables.nosuch` does not compile there
/// either.
pub fn compile_variables<'a>(env: &Env, variables: impl IntoIterator<Item = (&'a str, &'a str)>) -> lazy::Named {
    let mut declared: Vec<(String, Result<Expression, String>)> = Vec::new();
    for (name, source) in variables {
        let compiled = compile(&declaring(env, &declared), source);
        declared.push((name.to_string(), compiled));
    }
    std::sync::Arc::new(declared)
}

/// `env` where `variables` has the fields `declared` names (any value each).
pub fn declaring(env: &Env, declared: &[(String, Result<Expression, String>)]) -> Env {
    let fields = declared.iter().map(|(name, _)| (name.as_str(), DeclType::any()));
    env.clone().variable("variables", DeclType::object(fields))
}

/// The values of one evaluation.
pub struct Inputs<'a> {
    pub object: &'a Value,
    pub old_object: &'a Value,
    pub request: &'a Value,
    pub params: &'a Value,
    pub namespace_object: &'a Value,
    /// The policy's `variables` ([`Inputs::variables_of`]), or
    /// [`NO_VARIABLES`].
    pub variables: &'a cel::Value,
    /// The `authorizer` of the write's session.
    pub authorizer: &'a cel::Value,
}

/// What `variables` is where there are none (webhook match conditions).
pub static NO_VARIABLES: cel::Value = cel::Value::Null;

/// The declared type every admission variable has.
pub static ANY: std::sync::LazyLock<DeclType> = std::sync::LazyLock::new(DeclType::any);

impl<'a> Inputs<'a> {
    pub fn activation(&self) -> Activation<'a> {
        Activation::new()
            .json("object", self.object, &ANY)
            .json("oldObject", self.old_object, &ANY)
            .json("request", self.request, &ANY)
            .json("params", self.params, &ANY)
            .json("namespaceObject", self.namespace_object, &ANY)
            .cel("variables", self.variables.clone(), DeclType::Null)
            .cel("authorizer", self.authorizer.clone(), DeclType::Null)
    }

    /// The `variables` of a policy's expressions for these inputs:
    /// evaluated each on first use and kept as CEL values ([`lazy`]), for
    /// the evaluations that share these inputs.
    pub fn variables_of(&self, named: &lazy::Named) -> cel::Value {
        let json = [
            ("object", self.object),
            ("oldObject", self.old_object),
            ("request", self.request),
            ("params", self.params),
            ("namespaceObject", self.namespace_object),
        ];
        lazy::variables(named.clone(), &json, &[("authorizer", self.authorizer.clone())])
    }
}

/// kube's `RuntimeCELCostBudget`: what the expressions of one of its
/// `ForInput` calls may cost together (a policy's validations with their
/// messages, its audit annotations, one mutation), with the variables they
/// read.
pub const BUDGET: u64 = RUNTIME_CEL_COST_BUDGET as u64;

/// What became of one expression that gave no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// It did not compile.
    Compile,
    /// It would cost more than kube's per-call limit.
    CostLimit,
    /// It failed.
    Invalid,
}

/// An expression that gave no value, in kube's words.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

/// The expressions of one budget spent it: kube's
/// [`crate::apimachinery::cel::OUT_OF_BUDGET`], and nothing more is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfBudget;

/// Evaluates one expression as kube's `Evaluate` does: what the variables
/// it made evaluate cost, then what it cost itself, come out of
/// `remaining` (failed or not), or the budget is spent. `inputs.variables`
/// must be this budget's own ([`Inputs::variables_of`]).
pub fn evaluate_within(
    compiled: &Result<Expression, String>,
    inputs: &Inputs<'_>,
    remaining: &mut u64,
) -> Result<Result<cel::Value, Failure>, OutOfBudget> {
    let expression = match compiled {
        Ok(expression) => expression,
        Err(e) => return Ok(Err(Failure { kind: FailureKind::Compile, message: format!("compilation error: {e}") })),
    };
    let outcome = expression.evaluate(&inputs.activation(), PER_CALL_LIMIT);
    for cost in [lazy::take_cost(inputs.variables), lazy::outcome_cost(&outcome, PER_CALL_LIMIT)] {
        *remaining = remaining.checked_sub(cost).ok_or(OutOfBudget)?;
    }
    Ok(outcome.map(|out| out.value).map_err(|e| Failure {
        kind: match e {
            EvalError::CostLimitExceeded { .. } => FailureKind::CostLimit,
            EvalError::Failed { .. } => FailureKind::Invalid,
        },
        message: format!("expression '{}' resulted in error: {e}", expression.source()),
    }))
}
