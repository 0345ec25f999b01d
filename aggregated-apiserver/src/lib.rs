//! A library for serving one's own Kubernetes kinds from an aggregated API
//! server: kube-apiserver proxies a group to it through an APIService, and it
//! answers as kube-apiserver answers for a CustomResourceDefinition.
//!
//! A kind describes itself ([`registry::kind::Kind`]); the library serves it
//! with every verb, watch, server-side apply, discovery, OpenAPI, delegated
//! authentication and authorization, kube's filters, health and metrics.
//!
//! The folders follow k8s.io/apiserver's packages, in the order a request
//! meets them; each uses only the ones below it:
//! * [`server`]: options, listener, TLS, connections, health, metrics, and
//!   the [`server::setup::Setup`] an application registers its kinds in;
//! * [`filters`]: every layer of the request path, in kube's order;
//! * [`endpoints`]: requests into registry calls, answers encoded;
//!   discovery, OpenAPI, watch;
//! * [`registry`]: a kind's REST semantics over a store;
//!   [`registry::kind`] is the one interface a kind implements;
//! * [`admission`]: what a write must pass before it is stored;
//! * [`audit`]: the audit policy, events and their backends;
//! * [`auth`]: authenticators, authorizer, and the review clients;
//! * [`storage`]: the `Store` contract, in memory or in etcd;
//! * `transport`: TLS to other servers, trusting what Go's clients trust;
//! * [`apimachinery`]: what a Kubernetes object and a request are, with no
//!   I/O: the words every layer above speaks;
//! * [`heavy`]: large computations, off the async workers and in turns.

pub mod admission;
pub mod apimachinery;
pub mod audit;
pub mod auth;
pub mod endpoints;
pub mod filters;
pub mod heavy;
pub mod registry;
pub mod server;
pub mod storage;
#[cfg(test)]
mod test_pki;
pub(crate) mod transport;
