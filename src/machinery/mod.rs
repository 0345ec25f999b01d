//! The generic Kubernetes API machinery: routing, query parsing, selectors,
//! paging, watch framing, patching, Status errors, Table, content negotiation,
//! discovery and OpenAPI. It knows no particular kind.

pub mod admission;
pub mod body;
pub mod discovery;
pub mod encode;
pub mod gofmt;
pub mod handlers;
pub mod negotiation;
pub mod openapi;
pub mod options;
pub mod patch;
pub mod registry;
pub mod request_info;
pub mod resource;
pub mod selector;
pub mod static_doc;
pub mod status;
pub mod validation;
pub mod watch;
