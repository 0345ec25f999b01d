//! The integration tests, in one test binary (`cargo test --test it`): each
//! test binary links the whole server, so one binary instead of one per file
//! saves the links, their disk and their CI time.
//!
//! Modules by the side the server is driven from:
//!
//! - [`direct`]: the server alone over HTTPS, kubectl and kube-rs pointed
//!   straight at it (YAML bodies and option decoding also compared live with
//!   kube-apiserver serving the Llama CRD);
//! - [`aggregated`]: behind the real kube-apiserver aggregator and against the
//!   real control plane (tests/controlplane): kubectl, kube-rs controllers,
//!   server-side apply, FarmPods, delegated authentication and authorization,
//!   the request filters, the manifests;
//! - [`compare`]: request sequences side by side with kube-apiserver serving
//!   the Llama CRD (`common::compare`);
//! - [`storage`]: the storage contract on both stores, and replicas on one etcd;
//! - [`load`]: bad input, floods, connection limits and a short soak;
//! - [`image`]: the container image, run as the Deployment's Pod (podman)
//!   behind the aggregator.
//!
//! `common` (tests/common, also compiled into the benches) holds the fixtures:
//! the server, the control plane, etcd, identities, the CRD comparison and the
//! request fuzzer. It is shared by every test of the process: one control
//! plane, one registered farm-apiserver, one etcd (tests that need their own
//! say so and start one).
//!
//! Run one module with a filter: `cargo test --test it direct::reads`.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod aggregated;
mod compare;
mod direct;
mod image;
mod load;
mod storage;
