//! Request-body decoding and validation with kube-apiserver's semantics and
//! wording, for kinds served the way a CustomResourceDefinition is served.
//!
//! The order kube-apiserver's custom-resource handler applies these steps in,
//! and what each failure becomes:
//!
//! 1. [`decode_json`]: syntax errors, a top level that is not an object, and a
//!    non-string top-level `apiVersion`/`kind` are 400 BadRequest; wrap the
//!    message with [`decode_error_message`]. The duplicate-key paths it returns
//!    are strict-decoding findings (warnings, or a 400 under
//!    `fieldValidation=Strict`: see [`strict_decoding_error`] and
//!    [`strict_warnings`]).
//! 2. [`check_object_meta_types`] on `metadata`: a wrongly typed ObjectMeta
//!    field is a 400 in kube (the decoder fails), not a 422.
//! 3. [`prune_unknown_fields`]: drops what the structural schema does not
//!    declare (paths returned for warnings / strict errors) and the
//!    non-nullable `null`s kube drops; [`apply_defaults`] if the schema has
//!    defaults.
//! 4. 422 Invalid, in this order: [`validate_type_meta`] (alone if it fails),
//!    then [`validate_object_meta`] (+ [`validate_object_meta_update`] on
//!    update, after [`prepare_meta_for_update`]), then
//!    [`validate_against_schema`].

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet};
use std::fmt::{self, Write as _};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

pub use crate::machinery::gofmt::{go_float, go_quote};
use crate::machinery::selector::{
    validate_dns1123_label, validate_dns1123_subdomain, validate_label_value, validate_qualified_name,
};
use crate::machinery::status::{go_value, FieldError, FieldErrorKind};

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

/// Recursion guard for the schema walks (values from [`decode_json`] are never
/// deeper than [`MAX_NESTING_DEPTH`]; this only protects hand-built values).
const MAX_WALK_DEPTH: usize = 512;

/// `metav1.ObjectMeta`'s JSON fields.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];
const OWNER_REFERENCE_FIELDS: &[&str] = &["apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"];
const MANAGED_FIELDS_ENTRY_FIELDS: &[&str] =
    &["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource"];

/// Fields an embedded resource (and the root) keeps whatever the schema says.
const META_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
const FIELD_MANAGER_MAX_LENGTH: usize = 128;
const MAX_SUBRESOURCE_NAME_LENGTH: usize = 256;

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
    let text: Cow<'_, str> = match std::str::from_utf8(body) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(go_lossy_utf8(body)),
    };
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

/// Wraps a [`decode_json`] / [`check_object_meta_types`] /
/// [`strict_decoding_error`] message the way kube-apiserver's
/// `transformDecodeError` does for the 400 it sends:
/// * errors from reading apiVersion/kind:
///   `the object provided is unrecognized (must be of type Llama): couldn't get version/kind; json parse error: ... (<first 30 bytes>)`
///   (the body shown as text if it starts with `{`, else as hex, `<empty>` if empty);
/// * later errors: `Llama in version "v1alpha" cannot be handled as a Llama: <err>`.
pub fn decode_error_message(err: &str, body: &[u8], kind: &str, version: &str) -> String {
    if err.starts_with(VERSION_KIND_ERROR_PREFIX) {
        unrecognized_object_message(err, body, kind)
    } else {
        format!("{kind} in version {} cannot be handled as a {kind}: {err}", go_quote(version))
    }
}

/// kube's 400 text for a body whose apiVersion/kind could not be read yet (a
/// YAML body that does not convert, too): `the object provided is unrecognized
/// (must be of type Llama): <err> (<first 30 bytes>)`.
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
                    if go_fold_eq(&key, field) && !matches!(value, Value::String(_) | Value::Null) {
                        ctx.type_meta_error = Some(format!(
                            "json: cannot unmarshal {} into Go struct field .{field} of type string",
                            go_json_kind(&value)
                        ));
                    }
                }
            }
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// Go's case-insensitive struct-field match (`bytes.EqualFold` plus the
/// Kelvin sign and long s that fold to `k` and `s`).
pub(crate) fn go_fold_eq(key: &str, field: &str) -> bool {
    let fold = |c: char| match c {
        '\u{212A}' => 'k',
        '\u{17F}' => 's',
        c => c.to_ascii_lowercase(),
    };
    key.chars().map(fold).eq(field.chars().map(fold))
}

/// Replaces each byte of every invalid UTF-8 sequence with U+FFFD, as Go's
/// decoder does inside strings (outside strings such bytes are syntax errors,
/// reported from the original bytes).
fn go_lossy_utf8(body: &[u8]) -> String {
    let mut out = String::with_capacity(body.len() + 16);
    for chunk in body.utf8_chunks() {
        out.push_str(chunk.valid());
        for _ in chunk.invalid() {
            out.push('\u{FFFD}');
        }
    }
    out
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

fn summarize_data(data: &[u8], max: usize) -> String {
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
pub(crate) fn go_json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
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

/// Go's `quoteChar`: how its scanner shows the offending byte.
fn go_quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => "'\"'".into(),
        c => {
            // Go converts the byte to the rune U+00XX and quotes it.
            let q = go_quote(&char::from(c).to_string());
            format!("'{}'", &q[1..q.len() - 1])
        }
    }
}

// ---------------------------------------------------------------------------
// ObjectMeta decoding checks
// ---------------------------------------------------------------------------

/// The type checks kube's decoder applies to `metadata` (it round-trips it
/// through `metav1.ObjectMeta`). `Err` carries Go's message, e.g.
/// `json: cannot unmarshal number into Go struct field ObjectMeta.name of type string`,
/// which kube returns as a 400 (wrap it with [`decode_error_message`]).
/// A missing or `null` metadata is fine.
pub fn check_object_meta_types(meta: &Value) -> Result<(), String> {
    let m = match meta {
        Value::Null => return Ok(()),
        Value::Object(m) => m,
        other => {
            return Err(format!("json: cannot unmarshal {} into Go value of type v1.ObjectMeta", go_json_kind(other)))
        }
    };
    for (k, v) in m {
        match k.as_str() {
            "name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion" => {
                go_expect_string(v, "ObjectMeta", k, "string")?
            }
            "generation" | "deletionGracePeriodSeconds" => go_expect_int64(v, "ObjectMeta", k)?,
            "creationTimestamp" | "deletionTimestamp" => go_expect_time(v, "ObjectMeta", k)?,
            "labels" | "annotations" => match v {
                Value::Null => {}
                Value::Object(map) => {
                    for item in map.values() {
                        go_expect_string(item, "ObjectMeta", k, "string")?;
                    }
                }
                other => return Err(go_type_error(other, "ObjectMeta", k, "map[string]string")),
            },
            "finalizers" => match v {
                Value::Null => {}
                Value::Array(items) => {
                    for item in items {
                        go_expect_string(item, "ObjectMeta", k, "string")?;
                    }
                }
                other => return Err(go_type_error(other, "ObjectMeta", k, "[]string")),
            },
            "ownerReferences" => go_expect_struct_list(v, k, "OwnerReference", |field, fv| match field {
                "apiVersion" | "kind" | "name" | "uid" => {
                    go_expect_string(fv, "OwnerReference", &format!("ownerReferences.{field}"), "string")
                }
                "controller" | "blockOwnerDeletion" => match fv {
                    Value::Null | Value::Bool(_) => Ok(()),
                    other => Err(go_type_error(other, "OwnerReference", &format!("ownerReferences.{field}"), "bool")),
                },
                _ => Ok(()),
            })?,
            "managedFields" => go_expect_struct_list(v, k, "ManagedFieldsEntry", |field, fv| {
                let path = format!("managedFields.{field}");
                match field {
                    "manager" | "apiVersion" | "fieldsType" | "subresource" => {
                        go_expect_string(fv, "ManagedFieldsEntry", &path, "string")
                    }
                    "operation" => go_expect_string(fv, "ManagedFieldsEntry", &path, "v1.ManagedFieldsOperationType"),
                    "time" => go_expect_time(fv, "ManagedFieldsEntry", &path),
                    _ => Ok(()),
                }
            })?,
            _ => {}
        }
    }
    Ok(())
}

fn go_type_error(v: &Value, strukt: &str, field: &str, go_type: &str) -> String {
    format!("json: cannot unmarshal {} into Go struct field {strukt}.{field} of type {go_type}", go_json_kind(v))
}

fn go_expect_string(v: &Value, strukt: &str, field: &str, go_type: &str) -> Result<(), String> {
    match v {
        Value::Null | Value::String(_) => Ok(()),
        other => Err(go_type_error(other, strukt, field, go_type)),
    }
}

fn go_expect_int64(v: &Value, strukt: &str, field: &str) -> Result<(), String> {
    match v {
        Value::Null => Ok(()),
        Value::Number(n) if n.as_i64().is_some() => Ok(()),
        Value::Number(n) => {
            Err(format!("json: cannot unmarshal number {n} into Go struct field {strukt}.{field} of type int64"))
        }
        other => Err(go_type_error(other, strukt, field, "int64")),
    }
}

/// `metav1.Time.UnmarshalJSON`: null, or an RFC 3339 string.
fn go_expect_time(v: &Value, strukt: &str, field: &str) -> Result<(), String> {
    match v {
        Value::Null => Ok(()),
        Value::String(s) => {
            if parse_rfc3339(s).is_some() {
                Ok(())
            } else {
                let q = go_quote(s);
                Err(format!("parsing time {q} as \"2006-01-02T15:04:05Z07:00\": cannot parse {q} as \"2006\""))
            }
        }
        other => Err(go_type_error(other, strukt, field, "string")),
    }
}

fn go_expect_struct_list(
    v: &Value,
    field: &str,
    strukt: &str,
    check: impl Fn(&str, &Value) -> Result<(), String>,
) -> Result<(), String> {
    match v {
        Value::Null => Ok(()),
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Null => {}
                    Value::Object(fields) => {
                        for (k, fv) in fields {
                            check(k, fv)?;
                        }
                    }
                    other => return Err(go_type_error(other, "ObjectMeta", field, &format!("v1.{strukt}"))),
                }
            }
            Ok(())
        }
        other => Err(go_type_error(other, "ObjectMeta", field, &format!("[]v1.{strukt}"))),
    }
}

// ---------------------------------------------------------------------------
// Pruning and defaulting
// ---------------------------------------------------------------------------

enum Additional<'s> {
    Absent,
    Any,
    Schema(&'s Value),
}

fn sget<'s>(s: &'s Value, key: &str) -> Option<&'s Value> {
    s.as_object()?.get(key)
}

fn sflag(s: &Value, key: &str) -> bool {
    sget(s, key).and_then(Value::as_bool).unwrap_or(false)
}

fn sprops(s: &Value) -> Option<&Map<String, Value>> {
    sget(s, "properties")?.as_object()
}

fn sprop<'s>(s: &'s Value, key: &str) -> Option<&'s Value> {
    sprops(s)?.get(key)
}

fn sadditional(s: &Value) -> Additional<'_> {
    match sget(s, "additionalProperties") {
        Some(v @ Value::Object(_)) => Additional::Schema(v),
        Some(Value::Bool(true)) => Additional::Any,
        _ => Additional::Absent,
    }
}

fn sitems(s: &Value) -> Option<&Value> {
    sget(s, "items").filter(|v| v.is_object())
}

/// The schema for the value under `key` of an object with schema `s`.
fn field_schema<'s>(s: Option<&'s Value>, key: &str) -> Option<&'s Value> {
    let s = s?;
    if let Some(p) = sprop(s, key) {
        return Some(p);
    }
    match sadditional(s) {
        Additional::Schema(a) => Some(a),
        _ => None,
    }
}

fn push_key(path: &mut String, key: &str) -> usize {
    let mark = path.len();
    if mark > 0 {
        path.push('.');
    }
    path.push_str(key);
    mark
}

fn push_index(path: &mut String, i: usize) -> usize {
    let mark = path.len();
    let _ = write!(path, "[{i}]");
    mark
}

/// Removes every field the structural schema does not declare, like kube's
/// decoder does for a custom resource, and returns the removed paths.
///
/// * Unknown `metadata` fields (not in `metav1.ObjectMeta`, or not in an owner
///   reference / managed-fields entry) come first, as kube reports them
///   (sorted here; kube lists these in document order):
///   `metadata.foo`, `metadata.ownerReferences[0].foo`.
/// * Then, sorted, what the schema does not declare (`spec.color`,
///   `status.conditions[0].foo`). At the root and in
///   `x-kubernetes-embedded-resource` objects `apiVersion`, `kind` and
///   `metadata` are always kept; `x-kubernetes-preserve-unknown-fields: true`
///   keeps unknown fields (declared ones below are still pruned);
///   `additionalProperties` with a schema prunes values by that schema, and
///   `additionalProperties: true` keeps everything below it.
/// * Then the `metadata` of embedded resources (`spec.template.metadata.foo`).
///
/// Also drops, without reporting, `null` values of fields whose schema is not
/// `nullable` and has no `default` (kube's `PruneNonNullableNullsWithoutDefaults`,
/// so `"colour": null` on a non-nullable field is as if absent).
/// A non-object `obj` is left alone.
pub fn prune_unknown_fields(obj: &mut Value, schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Value::Object(root) = obj else { return out };
    if let Some(Value::Object(meta)) = root.get_mut("metadata") {
        let mut path = String::from("metadata");
        prune_object_meta(meta, &mut path, &mut out);
        out.sort();
    }
    let mut pruned = Vec::new();
    let mut path = String::new();
    prune_node(obj, Some(schema), true, &mut path, &mut pruned, 0);
    pruned.sort();
    out.extend(pruned);
    drop_non_nullable_nulls(obj, Some(schema), 0);
    let mut path = String::new();
    coerce_embedded(obj, schema, false, &mut path, &mut out, 0);
    out
}

fn prune_object_meta(meta: &mut Map<String, Value>, path: &mut String, out: &mut Vec<String>) {
    meta.retain(|k, v| {
        if !OBJECT_META_FIELDS.contains(&k.as_str()) {
            let mark = push_key(path, k);
            out.push(path.clone());
            path.truncate(mark);
            return false;
        }
        let known = match k.as_str() {
            "ownerReferences" => OWNER_REFERENCE_FIELDS,
            "managedFields" => MANAGED_FIELDS_ENTRY_FIELDS,
            _ => return true,
        };
        if let Value::Array(items) = v {
            let mark = push_key(path, k);
            for (i, item) in items.iter_mut().enumerate() {
                if let Value::Object(fields) = item {
                    let imark = push_index(path, i);
                    fields.retain(|fk, _| {
                        if known.contains(&fk.as_str()) {
                            true
                        } else {
                            let fmark = push_key(path, fk);
                            out.push(path.clone());
                            path.truncate(fmark);
                            false
                        }
                    });
                    path.truncate(imark);
                }
            }
            path.truncate(mark);
        }
        true
    });
}

/// kube's `pruning.prune`: `embedded` is true at the root and for
/// `x-kubernetes-embedded-resource` schemas.
fn prune_node(
    x: &mut Value,
    s: Option<&Value>,
    embedded_root: bool,
    path: &mut String,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_WALK_DEPTH {
        return;
    }
    if let Some(s) = s {
        if sflag(s, "x-kubernetes-preserve-unknown-fields") {
            skip_prune(x, s, embedded_root, path, out, depth);
            return;
        }
    }
    match x {
        Value::Object(m) => {
            let Some(s) = s else {
                for k in m.keys() {
                    let mark = push_key(path, k);
                    out.push(path.clone());
                    path.truncate(mark);
                }
                m.clear();
                return;
            };
            let embedded = embedded_root || sflag(s, "x-kubernetes-embedded-resource");
            m.retain(|k, v| {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    return true;
                }
                let mark = push_key(path, k);
                let keep = if let Some(p) = sprop(s, k) {
                    prune_node(v, Some(p), false, path, out, depth + 1);
                    true
                } else {
                    match sadditional(s) {
                        Additional::Schema(a) => {
                            prune_node(v, Some(a), false, path, out, depth + 1);
                            true
                        }
                        Additional::Any => true,
                        Additional::Absent => {
                            out.push(path.clone());
                            false
                        }
                    }
                };
                path.truncate(mark);
                keep
            });
        }
        Value::Array(items) => {
            let it = s.and_then(sitems);
            for (i, v) in items.iter_mut().enumerate() {
                let mark = push_index(path, i);
                prune_node(v, it, false, path, out, depth + 1);
                path.truncate(mark);
            }
        }
        _ => {}
    }
}

/// kube's `pruning.skipPrune`: unknown fields stay, known ones are pruned below.
fn skip_prune(x: &mut Value, s: &Value, embedded_root: bool, path: &mut String, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_WALK_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            let embedded = embedded_root || sflag(s, "x-kubernetes-embedded-resource");
            for (k, v) in m.iter_mut() {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                let sub = match (sprop(s, k), sadditional(s)) {
                    (Some(p), _) => Some(p),
                    (None, Additional::Schema(a)) => Some(a),
                    _ => None,
                };
                if let Some(sub) = sub {
                    let mark = push_key(path, k);
                    prune_node(v, Some(sub), false, path, out, depth + 1);
                    path.truncate(mark);
                }
            }
        }
        Value::Array(items) => {
            if let Some(it) = sitems(s) {
                for (i, v) in items.iter_mut().enumerate() {
                    let mark = push_index(path, i);
                    skip_prune(v, it, false, path, out, depth + 1);
                    path.truncate(mark);
                }
            }
        }
        _ => {}
    }
}

fn nullable(s: &Value) -> bool {
    sflag(s, "nullable")
}

fn has_default(s: &Value) -> bool {
    sget(s, "default").is_some_and(|d| !d.is_null())
}

/// kube's `PruneNonNullableNullsWithoutDefaults`.
fn drop_non_nullable_nulls(x: &mut Value, s: Option<&Value>, depth: usize) {
    if depth > MAX_WALK_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => m.retain(|k, v| {
            let sub = field_schema(s, k);
            if v.is_null() && sub.is_some_and(|sub| !nullable(sub) && !has_default(sub)) {
                return false;
            }
            drop_non_nullable_nulls(v, sub, depth + 1);
            true
        }),
        Value::Array(items) => {
            let it = s.and_then(sitems);
            for v in items {
                drop_non_nullable_nulls(v, it, depth + 1);
            }
        }
        _ => {}
    }
}

/// kube's `objectmeta.Coerce` (non-root): prunes the ObjectMeta of embedded resources.
fn coerce_embedded(x: &mut Value, s: &Value, is_root: bool, path: &mut String, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_WALK_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            if !is_root && sflag(s, "x-kubernetes-embedded-resource") {
                if let Some(Value::Object(meta)) = m.get_mut("metadata") {
                    let mark = push_key(path, "metadata");
                    prune_object_meta(meta, path, out);
                    path.truncate(mark);
                }
            }
            for (k, v) in m.iter_mut() {
                let Some(sub) = field_schema(Some(s), k) else { continue };
                let mark = push_key(path, k);
                coerce_embedded(v, sub, false, path, out, depth + 1);
                path.truncate(mark);
            }
        }
        Value::Array(items) => {
            if let Some(it) = sitems(s) {
                for (i, v) in items.iter_mut().enumerate() {
                    let mark = push_index(path, i);
                    coerce_embedded(v, it, false, path, out, depth + 1);
                    path.truncate(mark);
                }
            }
        }
        _ => {}
    }
}

/// Fills in schema `default`s like kube's structural defaulting: a property
/// with a default that is absent (or `null` where not nullable) gets a copy
/// of the default; then properties, additionalProperties and items are
/// defaulted recursively.
pub fn apply_defaults(obj: &mut Value, schema: &Value) {
    default_node(obj, schema, 0);
}

fn default_node(x: &mut Value, s: &Value, depth: usize) {
    if depth > MAX_WALK_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            if let Some(props) = sprops(s) {
                for (k, p) in props {
                    let Some(d) = sget(p, "default").filter(|d| !d.is_null()) else { continue };
                    let missing = match m.get(k) {
                        None => true,
                        Some(v) => v.is_null() && !nullable(p),
                    };
                    if missing {
                        m.insert(k.clone(), d.clone());
                    }
                }
            }
            for (k, v) in m.iter_mut() {
                if let Some(sub) = field_schema(Some(s), k) {
                    default_node(v, sub, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(it) = sitems(s) {
                for v in items {
                    default_node(v, it, depth + 1);
                }
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------
// Schema validation
// ---------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

fn num_of(n: &Number) -> Num {
    match n.as_i64() {
        Some(i) => Num::Int(i),
        None => Num::Float(n.as_f64().unwrap_or(0.0)),
    }
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    fn go(self) -> String {
        match self {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => go_float(f),
        }
    }
}

/// `swag.IsFloat64AJSONInteger`.
fn float_is_json_integer(f: f64) -> bool {
    const LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53
    f.is_finite() && (-LIMIT..=LIMIT).contains(&f) && f.fract() == 0.0
}

fn sint(s: &Value, key: &str) -> Option<i64> {
    let v = sget(s, key)?;
    v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))
}

/// The schema types a value may have (`x-kubernetes-int-or-string` is integer or string).
fn schema_types(s: &Value) -> Vec<&str> {
    if sflag(s, "x-kubernetes-int-or-string") {
        return vec!["integer", "string"];
    }
    match sget(s, "type") {
        Some(Value::String(t)) if !t.is_empty() => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Checks `obj` against a structural OpenAPI v3 schema the way kube-apiserver
/// validates a custom resource (kube-openapi's validator, converted to field
/// errors by apiextensions), e.g.
/// `spec.weight: Invalid value: "string": spec.weight in body must be of type number: "string"` (TypeInvalid),
/// `spec.weight: Invalid value: 0: spec.weight in body should be greater than 0` (Invalid),
/// `spec.height: Required value` (Required).
///
/// Checked: `type` (with kube's format-based quirks: a float for an `int64`
/// field reads `must be of type int64: "float64"`), `nullable`,
/// `x-kubernetes-int-or-string`, `required`, `minimum`/`maximum` with
/// `exclusiveMinimum`/`exclusiveMaximum` as booleans (OpenAPI v3.0) or numbers
/// (JSON Schema 2019+), `multipleOf`, `minLength`/`maxLength` (in characters),
/// `format` `date-time` and `date`, `enum`, `minItems`/`maxItems`, `items`,
/// `minProperties`/`maxProperties`, `additionalProperties` schemas.
/// Not checked: `pattern`, `uniqueItems`, `allOf`/`anyOf`/`oneOf`/`not`,
/// `x-kubernetes-validations` (CEL), list/map-type uniqueness, other formats.
///
/// `metadata` (at the root and in embedded resources) is type-checked but not
/// entered; use [`validate_object_meta`]. A top-level (or embedded)
/// `apiVersion`/`kind` the schema does not declare must still be a string
/// (`kind: Invalid value: 5: must be a string`).
pub fn validate_against_schema(obj: &Value, schema: &Value) -> Vec<FieldError> {
    let mut v = SchemaValidator { errs: Vec::new() };
    v.node(obj, schema, "", 0, false);
    v.errs
}

struct SchemaValidator {
    errs: Vec<FieldError>,
}

/// kube-openapi names paths `.foo` for additional properties at the root;
/// apiextensions strips the dot for the field path.
fn field_path(path: &str) -> String {
    path.strip_prefix('.').unwrap_or(path).to_string()
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl SchemaValidator {
    fn push(&mut self, kind: FieldErrorKind, path: &str, value: Option<String>, detail: String) {
        self.errs.push(FieldError { kind, field: field_path(path), value, detail });
    }

    fn node(&mut self, v: &Value, s: &Value, path: &str, depth: usize, shallow: bool) {
        if depth > MAX_WALK_DEPTH {
            self.push(
                FieldErrorKind::Invalid,
                path,
                None,
                format!("must not be nested deeper than {MAX_WALK_DEPTH} levels"),
            );
            return;
        }
        self.check_type(v, s, path);
        match v {
            Value::Null => {}
            Value::String(st) => {
                self.check_string(st, s, path);
                self.check_format(st, s, path);
            }
            Value::Number(n) => self.check_number(num_of(n), s, path),
            Value::Array(items) if !shallow => self.check_array(items, s, path, depth),
            _ => {}
        }
        self.check_enum(v, s, path);
        if let Value::Object(m) = v {
            if !shallow {
                let embedded = depth == 0 || sflag(s, "x-kubernetes-embedded-resource");
                self.check_object(m, s, path, depth, embedded);
            }
        }
    }

    fn type_error(&mut self, path: &str, type_name: &str, got: &str) {
        let q = go_quote(got);
        self.push(
            FieldErrorKind::TypeInvalid,
            path,
            Some(q.clone()),
            format!("{path} in body must be of type {type_name}: {q}"),
        );
    }

    /// kube-openapi's typeValidator.
    fn check_type(&mut self, v: &Value, s: &Value, path: &str) {
        let types = schema_types(s);
        let format = sget(s, "format").and_then(Value::as_str).unwrap_or("");
        if types.is_empty() && format.is_empty() {
            return;
        }
        let has = |t: &str| types.contains(&t);
        let (sch_type, inferred, is_float_int) = match v {
            Value::Null => {
                if !types.is_empty() && !has("null") && !nullable(s) {
                    self.type_error(path, &types.join(","), "null");
                }
                return;
            }
            Value::Bool(_) => ("boolean", "", false),
            Value::String(_) => ("string", "", false),
            Value::Array(_) => ("array", "", false),
            Value::Object(_) => ("object", "", false),
            Value::Number(n) => match num_of(n) {
                Num::Int(_) => ("integer", "int64", false),
                Num::Float(f) => ("number", "float64", float_is_json_integer(f) && has("integer")),
            },
        };
        let is_int_float = sch_type == "integer" && has("number");
        let is_lower_int = format == "int64" && inferred == "int32";
        let is_lower_float = format == "float64" && inferred == "float32";
        let string_or_array = matches!(v, Value::String(_) | Value::Array(_));
        if !string_or_array
            && !format.is_empty()
            && !(has(sch_type) || inferred == format || is_float_int || is_int_float || is_lower_int || is_lower_float)
        {
            self.type_error(path, format, inferred);
            return;
        }
        if string_or_array && !(has("number") || has("integer") || format.is_empty()) {
            return;
        }
        if !(has(sch_type) || is_float_int || is_int_float) {
            self.type_error(path, &types.join(","), sch_type);
        }
    }

    fn check_string(&mut self, st: &str, s: &Value, path: &str) {
        let len = st.chars().count() as i64;
        if let Some(max) = sint(s, "maxLength") {
            if len > max {
                self.push(FieldErrorKind::TooLong, path, None, format!("may not be longer than {max}"));
                return;
            }
        }
        if let Some(min) = sint(s, "minLength") {
            if len < min {
                self.push(
                    FieldErrorKind::Invalid,
                    path,
                    Some(go_quote(st)),
                    format!("{path} in body should be at least {min} chars long"),
                );
            }
        }
    }

    fn check_format(&mut self, st: &str, s: &Value, path: &str) {
        let Some(format) = sget(s, "format").and_then(Value::as_str) else { return };
        let ok = match format {
            "date-time" | "datetime" => is_date_time(st),
            "date" => is_date(st),
            _ => return,
        };
        if !ok {
            let q = go_quote(st);
            self.push(
                FieldErrorKind::TypeInvalid,
                path,
                Some(q.clone()),
                format!("{path} in body must be of type {format}: {q}"),
            );
        }
    }

    fn check_number(&mut self, n: Num, s: &Value, path: &str) {
        if let Some(factor) = sget(s, "multipleOf").and_then(Value::as_f64) {
            self.check_multiple_of(n, factor, path);
        }
        let excl_min = sget(s, "exclusiveMinimum");
        if let Some(min) = sget(s, "minimum").and_then(Value::as_f64) {
            self.check_bound(n, min, excl_min.and_then(Value::as_bool).unwrap_or(false), true, path);
        }
        if let Some(min) = excl_min.and_then(Value::as_f64) {
            self.check_bound(n, min, true, true, path);
        }
        let excl_max = sget(s, "exclusiveMaximum");
        if let Some(max) = sget(s, "maximum").and_then(Value::as_f64) {
            self.check_bound(n, max, excl_max.and_then(Value::as_bool).unwrap_or(false), false, path);
        }
        if let Some(max) = excl_max.and_then(Value::as_f64) {
            self.check_bound(n, max, true, false, path);
        }
    }

    fn check_bound(&mut self, n: Num, bound: f64, exclusive: bool, is_min: bool, path: &str) {
        // kube-openapi compares integers against the bound truncated to int64.
        let (fails, shown) = match n {
            Num::Int(i) => {
                let b = bound as i64;
                let fails = match (is_min, exclusive) {
                    (true, false) => i < b,
                    (true, true) => i <= b,
                    (false, false) => i > b,
                    (false, true) => i >= b,
                };
                (fails, b.to_string())
            }
            Num::Float(f) => {
                let fails = match (is_min, exclusive) {
                    (true, false) => f < bound,
                    (true, true) => f <= bound,
                    (false, false) => f > bound,
                    (false, true) => f >= bound,
                };
                (fails, go_float(bound))
            }
        };
        if fails {
            let relation = match (is_min, exclusive) {
                (true, false) => "greater than or equal to",
                (true, true) => "greater than",
                (false, false) => "less than or equal to",
                (false, true) => "less than",
            };
            self.push(
                FieldErrorKind::Invalid,
                path,
                Some(n.go()),
                format!("{path} in body should be {relation} {shown}"),
            );
        }
    }

    fn check_multiple_of(&mut self, n: Num, factor: f64, path: &str) {
        let shown_factor = if factor.fract() == 0.0 && matches!(n, Num::Int(_)) {
            (factor as i64).to_string()
        } else {
            go_float(factor)
        };
        if factor <= 0.0 {
            self.push(
                FieldErrorKind::Invalid,
                path,
                Some(shown_factor.clone()),
                format!("factor MultipleOf declared for {path} must be positive: {shown_factor}"),
            );
            return;
        }
        let ok = match n {
            Num::Int(i) if factor.fract() == 0.0 && factor <= i64::MAX as f64 => i % (factor as i64) == 0,
            _ => float_is_json_integer(n.as_f64() / factor),
        };
        if !ok {
            self.push(
                FieldErrorKind::Invalid,
                path,
                Some(n.go()),
                format!("{path} in body should be a multiple of {shown_factor}"),
            );
        }
    }

    fn check_array(&mut self, items: &[Value], s: &Value, path: &str, depth: usize) {
        if let Some(it) = sitems(s) {
            for (i, v) in items.iter().enumerate() {
                self.node(v, it, &format!("{path}[{i}]"), depth + 1, false);
            }
        }
        let len = items.len() as i64;
        if let Some(min) = sint(s, "minItems") {
            if len < min {
                self.push(
                    FieldErrorKind::Invalid,
                    path,
                    Some(len.to_string()),
                    format!("{path} in body should have at least {min} items"),
                );
            }
        }
        if let Some(max) = sint(s, "maxItems") {
            if len > max {
                self.push(
                    FieldErrorKind::TooMany,
                    path,
                    Some(len.to_string()),
                    format!("must have at most {max} items"),
                );
            }
        }
    }

    fn check_enum(&mut self, v: &Value, s: &Value, path: &str) {
        let Some(allowed) = sget(s, "enum").and_then(Value::as_array) else { return };
        if allowed.is_empty() || allowed.iter().any(|a| json_equal(a, v)) {
            return;
        }
        let values: Vec<String> = allowed
            .iter()
            .map(|a| match a {
                Value::String(s) => go_quote(s),
                other => go_quote(&other.to_string()),
            })
            .collect();
        self.push(
            FieldErrorKind::NotSupported,
            path,
            Some(go_display(v)),
            format!("supported values: {}", values.join(", ")),
        );
    }

    fn check_object(&mut self, m: &Map<String, Value>, s: &Value, path: &str, depth: usize, embedded: bool) {
        let count = m.len() as i64;
        if let Some(min) = sint(s, "minProperties") {
            if count < min {
                self.push(
                    FieldErrorKind::Invalid,
                    path,
                    Some(count.to_string()),
                    format!("{path} in body should have at least {min} properties"),
                );
                return;
            }
        }
        if let Some(max) = sint(s, "maxProperties") {
            if count > max {
                self.push(
                    FieldErrorKind::TooMany,
                    path,
                    Some(count.to_string()),
                    format!("must have at most {max} items"),
                );
                return;
            }
        }
        if let Additional::Schema(a) = sadditional(s) {
            for (k, v) in m {
                if sprop(s, k).is_none() {
                    self.node(v, a, &format!("{path}.{k}"), depth + 1, false);
                }
            }
        }
        if let Some(props) = sprops(s) {
            for (k, ps) in props {
                if let Some(v) = m.get(k) {
                    let shallow = embedded && k == "metadata";
                    self.node(v, ps, &child_path(path, k), depth + 1, shallow);
                }
            }
        }
        if embedded {
            for key in ["apiVersion", "kind"] {
                if sprop(s, key).is_some() {
                    continue;
                }
                if let Some(v) = m.get(key).filter(|v| !v.is_string()) {
                    let p = child_path(path, key);
                    self.push(FieldErrorKind::Invalid, &p, Some(go_display(v)), "must be a string".into());
                }
            }
        }
        if let Some(required) = sget(s, "required").and_then(Value::as_array) {
            for r in required.iter().filter_map(Value::as_str) {
                if !m.contains_key(r) {
                    self.errs.push(FieldError::required(field_path(&format!("{path}.{r}")), ""));
                }
            }
        }
    }
}

/// Value equality for `enum`, comparing numbers by value (1 == 1.0).
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (num_of(x), num_of(y)) {
            (Num::Int(i), Num::Int(j)) => i == j,
            (x, y) => x.as_f64() == y.as_f64(),
        },
        _ => a == b,
    }
}

/// kube-openapi's `IsDateTime` (strfmt).
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    // ^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$
    let t: Vec<char> = parts[1].chars().collect();
    let two = |i: usize| -> Option<String> {
        let a = *t.get(i)?;
        let b = *t.get(i + 1)?;
        (a.is_ascii_digit() && b.is_ascii_digit()).then(|| format!("{a}{b}"))
    };
    let (Some(h), Some(m), Some(sec)) = (two(0), two(3), two(6)) else { return false };
    if t.get(2) != Some(&':') || t.get(5) != Some(&':') {
        return false;
    }
    let tail = &t[8..];
    let is_zone = |z: &[char]| -> bool {
        match z {
            ['z'] => true,
            [sign, a, b, ':', c, d] => {
                (*sign == '+' || *sign == '-') && [a, b, c, d].iter().all(|ch| ch.is_ascii_digit())
            }
            _ => false,
        }
    };
    let shape_ok = is_zone(tail)
        || (tail.len() >= 2 && tail[0] != '\n' && {
            let digits = tail[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            digits > 0 && is_zone(&tail[1 + digits..])
        });
    shape_ok && h.as_str() <= "23" && m.as_str() <= "59" && sec.as_str() <= "59"
}

/// Go's `time.Parse("2006-01-02", s)`.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = s.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    match (digits(0..4), digits(5..7), digits(8..10)) {
        (Some(y), Some(m), Some(d)) => {
            i32::try_from(y).ok().and_then(|y| chrono::NaiveDate::from_ymd_opt(y, m, d)).is_some()
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// ObjectMeta validation
// ---------------------------------------------------------------------------

/// Checks the kind and apiVersion the body names, like apiextensions'
/// `ValidateTypeMeta`: `kind: Invalid value: "Goat": must be Llama`,
/// `apiVersion: Invalid value: "v1": must be farm.example.com/v1alpha`.
/// kube reports only these when any fails.
pub fn validate_type_meta(obj: &Value, api_version: &str, kind: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let got_kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if got_kind != kind {
        errs.push(invalid("kind", go_quote(got_kind), format!("must be {kind}")));
    }
    let got_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if got_version != api_version {
        errs.push(invalid("apiVersion", go_quote(got_version), format!("must be {api_version}")));
    }
    errs
}

fn invalid(field: impl Into<String>, value: String, detail: impl Into<String>) -> FieldError {
    FieldError { kind: FieldErrorKind::Invalid, field: field.into(), value: Some(value), detail: detail.into() }
}

/// The type name a schema error would use for a JSON value.
fn schema_type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) => match num_of(n) {
            Num::Int(_) => "integer",
            Num::Float(_) => "number",
        },
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A wrongly typed metadata field (kube would have failed decoding: see
/// [`check_object_meta_types`]); reported like a schema type error.
fn meta_type_error(path: &str, want: &str, v: &Value) -> FieldError {
    let got = go_quote(schema_type_of(v));
    FieldError {
        kind: FieldErrorKind::TypeInvalid,
        field: path.to_string(),
        value: Some(got.clone()),
        detail: format!("{path} in body must be of type {want}: {got}"),
    }
}

struct MetaReader<'a> {
    m: &'a Map<String, Value>,
    errs: Vec<FieldError>,
}

impl<'a> MetaReader<'a> {
    fn string(&mut self, key: &str) -> &'a str {
        match self.m.get(key) {
            None | Some(Value::Null) => "",
            Some(Value::String(s)) => s,
            Some(other) => {
                self.errs.push(meta_type_error(&format!("metadata.{key}"), "string", other));
                ""
            }
        }
    }

    fn int(&mut self, key: &str) -> Option<i64> {
        match self.m.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64(),
            Some(other) => {
                self.errs.push(meta_type_error(&format!("metadata.{key}"), "integer", other));
                None
            }
        }
    }

    /// labels / annotations: `null` values read as "" (as Go decodes them).
    fn string_map(&mut self, key: &str) -> Vec<(&'a str, &'a str)> {
        let path = format!("metadata.{key}");
        match self.m.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(o)) => {
                let mut out = Vec::with_capacity(o.len());
                for (k, v) in o {
                    match v {
                        Value::String(s) => out.push((k.as_str(), s.as_str())),
                        Value::Null => out.push((k.as_str(), "")),
                        other => self.errs.push(meta_type_error(&format!("{path}.{k}"), "string", other)),
                    }
                }
                out
            }
            Some(other) => {
                self.errs.push(meta_type_error(&path, "object", other));
                Vec::new()
            }
        }
    }

    fn list(&mut self, key: &str) -> &'a [Value] {
        match self.m.get(key) {
            None | Some(Value::Null) => &[],
            Some(Value::Array(a)) => a,
            Some(other) => {
                self.errs.push(meta_type_error(&format!("metadata.{key}"), "array", other));
                &[]
            }
        }
    }

    fn strings(&mut self, key: &str) -> Vec<&'a str> {
        let path = format!("metadata.{key}");
        let mut out = Vec::new();
        for (i, v) in self.list(key).iter().enumerate() {
            match v {
                Value::String(s) => out.push(s.as_str()),
                Value::Null => out.push(""),
                other => self.errs.push(meta_type_error(&format!("{path}[{i}]"), "string", other)),
            }
        }
        out
    }
}

fn item_string<'a>(item: &'a Map<String, Value>, key: &str, path: &str, errs: &mut Vec<FieldError>) -> &'a str {
    match item.get(key) {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s,
        Some(other) => {
            errs.push(meta_type_error(&format!("{path}.{key}"), "string", other));
            ""
        }
    }
}

/// kube's `maskTrailingDash`: a generateName may end in '-'.
fn mask_trailing_dash(name: &str) -> Cow<'_, str> {
    if name.len() > 1 && name.ends_with('-') {
        let mut bytes = name.as_bytes()[..name.len() - 2].to_vec();
        bytes.push(b'a');
        Cow::Owned(String::from_utf8_lossy(&bytes).into_owned())
    } else {
        Cow::Borrowed(name)
    }
}

/// Go's `fmt.Sprintf("%#v", []string{...})`.
fn go_string_slice(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| go_quote(s)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// ObjectMeta checks for a create, and the common part of an update (call
/// [`validate_object_meta_update`] as well on update), like apimachinery's
/// `ValidateObjectMetaAccessor` with `NameIsDNSSubdomain`, in kube's order:
/// * `metadata.generateName` (if set) must be a DNS-1123 subdomain once a
///   trailing '-' is masked;
/// * `metadata.name: Required value: name or generateName is required` when
///   both are empty (a name still to be generated from generateName is
///   accepted), else a DNS-1123 subdomain: `metadata.name: Invalid value: "Bad": a lowercase RFC 1123 subdomain must consist of ...`;
/// * namespaced kinds: `metadata.namespace: Required value` / a DNS-1123
///   label; cluster-scoped: `metadata.namespace: Forbidden: not allowed on this type`;
/// * `metadata.generation` >= 0;
/// * `metadata.labels`: keys are qualified names, values label values;
///   `metadata.annotations`: keys (lower-cased) are qualified names, total
///   size `Too long: must have at most 262144 bytes`;
/// * `metadata.ownerReferences.{apiVersion,kind,name,uid}` (no index, as kube
///   reports them): `version must not be empty` / `must not be empty`, no
///   `v1` `Event` owner, at most one `controller: true`;
/// * `metadata.finalizers`: qualified names, not both `orphan` and
///   `foregroundDeletion` (duplicates are allowed, as in kube);
/// * `metadata.managedFields[i]`: operation `Apply`/`Update`, fieldsType
///   `FieldsV1`, manager at most 128 bytes of printable characters,
///   subresource at most 256 bytes.
///
/// Wrongly typed fields (which kube rejects while decoding, see
/// [`check_object_meta_types`]) are reported as type errors first.
pub fn validate_object_meta(meta: &Value, namespaced: bool) -> Vec<FieldError> {
    let empty = Map::new();
    let m = match meta {
        Value::Object(m) => m,
        Value::Null => &empty,
        other => return vec![meta_type_error("metadata", "object", other)],
    };
    let mut r = MetaReader { m, errs: Vec::new() };
    let generate_name = r.string("generateName");
    let name = r.string("name");
    let namespace = r.string("namespace");
    let generation = r.int("generation");
    let labels = r.string_map("labels");
    let annotations = r.string_map("annotations");
    let owner_refs = r.list("ownerReferences");
    let finalizers = r.strings("finalizers");
    let managed = r.list("managedFields");
    let mut errs = r.errs;

    if !generate_name.is_empty() {
        for msg in validate_dns1123_subdomain(&mask_trailing_dash(generate_name)) {
            errs.push(invalid("metadata.generateName", go_quote(generate_name), msg));
        }
    }
    if name.is_empty() {
        if generate_name.is_empty() {
            errs.push(FieldError::required("metadata.name", "name or generateName is required"));
        }
    } else {
        for msg in validate_dns1123_subdomain(name) {
            errs.push(invalid("metadata.name", go_quote(name), msg));
        }
    }

    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for msg in validate_dns1123_label(namespace) {
                errs.push(invalid("metadata.namespace", go_quote(namespace), msg));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden("metadata.namespace", "not allowed on this type"));
    }

    if let Some(g) = generation.filter(|g| *g < 0) {
        errs.push(invalid("metadata.generation", g.to_string(), "must be greater than or equal to 0"));
    }

    for (k, v) in &labels {
        for msg in validate_qualified_name(k) {
            errs.push(invalid("metadata.labels", go_quote(k), msg));
        }
        for msg in validate_label_value(v) {
            errs.push(invalid("metadata.labels", go_quote(v), msg));
        }
    }

    let mut annotation_bytes = 0usize;
    for (k, v) in &annotations {
        for msg in validate_qualified_name(&k.to_lowercase()) {
            errs.push(invalid("metadata.annotations", go_quote(k), msg));
        }
        annotation_bytes = annotation_bytes.saturating_add(k.len()).saturating_add(v.len());
    }
    if annotation_bytes > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::new(
            FieldErrorKind::TooLong,
            "metadata.annotations",
            format!("must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        ));
    }

    validate_owner_references(owner_refs, &mut errs);

    for f in &finalizers {
        for msg in validate_qualified_name(f) {
            errs.push(invalid("metadata.finalizers", go_quote(f), msg));
        }
    }
    if finalizers.contains(&"orphan") && finalizers.contains(&"foregroundDeletion") {
        errs.push(invalid(
            "metadata.finalizers",
            go_string_slice(&finalizers),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }

    validate_managed_fields(managed, &mut errs);
    errs
}

fn validate_owner_references(refs: &[Value], errs: &mut Vec<FieldError>) {
    const PATH: &str = "metadata.ownerReferences";
    let mut first_controller: Option<String> = None;
    for item in refs {
        let empty = Map::new();
        let r = match item {
            Value::Object(o) => o,
            Value::Null => &empty,
            other => {
                errs.push(meta_type_error(PATH, "object", other));
                continue;
            }
        };
        let api_version = item_string(r, "apiVersion", PATH, errs);
        let kind = item_string(r, "kind", PATH, errs);
        let name = item_string(r, "name", PATH, errs);
        let uid = item_string(r, "uid", PATH, errs);
        let controller = match r.get("controller") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                errs.push(meta_type_error(&format!("{PATH}.controller"), "boolean", other));
                false
            }
        };
        // schema.FromAPIVersionAndKind: an unparsable apiVersion leaves the version empty.
        let (group, version) = match api_version.matches('/').count() {
            _ if api_version.is_empty() || api_version == "/" => ("", ""),
            0 => ("", api_version),
            1 => api_version.split_once('/').unwrap_or(("", "")),
            _ => ("", ""),
        };
        if version.is_empty() {
            errs.push(invalid(format!("{PATH}.apiVersion"), go_quote(api_version), "version must not be empty"));
        }
        if kind.is_empty() {
            errs.push(invalid(format!("{PATH}.kind"), go_quote(kind), "must not be empty"));
        }
        if name.is_empty() {
            errs.push(invalid(format!("{PATH}.name"), go_quote(name), "must not be empty"));
        }
        if uid.is_empty() {
            errs.push(invalid(format!("{PATH}.uid"), go_quote(uid), "must not be empty"));
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            errs.push(invalid(PATH, go_value(item), "/v1, Kind=Event is disallowed from being an owner"));
        }
        if controller {
            let current = format!("{kind}/{name}");
            match &first_controller {
                Some(first) => errs.push(invalid(
                    PATH,
                    go_value(&Value::Array(refs.to_vec())),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
}

fn validate_managed_fields(entries: &[Value], errs: &mut Vec<FieldError>) {
    for (i, item) in entries.iter().enumerate() {
        let path = format!("metadata.managedFields[{i}]");
        let empty = Map::new();
        let e = match item {
            Value::Object(o) => o,
            Value::Null => &empty,
            other => {
                errs.push(meta_type_error(&path, "object", other));
                continue;
            }
        };
        let operation = item_string(e, "operation", &path, errs);
        let fields_type = item_string(e, "fieldsType", &path, errs);
        let manager = item_string(e, "manager", &path, errs);
        let subresource = item_string(e, "subresource", &path, errs);
        if operation != "Apply" && operation != "Update" {
            errs.push(invalid(format!("{path}.operation"), go_quote(operation), "must be `Apply` or `Update`"));
        }
        if !fields_type.is_empty() && fields_type != "FieldsV1" {
            errs.push(invalid(format!("{path}.fieldsType"), go_quote(fields_type), "must be `FieldsV1`"));
        }
        if manager.len() > FIELD_MANAGER_MAX_LENGTH {
            errs.push(FieldError::new(
                FieldErrorKind::TooLong,
                format!("{path}.manager"),
                format!("must have at most {FIELD_MANAGER_MAX_LENGTH} bytes"),
            ));
        }
        for (pos, c) in manager.char_indices() {
            if !crate::machinery::gofmt::is_go_printable(c) {
                errs.push(invalid(
                    format!("{path}.manager"),
                    go_quote(manager),
                    format!("invalid character U+{:04X} (at position {pos})", u32::from(c)),
                ));
            }
        }
        if subresource.len() > MAX_SUBRESOURCE_NAME_LENGTH {
            errs.push(FieldError::new(
                FieldErrorKind::TooLong,
                format!("{path}.subresource"),
                format!("must have at most {MAX_SUBRESOURCE_NAME_LENGTH} bytes"),
            ));
        }
    }
}

fn meta_map(meta: &Value) -> Option<&Map<String, Value>> {
    meta.as_object()
}

fn meta_str<'a>(meta: &'a Value, key: &str) -> &'a str {
    meta_map(meta).and_then(|m| m.get(key)).and_then(Value::as_str).unwrap_or("")
}

fn meta_i64(meta: &Value, key: &str) -> Option<i64> {
    meta_map(meta).and_then(|m| m.get(key)).and_then(Value::as_i64)
}

/// A timestamp field: `None` when absent/null/"" (Go's zero time).
fn meta_time<'a>(meta: &'a Value, key: &str) -> Option<&'a Value> {
    meta_map(meta).and_then(|m| m.get(key)).filter(|v| !v.is_null() && v.as_str() != Some(""))
}

fn parse_rfc3339(s: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&chrono::Utc))
}

/// Go's `time.Time.String()` for a timestamp (kube runs with UTC as local time).
fn go_time_string(v: Option<&Value>) -> String {
    let Some(v) = v else { return "0001-01-01 00:00:00 +0000 UTC".into() };
    match v.as_str().and_then(parse_rfc3339) {
        Some(t) => {
            let mut s = t.format("%Y-%m-%d %H:%M:%S").to_string();
            let nanos = t.timestamp_subsec_nanos();
            if nanos != 0 {
                let frac = format!("{nanos:09}");
                s.push('.');
                s.push_str(frac.trim_end_matches('0'));
            }
            s.push_str(" +0000 UTC");
            s
        }
        None => go_display(v),
    }
}

fn same_time(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => match (x.as_str().and_then(parse_rfc3339), y.as_str().and_then(parse_rfc3339)) {
            (Some(p), Some(q)) => p == q,
            _ => x == y,
        },
        _ => false,
    }
}

/// The update-only ObjectMeta checks of apimachinery's
/// `ValidateObjectMetaAccessorUpdate`, in kube's order (call it after
/// [`validate_object_meta`] on the new metadata; kube runs both on update):
/// * while the old object is being deleted, no new finalizers:
///   `metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"x"}`;
/// * `metadata.resourceVersion: Invalid value: "": must be specified for an update`;
/// * `metadata.generation: Invalid value: 1: must not be decremented`;
/// * `field is immutable` for name, namespace, uid, creationTimestamp,
///   deletionTimestamp and deletionGracePeriodSeconds, e.g.
///   `metadata.uid: Invalid value: "b": field is immutable`,
///   `metadata.deletionTimestamp: Invalid value: 2024-01-01 00:00:00 +0000 UTC: field is immutable`.
///
/// Run [`prepare_meta_for_update`] first, as kube's `BeforeUpdate` does: it
/// carries over the uid, timestamps and generation a client may omit, so only
/// real changes are reported.
pub fn validate_object_meta_update(new_meta: &Value, old_meta: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if meta_time(old_meta, "deletionTimestamp").is_some() {
        let list = |m: &Value| -> Vec<String> {
            meta_map(m)
                .and_then(|m| m.get("finalizers"))
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default()
        };
        let old: BTreeSet<String> = list(old_meta).into_iter().collect();
        let extra: BTreeSet<String> = list(new_meta).into_iter().filter(|f| !old.contains(f)).collect();
        if !extra.is_empty() {
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {}",
                    go_string_slice(&extra)
                ),
            ));
        }
    }
    if meta_str(new_meta, "resourceVersion").is_empty() {
        errs.push(invalid("metadata.resourceVersion", go_quote(""), "must be specified for an update"));
    }
    let new_generation = meta_i64(new_meta, "generation").unwrap_or(0);
    if new_generation < meta_i64(old_meta, "generation").unwrap_or(0) {
        errs.push(invalid("metadata.generation", new_generation.to_string(), "must not be decremented"));
    }
    for key in ["name", "namespace", "uid"] {
        let new = meta_str(new_meta, key);
        if new != meta_str(old_meta, key) {
            errs.push(invalid(format!("metadata.{key}"), go_quote(new), "field is immutable"));
        }
    }
    let new_created = meta_time(new_meta, "creationTimestamp");
    if !same_time(new_created, meta_time(old_meta, "creationTimestamp")) {
        errs.push(invalid("metadata.creationTimestamp", go_time_string(new_created), "field is immutable"));
    }
    let new_deleted = meta_time(new_meta, "deletionTimestamp");
    if !same_time(new_deleted, meta_time(old_meta, "deletionTimestamp")) {
        let shown = if new_deleted.is_some() { go_time_string(new_deleted) } else { "null".into() };
        errs.push(invalid("metadata.deletionTimestamp", shown, "field is immutable"));
    }
    fn grace(m: &Value) -> Option<&Value> {
        meta_map(m).and_then(|m| m.get("deletionGracePeriodSeconds")).filter(|v| !v.is_null())
    }
    let (new_grace, old_grace) = (grace(new_meta), grace(old_meta));
    let grace_equal = match (new_grace, old_grace) {
        (Some(a), Some(b)) => json_equal(a, b),
        (None, None) => true,
        _ => false,
    };
    if !grace_equal {
        let shown = new_grace.map_or_else(|| "null".to_string(), go_display);
        errs.push(invalid("metadata.deletionGracePeriodSeconds", shown, "field is immutable"));
    }
    errs
}

/// What kube's `BeforeUpdate` does to the new metadata before validating an
/// update: the generation is the stored one (the handler bumps it when the
/// spec changes), a missing uid is taken from the stored object, and the
/// stored creationTimestamp and deletionTimestamp (when set) win, as does a
/// stored deletionGracePeriodSeconds the request omits.
pub fn prepare_meta_for_update(new_meta: &mut Value, old_meta: &Value) {
    if new_meta.is_null() {
        *new_meta = Value::Object(Map::new());
    }
    let Value::Object(new) = new_meta else { return };
    let old = |key: &str| meta_map(old_meta).and_then(|m| m.get(key)).filter(|v| !v.is_null());

    match old("generation").filter(|g| g.as_i64() != Some(0)) {
        Some(g) => {
            new.insert("generation".into(), g.clone());
        }
        None => {
            new.remove("generation");
        }
    }
    if new.get("uid").and_then(Value::as_str).unwrap_or("").is_empty() {
        match old("uid").filter(|u| u.as_str() != Some("")) {
            Some(u) => {
                new.insert("uid".into(), u.clone());
            }
            None => {
                new.remove("uid");
            }
        }
    }
    for key in ["creationTimestamp", "deletionTimestamp"] {
        if let Some(t) = meta_time(old_meta, key) {
            new.insert(key.into(), t.clone());
        }
    }
    if new.get("deletionGracePeriodSeconds").is_none_or(Value::is_null) {
        if let Some(g) = old("deletionGracePeriodSeconds") {
            new.insert("deletionGracePeriodSeconds".into(), g.clone());
        }
    }
}

// ---------------------------------------------------------------------------
// Go formatting
// ---------------------------------------------------------------------------

/// A JSON value the way Go's `field.Error` shows a decoded value: strings
/// quoted (`%q`), numbers with `%v`, null as `null`, objects and arrays as JSON.
fn go_display(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Number(n) => num_of(n).go(),
        other => go_value(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn llama_schema() -> Value {
        json!({"type":"object","properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},"spec":{"type":"object","required":["weight","height"],"properties":{"weight":{"type":"number","exclusiveMinimum":true,"minimum":0},"height":{"type":"number","exclusiveMinimum":true,"minimum":0},"colour":{"type":"string","nullable":true}}},"status":{"type":"object","properties":{"observedGeneration":{"type":"integer","format":"int64"},"conditions":{"type":"array","items":{"type":"object","required":["type","status"],"properties":{"type":{"type":"string"},"status":{"type":"string"},"lastTransitionTime":{"type":"string","format":"date-time"},"reason":{"type":"string"},"message":{"type":"string"}}}}}}},"required":["spec"]})
    }

    /// The same kind as schemars 1.x emits it: numeric `exclusiveMinimum`.
    fn llama_schema_numeric() -> Value {
        let mut s = llama_schema();
        for f in ["weight", "height"] {
            s["properties"]["spec"]["properties"][f] = json!({"type": "number", "exclusiveMinimum": 0});
        }
        s
    }

    fn llama() -> Value {
        json!({
            "apiVersion": "farm.example.com/v1alpha",
            "kind": "Llama",
            "metadata": {"name": "bob", "namespace": "default", "labels": {"app": "farm"}},
            "spec": {"weight": 80.5, "height": 2, "colour": "brown"},
            "status": {
                "observedGeneration": 1,
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "Fed", "message": "ok"}]
            }
        })
    }

    fn msgs(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(FieldError::full_message).collect()
    }

    fn with(mut base: Value, pointer: &str, v: Value) -> Value {
        if let Some(slot) = base.pointer_mut(pointer) {
            *slot = v;
        } else {
            panic!("no {pointer}");
        }
        base
    }

    fn without(mut base: Value, parent: &str, key: &str) -> Value {
        base.pointer_mut(parent).and_then(Value::as_object_mut).map(|m| m.remove(key));
        base
    }

    fn decode_err(body: &str) -> String {
        decode_json(body.as_bytes()).expect_err(body)
    }

    fn pre(s: &str) -> String {
        format!("{VERSION_KIND_ERROR_PREFIX}{s}")
    }

    // ---- decode_json -------------------------------------------------------

    #[test]
    fn decode_valid_object() {
        let body = serde_json::to_vec(&llama()).unwrap();
        let (v, dups) = decode_json(&body).unwrap();
        assert_eq!(v, llama());
        assert!(dups.is_empty());
    }

    #[test]
    fn decode_reports_duplicates_with_paths_and_later_value_wins() {
        let body = r#"{"metadata":{"name":"a","name":"b"},"spec":{"weight":1,"weight":2,
            "items":[{"x":1},{"x":2},{"x":1,"x":3}]},"kind":"Llama","kind":"Llama"}"#;
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
        assert_eq!(decode_err(r#""llama""#), want("string"));
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
            decode_err(r#"{"kind":"Llama","APIVERSION":true}"#),
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
        let body = br#"{"apiVersion":"farm.example.com/v1alpha","#;
        let err = decode_json(body).unwrap_err();
        assert_eq!(
            decode_error_message(&err, body, "Llama", "v1alpha"),
            "the object provided is unrecognized (must be of type Llama): couldn't get version/kind; json parse error: unexpected end of JSON input ({\"apiVersion\":\"farm.example.co ...)"
        );
        assert_eq!(
            decode_error_message(&decode_err("xyz"), b"xyz", "Llama", "v1alpha"),
            "the object provided is unrecognized (must be of type Llama): couldn't get version/kind; json parse error: invalid character 'x' looking for beginning of value (78797a)"
        );
        assert_eq!(
            decode_error_message(&decode_err(""), b"", "Llama", "v1alpha"),
            "the object provided is unrecognized (must be of type Llama): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)"
        );
        let strict = strict_decoding_error(&["metadata.name".into()], &["spec.color".into()]).unwrap();
        assert_eq!(
            decode_error_message(&strict, b"{}", "Llama", "v1alpha"),
            "Llama in version \"v1alpha\" cannot be handled as a Llama: strict decoding error: duplicate field \"metadata.name\", unknown field \"spec.color\""
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

    // ---- check_object_meta_types ----------------------------------------------

    #[test]
    fn object_meta_type_errors_read_like_go() {
        assert_eq!(check_object_meta_types(&Value::Null), Ok(()));
        assert_eq!(check_object_meta_types(&llama()["metadata"]), Ok(()));
        let cases = [
            (json!("x"), "json: cannot unmarshal string into Go value of type v1.ObjectMeta"),
            (json!({"name": 5}), "json: cannot unmarshal number into Go struct field ObjectMeta.name of type string"),
            (json!({"generation": "1"}), "json: cannot unmarshal string into Go struct field ObjectMeta.generation of type int64"),
            (json!({"generation": 1.5}), "json: cannot unmarshal number 1.5 into Go struct field ObjectMeta.generation of type int64"),
            (json!({"labels": []}), "json: cannot unmarshal array into Go struct field ObjectMeta.labels of type map[string]string"),
            (json!({"labels": {"a": 1}}), "json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string"),
            (json!({"finalizers": "x"}), "json: cannot unmarshal string into Go struct field ObjectMeta.finalizers of type []string"),
            (json!({"ownerReferences": {}}), "json: cannot unmarshal object into Go struct field ObjectMeta.ownerReferences of type []v1.OwnerReference"),
            (json!({"ownerReferences": [{"name": true}]}), "json: cannot unmarshal bool into Go struct field OwnerReference.ownerReferences.name of type string"),
            (json!({"ownerReferences": [{"controller": "yes"}]}), "json: cannot unmarshal string into Go struct field OwnerReference.ownerReferences.controller of type bool"),
            (json!({"managedFields": [{"operation": 1}]}), "json: cannot unmarshal number into Go struct field ManagedFieldsEntry.managedFields.operation of type v1.ManagedFieldsOperationType"),
            (json!({"creationTimestamp": 5}), "json: cannot unmarshal number into Go struct field ObjectMeta.creationTimestamp of type string"),
            (json!({"creationTimestamp": "yesterday"}), "parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"yesterday\" as \"2006\""),
        ];
        for (meta, want) in cases {
            assert_eq!(check_object_meta_types(&meta), Err(want.to_string()), "{meta}");
        }
        assert_eq!(
            check_object_meta_types(&json!({"creationTimestamp": null, "labels": {"a": null}, "unknown": 5})),
            Ok(())
        );
    }

    // ---- prune_unknown_fields ------------------------------------------------

    #[test]
    fn prune_llama_reports_sorted_paths_metadata_first() {
        let mut obj = llama();
        obj["extra"] = json!(1);
        obj["spec"]["color"] = json!("grey");
        obj["status"]["conditions"][0]["foo"] = json!({"deep": true});
        obj["metadata"]["foo"] = json!("x");
        obj["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "Farm", "name": "f", "uid": "u", "bar": 1}]);
        obj["metadata"]["managedFields"] =
            json!([{"manager": "m", "operation": "Update", "fieldsV1": {"f:spec": {}}, "junk": 1}]);
        let removed = prune_unknown_fields(&mut obj, &llama_schema());
        assert_eq!(
            removed,
            vec![
                "metadata.foo",
                "metadata.managedFields[0].junk",
                "metadata.ownerReferences[0].bar",
                "extra",
                "spec.color",
                "status.conditions[0].foo",
            ]
        );
        let mut want = llama();
        want["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Farm", "name": "f", "uid": "u"}]);
        want["metadata"]["managedFields"] =
            json!([{"manager": "m", "operation": "Update", "fieldsV1": {"f:spec": {}}}]);
        assert_eq!(obj, want);
    }

    #[test]
    fn prune_keeps_type_meta_at_root_even_if_undeclared() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        let mut obj = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"a": 1}, "b": 2});
        assert_eq!(prune_unknown_fields(&mut obj, &schema), vec!["b", "spec.a"]);
        assert_eq!(obj, json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {}}));
    }

    #[test]
    fn prune_drops_non_nullable_nulls_silently() {
        let mut obj = llama();
        obj["spec"]["weight"] = Value::Null;
        obj["spec"]["colour"] = Value::Null;
        obj["status"] = Value::Null;
        obj["unknownNull"] = Value::Null;
        let removed = prune_unknown_fields(&mut obj, &llama_schema());
        assert_eq!(removed, vec!["unknownNull"]);
        assert!(obj["spec"].get("weight").is_none());
        assert_eq!(obj["spec"]["colour"], Value::Null);
        assert!(obj.get("status").is_none());
        // the missing weight is now a Required error, as in kube
        assert_eq!(msgs(&validate_against_schema(&obj, &llama_schema())), vec!["spec.weight: Required value"]);
    }

    #[test]
    fn prune_preserve_unknown_fields() {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}}});
        let mut obj = json!({"spec": {"x": {"y": 1}, "a": {"b": "s", "c": 2}}});
        assert_eq!(prune_unknown_fields(&mut obj, &schema), vec!["spec.a.c"]);
        assert_eq!(obj, json!({"spec": {"x": {"y": 1}, "a": {"b": "s"}}}));
    }

    #[test]
    fn prune_additional_properties() {
        let schema = json!({"type": "object", "properties": {
            "byName": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "integer"}}}},
            "free": {"type": "object", "additionalProperties": true},
            "list": {"type": "array"}}});
        let mut obj =
            json!({"byName": {"k": {"v": 1, "junk": 2}}, "free": {"a": {"b": 1}}, "list": [{"a": 1}, 2, [{"b": 1}]]});
        assert_eq!(prune_unknown_fields(&mut obj, &schema), vec!["byName.k.junk", "list[0].a", "list[2][0].b"]);
        assert_eq!(obj, json!({"byName": {"k": {"v": 1}}, "free": {"a": {"b": 1}}, "list": [{}, 2, [{}]]}));
    }

    #[test]
    fn prune_embedded_resources() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}}});
        let mut obj = json!({"spec": {"template": {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1},
            "spec": {"size": 1, "extra": 2}, "other": 3}}});
        assert_eq!(
            prune_unknown_fields(&mut obj, &schema),
            vec!["spec.template.other", "spec.template.spec.extra", "spec.template.metadata.junk"]
        );
        assert_eq!(
            obj,
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"size": 1}}}})
        );
    }

    #[test]
    fn prune_tolerates_odd_inputs() {
        let mut v = json!([1, 2]);
        assert!(prune_unknown_fields(&mut v, &llama_schema()).is_empty());
        let mut v = json!({"a": 1});
        assert_eq!(prune_unknown_fields(&mut v, &json!(true)), vec!["a"]);
        let mut v = json!({"metadata": "not an object", "spec": {"weight": 1}});
        assert_eq!(prune_unknown_fields(&mut v, &json!({"properties": {"spec": "nonsense"}})), vec!["spec.weight"]);
    }

    #[test]
    fn defaults_are_applied() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "colour": {"type": "string", "default": "white"},
            "tags": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}}}}}}});
        let mut obj = json!({"spec": {"tags": [{}, {"n": 5}]}});
        apply_defaults(&mut obj, &schema);
        assert_eq!(obj, json!({"spec": {"colour": "white", "tags": [{"n": 1}, {"n": 5}]}}));
        let mut obj = json!({"spec": {"colour": null}});
        prune_unknown_fields(&mut obj, &schema);
        apply_defaults(&mut obj, &schema);
        assert_eq!(obj["spec"]["colour"], "white");
    }

    // ---- validate_against_schema -------------------------------------------

    #[test]
    fn valid_llama_has_no_errors() {
        assert!(validate_against_schema(&llama(), &llama_schema()).is_empty());
        assert!(validate_against_schema(&llama(), &llama_schema_numeric()).is_empty());
        let nullable = with(llama(), "/spec/colour", Value::Null);
        assert!(validate_against_schema(&nullable, &llama_schema()).is_empty());
    }

    #[test]
    fn type_errors_match_kube() {
        let errs = validate_against_schema(&with(llama(), "/spec/weight", json!("heavy")), &llama_schema());
        assert_eq!(
            msgs(&errs),
            vec![r#"spec.weight: Invalid value: "string": spec.weight in body must be of type number: "string""#]
        );
        assert_eq!(errs[0].kind, FieldErrorKind::TypeInvalid);
        assert_eq!(errs[0].field, "spec.weight");
        assert_eq!(
            msgs(&validate_against_schema(&with(llama(), "/spec/colour", json!(5)), &llama_schema())),
            vec![r#"spec.colour: Invalid value: "integer": spec.colour in body must be of type string: "integer""#]
        );
        assert_eq!(
            msgs(&validate_against_schema(&with(llama(), "/spec/height", Value::Null), &llama_schema())),
            vec![r#"spec.height: Invalid value: "null": spec.height in body must be of type number: "null""#]
        );
        assert_eq!(
            msgs(&validate_against_schema(&with(llama(), "/spec", json!([])), &llama_schema())),
            vec![r#"spec: Invalid value: "array": spec in body must be of type object: "array""#]
        );
        assert_eq!(
            msgs(&validate_against_schema(&with(llama(), "/apiVersion", json!(5)), &llama_schema())),
            vec![r#"apiVersion: Invalid value: "integer": apiVersion in body must be of type string: "integer""#]
        );
    }

    #[test]
    fn integer_fields_follow_kube_format_quirks() {
        let at = "/status/observedGeneration";
        assert_eq!(
            msgs(&validate_against_schema(&with(llama(), at, json!(1.5)), &llama_schema())),
            vec![
                r#"status.observedGeneration: Invalid value: "float64": status.observedGeneration in body must be of type int64: "float64""#
            ]
        );
        assert!(validate_against_schema(&with(llama(), at, json!(2.0)), &llama_schema()).is_empty());
        assert_eq!(
            msgs(&validate_against_schema(&with(llama(), at, json!("1")), &llama_schema())),
            vec![
                r#"status.observedGeneration: Invalid value: "string": status.observedGeneration in body must be of type integer: "string""#
            ]
        );
        // without a format: plain type wording; a number accepts integers
        let schema = json!({"type": "object", "properties": {"i": {"type": "integer"}, "n": {"type": "number"}}});
        assert_eq!(
            msgs(&validate_against_schema(&json!({"i": 1.5, "n": 3}), &schema)),
            vec![r#"i: Invalid value: "number": i in body must be of type integer: "number""#]
        );
    }

    #[test]
    fn minimum_errors_match_kube() {
        for schema in [llama_schema(), llama_schema_numeric()] {
            let errs = validate_against_schema(&with(llama(), "/spec/weight", json!(0)), &schema);
            assert_eq!(
                msgs(&errs),
                vec!["spec.weight: Invalid value: 0: spec.weight in body should be greater than 0"]
            );
            assert_eq!(errs[0].kind, FieldErrorKind::Invalid);
            assert_eq!(
                msgs(&validate_against_schema(&with(llama(), "/spec/height", json!(-1.5)), &schema)),
                vec!["spec.height: Invalid value: -1.5: spec.height in body should be greater than 0"]
            );
        }
        // a 0.0 read from JSON prints as Go prints it
        let (obj, _) = decode_json(br#"{"spec":{"weight":0.0,"height":1}}"#).unwrap();
        assert_eq!(
            msgs(&validate_against_schema(&obj, &llama_schema())),
            vec!["spec.weight: Invalid value: 0: spec.weight in body should be greater than 0"]
        );
    }

    #[test]
    fn required_errors_match_kube() {
        let errs = validate_against_schema(&without(llama(), "", "spec"), &llama_schema());
        assert_eq!(msgs(&errs), vec!["spec: Required value"]);
        assert_eq!(errs[0].kind, FieldErrorKind::Required);
        let obj = with(llama(), "/spec", json!({"colour": "red"}));
        assert_eq!(
            msgs(&validate_against_schema(&obj, &llama_schema())),
            vec!["spec.weight: Required value", "spec.height: Required value"]
        );
        let obj = with(llama(), "/status/conditions", json!([{"type": "A", "status": "True"}, {"reason": "x"}]));
        assert_eq!(
            msgs(&validate_against_schema(&obj, &llama_schema())),
            vec!["status.conditions[1].type: Required value", "status.conditions[1].status: Required value"]
        );
    }

    #[test]
    fn date_time_format() {
        let at = "/status/conditions/0/lastTransitionTime";
        assert_eq!(
            msgs(&validate_against_schema(&with(llama(), at, json!("yesterday")), &llama_schema())),
            vec![
                r#"status.conditions[0].lastTransitionTime: Invalid value: "yesterday": status.conditions[0].lastTransitionTime in body must be of type date-time: "yesterday""#
            ]
        );
        for ok in [
            "2024-01-01T00:00:00Z",
            "2024-01-01t00:00:00.123+02:00",
            "2024-02-29T23:59:59Z",
            "2024-01-01T10:00:00-05:30",
        ] {
            assert!(is_date_time(ok), "{ok}");
        }
        for bad in [
            "2023-02-29T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01",
            "",
            "2024-1-01T00:00:00Z",
            "2024-01-01T00:60:00Z",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
        assert!(is_date("2000-02-29") && !is_date("1900-02-29") && !is_date("2024-13-01") && !is_date("2024-01-1"));
    }

    #[test]
    fn constraint_messages() {
        let schema = json!({"type": "object", "properties": {
            "short": {"type": "string", "maxLength": 3},
            "long": {"type": "string", "minLength": 2},
            "pick": {"type": "string", "enum": ["a", "b"]},
            "num": {"type": "integer", "enum": [1, 2]},
            "few": {"type": "array", "maxItems": 1, "items": {"type": "integer"}},
            "many": {"type": "array", "minItems": 2},
            "top": {"type": "integer", "maximum": 10, "exclusiveMaximum": true},
            "cap": {"type": "number", "maximum": 10},
            "cap2": {"type": "number", "exclusiveMaximum": 10},
            "third": {"type": "integer", "multipleOf": 3},
            "half": {"type": "number", "multipleOf": 0.5},
            "ios": {"x-kubernetes-int-or-string": true},
            "props": {"type": "object", "additionalProperties": {"type": "integer"}},
            "small": {"type": "object", "maxProperties": 1},
            "big": {"type": "object", "minProperties": 2}}});
        let obj = json!({
            "short": "abcd", "long": "a", "pick": "c", "num": 3, "few": [1, "x"], "many": [1],
            "top": 10, "cap": 10.5, "cap2": 10, "third": 7, "half": 1.25, "ios": true,
            "props": {"a": "x", "b": 2}, "small": {"a": 1, "b": 2}, "big": {"a": 1}});
        let got = msgs(&validate_against_schema(&obj, &schema));
        let want = vec![
            "big: Invalid value: 1: big in body should have at least 2 properties",
            "cap: Invalid value: 10.5: cap in body should be less than or equal to 10",
            "cap2: Invalid value: 10: cap2 in body should be less than 10",
            r#"few[1]: Invalid value: "string": few[1] in body must be of type integer: "string""#,
            "few: Too many: 2: must have at most 1 items",
            "half: Invalid value: 1.25: half in body should be a multiple of 0.5",
            r#"ios: Invalid value: "boolean": ios in body must be of type integer,string: "boolean""#,
            r#"long: Invalid value: "a": long in body should be at least 2 chars long"#,
            "many: Invalid value: 1: many in body should have at least 2 items",
            r#"num: Unsupported value: 3: supported values: "1", "2""#,
            r#"pick: Unsupported value: "c": supported values: "a", "b""#,
            r#"props.a: Invalid value: "string": props.a in body must be of type integer: "string""#,
            "short: Too long: may not be longer than 3",
            "small: Too many: 2: must have at most 1 items",
            "third: Invalid value: 7: third in body should be a multiple of 3",
            "top: Invalid value: 10: top in body should be less than 10",
        ];
        let mut got_sorted = got.clone();
        got_sorted.sort();
        let mut want_sorted: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        want_sorted.sort();
        assert_eq!(got_sorted, want_sorted);
        let kinds: Vec<FieldErrorKind> = validate_against_schema(&obj, &schema).iter().map(|e| e.kind).collect();
        assert!(kinds.contains(&FieldErrorKind::TooLong) && kinds.contains(&FieldErrorKind::TooMany));
        assert!(kinds.contains(&FieldErrorKind::NotSupported));

        let fine = json!({"short": "abc", "long": "ab", "pick": "b", "num": 2.0, "few": [1], "many": [1, 2],
            "top": 9, "cap": 10, "cap2": 9.99, "third": -9, "half": 1.5, "ios": "25%", "props": {"a": 1},
            "small": {}, "big": {"a": 1, "b": 2}});
        assert!(validate_against_schema(&fine, &schema).is_empty());
        assert!(validate_against_schema(&json!({"ios": 3}), &schema).is_empty());
    }

    #[test]
    fn strings_count_characters_not_bytes() {
        let schema = json!({"properties": {"s": {"type": "string", "maxLength": 2, "minLength": 2}}});
        assert!(validate_against_schema(&json!({"s": "éé"}), &schema).is_empty());
    }

    #[test]
    fn integer_bounds_truncate_like_kube_openapi() {
        let schema = json!({"properties": {"i": {"type": "integer", "minimum": 0.5}}});
        assert!(validate_against_schema(&json!({"i": 0}), &schema).is_empty());
        assert_eq!(
            msgs(&validate_against_schema(&json!({"i": -1}), &schema)),
            vec!["i: Invalid value: -1: i in body should be greater than or equal to 0"]
        );
    }

    #[test]
    fn root_additional_properties_path_quirk() {
        let schema = json!({"type": "object", "additionalProperties": {"type": "string"}});
        assert_eq!(
            msgs(&validate_against_schema(&json!({"a": 1}), &schema)),
            vec![r#"a: Invalid value: "integer": .a in body must be of type string: "integer""#]
        );
    }

    #[test]
    fn metadata_is_type_checked_not_entered_and_undeclared_type_meta_must_be_strings() {
        let schema = json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "integer"}}}}});
        assert!(validate_against_schema(&json!({"metadata": {"name": "x"}}), &schema).is_empty());
        assert_eq!(
            msgs(&validate_against_schema(&json!({"metadata": "x", "kind": 5, "apiVersion": "v1"}), &schema)),
            vec![
                r#"metadata: Invalid value: "string": metadata in body must be of type object: "string""#,
                "kind: Invalid value: 5: must be a string",
            ]
        );
        let embedded = json!({"properties": {"t": {"type": "object", "x-kubernetes-embedded-resource": true,
            "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "integer"}}}}}}});
        assert_eq!(
            msgs(&validate_against_schema(&json!({"t": {"apiVersion": [], "metadata": {"name": "x"}}}), &embedded)),
            vec!["t.apiVersion: Invalid value: []: must be a string"]
        );
    }

    #[test]
    fn validation_tolerates_odd_schemas() {
        for schema in [
            json!(null),
            json!(true),
            json!("x"),
            json!({"type": 5}),
            json!({"properties": [], "required": "x"}),
            json!({"type": ["string", "null"]}),
            json!({"items": [1], "enum": "x", "minimum": "a"}),
        ] {
            let _ = validate_against_schema(&llama(), &schema);
            let mut obj = llama();
            let _ = prune_unknown_fields(&mut obj, &schema);
            apply_defaults(&mut obj, &schema);
        }
        assert!(validate_against_schema(
            &json!({"a": null}),
            &json!({"properties": {"a": {"type": ["string", "null"]}}})
        )
        .is_empty());
    }

    // ---- ObjectMeta --------------------------------------------------------

    const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

    #[test]
    fn valid_meta_has_no_errors() {
        let meta = json!({"name": "bob", "namespace": "default", "generateName": "bob-", "generation": 3,
            "labels": {"app.kubernetes.io/name": "llama", "tier": ""}, "annotations": {"Example.com/Note": "x"},
            "finalizers": ["farm.example.com/cleanup", "farm.example.com/cleanup"],
            "ownerReferences": [{"apiVersion": "farm.example.com/v1alpha", "kind": "Farm", "name": "f", "uid": "u", "controller": true, "blockOwnerDeletion": true},
                                {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u2", "controller": false}],
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {}}]});
        assert!(validate_object_meta(&meta, true).is_empty(), "{:?}", validate_object_meta(&meta, true));
        assert!(validate_object_meta(&without(meta, "", "namespace"), false).is_empty());
    }

    #[test]
    fn name_rules() {
        assert_eq!(
            msgs(&validate_object_meta(&json!({"namespace": "default"}), true)),
            vec!["metadata.name: Required value: name or generateName is required"]
        );
        assert!(validate_object_meta(&json!({"generateName": "bob-", "namespace": "d"}), true).is_empty());
        assert!(validate_object_meta(&json!({"generateName": "b-", "namespace": "d"}), true).is_empty());
        assert_eq!(
            msgs(&validate_object_meta(&json!({"name": "Bad_Name", "namespace": "default"}), true)),
            vec![format!("metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN_MSG}")]
        );
        assert_eq!(
            msgs(&validate_object_meta(&json!({"generateName": "Bob-", "namespace": "d"}), true)),
            vec![format!("metadata.generateName: Invalid value: \"Bob-\": {SUBDOMAIN_MSG}")]
        );
        let long = "a".repeat(254);
        let errs = validate_object_meta(&json!({"name": long, "namespace": "d"}), true);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].detail, "must be no more than 253 characters");
        assert_eq!(errs[0].kind, FieldErrorKind::Invalid);
        assert!(validate_object_meta(&json!({"name": "a.b-c", "namespace": "d"}), true).is_empty());
        // the mask only ever helps a trailing dash, and never panics on multi-byte text
        assert!(!validate_object_meta(&json!({"generateName": "é-", "namespace": "d"}), true).is_empty());
        assert!(!validate_object_meta(&json!({"generateName": "-", "namespace": "d"}), true).is_empty());
    }

    #[test]
    fn namespace_rules() {
        assert_eq!(
            msgs(&validate_object_meta(&json!({"name": "a"}), true)),
            vec!["metadata.namespace: Required value"]
        );
        assert_eq!(
            msgs(&validate_object_meta(&json!({"name": "a", "namespace": "x"}), false)),
            vec!["metadata.namespace: Forbidden: not allowed on this type"]
        );
        let errs = validate_object_meta(&json!({"name": "a", "namespace": "a.b"}), true);
        assert_eq!(msgs(&errs), vec![r#"metadata.namespace: Invalid value: "a.b": must not contain dots"#]);
        assert!(validate_object_meta(&json!({"name": "a", "namespace": ""}), false).is_empty());
    }

    #[test]
    fn label_and_annotation_rules() {
        let errs = validate_object_meta(
            &json!({"name": "a", "namespace": "d", "labels": {"bad key": "ok", "k": "bad value!"}}),
            true,
        );
        assert_eq!(errs.len(), 2);
        assert_eq!(errs[0].field, "metadata.labels");
        assert_eq!(errs[0].value.as_deref(), Some("\"bad key\""));
        assert_eq!(errs[0].detail, validate_qualified_name("bad key")[0]);
        assert_eq!(errs[1].value.as_deref(), Some("\"bad value!\""));
        assert_eq!(errs[1].detail, validate_label_value("bad value!")[0]);

        let errs = validate_object_meta(&json!({"name": "a", "namespace": "d", "annotations": {"a/b/c": ""}}), true);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.annotations");
        assert_eq!(errs[0].value.as_deref(), Some("\"a/b/c\""));

        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        let errs = validate_object_meta(&json!({"name": "a", "namespace": "d", "annotations": {"k": big}}), true);
        assert_eq!(msgs(&errs), vec!["metadata.annotations: Too long: must have at most 262144 bytes"]);
        assert_eq!(errs[0].kind, FieldErrorKind::TooLong);
        let fits = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1);
        assert!(
            validate_object_meta(&json!({"name": "a", "namespace": "d", "annotations": {"k": fits}}), true).is_empty()
        );
    }

    #[test]
    fn finalizer_rules() {
        let errs =
            validate_object_meta(&json!({"name": "a", "namespace": "d", "finalizers": ["bad finalizer!"]}), true);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.finalizers");
        assert_eq!(errs[0].value.as_deref(), Some("\"bad finalizer!\""));
        assert_eq!(
            msgs(&validate_object_meta(
                &json!({"name": "a", "namespace": "d", "finalizers": ["orphan", "foregroundDeletion"]}),
                true
            )),
            vec![
                r#"metadata.finalizers: Invalid value: []string{"orphan", "foregroundDeletion"}: finalizer orphan and foregroundDeletion cannot be both set"#
            ]
        );
    }

    #[test]
    fn owner_reference_rules() {
        assert_eq!(
            msgs(&validate_object_meta(&json!({"name": "a", "namespace": "d", "ownerReferences": [{}]}), true)),
            vec![
                r#"metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty"#,
                r#"metadata.ownerReferences.kind: Invalid value: "": must not be empty"#,
                r#"metadata.ownerReferences.name: Invalid value: "": must not be empty"#,
                r#"metadata.ownerReferences.uid: Invalid value: "": must not be empty"#,
            ]
        );
        let refs = json!([{"apiVersion": "apps/", "kind": "K", "name": "n", "uid": "u"},
                          {"apiVersion": "a/b/c", "kind": "K", "name": "n", "uid": "u"}]);
        assert_eq!(
            msgs(&validate_object_meta(&json!({"name": "a", "namespace": "d", "ownerReferences": refs}), true)),
            vec![
                r#"metadata.ownerReferences.apiVersion: Invalid value: "apps/": version must not be empty"#,
                r#"metadata.ownerReferences.apiVersion: Invalid value: "a/b/c": version must not be empty"#,
            ]
        );
        let refs = json!([{"apiVersion": "v1", "kind": "Farm", "name": "a", "uid": "1", "controller": true},
                          {"apiVersion": "v1", "kind": "Farm", "name": "b", "uid": "2", "controller": true}]);
        let errs = validate_object_meta(&json!({"name": "a", "namespace": "d", "ownerReferences": refs}), true);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.ownerReferences");
        assert_eq!(
            errs[0].detail,
            "Only one reference can have Controller set to true. Found \"true\" in references for Farm/a and Farm/b"
        );
        let refs = json!([{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"}]);
        let errs = validate_object_meta(&json!({"name": "a", "namespace": "d", "ownerReferences": refs}), true);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].detail, "/v1, Kind=Event is disallowed from being an owner");
    }

    #[test]
    fn managed_fields_and_generation_rules() {
        let meta = json!({"name": "a", "namespace": "d", "generation": -1, "managedFields": [
            {"manager": "m", "operation": "Bad", "fieldsType": "FieldsV2"},
            {"manager": "x".repeat(129), "operation": "Update", "subresource": "s".repeat(257)},
            {"manager": "tab\there", "operation": "Apply"}]});
        assert_eq!(
            msgs(&validate_object_meta(&meta, true)),
            vec![
                "metadata.generation: Invalid value: -1: must be greater than or equal to 0",
                "metadata.managedFields[0].operation: Invalid value: \"Bad\": must be `Apply` or `Update`",
                "metadata.managedFields[0].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
                "metadata.managedFields[1].manager: Too long: must have at most 128 bytes",
                "metadata.managedFields[1].subresource: Too long: must have at most 256 bytes",
                "metadata.managedFields[2].manager: Invalid value: \"tab\\there\": invalid character U+0009 (at position 3)",
            ]
        );
    }

    #[test]
    fn wrongly_typed_meta_fields_are_reported_not_ignored() {
        let errs =
            validate_object_meta(&json!({"name": 5, "namespace": "d", "labels": {"a": 1}, "finalizers": "x"}), true);
        assert_eq!(
            msgs(&errs),
            vec![
                r#"metadata.name: Invalid value: "integer": metadata.name in body must be of type string: "integer""#,
                r#"metadata.labels.a: Invalid value: "integer": metadata.labels.a in body must be of type string: "integer""#,
                r#"metadata.finalizers: Invalid value: "string": metadata.finalizers in body must be of type array: "string""#,
                "metadata.name: Required value: name or generateName is required",
            ]
        );
        assert_eq!(
            msgs(&validate_object_meta(&json!([1]), true)),
            vec![r#"metadata: Invalid value: "array": metadata in body must be of type object: "array""#]
        );
        assert_eq!(
            msgs(&validate_object_meta(&Value::Null, false)),
            vec!["metadata.name: Required value: name or generateName is required"]
        );
    }

    #[test]
    fn type_meta_rules() {
        assert!(validate_type_meta(&llama(), "farm.example.com/v1alpha", "Llama").is_empty());
        assert_eq!(
            msgs(&validate_type_meta(
                &json!({"kind": "Goat", "apiVersion": "v1"}),
                "farm.example.com/v1alpha",
                "Llama"
            )),
            vec![
                r#"kind: Invalid value: "Goat": must be Llama"#,
                r#"apiVersion: Invalid value: "v1": must be farm.example.com/v1alpha"#,
            ]
        );
    }

    // ---- ObjectMeta update ---------------------------------------------------

    fn stored_meta() -> Value {
        json!({"name": "bob", "namespace": "default", "uid": "u-1", "resourceVersion": "7", "generation": 2,
               "creationTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["a"]})
    }

    #[test]
    fn update_of_unchanged_meta_is_fine() {
        assert!(validate_object_meta_update(&stored_meta(), &stored_meta()).is_empty());
        let same_instant = with(stored_meta(), "/creationTimestamp", json!("2024-01-01T02:00:00+02:00"));
        assert!(validate_object_meta_update(&same_instant, &stored_meta()).is_empty());
    }

    #[test]
    fn update_immutable_fields() {
        let new = json!({"name": "b", "namespace": "other", "uid": "u-2", "resourceVersion": "7", "generation": 1,
                         "creationTimestamp": "2024-01-02T00:00:00Z", "deletionTimestamp": "2024-03-01T10:00:00.5Z",
                         "deletionGracePeriodSeconds": 30});
        assert_eq!(
            msgs(&validate_object_meta_update(&new, &stored_meta())),
            vec![
                "metadata.generation: Invalid value: 1: must not be decremented",
                r#"metadata.name: Invalid value: "b": field is immutable"#,
                r#"metadata.namespace: Invalid value: "other": field is immutable"#,
                r#"metadata.uid: Invalid value: "u-2": field is immutable"#,
                "metadata.creationTimestamp: Invalid value: 2024-01-02 00:00:00 +0000 UTC: field is immutable",
                "metadata.deletionTimestamp: Invalid value: 2024-03-01 10:00:00.5 +0000 UTC: field is immutable",
                "metadata.deletionGracePeriodSeconds: Invalid value: 30: field is immutable",
            ]
        );
        let old = with(stored_meta(), "/generation", json!(2));
        let mut old = old;
        old["deletionGracePeriodSeconds"] = json!(30);
        assert_eq!(
            msgs(&validate_object_meta_update(&stored_meta(), &old)),
            vec!["metadata.deletionGracePeriodSeconds: Invalid value: null: field is immutable"]
        );
        assert_eq!(
            msgs(&validate_object_meta_update(&without(stored_meta(), "", "creationTimestamp"), &stored_meta())),
            vec!["metadata.creationTimestamp: Invalid value: 0001-01-01 00:00:00 +0000 UTC: field is immutable"]
        );
    }

    #[test]
    fn update_needs_resource_version() {
        assert_eq!(
            msgs(&validate_object_meta_update(&without(stored_meta(), "", "resourceVersion"), &stored_meta())),
            vec![r#"metadata.resourceVersion: Invalid value: "": must be specified for an update"#]
        );
    }

    #[test]
    fn no_new_finalizers_while_deleting() {
        let mut old = stored_meta();
        old["deletionTimestamp"] = json!("2024-02-01T00:00:00Z");
        let mut new = old.clone();
        new["finalizers"] = json!(["b", "a", "c"]);
        assert_eq!(
            msgs(&validate_object_meta_update(&new, &old)),
            vec![
                r#"metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"b", "c"}"#
            ]
        );
        new["finalizers"] = json!([]);
        assert!(validate_object_meta_update(&new, &old).is_empty());
        // not being deleted: adding is fine
        let mut new = stored_meta();
        new["finalizers"] = json!(["a", "b"]);
        assert!(validate_object_meta_update(&new, &stored_meta()).is_empty());
    }

    #[test]
    fn prepare_meta_for_update_carries_server_fields() {
        let mut old = stored_meta();
        old["deletionTimestamp"] = json!("2024-02-01T00:00:00Z");
        old["deletionGracePeriodSeconds"] = json!(0);
        let mut new = json!({"name": "bob", "namespace": "default", "resourceVersion": "7", "generation": 9,
                             "creationTimestamp": "1999-01-01T00:00:00Z", "finalizers": ["a"]});
        prepare_meta_for_update(&mut new, &old);
        assert_eq!(new["uid"], "u-1");
        assert_eq!(new["generation"], 2);
        assert_eq!(new["creationTimestamp"], "2024-01-01T00:00:00Z");
        assert_eq!(new["deletionTimestamp"], "2024-02-01T00:00:00Z");
        assert_eq!(new["deletionGracePeriodSeconds"], 0);
        assert!(validate_object_meta_update(&new, &old).is_empty());
        // a client-chosen uid is kept (and then reported as immutable)
        let mut new = json!({"uid": "mine", "generation": 3});
        prepare_meta_for_update(&mut new, &json!({}));
        assert_eq!(new, json!({"uid": "mine"}));
        let mut new = Value::Null;
        prepare_meta_for_update(&mut new, &stored_meta());
        assert_eq!(new["uid"], "u-1");
    }

    // ---- Go formatting ---------------------------------------------------------

    #[test]
    fn go_float_matches_fmt_v() {
        let cases = [
            (0.0, "0"),
            (0.5, "0.5"),
            (-2.5, "-2.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123456.0, "123456"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
        ];
        for (f, want) in cases {
            assert_eq!(go_float(f), want, "{f}");
        }
    }

    #[test]
    fn go_quote_matches_strconv_quote() {
        assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(go_quote("\u{1}\u{7f}\n"), r#""\x01\x7f\n""#);
        assert_eq!(go_quote("llamá 🦙"), "\"llamá 🦙\"");
        assert_eq!(go_quote("\u{a0}\u{200b}\u{feff}"), r#""\u00a0\u200b\ufeff""#);
        assert_eq!(go_quote("\u{f0000}"), r#""\U000f0000""#);
        assert_eq!(go_string_slice(&["a", "b\""]), r#"[]string{"a", "b\""}"#);
    }

    // ---- robustness ----------------------------------------------------------

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

    const ALPHABET: &[u8] = b"{}[]:,\"\\ \n0123456789-+.eEtrufalsn/abxyzK\x00\x01\x7f\xc3\xa9\xff\xf0\x9f";

    fn exercise(body: &[u8]) {
        let schema = llama_schema();
        match decode_json(body) {
            Ok((mut v, dups)) => {
                assert!(v.is_object());
                let _ = strict_decoding_error(&dups, &[]);
                let meta = v.get("metadata").cloned().unwrap_or(Value::Null);
                let _ = check_object_meta_types(&meta);
                let unknown = prune_unknown_fields(&mut v, &schema);
                let _ = strict_warnings(&dups, &unknown);
                apply_defaults(&mut v, &schema);
                for e in validate_against_schema(&v, &schema) {
                    let _ = e.full_message();
                }
                let _ = validate_type_meta(&v, "farm.example.com/v1alpha", "Llama");
                let meta = v.get("metadata").cloned().unwrap_or(Value::Null);
                let _ = validate_object_meta(&meta, true);
                let _ = validate_object_meta(&meta, false);
                let mut new = meta.clone();
                prepare_meta_for_update(&mut new, &meta);
                let _ = validate_object_meta_update(&new, &meta);
                let _ = validate_object_meta_update(&meta, &new);
            }
            Err(e) => {
                assert!(!e.is_empty());
                let _ = decode_error_message(&e, body, "Llama", "v1alpha");
            }
        }
    }

    fn random_value(rng: &mut XorShift, depth: usize) -> Value {
        match rng.below(if depth > 4 { 6 } else { 9 }) {
            0 => Value::Null,
            1 => Value::Bool(rng.below(2) == 1),
            2 => json!(rng.next() as i64 >> rng.below(64)),
            3 => json!((rng.next() as i64 as f64) / 1e3),
            4 => json!(
                ["", "a", "Bad Name", "2024-01-01T00:00:00Z", "orphan", "foregroundDeletion", "x/y/z", "é-"]
                    [rng.below(8)]
            ),
            5 => json!(rng.below(3)),
            6 => Value::Array((0..rng.below(4)).map(|_| random_value(rng, depth + 1)).collect()),
            _ => {
                let keys = [
                    "name",
                    "kind",
                    "apiVersion",
                    "uid",
                    "controller",
                    "type",
                    "status",
                    "weight",
                    "labels",
                    "x",
                    "operation",
                    "manager",
                ];
                let mut m = Map::new();
                for _ in 0..rng.below(5) {
                    m.insert(keys[rng.below(keys.len())].to_string(), random_value(rng, depth + 1));
                }
                Value::Object(m)
            }
        }
    }

    #[test]
    fn fuzz_random_bytes_never_panic() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for _ in 0..3000 {
            let len = rng.below(48);
            let body: Vec<u8> = (0..len)
                .map(|_| if rng.below(8) == 0 { rng.next() as u8 } else { ALPHABET[rng.below(ALPHABET.len())] })
                .collect();
            exercise(&body);
        }
    }

    #[test]
    fn fuzz_mutated_valid_json_never_panics() {
        let mut rng = XorShift(0xD1B5_4A32_D192_ED03);
        let mut seed = llama();
        seed["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "Farm", "name": "f", "uid": "u", "controller": true}]);
        seed["metadata"]["managedFields"] =
            json!([{"manager": "m", "operation": "Update", "time": "2024-01-01T00:00:00Z"}]);
        seed["metadata"]["finalizers"] = json!(["a/b"]);
        let base = serde_json::to_vec(&seed).unwrap();
        let mut parsed = 0;
        for _ in 0..3000 {
            let mut body = base.clone();
            for _ in 0..=rng.below(4) {
                let at = rng.below(body.len() + 1);
                match rng.below(5) {
                    0 if at < body.len() => {
                        body.remove(at);
                    }
                    1 => body.insert(at, ALPHABET[rng.below(ALPHABET.len())]),
                    2 if at < body.len() => body[at] = ALPHABET[rng.below(ALPHABET.len())],
                    3 => {
                        let start = rng.below(body.len());
                        let end = (start + rng.below(16)).min(body.len());
                        let piece = body[start..end].to_vec();
                        body.splice(at..at, piece);
                    }
                    _ => {
                        let start = rng.below(body.len());
                        let end = (start + rng.below(8)).min(body.len());
                        body.drain(start..end);
                    }
                }
            }
            if decode_json(&body).is_ok() {
                parsed += 1;
            }
            exercise(&body);
        }
        assert!(parsed > 50, "mutations should leave some valid documents ({parsed})");
    }

    #[test]
    fn fuzz_random_values_in_a_llama_never_panic() {
        let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
        let spots = [
            "/spec/weight",
            "/spec/colour",
            "/spec",
            "/status",
            "/status/conditions",
            "/status/conditions/0",
            "/status/conditions/0/lastTransitionTime",
            "/status/observedGeneration",
            "/metadata",
            "/metadata/labels",
            "/metadata/name",
            "/kind",
            "/apiVersion",
        ];
        for i in 0..2000 {
            let mut obj = llama();
            obj["metadata"]["ownerReferences"] = json!([]);
            obj["metadata"]["managedFields"] = json!([]);
            obj["metadata"]["finalizers"] = json!([]);
            let spot = spots[rng.below(spots.len())];
            let spot = if i % 3 == 0 {
                [
                    "/metadata/ownerReferences",
                    "/metadata/managedFields",
                    "/metadata/finalizers",
                    "/metadata/annotations",
                ][rng.below(4)]
            } else {
                spot
            };
            let value = random_value(&mut rng, 0);
            if let Some(slot) = obj.pointer_mut(spot) {
                *slot = value;
            } else if let Some(m) = obj.pointer_mut("/metadata").and_then(Value::as_object_mut) {
                m.insert(spot.rsplit('/').next().unwrap_or("x").to_string(), value);
            }
            // both straight and through the decoder
            exercise(&serde_json::to_vec(&obj).unwrap());
            let schema = if i % 2 == 0 { llama_schema() } else { random_value(&mut rng, 0) };
            let _ = validate_against_schema(&obj, &schema);
            let _ = prune_unknown_fields(&mut obj, &schema);
        }
    }

    #[test]
    fn hand_built_deep_values_are_walked_safely() {
        let mut v = json!(1);
        for _ in 0..(MAX_WALK_DEPTH + 50) {
            v = Value::Array(vec![v]);
        }
        let mut obj = json!({"spec": v});
        let _ = prune_unknown_fields(&mut obj, &json!({"properties": {"spec": {}}}));
        let schema_items =
            (0..(MAX_WALK_DEPTH + 50)).fold(json!({"type": "string"}), |s, _| json!({"type": "array", "items": s}));
        let errs = validate_against_schema(&obj, &json!({"properties": {"spec": schema_items}}));
        assert!(!errs.is_empty());
        // tear the value down iteratively so the test itself cannot overflow
        let mut stack = vec![obj];
        while let Some(mut v) = stack.pop() {
            match &mut v {
                Value::Array(a) => stack.append(a),
                Value::Object(m) => stack.extend(std::mem::take(m).into_iter().map(|(_, v)| v)),
                _ => {}
            }
        }
    }
}
