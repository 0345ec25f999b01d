//! Label selectors and field selectors with the semantics and error texts of
//! k8s.io/apimachinery (`labels.Parse`, `fields.ParseSelector`,
//! `metav1.LabelSelectorAsSelector`) plus the name validators of
//! `pkg/util/validation` that selector parsing relies on.
//!
//! Everything here is written to never panic, whatever the input: the lexers
//! work on bytes and only slice strings at ASCII boundaries (through checked
//! accessors), and the parsers treat reading past the end as end of input.
//!
//! Error texts follow Kubernetes 1.34: `field.Error` renders as
//! `<path>: Invalid value: <value>: <detail>`, a nil path renders as `<nil>`,
//! strings are quoted like Go's `%q`, slices like Go's `json.Marshal`, and
//! several errors of one requirement aggregate as `[e1, e2]`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

pub use super::gofmt::go_quote;

// ---------------------------------------------------------------------------
// Validation (pkg/util/validation)
// ---------------------------------------------------------------------------

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
/// Maximum length of the name part of a qualified name (label key).
pub const QUALIFIED_NAME_MAX_LENGTH: usize = 63;

const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR_MSG: &str =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' \
     or '.', and must start and end with an alphanumeric character";
/// Maximum length of a label value.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
     '-', and must start and end with an alphanumeric character";
/// Maximum length of a DNS-1123 label.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;

const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
     characters, '-' or '.', and must start and end with an alphanumeric character";
/// Maximum length of a DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// `validation.MaxLenError`: "must be no more than N characters".
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `validation.EmptyError`: "must be non-empty".
pub fn empty_error() -> &'static str {
    "must be non-empty"
}

/// `validation.RegexError`: the message, then the examples and the regex in
/// parentheses (with apimachinery's odd `',  or '` spacing between examples).
pub fn regex_error(msg: &str, regex: &str, examples: &[&str]) -> String {
    let mut out = String::from(msg);
    if examples.is_empty() {
        out.push_str(" (regex used for validation is '");
        out.push_str(regex);
        out.push_str("')");
        return out;
    }
    out.push_str(" (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(example);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(regex);
    out.push_str("')");
    out
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn is_dns_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
fn is_dns1123_label_fmt(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            is_dns_lower_alnum(first)
                && is_dns_lower_alnum(last)
                && b.iter().all(|&c| is_dns_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

/// `^label(\.label)*$` (no per-label length limit, like the Go regex).
fn is_dns1123_subdomain_fmt(s: &str) -> bool {
    s.split('.').all(is_dns1123_label_fmt)
}

/// `validation.IsQualifiedName`: a label key / annotation key, an optional
/// DNS-1123 subdomain prefix and '/' followed by a name of at most 63
/// characters. Returns the apimachinery error strings (empty when valid).
pub fn validate_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                for msg in validate_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {msg}"));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX_LENGTH)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// `validation.IsValidLabelValue`: empty, or at most 63 characters of
/// `[-A-Za-z0-9_.]` starting and ending with an alphanumeric character.
pub fn validate_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(LABEL_VALUE_ERR_MSG, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// `validation.IsDNS1123Subdomain`: at most 253 characters, dot-separated
/// lowercase RFC 1123 labels.
pub fn validate_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !is_dns1123_subdomain_fmt(value) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_ERR_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// `validation.IsDNS1123Label`: at most 63 characters of `[-a-z0-9]`,
/// starting and ending with an alphanumeric character.
pub fn validate_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !is_dns1123_label_fmt(value) {
        if is_dns1123_subdomain_fmt(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(DNS1123_LABEL_ERR_MSG, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

// ---------------------------------------------------------------------------
// Go formatting helpers (field.Error rendering)
// ---------------------------------------------------------------------------

/// Encodes a string like Go's `encoding/json` (HTML-safe escaping included).
fn go_json_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hex = |n: u32| char::from(HEX.get((n & 0xF) as usize).copied().unwrap_or(b'0'));
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => {
                let u = c as u32;
                out.push_str("\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(hex(u >> shift));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Renders a `[]string` bad value as `field.Error` does (JSON; an empty slice
/// is rendered as the nil slice `null`, which is what reaches it in practice).
fn go_json_string_list(values: &[String]) -> String {
    if values.is_empty() {
        return "null".to_string();
    }
    let mut out = String::from("[");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        go_json_string(v, &mut out);
    }
    out.push(']');
    out
}

/// `field.Invalid(path, value, detail).Error()` with an already rendered value.
fn field_invalid(path: &str, rendered_value: &str, detail: &str) -> String {
    if detail.is_empty() {
        format!("{path}: Invalid value: {rendered_value}")
    } else {
        format!("{path}: Invalid value: {rendered_value}: {detail}")
    }
}

/// `ErrorList.ToAggregate().Error()`: duplicates dropped, one error shown
/// bare, several as `[e1, e2]`. `None` when there are no errors.
fn aggregate(errs: Vec<String>) -> Option<String> {
    let mut unique: Vec<String> = Vec::with_capacity(errs.len());
    for e in errs {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    match unique.len() {
        0 => None,
        1 => unique.pop(),
        _ => Some(format!("[{}]", unique.join(", "))),
    }
}

/// Go's `strconv.ParseInt(s, 10, 64)` success test and value.
fn parse_go_int64(s: &str) -> Option<i64> {
    s.parse::<i64>().ok()
}

// ---------------------------------------------------------------------------
// Label selectors (pkg/labels)
// ---------------------------------------------------------------------------

/// A label selector operator (`selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

impl Operator {
    /// The `selection.Operator` string ("in", "notin", "=", "==", "!=",
    /// "exists", "!", "gt", "lt").
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

/// One requirement of a label selector: a key, an operator and values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// `labels.NewRequirement` (without a field path): validates the key,
    /// the number of values for the operator, integer values for gt/lt and
    /// every value as a label value. Values are kept in the given order.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, String> {
        let mut errs = Vec::new();
        let key_errs = validate_qualified_name(key);
        if !key_errs.is_empty() {
            errs.push(field_invalid("key", &go_quote(key), &key_errs.join("; ")));
        }
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errs.push(field_invalid(
                        "values",
                        &go_json_string_list(&values),
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errs.push(field_invalid(
                        "values",
                        &go_json_string_list(&values),
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(field_invalid(
                        "values",
                        &go_json_string_list(&values),
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(field_invalid(
                        "values",
                        &go_json_string_list(&values),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if parse_go_int64(v).is_none() {
                        errs.push(field_invalid(
                            &format!("values[{i}]"),
                            &go_quote(v),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let value_errs = validate_label_value(v);
            if !value_errs.is_empty() {
                errs.push(field_invalid(&format!("values[{i}][{key}]"), &go_quote(v), &value_errs.join("; ")));
            }
        }
        match aggregate(errs) {
            Some(e) => Err(e),
            None => Ok(Requirement { key: key.to_string(), operator, values }),
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    fn has_value(&self, value: &str) -> bool {
        self.values.iter().any(|v| v == value)
    }

    /// `Requirement.Matches`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let actual = labels.get(&self.key);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => actual.is_some_and(|v| self.has_value(v)),
            Operator::NotIn | Operator::NotEquals => actual.is_none_or(|v| !self.has_value(v)),
            Operator::Exists => actual.is_some(),
            Operator::DoesNotExist => actual.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(actual) = actual.and_then(|v| parse_go_int64(v)) else {
                    return false;
                };
                let [wanted] = self.values.as_slice() else {
                    return false;
                };
                let Some(wanted) = parse_go_int64(wanted) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    actual > wanted
                } else {
                    actual < wanted
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
        };
        f.write_str(op)?;
        let set = matches!(self.operator, Operator::In | Operator::NotIn);
        if set {
            f.write_str("(")?;
        }
        if let [only] = self.values.as_slice() {
            f.write_str(only)?;
        } else {
            let mut sorted: Vec<&str> = self.values.iter().map(String::as_str).collect();
            sorted.sort_unstable();
            f.write_str(&sorted.join(","))?;
        }
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A parsed label selector: the AND of its requirements, sorted by key.
/// The default value selects everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    /// `labels.Nothing()`: matches no object (a null metav1.LabelSelector).
    nothing: bool,
}

impl LabelSelector {
    /// `labels.Everything()`.
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// `labels.Nothing()`.
    pub fn nothing() -> Self {
        LabelSelector { requirements: Vec::new(), nothing: true }
    }

    /// `labels.Parse`: the `labelSelector` query syntax. The error is the
    /// text apimachinery produces.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parser = Parser::new(s);
        let mut requirements = parser.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements, nothing: false })
    }

    /// `labels.SelectorFromSet`: key=value for every entry (not validated).
    pub fn from_set(set: &BTreeMap<String, String>) -> Self {
        let requirements = set
            .iter()
            .map(|(k, v)| Requirement { key: k.clone(), operator: Operator::Equals, values: vec![v.clone()] })
            .collect();
        LabelSelector { requirements, nothing: false }
    }

    /// Builds a selector from requirements (sorted by key, like `Add`).
    pub fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector { requirements, nothing: false }
    }

    /// `Selector.Matches`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// `Selector.Empty`: true when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// True for `labels.Nothing()`.
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// `Selector.RequiresExactMatch`: the single value the first requirement
    /// on `label` pins it to (=, == or in with one value).
    pub fn requires_exact_match(&self, label: &str) -> Option<&str> {
        let r = self.requirements.iter().find(|r| r.key == label)?;
        match (r.operator, r.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [only]) => Some(only.as_str()),
            _ => None,
        }
    }

    /// `metav1.LabelSelectorAsSelector` on the JSON form of a
    /// metav1.LabelSelector: `null` selects nothing, `{}` everything.
    pub fn from_label_selector_json(v: &serde_json::Value) -> Result<Self, String> {
        let obj = match v {
            serde_json::Value::Null => return Ok(LabelSelector::nothing()),
            serde_json::Value::Object(obj) => obj,
            other => {
                return Err(format!(
                    "json: cannot unmarshal {} into Go value of type v1.LabelSelector",
                    json_type_name(other)
                ))
            }
        };
        let mut match_labels: Vec<(&str, &str)> = Vec::new();
        match obj.get("matchLabels") {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::Object(m)) => {
                for (k, val) in m {
                    match val {
                        serde_json::Value::String(s) => match_labels.push((k.as_str(), s.as_str())),
                        // A JSON null decodes into a Go string as "".
                        serde_json::Value::Null => match_labels.push((k.as_str(), "")),
                        other => {
                            return Err(format!(
                            "json: cannot unmarshal {} into Go struct field LabelSelector.matchLabels of type string",
                            json_type_name(other)
                        ))
                        }
                    }
                }
            }
            Some(other) => {
                return Err(format!(
                "json: cannot unmarshal {} into Go struct field LabelSelector.matchLabels of type map[string]string",
                json_type_name(other)
            ))
            }
        }
        match_labels.sort_by(|a, b| a.0.cmp(b.0));

        let empty = Vec::new();
        let expressions = match obj.get("matchExpressions") {
            None | Some(serde_json::Value::Null) => &empty,
            Some(serde_json::Value::Array(a)) => a,
            Some(other) => {
                return Err(format!(
                    "json: cannot unmarshal {} into Go struct field LabelSelector.matchExpressions of type \
                     []v1.LabelSelectorRequirement",
                    json_type_name(other)
                ))
            }
        };

        if match_labels.is_empty() && expressions.is_empty() {
            return Ok(LabelSelector::everything());
        }

        let mut requirements = Vec::with_capacity(match_labels.len() + expressions.len());
        for (k, v) in match_labels {
            requirements.push(Requirement::new(k, Operator::Equals, vec![v.to_string()])?);
        }
        for expr in expressions {
            let (key, operator, values) = parse_expression_json(expr)?;
            let op = match operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => return Err(format!("{} is not a valid label selector operator", go_quote(other))),
            };
            requirements.push(Requirement::new(&key, op, values)?);
        }
        Ok(LabelSelector::from_requirements(requirements))
    }
}

fn json_type_name(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// Reads one metav1.LabelSelectorRequirement (missing or null fields are
/// Go zero values).
fn parse_expression_json(expr: &serde_json::Value) -> Result<(String, String, Vec<String>), String> {
    let obj = match expr {
        serde_json::Value::Object(o) => o,
        serde_json::Value::Null => return Ok((String::new(), String::new(), Vec::new())),
        other => {
            return Err(format!(
                "json: cannot unmarshal {} into Go struct field LabelSelector.matchExpressions of type \
                 v1.LabelSelectorRequirement",
                json_type_name(other)
            ))
        }
    };
    let string_field = |name: &str| -> Result<String, String> {
        match obj.get(name) {
            None | Some(serde_json::Value::Null) => Ok(String::new()),
            Some(serde_json::Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(format!(
                "json: cannot unmarshal {} into Go struct field LabelSelectorRequirement.matchExpressions.{name} of \
                 type string",
                json_type_name(other)
            )),
        }
    };
    let key = string_field("key")?;
    let operator = string_field("operator")?;
    let mut values = Vec::new();
    match obj.get("values") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Array(a)) => {
            for v in a {
                match v {
                    serde_json::Value::String(s) => values.push(s.clone()),
                    serde_json::Value::Null => values.push(String::new()),
                    other => {
                        return Err(format!(
                            "json: cannot unmarshal {} into Go struct field LabelSelectorRequirement.matchExpressions.\
                             values of type string",
                            json_type_name(other)
                        ))
                    }
                }
            }
        }
        Some(other) => {
            return Err(format!(
                "json: cannot unmarshal {} into Go struct field LabelSelectorRequirement.matchExpressions.values of \
                 type []string",
                json_type_name(other)
            ))
        }
    }
    Ok((key, operator, values))
}

impl fmt::Display for LabelSelector {
    /// `Selector.String()`: requirements joined by ',' (sorted by key).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

// --- lexer -----------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn literal_token(lit: &[u8]) -> Option<Token> {
    Some(match lit {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_selector_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn bytes_to_string(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Byte lexer mirroring apimachinery's: `read` yields 0 at the end (a NUL
/// byte in the input therefore reads like the end, as in Go).
struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn scan_id_or_keyword(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special_symbol(ch) || is_selector_whitespace(ch) {
                self.unread();
                break;
            }
            buffer.push(ch);
        }
        match literal_token(&buffer) {
            Some(tok) => (tok, bytes_to_string(buffer)),
            None => (Token::Identifier, bytes_to_string(buffer)),
        }
    }

    fn scan_special_symbol(&mut self) -> (Token, String) {
        let mut last: Option<(Token, usize)> = None;
        let mut buffer = Vec::new();
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if !is_special_symbol(ch) {
                self.unread();
                break;
            }
            buffer.push(ch);
            if let Some(tok) = literal_token(&buffer) {
                last = Some((tok, buffer.len()));
            } else if last.is_some() {
                self.unread();
                break;
            }
        }
        match last {
            Some((tok, len)) => {
                buffer.truncate(len);
                (tok, bytes_to_string(buffer))
            }
            None => (Token::Error, format!("error expected: keyword found '{}'", bytes_to_string(buffer))),
        }
    }

    fn lex(&mut self) -> (Token, String) {
        let mut ch = self.read();
        while is_selector_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            (Token::EndOfString, String::new())
        } else if is_special_symbol(ch) {
            self.unread();
            self.scan_special_symbol()
        } else {
            self.unread();
            self.scan_id_or_keyword()
        }
    }
}

// --- parser ----------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

impl Parser {
    fn new(s: &str) -> Self {
        let mut lexer = Lexer { s: s.as_bytes(), pos: 0 };
        let mut items = Vec::new();
        loop {
            let (tok, lit) = lexer.lex();
            items.push((tok, lit));
            if tok == Token::EndOfString {
                break;
            }
        }
        Parser { items, position: 0 }
    }

    fn item(&self, idx: usize, ctx: Context) -> (Token, String) {
        let (tok, lit) = match self.items.get(idx) {
            Some((tok, lit)) => (*tok, lit.clone()),
            None => (Token::EndOfString, String::new()),
        };
        let tok = match (ctx, tok) {
            (Context::Values, Token::In | Token::NotIn) => Token::Identifier,
            _ => tok,
        };
        (tok, lit)
    }

    fn lookahead(&self, ctx: Context) -> (Token, String) {
        self.item(self.position, ctx)
    }

    fn consume(&mut self, ctx: Context) -> (Token, String) {
        let item = self.item(self.position, ctx);
        self.position = self.position.saturating_add(1);
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self.parse_requirement().map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!("found '{l2}', expected: identifier after ','"));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => return Err(format!("found '{lit}', expected: !, identifier, or 'end of string'")),
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, operator) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (Operator::Exists | Operator::DoesNotExist)) = operator {
            return Requirement::new(&key, op, Vec::new());
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, operator, values.into_iter().collect())
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut operator = None;
        let (mut tok, mut literal) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (tok, literal) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        let key_errs = validate_qualified_name(&literal);
        if !key_errs.is_empty() {
            return Err(field_invalid("<nil>", &go_quote(&literal), &key_errs.join("; ")));
        }
        let (t, _) = self.lookahead(Context::Values);
        if (t == Token::EndOfString || t == Token::Comma) && operator != Some(Operator::DoesNotExist) {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => return Err(format!("found '{lit}', expected: in, notin, =, ==, !=, gt, lt")),
        })
    }

    fn parse_values(&mut self) -> Result<BTreeSet<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let set = self.parse_identifiers_list()?;
                let (tok, _) = self.consume(Context::Values);
                if tok != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut set = BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    set.insert(lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Token::ClosedPar {
                        set.insert(String::new());
                        return Ok(set);
                    }
                    if tok2 == Token::Comma {
                        self.consume(Context::Values);
                        set.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(BTreeSet::from([String::new()]));
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier {
            Ok(BTreeSet::from([lit]))
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

// ---------------------------------------------------------------------------
// Field selectors (pkg/fields)
// ---------------------------------------------------------------------------

/// One term of a field selector: `field=value` or `field!=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    field: String,
    value: String,
    not_equals: bool,
}

impl FieldTerm {
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The unescaped value.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// True for `!=`, false for `=` / `==`.
    pub fn is_not_equals(&self) -> bool {
        self.not_equals
    }

    fn matches(&self, actual: &str) -> bool {
        (actual == self.value) != self.not_equals
    }
}

impl fmt::Display for FieldTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = if self.not_equals { "!=" } else { "=" };
        write!(f, "{}{}{}", self.field, op, escape_field_value(&self.value))
    }
}

/// A parsed field selector: the AND of its terms (in the sorted order of
/// their source text, like apimachinery). The default selects everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// `fields.EscapeValue`: backslash-escapes `\`, `,` and `=`.
pub fn escape_field_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `fields.UnescapeValue`: resolves `\\`, `\,` and `\=`; any other escape,
/// a trailing backslash or an unescaped `,`/`=` is an error (the unescaped
/// character is reported by its code point, as Go's `%v` of a rune does).
pub fn unescape_field_value(s: &str) -> Result<String, String> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                _ => return Err(format!("invalid field selector: invalid escape sequence: \\{c}")),
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => return Err(format!("invalid field selector: unescaped character in value: {}", c as u32)),
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

/// Splits on commas not preceded by an escaping backslash (escapes kept).
fn split_field_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(s.get(start..i).unwrap_or(""));
            start = i + 1;
        }
    }
    terms.push(s.get(start..).unwrap_or(""));
    terms
}

/// Splits a term at the first position where `!=`, `==` or `=` starts
/// (checked in that order): (lhs, is_not_equals, raw rhs).
fn split_field_term(term: &str) -> Option<(&str, bool, &str)> {
    for (i, _) in term.char_indices() {
        let rest = term.get(i..)?;
        for (op, not_equals) in [("!=", true), ("==", false), ("=", false)] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((term.get(..i)?, not_equals, rhs));
            }
        }
    }
    None
}

impl FieldSelector {
    /// `fields.Everything()`.
    pub fn everything() -> Self {
        FieldSelector::default()
    }

    /// `fields.ParseSelector`: `a=b,c==d,e!=f` with `\,` `\=` `\\` escapes
    /// in values. Fields are taken literally (no trimming, no escapes).
    /// Terms whose field and value are both empty (`=`, `!=`) are dropped,
    /// as apimachinery's identity transform does.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = split_field_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::with_capacity(parts.len());
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((lhs, not_equals, rhs)) = split_field_term(part) else {
                return Err(format!("invalid selector: '{s}'; can't understand '{part}'"));
            };
            let value = unescape_field_value(rhs)?;
            if lhs.is_empty() && value.is_empty() {
                continue;
            }
            terms.push(FieldTerm { field: lhs.to_string(), value, not_equals });
        }
        Ok(FieldSelector { terms })
    }

    /// Builds a selector requiring `field == value` (`OneTermEqualSelector`).
    pub fn one_term_equal(field: &str, value: &str) -> Self {
        FieldSelector {
            terms: vec![FieldTerm { field: field.to_string(), value: value.to_string(), not_equals: false }],
        }
    }

    /// `Selector.Matches`; `get` returns an object's value for a field path.
    /// A missing field (`None`) compares as the empty string, like a lookup
    /// of an absent key in Go's `fields.Set`.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| t.matches(get(&t.field).as_deref().unwrap_or("")))
    }

    /// `Selector.Empty`.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    /// The distinct field paths the selector mentions, in term order.
    pub fn fields(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::with_capacity(self.terms.len());
        for t in &self.terms {
            if !out.contains(&t.field.as_str()) {
                out.push(&t.field);
            }
        }
        out
    }

    /// `Selector.RequiresExactMatch`: the value of the first `field=value`
    /// term on `field`, if any.
    pub fn required_value(&self, field: &str) -> Option<&str> {
        self.terms.iter().find(|t| !t.not_equals && t.field == field).map(|t| t.value.as_str())
    }
}

impl fmt::Display for FieldSelector {
    /// `Selector.String()`: terms joined by ',' with escaped values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{t}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NAME_PART_REGEX_ERR: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must \
        start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
        validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const LABEL_VALUE_REGEX_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, \
        '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or \
        '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    const SUBDOMAIN_REGEX_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
        characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used \
        for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const LABEL_REGEX_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
        '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for \
        validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn parse_ok(s: &str) -> LabelSelector {
        match LabelSelector::parse(s) {
            Ok(sel) => sel,
            Err(e) => panic!("{s:?} should parse, got {e}"),
        }
    }

    fn parse_err(s: &str) -> String {
        match LabelSelector::parse(s) {
            Ok(sel) => panic!("{s:?} should fail, got {sel:?}"),
            Err(e) => e,
        }
    }

    fn fparse_ok(s: &str) -> FieldSelector {
        match FieldSelector::parse(s) {
            Ok(sel) => sel,
            Err(e) => panic!("{s:?} should parse, got {e}"),
        }
    }

    fn fparse_err(s: &str) -> String {
        match FieldSelector::parse(s) {
            Ok(sel) => panic!("{s:?} should fail, got {sel:?}"),
            Err(e) => e,
        }
    }

    // --- validation ----------------------------------------------------------

    #[test]
    fn qualified_name_valid() {
        for ok in [
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "1234",
            "simple/simple",
            "now-with-dashes/simple",
            "now-with-dashes/now-with-dashes",
            "now.with.dots/simple",
            "now-with.dashes-and.dots/simple",
            "1-num.2-num/3-num",
            "1234/5678",
            "1.2.3.4/5678",
            "Uppercase_Is_OK_123",
            "example.com/Uppercase_Is_OK_123",
            "requests.storage-foo",
            &"a".repeat(63),
            &format!("{}/b", "a".repeat(253)),
        ] {
            assert_eq!(validate_qualified_name(ok), Vec::<String>::new(), "{ok}");
        }
    }

    #[test]
    fn qualified_name_invalid() {
        for bad in [
            "nospecialchars%^=@",
            "cantendwithadash-",
            "-cantstartwithadash-",
            "only/one/slash",
            "Example.com/abc",
            "example_com/abc",
            "example.com/",
            "/simple",
            &"a".repeat(64),
            &format!("{}/b", "a".repeat(254)),
            "",
            "ünïcode",
        ] {
            assert!(!validate_qualified_name(bad).is_empty(), "{bad}");
        }
        assert_eq!(validate_qualified_name("*bar"), vec![NAME_PART_REGEX_ERR.to_string()]);
        assert_eq!(
            validate_qualified_name(""),
            vec!["name part must be non-empty".to_string(), NAME_PART_REGEX_ERR.to_string()]
        );
        assert_eq!(validate_qualified_name("/a"), vec!["prefix part must be non-empty".to_string()]);
        assert_eq!(
            validate_qualified_name("a/"),
            vec!["name part must be non-empty".to_string(), NAME_PART_REGEX_ERR.to_string()]
        );
        assert_eq!(
            validate_qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters".to_string()]
        );
        assert_eq!(validate_qualified_name("Foo/bar"), vec![format!("prefix part {SUBDOMAIN_REGEX_ERR}")]);
        assert_eq!(
            validate_qualified_name(&format!("{}/bar", "a".repeat(254))),
            vec!["prefix part must be no more than 253 characters".to_string()]
        );
        assert_eq!(
            validate_qualified_name("a/b/c"),
            vec!["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
                 with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
                 validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix \
                 and '/' (e.g. 'example.com/MyName')"
                .to_string()]
        );
        // Both prefix and name errors are reported, prefix first.
        assert_eq!(
            validate_qualified_name("A/-"),
            vec![format!("prefix part {SUBDOMAIN_REGEX_ERR}"), NAME_PART_REGEX_ERR.to_string()]
        );
    }

    #[test]
    fn label_value_validation() {
        for ok in ["", "simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "a", "A_b.C-9"] {
            assert_eq!(validate_label_value(ok), Vec::<String>::new(), "{ok}");
        }
        assert!(validate_label_value(&"a".repeat(63)).is_empty());
        assert_eq!(validate_label_value(&"a".repeat(64)), vec!["must be no more than 63 characters".to_string()]);
        assert_eq!(validate_label_value("-a"), vec![LABEL_VALUE_REGEX_ERR.to_string()]);
        assert_eq!(
            validate_label_value(&format!("-{}", "a".repeat(64))),
            vec!["must be no more than 63 characters".to_string(), LABEL_VALUE_REGEX_ERR.to_string()]
        );
        for bad in ["nospecialchars%^=@", "Tama-nui-te-rā.is.Māori.sun", "\\backslashes\\are\\bad", "-starts", "ends-"]
        {
            assert!(!validate_label_value(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn dns1123_subdomain_validation() {
        for ok in ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "a.a", "ab.a", "a.b.c"] {
            assert!(validate_dns1123_subdomain(ok).is_empty(), "{ok}");
        }
        assert!(validate_dns1123_subdomain(&"a".repeat(253)).is_empty());
        // Per-label length is not checked, as in apimachinery.
        assert!(validate_dns1123_subdomain(&format!("{}.com", "a".repeat(70))).is_empty());
        for bad in ["", "A", "ABC", "aBc", "A1", "a_", "a.", ".a", "a..b", "-a", "a-", "a.-a", "a@b", "a,b", "ü"] {
            assert_eq!(validate_dns1123_subdomain(bad), vec![SUBDOMAIN_REGEX_ERR.to_string()], "{bad}");
        }
        assert_eq!(validate_dns1123_subdomain(&"a".repeat(254)), vec!["must be no more than 253 characters"]);
        assert_eq!(
            validate_dns1123_subdomain(&"A".repeat(254)),
            vec!["must be no more than 253 characters".to_string(), SUBDOMAIN_REGEX_ERR.to_string()]
        );
    }

    #[test]
    fn dns1123_label_validation() {
        for ok in ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2"] {
            assert!(validate_dns1123_label(ok).is_empty(), "{ok}");
        }
        assert!(validate_dns1123_label(&"a".repeat(63)).is_empty());
        assert_eq!(validate_dns1123_label("a.b"), vec!["must not contain dots"]);
        assert_eq!(validate_dns1123_label("A"), vec![LABEL_REGEX_ERR.to_string()]);
        assert_eq!(validate_dns1123_label(""), vec![LABEL_REGEX_ERR.to_string()]);
        assert_eq!(validate_dns1123_label(&"a".repeat(64)), vec!["must be no more than 63 characters"]);
        assert_eq!(
            validate_dns1123_label(&format!("{}.b", "a".repeat(63))),
            vec!["must be no more than 63 characters".to_string(), "must not contain dots".to_string()]
        );
        for bad in ["", "A", "ABC", "aBc", "A1", "a_", "a.", ".a", "-a", "a-", "a b", "_", "ü"] {
            assert!(!validate_dns1123_label(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn regex_error_format() {
        assert_eq!(regex_error("m", "r", &[]), "m (regex used for validation is 'r')");
        assert_eq!(regex_error("m", "r", &["x"]), "m (e.g. 'x', regex used for validation is 'r')");
        assert_eq!(regex_error("m", "r", &["x", "y"]), "m (e.g. 'x',  or 'y', regex used for validation is 'r')");
    }

    #[test]
    fn go_quote_matches_strconv_quote() {
        assert_eq!(go_quote(""), "\"\"");
        assert_eq!(go_quote("abc"), "\"abc\"");
        assert_eq!(go_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(go_quote("\n\t\r\u{7}\u{8}\u{c}\u{b}"), "\"\\n\\t\\r\\a\\b\\f\\v\"");
        assert_eq!(go_quote("\u{0}\u{1f}\u{7f}"), "\"\\x00\\x1f\\x7f\"");
        assert_eq!(go_quote("\u{85}\u{a0}\u{200b}\u{feff}"), "\"\\u0085\\u00a0\\u200b\\ufeff\"");
        assert_eq!(go_quote("ünï 日本 🦙"), "\"ünï 日本 🦙\"");
        assert_eq!(go_quote("\u{10ffff}"), "\"\\U0010ffff\"");
        assert_eq!(go_quote("\u{e000}"), "\"\\ue000\"");
    }

    #[test]
    fn go_json_list_format() {
        assert_eq!(go_json_string_list(&[]), "null");
        assert_eq!(go_json_string_list(&["a".into(), "b".into()]), "[\"a\",\"b\"]");
        assert_eq!(
            go_json_string_list(&["<&>\"\\\n\u{1}\u{2028}ü".into()]),
            "[\"\\u003c\\u0026\\u003e\\\"\\\\\\n\\u0001\\u2028ü\"]"
        );
    }

    // --- label selector parsing ------------------------------------------

    #[test]
    fn label_parse_valid_forms() {
        for s in [
            "",
            "   ",
            "\t\r\n",
            "x=a,y=b,z=c",
            "x!=a,y=b",
            "x=",
            "x= ",
            "x=,z= ",
            "x= ,z= ",
            "!x",
            "x>1",
            "x>1,z<5",
            "x in (a)",
            "x in (a,b)",
            "x notin (a)",
            "x in ()",
            "x in (,)",
            "x in (a,)",
            "x in (,a)",
            "x in (a,,b)",
            "x in (,,,)",
            "x in (in, notin)",
            "x==a",
            "in",
            "notin",
            "in in (in)",
            "notin notin (notin)",
            "!in",
            "a.b/c-d_e.F",
            "x = a , y != b",
            "  x  in  (  a  ,  b  )  ,  !y  ",
            "x,y,z",
            "x>0",
            "x<5",
            "x in (,,,)",
            "x in (,,,,,)",
            "x in (a,,,b)",
            "x in (a,,,,b)",
            "x=in",
        ] {
            parse_ok(s);
        }
    }

    #[test]
    fn label_parse_structure_and_display() {
        let sel = parse_ok("z=c, x in (b,a,a), !y, w, v notin (), u!=q, t>3, s<0, r==d, q=");
        let rendered: Vec<String> = sel.requirements().iter().map(ToString::to_string).collect();
        assert_eq!(
            rendered,
            ["q=", "r==d", "s<0", "t>3", "u!=q", "v notin ()", "w", "x in (a,b)", "!y", "z=c"].map(String::from)
        );
        assert_eq!(sel.to_string(), "q=,r==d,s<0,t>3,u!=q,v notin (),w,x in (a,b),!y,z=c");

        let r = sel.requirements().iter().find(|r| r.key() == "x").cloned();
        assert_eq!(r.as_ref().map(Requirement::operator), Some(Operator::In));
        assert_eq!(r.as_ref().map(|r| r.values().to_vec()), Some(vec!["a".to_string(), "b".to_string()]));

        // Values are a sorted set.
        assert_eq!(parse_ok("x in (c,b,a,b)").requirements()[0].values(), ["a", "b", "c"]);
        assert_eq!(parse_ok("x in (a,,b)").requirements()[0].values(), ["", "a", "b"]);
        assert_eq!(parse_ok("x in (,)").requirements()[0].values(), [""]);
        assert_eq!(parse_ok("x in ()").requirements()[0].values(), [""]);
        assert_eq!(parse_ok("x in (in,notin)").requirements()[0].values(), ["in", "notin"]);
        assert_eq!(parse_ok("x=").requirements()[0].values(), [""]);
        assert_eq!(parse_ok("x=in").requirements()[0].values(), ["in"]);

        // Operators.
        let ops = |s: &str| parse_ok(s).requirements().iter().map(Requirement::operator).collect::<Vec<_>>();
        assert_eq!(ops("a"), [Operator::Exists]);
        assert_eq!(ops("!a"), [Operator::DoesNotExist]);
        assert_eq!(ops("a=b"), [Operator::Equals]);
        assert_eq!(ops("a==b"), [Operator::DoubleEquals]);
        assert_eq!(ops("a!=b"), [Operator::NotEquals]);
        assert_eq!(ops("a in (b)"), [Operator::In]);
        assert_eq!(ops("a notin (b)"), [Operator::NotIn]);
        assert_eq!(ops("a>1"), [Operator::GreaterThan]);
        assert_eq!(ops("a<1"), [Operator::LessThan]);
        assert_eq!(ops("in in (x)"), [Operator::In]);
        assert_eq!(parse_ok("in in (x)").requirements()[0].key(), "in");

        // Keys sorted, stable for duplicates.
        assert_eq!(parse_ok("b=1,a=2,b=0").to_string(), "a=2,b=1,b=0");
        assert_eq!(parse_ok("x  =  a").to_string(), "x=a");
        assert_eq!(parse_ok("").to_string(), "");
        assert!(parse_ok("").is_empty());
        assert!(parse_ok("  ").is_empty());
        assert!(!parse_ok("a").is_empty());
    }

    #[test]
    fn label_parse_errors() {
        let cases: &[(&str, &str)] = &[
            ("x=a||y=b", "unable to parse requirement: values[0][x]: Invalid value: \"a||y\": "),
            ("x==a==b", "found '==', expected: ',' or 'end of string'"),
            ("!x=a", "found '=', expected: ',' or 'end of string'"),
            ("!x b", "found 'b', expected: ',' or 'end of string'"),
            ("x b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
            ("x (", "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"),
            ("x !", "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt"),
            ("x in", "unable to parse requirement: found '' expected: '('"),
            ("x in a", "unable to parse requirement: found 'a' expected: '('"),
            ("x in in", "unable to parse requirement: found 'in' expected: '('"),
            ("x in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
            ("x in ((", "unable to parse requirement: found '(', expected: ',', ')' or identifier"),
            ("x in (a", "unable to parse requirement: found '', expected: ',' or ')'"),
            ("x in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'"),
            ("x in (a,", "unable to parse requirement: found '', expected: ',', or identifier"),
            ("x in (a,=)", "unable to parse requirement: found '=', expected: ',', or identifier"),
            ("x in (a))", "found ')', expected: ',' or 'end of string'"),
            // An even run of commas trips apimachinery's pairwise comma handling.
            ("x in (,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
            ("x in (a,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
            ("x=(a)", "unable to parse requirement: found '(', expected: identifier"),
            ("x===a", "unable to parse requirement: found '=', expected: identifier"),
            ("x=a,", "found '', expected: identifier after ','"),
            ("x=a,,y", "found ',', expected: identifier after ','"),
            ("x=a,=", "found '=', expected: identifier after ','"),
            (",x", "found ',', expected: !, identifier, or 'end of string'"),
            ("=x", "found '=', expected: !, identifier, or 'end of string'"),
            ("(", "found '(', expected: !, identifier, or 'end of string'"),
            (")", "found ')', expected: !, identifier, or 'end of string'"),
            ("==", "found '==', expected: !, identifier, or 'end of string'"),
            ("!=a", "found '!=', expected: !, identifier, or 'end of string'"),
            ("!", "unable to parse requirement: found '', expected: identifier"),
            ("!!x", "unable to parse requirement: found '!', expected: identifier"),
            ("! =x", "unable to parse requirement: found '=', expected: identifier"),
            ("x=a b", "found 'b', expected: ',' or 'end of string'"),
            (
                "x>1.1",
                "unable to parse requirement: values[0]: Invalid value: \"1.1\": for 'Gt', 'Lt' operators, the value \
                 must be an integer",
            ),
            (
                "x<a",
                "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value \
                 must be an integer",
            ),
            (
                "x>",
                "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value \
                 must be an integer",
            ),
            (
                "x>99999999999999999999",
                "unable to parse requirement: values[0]: Invalid value: \"99999999999999999999\": for 'Gt', 'Lt' \
                 operators, the value must be an integer",
            ),
        ];
        for (input, want) in cases {
            let got = parse_err(input);
            assert!(got.starts_with(want), "{input:?}: got {got:?}, want prefix {want:?}");
        }
    }

    #[test]
    fn label_parse_key_errors_exact() {
        assert_eq!(
            parse_err("*bar"),
            format!("unable to parse requirement: <nil>: Invalid value: \"*bar\": {NAME_PART_REGEX_ERR}")
        );
        assert_eq!(
            parse_err("x=a||y=b"),
            format!("unable to parse requirement: values[0][x]: Invalid value: \"a||y\": {LABEL_VALUE_REGEX_ERR}")
        );
        assert_eq!(
            parse_err("a/b/c=d"),
            "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name must consist of \
             alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
             'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
             '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. \
             'example.com/MyName')"
        );
        assert_eq!(
            parse_err("/x"),
            "unable to parse requirement: <nil>: Invalid value: \"/x\": prefix part must be non-empty"
        );
        assert_eq!(
            parse_err("A/"),
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"A/\": prefix part {SUBDOMAIN_REGEX_ERR}; name \
                 part must be non-empty; {NAME_PART_REGEX_ERR}"
            )
        );
        assert_eq!(
            parse_err("ü"),
            format!("unable to parse requirement: <nil>: Invalid value: \"ü\": {NAME_PART_REGEX_ERR}")
        );
        assert_eq!(
            parse_err("a\u{1}b"),
            format!("unable to parse requirement: <nil>: Invalid value: \"a\\x01b\": {NAME_PART_REGEX_ERR}")
        );
        // Key errors are reported before anything after the key is looked at.
        assert_eq!(
            parse_err("-x in ("),
            format!("unable to parse requirement: <nil>: Invalid value: \"-x\": {NAME_PART_REGEX_ERR}")
        );
    }

    #[test]
    fn label_parse_value_errors_exact() {
        assert_eq!(
            parse_err("x=-a"),
            format!("unable to parse requirement: values[0][x]: Invalid value: \"-a\": {LABEL_VALUE_REGEX_ERR}")
        );
        assert_eq!(
            parse_err("x in (a,b-)"),
            format!("unable to parse requirement: values[1][x]: Invalid value: \"b-\": {LABEL_VALUE_REGEX_ERR}")
        );
        // Index refers to the sorted, deduplicated set.
        assert_eq!(
            parse_err("x in (z,-b,z)"),
            format!("unable to parse requirement: values[0][x]: Invalid value: \"-b\": {LABEL_VALUE_REGEX_ERR}")
        );
        let long = "a".repeat(64);
        assert_eq!(
            parse_err(&format!("x={long}")),
            format!(
                "unable to parse requirement: values[0][x]: Invalid value: \"{long}\": must be no more than 63 \
                 characters"
            )
        );
        let long_bad = format!("{long}-");
        assert_eq!(
            parse_err(&format!("x={long_bad}")),
            format!(
                "unable to parse requirement: values[0][x]: Invalid value: \"{long_bad}\": must be no more than 63 \
                 characters; {LABEL_VALUE_REGEX_ERR}"
            )
        );
        // Gt with a negative number: an integer, but not a valid label value.
        assert_eq!(
            parse_err("x>-1"),
            format!("unable to parse requirement: values[0][x]: Invalid value: \"-1\": {LABEL_VALUE_REGEX_ERR}")
        );
        // Two errors aggregate into brackets.
        assert_eq!(
            parse_err("x<a-"),
            format!(
                "unable to parse requirement: [values[0]: Invalid value: \"a-\": for 'Gt', 'Lt' operators, the value \
                 must be an integer, values[0][x]: Invalid value: \"a-\": {LABEL_VALUE_REGEX_ERR}]"
            )
        );
        // Several bad values in a set.
        assert_eq!(
            parse_err("k in (-a,-b)"),
            format!(
                "unable to parse requirement: [values[0][k]: Invalid value: \"-a\": {LABEL_VALUE_REGEX_ERR}, \
                 values[1][k]: Invalid value: \"-b\": {LABEL_VALUE_REGEX_ERR}]"
            )
        );
    }

    #[test]
    fn label_parse_nul_byte_behaves_like_go() {
        // At a token start a NUL reads as end of input; the rest is ignored.
        assert_eq!(parse_ok("a \u{0}!!!").to_string(), "a");
        assert_eq!(parse_ok("a \u{0}, b").to_string(), "a");
        // Right after a symbol the NUL is swallowed by the symbol scan.
        assert_eq!(parse_ok("a,\u{0}b").to_string(), "a,b");
        // Inside an identifier it ends the identifier and is consumed.
        assert_eq!(parse_ok("a=b\u{0}").to_string(), "a=b");
        assert_eq!(
            parse_err("a\u{0}b"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
    }

    #[test]
    fn label_matching() {
        let l = labels(&[("a", "1"), ("b", "x"), ("n", "10"), ("neg", "-5"), ("e", "")]);
        let m = |s: &str| parse_ok(s).matches(&l);
        assert!(m(""));
        assert!(m("a"));
        assert!(!m("zz"));
        assert!(m("!zz"));
        assert!(!m("!a"));
        assert!(m("a=1"));
        assert!(m("a==1"));
        assert!(!m("a=2"));
        assert!(!m("zz="));
        assert!(m("e="));
        assert!(m("a!=2"));
        assert!(!m("a!=1"));
        assert!(m("zz!=1"));
        assert!(m("b in (x,y)"));
        assert!(!m("b in (y,z)"));
        assert!(!m("zz in (x)"));
        assert!(!m("zz in (x, )"));
        assert!(m("e in (,x)"));
        assert!(m("b notin (y,z)"));
        assert!(!m("b notin (x)"));
        assert!(m("zz notin (x)"));
        assert!(m("n>9"));
        assert!(!m("n>10"));
        assert!(m("n<11"));
        assert!(!m("n<10"));
        assert!(m("neg<0"));
        assert!(LabelSelector::parse("neg>-6").is_err());
        assert!(!m("b>0"));
        assert!(!m("b<0"));
        assert!(!m("zz>0"));
        assert!(!m("zz<0"));
        assert!(LabelSelector::parse("n>+9").is_err());
        assert!(m("a=1,b=x,n>2"));
        assert!(!m("a=1,b=y"));
        assert!(m("a=1,a!=2"));
        assert!(!LabelSelector::nothing().matches(&l));
        assert!(!LabelSelector::nothing().matches(&BTreeMap::new()));
        assert!(LabelSelector::everything().matches(&BTreeMap::new()));
    }

    #[test]
    fn label_exact_match_and_from_set() {
        let sel = parse_ok("a=1,b in (x),c in (x,y),d!=1,e==2");
        assert_eq!(sel.requires_exact_match("a"), Some("1"));
        assert_eq!(sel.requires_exact_match("b"), Some("x"));
        assert_eq!(sel.requires_exact_match("c"), None);
        assert_eq!(sel.requires_exact_match("d"), None);
        assert_eq!(sel.requires_exact_match("e"), Some("2"));
        assert_eq!(sel.requires_exact_match("f"), None);
        let set = labels(&[("b", "2"), ("a", "1")]);
        let from = LabelSelector::from_set(&set);
        assert_eq!(from.to_string(), "a=1,b=2");
        assert!(from.matches(&set));
        assert!(LabelSelector::from_set(&BTreeMap::new()).is_empty());
    }

    #[test]
    fn requirement_new_errors() {
        assert_eq!(
            Requirement::new("-k", Operator::Exists, vec![]).err(),
            Some(format!("key: Invalid value: \"-k\": {NAME_PART_REGEX_ERR}"))
        );
        assert_eq!(
            Requirement::new("k", Operator::In, vec![]).err().as_deref(),
            Some("values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty")
        );
        assert_eq!(
            Requirement::new("k", Operator::Exists, vec!["a".into()]).err().as_deref(),
            Some("values: Invalid value: [\"a\"]: values set must be empty for exists and does not exist")
        );
        assert_eq!(
            Requirement::new("k", Operator::Equals, vec!["a".into(), "b".into()]).err().as_deref(),
            Some("values: Invalid value: [\"a\",\"b\"]: exact-match compatibility requires one single value")
        );
        assert_eq!(
            Requirement::new("k", Operator::GreaterThan, vec!["1".into(), "2".into()]).err().as_deref(),
            Some("values: Invalid value: [\"1\",\"2\"]: for 'Gt', 'Lt' operators, exactly one value is required")
        );
        // Duplicate messages are dropped from the aggregate.
        assert_eq!(
            Requirement::new("k", Operator::In, vec!["-a".into(), "-a".into()]).err(),
            Some(format!(
                "[values[0][k]: Invalid value: \"-a\": {LABEL_VALUE_REGEX_ERR}, values[1][k]: Invalid value: \"-a\": \
                 {LABEL_VALUE_REGEX_ERR}]"
            ))
        );
        assert!(Requirement::new("k", Operator::In, vec!["b".into(), "a".into(), "b".into()]).is_ok());
    }

    // --- metav1.LabelSelector --------------------------------------------

    #[test]
    fn label_selector_json() {
        let null = LabelSelector::from_label_selector_json(&serde_json::Value::Null);
        assert_eq!(null, Ok(LabelSelector::nothing()));
        assert!(!LabelSelector::nothing().is_empty());
        assert!(LabelSelector::nothing().is_nothing());

        let empty = LabelSelector::from_label_selector_json(&json!({}));
        assert_eq!(empty, Ok(LabelSelector::everything()));
        let empty2 = LabelSelector::from_label_selector_json(&json!({"matchLabels": {}, "matchExpressions": []}));
        assert_eq!(empty2, Ok(LabelSelector::everything()));
        let empty3 = LabelSelector::from_label_selector_json(&json!({"matchLabels": null, "matchExpressions": null}));
        assert_eq!(empty3, Ok(LabelSelector::everything()));

        let sel = LabelSelector::from_label_selector_json(&json!({
            "matchLabels": {"z": "1", "app": "llama"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["b", "a"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "gpu", "operator": "Exists"},
                {"key": "old", "operator": "DoesNotExist", "values": []},
            ]
        }))
        .unwrap_or_default();
        assert_eq!(sel.to_string(), "app=llama,env notin (prod),gpu,!old,tier in (a,b),z=1");
        assert!(sel.matches(&labels(&[("app", "llama"), ("z", "1"), ("tier", "a"), ("gpu", "")])));
        assert!(!sel.matches(&labels(&[("app", "llama"), ("z", "1"), ("tier", "c"), ("gpu", "")])));
        assert!(!sel.matches(&labels(&[("app", "llama"), ("z", "1"), ("tier", "a")])));
        assert!(!sel.matches(&labels(&[("app", "llama"), ("z", "1"), ("tier", "a"), ("gpu", ""), ("old", "")])));
        assert!(!sel.matches(&labels(&[("app", "llama"), ("z", "1"), ("tier", "a"), ("gpu", ""), ("env", "prod")])));
        // Values keep their given order (only Display sorts).
        assert_eq!(
            sel.requirements().iter().find(|r| r.key() == "tier").map(|r| r.values().to_vec()),
            Some(vec!["b".to_string(), "a".to_string()])
        );
    }

    #[test]
    fn label_selector_json_errors() {
        let e = |v: serde_json::Value| LabelSelector::from_label_selector_json(&v).err().unwrap_or_default();
        assert_eq!(
            e(json!({"matchExpressions": [{"key": "k", "operator": "Seriously"}]})),
            "\"Seriously\" is not a valid label selector operator"
        );
        assert_eq!(
            e(json!({"matchExpressions": [{"key": "k", "operator": "in"}]})),
            "\"in\" is not a valid label selector operator"
        );
        assert_eq!(e(json!({"matchExpressions": [{"key": "k"}]})), "\"\" is not a valid label selector operator");
        assert_eq!(
            e(json!({"matchExpressions": [{"key": "k", "operator": "In", "values": []}]})),
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            e(json!({"matchExpressions": [{"key": "k", "operator": "NotIn"}]})),
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            e(json!({"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["a"]}]})),
            "values: Invalid value: [\"a\"]: values set must be empty for exists and does not exist"
        );
        assert_eq!(
            e(json!({"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["-"]}]})),
            format!(
                "[values: Invalid value: [\"-\"]: values set must be empty for exists and does not exist, \
                 values[0][k]: Invalid value: \"-\": {LABEL_VALUE_REGEX_ERR}]"
            )
        );
        assert_eq!(
            e(json!({"matchLabels": {"-bad": "x"}})),
            format!("key: Invalid value: \"-bad\": {NAME_PART_REGEX_ERR}")
        );
        assert_eq!(
            e(json!({"matchLabels": {"k": "-bad"}})),
            format!("values[0][k]: Invalid value: \"-bad\": {LABEL_VALUE_REGEX_ERR}")
        );
        assert_eq!(
            e(json!({"matchExpressions": [{"key": "", "operator": "Exists"}]})),
            format!("key: Invalid value: \"\": name part must be non-empty; {NAME_PART_REGEX_ERR}")
        );
        // Malformed JSON shapes are errors, never panics.
        for bad in [
            json!(1),
            json!("x"),
            json!([]),
            json!({"matchLabels": []}),
            json!({"matchLabels": {"a": 1}}),
            json!({"matchExpressions": {}}),
            json!({"matchExpressions": [1]}),
            json!({"matchExpressions": [{"key": 1, "operator": "In", "values": ["a"]}]}),
            json!({"matchExpressions": [{"key": "k", "operator": "In", "values": "a"}]}),
            json!({"matchExpressions": [{"key": "k", "operator": "In", "values": [1]}]}),
        ] {
            assert!(LabelSelector::from_label_selector_json(&bad).is_err(), "{bad}");
        }
    }

    // --- field selectors ---------------------------------------------------

    #[test]
    fn field_parse_basic() {
        let sel = fparse_ok("metadata.name=foo,spec.x==bar,status.phase!=Running");
        assert_eq!(sel.fields(), ["metadata.name", "spec.x", "status.phase"]);
        assert_eq!(sel.to_string(), "metadata.name=foo,spec.x=bar,status.phase!=Running");
        assert_eq!(sel.required_value("metadata.name"), Some("foo"));
        assert_eq!(sel.required_value("spec.x"), Some("bar"));
        assert_eq!(sel.required_value("status.phase"), None);
        assert_eq!(sel.required_value("nope"), None);
        assert!(!sel.is_empty());
        assert!(sel.terms()[2].is_not_equals());

        assert!(fparse_ok("").is_empty());
        assert!(fparse_ok(",").is_empty());
        assert!(fparse_ok(",,,").is_empty());
        assert!(fparse_ok("=").is_empty());
        assert!(fparse_ok("==").is_empty());
        assert!(fparse_ok("!=").is_empty());
        assert!(fparse_ok("=,!=,").is_empty());
        assert_eq!(fparse_ok("=x").fields(), [""]);
        assert_eq!(fparse_ok("x=").required_value("x"), Some(""));

        // Terms are sorted by their source text.
        assert_eq!(fparse_ok("b=1,a=2").to_string(), "a=2,b=1");
        // Whitespace is not trimmed.
        assert_eq!(fparse_ok(" a = b ").fields(), [" a "]);
        assert_eq!(fparse_ok(" a = b ").required_value(" a "), Some(" b "));
        // Duplicate fields listed once.
        assert_eq!(fparse_ok("a=1,a!=2,b=3").fields(), ["a", "b"]);
        // The first = term wins for required_value.
        assert_eq!(fparse_ok("a!=1,a=2,a=3").required_value("a"), Some("2"));
        // Operator precedence at the first operator position.
        let t = fparse_ok("a!b=c");
        assert_eq!((t.terms()[0].field(), t.terms()[0].value()), ("a!b", "c"));
        let t = fparse_ok("a=!b");
        assert_eq!((t.terms()[0].field(), t.terms()[0].value(), t.terms()[0].is_not_equals()), ("a", "!b", false));
        let t = fparse_ok("a==!b");
        assert_eq!((t.terms()[0].field(), t.terms()[0].value()), ("a", "!b"));
        // Unicode is fine anywhere.
        let t = fparse_ok("métadata.näme=日本🦙");
        assert_eq!(t.required_value("métadata.näme"), Some("日本🦙"));
    }

    #[test]
    fn field_parse_escapes() {
        let t = fparse_ok(r"a=b\,c");
        assert_eq!(t.required_value("a"), Some("b,c"));
        assert_eq!(t.to_string(), r"a=b\,c");
        let t = fparse_ok(r"a=b\=c\\d");
        assert_eq!(t.required_value("a"), Some(r"b=c\d"));
        assert_eq!(t.to_string(), r"a=b\=c\\d");
        let t = fparse_ok(r"a=x\\,b=y");
        assert_eq!(t.required_value("a"), Some(r"x\"));
        assert_eq!(t.required_value("b"), Some("y"));
        let t = fparse_ok(r"a!=\,\=\\");
        assert_eq!(t.terms()[0].value(), r",=\");
        // Field names are not unescaped; the first '=' splits even if escaped.
        let t = fparse_ok(r"a\,b=c");
        assert_eq!(t.fields(), [r"a\,b"]);
        let t = fparse_ok(r"a\=b");
        assert_eq!((t.terms()[0].field(), t.terms()[0].value()), (r"a\", "b"));
        assert_eq!(escape_field_value(r"a\b,c=d!e"), r"a\\b\,c\=d!e");
        assert_eq!(unescape_field_value("plain"), Ok("plain".to_string()));
    }

    #[test]
    fn field_parse_errors() {
        assert_eq!(fparse_err("a"), "invalid selector: 'a'; can't understand 'a'");
        assert_eq!(fparse_err("x=1,a"), "invalid selector: 'x=1,a'; can't understand 'a'");
        assert_eq!(fparse_err("b,a"), "invalid selector: 'b,a'; can't understand 'a'");
        assert_eq!(fparse_err("a!b"), "invalid selector: 'a!b'; can't understand 'a!b'");
        assert_eq!(fparse_err(" "), "invalid selector: ' '; can't understand ' '");
        assert_eq!(fparse_err("a=b=c"), "invalid field selector: unescaped character in value: 61");
        assert_eq!(fparse_err("a==b=c"), "invalid field selector: unescaped character in value: 61");
        assert_eq!(fparse_err("a=!=b"), "invalid field selector: unescaped character in value: 61");
        assert_eq!(fparse_err("a!==b"), "invalid field selector: unescaped character in value: 61");
        assert_eq!(fparse_err("a==="), "invalid field selector: unescaped character in value: 61");
        assert_eq!(fparse_err(r"a=b\"), r"invalid field selector: invalid escape sequence: \");
        assert_eq!(fparse_err(r"a=\n"), r"invalid field selector: invalid escape sequence: \n");
        assert_eq!(fparse_err(r"a=\!"), r"invalid field selector: invalid escape sequence: \!");
        assert_eq!(fparse_err("a=\\ü"), "invalid field selector: invalid escape sequence: \\ü");
        assert_eq!(unescape_field_value("a,b"), Err("invalid field selector: unescaped character in value: 44".into()));
        // An escaped comma does not split terms, so the '=' after it is unescaped.
        assert_eq!(fparse_err(r"a=b\,c=d"), "invalid field selector: unescaped character in value: 61");
    }

    #[test]
    fn field_matching() {
        let obj: BTreeMap<&str, &str> = [("metadata.name", "foo"), ("metadata.namespace", "ns"), ("spec.x", "")].into();
        let get = |f: &str| obj.get(f).map(|v| v.to_string());
        let m = |s: &str| fparse_ok(s).matches(get);
        assert!(m(""));
        assert!(m("metadata.name=foo"));
        assert!(m("metadata.name==foo"));
        assert!(!m("metadata.name=bar"));
        assert!(m("metadata.name!=bar"));
        assert!(!m("metadata.name!=foo"));
        assert!(m("metadata.name=foo,metadata.namespace=ns"));
        assert!(!m("metadata.name=foo,metadata.namespace=other"));
        // Missing fields read as "".
        assert!(m("missing="));
        assert!(!m("missing=x"));
        assert!(m("missing!=x"));
        assert!(!m("missing!="));
        assert!(m("spec.x="));
        assert!(FieldSelector::everything().matches(|_| None));
        assert!(FieldSelector::one_term_equal("metadata.name", "foo").matches(get));
        assert_eq!(FieldSelector::one_term_equal("a", "x,y").to_string(), r"a=x\,y");
    }

    // --- robustness --------------------------------------------------------

    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    fn check_label_roundtrip(input: &str) {
        if let Ok(sel) = LabelSelector::parse(input) {
            let text = sel.to_string();
            let again = LabelSelector::parse(&text);
            assert_eq!(again.as_ref(), Ok(&sel), "label round trip of {input:?} via {text:?}");
            let _ = sel.matches(&labels(&[("a", "1"), ("b", "x"), ("in", "-3")]));
        }
    }

    fn sorted_terms(sel: &FieldSelector) -> Vec<(String, String, bool)> {
        let mut v: Vec<_> =
            sel.terms().iter().map(|t| (t.field().to_string(), t.value().to_string(), t.is_not_equals())).collect();
        v.sort();
        v
    }

    fn check_field_roundtrip(input: &str) {
        if let Ok(sel) = FieldSelector::parse(input) {
            let text = sel.to_string();
            let again = FieldSelector::parse(&text);
            match again {
                Ok(again) => assert_eq!(sorted_terms(&again), sorted_terms(&sel), "field round trip of {input:?}"),
                Err(e) => panic!("field round trip of {input:?} via {text:?} failed: {e}"),
            }
            let _ = sel.matches(|f| if f.len() % 2 == 0 { Some(f.to_string()) } else { None });
            let _ = sel.fields();
            let _ = sel.required_value("a");
        }
    }

    #[test]
    fn fuzz_random_bytes_never_panic() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for _ in 0..4000 {
            let len = rng.below(40);
            let bytes: Vec<u8> = (0..len).map(|_| (rng.next() & 0xFF) as u8).collect();
            let s = String::from_utf8_lossy(&bytes);
            check_label_roundtrip(&s);
            check_field_roundtrip(&s);
            let _ = validate_qualified_name(&s);
            let _ = validate_label_value(&s);
            let _ = validate_dns1123_label(&s);
            let _ = validate_dns1123_subdomain(&s);
            let _ = go_quote(&s);
        }
    }

    #[test]
    fn fuzz_selector_alphabet_never_panic() {
        const PIECES: &[&str] = &[
            "a", "b", "x", "in", "notin", "=", "==", "!=", "!", "(", ")", ",", ">", "<", " ", "\t", "\\", "1", "-1",
            "-", ".", "/", "ü", "🦙", "\u{0}", "\n", "a/b", "9", "_", "é.x",
        ];
        let mut rng = XorShift(0xDEAD_BEEF_CAFE_F00D);
        let mut parsed = 0;
        for _ in 0..20000 {
            let n = rng.below(12);
            let mut s = String::new();
            for _ in 0..n {
                s.push_str(PIECES.get(rng.below(PIECES.len())).copied().unwrap_or(""));
            }
            if LabelSelector::parse(&s).is_ok() {
                parsed += 1;
            }
            check_label_roundtrip(&s);
            check_field_roundtrip(&s);
        }
        assert!(parsed > 100, "the alphabet fuzz should exercise successful parses too ({parsed})");
    }

    #[test]
    fn fuzz_json_never_panic() {
        let mut rng = XorShift(12345);
        let vals = [
            json!(null),
            json!("In"),
            json!("NotIn"),
            json!("Exists"),
            json!("DoesNotExist"),
            json!("-"),
            json!("a"),
            json!(1),
            json!([]),
            json!(["a", "-"]),
            json!({}),
        ];
        for _ in 0..2000 {
            let mut pick = || vals.get(rng.below(vals.len())).cloned().unwrap_or_default();
            let v = json!({
                "matchLabels": {"k": pick(), "a/b": pick()},
                "matchExpressions": [{"key": pick(), "operator": pick(), "values": pick()}, pick()],
            });
            if let Ok(sel) = LabelSelector::from_label_selector_json(&v) {
                let _ = sel.to_string();
                let _ = sel.matches(&labels(&[("k", "a")]));
            }
        }
    }

    #[test]
    fn huge_inputs_do_not_overflow() {
        let many = vec!["a=b"; 10000].join(",");
        assert_eq!(parse_ok(&many).requirements().len(), 10000);
        let deep = "(".repeat(100_000);
        assert!(LabelSelector::parse(&deep).is_err());
        assert!(LabelSelector::parse(&format!("x in {deep}")).is_err());
        let commas = format!("x in ({})", ",".repeat(100_001));
        assert_eq!(
            LabelSelector::parse(&commas).map(|s| s.requirements()[0].values().to_vec()),
            Ok(vec![String::new()])
        );
        let commas = format!("x in ({})", ",".repeat(100_000));
        assert_eq!(
            LabelSelector::parse(&commas).err().as_deref(),
            Some("unable to parse requirement: found ')', expected: ',', or identifier")
        );
        let slashes = "\\".repeat(100_001);
        assert!(FieldSelector::parse(&slashes).is_err());
        assert_eq!(fparse_ok(&vec!["a=b"; 10000].join(",")).terms().len(), 10000);
    }

    #[test]
    fn unicode_garbage() {
        for s in ["日本=語", "🦙 in (🦙)", "a=🦙", "\u{feff}a", "a in (é)", "ü!=x", "\u{202e}x", "x=\u{0301}"]
        {
            let e = parse_err(s);
            assert!(e.starts_with("unable to parse requirement: "), "{s:?}: {e}");
            check_field_roundtrip(s);
        }
        assert_eq!(
            parse_err("x=\u{202e}"),
            format!("unable to parse requirement: values[0][x]: Invalid value: \"\\u202e\": {LABEL_VALUE_REGEX_ERR}")
        );
    }
}
