//! Label selectors with the semantics and error texts of k8s.io/apimachinery
//! `pkg/labels` (`labels.Parse`, `NewRequirement`, `Selector.Matches`,
//! `Selector.String`) and `pkg/selection` (the operators).
//!
//! Everything here is written to never panic, whatever the input: the lexer
//! works on bytes and only slices strings at ASCII boundaries (through
//! checked accessors), and the parser treats reading past the end as end of
//! input. Error texts follow Kubernetes 1.34: a key or value error is a
//! rendered `field.Error` (a nil path renders as `<nil>`), strings quoted like
//! Go's `%q`, slices like Go's `json.Marshal`, and several errors of one
//! requirement aggregate as `[e1, e2]`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::apimachinery::field_error::{aggregate, FieldError};
use crate::apimachinery::gofmt::{go_json_string_list, go_parse_int64, go_quote};
use crate::apimachinery::names::{validate_label_value, validate_qualified_name};

/// `field.Invalid(path, value, detail).Error()` with an already rendered value.
fn field_invalid(path: &str, rendered_value: &str, detail: &str) -> String {
    FieldError::invalid_raw(path, rendered_value, detail).full_message()
}

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

/// A set of labels a selector can be matched against (`labels.Labels`).
pub trait Labels {
    fn get(&self, key: &str) -> Option<&str>;
    /// How many labels there are.
    fn count(&self) -> usize;
    /// Every label, keys in ascending order.
    fn in_key_order(&self) -> impl Iterator<Item = (&str, &str)>;
}

impl Labels for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key).map(String::as_str)
    }
    fn count(&self) -> usize {
        self.len()
    }
    fn in_key_order(&self) -> impl Iterator<Item = (&str, &str)> {
        self.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// One requirement of a label selector: a key, an operator and values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
    /// The values sorted, for a lookup that stays cheap when a selector in
    /// a query lists thousands of them and is matched against every object.
    sorted: Vec<String>,
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
                    if go_parse_int64(v).is_err() {
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
            None => {
                let mut sorted = values.clone();
                sorted.sort_unstable();
                Ok(Requirement { key: key.to_string(), operator, values, sorted })
            }
        }
    }

    #[cfg(test)]
    pub fn key(&self) -> &str {
        &self.key
    }

    #[cfg(test)]
    pub fn operator(&self) -> Operator {
        self.operator
    }

    #[cfg(test)]
    pub fn values(&self) -> &[String] {
        &self.values
    }

    fn has_value(&self, value: &str) -> bool {
        self.sorted.binary_search_by(|v| v.as_str().cmp(value)).is_ok()
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
///
/// Matched in proportion to the object's labels, not to the selector: a
/// query of 60 KB holds 12,000 requirements, and a LIST would check each
/// against every object (measured: docs/performance.md, "Inputs that grow
/// the work faster than the request"). The requirements on one
/// key are folded into one [`KeyTest`]; keys whose test an absent label
/// passes can only fail on a label the object has, so they are looked up
/// from its labels, and the keys that must be there can all be there only
/// when the object has at least as many labels.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    /// As parsed, sorted by key: what the unit tests read back (matching
    /// uses only the folded tests below).
    #[cfg(test)]
    requirements: Vec<Requirement>,
    /// One test per key, sorted by key.
    tests: Vec<KeyTest>,
    /// The tests whose label must be there.
    needing: Vec<usize>,
}

/// What all of a selector's requirements on one key ask of its label: their
/// AND, which a label's value (or its absence) passes or fails at once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct KeyTest {
    key: String,
    /// The label must be there (`in`, `=`, `==`, `exists`, `gt`, `lt`).
    present: bool,
    /// The label must not be there (`!key`).
    absent: bool,
    /// Its value must be one of these (every `in` and `=` set's intersection), sorted.
    one_of: Option<Vec<String>>,
    /// Its value must be none of these (every `notin` and `!=`), sorted once built.
    none_of: Vec<String>,
    /// Its value must be an integer above and below these (`gt`, `lt`).
    above: Option<i64>,
    below: Option<i64>,
}

impl KeyTest {
    fn new(key: &str) -> Self {
        KeyTest { key: key.to_string(), ..Default::default() }
    }

    /// Adds a requirement on this key: the test then passes what both did.
    fn and(&mut self, r: &Requirement) {
        // Validated at parse: gt and lt hold one integer.
        let bound = || r.values.first().and_then(|v| go_parse_int64(v).ok());
        match r.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                self.present = true;
                self.one_of = Some(match self.one_of.take() {
                    None => r.sorted.clone(),
                    Some(before) => before.into_iter().filter(|v| r.has_value(v)).collect(),
                });
            }
            // Sorted once all are in (`LabelSelector::of`).
            Operator::NotIn | Operator::NotEquals => self.none_of.extend(r.sorted.iter().cloned()),
            Operator::Exists => self.present = true,
            Operator::DoesNotExist => self.absent = true,
            Operator::GreaterThan => {
                self.present = true;
                self.above = Some(self.above.unwrap_or(i64::MIN).max(bound().unwrap_or(i64::MAX)));
            }
            Operator::LessThan => {
                self.present = true;
                self.below = Some(self.below.unwrap_or(i64::MAX).min(bound().unwrap_or(i64::MIN)));
            }
        }
    }

    /// Whether a label with this value (None: no such label) passes.
    fn passes(&self, actual: Option<&str>) -> bool {
        let Some(value) = actual else {
            return !self.present;
        };
        if self.absent
            || self.one_of.as_ref().is_some_and(|set| set.binary_search_by(|v| v.as_str().cmp(value)).is_err())
            || self.none_of.binary_search_by(|v| v.as_str().cmp(value)).is_ok()
        {
            return false;
        }
        if self.above.is_none() && self.below.is_none() {
            return true;
        }
        go_parse_int64(value).is_ok_and(|n| self.above.is_none_or(|a| n > a) && self.below.is_none_or(|b| n < b))
    }
}

impl LabelSelector {
    /// `labels.Parse`: the `labelSelector` query syntax. The error is the
    /// text apimachinery produces.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parser = Parser::new(s);
        let requirements = parser.parse()?;
        Ok(Self::of(requirements))
    }

    /// The selector of these requirements, sorted by key as kube sorts them.
    fn of(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        let mut tests: Vec<KeyTest> = Vec::new();
        for r in &requirements {
            match tests.last_mut() {
                Some(last) if last.key == r.key => last.and(r),
                _ => {
                    let mut test = KeyTest::new(&r.key);
                    test.and(r);
                    tests.push(test);
                }
            }
        }
        for test in &mut tests {
            test.none_of.sort_unstable();
            test.none_of.dedup();
        }
        let needing = (0..tests.len()).filter(|i| tests[*i].present).collect();
        LabelSelector {
            #[cfg(test)]
            requirements,
            tests,
            needing,
        }
    }

    /// `metav1.LabelSelectorAsSelector` for a selector an object carries
    /// (matchLabels and matchExpressions); an empty one selects everything.
    pub fn from_api(selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement::new(key, Operator::Equals, vec![value.clone()])?);
        }
        for expression in selector.match_expressions.iter().flatten() {
            let operator = match expression.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            let values = expression.values.clone().unwrap_or_default();
            requirements.push(Requirement::new(&expression.key, operator, values)?);
        }
        Ok(Self::of(requirements))
    }

    /// `Selector.Matches`.
    pub fn matches(&self, labels: &impl Labels) -> bool {
        let each_key = || self.tests.iter().all(|t| t.passes(labels.get(&t.key)));
        if self.tests.len() <= SMALL_SELECTOR {
            return each_key();
        }
        let count = labels.count();
        if self.tests.len() <= count {
            return each_key();
        }
        // More keys than labels: each key that must be there is looked up
        // (no more of them than labels, or no match), the others only for
        // the labels the object has.
        self.needing.len() <= count
            && self.needing.iter().all(|i| self.tests[*i].passes(labels.get(&self.tests[*i].key)))
            && labels.in_key_order().all(|(key, value)| {
                match self.tests.binary_search_by(|t| t.key.as_str().cmp(key)) {
                    Ok(i) => self.tests[i].present || self.tests[i].passes(Some(value)),
                    Err(_) => true,
                }
            })
    }

    /// `Selector.Empty`: true when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.tests.is_empty()
    }

    /// The parsed requirements, sorted by key.
    #[cfg(test)]
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

#[cfg(test)]
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

/// Up to this many requirements, a selector is matched one requirement at
/// a time, whatever the object's labels: selectors people write.
const SMALL_SELECTOR: usize = 8;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    // The robustness tests below feed the same inputs to the field selector
    // parser and the name validators, which share the selector inputs' shape.
    use crate::apimachinery::fields::FieldSelector;
    use crate::apimachinery::names::{validate_dns1123_label, validate_dns1123_subdomain};
    use crate::apimachinery::test_fixtures::{LABEL_VALUE_REGEX_ERR, NAME_PART_REGEX_ERR, SUBDOMAIN_REGEX_ERR};

    /// kube's `Requirement.Matches`, one requirement at a time: what the
    /// folded tests must agree with.
    fn reference(r: &Requirement, labels: &impl Labels) -> bool {
        let actual = labels.get(r.key());
        let int = |v: &str| go_parse_int64(v).ok();
        match r.operator() {
            Operator::In | Operator::Equals | Operator::DoubleEquals => actual.is_some_and(|v| r.has_value(v)),
            Operator::NotIn | Operator::NotEquals => actual.is_none_or(|v| !r.has_value(v)),
            Operator::Exists => actual.is_some(),
            Operator::DoesNotExist => actual.is_none(),
            Operator::GreaterThan => actual.and_then(int).zip(int(&r.values()[0])).is_some_and(|(a, w)| a > w),
            Operator::LessThan => actual.and_then(int).zip(int(&r.values()[0])).is_some_and(|(a, w)| a < w),
        }
    }

    #[test]
    fn folded_matching_agrees_with_each_requirement_in_turn() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        // More keys than a small selector has, so both ways of matching run.
        let keys = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"];
        let values = ["1", "2", "3", "x", ""];
        let pick = |rng: &mut rand::rngs::StdRng, from: &[&'static str]| from[rng.random_range(0..from.len())];
        let term = |rng: &mut rand::rngs::StdRng| {
            let (k, v) = (pick(rng, &keys), pick(rng, &values));
            // Empty values only alone: `(x,,)` does not parse.
            let set: Vec<&str> = (0..rng.random_range(1..4)).map(|_| pick(rng, &values[..4])).collect();
            match rng.random_range(0..9) {
                0 => format!("{k}={v}"),
                1 => format!("{k}=={v}"),
                2 => format!("{k}!={v}"),
                3 => format!("{k} in ({})", set.join(",")),
                4 => format!("{k} notin ({})", set.join(",")),
                5 => k.to_string(),
                6 => format!("!{k}"),
                7 => format!("{k}>{}", rng.random_range(0..4)),
                _ => format!("{k}<{}", rng.random_range(0..4)),
            }
        };
        let (mut large, mut large_matched, mut large_refused) = (0, 0, 0);
        for _ in 0..8_000 {
            let mut set = BTreeMap::new();
            for _ in 0..rng.random_range(0..12) {
                set.insert(pick(&mut rng, &keys).to_string(), pick(&mut rng, &values).to_string());
            }
            // Mostly terms the labels pass, so that a selector of many
            // matches now and then, and the one that fails is any of them.
            let terms: Vec<String> = (0..rng.random_range(0..30))
                .map(|_| {
                    let wanted = rng.random_bool(0.95);
                    let mut t = term(&mut rng);
                    for _ in 0..20 {
                        if parse_ok(&t).matches(&set) == wanted {
                            break;
                        }
                        t = term(&mut rng);
                    }
                    t
                })
                .collect();
            let selector = parse_ok(&terms.join(","));
            let label_set: crate::storage::index::LabelSet =
                set.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let expected = selector.requirements().iter().all(|r| reference(r, &set));
            if selector.tests.len() > SMALL_SELECTOR.max(set.len()) {
                large += 1;
                large_matched += usize::from(expected);
                large_refused += usize::from(
                    !expected
                        && selector
                            .needing
                            .iter()
                            .all(|i| selector.tests[*i].passes(set.get(&selector.tests[*i].key).map(String::as_str))),
                );
            }
            assert_eq!(selector.matches(&set), expected, "{terms:?} on {set:?}");
            assert_eq!(selector.matches(&label_set), expected, "{terms:?} on {set:?}");
        }
        // Both ways ran, and the second both matched and refused by a label's value.
        assert!(large > 1_000 && large_matched > 300 && large_refused > 10, "{large} {large_matched} {large_refused}");
    }

    #[test]
    fn a_selector_of_thousands_of_requirements_costs_by_the_labels() {
        let object = labels(&[("app", "web"), ("tier", "1")]);
        // 12,000 requirements that all pass, on keys the object lacks and on its own.
        let absent: Vec<String> = (0..12_000).map(|i| format!("!k{i}")).collect();
        let own: Vec<String> = (0..12_000).map(|i| format!("app notin (v{i})")).collect();
        for terms in [absent, own] {
            let selector = parse_ok(&terms.join(","));
            let counted = CountedLabels { labels: &object, looked_up: Cell::new(0) };
            assert!(selector.matches(&counted));
            // A label read or looked up a few times each, never a
            // requirement's key each: 12,000 of them would be 12,000.
            assert!(counted.looked_up.get() <= 2 * object.len(), "{} lookups", counted.looked_up.get());
        }
        let missing_one = parse_ok(&(0..100).map(|i| format!("k{i}")).collect::<Vec<_>>().join(","));
        assert!(!missing_one.matches(&object));
    }

    /// Labels that count how often a selector reads them: a key looked up
    /// or a label walked over.
    struct CountedLabels<'a> {
        labels: &'a BTreeMap<String, String>,
        looked_up: Cell<usize>,
    }

    impl Labels for CountedLabels<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.looked_up.set(self.looked_up.get() + 1);
            self.labels.get(key).map(String::as_str)
        }
        fn count(&self) -> usize {
            self.labels.len()
        }
        fn in_key_order(&self) -> impl Iterator<Item = (&str, &str)> {
            self.labels.iter().map(|(k, v)| {
                self.looked_up.set(self.looked_up.get() + 1);
                (k.as_str(), v.as_str())
            })
        }
    }

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
        assert!(LabelSelector::default().matches(&BTreeMap::new()));
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
            let _ = sel.matches(|f| if f.len() % 2 == 0 { Some("x") } else { None });
            let _ = sel.fields();
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
        assert_eq!(FieldSelector::parse(&vec!["a=b"; 10000].join(",")).map(|s| s.terms().len()), Ok(10000));
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
