//! The `authorizer` of admission expressions (k8s.io/apiserver's CEL authz
//! library): `authorizer.group('apps').resource('deployments')
//! .subresource('scale').namespace('x').name('y').check('update')`,
//! `authorizer.path('/healthz').check('get')`,
//! `authorizer.serviceAccount('ns', 'sa')...`, `authorizer.requestResource`
//! (the resource of the request being admitted), and the decision's
//! `allowed()`, `reason()`, `errored()` and `error()`.
//!
//! The `cel` crate evaluates synchronously and an authorization is a
//! SubjectAccessReview, so a check is not answered while an expression runs:
//! it is looked up in the evaluation's [`Checks`]; one not there yet is
//! recorded as pending and fails the evaluation (with [`PENDING`]). The
//! caller answers the pending checks (asynchronously, through its
//! authorizer) and evaluates again, until nothing is pending. Expressions
//! have no side effects, so an evaluation that ran into an unanswered check
//! is simply discarded; one that succeeded while a check was pending (its
//! error absorbed by `||`, `&&` or a comprehension, as cel-go absorbs it)
//! stands, since the check's answer could not have changed it. Only the
//! first unanswered check an evaluation meets is asked for: cel-go, which
//! has each answer before it goes on, may not go on (`a || b` with `a`
//! allowed never asks `b`), so a later one waits for the evaluation that
//! meets it with the earlier ones answered, and no review is asked that
//! kube would not ask.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cel::common::ast::{CallExpr, Expr};
use cel::extractors::This;
use cel::{ExecutionError, FunctionContext, IdedExpr, Value};
use kube_cel::cel;

/// The method that asks: `<check>.check(verb)`.
pub(super) const CHECK: &str = "check";
/// kube's cost of one check (`authz` library: "set to allow for only two
/// authorization checks per expression" under the per-call limit).
pub(super) const CHECK_COST: f64 = 350_000.0;

/// The error of an evaluation that met a check not answered yet.
pub const PENDING: &str = "authorization check not answered yet";

/// Who a check is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    /// The user whose request is admitted.
    Requester,
    /// `authorizer.serviceAccount(namespace, name)`.
    ServiceAccount { namespace: String, name: String },
}

/// What a check asks about (a SubjectAccessReview's attributes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Target {
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// A non-resource check's path (`authorizer.path(...)`).
    pub path: String,
    pub resource_request: bool,
}

/// One check: who, what, and the verb.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Check {
    pub subject: Subject,
    pub target: Target,
    pub verb: String,
}

/// An answer (kube's `authorizer.Decision`, reason, error).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
    /// Empty when the check did not fail.
    pub error: String,
}

/// The checks of one admission evaluation: those answered, and those an
/// evaluation asked for that are not yet.
#[derive(Debug, Default)]
pub struct Checks {
    inner: Mutex<(HashMap<Check, Decision>, Vec<Check>)>,
}

impl Checks {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn answered(&self, check: &Check) -> Option<Decision> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).0.get(check).cloned()
    }

    /// Records `check` as asked for and not answered.
    fn ask(&self, check: Check) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if !inner.1.contains(&check) {
            inner.1.push(check);
        }
    }

    /// The checks asked for and not answered, taken.
    pub fn take_pending(&self) -> Vec<Check> {
        std::mem::take(&mut self.inner.lock().unwrap_or_else(|p| p.into_inner()).1)
    }

    pub fn answer(&self, check: Check, decision: Decision) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).0.insert(check, decision);
    }
}

/// The `authorizer` variable: for `subject`, with the request's resource.
pub fn authorizer(checks: Arc<Checks>, request_resource: Target) -> Value {
    Value::Opaque(Arc::new(Authz { checks, subject: Subject::Requester, request_resource }))
}

#[derive(Debug)]
struct Authz {
    checks: Arc<Checks>,
    subject: Subject,
    request_resource: Target,
}

/// A check being built: `group(...)`, `resource(...)`, `path(...)`.
#[derive(Debug)]
struct Builder {
    checks: Arc<Checks>,
    subject: Subject,
    target: Target,
}

#[derive(Debug, PartialEq, Eq)]
struct DecisionVal(Decision);

/// The opaque values are compared by identity: no expression has a reason
/// to compare them (cel-go's are not comparable either).
macro_rules! opaque {
    ($t:ty, $name:literal) => {
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                std::ptr::eq(self, other)
            }
        }
        impl Eq for $t {}
        impl cel::objects::Opaque for $t {
            fn runtime_type_name(&self) -> &str {
                $name
            }
        }
    };
}
opaque!(Authz, "kubernetes.authorization.Authorizer");
opaque!(Builder, "kubernetes.authorization.ResourceCheck");

impl cel::objects::Opaque for DecisionVal {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.Decision"
    }
}

fn downcast<T: 'static>(v: &Value) -> Option<&T> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<T>(),
        _ => None,
    }
}

fn builder(from: &Builder, change: impl FnOnce(&mut Target)) -> Value {
    let mut target = from.target.clone();
    change(&mut target);
    Value::Opaque(Arc::new(Builder { checks: from.checks.clone(), subject: from.subject.clone(), target }))
}

/// The functions, by name (each a method of one of the opaque types).
pub(super) fn register(ctx: &mut cel::Context<'static>) {
    ctx.add_function("group", |This(this): This<Value>, group: Arc<String>| -> Result<Value, ExecutionError> {
        let a = downcast::<Authz>(&this).ok_or(ExecutionError::NoSuchOverload)?;
        let target = Target { group: group.to_string(), resource_request: true, ..Default::default() };
        Ok(Value::Opaque(Arc::new(Builder { checks: a.checks.clone(), subject: a.subject.clone(), target })))
    });
    ctx.add_function("path", |This(this): This<Value>, path: Arc<String>| -> Result<Value, ExecutionError> {
        let a = downcast::<Authz>(&this).ok_or(ExecutionError::NoSuchOverload)?;
        let target = Target { path: path.to_string(), resource_request: false, ..Default::default() };
        Ok(Value::Opaque(Arc::new(Builder { checks: a.checks.clone(), subject: a.subject.clone(), target })))
    });
    ctx.add_function(
        "serviceAccount",
        |This(this): This<Value>, namespace: Arc<String>, name: Arc<String>| -> Result<Value, ExecutionError> {
            let a = downcast::<Authz>(&this).ok_or(ExecutionError::NoSuchOverload)?;
            let subject = Subject::ServiceAccount { namespace: namespace.to_string(), name: name.to_string() };
            Ok(Value::Opaque(Arc::new(Authz {
                checks: a.checks.clone(),
                subject,
                request_resource: a.request_resource.clone(),
            })))
        },
    );
    ctx.add_function(REQUEST_RESOURCE, |This(this): This<Value>| -> Result<Value, ExecutionError> {
        let a = downcast::<Authz>(&this).ok_or(ExecutionError::NoSuchOverload)?;
        let target = a.request_resource.clone();
        Ok(Value::Opaque(Arc::new(Builder { checks: a.checks.clone(), subject: a.subject.clone(), target })))
    });
    fn setter(ctx: &mut cel::Context<'static>, name: &'static str, set: fn(&mut Target, String)) {
        ctx.add_function(name, move |This(this): This<Value>, v: Arc<String>| -> Result<Value, ExecutionError> {
            let b = downcast::<Builder>(&this).filter(|b| b.target.resource_request);
            let b = b.ok_or(ExecutionError::NoSuchOverload)?;
            Ok(builder(b, |t| set(t, v.to_string())))
        });
    }
    setter(ctx, "resource", |t, v| t.resource = v);
    setter(ctx, "subresource", |t, v| t.subresource = v);
    setter(ctx, "namespace", |t, v| t.namespace = v);
    setter(ctx, "name", |t, v| t.name = v);
    ctx.add_function(
        CHECK,
        |ftx: &FunctionContext, This(this): This<Value>, verb: Arc<String>| -> Result<Value, ExecutionError> {
            let b = downcast::<Builder>(&this).ok_or(ExecutionError::NoSuchOverload)?;
            super::charge(CHECK_COST)?;
            let check = Check { subject: b.subject.clone(), target: b.target.clone(), verb: verb.to_string() };
            if let Some(decision) = b.checks.answered(&check) {
                return Ok(Value::Opaque(Arc::new(DecisionVal(decision))));
            }
            // Asked only if it is the first unanswered one this evaluation
            // meets: what it answers may decide whether cel-go would go on.
            if !super::meet_pending() {
                b.checks.ask(check);
            }
            Err(ftx.error(PENDING))
        },
    );
    fn decision(ctx: &mut cel::Context<'static>, name: &'static str, get: fn(&Decision) -> Value) {
        ctx.add_function(name, move |This(this): This<Value>| -> Result<Value, ExecutionError> {
            let d = downcast::<DecisionVal>(&this).ok_or(ExecutionError::NoSuchOverload)?;
            Ok(get(&d.0))
        });
    }
    decision(ctx, "allowed", |d| Value::Bool(d.allowed));
    decision(ctx, "reason", |d| Value::String(Arc::new(d.reason.clone())));
    decision(ctx, "errored", |d| Value::Bool(!d.error.is_empty()));
    decision(ctx, "error", |d| Value::String(Arc::new(d.error.clone())));
}

/// `authorizer.requestResource` is a field in cel-go; the `cel` crate
/// selects no field of an opaque value, so it is rewritten into a call.
const REQUEST_RESOURCE: &str = "requestResource";

/// Rewrites every `authorizer.requestResource` into a method call.
pub(super) fn rewrite(e: &mut IdedExpr) {
    if let Expr::Select(s) = &mut e.expr {
        if s.field == REQUEST_RESOURCE && !s.test && matches!(&s.operand.expr, Expr::Ident(n) if n == "authorizer") {
            let target = std::mem::replace(&mut *s.operand, IdedExpr { id: e.id, expr: Expr::Unspecified });
            e.expr = Expr::Call(CallExpr {
                func_name: REQUEST_RESOURCE.into(),
                target: Some(Box::new(target)),
                args: Vec::new(),
            });
            return;
        }
    }
    super::for_each_child(e, rewrite);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::cel::{Activation, DeclType, Env, PER_CALL_LIMIT};

    /// Evaluates `src` answering every pending check with `answer`, as an
    /// admission caller does; returns the value and the checks asked.
    fn eval(src: &str, answer: impl Fn(&Check) -> Decision) -> (Result<Value, String>, Vec<Check>) {
        let env = Env::new(u64::MAX).variable("authorizer", DeclType::any());
        let e = env.compile(src).unwrap();
        let checks = Checks::new();
        let request = Target {
            group: "example.com".into(),
            resource: "widgets".into(),
            namespace: "ns".into(),
            name: "dolly".into(),
            resource_request: true,
            ..Default::default()
        };
        let mut asked = Vec::new();
        for _ in 0..8 {
            let value = authorizer(checks.clone(), request.clone());
            // Past kube's limit for three checks: these tests are about what is asked.
            let out = e.evaluate(&Activation::new().cel("authorizer", value, DeclType::Null), 10 * PER_CALL_LIMIT);
            let pending = checks.take_pending();
            if pending.is_empty() {
                return (out.map(|o| o.value).map_err(|e| e.to_string()), asked);
            }
            for check in pending {
                checks.answer(check.clone(), answer(&check));
                asked.push(check);
            }
        }
        panic!("still pending after 8 rounds");
    }

    #[test]
    fn resource_checks_are_built_and_answered() {
        let (value, asked) = eval(
            "authorizer.group('').resource('pods').subresource('log').namespace('x').name('p').check('get').allowed()",
            |_| Decision { allowed: true, ..Default::default() },
        );
        assert_eq!(value, Ok(Value::Bool(true)));
        assert_eq!(
            asked,
            vec![Check {
                subject: Subject::Requester,
                target: Target {
                    resource: "pods".into(),
                    subresource: "log".into(),
                    namespace: "x".into(),
                    name: "p".into(),
                    resource_request: true,
                    ..Default::default()
                },
                verb: "get".into(),
            }]
        );
    }

    #[test]
    fn the_request_resource_a_path_and_a_service_account_are_checked() {
        let (value, asked) = eval(
            "authorizer.requestResource.check('create').reason() + ' ' + \
             string(authorizer.path('/healthz').check('get').errored()) + ' ' + \
             authorizer.serviceAccount('kube-system', 'sa').group('apps').resource('deployments').check('list').error()",
            |c| match &c.subject {
                Subject::ServiceAccount { .. } => Decision { error: "review failed".into(), ..Default::default() },
                Subject::Requester => Decision { allowed: true, reason: "by RBAC".into(), ..Default::default() },
            },
        );
        assert_eq!(value, Ok(Value::String(Arc::new("by RBAC false review failed".into()))));
        assert_eq!(asked.len(), 3);
        assert_eq!(asked[0].target.resource, "widgets");
        assert_eq!(asked[0].target.name, "dolly");
        assert_eq!(asked[1].target, Target { path: "/healthz".into(), ..Default::default() });
        assert_eq!(asked[2].subject, Subject::ServiceAccount { namespace: "kube-system".into(), name: "sa".into() });
    }

    #[test]
    fn checks_are_answered_once_and_short_circuits_hold() {
        let (value, asked) = eval(
            "authorizer.group('').resource('pods').check('get').allowed() || \
             authorizer.group('').resource('pods').check('get').allowed()",
            |_| Decision::default(),
        );
        assert_eq!(value, Ok(Value::Bool(false)));
        assert_eq!(asked.len(), 1, "the same check is asked once");
        let (value, asked) =
            eval("true || authorizer.group('').resource('pods').check('get').allowed()", |_| Decision::default());
        assert_eq!((value, asked.len()), (Ok(Value::Bool(true)), 0));
    }

    #[test]
    fn checks_cost_what_kube_charges_for_them() {
        let env = Env::new(u64::MAX).variable("authorizer", DeclType::any());
        let two = "authorizer.path('/a').check('get').allowed() && authorizer.path('/b').check('get').allowed()";
        let allowed = |_: &Check| Decision { allowed: true, ..Default::default() };
        // Two run within the limit.
        let (value, asked) = eval(two, allowed);
        assert_eq!((value, asked.len()), (Ok(Value::Bool(true)), 2));
        let three = format!("{two} && authorizer.path('/c').check('get').allowed()");
        let e = env.compile(&three).unwrap();
        let checks = Checks::new();
        let value = || authorizer(checks.clone(), Target::default());
        let mut out = e.evaluate(&Activation::new().cel("authorizer", value(), DeclType::Null), PER_CALL_LIMIT);
        for _ in 0..3 {
            for check in checks.take_pending() {
                checks.answer(check, Decision { allowed: true, ..Default::default() });
            }
            out = e.evaluate(&Activation::new().cel("authorizer", value(), DeclType::Null), PER_CALL_LIMIT);
        }
        assert_eq!(out.unwrap_err().to_string(), "operation cancelled: actual cost limit exceeded");
        // Only the checks that run are charged: once /a is answered allowed,
        // the other two do not run, and three written are within the limit.
        let either = "authorizer.path('/a').check('get').allowed() || \
                      authorizer.path('/b').check('get').allowed() || authorizer.path('/c').check('get').allowed()";
        let e = env.compile(either).unwrap();
        let checks = Checks::new();
        let mut out = None;
        for _ in 0..4 {
            let value = authorizer(checks.clone(), Target::default());
            out = Some(e.evaluate(&Activation::new().cel("authorizer", value, DeclType::Null), PER_CALL_LIMIT));
            let pending = checks.take_pending();
            if pending.is_empty() {
                break;
            }
            for check in pending {
                checks.answer(check, Decision { allowed: true, ..Default::default() });
            }
        }
        let out = out.and_then(Result::ok).map(|o| (o.value, o.cost));
        assert!(
            matches!(out, Some((Value::Bool(true), cost)) if cost >= CHECK_COST as u64 && cost < 2 * CHECK_COST as u64),
            "{out:?}"
        );
    }

    #[test]
    fn no_check_is_asked_where_an_answer_short_circuits() {
        // As cel-go evaluates them, with each answer in hand before going on.
        let allowed = |_: &Check| Decision { allowed: true, ..Default::default() };
        let denied = |_: &Check| Decision::default();
        let (a, b) = ("authorizer.path('/a').check('get').allowed()", "authorizer.path('/b').check('get').allowed()");
        let (value, asked) = eval(&format!("{a} || {b}"), allowed);
        assert_eq!((value, asked.len()), (Ok(Value::Bool(true)), 1), "`||` after an allowed check");
        let (value, asked) = eval(&format!("{a} && {b}"), denied);
        assert_eq!((value, asked.len()), (Ok(Value::Bool(false)), 1), "`&&` after a denied check");
        let (value, asked) = eval(&format!("{a} || {b}"), denied);
        assert_eq!((value, asked.len()), (Ok(Value::Bool(false)), 2), "both where the first does not decide");
        let (value, asked) = eval("['/a', '/b', '/c'].exists(p, authorizer.path(p).check('get').allowed())", allowed);
        assert_eq!((value, asked.len()), (Ok(Value::Bool(true)), 1), "`exists` stops at the first allowed");
        // A variable read past an unanswered check asks nothing either.
        let env = Env::new(u64::MAX).variable("authorizer", DeclType::any()).variable("variables", DeclType::any());
        let named: super::super::lazy::Named =
            std::sync::Arc::new(vec![("b".to_string(), Ok(env.compile(b).unwrap()))]);
        let e = env.compile(&format!("{a} || variables.b")).unwrap();
        let checks = Checks::new();
        let mut asked = 0;
        let out = loop {
            let value = authorizer(checks.clone(), Target::default());
            let variables = super::super::lazy::variables(named.clone(), &[], &[("authorizer", value.clone())]);
            let activation =
                Activation::new().cel("authorizer", value, DeclType::Null).cel("variables", variables, DeclType::Null);
            let out = e.evaluate(&activation, PER_CALL_LIMIT);
            let pending = checks.take_pending();
            if pending.is_empty() {
                break out;
            }
            for check in pending {
                asked += 1;
                checks.answer(check, Decision { allowed: true, ..Default::default() });
            }
        };
        assert_eq!((out.map(|o| o.value), asked), (Ok(Value::Bool(true)), 1));
    }

    #[test]
    fn a_path_check_has_no_resource() {
        let (value, _) = eval("authorizer.path('/x').resource('pods').check('get').allowed()", |_| Decision::default());
        assert_eq!(value, Err("no such overload".into()));
    }
}
