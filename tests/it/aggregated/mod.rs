//! Against the real control plane (tests/controlplane: etcd, kube-apiserver
//! with the aggregator, kube-controller-manager): farm-apiserver registered
//! behind the aggregator, or started with the control plane's identities for
//! delegated authentication and authorization.

mod admission;
mod apply;
mod audit;
mod chart;
mod farmpods;
mod filters;
mod flowcontrol;
mod herds;
mod jaeger;
mod llamas;
mod manifests;
mod migration;
mod namespaces;
mod registration;
mod reviews;
mod rollout;
mod security;
mod tracing;
