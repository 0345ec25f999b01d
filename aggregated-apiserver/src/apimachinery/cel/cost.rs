//! An upper bound of what evaluating an expression costs, in cel-go's cost
//! units (about one per node visited, 0.1 per byte a string function
//! traverses), from the declared types of its variables.
//!
//! The `cel` crate counts nothing while it evaluates and cannot be
//! interrupted, so this bound is what keeps an expression from stalling the
//! server: it is taken once from the declared types when the expression is
//! compiled (kube's static estimate; too high and the expression is
//! refused), and again from the very values before each evaluation (in place
//! of kube's runtime count; too high and it does not run). The bound is sound
//! for the ways an evaluation can take long:
//!
//! * every comprehension (`all`, `exists`, `exists_one`, `map`, `filter`)
//!   runs its body at most once per item of its range, and the range's size
//!   is bounded by its type; nested comprehensions multiply;
//! * what a comprehension accumulates grows by at most what one step adds,
//!   per item (`map` and `filter` copy the list on each step here, which is
//!   counted: the step costs as much as the list it copies);
//! * a function or operator costs at most the product of its arguments'
//!   sizes (string search, regular expressions, replacement, joins,
//!   set operations are all at most that), and returns at most that much.
//!
//! It is coarser than kube's estimator, never lower than the work done.

use cel::common::ast::{operators, EntryExpr, Expr, LiteralValue};
use cel::IdedExpr;
use kube_cel::cel;

use super::decl::{merge, DeclType};

/// The cost bound and the result type of an expression.
pub(super) struct Estimate {
    pub cost: f64,
    pub ty: DeclType,
    /// Part of a variable's value (whose total size the scope knows).
    pub input: bool,
}

/// What an expression names that its variables do not declare.
#[derive(Debug)]
pub(super) enum Undeclared {
    Variable(String),
    Field(Selected),
    /// A field selected from a value of this type, which has none.
    Selection(&'static str, Selected),
}

/// A field selection, told enough to find it in the source again.
#[derive(Debug)]
pub(super) struct Selected {
    pub field: String,
    /// What it is selected from, where that is a plain path
    /// (`self.spec`: `["self", "spec"]`); empty otherwise.
    pub path: Vec<String>,
    /// Inside `has()`.
    pub test: bool,
}

/// The names of a plain path (`self.spec.x`), none for anything else.
fn path_of(e: &IdedExpr) -> Vec<String> {
    match &e.expr {
        Expr::Ident(n) => vec![n.clone()],
        Expr::Select(s) if !s.test => {
            let mut path = path_of(&s.operand);
            if !path.is_empty() {
                path.push(s.field.clone());
            }
            path
        }
        _ => Vec::new(),
    }
}

/// The CEL type name of a declared type that has no fields to select.
fn unselectable(t: &DeclType) -> Option<&'static str> {
    Some(match t {
        DeclType::Bool => "bool",
        DeclType::Int => "int",
        DeclType::Uint => "uint",
        DeclType::Double => "double",
        DeclType::String { .. } => "string",
        DeclType::Bytes { .. } => "bytes",
        DeclType::List { .. } => "list",
        DeclType::Timestamp => "google.protobuf.Timestamp",
        DeclType::Duration => "google.protobuf.Duration",
        _ => return None,
    })
}

/// Variables in scope: the declared ones, then comprehension variables.
pub(super) struct Scope<'a> {
    /// Name, type, and whether the value is part of a declared variable's.
    pub vars: Vec<(&'a str, DeclType, bool)>,
    /// The size of all declared variables' values together, in bytes of
    /// JSON: what copying every item of a range out of them costs at most.
    pub input_bytes: f64,
    /// Compile time: an undeclared field or variable is an error. At runtime
    /// (types from values) a missing field is simply absent.
    pub strict: bool,
}

impl<'a> Scope<'a> {
    fn lookup(&self, name: &str) -> Option<(&DeclType, bool)> {
        self.vars.iter().rev().find(|(n, _, _)| *n == name).map(|(_, t, i)| (t, *i))
    }
}

const STRING_TRAVERSAL: f64 = 0.1;

fn est(cost: f64, ty: DeclType) -> Estimate {
    Estimate { cost, ty, input: false }
}

/// Copying a node of a value costs about what evaluating a node does, a byte
/// of a string a tenth of it: half a unit a byte of JSON bounds both.
const COPY_PER_BYTE: f64 = 0.5;

/// Traversing every part of a value once (equality, `in`, conversion).
fn traversal(t: &DeclType) -> f64 {
    match t {
        _ if is_scalar(t) => 0.0,
        DeclType::String { max_len } | DeclType::Bytes { max_len } => *max_len as f64 * STRING_TRAVERSAL,
        _ => t.size(),
    }
}

fn dyn_of(size: f64) -> DeclType {
    DeclType::Dyn { max_size: size.min(u64::MAX as f64) as u64 }
}

pub(super) fn estimate<'a>(e: &'a IdedExpr, scope: &mut Scope<'a>) -> Result<Estimate, Undeclared> {
    match &e.expr {
        Expr::Unspecified => Ok(est(0.0, DeclType::Null)),
        Expr::Literal(l) => Ok(est(
            0.0,
            match l {
                LiteralValue::Boolean(_) => DeclType::Bool,
                LiteralValue::Int(_) => DeclType::Int,
                LiteralValue::UInt(_) => DeclType::Uint,
                LiteralValue::Double(_) => DeclType::Double,
                LiteralValue::Null => DeclType::Null,
                LiteralValue::String(s) => DeclType::String { max_len: s.inner().len() as u64 },
                LiteralValue::Bytes(b) => DeclType::Bytes { max_len: b.inner().len() as u64 },
            },
        )),
        Expr::Ident(name) => match scope.lookup(name) {
            Some((t, input)) => Ok(Estimate { cost: 1.0, ty: t.clone(), input }),
            // Type names and the like (`int`, `string`): constants.
            None if is_type_name(name) => Ok(est(1.0, DeclType::Null)),
            None if scope.strict => Err(Undeclared::Variable(name.clone())),
            None => Ok(est(1.0, DeclType::any())),
        },
        Expr::Select(sel) => {
            let operand = estimate(&sel.operand, scope)?;
            let selected = || Selected { field: sel.field.clone(), path: path_of(&sel.operand), test: sel.test };
            if scope.strict {
                if let Some(name) = unselectable(&operand.ty) {
                    return Err(Undeclared::Selection(name, selected()));
                }
            }
            let ty = match operand.ty.field(&sel.field) {
                Some(t) => t,
                None if scope.strict => return Err(Undeclared::Field(selected())),
                None => DeclType::Null,
            };
            Ok(Estimate {
                cost: operand.cost + 1.0,
                ty: if sel.test { DeclType::Bool } else { ty },
                input: operand.input && !sel.test,
            })
        }
        Expr::List(list) => {
            let mut cost = 1.0;
            let mut items: Option<DeclType> = None;
            for el in &list.elements {
                let x = estimate(el, scope)?;
                cost += x.cost;
                items = Some(match items {
                    Some(i) => merge(i, x.ty),
                    None => x.ty,
                });
            }
            Ok(est(cost, DeclType::list(list.elements.len() as u64, items.unwrap_or(DeclType::Null))))
        }
        Expr::Map(map) => entries(&map.entries, scope),
        Expr::Struct(st) => entries(&st.entries, scope),
        Expr::Comprehension(c) => {
            let range = estimate(&c.iter_range, scope)?;
            let init = estimate(&c.accu_init, scope)?;
            let n = range.ty.len() as f64;
            let (iter_ty, iter2_ty) = match &range.ty {
                DeclType::List { items, .. } => (DeclType::Int, (**items).clone()),
                t => (t.iteration_variable(), t.element()),
            };
            // One variable: the item (or key); two: the index (or key) and the item.
            let first = if c.iter_var2.is_some() { iter_ty } else { range.ty.iteration_variable() };
            let depth = scope.vars.len();
            scope.vars.push((c.iter_var.as_str(), first, range.input));
            if let Some(v2) = &c.iter_var2 {
                scope.vars.push((v2.as_str(), iter2_ty.clone(), range.input));
            }
            // The accumulator as the first step leaves it tells how much each
            // step adds; after n steps it is at most n times that.
            scope.vars.push((c.accu_var.as_str(), init.ty.clone(), false));
            let first_step = estimate(&c.loop_step, scope)?;
            let grown = grow(&init.ty, first_step.ty, n);
            scope.vars.pop();
            scope.vars.push((c.accu_var.as_str(), grown.clone(), false));
            let step = estimate(&c.loop_step, scope)?;
            let cond = estimate(&c.loop_cond, scope)?;
            scope.vars.truncate(depth);
            scope.vars.push((c.accu_var.as_str(), grown, false));
            let result = estimate(&c.result, scope)?;
            scope.vars.truncate(depth);
            // Each step also copies its item into the variable: all the
            // items of the range, at most the whole of the values the range
            // is part of.
            let mut copy = if is_scalar(&iter2_ty) { 0.0 } else { n * traversal(&iter2_ty) };
            if range.input {
                copy = copy.min(scope.input_bytes * COPY_PER_BYTE);
            }
            Ok(est(range.cost + init.cost + n * (step.cost + cond.cost) + copy + result.cost, result.ty))
        }
        Expr::Call(call) => {
            let mut args = Vec::with_capacity(call.args.len() + 1);
            let mut name = call.func_name.clone();
            match call.target.as_deref() {
                // A namespaced function (`sets.contains(a, b)`, `math.abs(x)`).
                Some(IdedExpr { expr: Expr::Ident(ns), .. }) if scope.lookup(ns).is_none() => {
                    name = format!("{ns}.{name}");
                }
                Some(t) => args.push(estimate(t, scope)?),
                None => {}
            }
            for a in &call.args {
                args.push(estimate(a, scope)?);
            }
            if name == super::lazy::LAZY_HAS {
                return Ok(est(args.iter().map(|a| a.cost).sum::<f64>() + 1.0, DeclType::Bool));
            }
            if name == super::lazy::LAZY {
                // A variable's value: its own evaluation is bounded apart;
                // here it is taken to be no larger than the inputs.
                return Ok(est(args.iter().map(|a| a.cost).sum::<f64>() + 1.0, dyn_of(scope.input_bytes)));
            }
            let indexes_input = matches!(name.as_str(), operators::INDEX | operators::OPT_INDEX)
                && args.first().is_some_and(|a| a.input);
            let mut out = function(&name, args, scope.strict);
            out.input = indexes_input;
            Ok(out)
        }
    }
}

fn entries<'a>(items: &'a [cel::common::ast::IdedEntryExpr], scope: &mut Scope<'a>) -> Result<Estimate, Undeclared> {
    let mut cost = 1.0;
    let mut size = 0.0;
    for entry in items {
        match &entry.expr {
            EntryExpr::MapEntry(m) => {
                let k = estimate(&m.key, scope)?;
                let v = estimate(&m.value, scope)?;
                cost += k.cost + v.cost;
                size += 1.0 + k.ty.size() + v.ty.size();
            }
            EntryExpr::StructField(f) => {
                let v = estimate(&f.value, scope)?;
                cost += v.cost;
                size += 1.0 + v.ty.size();
            }
        }
    }
    Ok(est(cost, dyn_of(size)))
}

/// The accumulator after `n` steps that each add what the first added.
fn grow(init: &DeclType, after_one: DeclType, n: f64) -> DeclType {
    let n_u = n.min(u64::MAX as f64) as u64;
    match (init, after_one) {
        (DeclType::List { max_items: a, .. }, DeclType::List { max_items: b, items }) => {
            DeclType::List { max_items: a.saturating_add(b.saturating_sub(*a).saturating_mul(n_u)), items }
        }
        (DeclType::String { max_len: a }, DeclType::String { max_len: b }) => {
            DeclType::String { max_len: a.saturating_add(b.saturating_sub(*a).saturating_mul(n_u)) }
        }
        (i, s) if *i == s => s,
        (i, s) if is_scalar(i) && is_scalar(&s) => s,
        (i, s) => dyn_of(i.size() + s.size() * n.max(1.0)),
    }
}

fn is_scalar(t: &DeclType) -> bool {
    matches!(
        t,
        DeclType::Null
            | DeclType::Bool
            | DeclType::Int
            | DeclType::Uint
            | DeclType::Double
            | DeclType::Timestamp
            | DeclType::Duration
    )
}

/// Library functions whose result is a number, a boolean or of a fixed size.
fn returns_scalar(name: &str) -> bool {
    name.starts_with("is")
        || name.starts_with("sets.")
        || name.starts_with("math.")
        || matches!(
            name,
            "contains"
                | "startsWith"
                | "endsWith"
                | "matches"
                | "indexOf"
                | "lastIndexOf"
                | "sum"
                | "min"
                | "max"
                | "compareTo"
                | "sign"
                | "asInteger"
                | "asApproximateFloat"
                | "major"
                | "minor"
                | "patch"
                | "family"
                | "prefixLength"
                | "containsIP"
                | "containsCIDR"
                | "exists"
                | "all"
        )
}

/// Library functions whose result is at most a few times their arguments.
fn is_linear(name: &str) -> bool {
    matches!(
        name,
        "lowerAscii"
            | "upperAscii"
            | "trim"
            | "substring"
            | "charAt"
            | "reverse"
            | "strings.quote"
            | "quote"
            | "string"
            | "bytes"
            | "quantity"
            | "url"
            | "ip"
            | "cidr"
            | "semver"
            | "getScheme"
            | "getHost"
            | "getHostname"
            | "getPort"
            | "getEscapedPath"
            | "getQuery"
            | "masked"
            | "base64.encode"
            | "base64.decode"
            | "find"
            | "findAll"
            | "slice"
            | "flatten"
            | "distinct"
            | "sort"
            | "add"
            | "sub"
            | "first"
            | "last"
    )
}

fn is_type_name(name: &str) -> bool {
    matches!(name, "int" | "uint" | "double" | "bool" | "string" | "bytes" | "list" | "map" | "null_type" | "type")
}

fn function(name: &str, args: Vec<Estimate>, strict: bool) -> Estimate {
    let sum: f64 = args.iter().map(|a| a.cost).sum();
    if name == "string" {
        let ty = match args.first().map(|a| &a.ty) {
            Some(t @ DeclType::String { .. }) => t.clone(),
            Some(DeclType::Bool) => DeclType::String { max_len: 5 },
            // kube's estimator does not know how long a number or a
            // timestamp prints, and neither does this one at compile time
            // (so `'x' + string(self.n)` is refused as kube refuses it); a
            // value at hand prints in at most 32 bytes.
            Some(t) if is_scalar(t) && !strict => DeclType::String { max_len: 32 },
            Some(t) if !strict => dyn_of(1.0 + 6.0 * t.size()),
            _ => DeclType::Dyn { max_size: u64::MAX },
        };
        let work = args.first().map_or(0.0, |a| traversal(&a.ty));
        return est(sum + 1.0 + work, ty);
    }
    if name == super::authz::CHECK {
        // kube's fixed cost of an authorization check: in the estimate, for
        // each one written; at runtime, for each one that runs, charged as
        // it runs ([`super::charge`]), as kube's runtime cost counts them.
        let cost = if strict { super::authz::CHECK_COST } else { 1.0 };
        return est(sum + cost, DeclType::Dyn { max_size: 1024 });
    }
    if name == super::mutation::CONSTRUCT {
        // A message construction (rewritten into a call): its fields, as a
        // map literal costs them.
        let size: f64 = args.iter().map(|a| a.ty.size()).sum();
        return est(sum + 1.0, dyn_of(1.0 + size));
    }
    let mut tys = args.into_iter().map(|a| a.ty);
    match name {
        operators::LOGICAL_AND | operators::LOGICAL_OR | operators::LOGICAL_NOT | operators::NOT_STRICTLY_FALSE => {
            est(sum, DeclType::Bool)
        }
        operators::CONDITIONAL => {
            let (_, a, b) = (tys.next(), tys.next(), tys.next());
            let ty = match (a, b) {
                (Some(a), Some(b)) => merge(a, b),
                (a, b) => a.or(b).unwrap_or(DeclType::Null),
            };
            est(sum, ty)
        }
        operators::EQUALS
        | operators::NOT_EQUALS
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS => {
            let sizes: Vec<f64> = tys.map(|t| traversal(&t)).collect();
            let least = sizes.iter().cloned().fold(f64::INFINITY, f64::min);
            est(sum + 1.0 + if least.is_finite() { least } else { 0.0 }, DeclType::Bool)
        }
        operators::IN => {
            let all: Vec<DeclType> = tys.collect();
            let traversed: f64 = all.iter().map(traversal).sum();
            est(sum + 1.0 + traversed, DeclType::Bool)
        }
        operators::ADD => {
            let (a, b) = (tys.next().unwrap_or(DeclType::Null), tys.next().unwrap_or(DeclType::Null));
            match (&a, &b) {
                (DeclType::String { max_len: x }, DeclType::String { max_len: y }) => est(
                    sum + 1.0 + (x.saturating_add(*y)) as f64 * STRING_TRAVERSAL,
                    DeclType::String { max_len: x.saturating_add(*y) },
                ),
                (DeclType::List { max_items: x, .. }, DeclType::List { max_items: y, .. }) => {
                    let max_items = x.saturating_add(*y);
                    let items = merge(a.element(), b.element());
                    est(sum + 1.0 + max_items as f64, DeclType::list(max_items, items))
                }
                _ if is_scalar(&a) && is_scalar(&b) => est(sum + 1.0, merge(a, b)),
                // Either may be a string or a list: the copy is linear, the
                // result as large as both.
                _ => est(sum + 1.0 + a.size() + b.size(), dyn_of(a.size() + b.size())),
            }
        }
        operators::SUBSTRACT | operators::MULTIPLY | operators::DIVIDE | operators::MODULO | operators::NEGATE => {
            est(sum + 1.0, tys.reduce(merge).unwrap_or(DeclType::Null))
        }
        operators::INDEX | operators::OPT_INDEX => {
            let container = tys.next().unwrap_or(DeclType::Null);
            est(sum + 1.0, container.element())
        }
        operators::OPT_SELECT => {
            let container = tys.next().unwrap_or(DeclType::Null);
            est(sum + 1.0, container.element())
        }
        "size" | "has" | "hasValue" | "optional.none" | "type" | "dyn" | "int" | "uint" | "double" | "bool"
        | "duration" | "timestamp" | "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
        | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => {
            // Constant time, but a conversion of a long string reads it.
            let ty = match name {
                "dyn" => tys.next().unwrap_or(DeclType::Null),
                "timestamp" => DeclType::Timestamp,
                "duration" => DeclType::Duration,
                "double" => DeclType::Double,
                _ => DeclType::Int,
            };
            est(sum + 1.0, ty)
        }
        "value" | "orValue" | "optional.of" | "optional.ofNonZeroValue" | "or" => {
            est(sum + 1.0, tys.reduce(merge).unwrap_or(DeclType::Null))
        }
        // Everything else (string and list libraries, regular expressions,
        // quantities, URLs, IPs, semver, format, sets, encoders): at most
        // the product of its arguments' sizes, in time and in result size.
        _ => {
            let tys: Vec<DeclType> = tys.collect();
            let work: f64 = tys.iter().map(|t| 1.0 + traversal(t)).product();
            let ty = if returns_scalar(name) {
                DeclType::Int
            } else if is_linear(name) {
                // Case changes, trimming, parsing into a quantity, URL, IP or
                // version, encoding (quoting escapes a byte in at most 6).
                dyn_of(1.0 + 6.0 * tys.iter().map(DeclType::size).sum::<f64>())
            } else {
                // replace, join, format, split and whatever is not known.
                dyn_of(tys.iter().map(|t| 1.0 + t.size()).product())
            };
            est(sum + 1.0 + work, ty)
        }
    }
}
