//! Admission the registry asks for before a create is stored, in
//! kube-apiserver's place for it: after the body is decoded and its namespace
//! settled, before validation (kube's NamespaceLifecycle is a mutating
//! admission plugin, so a create in a missing namespace is a 404 even when the
//! object is also invalid, and under dry run too).

pub mod namespace_lifecycle;

use async_trait::async_trait;

use crate::apimachinery::errors::{ApiResult, Target};

/// Whether objects may be created in a namespace (kube's NamespaceLifecycle).
#[async_trait]
pub trait NamespaceAdmission: Send + Sync {
    /// Ok, or the Status kube answers: `namespaces "x" not found` (404), or
    /// 403 for a namespace being terminated. `target` names the object being
    /// created (its generateName when it has no name yet).
    async fn admit_create(&self, namespace: &str, target: Target<'_>) -> ApiResult<()>;
}
