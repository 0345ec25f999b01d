//! OpenAPI documents in protobuf, as kube-apiserver serves them to clients
//! that ask for `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`
//! (kubectl before 1.29 asks for nothing else): gnostic's `openapi.v2.Document`
//! and `openapi.v3.Document` messages (github.com/google/gnostic-models,
//! `openapiv2/OpenAPIv2.proto`, `openapiv3/OpenAPIv3.proto`).
//!
//! kube-openapi gets there by parsing its JSON with gnostic's compiler and
//! marshalling the result; this module walks the same JSON with tables of
//! those messages and writes the wire format directly ([`super::wire`]). The
//! tables say, per message, which JSON key is which field number, which keys
//! must be there, and which keys become repeated `Named*` entries (map-like
//! messages, `x-` extensions as `NamedAny` holding the value as YAML). The
//! compiler's rules are followed where a document could tell them apart:
//! a `oneof` takes the last alternative that accepts the value (so `{"$ref"}`
//! is a Reference, not a Schema), scalar fields at their zero value are left
//! out (proto3) but a chosen `oneof` member never is, integers must be whole,
//! an unknown key is an error, and a Schema's `default` in OpenAPI 3 keeps
//! only a scalar (gnostic's `DefaultType`; `default: {}` is an empty message).
//!
//! Messages that documents of an aggregated API server never carry (security
//! definitions and schemes, callbacks, links, encodings, OpenAPI 3 headers)
//! are not in the tables: a document using one fails to encode with the key
//! named, and the server answers protobuf requests with 503 as kube-openapi
//! does when gnostic fails, while JSON keeps being served.

use serde_json::{Map, Value};

use super::wire::Writer;
use crate::apimachinery::serializer::value_to_yaml;

/// Which document: Swagger 2.0 (`/openapi/v2`) or OpenAPI 3 (`/openapi/v3/...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spec {
    V2,
    V3,
}

/// The document as the bytes of gnostic's `Document` message of `spec`.
pub fn encode(document: &Value, spec: Spec) -> Result<Vec<u8>, String> {
    let root = match spec {
        Spec::V2 => &v2::DOCUMENT,
        Spec::V3 => &v3::DOCUMENT,
    };
    let mut out = Writer::default();
    encode_message(&mut out, root, document)?;
    Ok(out.into_bytes())
}

/// What a JSON value becomes in a field.
#[derive(Clone, Copy)]
enum Kind {
    String,
    /// A string gnostic checks against a list of values.
    StringIn(&'static [&'static str]),
    Bool,
    Double,
    /// Whole numbers only (gnostic's `IntForScalarNode`).
    Int64,
    /// `repeated string` from an array.
    Strings,
    /// `repeated string` from an array, each one of a list of values.
    StringsIn(&'static [&'static str]),
    Message(&'static Message),
    /// `repeated` message from an array.
    Messages(&'static Message),
    /// gnostic's `Any`: the value as YAML.
    Any,
    Anys,
    OneOf(&'static OneOf),
    OneOfs(&'static OneOf),
    /// The value as field `.0` of a one-field message: `ItemsItem` holds the
    /// single schema of `items`, `StringArray` the strings of an array.
    Wrapped(u32, &'static Kind),
    /// Swagger's `type`, a string or an array of them, as `TypeItem.value`.
    TypeItem,
    /// OpenAPI 3's Schema `default`: a number, boolean or string, else nothing.
    DefaultType,
}

/// A field of a message: (JSON key, field number, kind).
struct Field(&'static str, u32, Kind);

/// Which keys of an object become entries of a repeated `Named*` field.
#[derive(Clone, Copy)]
enum Keys {
    All,
    Prefix(&'static str),
    /// Swagger's `^([0-9]{3})$|^(default)$`.
    ResponseCodeV2,
    /// OpenAPI 3's `^([0-9X]{3})$`.
    ResponseCodeV3,
}

impl Keys {
    fn matches(self, key: &str) -> bool {
        let three = |allowed: fn(u8) -> bool| key.len() == 3 && key.bytes().all(allowed);
        match self {
            Keys::All => true,
            Keys::Prefix(p) => key.starts_with(p),
            Keys::ResponseCodeV2 => key == "default" || three(|b| b.is_ascii_digit()),
            Keys::ResponseCodeV3 => three(|b| b.is_ascii_digit() || b == b'X'),
        }
    }
}

/// Keys matched by pattern, each a `Named*{name = 1, value = 2}` in field `number`.
struct Entries {
    keys: Keys,
    number: u32,
    value: Kind,
}

/// The `x-` keys as `NamedAny` in field `number`.
const fn extensions(number: u32) -> Entries {
    Entries { keys: Keys::Prefix("x-"), number, value: Kind::Any }
}

struct Message {
    name: &'static str,
    fields: &'static [Field],
    required: &'static [&'static str],
    entries: &'static [Entries],
}

/// A message of one `oneof`: (field number, kind) per alternative.
struct OneOf {
    name: &'static str,
    choices: &'static [(u32, Kind)],
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn unexpected(want: &str, value: &Value) -> String {
    format!("expected {want}, found {}", type_name(value))
}

/// gnostic's `StringForScalarNode`: strings, and integers as written.
fn as_string(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(n.to_string()),
        other => Err(unexpected("a string", other)),
    }
}

fn check_in(s: &str, allowed: &[&str]) -> Result<(), String> {
    if allowed.contains(&s) {
        Ok(())
    } else {
        Err(format!("{s:?} is not one of {allowed:?}"))
    }
}

fn as_array(value: &Value) -> Result<&Vec<Value>, String> {
    value.as_array().ok_or_else(|| unexpected("an array", value))
}

/// Writes `value` as field `number` of kind `kind`. Scalars at their zero
/// value are left out unless `present` (a chosen `oneof` member).
fn encode_field(out: &mut Writer, number: u32, kind: Kind, value: &Value, present: bool) -> Result<(), String> {
    match kind {
        Kind::String => {
            let s = as_string(value)?;
            if present || !s.is_empty() {
                out.bytes(number, s.as_bytes());
            }
        }
        Kind::StringIn(allowed) => {
            let s = as_string(value)?;
            check_in(&s, allowed)?;
            if present || !s.is_empty() {
                out.bytes(number, s.as_bytes());
            }
        }
        Kind::Bool => {
            let b = value.as_bool().ok_or_else(|| unexpected("a boolean", value))?;
            if present || b {
                out.bool(number, b);
            }
        }
        Kind::Double => {
            let d = value.as_f64().ok_or_else(|| unexpected("a number", value))?;
            // proto3 leaves out +0.0 only (Go compares the bits).
            if present || d.to_bits() != 0 {
                out.double(number, d);
            }
        }
        Kind::Int64 => {
            let i = value.as_i64().ok_or_else(|| unexpected("an integer", value))?;
            if present || i != 0 {
                out.int64(number, i);
            }
        }
        Kind::Strings | Kind::StringsIn(_) => {
            for item in as_array(value)? {
                let s = as_string(item)?;
                if let Kind::StringsIn(allowed) = kind {
                    check_in(&s, allowed)?;
                }
                out.bytes(number, s.as_bytes());
            }
        }
        Kind::Message(message) => {
            let mut inner = Writer::default();
            encode_message(&mut inner, message, value)?;
            out.bytes(number, &inner.into_bytes());
        }
        Kind::OneOf(one_of) => {
            let mut inner = Writer::default();
            encode_one_of(&mut inner, one_of, value)?;
            out.bytes(number, &inner.into_bytes());
        }
        Kind::Messages(_) | Kind::OneOfs(_) | Kind::Anys => {
            let single = match kind {
                Kind::Messages(message) => Kind::Message(message),
                Kind::OneOfs(one_of) => Kind::OneOf(one_of),
                _ => Kind::Any,
            };
            for (i, item) in as_array(value)?.iter().enumerate() {
                encode_field(out, number, single, item, true).map_err(|e| format!("[{i}]: {e}"))?;
            }
        }
        Kind::Any => {
            // `Any { google.protobuf.Any value = 1; string yaml = 2; }`: the
            // compiler keeps the YAML text; kube-openapi's readers parse it
            // back with go-yaml, which `value_to_yaml` is written for.
            let mut inner = Writer::default();
            inner.bytes(2, value_to_yaml(value).as_bytes());
            out.bytes(number, &inner.into_bytes());
        }
        Kind::Wrapped(inner_number, inner_kind) => {
            let mut inner = Writer::default();
            encode_field(&mut inner, inner_number, *inner_kind, value, true)?;
            out.bytes(number, &inner.into_bytes());
        }
        Kind::TypeItem => {
            let mut inner = Writer::default();
            match value {
                Value::Array(items) => {
                    for item in items {
                        inner.bytes(1, as_string(item)?.as_bytes());
                    }
                }
                scalar => inner.bytes(1, as_string(scalar)?.as_bytes()),
            }
            out.bytes(number, &inner.into_bytes());
        }
        Kind::DefaultType => {
            // `oneof { double number = 1; bool boolean = 2; string string = 3; }`;
            // gnostic sets none of them for an object, array or null.
            let mut inner = Writer::default();
            match value {
                Value::Number(n) => inner.double(1, n.as_f64().unwrap_or_default()),
                Value::Bool(b) => inner.bool(2, *b),
                Value::String(s) => inner.bytes(3, s.as_bytes()),
                _ => {}
            }
            out.bytes(number, &inner.into_bytes());
        }
    }
    Ok(())
}

fn encode_message(out: &mut Writer, message: &Message, value: &Value) -> Result<(), String> {
    let object: &Map<String, Value> =
        value.as_object().ok_or_else(|| format!("{}: {}", message.name, unexpected("an object", value)))?;
    let missing: Vec<&str> = message.required.iter().copied().filter(|k| !object.contains_key(*k)).collect();
    if !missing.is_empty() {
        return Err(format!("{}: missing required {}", message.name, missing.join(", ")));
    }
    // Fields go out in field-number order, as Go's marshaller writes them;
    // repeated entries keep the document's order.
    let mut parts: Vec<(u32, Writer)> = Vec::new();
    for (key, item) in object {
        let at = |e: String| format!("{key}: {e}");
        if let Some(Field(_, number, kind)) = message.fields.iter().find(|f| f.0 == key) {
            let mut part = Writer::default();
            encode_field(&mut part, *number, *kind, item, false).map_err(at)?;
            parts.push((*number, part));
            continue;
        }
        let Some(entries) = message.entries.iter().find(|e| e.keys.matches(key)) else {
            return Err(format!("{}: unknown or unsupported key {key:?}", message.name));
        };
        let mut named = Writer::default();
        named.bytes(1, key.as_bytes());
        encode_field(&mut named, 2, entries.value, item, true).map_err(at)?;
        let mut part = Writer::default();
        part.bytes(entries.number, &named.into_bytes());
        parts.push((entries.number, part));
    }
    parts.sort_by_key(|(number, _)| *number);
    for (_, part) in parts {
        out.append(&part.into_bytes());
    }
    Ok(())
}

fn encode_one_of(out: &mut Writer, one_of: &OneOf, value: &Value) -> Result<(), String> {
    let mut chosen = None;
    let mut refusals = Vec::new();
    for &(number, kind) in one_of.choices {
        let mut attempt = Writer::default();
        match encode_field(&mut attempt, number, kind, value, true) {
            // The last alternative that accepts the value wins, as in gnostic.
            Ok(()) => chosen = Some(attempt),
            Err(e) => refusals.push(e),
        }
    }
    match chosen {
        Some(attempt) => {
            out.append(&attempt.into_bytes());
            Ok(())
        }
        None => Err(format!("not a valid {} ({})", one_of.name, refusals.join("; "))),
    }
}

/// A map-like message: every key of the object an entry of field 1.
macro_rules! named {
    ($name:literal, $value:expr) => {
        Message {
            name: $name,
            fields: &[],
            required: &[],
            entries: &[Entries { keys: Keys::All, number: 1, value: $value }],
        }
    };
}

/// The messages both versions define alike (same keys, same numbers).
mod both {
    use super::Kind::*;
    use super::{extensions, Entries, Field, Keys, Kind, Message};

    pub static CONTACT: Message = Message {
        name: "Contact",
        fields: &[Field("name", 1, String), Field("url", 2, String), Field("email", 3, String)],
        required: &[],
        entries: &[extensions(4)],
    };

    pub static LICENSE: Message = Message {
        name: "License",
        fields: &[Field("name", 1, String), Field("url", 2, String)],
        required: &["name"],
        entries: &[extensions(3)],
    };

    pub static EXTERNAL_DOCS: Message = Message {
        name: "ExternalDocs",
        fields: &[Field("description", 1, String), Field("url", 2, String)],
        required: &["url"],
        entries: &[extensions(3)],
    };

    pub static TAG: Message = Message {
        name: "Tag",
        fields: &[
            Field("name", 1, String),
            Field("description", 2, String),
            Field("externalDocs", 3, Message(&EXTERNAL_DOCS)),
        ],
        required: &["name"],
        entries: &[extensions(4)],
    };

    pub const STRING_ARRAY: Kind = Wrapped(1, &Strings);

    pub static SECURITY_REQUIREMENT: Message = named!("SecurityRequirement", STRING_ARRAY);

    pub static XML: Message = Message {
        name: "Xml",
        fields: &[
            Field("name", 1, String),
            Field("namespace", 2, String),
            Field("prefix", 3, String),
            Field("attribute", 4, Bool),
            Field("wrapped", 5, Bool),
        ],
        required: &[],
        entries: &[extensions(6)],
    };
}

/// `openapi.v2` (OpenAPIv2.proto).
mod v2 {
    use super::both::{CONTACT, EXTERNAL_DOCS, LICENSE, SECURITY_REQUIREMENT, TAG, XML};
    use super::Kind::*;
    use super::{extensions, Entries, Field, Keys, Kind, Message, OneOf};

    const SCHEMES: &[&str] = &["http", "https", "ws", "wss"];
    const PRIMITIVE_TYPES: &[&str] = &["string", "number", "boolean", "integer", "array"];
    const FORM_TYPES: &[&str] = &["string", "number", "boolean", "integer", "array", "file"];
    const COLLECTION_FORMATS: &[&str] = &["csv", "ssv", "tsv", "pipes"];
    const PARAMETER_COLLECTION_FORMATS: &[&str] = &["csv", "ssv", "tsv", "pipes", "multi"];

    pub static DOCUMENT: Message = Message {
        name: "Document",
        fields: &[
            Field("swagger", 1, StringIn(&["2.0"])),
            Field("info", 2, Message(&INFO)),
            Field("host", 3, String),
            Field("basePath", 4, String),
            Field("schemes", 5, StringsIn(SCHEMES)),
            Field("consumes", 6, Strings),
            Field("produces", 7, Strings),
            Field("paths", 8, Message(&PATHS)),
            Field("definitions", 9, Message(&DEFINITIONS)),
            Field("parameters", 10, Message(&PARAMETER_DEFINITIONS)),
            Field("responses", 11, Message(&RESPONSE_DEFINITIONS)),
            Field("security", 12, Messages(&SECURITY_REQUIREMENT)),
            Field("tags", 14, Messages(&TAG)),
            Field("externalDocs", 15, Message(&EXTERNAL_DOCS)),
        ],
        required: &["info", "paths", "swagger"],
        entries: &[extensions(16)],
    };

    static INFO: Message = Message {
        name: "Info",
        fields: &[
            Field("title", 1, String),
            Field("version", 2, String),
            Field("description", 3, String),
            Field("termsOfService", 4, String),
            Field("contact", 5, Message(&CONTACT)),
            Field("license", 6, Message(&LICENSE)),
        ],
        required: &["title", "version"],
        entries: &[extensions(7)],
    };

    static PATHS: Message = Message {
        name: "Paths",
        fields: &[],
        required: &[],
        entries: &[extensions(1), Entries { keys: Keys::Prefix("/"), number: 2, value: Message(&PATH_ITEM) }],
    };

    static PATH_ITEM: Message = Message {
        name: "PathItem",
        fields: &[
            Field("$ref", 1, String),
            Field("get", 2, Message(&OPERATION)),
            Field("put", 3, Message(&OPERATION)),
            Field("post", 4, Message(&OPERATION)),
            Field("delete", 5, Message(&OPERATION)),
            Field("options", 6, Message(&OPERATION)),
            Field("head", 7, Message(&OPERATION)),
            Field("patch", 8, Message(&OPERATION)),
            Field("parameters", 9, OneOfs(&PARAMETERS_ITEM)),
        ],
        required: &[],
        entries: &[extensions(10)],
    };

    static OPERATION: Message = Message {
        name: "Operation",
        fields: &[
            Field("tags", 1, Strings),
            Field("summary", 2, String),
            Field("description", 3, String),
            Field("externalDocs", 4, Message(&EXTERNAL_DOCS)),
            Field("operationId", 5, String),
            Field("produces", 6, Strings),
            Field("consumes", 7, Strings),
            Field("parameters", 8, OneOfs(&PARAMETERS_ITEM)),
            Field("responses", 9, Message(&RESPONSES)),
            Field("schemes", 10, StringsIn(SCHEMES)),
            Field("deprecated", 11, Bool),
            Field("security", 12, Messages(&SECURITY_REQUIREMENT)),
        ],
        required: &["responses"],
        entries: &[extensions(13)],
    };

    static PARAMETERS_ITEM: OneOf =
        OneOf { name: "ParametersItem", choices: &[(1, OneOf(&PARAMETER)), (2, Message(&JSON_REFERENCE))] };

    static PARAMETER: OneOf =
        OneOf { name: "Parameter", choices: &[(1, Message(&BODY_PARAMETER)), (2, OneOf(&NON_BODY_PARAMETER))] };

    static NON_BODY_PARAMETER: OneOf = OneOf {
        name: "NonBodyParameter",
        choices: &[
            (1, Message(&HEADER_PARAMETER)),
            (2, Message(&FORM_DATA_PARAMETER)),
            (3, Message(&QUERY_PARAMETER)),
            (4, Message(&PATH_PARAMETER)),
        ],
    };

    static JSON_REFERENCE: Message = Message {
        name: "JsonReference",
        fields: &[Field("$ref", 1, String), Field("description", 2, String)],
        required: &["$ref"],
        entries: &[],
    };

    static BODY_PARAMETER: Message = Message {
        name: "BodyParameter",
        fields: &[
            Field("description", 1, String),
            Field("name", 2, String),
            Field("in", 3, StringIn(&["body"])),
            Field("required", 4, Bool),
            Field("schema", 5, Message(&SCHEMA)),
        ],
        required: &["in", "name", "schema"],
        entries: &[extensions(6)],
    };

    /// Query and formData parameters: the same fields, numbered alike.
    macro_rules! query_like_parameter {
        ($name:literal, $in:literal, $types:expr, $formats:expr) => {
            Message {
                name: $name,
                fields: &[
                    Field("required", 1, Bool),
                    Field("in", 2, StringIn(&[$in])),
                    Field("description", 3, String),
                    Field("name", 4, String),
                    Field("allowEmptyValue", 5, Bool),
                    Field("type", 6, StringIn($types)),
                    Field("format", 7, String),
                    Field("items", 8, Message(&PRIMITIVES_ITEMS)),
                    Field("collectionFormat", 9, StringIn($formats)),
                    Field("default", 10, Any),
                    Field("maximum", 11, Double),
                    Field("exclusiveMaximum", 12, Bool),
                    Field("minimum", 13, Double),
                    Field("exclusiveMinimum", 14, Bool),
                    Field("maxLength", 15, Int64),
                    Field("minLength", 16, Int64),
                    Field("pattern", 17, String),
                    Field("maxItems", 18, Int64),
                    Field("minItems", 19, Int64),
                    Field("uniqueItems", 20, Bool),
                    Field("enum", 21, Anys),
                    Field("multipleOf", 22, Double),
                ],
                required: &[],
                entries: &[extensions(23)],
            }
        };
    }

    /// Header and path parameters: the same fields, numbered alike.
    macro_rules! header_like_parameter {
        ($name:literal, $in:literal, $required:expr) => {
            Message {
                name: $name,
                fields: &[
                    Field("required", 1, Bool),
                    Field("in", 2, StringIn(&[$in])),
                    Field("description", 3, String),
                    Field("name", 4, String),
                    Field("type", 5, StringIn(PRIMITIVE_TYPES)),
                    Field("format", 6, String),
                    Field("items", 7, Message(&PRIMITIVES_ITEMS)),
                    Field("collectionFormat", 8, StringIn(COLLECTION_FORMATS)),
                    Field("default", 9, Any),
                    Field("maximum", 10, Double),
                    Field("exclusiveMaximum", 11, Bool),
                    Field("minimum", 12, Double),
                    Field("exclusiveMinimum", 13, Bool),
                    Field("maxLength", 14, Int64),
                    Field("minLength", 15, Int64),
                    Field("pattern", 16, String),
                    Field("maxItems", 17, Int64),
                    Field("minItems", 18, Int64),
                    Field("uniqueItems", 19, Bool),
                    Field("enum", 20, Anys),
                    Field("multipleOf", 21, Double),
                ],
                required: $required,
                entries: &[extensions(22)],
            }
        };
    }

    static QUERY_PARAMETER: Message =
        query_like_parameter!("QueryParameterSubSchema", "query", PRIMITIVE_TYPES, PARAMETER_COLLECTION_FORMATS);
    static FORM_DATA_PARAMETER: Message =
        query_like_parameter!("FormDataParameterSubSchema", "formData", FORM_TYPES, PARAMETER_COLLECTION_FORMATS);
    static HEADER_PARAMETER: Message = header_like_parameter!("HeaderParameterSubSchema", "header", &[]);
    static PATH_PARAMETER: Message = header_like_parameter!("PathParameterSubSchema", "path", &["required"]);

    /// Items of a non-body parameter, and a response header: the same
    /// fields 1 to 17, then (for a header) a description.
    macro_rules! primitives_like {
        ($name:literal, [$($more:expr),*], $required:expr, $extensions:literal) => {
            Message {
                name: $name,
                fields: &[
                    Field("type", 1, StringIn(PRIMITIVE_TYPES)),
                    Field("format", 2, String),
                    Field("items", 3, Message(&PRIMITIVES_ITEMS)),
                    Field("collectionFormat", 4, StringIn(COLLECTION_FORMATS)),
                    Field("default", 5, Any),
                    Field("maximum", 6, Double),
                    Field("exclusiveMaximum", 7, Bool),
                    Field("minimum", 8, Double),
                    Field("exclusiveMinimum", 9, Bool),
                    Field("maxLength", 10, Int64),
                    Field("minLength", 11, Int64),
                    Field("pattern", 12, String),
                    Field("maxItems", 13, Int64),
                    Field("minItems", 14, Int64),
                    Field("uniqueItems", 15, Bool),
                    Field("enum", 16, Anys),
                    Field("multipleOf", 17, Double),
                    $($more),*
                ],
                required: $required,
                entries: &[extensions($extensions)],
            }
        };
    }

    static PRIMITIVES_ITEMS: Message = primitives_like!("PrimitivesItems", [], &[], 18);

    static HEADER: Message = primitives_like!("Header", [Field("description", 18, String)], &["type"], 19);

    static HEADERS: Message = named!("Headers", Message(&HEADER));

    static EXAMPLES: Message = named!("Examples", Any);

    static RESPONSES: Message = Message {
        name: "Responses",
        fields: &[],
        required: &[],
        entries: &[Entries { keys: Keys::ResponseCodeV2, number: 1, value: OneOf(&RESPONSE_VALUE) }, extensions(2)],
    };

    static RESPONSE_VALUE: OneOf =
        OneOf { name: "ResponseValue", choices: &[(1, Message(&RESPONSE)), (2, Message(&JSON_REFERENCE))] };

    static RESPONSE: Message = Message {
        name: "Response",
        fields: &[
            Field("description", 1, String),
            Field("schema", 2, OneOf(&SCHEMA_ITEM)),
            Field("headers", 3, Message(&HEADERS)),
            Field("examples", 4, Message(&EXAMPLES)),
        ],
        required: &["description"],
        entries: &[extensions(5)],
    };

    static SCHEMA_ITEM: OneOf =
        OneOf { name: "SchemaItem", choices: &[(1, Message(&SCHEMA)), (2, Message(&FILE_SCHEMA))] };

    static FILE_SCHEMA: Message = Message {
        name: "FileSchema",
        fields: &[
            Field("format", 1, String),
            Field("title", 2, String),
            Field("description", 3, String),
            Field("default", 4, Any),
            Field("required", 5, Strings),
            Field("type", 6, StringIn(&["file"])),
            Field("readOnly", 7, Bool),
            Field("externalDocs", 8, Message(&EXTERNAL_DOCS)),
            Field("example", 9, Any),
        ],
        required: &["type"],
        entries: &[extensions(10)],
    };

    static DEFINITIONS: Message = named!("Definitions", Message(&SCHEMA));

    static PARAMETER_DEFINITIONS: Message = named!("ParameterDefinitions", OneOf(&PARAMETER));

    static RESPONSE_DEFINITIONS: Message = named!("ResponseDefinitions", Message(&RESPONSE));

    static SCHEMA: Message = Message {
        name: "Schema",
        fields: &[
            Field("$ref", 1, String),
            Field("format", 2, String),
            Field("title", 3, String),
            Field("description", 4, String),
            Field("default", 5, Any),
            Field("multipleOf", 6, Double),
            Field("maximum", 7, Double),
            Field("exclusiveMaximum", 8, Bool),
            Field("minimum", 9, Double),
            Field("exclusiveMinimum", 10, Bool),
            Field("maxLength", 11, Int64),
            Field("minLength", 12, Int64),
            Field("pattern", 13, String),
            Field("maxItems", 14, Int64),
            Field("minItems", 15, Int64),
            Field("uniqueItems", 16, Bool),
            Field("maxProperties", 17, Int64),
            Field("minProperties", 18, Int64),
            Field("required", 19, Strings),
            Field("enum", 20, Anys),
            Field("additionalProperties", 21, OneOf(&ADDITIONAL_PROPERTIES)),
            Field("type", 22, TypeItem),
            Field("items", 23, Wrapped(1, &ITEM)),
            Field("allOf", 24, Messages(&SCHEMA)),
            Field("properties", 25, Message(&PROPERTIES)),
            Field("discriminator", 26, String),
            Field("readOnly", 27, Bool),
            Field("xml", 28, Message(&XML)),
            Field("externalDocs", 29, Message(&EXTERNAL_DOCS)),
            Field("example", 30, Any),
        ],
        required: &[],
        entries: &[extensions(31)],
    };

    /// The one schema of `items`, field 1 of `ItemsItem { repeated Schema schema = 1; }`.
    static ITEM: Kind = Message(&SCHEMA);

    static ADDITIONAL_PROPERTIES: OneOf =
        OneOf { name: "AdditionalPropertiesItem", choices: &[(1, Message(&SCHEMA)), (2, Bool)] };

    static PROPERTIES: Message = named!("Properties", Message(&SCHEMA));
}

/// `openapi.v3` (OpenAPIv3.proto).
mod v3 {
    use super::both::{CONTACT, EXTERNAL_DOCS, LICENSE, SECURITY_REQUIREMENT, TAG, XML};
    use super::Kind::*;
    use super::{extensions, Entries, Field, Keys, Kind, Message, OneOf};

    pub static DOCUMENT: Message = Message {
        name: "Document",
        fields: &[
            Field("openapi", 1, String),
            Field("info", 2, Message(&INFO)),
            Field("servers", 3, Messages(&SERVER)),
            Field("paths", 4, Message(&PATHS)),
            Field("components", 5, Message(&COMPONENTS)),
            Field("security", 6, Messages(&SECURITY_REQUIREMENT)),
            Field("tags", 7, Messages(&TAG)),
            Field("externalDocs", 8, Message(&EXTERNAL_DOCS)),
        ],
        required: &["info", "openapi", "paths"],
        entries: &[extensions(9)],
    };

    static INFO: Message = Message {
        name: "Info",
        fields: &[
            Field("title", 1, String),
            Field("description", 2, String),
            Field("termsOfService", 3, String),
            Field("contact", 4, Message(&CONTACT)),
            Field("license", 5, Message(&LICENSE)),
            Field("version", 6, String),
            Field("summary", 8, String),
        ],
        required: &["title", "version"],
        entries: &[extensions(7)],
    };

    static SERVER: Message = Message {
        name: "Server",
        fields: &[
            Field("url", 1, String),
            Field("description", 2, String),
            Field("variables", 3, Message(&SERVER_VARIABLES)),
        ],
        required: &["url"],
        entries: &[extensions(4)],
    };

    static SERVER_VARIABLES: Message = named!("ServerVariables", Message(&SERVER_VARIABLE));

    static SERVER_VARIABLE: Message = Message {
        name: "ServerVariable",
        fields: &[Field("enum", 1, Strings), Field("default", 2, String), Field("description", 3, String)],
        required: &["default"],
        entries: &[extensions(4)],
    };

    static PATHS: Message = Message {
        name: "Paths",
        fields: &[],
        required: &[],
        entries: &[Entries { keys: Keys::Prefix("/"), number: 1, value: Message(&PATH_ITEM) }, extensions(2)],
    };

    static PATH_ITEM: Message = Message {
        name: "PathItem",
        fields: &[
            Field("$ref", 1, String),
            Field("summary", 2, String),
            Field("description", 3, String),
            Field("get", 4, Message(&OPERATION)),
            Field("put", 5, Message(&OPERATION)),
            Field("post", 6, Message(&OPERATION)),
            Field("delete", 7, Message(&OPERATION)),
            Field("options", 8, Message(&OPERATION)),
            Field("head", 9, Message(&OPERATION)),
            Field("patch", 10, Message(&OPERATION)),
            Field("trace", 11, Message(&OPERATION)),
            Field("servers", 12, Messages(&SERVER)),
            Field("parameters", 13, OneOfs(&PARAMETER_OR_REFERENCE)),
        ],
        required: &[],
        entries: &[extensions(14)],
    };

    static OPERATION: Message = Message {
        name: "Operation",
        fields: &[
            Field("tags", 1, Strings),
            Field("summary", 2, String),
            Field("description", 3, String),
            Field("externalDocs", 4, Message(&EXTERNAL_DOCS)),
            Field("operationId", 5, String),
            Field("parameters", 6, OneOfs(&PARAMETER_OR_REFERENCE)),
            Field("requestBody", 7, OneOf(&REQUEST_BODY_OR_REFERENCE)),
            Field("responses", 8, Message(&RESPONSES)),
            Field("deprecated", 10, Bool),
            Field("security", 11, Messages(&SECURITY_REQUIREMENT)),
            Field("servers", 12, Messages(&SERVER)),
        ],
        required: &["responses"],
        entries: &[extensions(13)],
    };

    static REFERENCE: Message = Message {
        name: "Reference",
        fields: &[Field("$ref", 1, String), Field("summary", 2, String), Field("description", 3, String)],
        required: &["$ref"],
        entries: &[],
    };

    static PARAMETER_OR_REFERENCE: OneOf =
        OneOf { name: "ParameterOrReference", choices: &[(1, Message(&PARAMETER)), (2, Message(&REFERENCE))] };

    static PARAMETER: Message = Message {
        name: "Parameter",
        fields: &[
            Field("name", 1, String),
            Field("in", 2, String),
            Field("description", 3, String),
            Field("required", 4, Bool),
            Field("deprecated", 5, Bool),
            Field("allowEmptyValue", 6, Bool),
            Field("style", 7, String),
            Field("explode", 8, Bool),
            Field("allowReserved", 9, Bool),
            Field("schema", 10, OneOf(&SCHEMA_OR_REFERENCE)),
            Field("example", 11, Any),
            Field("examples", 12, Message(&EXAMPLES_OR_REFERENCES)),
            Field("content", 13, Message(&MEDIA_TYPES)),
        ],
        required: &["in", "name"],
        entries: &[extensions(14)],
    };

    static REQUEST_BODY_OR_REFERENCE: OneOf =
        OneOf { name: "RequestBodyOrReference", choices: &[(1, Message(&REQUEST_BODY)), (2, Message(&REFERENCE))] };

    static REQUEST_BODY: Message = Message {
        name: "RequestBody",
        fields: &[
            Field("description", 1, String),
            Field("content", 2, Message(&MEDIA_TYPES)),
            Field("required", 3, Bool),
        ],
        required: &["content"],
        entries: &[extensions(4)],
    };

    static MEDIA_TYPES: Message = named!("MediaTypes", Message(&MEDIA_TYPE));

    static MEDIA_TYPE: Message = Message {
        name: "MediaType",
        fields: &[
            Field("schema", 1, OneOf(&SCHEMA_OR_REFERENCE)),
            Field("example", 2, Any),
            Field("examples", 3, Message(&EXAMPLES_OR_REFERENCES)),
        ],
        required: &[],
        entries: &[extensions(5)],
    };

    static EXAMPLES_OR_REFERENCES: Message = named!("ExamplesOrReferences", OneOf(&EXAMPLE_OR_REFERENCE));

    static EXAMPLE_OR_REFERENCE: OneOf =
        OneOf { name: "ExampleOrReference", choices: &[(1, Message(&EXAMPLE)), (2, Message(&REFERENCE))] };

    static EXAMPLE: Message = Message {
        name: "Example",
        fields: &[
            Field("summary", 1, String),
            Field("description", 2, String),
            Field("value", 3, Any),
            Field("externalValue", 4, String),
        ],
        required: &[],
        entries: &[extensions(5)],
    };

    static RESPONSES: Message = Message {
        name: "Responses",
        fields: &[Field("default", 1, OneOf(&RESPONSE_OR_REFERENCE))],
        required: &[],
        entries: &[
            Entries { keys: Keys::ResponseCodeV3, number: 2, value: OneOf(&RESPONSE_OR_REFERENCE) },
            extensions(3),
        ],
    };

    static RESPONSE_OR_REFERENCE: OneOf =
        OneOf { name: "ResponseOrReference", choices: &[(1, Message(&RESPONSE)), (2, Message(&REFERENCE))] };

    static RESPONSE: Message = Message {
        name: "Response",
        fields: &[Field("description", 1, String), Field("content", 3, Message(&MEDIA_TYPES))],
        required: &["description"],
        entries: &[extensions(5)],
    };

    static COMPONENTS: Message = Message {
        name: "Components",
        fields: &[
            Field("schemas", 1, Message(&SCHEMAS_OR_REFERENCES)),
            Field("responses", 2, Message(&RESPONSES_OR_REFERENCES)),
            Field("parameters", 3, Message(&PARAMETERS_OR_REFERENCES)),
            Field("examples", 4, Message(&EXAMPLES_OR_REFERENCES)),
            Field("requestBodies", 5, Message(&REQUEST_BODIES_OR_REFERENCES)),
        ],
        required: &[],
        entries: &[extensions(10)],
    };

    static SCHEMAS_OR_REFERENCES: Message = named!("SchemasOrReferences", OneOf(&SCHEMA_OR_REFERENCE));
    static RESPONSES_OR_REFERENCES: Message = named!("ResponsesOrReferences", OneOf(&RESPONSE_OR_REFERENCE));
    static PARAMETERS_OR_REFERENCES: Message = named!("ParametersOrReferences", OneOf(&PARAMETER_OR_REFERENCE));
    static REQUEST_BODIES_OR_REFERENCES: Message =
        named!("RequestBodiesOrReferences", OneOf(&REQUEST_BODY_OR_REFERENCE));

    static SCHEMA_OR_REFERENCE: OneOf =
        OneOf { name: "SchemaOrReference", choices: &[(1, Message(&SCHEMA)), (2, Message(&REFERENCE))] };

    static SCHEMA: Message = Message {
        name: "Schema",
        fields: &[
            Field("nullable", 1, Bool),
            Field("discriminator", 2, Message(&DISCRIMINATOR)),
            Field("readOnly", 3, Bool),
            Field("writeOnly", 4, Bool),
            Field("xml", 5, Message(&XML)),
            Field("externalDocs", 6, Message(&EXTERNAL_DOCS)),
            Field("example", 7, Any),
            Field("deprecated", 8, Bool),
            Field("title", 9, String),
            Field("multipleOf", 10, Double),
            Field("maximum", 11, Double),
            Field("exclusiveMaximum", 12, Bool),
            Field("minimum", 13, Double),
            Field("exclusiveMinimum", 14, Bool),
            Field("maxLength", 15, Int64),
            Field("minLength", 16, Int64),
            Field("pattern", 17, String),
            Field("maxItems", 18, Int64),
            Field("minItems", 19, Int64),
            Field("uniqueItems", 20, Bool),
            Field("maxProperties", 21, Int64),
            Field("minProperties", 22, Int64),
            Field("required", 23, Strings),
            Field("enum", 24, Anys),
            Field("type", 25, String),
            Field("allOf", 26, OneOfs(&SCHEMA_OR_REFERENCE)),
            Field("oneOf", 27, OneOfs(&SCHEMA_OR_REFERENCE)),
            Field("anyOf", 28, OneOfs(&SCHEMA_OR_REFERENCE)),
            Field("not", 29, Message(&SCHEMA)),
            Field("items", 30, Wrapped(1, &ITEM)),
            Field("properties", 31, Message(&PROPERTIES)),
            Field("additionalProperties", 32, OneOf(&ADDITIONAL_PROPERTIES)),
            Field("default", 33, DefaultType),
            Field("description", 34, String),
            Field("format", 35, String),
        ],
        required: &[],
        entries: &[extensions(36)],
    };

    /// The one schema of `items`, field 1 of
    /// `ItemsItem { repeated SchemaOrReference schema_or_reference = 1; }`.
    static ITEM: Kind = OneOf(&SCHEMA_OR_REFERENCE);

    static PROPERTIES: Message = named!("Properties", OneOf(&SCHEMA_OR_REFERENCE));

    static ADDITIONAL_PROPERTIES: OneOf =
        OneOf { name: "AdditionalPropertiesItem", choices: &[(1, OneOf(&SCHEMA_OR_REFERENCE)), (2, Bool)] };

    static DISCRIMINATOR: Message = Message {
        name: "Discriminator",
        fields: &[Field("propertyName", 1, String), Field("mapping", 2, Message(&STRINGS))],
        required: &["propertyName"],
        entries: &[extensions(3)],
    };

    static STRINGS: Message = named!("Strings", String);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A field read back from the wire: a varint, a double, or bytes (a
    /// string or a nested message, told apart by the reader).
    #[derive(Debug, Clone, PartialEq)]
    enum Read {
        Varint(u64),
        Double(f64),
        Bytes(Vec<u8>),
    }

    /// A hand-written protobuf reader: the fields of one message, in order.
    fn fields(mut bytes: &[u8]) -> Vec<(u32, Read)> {
        fn varint(bytes: &mut &[u8]) -> u64 {
            let mut value = 0u64;
            for shift in (0..64).step_by(7) {
                let (byte, rest) = bytes.split_first().expect("a varint's byte");
                *bytes = rest;
                value |= u64::from(byte & 0x7f) << shift;
                if byte & 0x80 == 0 {
                    break;
                }
            }
            value
        }
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let tag = varint(&mut bytes);
            let number = u32::try_from(tag >> 3).expect("a field number");
            let read = match tag & 7 {
                0 => Read::Varint(varint(&mut bytes)),
                1 => {
                    let (le, rest) = bytes.split_at(8);
                    bytes = rest;
                    Read::Double(f64::from_le_bytes(le.try_into().expect("8 bytes")))
                }
                2 => {
                    let len = usize::try_from(varint(&mut bytes)).expect("a length");
                    let (body, rest) = bytes.split_at(len);
                    bytes = rest;
                    Read::Bytes(body.to_vec())
                }
                other => panic!("wire type {other} is not written by the encoder"),
            };
            out.push((number, read));
        }
        out
    }

    /// The values of field `number`.
    fn all(message: &[u8], number: u32) -> Vec<Read> {
        fields(message).into_iter().filter(|(n, _)| *n == number).map(|(_, r)| r).collect()
    }

    /// The one nested message or string of field `number`.
    fn one(message: &[u8], number: u32) -> Vec<u8> {
        match all(message, number).as_slice() {
            [Read::Bytes(b)] => b.clone(),
            other => panic!("field {number}: {other:?} in {:?}", fields(message)),
        }
    }

    fn text(message: &[u8], number: u32) -> String {
        String::from_utf8(one(message, number)).expect("UTF-8")
    }

    /// The value of the `Named*` entry called `name` in repeated field `number`.
    fn entry(message: &[u8], number: u32, name: &str) -> Vec<u8> {
        let entries = all(message, number);
        let found = entries.iter().find_map(|e| match e {
            Read::Bytes(named) if text(named, 1) == name => Some(one(named, 2)),
            _ => None,
        });
        found.unwrap_or_else(|| panic!("no entry {name} in field {number} of {:?}", fields(message)))
    }

    #[test]
    fn a_swagger_document_reads_back_as_gnostic_messages() {
        let doc = json!({
            "swagger": "2.0",
            "info": { "title": "demo", "version": "0.1.0" },
            "paths": {
                "/apis/g/v1/things": {
                    "get": {
                        "operationId": "listThings",
                        "parameters": [
                            { "name": "limit", "in": "query", "type": "integer", "uniqueItems": true },
                            { "name": "body", "in": "body", "required": true, "schema": { "$ref": "#/definitions/Thing" } },
                            { "$ref": "#/parameters/pretty" }
                        ],
                        "responses": { "200": { "description": "OK", "schema": { "$ref": "#/definitions/Thing" } } },
                        "x-kubernetes-action": "list"
                    }
                }
            },
            "definitions": {
                "Thing": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "size": { "type": "integer", "format": "int64", "minimum": 0, "maxLength": 3 },
                        "tags": { "type": "array", "items": { "type": "string", "enum": ["a", "b"] } },
                        "labels": { "type": "object", "additionalProperties": false, "default": { "x": 1 } }
                    },
                    "x-kubernetes-group-version-kind": [{ "group": "g", "kind": "Thing", "version": "v1" }]
                }
            }
        });
        let bytes = encode(&doc, Spec::V2).expect("encodes");
        assert_eq!(text(&bytes, 1), "2.0");
        let info = one(&bytes, 2);
        assert_eq!((text(&info, 1), text(&info, 2)), ("demo".into(), "0.1.0".into()));

        let path = entry(&one(&bytes, 8), 2, "/apis/g/v1/things");
        let get = one(&path, 2);
        assert_eq!(text(&get, 5), "listThings");
        let action = entry(&get, 13, "x-kubernetes-action");
        assert_eq!(text(&action, 2), "list\n", "an extension is an Any holding YAML");
        let params = all(&get, 8);
        assert_eq!(params.len(), 3);
        let param = |i: usize| match &params[i] {
            Read::Bytes(b) => b.clone(),
            other => panic!("{other:?}"),
        };
        // ParametersItem.parameter -> Parameter.non_body_parameter -> query sub-schema.
        let query = one(&one(&one(&param(0), 1), 2), 3);
        assert_eq!(
            (text(&query, 2), text(&query, 4), text(&query, 6)),
            ("query".into(), "limit".into(), "integer".into())
        );
        assert_eq!(all(&query, 20), [Read::Varint(1)]);
        assert!(all(&query, 1).is_empty(), "false is proto3's default, left out");
        // ParametersItem.parameter -> Parameter.body_parameter, its schema a $ref.
        let body = one(&one(&param(1), 1), 1);
        assert_eq!(text(&body, 3), "body");
        assert_eq!(text(&one(&body, 5), 1), "#/definitions/Thing");
        // ParametersItem.json_reference.
        assert_eq!(text(&one(&param(2), 2), 1), "#/parameters/pretty");
        // Responses.response_code["200"] -> ResponseValue.response -> SchemaItem.schema.
        let ok = one(&entry(&one(&get, 9), 1, "200"), 1);
        assert_eq!(text(&ok, 1), "OK");
        assert_eq!(text(&one(&one(&ok, 2), 1), 1), "#/definitions/Thing");

        let thing = entry(&one(&bytes, 9), 1, "Thing");
        assert_eq!(text(&one(&thing, 22), 1), "object", "type is a TypeItem");
        assert_eq!(text(&thing, 19), "spec");
        let gvk = entry(&thing, 31, "x-kubernetes-group-version-kind");
        assert_eq!(text(&gvk, 2), "- group: g\n  kind: Thing\n  version: v1\n");
        let props = one(&thing, 25);
        let size = entry(&props, 1, "size");
        assert_eq!(text(&size, 2), "int64");
        assert!(all(&size, 9).is_empty(), "minimum 0 is left out");
        assert_eq!(all(&size, 11), [Read::Varint(3)]);
        let tags = entry(&props, 1, "tags");
        let item = one(&one(&tags, 23), 1);
        assert_eq!(text(&one(&item, 22), 1), "string");
        let values: Vec<String> = all(&item, 20)
            .iter()
            .map(|r| match r {
                Read::Bytes(any) => text(any, 2),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(values, ["a\n", "b\n"]);
        let labels = entry(&props, 1, "labels");
        // AdditionalPropertiesItem.boolean: a oneof member, written even when false.
        assert_eq!(fields(&one(&labels, 21)), [(2, Read::Varint(0))]);
        assert_eq!(text(&one(&labels, 5), 2), "x: 1\n");
    }

    #[test]
    fn an_openapi3_document_reads_back_as_gnostic_messages() {
        let doc = json!({
            "openapi": "3.0.0",
            "info": { "title": "demo", "version": "0.1.0" },
            "paths": {
                "/things/{name}": {
                    "parameters": [{ "name": "name", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "patch": {
                        "requestBody": { "content": { "application/merge-patch+json": { "schema": { "$ref": "#/components/schemas/Patch" } } } },
                        "responses": { "200": { "description": "OK" }, "default": { "description": "Error" } }
                    }
                }
            },
            "components": { "schemas": { "Thing": {
                "type": "object",
                "properties": {
                    "metadata": { "allOf": [{ "$ref": "#/components/schemas/Meta" }], "default": {} },
                    "weight": { "type": "number", "maximum": 1.5, "default": 0 },
                    "names": { "type": "array", "items": { "type": "string", "default": "" } },
                    "extra": { "type": "object", "additionalProperties": { "type": "string" }, "nullable": true }
                }
            } } }
        });
        let bytes = encode(&doc, Spec::V3).expect("encodes");
        assert_eq!(text(&bytes, 1), "3.0.0");
        let path = entry(&one(&bytes, 4), 1, "/things/{name}");
        // PathItem.parameters[0] -> ParameterOrReference.parameter.
        let param = one(&one(&path, 13), 1);
        assert_eq!((text(&param, 1), text(&param, 2)), ("name".into(), "path".into()));
        assert_eq!(all(&param, 4), [Read::Varint(1)]);
        assert_eq!(text(&one(&one(&param, 10), 1), 25), "string");
        let patch = one(&path, 10);
        let media = entry(&one(&one(&one(&patch, 7), 1), 2), 1, "application/merge-patch+json");
        // MediaType.schema -> SchemaOrReference.reference.
        assert_eq!(text(&one(&one(&media, 1), 2), 1), "#/components/schemas/Patch");
        let responses = one(&patch, 8);
        assert_eq!(text(&one(&one(&responses, 1), 1), 1), "Error", "default is a field of its own");
        assert_eq!(text(&one(&entry(&responses, 2, "200"), 1), 1), "OK");

        let thing = one(&entry(&one(&one(&bytes, 5), 1), 1, "Thing"), 1);
        let props = one(&thing, 31);
        let schema = |name: &str| one(&entry(&props, 1, name), 1);
        let metadata = schema("metadata");
        assert_eq!(text(&one(&one(&metadata, 26), 2), 1), "#/components/schemas/Meta");
        assert_eq!(one(&metadata, 33), Vec::<u8>::new(), "an object default is an empty DefaultType");
        let weight = schema("weight");
        assert_eq!(all(&weight, 11), [Read::Double(1.5)]);
        assert_eq!(fields(&one(&weight, 33)), [(1, Read::Double(0.0))], "a oneof number, written even when 0");
        let item = one(&one(&one(&schema("names"), 30), 1), 1);
        assert_eq!(fields(&one(&item, 33)), [(3, Read::Bytes(vec![]))]);
        let extra = schema("extra");
        assert_eq!(all(&extra, 1), [Read::Varint(1)]);
        // AdditionalPropertiesItem.schema_or_reference -> SchemaOrReference.schema.
        assert_eq!(text(&one(&one(&one(&extra, 32), 1), 1), 25), "string");
    }

    #[test]
    fn what_gnostic_refuses_is_refused_with_where() {
        let doc = |schema: Value| json!({ "swagger": "2.0", "info": { "title": "t", "version": "1" }, "paths": {}, "definitions": { "T": schema } });
        let err = encode(&doc(json!({ "type": "object", "nullable": true })), Spec::V2).unwrap_err();
        assert!(err.contains("definitions: T: ") && err.contains("\"nullable\""), "{err}");
        let err = encode(&doc(json!({ "maxLength": 1.5 })), Spec::V2).unwrap_err();
        assert!(err.contains("maxLength: expected an integer"), "{err}");
        let err = encode(&json!({ "swagger": "2.0", "paths": {} }), Spec::V2).unwrap_err();
        assert!(err.contains("missing required info"), "{err}");
        let bad_param = json!({ "swagger": "2.0", "info": { "title": "t", "version": "1" }, "paths": { "/x": { "parameters": [{ "name": "n", "in": "cookie", "type": "string" }] } } });
        let err = encode(&bad_param, Spec::V2).unwrap_err();
        assert!(err.contains("not a valid ParametersItem"), "{err}");
    }
}
