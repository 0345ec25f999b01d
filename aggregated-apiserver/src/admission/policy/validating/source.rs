//! The cluster's ValidatingAdmissionPolicies and their bindings, from one
//! shared watch each, compiled on every change into an immutable list that
//! requests read without a lock; the parameter sources of the kinds they
//! name are started as they appear ([`ParamSources`]). No write calls the
//! API for any of them.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, ParamKind, ParamRef, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::runtime::reflector::Store;
use kube::Client;

use crate::admission::expressions::{self, compile};
use crate::admission::match_conditions::MatchConditions;
use crate::admission::policy::match_resources::Match;
use crate::admission::policy::params::ParamSources;
use crate::apimachinery::cel::{Env, Expression};
use crate::config_watch::{by_name, follow_both, Synced};

/// One validation of a policy.
#[derive(Debug)]
pub struct Validation {
    pub source: String,
    pub expression: Result<Expression, String>,
    pub message: Option<String>,
    pub message_expression: Option<Result<Expression, String>>,
    pub reason: Option<String>,
}

/// A binding of a policy.
#[derive(Debug)]
pub struct Binding {
    pub name: String,
    pub param_ref: Option<ParamRef>,
    pub match_resources: Option<Match>,
    pub actions: Vec<String>,
}

/// A policy with its bindings, compiled.
#[derive(Debug)]
pub struct Policy {
    pub name: String,
    pub match_constraints: Match,
    pub fail_open: bool,
    pub param_kind: Option<ParamKind>,
    pub conditions: MatchConditions,
    pub variables: crate::apimachinery::cel::lazy::Named,
    pub validations: Vec<Validation>,
    pub audit_annotations: Vec<(String, Result<Expression, String>)>,
    pub bindings: Vec<Binding>,
    /// Whether any expression reads `request` / `namespaceObject`: what is
    /// built for an evaluation only when it is read.
    pub uses_request: bool,
    pub uses_namespace: bool,
}

impl Policy {
    /// Whether any of the policy's expressions reads the variable `name`.
    fn uses(&self, name: &str) -> bool {
        let reads = |e: &Result<Expression, String>| e.as_ref().is_ok_and(|e| e.uses(name));
        self.conditions.uses(name)
            || self.variables.iter().any(|(_, e)| reads(e))
            || self.validations.iter().any(|v| reads(&v.expression) || v.message_expression.as_ref().is_some_and(reads))
            || self.audit_annotations.iter().any(|(_, e)| reads(e))
    }

    pub(super) fn compile(
        policy: &ValidatingAdmissionPolicy,
        bindings: Vec<Binding>,
        env: &Env,
        message_env: &Env,
    ) -> Self {
        let spec = policy.spec.clone().unwrap_or_default();
        let variables =
            expressions::compile_variables(env, spec.variables.iter().flatten().map(|v| (&*v.name, &*v.expression)));
        let env = &expressions::declaring(env, &variables);
        let message_env = &expressions::declaring(message_env, &variables);
        let mut compiled = Self {
            name: policy.metadata.name.clone().unwrap_or_default(),
            match_constraints: Match::of(&spec.match_constraints.unwrap_or_default()),
            fail_open: spec.failure_policy.as_deref() == Some("Ignore"),
            param_kind: spec.param_kind,
            conditions: MatchConditions::compile(env, spec.match_conditions.as_deref().unwrap_or_default()),
            variables,
            validations: spec
                .validations
                .iter()
                .flatten()
                .map(|v| Validation {
                    source: v.expression.clone(),
                    expression: compile(env, &v.expression),
                    message: v.message.clone(),
                    message_expression: v.message_expression.as_deref().map(|m| compile(message_env, m)),
                    reason: v.reason.clone(),
                })
                .collect(),
            audit_annotations: spec
                .audit_annotations
                .iter()
                .flatten()
                .map(|a| (a.key.clone(), compile(env, &a.value_expression)))
                .collect(),
            bindings,
            uses_request: false,
            uses_namespace: false,
        };
        compiled.uses_request = compiled.uses("request");
        compiled.uses_namespace = compiled.uses("namespaceObject");
        compiled
    }
}

/// The policies, bindings and parameter sources.
pub struct Source {
    policies: ArcSwap<Vec<Arc<Policy>>>,
    params: Arc<ParamSources>,
    synced: Synced,
}

impl Source {
    pub fn start(client: Client, params: Arc<ParamSources>) -> Arc<Self> {
        let source = Arc::new(Self {
            policies: ArcSwap::from_pointee(Vec::new()),
            params,
            synced: Synced::new("admission policies", 2),
        });
        let feeding = source.clone();
        tokio::spawn(async move { follow_both(client, &feeding.synced, |p, b| feeding.rebuild(p, b)).await });
        source
    }

    fn rebuild(&self, policies: &Store<ValidatingAdmissionPolicy>, bindings: &Store<ValidatingAdmissionPolicyBinding>) {
        let env = expressions::policy_env();
        let message_env = expressions::policy_message_env();
        let mut by_policy: HashMap<String, Vec<Binding>> = HashMap::new();
        for binding in by_name(bindings) {
            let spec = binding_spec(&binding);
            let Some(policy_name) = spec.policy_name.clone() else { continue };
            by_policy.entry(policy_name).or_default().push(Binding {
                name: binding.metadata.name.clone().unwrap_or_default(),
                param_ref: spec.param_ref,
                match_resources: spec.match_resources.as_ref().map(Match::of),
                actions: spec.actions,
            });
        }
        let compiled: Vec<Arc<Policy>> = by_name(policies)
            .iter()
            .filter_map(|p| {
                let bindings = by_policy.remove(p.metadata.name.as_deref().unwrap_or(""))?;
                Some(Arc::new(Policy::compile(p, bindings, &env, &message_env)))
            })
            .collect();
        for policy in &compiled {
            if let Some(kind) = &policy.param_kind {
                self.params.source(kind);
            }
        }
        tracing::debug!(policies = compiled.len(), "admission policies changed");
        self.policies.store(Arc::new(compiled));
    }

    pub fn policies(&self) -> Arc<Vec<Arc<Policy>>> {
        self.policies.load_full()
    }

    /// The policies as configured now, for a quick look: no reference count
    /// is taken (every write looks, on every core).
    pub fn peek(&self) -> arc_swap::Guard<Arc<Vec<Arc<Policy>>>> {
        self.policies.load()
    }

    pub fn synced(&self) -> bool {
        self.synced.all()
    }

    pub fn readiness(&self) -> Result<(), String> {
        self.synced.readiness()
    }
}

/// What a binding says, the same whichever Kubernetes version's types hold
/// it: k8s-openapi's make the spec and some of its fields optional before
/// Kubernetes 1.37 and required from it on, and the application chooses.
struct BindingSpec {
    policy_name: Option<String>,
    param_ref: Option<ParamRef>,
    match_resources: Option<MatchResources>,
    actions: Vec<String>,
}

k8s_openapi::k8s_if_le_1_36! {
    fn binding_spec(binding: &ValidatingAdmissionPolicyBinding) -> BindingSpec {
        let spec = binding.spec.clone().unwrap_or_default();
        BindingSpec {
            policy_name: spec.policy_name,
            param_ref: spec.param_ref,
            match_resources: spec.match_resources,
            actions: spec.validation_actions.unwrap_or_default(),
        }
    }
}
k8s_openapi::k8s_if_ge_1_37! {
    fn binding_spec(binding: &ValidatingAdmissionPolicyBinding) -> BindingSpec {
        let spec = binding.spec.clone();
        BindingSpec {
            policy_name: Some(spec.policy_name),
            param_ref: spec.param_ref,
            match_resources: spec.match_resources,
            actions: spec.validation_actions,
        }
    }
}
