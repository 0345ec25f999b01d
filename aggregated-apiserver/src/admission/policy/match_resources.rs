//! A policy's `matchConstraints` or a binding's `matchResources`, ready to
//! match a write (k8s.io/apiserver's policy `matching.Matcher`): resource
//! rules with `resourceNames` and exclusions, namespace and object
//! selectors. Shared by the validating and mutating policies.

use k8s_openapi::api::admissionregistration::v1::{MatchResources, NamedRuleWithOperations};

use crate::admission::matching::{self, selector, Request, Rule};
use crate::admission::namespace_lifecycle::NamespaceLifecycle;
use crate::admission::Attributes;
use crate::apimachinery::errors::ApiResult;
use crate::apimachinery::labels::LabelSelector;

#[derive(Debug)]
pub struct Match {
    pub namespace_selector: Result<LabelSelector, String>,
    pub object_selector: Result<LabelSelector, String>,
    resource_rules: Vec<NamedRuleWithOperations>,
    exclude_resource_rules: Vec<NamedRuleWithOperations>,
}

impl Match {
    pub fn of(resources: &MatchResources) -> Self {
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

    /// Whether the rules and both selectors name the write.
    pub async fn matches(&self, namespaces: &NamespaceLifecycle, attributes: &Attributes<'_>) -> ApiResult<bool> {
        Ok(self.rules_match(attributes)
            && matching::namespace_matches(namespaces, &self.namespace_selector, attributes).await?
            && matching::object_matches(&self.object_selector, attributes)?)
    }
}
