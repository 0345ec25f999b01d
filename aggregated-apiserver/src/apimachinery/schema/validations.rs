//! `x-kubernetes-validations`: the CEL rules of a structural schema, compiled
//! once per kind ([`SchemaRules::compile`], refusing what apiextensions
//! refuses in a CRD) and evaluated on every write ([`SchemaRules::validate`])
//! as k8s.io/apiextensions-apiserver `pkg/apiserver/schema/cel/validation.go`
//! evaluates them for a custom resource:
//!
//! * each rule sees its node as `self` (at the root and in embedded
//!   resources with `apiVersion`, `kind` and `metadata.name`/`generateName`
//!   only), and on an update the
//!   node's previous value as `oldSelf` where the two correlate (object
//!   fields; items of `x-kubernetes-list-type: map` lists by their keys);
//! * a rule using `oldSelf` (a transition rule) is skipped without a previous
//!   value, unless `optionalOldSelf` binds it to `optional.none()`;
//! * null values are not validated; a failing rule is
//!   `<path>: Invalid value: "<type>": <message>` at its node, or at
//!   `fieldPath` below it, or Forbidden/Required/Duplicate per `reason`;
//!   `messageExpression` replaces the message unless it fails, then the
//!   message (or `failed rule: <rule>`) stands;
//! * on an update, a failing rule that does not use `oldSelf` on a node the
//!   update left unchanged is a warning, not an error (kube's ratcheting);
//! * costs come out of kube's per-object budget (`RUNTIME_CEL_COST_BUDGET`)
//!   and each evaluation is bounded by `PER_CALL_LIMIT` (see
//!   [`crate::apimachinery::cel`] for how, without a counting interpreter).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::{json, Value};

use super::{sadditional, sget, sitems, sprops, Additional, MAX_WALK_DEPTH};
use crate::apimachinery::cel::{
    cost_error_message, Activation, DeclType, Env, EvalError, Expression, MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES,
    MAX_REQUEST_SIZE_BYTES, OUT_OF_BUDGET, PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET, STATIC_ESTIMATED_COST_LIMIT,
    STATIC_ESTIMATED_CRD_COST_LIMIT,
};
use crate::apimachinery::field_error::{FieldError, FieldErrorKind};

/// One entry of `x-kubernetes-validations`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    #[serde(default)]
    rule: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    message_expression: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    field_path: String,
    #[serde(default)]
    optional_old_self: Option<bool>,
}

impl Rule {
    /// kube's `ruleErrorString`.
    fn error_string(&self) -> &str {
        if self.message.is_empty() {
            self.rule.trim()
        } else {
            self.message.trim()
        }
    }

    /// kube's `ruleMessageOrDefault`.
    fn message_or_default(&self) -> String {
        if self.message.is_empty() {
            format!("failed rule: {}", self.error_string())
        } else {
            self.message.trim().to_string()
        }
    }
}

struct CompiledRule {
    rule: Rule,
    program: Expression,
    message: Option<Expression>,
    uses_old_self: bool,
    /// The rule's `fieldPath` as a path below the node (`spec.x`), if any.
    field_path: Option<String>,
}

/// A schema node that has rules, or nodes with rules below it.
#[derive(Default)]
struct Node {
    /// The schema's `type` (what a failed rule shows as the invalid value).
    type_name: String,
    decl: Option<DeclType>,
    rules: Vec<CompiledRule>,
    properties: BTreeMap<String, Node>,
    additional: Option<Box<Node>>,
    items: Option<Box<Node>>,
    /// The object's root or an embedded resource (`WithTypeAndObjectMeta`).
    resource: bool,
    /// `x-kubernetes-list-map-keys` of a map-type list: its items correlate
    /// with the previous ones of the same keys.
    list_map_keys: Option<Vec<String>>,
}

impl Node {
    fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.properties.is_empty() && self.additional.is_none() && self.items.is_none()
    }
}

/// The compiled rules of a kind's schema.
pub struct SchemaRules {
    root: Node,
    /// The estimated cost of all rules, each times how often it may run.
    max_cost: u64,
}

/// What a rule of the schema does wrong, with its place in the schema, in
/// the words apiextensions uses for a CRD
/// (`openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: ...`).
#[derive(Debug)]
pub struct RuleErrors(pub Vec<String>);

impl std::fmt::Display for RuleErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid x-kubernetes-validations: {}", self.0.join("; "))
    }
}

impl std::error::Error for RuleErrors {}

const SUPPORTED_REASONS: [&str; 4] =
    ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];

struct Compiler {
    errors: Vec<String>,
    total_cost: u64,
}

impl SchemaRules {
    /// Compiles every rule of `schema` (the kind's whole object schema).
    /// `Ok(None)` when it has none.
    pub fn compile(schema: &Value) -> Result<Option<Self>, RuleErrors> {
        let mut c = Compiler { errors: Vec::new(), total_cost: 0 };
        let root = c.node(schema, "openAPIV3Schema", 1, None, true, 0);
        if c.total_cost > STATIC_ESTIMATED_CRD_COST_LIMIT {
            c.errors.push(format!(
                "openAPIV3Schema: Forbidden: {}",
                cost_error_message(
                    "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                    c.total_cost,
                    STATIC_ESTIMATED_CRD_COST_LIMIT
                )
            ));
        }
        if !c.errors.is_empty() {
            return Err(RuleErrors(c.errors));
        }
        Ok((!root.is_empty()).then_some(SchemaRules { root, max_cost: c.total_cost }))
    }

    /// What all rules of an object may cost together, estimated from the
    /// schema (at most kube's `StaticEstimatedCRDCostLimit`; at runtime they
    /// stop at its `RuntimeCELCostBudget`).
    pub fn max_cost(&self) -> u64 {
        self.max_cost
    }
}

/// How many items a list (or entries a map) of this schema may have: its
/// bound, else what a request can hold (kube's estimate for cardinality).
fn max_cardinality(s: &Value, key: &str) -> u64 {
    sget(s, key).and_then(Value::as_u64).unwrap_or(MAX_REQUEST_SIZE_BYTES / 2)
}

impl Compiler {
    /// `uncorrelatable`: the schema path of the nearest list whose items
    /// cannot be matched with their previous values (oldSelf is refused below it).
    fn node(
        &mut self,
        s: &Value,
        path: &str,
        cardinality: u64,
        uncorrelatable: Option<&str>,
        root: bool,
        depth: usize,
    ) -> Node {
        let mut node =
            Node { type_name: sget(s, "type").and_then(Value::as_str).unwrap_or("").to_string(), ..Node::default() };
        if depth > MAX_WALK_DEPTH {
            return node;
        }
        // The object's root and embedded objects are resources: their rules
        // see apiVersion, kind and metadata.name/generateName only.
        node.resource = root || super::sflag(s, "x-kubernetes-embedded-resource");
        if let Some(Value::Array(rules)) = sget(s, "x-kubernetes-validations") {
            let decl = if node.resource { resource_decl(s) } else { DeclType::from_schema(s) };
            for (i, raw) in rules.iter().enumerate() {
                let at = format!("{path}.x-kubernetes-validations[{i}]");
                if let Some(rule) = self.rule(raw, s, &decl, &at, cardinality, uncorrelatable) {
                    node.rules.push(rule);
                }
            }
            node.decl = Some(decl);
        }
        if let Some(props) = sprops(s) {
            for (k, p) in props {
                // Kube's CEL sees only a root's metadata.name and generateName,
                // which carry no rules of their own.
                if root && k == "metadata" {
                    continue;
                }
                let child =
                    self.node(p, &format!("{path}.properties[{k}]"), cardinality, uncorrelatable, false, depth + 1);
                if !child.is_empty() {
                    node.properties.insert(k.clone(), child);
                }
            }
        }
        if let Additional::Schema(a) = sadditional(s) {
            let n = cardinality.saturating_mul(max_cardinality(s, "maxProperties"));
            let child = self.node(a, &format!("{path}.additionalProperties"), n, uncorrelatable, false, depth + 1);
            if !child.is_empty() {
                node.additional = Some(Box::new(child));
            }
        }
        if let Some(items) = sitems(s) {
            let keys: Option<Vec<String>> = (sget(s, "x-kubernetes-list-type").and_then(Value::as_str) == Some("map"))
                .then(|| {
                    sget(s, "x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|ks| ks.iter().filter_map(Value::as_str).map(str::to_string).collect())
                        .unwrap_or_default()
                });
            let items_path = format!("{path}.items");
            let below = match (&keys, uncorrelatable) {
                (_, Some(u)) => Some(u.to_string()),
                (None, None) => Some(path.to_string()),
                (Some(_), None) => None,
            };
            let n = cardinality.saturating_mul(max_cardinality(s, "maxItems"));
            let child = self.node(items, &items_path, n, below.as_deref(), false, depth + 1);
            if !child.is_empty() {
                node.items = Some(Box::new(child));
                node.list_map_keys = keys;
            }
        }
        node
    }

    fn rule(
        &mut self,
        raw: &Value,
        schema: &Value,
        decl: &DeclType,
        at: &str,
        cardinality: u64,
        uncorrelatable: Option<&str>,
    ) -> Option<CompiledRule> {
        let rule: Rule = match serde_json::from_value(raw.clone()) {
            Ok(r) => r,
            Err(e) => {
                self.errors.push(format!("{at}: Invalid value: {raw}: {e}"));
                return None;
            }
        };
        let before = self.errors.len();
        let trimmed = rule.rule.trim();
        if trimmed.is_empty() {
            self.errors.push(format!("{at}.rule: Required value: rule is not specified"));
        } else if !rule.message.is_empty() && rule.message.trim().is_empty() {
            self.errors
                .push(format!("{at}.message: Invalid value: {:?}: must be non-empty if specified", rule.message));
        } else if rule.message.trim().contains(['\n', '\r']) {
            self.errors.push(format!("{at}.message: Invalid value: {:?}: must not contain line breaks", rule.message));
        } else if trimmed.contains(['\n', '\r']) && rule.message.trim().is_empty() {
            self.errors
                .push(format!("{at}.message: Required value: message must be specified if rule contains line breaks"));
        }
        if let Some(reason) = &rule.reason {
            if !SUPPORTED_REASONS.contains(&reason.as_str()) {
                self.errors.push(format!(
                    "{at}.reason: Unsupported value: {reason:?}: supported values: \"{}\"",
                    SUPPORTED_REASONS.join("\", \"")
                ));
            }
        }
        let field_path = if rule.field_path.is_empty() {
            None
        } else {
            match valid_field_path(rule.field_path.trim(), schema) {
                Some(p) => Some(p),
                None => {
                    self.errors
                        .push(format!("{at}.fieldPath: Invalid value: {:?}: must be a valid path", rule.field_path));
                    None
                }
            }
        };
        if self.errors.len() > before {
            return None;
        }
        let env = Env::new(u64::MAX).variable("self", decl.clone()).variable("oldSelf", decl.clone());
        let program = match env.compile(&rule.rule) {
            Ok(p) => p,
            Err(e) => {
                self.errors.push(format!("{at}.rule: Invalid value: {:?}: compilation failed: {e}", rule.rule));
                return None;
            }
        };
        let cost = program.max_cost().saturating_mul(cardinality);
        self.total_cost = self.total_cost.saturating_add(cost);
        if cost > STATIC_ESTIMATED_COST_LIMIT {
            self.errors.push(format!(
                "{at}.rule: Forbidden: {} (rule {:?})",
                cost_error_message("estimated rule cost", cost, STATIC_ESTIMATED_COST_LIMIT),
                rule.rule
            ));
        }
        let uses_old_self = program.uses("oldSelf");
        if uses_old_self {
            if let Some(u) = uncorrelatable {
                self.errors.push(format!(
                    "{at}.rule: Invalid value: {:?}: oldSelf cannot be used on the uncorrelatable portion of the schema within {u}",
                    rule.rule
                ));
            }
        } else if let Some(o) = rule.optional_old_self {
            self.errors.push(format!(
                "{at}.optionalOldSelf: Invalid value: {o}: may not be set if oldSelf is not used in rule"
            ));
        }
        let message = if rule.message_expression.trim().is_empty() {
            if !rule.message_expression.is_empty() {
                self.errors.push(format!(
                    "{at}.messageExpression: Required value: messageExpression must be non-empty if specified"
                ));
            }
            None
        } else {
            match env.compile(&rule.message_expression) {
                Ok(m) => {
                    let cost = m.max_cost().saturating_mul(cardinality);
                    self.total_cost = self.total_cost.saturating_add(cost);
                    if cost > STATIC_ESTIMATED_COST_LIMIT {
                        self.errors.push(format!(
                            "{at}.messageExpression: Forbidden: {}",
                            cost_error_message("estimated messageExpression cost", cost, STATIC_ESTIMATED_COST_LIMIT)
                        ));
                    }
                    Some(m)
                }
                Err(e) => {
                    self.errors.push(format!(
                        "{at}.messageExpression: Invalid value: {:?}: messageExpression compilation failed: {e}",
                        rule.message_expression
                    ));
                    None
                }
            }
        };
        Some(CompiledRule { rule, program, message, uses_old_self, field_path })
    }
}

/// A resource's type as a rule sees it: kube's `WithTypeAndObjectMeta`.
fn resource_decl(s: &Value) -> DeclType {
    let mut decl = match DeclType::from_schema(s) {
        o @ DeclType::Object { .. } => o,
        // An embedded resource that declares no fields (it preserves unknown ones).
        _ => DeclType::Object { fields: Default::default(), open: true },
    };
    if let DeclType::Object { fields, .. } = &mut decl {
        let string = || DeclType::string(MAX_REQUEST_SIZE_BYTES);
        fields.insert("apiVersion".into(), string());
        fields.insert("kind".into(), string());
        fields.insert("metadata".into(), DeclType::object([("name", string()), ("generateName", string())]));
    }
    decl
}

/// A rule's `fieldPath` (`.spec.x`, `['x-y']`) checked against the schema
/// below the rule: the path as errors name it (`spec.x`), or `None`.
fn valid_field_path(path: &str, schema: &Value) -> Option<String> {
    let mut rest = path;
    let mut at = schema;
    let mut out = String::new();
    while !rest.is_empty() {
        let name;
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            name = &r[..end];
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']")?;
            name = &r[..end];
            rest = &r[end + 2..];
        } else {
            return None;
        }
        if name.is_empty() {
            return None;
        }
        at = match (sprops(at).and_then(|p| p.get(name)), sadditional(at)) {
            (Some(p), _) => p,
            (None, Additional::Schema(a)) => a,
            _ => return None,
        };
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(name);
    }
    (!out.is_empty()).then_some(out)
}

/// What validating one object found.
#[derive(Debug, Default)]
pub struct RuleResults {
    pub errors: Vec<FieldError>,
    /// Failures on parts an update left as they were (kube's ratcheting).
    pub warnings: Vec<String>,
}

/// Where a node stands against the previous object on an update.
#[derive(Clone, Copy)]
struct Correlation<'a> {
    /// The node's previous value, when it correlates.
    old: Option<&'a Value>,
    /// Whether the update is an update at all (ratcheting applies).
    update: bool,
    /// Whether this node correlates (else the nearest ancestor that does decides).
    correlated: bool,
    /// Whether the nearest correlated ancestor is unchanged.
    parent_unchanged: bool,
}

struct Run {
    budget: i64,
    out: RuleResults,
    stopped: bool,
}

impl SchemaRules {
    /// Runs the rules over `obj` (and `old` on an update).
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> RuleResults {
        let mut run = Run { budget: RUNTIME_CEL_COST_BUDGET, out: RuleResults::default(), stopped: false };
        let corr = Correlation { old, update: old.is_some(), correlated: old.is_some(), parent_unchanged: false };
        run.node(&self.root, obj, corr, "", 0);
        run.out
    }
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The identity of a map-type list's item: its key fields' values.
fn list_map_key(keys: &[String], item: &Value) -> String {
    let values: Vec<Option<&Value>> = keys.iter().map(|k| item.get(k)).collect();
    serde_json::to_string(&values).unwrap_or_default()
}

/// A resource as its rules see it: metadata reduced to name and generateName.
fn resource_view(obj: &Value) -> Value {
    let mut view = serde_json::Map::new();
    if let Value::Object(m) = obj {
        for (k, v) in m {
            if k == "metadata" {
                let mut meta = serde_json::Map::new();
                for f in ["name", "generateName"] {
                    if let Some(x) = v.get(f) {
                        meta.insert(f.into(), x.clone());
                    }
                }
                view.insert(k.clone(), Value::Object(meta));
            } else {
                view.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(view)
}

impl Run {
    fn node(&mut self, node: &Node, v: &Value, corr: Correlation<'_>, path: &str, depth: usize) {
        if self.stopped || v.is_null() || depth > MAX_WALK_DEPTH {
            return;
        }
        let unchanged = if corr.correlated { corr.old == Some(v) } else { corr.parent_unchanged };
        if !node.rules.is_empty() {
            if node.resource {
                let view = resource_view(v);
                let old_view = corr.old.map(resource_view);
                self.rules(node, &view, old_view.as_ref(), corr.update && unchanged, path);
            } else {
                self.rules(node, v, corr.old, corr.update && unchanged, path);
            }
            if self.stopped {
                return;
            }
        }
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let child = node.properties.get(k).or(node.additional.as_deref());
                    let Some(child) = child else { continue };
                    let old = corr.old.and_then(|o| o.get(k));
                    let c = Correlation {
                        old,
                        update: corr.update,
                        correlated: corr.correlated,
                        parent_unchanged: if corr.correlated { unchanged } else { corr.parent_unchanged },
                    };
                    self.node(child, x, c, &child_path(path, k), depth + 1);
                    if self.stopped {
                        return;
                    }
                }
            }
            Value::Array(items) => {
                let Some(child) = node.items.as_deref() else { return };
                // The previous items of a map-type list by their keys, looked
                // up once each (a scan per item would be quadratic).
                let olds: HashMap<String, &Value> = match (&node.list_map_keys, corr.old) {
                    (Some(keys), Some(Value::Array(olds))) => {
                        let mut by_key = HashMap::with_capacity(olds.len());
                        for o in olds {
                            by_key.entry(list_map_key(keys, o)).or_insert(o);
                        }
                        by_key
                    }
                    _ => HashMap::new(),
                };
                for (i, x) in items.iter().enumerate() {
                    let old = match &node.list_map_keys {
                        Some(keys) if !olds.is_empty() => olds.get(&list_map_key(keys, x)).copied(),
                        _ => None,
                    };
                    let correlated = corr.correlated && node.list_map_keys.is_some();
                    let c = Correlation {
                        old: if correlated { old } else { None },
                        update: corr.update,
                        correlated,
                        parent_unchanged: if corr.correlated { unchanged } else { corr.parent_unchanged },
                    };
                    let mut p = path.to_string();
                    let _ = write!(p, "[{i}]");
                    self.node(child, x, c, &p, depth + 1);
                    if self.stopped {
                        return;
                    }
                }
            }
            _ => {}
        }
    }

    fn error_at(&self, path: &str) -> String {
        if path.is_empty() {
            "<nil>".to_string()
        } else {
            path.to_string()
        }
    }

    fn invalid(&mut self, path: &str, type_name: &str, detail: String) {
        let field = self.error_at(path);
        self.out.errors.push(FieldError::invalid(field, &json!(type_name), detail));
    }

    fn stop_with(&mut self, path: &str, type_name: &str, detail: String) {
        self.invalid(path, type_name, detail);
        self.stopped = true;
    }

    fn rules(&mut self, node: &Node, v: &Value, old: Option<&Value>, ratchet: bool, path: &str) {
        let Some(decl) = node.decl.as_ref() else { return };
        let t = node.type_name.as_str();
        if self.budget <= 0 {
            return self.stop_with(path, t, OUT_OF_BUDGET.into());
        }
        for c in &node.rules {
            let optional = c.rule.optional_old_self.unwrap_or(false);
            if c.uses_old_self && old.is_none() && !optional {
                continue;
            }
            let vars = if optional {
                Activation::new().json("self", v, decl).optional_json("oldSelf", old, decl)
            } else {
                match old {
                    Some(o) => Activation::new().json("self", v, decl).json("oldSelf", o, decl),
                    None => Activation::new().json("self", v, decl),
                }
            };
            let result = c.program.evaluate(&vars, PER_CALL_LIMIT);
            let cost = match &result {
                Ok(r) => r.cost,
                Err(EvalError::Failed { cost, .. }) => *cost,
                Err(EvalError::CostLimitExceeded { .. }) => {
                    return self.stop_with(
                        path,
                        t,
                        format!(
                            "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                            c.rule.error_string()
                        ),
                    );
                }
            };
            if cost as i64 > self.budget {
                return self.stop_with(path, t, OUT_OF_BUDGET.into());
            }
            self.budget -= cost as i64;
            let value = match result {
                Ok(r) => r.value,
                Err(e) => {
                    let msg = e.to_string();
                    let detail = if msg.starts_with("no such overload") {
                        format!("'{msg}': call arguments did not match a supported operator, function or macro signature for rule: {}", c.rule.error_string())
                    } else {
                        format!("{msg} evaluating rule: {}", c.rule.error_string())
                    };
                    self.invalid(path, t, detail);
                    continue;
                }
            };
            if value == crate::apimachinery::cel::cel::Value::Bool(true) {
                continue;
            }
            let at = match &c.field_path {
                Some(fp) => child_path(path, fp),
                None => path.to_string(),
            };
            // The message expression sees oldSelf as the rule's non-optional activation.
            let message = match &c.message {
                Some(m) => {
                    let vars = match old {
                        Some(o) => Activation::new().json("self", v, decl).json("oldSelf", o, decl),
                        None => Activation::new().json("self", v, decl),
                    };
                    match self.message(m, &vars, &at, t, &c.rule) {
                        Some(msg) => msg,
                        None => return,
                    }
                }
                None => c.rule.message_or_default(),
            };
            let err = for_reason(self.error_at(&at), t, message, c.rule.reason.as_deref());
            if !c.uses_old_self && ratchet {
                self.out.warnings.push(err.full_message());
            } else {
                self.out.errors.push(err);
            }
        }
    }

    /// The message of a failed rule from its `messageExpression`: the
    /// expression's string, or the rule's message when it fails (kube
    /// logs why), or `None` when validation stops.
    fn message(&mut self, m: &Expression, vars: &Activation<'_>, at: &str, t: &str, rule: &Rule) -> Option<String> {
        match m.evaluate(vars, PER_CALL_LIMIT) {
            Err(EvalError::CostLimitExceeded { .. }) => {
                self.stop_with(
                    at,
                    t,
                    format!(
                        "no further validation rules will be run due to call cost exceeds limit for messageExpression: {:?}",
                        rule.message_expression
                    ),
                );
                None
            }
            Err(EvalError::Failed { message, cost }) => {
                tracing::debug!(error = %message, "messageExpression evaluation failed");
                self.budget -= cost as i64;
                Some(rule.message_or_default())
            }
            Ok(out) => {
                if out.cost as i64 > self.budget {
                    self.stop_with(
                        at,
                        t,
                        "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".into(),
                    );
                    return None;
                }
                self.budget -= out.cost as i64;
                match out.value {
                    crate::apimachinery::cel::cel::Value::String(s) => {
                        let trimmed = s.trim();
                        if trimmed.is_empty()
                            || trimmed.contains('\n')
                            || trimmed.len() > MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES
                        {
                            Some(rule.message_or_default())
                        } else {
                            Some(trimmed.to_string())
                        }
                    }
                    _ => Some(rule.message_or_default()),
                }
            }
        }
    }
}

/// kube's `fieldErrorForReason`.
fn for_reason(field: String, type_name: &str, detail: String, reason: Option<&str>) -> FieldError {
    match reason {
        Some("FieldValueForbidden") => FieldError::forbidden(field, detail),
        Some("FieldValueRequired") => FieldError::required(field, detail),
        Some("FieldValueDuplicate") => FieldError {
            kind: FieldErrorKind::Duplicate,
            field,
            value: FieldError::invalid("", &json!(type_name), "").value,
            detail: String::new(),
        },
        _ => FieldError::invalid(field, &json!(type_name), detail),
    }
}

#[cfg(test)]
mod tests;
