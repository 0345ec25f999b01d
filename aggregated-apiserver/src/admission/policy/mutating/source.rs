//! The cluster's MutatingAdmissionPolicies and their bindings
//! (admissionregistration.k8s.io/v1beta1, beta in kube 1.34 and off unless
//! the cluster turns it on), from one shared watch each once discovery shows
//! the cluster serves them, compiled on every change into an immutable list
//! that requests read without a lock. A cluster that does not serve them has
//! none: the plugin then does not act, and discovery is asked again every
//! [`RECHECK`], so that policies take effect once the cluster serves them
//! (kube's plugin follows them with an informer, which notices too). No
//! write calls the API for them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use k8s_openapi::api::admissionregistration::v1::{MatchCondition, MatchResources, ParamKind, ParamRef};
use k8s_openapi::api::admissionregistration::v1beta1::{MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding};
use kube::runtime::reflector::Store;
use kube::Client;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::admission::expressions::{self, compile};
use crate::admission::match_conditions::MatchConditions;
use crate::admission::policy::match_resources::Match;
use crate::admission::policy::params::ParamSources;
use crate::apimachinery::cel::{Env, Expression};
use crate::config_watch::{by_name, follow_both, Synced};

/// The group version the policies are read from.
const GROUP_VERSION: &str = "admissionregistration.k8s.io/v1beta1";
const RESOURCE: &str = "mutatingadmissionpolicies";

/// How a mutation's expression's value changes the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    JsonPatch,
    ApplyConfiguration,
}

/// One mutation of a policy.
#[derive(Debug)]
pub struct Mutation {
    pub patch_type: PatchType,
    pub expression: Result<Expression, String>,
}

/// A binding of a policy.
#[derive(Debug)]
pub struct Binding {
    pub name: String,
    pub param_ref: Option<ParamRef>,
    pub match_resources: Option<Match>,
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
    pub mutations: Vec<Mutation>,
    /// `reinvocationPolicy: IfNeeded`.
    pub reinvoke_if_needed: bool,
    pub bindings: Vec<Binding>,
    /// Whether any expression reads `request` / `namespaceObject`: what is
    /// built for an evaluation only when it is read.
    pub uses_request: bool,
    pub uses_namespace: bool,
}

/// The v1beta1 types have the v1 fields: the shared matching reads them as v1.
fn as_v1<A: Serialize, B: DeserializeOwned>(value: &A) -> Option<B> {
    serde_json::to_value(value).ok().and_then(|v| serde_json::from_value(v).ok())
}

impl Policy {
    fn compile(policy: &MutatingAdmissionPolicy, bindings: Vec<Binding>, env: &Env) -> Self {
        let spec = policy.spec.clone().unwrap_or_default();
        let variables =
            expressions::compile_variables(env, spec.variables.iter().flatten().map(|v| (&*v.name, &*v.expression)));
        let env = &expressions::declaring(env, &variables);
        let constraints: MatchResources = spec.match_constraints.as_ref().and_then(as_v1).unwrap_or_default();
        let conditions: Vec<MatchCondition> = spec.match_conditions.as_ref().and_then(as_v1).unwrap_or_default();
        let mutations = spec
            .mutations
            .iter()
            .flatten()
            .filter_map(|m| match m.patch_type.as_str() {
                "JSONPatch" => m.json_patch.as_ref().map(|p| Mutation {
                    patch_type: PatchType::JsonPatch,
                    expression: compile(env, p.expression.as_deref().unwrap_or_default()),
                }),
                "ApplyConfiguration" => m.apply_configuration.as_ref().map(|a| Mutation {
                    patch_type: PatchType::ApplyConfiguration,
                    expression: compile(env, a.expression.as_deref().unwrap_or_default()),
                }),
                _ => None,
            })
            .collect();
        let mut compiled = Self {
            name: policy.metadata.name.clone().unwrap_or_default(),
            match_constraints: Match::of(&constraints),
            fail_open: spec.failure_policy.as_deref() == Some("Ignore"),
            param_kind: spec.param_kind.as_ref().and_then(as_v1),
            conditions: MatchConditions::compile(env, &conditions),
            variables,
            mutations,
            reinvoke_if_needed: spec.reinvocation_policy.as_deref() == Some("IfNeeded"),
            bindings,
            uses_request: false,
            uses_namespace: false,
        };
        compiled.uses_request = compiled.uses("request");
        compiled.uses_namespace = compiled.uses("namespaceObject");
        compiled
    }

    fn uses(&self, name: &str) -> bool {
        let reads = |e: &Result<Expression, String>| e.as_ref().is_ok_and(|e| e.uses(name));
        self.conditions.uses(name)
            || self.variables.iter().any(|(_, e)| reads(e))
            || self.mutations.iter().any(|m| reads(&m.expression))
    }
}

/// How often discovery is asked again whether the cluster serves the
/// policies: one small request, and policies in effect (or dropped) within
/// as long once it serves them (or no longer does).
const RECHECK: Duration = Duration::from_secs(10);

/// Whether the cluster serves the policies: not known yet, no, yes.
const UNKNOWN: u8 = 0;
const NOT_SERVED: u8 = 1;
const SERVED: u8 = 2;

/// Whether discovery lists the policies' resource: Err where it could not
/// be asked (kept as it was known).
async fn served(client: &Client) -> Result<bool, kube::Error> {
    match client.list_api_group_resources(GROUP_VERSION).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == RESOURCE)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Returns once discovery says the cluster no longer serves the policies,
/// asking every [`RECHECK`] (one small request); a failed ask changes nothing.
async fn until_gone(client: &Client) {
    loop {
        tokio::time::sleep(RECHECK).await;
        match served(client).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => tracing::debug!(error = %e, "discovery of {GROUP_VERSION} failed; asking again later"),
        }
    }
}

/// The policies and bindings.
pub struct Source {
    policies: ArcSwap<Vec<Arc<Policy>>>,
    params: Arc<ParamSources>,
    served: AtomicU8,
    synced: Synced,
}

impl Source {
    pub fn start(client: Client, params: Arc<ParamSources>) -> Arc<Self> {
        let source = Arc::new(Self {
            policies: ArcSwap::from_pointee(Vec::new()),
            params,
            served: AtomicU8::new(UNKNOWN),
            synced: Synced::new("mutating admission policies", 2),
        });
        let starting = source.clone();
        tokio::spawn(async move { starting.discover_and_watch(client).await });
        source
    }

    /// Asks discovery (until it answers) whether the cluster serves the
    /// policies, and again every [`RECHECK`] while it does not; then watches
    /// them, asking discovery again every [`RECHECK`] whether it still does:
    /// once it does not (the API turned off), the policies are dropped, as
    /// kube's plugin has none once their API is gone, and the plugin waits
    /// for them to be served again.
    async fn discover_and_watch(self: Arc<Self>, client: Client) {
        loop {
            self.until_served(&client).await;
            tokio::select! {
                () = follow_both(client.clone(), &self.synced, |p, b| self.rebuild(p, b)) => {}
                () = until_gone(&client) => {}
            }
            // The watches are stopped: nothing rebuilds the policies now.
            self.served.store(NOT_SERVED, Ordering::Release);
            self.policies.store(Arc::new(Vec::new()));
            self.synced.reset();
            tracing::info!(
                "the cluster no longer serves {RESOURCE}.{GROUP_VERSION}: MutatingAdmissionPolicy is off until it does again"
            );
        }
    }

    /// Returns once discovery says the cluster serves the policies.
    async fn until_served(&self, client: &Client) {
        loop {
            match served(client).await {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "discovery of {GROUP_VERSION} failed; retrying");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    continue;
                }
            }
            if self.served.swap(NOT_SERVED, Ordering::AcqRel) == UNKNOWN {
                tracing::info!(
                    "the cluster does not serve {RESOURCE}.{GROUP_VERSION}: MutatingAdmissionPolicy stays off until it does"
                );
            }
            tokio::time::sleep(RECHECK).await;
        }
        // Found at start, the policies must be read before any write is
        // admitted (as any plugin's configuration). Found later, writes have
        // been admitted without them all along: they go on so until the
        // first lists are in ([`Self::rebuild`] says served then).
        if self.served.load(Ordering::Acquire) == UNKNOWN {
            self.served.store(SERVED, Ordering::Release);
        } else {
            tracing::info!("the cluster serves {RESOURCE}.{GROUP_VERSION} now: following MutatingAdmissionPolicies");
        }
    }

    fn rebuild(&self, policies: &Store<MutatingAdmissionPolicy>, bindings: &Store<MutatingAdmissionPolicyBinding>) {
        let env = expressions::policy_env().with_mutation_types();
        let mut by_policy: HashMap<String, Vec<Binding>> = HashMap::new();
        for binding in by_name(bindings) {
            let spec = binding.spec.clone().unwrap_or_default();
            let Some(policy_name) = spec.policy_name.clone() else { continue };
            let match_resources: Option<MatchResources> = spec.match_resources.as_ref().and_then(as_v1);
            by_policy.entry(policy_name).or_default().push(Binding {
                name: binding.metadata.name.clone().unwrap_or_default(),
                param_ref: spec.param_ref.as_ref().and_then(as_v1),
                match_resources: match_resources.as_ref().map(Match::of),
            });
        }
        let compiled: Vec<Arc<Policy>> = by_name(policies)
            .iter()
            .filter_map(|p| {
                let bindings = by_policy.remove(p.metadata.name.as_deref().unwrap_or(""))?;
                Some(Arc::new(Policy::compile(p, bindings, &env)))
            })
            .collect();
        for policy in &compiled {
            if let Some(kind) = &policy.param_kind {
                self.params.source(kind);
            }
        }
        tracing::debug!(policies = compiled.len(), "mutating admission policies changed");
        self.policies.store(Arc::new(compiled));
        if self.synced.all() {
            self.served.store(SERVED, Ordering::Release);
        }
    }

    pub fn policies(&self) -> Arc<Vec<Arc<Policy>>> {
        self.policies.load_full()
    }

    /// The policies as configured now, for a quick look.
    pub fn peek(&self) -> arc_swap::Guard<Arc<Vec<Arc<Policy>>>> {
        self.policies.load()
    }

    /// Whether the cluster serves the policies (false until known).
    pub fn served(&self) -> bool {
        self.served.load(Ordering::Acquire) == SERVED
    }

    /// Whether writes may be admitted: the policies are read, or the
    /// cluster has none to read.
    pub fn synced(&self) -> bool {
        match self.served.load(Ordering::Acquire) {
            NOT_SERVED => true,
            SERVED => self.synced.all(),
            _ => false,
        }
    }

    pub fn readiness(&self) -> Result<(), String> {
        match self.served.load(Ordering::Acquire) {
            NOT_SERVED => Ok(()),
            SERVED => self.synced.readiness(),
            _ => Err(format!("discovery of {GROUP_VERSION} not done yet")),
        }
    }
}
