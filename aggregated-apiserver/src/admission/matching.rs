//! What decides whether an admission webhook or policy applies to a write,
//! as k8s.io/apiserver matches them: rules (`rules.Matcher`), the namespace's
//! labels (`namespace.Matcher`) and the object's (`object.Matcher`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as ApiLabelSelector;
use serde_json::Value;

use crate::admission::namespace_lifecycle::{namespace_not_found, NamespaceLifecycle};
use crate::admission::{Attributes, Operation};
use crate::apimachinery::errors::{ApiError, ApiResult};
use crate::apimachinery::labels::LabelSelector;
use crate::apimachinery::resource::Names;

/// One rule of a webhook (`RuleWithOperations`) or policy
/// (`NamedRuleWithOperations`), by its fields.
pub struct Rule<'a> {
    pub api_groups: &'a Option<Vec<String>>,
    pub api_versions: &'a Option<Vec<String>>,
    pub operations: &'a Option<Vec<String>>,
    pub resources: &'a Option<Vec<String>>,
    pub scope: &'a Option<String>,
}

impl<'a> Rule<'a> {
    pub fn of(rule: &'a k8s_openapi::api::admissionregistration::v1::RuleWithOperations) -> Self {
        Rule {
            api_groups: &rule.api_groups,
            api_versions: &rule.api_versions,
            operations: &rule.operations,
            resources: &rule.resources,
            scope: &rule.scope,
        }
    }

    pub fn named(rule: &'a k8s_openapi::api::admissionregistration::v1::NamedRuleWithOperations) -> Self {
        Rule {
            api_groups: &rule.api_groups,
            api_versions: &rule.api_versions,
            operations: &rule.operations,
            resources: &rule.resources,
            scope: &rule.scope,
        }
    }
}

fn exact_or_wildcard(items: &Option<Vec<String>>, requested: &str) -> bool {
    items.iter().flatten().any(|item| item == "*" || item == requested)
}

/// What a rule is matched against: the resource a write addresses. Known
/// before the object is, so the registry can ask whether a plugin may act.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub names: &'a Names,
    /// `""`, or the subresource written.
    pub subresource: &'a str,
    pub operation: Operation,
    /// Whether the write is in a namespace (kube's scope test).
    pub namespaced: bool,
}

impl<'a> Request<'a> {
    pub fn of(attributes: &Attributes<'a>) -> Self {
        Request {
            names: attributes.names,
            subresource: attributes.subresource,
            operation: attributes.operation,
            namespaced: !attributes.namespace.is_empty(),
        }
    }
}

impl Rule<'_> {
    /// Whether the rule names this write: scope, operation, group, version,
    /// resource and subresource (`res/sub`, `res/*`, `*/sub`, `*/*`, `*`).
    pub fn matches(&self, request: Request<'_>) -> bool {
        let Request { names, subresource, operation, namespaced } = request;
        let (group, version, resource) = (names.group, names.version, names.plural);
        let scope = match self.scope.as_deref() {
            None | Some("*") => true,
            Some("Namespaced") => namespaced,
            Some("Cluster") => !namespaced,
            Some(_) => false,
        };
        let operation_matches = self.operations.iter().flatten().any(|op| op == "*" || op == operation.as_str());
        let resource_matches = self.resources.iter().flatten().any(|named| {
            let (res, sub) = named.split_once('/').unwrap_or((named.as_str(), ""));
            (res == "*" || res == resource) && (sub == "*" || sub == subresource)
        });
        scope
            && operation_matches
            && exact_or_wildcard(self.api_groups, group)
            && exact_or_wildcard(self.api_versions, version)
            && resource_matches
    }
}

/// A configured selector: none selects everything; one that does not parse
/// is kept as its error, which fails the requests it is asked about.
pub fn selector(selector: Option<&ApiLabelSelector>) -> Result<LabelSelector, String> {
    selector.map(LabelSelector::from_api).unwrap_or_else(|| Ok(LabelSelector::default()))
}

/// Whether the namespace of the write matches `selector` (cluster-scoped
/// writes always do). A namespace that does not exist is kube's 404.
pub async fn namespace_matches(
    namespaces: &NamespaceLifecycle,
    selector: &Result<LabelSelector, String>,
    attributes: &Attributes<'_>,
) -> ApiResult<bool> {
    if attributes.namespace.is_empty() {
        return Ok(true);
    }
    let selector = selector.as_ref().map_err(ApiError::internal_error)?;
    if selector.is_empty() {
        return Ok(true);
    }
    let Some(namespace) = namespaces.lookup(attributes.namespace).await? else {
        return Err(namespace_not_found(attributes.namespace));
    };
    let labels = namespace.metadata.labels.clone().unwrap_or_default();
    Ok(selector.matches(&labels))
}

/// Whether the new or the old object matches `selector`.
pub fn object_matches(selector: &Result<LabelSelector, String>, attributes: &Attributes<'_>) -> ApiResult<bool> {
    let selector = selector.as_ref().map_err(ApiError::internal_error)?;
    Ok(selector.is_empty()
        || labels_match(selector, attributes.object.as_ref())
        || labels_match(selector, attributes.old_object))
}

fn labels_match(selector: &LabelSelector, object: Option<&Value>) -> bool {
    let Some(object) = object else { return false };
    let labels: BTreeMap<String, String> = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    selector.matches(&labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Option<Vec<String>> {
        Some(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn rules_match_as_kube_matches_them() {
        let check = |groups: &[&str],
                     resources: &[&str],
                     operations: &[&str],
                     scope: Option<&str>,
                     sub: &str,
                     op,
                     namespaced| {
            let (g, v, o, r, s) =
                (strings(groups), strings(&["*"]), strings(operations), strings(resources), scope.map(str::to_string));
            let rule = Rule { api_groups: &g, api_versions: &v, operations: &o, resources: &r, scope: &s };
            rule.matches(Request {
                names: &crate::apimachinery::resource::TEST_NAMES,
                subresource: sub,
                operation: op,
                namespaced,
            })
        };
        assert!(check(&["example.com"], &["widgets"], &["CREATE"], None, "", Operation::Create, true));
        assert!(
            !check(&["example.com"], &["widgets"], &["CREATE"], None, "status", Operation::Create, true),
            "a subresource is named on its own"
        );
        assert!(!check(&["example.com"], &["widgets"], &["CREATE"], None, "", Operation::Update, true));
        assert!(check(&["*"], &["widgets/status"], &["*"], None, "status", Operation::Update, true));
        assert!(!check(&["*"], &["widgets/status"], &["*"], None, "", Operation::Update, true));
        assert!(check(&["*"], &["*/*"], &["*"], None, "status", Operation::Delete, true));
        assert!(check(&["*"], &["*/*"], &["*"], None, "", Operation::Delete, true), "*/* names the resource too");
        assert!(!check(&["other.com"], &["*"], &["*"], None, "", Operation::Create, true));
        assert!(!check(&["*"], &["*"], &["*"], Some("Cluster"), "", Operation::Create, true));
        assert!(check(&["*"], &["*"], &["*"], Some("Cluster"), "", Operation::Create, false));
        assert!(check(&["*"], &["*"], &["*"], Some("Namespaced"), "", Operation::Create, true));
    }
}
