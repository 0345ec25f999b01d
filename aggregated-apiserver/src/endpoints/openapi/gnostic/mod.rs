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

mod both;
mod encoder;
mod tables;
mod v2;
mod v3;

use serde_json::Value;

use self::encoder::encode_message;
use super::wire::Writer;

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
