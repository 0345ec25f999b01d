//! The cluster's webhook configurations, from one shared watch each
//! (MutatingWebhookConfigurations, ValidatingWebhookConfigurations): every
//! change rebuilds an immutable list of [`Hook`]s that requests read without
//! a lock and without calling the API. Configurations are taken in name order
//! and webhooks in their configuration's order, as kube-apiserver takes them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use super::review::SUPPORTED_VERSIONS;
use crate::admission::expressions;
use crate::admission::match_conditions::MatchConditions;
use crate::admission::Operation;
use crate::apimachinery::cel::Env;
use crate::apimachinery::labels::LabelSelector;

/// kube's default and largest `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_TIMEOUT_SECONDS: i32 = 30;

/// One webhook of a configuration, ready to be matched and called.
#[derive(Debug)]
pub struct Hook {
    pub name: String,
    /// `<configuration>/<index>`: which webhook this is across reinvocations.
    pub id: String,
    pub mutating: bool,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks).
    pub reinvoke_if_needed: bool,
    rules: Vec<RuleWithOperations>,
    /// A selector that does not parse fails every request it is asked about
    /// (kube's 500), rather than matching all or nothing.
    pub namespace_selector: Result<LabelSelector, String>,
    pub object_selector: Result<LabelSelector, String>,
    pub match_conditions: MatchConditions,
    /// `failurePolicy: Ignore`: a failed call lets the request through.
    pub fail_open: bool,
    pub side_effects: String,
    pub timeout: Duration,
    /// The AdmissionReview version to send: the first of the webhook's
    /// `admissionReviewVersions` this server speaks (None: none of them).
    pub review_version: Option<&'static str>,
    pub client_config: WebhookClientConfig,
}

impl Hook {
    /// Whether a rule names this request (kube's `rules.Matcher`). The
    /// equivalent resources that `matchPolicy: Equivalent` adds are the same
    /// resource in the kind's other versions; a kind served here has one, so
    /// both policies match the same requests.
    pub fn rules_match(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        subresource: &str,
        operation: Operation,
        namespaced: bool,
    ) -> bool {
        self.rules.iter().any(|rule| rule_matches(rule, group, version, resource, subresource, operation, namespaced))
    }
}

fn exact_or_wildcard(items: &Option<Vec<String>>, requested: &str) -> bool {
    items.iter().flatten().any(|item| item == "*" || item == requested)
}

fn rule_matches(
    rule: &RuleWithOperations,
    group: &str,
    version: &str,
    resource: &str,
    subresource: &str,
    operation: Operation,
    namespaced: bool,
) -> bool {
    let scope = match rule.scope.as_deref() {
        None | Some("*") => true,
        Some("Namespaced") => namespaced,
        Some("Cluster") => !namespaced,
        Some(_) => false,
    };
    let operation_matches = rule.operations.iter().flatten().any(|op| op == "*" || op == operation.as_str());
    let resource_matches = rule.resources.iter().flatten().any(|named| {
        let (res, sub) = named.split_once('/').unwrap_or((named.as_str(), ""));
        (res == "*" || res == resource) && (sub == "*" || sub == subresource)
    });
    scope
        && operation_matches
        && exact_or_wildcard(&rule.api_groups, group)
        && exact_or_wildcard(&rule.api_versions, version)
        && resource_matches
}

fn selector(
    selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> Result<LabelSelector, String> {
    selector.map(LabelSelector::from_api).unwrap_or_else(|| Ok(LabelSelector::default()))
}

fn review_version(versions: &[String]) -> Option<&'static str> {
    versions.iter().find_map(|v| SUPPORTED_VERSIONS.iter().find(|s| **s == v.as_str()).copied())
}

fn timeout(seconds: Option<i32>) -> Duration {
    match seconds {
        Some(s) if s > 0 => Duration::from_secs(s.min(MAX_TIMEOUT_SECONDS) as u64),
        _ => DEFAULT_TIMEOUT,
    }
}

fn mutating_hooks<'a>(
    configuration: &'a MutatingWebhookConfiguration,
    env: &'a Env,
) -> impl Iterator<Item = Hook> + 'a {
    let name = configuration.metadata.name.clone().unwrap_or_default();
    configuration.webhooks.iter().flatten().enumerate().map(move |(i, w)| Hook {
        name: w.name.clone(),
        id: format!("{name}/{i}"),
        mutating: true,
        reinvoke_if_needed: w.reinvocation_policy.as_deref() == Some("IfNeeded"),
        rules: w.rules.clone().unwrap_or_default(),
        namespace_selector: selector(w.namespace_selector.as_ref()),
        object_selector: selector(w.object_selector.as_ref()),
        match_conditions: MatchConditions::compile(env, w.match_conditions.as_deref().unwrap_or_default()),
        fail_open: w.failure_policy.as_deref() == Some("Ignore"),
        side_effects: w.side_effects.clone(),
        timeout: timeout(w.timeout_seconds),
        review_version: review_version(&w.admission_review_versions),
        client_config: w.client_config.clone(),
    })
}

fn validating_hooks<'a>(
    configuration: &'a ValidatingWebhookConfiguration,
    env: &'a Env,
) -> impl Iterator<Item = Hook> + 'a {
    let name = configuration.metadata.name.clone().unwrap_or_default();
    configuration.webhooks.iter().flatten().enumerate().map(move |(i, w)| Hook {
        name: w.name.clone(),
        id: format!("{name}/{i}"),
        mutating: false,
        reinvoke_if_needed: false,
        rules: w.rules.clone().unwrap_or_default(),
        namespace_selector: selector(w.namespace_selector.as_ref()),
        object_selector: selector(w.object_selector.as_ref()),
        match_conditions: MatchConditions::compile(env, w.match_conditions.as_deref().unwrap_or_default()),
        fail_open: w.failure_policy.as_deref() == Some("Ignore"),
        side_effects: w.side_effects.clone(),
        timeout: timeout(w.timeout_seconds),
        review_version: review_version(&w.admission_review_versions),
        client_config: w.client_config.clone(),
    })
}

/// The webhooks configured now.
#[derive(Default, Debug)]
pub struct Hooks {
    pub mutating: Vec<Arc<Hook>>,
    pub validating: Vec<Arc<Hook>>,
}

/// The two configuration watches and the hooks they yield.
pub struct Source {
    hooks: ArcSwap<Hooks>,
    mutating_synced: AtomicBool,
    validating_synced: AtomicBool,
    last_error: Mutex<Option<String>>,
}

impl Source {
    /// Starts both watches on `client`.
    pub fn start(client: Client) -> Arc<Self> {
        let source = Arc::new(Self {
            hooks: ArcSwap::from_pointee(Hooks::default()),
            mutating_synced: AtomicBool::new(false),
            validating_synced: AtomicBool::new(false),
            last_error: Mutex::new(None),
        });
        let (mutating, mutating_writer) = reflector::store::<MutatingWebhookConfiguration>();
        let (validating, validating_writer) = reflector::store::<ValidatingWebhookConfiguration>();
        let stores = Arc::new((mutating, validating));
        {
            let (source, stores) = (source.clone(), stores.clone());
            let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
            tokio::spawn(async move {
                let events =
                    watcher::watcher(api, watcher::Config::default()).default_backoff().reflect(mutating_writer);
                source.follow(events, &source.mutating_synced, &stores).await;
            });
        }
        {
            let (source, stores) = (source.clone(), stores.clone());
            let api: Api<ValidatingWebhookConfiguration> = Api::all(client);
            tokio::spawn(async move {
                let events =
                    watcher::watcher(api, watcher::Config::default()).default_backoff().reflect(validating_writer);
                source.follow(events, &source.validating_synced, &stores).await;
            });
        }
        source
    }

    async fn follow<K>(
        &self,
        events: impl futures::Stream<Item = Result<Event<K>, watcher::Error>>,
        synced: &AtomicBool,
        stores: &(Store<MutatingWebhookConfiguration>, Store<ValidatingWebhookConfiguration>),
    ) {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::InitDone) => {
                    synced.store(true, Ordering::Release);
                    self.rebuild(stores);
                }
                // Between InitApply and InitDone the store still holds the
                // previous list: rebuild once the new one is complete.
                Ok(Event::Init | Event::InitApply(_)) => {}
                Ok(Event::Apply(_) | Event::Delete(_)) => self.rebuild(stores),
                Err(e) => {
                    tracing::warn!(error = %e, "webhook configuration watch failed; reconnecting");
                    if let Ok(mut last) = self.last_error.lock() {
                        *last = Some(e.to_string());
                    }
                }
            }
        }
    }

    fn rebuild(&self, stores: &(Store<MutatingWebhookConfiguration>, Store<ValidatingWebhookConfiguration>)) {
        let mut mutating = stores.0.state();
        mutating.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut validating = stores.1.state();
        validating.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let env = expressions::webhook_env();
        let hooks = Hooks {
            mutating: mutating.iter().flat_map(|c| mutating_hooks(c, &env)).map(Arc::new).collect(),
            validating: validating.iter().flat_map(|c| validating_hooks(c, &env)).map(Arc::new).collect(),
        };
        tracing::debug!(
            mutating = hooks.mutating.len(),
            validating = hooks.validating.len(),
            "webhook configurations changed"
        );
        self.hooks.store(Arc::new(hooks));
    }

    /// The webhooks as configured now.
    pub fn hooks(&self) -> Arc<Hooks> {
        self.hooks.load_full()
    }

    /// Whether both configuration lists have been read.
    pub fn synced(&self) -> bool {
        self.mutating_synced.load(Ordering::Acquire) && self.validating_synced.load(Ordering::Acquire)
    }

    /// For /readyz: ready once both lists are in.
    pub fn readiness(&self) -> Result<(), String> {
        if self.synced() {
            return Ok(());
        }
        match self.last_error.lock().ok().and_then(|e| e.clone()) {
            Some(e) => Err(format!("webhook configurations not synced yet (last error: {e})")),
            None => Err("webhook configurations not synced yet".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(groups: &[&str], resources: &[&str], operations: &[&str], scope: Option<&str>) -> RuleWithOperations {
        let strings = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
        RuleWithOperations {
            api_groups: strings(groups),
            api_versions: strings(&["*"]),
            operations: strings(operations),
            resources: strings(resources),
            scope: scope.map(str::to_string),
        }
    }

    #[test]
    fn rules_match_as_kube_matches_them() {
        let m = |r: &RuleWithOperations, sub: &str, op: Operation, namespaced: bool| {
            rule_matches(r, "example.com", "v1", "widgets", sub, op, namespaced)
        };
        let plain = rule(&["example.com"], &["widgets"], &["CREATE"], None);
        assert!(m(&plain, "", Operation::Create, true));
        assert!(!m(&plain, "status", Operation::Create, true), "a subresource is named on its own");
        assert!(!m(&plain, "", Operation::Update, true));
        let status = rule(&["*"], &["widgets/status"], &["*"], None);
        assert!(m(&status, "status", Operation::Update, true));
        assert!(!m(&status, "", Operation::Update, true));
        let all_subresources = rule(&["*"], &["*/*"], &["*"], None);
        assert!(m(&all_subresources, "status", Operation::Delete, true));
        assert!(m(&all_subresources, "", Operation::Delete, true), "*/* names the resource too");
        let other_group = rule(&["other.com"], &["*"], &["*"], None);
        assert!(!m(&other_group, "", Operation::Create, true));
        let cluster = rule(&["*"], &["*"], &["*"], Some("Cluster"));
        assert!(!m(&cluster, "", Operation::Create, true));
        assert!(m(&cluster, "", Operation::Create, false));
        let namespaced = rule(&["*"], &["*"], &["*"], Some("Namespaced"));
        assert!(m(&namespaced, "", Operation::Create, true));
    }

    #[test]
    fn timeouts_and_versions_default_as_kube() {
        assert_eq!(timeout(None), Duration::from_secs(10));
        assert_eq!(timeout(Some(3)), Duration::from_secs(3));
        assert_eq!(timeout(Some(300)), Duration::from_secs(30));
        assert_eq!(review_version(&["v2".into(), "v1beta1".into(), "v1".into()]), Some("v1beta1"));
        assert_eq!(review_version(&["v2".into()]), None);
    }
}
