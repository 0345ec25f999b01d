//! The cluster's webhook configurations, from one shared watch each
//! (MutatingWebhookConfigurations, ValidatingWebhookConfigurations): every
//! change rebuilds an immutable list of [`Hook`]s that requests read without
//! a lock and without calling the API. Configurations are taken in name order
//! and webhooks in their configuration's order, as kube-apiserver takes them.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::runtime::reflector::Store;
use kube::Client;

use super::review::SUPPORTED_VERSIONS;
use crate::admission::expressions;
use crate::admission::match_conditions::MatchConditions;
use crate::admission::matching::{selector, Request, Rule};
use crate::apimachinery::cel::Env;
use crate::apimachinery::labels::LabelSelector;
use crate::config_watch::{by_name, follow_both, Synced};

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
    pub fn rules_match(&self, request: Request<'_>) -> bool {
        self.rules.iter().any(|rule| Rule::of(rule).matches(request))
    }
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

/// The webhooks of a configuration (both kinds have the same fields but
/// `reinvocationPolicy`), ready to match and call.
macro_rules! hooks_of {
    ($configuration:expr, $env:expr, $mutating:expr, $reinvoke:expr) => {{
        let name = $configuration.metadata.name.clone().unwrap_or_default();
        $configuration.webhooks.iter().flatten().enumerate().map(move |(i, w)| Hook {
            name: w.name.clone(),
            id: format!("{name}/{i}"),
            mutating: $mutating,
            reinvoke_if_needed: $reinvoke(w),
            rules: w.rules.clone().unwrap_or_default(),
            namespace_selector: selector(w.namespace_selector.as_ref()),
            object_selector: selector(w.object_selector.as_ref()),
            match_conditions: MatchConditions::compile($env, w.match_conditions.as_deref().unwrap_or_default()),
            fail_open: w.failure_policy.as_deref() == Some("Ignore"),
            side_effects: w.side_effects.clone(),
            timeout: timeout(w.timeout_seconds),
            review_version: review_version(&w.admission_review_versions),
            client_config: w.client_config.clone(),
        })
    }};
}

fn mutating_hooks<'a>(
    configuration: &'a MutatingWebhookConfiguration,
    env: &'a Env,
) -> impl Iterator<Item = Hook> + 'a {
    hooks_of!(configuration, env, true, |w: &MutatingWebhook| w.reinvocation_policy.as_deref() == Some("IfNeeded"))
}

fn validating_hooks<'a>(
    configuration: &'a ValidatingWebhookConfiguration,
    env: &'a Env,
) -> impl Iterator<Item = Hook> + 'a {
    hooks_of!(configuration, env, false, |_: &ValidatingWebhook| false)
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
    synced: Synced,
}

impl Source {
    /// Starts both watches on `client`.
    pub fn start(client: Client) -> Arc<Self> {
        let source = Arc::new(Self {
            hooks: ArcSwap::from_pointee(Hooks::default()),
            synced: Synced::new("webhook configurations", 2),
        });
        let feeding = source.clone();
        tokio::spawn(async move { follow_both(client, &feeding.synced, |m, v| feeding.rebuild(m, v)).await });
        source
    }

    fn rebuild(
        &self,
        mutating: &Store<MutatingWebhookConfiguration>,
        validating: &Store<ValidatingWebhookConfiguration>,
    ) {
        let (mutating, validating) = (by_name(mutating), by_name(validating));
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

    /// The webhooks as configured now, for a quick look: no reference count
    /// is taken (every write looks, on every core).
    pub fn peek(&self) -> arc_swap::Guard<Arc<Hooks>> {
        self.hooks.load()
    }

    /// Whether both configuration lists have been read.
    pub fn synced(&self) -> bool {
        self.synced.all()
    }

    /// For /readyz: ready once both lists are in.
    pub fn readiness(&self) -> Result<(), String> {
        self.synced.readiness()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_and_versions_default_as_kube() {
        assert_eq!(timeout(None), Duration::from_secs(10));
        assert_eq!(timeout(Some(3)), Duration::from_secs(3));
        assert_eq!(timeout(Some(300)), Duration::from_secs(30));
        assert_eq!(review_version(&["v2".into(), "v1beta1".into(), "v1".into()]), Some("v1beta1"));
        assert_eq!(review_version(&["v2".into()]), None);
    }
}
