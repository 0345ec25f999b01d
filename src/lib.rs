//! farm-apiserver: a Kubernetes aggregated API server for farm.example.com.
//!
//! The library exposes the kinds' Rust types (for kube-rs clients and tests)
//! and the server itself; `main.rs` is only the command line.
//!
//! [`apimachinery`] holds what a Kubernetes object is (decoding, schemas,
//! ObjectMeta, names, selectors), with no HTTP; [`machinery`] serves any kind
//! over HTTP with kube-apiserver's semantics; [`resources`] are the kinds.

pub mod apimachinery;
pub mod auth;
pub mod config;
pub mod connection;
pub mod filters;
pub mod machinery;
pub mod ops;
pub mod resources;
pub mod server;
pub mod storage;
#[cfg(test)]
mod test_pki;
pub mod tls;
