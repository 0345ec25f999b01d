//! Admission: what is asked before a write is stored, in kube-apiserver's
//! place. kube-apiserver admits the objects it stores, never the requests it
//! proxies to an aggregated server, so the cluster's admission webhooks (and
//! policies) see a kind served here only if this server calls them.
//!
//! k8s.io/apiserver's order is kept: NamespaceLifecycle ([`namespace_lifecycle`],
//! asked by the registry on a create before anything else), then the mutating
//! plugins, then the kind's own strategy and validation, then the validating
//! plugins, then the store. [`Admission`] runs the mutating and validating
//! plugins of that order; the registry calls it at those two points.

pub mod attributes;
pub mod authorizer;
pub mod expressions;
pub mod match_conditions;
pub mod matching;
pub mod metrics;
pub mod namespace_lifecycle;
pub mod options;
pub mod policy;
pub mod reinvocation;
pub mod webhook;

use std::sync::Arc;

use async_trait::async_trait;

pub use attributes::{Attributes, Operation, Requester};

use crate::apimachinery::errors::{self, ApiError, ApiResult, Reason, Target};
use matching::Request;

/// Whether objects may be created in a namespace (kube's NamespaceLifecycle).
#[async_trait]
pub trait NamespaceAdmission: Send + Sync {
    /// Ok, or the Status kube answers: `namespaces "x" not found` (404), or
    /// 403 for a namespace being terminated. `target` names the object being
    /// created (its generateName when it has no name yet).
    async fn admit_create(&self, namespace: &str, target: Target<'_>) -> ApiResult<()>;
}

/// One admission plugin after NamespaceLifecycle: admission webhooks, and
/// admission policies.
#[async_trait]
pub trait AdmissionPlugin: Send + Sync {
    /// Whether the plugin may act on `request` at all, from what is
    /// configured now. Cheap: the registry keeps its one-pass write when no
    /// plugin may act.
    fn may_act(&self, request: Request<'_>) -> bool;

    /// The mutating step: may change `attributes.object`.
    async fn mutate(&self, _attributes: &mut Attributes<'_>) -> ApiResult<()> {
        Ok(())
    }

    /// The validating step, on the object as it would be stored.
    async fn validate(&self, _attributes: &mut Attributes<'_>) -> ApiResult<()> {
        Ok(())
    }
}

/// The mutating and validating plugins of a server, in kube's order.
#[derive(Clone, Default)]
pub struct Admission {
    plugins: Vec<Arc<dyn AdmissionPlugin>>,
}

impl Admission {
    pub fn new(plugins: Vec<Arc<dyn AdmissionPlugin>>) -> Self {
        Self { plugins }
    }

    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    /// Whether any plugin may act on this request (see [`AdmissionPlugin::may_act`]).
    pub fn may_act(&self, request: Request<'_>) -> bool {
        self.plugins.iter().any(|p| p.may_act(request))
    }

    /// The mutating step; a refusal carries the warnings given so far. A
    /// second pass follows when a plugin asks for one ([`reinvocation`]).
    pub async fn mutate(&self, attributes: &mut Attributes<'_>) -> ApiResult<()> {
        self.mutate_pass(attributes).await?;
        if attributes.reinvocation.should_reinvoke {
            attributes.reinvocation.is_reinvoke = true;
            self.mutate_pass(attributes).await?;
        }
        Ok(())
    }

    async fn mutate_pass(&self, attributes: &mut Attributes<'_>) -> ApiResult<()> {
        for plugin in &self.plugins {
            let result = plugin.mutate(attributes).await;
            attributes.flush_audit_annotations();
            if let Err(e) = result {
                return Err(e.with_warnings(std::mem::take(&mut attributes.warnings)));
            }
        }
        Ok(())
    }

    /// The validating step; a refusal carries the warnings given so far.
    pub async fn validate(&self, attributes: &mut Attributes<'_>) -> ApiResult<()> {
        for plugin in &self.plugins {
            let result = plugin.validate(attributes).await;
            attributes.flush_audit_annotations();
            if let Err(e) = result {
                return Err(e.with_warnings(std::mem::take(&mut attributes.warnings)));
            }
        }
        Ok(())
    }
}

/// kube's `admission.NewForbidden` for the object written:
/// `<resource>.<group> "<name>" is forbidden: <why>` (no name while a
/// create has only a generateName).
pub fn forbidden(attributes: &Attributes<'_>, why: &str) -> ApiError {
    let names = attributes.names;
    let message = if attributes.name.is_empty() {
        format!("{} is forbidden: {why}", attributes.group_resource())
    } else {
        format!("{} {:?} is forbidden: {why}", attributes.group_resource(), attributes.name)
    };
    ApiError::new(403, Reason::Forbidden, message).with_details(errors::details(
        names.group,
        names.plural,
        attributes.name,
    ))
}
