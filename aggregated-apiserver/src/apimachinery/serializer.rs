//! Request bodies: which media types a write may send, and the one conversion
//! of a body into the JSON the decoder ([`crate::apimachinery::gojson::decode_json`])
//! reads, whatever format it came in.
//!
//! kube-apiserver reads a YAML body the way sigs.k8s.io/yaml does: the first
//! YAML document is converted to JSON, and that JSON goes through the same
//! decoding as a JSON body (strict fields, pruning, validation). Errors found
//! while converting come before apiVersion/kind are known, so kube reports
//! them as "the object provided is unrecognized"; duplicate keys are strict
//! decoding findings worded by go-yaml (`line 5: key "name" already set in map`).
//!
//! The YAML parser is libyaml's (through serde_norway), the same parser go-yaml
//! ports, so syntax errors carry libyaml's words as kube's do. Plain scalars
//! resolve as YAML 1.2's core schema (serde_norway), where go-yaml v2 uses
//! YAML 1.1: `yes`/`no`/`on`/`off` and `0755`-style octals stay strings here,
//! and `<<` merge keys are ordinary keys.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::{self, Write as _};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::apimachinery::gofmt::{go_float, go_quote};
use crate::apimachinery::gojson::MAX_NESTING_DEPTH;
use crate::apimachinery::yaml_limits;

/// The formats a whole-object body (create, update, apply) can come in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    Json,
    Yaml,
}

impl BodyFormat {
    /// The format of a body sent with this Content-Type (none means JSON, as
    /// kube assumes): `application/json`, `application/yaml`, and the
    /// server-side apply type `application/apply-patch+yaml`. Anything else is
    /// `None` (the caller answers 415 in its own words).
    pub fn of(content_type: Option<&str>) -> Option<Self> {
        let essence = content_type.unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        match essence.as_str() {
            "" | "application/json" => Some(Self::Json),
            "application/yaml" | "application/apply-patch+yaml" => Some(Self::Yaml),
            _ => None,
        }
    }
}

/// A request body turned into JSON.
#[derive(Debug)]
pub struct JsonBody<'a> {
    /// The JSON the decoder reads: the body itself when it was JSON.
    pub json: Cow<'a, [u8]>,
    pub format: BodyFormat,
    /// Duplicate keys of a YAML body, in go-yaml's words
    /// (`line 5: key "name" already set in map`), at most
    /// [`MAX_REPORTED_DUPLICATES`]; the later value won, as in kube. JSON
    /// bodies report their duplicates from the decoder instead.
    pub yaml_duplicates: Vec<String>,
}

impl<'a> JsonBody<'a> {
    /// A body that already is JSON.
    pub fn json(json: &'a [u8]) -> Self {
        Self { json: Cow::Borrowed(json), format: BodyFormat::Json, yaml_duplicates: Vec::new() }
    }
}

/// Why a body could not be turned into JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// A Content-Type that is neither JSON nor YAML.
    UnsupportedMediaType,
    /// The YAML could not be converted: kube's message (`yaml: line 4: did not
    /// find expected key`), to be reported as an unrecognized object.
    Yaml(String),
}

/// THE conversion of a request body into the JSON our decoding reads, for
/// every endpoint that takes a whole object (create, update, server-side apply).
pub fn request_body_to_json<'a>(content_type: Option<&str>, body: &'a [u8]) -> Result<JsonBody<'a>, BodyError> {
    match BodyFormat::of(content_type) {
        Some(BodyFormat::Json) => Ok(JsonBody::json(body)),
        Some(BodyFormat::Yaml) => {
            let (json, yaml_duplicates) = yaml_to_json(body).map_err(BodyError::Yaml)?;
            Ok(JsonBody { json: Cow::Owned(json), format: BodyFormat::Yaml, yaml_duplicates })
        }
        None => Err(BodyError::UnsupportedMediaType),
    }
}

/// go-yaml reports every duplicate key; we stop naming them after this many.
pub const MAX_REPORTED_DUPLICATES: usize = 16;

/// Finding a duplicate key's line costs a parse of the document (the serde
/// interface gives a key's position only through an error raised on it), so
/// the lines are looked up while the re-parsing stays under this many bytes
/// (at least the first duplicate's always): small bodies get every line, a
/// 3 MiB one is parsed twice at most, as kube-apiserver parses it twice too.
/// Duplicates past that are named without their line.
const DUPLICATE_LINE_BUDGET_BYTES: usize = 1 << 20;

/// Converts the first document of a YAML stream into JSON bytes, with the
/// duplicate keys it had. An empty stream is `null`, as in sigs.k8s.io/yaml.
///
/// Bounded whatever the input: nesting deeper than [`MAX_NESTING_DEPTH`] is
/// refused (`yaml: line N: exceeded max depth of 127`), as are more %TAG
/// directives than [`yaml_limits::MAX_TAG_DIRECTIVES`], both before parsing
/// ([`yaml_limits`]), and so is a document whose aliases expand it beyond
/// about twice its own size
/// (`yaml: document contains excessive aliasing`, kube's words for an alias bomb).
pub fn yaml_to_json(body: &[u8]) -> Result<(Vec<u8>, Vec<String>), String> {
    yaml_limits::check(body, MAX_NESTING_DEPTH)?;
    // Without aliases a document never yields more than ~2 units (bytes of
    // scalars + one per node) per byte of input; the slack covers tiny bodies.
    let budget = body.len().saturating_mul(2).saturating_add(64);
    let mut ctx = Ctx::new(budget, None);
    let value = convert_first_document(body, &mut ctx)?;
    let probes = (DUPLICATE_LINE_BUDGET_BYTES / body.len().max(1)).max(1);
    let mut duplicates = Vec::new();
    for (index, key) in ctx.duplicate_keys.iter().enumerate() {
        let line = if index < probes { duplicate_line(body, budget, index + 1) } else { None };
        duplicates.push(match line {
            Some(line) => format!("line {line}: key {} already set in map", go_quote(key)),
            None => format!("key {} already set in map", go_quote(key)),
        });
    }
    let json = serde_json::to_vec(&value).map_err(|e| format!("yaml: {e}"))?;
    Ok((json, duplicates))
}

/// The line of the `nth` duplicate key: a pass that stops on it.
fn duplicate_line(body: &[u8], budget: usize, nth: usize) -> Option<usize> {
    let mut probe = Ctx::new(budget, Some(nth));
    match convert_first_document(body, &mut probe) {
        Err(_) => probe.found_duplicate.map(|(_, line)| line),
        Ok(_) => None,
    }
}

fn convert_first_document(body: &[u8], ctx: &mut Ctx) -> Result<Value, String> {
    let Some(document) = serde_norway::Deserializer::from_slice(body).next() else {
        return Ok(Value::Null);
    };
    match (NodeSeed { ctx: &mut *ctx, depth: 0 }).deserialize(document) {
        Ok(v) => Ok(v),
        Err(e) => Err(ctx.describe(&e)),
    }
}

/// What stopped a conversion on purpose (the error text serde_norway carries
/// is ours then; only its position is read from it).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stop {
    TooDeep,
    Aliasing,
    NonFinite(f64),
    MapKey,
    Duplicate,
}

struct Ctx {
    units_left: usize,
    duplicates_seen: usize,
    /// The duplicate keys, in document order, at most [`MAX_REPORTED_DUPLICATES`].
    duplicate_keys: Vec<String>,
    /// When set: stop at this duplicate (1-based) and record its key and line.
    stop_at_duplicate: Option<usize>,
    found_duplicate: Option<(String, usize)>,
    stop: Option<Stop>,
}

impl Ctx {
    fn new(budget: usize, stop_at_duplicate: Option<usize>) -> Self {
        Self {
            units_left: budget,
            duplicates_seen: 0,
            duplicate_keys: Vec::new(),
            stop_at_duplicate,
            found_duplicate: None,
            stop: None,
        }
    }

    fn spend<E: de::Error>(&mut self, units: usize) -> Result<(), E> {
        match self.units_left.checked_sub(units) {
            Some(left) => {
                self.units_left = left;
                Ok(())
            }
            None => Err(self.fail(Stop::Aliasing)),
        }
    }

    fn fail<E: de::Error>(&mut self, why: Stop) -> E {
        self.stop = Some(why);
        E::custom("stopped")
    }

    /// kube's words for a failed conversion.
    fn describe(&mut self, e: &serde_norway::Error) -> String {
        let line = e.location().map(|l| l.line()).unwrap_or(0);
        if let Some((_, ref mut at)) = self.found_duplicate {
            *at = line;
        }
        match self.stop {
            Some(Stop::TooDeep) => return format!("yaml: line {line}: exceeded max depth of {MAX_NESTING_DEPTH}"),
            Some(Stop::Aliasing) => return "yaml: document contains excessive aliasing".into(),
            // Go's json.Marshal of the +Inf/NaN go-yaml reads `.inf`/`.nan` as.
            Some(Stop::NonFinite(f)) => return format!("json: unsupported value: {}", go_float(f)),
            Some(Stop::MapKey) => return format!("yaml: line {line}: invalid map key"),
            Some(Stop::Duplicate) => return String::new(),
            None => {}
        }
        libyaml_message(&e.to_string(), line)
    }
}

/// Parser (not scanner or reader) problems of libyaml: go-yaml prints their
/// line 0-based, scanner errors 1-based, reader errors without a line.
const PARSER_PROBLEMS: &[&str] = &[
    "did not find expected <document start>",
    "found undefined tag handle",
    "did not find expected node content",
    "did not find expected key",
    "did not find expected ',' or ']'",
    "did not find expected ',' or '}'",
    "did not find expected '-' indicator",
    "found duplicate %YAML directive",
    "found incompatible YAML document",
    "found duplicate %TAG directive",
];

/// Problems of libyaml's reader (bad encoding), reported by go-yaml without a line.
const READER_PROBLEMS: &[&str] = &[
    "invalid leading UTF-8 octet",
    "invalid trailing UTF-8 octet",
    "incomplete UTF-8 octet sequence",
    "invalid length of a UTF-8 sequence",
    "invalid Unicode character",
    "control characters are not allowed",
    "input is too long",
];

/// go-yaml's `yaml: line N: <problem>` from serde_norway's rendering of a
/// libyaml error (`<problem> at line L column C, <context> ...`) and its
/// 1-based line.
fn libyaml_message(rendered: &str, line: usize) -> String {
    let problem = [" at line ", " at position ", ", "]
        .iter()
        .filter_map(|sep| rendered.find(sep))
        .min()
        .map_or(rendered, |cut| &rendered[..cut]);
    // serde_norway's own limits, worded as kube words them.
    match problem {
        "recursion limit exceeded" => return format!("yaml: line {line}: exceeded max depth of {MAX_NESTING_DEPTH}"),
        "repetition limit exceeded" => return "yaml: document contains excessive aliasing".into(),
        _ => {}
    }
    if READER_PROBLEMS.contains(&problem) {
        return format!("yaml: {problem}");
    }
    let go_line = if PARSER_PROBLEMS.contains(&problem) { line.saturating_sub(1) } else { line };
    if go_line == 0 {
        format!("yaml: {problem}")
    } else {
        format!("yaml: line {go_line}: {problem}")
    }
}

/// Builds one JSON value from one YAML node.
struct NodeSeed<'c> {
    ctx: &'c mut Ctx,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(NodeVisitor { ctx: self.ctx, depth: self.depth })
    }
}

struct NodeVisitor<'c> {
    ctx: &'c mut Ctx,
    depth: usize,
}

impl NodeVisitor<'_> {
    fn number<E: de::Error>(self, f: f64) -> Result<Value, E> {
        self.ctx.spend(8)?;
        match serde_json::Number::from_f64(f) {
            Some(n) => Ok(Value::Number(n)),
            None => Err(self.ctx.fail(Stop::NonFinite(f))),
        }
    }

    fn enter<E: de::Error>(&mut self) -> Result<usize, E> {
        self.ctx.spend(1)?;
        let depth = self.depth + 1;
        if depth > MAX_NESTING_DEPTH {
            return Err(self.ctx.fail(Stop::TooDeep));
        }
        Ok(depth)
    }
}

impl<'de> Visitor<'de> for NodeVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.ctx.spend(1)?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        self.ctx.spend(1)?;
        Ok(Value::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        self.ctx.spend(8)?;
        Ok(Value::from(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        self.ctx.spend(8)?;
        Ok(Value::from(n))
    }

    // Integers beyond 64 bits become floats, as go-yaml reads them.
    fn visit_i128<E: de::Error>(self, n: i128) -> Result<Value, E> {
        self.number(n as f64)
    }

    fn visit_u128<E: de::Error>(self, n: u128) -> Result<Value, E> {
        self.number(n as f64)
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Value, E> {
        self.number(f)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        self.ctx.spend(s.len() + 1)?;
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Value, E> {
        self.ctx.spend(s.len() + 1)?;
        Ok(Value::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let depth = self.enter()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(NodeSeed { ctx: &mut *self.ctx, depth })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let depth = self.enter()?;
        let mut out = Map::new();
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key_seed(KeySeed { ctx: &mut *self.ctx, seen: &seen })? {
            let value = map.next_value_seed(NodeSeed { ctx: &mut *self.ctx, depth })?;
            seen.insert(key.clone());
            // The later value wins, as go-yaml's non-strict decoding does.
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// A mapping key as sigs.k8s.io/yaml writes it into JSON: strings as they
/// are, numbers and booleans as their text, null as "null". Counts a key seen
/// before in the same mapping (and stops on it when asked to, so the error
/// carries the key's position).
struct KeySeed<'c, 's> {
    ctx: &'c mut Ctx,
    seen: &'s HashSet<String>,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_, '_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(self)
    }
}

impl KeySeed<'_, '_> {
    fn key<E: de::Error>(self, key: String) -> Result<String, E> {
        self.ctx.spend(key.len() + 1)?;
        if self.seen.contains(&key) {
            self.ctx.duplicates_seen += 1;
            if self.ctx.duplicate_keys.len() < MAX_REPORTED_DUPLICATES {
                self.ctx.duplicate_keys.push(key.clone());
            }
            if self.ctx.stop_at_duplicate == Some(self.ctx.duplicates_seen) {
                self.ctx.found_duplicate = Some((key, 0));
                return Err(self.ctx.fail(Stop::Duplicate));
            }
        }
        Ok(key)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_, '_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scalar mapping key")
    }

    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        self.key("null".into())
    }

    fn visit_none<E: de::Error>(self) -> Result<String, E> {
        self.visit_unit()
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<String, E> {
        self.key(b.to_string())
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<String, E> {
        self.key(n.to_string())
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<String, E> {
        self.key(n.to_string())
    }

    fn visit_i128<E: de::Error>(self, n: i128) -> Result<String, E> {
        self.key(go_float(n as f64))
    }

    fn visit_u128<E: de::Error>(self, n: u128) -> Result<String, E> {
        self.key(go_float(n as f64))
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<String, E> {
        self.key(go_float(f))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<String, E> {
        self.key(s.to_owned())
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<String, E> {
        self.key(s)
    }

    // A sequence or mapping as a key has no JSON form.
    fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> Result<String, A::Error> {
        Err(self.ctx.fail(Stop::MapKey))
    }

    fn visit_map<A: MapAccess<'de>>(self, _map: A) -> Result<String, A::Error> {
        Err(self.ctx.fail(Stop::MapKey))
    }
}

/// A JSON document as YAML, as kube-apiserver writes YAML responses: keys
/// sorted (serde_json's map is ordered), block style, sequences at their
/// key's indentation, and every string a YAML 1.1 reader (go-yaml v2 in
/// kubectl) could take for something else double-quoted.
///
/// Written here rather than with serde_norway's emitter, which follows YAML
/// 1.2 and leaves `yes`, `on` or `2024-01-01` unquoted: kubectl would read
/// them back as a boolean or a timestamp.
pub fn json_to_yaml(json: &[u8]) -> Result<Vec<u8>, String> {
    let value: Value = serde_json::from_slice(json).map_err(|e| format!("re-reading JSON for YAML: {e}"))?;
    Ok(value_to_yaml(&value).into_bytes())
}

pub fn value_to_yaml(value: &Value) -> String {
    let mut out = String::with_capacity(256);
    match value {
        Value::Object(m) if !m.is_empty() => yaml_entries(&mut out, m, 0, false),
        Value::Array(a) if !a.is_empty() => yaml_items(&mut out, a, 0, false),
        scalar => {
            yaml_scalar(&mut out, scalar);
            out.push('\n');
        }
    }
    out
}

fn yaml_indent(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// The entries of a non-empty mapping; the first one continues the current
/// line when `inline` (after a sequence's `- `).
fn yaml_entries(out: &mut String, map: &Map<String, Value>, indent: usize, inline: bool) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 || !inline {
            yaml_indent(out, indent);
        }
        yaml_string(out, key);
        out.push(':');
        match value {
            Value::Object(m) if !m.is_empty() => {
                out.push('\n');
                yaml_entries(out, m, indent + 2, false);
            }
            Value::Array(a) if !a.is_empty() => {
                out.push('\n');
                yaml_items(out, a, indent, false);
            }
            scalar => {
                out.push(' ');
                yaml_scalar(out, scalar);
                out.push('\n');
            }
        }
    }
}

fn yaml_items(out: &mut String, items: &[Value], indent: usize, inline: bool) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 || !inline {
            yaml_indent(out, indent);
        }
        out.push_str("- ");
        match item {
            Value::Object(m) if !m.is_empty() => yaml_entries(out, m, indent + 2, true),
            Value::Array(a) if !a.is_empty() => yaml_items(out, a, indent + 2, true),
            scalar => {
                yaml_scalar(out, scalar);
                out.push('\n');
            }
        }
    }
}

/// A scalar, or an empty collection in flow style.
fn yaml_scalar(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => yaml_string(out, s),
        Value::Object(_) => out.push_str("{}"),
        Value::Array(_) => out.push_str("[]"),
    }
}

/// Plain when nothing could read it as anything but this string (a letter or
/// `/` first, then letters, digits, `.`, `_`, `/`, `-`, and not one of YAML
/// 1.1's boolean or null words), else double-quoted with YAML escapes.
fn yaml_string(out: &mut String, s: &str) {
    let mut chars = s.chars();
    let plain = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '/')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null"
        );
    if plain {
        out.push_str(s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            // YAML's printable set, less what YAML 1.1 reads as a line break
            // (U+0085, U+2028, U+2029) and the byte-order mark; the rest escaped.
            ' '..='~'
            | '\u{a0}'..='\u{2027}'
            | '\u{202a}'..='\u{d7ff}'
            | '\u{e000}'..='\u{fefe}'
            | '\u{ff00}'..='\u{fffd}'
            | '\u{10000}'.. => out.push(c),
            other => {
                let _ = write!(out, "\\u{:04x}", other as u32);
            }
        }
    }
    out.push('"');
}

/// The media types a write's body may have (its Content-Type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyType {
    Json,
    JsonPatch,
    MergePatch,
    StrategicMergePatch,
    /// Server-side apply with a YAML (or JSON, which is YAML) body.
    ApplyPatchYaml,
    /// Server-side apply in CBOR: not served (415).
    ApplyPatchCbor,
}

pub fn body_type(content_type: Option<&str>) -> Option<BodyType> {
    let essence = content_type.unwrap_or("application/json").split(';').next().unwrap_or("").trim();
    match essence.to_ascii_lowercase().as_str() {
        "application/json" | "" => Some(BodyType::Json),
        "application/json-patch+json" => Some(BodyType::JsonPatch),
        "application/merge-patch+json" => Some(BodyType::MergePatch),
        "application/strategic-merge-patch+json" => Some(BodyType::StrategicMergePatch),
        "application/apply-patch+yaml" => Some(BodyType::ApplyPatchYaml),
        "application/apply-patch+cbor" => Some(BodyType::ApplyPatchCbor),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn convert(yaml: &str) -> Value {
        let (json, dups) = yaml_to_json(yaml.as_bytes()).unwrap();
        assert!(dups.is_empty(), "{dups:?}");
        serde_json::from_slice(&json).unwrap()
    }

    fn err(yaml: &str) -> String {
        yaml_to_json(yaml.as_bytes()).unwrap_err()
    }

    #[test]
    fn converts_like_sigs_yaml() {
        assert_eq!(
            convert("a: 1\nb: [x, 2.5, true, null]\n1: one\ntrue: t\nc: {d: ''}\n"),
            json!({"a": 1, "b": ["x", 2.5, true, null], "1": "one", "true": "t", "c": {"d": ""}})
        );
        assert_eq!(convert(""), Value::Null);
        assert_eq!(convert("a: 1\n---\nb: 2\n"), json!({"a": 1}));
        assert_eq!(convert("a: &x hello\nb: *x\n"), json!({"a": "hello", "b": "hello"}));
    }

    #[test]
    fn syntax_errors_in_go_yaml_words() {
        // Each checked against kube-apiserver 1.34 serving a CRD.
        assert_eq!(
            err("apiVersion: v\nkind: Widget\nmetadata:\n  name: b\n spec: [\n"),
            "yaml: line 4: did not find expected key"
        );
        assert_eq!(
            err("apiVersion: v\nkind: Widget\nmetadata:\n\tname: b\n"),
            "yaml: line 4: found character that cannot start any token"
        );
        assert_eq!(
            err("apiVersion: v\nkind: Widget\nmetadata: {name: \"abc\n"),
            "yaml: line 4: found unexpected end of stream"
        );
    }

    #[test]
    fn duplicates_named_with_their_line_later_wins() {
        let (json, dups) = yaml_to_json(b"a: 1\nm:\n  n: x\n  n: y\na: 2\n").unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&json).unwrap(), json!({"a": 2, "m": {"n": "y"}}));
        assert_eq!(dups, vec!["line 4: key \"n\" already set in map", "line 5: key \"a\" already set in map"]);
    }

    #[test]
    fn duplicates_of_a_large_body_cost_at_most_one_extra_parse() {
        let mut doc = String::from("a: 1\nb: 2\nm:\n");
        while doc.len() < 2 * DUPLICATE_LINE_BUDGET_BYTES {
            doc.push_str(&format!("  k{}: v\n", doc.len()));
        }
        doc.push_str("a: 3\nb: 4\n");
        let (_, dups) = yaml_to_json(doc.as_bytes()).unwrap();
        let lines = doc.lines().count();
        assert_eq!(
            dups,
            vec![
                format!("line {}: key \"a\" already set in map", lines - 1),
                "key \"b\" already set in map".to_string()
            ]
        );
    }

    #[test]
    fn alias_bomb_is_refused_in_kube_words() {
        let mut doc = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for (prev, name) in
            ["a", "b", "c", "d", "e", "f", "g", "h"].iter().zip(["b", "c", "d", "e", "f", "g", "h", "i"])
        {
            doc.push_str(&format!(
                "{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
            ));
        }
        assert_eq!(err(&doc), "yaml: document contains excessive aliasing");
    }

    #[test]
    fn deep_nesting_is_refused() {
        let deep = format!("a: {}{}\n", "[".repeat(200), "]".repeat(200));
        assert_eq!(err(&deep), format!("yaml: line 1: exceeded max depth of {MAX_NESTING_DEPTH}"));
        let block: String = (0..300).map(|i| format!("{}k:\n", "  ".repeat(i))).collect();
        assert!(err(&block).contains("exceeded max depth"), "{}", err(&block));
        let ok = format!("a: {}{}\n", "[".repeat(100), "]".repeat(100));
        yaml_to_json(ok.as_bytes()).unwrap();
    }

    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let started = std::time::Instant::now();
        let flood = format!("a: {}{}\n", "[".repeat(1_000_000), "]".repeat(1_000_000));
        assert_eq!(err(&flood), format!("yaml: line 1: exceeded max depth of {MAX_NESTING_DEPTH}"));
        let quoted_in_plain = format!("{}1", "{k: a \"b, x: ".repeat(100_000));
        assert_eq!(err(&quoted_in_plain), format!("yaml: line 1: exceeded max depth of {MAX_NESTING_DEPTH}"));
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
        // Brackets in quotes, comments and inside words are not nesting.
        let quoted = format!("a: \"{0}\"\nb: '{0}'\nc: x{0}\n# {0}\nd: 'it''s' # {0}\n", "[".repeat(300));
        assert_eq!(convert(&quoted)["c"], Value::String(format!("x{}", "[".repeat(300))));
        // Braces in a flow collection's quoted strings are text.
        let braces =
            format!("{{\"a\":\"{0}\",\"b\":['{0}'],\"c\":{{\"d\":\"{1}\"}}}}", "{[".repeat(200), "}]".repeat(200));
        assert_eq!(convert(&braces)["a"], Value::String("{[".repeat(200)));
        assert_eq!(convert(&braces)["c"]["d"], Value::String("}]".repeat(200)));
    }

    #[test]
    fn non_finite_and_bad_keys() {
        assert_eq!(err("a: .inf\n"), "json: unsupported value: +Inf");
        assert!(err("? [a]\n: b\n").ends_with("invalid map key"), "{}", err("? [a]\n: b\n"));
    }

    #[test]
    fn media_types() {
        assert_eq!(BodyFormat::of(None), Some(BodyFormat::Json));
        assert_eq!(BodyFormat::of(Some("application/yaml; charset=utf-8")), Some(BodyFormat::Yaml));
        assert_eq!(BodyFormat::of(Some("application/apply-patch+yaml")), Some(BodyFormat::Yaml));
        assert_eq!(BodyFormat::of(Some("text/plain")), None);
    }

    #[test]
    fn yaml_output_sorted_and_quoted_for_yaml_1_1_readers() {
        let y = String::from_utf8(json_to_yaml(br#"{"b":1,"a":{"c":"2"},"l":[1,{"x":"yes","y":[]}],"e":{}}"#).unwrap())
            .unwrap();
        assert_eq!(y, "a:\n  c: \"2\"\nb: 1\ne: {}\nl:\n- 1\n- x: \"yes\"\n  \"y\": []\n");
    }

    #[test]
    fn yaml_output_reads_back_as_the_same_json() {
        let tricky = json!({
            "strings": ["", " lead", "trail ", "a: b", "# c", "- d", "2024-01-01", "0755", "1e3", ".inf", "~", "ON", "No", "yes",
                "multi\nline", "tab\there", "quote\"back\\slash", "\u{7f}\u{85}\u{9f}\u{2028}\u{feff}é😀", "key: {x}", "*alias", "&anchor", "!tag",
                "%dir", "@at", "`tick", "|pipe", ">gt", "?q", "[x]", "{y}", "ok/path-1.2_3"],
            "numbers": [0, -1, 31.4, 1e300, 18446744073709551615u64, -9223372036854775808i64],
            "nested": [[1, [2, []]], [{"a": {"b": [{}]}}]],
            "null": null, "t": true, "f": false,
        });
        let yaml = value_to_yaml(&tricky);
        let (back, dups) = yaml_to_json(yaml.as_bytes()).unwrap();
        assert!(dups.is_empty());
        assert_eq!(serde_json::from_slice::<Value>(&back).unwrap(), tricky, "{yaml}");
        for word in ["\"yes\"", "\"ON\"", "\"No\"", "\"2024-01-01\"", "\"0755\"", "\"~\""] {
            assert!(yaml.contains(word), "{word} quoted in {yaml}");
        }
    }
}
