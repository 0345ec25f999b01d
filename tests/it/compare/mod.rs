//! Side by side with kube-apiserver: the same request sequences against our
//! Llamas through the aggregator and against the Llama CRD served by
//! kube-apiserver, compared after the normalization of `common::compare`; and
//! the OpenAPI documents' content negotiation (`openapi`).

pub mod admission;
mod apply;
mod audit;
mod authorizer;
mod cel;
mod crd;
pub mod mutating_policies;
mod openapi;
mod scale;
mod versions;
mod webhook_tls;
