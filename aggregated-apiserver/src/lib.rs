//! A library for serving one's own Kubernetes kinds from an aggregated API
//! server: kube-apiserver proxies a group to it through an APIService, and it
//! answers as kube-apiserver answers for a CustomResourceDefinition.
//!
//! A kind describes itself ([`registry::kind::Kind`]); the library serves it
//! with every verb, watch, server-side apply, discovery, OpenAPI, delegated
//! authentication and authorization, kube's filters, health and metrics.
//!
//! The folders follow k8s.io/apiserver's packages:
//! * [`apimachinery`]: what a Kubernetes object is, with no HTTP;
//! * [`storage`]: the `Store` contract, in memory or in etcd;
//! * [`registry`]: a kind's REST semantics over a store;
//! * [`admission`]: what is asked before a write is stored;
//! * [`endpoints`]: requests into registry calls, answers encoded;
//! * [`filters`]: every layer of the request path;
//! * [`auth`]: authenticators, authorizer, and the review clients;
//! * [`audit`]: the audit policy, events and their backends;
//! * [`server`]: options, listener, TLS, connections, health, metrics;
//! * [`heavy`]: large computations, off the async workers and in turns;
//! * `transport`: TLS to other servers, trusting what Go's clients trust.

pub mod admission;
pub mod apimachinery;
pub mod audit;
pub mod auth;
pub mod endpoints;
pub mod filters;
pub mod heavy;
pub mod options;
pub mod registry;
pub mod server;
pub mod storage;
#[cfg(test)]
mod test_pki;
pub(crate) mod transport;
