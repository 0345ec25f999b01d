//! CEL expressions with kube's cost limits: compile once with declared
//! variables, evaluate many times against JSON values, never for longer than
//! a bound. The one home of CEL in this crate: schema validation rules
//! ([`crate::apimachinery::schema::validations`]) use it, and so can
//! admission's `matchConditions` and ValidatingAdmissionPolicy (variables
//! `object`, `oldObject`, `request`, `params`, `namespaceObject`, ...).
//!
//! Evaluation is the `cel` crate's interpreter with the Kubernetes function
//! libraries of `kube-cel` (strings, lists, sets, regex, URLs, IPs and CIDRs,
//! quantities, semver, format, math, encoders) and optional values, as
//! kube's environment has them; `string(double)` prints as cel-go does,
//! `matches` compiles each pattern once, and functions beyond kube's
//! libraries (the `authorizer` of admission, [`authz`]) are registered with
//! the others (`FUNCTIONS`). [`Env`] shows the use.
//!
//! **Cost.** The `cel` crate neither counts cost nor can be interrupted, so
//! [`cost`] bounds it: [`Env::compile`] refuses an expression whose bound
//! from the declared types (schema `maxItems`/`maxLength`/`maxProperties`,
//! else what a 3 MiB request can hold) exceeds the environment's limit
//! (kube's static estimate; an environment whose types say little may take
//! `u64::MAX`), and [`Expression::evaluate`] does not run one whose bound
//! from the values at hand exceeds the per-call limit (kube's runtime
//! `PerCallLimit`: `operation cancelled: actual cost limit exceeded`). The
//! bound is coarser than kube's estimate: an expression near a limit may be
//! refused here that kube would run. A call of fixed cost that may not run
//! (an authorization `check()`, 350,000 units) is left out of the bound and
//! charged as it runs ([`charge`]), as kube's runtime cost counts it.
//!
//! **Differences from kube's CEL.** The `cel` crate is dynamically typed:
//! compiling checks syntax, that every variable is declared and every field
//! of a declared object exists, not the types of operands; a type error shows
//! at evaluation (`no such overload`). `duration` strings are not converted.
//! Declared fields go by kube's escaped names ([`escape`]). Optional field
//! selection (`x.?f`) is unreliable in the `cel` crate 0.13 (`no such key`
//! on a map without `f`, an optional of none on an optional, where cel-go
//! gives `optional.none()` for both); `hasValue()`, `value()`, `orValue()`
//! and `optional.of/none` work, which is what an `optionalOldSelf` rule
//! needs (`!oldSelf.hasValue() || ...`).

pub mod authz;
mod cost;
pub mod decl;
pub mod escape;
mod issues;
pub mod lazy;
pub mod mutation;
mod value;

use std::collections::BTreeSet;
use std::fmt;

pub use decl::DeclType;
pub use kube_cel::cel;
use kube_cel::KubeCelExt;
use serde_json::Value as Json;
pub use value::go_type_name;

use cel::common::ast::Expr;
use cel::{Context, ExecutionError, IdedExpr};

/// kube's `PerCallLimit`: the most one evaluation may cost (~0.1 s of CPU).
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// kube's `RuntimeCELCostBudget`: the most all the rules of one object (or
/// one policy binding) may cost together (~1 s).
pub const RUNTIME_CEL_COST_BUDGET: i64 = 10_000_000;
/// kube's error when the expressions of one object, policy or mutation
/// have spent [`RUNTIME_CEL_COST_BUDGET`] between them.
pub const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";
/// apiextensions' `StaticEstimatedCostLimit`: the most one rule's estimate
/// may be, times the number of times the schema lets it run.
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// apiextensions' `StaticEstimatedCRDCostLimit`: all rules of a schema together.
pub const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;
/// kube's `MaxRequestSizeBytes`, what unbounded sizes are estimated from.
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;
/// kube's `MaxEvaluatedMessageExpressionSizeBytes`.
pub const MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES: usize = 5 * 1024;

/// Nesting the parser accepts (cel-go's default recursion limit is 250;
/// the `cel` crate's parser recurses on the native stack, so less).
const MAX_RECURSION_DEPTH: u16 = 96;

/// The variables expressions may name, and the estimated-cost limit they must
/// keep to.
///
/// ```ignore
/// let env = Env::new(STATIC_ESTIMATED_COST_LIMIT)
///     .variable("object", DeclType::any())
///     .variable("params", DeclType::from_schema(&params_schema));
/// let expr = env.compile("object.spec.replicas <= params.max")?;   // once
/// let out = expr.evaluate(
///     &Activation::new().json("object", &obj, &DeclType::any()).json("params", &p, &params_type),
///     PER_CALL_LIMIT,
/// )?;                                                                // per request
/// assert_eq!(out.value, cel::Value::Bool(true));
/// ```
#[derive(Debug, Clone)]
pub struct Env {
    variables: Vec<(String, DeclType)>,
    cost_limit: u64,
    /// Whether expressions may construct `Object{...}` and `JSONPatch{...}`
    /// ([`mutation`]: a MutatingAdmissionPolicy's mutations).
    mutation_types: bool,
}

/// An expression that did not compile, worded as cel-go's issues are.
#[derive(Debug, Clone, PartialEq)]
pub enum CompileError {
    /// Syntax: `ERROR: <input>:1:6: Syntax error: ...`.
    Syntax(String),
    /// A variable or field the declarations do not have.
    Undeclared(String),
    /// The estimated cost exceeds the environment's limit.
    CostExceeded { estimated: u64, limit: u64 },
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Syntax(s) | CompileError::Undeclared(s) => f.write_str(s),
            CompileError::CostExceeded { estimated, limit } => {
                write!(f, "{}", cost_error_message("estimated rule cost", *estimated, *limit))
            }
        }
    }
}

impl std::error::Error for CompileError {}

/// kube's `getCostErrorMessage`.
pub fn cost_error_message(cost_name: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{cost_name} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

impl Env {
    /// An environment with no variables whose expressions may be estimated
    /// to cost at most `cost_limit`.
    pub fn new(cost_limit: u64) -> Self {
        Self { variables: Vec::new(), cost_limit, mutation_types: false }
    }

    /// Offers the types a MutatingAdmissionPolicy's expressions construct.
    pub fn with_mutation_types(mut self) -> Self {
        self.mutation_types = true;
        self
    }

    /// Declares a variable (a later declaration of the same name wins).
    pub fn variable(mut self, name: impl Into<String>, decl: DeclType) -> Self {
        self.variables.push((name.into(), decl));
        self
    }

    /// Parses `source`, checks the names it uses against the declarations
    /// and bounds its cost with the declared types.
    pub fn compile(&self, source: &str) -> Result<Expression, CompileError> {
        let ast = cel::parser::Parser::new()
            .enable_optional_syntax(true)
            .max_recursion_depth(MAX_RECURSION_DEPTH)
            .parse(source)
            .map_err(|e| CompileError::Syntax(issues::syntax(source, &e)))?;
        let mut scope = cost::Scope {
            vars: self.variables.iter().map(|(n, t)| (n.as_str(), t.clone(), true)).collect(),
            // What a request can hold, kube's bound for what it declares unbounded.
            input_bytes: MAX_REQUEST_SIZE_BYTES as f64,
            strict: true,
        };
        let estimate = cost::estimate(&ast, &mut scope).map_err(|u| {
            let place = |s: &cost::Selected| issues::selection(source, &s.path, &s.field, s.test);
            CompileError::Undeclared(match u {
                cost::Undeclared::Variable(v) => issues::display(
                    source,
                    issues::variable(source, &v),
                    &format!("undeclared reference to '{v}' (in container '')"),
                ),
                cost::Undeclared::Field(s) => {
                    issues::display(source, place(&s), &format!("undefined field '{}'", s.field))
                }
                cost::Undeclared::Selection(t, s) => {
                    issues::display(source, place(&s), &format!("type '{t}' does not support field selection"))
                }
            })
        })?;
        let max_cost = to_u64(estimate.cost);
        if max_cost > self.cost_limit {
            return Err(CompileError::CostExceeded { estimated: max_cost, limit: self.cost_limit });
        }
        let mut uses = BTreeSet::new();
        names_used(&ast, &mut uses);
        let mut ast = ast;
        mutation::rewrite(&mut ast, self.mutation_types).map_err(CompileError::Undeclared)?;
        authz::rewrite(&mut ast);
        lazy::rewrite(&mut ast);
        Ok(Expression { source: source.to_string(), ast, max_cost, uses })
    }
}

fn to_u64(cost: f64) -> u64 {
    if cost.is_finite() && cost < u64::MAX as f64 {
        cost.ceil() as u64
    } else {
        u64::MAX
    }
}

/// Every identifier an expression reads (to tell, e.g., a transition rule by
/// its use of `oldSelf`).
fn names_used(e: &IdedExpr, out: &mut BTreeSet<String>) {
    match &e.expr {
        Expr::Ident(n) => {
            out.insert(n.clone());
        }
        Expr::Select(s) => names_used(&s.operand, out),
        Expr::Call(c) => {
            c.target.iter().for_each(|t| names_used(t, out));
            c.args.iter().for_each(|a| names_used(a, out));
        }
        Expr::List(l) => l.elements.iter().for_each(|x| names_used(x, out)),
        Expr::Map(m) => m.entries.iter().for_each(|x| entry_names(x, out)),
        Expr::Struct(s) => s.entries.iter().for_each(|x| entry_names(x, out)),
        Expr::Comprehension(c) => {
            for x in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                names_used(x, out);
            }
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// Calls `f` on each expression directly inside `e` (for the rewrites of
/// the AST after parsing, which recurse through it).
pub(super) fn for_each_child(e: &mut IdedExpr, f: fn(&mut IdedExpr)) {
    use cel::common::ast::EntryExpr;
    match &mut e.expr {
        Expr::Select(s) => f(&mut s.operand),
        Expr::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                f(t);
            }
            c.args.iter_mut().for_each(f);
        }
        Expr::List(l) => l.elements.iter_mut().for_each(f),
        Expr::Map(m) => m.entries.iter_mut().for_each(|entry| match &mut entry.expr {
            EntryExpr::MapEntry(me) => {
                f(&mut me.key);
                f(&mut me.value);
            }
            EntryExpr::StructField(sf) => f(&mut sf.value),
        }),
        Expr::Struct(s) => s.entries.iter_mut().for_each(|entry| match &mut entry.expr {
            EntryExpr::StructField(sf) => f(&mut sf.value),
            EntryExpr::MapEntry(me) => {
                f(&mut me.key);
                f(&mut me.value);
            }
        }),
        Expr::Comprehension(c) => {
            for x in [&mut c.iter_range, &mut c.accu_init, &mut c.loop_cond, &mut c.loop_step, &mut c.result] {
                f(x);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entry_names(e: &cel::common::ast::IdedEntryExpr, out: &mut BTreeSet<String>) {
    match &e.expr {
        cel::common::ast::EntryExpr::MapEntry(m) => {
            names_used(&m.key, out);
            names_used(&m.value, out);
        }
        cel::common::ast::EntryExpr::StructField(f) => names_used(&f.value, out),
    }
}

/// A compiled expression: share it (it is immutable), evaluate it often.
#[derive(Debug)]
pub struct Expression {
    source: String,
    ast: IdedExpr,
    max_cost: u64,
    uses: BTreeSet<String>,
}

/// Values for an evaluation's variables.
#[derive(Default)]
pub struct Activation<'a> {
    vars: Vec<(&'a str, Binding<'a>)>,
}

enum Binding<'a> {
    Json(&'a Json, &'a DeclType),
    OptionalJson(Option<&'a Json>, &'a DeclType),
    /// A value already in CEL's terms, with what its sizes are at most.
    Cel(cel::Value, DeclType),
}

impl<'a> Activation<'a> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds `name` to a JSON value, converted by its declared type (a JSON
    /// integer is a `double` where the schema says `number`).
    pub fn json(mut self, name: &'a str, value: &'a Json, decl: &'a DeclType) -> Self {
        self.vars.push((name, Binding::Json(value, decl)));
        self
    }

    /// Binds `name` to an optional: `optional.of(value)` or `optional.none()`
    /// (an `optionalOldSelf` rule's `oldSelf`).
    pub fn optional_json(mut self, name: &'a str, value: Option<&'a Json>, decl: &'a DeclType) -> Self {
        self.vars.push((name, Binding::OptionalJson(value, decl)));
        self
    }

    /// Binds `name` to a CEL value, e.g. what another expression evaluated
    /// to (a policy's `variables`); `shape` must bound its sizes (take it
    /// from the JSON it came from with [`DeclType::of_value`], or use the
    /// [`Evaluated::value`] of an expression whose cost was bounded).
    pub fn cel(mut self, name: &'a str, value: cel::Value, shape: DeclType) -> Self {
        self.vars.push((name, Binding::Cel(value, shape)));
        self
    }
}

/// What an evaluation gave, and the cost charged for it (its bound).
#[derive(Debug)]
pub struct Evaluated {
    pub value: cel::Value,
    pub cost: u64,
}

/// An evaluation that failed, in cel-go's words.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalError {
    /// The bound from the values exceeds the per-call limit: not run.
    CostLimitExceeded { bound: u64 },
    /// The expression failed (`no such key: x`, `no such overload`, ...).
    Failed { message: String, cost: u64 },
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::CostLimitExceeded { .. } => f.write_str("operation cancelled: actual cost limit exceeded"),
            EvalError::Failed { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for EvalError {}

thread_local! {
    /// The functions, registered once per thread (a few hundred of them;
    /// the `cel` crate's context is not `Sync`).
    static FUNCTIONS: Context<'static> = {
        let mut ctx = Context::default();
        ctx.register_all();
        ctx.add_function("string", go_string);
        ctx.add_function("matches", cached_matches);
        ctx.add_function(mutation::CONSTRUCT, mutation::construct);
        ctx.add_function(lazy::LAZY, |ftx: &cel::FunctionContext, v: cel::Value, name: std::sync::Arc<String>| {
            lazy::read(ftx, &v, name, false)
        });
        ctx.add_function(lazy::LAZY_HAS, |ftx: &cel::FunctionContext, v: cel::Value, name: std::sync::Arc<String>| {
            lazy::read(ftx, &v, name, true)
        });
        authz::register(&mut ctx);
        ctx
    };

    /// What the evaluation running on this thread may still spend on the
    /// calls charged as they run ([`charge`]), and what they spent.
    static RUNTIME: std::cell::Cell<Runtime> = const { std::cell::Cell::new(Runtime::UNLIMITED) };

    /// Compiled regular expressions of `matches`, by pattern: rules use a
    /// few constant ones (cel-go compiles those once with the program).
    static PATTERNS: std::cell::RefCell<std::collections::HashMap<String, regex::Regex>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// The runtime cost of one evaluation beyond its bound: what calls whose
/// cost is fixed but which may not run (authorization checks) spend when
/// they do; and whether the evaluation met a check not answered yet.
#[derive(Debug, Clone, Copy)]
struct Runtime {
    remaining: u64,
    charged: u64,
    exceeded: bool,
    /// How many evaluations are running on this thread, this one included
    /// (0 between evaluations): a variable's is nested in its reader's.
    depth: u32,
    /// The evaluation (or one it is nested in, or one nested in it) met an
    /// unanswered check ([`authz`]): it will be discarded, and no other
    /// check it meets is asked for. cel-go would have had the answer and
    /// maybe not gone on (`||`, `&&`, `exists` short-circuit): a check
    /// past the first unanswered one waits for the next evaluation, which
    /// meets it only if that answer does not decide.
    pending: bool,
}

impl Runtime {
    const UNLIMITED: Runtime = Runtime { remaining: u64::MAX, charged: 0, exceeded: false, depth: 0, pending: false };
}

/// Notes that the evaluation running on this thread met an unanswered
/// check; whether one was met already (the check is then not to be asked).
pub(super) fn meet_pending() -> bool {
    let mut runtime = RUNTIME.get();
    let met = runtime.pending;
    runtime.pending = true;
    RUNTIME.set(runtime);
    met
}

/// Charges `cost` to the evaluation running on this thread: an error (the
/// evaluation then fails with kube's `actual cost limit exceeded`) once
/// its per-call limit is spent, as kube's runtime cost tracker cancels it.
pub(super) fn charge(cost: f64) -> Result<(), ExecutionError> {
    let cost = to_u64(cost);
    let mut runtime = RUNTIME.get();
    if cost > runtime.remaining {
        runtime.exceeded = true;
        RUNTIME.set(runtime);
        return Err(ExecutionError::function_error("check", "operation cancelled: actual cost limit exceeded"));
    }
    runtime.remaining -= cost;
    runtime.charged = runtime.charged.saturating_add(cost);
    RUNTIME.set(runtime);
    Ok(())
}

/// Patterns kept per thread; past it the cache starts over, so patterns
/// computed from input cannot grow it. Long patterns are not kept: those
/// are rarely a rule's constant, and their compiled form can be large.
const MAX_CACHED_PATTERNS: usize = 32;
const MAX_CACHED_PATTERN_BYTES: usize = 512;

/// `s.matches(re)` (RE2 syntax; Rust's `regex` has the same guarantees of
/// linear time), compiling each pattern once per thread.
fn cached_matches(
    ftx: &cel::FunctionContext,
    this: cel::extractors::This<std::sync::Arc<String>>,
    pattern: std::sync::Arc<String>,
) -> Result<bool, ExecutionError> {
    PATTERNS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(re) = cache.get(pattern.as_str()) {
            return Ok(re.is_match(&this.0));
        }
        let re = regex::Regex::new(&pattern).map_err(|e| ftx.error(format!("'{pattern}' not a valid regex:\n{e}")))?;
        let matched = re.is_match(&this.0);
        if pattern.len() <= MAX_CACHED_PATTERN_BYTES {
            if cache.len() >= MAX_CACHED_PATTERNS {
                cache.clear();
            }
            cache.insert(pattern.to_string(), re);
        }
        Ok(matched)
    })
}

/// `string(x)` as cel-go converts: a double as Go's `%g` (`41`, `40.5`,
/// `1e+06`), where the `cel` crate writes Rust's `1000000`; a bool as
/// `true`/`false`, which the crate refuses. The argument is
/// taken with `Arguments`, which passes on its error (`no such key: x`):
/// the crate's `This` turns any into `Missing argument or target`.
fn go_string(ftx: &cel::FunctionContext, args: cel::extractors::Arguments) -> Result<cel::Value, ExecutionError> {
    let value = match (&ftx.this, args.0.first()) {
        (Some(this), _) => this.clone(),
        (None, Some(arg)) => arg.clone(),
        (None, None) => return Err(ExecutionError::MissingArgumentOrTarget),
    };
    match value {
        cel::Value::Float(f) => Ok(cel::Value::String(std::sync::Arc::new(crate::apimachinery::gofmt::go_float(f)))),
        // cel-go converts a bool; the crate does not.
        cel::Value::Bool(b) => Ok(cel::Value::String(std::sync::Arc::new(b.to_string()))),
        other => cel::functions::string(ftx, cel::extractors::This(other)),
    }
}

impl Expression {
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The cost bound from the declared types.
    pub fn max_cost(&self) -> u64 {
        self.max_cost
    }

    /// Whether the expression reads the variable `name`.
    pub fn uses(&self, name: &str) -> bool {
        self.uses.contains(name)
    }

    /// The cost bound for these values.
    pub fn cost_bound(&self, vars: &Activation<'_>) -> u64 {
        let mut input_bytes = 0.0;
        let shapes: Vec<(&str, DeclType, bool)> = vars
            .vars
            .iter()
            .map(|(n, b)| {
                let shape = match b {
                    Binding::Json(v, _) | Binding::OptionalJson(Some(v), _) => {
                        input_bytes += decl::json_len(v) as f64;
                        DeclType::of_value(v)
                    }
                    Binding::OptionalJson(None, _) => DeclType::Null,
                    Binding::Cel(_, shape) => {
                        input_bytes += shape.size();
                        shape.clone()
                    }
                };
                (*n, shape, true)
            })
            .collect();
        let mut scope = cost::Scope { vars: shapes, input_bytes, strict: false };
        cost::estimate(&self.ast, &mut scope).map_or(u64::MAX, |e| to_u64(e.cost))
    }

    /// Evaluates the expression, unless its cost bound for these values
    /// exceeds `per_call_limit`.
    pub fn evaluate(&self, vars: &Activation<'_>, per_call_limit: u64) -> Result<Evaluated, EvalError> {
        let bound = self.cost_bound(vars);
        if bound > per_call_limit {
            return Err(EvalError::CostLimitExceeded { bound });
        }
        let failed = |message: String| EvalError::Failed { message, cost: bound };
        // This evaluation's own runtime charges; an evaluation it makes (a
        // lazily evaluated variable) has its own, and this one's resume after.
        let outer = RUNTIME.get();
        RUNTIME.set(Runtime {
            remaining: per_call_limit - bound,
            depth: outer.depth.saturating_add(1),
            // A variable read after its reader met an unanswered check asks none.
            pending: outer.depth > 0 && outer.pending,
            ..Runtime::UNLIMITED
        });
        let outcome = FUNCTIONS.with(|functions| {
            let mut ctx = functions.new_inner_scope();
            for (name, binding) in &vars.vars {
                let v = match binding {
                    Binding::Json(v, decl) => value::to_cel(v, decl),
                    Binding::OptionalJson(v, decl) => value::optional(v.map(|v| value::to_cel(v, decl))),
                    Binding::Cel(v, _) => v.clone(),
                };
                // Only a `Value::Function` fails to become a variable, and
                // `to_cel` never makes one.
                ctx.add_variable(*name, v).map_err(|e| failed(e.to_string()))?;
            }
            // The interpreter is a dependency's: should it panic on some
            // input, this evaluation fails, not the request's task.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ctx.resolve(&self.ast)))
                .map_err(|_| failed("internal error: the CEL interpreter panicked".into()))?
                .map_err(|e| failed(execution_error(&e)))
        });
        let runtime = RUNTIME.replace(outer);
        if outer.depth > 0 && runtime.pending {
            // The reader of a variable that met one asks no more either.
            meet_pending();
        }
        let cost = bound.saturating_add(runtime.charged);
        if runtime.exceeded {
            return Err(EvalError::CostLimitExceeded { bound: cost.max(per_call_limit.saturating_add(1)) });
        }
        Ok(Evaluated { value: outcome?, cost })
    }
}

/// The `cel` crate's errors in cel-go's words where they mean the same.
fn execution_error(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::NoSuchOverload
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::UnsupportedUnaryOperator(..)
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::UnsupportedTargetType { .. }
        | ExecutionError::NotSupportedAsMethod { .. } => "no such overload".into(),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(..) => "integer overflow".into(),
        ExecutionError::IndexOutOfBounds(i) => format!("index out of bounds: {}", value::display(i)),
        ExecutionError::UndeclaredReference(n) => format!("no such attribute(s): {n}"),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
