//! The HTTP-facing Kubernetes API machinery: routing, request info, query
//! options, paging, watch framing, patching, Status errors, Table, content
//! negotiation, discovery and OpenAPI. It knows no particular kind.
//!
//! The rules of what an object is (JSON decoding, schemas, ObjectMeta,
//! names, selectors, field errors, Go's wording) live in
//! [`crate::apimachinery`], which has no HTTP in it; this module puts them
//! behind requests and answers.

pub mod admission;
pub mod body;
pub mod discovery;
pub mod encode;
pub mod handlers;
pub mod heavy;
pub mod list_body;
pub mod negotiation;
pub mod openapi;
pub mod options;
pub mod patch;
pub mod registry;
pub mod request_info;
pub mod resource;
pub mod static_doc;
pub mod status;
pub mod watch;
