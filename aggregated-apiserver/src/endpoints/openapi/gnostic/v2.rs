//! `openapi.v2` (OpenAPIv2.proto): the tables of the Swagger 2.0 document's messages, from
//! `Document` down. Apart from OpenAPI 3's, whose messages share names but not fields.

use super::both::{CONTACT, EXTERNAL_DOCS, LICENSE, SECURITY_REQUIREMENT, TAG, XML};
use super::tables::Kind::*;
use super::tables::{extensions, named, Entries, Field, Keys, Kind, Message, OneOf};

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

static SCHEMA_ITEM: OneOf = OneOf { name: "SchemaItem", choices: &[(1, Message(&SCHEMA)), (2, Message(&FILE_SCHEMA))] };

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
