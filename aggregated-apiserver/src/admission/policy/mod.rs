//! Admission policies: the cluster's ValidatingAdmissionPolicies
//! ([`validating`]) and MutatingAdmissionPolicies ([`mutating`]) with their
//! bindings, evaluated as k8s.io/apiserver's policy plugins evaluate them,
//! and what both share: which writes a policy or binding names
//! ([`match_resources`]) and the parameter objects bindings select
//! ([`params`]).

pub mod match_resources;
pub mod mutating;
pub mod params;
pub mod validating;
