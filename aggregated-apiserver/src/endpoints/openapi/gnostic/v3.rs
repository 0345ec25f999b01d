//! `openapi.v3` (OpenAPIv3.proto): the tables of the OpenAPI 3 document's messages, from
//! `Document` down. Apart from Swagger 2.0's, whose messages share names but not fields.

use super::both::{CONTACT, EXTERNAL_DOCS, LICENSE, SECURITY_REQUIREMENT, TAG, XML};
use super::tables::Kind::*;
use super::tables::{extensions, named, Entries, Field, Keys, Kind, Message, OneOf};

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
    fields: &[Field("description", 1, String), Field("content", 2, Message(&MEDIA_TYPES)), Field("required", 3, Bool)],
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
    entries: &[Entries { keys: Keys::ResponseCodeV3, number: 2, value: OneOf(&RESPONSE_OR_REFERENCE) }, extensions(3)],
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
static REQUEST_BODIES_OR_REFERENCES: Message = named!("RequestBodiesOrReferences", OneOf(&REQUEST_BODY_OR_REFERENCE));

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
