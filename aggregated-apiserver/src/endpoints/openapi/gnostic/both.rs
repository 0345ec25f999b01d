//! The messages both versions define alike (same keys, same numbers). Apart so that the
//! Swagger 2.0 and OpenAPI 3 tables share one definition of each.

use super::tables::Kind::*;
use super::tables::{extensions, named, Entries, Field, Keys, Kind, Message};

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
