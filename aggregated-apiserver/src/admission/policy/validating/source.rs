//! The cluster's ValidatingAdmissionPolicies and their bindings, from one
//! shared watch each, compiled on every change into an immutable list that
//! requests read without a lock; and the parameter objects policies name
//! (`paramKind`), from one shared watch per kind, started when a policy first
//! names it. No write calls the API for any of them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ParamKind, ParamRef, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::Scope;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use crate::admission::expressions;
use crate::admission::match_conditions::MatchConditions;
use crate::admission::matching::{selector, Request, Rule};
use crate::admission::watch::Synced;
use crate::admission::Attributes;
use crate::apimachinery::cel::{Env, Expression};
use crate::apimachinery::labels::LabelSelector;

/// `matchConstraints` or a binding's `matchResources`, ready to match.
#[derive(Debug)]
pub struct Match {
    pub namespace_selector: Result<LabelSelector, String>,
    pub object_selector: Result<LabelSelector, String>,
    resource_rules: Vec<NamedRuleWithOperations>,
    exclude_resource_rules: Vec<NamedRuleWithOperations>,
}

impl Match {
    fn of(resources: &MatchResources) -> Self {
        Self {
            namespace_selector: selector(resources.namespace_selector.as_ref()),
            object_selector: selector(resources.object_selector.as_ref()),
            resource_rules: resources.resource_rules.clone().unwrap_or_default(),
            exclude_resource_rules: resources.exclude_resource_rules.clone().unwrap_or_default(),
        }
    }

    /// Whether the rules name the write (kube's `matchesResourceRules`, with
    /// `resourceNames`); no resource rules name every write. A kind served
    /// here has one version, so both match policies match the same writes.
    pub fn rules_match(&self, attributes: &Attributes<'_>) -> bool {
        let names = |rules: &[NamedRuleWithOperations]| {
            rules.iter().any(|rule| {
                Rule::named(rule).matches(Request::of(attributes))
                    && rule
                        .resource_names
                        .as_ref()
                        .is_none_or(|n| n.is_empty() || n.iter().any(|n| n == attributes.name))
            })
        };
        !names(&self.exclude_resource_rules) && (self.resource_rules.is_empty() || names(&self.resource_rules))
    }

    /// Whether the rules may name a write of this resource, whatever its
    /// name: what is known before the object is.
    pub fn rules_match_any_name(&self, request: Request<'_>) -> bool {
        self.resource_rules.is_empty() || self.resource_rules.iter().any(|rule| Rule::named(rule).matches(request))
    }
}

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
    pub variables: Vec<(String, Result<Expression, String>)>,
    pub validations: Vec<Validation>,
    pub audit_annotations: Vec<(String, Result<Expression, String>)>,
    pub bindings: Vec<Binding>,
    /// Whether any expression reads `request` / `namespaceObject`: what is
    /// built for an evaluation only when it is read.
    pub uses_request: bool,
    pub uses_namespace: bool,
}

fn compile(env: &Env, source: &str) -> Result<Expression, String> {
    env.compile(source).map_err(|e| format!("compilation failed: {e}"))
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

    fn compile(policy: &ValidatingAdmissionPolicy, bindings: Vec<Binding>, env: &Env) -> Self {
        let spec = policy.spec.clone().unwrap_or_default();
        let mut compiled = Self {
            name: policy.metadata.name.clone().unwrap_or_default(),
            match_constraints: Match::of(&spec.match_constraints.unwrap_or_default()),
            fail_open: spec.failure_policy.as_deref() == Some("Ignore"),
            param_kind: spec.param_kind,
            conditions: MatchConditions::compile(env, spec.match_conditions.as_deref().unwrap_or_default()),
            variables: spec.variables.iter().flatten().map(|v| (v.name.clone(), compile(env, &v.expression))).collect(),
            validations: spec
                .validations
                .iter()
                .flatten()
                .map(|v| Validation {
                    source: v.expression.clone(),
                    expression: compile(env, &v.expression),
                    message: v.message.clone(),
                    message_expression: v.message_expression.as_deref().map(|m| compile(env, m)),
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

/// Where the parameter objects of one kind are read from.
pub struct ParamSource {
    pub api_version: String,
    pub kind: String,
    /// Set once discovery found the kind: its store, whether it is
    /// namespaced, and the resource (what the store's keys name).
    pub found: Mutex<Option<(Store<DynamicObject>, bool, ApiResource)>>,
    pub synced: AtomicBool,
    pub error: Mutex<Option<String>>,
}

/// The policies, bindings and parameter sources.
pub struct Source {
    policies: ArcSwap<Vec<Arc<Policy>>>,
    params: Mutex<HashMap<(String, String), Arc<ParamSource>>>,
    synced: Synced,
    client: Client,
}

type Stores = (Store<ValidatingAdmissionPolicy>, Store<ValidatingAdmissionPolicyBinding>);

impl Source {
    pub fn start(client: Client) -> Arc<Self> {
        let source = Arc::new(Self {
            policies: ArcSwap::from_pointee(Vec::new()),
            params: Mutex::new(HashMap::new()),
            synced: Synced::new("admission policies", 2),
            client: client.clone(),
        });
        let (policies, policies_writer) = reflector::store::<ValidatingAdmissionPolicy>();
        let (bindings, bindings_writer) = reflector::store::<ValidatingAdmissionPolicyBinding>();
        let stores: Arc<Stores> = Arc::new((policies, bindings));
        {
            let (source, stores) = (source.clone(), stores.clone());
            let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
            tokio::spawn(async move {
                let events =
                    watcher::watcher(api, watcher::Config::default()).default_backoff().reflect(policies_writer);
                source.synced.follow(0, events, || source.rebuild(&stores)).await;
            });
        }
        {
            let (source, stores) = (source.clone(), stores.clone());
            let api: Api<ValidatingAdmissionPolicyBinding> = Api::all(client);
            tokio::spawn(async move {
                let events =
                    watcher::watcher(api, watcher::Config::default()).default_backoff().reflect(bindings_writer);
                source.synced.follow(1, events, || source.rebuild(&stores)).await;
            });
        }
        source
    }

    fn rebuild(self: &Arc<Self>, stores: &Stores) {
        let env = expressions::policy_env();
        let mut by_policy: HashMap<String, Vec<Binding>> = HashMap::new();
        let mut bindings = stores.1.state();
        bindings.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for binding in bindings {
            let spec = binding.spec.clone().unwrap_or_default();
            let Some(policy_name) = spec.policy_name.clone() else { continue };
            by_policy.entry(policy_name).or_default().push(Binding {
                name: binding.metadata.name.clone().unwrap_or_default(),
                param_ref: spec.param_ref,
                match_resources: spec.match_resources.as_ref().map(Match::of),
                actions: spec.validation_actions.unwrap_or_default(),
            });
        }
        let mut policies = stores.0.state();
        policies.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let compiled: Vec<Arc<Policy>> = policies
            .iter()
            .filter_map(|p| {
                let bindings = by_policy.remove(p.metadata.name.as_deref().unwrap_or(""))?;
                Some(Arc::new(Policy::compile(p, bindings, &env)))
            })
            .collect();
        for policy in &compiled {
            if let Some(kind) = &policy.param_kind {
                self.param_source(kind);
            }
        }
        tracing::debug!(policies = compiled.len(), "admission policies changed");
        self.policies.store(Arc::new(compiled));
    }

    /// The parameter source of `kind`, started on first use.
    pub fn param_source(self: &Arc<Self>, kind: &ParamKind) -> Arc<ParamSource> {
        let api_version = kind.api_version.clone().unwrap_or_default();
        let kind_name = kind.kind.clone().unwrap_or_default();
        let key = (api_version.clone(), kind_name.clone());
        let Ok(mut params) = self.params.lock() else {
            return Arc::new(ParamSource {
                api_version,
                kind: kind_name,
                found: Mutex::new(None),
                synced: AtomicBool::new(false),
                error: Mutex::new(Some("parameter sources unavailable".into())),
            });
        };
        if let Some(found) = params.get(&key) {
            return found.clone();
        }
        let source = Arc::new(ParamSource {
            api_version: api_version.clone(),
            kind: kind_name.clone(),
            found: Mutex::new(None),
            synced: AtomicBool::new(false),
            error: Mutex::new(None),
        });
        params.insert(key, source.clone());
        let (client, feeding) = (self.client.clone(), source.clone());
        tokio::spawn(async move { feed_params(client, feeding).await });
        source
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

/// Finds the kind by discovery, then keeps its objects from one watch.
async fn feed_params(client: Client, source: Arc<ParamSource>) {
    let (group, version) = source.api_version.split_once('/').unwrap_or(("", source.api_version.as_str()));
    let gvk = GroupVersionKind::gvk(group, version, &source.kind);
    let (resource, namespaced) = loop {
        match kube::discovery::pinned_kind(&client, &gvk).await {
            Ok((resource, capabilities)) => break (resource, capabilities.scope == Scope::Namespaced),
            Err(e) => {
                if let Ok(mut error) = source.error.lock() {
                    *error =
                        Some(format!("paramKind kind `{}, Kind={}` not known: {e}", source.api_version, source.kind));
                }
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        }
    };
    let writer = reflector::store::Writer::<DynamicObject>::new(resource.clone());
    if let Ok(mut found) = source.found.lock() {
        *found = Some((writer.as_reader(), namespaced, resource.clone()));
    }
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let mut events = watcher::watcher(api, watcher::Config::default()).default_backoff().reflect(writer).boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::InitDone) => {
                source.synced.store(true, Ordering::Release);
                if let Ok(mut error) = source.error.lock() {
                    *error = None;
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(kind = %source.kind, error = %e, "admission policy parameter watch failed; reconnecting");
                if !source.synced.load(Ordering::Acquire) {
                    if let Ok(mut error) = source.error.lock() {
                        *error = Some(format!(
                            "paramKind kind `{}, Kind={}` not yet synced to use for admission: {e}",
                            source.api_version, source.kind
                        ));
                    }
                }
            }
        }
    }
}
