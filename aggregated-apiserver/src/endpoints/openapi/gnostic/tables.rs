//! The vocabulary the message tables are written in: what a JSON value becomes in a field
//! ([`Kind`]), a message's fields, required keys and `Named*` entries ([`Message`]), and a
//! `oneof`'s alternatives ([`OneOf`]). Apart from the tables, which are data, and from the
//! encoder, which reads them.

/// What a JSON value becomes in a field.
#[derive(Clone, Copy)]
pub(super) enum Kind {
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
pub(super) struct Field(pub(super) &'static str, pub(super) u32, pub(super) Kind);

/// Which keys of an object become entries of a repeated `Named*` field.
#[derive(Clone, Copy)]
pub(super) enum Keys {
    All,
    Prefix(&'static str),
    /// Swagger's `^([0-9]{3})$|^(default)$`.
    ResponseCodeV2,
    /// OpenAPI 3's `^([0-9X]{3})$`.
    ResponseCodeV3,
}

impl Keys {
    pub(super) fn matches(self, key: &str) -> bool {
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
pub(super) struct Entries {
    pub(super) keys: Keys,
    pub(super) number: u32,
    pub(super) value: Kind,
}

/// The `x-` keys as `NamedAny` in field `number`.
pub(super) const fn extensions(number: u32) -> Entries {
    Entries { keys: Keys::Prefix("x-"), number, value: Kind::Any }
}

pub(super) struct Message {
    pub(super) name: &'static str,
    pub(super) fields: &'static [Field],
    pub(super) required: &'static [&'static str],
    pub(super) entries: &'static [Entries],
}

/// A message of one `oneof`: (field number, kind) per alternative.
pub(super) struct OneOf {
    pub(super) name: &'static str,
    pub(super) choices: &'static [(u32, Kind)],
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

pub(super) use named;
