//! Go-compatible JSON decoding of request bodies: what kube-apiserver's
//! decoder accepts, what it rejects, and the exact words it uses.
//!
//! Mirrors Go's `encoding/json` (its scanner and syntax-error wording, its
//! `UnmarshalTypeError` texts, case-insensitive field matching),
//! sigs.k8s.io/json (duplicate fields found by strict decoding, integers
//! preserved) and k8s.io/apimachinery's JSON serializer
//! (`SimpleMetaFactory.Interpret`, the decode error wrapping of
//! `pkg/runtime/serializer` and the strict-decoding error texts).
//!
//! The order kube-apiserver's custom-resource handler applies the checks in,
//! and what each failure becomes: [`decode_json`] failures (syntax, a top
//! level that is not an object, a non-string top-level `apiVersion`/`kind`)
//! are 400 BadRequest, wrapped with [`decode_error_message`]; then the
//! ObjectMeta type checks (`objectmeta::check_object_meta_types`, also a
//! 400); then pruning (`schema::prune`); the duplicate and unknown field
//! paths are strict-decoding findings (warnings, or a 400 under
//! `fieldValidation=Strict`: [`strict_decoding_error`], [`strict_warnings`]);
//! then the 422 checks (`objectmeta`, `schema::validate`).

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::{self, Write as _};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::apimachinery::gofmt::{go_equal_fold, go_quote, go_quote_char};

/// The prefix kube's JSON serializer puts on every error of its first pass
/// (`json.SimpleMetaFactory.Interpret`), which reads `apiVersion`/`kind`.
pub const VERSION_KIND_ERROR_PREFIX: &str = "couldn't get version/kind; json parse error: ";

/// Deepest nesting [`decode_json`] accepts (serde_json's recursion limit of
/// 128 admits 127 levels). kube-apiserver's Go decoder allows 10000; deeper
/// documents get Go's "exceeded max depth" wording at our limit instead.
pub const MAX_NESTING_DEPTH: usize = 127;

/// Go's `encoding/json` nesting limit, used to word errors like Go does.
const GO_MAX_NESTING_DEPTH: usize = 10_000;

/// sigs.k8s.io/json keeps at most this many strict-decoding errors.
const MAX_STRICT_ERRORS: usize = 100;

/// How Go prints the anonymous struct `Interpret` decodes into.
const FIND_KIND_TYPE: &str =
    r#"struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#;

// ---------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------

/// Parses a JSON request body in one pass, recording duplicate keys.
///
/// `Ok((value, duplicates))`: `value` is always an object; `duplicates` are the
/// dotted paths (`metadata.name`, `spec.items[2].x`) of keys that appeared more
/// than once in one object, in document order, deduplicated, at most 100 (as
/// sigs.k8s.io/json reports them); the later value wins, as in Go.
///
/// `Err(message)`: the text of kube-apiserver's decode error, without the
/// handler's wrapping (see [`decode_error_message`]):
/// * syntax errors, worded by Go's scanner:
///   `couldn't get version/kind; json parse error: invalid character '}' looking for beginning of object key string`,
///   `... unexpected end of JSON input`;
/// * a top level that is not an object (array, string, number, bool):
///   `couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { ... }`;
///   a top-level `null`: `Object 'Kind' is missing in 'null'`;
/// * a top-level `apiVersion`/`kind` that is not a string (keys matched
///   case-insensitively, like Go):
///   `couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string`;
/// * a number too large for a float64: `json: cannot unmarshal number 1e400 into Go value of type float64`;
/// * nesting deeper than [`MAX_NESTING_DEPTH`]: `... invalid character '[' exceeded max depth`.
///
/// Invalid UTF-8 inside strings is replaced by U+FFFD per byte, as Go does.
/// Integers that fit an i64 stay integers; larger ones become floats (like
/// sigs.k8s.io/json's PreserveInts).
pub fn decode_json(body: &[u8]) -> Result<(Value, Vec<String>), String> {
    let text = go_lossy_utf8(body);
    let mut ctx = DecodeCtx::default();
    let mut de = serde_json::Deserializer::from_str(&text);
    let parsed = ValueSeed { ctx: &mut ctx, root: true }.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    let value = match parsed {
        Ok(v) => v,
        Err(e) => return Err(describe_parse_failure(body, &e)),
    };
    match &value {
        Value::Object(_) => {}
        Value::Null => return Err(format!("Object 'Kind' is missing in '{}'", String::from_utf8_lossy(body))),
        other => {
            return Err(format!(
                "{VERSION_KIND_ERROR_PREFIX}json: cannot unmarshal {} into Go value of type {FIND_KIND_TYPE}",
                go_json_kind(other)
            ))
        }
    }
    if let Some(e) = ctx.type_meta_error {
        return Err(format!("{VERSION_KIND_ERROR_PREFIX}{e}"));
    }
    Ok((value, ctx.duplicates))
}

/// Wraps a [`decode_json`] / [`check_object_meta_types`](crate::apimachinery::objectmeta::check_object_meta_types) /
/// [`strict_decoding_error`] message the way kube-apiserver's
/// `transformDecodeError` does for the 400 it sends:
/// * errors from reading apiVersion/kind:
///   `the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: ... (<first 30 bytes>)`
///   (the body shown as text if it starts with `{`, else as hex, `<empty>` if empty);
/// * later errors: `Widget in version "v1" cannot be handled as a Widget: <err>`.
pub fn decode_error_message(err: &str, body: &[u8], kind: &str, version: &str) -> String {
    if err.starts_with(VERSION_KIND_ERROR_PREFIX) {
        unrecognized_object_message(err, body, kind)
    } else {
        format!("{kind} in version {} cannot be handled as a {kind}: {err}", go_quote(version))
    }
}

/// kube's 400 text for a body whose apiVersion/kind could not be read yet (a
/// YAML body that does not convert, too): `the object provided is unrecognized
/// (must be of type Widget): <err> (<first 30 bytes>)`.
pub fn unrecognized_object_message(err: &str, body: &[u8], kind: &str) -> String {
    format!("the object provided is unrecognized (must be of type {kind}): {err} ({})", summarize_data(body, 30))
}

/// The error kube returns under `fieldValidation=Strict` when the body had
/// duplicate or unknown fields: `strict decoding error: duplicate field "a", unknown field "b"`
/// (wrap it with [`decode_error_message`]). `None` when there is nothing to report.
pub fn strict_decoding_error(duplicates: &[String], unknown: &[String]) -> Option<String> {
    let all = strict_warnings(duplicates, unknown);
    if all.is_empty() {
        None
    } else {
        Some(format!("strict decoding error: {}", all.join(", ")))
    }
}

/// One `Warning` header text per finding under `fieldValidation=Warn` (the
/// default): `duplicate field "metadata.name"`, `unknown field "spec.colour"`.
pub fn strict_warnings(duplicates: &[String], unknown: &[String]) -> Vec<String> {
    duplicates
        .iter()
        .map(|d| format!("duplicate field {}", go_quote(d)))
        .chain(unknown.iter().map(|u| format!("unknown field \"{u}\"")))
        .collect()
}

#[derive(Default)]
struct DecodeCtx {
    /// The path of the value being read: `spec.items[2].x`.
    path: String,
    duplicates: Vec<String>,
    seen: HashSet<String>,
    /// The first error Go's `Interpret` would report for apiVersion/kind.
    type_meta_error: Option<String>,
}

impl DecodeCtx {
    fn record_duplicate(&mut self) {
        if self.duplicates.len() < MAX_STRICT_ERRORS && self.seen.insert(self.path.clone()) {
            self.duplicates.push(self.path.clone());
        }
    }
}

struct ValueSeed<'a> {
    ctx: &'a mut DecodeCtx,
    root: bool,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        // serde_json's Deserializer enforces its recursion limit inside
        // deserialize_any, so this recursion is bounded.
        deserializer.deserialize_any(ValueVisitor { ctx: self.ctx, root: self.root })
    }
}

struct ValueVisitor<'a> {
    ctx: &'a mut DecodeCtx,
    root: bool,
}

impl<'de> Visitor<'de> for ValueVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        // PreserveInts: an integer that does not fit an int64 becomes a float64.
        if i64::try_from(v).is_ok() {
            Ok(Value::Number(v.into()))
        } else {
            Ok(Number::from_f64(v as f64).map_or(Value::Null, Value::Number))
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        // Go holds `30.0` as the float64 30 and writes it back as `30`: a
        // whole number within int64 is kept as an integer, so that it is
        // written as kube writes it and compares equal to `30` (a changed
        // representation is not a changed spec). Others stay floats.
        const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
        if v.fract() == 0.0 && v.abs() < TWO_POW_63 && !(v == 0.0 && v.is_sign_negative()) {
            return Ok(Value::Number((v as i64).into()));
        }
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let ctx = self.ctx;
        let mut out = Vec::new();
        loop {
            let mark = ctx.path.len();
            let _ = write!(ctx.path, "[{}]", out.len());
            let next = seq.next_element_seed(ValueSeed { ctx: &mut *ctx, root: false });
            ctx.path.truncate(mark);
            match next? {
                Some(v) => out.push(v),
                None => break,
            }
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let ctx = self.ctx;
        let root = self.root;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let mark = ctx.path.len();
            if mark > 0 {
                ctx.path.push('.');
            }
            ctx.path.push_str(&key);
            if out.contains_key(&key) {
                ctx.record_duplicate();
            }
            let value = map.next_value_seed(ValueSeed { ctx: &mut *ctx, root: false });
            ctx.path.truncate(mark);
            let value = value?;
            if root && ctx.type_meta_error.is_none() {
                for field in ["apiVersion", "kind"] {
                    if go_equal_fold(&key, field) && !matches!(value, Value::String(_) | Value::Null) {
                        // The struct `Interpret` decodes into is anonymous: `.kind`.
                        ctx.type_meta_error =
                            Some(unmarshal_field_type_error(go_json_kind(&value), "", field, "string"));
                    }
                }
            }
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// `bytes` as text the way Go's JSON writes a string: each byte of every
/// invalid UTF-8 sequence becomes U+FFFD (and Go's decoder reads such bytes
/// inside a string the same way). Borrowed when `bytes` are UTF-8.
pub fn go_lossy_utf8(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for _ in chunk.invalid() {
            out.push('\u{FFFD}');
        }
    }
    Cow::Owned(out)
}

/// The first `max` bytes of `text` as kube cuts a Go string (`s[:max]`) and
/// Go's JSON then writes it: a character cut in two leaves bytes that are
/// not UTF-8, each written as U+FFFD.
pub fn go_cut(text: &[u8], max: usize) -> Cow<'_, str> {
    go_lossy_utf8(text.get(..max).unwrap_or(text))
}

fn describe_parse_failure(body: &[u8], err: &serde_json::Error) -> String {
    let go = GoScanner::check(body, GO_MAX_NESTING_DEPTH);
    if let Some(msg) = go.error {
        return format!("{VERSION_KIND_ERROR_PREFIX}{msg}");
    }
    // Go would have accepted the syntax; say why we did not, in Go's terms.
    let ours = GoScanner::check(body, MAX_NESTING_DEPTH);
    if let Some(msg) = ours.error {
        return format!("{VERSION_KIND_ERROR_PREFIX}{msg}");
    }
    if let Some(lit) = go.first_overflowing_number {
        return format!("json: cannot unmarshal number {lit} into Go value of type float64");
    }
    format!("{VERSION_KIND_ERROR_PREFIX}{err}")
}

pub fn summarize_data(data: &[u8], max: usize) -> String {
    if data.is_empty() {
        return "<empty>".into();
    }
    let cut = &data[..data.len().min(max)];
    let more = if data.len() > max { " ..." } else { "" };
    if data[0] == b'{' {
        format!("{}{more}", String::from_utf8_lossy(cut))
    } else {
        let mut hex = String::with_capacity(cut.len() * 2 + 4);
        for b in cut {
            let _ = write!(hex, "{b:02x}");
        }
        format!("{hex}{more}")
    }
}

/// The kind word Go's `UnmarshalTypeError` uses for a JSON value.
pub fn go_json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Equality of two decoded JSON values, comparing numbers by value the way
/// Go compares what it decoded (`1 == 1.0`; integers exactly).
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        _ => a == b,
    }
}

/// Go's `UnmarshalTypeError` text for a struct field that cannot hold what
/// the document has there. `what` is the JSON kind ([`go_json_kind`]), or
/// `number <literal>` for a number the field's Go type cannot represent:
/// `json: cannot unmarshal number into Go struct field ObjectMeta.name of type string`.
pub fn unmarshal_field_type_error(what: &str, strukt: &str, field: &str, go_type: &str) -> String {
    format!("json: cannot unmarshal {what} into Go struct field {strukt}.{field} of type {go_type}")
}

// ---------------------------------------------------------------------------
// Go's JSON scanner (error path only), for Go's exact syntax-error wording.
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum ParseState {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ScanStep {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    Zero,
    One,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    Literal(&'static [u8], usize, &'static str),
}

struct GoScanner<'a> {
    data: &'a [u8],
    step: ScanStep,
    stack: Vec<ParseState>,
    max_depth: usize,
    end_top: bool,
    number_start: Option<usize>,
    error: Option<String>,
    first_overflowing_number: Option<String>,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

impl<'a> GoScanner<'a> {
    /// Runs Go's `checkValid` over `data`.
    fn check(data: &'a [u8], max_depth: usize) -> Self {
        let mut s = GoScanner {
            data,
            step: ScanStep::BeginValue,
            stack: Vec::new(),
            max_depth,
            end_top: false,
            number_start: None,
            error: None,
            first_overflowing_number: None,
        };
        for (i, &c) in data.iter().enumerate() {
            if let Err(e) = s.feed(c, i) {
                s.error = Some(e);
                return s;
            }
        }
        // eof()
        if s.end_top {
            return s;
        }
        if let Err(e) = s.feed(b' ', data.len()) {
            s.error = Some(e);
            return s;
        }
        if !s.end_top {
            s.error = Some("unexpected end of JSON input".into());
        }
        s
    }

    fn fail(c: u8, context: &str) -> Result<(), String> {
        Err(format!("invalid character {} {context}", go_quote_char(c)))
    }

    fn push(&mut self, c: u8, ps: ParseState) -> Result<(), String> {
        self.stack.push(ps);
        if self.stack.len() <= self.max_depth {
            Ok(())
        } else {
            Self::fail(c, "exceeded max depth")
        }
    }

    fn feed(&mut self, c: u8, i: usize) -> Result<(), String> {
        use ScanStep::*;
        match self.step {
            BeginValueOrEmpty => {
                if is_space(c) {
                    Ok(())
                } else if c == b']' {
                    self.end_value(c, i)
                } else {
                    self.begin_value(c, i)
                }
            }
            BeginValue => self.begin_value(c, i),
            BeginStringOrEmpty => {
                if is_space(c) {
                    Ok(())
                } else if c == b'}' {
                    if let Some(top) = self.stack.last_mut() {
                        *top = ParseState::ObjectValue;
                    }
                    self.end_value(c, i)
                } else {
                    self.begin_string(c)
                }
            }
            BeginString => self.begin_string(c),
            EndValue => self.end_value(c, i),
            EndTop => {
                if is_space(c) {
                    Ok(())
                } else {
                    Self::fail(c, "after top-level value")
                }
            }
            InString => {
                match c {
                    b'"' => self.step = EndValue,
                    b'\\' => self.step = InStringEsc,
                    c if c < 0x20 => return Self::fail(c, "in string literal"),
                    _ => {}
                }
                Ok(())
            }
            InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                    self.step = InString;
                    Ok(())
                }
                b'u' => {
                    self.step = InStringEscU(0);
                    Ok(())
                }
                _ => Self::fail(c, "in string escape code"),
            },
            InStringEscU(n) => {
                if c.is_ascii_hexdigit() {
                    self.step = if n == 3 { InString } else { InStringEscU(n + 1) };
                    Ok(())
                } else {
                    Self::fail(c, "in \\u hexadecimal character escape")
                }
            }
            Neg => match c {
                b'0' => {
                    self.step = Zero;
                    Ok(())
                }
                b'1'..=b'9' => {
                    self.step = One;
                    Ok(())
                }
                _ => Self::fail(c, "in numeric literal"),
            },
            One => {
                if c.is_ascii_digit() {
                    Ok(())
                } else {
                    self.after_zero(c, i)
                }
            }
            Zero => self.after_zero(c, i),
            Dot => {
                if c.is_ascii_digit() {
                    self.step = Dot0;
                    Ok(())
                } else {
                    Self::fail(c, "after decimal point in numeric literal")
                }
            }
            Dot0 => {
                if c.is_ascii_digit() {
                    Ok(())
                } else if c == b'e' || c == b'E' {
                    self.step = E;
                    Ok(())
                } else {
                    self.finish_number(i);
                    self.end_value(c, i)
                }
            }
            E => {
                if c == b'+' || c == b'-' {
                    self.step = ESign;
                    Ok(())
                } else {
                    self.e_sign(c)
                }
            }
            ESign => self.e_sign(c),
            E0 => {
                if c.is_ascii_digit() {
                    Ok(())
                } else {
                    self.finish_number(i);
                    self.end_value(c, i)
                }
            }
            Literal(rest, at, word) => {
                let want = rest.get(at).copied().unwrap_or(b' ');
                if c != want {
                    return Self::fail(c, &format!("in literal {word} (expecting {})", go_quote_char(want)));
                }
                self.step = if at + 1 == rest.len() { EndValue } else { Literal(rest, at + 1, word) };
                Ok(())
            }
        }
    }

    fn begin_value(&mut self, c: u8, i: usize) -> Result<(), String> {
        use ScanStep::*;
        match c {
            c if is_space(c) => Ok(()),
            b'{' => {
                self.step = BeginStringOrEmpty;
                self.push(c, ParseState::ObjectKey)
            }
            b'[' => {
                self.step = BeginValueOrEmpty;
                self.push(c, ParseState::ArrayValue)
            }
            b'"' => {
                self.step = InString;
                Ok(())
            }
            b'-' => {
                self.number_start = Some(i);
                self.step = Neg;
                Ok(())
            }
            b'0' => {
                self.number_start = Some(i);
                self.step = Zero;
                Ok(())
            }
            b'1'..=b'9' => {
                self.number_start = Some(i);
                self.step = One;
                Ok(())
            }
            b't' => {
                self.step = Literal(b"rue", 0, "true");
                Ok(())
            }
            b'f' => {
                self.step = Literal(b"alse", 0, "false");
                Ok(())
            }
            b'n' => {
                self.step = Literal(b"ull", 0, "null");
                Ok(())
            }
            _ => Self::fail(c, "looking for beginning of value"),
        }
    }

    fn begin_string(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            Ok(())
        } else if c == b'"' {
            self.step = ScanStep::InString;
            Ok(())
        } else {
            Self::fail(c, "looking for beginning of object key string")
        }
    }

    fn after_zero(&mut self, c: u8, i: usize) -> Result<(), String> {
        match c {
            b'.' => {
                self.step = ScanStep::Dot;
                Ok(())
            }
            b'e' | b'E' => {
                self.step = ScanStep::E;
                Ok(())
            }
            _ => {
                self.finish_number(i);
                self.end_value(c, i)
            }
        }
    }

    fn e_sign(&mut self, c: u8) -> Result<(), String> {
        if c.is_ascii_digit() {
            self.step = ScanStep::E0;
            Ok(())
        } else {
            Self::fail(c, "in exponent of numeric literal")
        }
    }

    fn finish_number(&mut self, end: usize) {
        let Some(start) = self.number_start.take() else { return };
        if self.first_overflowing_number.is_some() {
            return;
        }
        let lit = self.data.get(start..end).unwrap_or_default();
        let lit = String::from_utf8_lossy(lit);
        if lit.parse::<f64>().map(f64::is_infinite).unwrap_or(false) {
            self.first_overflowing_number = Some(lit.into_owned());
        }
    }

    fn end_value(&mut self, c: u8, _i: usize) -> Result<(), String> {
        let Some(&top) = self.stack.last() else {
            self.step = ScanStep::EndTop;
            self.end_top = true;
            return if is_space(c) { Ok(()) } else { Self::fail(c, "after top-level value") };
        };
        if is_space(c) {
            self.step = ScanStep::EndValue;
            return Ok(());
        }
        match top {
            ParseState::ObjectKey => {
                if c == b':' {
                    if let Some(t) = self.stack.last_mut() {
                        *t = ParseState::ObjectValue;
                    }
                    self.step = ScanStep::BeginValue;
                    Ok(())
                } else {
                    Self::fail(c, "after object key")
                }
            }
            ParseState::ObjectValue => match c {
                b',' => {
                    if let Some(t) = self.stack.last_mut() {
                        *t = ParseState::ObjectKey;
                    }
                    self.step = ScanStep::BeginString;
                    Ok(())
                }
                b'}' => {
                    self.pop();
                    Ok(())
                }
                _ => Self::fail(c, "after object key:value pair"),
            },
            ParseState::ArrayValue => match c {
                b',' => {
                    self.step = ScanStep::BeginValue;
                    Ok(())
                }
                b']' => {
                    self.pop();
                    Ok(())
                }
                _ => Self::fail(c, "after array element"),
            },
        }
    }

    fn pop(&mut self) {
        self.stack.pop();
        if self.stack.is_empty() {
            self.step = ScanStep::EndTop;
            self.end_top = true;
        } else {
            self.step = ScanStep::EndValue;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::test_fixtures::widget;

    #[test]
    fn go_cut_cuts_bytes_and_writes_each_stray_byte_as_a_replacement() {
        assert_eq!(go_cut(b"abc", 3), "abc");
        assert_eq!(go_cut(b"abcd", 3), "abc");
        assert!(matches!(go_cut(b"abcd", 3), Cow::Borrowed(_)));
        // "é€" is 2 + 3 bytes: cut after 4, the euro sign's first two bytes remain.
        assert_eq!(go_cut("é€".as_bytes(), 4), "é\u{FFFD}\u{FFFD}");
        // Invalid bytes before the cut: one replacement each, as Go writes them.
        assert_eq!(go_cut(b"a\xe2\x82b\xff", 10), "a\u{FFFD}\u{FFFD}b\u{FFFD}");
    }

    fn decode_err(body: &str) -> String {
        decode_json(body.as_bytes()).expect_err(body)
    }

    fn pre(s: &str) -> String {
        format!("{VERSION_KIND_ERROR_PREFIX}{s}")
    }

    #[test]
    fn decode_valid_object() {
        let body = serde_json::to_vec(&widget()).unwrap();
        let (v, dups) = decode_json(&body).unwrap();
        assert_eq!(v, widget());
        assert!(dups.is_empty());
    }

    #[test]
    fn whole_floats_are_written_back_as_go_writes_them() {
        let (v, _) = decode_json(br#"{"a":30.0,"b":1e3,"c":30.5,"d":-0.0,"e":1e300,"f":-2.0}"#).unwrap();
        assert_eq!(v.to_string(), r#"{"a":30,"b":1000,"c":30.5,"d":-0.0,"e":1e+300,"f":-2}"#);
    }

    #[test]
    fn decode_reports_duplicates_with_paths_and_later_value_wins() {
        let body = r#"{"metadata":{"name":"a","name":"b"},"spec":{"weight":1,"weight":2,
            "items":[{"x":1},{"x":2},{"x":1,"x":3}]},"kind":"Widget","kind":"Widget"}"#;
        let (v, dups) = decode_json(body.as_bytes()).unwrap();
        assert_eq!(dups, vec!["metadata.name", "spec.weight", "spec.items[2].x", "kind"]);
        assert_eq!(v["metadata"]["name"], "b");
        assert_eq!(v["spec"]["weight"], 2);
        assert_eq!(v["spec"]["items"][2]["x"], 3);
    }

    #[test]
    fn decode_dedupes_duplicates_and_caps_them() {
        let (_, dups) = decode_json(br#"{"a":1,"a":2,"a":3}"#).unwrap();
        assert_eq!(dups, vec!["a"]);
        let mut body = String::from("{");
        for i in 0..150 {
            body.push_str(&format!("\"k{i}\":1,\"k{i}\":2,"));
        }
        body.push_str("\"end\":0}");
        let (_, dups) = decode_json(body.as_bytes()).unwrap();
        assert_eq!(dups.len(), 100);
        assert_eq!(dups[0], "k0");
    }

    #[test]
    fn decode_nested_array_duplicate_paths() {
        let (_, dups) = decode_json(br#"{"a":[[{"b":{"c":1,"c":2}}]],"x.y":{"z":1,"z":1}}"#).unwrap();
        assert_eq!(dups, vec!["a[0][0].b.c", "x.y.z"]);
    }

    #[test]
    fn decode_syntax_errors_use_go_wording() {
        let cases: &[(&str, &str)] = &[
            ("", "unexpected end of JSON input"),
            ("   ", "unexpected end of JSON input"),
            ("{", "unexpected end of JSON input"),
            (r#"{"a":"x"#, "unexpected end of JSON input"),
            (r#"{"a":1"#, "unexpected end of JSON input"),
            (r#"{"a" 1}"#, "invalid character '1' after object key"),
            (r#"{"a":1,}"#, "invalid character '}' looking for beginning of object key string"),
            (r#"{"a":1 "b":2}"#, "invalid character '\"' after object key:value pair"),
            (r#"{"a":[1 2]}"#, "invalid character '2' after array element"),
            (r#"{"a":[1,]}"#, "invalid character ']' looking for beginning of value"),
            (r#"{"a":tru}"#, "invalid character '}' in literal true (expecting 'e')"),
            (r#"{"a":fals}"#, "invalid character '}' in literal false (expecting 'e')"),
            (r#"{"a":nUll}"#, "invalid character 'U' in literal null (expecting 'u')"),
            (r#"{"a":01}"#, "invalid character '1' after object key:value pair"),
            (r#"{"a":1.}"#, "invalid character '}' after decimal point in numeric literal"),
            (r#"{"a":1e}"#, "invalid character '}' in exponent of numeric literal"),
            (r#"{"a":-}"#, "invalid character '}' in numeric literal"),
            (r#"{"a":+1}"#, "invalid character '+' looking for beginning of value"),
            (r#"{"a":"x\q"}"#, "invalid character 'q' in string escape code"),
            (r#"{"a":"\u12g4"}"#, "invalid character 'g' in \\u hexadecimal character escape"),
            ("{\"a\":\"x\ny\"}", "invalid character '\\n' in string literal"),
            ("{\"a\":\"x\ty\"}", "invalid character '\\t' in string literal"),
            (r#"{"a":1} x"#, "invalid character 'x' after top-level value"),
            (r#"{"a":1}}"#, "invalid character '}' after top-level value"),
            (r#"{'a':1}"#, "invalid character '\\'' looking for beginning of object key string"),
            ("x", "invalid character 'x' looking for beginning of value"),
            ("\u{1}", "invalid character '\\x01' looking for beginning of value"),
            ("{\"a\":\u{7f}}", "invalid character '\\x7f' looking for beginning of value"),
            ("<html>", "invalid character '<' looking for beginning of value"),
        ];
        for (body, want) in cases {
            assert_eq!(decode_err(body), pre(want), "body {body:?}");
        }
    }

    #[test]
    fn decode_error_characters_outside_ascii_are_quoted_like_go() {
        assert_eq!(decode_json(b"\xff").unwrap_err(), pre("invalid character '\u{ff}' looking for beginning of value"));
        assert_eq!(
            decode_json(b"{\"a\":\xc2\xa0}").unwrap_err(),
            pre("invalid character '\u{c2}' looking for beginning of value")
        );
        assert_eq!(
            decode_json(b"\xa0").unwrap_err(),
            pre("invalid character '\\u00a0' looking for beginning of value")
        );
        assert_eq!(go_quote_char(b'\''), r"'\''");
        assert_eq!(go_quote_char(b'"'), "'\"'");
        assert_eq!(go_quote_char(b'\\'), r"'\\'");
        assert_eq!(go_quote_char(0x85), r"'\u0085'");
        assert_eq!(go_quote_char(b'\r'), r"'\r'");
    }

    #[test]
    fn decode_replaces_invalid_utf8_in_strings_per_byte() {
        let (v, _) = decode_json(b"{\"name\":\"a\xff\xfeb\",\"x\":\"\xf0\x9f\x98\"}").unwrap();
        assert_eq!(v["name"], "a\u{FFFD}\u{FFFD}b");
        assert_eq!(v["x"], "\u{FFFD}\u{FFFD}\u{FFFD}");
        let (v, _) = decode_json("{\"name\":\"llamá 🦙\"}".as_bytes()).unwrap();
        assert_eq!(v["name"], "llamá 🦙");
    }

    #[test]
    fn decode_rejects_non_object_top_level() {
        let want = |k: &str| {
            pre(&format!(
                "json: cannot unmarshal {k} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
            ))
        };
        assert_eq!(decode_err("[1,2]"), want("array"));
        assert_eq!(decode_err(r#""widget""#), want("string"));
        assert_eq!(decode_err("5"), want("number"));
        assert_eq!(decode_err(" true "), want("bool"));
        assert_eq!(decode_err("null"), "Object 'Kind' is missing in 'null'");
    }

    #[test]
    fn decode_rejects_non_string_type_meta_like_interpret() {
        assert_eq!(
            decode_err(r#"{"kind":5}"#),
            pre("json: cannot unmarshal number into Go struct field .kind of type string")
        );
        assert_eq!(
            decode_err(r#"{"kind":"Widget","APIVERSION":true}"#),
            pre("json: cannot unmarshal bool into Go struct field .apiVersion of type string")
        );
        assert_eq!(
            decode_err(r#"{"apiVersion":{},"kind":[]}"#),
            pre("json: cannot unmarshal object into Go struct field .apiVersion of type string")
        );
        assert!(decode_json(br#"{"kind":null,"apiVersion":"v1"}"#).is_ok());
        assert!(decode_json(br#"{"spec":{"kind":5}}"#).is_ok());
        // the Kelvin sign folds to 'k' in Go's field matching
        assert!(decode_json("{\"\u{212A}ind\":1}".as_bytes()).is_err());
    }

    fn nested(depth: usize) -> String {
        format!("{{\"a\":{}{}}}", "[".repeat(depth - 1), "]".repeat(depth - 1))
    }

    #[test]
    fn decode_depth_limit() {
        assert!(decode_json(nested(MAX_NESTING_DEPTH).as_bytes()).is_ok());
        assert_eq!(
            decode_json(nested(MAX_NESTING_DEPTH + 1).as_bytes()).unwrap_err(),
            pre("invalid character '[' exceeded max depth")
        );
    }

    #[test]
    fn decode_ten_thousand_deep_nesting_is_an_error_not_a_crash() {
        let arrays = "[".repeat(10_000) + &"]".repeat(10_000);
        assert_eq!(decode_json(arrays.as_bytes()).unwrap_err(), pre("invalid character '[' exceeded max depth"));
        let objects = "{\"a\":".repeat(10_000) + "1" + &"}".repeat(10_000);
        assert_eq!(decode_json(objects.as_bytes()).unwrap_err(), pre("invalid character '{' exceeded max depth"));
        let unclosed = "[".repeat(20_000);
        assert_eq!(decode_json(unclosed.as_bytes()).unwrap_err(), pre("invalid character '[' exceeded max depth"));
        // deeper than Go's own limit is Go's own error
        let deeper = "[".repeat(10_001) + &"]".repeat(10_001);
        assert_eq!(decode_json(deeper.as_bytes()).unwrap_err(), pre("invalid character '[' exceeded max depth"));
    }

    #[test]
    fn decode_numbers_like_preserve_ints() {
        let (v, _) = decode_json(br#"{"a":9223372036854775807,"b":9223372036854775808,"c":-9223372036854775808,"d":1e2,"e":123456789012345678901234567890,"f":1e-400}"#).unwrap();
        assert_eq!(v["a"].as_i64(), Some(i64::MAX));
        assert!(v["b"].is_f64());
        assert_eq!(v["c"].as_i64(), Some(i64::MIN));
        assert_eq!(v["d"].as_f64(), Some(100.0));
        assert!(v["e"].is_f64());
        assert_eq!(v["f"].as_f64(), Some(0.0));
        assert_eq!(decode_err(r#"{"a":1e400}"#), "json: cannot unmarshal number 1e400 into Go value of type float64");
        let huge = format!("{{\"a\":-{}}}", "9".repeat(400));
        assert_eq!(
            decode_err(&huge),
            format!("json: cannot unmarshal number -{} into Go value of type float64", "9".repeat(400))
        );
    }

    #[test]
    fn decode_error_message_wraps_like_transform_decode_error() {
        let body = br#"{"apiVersion":"example.com/v1alpha","#;
        let err = decode_json(body).unwrap_err();
        assert_eq!(
            decode_error_message(&err, body, "Widget", "v1alpha"),
            "the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: unexpected end of JSON input ({\"apiVersion\":\"example.com/v1a ...)"
        );
        assert_eq!(
            decode_error_message(&decode_err("xyz"), b"xyz", "Widget", "v1alpha"),
            "the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: invalid character 'x' looking for beginning of value (78797a)"
        );
        assert_eq!(
            decode_error_message(&decode_err(""), b"", "Widget", "v1alpha"),
            "the object provided is unrecognized (must be of type Widget): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)"
        );
        let strict = strict_decoding_error(&["metadata.name".into()], &["spec.color".into()]).unwrap();
        assert_eq!(
            decode_error_message(&strict, b"{}", "Widget", "v1alpha"),
            "Widget in version \"v1alpha\" cannot be handled as a Widget: strict decoding error: duplicate field \"metadata.name\", unknown field \"spec.color\""
        );
    }

    #[test]
    fn strict_helpers() {
        assert_eq!(strict_decoding_error(&[], &[]), None);
        assert_eq!(
            strict_warnings(&["a".into()], &["b".into(), "c".into()]),
            vec!["duplicate field \"a\"", "unknown field \"b\"", "unknown field \"c\""]
        );
    }
}
