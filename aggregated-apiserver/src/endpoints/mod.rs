//! The HTTP face of the API, as k8s.io/apiserver's `pkg/endpoints`: what a
//! request asks for and gets back ([`negotiation`]; what it is, its
//! [`crate::apimachinery::request_info`], is read before the filters), the resource handlers that turn it into a registry call
//! ([`handlers`], [`watch`], [`list_body`]), and the documents that describe
//! what is served ([`discovery`], [`openapi`], [`static_doc`]), how an error is
//! answered ([`status`]), and the warnings sent with an answer ([`warnings`]).

pub(crate) mod deprecation;
pub mod discovery;
pub mod handlers;
pub mod list_body;
pub mod negotiation;
pub mod openapi;
pub mod static_doc;
pub mod status;
pub mod warnings;
pub mod watch;
