//! What a Kubernetes object is, with no HTTP in it: the rules
//! k8s.io/apimachinery and structured-merge-diff hold.

pub mod fieldpath;
pub mod managed_fields;
pub mod typed;
