//! A library for serving one's own Kubernetes kinds from an aggregated API
//! server: kube-apiserver proxies a group to it through an APIService, and it
//! answers as kube-apiserver answers for a CustomResourceDefinition.
//!
//! A kind describes itself ([`Kind`]); the library serves it
//! with every verb, watch, server-side apply, discovery, OpenAPI, delegated
//! authentication and authorization, kube's filters, health and metrics.
//!
//! The folders follow k8s.io/apiserver's packages, in the order a request
//! meets them; each uses only the ones below it:
//! * `server`: options, listener, TLS, connections, health, metrics, and
//!   the `server::setup::Setup` an application registers its kinds in;
//! * `filters`: every layer of the request path, in kube's order;
//! * `endpoints`: requests into registry calls, answers encoded;
//!   discovery, OpenAPI, watch;
//! * `registry`: a kind's REST semantics over a store;
//!   `registry::kind` is the one interface a kind implements;
//! * `admission`: what a write must pass before it is stored;
//! * `audit`: the audit policy, events and their backends;
//! * `auth`: authenticators, authorizer, and the review clients;
//! * [`storage`]: the `Store` contract, in memory or in etcd;
//! * `transport`: TLS to other servers, trusting what Go's clients trust;
//! * `apimachinery`: what a Kubernetes object and a request are, with no
//!   I/O: the words every layer above speaks;
//! * `heavy`: large computations, off the async workers and in turns.
//!
//! # The front door
//!
//! What an application names is re-exported here: describe a kind ([`Kind`],
//! [`Names`], [`Verb`], [`Column`], [`FieldError`]), serve it ([`run`] with
//! [`ServerOptions`] and an [`Identity`], registering kinds in a [`Setup`]),
//! and the checks and gauges a view adds ([`Check`], [`DetailedCheck`],
//! [`Gauge`]). [`prelude`] holds the first two groups. Stores (for a view the
//! application fills itself, or a store of its own) are in [`storage`].

#![warn(missing_docs)]

// MutatingAdmissionPolicy's v1beta1 types come with Kubernetes 1.34.
k8s_openapi::k8s_if_le_1_33! {
    compile_error!("aggregated-apiserver needs k8s-openapi's v1_34 feature or a later one, enabled by the application");
}

pub(crate) mod admission;
pub(crate) mod apimachinery;
pub(crate) mod audit;
pub(crate) mod auth;
pub(crate) mod config_watch;
pub(crate) mod endpoints;
mod error;
pub(crate) mod filters;
pub(crate) mod flowcontrol;
pub(crate) mod heavy;
pub(crate) mod registry;
pub(crate) mod server;
pub mod storage;
#[cfg(test)]
mod test_pki;
pub(crate) mod trace;
pub(crate) mod transport;

pub use apimachinery::field_error::{FieldError, FieldErrorKind};
pub use apimachinery::resource::{Names, Verb};
pub use apimachinery::schema::validations::SchemaRules;
pub use error::{Error, Result};
pub use registry::conversion::Convert;
pub use registry::custom_resource::CustomResourceKind;
pub use registry::encode::KindIndexer;
pub use registry::kind::{Cell, Column, Kind, OtherVersions, ScalePaths};
pub use registry::subresource::{StreamResult, Streamed, Subresource, SubresourceRequest};
pub use registry::Registry;
pub use server::dev_certs::{write_cert_bundle, ServingCertPaths};
pub use server::health::{Check, DetailedCheck, FnCheck};
pub use server::options::{with_env_prefix, LoggingOptions, ServerOptions};
pub use server::setup::{Gauge, Setup};
pub use server::{run, Identity};

/// What a server built on this library names first: describing a kind and
/// serving it. A whole server for a kind of one's own:
///
/// ```
/// use std::sync::Arc;
///
/// use aggregated_apiserver::prelude::*;
/// use serde_json::{json, Value};
///
/// struct Greeting;
///
/// static NAMES: Names = Names {
///     group: "example.com",
///     version: "v1",
///     kind: "Greeting",
///     list_kind: "GreetingList",
///     plural: "greetings",
///     singular: "greeting",
///     short_names: &["gr"],
///     categories: &[],
/// };
///
/// impl Kind for Greeting {
///     fn names(&self) -> &'static Names {
///         &NAMES
///     }
///
///     /// A structural schema, as a CRD's `openAPIV3Schema`.
///     fn schema(&self) -> Value {
///         json!({
///             "type": "object",
///             "properties": {
///                 "spec": {"type": "object", "properties": {"message": {"type": "string"}}}
///             }
///         })
///     }
/// }
///
/// /// Serves Greetings in memory, or in etcd with `--storage etcd`.
/// async fn serve(options: ServerOptions) -> aggregated_apiserver::Result<()> {
///     let identity = Identity { name: "greetings", version: "0.1.0", git_commit: "" };
///     run(options, identity, async |setup| {
///         setup.stored(Arc::new(Greeting))?;
///         Ok(())
///     })
///     .await
/// }
///
/// assert_eq!(Greeting.names().api_version(), "example.com/v1");
/// assert!(Greeting.verbs().contains(&Verb::Watch));
/// ```
pub mod prelude {
    pub use crate::{
        run, Cell, Column, CustomResourceKind, FieldError, Identity, Kind, Names, ServerOptions, Setup, Verb,
    };
}
